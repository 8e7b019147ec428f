"""ops_linalg.py -- difftest entries of the linalg family (products, einsum,
norms, matrix_power); see ops.py for the format.

The products need operands of matching shapes, so each has a generator
that picks a tensor of the program and makes (or finds) a partner that
fits. einsum draws random equations over a program tensor and new leaves
(repeated letters, size-1 broadcasting, '...', implicit and explicit
outputs, one to three operands).

Accepted differences with PyTorch 1.13 (none is drawn):
- bmm, mv, matmul, matrix_power and einsum contractions of float16, and
  cross of float16/bfloat16: torch has no CPU kernel ("not implemented for
  'Half'"); ember computes them (in float32), so torch's refusal is dropped
  by the generator as for every op.
- vector_norm / linalg.norm with ord = 0 on a tensor that requires grad:
  torch's backward gives no gradient (None), ember's zeros (as for norm);
  the generator uses ord 0 only without requires_grad.
- matrix_norm / linalg.norm with ord 2, -2, "nuc": they need singular
  values (the lapack family's svd), not in this family; ember refuses them
  (tested in test_linalg.lua), so they are not drawn.
- cross: torch's kernel fuses a * b - c * d into an FMA, so cross(x, x) is
  +-tiny there and exactly 0 in ember; a later inf then gives +-inf in torch
  and NaN in ember. The generator never crosses a tensor with itself.
- kron, tensordot and einsum record their parts (reshape/permute views,
  mul, bmm): an in-place write to an operand after the call makes ember's
  backward refuse the stale saved view, where torch's kron multiplies
  _unsafe_view aliases (no version counter) and reads the new values (as
  README's matmul case). The generator never writes into kron's operands
  afterwards (MAP 'freeze_args'). tensordot and einsum save what torch's
  decompositions save (views too) and mostly agree, but a tensordot of a
  1-d self whose only dim is contracted, written in place afterwards,
  differs the same way (ember refuses the stale view, torch passes): its
  operands are frozen too.
- addmv/baddbmm/addbmm of bool: torch has no bool product and refuses some
  empty ones ("result type Long can't be cast to Bool"); ember returns the
  empty (or all-false) result. Not drawn.
- tensordot of narrow integer dtypes (int8, uint8, int32): torch 1.13
  refuses them when every dim of self is contracted ("expected scalar type
  Long") and gives int64 for some empty ones; ember keeps the dtype. Drawn
  on floating and int64 tensors only.
- einsum of empty integer operands: torch 1.13 takes another path (int64
  results); drawn on empty floating operands only.
- baddbmm with beta = 0 and a broadcast self: torch 1.13 can return
  uninitialised values (NaN seen); ember ignores self. beta = 0 is not drawn
  for baddbmm. With alpha = 0 both multiply the product by 0 (torch's loop
  for small sizes; its BLAS path for large ones would not read it).
- addmv/baddbmm/addbmm with alpha = 0: ember's product gets a zero
  gradient (the result ignores it, as BLAS does); torch multiplies the
  product's gradient by 0, NaN where that gradient is infinite (seed 3569
  of the run that drew index_put: inf reached it from a later tensordot).
  alpha = 0 is drawn only when no product operand requires grad.
- matrix_power follows torch's association ((a @ a) @ a for n = 3, binary
  powering otherwise), so inf * 0 lands in the same places.
- addmv with an empty mat ({n, 0}): torch 1.13 returns beta * self in
  self's shape ({} or {1}), not {n}; ember returns {n} as the schema says.
  The generator draws non-empty mats for addmv.
- addmv/baddbmm/addbmm are composites (beta * self + alpha * product), as
  addmm: autograd.grad with respect to their result inside a
  double-backward graph can find no path (README, composites).
"""
from ops import *  # noqa: F401,F403
from ops import _mat_partner

INF = float('inf')


def _pick_dim(g, nd):
    return g.r.randrange(nd)


def gen_bmm(g, op):
    s = g.pick(pred=lambda t: t.dim() == 3)
    if s is None:
        return None
    t = g.t(s)
    other, pre = _mat_partner(g, s, [t.shape[0], t.shape[2], g.r.choice([0, 1, 2, 3])], g.dtype_name(t))
    return dict(args=[['var', s], other], pre=pre)


def gen_dot(g, op):
    s = g.pick(pred=lambda t: t.dim() == 1)
    if s is None:
        return None
    t = g.t(s)
    other, pre = _mat_partner(g, s, list(t.shape), g.dtype_name(t))
    return dict(args=[['var', s], other], pre=pre)


def gen_mv(g, op):
    s = g.pick(pred=lambda t: t.dim() == 2)
    if s is None:
        return None
    t = g.t(s)
    other, pre = _mat_partner(g, s, [t.shape[1]], g.dtype_name(t))
    return dict(args=[['var', s], other], pre=pre)


