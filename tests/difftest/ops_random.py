"""ops_random.py -- difftest entries of the random family.

Our generator (Philox4x32-10, Note [Random numbers]) differs from torch's,
so random values are never compared: a random result is `novalues` (its
shape, dtype, requires_grad and whether it raised are). Where a
distribution can be made degenerate the call is drawn that way now and
then, and then the values are compared too: uniform_(a, a) is a,
normal_(m, 0) / normal(mean, 0) is the mean, cauchy_(m, 0) is m,
random_(k, k + 1) is k, bernoulli with probabilities 0 and 1 is exact.
Samplers whose values are always random (exponential_, log_normal_,
geometric_, random_()) run on a fresh `empty` tensor, so no compared
tensor holds their values.

Creation: eye, linspace, logspace (values compared: ember follows torch's
kernel, Note [linspace like PyTorch]; float results may differ in the last
ulp), tril_indices/triu_indices (1-based: torch's result + 1),
empty_strided (novalues), the _like factories (generic; empty_like
novalues).

Accepted differences: normal(mean, std) with a mean or std that requires
grad: torch's result requires grad and gets zero gradients (its formula),
ember's has no history (a zero formula would contradict the finite
differences of mean + std * z, so it is not written); the generator draws
normal only on tensors that do not require grad. randperm is 1-based in
ember (its values are never compared). Generators (`{generator = g}` in
ember) are never drawn.
"""
from ops import *  # noqa: F401,F403
from ops import _rand_shape, _plus1, FLOAT_DTYPES

INT_DTYPES = ['int64', 'int32', 'int8', 'uint8']


def _empty(g, shape, dtype):
    """A pre statement making a fresh `empty` tensor (never compared)."""
    name = g.fresh()
    st = dict(s='call', op='empty', style='function', args=[['ints', shape, 't']],
              kw={'dtype': ['dtype', dtype]}, outs=[name], novalues=True)
    return name, st


def _leaf_values(g, shape, dtype, values):
    n = 1
    for s in shape:
        n *= s
    name = g.fresh()
    st = dict(s='leaf', out=name, shape=list(shape), dtype=dtype,
              values=[values(i) for i in range(n)], rg=False)
    return name, st


def gen_randint(g, op):
    shape = _rand_shape(g)
    lo = g.r.randint(-3, 3)
    hi = lo + g.r.randint(0 if g.r.random() < 0.1 else 1, 6)
    args = [['int', lo], ['int', hi]] if op.name == 'randint.low' or g.r.random() < 0.5 else [['int', hi]]
    if op.name == 'randint' and len(args) == 2:
        args = [['int', hi]]
    args.append(['ints', shape, 't'])
    kw = {}
    if g.r.random() < 0.5:
        kw['dtype'] = ['dtype', g.r.choice(INT_DTYPES + FLOAT_DTYPES)]
    return dict(args=args, kw=kw, style='function', novalues=True)


def gen_randperm(g, op):
    kw = {}
    if g.r.random() < 0.4:
        kw['dtype'] = ['dtype', g.r.choice(['int64', 'int32', 'float32', 'float64'])]
    return dict(args=[['int', g.r.randint(0, 6)]], kw=kw, style='function', novalues=True)


def gen_like(g, op):
    s = g.pick()
    if s is None:
        return None
    args = [['var', s]]
    if op.name.startswith('randint_like'):
        lo = g.r.randint(0, 3)
        hi = lo + g.r.randint(1, 5)
        args += [['int', lo], ['int', hi]] if op.name.endswith('.low') else [['int', hi]]
    kw = {}
    if g.r.random() < 0.4:
        kw['dtype'] = ['dtype', g.r.choice(FLOAT_DTYPES)]
    return dict(args=args, kw=kw, style='function', novalues=True)


def gen_bernoulli(g, op):
    """bernoulli(p): p a fresh leaf of probabilities; all 0/1 (exact) or not."""
    shape = _rand_shape(g)
    exact = g.r.random() < 0.5
    p, st = _leaf_values(g, shape, g.r.choice(FLOAT_DTYPES),
                         lambda i: float(g.r.randint(0, 1)) if exact else g.r.choice([0.0, 0.25, 0.5, 1.0]))
    return dict(args=[['var', p]], pre=[st], novalues=not exact)


def gen_bernoulli_p(g, op):
    s = g.pick()
    if s is None:
        return None
    p = g.r.choice([0.0, 1.0, 0.3])
    return dict(args=[['var', s], ['num', p]], novalues=p not in (0.0, 1.0))


