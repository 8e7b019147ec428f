-- test_pool.lua -- the pool family (schema/ops/pool.yaml): values against
-- PyTorch 1.13 (expected numbers computed with torch.nn.functional, indices
-- plus one), edge cases and errors. Gradients: test_gradcheck.lua.
local T = {}
local F = ember.nn.functional

local function f32(v) return ember.tensor(v, { dtype = "float32" }) end
local x34 = function() return f32({ { { { 1, 5, 2, 0 }, { 3, 4, 8, 7 }, { 6, -1, 9, 2 } } } }) end

-- ---- max pooling ----

function T.max_pool2d_values_and_indices()
  local v, i = F.max_pool2d(x34(), 2, { return_indices = true })
  check_tensor(v, { { { { 5, 8 } } } })
  check_tensor(i, { { { { 2, 7 } } } })
  check_eq(i.dtype, "int64")
  v, i = F.max_pool2d(x34(), 2, { ceil_mode = true, return_indices = true })
  check_tensor(v, { { { { 5, 8 }, { 6, 9 } } } })
  check_tensor(i, { { { { 2, 7 }, { 9, 11 } } } })
  v, i = F.max_pool2d(x34(), { 2, 3 }, 1, { 1, 1 }, { return_indices = true })
  check_tensor(v, { { { { 5, 5, 5, 2 }, { 5, 8, 8, 8 }, { 6, 9, 9, 9 }, { 6, 9, 9, 9 } } } })
  check_tensor(i, { { { { 2, 2, 2, 3 }, { 2, 7, 7, 7 }, { 9, 11, 11, 11 }, { 9, 11, 11, 11 } } } })
  v, i = F.max_pool2d(x34(), 2, 1, 0, { 1, 2 }, false, true) -- dilation, all positional
  check_tensor(v, { { { { 8, 7 }, { 9, 7 } } } })
  check_tensor(i, { { { { 7, 8 }, { 11, 8 } } } })
end

