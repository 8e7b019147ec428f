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
  create_graph; ember's is a plain empty tensor. Not drawn.
- quantile/nanquantile gradients among tied values: torch sorts with an
  unstable sort beyond 16 elements, so which of equal elements receives the
  gradient differs from ember (whose sort is stable); inputs requiring grad
  are drawn without ties.
- histc of a value within an ulp of an interior bin edge: torch's float
  linspace rounds some edges differently (its vectorised arange), and a
  value computed by a reduction may differ by an ulp; the generator avoids
  the systematic case (all values equal: at the centre of their range).
- unique: always sorted (torch's sorted=False order is its hash table's;
  the generator passes sorted=True); NaN (torch 1.13 reports counts of 0
  and scrambled inverse indices; ember keeps each NaN as its own value,
  last); its results never carry history (torch's require grad and fail
  in backward). The generator draws inputs without NaN that do not
  require grad.
- mode of values with NaN: torch's std::sort with < alone has no defined
  result there; ember orders NaN above numbers (each NaN its own run).
  Not drawn.
- nanmean over a slice of NaNs, backward: the gradient reaching nansum is
  inf there; torch multiplies it by 0 at NaN elements (NaN), ember's
  where-based nansum selects 0. Not drawn (inputs with NaN that require
  grad); the gradcheck samples cover NaN with finite gradients.
- cumprod_backward is the autograd helper op (aten::cumprod_backward has
  the same arguments but picks an O(n^2) formula when grad mode is on);
  it is not drawn: gradcheck/gradgradcheck of cumprod and test_reduce.lua
  cover it.
