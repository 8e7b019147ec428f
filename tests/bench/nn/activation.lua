-- tests/bench/nn/activation.lua -- the activation family's workloads (Note
-- [Bench families] in tests/bench/bench.lua): gelu, silu and dropout,
-- forward + backward on 1e6 float32 elements at 1 thread, ms per call.
-- Paired with tests/bench/nn/activation.py.
return function(B)
  local ember = B.ember
  local F = ember.nn.functional
  local n = ember.get_num_threads()
  ember.set_num_threads(1)
  local x = ember.randn(1000000, { requires_grad = true })
  local g = ember.randn(1000000)
  local ms = function(t) return t * 1e3 end
  local cases = {
    { "gelu", function(a) return F.gelu(a) end },
    { "gelu_tanh", function(a) return F.gelu(a, { approximate = "tanh" }) end },
    { "silu", function(a) return F.silu(a) end },
    { "dropout", function(a) return F.dropout(a, 0.5) end },
  }
  for _, c in ipairs(cases) do
    B.measure("ember_" .. c[1] .. "_fwd_1e6_t1", ms, "ms", 5, function()
      local y <close> = ember.no_grad()
      local _ = c[2](x)
    end)
    B.measure("ember_" .. c[1] .. "_fwdbwd_1e6_t1", ms, "ms", 5, function()
      x.grad = nil
      c[2](x):backward(g)
    end)
  end
  ember.set_num_threads(n)
end
