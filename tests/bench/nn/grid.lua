-- grid.lua -- the grid family's workloads (Note [Bench families]):
-- grid_sample bilinear (zeros, align_corners false) 8x16x64x64 sampled at an
-- 8x64x64x2 grid, forward+backward (grads of input and grid), 1 thread
-- (_t1); the same for a 5-d (trilinear) 4x8x16x32x32 input at a
-- 4x16x32x32x3 grid; interpolate bilinear antialias=true 8x3x256x256 ->
-- 64x64 forward, 1 thread. ms per step. Paired with grid.py.
return function(B)
  local ember, F = B.ember, B.ember.nn.functional
  local function ms(t) return t * 1e3 end
  local n = ember.get_num_threads()
  ember.set_num_threads(1)
  do
    ember.manual_seed(0)
    local x = ember.randn(8, 16, 64, 64, { requires_grad = true })
    local g = (ember.rand(8, 64, 64, 2) * 2.2 - 1.1):requires_grad_()
    B.measure("ember_grid_sample_bilinear_fb_t1", ms, "ms/step", 3, function()
      F.grid_sample(x, g):sum():backward()
      x.grad, g.grad = nil, nil
    end)
  end
  do
    ember.manual_seed(0)
    local x = ember.randn(4, 8, 16, 32, 32, { requires_grad = true })
    local g = (ember.rand(4, 16, 32, 32, 3) * 2.2 - 1.1):requires_grad_()
    B.measure("ember_grid_sample_3d_fb_t1", ms, "ms/step", 3, function()
      F.grid_sample(x, g):sum():backward()
      x.grad, g.grad = nil, nil
    end)
  end
  do
    local x = ember.randn(8, 3, 256, 256)
    B.measure("ember_interp_aa_down_f_t1", ms, "ms/step", 5, function()
      F.interpolate(x, { 64, 64 }, nil, "bilinear", nil, nil, true)
    end)
  end
  ember.set_num_threads(n)
end