def gen_outer(g, op):
    s = g.pick(pred=lambda t: t.dim() == 1)
    if s is None:
        return None
    t = g.t(s)
    dt = g.dtype_name(t) if g.r.random() < 0.7 else g.dtype()
    other, pre = _mat_partner(g, s, [g.r.choice([0, 1, 2, 3])], dt)
    return dict(args=[['var', s], other], pre=pre)


def _needs_grad(g, args, pre):
    """Whether one of the operands args (['var', name]) requires grad."""
    fresh = {st['out']: st.get('rg') for st in pre}
    return any(a[0] == 'var' and (fresh[a[1]] if a[1] in fresh else g.t(a[1]).requires_grad) for a in args)


def _scales(g, t, beta0=True, alpha0=True):
    """beta/alpha keywords, sometimes; integers for integer operands.
    beta0: beta may be 0 (not for baddbmm: torch 1.13's baddbmm with
    beta = 0 and a broadcast self can return uninitialised values).
    alpha0: alpha may be 0 (not when a product operand requires grad: the
    docstring)."""
    kw = {}
    for k in ('beta', 'alpha'):
        if g.r.random() < 0.4:
            if t.is_floating_point():
                zero = beta0 if k == 'beta' else alpha0
                kw[k] = ['num', g.r.choice([0.0, 0.5, -1.5, 2.0, 1.0] if zero else [0.5, -1.5, 2.0, 1.0])]
            else:
                kw[k] = ['int', g.r.choice([0, 1, 2, -1] if beta0 or k == 'alpha' else [1, 2, -1])]
    return kw


def _self_for(g, s, shape, t):
    """The added tensor: one that broadcasts to shape (its trailing dims)."""
    k = g.r.randrange(len(shape) + 1)
    sh = list(shape[k:])
    if sh and g.r.random() < 0.3:
        sh[0] = 1
    return _mat_partner(g, s, sh, g.dtype_name(t))


def gen_addmv(g, op):
    # an empty mat: torch 1.13 returns beta * self in self's shape (not {n});
    # bool: torch has no product, and refuses some empty ones (README)
    m = g.pick(pred=lambda t: t.dim() == 2 and t.numel() > 0 and t.dtype != torch.bool)
    if m is None:
        return None
    t = g.t(m)
    vec, pre = _mat_partner(g, m, [t.shape[1]], g.dtype_name(t))
    sf, pre2 = _self_for(g, m, [t.shape[0]], t)
    kw = _scales(g, t, alpha0=not _needs_grad(g, [['var', m], vec], pre))
    return dict(args=[sf, ['var', m], vec], kw=kw, pre=pre + pre2, style='function')


def _gen_batch_add(reduce_batch):
    def gen(g, op):
        b1 = g.pick(pred=lambda t: t.dim() == 3 and t.dtype != torch.bool)
        if b1 is None:
            return None
        t = g.t(b1)
        mm = g.r.choice([0, 1, 2, 3])
        b2, pre = _mat_partner(g, b1, [t.shape[0], t.shape[2], mm], g.dtype_name(t))
        out = [t.shape[1], mm] if reduce_batch else [t.shape[0], t.shape[1], mm]
        sf, pre2 = _self_for(g, b1, out, t)
        kw = _scales(g, t, beta0=reduce_batch, alpha0=not _needs_grad(g, [['var', b1], b2], pre))
        return dict(args=[sf, ['var', b1], b2], kw=kw, pre=pre + pre2, style='function')
    return gen


def gen_cross(g, op):
    s = g.pick(pred=lambda t: 3 in t.shape and t.dtype != torch.bool)
    if s is None:
        return None
    t = g.t(s)
    shape = list(t.shape)
    threes = [i for i, n in enumerate(shape) if n == 3]
    d = g.r.choice(threes)
    other_shape = [n if i == d or g.r.random() < 0.8 else 1 for i, n in enumerate(shape)]
    # a new leaf, never s itself: torch's kernel fuses a * b - c * d (FMA), so
    # cross(x, x) is +-tiny there where ember's is exactly 0 (README)
    name, st = g.leaf(shape=other_shape, dtype=g.dtype_name(t))
    other, pre = ['var', name], [st]
    args, kw = [['var', s], other], {}
    if op.name == 'cross':
        if g.r.random() < 0.6 or d != threes[0]:
            args.append(g.dim_arg(d, len(shape)))
    elif d != len(shape) - 1 or g.r.random() < 0.3:
        kw['dim'] = g.dim_arg(d, len(shape))
    r = dict(args=args, kw=kw, pre=pre)
    if op.name != 'cross':
        r['style'] = 'function'
    return r


def _td_ok(t):
    """torch 1.13's tensordot refuses narrow integer operands whose dims are
    all contracted ("expected scalar type Long") and returns int64 for some
    empty ones: drawn on floating and int64 tensors only."""
    return t.dim() <= 4 and (t.is_floating_point() or t.dtype == torch.int64)


