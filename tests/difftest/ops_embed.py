"""ops_embed.py -- difftest entries of the embed family (schema/ops/embed.yaml).

Weights are existing 2-d tensors or new leaves (1..5 rows, 0..4 columns);
ids are new int64/int32 leaves of 1-based rows (torch gets ids - 1), of
0..2 dims for embedding and 1-d with 1-based offsets (torch gets offsets
- 1) or 2-d for embedding_bag. padding_idx is drawn 1-based or negative
(torch gets p - 1 for p > 0). max_norm is drawn for float32/float64
weights (it renormalises rows of the weight in place, in both).
embedding_dense is torch.embedding, embedding_renorm_ torch.embedding_renorm_
(with the ids shifted and under no_grad).

Accepted differences: embedding_bag with include_last_offset whose last
offset is not the end of the ids, in mode mean: PyTorch 1.13 divides the
last bag by the count up to the end of the ids (a bag [1, 1] of ids 1..4
of a ones weight gives 0.5), ember by the bag's own size (1.0); the
generator closes the last bag at the end (offsets end with n + 1), where
both agree. embedding_bag with scale_grad_by_freq: PyTorch 1.13's CPU backward
divides some rows by another id's count (ids 3,3,1,5,4 in one bag: id 4's
row gets 0.5 in PyTorch, 1 in ember, which divides each row by its own
id's count as embedding does; test_embed.lua checks ember's); not drawn.
embedding_bag of ids with no offsets: PyTorch 1.13 crashes
(segfault), ember returns an empty (0, embedding_dim) result (not drawn).
embedding_bag of a 2-d input with rows of length 0:
PyTorch fails making its offsets (arange with step 0), ember returns zero
rows (not drawn). embedding_bag_dense (torch.embedding_bag returns four
tensors, with PyTorch's bag bookkeeping) and the backward ops
(embedding_dense_backward, embedding_bag_dense_backward,
embedding_bag_per_sample_weights_backward: autograd runs them on every
backward; test_gradcheck.lua and test_embed.lua check them) are not drawn.
"""
from ops import *  # noqa: F401,F403


def _ids(g, shape, rows, dtype=None):
    """A frozen int leaf of 1-based ids in 1..rows (see ops_index._int_leaf)."""
    n = 1
    for s in shape:
        n *= s
    st = dict(s='leaf', out=g.fresh(), shape=list(shape), dtype=dtype or g.r.choice(['int64', 'int64', 'int32']),
              values=[g.r.randint(1, rows) for _ in range(n)], rg=False)
    g.frozen.add(st['out'])
    g.novalues.add(st['out'])
    return ['var', st['out']], [st]


def _weight(g, dtypes):
    """(name, pre, rows, dtype name, requires_grad) of a 2-d weight with at
    least one row: an existing tensor or a new leaf (pre)."""
    def fits(t):
        return t.dim() == 2 and t.shape[0] >= 1 and str(t.dtype)[6:] in dtypes
    name = g.pick(pred=fits) if g.r.random() < 0.4 else None
    if name is not None:
        t = g.t(name)
        return name, [], t.shape[0], g.dtype_name(t), t.requires_grad
    name, st = g.leaf(shape=[g.r.randint(1, 5), g.r.randint(0, 4)], dtype=g.r.choice(dtypes))
    return name, [st], st['shape'][0], st['dtype'], st['rg']


def _padding(g, rows):
    p = g.r.randint(1, rows)
    return ['int', p - rows - 1 if g.r.random() < 0.3 else p]


def _py_pad(v):
    return '(%s - 1 if %s > 0 else %s)' % (v, v, v)


def gen_embedding(g, op):
    dts = ['float32', 'float64'] if g.r.random() < 0.8 else ['float16', 'bfloat16', 'int64', 'bool']
    w, pre, rows, dt, _ = _weight(g, dts)
    shape = [g.r.randint(0, 3) for _ in range(g.r.choice([0, 1, 1, 2]))]
    idx, p2 = _ids(g, shape, rows)
    kw = {}
    if g.r.random() < 0.3:
        kw['padding_idx'] = _padding(g, rows)
    if g.r.random() < 0.3:
        kw['scale_grad_by_freq'] = ['bool', True]
    if dt in ('float32', 'float64') and g.r.random() < 0.2:
        kw['max_norm'] = ['num', g.r.choice([0.5, 1.0, 2.0])]
        if g.r.random() < 0.5:
            kw['norm_type'] = ['num', g.r.choice([1.0, 3.0, 'inf'])]
    return dict(args=[idx, ['var', w]], kw=kw, pre=pre + p2, style='function')


