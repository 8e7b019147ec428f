-- test_grid.lua -- the grid family (schema/ops/grid.yaml): affine_grid and
-- grid_sample against values computed with PyTorch 1.13, every mode and
-- padding, NaN/inf grids, dtypes, empty and non-contiguous inputs,
-- gradients, and error messages.
local ember = ember or require "ember"
local F = ember.nn.functional
local T = {}

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end

-- ---- grid_sample ----

-- input (1, 2, 3, 4): channel 1 is 0..11, channel 2 is -0.5 times that
local function img()
  return ember.arange(12.0, { dtype = "float64" }):reshape(1, 1, 3, 4) * f64({ 1, -0.5 }):reshape(1, 2, 1, 1)
end
-- (1, 2, 3, 2): points inside, on the far side of an edge, and far outside
local function pts()
  return f64({ { { { -0.9, -0.8 }, { 0.35, 0.2 }, { 1.2, -1.1 } }, { { 0.6, 0.95 }, { -1.7, 0.3 }, { 0.1, 2.9 } } } })
end

-- F.grid_sample(img(), pts(), mode, padding_mode, align_corners):flatten() in PyTorch 1.13
local expected = {
  { "bilinear", "zeros", false, { 0.0, 7.4, 0.105, 6.1525, 0.0, 0.0, 0.0, -3.7, -0.0525, -3.07625, 0.0, 0.0 } },
  { "bilinear", "zeros", true, { 0.95, 6.825, 1.89, 10.2, 0.0, 0.0, -0.475, -3.4125, -0.945, -5.1, 0.0, 0.0 } },
  { "bilinear", "border", false, { 0.0, 7.4, 3.0, 10.7, 5.8, 9.7, -0.0, -3.7, -1.5, -5.35, -2.9, -4.85 } },
  { "bilinear", "border", true, { 0.95, 6.825, 3.0, 10.2, 5.2, 9.65, -0.475, -3.4125, -1.5, -5.1, -2.6, -4.825 } },
  { "bilinear", "reflection", false, { 0.0, 7.4, 3.0, 10.7, 6.7, 1.7, -0.0, -3.7, -1.5, -5.35, -3.35, -0.85 } },
  { "bilinear", "reflection", true, { 0.95, 6.825, 3.1, 10.2, 6.25, 2.05, -0.475, -3.4125, -1.55, -5.1, -3.125, -1.025 } },
  { "nearest", "zeros", false, { 0.0, 6.0, 0.0, 11.0, 0.0, 0.0, -0.0, -3.0, 0.0, -5.5, 0.0, 0.0 } },
  { "nearest", "zeros", true, { 0.0, 6.0, 3.0, 10.0, 0.0, 0.0, -0.0, -3.0, -1.5, -5.0, 0.0, 0.0 } },
  { "nearest", "border", false, { 0.0, 6.0, 3.0, 11.0, 4.0, 10.0, -0.0, -3.0, -1.5, -5.5, -2.0, -5.0 } },
  { "nearest", "border", true, { 0.0, 6.0, 3.0, 10.0, 4.0, 10.0, -0.0, -3.0, -1.5, -5.0, -2.0, -5.0 } },
  { "nearest", "reflection", false, { 0.0, 6.0, 3.0, 11.0, 5.0, 2.0, -0.0, -3.0, -1.5, -5.5, -2.5, -1.0 } },
  { "nearest", "reflection", true, { 0.0, 6.0, 3.0, 10.0, 5.0, 2.0, -0.0, -3.0, -1.5, -5.0, -2.5, -1.0 } },
  { "bicubic", "zeros", false, { -0.36771, 8.532194, 0.064562, 7.466892, -0.04625, 0.0, 0.183855, -4.266097,
    -0.032281, -3.733446, 0.023125, 0.0 } },
  { "bicubic", "zeros", true, { 0.781644, 7.369741, 1.91164, 11.509094, -0.200863, -0.064907, -0.390822, -3.684871,
    -0.95582, -5.754547, 0.100431, 0.032454 } },
  { "bicubic", "border", false, { -0.49425, 7.829, 2.767875, 11.189797, 6.183625, 9.658, 0.247125, -3.9145,
    -1.383938, -5.594898, -3.091813, -4.829 } },
  { "bicubic", "border", true, { 0.721344, 7.125035, 2.86725, 10.345875, 5.557, 9.615875, -0.360672, -3.562518,
    -1.433625, -5.172938, -2.7785, -4.807938 } },
  { "bicubic", "reflection", false, { -0.6375, 7.829, 2.385, 11.501375, 7.040875, 0.9755, 0.31875, -3.9145, -1.1925,
    -5.750687, -3.520438, -0.48775 } },
  { "bicubic", "reflection", true, { 0.256063, 7.221492, 2.9365, 10.55325, 6.817375, 1.673875, -0.128031, -3.610746,
    -1.46825, -5.276625, -3.408687, -0.836938 } },
}

function T.grid_sample_every_mode_and_padding_matches_pytorch()
  for _, e in ipairs(expected) do
    local msg = e[1] .. "/" .. e[2] .. "/" .. tostring(e[3])
    check_tensor(F.grid_sample(img(), pts(), e[1], e[2], e[3]):flatten(), e[4], 1e-5, msg)
    -- float32 too, and the kernel op directly
    check_tensor(F.grid_sample(img():float(), pts():float(), e[1], e[2], e[3]):flatten(), e[4], 1e-5, msg .. " f32")
    check_tensor(ember.grid_sampler_2d(img(), pts(), e[1], e[2], e[3]):flatten(), e[4], 1e-5, msg)
  end
  -- the defaults: bilinear, zeros, align_corners = false
  check_tensor(F.grid_sample(img(), pts()):flatten(), expected[1][4])
  check_shape(F.grid_sample(img(), pts()), { 1, 2, 2, 3 })
end

function T.grid_sample_rounds_half_to_even_and_reflects_one_pixel()
  -- W = 5, align_corners: x = 2 (c + 1) -> 0.5, 2.5, 1.5 round to 0, 2, 2
  local r = F.grid_sample(ember.arange(5.0):reshape(1, 1, 1, 5), ember.tensor({ { { { -0.75, 0 }, { 0.25, 0 }, { -0.25, 0 } } } }),
    "nearest", "zeros", true)
  check_tensor(r:flatten(), { 0, 2, 2 })
  -- a 1-pixel input reflects onto itself (align_corners: a zero span)
  local one = ember.tensor({ { { { 5.0 } } } })
  for _, ac in ipairs({ true, false }) do
    check_tensor(F.grid_sample(one, ember.tensor({ { { { 0.3, -2.5 } } } }), "bilinear", "reflection", ac):flatten(), { 5 })
  end
end

function T.grid_sample_nan_and_inf_grid_points_as_pytorch()
  local x = ember.arange(16.0):reshape(1, 1, 4, 4)
  local g = ember.tensor({ { { { 0 / 0, 0 }, { 0.3, math.huge } } } })
  local want = {
    bilinear = { zeros = { 0 / 0, 0 / 0 }, border = { 6, 14.1 }, reflection = { 6, 2.1 } },
    nearest = { zeros = { 0, 0 }, border = { 8, 14 }, reflection = { 8, 2 } },
    bicubic = { zeros = { 0 / 0, 0 / 0 }, border = { 0 / 0, 0 / 0 }, reflection = { 0 / 0, 0 / 0 } },
  }
  for mode, byp in pairs(want) do
    for pad, w in pairs(byp) do
      check_tensor(F.grid_sample(x, g, mode, pad):flatten(), w, 1e-5, mode .. "/" .. pad)
    end
  end
