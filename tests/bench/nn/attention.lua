-- tests/bench/nn/attention.lua -- the attention family's workload (Note
-- [Bench families]): nn.MultiheadAttention self-attention forward + backward,
-- L=64, N=32, E=256, 8 heads, float32, 1 thread, need_weights=false (the
-- transformer layers' call); paired with attention.py. Gradients accumulate
-- into .grad on both sides.
return function(B)
  local ember = B.ember
  local nn = ember.nn
  local ms = function(t) return t * 1e3 end
  ember.set_num_threads(1)
  ember.manual_seed(0)
  local m = nn.MultiheadAttention(256, 8)
  local x = ember.randn(64, 32, 256, { requires_grad = true })
  local g = ember.randn(64, 32, 256)
  B.measure("ember_mha_fb_t1", ms, "ms", 3, function()
    local o = m(x, x, x, { need_weights = false })
    o:backward(g)
  end)
end
