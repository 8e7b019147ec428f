-- spatial.lua -- the spatial family's workloads (Note [Bench families]):
-- interpolate bilinear 64x16x32x32 -> 64x64 forward+backward, and F.pad
-- reflect 64x16x32x32 by 2 forward+backward, scaled_dot_product_attention
-- B=32 H=8 L=128 D=64 forward+backward. ms per step.
return function(B)
  local ember, F = B.ember, B.ember.nn.functional
  local function ms(t) return t * 1e3 end
  do
    local x = ember.randn(64, 16, 32, 32, { requires_grad = true })
    B.measure("ember_interp_bilinear_fb", ms, "ms/step", 3, function()
      local y = F.interpolate(x, { 64, 64 }, nil, "bilinear")
      y:sum():backward()
      x.grad = nil
    end)
  end
  do
    local x = ember.randn(64, 16, 32, 32, { requires_grad = true })
    B.measure("ember_pad_reflect_fb", ms, "ms/step", 5, function()
      local y = F.pad(x, { 2, 2, 2, 2 }, "reflect")
      y:sum():backward()
      x.grad = nil
    end)
  end
  do
    local q = ember.randn(32, 8, 128, 64, { requires_grad = true })
    local k = ember.randn(32, 8, 128, 64, { requires_grad = true })
    local v = ember.randn(32, 8, 128, 64, { requires_grad = true })
    B.measure("ember_sdpa_fb", ms, "ms/step", 2, function()
      F.scaled_dot_product_attention(q, k, v):sum():backward()
      q.grad, k.grad, v.grad = nil, nil, nil
    end)
  end
end
