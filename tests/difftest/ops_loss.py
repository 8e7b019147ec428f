"""ops_loss.py -- difftest entries of the loss family (softmax, log_softmax,
softmin and their backward ops; the losses); see Note [Schema files] in
ops.py.

softmax, log_softmax and softmin are drawn by the generic generator;
cross_entropy and nll_loss by gen_class_loss: 1-based int64 class targets
(or -100, ignored) that the torch side shifts down by one (the leaf is kept
out of later statements, as ops_index.py's index leaves), an ignore_index
given as a class number k (torch's k - 1), probability targets for
cross_entropy. mse_loss, l1_loss, smooth_l1_loss and huber_loss by gen_regression (a
target leaf that broadcasts with the input). The backward ops
(cross_entropy_backward, nll_loss_backward, mse_loss_backward,
smooth_l1_loss_backward, huber_loss_backward: ember's argument lists, with
reduction as a string) are not drawn: test_loss.lua checks them against
PyTorch's gradients and second derivatives, and the gradcheck runs
through them.

Accepted differences with PyTorch 1.13 (continued):
- cross_entropy with label_smoothing, an ignored target and an infinite
  class weight: torch masks the ignored smoothing term after the weight
  product, so the input's gradient is 0 * inf = NaN there; ember's is 0
  (the loss does not depend on that input). Weights drawn finite then.
- mse_loss/l1_loss/smooth_l1_loss/huber_loss with input and target of
  different shapes: torch warns ("Using a target size ... different to
  the input size"); ember broadcasts the same way without a warning.
  Their float16/bfloat16 sums: ember adds in double, torch in lower
  precision (drawn with float32/float64 inputs only). huber_loss with a
  target of another dtype that requires grad: torch's backward refuses
  ("Found dtype Float but expected Double"), ember's casts (drawn with
  one dtype).
- cross_entropy keeps its input (and probability target) for the fused
  backward, where torch's composite keeps log_softmax's result: writing
  into the input in place after the call makes ember's backward refuse
  (the saved-tensor version check) and torch's go on. Drawn with
  freeze_args, and never on a view or a tensor that has views.

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
from ops_index import _int_leaf
import gen as GEN


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


def _aliased(g, name):
    """name is a view, or some earlier statement made a view of it (an
    in-place write through the alias would reach the saved input)."""
    if name in g.views:
        return True

    def walk(stmts):
        for st in stmts:
            if st.get('body') and walk(st['body']):
                return True
            if st.get('s') == 'index' and st.get('src') == name:
                return True
            if st.get('s') == 'call' and st.get('op') in GEN.VIEW_OPS and st.get('args', [[None]])[0] == ['var', name]:
                return True
        return False
    return walk(g.stmts)


def gen_class_loss(g, op):
    """input: a float32/float64 tensor of the program with a class dim of
    at least 1 (dim 2, or 1 for a 1-d input); target: int64 classes in
    1..C or -100, or (cross_entropy, sometimes) a new float leaf of input's
    shape; sometimes a weight leaf, an ignore_index, a reduction and a
    label_smoothing, given by name."""
    ce = op.name == 'cross_entropy'
    s = g.pick(pred=lambda t: t.dtype in (torch.float32, torch.float64) and t.dim() >= 1
               and t.shape[0 if t.dim() == 1 else 1] >= 1)
    if s is None or _aliased(g, s):
        return None
    t = g.t(s)
    cd = 0 if t.dim() == 1 else 1
    C = t.shape[cd]
    dt = g.dtype_name(t)
    kw, pre = {}, []
    if ce and g.r.random() < 0.25:
        name, st = g.leaf(shape=list(t.shape), dtype=dt)
        target, pre = ['var', name], [st]
    else:
        tshape = [n for i, n in enumerate(t.shape) if i != cd]
        n = 1
        for v in tshape:
            n *= v
        if g.r.random() < 0.25:
            k = g.r.randint(1, C)
            kw['ignore_index'] = ['int', k]
            vals = [g.r.randint(1, C) for _ in range(n)]
        else:
            vals = [-100 if g.r.random() < 0.15 else g.r.randint(1, C) for _ in range(n)]
        target, pre = _int_leaf(g, tshape, vals)
    args = [['var', s], target]
    if g.r.random() < 0.4:
        name, st = g.leaf(shape=[C], dtype=dt, rg=False)
        args.append(['var', name])
        pre.append(st)
    if g.r.random() < 0.6:
        kw['reduction'] = ['str', g.r.choice(['mean', 'sum', 'none'])]
    if ce and g.r.random() < 0.4:
        kw['label_smoothing'] = ['num', g.r.choice([0.0, 0.1, 0.25, 1.0])]
        if len(args) > 2 and kw['label_smoothing'][1] > 0:
            # torch 1.13 masks an ignored target's smoothing term after
            # multiplying by the weight, so its gradient is 0 * inf = NaN
            # at an infinite class weight; ember's is 0 (no dependence on
            # the input). An accepted difference: weights drawn finite here
            pre[-1]['values'] = [1.0 if v in ('nan', 'inf', '-inf') else v for v in pre[-1]['values']]
    return dict(args=args, kw=kw, pre=pre, style='function')


def _py_class_loss(name):
    """torch.nn.functional.NAME with the class targets made 0-based (-100
    kept) and ignore_index k as k - 1."""
    def py(st, pa, pk):
        pa = list(pa)
        t = pa[1]
        pa[1] = '(%s if %s.is_floating_point() else torch.where(%s < 0, %s, %s - 1))' % (t, t, t, t, t)
        pk = dict(pk)
        if 'ignore_index' in pk:
            pk['ignore_index'] = '(%s - 1)' % pk['ignore_index']
        kws = ['%s=%s' % kv for kv in sorted(pk.items())]
        return 'torch.nn.functional.%s(%s)' % (name, ', '.join(pa + kws))
    return py


def gen_regression(g, op):
    """input: a floating tensor of the program; target: a new float leaf of
    a shape that broadcasts with it (often the same), sometimes of the
    other float dtype; a reduction and beta/delta, given by name."""
    s = g.pick(pred=lambda t: t.dtype in (torch.float32, torch.float64))
    if s is None:
        return None
    t = g.t(s)
    shape = list(t.shape)
    r = g.r.random()
    if r < 0.2:
        shape = shape[g.r.randint(0, len(shape)):]
    elif r < 0.35:
        shape = [1 if g.r.random() < 0.5 else n for n in shape]
    dt = g.dtype_name(t)
    if op.name != 'huber_loss' and g.r.random() < 0.15:
        dt = g.r.choice(['float32', 'float64'])
    name, st = g.leaf(shape=shape, dtype=dt)
    kw = {}
    if g.r.random() < 0.6:
        kw['reduction'] = ['str', g.r.choice(['mean', 'sum', 'none'])]
    if op.name == 'smooth_l1_loss' and g.r.random() < 0.5:
        kw['beta'] = ['num', g.r.choice([0.0, 0.5, 1.0, 2.0])]
    if op.name == 'huber_loss' and g.r.random() < 0.5:
        kw['delta'] = ['num', g.r.choice([0.5, 1.0, 2.0])]
    return dict(args=[['var', s], ['var', name]], kw=kw, pre=[st], style='function')


MAP = {
    'mse_loss': dict(gen=gen_regression),
    'l1_loss': dict(gen=gen_regression),
    'smooth_l1_loss': dict(gen=gen_regression),
    'huber_loss': dict(gen=gen_regression),
    'mse_loss_backward': dict(gen=lambda g, op: None),
    'smooth_l1_loss_backward': dict(gen=lambda g, op: None),
    'huber_loss_backward': dict(gen=lambda g, op: None),
    'cross_entropy': dict(gen=gen_class_loss, py=_py_class_loss('cross_entropy'), freeze_args=True),
    'nll_loss': dict(gen=gen_class_loss, py=_py_class_loss('nll_loss')),
    'cross_entropy_backward': dict(gen=lambda g, op: None),
    'nll_loss_backward': dict(gen=lambda g, op: None),
    '_softmax_backward_data': dict(gen=gen_softmax_backward_data, weight=0.4),
    '_log_softmax_backward_data': dict(gen=gen_softmax_backward_data, weight=0.4),
}
