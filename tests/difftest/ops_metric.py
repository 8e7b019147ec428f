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
}
