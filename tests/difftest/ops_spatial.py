"""ops_spatial.py -- difftest entries of the spatial family (schema/ops/spatial.yaml).

pad (F.pad), constant_pad_nd, pad_mode and pad_circular (torch: F.pad with
that mode) and pad_mode_backward (torch: aten reflection_padNd_backward /
replication_padNd_backward, which take self for its shape as ember's does)
get pads that fit the drawn tensor, mostly valid, sometimes not (so
refusals are compared too). pad_circular_backward has no torch counterpart
(torch 1.13's circular pad is a composite of copies): it is not drawn; its
gradients are drawn through pad (create_graph) and gradchecked.

interpolate, upsample, upsample_nearest, upsample_bilinear (torch: F.NAME,
Lua nil for an absent size or scale_factor) and upsample_nd (torch: F.interpolate
with the mode and scale factors it stands for) get an (N, C, ...) float
tensor, sizes 1-6 or scale factors from a small set; upsample_nd_backward
(torch: autograd of F.interpolate) is not drawn (no aten counterpart with
ember's arguments): its values are gradchecked, and drawn through
interpolate's gradients.

Accepted differences (interpolate):
  - bfloat16 linear/bicubic: torch 1.13 rounds its weights to bfloat16;
    ember computes in float32 and rounds once (within the bfloat16 tolerance).
  - linear modes over non-finite inputs: ember multiplies every tap by its
    weight (0 * inf = NaN next to an infinity, as torch's scalar path);
    torch's vectorised CPU path sometimes gives inf there instead (it is not
    consistent itself: a 1-element input of inf upsampled to 3 gives
    [nan, inf, inf]). Seen as value differences at NaN/inf positions only.
  - nearest with scale_factor 2.3 on a dim of 2 or 3: torch 1.13's forward
    gives [a, a, a, b] for [a, b], its backward [2, 2] (it maps output to
    input positions differently there); ember's gradient is [3, 1], the
    derivative of the forward both compute. 2.3 is not drawn for nearest.

Accepted differences (pad):
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
import torch


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


_MODES = ['nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area']
_NEED = {'linear': 3, 'bilinear': 4, 'bicubic': 4, 'trilinear': 5}


def gen_interpolate(g, op):
    s = g.pick(pred=lambda t: 3 <= t.dim() <= 5 and t.dtype in (torch.float32, torch.float64))
    if s is None:
        return None
    t = g.t(s)
    k = t.dim() - 2
    if op.name == 'upsample_nearest':
        mode = 'nearest'
    elif op.name == 'upsample_bilinear':
        mode = 'bilinear'
    else:
        ok = [m for m in _MODES if _NEED.get(m, t.dim()) == t.dim()]
        mode = g.r.choice(ok)
    if g.r.random() < 0.5:
        size = [g.r.randint(1, 6) for _ in range(k)]
        args = [['var', s], ['ints', size, 't'], ['none']]
    else:
        # no 2.3 for nearest: see the docstring
        choices = [0.5, 0.7, 1.0, 1.5, 2.0, 3.0] + ([] if mode == 'nearest' else [2.3])
        sf = [g.r.choice(choices) for _ in range(k)]
        if g.r.random() < 0.3:
            sf = [sf[0]]
        args = [['var', s], ['none'], ['ints', [float(v) for v in sf], 't']]
    if op.name in ('upsample_nearest', 'upsample_bilinear'):
        return dict(args=args, style='function')
    args.append(['str', mode])
    if mode not in ('nearest', 'nearest-exact', 'area') and g.r.random() < 0.6:
        args.append(['bool', g.r.random() < 0.5])
    if op.name == 'interpolate' and args[2][0] == 'ints' and g.r.random() < 0.3:
        if len(args) == 4:
            args.append(['none'])
        args.append(['bool', True])
    if op.name == 'interpolate' and mode in ('bilinear', 'bicubic') and g.r.random() < 0.4:
        while len(args) < 6:  # antialias (grid family: upsample_aa)
            args.append(['none'])
        args.append(['bool', True])
    return dict(args=args, style='function')


def _py_interp(name):
    def py(st, pa, pk):
        a = list(pa)
        fl = st['args'][2]
        if fl[0] == 'ints':  # one number or a tuple, as the Lua side passes it
            a[2] = repr(fl[1][0]) if len(fl[1]) == 1 else '(' + ', '.join(repr(v) for v in fl[1]) + ',)'
        sz = st['args'][1]
        if sz[0] == 'ints' and len(sz[1]) == 1:
            a[1] = str(sz[1][0])
        return 'torch.nn.functional.%s(%s)' % (name, ', '.join(a))
    return py


MAP = {
    'pad': dict(gen=gen_pad),
    'constant_pad_nd': dict(gen=gen_constant_pad_nd, weight=0.5),
    'pad_mode': dict(gen=gen_pad, py=_py_pad_mode, weight=0.5),
    'pad_mode_backward': dict(gen=gen_pad_mode_backward, py=_py_pad_mode_backward, weight=0.3),
    'pad_circular': dict(gen=gen_pad, py=_py_pad_circular, weight=0.5),
    'pad_circular_backward': dict(gen=_no_gen, weight=0.01),
    'interpolate': dict(gen=gen_interpolate, py=_py_interp('interpolate')),
    'upsample': dict(gen=gen_interpolate, py=_py_interp('upsample'), weight=0.3),
    'upsample_nearest': dict(gen=gen_interpolate, py=_py_interp('upsample_nearest'), weight=0.3),
    'upsample_bilinear': dict(gen=gen_interpolate, py=_py_interp('upsample_bilinear'), weight=0.3),
    'upsample_nd': dict(gen=_no_gen, weight=0.01),
    'upsample_nd_backward': dict(gen=_no_gen, weight=0.01),
    # torch 1.13 has no F.scaled_dot_product_attention (2.0+): tested against
    # PyTorch 2.1's math written in torch 1.13 in tests/lua/test_spatial.lua
    'scaled_dot_product_attention': dict(gen=_no_gen, weight=0.01),
}