end

function T.grid_sample_non_contiguous_and_empty()
  -- a transposed input and a grid (1, 3, 1, 2), PyTorch's values
  local x = ember.arange(24.0):reshape(1, 2, 4, 3):transpose(3, 4)
  local g = ember.tensor({ { { { 0.25, -0.5 } }, { { 0.7, 0.1 } }, { { -0.3, 0.9 } } } })
  check_tensor(F.grid_sample(x, g, "bilinear", "zeros", true):flatten(), { 6.125, 8.750001, 5.05, 18.125, 20.750002, 17.050001 })
  local gt = ember.tensor({ { { { 0.25, 0.7, -0.3 } }, { { -0.5, 0.1, 0.9 } } } }):permute(1, 4, 3, 2) -- same values
  check_tensor(F.grid_sample(x, gt, "bilinear", "zeros", true):flatten(), { 6.125, 8.750001, 5.05, 18.125, 20.750002, 17.050001 })
  -- empty batch, channels or grid: empty results of the right shape
  check_shape(F.grid_sample(ember.zeros(0, 1, 4, 4), ember.zeros(0, 2, 2, 2)), { 0, 1, 2, 2 })
  check_shape(F.grid_sample(ember.zeros(1, 0, 4, 4), ember.zeros(1, 2, 2, 2)), { 1, 0, 2, 2 })
  check_shape(F.grid_sample(ember.zeros(1, 1, 4, 4), ember.zeros(1, 0, 2, 2)), { 1, 1, 0, 2 })
  local xe = ember.zeros(1, 0, 4, 4, { requires_grad = true })
  F.grid_sample(xe, ember.zeros(1, 2, 2, 2)):sum():backward()
  check_shape(xe.grad, { 1, 0, 4, 4 })
end

function T.grid_sample_gradients_match_pytorch()
  -- d/dinput, d/dgrid of sum(grid_sample(x, g) * w), PyTorch 1.13
  local w = (ember.arange(12.0, { dtype = "float64" }):reshape(1, 2, 2, 3) / 7 - 0.5)
  local function grads(mode, pad, ac)
    local x, g = img():requires_grad_(), pts():requires_grad_()
    local loss = (F.grid_sample(x, g, mode, pad, ac) * w):sum()
    loss:backward()
    return x.grad:flatten(), g.grad:flatten()
  end
  local gi, gg = grads("bilinear", "reflection", false)
  check_tensor(gi, { -0.5, 0.064286, 0.15, -0.214286, 0.003929, 0.035357, -0.2, -0.05, 0.003214, 0.028929, -0.107143,
    -0.071429, 0.357143, 0.321429, 0.75, 0.642857, 0.051071, 0.459643, 0.28, 0.07, 0.041786, 0.376071, 0.355714, 0.58 })
  check_tensor(gg, { 0, 0, -1.214286, -3.642857, 0, 0, -0.928571, 0, 0.785714, -2.357143, -0.642857, 0 })
  gi, gg = grads("bicubic", "border", true)
  check_tensor(gi, { -0.367268, -0.059142, 0.0653, -0.251656, -0.027856, -0.00803, -0.33023, 0.007002, 0.017599,
    0.094376, 0.054359, -0.051598, 0.154334, 0.042804, -0.128343, 0.755626, 0.834183, -0.001541, 0.485891, -0.021994,
    0.18761, 0.336396, 1.465014, 0.175735 })
  check_tensor(gg, { -0.780569, -2.117143, -1.332347, -2.987143, -0.042187, -1.0125, -0.710357, -1.396339, 0,
    -1.756071, -0.394152, 0 })
  gi, gg = grads("nearest", "zeros", false)
  check_tensor(gi, { -0.5, 0, 0, 0, 0, 0, -0.357143, 0, 0, 0, 0, -0.071429, 0.357143, 0, 0, 0, 0, 0, 0.5, 0, 0, 0, 0,
    0.785714 })
  check_tensor(gg, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 })
  -- only the grid requires grad: grad_input is not computed
  local g = pts():requires_grad_()
  local loss = (F.grid_sample(img(), g, "bilinear", "reflection") * w):sum()
  loss:backward()
  check_tensor(g.grad:flatten(), { 0, 0, -1.214286, -3.642857, 0, 0, -0.928571, 0, 0.785714, -2.357143, -0.642857, 0 })
  -- the backward op with an output_mask: a result not asked for is empty {0}
  local a, b = ember.grid_sampler_2d_backward(ember.ones(1, 2, 2, 3, { dtype = "float64" }), img(), pts(), "bilinear",
    "zeros", false, { 0, 1 })
  check_shape(a, { 0 })
  check_shape(b, { 1, 2, 3, 2 })
end

function T.grid_sample_no_double_backward_as_pytorch()
  local x = ember.randn(1, 1, 3, 3, { dtype = "float64", requires_grad = true })
  local y = F.grid_sample(x, pts():narrow(2, 1, 1) * 0.5):sum()
  -- as in PyTorch, create_graph records the backward's node, which refuses
  -- to be differentiated when a second backward reaches it
  local gx = ember.autograd.grad({ y }, { x }, { create_graph = true })[1]
  check(gx.requires_grad)
  check_error(function() ember.autograd.grad({ gx:sum() }, { x }) end,
    "grid_sampler_2d_backward", "not implemented")
  -- without create_graph it works
  local g = ember.autograd.grad({ F.grid_sample(x, pts():narrow(2, 1, 1) * 0.5):sum() }, { x })
  check_shape(g[1], { 1, 1, 3, 3 })
end

function T.grid_sample_errors()
  local x = ember.zeros(1, 2, 3, 4)
  check_error(function() F.grid_sample(x, ember.zeros(1, 2, 2, 3)) end, "grid_sample", "size 2 in its last dim",
    "{1,2,2,3}")
  check_error(function() F.grid_sample(x, ember.zeros(2, 2, 2, 2)) end, "grid_sample", "same batch size",
    "{1,2,3,4}", "{2,2,2,2}")
  check_error(function() F.grid_sample(x, ember.zeros(1, 2, 2, 2), "linear") end, "grid_sample", "mode",
    "bilinear", "nearest", "bicubic")
  check_error(function() F.grid_sample(x, ember.zeros(1, 2, 2, 2), "bilinear", "circular") end, "grid_sample",
    "padding_mode", "zeros", "border", "reflection")
  check_error(function() F.grid_sample(x, ember.zeros(1, 2, 2, 2, { dtype = "float64" })) end, "grid_sample",
    "grid must have input's dtype float32, got float64")
  check_error(function() F.grid_sample(x:long(), ember.zeros(1, 2, 2, 2)) end, "grid_sample", "float32 or float64",
    "int64")
  check_error(function() F.grid_sample(x:half(), ember.zeros(1, 2, 2, 2):half()) end, "grid_sample", "float16")
  check_error(function() F.grid_sample(x[1], ember.zeros(1, 2, 2)) end, "grid_sample", "4-d input")
  check_error(function() F.grid_sample(ember.zeros(1, 1, 0, 4), ember.zeros(1, 2, 2, 2)) end, "grid_sample",
    "non-empty spatial dims", "{1,1,0,4}")
  check_error(function() F.grid_sample(ember.zeros(1, 1, 2, 2, 2), ember.zeros(1, 2, 2, 2, 3), "bicubic") end,
    "grid_sample", "bicubic", "4-d")
  check_error(function() ember.grid_sampler_2d_backward(ember.zeros(1, 2, 2, 3), x, ember.zeros(1, 2, 2, 2), "bilinear",
    "zeros", false) end, "grid_sampler_2d_backward", "grad_output has shape {1,2,2,3}, expected {1,2,2,2}")
