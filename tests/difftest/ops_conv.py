"""ops_conv.py -- difftest entries of the conv family (convolution and its
backward op, conv1d/2d/3d, conv_transpose1d/2d/3d, unfold, fold); see
ops.py for the format.

Each generator makes an input (an existing tensor of a fitting rank, or a
new leaf) and a weight (and sometimes a bias) that fit it, with random
stride, padding (numbers, lists, "same"/"valid"), dilation, groups and
output_padding; most combinations are valid, some are not, so refusals
are compared too.

Accepted differences with PyTorch 1.13:
- dtypes: ember computes float16 convolutions (and bfloat16 transposed
  ones) in float32; torch has no CPU kernel ("not implemented for 'Half'"),
  and the generator drops torch's refusal. torch runs integer convolutions
  (slow_conv2d for int64) and unfold/fold refuse them; ember refuses integer
  convolutions ("expected a floating-point input"); not drawn.
- non-finite values: ember's products run over im2col columns, where an
  inf or NaN meets the zeros of the padding (or a zero weight) and gives
  NaN; torch's float32 kernels (mkldnn, depthwise) skip the padding and
  give a finite or infinite value there, its float64 im2col path agrees
  with ember. The generator draws finite inputs and weights for these ops.
- convolution_backward: ember's output_mask is three 0/1 integers (torch's
  bool[3]); a result left out by it (or grad_bias without bias_sizes) is an
  empty {0} tensor in ember and None in torch. Drawn with every flag set
  and bias_sizes given.
- double backward through a convolution of an empty batch (N = 0): torch's
  _convolution_double_backward gives no gradient (None) to grad_output,
  input and weight; ember's formulas give zeros (empty ones for the
  input). Inputs are drawn with a non-empty batch (test_conv.lua covers
  empty batches).
"""
from ops import *  # noqa: F401,F403

FLOATS = ('float32', 'float64')


def _float_dtype(g):
    return g.r.choice(['float32', 'float32', 'float64'])


def _ints(g, vals, nsp):
    """a list argument: one number (when all values agree, sometimes) or a list"""
    if all(v == vals[0] for v in vals) and g.r.random() < 0.5:
        return ['int', vals[0]]
    return ['ints', list(vals), 't']


def _leaf(g, shape, dtype):
    """a new leaf of finite values (see the docstring: non-finite values)"""
    edge, g.edge = g.edge, 0.0
    try:
        return g.leaf(shape=shape, dtype=dtype)
    finally:
        g.edge = edge


def _input(g, nsp, dtype=None, batched=True, wide=False):
    """(name, pre): an input of nsp spatial dims (+ channels, + batch); wide:
    a new one of 8..16 channels and planes up to 9 (see _conv_parts)"""
    nd = nsp + 2 if batched else nsp + 1
    cand = g.pick(pred=lambda t: t.dim() == nd and t.dtype in (torch.float32, torch.float64)
                  and all(s > 0 for s in t.shape) and bool(t.isfinite().all()))
    if cand is not None and g.r.random() < 0.3 and not wide:
        t = g.t(cand)
        return cand, [], list(t.shape), g.dtype_name(t)
    shape = []
    if batched:
        shape.append(g.r.choice([1, 1, 2, 3]))
    if wide:
        shape.append(g.r.choice([8, 9, 12, 16]))
        shape += [g.r.choice([1, 2, 3, 5, 8, 9]) for _ in range(nsp)]
    else:
        shape.append(g.r.choice([1, 2, 2, 3, 4]))
        shape += [g.r.choice([1, 2, 3, 4, 5, 6]) for _ in range(nsp)]
    dt = dtype or _float_dtype(g)
    name, st = _leaf(g, shape, dtype=dt)
    return name, [st], shape, dt


