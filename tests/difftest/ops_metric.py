"""ops_metric.py -- difftest entries of the metric family (bilinear,
cosine_similarity, pairwise_distance, pdist, cdist, normalize and the
losses); see ops.py for the format.

The distance ops need partners of fitting shapes: each generator picks a
program tensor and makes (or finds) one. cdist draws batch dims that
broadcast, p in {0, 0.5, 1, 1.5, 2, 3, inf} and every compute_mode (so both
the direct kernel and the matrix-product path run).

Accepted differences with PyTorch 1.13 (none is drawn):
- cosine_similarity and normalize of float16: torch has no CPU clamp_min
  for Half ("not implemented for 'Half'"); ember computes them.
- cdist of bfloat16 with the matrix-product path: torch computes it (its
  direct kernel refuses bfloat16, as ember's kernels refuse both half
  types); ember refuses bfloat16 on both paths. Drawn on float32/float64.
- bilinear of inputs whose last dim is 0: torch 1.13 cannot flatten them
  (reshape(-1, 0) is ambiguous) and refuses; ember returns zeros (plus
  bias). Drawn with in1, in2 > 0.
- pairwise_distance with p = 0 on a tensor that requires grad: torch's
  norm gives no gradient (None), ember's zeros (as norm, ops_linalg.py).
  Drawn without requires_grad.
- double backward through pdist and cdist's direct kernel: torch 1.13 has
  none ("the derivative for '_cdist_backward' is not implemented"); ember
  records the create_graph backward with ops. gen.py drops the statements
  where torch raises that (one line there).
- _euclidean_dist (cdist's p = 2 matrix-product path) of coinciding float32
  rows: |a|^2 + |b|^2 - 2 a.b cancels to a rounding residue whose square
  root (~1e-3) depends on the BLAS's summation order; ember and torch may
  differ there (seen once in 2500 seeds of this family).
- triplet_margin_loss of bfloat16: the distances round differently in the
  norm (a few bfloat16 ulps on the loss). Drawn on float32/float64.
- multi_margin_loss with a weight shorter than C: torch reads past its end;
  ember refuses it. Of an empty input ({0, C}): torch's mean reads
  uninitialised memory; ember's is NaN (mean of nothing). Neither drawn.
- the losses are composites: where a gradient is piecewise constant in the
  input (multi_margin_loss, hinge's and margin_ranking's linear pieces),
  ember's create_graph gradient has no history (requires_grad false) where
  torch's backward kernel node (NotImplemented) makes it require grad;
  gen.py rejects such gradients (_not_implemented_grad). At NaN/inf inputs
  the gradients of multilabel_soft_margin_loss's log-sigmoids can differ
  (NaN against inf).
- _pdist_backward and _cdist_backward are autograd's helpers (called with
  the forward's result); they are not drawn on their own, but every
  backward through pdist/cdist in a program runs them.
"""
import math

from ops import *  # noqa: F401,F403
from ops import _mat_partner

INF = float('inf')


def _floating(t):
    return t.dtype in (torch.float32, torch.float64)


def gen_bilinear(g, op):
    # in1, in2 > 0: torch 1.13 cannot flatten an input whose last dim is 0
    s = g.pick(pred=lambda t: t.dim() >= 1 and _floating(t) and t.dim() <= 3 and t.shape[-1] > 0)
    if s is None:
        return None
    t = g.t(s)
    dt = g.dtype_name(t)
    in2 = g.r.choice([1, 2, 3])
    out = g.r.choice([0, 1, 2, 3])
    x2, pre = _mat_partner(g, s, list(t.shape[:-1]) + [in2], dt)
    w, pre2 = _mat_partner(g, s, [out, t.shape[-1], in2], dt)
    args = [['var', s], x2, w]
    pre = pre + pre2
    if g.r.random() < 0.5:
        b, pre3 = _mat_partner(g, s, [out], dt)
        args.append(b)
        pre = pre + pre3
    return dict(args=args, pre=pre, style='function')


def _bcast_partner(g, s, t):
    """A partner of t's shape, with some dims 1 (broadcast) or dropped."""
    shape = [n if g.r.random() < 0.8 else 1 for n in t.shape]
    if shape and g.r.random() < 0.2:
        shape = shape[1:]
    dt = g.dtype_name(t) if g.r.random() < 0.85 else g.dtype(floats_only=True)
    return _mat_partner(g, s, shape, dt)