def gen_multinomial(g, op):
    rows = [] if g.r.random() < 0.5 else [g.r.randint(0, 3)]
    ncat = g.r.randint(1, 4)
    w, st = _leaf_values(g, rows + [ncat], g.r.choice(FLOAT_DTYPES),
                         lambda i: g.r.choice([0.0, 0.5, 1.0, 2.0]))
    repl = g.r.random() < 0.5
    n = g.r.randint(1, 5 if repl else ncat)
    return dict(args=[['var', w], ['int', n], ['bool', repl]], pre=[st], novalues=True)


def _mean_ok(t):
    # README "Differences accepted": ember's normal has no formula, so its
    # result has no history where torch's requires grad (zero gradients)
    return t.dtype.is_floating_point and not t.requires_grad


def gen_normal(g, op):
    s = g.pick(pred=_mean_ok)
    if s is None:
        return None
    std = g.r.choice([0.0, 0.0, 1.0, 2.5])
    return dict(args=[['var', s], ['num', std]], style='function', novalues=std != 0.0)


def gen_normal_tt(g, op):
    s = g.pick(pred=_mean_ok)
    if s is None:
        return None
    shape = [1 if g.r.random() < 0.3 else n for n in g.t(s).shape]
    zero = g.r.random() < 0.5
    sd, st = _leaf_values(g, shape, g.r.choice(FLOAT_DTYPES), lambda i: 0.0 if zero else 1.5)
    args = [['var', s], ['var', sd]] if g.r.random() < 0.7 else [['var', sd], ['var', s]]
    # mean and std swapped: still exact when std (now s) ... is not known: no values
    exact = zero and args[1][1] == sd
    return dict(args=args, pre=[st], style='function', novalues=not exact)


def gen_normal_ff(g, op):
    std = g.r.choice([0.0, 1.0])
    kw = {}
    if g.r.random() < 0.4:
        kw['dtype'] = ['dtype', g.r.choice(FLOAT_DTYPES)]
    return dict(args=[['num', g.r.choice([0.0, -1.5, 2.0])], ['num', std], ['ints', _rand_shape(g), 't']],
                kw=kw, style='function', novalues=std != 0.0)


def gen_poisson(g, op):
    zero = g.r.random() < 0.4
    r, st = _leaf_values(g, _rand_shape(g), g.r.choice(FLOAT_DTYPES),
                         lambda i: 0.0 if zero else g.r.choice([0.0, 0.5, 3.0, 20.0]))
    return dict(args=[['var', r]], pre=[st], style='function', novalues=not zero)


def _gen_degenerate(make_args):
    """An in-place sampler drawn with degenerate parameters on a program
    tensor (values compared)."""
    def gen(g, op):
        s = g.pick(inplace=True)
        if s is None:
            return None
        return dict(args=[['var', s]] + make_args(g))
    return gen


def _gen_fresh(make_args, dtypes=FLOAT_DTYPES):
    """An in-place sampler on a fresh empty tensor (values never compared)."""
    def gen(g, op):
        name, st = _empty(g, _rand_shape(g), g.r.choice(dtypes))
        return dict(args=[['var', name]] + make_args(g), pre=[st], novalues=True)
    return gen


def _num(g, choices):
    return ['num', g.r.choice(choices)]


MAP = {
    'randint': dict(gen=gen_randint, weight=0.2),
    'randint.low': dict(gen=gen_randint, weight=0.2),
    'randperm': dict(gen=gen_randperm, weight=0.2),
    'rand_like': dict(gen=gen_like, weight=0.2),
    'randn_like': dict(gen=gen_like, weight=0.2),
    'randint_like': dict(gen=gen_like, weight=0.2),
    'randint_like.low': dict(gen=gen_like, weight=0.2),
    'bernoulli': dict(gen=gen_bernoulli, weight=0.3),
    'bernoulli.p': dict(gen=gen_bernoulli_p, weight=0.3),
    'multinomial': dict(gen=gen_multinomial, weight=0.3),
    'normal': dict(gen=gen_normal, weight=0.3),
    'normal.Tensor_Tensor': dict(gen=gen_normal_tt, weight=0.3),
    'normal.float_float': dict(gen=gen_normal_ff, weight=0.2),
    'poisson': dict(gen=gen_poisson, weight=0.2),
    'uniform_': dict(gen=_gen_degenerate(lambda g: [_num(g, [0.0, -1.5, 2.0])] * 2), weight=0.4),
    'normal_': dict(gen=_gen_degenerate(lambda g: [_num(g, [0.0, 1.5, -3.0]), ['num', 0.0]]), weight=0.4),
    'cauchy_': dict(gen=_gen_degenerate(lambda g: [_num(g, [0.0, 1.5]), ['num', 0.0]]), weight=0.2),
    'random_.from': dict(gen=_gen_degenerate(lambda g: (lambda k: [['int', k], ['int', k + 1]])(g.r.randint(0, 3))), weight=0.3),
    'random_.to': dict(gen=_gen_degenerate(lambda g: [['int', 1]]), weight=0.2),
    'bernoulli_.float': dict(gen=_gen_degenerate(lambda g: [_num(g, [0.0, 1.0])]), weight=0.3),
    'random_': dict(gen=_gen_fresh(lambda g: [], FLOAT_DTYPES + INT_DTYPES + ['bool']), weight=0.2),
    'exponential_': dict(gen=_gen_fresh(lambda g: [_num(g, [0.5, 2.0])]), weight=0.2),
    'log_normal_': dict(gen=_gen_fresh(lambda g: [_num(g, [0.0, 1.0]), _num(g, [0.5, 1.0])]), weight=0.2),
    'geometric_': dict(gen=_gen_fresh(lambda g: [_num(g, [0.25, 0.5])]), weight=0.2),
    # p as a tensor of 0s and 1s broadcast to self: exact
    'bernoulli_.Tensor': dict(gen=lambda g, op: _gen_bern_t(g), weight=0.2),
}