end

-- ---- affine_grid ----

function T.affine_grid_matches_pytorch()
  local th = f64({ { { 1, 0.2, 0.1 }, { 0.3, 0.9, -0.2 } }, { { 0.5, -0.4, 0.3 }, { 0.7, 0.1, 0.6 } } })
  local g = F.affine_grid(th, { 2, 1, 2, 3 })
  check_shape(g, { 2, 2, 3, 2 })
  check_tensor(g:flatten(), { -0.666667, -0.85, 0.0, -0.65, 0.666667, -0.45, -0.466667, 0.05, 0.2, 0.25, 0.866667, 0.45,
    0.166667, 0.083333, 0.5, 0.55, 0.833333, 1.016667, -0.233333, 0.183333, 0.1, 0.65, 0.433333, 1.116667 })
  check_tensor(F.affine_grid(th, { 2, 1, 2, 3 }, true):flatten(), { -1.1, -1.4, -0.1, -1.1, 0.9, -0.8, -0.7, 0.4, 0.3,
    0.7, 1.3, 1.0, 0.2, -0.2, 0.7, 0.5, 1.2, 1.2, -0.6, 0.0, -0.1, 0.7, 0.4, 1.4 })
  check_tensor(F.affine_grid(th:float(), { 2, 1, 2, 3 }):flatten(), g:flatten():tolist())
  check(F.affine_grid(th:float(), { 2, 1, 2, 3 }).dtype == "float32")
  -- 3-d: (N, D, H, W, 3)
  local th3 = ember.arange(12.0, { dtype = "float64" }):reshape(1, 3, 4) / 10
  local g3 = F.affine_grid(th3, { 1, 1, 2, 1, 3 })
  check_shape(g3, { 1, 2, 1, 3, 3 })
  check_tensor(g3:flatten(), { 0.2, 0.133333, 0.066667, 0.2, 0.4, 0.6, 0.2, 0.666667, 1.133333, 0.4, 0.733333, 1.066667,
    0.4, 1.0, 1.6, 0.4, 1.266667, 2.133333 })
  -- a unit size with align_corners: the point is 0 (PyTorch warns)
  check_tensor(F.affine_grid(th:narrow(1, 1, 1), { 1, 1, 1, 1 }, true):flatten(), { 0.1, -0.2 })
  -- the identity transform samples the input back (align_corners false)
  local x = ember.randn(2, 3, 4, 5, { dtype = "float64" })
  local id = f64({ { 1, 0, 0 }, { 0, 1, 0 } }):reshape(1, 2, 3):expand(2, 2, 3)
  check_tensor(F.grid_sample(x, F.affine_grid(id, { 2, 3, 4, 5 })), x:tolist(), 1e-12)
end

function T.affine_grid_gradient_reaches_theta()
  local th = f64({ { { 1, 0.2, 0.1 }, { 0.3, 0.9, -0.2 } } }):requires_grad_()
  F.affine_grid(th, { 1, 1, 2, 3 }):sum():backward()
  -- d/dtheta[i][j] = sum over points of base coordinate j: x sums to 0, y sums to 0, 1 sums to 6
  check_tensor(th.grad, { { { 0, 0, 6 }, { 0, 0, 6 } } })
end

function T.affine_grid_errors()
  check_error(function() F.affine_grid(ember.zeros(1, 2, 3), { 2, 1, 2, 3 }) end, "affine_grid", "batch size 2",
    "{1,2,3}")
  check_error(function() F.affine_grid(ember.zeros(1, 2, 3), { 1, 2, 3 }) end, "affine_grid", "4 entries", "{1,2,3}")
  check_error(function() F.affine_grid(ember.zeros(1, 2, 3), { 1, 1, 2, 3, 4 }) end, "affine_grid", "(N, 3, 4)",
    "{1,2,3}")
  check_error(function() F.affine_grid(ember.zeros(1, 2, 3):long(), { 1, 1, 2, 3 }) end, "affine_grid", "theta",
    "int64")
  check_error(function() F.affine_grid(ember.zeros(1, 2, 3), { 1, 1, 0, 3 }) end, "affine_grid", "positive",
    "{1,1,0,3}")
end

-- ---- interpolate: area and antialias (upsample_aa) ----

local function seq(...)
  local shape = { ... }
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 1, n do v[i] = math.sin(i * 1.7) + 0.1 * i end
  return ember.tensor(v, { dtype = "float64" }):reshape(shape)
end

function T.interpolate_area_is_adaptive_avg_pool()
  check_tensor(F.interpolate(seq(1, 2, 5), 3, nil, "area"):flatten(),
    { 0.518062, 0.070919, 1.0963, -0.009006, 1.012588, 0.667672 })
  check_tensor(F.interpolate(seq(1, 1, 4, 5), { 3, 2 }, nil, "area"):flatten(),
    { 0.34191, 0.760215, 0.997218, 1.078855, 1.501239, 1.625446 })
  local r = F.interpolate(seq(1, 1, 2, 3, 4), nil, 0.5, "area")
  check_shape(r, { 1, 1, 1, 1, 2 })
  check_tensor(r:flatten(), { 0.872609, 1.702263 })
  -- the same as adaptive_avg_pool2d, gradients included
  local x = seq(2, 3, 7, 5):requires_grad_()
  local y = F.interpolate(x, { 3, 4 }, nil, "area")
  check_tensor(y, F.adaptive_avg_pool2d(x, { 3, 4 }):tolist(), 1e-12)
  y:sum():backward()
  check_shape(x.grad, { 2, 3, 7, 5 })
end

