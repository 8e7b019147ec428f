"""ops_attention.py -- difftest entries of the attention family (schema/ops/attention.yaml).

multi_head_attention_forward (torch: F.multi_head_attention_forward) gets
new float32/float64 leaves of fitting shapes: a batched (L, N, E) or
unbatched (L, E) query, self-attention (query, key and value one variable),
key is value, or three tensors; packed in_proj_weight or separate
q/k/v_proj_weight (kdim/vdim differing from E); optional biases, bias_k and
bias_v, add_zero_attn, bool/uint8/float attn_mask (2-d or 3-d) and bool or
float key_padding_mask, static_k/static_v, need_weights and
average_attn_weights. Dropout is drawn only with training=false (the masks
of the two generators differ). Sometimes one shape is wrong (a mask, a
weight, embed_dim_to_check, num_heads not dividing E), so that both sides'
refusals are compared too.

Leaves are finite (the generic leaves' nan/inf become 1): with an infinite
key or value, the gradient of a projection weight row that the result does
not use is 0 * inf in the weight-gradient GEMM -- NaN in ember (IEEE), 0 in
torch 1.13's BLAS, which skips the zero rows. Not an attention difference;
not drawn.

Accepted differences: none otherwise. (A float key_padding_mask together
with a float attn_mask is refused by both: torch 1.13 masked_fills with the
float mask.)
"""
from ops import *  # noqa: F401,F403

_FL = ['float32', 'float64']


def _leaf(g, pre, shape, dt, rg=None, finite=True):
    name, st = g.leaf(shape=shape, dtype=dt, rg=rg)
    if finite:
        st['values'] = [1.0 if v in ('nan', 'inf', '-inf') else v for v in st['values']]
    pre.append(st)
    return ['var', name]


def gen_mha(g, op):
    dt = g.r.choice(_FL)
    batched = g.r.random() < 0.7
    H = g.r.choice([1, 2, 3])
    E = H * g.r.choice([1, 2])
    L, S = g.r.randint(1, 4), g.r.randint(1, 4)
    N = g.r.randint(1, 3) if batched else 1
    bad = g.r.random() < 0.08  # one wrong argument: both refuse

    def seq(n, e):
        return [n, N, e] if batched else [n, e]

    pre = []
    separate = g.r.random() < 0.25
    kdim, vdim = (g.r.randint(1, 4), g.r.randint(1, 4)) if separate else (E, E)
    q = _leaf(g, pre, seq(L, E), dt)
    form = g.r.random()
    if form < 0.35 and not separate or (separate and kdim == vdim == E and form < 0.2):
        S, k, v = L, q, q
    elif form < 0.65 and kdim == vdim:
        k = _leaf(g, pre, seq(S, kdim), dt)
        v = k
    else:
        k = _leaf(g, pre, seq(S, kdim), dt)
        v = _leaf(g, pre, seq(S, vdim), dt)
    emb = E + 1 if bad and g.r.random() < 0.3 else E
    heads = H
    if bad and g.r.random() < 0.3 and E > 1:
        heads = E + 1 if E % (E + 1) else E - 1
    args = [q, k, v, ['int', emb], ['int', heads]]
    kw = {}
    w_in = ['none'] if separate else _leaf(g, pre, [3 * E, E], dt)
    b_in = _leaf(g, pre, [3 * E], dt) if g.r.random() < 0.7 else ['none']
    args += [w_in, b_in]
    bias_kv = g.r.random() < 0.2
    if bias_kv:
        args += [_leaf(g, pre, [1, 1, E], dt), _leaf(g, pre, [1, 1, E], dt)]
    else:
        args += [['none'], ['none']]
    zero_attn = g.r.random() < 0.2
    args.append(['bool', zero_attn])
    drop = g.r.random() < 0.15
    args.append(['num', g.r.choice([0.5, 1.0]) if drop else 0.0])
    args.append(_leaf(g, pre, [E if not (bad and g.r.random() < 0.2) else E + 1, E], dt))
    args.append(_leaf(g, pre, [E], dt) if g.r.random() < 0.7 else ['none'])
    if drop:
        kw['training'] = ['bool', False]
    elif g.r.random() < 0.2:
        kw['training'] = ['bool', g.r.random() < 0.5]
    static = not bias_kv and g.r.random() < 0.15
    Sk = S
    if static:
        Sk = S if g.r.random() < 0.7 else g.r.randint(1, 3)
        kw['static_k'] = _leaf(g, pre, [N * H, Sk, E // H], dt)
        kw['static_v'] = _leaf(g, pre, [N * H, Sk, E // H], dt)
    if separate:
        kw['use_separate_proj_weight'] = ['bool', True]
        kw['q_proj_weight'] = _leaf(g, pre, [E, E], dt)
        kw['k_proj_weight'] = _leaf(g, pre, [E, kdim + (1 if bad and g.r.random() < 0.3 else 0)], dt)
        kw['v_proj_weight'] = _leaf(g, pre, [E, vdim], dt)
    elif g.r.random() < 0.1:
        kw['use_separate_proj_weight'] = ['bool', False]
    float_mask = False
    if g.r.random() < 0.5:
        mdt = g.r.choice(['bool', 'bool', 'uint8', dt])
        float_mask = mdt == dt
        shape = [L, Sk] if g.r.random() < 0.6 else [N * H, L, Sk]
        if bad and g.r.random() < 0.5:
            shape[-1] += 1
        m = _leaf(g, pre, shape, mdt, rg=False)
        if mdt == 'uint8':
            pre[-1]['values'] = [v % 2 for v in pre[-1]['values']]
        kw['attn_mask'] = m
    if g.r.random() < 0.4:
        kdt = 'bool' if float_mask or g.r.random() < 0.7 else dt
        shape = [N, Sk] if batched else [Sk]
        if bad and g.r.random() < 0.5:
            shape[-1] += 1
        kw['key_padding_mask'] = _leaf(g, pre, shape, kdt, rg=False)
    if g.r.random() < 0.3:
        kw['need_weights'] = ['bool', g.r.random() < 0.5]
    if g.r.random() < 0.3:
        kw['average_attn_weights'] = ['bool', g.r.random() < 0.5]
    return dict(args=args, kw=kw, pre=pre, style='function')


MAP = {
    'multi_head_attention_forward': dict(gen=gen_mha),
}
