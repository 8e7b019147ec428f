"""ops_act2.py -- difftest entries of the act2 family (schema/ops/act2.yaml).

silu_, mish_, hardsigmoid_ and hardswish_ are drawn as in-place ops on the
program's tensors (torch: torch._C._nn.silu_ etc., which F.silu(inplace=True)
calls). functional_X is ember.nn.functional.X with torch's F signature
(torch: torch.nn.functional.X): inplace is drawn true half the time, then
positionally or in the options table (torch: keyword), on a tensor the
generator lets in-place ops write.

Differences accepted: those of ops_activation.py, which these calls reach
through the same kernels and formulas (NaN arguments of hardtanh, relu6,
elu, selu, celu and +-3 for hardswish are not drawn, for the same reason;
hardsigmoid's float64 gradient differs by ~1e-8 as torch rounds 1/6 to
float32; float16 is computed in float32 where torch 1.13 has no kernel).
"""
import copy

from ops import *  # noqa: F401,F403
import ops_activation

_AVOID_NAN = {'relu6', 'elu', 'selu', 'celu', 'hardtanh'}


def _base_gen(name):
    """The generator ops_activation.py uses for the op NAME (its NaN / +-3
    avoidance), or gen_generic."""
    if name in _AVOID_NAN:
        return ops_activation._gen_avoiding()
    if name == 'hardswish':
        return ops_activation._gen_avoiding(avoid_three=True)
    return gen_generic


def _gen_functional(name):
    base = _base_gen(name)

    def gen(g, op):
        """F.NAME(x, ..., inplace): x picked as an in-place op's self when
        inplace is true; inplace positional (when every argument before it
        is) or in the options table."""
        inplace = g.r.random() < 0.5
        o = copy.copy(op)
        o.inplace = inplace
        d = base(g, o)
        if d is None:
            return None
        args = d['args']
        if len(args) == len(op.args):
            args[-1] = ['bool', inplace]
        elif inplace or g.r.random() < 0.3:
            d['kw']['inplace'] = ['bool', inplace]
        return d
    return gen


def _py_inplace(name):
    return lambda st, pa, pk: 'torch._C._nn.%s_(%s)' % (name, pa[0])


_W_NEW = 0.3
MAP = {}
for _n in ('silu', 'mish', 'hardsigmoid', 'hardswish'):
    MAP[_n + '_'] = dict(gen=_base_gen(_n), py=_py_inplace(_n), weight=_W_NEW)
for _n in ('relu relu6 elu leaky_relu hardtanh selu celu silu mish hardsigmoid hardswish '
           'threshold').split():
    MAP['functional_' + _n] = dict(gen=_gen_functional(_n), weight=_W_NEW)
