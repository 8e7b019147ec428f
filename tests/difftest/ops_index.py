"""ops_index.py -- difftest entries of the index family (schema/ops/index.yaml).

Index arguments are new int64 leaves holding valid 1-based values (the same
values in both languages); the torch call subtracts 1 (take and
take_along_dim keep negative values, which count from the end in both).
nonzero's result gets + 1 on the torch side (INDEX_RESULTS). Positions that
several index entries write (scatter, index_copy) are drawn distinct where
PyTorch leaves the winner unspecified. index_put(_) (schema/ops/index_put.yaml,
a Tensor?[] list) is drawn without nil entries (torch 1.13's index_put
refuses None) and with values of self's dtype (ember casts values to
self's dtype, as x[i] = v does; torch 1.13's index_put refuses a
mismatch: accepted difference). index_put_ into a tensor whose elements
overlap (an expand): torch 1.13 writes with a deprecation warning, ember
refuses (as its other in-place writes do); not drawn. Not drawn: nonzero_tuple (a Tensor[]
result; test_index.lua covers it).

Accepted differences: scatter_reduce with amax/amin and include_self=false:
where self's (excluded) value equals the result, PyTorch 1.13 still counts
it among the ties, so src gets a share of the gradient (0.5 for one tie);
ember gives src the whole gradient (the true derivative); the generator
draws include_self=true for amax/amin. scatter_reduce with a src larger
than index: PyTorch's backward raises (an invalid gradient shape), ember
gives the larger src zeros where index does not reach; the generator draws
src of index's shape. scatter_reduce with reduce="prod": PyTorch refuses
the double backward where two or more zeros of src meet in one element,
ember computes it (Note [scatter_reduce prod]).
masked_scatter_ into a non-contiguous self (a transpose): PyTorch 1.13's CPU
kernel takes source's elements in self's memory order, its out-of-place
masked_scatter in row-major order; ember takes them in row-major order in
both (what the documentation says); the generator draws masked_scatter_
into contiguous tensors only.
scatter with reduce (not differentiable, as in
PyTorch) refuses an input that requires grad when called, where PyTorch
raises at backward; the generator gives it no such input.
"""
from ops import *  # noqa: F401,F403
import ops as _ops

FLOATS = ('float16', 'bfloat16', 'float32', 'float64')


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _int_leaf(g, shape, values, dtype='int64'):
    """An index leaf, kept out of every later statement (novalues: the
    generator never picks it again), since the torch side saves the shifted
    temporary `i - 1`, not the leaf, so a later in-place write into the leaf
    (or into an alias such as x:long()) would trip only ember's saved-tensor
    check."""
    st = dict(s='leaf', out=g.fresh(), shape=list(shape), dtype=dtype, values=list(values), rg=False)
    g.frozen.add(st['out'])
    g.novalues.add(st['out'])
    return ['var', st['out']], [st]


def _bool_leaf(g, shape):
    st = dict(s='leaf', out=g.fresh(), shape=list(shape), dtype='bool',
              values=[g.r.random() < 0.5 for _ in range(_prod(shape))], rg=False)
    return ['var', st['out']], [st]


def _like_leaf(g, shape, dtype):
    name, st = g.leaf(shape=shape, dtype=dtype)
    return ['var', name], [st]


def _value(g, t):
    """A fill value for t: a number its dtype holds, or an existing 0-dim tensor."""
    zd = [n for n in g.tensors() if g.t(n).dim() == 0 and (g.dtype_name(t) in FLOATS or
                                                          g.dtype_name(g.t(n)) not in FLOATS)]
    if zd and g.r.random() < 0.25:
        return ['var', g.r.choice(zd)]
    if g.dtype_name(t) in FLOATS:
        return g.number()
    if g.dtype_name(t) == 'bool':
        return ['bool', g.r.random() < 0.5]
    return ['int', g.r.choice([-2, -1, 0, 1, 3])]


