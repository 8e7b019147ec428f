"""ops_activation.py -- difftest entries of the activation family
(schema/ops/activation.yaml).

Every op but gelu is generated generically (self from the program, numbers
for the Scalar parameters, random bools for self_is_result / is_result of
the backward ops, which torch runs as torch.ops.aten.NAME). gelu and
gelu_backward get their keyword `approximate`. This file sets how often the
family is drawn (about 40 overloads; at full weight they would crowd out
the rest).

Differences accepted (also in the report to the lead):
  - NaN (in x or in a bound such as hardtanh's min_val) in the backward
    ops of hardtanh, elu, hardswish, softshrink and hardshrink, and
    hardswish_backward at x = 3: PyTorch 1.13's vectorised
    loop and its scalar loop disagree there (softshrink_backward gives 0
    for a NaN x in the vector body, grad in the scalar loop). ember follows
    the scalar loop everywhere, so a tensor longer than torch's vector
    width may differ in those elements.
  - celu's and hardsigmoid's float64 gradients: PyTorch rounds 1/alpha
    (derivatives.yaml: 1.0/alpha.toFloat()) and 1/6 (1.0f / 6.0f) to
    float32 (relative differences ~1e-8); ember keeps float64.
  - Second derivatives torch 1.13 lacks when a backward op is called
    directly (silu_backward, mish_backward, ...: "derivative for
    aten::silu_backward is not implemented"): ember has them.
  - float16: PyTorch 1.13 has no CPU kernel for these ops on float16 (the
    generator drops such statements); ember computes in float32 and rounds.
  - relu_ of -0.0 gives +0.0 (ember's relu_ is threshold_(0, 0)); torch
    keeps -0.0. Values compare equal.
  - Dropout draws from ember's Philox stream, not torch's generator, so
    only deterministic calls are drawn: p = 0 or 1, or training = false
    (values compared, incl. the returned mask of native_dropout), with or
    without inplace. Random masks are tested in tests/lua/test_activation.lua
    (statistics, reproducibility, gradient = mask * scale).
  - native_dropout_backward called directly with a mask that requires
    grad: torch's result requires grad (its derivative for mask is "not
    implemented" and raises in backward); ember's mask has no formula, so
    the result does not require grad through it.
  - native_dropout (and dropout with p = 1 or training) of an empty tensor
    that requires grad: torch 1.13 returns the input itself, so its
    autograd gives the leaf a grad_fn (is_leaf turns false); ember returns a
    new empty tensor. Not drawn.
  - The NaN / x = 3 differences above also show through the forward ops'
    gradients (hardtanh, relu6, elu, selu, celu, hardswish, softshrink,
    hardshrink): calls with NaN arguments (+-3 for hardswish) are not drawn.
  - gelu_backward with mixed float dtypes: torch 1.13 raises
    ("itensor_view_from_dense expects float/bfloat16 tensor input", its
    oneDNN path); ember promotes.
  - log_sigmoid_backward: torch's takes a third argument, the buffer of
    log_sigmoid_forward; ember's computes it (rendered for torch with
    log_sigmoid_forward's buffer). Of mixed float dtypes torch's refuses
    ("Found dtype Double but expected Float"); ember promotes. Drawn with
    one dtype.
"""
from ops import *  # noqa: F401,F403

_APPROX = ['none', 'tanh']


def _gen_gelu(with_grad):
    def gen(g, op):
        """gelu(x, {approximate = ...}) / gelu_backward(grad, x, {...}): the
        tensors as the generic generator draws them, the keyword by hand (a
        str{...} kind is not in ARG_KINDS)."""
        self_name = g.pick(inplace=op.inplace)
        if self_name is None:
            return None
        args, kw, pre = [['var', self_name]], {}, []
        if with_grad:
            v, p = ARG_KINDS['Tensor'](g, op, op.args[1], self_name)
            args.append(v)
            pre += p
        if g.r.random() < 0.6:
            kw['approximate'] = ['str', g.r.choice(_APPROX)]
        return dict(args=args, kw=kw, pre=pre)
    return gen


def _gen_dropout(native):
    def gen(g, op):
        """A deterministic dropout call: p 0 or 1 while training, or any p
        with training false (see the docstring)."""
        # not on an empty tensor requiring grad: torch 1.13's native_dropout
        # returns the input itself there (its autograd then gives the leaf a
        # grad_fn); ember returns a new empty tensor (docstring)
        self_name = g.pick(pred=lambda t: t.numel() > 0 or not t.requires_grad, inplace=False)
        if self_name is None:
            return None
        training = g.r.random() < 0.6
        p = g.r.choice([0.0, 1.0]) if training else g.r.choice([0.0, 0.3, 0.5, 1.0])
        args = [['var', self_name], ['num', p], ['bool', training]]
        if not native and training and g.r.random() < 0.2:
            args.append(['bool', True])  # inplace
        return dict(args=args, kw={}, pre=[])
    return gen


