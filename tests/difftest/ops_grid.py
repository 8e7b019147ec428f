"""ops_grid.py -- difftest entries of the grid family (schema/ops/grid.yaml).

grid_sample (torch: F.grid_sample) and grid_sampler_2d (torch:
torch.grid_sampler_2d with the modes as torch's integers) get a new
(N, C, H, W) float leaf and a grid leaf (N, Ho, Wo, 2) of the same dtype
with the generator's values (many points outside [-1, 1], integers that
land on pixel edges, sometimes NaN/inf), every mode and padding, and now
and then a grid torch refuses (last dim 3, another batch size, another
dtype). grid_sampler_2d_backward (torch: aten.grid_sampler_2d_backward with
output_mask [True, True]) gets a matching grad_output. affine_grid (torch:
F.affine_grid) gets a (N, 2, 3) or (N, 3, 4) theta and a size, sometimes a
wrong one. upsample_aa (torch: F.interpolate(..., antialias=True) with the
mode it stands for) gets a new (N, C, H, W) float leaf and output sizes
1-7 (up and down); interpolate's own generator (ops_spatial.py) also draws
area and antialias=true. upsample_aa_backward is not drawn (no aten
counterpart with ember's arguments): it is gradchecked, and drawn through
upsample_aa's and interpolate's gradients.

rrelu (torch: F.rrelu) and rrelu_ (torch: torch.rrelu_) are drawn in
evaluation mode, or training with lower == upper (the slopes are random,
from another generator than torch's; their range, mean and reproducibility
are tested in tests/lua/test_grid.lua); rrelu_with_noise (torch's takes a
noise tensor to write) is not drawn: it is gradchecked and drawn through
rrelu.

Accepted differences:
  - (no longer a difference: like torch, a create_graph backward through
    grid_sample records grid_sampler_2d_backward's node, whose formulas
    raise "not implemented" only when a second backward reaches it.) The
    generator still gives grid_sampler_2d_backward leaves that do not
    require grad.
  - grid_sampler_2d_backward at non-finite grid points with border or
    reflection padding: torch's vectorised backward keeps a NaN coordinate
    there (its clip propagates NaN in the backward, not in the forward)
    and then reads and writes at the integer that NaN converts to; ember
    clamps NaN to 0 in both directions, as torch's forward does. Seen as
    NaN against -inf/finite values in grad_input/grad_grid (seed 204 of
    --ops grid_sample,...,rrelu_). The generator gives the op
    grid_sampler_2d_backward only finite grid values with those paddings
    (seed 1171 of the default run drew one).

Volumetric sampling: grid_sample draws a 5-d input (N, C, D, H, W) and grid
(N, Do, Ho, Wo, 3) a third of the time; grid_sampler_3d (torch:
torch.grid_sampler_3d) and grid_sampler_3d_backward (torch:
aten.grid_sampler_3d_backward) always. ember follows torch's scalar 3-d
kernel in its non-finite cases too (Note [Volumetric grid sampling] in
grid_sample.c), so NaN/inf grids are drawn there without a difference.
"""
from ops import *  # noqa: F401,F403
import ops as _ops  # noqa: F401
import math as _math
# 5-d grid_sample and grid_sampler_3d(_backward) are drawn
_VOL = True

_MODES = ['bilinear', 'nearest', 'bicubic']
_PADS = ['zeros', 'border', 'reflection']


def _sampler_leaves(g, rg=None, vol=False):
    """(input name, grid name, pre statements, dtype, input shape, grid
    shape); vol: 5-d input and grid (volumetric)"""
    dt = g.r.choice(['float32', 'float64'])
    n = g.r.choices([0, 1, 2], [1, 6, 4])[0]
    nsp = 3 if vol else 2
    shape = [n, g.r.randint(1, 3)] + [g.r.randint(1, 4) for _ in range(nsp)]
    gshape = [n] + [g.r.randint(1, 3) for _ in range(nsp)] + [nsp]
    gdt = dt
    r = g.r.random()
    if r < 0.03:
        gshape[-1] = 5 - nsp
    elif r < 0.06:
        gshape[0] = n + 1
    elif r < 0.08:
        gdt = 'float64' if dt == 'float32' else 'float32'
    a, sa = g.leaf(shape=shape, dtype=dt, rg=rg)
    b, sb = g.leaf(shape=gshape, dtype=gdt, rg=rg)
    return a, b, [sa, sb], dt, shape, gshape


def _mode(g, vol):
    """a mode; bicubic (refused) seldom for 5-d"""
    return g.r.choices(_MODES, [1, 1, 0.15 if vol else 1])[0]


def gen_grid_sample(g, op):
    vol = op.name == 'grid_sampler_3d' or (op.name == 'grid_sample' and _VOL and g.r.random() < 0.33)
    a, b, pre, _, _, _ = _sampler_leaves(g, vol=vol)
    args = [['var', a], ['var', b]]
    if op.name in ('grid_sampler_2d', 'grid_sampler_3d'):
        args += [['str', _mode(g, vol)], ['str', g.r.choice(_PADS)], ['bool', g.r.random() < 0.5]]
    else:
        for v in (['str', _mode(g, vol)], ['str', g.r.choice(_PADS)], ['bool', g.r.random() < 0.5]):
            if g.r.random() < 0.2:
                break
            args.append(v)
    return dict(args=args, pre=pre, style='function')


