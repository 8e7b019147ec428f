"""ops.py -- how the harness turns ops.yaml entries into calls.

Most ops need nothing here: the generic generator (gen_generic) fills each
argument from its schema type with ARG_KINDS, and the renderer spells the
call `ember.NAME(...)` / `x:NAME(...)` in Lua and `torch.NAME(...)` /
`x.NAME(...)` in Python. An op needs an entry in MAP when
  - its torch spelling differs: 'pyname' (another name) or 'py' (a function
    (stmt, python_args, python_kwargs) -> expression string);
  - its arguments need care (sizes, positions, matching shapes): 'gen', a
    function (g, op) -> dict(args=[...], kw={...}, pre=[stmts], style=...,
    novalues=bool) or None when it cannot be generated from the current
    program state (the generator then tries something else);
  - it should be drawn more or less often: 'weight' (default 1);
  - its tensor arguments must not be written in place later in the program
    (a difference accepted in the family's docstring): 'freeze_args': True.
EXTRA lists tensor methods that are hand-written in runtime/lua rather than
generated from ops.yaml (conversions, detach, ...), as func signatures.
An op whose arguments have a kind missing from ARG_KINDS and no 'gen' entry
is reported by `difftest.py --list` as not covered.
"""
import math
import os

import torch

import schema


class Unsupported(Exception):
    pass


FLOAT_DTYPES = ['float32', 'float64']

# ---- generic generation ----


def _kind_tensor(g, op, a, self_name):
    # helper ops called through torch.ops.aten take no Python numbers for tensors
    return g.partner(self_name, inplace=op.inplace, allow_number=not is_aten(op.name))


def _kind_scalar(g, op, a, self_name):
    return g.number(), []


def _kind_float(g, op, a, self_name):
    return ['num', g.r.choice([0.5, 1.0, -2.0, 1e-3, 3.0])], []


def _kind_bool(g, op, a, self_name):
    return ['bool', g.r.random() < 0.5], []


def _kind_dim(g, op, a, self_name):
    return g.dim(self_name), []


def _kind_dims(g, op, a, self_name):
    return g.dims(self_name), []


def _kind_dtype(g, op, a, self_name):
    return ['dtype', g.dtype()], []


# schema type -> generator (g, op, arg, self_name) -> (abstract arg, pre statements)
ARG_KINDS = {
    'Tensor': _kind_tensor, 'Tensor?': _kind_tensor,
    'Scalar': _kind_scalar, 'Scalar?': _kind_scalar,
    'float': _kind_float, 'bool': _kind_bool,
    'dim': _kind_dim, 'dim?': _kind_dim,
    'dim[]': _kind_dims, 'dim[]?': _kind_dims,
    'dtype': _kind_dtype, 'dtype?': _kind_dtype,
}


def generic_problem(op):
    """Why gen_generic cannot handle op (a string), or None when it can."""
    if not op.args or op.args[0].type != 'Tensor':
        return 'first argument is not a Tensor'
    for a in op.args[1:]:
        if a.type not in ARG_KINDS:
            return 'argument kind %s (%s)' % (a.type, a.name)
    for r in op.returns:
        if r != 'Tensor':
            return 'return type %s' % r
    return None


def gen_generic(g, op):
    """Arguments for op from its signature: self drawn from the program's
    tensors, other arguments by kind. A defaulted positional argument is
    left out at random, and then so are all positional ones after it;
    keyword-only ones are given or not independently."""
    self_name = g.pick(inplace=op.inplace)
    if self_name is None:
        return None
    args, kw, pre, omitted = [['var', self_name]], {}, [], False
    for a in op.args[1:]:
        if a.kwonly:
            if a.optional and g.r.random() < 0.6:
                continue
            v, p = ARG_KINDS[a.type](g, op, a, self_name)
            kw[a.name] = v
            pre += p
            continue
        if a.optional and (omitted or g.r.random() < 0.4):
            omitted = True
            continue
        v, p = ARG_KINDS[a.type](g, op, a, self_name)
        args.append(v)
        pre += p
    return dict(args=args, kw=kw, pre=pre)


def is_aten(name):
    """Ops torch has only as torch.ops.aten.NAME (autograd helpers)."""
    return name.endswith('_backward')