def gen_tensordot(g, op):
    s = g.pick(pred=_td_ok)
    if s is None:
        return None
    t = g.t(s)
    k = g.r.randrange(t.dim() + 1)
    shape = list(t.shape[t.dim() - k:]) + [g.r.choice([1, 2, 3]) for _ in range(g.r.randrange(3))]
    other, pre = _mat_partner(g, s, shape, g.dtype_name(t))
    return dict(args=[['var', s], other, ['int', k]], pre=pre)


def gen_tensordot_dimlists(g, op):
    s = g.pick(pred=_td_ok)
    if s is None:
        return None
    t = g.t(s)
    nd = t.dim()
    da = [i for i in range(nd) if g.r.random() < 0.5]
    g.r.shuffle(da)
    extra = [g.r.choice([1, 2, 3]) for _ in range(g.r.randrange(3))]
    nb = len(da) + len(extra)
    pos = list(range(nb))
    g.r.shuffle(pos)
    db = pos[:len(da)]
    shape = [0] * nb
    for a, b in zip(da, db):
        shape[b] = t.shape[a]
    rest = iter(extra)
    for i in range(nb):
        if i not in db:
            shape[i] = next(rest)
    other, pre = _mat_partner(g, s, shape, g.dtype_name(t))
    la = [a + 1 if g.r.random() < 0.7 else a - nd for a in da]
    lb = [b + 1 for b in db]
    return dict(args=[['var', s], other, ['dims', la, 't'], ['dims', lb, 't']], pre=pre)


def _py_tensordot_dimlists(st, pa, pk):
    # torch spells the pairs as dims=(list, list); positions 0-based
    def conv(a):
        return [x - 1 if x > 0 else x for x in a[1]]
    a = st['args']
    return 'torch.tensordot(%s, %s, dims=(%r, %r))' % (pa[0], pa[1], conv(a[2]), conv(a[3]))


LETTERS = 'ijkbAB'


def gen_einsum(g, op):
    """A random equation over a program tensor and up to two new operands
    (an empty one only when floating: torch 1.13 takes another path for
    empty integer operands, with other dtypes)."""
    s = g.pick(pred=lambda t: t.dim() <= 4 and (t.numel() > 0 or t.is_floating_point()))
    if s is None:
        return None
    t = g.t(s)
    dt = g.dtype_name(t)
    size = {}
    fresh = [c for c in LETTERS]
    g.r.shuffle(fresh)
    ell = t.dim() >= 1 and g.r.random() < 0.2
    e = g.r.randrange(1, t.dim() + 1) if ell else 0
    terms, names, pre = [], [s], []
    first = '...' if ell else ''
    for n in t.shape[e:]:
        same = [c for c, m in size.items() if m == n and c not in first]
        if same and g.r.random() < 0.15:
            first += g.r.choice(same)
        elif fresh:
            c = fresh.pop()
            size[c] = n
            first += c
        else:
            return None
    terms.append(first)
    for _ in range(g.r.choice([0, 1, 1, 2])):
        term, shape = '...' if ell and g.r.random() < 0.5 else '', []
        for _ in range(g.r.randrange(4)):
            known = [c for c in size if c not in term]
            if known and (g.r.random() < 0.65 or not fresh):
                c = g.r.choice(known)
                n = size[c] if g.r.random() < 0.9 else 1
            elif fresh:
                c = fresh.pop()
                n = g.r.choice([1, 2, 3])
                size[c] = n
            else:
                break
            term += c
            shape.append(n)
        arg, p = _mat_partner(g, s, shape, dt)
        names.append(arg[1])
        pre += p
        terms.append(term)
    eq = ','.join(terms)
    if g.r.random() < 0.7:
        used = sorted(set(c for c in eq if c.isalpha()))
        out = [c for c in used if g.r.random() < 0.6]
        g.r.shuffle(out)
        o = ''.join(out)
        if ell and g.r.random() < 0.7:
            k = g.r.randrange(len(o) + 1)
            o = o[:k] + '...' + o[k:]
        eq += '->' + o
    return dict(args=[['str', eq], ['vars', names]], pre=pre, style='function')


def _py_einsum(st, pa, pk):
    return 'torch.einsum(%s, %s)' % (pa[0], pa[1])


def _floating(g, pred=None):
    return g.pick(pred=lambda t: t.is_floating_point() and (pred is None or pred(t)))