def _gen_dropout_backward(g, op):
    """native_dropout_backward with a mask that does not require grad (the
    accepted difference of the docstring)."""
    d = gen_generic(g, op)
    if d is None or len(d['args']) < 2 or d['args'][1][0] != 'var':
        return None
    m = d['args'][1][1]
    for st in d['pre']:
        if st.get('s') == 'leaf' and st['out'] == m:
            st['rg'] = False
            return d
    return None if g.t(m).requires_grad else d


_W = 0.4
MAP = {name: dict(weight=_W) for name in (
    'relu_ relu6 leaky_relu leaky_relu_ elu elu_ selu selu_ celu celu_ silu mish softplus softsign '
    'hardtanh hardtanh_ hardsigmoid hardswish logsigmoid tanhshrink softshrink hardshrink threshold '
    'threshold_').split()}
MAP.update({name: dict(weight=0.2) for name in (
    'leaky_relu_backward elu_backward silu_backward mish_backward softplus_backward hardtanh_backward '
    'hardsigmoid_backward hardswish_backward log_sigmoid_backward softshrink_backward '
    'hardshrink_backward').split()})
MAP['gelu'] = dict(gen=_gen_gelu(False), weight=_W)


def _bad_values(avoid_three):
    """pred(values) -> True when a value is NaN (or +-3 with avoid_three)."""
    def bad(v):
        if isinstance(v, str):
            return v == 'nan'
        if isinstance(v, bool):
            return False
        return v != v or (avoid_three and abs(v) == 3)
    return bad


def _gen_avoiding(avoid_three=False):
    """gen_generic, refusing a call where a tensor or number argument holds
    NaN (or +-3 for hardswish): the accepted NaN / x = 3 difference of the
    docstring, which torch's forward ops reach through their backward too."""
    bad = _bad_values(avoid_three)

    def gen(g, op):
        d = gen_generic(g, op)
        if d is None:
            return None
        leaves = {st['out']: st for st in d['pre'] if st.get('s') == 'leaf'}
        for a in d['args'] + list(d['kw'].values()):
            if a[0] == 'num' and bad(a[1]):
                return None
            if a[0] == 'var':
                if a[1] in leaves:
                    vals = leaves[a[1]]['values']
                else:
                    t = g.t(a[1]).detach()
                    vals = t.double().flatten().tolist() if t.is_floating_point() else []
                if any(bad(v) for v in vals):
                    return None
        return d
    return gen


for _name in ('hardtanh hardtanh_ relu6 elu elu_ selu selu_ celu celu_ softshrink hardshrink '
              'hardtanh_backward elu_backward softshrink_backward hardshrink_backward').split():
    MAP[_name]['gen'] = _gen_avoiding()
for _name in ('hardswish', 'hardswish_backward'):
    MAP[_name]['gen'] = _gen_avoiding(avoid_three=True)
for _name in ('dropout', 'dropout1d', 'dropout2d', 'dropout3d', 'alpha_dropout', 'feature_alpha_dropout'):
    MAP[_name] = dict(gen=_gen_dropout(False), weight=0.3)
MAP['native_dropout'] = dict(gen=_gen_dropout(True), weight=0.3)
MAP['native_dropout_backward'] = dict(gen=_gen_dropout_backward, weight=0.2)
MAP['prelu'] = dict(weight=_W)
MAP['glu'] = dict(weight=_W)
def _gen_one_dtype(g, op):
    """gen_generic, refusing tensor arguments of different dtypes."""
    d = gen_generic(g, op)
    if d is None:
        return None
    leaves = {st['out']: st['dtype'] for st in d['pre'] if st.get('s') == 'leaf'}
    dts = {leaves[a[1]] if a[1] in leaves else g.dtype_name(g.t(a[1])) for a in d['args'] if a[0] == 'var'}
    return d if len(dts) <= 1 else None


MAP['log_sigmoid_backward']['gen'] = _gen_one_dtype
MAP['log_sigmoid_backward']['py'] = lambda st, pa, pk: (
    'torch.ops.aten.log_sigmoid_backward(%s, %s, torch.ops.aten.log_sigmoid_forward(%s)[1])' % (pa[0], pa[1], pa[1]))
MAP['gelu_backward'] = dict(gen=_gen_gelu(True), weight=0.2)