function T.max_pool2d_returns_values_alone_without_return_indices()
  check_eq(select("#", F.max_pool2d(x34(), 2)), 2) -- values, nil
  local r = { F.max_pool2d(x34(), 2) }
  check_eq(#r, 1)
  check_eq(select(2, F.max_pool2d(x34(), 2)), nil)
  local v, i = F.max_pool2d_with_indices(x34(), 2)
  check_tensor(v, { { { { 5, 8 } } } })
  check_tensor(i, { { { { 2, 7 } } } })
end

function T.max_pool_unbatched_and_non_contiguous()
  local v, i = F.max_pool2d(x34()[1], 2, { return_indices = true })
  check_shape(v, { 1, 1, 2 })
  check_tensor(i, { { { 2, 7 } } })
  v, i = F.max_pool2d(x34():transpose(3, 4), 2, { return_indices = true })
  check_tensor(v, { { { { 5 }, { 8 } } } })
  check_tensor(i, { { { { 4 }, { 8 } } } })
end

function T.max_pool1d_and_3d()
  local v, i = F.max_pool1d(f32({ { 3, 1, 4, 1, 5, 9, 2, 6 } }), 3, 2, 1, { return_indices = true })
  check_tensor(v, { { 3, 4, 9, 9 } })
  check_tensor(i, { { 1, 3, 6, 6 } })
  local x3 = ember.arange(27, { dtype = "float32" }):reshape(1, 3, 3, 3):flip(-1)
  v, i = F.max_pool3d(x3, 2, 1, { return_indices = true })
  check_tensor(v, { { { { 14, 13 }, { 17, 16 } }, { { 23, 22 }, { 26, 25 } } } })
  check_tensor(i, { { { { 13, 14 }, { 16, 17 } }, { { 22, 23 }, { 25, 26 } } } })
  check_shape(F.max_pool3d(ember.randn(2, 3, 5, 6, 7), { 2, 3, 2 }, { ceil_mode = true }), { 2, 3, 3, 2, 4 })
  check_shape(F.max_pool1d(ember.randn(4, 3, 10), 4, 3, 2, 2), { 4, 3, 3 })
end

function T.max_pool_backward_accumulates()
  local x = x34():requires_grad_()
  F.max_pool2d(x, 2, 1):sum():backward()
  check_tensor(x.grad, { { { { 0, 1, 0, 0 }, { 0, 0, 2, 0 }, { 1, 0, 2, 0 } } } })
  local x3 = ember.randn(2, 2, 4, 4, 4, { dtype = "float64" }):requires_grad_()
  local v = F.max_pool3d(x3, 2)
  v:sum():backward()
  check_near(x3.grad:sum():item(), 2 * 2 * 8, 1e-12)
end

function T.max_pool_nan_inf_and_dtypes()
  local nan, inf = 0 / 0, math.huge
  local v, i = F.max_pool1d(f32({ { 1, nan, 3, nan } }), 4, { return_indices = true })
  check_tensor(v, { { nan } })
  check_tensor(i, { { 4 } }) -- the last NaN, as PyTorch
  v, i = F.max_pool1d(f32({ { -inf, -inf, -inf, -inf } }), 2, { return_indices = true })
  check_tensor(v, { { -inf, -inf } })
  check_tensor(i, { { 1, 3 } })
  v, i = F.max_pool2d(f32({ { { { nan, 1 }, { 2, 3 } } } }), 2, { return_indices = true }) -- the 2x2 path
  check_tensor(v, { { { { nan } } } })
  check_tensor(i, { { { { 1 } } } })
  for _, dt in ipairs({ "float64", "bfloat16" }) do
    local y, j = F.max_pool2d(x34():to(dt), 2, { return_indices = true })
    check_eq(y.dtype, dt)
    check_tensor(y, { { { { 5, 8 } } } })
    check_tensor(j, { { { { 2, 7 } } } })
  end
  check_shape(F.max_pool2d(ember.zeros(0, 3, 4, 4), 2), { 0, 3, 2, 2 }) -- an empty batch
end

function T.max_pool_errors()
  local x = x34()
  check_error(function() return F.max_pool2d(x, 2, 1, 2) end, "max_pool2d", "padding", "half of kernel_size")
  check_error(function() return F.max_pool2d(ember.ones(1, 1, 1, 1), 2) end, "max_pool2d", "{1,1,1,1}",
    "{1,1,0,0}", "too small")
  check_error(function() return F.max_pool2d(ember.ones(4, 4), 2) end, "max_pool2d", "input", "3 or 4 dims")
  check_error(function() return F.max_pool2d(ember.ones(1, 0, 4, 4), 2) end, "max_pool2d", "empty dim 2")
  check_error(function() return F.max_pool2d(ember.ones(1, 4, 4, { dtype = "int64" }), 2) end,
    "max_pool2d", "input", "int64")
  check_error(function() return F.max_pool2d(x, { 2, 2, 2 }) end, "max_pool2d", "kernel_size", "2 integers")
  check_error(function() return F.max_pool2d(x, 0) end, "max_pool2d", "kernel_size", "positive")
  check_error(function() return F.max_pool2d(x, 2, -1) end, "max_pool2d", "stride", "positive")
  check_error(function() return F.max_pool2d(x, 2, 1, 0, 0) end, "max_pool2d", "dilation", "positive")
  check_error(function() return F.max_pool1d(x, 2) end, "max_pool1d", "input", "2 or 3 dims")
  check_error(function() return F.max_pool3d(x, 2) end, "max_pool3d", "too small")
  local _, i = F.max_pool2d_with_indices(x, 2)
  check_error(function()
    return ember.max_pool2d_with_indices_backward(ember.ones(1, 1, 1, 2), x, 2, 2, 0, 1, false, i + 20)
  end, "max_pool2d_with_indices_backward", "index 22", "1..12")
  check_error(function()
    return ember.max_pool2d_with_indices_backward(ember.ones(1, 1, 2, 2), x, 2, 2, 0, 1, false, i)
  end, "max_pool2d_with_indices_backward", "{1,1,2,2}", "{1,1,1,2}")
  check_error(function()
    return ember.max_pool2d_with_indices_backward(ember.ones(1, 1, 1, 2), x, 2, 2, 0, 1, false, i:float())
  end, "max_pool2d_with_indices_backward", "indices", "int64")
end

-- ---- average pooling ----

function T.avg_pool_values()
  check_tensor(F.avg_pool2d(x34(), 2), { { { { 3.25, 4.25 } } } })
  check_tensor(F.avg_pool2d(x34(), 2, { ceil_mode = true }), { { { { 3.25, 4.25 }, { 2.5, 5.5 } } } })
  check_tensor(F.avg_pool2d(x34(), 3, 1, 1), { { { { 1.4444444, 2.5555556, 2.8888888, 1.8888888 },
    { 2.0, 4.1111112, 4.0, 3.1111112 }, { 1.3333334, 3.2222223, 3.2222223, 2.8888888 } } } })
  check_tensor(F.avg_pool2d(x34(), 3, 1, 1, { count_include_pad = false }), { { { { 3.25, 3.8333333, 4.3333335, 4.25 },
    { 3.0, 4.1111112, 4.0, 4.6666665 }, { 3.0, 4.8333335, 4.8333335, 6.5 } } } })
  check_tensor(F.avg_pool2d(x34(), { 2, 3 }, 2, { 1, 1 }, true, true, 5),
    { { { { 1.2, 1.4, 0.0 }, { 2.4, 5.8, 1.8 } } } })
  check_tensor(F.avg_pool1d(f32({ { 3, 1, 4, 1, 5, 9, 2, 6 } }), 3, 2, 1), { { 1.3333334, 2.0, 5.0, 5.6666665 } })
  local i = F.avg_pool2d(ember.tensor({ { { -7, 3 }, { 2, 1 } } }), 2) -- int64 truncates
  check_eq(i.dtype, "int64")
  check_tensor(i, { { { 0 } } })
  local x3 = ember.arange(64, { dtype = "float64" }):reshape(1, 4, 4, 4)
  check_tensor(F.avg_pool3d(x3, 2, 2, 1, true)[1][1], { { 0, 0.375, 0.375 }, { 1.5, 3.75, 2.25 }, { 1.5, 3.375, 1.875 } })
  check_tensor(F.avg_pool2d(x34():transpose(3, 4), 2), { { { { 3.25 }, { 4.25 } } } }) -- non-contiguous
  check_eq(F.avg_pool2d(x34():bfloat16(), 2).dtype, "bfloat16")
  check_shape(F.avg_pool2d(ember.zeros(0, 2, 4, 4), 2), { 0, 2, 2, 2 })
end

function T.avg_pool_backward()
  local x = x34():requires_grad_()
  F.avg_pool2d(x, 2, 1):sum():backward()
  check_tensor(x.grad, { { { { 0.25, 0.5, 0.5, 0.25 }, { 0.5, 1, 1, 0.5 }, { 0.25, 0.5, 0.5, 0.25 } } } })
end

function T.avg_pool_errors()
  local x = x34()
  check_error(function() return F.avg_pool2d(x, 2, { divisor_override = 0 }) end, "avg_pool2d", "divisor_override", "0")
  check_error(function() return F.avg_pool2d(x, 2, 1, 2) end, "avg_pool2d", "padding", "half of kernel_size")
  check_error(function() return F.avg_pool2d(ember.ones(1, 1, 1, 1), 2) end, "avg_pool2d", "too small")
  check_error(function() return F.avg_pool2d(ember.ones(2, 2, { dtype = "int32" }):reshape(1, 2, 2), 2) end,
    "avg_pool2d", "input", "int32")
  check_error(function() return F.avg_pool3d(x, 2) end, "avg_pool3d", "too small")
  check_error(function() return F.avg_pool3d(ember.ones(1, 6, 1, 1), { 1, 2, 2 }, 1, { 0, 1, 1 }) end, "avg_pool3d",
    "6x1x1", "smaller than kernel_size 1x2x2")
  check_error(function() return F.avg_pool1d(x, 2) end, "avg_pool1d", "2 or 3 dims")
  check_error(function() return F.avg_pool2d(x, { 1, 2, 3 }) end, "avg_pool2d", "kernel_size")
  check_error(function() return ember.avg_pool2d_backward(ember.ones(1, 1, 2, 2), x, 2, 2, 0, false, true) end,
    "avg_pool2d_backward", "{1,1,2,2}", "{1,1,1,2}")
end

-- ---- adaptive pooling ----

function T.adaptive_pool_values()
  local x = f32({ { { { 1, 5, 2, 0, 3 }, { 3, 4, 8, 7, 1 }, { 6, -1, 9, 2, 0 } } } })
  check_tensor(F.adaptive_avg_pool2d(x, { 2, 3 }), { { { { 3.25, 4.3333335, 2.75 }, { 3.0, 4.8333335, 2.5 } } } })
  local v, i = F.adaptive_max_pool2d(x, { 2, 3 }, true)
  check_tensor(v, { { { { 5, 8, 7 }, { 6, 9, 7 } } } })
  check_tensor(i, { { { { 2, 8, 9 }, { 11, 13, 9 } } } })
  check_eq(select(2, F.adaptive_max_pool2d(x, 2)), nil)
  local r = f32({ { 3, 1, 4, 1, 5, 9, 2 } })
  check_tensor(F.adaptive_avg_pool1d(r, 3), { { 2.6666667, 3.3333333, 5.3333335 } })
  v, i = F.adaptive_max_pool1d(r, 3, true)
  check_tensor(v, { { 4, 5, 9 } })
  check_tensor(i, { { 3, 5, 6 } })
  check_shape(F.adaptive_avg_pool2d(ember.randn(1, 0, 4, 4), 2), { 1, 0, 2, 2 })
  check_shape(F.adaptive_avg_pool2d(x, 0), { 1, 1, 0, 0 })
  check_shape(F.adaptive_avg_pool3d(ember.randn(2, 3, 5, 6, 7), { 2, 3, 4 }), { 2, 3, 2, 3, 4 })
  check_tensor(F.adaptive_avg_pool2d(x:transpose(3, 4), 1), { { { { 3.3333333 } } } })
  local g = x:clone():requires_grad_()
  F.adaptive_avg_pool2d(g, { 1, 2 }):sum():backward()
  check_tensor(g.grad[1][1][3], { 1 / 9, 1 / 9, 2 / 9, 1 / 9, 1 / 9 }, 1e-5, "row 3")
end

function T.adaptive_pool_errors()
  local x = x34()
  check_error(function() return F.adaptive_avg_pool2d(x, -1) end, "adaptive_avg_pool2d", "output_size", ">= 0")
  check_error(function() return F.adaptive_avg_pool2d(x, { 1, 2, 3 }) end, "adaptive_avg_pool2d", "output_size")
  check_error(function() return F.adaptive_avg_pool2d(ember.ones(4, 4), 2) end, "adaptive_avg_pool2d", "3 or 4 dims")
  check_error(function() return F.adaptive_max_pool2d(ember.ones(1, 0, 4, 4), 2) end, "adaptive_max_pool2d",
    "empty dim 2")
  check_error(function() return F.adaptive_max_pool1d(x, 2) end, "adaptive_max_pool1d", "2 or 3 dims")
  check_error(function() return F.adaptive_avg_pool2d(ember.ones(1, 2, 2, { dtype = "int64" }), 1) end,
    "adaptive_avg_pool2d", "int64")
end

-- ---- power-average pooling ----

function T.lp_pool_values()
  check_tensor(F.lp_pool2d(x34(), 2, 2), { { { { 7.1414, 10.8167 } } } }, 1e-4)
  check_tensor(F.lp_pool2d(x34(), 3, { 2, 3 }, 1, true), { { { { 9.0328, 10.1704 }, { 11.5655, 11.8286 } } } }, 1e-4)
  check_tensor(F.lp_pool1d(x34()[1][1], 1.5, 2), { { 5.2939, 2.0 }, { 5.5842, 11.9187 }, { 0 / 0, 9.6180 } }, 1e-4)
  check_error(function() return F.lp_pool2d(x34(), 2, { 1, 2, 3 }) end, "lp_pool2d", "kernel_size")
  check_error(function() return F.lp_pool1d(x34(), 2, 2) end, "avg_pool1d", "2 or 3 dims")
end

-- ---- unpooling ----

function T.max_unpool_values_and_errors()
  local v, i = F.max_pool2d(x34(), 2, { return_indices = true })
  check_tensor(F.max_unpool2d(v, i, 2), { { { { 0, 5, 0, 0 }, { 0, 0, 8, 0 } } } })
  check_tensor(F.max_unpool2d(v, i, 2, { output_size = { 1, 1, 3, 4 } }),
    { { { { 0, 5, 0, 0 }, { 0, 0, 8, 0 }, { 0, 0, 0, 0 } } } })
  local v1, i1 = F.max_pool1d(f32({ { 3, 1, 4, 1, 5, 9, 2 } }), 2, { return_indices = true })
  check_tensor(F.max_unpool1d(v1, i1, 2, { output_size = { 7 } }), { { 3, 0, 4, 0, 0, 9, 0 } })
  local x3 = ember.arange(27, { dtype = "float64" }):reshape(1, 3, 3, 3)
  local v3, i3 = F.max_pool3d(x3, 2, 1, { return_indices = true })
  check_tensor(F.max_unpool3d(v3, i3, 2, 1):sum(), (13 + 14 + 16 + 17 + 22 + 23 + 25 + 26))
  check_tensor(ember.max_unpool(ember.tensor({ { 7, 8 } }), ember.tensor({ { 3, 3 } }), { 4 }), { { 0, 0, 8, 0 } })
  check_error(function() return F.max_unpool2d(v, i, 2, { output_size = { 5, 4 } }) end, "max_unpool2d",
    "output_size 5", "between 0 and 4")
  check_error(function() return F.max_unpool2d(v, i + 10, 2) end, "max_unpool", "index 12", "1..8")
  check_error(function() return F.max_unpool2d(v, i:float(), 2) end, "max_unpool", "indices", "int64")
  check_error(function() return F.max_unpool2d(v, i[{ {}, {}, {}, { 1 } }], 2) end, "max_unpool", "{1,1,1,2}",
    "{1,1,1,1}")
  check_error(function() return F.max_unpool2d(v[1][1], i[1][1], 2) end, "max_unpool2d", "3 or 4 dims")
end

-- torch's max_pool1d returns a fresh tensor (not a view of a height-1
-- max_pool2d result) when its input does not require grad: a piece of it
-- taken with grad mode on can then be written with a value requiring grad
-- (found by the difftest, seed 1117)
function T.max_pool1d_result_is_not_a_view_made_under_no_grad()
  local x = ember.tensor({ { 1.75, 0.25 }, { 2.0, 2.5 } })
  local y
  do
    local _ <close> = ember.no_grad()
    y = F.max_pool1d(x, 2)
  end
  local w = ember.tensor({ 3.0 }, { requires_grad = true })
  local row = y[2]
  row[{ { 1 } }] = w
  y:sum():backward()
  check_tensor(w.grad, { 1 })
  check_tensor(y, { { 1.75 }, { 3.0 } })
  -- with indices, or an input requiring grad, it stays the squeezed view
  local v = F.max_pool1d(x:clone():requires_grad_(), 2)
  check(v.grad_fn ~= nil)