def gen_grid_sampler_2d_backward(g, op):
    vol = op.name == 'grid_sampler_3d_backward'
    a, b, pre, dt, shape, gshape = _sampler_leaves(g, rg=False, vol=vol)  # see the docstring
    go, st = g.leaf(shape=shape[:2] + gshape[1:-1], dtype=dt, rg=False)
    pad = g.r.choice(_PADS)
    if pad != 'zeros' and not vol:  # the docstring: non-finite 2-d grid points are not drawn here
        pre[1]['values'] = [0.5 if isinstance(v, float) and not _math.isfinite(v) else v
                            for v in pre[1]['values']]
    args = [['var', go], ['var', a], ['var', b], ['str', _mode(g, vol)], ['str', pad],
            ['bool', g.r.random() < 0.5]]
    return dict(args=args, pre=pre + [st], style='function')


_MODE_ID = {'bilinear': 0, 'nearest': 1, 'bicubic': 2}
_PAD_ID = {'zeros': 0, 'border': 1, 'reflection': 2}


def _py_grid_sampler_2d(st, pa, pk):
    return 'torch.%s(%s, %s, %d, %d, %s)' % (
        st['op'], pa[0], pa[1], _MODE_ID[st['args'][2][1]], _PAD_ID[st['args'][3][1]], pa[4])


def _py_grid_sampler_2d_backward(st, pa, pk):
    return 'torch.ops.aten.%s(%s, %s, %s, %d, %d, %s, [True, True])' % (
        st['op'], pa[0], pa[1], pa[2], _MODE_ID[st['args'][3][1]], _PAD_ID[st['args'][4][1]], pa[5])


def gen_affine_grid(g, op):
    nsp = g.r.choice([2, 2, 3])
    n = g.r.choices([0, 1, 2], [1, 6, 4])[0]
    dt = g.r.choice(['float32', 'float64'])
    tshape = [n, nsp, nsp + 1]
    size = [n, g.r.randint(1, 3)] + [g.r.randint(1, 4) for _ in range(nsp)]
    r = g.r.random()
    if r < 0.03:
        size[0] = n + 1
    elif r < 0.05:
        tshape[1] = nsp + 1
    elif r < 0.07:
        size[2] = 0
    t, st = g.leaf(shape=tshape, dtype=dt)
    args = [['var', t], ['ints', size, 't']]
    if g.r.random() < 0.8:
        args.append(['bool', g.r.random() < 0.5])
    return dict(args=args, pre=[st], style='function')


def gen_upsample_aa(g, op):
    dt = g.r.choice(['float32', 'float64'])
    shape = [g.r.choices([0, 1, 2], [1, 6, 3])[0], g.r.randint(1, 2), g.r.randint(1, 7), g.r.randint(1, 7)]
    x, st = g.leaf(shape=shape, dtype=dt)
    size = [g.r.randint(1, 7), g.r.randint(1, 7)]
    args = [['var', x], ['ints', size, 't'], ['str', g.r.choice(['linear', 'cubic'])]]
    if g.r.random() < 0.7:
        args.append(['bool', g.r.random() < 0.5])
    return dict(args=args, pre=[st], style='function')


def _py_upsample_aa(st, pa, pk):
    mode = 'bilinear' if st['args'][2][1] == 'linear' else 'bicubic'
    ac = pa[3] if len(pa) > 3 else 'False'
    return 'torch.nn.functional.interpolate(%s, size=%s, mode=%r, align_corners=%s, antialias=True)' % (
        pa[0], pa[1], mode, ac)


def _no_gen(g, op):
    return None


def _rrelu_bounds(g, training):
    lo = g.r.choice([0.1, 0.125, 0.25, 0.5])
    hi = lo if training else g.r.choice([0.3, 1 / 3, 0.5, 0.05])  # 0.05 < lo: refused
    return ['num', lo], ['num', hi]


def gen_rrelu(g, op):
    inplace = op.name == 'rrelu_'
    x = g.pick(inplace=inplace)
    if x is None:
        return None
    training = g.r.random() < 0.5
    lo, hi = _rrelu_bounds(g, training)
    args = [['var', x], lo, hi, ['bool', training]]
    return dict(args=args, style='function')


MAP = {
    'rrelu': dict(gen=gen_rrelu),
    'rrelu_': dict(gen=gen_rrelu, weight=0.5),
    'rrelu_with_noise': dict(gen=_no_gen, weight=0.01),
    'upsample_aa': dict(gen=gen_upsample_aa, py=_py_upsample_aa, weight=0.5),
    'upsample_aa_backward': dict(gen=_no_gen, weight=0.01),
    'grid_sample': dict(gen=gen_grid_sample),
    'grid_sampler_2d': dict(gen=gen_grid_sample, py=_py_grid_sampler_2d, weight=0.5),
    'grid_sampler_2d_backward': dict(gen=gen_grid_sampler_2d_backward, py=_py_grid_sampler_2d_backward, weight=0.3),
    'grid_sampler_3d': dict(gen=gen_grid_sample, py=_py_grid_sampler_2d, weight=0.5 if _VOL else 0.0),
    'grid_sampler_3d_backward': dict(gen=gen_grid_sampler_2d_backward, py=_py_grid_sampler_2d_backward, weight=0.3 if _VOL else 0.0),
    'affine_grid': dict(gen=gen_affine_grid),
}
