"""ops_binary.py -- difftest entries of the binary family (schema/ops/binary.yaml;
Note [Schema files] in ops.py). Most of its ops are drawn by the generic
generator; these entries add the rounding modes of div (a str argument,
rendered by the 'str' kind of render.py) and give lerp operands torch
accepts (floating, end and a tensor weight of self's dtype).

Accepted differences with PyTorch 1.13:
- float16 (Half) works in ember for atan2, hypot, lerp, addcmul and addcdiv
  (computed in float32), where torch 1.13's CPU kernels are "not
  implemented for 'Half'" (the generator drops those statements).
- Shift counts outside [0, width) are undefined in torch 1.13 (C++ << and >>);
  ember masks them as x86 does (Note [Shift counts] in binary_math.c), which
  is what torch's scalar loop computes on this machine.
- where() takes a uint8 condition as torch 1.13 does (deprecated there).
"""
from ops import *  # noqa: F401,F403
from ops import _gen_out

import torch


def gen_div_mode(g, op):
    """div(a, b, {rounding_mode = "trunc" | "floor"}) and div_ likewise."""
    s = g.pick(inplace=op.inplace)
    if s is None:
        return None
    other, pre = g.partner(s, inplace=op.inplace)
    return dict(args=[['var', s], other], kw={'rounding_mode': ['str', g.r.choice(['trunc', 'floor'])]}, pre=pre)


def gen_lerp(g, op):
    """lerp(self, end, weight): a floating self, end of its dtype broadcasting
    with it, and a number weight or a tensor one of the same dtype."""
    s = g.pick(pred=lambda t: t.dtype in (torch.float32, torch.float64), inplace=op.inplace)
    if s is None:
        return None
    t = g.t(s)
    dt = g.dtype_name(t)
    args, pre = [['var', s]], []
    for k in range(2):
        if k == 1 and g.r.random() < 0.4:
            args.append(['num', g.r.choice([0.25, 0.5, 0.75, -0.5, 1.5, 0.0, 1.0])])
            continue
        cands = []
        for n in g.tensors():
            u = g.t(n)
            if n.startswith('__') or u.dtype != t.dtype or not _bc(t, u):
                continue
            if not op.inplace or list(torch.broadcast_shapes(t.shape, u.shape)) == list(t.shape):
                cands.append(n)
        if cands and g.r.random() < 0.5:
            args.append(['var', g.r.choice(cands)])
            continue
        shape = [1 if g.r.random() < 0.25 else n for n in t.shape]
        name, st = g.leaf(shape=shape, dtype=dt)
        pre.append(st)
        args.append(['var', name])
    return dict(args=args, pre=pre)


def gen_addcdiv(g, op):
    """addcdiv's generic arguments without a bool tensor2: torch 1.13's
    backward of addcdiv fails on one ("result type Float can't be cast to
    the desired output type Bool"), where ember computes the gradient."""
    res = gen_generic(g, op)
    if res is None or len(res['args']) < 3:
        return res
    t2 = res['args'][2]
    if t2[0] != 'var':
        return res
    pre = {st.get('out'): st for st in res.get('pre', [])}
    dt = pre[t2[1]]['dtype'] if t2[1] in pre else g.dtype_name(g.t(t2[1]))
    return None if dt == 'bool' else res


def _bc(a, b):
    try:
        torch.broadcast_shapes(a.shape, b.shape)
        return True
    except RuntimeError:
        return False


MAP = {
    # Lua booleans, not tensors (Note [Boolean results]): test_binary.lua checks them
    'allclose': dict(gen=lambda g, op: None),
    'equal': dict(gen=lambda g, op: None),
    'div.Tensor_mode': dict(gen=gen_div_mode),
    'div_.Tensor_mode': dict(gen=gen_div_mode),
    'div.out_mode': dict(gen=_gen_out(gen_div_mode), weight=0.4),
    'lerp': dict(gen=gen_lerp),
    'lerp_': dict(gen=gen_lerp),
    'lerp.out': dict(gen=_gen_out(gen_lerp), weight=0.4),
    'maximum.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'minimum.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'fmax.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'fmin.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'atan2.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'fmod.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'hypot.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'copysign.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'xlogy.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'logical_and.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'logical_or.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'logical_xor.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'bitwise_and.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'bitwise_or.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'bitwise_xor.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'bitwise_left_shift.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'bitwise_right_shift.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'addcmul.out': dict(gen=_gen_out(gen_generic), weight=0.3),
    'addcdiv': dict(gen=gen_addcdiv),
    'addcdiv_': dict(gen=gen_addcdiv),
    'addcdiv.out': dict(gen=_gen_out(gen_addcdiv), weight=0.3),
}
