-- tests/bench/nn/conv.lua -- the conv family's workloads (Note [Bench
-- families]): conv2d forward + backward (input and weight gradients) for
-- 64x3x32x32 -> 16 channels 3x3 pad 1 and 64x16x16x16 -> 32 channels 3x3
-- pad 1, float32, with 2 threads and 1; ms per step. Paired with conv.py.
return function(B)
  local ember, F = B.ember, B.ember.nn.functional
  local ms = function(t) return t * 1e3 end
  local cases = {
    { "conv2d_64x3x32x32_16_fb", { 64, 3, 32, 32 }, { 16, 3, 3, 3 } },
    { "conv2d_64x16x16x16_32_fb", { 64, 16, 16, 16 }, { 32, 16, 3, 3 } },
  }
  for _, th in ipairs({ 2, 1 }) do
    ember.set_num_threads(th)
    for _, c in ipairs(cases) do
      ember.manual_seed(0)
      local x = ember.randn(c[2], { requires_grad = true })
      local w = ember.randn(c[3], { requires_grad = true })
      local go
      B.measure("ember_" .. c[1] .. "_t" .. th, ms, "ms", 5, function()
        local y = F.conv2d(x, w, nil, 1, 1)
        go = go or ember.ones(y.shape)
        y:backward(go)
        x.grad, w.grad = nil, nil
      end)
    end
  end
  ember.set_num_threads(2)
end
