-- samples/attention.lua -- gradcheck samples of the attention family
-- (schema/ops/attention.yaml), keyed by C name. See op_samples.lua for the format.
return function(H)
  local many = H.many
  local S = {}
  local F = ember.nn.functional
  -- deterministic float64 tensors of any shape: 0.5 sin(1.3 i + off)
  local function seq(off, ...)
    local shape = { ... }
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local v = {}
    for i = 1, n do v[i] = math.sin(i * 1.3 + off) * 0.5 end
    return ember.tensor(v, { dtype = "float64" }):reshape(shape)
  end

  -- ---- multi-head attention ----
  S.multi_head_attention_forward = function()
    local mha = F.multi_head_attention_forward
    local L, N, E, Hd, Sl = 2, 2, 4, 2, 3
    local am = ember.tensor({ { false, true }, { false, false } })
    local kpm = ember.tensor({ { false, false, true }, { false, false, false } })
    return many({
      -- self-attention (the packed projection in one linear), bool masks, both results
      { { seq(0, L, N, E), seq(1, 3 * E, E), seq(2, 3 * E), seq(3, E, E), seq(4, E) },
        function(x, w, b, ow, ob)
          return mha(x, x, x, E, Hd, w, b, nil, nil, false, 0.0, ow, ob, { attn_mask = am })
        end },
      -- cross-attention, bias_k/bias_v, zero attention, key_padding_mask, per-head weights
      { { seq(5, L, N, E), seq(6, Sl, N, E), seq(1, 3 * E, E), seq(7, 1, 1, E), seq(8, 1, 1, E), seq(3, E, E) },
        function(q, kv, w, bk, bv, ow)
          return mha(q, kv, kv, E, Hd, w, nil, bk, bv, true, 0.0, ow, nil,
            { key_padding_mask = kpm, average_attn_weights = false })
        end },
      -- separate projections of an unbatched query, a float attn_mask (differentiable)
      { { seq(9, L, E), seq(10, Sl, 3), seq(11, Sl, 5), seq(12, E, E), seq(13, E, 3), seq(14, E, 5), seq(15, L, Sl) },
        function(q, k, v, wq, wk, wv, m)
          return mha(q, k, v, E, Hd, nil, nil, nil, nil, false, 0.0, seq(3, E, E), seq(4, E),
            { attn_mask = m, use_separate_proj_weight = true, q_proj_weight = wq, k_proj_weight = wk,
              v_proj_weight = wv })
        end },
      -- static key and value
      { { seq(16, L, N, E), seq(17, N * Hd, Sl, E // Hd), seq(18, N * Hd, Sl, E // Hd) },
        function(q, sk, sv)
          return mha(q, q, q, E, Hd, seq(1, 3 * E, E), seq(2, 3 * E), nil, nil, false, 0.0, seq(3, E, E), nil,
            { static_k = sk, static_v = sv, need_weights = false })
        end },
    })
  end
  return S
end