def gen_cosine_similarity(g, op):
    s = g.pick(pred=lambda t: t.dtype != torch.bool)
    if s is None:
        return None
    t = g.t(s)
    other, pre = _bcast_partner(g, s, t)
    args = [['var', s], other]
    if g.r.random() < 0.7 or t.dim() < 2:
        args.append(g.dim_arg(g.r.randrange(max(t.dim(), 1)), max(t.dim(), 1)))
        if g.r.random() < 0.4:
            args.append(['num', g.r.choice([1e-8, 0.5, 0.0])])
    return dict(args=args, pre=pre, style='function')


def _p(g, with_zero=True):
    return ['num', g.r.choice(([0.0] if with_zero else []) + [0.5, 1.0, 1.5, 2.0, 3.0, INF])]


def _rg(g, *args):
    """Whether a drawn argument (['var', name]) requires grad."""
    return any(a[0] == 'var' and g.t(a[1]).requires_grad for a in args)


def gen_pairwise_distance(g, op):
    s = g.pick(pred=lambda t: t.dtype != torch.bool)
    if s is None:
        return None
    t = g.t(s)
    other, pre = _bcast_partner(g, s, t)
    args = [['var', s], other]
    if g.r.random() < 0.7:
        # p = 0 only without grad: torch's norm gives no gradient there (None), ember zeros
        args.append(_p(g, with_zero=not pre and not _rg(g, args[0], other)))
        if g.r.random() < 0.5:
            args.append(['num', g.r.choice([1e-6, 0.0, 0.5])])
            if g.r.random() < 0.5:
                args.append(['bool', g.r.random() < 0.5])
    return dict(args=args, pre=pre, style='function')


def gen_pdist(g, op):
    s = g.pick(pred=lambda t: t.dim() == 2 and _floating(t))
    if s is None:
        return None
    args = [['var', s]]
    if g.r.random() < 0.7:
        args.append(_p(g))
    return dict(args=args, style='function')


def _cdist_pair(g, s, t):
    """A partner for cdist: batch dims that broadcast with t's, same columns."""
    batch = [n if g.r.random() < 0.8 else 1 for n in t.shape[:-2]]
    if batch and g.r.random() < 0.2:
        batch = batch[1:]
    rows = g.r.choice([0, 1, 2, 3, 4])
    return _mat_partner(g, s, batch + [rows, t.shape[-1]], g.dtype_name(t))


def gen_cdist(g, op):
    s = g.pick(pred=lambda t: 2 <= t.dim() <= 4 and _floating(t))
    if s is None:
        return None
    t = g.t(s)
    other, pre = _cdist_pair(g, s, t)
    args = [['var', s], other]
    if g.r.random() < 0.8:
        args.append(_p(g))
        if g.r.random() < 0.6:
            args.append(['str', g.r.choice(['use_mm_for_euclid_dist_if_necessary', 'use_mm_for_euclid_dist',
                                            'donot_use_mm_for_euclid_dist'])])
    return dict(args=args, pre=pre, style='function')


def _same_batch_pair(g, s, t):
    rows = g.r.choice([0, 1, 2, 3])
    return _mat_partner(g, s, list(t.shape[:-2]) + [rows, t.shape[-1]], g.dtype_name(t))


def gen_cdist_forward(g, op):
    s = g.pick(pred=lambda t: 2 <= t.dim() <= 4 and _floating(t))
    if s is None:
        return None
    t = g.t(s)
    other, pre = _same_batch_pair(g, s, t)
    return dict(args=[['var', s], other, _p(g)], pre=pre, style='function')


def gen_euclidean_dist(g, op):
    s = g.pick(pred=lambda t: 2 <= t.dim() <= 4 and _floating(t))
    if s is None:
        return None
    t = g.t(s)
    other, pre = _same_batch_pair(g, s, t)
    return dict(args=[['var', s], other], pre=pre, style='function')


def _py_cdist_forward(st, pa, pk):
    return 'torch.ops.aten._cdist_forward(%s, %s, %s, None)' % (pa[0], pa[1], pa[2])


def _py_pdist_forward(st, pa, pk):
    return 'torch.ops.aten._pdist_forward(%s)' % ', '.join(pa)