def _py_idx(name, shift, neg=False, fn=None):
    """torch spelling with the arguments at positions `shift` made 0-based."""
    def py(st, pa, pk):
        pa = list(pa)
        for k in shift:
            if k < len(pa):
                pa[k] = ('torch.where(%s < 0, %s, %s - 1)' % (pa[k], pa[k], pa[k])) if neg else '(%s - 1)' % pa[k]
        kws = ['%s=%s' % kv for kv in sorted(pk.items())]
        if st['style'] == 'method':
            return '%s.%s(%s)' % (pa[0], name, ', '.join(pa[1:] + kws))
        return '%s(%s)' % (fn or 'torch.' + name, ', '.join(pa + kws))
    return py


def _dim_and_size(g, t):
    if t.dim() == 0:
        return 0, 1, ['dim', g.r.choice([1, -1])]
    d = g.r.randrange(t.dim())
    return d, t.shape[d], g.dim_arg(d, t.dim())


def gen_index_select(g, op):
    s = g.pick()
    if s is None:
        return None
    t = g.t(s)
    d, size, darg = _dim_and_size(g, t)
    k = 1 if t.dim() == 0 else (0 if size == 0 else g.r.randint(0, 4))
    idx, pre = _int_leaf(g, [k], [g.r.randint(1, size) for _ in range(k)])
    return dict(args=[['var', s], darg, idx], pre=pre)


def gen_index_write(kind):
    def gen(g, op):
        s = g.pick(pred=lambda t: t.dim() > 0, inplace=op.inplace)
        if s is None:
            return None
        t = g.t(s)
        dt = g.dtype_name(t)
        if kind == 'add' and dt == 'bool':
            return None
        d, size, darg = _dim_and_size(g, t)
        if kind == 'copy':
            k = g.r.randint(0, size)
            vals = g.r.sample(range(1, size + 1), k)
        else:
            k = 0 if size == 0 else g.r.randint(0, 4)
            vals = [g.r.randint(1, size) for _ in range(k)]
        idx, pre = _int_leaf(g, [k], vals)
        args, kw = [['var', s], darg, idx], {}
        if kind == 'fill':
            args.append(_value(g, t))
        else:
            shape = list(t.shape)
            shape[d] = k
            src, p2 = _like_leaf(g, shape, dt)
            pre += p2
            args.append(src)
            if kind == 'add' and g.r.random() < 0.5:
                kw['alpha'] = (['num', g.r.choice([2.0, -1.5, 0.5])] if dt in FLOATS
                               else ['int', g.r.choice([2, -1, 3])])
        return dict(args=args, kw=kw, pre=pre)
    return gen


def _mask_for(g, t, inplace):
    shape = [1 if g.r.random() < 0.3 else n for n in t.shape]
    if not inplace and g.r.random() < 0.15:
        shape.insert(0, 2)
    if shape and g.r.random() < 0.2:
        shape = shape[1:]
    return _bool_leaf(g, shape)


def gen_masked_fill(g, op):
    s = g.pick(inplace=op.inplace)
    if s is None:
        return None
    t = g.t(s)
    m, pre = _mask_for(g, t, op.inplace)
    return dict(args=[['var', s], m, _value(g, t)], pre=pre)


def gen_masked_select(g, op):
    s = g.pick()
    if s is None:
        return None
    m, pre = _mask_for(g, g.t(s), False)
    return dict(args=[['var', s], m], pre=pre)


def gen_masked_scatter(g, op):
    # in place, only into a contiguous self (see the docstring)
    s = g.pick(pred=(lambda t: t.is_contiguous()) if op.inplace else None, inplace=op.inplace)
    if s is None:
        return None
    t = g.t(s)
    m, pre = _mask_for(g, t, op.inplace)
    mshape = pre[0]['shape']
    import torch
    n = _prod(torch.broadcast_shapes(tuple(t.shape), tuple(mshape)))
    src, p2 = _like_leaf(g, [n] if g.r.random() < 0.5 else list(torch.broadcast_shapes(tuple(t.shape), tuple(mshape))),
                         g.dtype_name(t))
    return dict(args=[['var', s], m, src], pre=pre + p2)


