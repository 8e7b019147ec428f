"""ops_loss.py -- difftest entries of the loss family (softmax, log_softmax,
softmin and their backward ops; the losses); see Note [Schema files] in
ops.py.

softmax, log_softmax and softmin are drawn by the generic generator.

Accepted differences with PyTorch 1.13:
- softmax/log_softmax/softmin on float16: torch has no CPU kernel ("not
  implemented for 'Half'", dropped by the generator); ember computes them
  in float32 (as for bfloat16, which torch has).
- _softmax_backward_data/_log_softmax_backward_data are drawn with
  grad_output and output of one float dtype and input_dtype = that dtype:
  torch refuses other mixes ("expected scalar type ..."), ember casts
  grad_output to output's dtype and returns input_dtype. Drawn with
  contiguous operands only: torch 1.13's kernel reads a non-contiguous one
  (a slice, or an expanded gradient of a sum) as if it were contiguous
  (values from outside it; autograd only ever passes contiguous ones);
  ember reads it as it is.
"""
from ops import *  # noqa: F401,F403


def gen_softmax_backward_data(g, op):
    """grad_output and output: a float32/float64 tensor of the program and a
    new leaf of its shape and dtype (in either order), a dim of them and
    input_dtype = their dtype; contiguous ones only (see above)."""
    s = g.pick(pred=lambda t: t.dtype in (torch.float32, torch.float64) and t.is_contiguous())
    if s is None:
        return None
    t = g.t(s)
    dt = g.dtype_name(t)
    name, st = g.leaf(shape=list(t.shape), dtype=dt)
    pair = [['var', s], ['var', name]]
    if g.r.random() < 0.5:
        pair.reverse()
    return dict(args=pair + [g.dim(s), ['dtype', dt]], pre=[st], style='function')


MAP = {
    '_softmax_backward_data': dict(gen=gen_softmax_backward_data, weight=0.4),
    '_log_softmax_backward_data': dict(gen=gen_softmax_backward_data, weight=0.4),
}
