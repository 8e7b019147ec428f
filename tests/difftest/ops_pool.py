"""ops_pool.py -- difftest entries of the pool family (schema/ops/pool.yaml).

Pooling inputs are existing tensors of a fitting rank or new float leaves
(batched or not) with small spatial sizes; kernel, stride, padding,
dilation and ceil_mode are drawn so that the output is not empty (the
refusals are tested in test_pool.lua). The F functions are drawn with and
without return_indices; ember then returns (values, nil) where torch
returns the values alone, which the torch side mirrors as (values, None).
Indices are 1-based in ember: torch's get + 1 (INDEX_RESULTS).

Accepted differences: max pooling of bfloat16 over 3 dims and the backward
ops of float16 gradients: ember computes them, PyTorch 1.13's CPU kernels
have none (the generator draws float32/float64 (and int64 for average
pooling) for 3 dims). max_pool1d of
an input whose output would be empty: PyTorch's max_pool1d (without
indices and not requiring grad) returns an empty tensor, its
max_pool1d_with_indices and ember raise "output is too small".
adaptive_avg_pool2d/3d with an output size of 0: PyTorch's forward gives
an empty result and its backward then raises, ember's backward gives
zeros (the generator draws sizes >= 1). adaptive_avg_pool with an output
of size 1: PyTorch computes a mean, whose gradient does not require grad
under create_graph, ember's backward op's does (a double backward through
it then gives zeros in ember and "does not require grad" in PyTorch; seen
once in 1500 seeds). Not drawn:
the backward ops (autograd runs them on every backward and double backward
through a pooling; test_gradcheck.lua checks them; called directly with
random operands PyTorch's CPU kernels take out-of-plane indices and
mismatched shapes unchecked).
"""
from ops import *  # noqa: F401,F403


def _out_size(n, k, s, p, d, ceil):
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)
    o = num // s + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return o


def _pool_input(g, nsp, dtypes):
    """A variable holding a float tensor of nsp + 1 or nsp + 2 dims whose
    spatial and channel dims are not empty (an existing one or a new leaf)."""
    def fits(t):
        return (t.dim() in (nsp + 1, nsp + 2) and str(t.dtype)[6:] in dtypes
                and all(s > 0 for s in t.shape[t.dim() - nsp - 1:]))
    name = g.pick(pred=fits) if g.r.random() < 0.5 else None
    if name is not None:
        return name, []
    shape = ([g.r.randint(0, 2)] if g.r.random() < 0.6 else []) + [g.r.randint(1, 3)]
    shape += [g.r.randint(1, 6) for _ in range(nsp)]
    name, st = g.leaf(shape=shape, dtype=g.r.choice(dtypes))
    return name, [st]


def _covers_input(n, k, s, p, d, o):
    """Whether every one of the o windows holds an input position."""
    for w in range(o):
        start = w * s - p
        if not any(0 <= start + j * d < n for j in range(k)):
            return False
    return True