def gen_scatter(kind):
    """scatter (src or a number), scatter.reduce, scatter_add: an index of
    self's rank no larger than self except in dim; for a plain scatter the
    values along each line of dim are distinct (one writer per element)."""
    def gen(g, op):
        # scatter with reduce is not differentiable: ember refuses an input
        # requiring grad at the call, torch only at backward (accepted)
        s = g.pick(inplace=op.inplace, pred=(lambda t: not t.requires_grad) if kind == 'reduce' else None)
        if s is None:
            return None
        t = g.t(s)
        dt = g.dtype_name(t)
        if kind in ('add', 'reduce') and dt == 'bool':
            return None
        d, size, darg = _dim_and_size(g, t)
        shape = [1] if t.dim() == 0 else list(t.shape)
        ishape = [g.r.randint(0, n) for n in shape]
        if size == 0:
            ishape[d] = 0
        elif kind == 'scatter':
            ishape[d] = g.r.randint(0, size)
        else:
            ishape[d] = g.r.randint(0, 4)
        if t.dim() == 0 and g.r.random() < 0.5:
            ishape = []
        vals = []
        lines = _prod([n for k, n in enumerate(ishape) if k != d]) if ishape else 1
        klen = ishape[d] if ishape else 1
        per_line = []
        for _ in range(lines):
            if kind == 'scatter':
                per_line.append(g.r.sample(range(1, size + 1), klen))
            else:
                per_line.append([g.r.randint(1, size) for _ in range(klen)])
        # lay the lines out in row-major order of ishape
        if ishape:
            import itertools
            other = [range(n) for k, n in enumerate(ishape) if k != d]
            line_of = {c: i for i, c in enumerate(itertools.product(*other))}
            for c in itertools.product(*[range(n) for n in ishape]):
                key = tuple(v for k, v in enumerate(c) if k != d)
                vals.append(per_line[line_of[key]][c[d]])
        else:
            vals = [per_line[0][0]] if klen else []
        idx, pre = _int_leaf(g, ishape, vals)
        args, kw = [['var', s], darg, idx], {}
        if kind == 'scatter' and g.r.random() < 0.3:
            args.append(_value(g, t) if dt not in FLOATS else g.number())
            if args[-1][0] == 'var':
                args[-1] = g.number() if dt in FLOATS else ['int', 2]
        else:
            sshape = [n + (g.r.random() < 0.2) for n in ishape]
            if kind == 'reduce':
                name, st = g.leaf(shape=sshape, dtype=dt, rg=False)
                src, p2 = ['var', name], [st]
            else:
                src, p2 = _like_leaf(g, sshape, dt)
            pre += p2
            args.append(src)
        if kind == 'reduce':
            kw['reduce'] = ['str', g.r.choice(['add', 'multiply'])]
        return dict(args=args, kw=kw, pre=pre)
    return gen


def gen_scatter_reduce(g, op):
    """scatter_reduce.two: scatter_add's arguments plus the reduction and
    include_self."""
    red = g.r.choice(['sum', 'prod', 'mean', 'amax', 'amin'])
    res = gen_scatter('add')(g, op)
    if res is None:
        return None
    # src exactly index's shape: torch's backward fails on a larger src (ember pads)
    src = res['args'][3][1]
    for st in res['pre']:
        if st['out'] == src:
            ishape = [st2 for st2 in res['pre'] if st2['out'] == res['args'][2][1]][0]['shape']
            st['shape'] = list(ishape)
            st['values'] = st['values'][:_prod(ishape)] + [1.0] * max(0, _prod(ishape) - len(st['values']))
    res['args'].append(['str', red])
    if g.r.random() < 0.5:
        # amax/amin without self: accepted difference in the gradient (see above)
        res['kw']['include_self'] = ['bool', red in ('amax', 'amin') or g.r.random() < 0.5]
    return res


def gen_gather(g, op):
    s = g.pick()
    if s is None:
        return None
    t = g.t(s)
    d, size, darg = _dim_and_size(g, t)
    shape = [1] if t.dim() == 0 else list(t.shape)
    ishape = [g.r.randint(0, n) for n in shape]
    ishape[d] = 0 if size == 0 else g.r.randint(0, 4)
    if t.dim() == 0 and g.r.random() < 0.5:
        ishape = []
    idx, pre = _int_leaf(g, ishape, [g.r.randint(1, size) for _ in range(_prod(ishape))] if size else [])
    return dict(args=[['var', s], darg, idx], pre=pre)


