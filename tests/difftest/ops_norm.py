"""ops_norm.py -- difftest entries of the normalisation family
(layer_norm, batch_norm, group_norm, instance_norm, rms_norm,
local_response_norm and their native_* kernels).

The generators pick (or make) float tensors of the shapes each op takes --
normalized_shape a suffix of the input's shape, weight/bias of the right
shapes, running statistics of the channel count -- and sometimes a wrong
one, so that both systems' refusals are compared too.

Accepted differences (the lead copies them into README.md):
  - native_layer_norm_backward takes PyTorch's output_mask as three bool
    flags (input_mask, weight_mask, bias_mask); a result masked out, or the
    gradient of an absent weight/bias, is an empty tensor in ember and None
    in torch (the Python side maps None to an empty tensor).
  - group_norm of bfloat16 is not drawn: torch 1.13's result is often an ulp
    of bfloat16 below the correctly rounded one (1.0547 where the float32
    result 1.0608 rounds to 1.0625, ember's value), and a steep later op
    (acosh_ near 1, seed 3950 of the run that drew index_put) amplifies
    that beyond the tolerance. float32/float64 group_norm are drawn; the
    same holds for native_group_norm_backward (seed 4895 of the run drawing
    the act2 family), drawn on float32/float64.
"""
import torch

from ops import *  # noqa: F401,F403

FLOATS_ = ['float32', 'float64', 'float32', 'float64', 'bfloat16']


def _float_input(g, min_dim=1, rg=None):
    """An existing float tensor with at least min_dim dims, or a new leaf;
    rg False: one that does not require grad."""
    if g.r.random() < 0.5:
        s = g.pick(pred=lambda t: t.dtype in (torch.float32, torch.float64) and t.dim() >= min_dim
                   and (rg is not False or not t.requires_grad) and (min_dim < 2 or t.shape[1] > 0))
        if s is not None:
            return s, []
    nd = g.r.choice([d for d in (1, 2, 3, 4) if d >= min_dim])
    shape = [g.r.choice([0, 1, 2, 3, 4, 5]) if g.r.random() < 0.1 else g.r.choice([1, 2, 3, 4, 5])
             for _ in range(nd)]
    name, st = g.leaf(shape=shape, dtype=g.r.choice(FLOATS_), rg=rg)
    return name, [st]


def _shape_of(g, name, pre):
    for st in pre:
        if st['out'] == name:
            return list(st['shape']), st['dtype']
    t = g.t(name)
    return list(t.shape), g.dtype_name(t)


def _param(g, shape, dtype, rg=False):
    """A new leaf of shape and dtype (a weight, bias or statistic) with
    finite values; it does not require grad (see the docstring)."""
    name, st = g.leaf(shape=shape, dtype=dtype, rg=rg)
    st['values'] = [1.0 if v in ('nan', 'inf', '-inf') else v for v in st['values']]
    return name, st


def _values_of(g, name, pre):
    for st in pre:
        if st['out'] == name:
            vals = [float(v) for v in st['values']]
            return torch.tensor(vals, dtype=torch.float64).reshape(st['shape'])
    return g.t(name).detach().double()


def _flat_groups(x, n, rel=1e-3):
    """Whether some group of n trailing elements of x has (near-)zero
    variance (below rel times its squared scale), where float32/bfloat16
    rounding of the mean is amplified."""
    if x.numel() == 0 or n == 0:
        return False
    v = x.reshape(-1, n)
    v = v[v.isfinite().all(1)]
    if v.numel() == 0:
        return False
    return bool((v.var(1, unbiased=False) < rel * (1 + v.abs().amax(1) ** 2)).any())


