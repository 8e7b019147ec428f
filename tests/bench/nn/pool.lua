-- pool.lua -- the pool family's workloads (Note [Bench families]), paired with
-- pool.py: max_pool2d 2x2 forward+backward on 64x32x32x32 float32 (issue 9
-- asks for the ratio). embedding's workload comes with the op.
return function(B)
  local ember = B.ember
  local F = ember.nn.functional
  local x = ember.randn(64, 32, 32, 32):requires_grad_()
  local g = ember.randn(64, 32, 16, 16)
  local nth = ember.get_num_threads()
  for _, s in ipairs({ { "tdef", nth }, { "t1", 1 } }) do
    ember.set_num_threads(s[2])
    B.measure("ember_max_pool2d_64x32x32x32_fb_" .. s[1], function(t) return t * 1e3 end, "ms", 10, function()
      x.grad = nil
      F.max_pool2d(x, 2):backward(g)
    end)
  end
  ember.set_num_threads(nth)
end
