"""ops_loss2.py -- difftest entries of the loss2 family (binary_cross_entropy,
binary_cross_entropy_with_logits, kl_div, ctc_loss); see Note [Schema
files] in ops.py.

binary_cross_entropy by gen_bce: an input leaf with values in [0, 1]
(sometimes exactly 0 or 1) and a target leaf of its shape and dtype in
[0, 1], sometimes a weight leaf of a shape that broadcasts to it and a
reduction. binary_cross_entropy_with_logits by gen_bce_logits: a floating
tensor of the program, a target leaf of its shape (values in [0, 1],
sometimes of the other float dtype: the result has target's dtype, as
torch), sometimes weight and pos_weight leaves that broadcast. kl_div by
gen_kl_div (a target leaf that broadcasts; non-negative values unless
log_target; every reduction incl. batchmean). ctc_loss by gen_ctc: a
(T, N, C) or unbatched (T, C) log_probs leaf (values in [-3, 0]), padded or
concatenated 1-based labels other than blank (the torch side shifts labels
and blank down by one), lengths as lists or int64 tensors. The backward
ops (binary_cross_entropy_backward,
binary_cross_entropy_with_logits_backward, _ctc_loss, _ctc_loss_backward:
ember's argument lists, 1-based ctc labels) are not drawn: test_loss2.lua
checks them against PyTorch's gradients and second derivatives, and the
gradcheck runs through them.

Accepted differences with PyTorch 1.13:
- binary_cross_entropy's weight and binary_cross_entropy_with_logits's
  weight/pos_weight that broadcast to input: the same values; torch's
  weight of another float dtype than input is refused by nothing and cast,
  as ember's (drawn with one dtype).
- binary_cross_entropy_with_logits on float16: torch has no CPU kernel
  ("clamp_min_cpu" not implemented for 'Half'); ember computes in float32
  (drawn with float32/float64 only).
- ctc_loss: ember refuses a target label equal to blank or outside 1..C,
  negative lengths and float targets (torch reads whatever memory lies
  there, or casts); an input length of 0 gives 0 (empty target) or inf
  (torch reads before the start of its alpha table). Drawn with valid
  labels and input lengths >= 1. The loss is computed in double in both
  dtypes (torch in float for float32): float32 values agree to rounding.
"""
from ops import *  # noqa: F401,F403
from ops_index import _int_leaf


def _unit_values(g, n):
    """n values in [0, 1], a few exactly 0 or 1."""
    out = []
    for _ in range(n):
        r = g.r.random()
        out.append(0.0 if r < 0.05 else 1.0 if r < 0.1 else round(g.r.uniform(0.01, 0.99), 3))
    return out


def _bcast_shape(g, shape):
    """A shape that broadcasts to shape (a suffix, some sizes 1)."""
    s = shape[g.r.randint(0, len(shape)):] if shape else []
    return [1 if g.r.random() < 0.4 else n for n in s]


def _weight_leaf(g, shape, dt, pre):
    name, st = g.leaf(shape=_bcast_shape(g, shape), dtype=dt, rg=False)
    st['values'] = [abs(v) if isinstance(v, float) else v for v in st['values']]
    pre.append(st)
    return ['var', name]


def gen_bce(g, op):
    dt = g.r.choice(['float32', 'float64'])
    nd = g.r.choice([0, 1, 2, 2, 3])
    shape = [g.r.choice([0, 1, 2, 3, 4]) for _ in range(nd)]
    x, sx = g.leaf(shape=shape, dtype=dt)
    t, stt = g.leaf(shape=shape, dtype=dt)
    n = 1
    for s in shape:
        n *= s
    sx['values'], stt['values'] = _unit_values(g, n), _unit_values(g, n)
    pre = [sx, stt]
    args = [['var', x], ['var', t]]
    if g.r.random() < 0.4:
        args.append(_weight_leaf(g, shape, dt, pre))
    kw = {}
    if g.r.random() < 0.7:
        kw['reduction'] = ['str', g.r.choice(['mean', 'sum', 'none'])]
    return dict(args=args, kw=kw, pre=pre, style='function')


def gen_bce_logits(g, op):
    s = g.pick(pred=lambda t: t.dtype in (torch.float32, torch.float64))
    if s is None:
        return None
    x = g.t(s)
    shape = list(x.shape)
    dt = g.dtype_name(x)
    tdt = g.r.choice(['float32', 'float64']) if g.r.random() < 0.15 else dt
    t, st = g.leaf(shape=shape, dtype=tdt)
    st['values'] = _unit_values(g, x.numel())
    pre = [st]
    args = [['var', s], ['var', t]]
    kw = {}
    if g.r.random() < 0.4:
        args.append(_weight_leaf(g, shape, tdt, pre))
    if g.r.random() < 0.6:
        kw['reduction'] = ['str', g.r.choice(['mean', 'sum', 'none'])]
    if g.r.random() < 0.4:
        kw['pos_weight'] = _weight_leaf(g, shape, tdt, pre)
    return dict(args=args, kw=kw, pre=pre, style='function')