# ---- special generators ----


def _pos(g, size):
    """A valid Lua position in a dim of `size` (> 0): 1..size or -size..-1."""
    i = g.r.randint(1, size)
    return i - size - 1 if g.r.random() < 0.25 else i


def gen_narrow(g, op):
    s = g.pick(pred=lambda t: t.dim() > 0, inplace=False)
    if s is None:
        return None
    t = g.t(s)
    d = g.r.randrange(t.dim())
    size = t.shape[d]
    if size == 0:
        start, length = 1, 0
    else:
        start = _pos(g, size)
        s0 = start - 1 if start > 0 else start + size
        length = g.r.randint(0, size - s0)
    return dict(args=[['var', s], g.dim_arg(d, t.dim()), ['index', start], ['int', length]])


def gen_select(g, op):
    s = g.pick(pred=lambda t: t.dim() > 0 and 0 not in t.shape)
    if s is None:
        return None
    t = g.t(s)
    d = g.r.randrange(t.dim())
    return dict(args=[['var', s], g.dim_arg(d, t.dim()), ['index', _pos(g, t.shape[d])]])


def gen_slice(g, op):
    s = g.pick(pred=lambda t: t.dim() > 0 and 0 not in t.shape)
    if s is None:
        return None
    t = g.t(s)
    d = g.r.randrange(t.dim())
    size = t.shape[d]
    args = [['var', s]]
    r = g.r.random()
    if r < 0.1:
        return dict(args=args)
    args.append(g.dim_arg(d, t.dim()))
    if r < 0.2:
        return dict(args=args)
    a = g.r.randint(1, size)
    b = g.r.randint(a, size)
    args.append(['index', a - size - 1 if g.r.random() < 0.2 else a])
    if r < 0.35:
        return dict(args=args)
    args.append(['end', b - size - 1 if g.r.random() < 0.2 else b])
    if r < 0.6:
        return dict(args=args)
    args.append(['int', g.r.randint(1, 3)])
    return dict(args=args)


def _factor(g, n, max_dims=4):
    """A random list of sizes whose product is n (n may be 0)."""
    if n == 0:
        dims = [0] + [g.r.choice([1, 2, 3]) for _ in range(g.r.randint(0, 2))]
        g.r.shuffle(dims)
        return dims
    dims, rest = [], n
    while rest > 1 and len(dims) < max_dims - 1:
        divs = [k for k in range(2, rest + 1) if rest % k == 0]
        k = g.r.choice(divs)
        dims.append(k)
        rest //= k
    if rest > 1:
        dims.append(rest)
    for _ in range(g.r.randint(0, 1)):
        dims.insert(g.r.randint(0, len(dims)), 1)
    g.r.shuffle(dims)
    return dims or [1]


def gen_view(g, op):
    s = g.pick()
    if s is None:
        return None
    t = g.t(s)
    sizes = _factor(g, t.numel())
    if t.numel() > 0 and g.r.random() < 0.3:
        sizes[g.r.randrange(len(sizes))] = -1
    style = 'v' if g.r.random() < 0.6 else 't'
    return dict(args=[['var', s], ['ints', sizes, style]])


def gen_expand(g, op):
    s = g.pick(inplace=False)
    if s is None:
        return None
    t = g.t(s)
    sizes = []
    for n in t.shape:
        if n == 1:
            sizes.append(g.r.choice([1, 2, 3, -1]))
        else:
            sizes.append(-1 if g.r.random() < 0.3 else n)
    for _ in range(g.r.choice([0, 0, 1, 2])):
        sizes.insert(0, g.r.choice([1, 2, 3]))
    if not sizes:
        sizes = [g.r.choice([1, 2])]
    return dict(args=[['var', s], ['ints', sizes, 'v' if g.r.random() < 0.6 else 't']])


def gen_permute(g, op):
    s = g.pick()
    if s is None:
        return None
    n = g.t(s).dim()
    perm = list(range(n))
    g.r.shuffle(perm)
    dims = [p + 1 if g.r.random() < 0.8 else p - n for p in perm]
    if not dims:
        return None
    return dict(args=[['var', s], ['dims', dims, 'v' if g.r.random() < 0.6 else 't']])