def gen_normalize(g, op):
    s = g.pick(pred=lambda t: t.dim() >= 1 and t.is_floating_point() and t.dtype != torch.float16)
    if s is None:
        return None
    t = g.t(s)
    args = [['var', s]]
    if g.r.random() < 0.8 or t.dim() < 2:
        args.append(_p(g))
        args.append(g.dim_arg(g.r.randrange(t.dim()), t.dim()))
        if g.r.random() < 0.4:
            args.append(['num', g.r.choice([1e-12, 0.5])])
    return dict(args=args, style='function')


# ---- losses ----

def _red(g, kw):
    if g.r.random() < 0.6:
        kw['reduction'] = ['str', g.r.choice(['mean', 'sum', 'none'])]
    return kw


def _same(g, s, t, floats=True):
    dt = g.dtype_name(t) if g.r.random() < 0.85 or not floats else g.dtype(floats_only=True)
    return _mat_partner(g, s, list(t.shape), dt)


def _pick_float(g, pred=None):
    return g.pick(pred=lambda t: t.is_floating_point() and t.dtype != torch.float16 and (pred is None or pred(t)))


def _sign_leaf(g, shape, dtype, values=(1, -1)):
    st = dict(s='leaf', out=g.fresh(), shape=list(shape), dtype=dtype,
              values=[g.r.choice(values) for _ in range(math.prod(shape))], rg=False)
    return ['var', st['out']], [st]


def gen_poisson_nll_loss(g, op):
    s = _pick_float(g)
    if s is None:
        return None
    t = g.t(s)
    tgt, pre = _same(g, s, t)
    args = [['var', s], tgt]
    if g.r.random() < 0.7:
        args += [['bool', g.r.random() < 0.5], ['bool', g.r.random() < 0.5]]
    kw = {}
    if g.r.random() < 0.3:
        kw['eps'] = ['num', g.r.choice([1e-8, 0.5])]
    return dict(args=args, kw=_red(g, kw), pre=pre, style='function')


def gen_gaussian_nll_loss(g, op):
    s = _pick_float(g, lambda t: t.dim() >= 1)
    if s is None:
        return None
    t = g.t(s)
    tgt, pre = _same(g, s, t)
    shape = list(t.shape)
    vshape = g.r.choice([shape, shape[:-1], shape[:-1] + [1]])
    var, pre2 = _mat_partner(g, s, vshape, g.dtype_name(t))
    args = [['var', s], tgt, var]
    if g.r.random() < 0.6:
        args.append(['bool', g.r.random() < 0.5])
        if g.r.random() < 0.6:
            args.append(['num', g.r.choice([1e-6, 0.5])])
            if g.r.random() < 0.7:
                args.append(['str', g.r.choice(['mean', 'sum', 'none'])])
    return dict(args=args, pre=pre + pre2, style='function')


def gen_cosine_embedding_loss(g, op):
    s = _pick_float(g, lambda t: t.dim() in (1, 2))
    if s is None:
        return None
    t = g.t(s)
    other, pre = _same(g, s, t)
    tshape = [] if t.dim() == 1 else [t.shape[0]]
    tgt, pre2 = _sign_leaf(g, tshape, g.r.choice(['int64', 'float32']), (1, -1, 1, -1, 0))
    args = [['var', s], other, tgt]
    if g.r.random() < 0.5:
        args.append(['num', g.r.choice([0.0, 0.5, -0.3])])
    return dict(args=args, kw=_red(g, {}), pre=pre + pre2, style='function')


def gen_margin_ranking_loss(g, op):
    s = _pick_float(g)
    if s is None:
        return None
    t = g.t(s)
    other, pre = _same(g, s, t)
    tgt, pre2 = _same(g, s, t)
    args = [['var', s], other, tgt]
    if g.r.random() < 0.5:
        args.append(['num', g.r.choice([0.0, 0.5, -0.3])])
    return dict(args=args, kw=_red(g, {}), pre=pre + pre2, style='function')


def gen_triplet_margin_loss(g, op):
    s = g.pick(pred=_floating)  # bfloat16: the rounding of pairwise_distance's norm differs (docstring)
    if s is None:
        return None
    t = g.t(s)
    b, pre = _same(g, s, t)
    c, pre2 = _same(g, s, t)
    args = [['var', s], b, c]
    if g.r.random() < 0.6:
        args.append(['num', g.r.choice([1.0, 0.5, 0.0, 2.0])])
        if g.r.random() < 0.6:
            args.append(_p(g, with_zero=False))
            if g.r.random() < 0.5:
                args += [['num', g.r.choice([1e-6, 0.0])], ['bool', g.r.random() < 0.5]]
    return dict(args=args, kw=_red(g, {}), pre=pre + pre2, style='function')