def _py_embedding(st, pa, pk):
    pk = dict(pk)
    if 'padding_idx' in pk:
        pk['padding_idx'] = _py_pad(pk['padding_idx'])
    kws = ['%s=%s' % kv for kv in sorted(pk.items())]
    return 'torch.nn.functional.embedding(%s)' % ', '.join(['(%s - 1)' % pa[0], pa[1]] + kws)


def gen_embedding_dense(g, op):
    w, pre, rows, _, _ = _weight(g, ['float32', 'float64'])
    shape = [g.r.randint(0, 3) for _ in range(g.r.choice([0, 1, 2]))]
    idx, p2 = _ids(g, shape, rows)
    args = [['var', w], idx]
    if g.r.random() < 0.5:
        args.append(['int', g.r.randint(1, rows)])
        if g.r.random() < 0.5:
            args.append(['bool', True])
    return dict(args=args, pre=pre + p2, style='function')


def _py_embedding_dense(st, pa, pk):
    a = [pa[0], '(%s - 1)' % pa[1]]
    if len(pa) > 2:
        a.append('(%s - 1)' % pa[2])
    a += pa[3:]
    return 'torch.embedding(%s)' % ', '.join(a)


def gen_embedding_renorm_(g, op):
    w, pre, rows, _, rg = _weight(g, ['float32', 'float64'])
    if rg:
        return None
    idx, p2 = _ids(g, [g.r.randint(0, 4)], rows)
    return dict(args=[['var', w], idx, ['num', g.r.choice([0.5, 1.0, 2.0])], ['num', g.r.choice([1.0, 2.0, 3.0])]],
                pre=pre + p2, style='function')


def _py_embedding_renorm_(st, pa, pk):
    return 'torch.embedding_renorm_(%s, (%s - 1), %s, %s)' % (pa[0], pa[1], pa[2], pa[3])


def gen_embedding_bag(g, op):
    w, pre, rows, dt, _ = _weight(g, ['float32', 'float64', 'float32', 'float16'])
    mode = g.r.choice(['sum', 'mean', 'max'])
    kw = {}
    if g.r.random() < 0.6:
        kw['mode'] = ['str', mode]
    else:
        mode = 'mean'
    two_d = g.r.random() < 0.4
    if two_d:
        ishape = [g.r.randint(0, 3), g.r.randint(1, 3)]
        idx, p2 = _ids(g, ishape, rows)
        args = [idx, ['var', w]]
    else:
        n = g.r.randint(0, 6)
        ishape = [n]
        idx, p2 = _ids(g, ishape, rows)
        k = g.r.randint(1 if n else 0, 4)  # no offsets with ids: PyTorch 1.13 segfaults
        offs = [1] + sorted(g.r.randint(1, n + 1) for _ in range(k - 1)) if k else []
        if g.r.random() < 0.3 and offs:
            # the last offset closes the last bag at the end (see the docstring)
            kw['include_last_offset'] = ['bool', True]
            offs.append(n + 1)
        off, p3 = _ids(g, [len(offs)], 1)
        p3[0]['values'] = offs
        p2 += p3
        args = [idx, ['var', w], off]
    if mode == 'sum' and g.r.random() < 0.4:
        name, st = g.leaf(shape=ishape, dtype=dt)
        kw['per_sample_weights'] = ['var', name]
        pre.append(st)
    if g.r.random() < 0.3:
        kw['padding_idx'] = _padding(g, rows)
    if dt in ('float32', 'float64') and g.r.random() < 0.15:
        kw['max_norm'] = ['num', g.r.choice([0.5, 1.0, 2.0])]
    return dict(args=args, kw=kw, pre=pre + p2, style='function')


def _py_embedding_bag(st, pa, pk):
    pk = dict(pk)
    if 'padding_idx' in pk:
        pk['padding_idx'] = _py_pad(pk['padding_idx'])
    a = ['(%s - 1)' % pa[0], pa[1]]
    if len(pa) > 2:
        a.append('(%s - 1)' % pa[2])
    kws = ['%s=%s' % kv for kv in sorted(pk.items())]
    return 'torch.nn.functional.embedding_bag(%s)' % ', '.join(a + kws)


MAP = {
    'embedding': dict(gen=gen_embedding, py=_py_embedding),
    'embedding_dense': dict(gen=gen_embedding_dense, py=_py_embedding_dense, weight=0.5),
    'embedding_renorm_': dict(gen=gen_embedding_renorm_, py=_py_embedding_renorm_, weight=0.3),
    'embedding_bag': dict(gen=gen_embedding_bag, py=_py_embedding_bag),
    'embedding_bag_dense': dict(gen=lambda g, op: None),
    'embedding_dense_backward': dict(gen=lambda g, op: None),
    'embedding_bag_dense_backward': dict(gen=lambda g, op: None),
    'embedding_bag_per_sample_weights_backward': dict(gen=lambda g, op: None),
}