def gen_unsqueeze(g, op):
    s = g.pick()
    if s is None:
        return None
    n = g.t(s).dim() + 1
    d = g.r.randrange(n)
    return dict(args=[['var', s], g.dim_arg(d, n)])


def gen_squeeze(g, op):
    s = g.pick()
    if s is None:
        return None
    t = g.t(s)
    if g.r.random() < 0.4 or t.dim() == 0:
        return dict(args=[['var', s]])
    ones = [i for i, n in enumerate(t.shape) if n == 1]
    d = g.r.choice(ones) if ones and g.r.random() < 0.7 else g.r.randrange(t.dim())
    return dict(args=[['var', s], g.dim_arg(d, t.dim())])


def _mat_partner(g, s, shape, dtype):
    """A tensor of `shape`: an existing one of that shape and dtype, or a new leaf."""
    same = [v for v in g.tensors() if list(g.t(v).shape) == list(shape)
            and g.dtype_name(g.t(v)) == dtype]
    if same and g.r.random() < 0.5:
        return ['var', g.r.choice(same)], []
    name, st = g.leaf(shape=shape, dtype=dtype)
    return ['var', name], [st]


def gen_mm(g, op):
    s = g.pick(pred=lambda t: t.dim() == 2)
    if s is None:
        return None
    t = g.t(s)
    other, pre = _mat_partner(g, s, [t.shape[1], g.r.choice([0, 1, 2, 3])], g.dtype_name(t))
    return dict(args=[['var', s], other], pre=pre)


def gen_matmul(g, op):
    s = g.pick(pred=lambda t: 1 <= t.dim() <= 3)
    if s is None:
        return None
    t = g.t(s)
    k = t.shape[-1]
    m = g.r.choice([1, 2, 3])
    shapes = [[k], [k, m]]
    if t.dim() >= 2:
        shapes.append([g.r.choice([1, t.shape[0]])] + [k, m] if t.dim() == 3 else [2, k, m])
    other, pre = _mat_partner(g, s, g.r.choice(shapes), g.dtype_name(t))
    return dict(args=[['var', s], other], pre=pre)


def gen_linear(g, op):
    """linear from its signature, except operands of two dtypes where one is
    empty: torch 1.13's matmul skips its dtype check when the product is
    empty and returns zeros; ember refuses mixed dtypes always (an accepted
    difference, not drawn)."""
    d = gen_generic(g, op)
    if d is None:
        return None
    leaves = {st.get('out'): st for st in d.get('pre', []) if st.get('s') == 'leaf'}
    info = []
    for a in d['args']:
        if a[0] != 'var':
            continue
        if a[1] in leaves:
            st = leaves[a[1]]
            info.append((st['dtype'], math.prod(st['shape'])))
        else:
            t = g.t(a[1])
            info.append((g.dtype_name(t), t.numel()))
    if len({dt for dt, _ in info}) > 1 and any(n == 0 for _, n in info):
        return None
    return d


def gen_where(g, op):
    """where(condition, self, other): a bool condition (an existing bool
    tensor or a new one shaped like self), self, other broadcasting."""
    s = g.pick()
    if s is None:
        return None
    bools = [n for n in g.tensors() if g.dtype_name(g.t(n)) == 'bool']
    pre = []
    if bools and g.r.random() < 0.5:
        c = g.r.choice(bools)
    else:
        c, st = g.leaf(shape=[1 if g.r.random() < 0.3 else n for n in g.t(s).shape], dtype='bool')
        pre.append(st)
    other, p2 = g.partner(s)
    return dict(args=[['var', c], ['var', s], other], pre=pre + p2)


def gen_as_strided(g, op):
    """as_strided(size, stride, storage_offset?) staying inside the storage."""
    s = g.pick()
    if s is None:
        return None
    t = g.t(s)
    n = t.storage().size()
    if n == 0:
        return None
    # a result's storage holds exactly its elements in ember; torch's can be
    # larger (narrow_copy allocates its input's size and fills only the
    # narrowed part; as_strided's backward returns a view of a gradient of
    # its base's geometry): reading past the elements is not a reference
    base = t._base if t._base is not None and s in g.views else t
    if base.storage_offset() + base.numel() != base.storage().size():
        return None
    sizes = [g.r.randint(0, 3) for _ in range(g.r.randint(0, 2))]
    strides = [g.r.randint(0, 2) for _ in sizes]
    span = sum((a - 1) * b for a, b in zip(sizes, strides) if a > 0)
    if span >= n:
        return None
    args = [['var', s], ['ints', sizes, 't'], ['ints', strides, 't']]
    if g.r.random() < 0.6:
        args.append(['int', g.r.randint(0, n - 1 - span)])
    return dict(args=args)


