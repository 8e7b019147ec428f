"""ops_unary.py -- difftest entries of the unary family (schema/ops/unary.yaml).

Every op of the family is generated generically (self from the program,
numbers for Scalar bounds); this file sets how often each is drawn (the
family has ~100 overloads: drawn at full weight they would crowd out the
rest), gives the out= overloads the out= generator of ops.py, and generates
round(decimals=...) (an int keyword argument).

Differences accepted (also in the report to the lead):
  - float16: torch 1.13 has no CPU kernel for most of these ops on float16
    ("not implemented for 'Half'", statements the generator drops); ember
    computes them in float32 and rounds.
"""
from ops import *  # noqa: F401,F403
from ops import _gen_out

_MATH = ('rsqrt expm1 log1p log2 log10 sin cos tan asin acos atan sinh cosh asinh acosh atanh '
         'reciprocal square sgn deg2rad rad2deg floor ceil round trunc frac').split()


def gen_round_decimals(g, op):
    """round(x, {decimals = d}) with d in -2..3; torch refuses integer input."""
    self_name = g.pick(inplace=op.inplace)
    if self_name is None:
        return None
    return dict(args=[['var', self_name]], kw={'decimals': ['int', g.r.randint(-2, 3)]}, pre=[])


MAP = {}
for _n in _MATH:
    MAP[_n] = dict(weight=0.35)
    MAP[_n + '_'] = dict(weight=0.2)
    MAP[_n + '.out'] = dict(gen=_gen_out(gen_generic), weight=0.08)
MAP['round.decimals'] = dict(gen=gen_round_decimals, weight=0.4)
MAP['round_.decimals'] = dict(gen=gen_round_decimals, weight=0.3)
MAP['round.decimals_out'] = dict(gen=_gen_out(gen_round_decimals), weight=0.1)
