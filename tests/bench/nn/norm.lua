-- tests/bench/nn/norm.lua -- the normalisation family's workloads (Note
-- [Bench families]): float32 forward + backward of layer_norm 4096x1024,
-- batch_norm (training) and group_norm (32 groups) on 64x32x32x32; paired
-- with norm.py. Gradients accumulate into .grad on both sides.
return function(B)
  local ember = B.ember
  local F = ember.nn.functional
  local ms = function(t) return t * 1e3 end
  for _, th in ipairs({ 1, 2 }) do
    ember.set_num_threads(th)
    ember.manual_seed(0)
    do
      local x = ember.randn(4096, 1024, { requires_grad = true })
      local w = ember.randn(1024, { requires_grad = true })
      local b = ember.randn(1024, { requires_grad = true })
      local g = ember.randn(4096, 1024)
      B.measure("ember_layer_norm_fb_t" .. th, ms, "ms", 3, function()
        F.layer_norm(x, { 1024 }, w, b):backward(g)
      end)
    end
    do
      local x = ember.randn(64, 32, 32, 32, { requires_grad = true })
      local w = ember.randn(32, { requires_grad = true })
      local b = ember.randn(32, { requires_grad = true })
      local rm, rv = ember.zeros(32), ember.ones(32)
      local g = ember.randn(64, 32, 32, 32)
      B.measure("ember_batch_norm_fb_t" .. th, ms, "ms", 3, function()
        F.batch_norm(x, rm, rv, w, b, true):backward(g)
      end)
      B.measure("ember_group_norm_fb_t" .. th, ms, "ms", 3, function()
        F.group_norm(x, 32, w, b):backward(g)
      end)
    end
  end
end