def gen_fill_(g, op):
    s = g.pick(inplace=True)
    if s is None:
        return None
    if g.r.random() < 0.25:
        zd = g.pick(pred=lambda t: t.dim() == 0)
        if zd is not None:
            return dict(args=[['var', s], ['var', zd]])
    return dict(args=[['var', s], g.number()])


def _rand_shape(g):
    return [g.r.choice([0, 1, 2, 3]) if g.r.random() < 0.15 else g.r.choice([1, 2, 3])
            for _ in range(g.r.choice([0, 1, 1, 2, 2, 3]))]


def gen_factory(g, op):
    """empty/zeros/ones/full/rand/randn: sizes as varargs or a table (a table
    when a Scalar follows), dtype and requires_grad sometimes."""
    shape = _rand_shape(g)
    has_fill = len(op.args) > 1 and op.args[1].type == 'Scalar'
    style = 't' if has_fill or not shape or g.r.random() < 0.4 else 'v'
    args = [['ints', shape, style]]
    if has_fill:
        args.append(g.number())
    kw = {}
    if g.r.random() < 0.6:
        kw['dtype'] = ['dtype', g.dtype()]
    if g.r.random() < 0.3 and kw.get('dtype', ['dtype', 'float32'])[1] in FLOAT_DTYPES:
        kw['requires_grad'] = ['bool', True]
    return dict(args=args, kw=kw, style='function', novalues=op.name in ('empty', 'rand', 'randn'))


def gen_arange(g, op):
    def scal(lo, hi):
        if g.r.random() < 0.7:
            return ['int', g.r.randint(lo, hi)]
        return ['num', g.r.randint(lo * 4, hi * 4) / 4.0]
    start = scal(-3, 3)
    args = [start]
    r = g.r.random()
    if r > 0.3:
        args.append(scal(-3, 6))
        if r > 0.6:
            args.append(g.r.choice([['int', 2], ['int', -1], ['num', 0.5], ['int', 1], ['num', 1.5]]))
    kw = {}
    if g.r.random() < 0.4:
        kw['dtype'] = ['dtype', g.r.choice(['float32', 'float64', 'int64', 'int32'])]
    return dict(args=args, kw=kw, style='function')


def _grad_like(g, shape, want_rg=False):
    dt = g.r.choice(FLOAT_DTYPES)
    name, st = g.leaf(shape=shape, dtype=dt, rg=want_rg)
    return ['var', name], [st]


def gen_select_backward(g, op):
    shape = [n for n in _rand_shape(g) if n > 0] or [2]
    d = g.r.randrange(len(shape))
    gshape = shape[:d] + shape[d + 1:]
    grad, pre = _grad_like(g, gshape, g.r.random() < 0.5)
    return dict(args=[grad, ['ints', shape, 't'], g.dim_arg(d, len(shape)),
                      ['index', g.r.randint(1, shape[d])]], pre=pre, style='function')


def gen_narrow_backward(g, op):
    shape = [n for n in _rand_shape(g) if n > 0] or [3]
    d = g.r.randrange(len(shape))
    start = g.r.randint(1, shape[d])
    length = g.r.randint(0, shape[d] - start + 1)
    gshape = list(shape)
    gshape[d] = length
    grad, pre = _grad_like(g, gshape, g.r.random() < 0.5)
    return dict(args=[grad, ['ints', shape, 't'], g.dim_arg(d, len(shape)), ['index', start],
                      ['int', length]], pre=pre, style='function')


