-- step.lua -- bench family "step" (Note [Bench families]): the optimizer
-- update kernels of issue 10 (addcdiv_ / addcmul_ in place on 1M float32,
-- the three-input loop's contiguous path), one thread; paired with step.py.
-- The training steps themselves are loss.lua's MLP and zz_cnn.lua's CNN.
return function(B)
  local ember = B.ember
  local nth = ember.get_num_threads()
  ember.set_num_threads(1)
  ember.manual_seed(0)
  local n = 1000000
  local p, a, b = ember.randn(n), ember.randn(n), ember.rand(n) + 1
  local ms = function(t) return t * 1e3 end
  B.measure("ember_addcdiv_inplace_1e6_t1", ms, "ms/iter", 20, function() p:addcdiv_(a, b, { value = -1e-3 }) end)
  B.measure("ember_addcmul_inplace_1e6_t1", ms, "ms/iter", 20, function() p:addcmul_(a, b, { value = 1e-3 }) end)
  B.measure("ember_div_1e6_t1", ms, "ms/iter", 20, function() return p / b end)
  ember.set_num_threads(nth)
end
