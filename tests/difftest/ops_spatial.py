"""ops_spatial.py -- difftest entries of the spatial family (schema/ops/spatial.yaml).

pad (F.pad), constant_pad_nd, pad_mode and pad_circular (torch: F.pad with
that mode) and pad_mode_backward (torch: aten reflection_padNd_backward /
replication_padNd_backward, which take self for its shape as ember's does)
get pads that fit the drawn tensor, mostly valid, sometimes not (so
refusals are compared too). pad_circular_backward has no torch counterpart
(torch 1.13's circular pad is a composite of copies): it is not drawn; its
gradients are drawn through pad (create_graph) and gradchecked.

Accepted differences:
  - circular padding whose positive pad exceeds the size left after a
    negative pad on the same dim (F.pad(x{4}, (3, -2), 'circular')): torch
    1.13 copies from the padded tensor's uninitialised memory; ember refuses
    ("wraps around more than once"). The generator avoids these pads.
  - a pad leaving a dim of an empty input (0 elements) with a negative
    size: torch returns without checking; ember refuses. Not drawn.
  - reflect/replicate of integer or half tensors: torch 1.13 raises "not
    implemented" for them and so does ember (float32/float64 only);
    circular and constant work on every dtype in both.
"""
from ops import *  # noqa: F401,F403
import ops as _ops


def _pads(g, sizes, mode):
    """(left, right) pairs, last dim first, for the given padded sizes."""
    out = []
    for w in reversed(sizes):
        if mode == 'reflect':
            lo, hi = -1, max(0, min(2, w - 1))
        elif mode == 'circular':
            lo, hi = -1, max(0, min(2, w - 1))
        else:
            lo, hi = -1, 2
        out += [g.r.randint(lo, hi), g.r.randint(lo, hi)]
    if g.r.random() < 0.05 and out:  # sometimes a pad torch refuses
        out[0] = (sizes[-1] if sizes else 0) + 1
    return out


def gen_pad(g, op):
    modes = {'pad': ['constant', 'reflect', 'replicate', 'circular'], 'pad_mode': ['reflect', 'replicate'],
             'pad_circular': ['circular']}[op.name]
    mode = g.r.choice(modes)
    if mode == 'constant':
        s = g.pick()
        if s is None:
            return None
        t = g.t(s)
        k = g.r.randint(0, min(t.dim(), 3))
    else:
        s = g.pick(pred=lambda t: 2 <= t.dim() <= 5)
        if s is None:
            return None
        t = g.t(s)
        k = t.dim() - 2 if mode == 'circular' else g.r.choice([t.dim() - 1, t.dim() - 2])
        k = max(1, min(k, 3))
    sizes = list(t.shape[t.dim() - k:]) if k else []
    pad = _pads(g, sizes, mode)
    if mode == 'constant':  # a crop may not exceed the size
        for i, w in enumerate(reversed(sizes)):
            if pad[2 * i] + pad[2 * i + 1] + w < 0:
                pad[2 * i] = pad[2 * i + 1] = 0
    elif mode == 'circular':  # see the docstring: never wrap past a crop
        for i, w in enumerate(reversed(sizes)):
            core = w + min(pad[2 * i], 0) + min(pad[2 * i + 1], 0)
            if pad[2 * i] > core or pad[2 * i + 1] > core or core < 0:
                pad[2 * i] = pad[2 * i + 1] = 0
    if mode != 'constant':  # see the docstring: no negative sizes
        for i, w in enumerate(reversed(sizes)):
            if pad[2 * i] + pad[2 * i + 1] + w < 0:
                pad[2 * i] = pad[2 * i + 1] = 0
    args = [['var', s], ['ints', pad, 't']]
    if op.name == 'pad_circular':
        return dict(args=args, style='function')
    args.append(['str', mode])
    if op.name == 'pad' and mode == 'constant' and g.r.random() < 0.5:
        args.append(g.number())
    return dict(args=args, style='function')


def gen_constant_pad_nd(g, op):
    s = g.pick()
    if s is None:
        return None
    t = g.t(s)
    k = g.r.randint(0, min(t.dim(), 3))
    sizes = list(t.shape[t.dim() - k:]) if k else []
    pad = _pads(g, sizes, 'constant')
    for i, w in enumerate(reversed(sizes)):
        if pad[2 * i] + pad[2 * i + 1] + w < 0:
            pad[2 * i] = pad[2 * i + 1] = 0
    args = [['var', s], ['ints', pad, 't']]
    if g.r.random() < 0.6:
        args.append(g.number())
    return dict(args=args, style='function')


def _py_pad_mode(st, pa, pk):
    return 'torch.nn.functional.pad(%s, %s, mode=%s)' % (pa[0], pa[1], pa[2])


def _py_pad_circular(st, pa, pk):
    return 'torch.nn.functional.pad(%s, %s, mode=\'circular\')' % (pa[0], pa[1])


def _no_gen(g, op):
    return None


def gen_pad_mode_backward(g, op):
    mode = g.r.choice(['reflect', 'replicate'])
    k = g.r.randint(1, 3)
    nd = k + g.r.randint(1, 2)
    shape = [g.r.randint(0 if i == 0 and nd == k + 2 else 1, 3) for i in range(nd - k)] + \
            [g.r.randint(1, 4) for _ in range(k)]
    pad = _pads(g, shape[nd - k:], mode)
    for i, w in enumerate(reversed(shape[nd - k:])):  # valid pads only: torch's backward does not check
        if mode == 'reflect' and (pad[2 * i] >= w or pad[2 * i + 1] >= w):
            pad[2 * i] = pad[2 * i + 1] = 0
    out = list(shape)
    for i in range(k):
        out[nd - 1 - i] += pad[2 * i] + pad[2 * i + 1]
    if any(o < 1 for o in out[nd - k:]):
        return None
    grad, pre = _ops._grad_like(g, out, g.r.random() < 0.5)
    name, st = g.leaf(shape=shape, dtype=pre[0]['dtype'], rg=g.r.random() < 0.3)
    return dict(args=[grad, ['var', name], ['ints', pad, 't'], ['str', mode]], pre=pre + [st], style='function')


def _py_pad_mode_backward(st, pa, pk):
    k = len(st['args'][2][1]) // 2
    fn = 'reflection' if st['args'][3][1] == 'reflect' else 'replication'
    return 'torch.ops.aten.%s_pad%dd_backward(%s, %s, %s)' % (fn, k, pa[0], pa[1], pa[2])


MAP = {
    'pad': dict(gen=gen_pad),
    'constant_pad_nd': dict(gen=gen_constant_pad_nd, weight=0.5),
    'pad_mode': dict(gen=gen_pad, py=_py_pad_mode, weight=0.5),
    'pad_mode_backward': dict(gen=gen_pad_mode_backward, py=_py_pad_mode_backward, weight=0.3),
    'pad_circular': dict(gen=gen_pad, py=_py_pad_circular, weight=0.5),
    'pad_circular_backward': dict(gen=_no_gen, weight=0.01),
}
