"""ops_shape.py -- difftest entries of the shape family (schema/ops/shape.yaml).

flatten, swapaxes, swapdims, fliplr, flipud, trace and atleast_1d/2d/3d
(one tensor) need nothing: the generic generator draws them. The entries
below give sizes, positions and counts that fit the drawn tensor.

Ops returning Tensor[] (tensor_split, hsplit/vsplit/dsplit, broadcast_tensors,
meshgrid, atleast_*d of a list, and the existing split, split.sizes, chunk,
unbind) are drawn with `item`: the statement keeps one element of the list
(render.py). Tensor[] arguments (hstack/vstack/row_stack/dstack/column_stack,
and the existing cat and stack) are ['vars', [names]] (render.py).

`repeat` is a Lua keyword: the renderer spells the method x["repeat"](x, ...)
(render.py, LUA_KEYWORDS).

Accepted differences (PyTorch 1.13 bugs; ember gives the right answer, so
the generator avoids these inputs):
  - narrow_copy of a non-contiguous tensor: torch's CPU kernel reads the
    input as if it were contiguous (x.t().narrow_copy(...) gives the wrong
    elements); ember copies narrow(...) of the real layout.
  - trace of a non-square matrix that requires grad: torch's trace_backward
    puts gradient on every (cols + 1)-th flat element, also past the
    diagonal ({3,1}: positions 1 and 3); ember's gradient is the diagonal's.
  - narrow_copy has no derivative in torch 1.13 ("derivative for
    aten::narrow_copy is not implemented" at backward); ember's is narrow's
    (a composite), so the generator gives it tensors that do not require grad.
  - diag of a matrix with an offset beyond its size: torch raises "numel:
    integer multiplication overflow"; ember returns an empty diagonal, as
    diagonal does.
"""
from ops import *  # noqa: F401,F403 -- the harness's generators (_pos, gen_narrow, ...)
import ops as _ops


def _dims_perm(g, n, k):
    """k distinct Lua dims of an n-dim tensor (0-dim: dim 1), sometimes negative."""
    if n == 0:
        return [g.r.choice([1, -1])] * min(k, 1)
    ds = g.r.sample(range(n), min(k, n))
    return [d - n if g.r.random() < 0.3 else d + 1 for d in ds]


def gen_unflatten(g, op):
    s = g.pick(pred=lambda t: t.dim() > 0)
    if s is None:
        return None
    t = g.t(s)
    d = g.r.randrange(t.dim())
    sizes = _ops._factor(g, t.shape[d], max_dims=3)
    if t.shape[d] > 0 and g.r.random() < 0.3:
        sizes[g.r.randrange(len(sizes))] = -1
    return dict(args=[['var', s], g.dim_arg(d, t.dim()), ['ints', sizes, 't']])


def gen_movedim(g, op):
    s = g.pick()
    if s is None:
        return None
    n = g.t(s).dim()
    k = g.r.randint(1, max(n, 1))
    src, dst = _dims_perm(g, n, k), _dims_perm(g, n, k)
    style = '1' if k == 1 and g.r.random() < 0.6 else 't'
    return dict(args=[['var', s], ['dims', src, style], ['dims', dst, style]])


def gen_broadcast_to(g, op):
    r = _ops.gen_expand(g, op)
    if r:
        r['args'][1][2] = 't'  # torch's broadcast_to takes one tuple
    return r


def gen_flip(g, op):
    s = g.pick()
    if s is None:
        return None
    n = g.t(s).dim()
    dims = _dims_perm(g, n, g.r.randint(0 if n else 1, max(n, 1)))
    return dict(args=[['var', s], ['dims', dims, 'v' if dims and g.r.random() < 0.5 else 't']])


def gen_roll(g, op):
    s = g.pick()
    if s is None:
        return None
    n = g.t(s).dim()
    if n == 0 or g.r.random() < 0.3:
        return dict(args=[['var', s], ['ints', [g.r.randint(-7, 7)], 't']])
    dims = _dims_perm(g, n, g.r.randint(1, n))
    shifts = [g.r.randint(-5, 5) for _ in dims]
    return dict(args=[['var', s], ['ints', shifts, 't'], ['dims', dims, 't']])


