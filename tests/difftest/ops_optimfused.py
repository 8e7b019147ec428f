"""ops_optimfused.py -- difftest entries of the optimfused family
(schema/ops/optimfused.yaml): _fused_adam_ and _fused_sgd_, one step of a
new float32/float64 parameter (not requiring grad) with a gradient and
state tensors of its shape, against PyTorch 1.13's functional single-tensor
optimizers torch.optim._functional.adam / adamw / sgd (foreach=False)
on the same tensors; state_steps is a tensor holding step - 1 (torch
increments it first).

Not drawn: _fused_sgd_ with first_step (torch's sgd then makes a new
buffer instead of writing the given one; test_optimfused.lua checks it).
No accepted differences.
"""
from ops import *  # noqa: F401,F403


def _state(g, dtype=None):
    """(names, pre, dtype): self, grad and three state leaves of one shape, none requiring grad."""
    nd = g.r.choice([0, 1, 1, 2, 3])
    shape = [g.r.randint(0, 4) for _ in range(nd)]
    dtype = dtype or g.r.choice(['float32', 'float64'])
    names, pre = [], []
    for _ in range(5):
        n, st = g.leaf(shape=shape, dtype=dtype, rg=False)
        names.append(n)
        pre.append(st)
    return names, pre


def gen_fused_adam_(g, op):
    (p, gr, m, v, mx), pre = _state(g)
    ams = g.r.random() < 0.4
    kw = dict(lr=['num', g.r.choice([0.1, 1e-3, 0.5])], beta1=['num', g.r.choice([0.9, 0.5, 0.0])],
              beta2=['num', g.r.choice([0.999, 0.9])], eps=['num', g.r.choice([1e-8, 1e-3])],
              step=['int', g.r.randint(1, 5)])
    if g.r.random() < 0.5:
        kw['weight_decay'] = ['num', g.r.choice([0.0, 0.1, 1.0])]
    if ams:
        kw['amsgrad'] = ['bool', True]
    if g.r.random() < 0.3:
        kw['maximize'] = ['bool', True]
    if g.r.random() < 0.4:
        kw['decoupled'] = ['bool', True]
    args = [['var', p], ['var', gr], ['var', m], ['var', v], ['var', mx] if ams else ['none']]
    return dict(args=args, kw=kw, pre=pre, style='function')


def _py_fused_adam_(st, pa, pk):
    fn = 'torch.optim._functional.adamw' if pk.get('decoupled') == 'True' else 'torch.optim._functional.adam'
    ams = pk.get('amsgrad') == 'True'
    return ('(%s([%s], [%s], [%s], [%s], [%s], [torch.tensor(%s - 1.0)], foreach=False, amsgrad=%s, '
            'beta1=%s, beta2=%s, lr=%s, weight_decay=%s, eps=%s, maximize=%s) or %s)' % (
                fn, pa[0], pa[1], pa[2], pa[3], pa[4] if ams else '', pk['step'], ams, pk['beta1'], pk['beta2'],
                pk['lr'], pk.get('weight_decay', '0'), pk['eps'], pk.get('maximize', 'False'), pa[0]))


def gen_fused_sgd_(g, op):
    (p, gr, buf, _, _), pre = _state(g)
    kw = dict(lr=['num', g.r.choice([0.1, 1e-3, 0.5])])
    mom = g.r.random() < 0.7
    if mom:
        kw['momentum'] = ['num', g.r.choice([0.9, 0.5])]
        if g.r.random() < 0.3:
            kw['nesterov'] = ['bool', True]
        elif g.r.random() < 0.4:
            kw['dampening'] = ['num', g.r.choice([0.1, 0.5])]
    if g.r.random() < 0.4:
        kw['weight_decay'] = ['num', g.r.choice([0.0, 0.1, 1.0])]
    if g.r.random() < 0.3:
        kw['maximize'] = ['bool', True]
    args = [['var', p], ['var', gr], ['var', buf] if mom or g.r.random() < 0.5 else ['none']]
    return dict(args=args, kw=kw, pre=pre, style='function')


def _py_fused_sgd_(st, pa, pk):
    buf = pa[2] if pa[2] not in ('None', 'nil') else 'None'
    return ('(torch.optim._functional.sgd([%s], [%s], [%s], foreach=False, weight_decay=%s, momentum=%s, lr=%s, '
            'dampening=%s, nesterov=%s, maximize=%s) or %s)' % (
                pa[0], pa[1], buf, pk.get('weight_decay', '0'), pk.get('momentum', '0'), pk['lr'],
                pk.get('dampening', '0'), pk.get('nesterov', 'False'), pk.get('maximize', 'False'), pa[0]))


_W_NEW = 0.5
MAP = {
    '_fused_adam_': dict(gen=gen_fused_adam_, py=_py_fused_adam_, weight=_W_NEW),
    '_fused_sgd_': dict(gen=gen_fused_sgd_, py=_py_fused_sgd_, weight=_W_NEW),
}