def gen_layer_norm(g, op):
    x, pre = _float_input(g)
    shape, dt = _shape_of(g, x, pre)
    k = g.r.randint(1, min(len(shape), 3))
    ns = shape[len(shape) - k:]
    if g.r.random() < 0.05:  # a wrong normalized_shape: both refuse it
        ns = ns[:-1] + [ns[-1] + 1]
    n = 1
    for d in ns:
        n *= d
    native = op.name == 'native_layer_norm'
    vals = _values_of(g, x, pre)
    if ns != shape[len(shape) - k:]:
        pass
    elif dt != 'float64' and _flat_groups(vals, n, 5e-2 if dt == 'bfloat16' else 1e-2):
        return None
    if native and not bool(vals.isfinite().all()):
        return None  # torch's Welford mean of inf is NaN or inf by position
    args = [['var', x], ['ints', ns]]
    kw = {}
    for what in ('weight', 'bias'):
        if native or g.r.random() < 0.6:
            if native and g.r.random() < 0.3:
                args.append(['none'])
                continue
            n, st = _param(g, ns, dt)
            pre.append(st)
            if native or what == 'weight' and 'bias' not in kw and len(args) == 2:
                args.append(['var', n])
            else:
                kw[what] = ['var', n]
    if native:
        args.append(['num', g.r.choice([1e-5, 1e-3, 0.5])])
    elif g.r.random() < 0.3:
        kw['eps'] = ['num', g.r.choice([1e-5, 1e-3, 0.5])]
    return dict(args=args, kw=kw, pre=pre, style='function')


def gen_layer_norm_backward(g, op):
    """grad_out may require grad; input, weight and bias do not (see the
    docstring: torch's undefined second derivatives)."""
    nd = g.r.choice([1, 2, 3])
    x, st = g.leaf(shape=[g.r.choice([1, 2, 3, 4]) for _ in range(nd)], dtype=g.r.choice(FLOATS_), rg=False)
    pre = [st]
    shape, dt = _shape_of(g, x, pre)
    k = g.r.randint(1, min(len(shape), 2))
    ns = shape[len(shape) - k:]
    stat = shape[:len(shape) - k] + [1] * k
    go, st = g.leaf(shape=shape, dtype=dt)
    pre.append(st)
    mean, st = _param(g, stat, dt, rg=False)
    pre.append(st)
    rstd, st = _param(g, stat, dt)
    st['values'] = [abs(v) if isinstance(v, float) else v for v in st['values']]
    pre.append(st)
    for st in pre:  # non-finite inputs: torch's and ember's NaN/inf propagation differ by arrangement
        st['values'] = [1.0 if v in ('nan', 'inf', '-inf') else v for v in st['values']]
    args = [['var', go], ['var', x], ['ints', ns], ['var', mean], ['var', rstd]]
    for _ in range(2):
        n, st = _param(g, ns, dt)
        st['values'] = [1.0 if v in ('nan', 'inf', '-inf') else v for v in st['values']]
        pre.append(st)
        args.append(['var', n])
    if g.r.random() < 0.5:
        args += [['bool', True] for _ in range(3)]
    return dict(args=args, pre=pre, style='function')


def _py_layer_norm_backward(st, pa, pk):
    mask = pa[7:10] if len(pa) > 7 else ['True', 'True', 'True']
    call = 'torch.ops.aten.native_layer_norm_backward(%s, [%s])' % (', '.join(pa[:7]), ', '.join(mask))
    return ('(lambda r: tuple(torch.empty(0, dtype=%s.dtype) if t is None else t for t in r))(%s)'
            % (pa[1], call))