def gen_hinge_embedding_loss(g, op):
    s = _pick_float(g)
    if s is None:
        return None
    t = g.t(s)
    tgt, pre = _sign_leaf(g, list(t.shape), g.r.choice(['int64', 'float32', g.dtype_name(t)]), (1, -1, 1, -1, 0))
    args = [['var', s], tgt]
    if g.r.random() < 0.5:
        args.append(['num', g.r.choice([1.0, 0.5, -0.5])])
    return dict(args=args, kw=_red(g, {}), pre=pre, style='function')


def gen_multi_margin_loss(g, op):
    s = g.pick(pred=lambda t: t.dim() in (1, 2) and _floating(t) and t.numel() > 0)
    if s is None:
        return None
    t = g.t(s)
    C = t.shape[-1]
    tshape = [t.shape[0]] if t.dim() == 2 else g.r.choice([[], [1]])
    st = dict(s='leaf', out=g.fresh(), shape=tshape, dtype='int64',
              values=[g.r.randint(1, C) for _ in range(math.prod(tshape))], rg=False)
    g.frozen.add(st['out'])
    g.novalues.add(st['out'])  # torch gets target - 1 (ops_index.py's _int_leaf)
    args, pre = [['var', s], ['var', st['out']]], [st]
    if g.r.random() < 0.6:
        args += [['int', g.r.choice([1, 2])], ['num', g.r.choice([1.0, 0.5, 0.0])]]
        if g.r.random() < 0.5:
            w, pre2 = _mat_partner(g, s, [C], g.dtype_name(t))
            args.append(w)
            pre = pre + pre2
    return dict(args=args, kw=_red(g, {}), pre=pre, style='function')


def _py_multi_margin_loss(st, pa, pk):
    pa = list(pa)
    pa[1] = '(%s - 1)' % pa[1]
    kws = ['%s=%s' % kv for kv in sorted(pk.items())]
    return 'torch.nn.functional.multi_margin_loss(%s)' % ', '.join(pa + kws)


def gen_soft_margin_loss(g, op):
    s = _pick_float(g)
    if s is None:
        return None
    t = g.t(s)
    tgt, pre = _same(g, s, t)
    return dict(args=[['var', s], tgt], kw=_red(g, {}), pre=pre, style='function')


def gen_multilabel_soft_margin_loss(g, op):
    s = _pick_float(g)
    if s is None:
        return None
    t = g.t(s)
    tgt, pre = _same(g, s, t)
    args = [['var', s], tgt]
    if t.dim() >= 1 and g.r.random() < 0.4:
        w, pre2 = _mat_partner(g, s, [t.shape[-1]], g.dtype_name(t))
        args.append(w)
        pre = pre + pre2
    return dict(args=args, kw=_red(g, {}), pre=pre, style='function')


MAP = {
    'bilinear': dict(gen=gen_bilinear),
    'cosine_similarity': dict(gen=gen_cosine_similarity),
    'pairwise_distance': dict(gen=gen_pairwise_distance),
    'pdist': dict(gen=gen_pdist),
    '_pdist_forward': dict(gen=gen_pdist, py=_py_pdist_forward, weight=0.3),
    '_pdist_backward': dict(weight=0),
    'cdist': dict(gen=gen_cdist, weight=2),
    '_cdist_forward': dict(gen=gen_cdist_forward, py=_py_cdist_forward, weight=0.3),
    '_cdist_backward': dict(weight=0),
    '_euclidean_dist': dict(gen=gen_euclidean_dist, weight=0.3),
    'normalize': dict(gen=gen_normalize),
    'poisson_nll_loss': dict(gen=gen_poisson_nll_loss),
    'gaussian_nll_loss': dict(gen=gen_gaussian_nll_loss),
    'cosine_embedding_loss': dict(gen=gen_cosine_embedding_loss),
    'margin_ranking_loss': dict(gen=gen_margin_ranking_loss),
    'triplet_margin_loss': dict(gen=gen_triplet_margin_loss),
    'hinge_embedding_loss': dict(gen=gen_hinge_embedding_loss),
    'multi_margin_loss': dict(gen=gen_multi_margin_loss, py=_py_multi_margin_loss),
    'soft_margin_loss': dict(gen=gen_soft_margin_loss),
    'multilabel_soft_margin_loss': dict(gen=gen_multilabel_soft_margin_loss),
}