def _conv_parts(g, nsp, transposed, allow_same, wide=True):
    batched = g.r.random() < 0.8
    # sometimes (wide) the Winograd path's shapes (Note [Winograd
    # convolution] in conv_winograd.c: 2-d, 3x3, stride 1, dilation 1,
    # groups 1, >= 8 channels each side); the draw is taken back when it
    # says no, so the other programs are the ones the seeds drew before
    wino = False
    if wide and nsp == 2:
        state = g.r.getstate()
        wino = g.r.random() < 0.2
        if not wino:
            g.r.setstate(state)
    x, pre, xshape, dt = _input(g, nsp, batched=batched, wide=wino)
    C = xshape[1 if batched else 0]
    sp = list(xshape[-nsp:])
    divs = [d for d in (1, 2, 3, 4) if C % d == 0]
    groups = g.r.choice(divs) if g.r.random() < 0.4 and not wino else 1
    per = g.r.choice([1, 2, 3]) if not wino else g.r.choice([7, 8, 9, 12])
    k = [g.r.choice([1, 2, 3]) if not wino else 3 for _ in range(nsp)]
    if transposed:
        wshape = [C, per] + k
        cout = per * groups
    else:
        cout = groups * per
        wshape = [cout, C // groups] + k
    w, st = _leaf(g, wshape, dtype=dt)
    pre.append(st)
    bias = ['none']
    if g.r.random() < 0.5:
        b, st = _leaf(g, [cout], dtype=dt)
        pre.append(st)
        bias = ['var', b]
    stride = [g.r.choice([1, 1, 2, 3]) if not wino else 1 for _ in range(nsp)]
    dil = [g.r.choice([1, 1, 2]) if not wino else 1 for _ in range(nsp)]
    if not transposed:  # mostly a kernel that fits the padded input
        pad = [g.r.choice([0, 0, 1, 2] if not wino else [0, 1, 1, 2, 3]) for _ in range(nsp)]
    else:
        pad = [g.r.choice([0, 0, 1]) for _ in range(nsp)]
    padding = _ints(g, pad, nsp)
    if allow_same and g.r.random() < 0.3:
        padding = ['str', g.r.choice(['same', 'valid'])]
        if padding[1] == 'same' and g.r.random() < 0.9:
            stride = [1] * nsp
    opad = [g.r.randint(0, max(s, d) - 1) for s, d in zip(stride, dil)]
    return x, w, bias, stride, padding, dil, groups, opad, pre, xshape


def gen_conv(nsp, transposed=False):
    def gen(g, op):
        x, w, bias, stride, padding, dil, groups, opad, pre, _ = _conv_parts(
            g, nsp, transposed, allow_same=op.name.endswith('.padding'))
        if op.name.endswith('.padding') and padding[0] != 'str':
            padding = ['str', 'valid']
        if not op.name.endswith('.padding') and padding[0] == 'str':
            return None
        args = [['var', x], ['var', w], bias, _ints(g, stride, nsp), padding]
        if transposed:
            args += [_ints(g, opad, nsp), ['int', groups], _ints(g, dil, nsp)]
        else:
            args += [_ints(g, dil, nsp), ['int', groups]]
        # trailing defaults left out at random (bias then as nil)
        cut = g.r.randint(2, len(args)) if g.r.random() < 0.3 else len(args)
        return dict(args=args[:cut], pre=pre, style='function')
    return gen


def gen_convolution(g, op):
    nsp = g.r.choice([1, 2, 2, 3])
    transposed = g.r.random() < 0.4
    x, w, bias, stride, padding, dil, groups, opad, pre, xshape = _conv_parts(g, nsp, transposed, False)
    if len(xshape) != nsp + 2:
        return None
    pad = padding[1] if padding[0] == 'ints' else [padding[1]] * nsp
    return dict(args=[['var', x], ['var', w], bias, ['ints', stride, 't'], ['ints', pad, 't'],
                      ['ints', dil, 't'], ['bool', transposed], ['ints', opad if transposed else [0] * nsp, 't'],
                      ['int', groups]], pre=pre, style='function')


def gen_convolution_backward(g, op):
    nsp = g.r.choice([1, 2, 2, 3])
    transposed = g.r.random() < 0.4
    # wide shapes too: the double-backward differences they drew (results
    # requiring grad through weight when only grad_bias got a gradient) are
    # fixed -- missing gradients reach conv_dd_grad_output as NULL
    x, w, bias, stride, padding, dil, groups, opad, pre, xshape = _conv_parts(g, nsp, transposed, False)
    if len(xshape) != nsp + 2:
        return None
    pad = padding[1] if padding[0] == 'ints' else [padding[1]] * nsp
    try:
        wshape = next(st['shape'] for st in pre if st.get('out') == w)
        y = torch.convolution(torch.zeros(xshape, dtype=torch.float64), torch.zeros(wshape, dtype=torch.float64),
                              None, stride, pad, dil, transposed, opad if transposed else [0] * nsp, groups)
    except RuntimeError:
        return None
    go, st = _leaf(g, list(y.shape), dtype=next(st['dtype'] for st in pre if st.get('out') == w))
    pre.append(st)
    return dict(args=[['var', go], ['var', x], ['var', w], ['ints', [y.shape[1]], 't'], ['ints', stride, 't'],
                      ['ints', pad, 't'], ['ints', dil, 't'], ['bool', transposed],
                      ['ints', opad if transposed else [0] * nsp, 't'], ['int', groups], ['ints', [1, 1, 1], 't']],
                pre=pre, style='function')


def _py_convolution_backward(st, pa, pk):
    return 'torch.ops.aten.convolution_backward(%s, [True, True, True])' % ', '.join(pa[:-1])


def gen_unfold(g, op):
    batched = g.r.random() < 0.8
    x, pre, _, _ = _input(g, 2, batched=batched)
    k = [g.r.choice([1, 2, 3]) for _ in range(2)]
    args = [['var', x], _ints(g, k, 2)]
    for vals in ([g.r.choice([1, 1, 2]) for _ in range(2)], [g.r.choice([0, 0, 1]) for _ in range(2)],
                 [g.r.choice([1, 1, 2]) for _ in range(2)]):
        if g.r.random() < 0.6:
            args.append(_ints(g, vals, 2))
        else:
            break
    return dict(args=args, pre=pre, style='function')


def gen_fold(g, op):
    batched = g.r.random() < 0.8
    H, W = g.r.randint(1, 5), g.r.randint(1, 5)
    k = [g.r.choice([1, 2, 3]) for _ in range(2)]
    d = [g.r.choice([1, 1, 2]) for _ in range(2)]
    p = [g.r.choice([0, 0, 1]) for _ in range(2)]
    s = [g.r.choice([1, 1, 2]) for _ in range(2)]
    L = 1
    for i, n in enumerate((H, W)):
        L *= max(0, (n + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1)
    if g.r.random() < 0.1:
        L += 1  # refused by both
    C = g.r.choice([1, 2])
    shape = ([g.r.choice([0, 1, 2])] if batched else []) + [C * k[0] * k[1], L]
    x, st = _leaf(g, shape, dtype=_float_dtype(g))
    return dict(args=[['var', x], _ints(g, [H, W], 2), _ints(g, k, 2), _ints(g, d, 2), _ints(g, p, 2),
                      _ints(g, s, 2)], pre=[st], style='function')


MAP = {
    'convolution': dict(gen=gen_convolution, weight=0.5),
    'convolution_backward': dict(gen=gen_convolution_backward, py=_py_convolution_backward, weight=0.4),
    'conv1d': dict(gen=gen_conv(1), weight=0.5),
    'conv1d.padding': dict(gen=gen_conv(1), weight=0.3),
    'conv2d': dict(gen=gen_conv(2), weight=0.8),
    'conv2d.padding': dict(gen=gen_conv(2), weight=0.4),
    'conv3d': dict(gen=gen_conv(3), weight=0.4),
    'conv3d.padding': dict(gen=gen_conv(3), weight=0.3),
    'conv_transpose1d': dict(gen=gen_conv(1, True), weight=0.5),
    'conv_transpose2d': dict(gen=gen_conv(2, True), weight=0.6),
    'conv_transpose3d': dict(gen=gen_conv(3, True), weight=0.4),
    'functional_unfold': dict(gen=gen_unfold, weight=0.5),
    'fold': dict(gen=gen_fold, weight=0.5),
}