def _pool_sizes(g, t, nsp, same_stride, dilation=True):
    """(kernel, stride, padding, dilation, ceil) lists giving a non-empty
    output for t whose windows all hold an input position (ember's index 0
    for a window over padding alone is an accepted difference), or None.
    same_stride: the stride is left out (= kernel_size)."""
    sp = list(t.shape[t.dim() - nsp:])
    for _ in range(10):
        k = [g.r.randint(1, min(3, n + 1)) for n in sp]
        s = list(k) if same_stride else [g.r.randint(1, 3) for _ in sp]
        p = [0 if same_stride else g.r.randint(0, kk // 2) for kk in k]
        d = [1 if same_stride or not dilation else g.r.choice([1, 1, 2]) for _ in sp]
        ceil = not same_stride and g.r.random() < 0.3
        outs = [_out_size(n, kk, ss, pp, dd, ceil) for n, kk, ss, pp, dd in zip(sp, k, s, p, d)]
        if all(o >= 1 for o in outs) and all(_covers_input(n, kk, ss, pp, dd, o)
                                             for n, kk, ss, pp, dd, o in zip(sp, k, s, p, d, outs)):
            return k, s, p, d, ceil
    return None


def _ints(v):
    """One integer when all are equal (sometimes), else the list."""
    if len(set(v)) == 1 and len(v) > 1 and v[0] >= 0:
        return ['int', v[0]] if v[0] > 0 else ['ints', v, 't']
    return ['ints', v, 't']


def gen_max_pool(nsp, with_indices_op):
    dtypes = ['float32', 'float64'] + (['bfloat16'] if nsp < 3 else [])

    def gen(g, op):
        x, pre = _pool_input(g, nsp, dtypes)
        t = g.t(x) if not pre else None
        if t is None:
            import torch
            st = pre[0]
            t = torch.zeros(st['shape'])
        r = g.r.random()
        sizes = _pool_sizes(g, t, nsp, r < 0.3)
        if sizes is None:
            return None
        k, s, p, d, ceil = sizes
        args = [['var', x], _ints(k)]
        kw = {}
        if r < 0.3:
            pass  # stride = kernel_size, padding 0, dilation 1
        elif r < 0.7:
            args += [_ints(s), _ints(p), _ints(d)]
            if ceil or g.r.random() < 0.5:
                args.append(['bool', ceil])
        else:
            kw = dict(stride=_ints(s), padding=_ints(p), dilation=_ints(d), ceil_mode=['bool', ceil])
        if not with_indices_op and g.r.random() < 0.6:
            kw['return_indices'] = ['bool', g.r.random() < 0.7]
        return dict(args=args, kw=kw, pre=pre, style='function')
    return gen


def _py_max_pool(name, with_indices_op):
    def py(st, pa, pk):
        call = 'torch.nn.functional.%s(%s)' % (name, ', '.join(pa + ['%s=%s' % kv for kv in sorted(pk.items())]))
        if with_indices_op or pk.get('return_indices') == 'True':
            return '(lambda r: (r[0], r[1] + 1))(%s)' % call
        return '(%s, None)' % call
    return py


def gen_avg_pool(nsp):
    dtypes = ['float32', 'float64', 'int64'] + (['bfloat16'] if nsp < 3 else [])

    def gen(g, op):
        x, pre = _pool_input(g, nsp, dtypes)
        if pre:
            import torch
            t = torch.zeros(pre[0]['shape'])
        else:
            t = g.t(x)
        r = g.r.random()
        sizes = _pool_sizes(g, t, nsp, r < 0.3, dilation=False)
        if sizes is None:
            return None
        k, s, p, _, ceil = sizes
        args = [['var', x], _ints(k)]
        kw = {}
        if r >= 0.3:
            if r < 0.7:
                args += [_ints(s), _ints(p), ['bool', ceil]]
                if g.r.random() < 0.5:
                    args.append(['bool', g.r.random() < 0.5])
            else:
                kw = dict(stride=_ints(s), padding=_ints(p), ceil_mode=['bool', ceil],
                          count_include_pad=['bool', g.r.random() < 0.5])
            if nsp > 1 and g.r.random() < 0.3:
                kw['divisor_override'] = ['int', g.r.choice([1, 2, 3, -2])]
        return dict(args=args, kw=kw, pre=pre, style='function')
    return gen


def gen_adaptive(nsp, is_max):
    dtypes = ['float32', 'float64'] + (['bfloat16'] if nsp < 3 else [])

    def gen(g, op):
        x, pre = _pool_input(g, nsp, dtypes)
        os = [g.r.randint(1, 4) for _ in range(nsp)]  # 0: PyTorch's backward refuses the empty output
        args = [['var', x], _ints(os) if nsp > 1 else ['int', os[0]]]
        kw = {}
        if is_max and not op.name.endswith('_with_indices') and g.r.random() < 0.6:
            kw['return_indices'] = ['bool', g.r.random() < 0.7]
        return dict(args=args, kw=kw, pre=pre, style='function')
    return gen


MAP = {}
INDEX_RESULTS = {}
MAP['adaptive_avg_pool1d'] = dict(gen=gen_adaptive(1, False))
MAP['adaptive_avg_pool2d'] = dict(gen=gen_adaptive(2, False))
MAP['adaptive_avg_pool3d'] = dict(gen=gen_adaptive(3, False), weight=0.5)
MAP['adaptive_max_pool1d'] = dict(gen=gen_adaptive(1, True), py=_py_max_pool('adaptive_max_pool1d', False))
MAP['adaptive_max_pool2d'] = dict(gen=gen_adaptive(2, True), py=_py_max_pool('adaptive_max_pool2d', False))
MAP['adaptive_max_pool2d_with_indices'] = dict(gen=gen_adaptive(2, True), weight=0.5,
                                               py=_py_max_pool('adaptive_max_pool2d_with_indices', True))
INDEX_RESULTS.update({'adaptive_max_pool1d': [1], 'adaptive_max_pool2d': [1],
                      'adaptive_max_pool2d_with_indices': [1]})
def gen_lp_pool(nsp):
    def gen(g, op):
        x, pre = _pool_input(g, nsp, ['float32', 'float64'])
        if pre:
            import torch
            t = torch.zeros(pre[0]['shape'])
        else:
            t = g.t(x)
        r = g.r.random()
        sizes = _pool_sizes(g, t, nsp, r < 0.5, dilation=False)
        if sizes is None or any(pp for pp in sizes[2]) and r >= 0.5:
            sizes = _pool_sizes(g, t, nsp, True, dilation=False)
        if sizes is None:
            return None
        k, s, _, _, ceil = sizes
        args = [['var', x], ['num', g.r.choice([1.0, 2.0, 3.0, 1.5])], _ints(k)]
        if r >= 0.5 and g.r.random() < 0.5:
            args += [_ints(s), ['bool', ceil]]
        return dict(args=args, pre=pre, style='function')
    return gen


MAP['lp_pool1d'] = dict(gen=gen_lp_pool(1))
MAP['lp_pool2d'] = dict(gen=gen_lp_pool(2))

def gen_max_unpool(nsp):
    """A float input leaf and an int64 index leaf of its shape holding
    distinct valid 1-based positions per output plane (a repeated index
    keeps an unspecified value in PyTorch); the torch call subtracts 1."""
    def gen(g, op):
        batched = g.r.random() < 0.6
        lead = ([g.r.randint(1, 2)] if batched else []) + [g.r.randint(1, 2)]
        sp = [g.r.randint(1, 3) for _ in range(nsp)]
        k = [g.r.randint(1, 3) for _ in range(nsp)]
        st = [g.r.randint(1, kk) for kk in k]
        outs = [(n - 1) * ss + kk for n, ss, kk in zip(sp, st, k)]
        x, pre = g.leaf(shape=lead + sp, dtype=g.r.choice(['float32', 'float64']))
        pre = [pre]
        n_in, n_out, planes = 1, 1, 1
        for v in sp:
            n_in *= v
        for v in outs:
            n_out *= v
        for v in lead:
            planes *= v
        vals = []
        for _ in range(planes):
            vals += [p + 1 for p in g.r.sample(range(n_out), n_in)]
        ist = dict(s='leaf', out=g.fresh(), shape=lead + sp, dtype='int64', values=vals, rg=False)
        g.frozen.add(ist['out'])
        g.novalues.add(ist['out'])
        pre.append(ist)
        args = [['var', x], ['var', ist['out']], _ints(k)]
        kw = {}
        if g.r.random() < 0.7:
            kw['stride'] = _ints(st)
        elif st != k:
            return None
        if g.r.random() < 0.3:
            kw['output_size'] = ['ints', outs, 't']
        return dict(args=args, kw=kw, pre=pre, style='function')
    return gen


def _py_unpool(name):
    def py(st, pa, pk):
        return 'torch.nn.functional.%s(%s)' % (name, ', '.join([pa[0], '(%s - 1)' % pa[1]] + pa[2:] + [
            '%s=%s' % kv for kv in sorted(pk.items())]))
    return py


MAP['max_unpool1d'] = dict(gen=gen_max_unpool(1), py=_py_unpool('max_unpool1d'))
MAP['max_unpool2d'] = dict(gen=gen_max_unpool(2), py=_py_unpool('max_unpool2d'))
MAP['max_unpool3d'] = dict(gen=gen_max_unpool(3), py=_py_unpool('max_unpool3d'), weight=0.5)
MAP['max_unpool'] = dict(gen=lambda g, op: None, weight=0.01)

# Not drawn: the backward ops (random operands reach PyTorch's unchecked
# paths: out-of-plane indices written into other memory, mismatched shapes
# taken as they come); autograd runs them on every backward through a pool.
for _n in ('adaptive_avg_pool2d_backward', 'adaptive_avg_pool3d_backward', 'adaptive_max_pool2d_backward'):
    MAP[_n] = dict(gen=lambda g, op: None, weight=0.01)

for _n in (1, 2, 3):
    MAP['avg_pool%dd' % _n] = dict(gen=gen_avg_pool(_n))
    MAP['max_pool%dd' % _n] = dict(gen=gen_max_pool(_n, False), py=_py_max_pool('max_pool%dd' % _n, False))
    MAP['max_pool%dd_with_indices' % _n] = dict(gen=gen_max_pool(_n, True), weight=0.5,
                                                py=_py_max_pool('max_pool%dd_with_indices' % _n, True))
    INDEX_RESULTS['max_pool%dd' % _n] = [1]
    INDEX_RESULTS['max_pool%dd_with_indices' % _n] = [1]
for _n in ('max_pool2d_with_indices_backward', 'max_pool3d_with_indices_backward', 'avg_pool2d_backward',
           'avg_pool3d_backward'):
    MAP[_n] = dict(gen=lambda g, op: None, weight=0.01)


def gen_shuffle(up):
    def gen(g, op):
        r = g.r.randint(1, 3)
        lead = [g.r.randint(1, 2) for _ in range(g.r.randint(0, 2))]
        c = g.r.randint(1, 2)
        h, w = g.r.randint(1, 3), g.r.randint(1, 3)
        shape = lead + ([c * r * r, h, w] if up else [c, h * r, w * r])
        x, st = g.leaf(shape=shape)
        return dict(args=[['var', x], ['int', r]], pre=[st], style='function')
    return gen


MAP['pixel_shuffle'] = dict(gen=gen_shuffle(True))
MAP['pixel_unshuffle'] = dict(gen=gen_shuffle(False))