end

-- an output of all ones is a mean over the pooled dims, as PyTorch's
-- (MeanBackward: a create_graph gradient of it does not require grad;
-- found by the difftest, seed 8974)
function T.adaptive_avg_pool_to_one_is_a_mean()
  local x = ember.ones(2, 2, 1, { dtype = "float64", requires_grad = true })
  local y = F.adaptive_avg_pool1d(x, 1)
  local g = ember.autograd.grad({ y:sum() }, { x }, { create_graph = true })[1]
  check(not g.requires_grad)
  local x2 = ember.arange(18, { dtype = "float64" }):reshape(2, 3, 3):requires_grad_()
  check(tostring(F.adaptive_avg_pool2d(x2, { 1, 1 }).grad_fn) == "<MeanBackward>")
  check_tensor(F.adaptive_avg_pool2d(x2, 1), { { { 4 } }, { { 13 } } })
  check(tostring(F.adaptive_avg_pool2d(x2, { 1, 2 }).grad_fn) == "<AdaptiveAvgPool2dBackward>")
  check(tostring(F.adaptive_avg_pool3d(ember.ones(1, 2, 3, 3, 3, { requires_grad = true }), 1).grad_fn)
    == "<MeanBackward>")
  check_error(function() return F.adaptive_avg_pool2d(ember.ones(3, 3), 1) end, "adaptive_avg_pool2d", "3 or 4 dims")
