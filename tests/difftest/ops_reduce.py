"""ops_reduce.py -- difftest entries of the reduce family (reductions and
scans); see Note [Schema files] in ops.py.

Accepted differences with PyTorch 1.13 (the generator avoids them):
- median/nanmedian of an empty integer tensor: torch returns an
  uninitialised value (INT64_MIN), ember raises an error.
- cumsum/cumprod/logcumsumexp on float16 (and logcumsumexp on bfloat16):
  torch has no CPU kernel ("not implemented for 'Half'", dropped by the
  generator); ember computes them (in float, as for the other float16 ops).
- median.dim/nanmedian.dim of an expanded tensor (a zero stride): torch
  1.13 reads the rows wrongly (values from outside the tensor); not drawn.
- cummax/cummin backward of an empty input: torch's cummaxmin_backward
  returns the input itself, so the gradient requires grad even without
  create_graph; ember's is a plain empty tensor.
- cumprod_backward is the autograd helper op (aten::cumprod_backward has
  the same arguments but picks an O(n^2) formula when grad mode is on);
  it is not drawn: gradcheck/gradgradcheck of cumprod and test_reduce.lua
  cover it.
"""
from ops import *  # noqa: F401,F403
from ops import _plus1_second


def _not_empty_int(r, g):
    """Drop median/nanmedian of an empty integer tensor (torch returns an
    uninitialised value there; ember refuses)."""
    if r is None:
        return None
    x = g.t(r['args'][0][1])
    if x.numel() == 0 and not x.is_floating_point():
        return None
    return r


def gen_median(g, op):
    return _not_empty_int(gen_generic(g, op), g)


def gen_median_dim(g, op):
    """median.dim/nanmedian.dim, but not of a tensor with a zero stride
    (expanded): torch 1.13 reads such rows wrongly (values from outside the
    tensor), ember reads them as they are."""
    r = gen_generic(g, op)
    if r is None or 0 in g.t(r['args'][0][1]).stride():
        return None
    return r


def gen_kthvalue(g, op):
    """k in 1..size of the dim (0-dim tensors: k = 1)."""
    s = g.pick(pred=lambda t: t.dim() == 0 or t.shape[-1] > 0)
    if s is None:
        return None
    t = g.t(s)
    if t.dim() == 0:
        return dict(args=[['var', s], ['int', 1]])
    d = g.r.randrange(t.dim())
    if t.shape[d] == 0:
        d = t.dim() - 1
    args = [['var', s], ['int', g.r.randint(1, t.shape[d])]]
    if d != t.dim() - 1 or g.r.random() < 0.5:
        args.append(g.dim_arg(d, t.dim()))
        if g.r.random() < 0.5:
            args.append(['bool', g.r.random() < 0.5])
    return dict(args=args)


def gen_diff(g, op):
    """n in -1..3 (-1: self returned), a dim, and sometimes prepend/append
    leaves of self's shape but for their own size along dim."""
    s = g.pick(pred=lambda t: t.dim() > 0)
    if s is None:
        return None
    t = g.t(s)
    d = g.r.randrange(t.dim())
    args, pre = [['var', s], ['int', g.r.choice([-1, 0, 1, 1, 1, 2, 3])], g.dim_arg(d, t.dim())], []
    for _ in range(g.r.choice([0, 0, 1, 2])):
        shape = list(t.shape)
        shape[d] = g.r.randint(0, 2)
        dt = g.dtype_name(t) if g.r.random() < 0.7 else None
        name, st = g.leaf(shape=shape, dtype=dt)
        args.append(['var', name])
        pre.append(st)
    return dict(args=args, pre=pre)


MAP = {
    'diff': dict(gen=gen_diff),
    'cummax': dict(post=_plus1_second),
    'cummin': dict(post=_plus1_second),
    'median': dict(gen=gen_median),
    'nanmedian': dict(gen=gen_median),
    'median.dim': dict(gen=gen_median_dim, post=_plus1_second),
    'nanmedian.dim': dict(gen=gen_median_dim, post=_plus1_second),
    'kthvalue': dict(gen=gen_kthvalue, post=_plus1_second),
    'mode': dict(post=_plus1_second),
    'cumprod_backward': dict(gen=lambda g, op: None),
}

INDEX_RESULTS = {'cummax': [1], 'cummin': [1], 'median.dim': [1], 'nanmedian.dim': [1],
                 'kthvalue': [1], 'mode': [1]}