function T.interpolate_antialias_matches_pytorch()
  check_tensor(F.interpolate(seq(1, 1, 5, 6), { 2, 3 }, nil, "bilinear", nil, nil, true):flatten(),
    { 0.821056, 0.919148, 1.176098, 1.996673, 2.131811, 2.360604 })
  check_tensor(F.interpolate(seq(1, 1, 5, 6):float(), { 2, 3 }, nil, "bilinear", nil, nil, true):flatten(),
    { 0.821056, 0.919148, 1.176098, 1.996673, 2.131811, 2.360604 })
  check_tensor(F.interpolate(seq(1, 1, 4, 5), { 7, 3 }, nil, "bicubic", true, nil, true):flatten(),
    { 0.373985, 0.116623, 1.476722, 0.283937, 0.403799, 1.122878, 0.092611, 1.012112, 0.37285, 0.415868, 1.247831,
      0.377723, 1.267161, 1.068183, 1.190235, 1.688061, 1.226717, 1.916356, 1.679193, 1.690801, 2.514061 })
  -- scale factors: the output size is trunc(in * factor), the factors set the filter
  local y = F.interpolate(seq(1, 1, 5, 7), nil, { 0.6, 1.7 }, "bicubic", nil, nil, true)
  check_shape(y, { 1, 1, 3, 11 })
  check_tensor(y:flatten(), { 1.387253, 1.067268, 0.471349, -0.191892, -0.341014, 0.534518, 1.259132, 1.664523,
    1.066739, 0.302528, 0.175773, 1.79575, 2.092651, 2.444702, 1.729639, 1.055844, 0.972156, 1.544616, 2.556225, 2.7444,
    2.424367, 1.566763, 1.89357, 2.540808, 3.55016, 3.575659, 3.127238, 2.230233, 2.124682, 2.767056, 3.608761,
    4.121468, 3.479893 })
  -- gradient of sum(y * w), PyTorch's
  local x = seq(1, 2, 5, 6):requires_grad_()
  local loss = (F.interpolate(x, { 3, 2 }, nil, "bilinear", nil, nil, true) * seq(1, 2, 3, 2)):sum()
  loss:backward()
  check_tensor(x.grad:flatten(), { 0.155952, 0.233928, 0.151985, 0.070042, -0.011902, -0.007934, 0.082197, 0.123295,
    0.104058, 0.08482, 0.065583, 0.043722, -0.086919, -0.130378, -0.024828, 0.080723, 0.186274, 0.124182, 0.104356,
    0.156534, 0.123842, 0.09115, 0.058458, 0.038972, 0.185498, 0.278247, 0.178364, 0.078481, -0.021402, -0.014268,
    0.011695, 0.017542, 0.130206, 0.24287, 0.355535, 0.237023, 0.080812, 0.121218, 0.170768, 0.220318, 0.269868,
    0.179912, 0.180103, 0.270154, 0.182784, 0.095413, 0.008042, 0.005361, 0.173934, 0.260901, 0.292852, 0.324804,
    0.356755, 0.237837, 0.135857, 0.203786, 0.292985, 0.382185, 0.471384, 0.314256 })
  -- a constant image stays constant (the weights sum to 1), non-contiguous input, empty batch
  check_tensor(F.interpolate(ember.full({ 1, 1, 9, 4 }, 2.5):transpose(3, 4), { 3, 2 }, nil, "bicubic", nil, nil, true),
    { { { { 2.5, 2.5 }, { 2.5, 2.5 }, { 2.5, 2.5 } } } })
  check_shape(F.interpolate(ember.zeros(0, 3, 4, 4), { 2, 2 }, nil, "bilinear", nil, nil, true), { 0, 3, 2, 2 })
end

function T.interpolate_antialias_errors()
  local x = ember.ones(1, 1, 4, 4)
  check_error(function() F.interpolate(x:half(), { 2, 2 }, nil, "bilinear", nil, nil, true) end, "interpolate:",
    "float16")
  check_error(function() F.interpolate(x, { 2, 2 }, nil, "nearest", nil, nil, true) end, "interpolate:", "antialias")
  check_error(function() ember.upsample_aa(ember.ones(1, 4, 4), { 2 }, "linear") end, "upsample_aa:", "4-d", "{1,4,4}")
  check_error(function() ember.upsample_aa(x, { 2, 2 }, "nearest") end, "upsample_aa", "mode")
  check_error(function() ember.upsample_aa_backward(ember.ones(1, 1, 2, 3), { 1, 1, 4, 4 }, { 2, 2 }, "cubic") end,
    "upsample_aa_backward:", "{1,1,2,3}", "{1,1,2,2}")
end

-- ---- rrelu ----

function T.rrelu_eval_is_leaky_relu_with_the_mean_slope()
  local x = f64({ -2, -0.5, 0, 1.5, 0 / 0, -math.huge, math.huge })
  local m = (1 / 8 + 1 / 3) / 2
  check_tensor(F.rrelu(x), { -2 * m, -0.5 * m, 0, 1.5, 0 / 0, -math.huge, math.huge }, 1e-12)
  check_tensor(F.rrelu(x, 0.1, 0.3), { -0.4, -0.1, 0, 1.5, 0 / 0, -math.huge, math.huge }, 1e-12)
  -- the same as leaky_relu, gradient included (PyTorch: 0.2292 below 0 and at NaN, 1 above)
  local a = f64({ -2, 3, 0 / 0 }):requires_grad_()
  F.rrelu(a):sum():backward()
  check_tensor(a.grad, { m, 1, m }, 1e-12)
  -- with create_graph the gradient depends on the input (a zero derivative), as PyTorch's
  local s = f64({ -2, 3 }):requires_grad_()
  local gs = ember.autograd.grad({ F.rrelu(s):sum() }, { s }, { create_graph = true })
  check(gs[1].requires_grad, "create_graph gradient requires grad")
  local g2 = ember.autograd.grad({ (gs[1] * gs[1]):sum() }, { s }, { allow_unused = true })
  check_tensor(g2[1], { 0, 0 })
  -- float32 and bfloat16 as PyTorch; empty and 0-dim
  check_tensor(F.rrelu(ember.tensor({ -1.0, 2.0 })), { -0.2291667, 2 }, 1e-6)
  check(F.rrelu(ember.tensor({ -1.0, 2.0 }, { dtype = "bfloat16" })).dtype == "bfloat16")
  check_tensor(F.rrelu(ember.tensor({ -1.0, 2.0 }, { dtype = "bfloat16" })):float(), { -0.229492, 2 }, 1e-6)
  check_shape(F.rrelu(ember.zeros(0, 3)), { 0, 3 })
  check_tensor(F.rrelu(ember.tensor(-4.0), 0.25, 0.25), -1)
end