def gen_rot90(g, op):
    s = g.pick(pred=lambda t: t.dim() >= 2)
    if s is None:
        return None
    n = g.t(s).dim()
    args = [['var', s], ['int', g.r.randint(-5, 5)]]
    if g.r.random() < 0.6:
        args.append(['dims', _dims_perm(g, n, 2), 't'])
    return dict(args=args)


def gen_repeat(g, op):
    s = g.pick()
    if s is None:
        return None
    n = g.t(s).dim()
    reps = [g.r.choice([0, 1, 1, 2, 3]) for _ in range(n + g.r.choice([0, 0, 1, 2]))]
    if not reps and g.r.random() < 0.5:
        reps = [2]
    return dict(args=[['var', s], ['ints', reps, 'v' if reps and g.r.random() < 0.5 else 't']], style='method')


def gen_tile(g, op):
    s = g.pick()
    if s is None:
        return None
    n = g.t(s).dim()
    reps = [g.r.choice([0, 1, 2, 3]) for _ in range(g.r.randint(1, n + 1))]
    return dict(args=[['var', s], ['ints', reps, 't']])


def gen_repeat_interleave_int(g, op):
    s = g.pick()
    if s is None:
        return None
    args = [['var', s], ['int', g.r.choice([0, 1, 2, 3])]]
    if g.r.random() < 0.6:
        args.append(g.dim(s))
    return dict(args=args)


def _counts_leaf(g, n):
    """A new int64 leaf of n non-negative counts."""
    name, st = g.leaf(shape=[n], dtype='int64', rg=False)
    st['values'] = [g.r.choice([0, 1, 1, 2, 3]) for _ in range(n)]
    return name, st


def gen_repeat_interleave_tensor(g, op):
    s = g.pick()
    if s is None:
        return None
    t = g.t(s)
    args = [['var', s]]
    if g.r.random() < 0.6 and t.dim() > 0:
        d = g.r.randrange(t.dim())
        n = t.shape[d] if g.r.random() < 0.8 else 1
        name, st = _counts_leaf(g, n)
        return dict(args=args + [['var', name], g.dim_arg(d, t.dim())], pre=[st])
    name, st = _counts_leaf(g, t.numel() if g.r.random() < 0.8 else 1)
    return dict(args=args + [['var', name]], pre=[st])


def gen_repeat_interleave_counts(g, op):
    name, st = _counts_leaf(g, g.r.randint(0, 4))
    return dict(args=[['var', name]], pre=[st], style='function')


def gen_triangle(g, op):
    s = g.pick(pred=lambda t: t.dim() >= 2, inplace=False)
    if s is None:
        return None
    args = [['var', s]]
    if g.r.random() < 0.7:
        args.append(['int', g.r.randint(-4, 4)])
    return dict(args=args)


def _offset_dims(g, s, ndim_of):
    """[offset, dim1, dim2] (a prefix, sometimes) for diagonal/diag_embed."""
    n = ndim_of(g.t(s))
    args = []
    if g.r.random() < 0.7:
        args.append(['int', g.r.randint(-3, 3)])
        if g.r.random() < 0.6:
            d1, d2 = g.r.sample(range(n), 2)
            args += [g.dim_arg(d1, n), g.dim_arg(d2, n)]
    return args


def gen_diagonal(g, op):
    s = g.pick(pred=lambda t: t.dim() >= 2)
    if s is None:
        return None
    return dict(args=[['var', s]] + _offset_dims(g, s, lambda t: t.dim()))


def gen_diag_embed(g, op):
    s = g.pick(pred=lambda t: t.dim() >= 1, inplace=False)
    if s is None:
        return None
    return dict(args=[['var', s]] + _offset_dims(g, s, lambda t: t.dim() + 1))


def gen_diag(g, op):
    s = g.pick(pred=lambda t: 1 <= t.dim() <= 2, inplace=False)
    if s is None:
        return None
    t = g.t(s)
    args = [['var', s]]
    if g.r.random() < 0.7:
        lo, hi = (-t.shape[0], t.shape[1]) if t.dim() == 2 else (-3, 3)  # torch overflows beyond
        args.append(['int', g.r.randint(lo, hi)])
    return dict(args=args)