end

-- ---- pixel shuffle ----

function T.pixel_shuffle_values_and_errors()
  local x = ember.arange(16, { dtype = "float32" }):reshape(1, 4, 2, 2)
  local y = F.pixel_shuffle(x, 2)
  check_tensor(y, { { { { 0, 4, 1, 5 }, { 8, 12, 9, 13 }, { 2, 6, 3, 7 }, { 10, 14, 11, 15 } } } })
  check(ember.pixel_unshuffle(y, 2):eq(x):all():item())
  check_shape(ember.pixel_shuffle(ember.zeros(2, 3, 18, 2, 2), 3), { 2, 3, 2, 6, 6 })
  check_shape(F.pixel_unshuffle(ember.zeros(3, 4, 6), 2), { 12, 2, 3 })
  check_error(function() return F.pixel_shuffle(x, 3) end, "pixel_shuffle", "4", "divisible", "9")
  check_error(function() return F.pixel_shuffle(x, 0) end, "pixel_shuffle", "upscale_factor", "positive")
  check_error(function() return F.pixel_unshuffle(x, 3) end, "pixel_unshuffle", "divisible", "3")
  check_error(function() return F.pixel_shuffle(ember.zeros(4, 2), 2) end, "pixel_shuffle", "at least 3 dims")
end

return T
