"""ops_unary.py -- difftest entries of the unary family (schema/ops/unary.yaml).

Every op of the family is generated generically (self from the program,
numbers for Scalar bounds); this file sets how often each is drawn (the
family has ~100 overloads: drawn at full weight they would crowd out the
rest), gives the out= overloads the out= generator of ops.py, and generates
round(decimals=...) (an int keyword argument).

Differences accepted (also in the report to the lead):
  - acosh_, asinh_, atanh_ on a tensor that requires grad: torch 1.13's
    derivative is "not implemented" for the in-place forms; ember has
    them (the out-of-place formulas, gradchecked). Drawn only on tensors
    that do not require grad.
  - logical_not_ of a tensor that requires grad: torch 1.13 writes even a
    leaf (or a view of one) and keeps the old history, so the old gradient
    passes through unchanged; ember refuses leaves as for every in-place op
    and gives the step function's zero gradient. Drawn only on tensors
    that do not require grad.
  - signbit of NaN: the sign of a NaN depends on how it was made (Lua's 0/0
    is a negative NaN on x86, Python's float('nan') positive); signbit is
    drawn on NaN-free tensors.
  - clamp with a number beside a tensor bound (clamp(x, 0.5, t)): torch's
    Python binding refuses it, or reads a 0-dim t as a number (the Scalar
    overload); ember converts the number (clamp.Tensor). Not drawn.
  - Rounding amplified: libm's float32 functions (expm1f, tanf, ...) and
    torch's vectorised ones may differ by an ulp; a later op with a large
    derivative (tan near pi/2) can turn that into a visible difference.
  - clamp with tensor bounds that broadcast past self: torch 1.13's
    backward raises (it writes the gradient in self's shape); ember reduces
    it to self's shape. Not drawn when self requires grad.
  - float16: torch 1.13 has no CPU kernel for most of these ops on float16
    ("not implemented for 'Half'", statements the generator drops); ember
    computes them in float32 and rounds.
"""
from ops import *  # noqa: F401,F403
from ops import _gen_out

_MATH = ('rsqrt expm1 log1p log2 log10 sin cos tan asin acos atan sinh cosh asinh acosh atanh '
         'reciprocal square sgn deg2rad rad2deg floor ceil round trunc frac erf erfc erfinv lgamma digamma').split()


def gen_round_decimals(g, op):
    """round(x, {decimals = d}) with d in -2..3; torch refuses integer input."""
    self_name = g.pick(inplace=op.inplace)
    if self_name is None:
        return None
    return dict(args=[['var', self_name]], kw={'decimals': ['int', g.r.randint(-2, 3)]}, pre=[])


def gen_clamp_tensor(g, op):
    """clamp.Tensor and friends with tensor bounds only (nil for an absent
    one): torch's Python binding refuses a number beside a tensor bound, or
    reads a 0-dim tensor beside a number as a number (the Scalar overload),
    where ember converts the number to a tensor (clamp.Tensor): an accepted
    difference of the bindings, not drawn."""
    self_name = g.pick(inplace=op.inplace)
    if self_name is None:
        return None
    args, pre = [['var', self_name]], []
    nb = len([a for a in op.args[1:] if not a.kwonly])
    which = g.r.choice([(True, True), (True, False), (False, True)]) if nb == 2 else (True,)
    for present in which:
        if not present:
            args.append(['none'])
            continue
        v, p = g.partner(self_name, inplace=op.inplace, allow_number=False)
        args.append(v)
        pre += p
    while args[-1] == ['none']:
        args.pop()
    # torch 1.13's clamp backward writes self's gradient in self's shape:
    # bounds that broadcast past self make its backward raise ("output with
    # shape ... doesn't match the broadcast shape"), where ember reduces the
    # gradient to self's shape. Not drawn when self requires grad.
    t = g.t(self_name)
    if not op.inplace and t.requires_grad:
        leaves = {st.get('out'): st.get('shape') for st in pre if st.get('s') == 'leaf'}
        shapes = [tuple(t.shape)]
        for a in args[1:]:
            if a[0] == 'var':
                shapes.append(tuple(leaves[a[1]]) if a[1] in leaves else tuple(g.t(a[1]).shape))
        try:
            if tuple(torch.broadcast_shapes(*shapes)) != tuple(t.shape):
                return None
        except RuntimeError:
            pass
    return dict(args=args, kw={}, pre=pre)