def gen_trace(g, op):
    """trace of a matrix; square when it requires grad (torch's backward is
    wrong for non-square ones, see above)."""
    s = g.pick(pred=lambda t: t.dim() == 2 and (not t.requires_grad or t.shape[0] == t.shape[1]))
    return None if s is None else dict(args=[['var', s]])


def gen_narrow_copy(g, op):
    """narrow_copy of a contiguous tensor (torch's kernel is wrong otherwise)
    that does not require grad (torch has no derivative)."""
    r = _ops.gen_narrow(g, op)
    if r is None or not g.t(r['args'][0][1]).is_contiguous() or g.t(r['args'][0][1]).requires_grad:
        return None
    return r


def gen_unfold(g, op):
    s = g.pick()
    if s is None:
        return None
    t = g.t(s)
    n = t.dim()
    d = g.r.randrange(n) if n else 0
    size = t.shape[d] if n else 1
    return dict(args=[['var', s], g.dim_arg(d, max(n, 1)), ['int', g.r.randint(0, size)],
                      ['int', g.r.randint(1, 3)]], style='method')


# ---- ops returning Tensor[]: one element of the list ----


def _pick_dim(g, min_dims=1, nonempty=False):
    """(name, tensor, 0-based dim) of a tensor with at least min_dims dims, or None."""
    s = g.pick(pred=lambda t: t.dim() >= min_dims and (not nonempty or t.numel() > 0))
    if s is None:
        return None
    t = g.t(s)
    return s, t, g.r.randrange(t.dim())