def gen_take(g, op):
    s = g.pick()
    if s is None:
        return None
    n = g.t(s).numel()
    shape = [g.r.randint(0, 3) for _ in range(g.r.randint(0, 2))]
    if n == 0:
        shape = [0]
    vals = [g.r.choice([g.r.randint(1, n), -g.r.randint(1, n)]) for _ in range(_prod(shape))] if n else []
    idx, pre = _int_leaf(g, shape, vals)
    return dict(args=[['var', s], idx], pre=pre)


def gen_take_along_dim(g, op):
    s = g.pick()
    if s is None:
        return None
    t = g.t(s)
    if t.dim() == 0 or g.r.random() < 0.3:
        n = t.numel()
        shape = [g.r.randint(0, 3)] if n else [0]
        idx, pre = _int_leaf(g, shape, [g.r.randint(1, n) for _ in range(_prod(shape))])
        return dict(args=[['var', s], idx], pre=pre)
    d, size, darg = _dim_and_size(g, t)
    ishape = [g.r.choice([1, n]) for n in t.shape]
    ishape[d] = 0 if size == 0 else g.r.randint(1, 3)
    idx, pre = _int_leaf(g, ishape, [g.r.randint(1, size) for _ in range(_prod(ishape))] if size else [])
    return dict(args=[['var', s], idx, darg], pre=pre)


def gen_one_hot(g, op):
    shape = [g.r.randint(0, 3) for _ in range(g.r.randint(0, 2))]
    c = g.r.randint(1, 4)
    n = _prod(shape)
    idx, pre = _int_leaf(g, shape, [g.r.randint(1, c) for _ in range(n)])
    args = [idx]
    if n == 0 or g.r.random() < 0.5:
        args.append(['int', c + g.r.randint(0, 1)])
    return dict(args=args, pre=pre, style='function')


def _py_one_hot(st, pa, pk):
    return 'torch.nn.functional.one_hot(%s)' % ', '.join(['(%s - 1)' % pa[0]] + pa[1:])


_W_INDEX_PUT = 1.0


def gen_index_put(g, op):
    """index_put(_): k index entries for self's first dims (int64 tensors of
    one broadcast shape, or one bool mask over the leading dims), values of
    the indexed result's shape (or a suffix of it, or 0-dim). Without
    accumulate the written positions are distinct (PyTorch leaves the
    winner of a repeat unspecified). No nil entries: torch 1.13's
    index_put refuses None (test_index_put.lua covers them)."""
    # in place, no self with overlapping elements (an expanded tensor: see the docstring)
    s = g.pick(pred=lambda t: t.dim() > 0 and (not op.inplace or all(
        st != 0 or n <= 1 for st, n in zip(t.stride(), t.shape))), inplace=op.inplace)
    if s is None:
        return None
    t = g.t(s)
    dt = g.dtype_name(t)
    acc = dt != 'bool' and g.r.random() < 0.5
    shape = list(t.shape)
    if g.r.random() < 0.2:  # a bool mask over the first m dims
        m = g.r.randint(1, len(shape))
        idx, pre = _bool_leaf(g, shape[:m])
        count = sum(1 for v in pre[0]['values'] if v)
        entries, rshape = [idx[1]], [count] + shape[m:]
    else:
        k = g.r.randint(1, len(shape))
        sizes = shape[:k]
        n = 0 if 0 in sizes else g.r.randint(0, 4)
        if acc:
            tuples = [tuple(g.r.randint(1, z) for z in sizes) for _ in range(n)]
        else:
            import itertools
            allpos = list(itertools.product(*[range(1, z + 1) for z in sizes]))
            tuples = g.r.sample(allpos, min(n, len(allpos)))
            n = len(tuples)
        # B = [n], or [1] for an entry that is the same everywhere (broadcast)
        entries, pre = [], []
        for j in range(k):
            col = [tp[j] for tp in tuples]
            if n > 1 and len(set(col)) == 1 and g.r.random() < 0.5:
                col = col[:1]
            if g.r.random() < 0.3:  # negative positions count from the end
                col = [v - sizes[j] - 1 for v in col]
            a, p2 = _int_leaf(g, [len(col)], col)
            entries.append(a[1])
            pre += p2
        rshape = [n] + shape[k:]
    r = g.r.random()
    if r < 0.25:
        vshape = []
    elif r < 0.4 and rshape:
        vshape = rshape[1:]
    else:
        vshape = rshape
    val, p3 = _like_leaf(g, vshape, dt)
    args, kw = [['var', s], ['vars', entries], val], {}
    if acc or g.r.random() < 0.3:
        if g.r.random() < 0.5:
            kw['accumulate'] = ['bool', acc]
        else:
            args.append(['bool', acc])
    return dict(args=args, kw=kw, pre=pre + p3)