def gen_kl_div(g, op):
    s = g.pick(pred=lambda t: t.dtype in (torch.float32, torch.float64))
    if s is None:
        return None
    x = g.t(s)
    shape = list(x.shape)
    if g.r.random() < 0.3:
        shape = _bcast_shape(g, shape)
    name, st = g.leaf(shape=shape, dtype=g.dtype_name(x))
    kw = {}
    log_target = g.r.random() < 0.4
    if log_target:
        kw['log_target'] = ['bool', True]
    else:
        st['values'] = [abs(v) if isinstance(v, float) else v for v in st['values']]
    if g.r.random() < 0.8:
        kw['reduction'] = ['str', g.r.choice(['mean', 'batchmean', 'sum', 'none'])]
    return dict(args=[['var', s], ['var', name]], kw=kw, pre=[st], style='function')


def gen_ctc(g, op):
    """ctc_loss (lengths as lists) or ctc_loss.Tensor (int64 tensors)."""
    dt = g.r.choice(['float32', 'float64'])
    T, C = g.r.randint(1, 6), g.r.randint(2, 5)
    batched = g.r.random() < 0.8
    N = g.r.randint(1, 3) if batched else 1
    shape = [T, N, C] if batched else [T, C]
    lp, st = g.leaf(shape=shape, dtype=dt)
    st['values'] = [round(g.r.uniform(-3, 0), 3) for _ in range(T * N * C)]
    blank = g.r.randint(1, C)
    labels = [k for k in range(1, C + 1) if k != blank]
    il = [g.r.randint(1, T) for _ in range(N)]
    tl = [g.r.randint(0, min(3, il[b])) for b in range(N)]
    pre = [st]
    if batched and g.r.random() < 0.5:
        vals = [g.r.choice(labels) for b in range(N) for _ in range(tl[b])]
        tshape = [len(vals)]
    else:
        S = max(tl) + g.r.randint(0, 1)
        vals = [g.r.choice(labels) if j < tl[b] else 0 for b in range(N) for j in range(S)]
        tshape = [N, S] if batched else [S]
    if not batched and g.r.random() < 0.5:  # 1-d: exactly tl labels
        vals = [g.r.choice(labels) for _ in range(tl[0])]
        tshape = [tl[0]]
    elif not batched:  # (1, S) padded
        tshape = [1, S]
    tg, tpre = _int_leaf(g, tshape, vals)
    pre += tpre
    if op.name == 'ctc_loss':
        lens = [['ints', il, 't'], ['ints', tl, 't']]
    else:
        lens = []
        for v in (il, tl):
            a, p = _int_leaf(g, [len(v)] if batched or g.r.random() < 0.5 else [], v)
            lens.append(a)
            pre += p
    kw = {}
    if blank != 1 or g.r.random() < 0.3:
        kw['blank'] = ['int', blank]
    if g.r.random() < 0.7:
        kw['reduction'] = ['str', g.r.choice(['mean', 'sum', 'none'])]
    if g.r.random() < 0.3:
        kw['zero_infinity'] = ['bool', True]
    return dict(args=[['var', lp], tg] + lens, kw=kw, pre=pre, style='function')


def _py_ctc(st, pa, pk):
    """torch's ctc_loss with 0-based labels (padding 0 stays harmless: it
    is past each target length) and blank."""
    pa = list(pa)
    pa[1] = '(%s - 1).clamp_min(0)' % pa[1]
    pk = dict(pk)
    pk['blank'] = '(%s - 1)' % pk['blank'] if 'blank' in pk else '0'
    kws = ['%s=%s' % kv for kv in sorted(pk.items())]
    return 'torch.nn.functional.ctc_loss(%s)' % ', '.join(pa + kws)


MAP = {
    'binary_cross_entropy': dict(gen=gen_bce),
    'binary_cross_entropy_with_logits': dict(gen=gen_bce_logits),
    'kl_div': dict(gen=gen_kl_div),
    'ctc_loss': dict(gen=gen_ctc, py=_py_ctc),
    'ctc_loss.Tensor': dict(gen=gen_ctc, py=_py_ctc),
    'binary_cross_entropy_backward': dict(gen=lambda g, op: None),
    'binary_cross_entropy_with_logits_backward': dict(gen=lambda g, op: None),
    '_ctc_loss': dict(gen=lambda g, op: None),
    '_ctc_loss_backward': dict(gen=lambda g, op: None),
}