def gen_split(g, op):
    p = _pick_dim(g)
    if p is None:
        return None
    s, t, d = p
    n = t.shape[d]
    ss = g.r.randint(1, n + 1) if n else g.r.randint(0, 2)
    pieces = -(-n // ss) if n else 1
    return dict(args=[['var', s], ['int', ss], g.dim_arg(d, t.dim())], item=g.r.randint(1, pieces))


def gen_split_sizes(g, op):
    p = _pick_dim(g)
    if p is None:
        return None
    s, t, d = p
    n, sizes = t.shape[d], []
    while n > 0 or not sizes:
        k = g.r.randint(0, n)
        sizes.append(k)
        n -= k
    return dict(args=[['var', s], ['ints', sizes, 't'], g.dim_arg(d, t.dim())], item=g.r.randint(1, len(sizes)))


def gen_chunk(g, op):
    p = _pick_dim(g)
    if p is None:
        return None
    s, t, d = p
    n, chunks = t.shape[d], g.r.randint(1, 4)
    pieces = chunks if n == 0 else -(-n // -(-n // chunks))
    return dict(args=[['var', s], ['int', chunks], g.dim_arg(d, t.dim())], item=g.r.randint(1, pieces))


def gen_unbind(g, op):
    s = g.pick(pred=lambda t: t.dim() >= 1 and 0 not in t.shape)
    if s is None:
        return None
    t = g.t(s)
    d = g.r.randrange(t.dim())
    return dict(args=[['var', s], g.dim_arg(d, t.dim())], item=g.r.randint(1, t.shape[d]))


def gen_tensor_split_sections(g, op):
    p = _pick_dim(g)
    if p is None:
        return None
    s, t, d = p
    k = g.r.randint(1, 4)
    return dict(args=[['var', s], ['int', k], g.dim_arg(d, t.dim())], item=g.r.randint(1, k))


def _positions(g, n):
    """1-based split positions for a dim of size n (negative, past the end,
    out of order sometimes)."""
    out = []
    for _ in range(g.r.randint(1, 3)):
        p = g.r.randint(1, n + 2)
        out.append(p - n - 2 if g.r.random() < 0.2 and p <= n + 1 else p)
    return out


def gen_tensor_split_indices(g, op):
    p = _pick_dim(g)
    if p is None:
        return None
    s, t, d = p
    pos = _positions(g, t.shape[d])
    return dict(args=[['var', s], ['ints', pos, 't'], g.dim_arg(d, t.dim())], item=g.r.randint(1, len(pos) + 1))


def _hvd_dim(t, which):
    return {'h': 0 if t.dim() == 1 else 1, 'v': 0, 'd': 2}[which]


def gen_hvd_int(which, min_dims):
    def gen(g, op):
        s = g.pick(pred=lambda t: t.dim() >= min_dims)
        if s is None:
            return None
        n = g.t(s).shape[_hvd_dim(g.t(s), which)]
        k = g.r.choice([k for k in range(1, 5) if n % k == 0])
        return dict(args=[['var', s], ['int', k]], item=g.r.randint(1, k))
    return gen


def gen_hvd_array(which, min_dims):
    def gen(g, op):
        s = g.pick(pred=lambda t: t.dim() >= min_dims)
        if s is None:
            return None
        pos = _positions(g, g.t(s).shape[_hvd_dim(g.t(s), which)])
        return dict(args=[['var', s], ['ints', pos, 't']], item=g.r.randint(1, len(pos) + 1))
    return gen


def _py_positions(st, pa, pk):
    """torch's split points are 0-based: ember's position p > 0 is p - 1."""
    name = st['op'].split('.')[0]
    a = list(pa)
    a[1] = '(%s,)' % ', '.join(str(p - 1 if p > 0 else p) for p in st['args'][1][1])
    if st['style'] == 'method':
        return '%s.%s(%s)' % (a[0], name, ', '.join(a[1:]))
    return 'torch.%s(%s)' % (name, ', '.join(a))


# ---- ops taking Tensor[] ----


def _list_like(g, s, n, shape_of=None, same_dtype=False):
    """(names, pre): s and n more tensors of s's shape (or shape_of(i)), of
    s's dtype (mostly, unless same_dtype: cat promotes), existing ones or new
    leaves; shuffled."""
    t = g.t(s)
    names, pre = [s], []
    for i in range(n):
        shape = shape_of(i) if shape_of else list(t.shape)
        dt = g.dtype_name(t) if same_dtype or g.r.random() < 0.8 else g.dtype()
        a, p = _ops._mat_partner(g, s, shape, dt)
        names.append(a[1])
        pre += p
    g.r.shuffle(names)
    return names, pre


def gen_cat(g, op):
    s = g.pick(pred=lambda t: t.dim() >= 1)
    if s is None:
        return None
    t = g.t(s)
    d = g.r.randrange(t.dim())

    def shape_of(i):
        sh = list(t.shape)
        sh[d] = g.r.randint(0, 3)
        return sh
    names, pre = _list_like(g, s, g.r.randint(0, 2), shape_of)
    args = [['vars', names]]
    if d != 0 or g.r.random() < 0.5:
        args.append(g.dim_arg(d, t.dim()))
    return dict(args=args, pre=pre, style='function')


def gen_stack(g, op):
    s = g.pick()
    if s is None:
        return None
    names, pre = _list_like(g, s, g.r.randint(0, 2))
    args = [['vars', names]]
    if g.r.random() < 0.7:
        args.append(g.dim_arg(g.r.randrange(g.t(s).dim() + 1), g.t(s).dim() + 1))
    return dict(args=args, pre=pre, style='function')


def gen_same_shape_list(g, op):
    """hstack, vstack, row_stack, dstack, column_stack: tensors of one shape
    (column_stack: at most 2 dims)."""
    s = g.pick(pred=lambda t: op.name != 'column_stack' or t.dim() <= 2)
    if s is None:
        return None
    names, pre = _list_like(g, s, g.r.randint(0, 2))
    return dict(args=[['vars', names]], pre=pre, style='function')


def gen_broadcast_tensors(g, op):
    s = g.pick()
    if s is None:
        return None
    names, pre = [s], []
    for _ in range(g.r.randint(0, 2)):
        a, p = g.partner(s, allow_number=False)
        names.append(a[1])
        pre += p
    return dict(args=[['vars', names]], pre=pre, style='function', item=g.r.randint(1, len(names)))


def gen_meshgrid(g, op):
    s = g.pick(pred=lambda t: t.dim() <= 1)
    if s is None:
        return None
    names, pre = _list_like(g, s, g.r.randint(0, 2), lambda i: g.r.choice([[], [g.r.randint(0, 3)]]),
                            same_dtype=True)  # meshgrid wants one dtype
    return dict(args=[['vars', names]], pre=pre, style='function', item=g.r.randint(1, len(names)))


def gen_atleast_list(g, op):
    names = [g.pick() for _ in range(g.r.randint(1, 3))]
    if None in names:
        return None
    return dict(args=[['vars', names]], style='function', item=g.r.randint(1, len(names)))


def _py_star(name, kw=''):
    """torch's varargs spelling of a Tensor[] argument: torch.NAME(*[a, b])."""
    return lambda st, pa, pk: 'torch.%s(*%s%s)' % (name, pa[0], kw)


MAP = {
    'cat': dict(gen=gen_cat, weight=0.8),
    'stack.list': dict(gen=gen_stack, weight=0.6),
    'hstack': dict(gen=gen_same_shape_list, weight=0.4),
    'vstack': dict(gen=gen_same_shape_list, weight=0.4),
    'row_stack': dict(gen=gen_same_shape_list, weight=0.2),
    'dstack': dict(gen=gen_same_shape_list, weight=0.3),
    'column_stack': dict(gen=gen_same_shape_list, weight=0.3),
    'broadcast_tensors': dict(gen=gen_broadcast_tensors, py=_py_star('broadcast_tensors'), weight=0.5),
    'meshgrid': dict(gen=gen_meshgrid, py=_py_star('meshgrid', ", indexing='ij'"), weight=0.4),
    'atleast_1d.Sequence': dict(gen=gen_atleast_list, weight=0.2),
    'atleast_2d.Sequence': dict(gen=gen_atleast_list, weight=0.2),
    'atleast_3d.Sequence': dict(gen=gen_atleast_list, weight=0.2),
    'split': dict(gen=gen_split, weight=0.5),
    'split.sizes': dict(gen=gen_split_sizes, weight=0.5),
    'chunk': dict(gen=gen_chunk, weight=0.5),
    'unbind': dict(gen=gen_unbind, weight=0.5),
    'tensor_split.sections': dict(gen=gen_tensor_split_sections, weight=0.5),
    'tensor_split.indices': dict(gen=gen_tensor_split_indices, py=_py_positions, weight=0.5),
    'hsplit.int': dict(gen=gen_hvd_int('h', 1), weight=0.3),
    'hsplit.array': dict(gen=gen_hvd_array('h', 1), py=_py_positions, weight=0.3),
    'vsplit.int': dict(gen=gen_hvd_int('v', 2), weight=0.3),
    'vsplit.array': dict(gen=gen_hvd_array('v', 2), py=_py_positions, weight=0.3),
    'dsplit.int': dict(gen=gen_hvd_int('d', 3), weight=0.3),
    'dsplit.array': dict(gen=gen_hvd_array('d', 3), py=_py_positions, weight=0.3),
    'unflatten': dict(gen=gen_unflatten),
    'movedim': dict(gen=gen_movedim),
    'moveaxis': dict(gen=gen_movedim, weight=0.5),
    'broadcast_to': dict(gen=gen_broadcast_to),
    'flip': dict(gen=gen_flip),
    'roll': dict(gen=gen_roll),
    'rot90': dict(gen=gen_rot90),
    'repeat': dict(gen=gen_repeat),
    'tile': dict(gen=gen_tile),
    'repeat_interleave.self_int': dict(gen=gen_repeat_interleave_int),
    'repeat_interleave.self_Tensor': dict(gen=gen_repeat_interleave_tensor),
    # ember's positions are 1-based
    'repeat_interleave.Tensor': dict(gen=gen_repeat_interleave_counts, post=lambda call: '(%s + 1)' % call,
                                     weight=0.5),
    'tril': dict(gen=gen_triangle),
    'triu': dict(gen=gen_triangle),
    'diagonal': dict(gen=gen_diagonal),
    'diag_embed': dict(gen=gen_diag_embed),
    'diag': dict(gen=gen_diag),
    'narrow_copy': dict(gen=gen_narrow_copy, weight=0.5),
    'trace': dict(gen=gen_trace),
    'unfold': dict(gen=gen_unfold),
}

INDEX_RESULTS = {'repeat_interleave.Tensor': [0]}