def _py_index_put(st, pa, pk):
    names = st['args'][1][1]
    idx = '(%s,)' % ', '.join('(%s if %s.dtype == torch.bool else torch.where(%s < 0, %s, %s - 1))'
                              % (n, n, n, n, n) for n in names)
    rest = [pa[0], idx] + pa[2:] + ['%s=%s' % kv for kv in sorted(pk.items())]
    if st['style'] == 'method':
        return '%s.%s(%s)' % (rest[0], st['op'], ', '.join(rest[1:]))
    return 'torch.%s(%s)' % (st['op'], ', '.join(rest))


MAP = {
    'index_select': dict(gen=gen_index_select, py=_py_idx('index_select', [2])),
    'index_add': dict(gen=gen_index_write('add'), py=_py_idx('index_add', [2])),
    'index_add_': dict(gen=gen_index_write('add'), py=_py_idx('index_add_', [2])),
    'index_copy': dict(gen=gen_index_write('copy'), py=_py_idx('index_copy', [2])),
    'index_copy_': dict(gen=gen_index_write('copy'), py=_py_idx('index_copy_', [2])),
    'index_fill': dict(gen=gen_index_write('fill'), py=_py_idx('index_fill', [2])),
    'index_fill_': dict(gen=gen_index_write('fill'), py=_py_idx('index_fill_', [2])),
    'masked_fill': dict(gen=gen_masked_fill),
    'masked_fill_': dict(gen=gen_masked_fill),
    'masked_select': dict(gen=gen_masked_select),
    'masked_scatter': dict(gen=gen_masked_scatter),
    'masked_scatter_': dict(gen=gen_masked_scatter),
    'scatter': dict(gen=gen_scatter('scatter'), py=_py_idx('scatter', [2])),
    'scatter_': dict(gen=gen_scatter('scatter'), py=_py_idx('scatter_', [2])),
    'scatter.reduce': dict(gen=gen_scatter('reduce'), py=_py_idx('scatter', [2]), weight=0.5),
    'scatter_.reduce': dict(gen=gen_scatter('reduce'), py=_py_idx('scatter_', [2]), weight=0.5),
    'scatter_add': dict(gen=gen_scatter('add'), py=_py_idx('scatter_add', [2])),
    'scatter_add_': dict(gen=gen_scatter('add'), py=_py_idx('scatter_add_', [2])),
    'gather': dict(gen=gen_gather, py=_py_idx('gather', [2])),
    'nonzero': dict(post=_ops._plus1),
    'take': dict(gen=gen_take, py=_py_idx('take', [1], neg=True)),
    'take_along_dim': dict(gen=gen_take_along_dim, py=_py_idx('take_along_dim', [1])),
    'one_hot': dict(gen=gen_one_hot, py=_py_one_hot, weight=0.5),
    'nonzero_tuple': dict(gen=lambda g, op: None),
    'scatter_reduce.two': dict(gen=gen_scatter_reduce, py=_py_idx('scatter_reduce', [2])),
    'scatter_reduce_.two': dict(gen=gen_scatter_reduce, py=_py_idx('scatter_reduce_', [2])),
    'index_put': dict(gen=gen_index_put, py=_py_index_put, weight=_W_INDEX_PUT),
    'index_put_': dict(gen=gen_index_put, py=_py_index_put, weight=_W_INDEX_PUT),
}

INDEX_RESULTS = {'nonzero': [0]}
