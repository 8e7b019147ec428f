-- tests/bench/nn/metric.lua -- the metric family's workloads (Note [Bench
-- families]); the same in metric.py for PyTorch. Times in ms per call.
return function(B)
  local ember, F = B.ember, B.ember.nn.functional
  local ms = function(t) return t * 1e3 end
  ember.manual_seed(0)
  local a = ember.randn(1000, 64, { requires_grad = true })
  local b = ember.randn(1000, 64, { requires_grad = true })
  -- p = 2 on 1000 rows: the matrix-product path (_euclidean_dist)
  B.measure("ember_cdist_1000x64_p2_fwd", ms, "ms/call", 5, function() return F.cdist(a:detach(), b:detach()) end)
  B.measure("ember_cdist_1000x64_p2_fwdbwd", ms, "ms/call", 3, function()
    a.grad, b.grad = nil, nil
    F.cdist(a, b):sum():backward()
  end)
  -- p = 1: the direct kernel and _cdist_backward
  B.measure("ember_cdist_1000x64_p1_fwdbwd", ms, "ms/call", 1, function()
    a.grad, b.grad = nil, nil
    F.cdist(a, b, 1):sum():backward()
  end)
end