def gen_batch_norm(g, op):
    """input (N, C, ...) with 2..5 dims; running statistics (sometimes
    None in training) of C finite values, the variance positive; weight and
    bias of C; training, momentum and eps as keywords or positions."""
    training = g.r.random() < 0.6
    x, pre = _float_input(g, min_dim=2, rg=None if training else False)
    shape, dt = _shape_of(g, x, pre)
    C = shape[1]
    if C == 0:
        return None
    native = op.name == 'native_batch_norm'
    sdt = dt  # torch 1.13 refuses float32 statistics of a bfloat16 input in some paths
    stats = []
    for what in ('mean', 'var'):
        if training and g.r.random() < 0.3:
            stats.append(['none'])
            continue
        n, st = _param(g, [C], sdt)
        if what == 'var':
            st['values'] = [abs(v) + 0.5 for v in st['values']]
        pre.append(st)
        stats.append(['var', n])
    n = 1
    for i, d in enumerate(shape):
        if i != 1:
            n *= d
    if training and n == 0:
        return None  # torch's running-statistics update of an empty batch is not a reference
    if training and n <= 1:
        return None if g.r.random() < 0.9 else dict(args=[['var', x]] + stats, kw={'training': ['bool', True]},
                                                    pre=pre, style='function') if not native else None
    if training and dt != 'float64' and n > 0:
        v = _values_of(g, x, pre).transpose(0, 1).reshape(C, -1)
        if _flat_groups(v, v.shape[1], 5e-2 if dt == 'bfloat16' else 1e-2):
            return None
        if not bool(v.isfinite().all()):
            return None
    params = []
    for _ in range(2):
        if native or g.r.random() < 0.6:
            p, st = _param(g, [C], dt)
            pre.append(st)
            params.append(['var', p])
        else:
            params.append(['none'])
    mom = ['num', g.r.choice([0.1, 0.3, 1.0, 0.0])]
    eps = ['num', g.r.choice([1e-5, 1e-3, 0.5])]
    if native:
        args = [['var', x]] + params + stats + [['bool', training], mom, eps]
        return dict(args=args, pre=pre, style='function')
    args = [['var', x]] + stats
    kw = {}
    if g.r.random() < 0.5:
        args += params + [['bool', training]]
    else:
        if params[0][0] == 'var':
            kw['weight'] = params[0]
        if params[1][0] == 'var':
            kw['bias'] = params[1]
        kw['training'] = ['bool', training]
    if g.r.random() < 0.5:
        kw['momentum'] = mom
    if g.r.random() < 0.5:
        kw['eps'] = eps
    return dict(args=args, kw=kw, pre=pre, style='function')


def gen_batch_norm_backward(g, op):
    nd = g.r.choice([2, 3, 4])
    shape = [g.r.choice([2, 3, 4]) for _ in range(nd)]
    dt = g.r.choice(FLOATS_)
    x, st = g.leaf(shape=shape, dtype=dt, rg=False)
    pre = [st]
    go, st = g.leaf(shape=shape, dtype=dt)
    pre.append(st)
    C = shape[1]
    train = g.r.random() < 0.6
    names = []
    for what in ('w', 'rm', 'rv', 'sm', 'si'):
        n, st = _param(g, [C], dt)
        if what in ('rv', 'si'):
            st['values'] = [abs(v) + 0.5 for v in st['values']]
        pre.append(st)
        names.append(n)
    for st in pre:
        st['values'] = [1.0 if v in ('nan', 'inf', '-inf') else v for v in st['values']]
    args = [['var', go], ['var', x], ['var', names[0]], ['var', names[1]], ['var', names[2]],
            ['var', names[3]], ['var', names[4]], ['bool', train], ['num', g.r.choice([1e-5, 0.5])]]
    return dict(args=args, pre=pre, style='function')


def _py_batch_norm_backward(st, pa, pk):
    call = 'torch.ops.aten.native_batch_norm_backward(%s, [True, True, True])' % ', '.join(pa[:9])
    return call


