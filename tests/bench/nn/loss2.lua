-- tests/bench/nn/loss2.lua -- the loss2 family's workloads (Note [Bench
-- families]): binary_cross_entropy and binary_cross_entropy_with_logits
-- on 512x1000 float32, forward+backward (mean reduction), one thread.
return function(B)
  local ember, measure = B.ember, B.measure
  local F = ember.nn.functional
  local ms = function(t) return t * 1e3 end
  local default_threads = ember.get_num_threads()
  ember.manual_seed(0)
  local p = ember.rand(512, 1000):mul_(0.98):add_(0.01):requires_grad_()
  local z = ember.randn(512, 1000, { requires_grad = true })
  local y = ember.rand(512, 1000)
  ember.set_num_threads(1)
  measure("ember_bce_512x1000_fwd_bwd_t1", ms, "ms/iter", 20, function()
    F.binary_cross_entropy(p, y):backward()
    p.grad = nil
  end)
  measure("ember_bce_with_logits_512x1000_fwd_bwd_t1", ms, "ms/iter", 20, function()
    F.binary_cross_entropy_with_logits(z, y):backward()
    z.grad = nil
  end)
  ember.set_num_threads(default_threads)
end