"""
from ops import *  # noqa: F401,F403
from ops import _plus1_second
import torch


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


INTERPOLATIONS = ['linear', 'lower', 'higher', 'midpoint', 'nearest']


def gen_quantile(g, op):
    """A non-empty float32/float64 tensor, q a number in [0, 1] or a 0-dim or
    1-d leaf of its dtype holding such values (sometimes requiring grad is
    not possible for q: torch's q takes none), maybe a dim, keepdim and an
    interpolation. The interpolation is passed as a 'dtype' argument, which
    the renderer quotes in Lua; _py_quantile spells it for Python."""
    s = g.pick(pred=lambda t: t.dtype in (torch.float32, torch.float64) and t.numel() > 0)
    if s is None:
        return None
    t = g.t(s)
    if t.requires_grad and t.detach().unique().numel() < t.numel():
        return None  # ties: torch's sort (unstable beyond 16) picks which gets the gradient
    pre = []
    qs = [g.r.choice([0.0, 0.25, 0.5, 0.3, 1.0, 0.75, 0.1]) for _ in range(g.r.randint(1, 3))]
    r = g.r.random()
    if r < 0.5:
        q = ['num', qs[0]]
    else:
        shape = [] if r < 0.6 else [len(qs)]
        name, st = g.leaf(shape=shape, dtype=g.dtype_name(t), rg=False)
        st['values'] = qs[:1] if not shape else qs
        st.pop('dtype_given', None)
        pre.append(st)
        q = ['var', name]
    args, kw = [['var', s], q], {}
    if g.r.random() < 0.6:
        args.append(g.dim(s))
        if g.r.random() < 0.5:
            args.append(['bool', g.r.random() < 0.5])
    elif g.r.random() < 0.3:
        kw['keepdim'] = ['bool', True]
    if g.r.random() < 0.7:
        kw['interpolation'] = ['dtype', g.r.choice(INTERPOLATIONS)]
    return dict(args=args, kw=kw, pre=pre)


def _py_quantile(name):
    def py(st, pa, pk):
        k = st.get('recv', 0)
        rest = pa[:k] + pa[k + 1:]
        kws = ['%s=%s' % (n, v) for n, v in zip(['q', 'dim', 'keepdim'], rest)]
        for n, v in sorted(pk.items()):
            kws.append("%s='%s'" % (n, v.replace('torch.', '')) if n == 'interpolation' else '%s=%s' % (n, v))
        return 'torch.%s(%s)' % (name, ', '.join([pa[k]] + kws))
    return py


def gen_bucketize(g, op):
    """Any tensor of values (not bool for torch's sake of dtypes), sorted
    1-d boundaries of a real dtype as a new leaf."""
    s = g.pick(pred=lambda t: t.dtype != torch.bool)
    if s is None:
        return None
    n = g.r.randint(0, 5)
    vals = sorted(g.r.choice([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0]) for _ in range(n))
    dt = g.r.choice(['float32', 'float64', 'int64']) if g.t(s).is_floating_point() else 'int64'
    if dt == 'int64':
        vals = sorted(int(v) for v in vals)
    name, st = g.leaf(shape=[n], dtype=dt, rg=False)
    st['values'] = vals
    st.pop('dtype_given', None)
    kw = {}
    if g.r.random() < 0.5:
        kw['right'] = ['bool', g.r.random() < 0.5]
    if g.r.random() < 0.3:
        kw['out_int32'] = ['bool', True]
    return dict(args=[['var', s], ['var', name]], kw=kw, pre=[st], style='function')


def _py_bucketize(st, pa, pk):
    return '(torch.bucketize(%s) + 1)' % ', '.join(pa + ['%s=%s' % kv for kv in sorted(pk.items())])


def gen_bincount(g, op):
    """A new 1-d leaf of small non-negative integers, maybe weights (an
    existing tensor of that length or a new leaf) and minlength."""
    n = g.r.randint(0, 6)
    dt = g.r.choice(['int64', 'int32', 'uint8', 'int8'])
    name, st = g.leaf(shape=[n], dtype=dt, rg=False)
    st['values'] = [g.r.randint(0, 5) for _ in range(n)]
    st.pop('dtype_given', None)
    pre, args = [st], [['var', name]]
    if g.r.random() < 0.5:
        w = g.pick(pred=lambda t: t.dim() == 1 and t.shape[0] == n and not t.requires_grad
                   and t.dtype != torch.bool)
        if w is None:
            wn, wst = g.leaf(shape=[n], dtype=g.r.choice(['float32', 'float64', 'int64']), rg=False)
            pre.append(wst)
            w = wn
        args.append(['var', w])
        if g.r.random() < 0.5:
            args.append(['int', g.r.randint(0, 7)])
    return dict(args=args, pre=pre)


def gen_histc(g, op):
    """A float32/float64 tensor, bins 1..6 and a range (often the data's)."""
    s = g.pick(pred=lambda t: t.dtype in (torch.float32, torch.float64))
    if s is None:
        return None
    # A single value without a range sits at the centre of [v - 1, v + 1]:
    # an edge when bins is even, where an ulp decides (torch's float
    # linspace rounds its edges in its own vectorised way; a value from a
    # reduction may differ by an ulp): odd bins when all values are equal.
    args = [['var', s]]
    single = g.t(s).numel() > 0 and g.t(s).detach().unique().numel() == 1  # one distinct value
    if g.r.random() < 0.8 or single:
        bins = g.r.randint(1, 6)
        if g.r.random() < 0.6:
            lo = g.r.choice([-2, -1, 0, 0.5])
            args += [['int', bins | 1 if single else bins], ['num', float(lo)],
                     ['num', float(lo + g.r.choice([0, 1, 2.5, 4]))]]
        else:
            args.append(['int', bins | 1 if single else bins])
    return dict(args=args)


def gen_unique(g, op):
    """A tensor without NaN that does not require grad (torch 1.13's unique
    gives NaN counts of 0 and inverse indices out of order, and its results
    require grad where ember's carry no history), sorted=True, the flags."""
    s = g.pick(pred=lambda t: not t.requires_grad and not (t.is_floating_point() and bool(t.isnan().any())))
    if s is None:
        return None
    args, kw = [['var', s]], {}
    if g.r.random() < 0.3:
        args.append(['bool', True])
    for k in ('return_inverse', 'return_counts'):
        if g.r.random() < 0.5:
            kw[k] = ['bool', g.r.random() < 0.7]
    return dict(args=args, kw=kw)


def _py_unique(st, pa, pk):
    k = st.get('recv', 0)
    rest = pa[:k] + pa[k + 1:]
    flags = dict(zip(['sorted', 'return_inverse', 'return_counts'], rest))
    flags.update(pk)
    return '(lambda r: (r[0], r[1] + 1, r[2]))(torch._unique2(%s, %s, %s, %s))' % (
        pa[k], flags.get('sorted', 'True'), flags.get('return_inverse', 'False'),
        flags.get('return_counts', 'False'))


def gen_unique_consecutive(g, op):
    """A tensor that does not require grad (torch's results would require
    grad and fail in backward; ember's carry no history), the flags."""
    s = g.pick(pred=lambda t: not t.requires_grad)
    if s is None:
        return None
    args, kw = [['var', s]], {}
    if g.r.random() < 0.4:
        args.append(['bool', g.r.random() < 0.5])
    if g.r.random() < 0.5:
        kw['return_counts'] = ['bool', g.r.random() < 0.7]
    return dict(args=args, kw=kw)


def _py_unique_consecutive(st, pa, pk):
    k = st.get('recv', 0)
    rest = pa[:k] + pa[k + 1:]
    flags = dict(zip(['return_inverse', 'return_counts'], rest))
    flags.update(pk)
    return '(lambda r: (r[0], r[1] + 1, r[2]))(torch.ops.aten.unique_consecutive(%s, %s, %s))' % (
        pa[k], flags.get('return_inverse', 'False'), flags.get('return_counts', 'False'))


def gen_mode(g, op):
    """mode of a tensor without NaN: torch sorts with < alone, which is
    not an ordering with NaN (its result there is the sort's accident)."""
    r = gen_generic(g, op)
    if r is None:
        return None
    x = g.t(r['args'][0][1])
    if x.is_floating_point() and bool(x.isnan().any()):
        return None
    return r


def gen_cummaxmin(g, op):
    """cummax/cummin, but not of an empty tensor requiring grad (torch's
    cummaxmin_backward returns the input itself there: a gradient that
    requires grad without create_graph)."""
    r = gen_generic(g, op)
    if r is None:
        return None
    x = g.t(r['args'][0][1])
    if x.numel() == 0 and x.requires_grad:
        return None
    return r


def gen_nanmean(g, op):
    """nanmean, but not of a tensor holding NaN that requires grad: over a
    slice of NaNs the incoming gradient is inf, which torch's nansum
    backward multiplies by 0 (NaN) and ember's selects away (0)."""
    r = gen_generic(g, op)
    if r is None:
        return None
    x = g.t(r['args'][0][1])
    if x.requires_grad and x.is_floating_point() and bool(x.detach().isnan().any()):
        return None
    return r


MAP = {
    'nanmean': dict(gen=gen_nanmean),
    'unique_consecutive': dict(gen=gen_unique_consecutive, py=_py_unique_consecutive),
    'unique': dict(gen=gen_unique, py=_py_unique),
    'bucketize': dict(gen=gen_bucketize, py=_py_bucketize),
    'bincount': dict(gen=gen_bincount),
    'histc': dict(gen=gen_histc),
    'quantile': dict(gen=gen_quantile, py=_py_quantile('quantile')),
    'nanquantile': dict(gen=gen_quantile, py=_py_quantile('nanquantile')),
    'diff': dict(gen=gen_diff),
    'cummax': dict(gen=gen_cummaxmin, post=_plus1_second),
    'cummin': dict(gen=gen_cummaxmin, post=_plus1_second),
    'median': dict(gen=gen_median),
    'nanmedian': dict(gen=gen_median),
    'median.dim': dict(gen=gen_median_dim, post=_plus1_second),
    'nanmedian.dim': dict(gen=gen_median_dim, post=_plus1_second),
    'kthvalue': dict(gen=gen_kthvalue, post=_plus1_second),
    'mode': dict(gen=gen_mode, post=_plus1_second),
    'cumprod_backward': dict(gen=lambda g, op: None),
}

INDEX_RESULTS = {'unique': [1], 'unique_consecutive': [1], 'cummax': [1], 'cummin': [1], 'median.dim': [1], 'nanmedian.dim': [1],
                 'kthvalue': [1], 'mode': [1]}