def gen_group_norm(g, op):
    """input (N, C, ...) with C divisible by num_groups (sometimes not)."""
    x, pre = _float_input(g, min_dim=2)
    shape, dt = _shape_of(g, x, pre)
    if dt == 'bfloat16':
        return None  # the docstring: torch's bfloat16 group_norm is an ulp off
    C = shape[1]
    divs = [d for d in range(1, C + 1) if C % d == 0] or [1]
    G = g.r.choice(divs) if g.r.random() < 0.95 else C + 1
    if C % G == 0 and shape[0] > 0 and C > 0:
        v = _values_of(g, x, pre).reshape(shape[0] * G, -1)
        if not bool(v.isfinite().all()) and op.name == 'native_group_norm':
            return None
        if dt != 'float64' and _flat_groups(v, v.shape[1], 5e-2 if dt == 'bfloat16' else 1e-2):
            return None
    native = op.name == 'native_group_norm'
    params = []
    for _ in range(2):
        if native or g.r.random() < 0.6:
            p, st = _param(g, [C], dt)
            pre.append(st)
            params.append(['var', p])
        else:
            params.append(['none'])
    eps = ['num', g.r.choice([1e-5, 1e-3, 0.5])]
    if native:
        return dict(args=[['var', x]] + params + [['int', G], eps], pre=pre, style='function')
    args, kw = [['var', x], ['int', G]], {}
    for name, p in zip(('weight', 'bias'), params):
        if p[0] == 'var':
            kw[name] = p
    if g.r.random() < 0.3:
        kw['eps'] = eps
    return dict(args=args, kw=kw, pre=pre, style='function')


def gen_group_norm_backward(g, op):
    nd = g.r.choice([2, 3, 4])
    shape = [g.r.choice([2, 3, 4]) for _ in range(nd)]
    C = shape[1]
    G = g.r.choice([d for d in range(1, C + 1) if C % d == 0])
    dt = g.r.choice([d for d in FLOATS_ if d != "bfloat16"])  # the docstring
    x, st = g.leaf(shape=shape, dtype=dt, rg=False)
    pre = [st]
    go, st = g.leaf(shape=shape, dtype=dt)
    pre.append(st)
    names = []
    for what, sh in (('m', [shape[0], G]), ('r', [shape[0], G]), ('w', [C])):
        n, st = _param(g, sh, dt)
        if what == 'r':
            st['values'] = [abs(v) + 0.5 for v in st['values']]
        pre.append(st)
        names.append(n)
    for st in pre:
        st['values'] = [1.0 if v in ('nan', 'inf', '-inf') else v for v in st['values']]
    args = [['var', go], ['var', x], ['var', names[0]], ['var', names[1]], ['var', names[2]], ['int', G]]
    return dict(args=args, pre=pre, style='function')


def _py_group_norm_backward(st, pa, pk):
    x = pa[1]
    return ('torch.ops.aten.native_group_norm_backward(%s, %s, %s, %s, %s, %s.shape[0], %s.shape[1], '
            '%s[0, 0].numel(), %s, [True, True, True])' % (pa[0], x, pa[2], pa[3], pa[4], x, x, x, pa[5]))


def _py_native_group_norm(st, pa, pk):
    x = pa[0]
    return ('torch.native_group_norm(%s, %s, %s, %s.shape[0], %s.shape[1], %s[0, 0].numel() if %s.shape[0] * %s.shape[1] '
            'else 1, %s, %s)' % (x, pa[1], pa[2], x, x, x, x, x, pa[3], pa[4]))


def gen_instance_norm(g, op):
    use = g.r.random() < 0.7
    x, pre = _float_input(g, min_dim=3, rg=None if use else False)
    shape, dt = _shape_of(g, x, pre)
    C = shape[1]
    S0 = 1
    for d in shape[2:]:
        S0 *= d
    if C == 0 or S0 == 0 or shape[0] == 0:
        return None  # empty groups: torch's statistics and running update of nothing are not a reference
    if dt == 'bfloat16':
        return None  # torch 1.13 refuses float32 statistics of bfloat16 in some paths; see batch_norm
    S = 1
    for d in shape[2:]:
        S *= d
    if use and S > 1 and dt != 'float64' and shape[0] > 0:
        v = _values_of(g, x, pre).reshape(shape[0] * C, -1)
        if not bool(v.isfinite().all()) or _flat_groups(v, S, 1e-2):
            return None
    kw = {}
    for name in ('running_mean', 'running_var'):
        if not use or g.r.random() < 0.5:
            n, st = _param(g, [C], dt)
            if name == 'running_var':
                st['values'] = [abs(v) + 0.5 for v in st['values']]
            pre.append(st)
            kw[name] = ['var', n]
    for name in ('weight', 'bias'):
        if g.r.random() < 0.5:
            n, st = _param(g, [C], dt)
            pre.append(st)
            kw[name] = ['var', n]
    kw['use_input_stats'] = ['bool', use]
    if g.r.random() < 0.5:
        kw['momentum'] = ['num', g.r.choice([0.1, 0.5, 1.0])]
    if g.r.random() < 0.5:
        kw['eps'] = ['num', g.r.choice([1e-5, 1e-3, 0.5])]
    return dict(args=[['var', x]], kw=kw, pre=pre, style='function')