def gen_slice_backward(g, op):
    shape = [n for n in _rand_shape(g) if n > 0] or [3]
    d = g.r.randrange(len(shape))
    a = g.r.randint(1, shape[d])
    b = g.r.randint(a, shape[d])
    step = g.r.randint(1, 2)
    gshape = list(shape)
    gshape[d] = len(range(a - 1, b, step))
    grad, pre = _grad_like(g, gshape, g.r.random() < 0.5)
    return dict(args=[grad, ['ints', shape, 't'], g.dim_arg(d, len(shape)), ['index', a],
                      ['end', b], ['int', step]], pre=pre, style='function')


# ---- torch spellings ----


def _py_slice(st, pa, pk):
    # aten::slice(self, dim=0, start=None, end=None, step=1): same order as ember
    return 'torch.ops.aten.slice(%s)' % ', '.join(pa)


def _py_slice_backward(st, pa, pk):
    # aten's start/end are plain ints: a missing end is "to the end"
    a = pa + ['None'] * (6 - len(pa))
    return 'torch.ops.aten.slice_backward(%s, %s, %s, %s, %s, %s)' % (
        a[0], a[1], a[2], '0' if a[3] == 'None' else a[3],
        '9223372036854775807' if a[4] == 'None' else a[4], '1' if a[5] == 'None' else a[5])


def _py_narrow_backward(st, pa, pk):
    g, sizes, dim, start, length = pa
    return 'torch.ops.aten.slice_backward(%s, %s, %s, %s, %s + %s, 1)' % (
        g, sizes, dim, start, start, length)


def gen_norm(g, op):
    """norm's generic arguments, but p = 0 only on a tensor that does not
    require grad: torch's p = 0 backward gives no gradient (None), ember's
    gives zeros (an accepted difference, README)."""
    r = gen_generic(g, op)
    if r and len(r['args']) > 1 and r['args'][1][0] in ('int', 'num') and r['args'][1][1] == 0 \
            and g.t(r['args'][0][1]).requires_grad:
        r['args'][1] = ['int', 2]
    return r


def gen_prod(g, op):
    """prod's generic arguments, but on a tensor requiring grad only when its
    values are finite: with a zero anywhere torch's backward multiplies the
    other elements out (inf * 0 gives nan where ember's gives 0, and the
    reverse), an accepted difference (README)."""
    r = gen_generic(g, op)
    if r:
        x = g.t(r['args'][0][1])
        if x.requires_grad and not bool(x.detach().isfinite().all()):
            return None
    return r


def _py_norm(st, pa, pk):
    # ember's p defaults to 2; torch.norm's default ('fro') refuses a dtype
    a = pa + (['2'] if len(pa) == 1 else [])
    return 'torch.norm(%s)' % ', '.join(a + ['%s=%s' % kv for kv in sorted(pk.items())])


def _py_arg(name):
    # ember's indices are 1-based
    return lambda st, pa, pk: '(torch.%s(%s) + 1)' % (
        name, ', '.join(pa + ['%s=%s' % kv for kv in sorted(pk.items())]))


def _py_sorting(name, tuple_result):
    """sort/argsort: torch takes `stable` only with every argument by keyword,
    and its indices are 0-based where ember's are 1-based (indices + 1)."""
    def py(st, pa, pk):
        k = st.get('recv', 0)
        rest = pa[:k] + pa[k + 1:]
        kws = ['%s=%s' % (n, v) for n, v in zip(['dim', 'descending'], rest)]
        kws += ['%s=%s' % kv for kv in sorted(pk.items())]
        call = 'torch.%s(%s)' % (name, ', '.join([pa[k]] + kws))
        if tuple_result:
            return '(lambda r: (r[0], r[1] + 1))(%s)' % call
        return '(%s + 1)' % call
    return py


def _plus1(call):
    return '(%s + 1)' % call


def _plus1_second(call):
    return '(lambda r: (r[0], r[1] + 1))(%s)' % call