def gen_vector_norm(g, op):
    s = _floating(g)
    if s is None:
        return None
    t = g.t(s)
    ords = [2, 1, 3.5, INF, -INF, -1, 0.5] + ([0] if not t.requires_grad else [])
    args = [['var', s]]
    kw = {}
    r = g.r.random()
    if r < 0.8:
        o = g.r.choice(ords)
        args.append(['num', o] if isinstance(o, float) else ['int', o])
        if r < 0.6:
            args.append(g.dims(s))
            if g.r.random() < 0.5:
                args.append(['bool', g.r.random() < 0.5])
    if g.r.random() < 0.2:
        kw['dtype'] = ['dtype', 'float64']
    return dict(args=args, kw=kw, style='function')


def _two_dims(g, s, nd):
    a = g.r.randrange(nd)
    b = g.r.choice([i for i in range(nd) if i != a])
    return ['dims', [a + 1 if g.r.random() < 0.6 else a - nd, b + 1 if g.r.random() < 0.6 else b - nd], 't']


def gen_matrix_norm(g, op):
    s = _floating(g, lambda t: t.dim() >= 2)
    if s is None:
        return None
    t = g.t(s)
    if op.name.endswith('str_ord'):
        args = [['var', s], ['str', 'fro']]
    else:
        args = [['var', s], ['num', g.r.choice([1.0, -1.0, INF, -INF])]]
    if g.r.random() < 0.5:
        args.append(_two_dims(g, s, t.dim()))
        if g.r.random() < 0.5:
            args.append(['bool', g.r.random() < 0.5])
    return dict(args=args, style='function')


def gen_linalg_norm(g, op):
    s = _floating(g, lambda t: t.dim() >= 1)
    if s is None:
        return None
    t = g.t(s)
    nd = t.dim()
    if op.name.endswith('ord_str'):
        if nd < 2:
            return None
        if nd == 2 and g.r.random() < 0.6:
            return dict(args=[['var', s], ['str', 'fro']], style='function')
        return dict(args=[['var', s], ['str', 'fro'], _two_dims(g, s, nd)], style='function')
    r = g.r.random()
    if r < 0.25:
        return dict(args=[['var', s]], style='function')
    if r < 0.5 and nd in (1, 2):
        o = g.r.choice([1.0, -1.0, INF, -INF] + ([2.0, 3.0] if nd == 1 else []))
        return dict(args=[['var', s], ['num', o]], style='function')
    if r < 0.75 or nd < 2:
        d = g.r.randrange(nd)
        o = g.r.choice([None, 2.0, 1.0, INF, 3.0])
        return dict(args=[['var', s], ['none'] if o is None else ['num', o], ['dims', [d + 1], 't'],
                          ['bool', g.r.random() < 0.5]], style='function')
    o = g.r.choice([None, 1.0, -1.0, INF])
    return dict(args=[['var', s], ['none'] if o is None else ['num', o], _two_dims(g, s, nd)], style='function')


def gen_matrix_power(g, op):
    # no float16/bfloat16: a power compounds their per-product rounding (and
    # torch's accumulation order differs) past the comparison's tolerance
    s = g.pick(pred=lambda t: t.dim() >= 2 and t.shape[-1] == t.shape[-2] and t.dim() <= 4
               and t.dtype not in (torch.float16, torch.bfloat16))
    pre = []
    if s is None:
        n = g.r.choice([0, 1, 2, 3])
        s, st = g.leaf(shape=[g.r.choice([1, 2])] * (g.r.random() < 0.3) + [n, n])
        pre = [st]
    return dict(args=[['var', s], ['int', g.r.choice([0, 1, 2, 3, 4, 5])]], pre=pre)


MAP = {
    'bmm': dict(gen=gen_bmm),
    'dot': dict(gen=gen_dot),
    'vdot': dict(gen=gen_dot, weight=0.5),
    'mv': dict(gen=gen_mv),
    'outer': dict(gen=gen_outer),
    'ger': dict(gen=gen_outer, weight=0.3),
    'addmv': dict(gen=gen_addmv),
    'baddbmm': dict(gen=_gen_batch_add(False)),
    'addbmm': dict(gen=_gen_batch_add(True)),
    'cross': dict(gen=gen_cross),
    'linalg_cross': dict(gen=gen_cross, weight=0.5),
    'tensordot': dict(gen=gen_tensordot, freeze_args=True),
    'tensordot.dimlists': dict(gen=gen_tensordot_dimlists, py=_py_tensordot_dimlists, freeze_args=True),
    'einsum': dict(gen=gen_einsum, py=_py_einsum, weight=2),
    'linalg_vector_norm': dict(gen=gen_vector_norm),
    'linalg_matrix_norm': dict(gen=gen_matrix_norm),
    'linalg_matrix_norm.str_ord': dict(gen=gen_matrix_norm, weight=0.5),
    'linalg_norm': dict(gen=gen_linalg_norm),
    'linalg_norm.ord_str': dict(gen=gen_linalg_norm, weight=0.5),
    'matrix_power': dict(gen=gen_matrix_power),
    'kron': dict(freeze_args=True),
}