def gen_rms_norm(g, op):
    x, pre = _float_input(g)
    shape, dt = _shape_of(g, x, pre)
    k = g.r.randint(1, min(len(shape), 2))
    ns = shape[len(shape) - k:]
    if not bool(_values_of(g, x, pre).isfinite().all()):
        return None
    args, kw = [['var', x], ['ints', ns]], {}
    if g.r.random() < 0.5:
        n, st = _param(g, ns, dt)
        pre.append(st)
        kw['weight'] = ['var', n]
    if g.r.random() < 0.5:
        kw['eps'] = ['num', g.r.choice([1e-5, 1e-3, 0.5])]
    return dict(args=args, kw=kw, pre=pre, style='function')


def _py_rms_norm(st, pa, pk):
    """torch 2.4's F.rms_norm written in torch 1.13 (upcast of half types)."""
    x, ns = pa[0], pa[1]
    eps = pk.get('eps', 'torch.finfo(%s.dtype).eps' % x)
    up = '(%s.float() if %s.dtype in (torch.float16, torch.bfloat16) else %s)' % (x, x, x)
    y = ('(lambda u: (u * torch.rsqrt(u.pow(2).mean(tuple(range(-len(%s), 0)), keepdim=True) + %s)).to(%s.dtype))(%s)'
         % (ns, eps, x, up))
    return '(%s * %s)' % (y, pk['weight']) if 'weight' in pk else y


def gen_lrn(g, op):
    x, pre = _float_input(g, min_dim=3)
    shape, dt = _shape_of(g, x, pre)
    args = [['var', x], ['int', g.r.choice([1, 2, 3, 5])]]
    kw = {}
    if g.r.random() < 0.5:
        kw['alpha'] = ['num', g.r.choice([1e-4, 0.5, 1.0])]
    if g.r.random() < 0.5:
        kw['beta'] = ['num', g.r.choice([0.75, 0.5, 2.0])]
    if g.r.random() < 0.5:
        kw['k'] = ['num', g.r.choice([1.0, 2.0, 0.5])]
    return dict(args=args, kw=kw, pre=pre, style='function')


MAP = {
    'instance_norm': dict(gen=gen_instance_norm),
    'rms_norm': dict(gen=gen_rms_norm, py=_py_rms_norm),
    'local_response_norm': dict(gen=gen_lrn),
    'group_norm': dict(gen=gen_group_norm),
    'native_group_norm': dict(gen=gen_group_norm, py=_py_native_group_norm, weight=0.5),
    'native_group_norm_backward': dict(gen=gen_group_norm_backward, py=_py_group_norm_backward, weight=0.4),
    'batch_norm': dict(gen=gen_batch_norm),
    'native_batch_norm': dict(gen=gen_batch_norm, weight=0.5),
    'native_batch_norm_backward': dict(gen=gen_batch_norm_backward, py=_py_batch_norm_backward, weight=0.4),
    'layer_norm': dict(gen=gen_layer_norm),
    'native_layer_norm': dict(gen=gen_layer_norm, weight=0.5),
    'native_layer_norm_backward': dict(gen=gen_layer_norm_backward, py=_py_layer_norm_backward, weight=0.4),
}