function T.rrelu_training_draws_slopes_in_range_reproducibly()
  ember.manual_seed(3)
  local x = -ember.rand(4000, { dtype = "float64" }) - 0.5 -- all negative
  local y = F.rrelu(x, 0.1, 0.4, true)
  local r = y / x
  check(r:min():item() >= 0.1 and r:max():item() < 0.4, "slopes in [lower, upper)")
  check(math.abs(r:mean():item() - 0.25) < 0.01, "mean slope " .. r:mean():item())
  check(r:std():item() > 0.08, "slopes vary")
  ember.manual_seed(3)
  local x2 = -ember.rand(4000, { dtype = "float64" }) - 0.5
  check_tensor(F.rrelu(x2, 0.1, 0.4, true), y:tolist(), 0, "manual_seed reproduces the slopes")
  -- positive and NaN elements pass; a private generator
  local g = ember.Generator():manual_seed(9)
  local o, noise = ember.rrelu_with_noise(f64({ 2, 0 / 0, -1 }), 0.1, 0.4, true, { generator = g })
  check_tensor(o:narrow(1, 1, 2), { 2, 0 / 0 })
  check_tensor(noise:narrow(1, 1, 2), { 1, 1 })
  check(-o[3]:item() >= 0.1 and -o[3]:item() < 0.4)
  check_tensor(noise[3], -o[3]:item(), 1e-12)
  -- the gradient is the drawn slope (PyTorch's rrelu_with_noise_backward)
  local a = (-ember.rand(50, { dtype = "float64" }) - 0.1):requires_grad_()
  local out = F.rrelu(a, 0.2, 0.3, true)
  out:sum():backward()
  check_tensor(a.grad, (out / a):detach():tolist(), 1e-12)
  -- lower == upper: exactly that slope
  check_tensor(F.rrelu(f64({ -2, 1 }), 0.25, 0.25, true), { -0.5, 1 }, 1e-12)
  -- a non-contiguous input
  local m = f64({ { -1, 2 }, { -3, 4 } }):t()
  check_tensor(F.rrelu(m, 0.5, 0.5, true), { { -0.5, -1.5 }, { 2, 4 } }, 1e-12)
end

function T.rrelu_inplace_writes_input_as_pytorch()
  local a = f64({ -1, 2 })
  local v0 = a._version
  local r = F.rrelu(a, 0.5, 0.5, false, true)
  check(rawequal(r, a) or r:data_ptr() == a:data_ptr(), "returns input")
  check_tensor(a, { -0.5, 2 })
  if v0 then check(a._version > v0, "bumps the version") end
  local b = f64({ -4, 3 })
  ember.rrelu_(b, 0.25, 0.25, true)
  check_tensor(b, { -1, 3 })
  F.rrelu_(b, 0.5, 0.5)
  check_tensor(b, { -0.5, 3 })
  -- the gradient flows to the tensor's old value through the slopes
  local x = f64({ -1, 2 }):requires_grad_()
  local y = x * 1
  F.rrelu(y, 0.1, 0.3, true, true)
  y:sum():backward()
  check(x.grad[1]:item() >= 0.1 and x.grad[1]:item() < 0.3)
  check_tensor(x.grad[2], 1)
  -- a leaf that requires grad is refused, as PyTorch
  check_error(function() F.rrelu(f64({ -1, 2 }):requires_grad_(), 0.1, 0.3, false, true) end, "rrelu", "leaf")
  -- nn.RReLU: slopes drawn in training mode only
  local mod = ember.nn.RReLU(0.1, 0.3)
  local z = -ember.rand(100, { dtype = "float64" }) - 0.5
  check(((mod(z) / z) - 0.2):abs():max():item() > 1e-3, "training mode draws")
  mod:eval()
  check_tensor(mod(z) / z, ember.full({ 100 }, 0.2, { dtype = "float64" }):tolist(), 1e-12)
end

function T.rrelu_errors()
  check_error(function() F.rrelu(ember.ones(2), 0.5, 0.1) end, "rrelu", "lower", "upper")
  check_error(function() F.rrelu(ember.ones(2), 0.5, 0.1, true) end, "rrelu", "lower")
  check_error(function() F.rrelu(ember.ones(2):half()) end, "rrelu", "float16")
  check_error(function() F.rrelu(ember.ones(2):long(), 0.1, 0.3, true) end, "rrelu", "int64")
  check_error(function() ember.rrelu_(ember.ones(2):long()) end, "rrelu_", "int64")
end

-- ---- 5-d (volumetric) grid_sample ----
-- F.grid_sample of a (1, 2, 2, 3, 4) input at a (1, 1, 2, 3, 3) grid (points
-- inside and outside), every mode, padding and align_corners, and the
-- gradients of sum(GO3 * y), computed with PyTorch 1.13 in float64
local INP3 = { -0.6, -0.22999999999999998, 0.14, 0.5099999999999999, 0.88, 1.25, -0.28000000000000014, 0.08999999999999997, 0.4600000000000001, 0.8300000000000002, 1.2000000000000002, -0.3299999999999995, 0.0399999999999997, 0.4099999999999998, 0.7799999999999999, 1.15, -0.3799999999999998, -0.009999999999999676, 0.36000000000000043, 0.7300000000000005, 1.1000000000000005, -0.43000000000000005, -0.059999999999999054, 0.31000000000000016, 0.6799999999999994, 1.0500000000000003, -0.4800000000000003, -0.10999999999999932, 0.2599999999999999, 0.6300000000000009, 1.0, -0.5299999999999988, -0.1599999999999996, 0.20999999999999963, 0.5800000000000006, 0.9499999999999998, -0.5799999999999991, -0.20999999999999985, 0.16000000000000114, 0.5300000000000004, 0.9000000000000014, 1.2700000000000005, -0.2600000000000001, 0.11000000000000087, 0.48000000000000187, 0.8499999999999993, 1.2200000000000002, -0.3099999999999986 }
local GRID3 = { -0.9, 0.3, -0.2, 0.45, -0.7, 0.8, 1.3, 0.1, -0.55, 0.05, 1.1, 0.35, -1.25, -0.4, 0.6, 0.7, 0.65, -1.15 }
local GO3 = { -0.5, -0.21000000000000002, 0.07999999999999996, 0.3699999999999999, 0.6599999999999999, -0.3500000000000001, -0.060000000000000275, 0.22999999999999976, 0.5199999999999998, -0.4900000000000002, -0.20000000000000018, 0.08999999999999986 }
local REF3 = {
  { "bilinear", "zeros", false, { 0.39865000000000006, 0.61712, 0.0, -0.006649999999999837, 0.0, -0.05993749999999978, 0.18410000000000035, 0.20482000000000056, 0.0, 0.3415999999999997, 0.0, 0.30826249999999983 }, { 0.0, 0.0, 0.0, 0.0, -0.13474999999999993, 0.0, -0.0003062500000000048, -0.0027562500000000404, -0.11025000000000003, 0.007769999999999983, -0.0002887500000000303, -0.10749375, 0.0, 0.0, -0.08379000000000002, -0.05586, -0.05774999999999998, 0.0, 0.0, 0.0, -0.04725000000000002, 0.04402999999999993, 0.06604499999999994, 0.0, 0.0, 0.0, 0.0, 0.0, -0.016170000000000066, 0.0, 7.875000000000109e-05, 0.0007087500000000091, -0.013230000000000065, -0.010289999999999985, -0.01236374999999999, 0.02764124999999995, 0.0, 0.0, 0.09176999999999992, 0.06117999999999993, -0.00693000000000003, 0.0, 0.0, 0.0, -0.005670000000000028, -0.05830999999999995, -0.08746499999999997, 0.0 }, { -0.6010600000000004, -0.052290000000000024, 0.11486999999999956, 0.009841999999999629, -0.13024199999999986, 0.11783799999999992, 0.0, 0.0, 0.0, -0.03108000000000022, 0.727905, -0.27292999999999956, -0.15638400000000044, 0.0, 0.0, 0.3835299999999998, 0.10321499999999977, 0.13920499999999963 } },
  { "bilinear", "zeros", true, { 0.49930000000000013, 0.65475, 0.10560000000000011, 0.17302500000000035, -0.07, 0.1907812500000003, 0.44550000000000056, 0.08177500000000061, -0.15441249999999945, 0.7692749999999999, 0.20750000000000057, 0.5223937500000003 }, { 0.03299999999999999, 0.0, -0.012127500000000001, -0.002572499999999997, -0.129, -0.031499999999999986, -0.056188125000000054, -0.03273437500000001, -0.07650000000000001, 0.03249562499999995, -0.03246750000000008, -0.11233062499999999, 0.13199999999999998, 0.0, -0.10914750000000005, -0.02315249999999998, 0.07900000000000001, -0.020999999999999994, -0.04677750000000002, -0.0010124999999999926, -0.05100000000000002, 0.08652937499999992, 0.129245625, 0.0009900000000000009, -0.010000000000000007, 0.0, 0.013282499999999987, 0.0028174999999999936, -0.036420000000000105, -0.0037800000000000156, 0.018804374999999984, 0.21671812499999998, -0.009180000000000044, -0.062533125, -0.058061250000000064, 0.05192687499999996, -0.040000000000000036, 0.0, 0.11954249999999991, 0.02535749999999995, -0.07428000000000012, -0.002520000000000011, 0.051232499999999966, 0.06878249999999998, -0.00612000000000003, -0.12759187499999997, -0.1711631250000001, 0.006435000000000006 }, { -0.1398000000000001, -0.08779999999999996, 0.1746749999999998, -0.008565000000000194, 0.02765249999999976, -0.047678749999999985, 0.19594499999999904, 0.2825349999999998, 0.07842999999999999, -0.05994000000000041, 0.3476950000000001, -0.35090999999999983, -0.21048000000000033, -0.15400000000000008, -0.09562500000000007, 0.38322749999999994, -0.08880000000000043, -0.010680000000000089 } },
  { "bilinear", "border", false, { 0.5695000000000001, 0.9279999999999999, 0.026999999999999982, -0.01899999999999958, -0.12800000000000006, -0.17124999999999937, 0.26300000000000057, 0.30800000000000083, -0.30799999999999883, 0.976, 0.01200000000000101, 0.8807499999999995 }, { 0.0, 0.0, 0.0, 0.0, -0.19249999999999992, 0.0, -0.0008750000000000135, 0.06012499999999984, -0.15750000000000006, 0.022199999999999973, -0.0008250000000000479, -0.2951249999999999, 0.396, 0.0, -0.12600000000000003, -0.08399999999999999, 0.1814999999999999, 0.0, 0.0, 0.0, -0.06750000000000003, 0.12579999999999994, 0.18869999999999998, 0.0, 0.0, 0.0, 0.0, 0.0, -0.023100000000000096, 0.0, 0.00022500000000000306, 0.4440249999999998, -0.018900000000000094, -0.02939999999999999, -0.03532500000000001, 0.15697499999999986, -0.12000000000000012, 0.0, 0.13799999999999987, 0.09199999999999989, -0.0899000000000001, 0.0, 0.0, 0.0, -0.008100000000000041, -0.16660000000000005, -0.24990000000000018, 0.0 }, { -0.0, -0.07469999999999997, 0.1640999999999994, 0.01479999999999948, -0.0, 0.0, 0.0, 1.1039999999999988, 0.0, -0.08880000000000055, 0.0, -0.7797999999999996, 0.0, -0.8597999999999999, 0.0, 1.0957999999999992, 0.2948999999999993, -0.0 } },
  { "bilinear", "border", true, { 0.49930000000000013, 0.65475, 0.19200000000000006, 0.19225000000000048, -0.11200000000000002, 0.20625000000000032, 0.44550000000000056, 0.08177500000000061, -0.28074999999999883, 0.8547500000000001, 0.33200000000000085, 0.5647500000000004 }, { 0.052799999999999986, 0.0, -0.012127500000000001, -0.002572499999999997, -0.09930000000000003, -0.031499999999999986, -0.06032250000000006, -0.012677500000000043, -0.07650000000000001, 0.03760624999999995, -0.03323125000000007, -0.11892499999999996, 0.21120000000000003, 0.0, -0.10914750000000005, -0.02315249999999998, 0.19779999999999998, -0.020999999999999994, -0.04677750000000002, 0.006277499999999997, -0.05100000000000002, 0.09714374999999993, 0.14360625000000002, 0.0018000000000000004, -0.01600000000000001, 0.0, 0.013282499999999987, 0.0028174999999999936, -0.04542000000000011, -0.0037800000000000156, 0.019867499999999982, 0.38123249999999975, -0.009180000000000044, -0.06930125, -0.0652437500000001, 0.07247499999999996, -0.06400000000000007, 0.0, 0.11954249999999991, 0.02535749999999995, -0.11028000000000016, -0.002520000000000011, 0.051232499999999966, 0.11616749999999991, -0.00612000000000003, -0.14164875, -0.19018125000000016, 0.011700000000000004 }, { -0.1398000000000001, -0.08779999999999996, 0.1746749999999998, -0.008565000000000194, 0.02765249999999976, -0.047678749999999985, 0.0, 0.5136999999999994, 0.1425999999999999, -0.06660000000000058, 0.0, -0.38989999999999986, 0.0, -0.2464000000000001, -0.15300000000000014, 0.4142999999999999, -0.09600000000000042, -0.0 } },
  { "bilinear", "reflection", false, { 0.5695000000000001, 0.9279999999999999, 0.01850000000000003, -0.01899999999999958, -0.12800000000000006, -0.17124999999999937, 0.26300000000000057, 0.30800000000000083, -0.18349999999999939, 0.976, 0.01200000000000101, 0.8807499999999995 }, { 0.0, 0.0, 0.0, 0.0, -0.19249999999999992, 0.0, 0.005924999999999958, 0.05332499999999988, -0.15750000000000006, 0.022199999999999973, 0.00037499999999995176, -0.2963249999999999, 0.396, 0.0, -0.12600000000000003, -0.08399999999999999, 0.1814999999999999, 0.0, 0.0, 0.0, -0.06750000000000003, 0.12579999999999994, 0.18869999999999998, 0.0, 0.0, 0.0, 0.0, 0.0, -0.023100000000000096, 0.0, 0.044424999999999826, 0.399825, -0.018900000000000094, -0.02939999999999999, -0.027525000000000036, 0.1491749999999999, -0.12000000000000012, 0.0, 0.13799999999999987, 0.09199999999999989, -0.0899000000000001, 0.0, 0.0, 0.0, -0.008100000000000041, -0.16660000000000005, -0.24990000000000018, 0.0 }, { -0.0, -0.07469999999999997, 0.1640999999999994, 0.01479999999999948, -0.0, 0.0, 1.2811999999999983, 0.9785999999999991, 0.0, -0.08880000000000055, -0.0, -0.7797999999999996, -0.0, -0.8597999999999999, 0.0, 1.0957999999999992, 0.2948999999999993, 0.0 } },
  { "bilinear", "reflection", true, { 0.49930000000000013, 0.65475, 0.09176250000000015, 0.19874375000000047, 0.02675000000000001, 0.21256875000000028, 0.44550000000000056, 0.08177500000000061, 0.16835000000000042, 0.8230062499999999, 0.4707500000000007, 0.5393625000000004 }, { 0.03299999999999999, 0.019799999999999998, -0.012127500000000001, -0.002572499999999997, -0.129, 0.003310625000000001, -0.024163750000000074, -0.03273437500000001, -0.07650000000000001, 0.03249562499999995, -0.02967750000000008, -0.11233062499999999, 0.13199999999999998, 0.0792, -0.10914750000000005, -0.02315249999999998, 0.07900000000000001, 0.10841437499999998, -0.029261250000000016, -0.00606562499999999, -0.05100000000000002, 0.08652937499999992, 0.12237750000000001, -0.00839437499999999, -0.010000000000000007, -0.006000000000000005, 0.013282499999999987, 0.0028174999999999936, -0.036420000000000105, -0.019548125000000027, 0.1728624999999998, 0.21671812499999998, -0.009180000000000044, -0.062533125, -0.039926250000000066, 0.05192687499999996, -0.040000000000000036, -0.024000000000000025, 0.11954249999999991, 0.02535749999999995, -0.07428000000000012, -0.05257687500000005, 0.08066249999999989, 0.07008187499999997, -0.00612000000000003, -0.12759187499999997, -0.16392375000000012, 0.008848125 }, { -0.1398000000000001, -0.08779999999999996, 0.1746749999999998, -0.008565000000000194, 0.02765249999999976, -0.047678749999999985, 0.7517099999999988, 0.3221799999999999, -0.03865999999999988, -0.0066075000000003214, 0.17957124999999996, -0.3429224999999998, -0.2553000000000001, -0.24640000000000012, -0.15300000000000005, 0.35990062500000003, -0.07483875000000048, 0.029976249999999992 } },
  { "nearest", "zeros", false, { 0.88, 0.7799999999999999, 0.0, 0.0, 0.0, 0.0, 0.2599999999999999, 0.16000000000000114, 0.0, 0.0, 0.0, 0.0 }, { 0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.21000000000000002, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.060000000000000275, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.22999999999999976, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 }, { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 } },
  { "nearest", "zeros", true, { 0.88, 0.7799999999999999, 0.08999999999999997, -0.059999999999999054, -0.3799999999999998, -0.3299999999999995, 0.2599999999999999, 0.16000000000000114, -0.5299999999999988, 1.2200000000000002, 0.9000000000000014, 0.9499999999999998 }, { 0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0, 0.07999999999999996, 0.0, 0.0, 0.0, -0.3500000000000001, 0.0, 0.0, -0.21000000000000002, 0.0, 0.6599999999999999, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3699999999999999, 0.0, 0.0, 0.0, 0.0, 0.0, -0.060000000000000275, 0.0, 0.0, 0.5199999999999998, 0.0, 0.0, 0.0, 0.08999999999999986, 0.0, 0.0, 0.22999999999999976, 0.0, -0.20000000000000018, 0.0, 0.0, 0.0, 0.0, 0.0, -0.4900000000000002, 0.0 }, { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 } },
  { "nearest", "border", false, { 0.88, 0.7799999999999999, 0.08999999999999997, -0.059999999999999054, 0.0399999999999997, -0.3299999999999995, 0.2599999999999999, 0.16000000000000114, -0.5299999999999988, 1.2200000000000002, -0.5799999999999991, 0.9499999999999998 }, { 0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0, 0.07999999999999996, 0.0, 0.0, 0.0, -0.3500000000000001, 0.6599999999999999, 0.0, -0.21000000000000002, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3699999999999999, 0.0, 0.0, 0.0, 0.0, 0.0, -0.060000000000000275, 0.0, 0.0, 0.5199999999999998, 0.0, 0.0, 0.0, 0.08999999999999986, -0.20000000000000018, 0.0, 0.22999999999999976, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.4900000000000002, 0.0 }, { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 } },
  { "nearest", "border", true, { 0.88, 0.7799999999999999, 0.08999999999999997, -0.059999999999999054, -0.3799999999999998, -0.3299999999999995, 0.2599999999999999, 0.16000000000000114, -0.5299999999999988, 1.2200000000000002, 0.9000000000000014, 0.9499999999999998 }, { 0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0, 0.07999999999999996, 0.0, 0.0, 0.0, -0.3500000000000001, 0.0, 0.0, -0.21000000000000002, 0.0, 0.6599999999999999, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3699999999999999, 0.0, 0.0, 0.0, 0.0, 0.0, -0.060000000000000275, 0.0, 0.0, 0.5199999999999998, 0.0, 0.0, 0.0, 0.08999999999999986, 0.0, 0.0, 0.22999999999999976, 0.0, -0.20000000000000018, 0.0, 0.0, 0.0, 0.0, 0.0, -0.4900000000000002, 0.0 }, { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 } },
  { "nearest", "reflection", false, { 0.88, 0.7799999999999999, 0.08999999999999997, -0.059999999999999054, 0.0399999999999997, -0.3299999999999995, 0.2599999999999999, 0.16000000000000114, -0.5299999999999988, 1.2200000000000002, -0.5799999999999991, 0.9499999999999998 }, { 0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0, 0.07999999999999996, 0.0, 0.0, 0.0, -0.3500000000000001, 0.6599999999999999, 0.0, -0.21000000000000002, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3699999999999999, 0.0, 0.0, 0.0, 0.0, 0.0, -0.060000000000000275, 0.0, 0.0, 0.5199999999999998, 0.0, 0.0, 0.0, 0.08999999999999986, -0.20000000000000018, 0.0, 0.22999999999999976, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.4900000000000002, 0.0 }, { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 } },
  { "nearest", "reflection", true, { 0.88, 0.7799999999999999, 0.08999999999999997, -0.059999999999999054, -0.3799999999999998, -0.3299999999999995, 0.2599999999999999, 0.16000000000000114, -0.5299999999999988, 1.2200000000000002, 0.9000000000000014, 0.9499999999999998 }, { 0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0, 0.07999999999999996, 0.0, 0.0, 0.0, -0.3500000000000001, 0.0, 0.0, -0.21000000000000002, 0.0, 0.6599999999999999, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3699999999999999, 0.0, 0.0, 0.0, 0.0, 0.0, -0.060000000000000275, 0.0, 0.0, 0.5199999999999998, 0.0, 0.0, 0.0, 0.08999999999999986, 0.0, 0.0, 0.22999999999999976, 0.0, -0.20000000000000018, 0.0, 0.0, 0.0, 0.0, 0.0, -0.4900000000000002, 0.0 }, { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 } },
}
local REF3_F32 = { 0.5695000290870667, 0.9279999732971191, 0.018499992787837982, -0.019000066444277763, -0.12800000607967377, -0.171250119805336, 0.2630000114440918, 0.30800002813339233, -0.18349996209144592, 0.9760000109672546, 0.012000054121017456, 0.8807498812675476 }

function T.grid_sample_5d_matches_pytorch()
  for _, r in ipairs(REF3) do
    local name = string.format("%s/%s/%s", r[1], r[2], tostring(r[3]))
    local a = f64(INP3):reshape(1, 2, 2, 3, 4):requires_grad_()
    local g = f64(GRID3):reshape(1, 2, 1, 3, 3):requires_grad_()
    local y = F.grid_sample(a, g, r[1], r[2], r[3])
    check_shape(y, { 1, 2, 2, 1, 3 }, name)
    check_tensor(y:flatten(), r[4], 1e-12, name)
    y:backward(f64(GO3):reshape(1, 2, 2, 1, 3))
    check_tensor(a.grad:flatten(), r[5], 1e-12, name .. " grad input")
    check_tensor(g.grad:flatten(), r[6], 1e-12, name .. " grad grid")
    -- the kernel and its backward op directly, one result asked for
    check_tensor(ember.grid_sampler_3d(a:detach(), g:detach(), r[1], r[2], r[3]):flatten(), r[4], 1e-12, name)
    local gi, gg = ember.grid_sampler_3d_backward(f64(GO3):reshape(1, 2, 2, 1, 3), a:detach(), g:detach(), r[1], r[2],
      r[3], { 0, 1 })
    check_shape(gi, { 0 }, name)
    check_tensor(gg:flatten(), r[6], 1e-12, name)
  end
  -- float32 (PyTorch's float32 result), and a non-contiguous input and grid
  local a32 = ember.tensor(INP3, { dtype = "float32" }):reshape(1, 2, 2, 3, 4)
  local g32 = ember.tensor(GRID3, { dtype = "float32" }):reshape(1, 2, 1, 3, 3)
  check_tensor(F.grid_sample(a32, g32, "bilinear", "reflection", false):flatten(), REF3_F32, 1e-6)
  local at = f64(INP3):reshape(1, 2, 2, 4, 3):transpose(4, 5)
  local ac = at:contiguous()
  local gt = f64(GRID3):reshape(1, 3, 1, 2, 3):transpose(2, 4)
  check(not at:is_contiguous() and not gt:is_contiguous())
  check_tensor(F.grid_sample(at, gt, "bilinear", "border", true),
    F.grid_sample(ac, gt:contiguous(), "bilinear", "border", true):tolist(), 0)
end

-- NaN and infinite grid values (PyTorch 1.13's scalar 3-d kernel): zeros
-- padding reads nothing (0, not NaN); border clamps NaN to the far edge in
-- the forward, while its backward leaves the point out
function T.grid_sample_5d_nan_and_inf()
  local nan, inf = 0 / 0, math.huge
  local inp = ember.arange(24, { dtype = "float64" }):reshape(1, 1, 2, 3, 4)
  local grid = f64({ { { { { nan, 0.2, 0.1 }, { inf, 0, 0 }, { -inf, 0.5, -0.5 }, { 0.3, 0.2, 5.0 } } } } })
  local want = {
    bilinear = { zeros = { { 0, 0, 0, 0 }, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 0 },
                 border = { { 15.399999999999999, 13.0, 7.0, 19.3 },
                            { 0, 0, 0, 0, 6, 12, 0, 6, 0, 2.0000000000000018, 5.9999999999999964, 0 }, 3 },
                 reflection = { { 15.399999999999999, 13.0, 10.0, 19.3 },
                                { 0, 0, 0, 0, 0, 0, 0, 0, 0, 2.0000000000000018, 5.9999999999999964, 0 }, 1 } },
    nearest = { zeros = { { 0, 0, 0, 0 }, nil, 0 }, border = { { 19, 19, 8, 18 }, nil, 3 },
                reflection = { { 19, 19, 11, 18 }, nil, 1 } },
  }
  for mode, byp in pairs(want) do
    for pad, w in pairs(byp) do
      local a = inp:clone():requires_grad_()
      local g = grid:clone():requires_grad_()
      local y = F.grid_sample(a, g, mode, pad, false)
      check_tensor(y:flatten(), w[1], 1e-12, mode .. "/" .. pad)
      y:sum():backward()
      check_tensor(g.grad:flatten(), w[2] or ember.zeros(12):tolist(), 1e-12, mode .. "/" .. pad .. " grad grid")
      check_near(a.grad:sum():item(), w[3], 1e-12, mode .. "/" .. pad .. " grad input")
    end
  end
end

function T.grid_sample_5d_edges_and_errors()
  -- nearest rounds half away from zero in 3-d (PyTorch 1.13's std::round;
  -- 2-d rounds half to even): x at 0.5, 1.5, 2.5, -0.5 pixels
  local row = ember.arange(4, { dtype = "float64" }):reshape(1, 1, 1, 1, 4)
  local xs = f64({ { -0.5, 0, 0 }, { 0, 0, 0 }, { 0.5, 0, 0 }, { -1, 0, 0 } }):reshape(1, 1, 1, 4, 3)
  local a = row:clone():requires_grad_()
  local y = F.grid_sample(a, xs, "nearest", "zeros", false)
  check_tensor(y:flatten(), { 1, 2, 3, 0 })
  y:sum():backward()
  check_tensor(a.grad:flatten(), { 0, 1, 1, 1 })
  -- empty channels, empty output points
  check_shape(F.grid_sample(ember.ones(1, 0, 2, 2, 2), ember.zeros(1, 1, 1, 1, 3)), { 1, 0, 1, 1, 1 })
  check_shape(F.grid_sample(ember.ones(2, 1, 2, 2, 2), ember.zeros(2, 0, 1, 1, 3)), { 2, 1, 0, 1, 1 })
  -- a 1-pixel depth with align_corners: every z reads that plane
  local one = f64({ 1, 2, 3, 4 }):reshape(1, 1, 1, 2, 2)
  check_tensor(F.grid_sample(one, f64({ -1, -1, 0.7 }):reshape(1, 1, 1, 1, 3), "bilinear", "border", true), 1, 1e-12)
  check_error(function() F.grid_sample(ember.ones(1, 1, 2, 2, 2), ember.zeros(1, 1, 1, 1, 2)) end,
    "grid_sample", "size 3", "{1,1,1,1,2}")
  check_error(function() F.grid_sample(ember.ones(1, 1, 2, 2, 2), ember.zeros(2, 1, 1, 1, 3)) end,
    "grid_sample", "batch")
  check_error(function() F.grid_sample(ember.ones(1, 1, 0, 2, 2), ember.zeros(1, 1, 1, 1, 3)) end,
    "grid_sample", "non-empty spatial")
  check_error(function() F.grid_sample(ember.ones(1, 1, 2, 2, 2):int(), ember.zeros(1, 1, 1, 1, 3):int()) end,
    "grid_sample", "int32")
  check_error(function() F.grid_sample(ember.ones(1, 1, 2, 2, 2), ember.zeros(1, 1, 1, 1, 3), "bicubic") end,
    "grid_sample", "bicubic", "4-d")
  check_error(function() F.grid_sample(ember.ones(1, 1, 2, 2, 2), ember.zeros(1, 1, 1, 3)) end,
    "grid_sample", "5-d")
  check_error(function()
    ember.grid_sampler_3d_backward(ember.ones(1, 1, 1, 1, 2), ember.ones(1, 1, 2, 2, 2), ember.zeros(1, 1, 1, 1, 3),
      "bilinear", "zeros", false)
  end, "grid_sampler_3d_backward", "grad_output")
  -- no double backward, as in PyTorch 1.13
  local a = ember.ones(1, 1, 2, 2, 2, { dtype = "float64", requires_grad = true })
  local g = f64({ 0.1, -0.2, 0.3 }):reshape(1, 1, 1, 1, 3):requires_grad_()
  local y = F.grid_sample(a, g, "bilinear", "zeros", false)
  local ga = ember.autograd.grad({ y:sum() }, { a }, { create_graph = true })[1]
  check_error(function() ember.autograd.grad({ ga:sum() }, { g }) end, "grid_sampler_3d_backward", "not implemented")
end

-- affine_grid's result is a tensor of its own (torch's affine_grid_generator
-- is one op), not a view of the product: a grid made under no_grad can be
-- written with a tensor that requires grad, and the write is recorded
function T.affine_grid_result_is_not_a_view()
  local F = ember.nn.functional
  local g
  ember.no_grad(function() g = F.affine_grid(f64({ { { 1, 0, 0 }, { 0, 1, 0 } } }), { 1, 1, 2, 2 }) end)
  local w = ember.ones(2, 2, { dtype = "float64", requires_grad = true })
  g[1] = w
  check(g.requires_grad)
  g:sum():backward()
  check_tensor(w.grad, { { 2, 2 }, { 2, 2 } }) -- w broadcast over the grid's 2 rows
end

return T