def _gen_bern_t(g):
    s = g.pick(inplace=True)
    if s is None:
        return None
    shape = [1 if g.r.random() < 0.3 else n for n in g.t(s).shape]
    p, st = _leaf_values(g, shape, g.r.choice(FLOAT_DTYPES), lambda i: float(g.r.randint(0, 1)))
    return dict(args=[['var', s], ['var', p]], pre=[st])


# ---- creation ----

def _kw_dtype(g, choices, p=0.5):
    return {'dtype': ['dtype', g.r.choice(choices)]} if g.r.random() < p else {}


def gen_eye(g, op):
    args = [['int', g.r.randint(0, 4)]]
    if op.name == 'eye.m':
        args.append(['int', g.r.randint(0, 4)])
    return dict(args=args, kw=_kw_dtype(g, ['float32', 'float64', 'int64', 'int32', 'bool', 'uint8']),
                style='function')


def gen_spaced(g, op):
    def scal():
        return ['int', g.r.randint(-6, 6)] if g.r.random() < 0.5 else ['num', g.r.randint(-24, 24) / 8.0]
    args = [scal(), scal(), ['int', g.r.randint(0, 40)]]
    if op.name == 'logspace':
        args = [['num', g.r.randint(-8, 8) / 4.0], ['num', g.r.randint(-8, 8) / 4.0], ['int', g.r.randint(0, 12)]]
        if g.r.random() < 0.5:
            args.append(['num', g.r.choice([2.0, 10.0, 0.5, 3.0])])
    dts = ['float32', 'float64', 'int64', 'int32', 'int8'] if op.name == 'linspace' else ['float32', 'float64']
    return dict(args=args, kw=_kw_dtype(g, dts), style='function')


def gen_tri_indices(g, op):
    args = [['int', g.r.randint(0, 4)], ['int', g.r.randint(0, 4)]]
    if g.r.random() < 0.6:
        args.append(['int', g.r.randint(-3, 3)])
    return dict(args=args, kw=_kw_dtype(g, ['int64', 'int32'], 0.3), style='function')


def gen_empty_strided(g, op):
    shape = _rand_shape(g)
    stride = [g.r.randint(0, 4) for _ in shape]
    return dict(args=[['ints', shape, 't'], ['ints', stride, 't']],
                kw=_kw_dtype(g, ['float32', 'float64', 'int64']), style='function', novalues=True)


MAP.update({
    'eye': dict(gen=gen_eye, weight=0.2),
    'eye.m': dict(gen=gen_eye, weight=0.2),
    'linspace': dict(gen=gen_spaced, weight=0.3),
    'logspace': dict(gen=gen_spaced, weight=0.2),
    'tril_indices': dict(gen=gen_tri_indices, post=_plus1, weight=0.2),
    'triu_indices': dict(gen=gen_tri_indices, post=_plus1, weight=0.2),
    'empty_strided': dict(gen=gen_empty_strided, weight=0.2),
    'empty_like': dict(gen=lambda g, op: (lambda s: None if s is None else dict(
        args=[['var', s]], kw=_kw_dtype(g, FLOAT_DTYPES + ['int64']), style='function', novalues=True))(g.pick()),
        weight=0.2),
    'zeros_like': dict(weight=0.3), 'ones_like': dict(weight=0.3), 'full_like': dict(weight=0.3),
})

# ---- conversions (hand-written methods of runtime/lua) ----

EXTRA = [
    ('type.dtype(Tensor self, dtype dtype) -> Tensor', 'method'),
    ('to.other(Tensor self, Tensor other) -> Tensor', 'method'),
]

MAP.update({
    'type.dtype': dict(weight=0.3),
    'to.other': dict(gen=lambda g, op: (lambda s, o: None if s is None or o is None else dict(
        args=[['var', s], ['var', o]]))(g.pick(), g.pick()), weight=0.4),
})