def _gen_out(base_gen, need_dim=False):
    """out= overloads of structured families (add.out, sum.out, ...): the
    base op's arguments plus out, an existing tensor of any shape and dtype
    (ember resizes and casts as torch does) that shares no storage with the
    inputs: torch computes aliased reductions and matmuls from a zeroed or
    half-written out, and checks no overlap there, where ember refuses a
    partial overlap and computes a full one from the inputs' values
    (README, "Differences accepted"), has no internal overlap and does not
    require grad (test_structured.lua checks the autograd refusal). Torch's
    methods take no out=, so the call is a function in both languages.
    need_dim: torch's sum.out has no overload without dim."""
    def gen(g, op):
        res = base_gen(g, op)
        if res is None:
            return None
        args = res['args']
        if need_dim and len(args) < 2 and args[0][0] == 'var':
            args.append(g.dims(args[0][1]))
        used = [a[1] for a in args if a[0] == 'var']
        used += [v[1] for v in res.get('kw', {}).values() if isinstance(v, list) and v and v[0] == 'var']
        ptrs = {g.t(u).storage().data_ptr() for u in used if u in g.ns}  # pre statements make new leaves
        o = None
        for _ in range(4):
            o = g.pick(inplace=True)
            if (o is not None and g.t(o).storage().data_ptr() not in ptrs
                    and torch._debug_has_internal_overlap(g.t(o)) == 0 and not g.t(o).requires_grad):
                break
            o = None
        if o is None:
            return None
        res['kw'] = dict(res.get('kw', {}), out=['var', o])
        res['style'] = 'function'
        return res
    return gen


MAP = {
    # index results are 1-based in ember (post wraps torch's call)
    'argmax': dict(post=_plus1), 'argmin': dict(post=_plus1),
    'max.dim': dict(post=_plus1_second), 'min.dim': dict(post=_plus1_second),
    'sort': dict(py=_py_sorting('sort', True)),
    'argsort': dict(py=_py_sorting('argsort', False)),
    # gather: ops_index.py (1-based index leaves)
    'narrow': dict(gen=gen_narrow),
    'select': dict(gen=gen_select),
    'slice': dict(gen=gen_slice, py=_py_slice),
    'view': dict(gen=gen_view),
    'reshape': dict(gen=gen_view),
    'expand': dict(gen=gen_expand),
    'permute': dict(gen=gen_permute),
    'unsqueeze': dict(gen=gen_unsqueeze),
    'squeeze': dict(gen=gen_squeeze),
    'mm': dict(gen=gen_mm),
    'matmul': dict(gen=gen_matmul),
    'linear': dict(gen=gen_linear),
    'fill_': dict(gen=gen_fill_, weight=1.5),
    'where': dict(gen=gen_where),
    'as_strided': dict(gen=gen_as_strided, weight=0.5),
    'empty': dict(gen=gen_factory, weight=0.2),
    'zeros': dict(gen=gen_factory, weight=0.3),
    'ones': dict(gen=gen_factory, weight=0.3),
    'full': dict(gen=gen_factory, weight=0.3),
    'rand': dict(gen=gen_factory, weight=0.2),
    'randn': dict(gen=gen_factory, weight=0.2),
    'arange': dict(gen=gen_arange, weight=0.4),
    'tanh_backward': dict(weight=0.3),
    'sigmoid_backward': dict(weight=0.3),
    'threshold_backward': dict(weight=0.3),
    'select_backward': dict(gen=gen_select_backward, weight=0.3),
    'slice_backward': dict(gen=gen_slice_backward, py=_py_slice_backward, weight=0.3),
    'narrow_backward': dict(gen=gen_narrow_backward, py=_py_narrow_backward, weight=0.3),
    'add.out': dict(gen=_gen_out(gen_generic), weight=0.5),
    'sub.out': dict(gen=_gen_out(gen_generic), weight=0.4),
    'mul.out': dict(gen=_gen_out(gen_generic), weight=0.4),
    'div.out': dict(gen=_gen_out(gen_generic), weight=0.4),
    'sum.out': dict(gen=_gen_out(gen_generic, need_dim=True), weight=0.5),
    'matmul.out': dict(gen=_gen_out(gen_matmul), weight=0.4),
    'add_': dict(weight=1.5), 'sub_': dict(weight=1.2), 'mul_': dict(weight=1.5),
    'div_': dict(weight=1.2), 'copy_': dict(weight=2), 'zero_': dict(weight=1.2),
    'requires_grad_': dict(weight=0.3), 'detach': dict(weight=0.5),
    'norm': dict(gen=gen_norm, py=_py_norm),
    'prod': dict(gen=gen_prod),
    'argmax': dict(py=_py_arg('argmax'), weight=0.7), 'argmin': dict(py=_py_arg('argmin'), weight=0.7),
}