def gen_clamp_scalar(g, op):
    """clamp with number bounds: one or both (nil for an absent min)."""
    self_name = g.pick(inplace=op.inplace)
    if self_name is None:
        return None
    which = g.r.choice([(True, True), (True, False), (False, True)])
    args = [['var', self_name]] + [g.number() if p else ['none'] for p in which]
    while args[-1] == ['none']:
        args.pop()
    return dict(args=args, kw={}, pre=[])


def gen_signbit(g, op):
    """signbit of tensors without NaN: the sign of a NaN depends on how it
    was made (Lua's 0/0, which the renderer writes for NaN, is a negative
    NaN on x86; Python's float('nan') a positive one)."""
    res = gen_generic(g, op)
    if res is None or bool(g.t(res['args'][0][1]).detach().isnan().any()):
        return None
    return res


def gen_polygamma(g, op):
    """polygamma(n, x) / x:polygamma(n) with n in 0..3."""
    self_name = g.pick(inplace=False)
    if self_name is None:
        return None
    return dict(args=[['int', g.r.randint(0, 3)], ['var', self_name]], kw={}, pre=[])


MAP = {}
for _n in _MATH:
    MAP[_n] = dict(weight=0.35)
    MAP[_n + '_'] = dict(weight=0.2)
    MAP[_n + '.out'] = dict(gen=_gen_out(gen_generic), weight=0.08)
for _n in ('clamp', 'clamp_min', 'clamp_max'):
    _g = gen_clamp_scalar if _n == 'clamp' else gen_generic
    MAP[_n] = dict(gen=_g, weight=0.4)
    MAP[_n + '_'] = dict(gen=_g, weight=0.25)
    MAP[_n + '.out'] = dict(gen=_gen_out(_g), weight=0.1)
    MAP[_n + '.Tensor'] = dict(gen=gen_clamp_tensor, weight=0.4)
    MAP[_n + '_.Tensor'] = dict(gen=gen_clamp_tensor, weight=0.25)
    MAP[_n + '.Tensor_out'] = dict(gen=_gen_out(gen_clamp_tensor), weight=0.1)
MAP['clip'] = dict(gen=gen_clamp_scalar, weight=0.15)
MAP['clip_'] = dict(gen=gen_clamp_scalar, weight=0.1)
MAP['clip.Tensor'] = dict(gen=gen_clamp_tensor, weight=0.15)
MAP['clip_.Tensor'] = dict(gen=gen_clamp_tensor, weight=0.1)
MAP['fix'] = dict(weight=0.15)
MAP['fix_'] = dict(weight=0.1)
for _n in ('isnan', 'isinf', 'isfinite', 'isposinf', 'isneginf', 'signbit', 'logical_not', 'bitwise_not'):
    MAP[_n] = dict(weight=0.3)
MAP['signbit'] = dict(gen=gen_signbit, weight=0.3)
MAP['logical_not.out'] = dict(gen=_gen_out(gen_generic), weight=0.1)
MAP['bitwise_not_'] = dict(weight=0.2)


def _gen_logical_not_(g, op):
    """An in-place call into a tensor that does not require grad (docstring:
    logical_not_, acosh_, asinh_, atanh_)."""
    s = g.pick(pred=lambda t: not t.requires_grad, inplace=True)
    return None if s is None else dict(args=[['var', s]], kw={}, pre=[])


MAP['logical_not_'] = dict(gen=_gen_logical_not_, weight=0.2)
# torch 1.13 has no derivative for acosh_, asinh_, atanh_ (docstring)
for _n in ('acosh_', 'asinh_', 'atanh_'):
    MAP[_n] = dict(gen=_gen_logical_not_, weight=0.2)
MAP['bitwise_not.out'] = dict(gen=_gen_out(gen_generic), weight=0.1)
MAP['nan_to_num'] = dict(weight=0.4)
MAP['nan_to_num_'] = dict(weight=0.25)
MAP['nan_to_num.out'] = dict(gen=_gen_out(gen_generic), weight=0.1)
MAP['polygamma'] = dict(gen=gen_polygamma, weight=0.3)
MAP['polygamma.out'] = dict(gen=_gen_out(gen_polygamma), weight=0.1)
MAP['round.decimals'] = dict(gen=gen_round_decimals, weight=0.4)
MAP['round_.decimals'] = dict(gen=gen_round_decimals, weight=0.3)
MAP['round.decimals_out'] = dict(gen=_gen_out(gen_round_decimals), weight=0.1)