# Filled by surface(): ops whose function lives in a namespace (ember.nn.functional.NAME,
# torch.nn.functional.NAME), and composite ops.
NAMESPACE = {}
COMPOSITE = set()
# ops whose result shares self's storage (schema `Tensor(a) self`, no `!`:
# views, split/chunk/unbind, ...): filled by surface()
ALIASING = set()
# Ops whose result at position k (0-based) is an index tensor: torch's values
# get + 1 in a new tensor, so an in-place write into it would not reach what
# torch saved -- the generator never writes into these (gen.py).
INDEX_RESULTS = {'argmax': [0], 'argmin': [0], 'argsort': [0], 'max.dim': [1], 'min.dim': [1],
                 'sort': [1], 'topk': [1]}

# Hand-written methods of runtime/lua (not in ops.yaml), same format.
EXTRA = [
    ('float(Tensor self) -> Tensor', 'method'),
    ('double(Tensor self) -> Tensor', 'method'),
    ('half(Tensor self) -> Tensor', 'method'),
    ('bfloat16(Tensor self) -> Tensor', 'method'),
    ('long(Tensor self) -> Tensor', 'method'),
    ('int(Tensor self) -> Tensor', 'method'),
    ('byte(Tensor self) -> Tensor', 'method'),
    ('char(Tensor self) -> Tensor', 'method'),
    ('bool(Tensor self) -> Tensor', 'method'),
    ('detach(Tensor self) -> Tensor', 'method'),
    ('requires_grad_(Tensor(a!) self) -> Tensor(a!)', 'method'),
]

# Binary ops that also have a Lua operator (rendered `a + b`, `2 / x`).
OPERATOR_OPS = {'add', 'sub', 'mul', 'div', 'pow', 'remainder'}
UNARY_OPERATOR_OPS = {'neg'}


def surface(ops_yaml):
    """(supported, unsupported): the ops the generator can draw, as
    schema.Op objects, and [(op, reason)] for those it cannot."""
    ops = schema.load_ops(ops_yaml)
    names = {o.name for o in ops}
    for func, variants in EXTRA:
        name, args, rets = schema.parse_func(func)
        if name not in names:
            o = schema.Op(name, args, rets, [variants], func)
            o.inplace = '!' in args[0].raw_type
            ops.append(o)
            names.add(name)
    only = os.environ.get('EMBER_DIFFTEST_OPS')
    if only:  # difftest.py --ops a,b: draw just these (by name or base name)
        keep = set(only.split(','))
        ops = [o for o in ops if o.name in keep or o.name.split('.')[0] in keep]
    sup, unsup = [], []
    for o in ops:
        if o.namespace:
            NAMESPACE[o.name] = o.namespace
        if o.composite:
            COMPOSITE.add(o.name)
        if o.args and '(a' in o.args[0].raw_type and '!' not in o.args[0].raw_type:
            ALIASING.add(o.name)
        spec = MAP.get(o.name, {})
        if spec.get('gen') or generic_problem(o) is None:
            sup.append(o)
        else:
            unsup.append((o, generic_problem(o)))
    return sup, unsup


# Note [Schema files]: each op family keeps its entries in ops_FAMILY.py
# beside this file: a module that may `from ops import *` (it is imported
# after everything above exists) and defines MAP (merged into MAP above),
# and optionally INDEX_RESULTS and EXTRA, merged the same way.
def _load_families():
    import importlib
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    for f in sorted(os.listdir(here)):
        if not (f.startswith('ops_') and f.endswith('.py')):
            continue
        m = importlib.import_module(f[:-3])
        for k, v in getattr(m, 'MAP', {}).items():
            assert k not in MAP, 'difftest MAP entry %s given twice (%s)' % (k, f)
            MAP[k] = v
        INDEX_RESULTS.update(getattr(m, 'INDEX_RESULTS', {}))
        extra = getattr(m, 'EXTRA', [])
        if extra is not EXTRA:  # `from ops import *` binds ops.EXTRA itself
            EXTRA.extend(extra)


_load_families()
