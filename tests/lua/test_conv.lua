-- test_conv.lua -- the conv family (convolution, conv1d/2d/3d,
-- conv_transpose1d/2d/3d, unfold, fold): values against PyTorch 1.13 (the
-- expected numbers were computed with torch from the same inputs), shapes,
-- dtypes, unbatched and empty inputs, non-contiguous operands, gradients,
-- and the errors (each names the op, the argument and the value).
local T = {}
local F = ember.nn.functional

-- 1..n in the given shape (float32), as torch.arange(1, n + 1).reshape(...).float()
local function I(...)
  local n = 1
  for _, s in ipairs({ ... }) do n = n * s end
  return ember.arange(1, n + 1):reshape(...):float()
end
local x = (I(2, 2, 3, 4) - 12) / 4
local w = (I(3, 2, 2, 2) - 12) / 8
local b = ember.tensor({ 0.5, -1.0, 2.0 })

local C2D = { 3.125, 5.6875, 4.875, 4.0625, 2.125, 1.375, 1.25, -0.625, -2.5, -1.75, -0.875, -0.3125, -0.125, 0.0625,
  -0.375, 0.875, 2.75, 2.875, 3.0, 0.75, -0.375, -1.8125, -0.625, 0.5625, 1.625, 4.875, 8.75, 10.875, 13.0, 7.75, -5.875,
  -13.8125, -14.625, -15.4375, -8.375, -19.625, -43.75, -45.625, -47.5, -25.75, 2.125, 4.1875, 4.375, 4.5625, 1.125,
  3.875, 5.75, 5.875, 6.0, 0.75, 14.625, 26.6875, 27.875, 29.0625, 15.125, 31.875, 59.75, 61.875, 64.0, 31.75 }

function T.conv2d_values()
  local y = F.conv2d(x, w, b, { 2, 1 }, 1)
  check_shape(y, { 2, 3, 2, 5 })
  check_eq(y.dtype, "float32")
  check_tensor(y:reshape(-1), C2D, 1e-5)
  -- the same through ember.conv2d, the options table and torch.convolution's spelling
  check_tensor(ember.conv2d(x, w, b, { stride = { 2, 1 }, padding = 1 }):reshape(-1), C2D, 1e-5)
  check_tensor(ember.convolution(x, w, b, { 2, 1 }, { 1, 1 }, { 1, 1 }, false, { 0, 0 }, 1):reshape(-1), C2D, 1e-5)
  -- float64 with dilation
  local yd = F.conv2d(x:double(), w:double(), nil, 1, { 0, 2 }, { 1, 2 })
  check_shape(yd, { 2, 3, 2, 6 })
  check_tensor(yd[1][1]:reshape(-1), { 4.375, 3.5, 7.375, 5.5, 2.75, 1.75, 0.875, 0.0, -0.125, -2.0, -1.25, -2.25 }, 1e-12)
  -- bfloat16 computes in float32 and rounds
  local yb = F.conv2d(x:to("bfloat16"), w:to("bfloat16"), b:to("bfloat16"), 1, 1)
  check_eq(yb.dtype, "bfloat16")
  check_tensor(yb[1][1][1], { 3.125, 5.6875, 4.875, 4.0625, 2.125 }, 1e-2)
  -- float16 works too (PyTorch 1.13 has no CPU kernel for it)
  check_tensor(F.conv2d(x:half(), w:half(), b:half(), { 2, 1 }, 1):float():reshape(-1), C2D, 2e-3)
end

function T.conv2d_groups_depthwise_pointwise()
  local wg = (I(4, 1, 3, 3) - 18) / 10
  local y = F.conv2d(x, wg, nil, 1, 1, 1, 2)
  check_shape(y, { 2, 4, 3, 4 })
  check_tensor(y[1]:select(2, 1):reshape(-1), { 9.675, 14.35, 12.625, 8.125, 2.025, 3.55, 3.175, 2.275, 2.775, 4.45,
    5.425, 3.625, 5.925, 9.85, 12.175, 8.575 }, 1e-5)
  local w11 = (I(3, 2, 1, 1) - 3) / 2
  check_tensor(F.conv2d(x, w11)[2]:select(2, 1):reshape(-1), { -6.375, -6.75, -7.125, -7.5, 3.125, 3.25, 3.375, 3.5,
    12.625, 13.25, 13.875, 14.5 }, 1e-5)
end

function T.conv2d_padding_strings_and_unbatched()
  local k = I(1, 1, 2, 2)
  local y = F.conv2d(x:narrow(1, 1, 1):narrow(2, 1, 1), k, nil, 1, "same")
  check_shape(y, { 1, 1, 3, 4 })
  check_tensor(y:reshape(-1), { -19.0, -16.5, -14.0, -5.0, -9.0, -6.5, -4.0, -1.0, -1.75, -1.0, -0.25, 0.0 }, 1e-5)
  check_shape(F.conv2d(x, w, { padding = "valid" }), { 2, 3, 2, 3 })
  -- unbatched {C,H,W}: the result has no batch dim either
  local yu = F.conv2d(x[1], w, b, { 2, 1 }, 1)
  check_shape(yu, { 3, 2, 5 })
  check_tensor(yu:reshape(-1), { table.unpack(C2D, 1, 30) }, 1e-5)
end

function T.conv1d_conv3d_values()
  local x1 = (I(1, 2, 5) - 5) / 3
  local w1 = (I(4, 1, 3) - 6) / 5
  check_tensor(F.conv1d(x1, w1, nil, 2, 1, 1, 2):reshape(-1), { 1.6667, 1.7333, 0.3333, 0.2667, 0.5333, 0.1333,
    0.5333, 1.3333, 0.9333, 1.1333, 3.1333, 2.7333 }, 1e-4)
  local x3 = (I(1, 1, 2, 3, 3) - 9) / 4
  local w3 = (I(2, 1, 2, 2, 2) - 8) / 8
  local y3 = F.conv3d(x3, w3, nil, 1, { 1, 0, 1 })
  check_shape(y3, { 1, 2, 3, 2, 4 })
  check_tensor(y3[1][1]:reshape(-1), { 0.5, 1.3438, 1.1562, 0.6562, 0.3125, 0.7812, 0.5938, 0.2812, 2.0625, 4.0, 3.125,
    1.3125, 0.9375, 1.375, 0.5, -0.1875, -0.6875, -1.8438, -2.5312, -1.5938, -1.625, -3.9062, -4.5938, -2.7188 }, 1e-4)
end

function T.conv_transpose_values()
  local xt = (I(1, 2, 2, 3) - 6) / 3
  local wt = (I(2, 3, 2, 2) - 12) / 6
  local y = F.conv_transpose2d(xt, wt, ember.tensor({ 1.0, 0.0, -1.0 }), 2, 1, 1)
  check_shape(y, { 1, 3, 3, 5 })
  check_tensor(y[1][1]:reshape(-1), { 3.4444, 3.3333, 3.2222, 3.0, 3.0, 2.5556, 1.8889, 2.1111, 1.3333, 1.6667, 2.7778,
    2.3333, 2.5556, 2.0, 2.3333 }, 1e-4)
  -- the adjoint of conv2d: <conv2d(a, k), c> == <a, conv_transpose2d(c, k)>
  local a, k = ember.randn(2, 3, 5, 4, { dtype = "float64" }), ember.randn(4, 3, 3, 2, { dtype = "float64" })
  local c = ember.randn(2, 4, 3, 3, { dtype = "float64" })
  local lhs = (F.conv2d(a, k, nil, 2, 1) * c):sum():item()
  local rhs = (a * F.conv_transpose2d(c, k, nil, 2, 1)):sum():item()
  check_near(lhs, rhs, 1e-10)
  check_shape(F.conv_transpose1d(ember.randn(2, 3), ember.randn(2, 4, 3)), { 4, 5 })
  check_shape(F.conv_transpose3d(ember.randn(1, 2, 2, 2, 2), ember.randn(2, 1, 2, 2, 2), nil, 1, 0, 0, 2), { 1, 2, 3, 3, 3 })
end

function T.unfold_fold_values()
  local u = F.unfold(I(1, 1, 3, 3), 2)
  check_shape(u, { 1, 4, 4 })
  check_tensor(u:reshape(-1), { 1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9 })
  check_tensor(F.fold(I(1, 4, 4), { 3, 3 }, 2):reshape(-1), { 1, 7, 6, 12, 34, 22, 11, 27, 16 })
  check_shape(F.unfold(I(2, 3, 3), { 2, 3 }, 1, 1), { 12, 12 })
  check_shape(F.fold(I(4, 4), 3, 2), { 1, 3, 3 })
  -- fold is unfold's adjoint
  local a, c = ember.randn(2, 3, 5, 4, { dtype = "float64" }), ember.randn(2, 12, 9, { dtype = "float64" })
  local lhs = (F.unfold(a, 2, 1, 1, 2) * c):sum():item()
  check_near(lhs, (a * F.fold(c, { 5, 4 }, 2, 1, 1, 2)):sum():item(), 1e-10)
end

function T.gradients()
  local xg = x:double():requires_grad_()
  local wg = w:double():requires_grad_()
  local bg = b:double():requires_grad_()
  local y = F.conv2d(xg, wg, bg, { 2, 1 }, 1);
  (y * y):sum():backward()
  check_tensor(xg.grad[1][1]:reshape(-1), { -22.8906, -27.0312, -19.1719, -8.8438, 8.875, 21.7812, 37.3125, 38.1875,
    18.8125, 34.7188, 50.625, 48.3125 }, 1e-5)
  check_tensor(wg.grad[1][1]:reshape(-1), { -1484.0, -1471.0, -2273.875, -2236.875 }, 1e-9)
  check_tensor(bg.grad, { -445.5, 94.5, 814.5 }, 1e-9)
  check_eq(tostring(y.grad_fn), "<ConvolutionBackward>")
  -- double backward records convolutions again
  y = F.conv2d(xg, wg, bg, { 2, 1 }, 1)
  local gx = ember.autograd.grad({ (y * y):sum() }, { wg }, { create_graph = true })[1]
  check(gx.requires_grad and gx.grad_fn ~= nil)
end

function T.empty_and_noncontiguous()
  check_shape(F.conv2d(ember.zeros(0, 2, 3, 4), w, b), { 0, 3, 2, 3 })
  -- no input channels: the bias alone
  check_tensor(F.conv2d(ember.zeros(1, 0, 3, 3), ember.zeros(2, 0, 2, 2), ember.tensor({ 1.0, 2.0 })):reshape(-1),
    { 1, 1, 1, 1, 2, 2, 2, 2 })
  check_shape(F.conv_transpose2d(ember.zeros(0, 2, 1, 1), ember.zeros(2, 3, 1, 1)), { 0, 3, 1, 1 })
  -- transposed and sliced operands give the contiguous result
  local xt = x:transpose(3, 4):contiguous():transpose(3, 4)
  check(not xt:is_contiguous())
  check_tensor(F.conv2d(xt, w:permute(1, 2, 4, 3):contiguous():permute(1, 2, 4, 3), b, { 2, 1 }, 1):reshape(-1), C2D, 1e-5)
  local big = F.conv2d(ember.ones(3, 1, 6, 6)[{ {}, {}, { 1, 6, 2 }, { 1, 6, 2 } }], ember.ones(1, 1, 2, 2))
  check_tensor(big, { { { { 4, 4 }, { 4, 4 } } }, { { { 4, 4 }, { 4, 4 } } }, { { { 4, 4 }, { 4, 4 } } } })
end

-- The kernels copy a plane through a zero-bordered copy when it is small
-- (Note [Padded planes], conv.c) and with per-row bounds checks when it is
-- not (here a 1 x 40000 plane); both must agree with unfold/fold + matmul
-- (which always take the checked copies): forward, both gradients and the
-- transposed convolution, with stride, dilation and padding.
function T.bordered_and_checked_planes()
  local cases = {
    { { 2, 3, 9, 11 }, { 4, 3, 3, 2 }, { 2, 1 }, { 3, 1 }, { 1, 2 } },
    { { 1, 2, 1, 40000 }, { 3, 2, 1, 3 }, { 1, 1 }, { 0, 1 }, { 1, 1 } },
    { { 1, 2, 1, 40000 }, { 3, 2, 1, 3 }, { 1, 3 }, { 0, 2 }, { 1, 2 } },
  }
  for _, c in ipairs(cases) do
    ember.manual_seed(1)
    local xs, ws, st, pd, dl = c[1], c[2], c[3], c[4], c[5]
    local xx = ember.randn(xs, { dtype = "float64" })
    local ww = ember.randn(ws, { dtype = "float64" })
    local y = F.conv2d(xx, ww, nil, st, pd, dl)
    local N, Co, L = xs[1], ws[1], y.shape[3] * y.shape[4]
    local k = { ws[3], ws[4] }
    local cols = F.unfold(xx, k, dl, pd, st)
    local wm = ww:reshape(Co, -1)
    check_tensor(y:reshape(N, Co, L), ember.matmul(wm, cols):tolist(), 1e-12)
    local go = ember.randn(y.shape, { dtype = "float64" })
    local gi, gw = ember.convolution_backward(go, xx, ww, nil, st, pd, dl, false, { 0, 0 }, 1, { 1, 1, 0 })
    local gom = go:reshape(N, Co, L)
    check_tensor(gi, F.fold(ember.matmul(wm:t(), gom), { xs[3], xs[4] }, k, dl, pd, st):tolist(), 1e-12)
    check_tensor(gw:reshape(Co, -1), ember.matmul(gom, cols:transpose(2, 3)):sum(1):tolist(), 1e-10)
    -- conv_transpose2d of y with ww (its weight is {in, out, ...}) is the input gradient above
    check_tensor(F.conv_transpose2d(go, ww, nil, st, pd, 0, 1, dl), gi:tolist(), 1e-12)
  end
end

function T.convolution_backward_op()
  local go, xx, ww = ember.randn(1, 3, 2, 3, { dtype = "float64" }), ember.randn(1, 2, 3, 4, { dtype = "float64" }),
      ember.randn(3, 2, 2, 2, { dtype = "float64" })
  local gi, gw, gb = ember.convolution_backward(go, xx, ww, { 3 }, { 1, 1 }, { 0, 0 }, { 1, 1 }, false, { 0, 0 }, 1)
  check_shape(gi, { 1, 2, 3, 4 })
  check_shape(gw, { 3, 2, 2, 2 })
  check_tensor(gb, go:sum({ 1, 3, 4 }):tolist(), 1e-12)
  local gi2, gw2, gb2 = ember.convolution_backward(go, xx, ww, nil, { 1, 1 }, { 0, 0 }, { 1, 1 }, false, { 0, 0 }, 1,
    { 1, 0, 0 })
  check_tensor(gi2, gi:tolist(), 1e-12)
  check_shape(gw2, { 0 })
  check_shape(gb2, { 0 })
end

-- Note [Sample-parallel products] (conv.c): with 2 threads the batch is split
-- into one job per thread (weight gradients summed from per-job partials);
-- results equal 1 thread's up to rounding, for an odd batch, groups, strides,
-- a transposed conv and a batch smaller than the threads
function T.sample_parallel_matches_one_thread()
  local threads0 = ember.get_num_threads()
  local function run(th, dt, N, transposed)
    ember.set_num_threads(th)
    ember.manual_seed(7)
    local x = ember.randn(N, 4, 9, 8, { dtype = dt, requires_grad = true })
    local w = ember.randn(4, 2, 3, 3, { dtype = dt, requires_grad = true })
    local b = ember.randn(transposed and 4 or 4, { dtype = dt, requires_grad = true })
    local y = transposed and F.conv_transpose2d(x, w, b, 2, 1, 1, 2) or F.conv2d(x, w, b, 2, 1, 1, 2)
    local gi, gw, gb = table.unpack(ember.autograd.grad({ (y * y:detach():cos()):sum() }, { x, w, b }))
    return y, gi, gw, gb
  end
  for _, dt in ipairs({ "float64", "float32" }) do
    local tol = dt == "float64" and 1e-12 or 1e-4
    for _, N in ipairs({ 5, 1, 2 }) do
      for _, tr in ipairs({ false, true }) do
        local r1 = { run(1, dt, N, tr) }
        local r2 = { run(2, dt, N, tr) }
        for k = 1, 4 do
          check(ember.allclose(r1[k], r2[k], tol, tol), string.format("%s N=%d transposed=%s result %d", dt, N, tostring(tr), k))
        end
      end
    end
  end
  ember.set_num_threads(threads0)
end

function T.errors()
  check_error(function() F.conv2d(x, ember.randn(3, 4, 3, 3)) end, "conv2d:", "weight of shape {3,4,3,3}",
    "expects input with 4 channels", "input of shape {2,2,3,4}")
  check_error(function() F.conv2d(x, ember.randn(3, 2, 5, 5)) end, "conv2d:", "kernel size {5,5}",
    "larger than the padded input {3,4}")
  check_error(function() F.conv2d(x, ember.randn(3, 1, 3, 3), nil, 1, 0, 1, 2) end, "conv2d:", "groups=2",
    "must divide weight's first dim", "{3,1,3,3}")
  check_error(function() F.conv2d(x, w, nil, 0) end, "conv2d:", "argument 'stride' must be positive", "{0,0}")
  check_error(function() F.conv2d(x, w, nil, 1, 0, { 1, 0 }) end, "conv2d:", "'dilation' must be positive", "{1,0}")
  check_error(function() F.conv2d(x, w, nil, 1, -1) end, "conv2d:", "'padding' must be non-negative", "{-1,-1}")
  check_error(function() F.conv2d(x, w, nil, 1, 0, 1, 0) end, "conv2d:", "'groups' must be positive, got 0")
  check_error(function() F.conv2d(x, w, nil, { 1, 1, 1 }) end, "conv2d:", "'stride' must be one value or 2",
    "{1,1,1}")
  check_error(function() F.conv2d(x, w, ember.zeros(4)) end, "conv2d:", "bias of shape {3}", "got bias of shape {4}")
  check_error(function() F.conv2d(x[1][1], w) end, "conv2d:", "3-d (unbatched) or 4-d (batched) input",
    "shape {3,4}")
  check_error(function() F.conv2d(x, w[1]) end, "conv2d:", "4-d weight", "{2,2,2}")
  check_error(function() F.conv2d(x, w:double()) end, "conv2d:", "weight of input's dtype float32", "float64")
  check_error(function() F.conv2d(x:long(), w:long()) end, "conv2d:", "floating-point input", "int64")
  check_error(function() F.conv2d(x, w, nil, 2, "same") end, "conv2d:", "padding='same' needs stride 1", "{2,2}")
  check_error(function() F.conv2d(x, w, nil, 1, "full") end, "conv2d", "padding")
  check_error(function() F.conv_transpose2d(x, ember.randn(2, 3, 3, 3), nil, 2, 0, 2) end, "conv_transpose2d:",
    "output_padding {2,2} must be smaller than stride {2,2} or dilation {1,1}")
  check_error(function() F.conv_transpose2d(x, ember.randn(3, 3, 3, 3)) end, "conv_transpose2d:",
    "expects input with 3 channels")
  check_error(function() F.conv_transpose2d(x, ember.randn(2, 3, 1, 1), nil, 1, 3) end, "conv_transpose2d:",
    "output size {-3,-2}", "too small")
  check_error(function() F.conv1d(ember.randn(1, 2, 3), ember.randn(1, 2, 3), nil, 1, 0, 1, 1.5) end, "conv1d")
  check_error(function() ember.convolution(x, w, nil, { 1 }, { 0, 0 }, { 1, 1 }, false, { 0, 0 }, 1) end,
    "convolution:", "'stride' must have 2 values", "{1}")
  check_error(function()
    ember.convolution_backward(ember.zeros(2, 3, 3, 3), x, w, nil, { 1, 1 }, { 0, 0 }, { 1, 1 }, false, { 0, 0 }, 1)
  end, "convolution_backward:", "grad_output of the output's shape {2,3,2,3}", "got {2,3,3,3}")
  check_error(function() F.unfold(x, 5) end, "unfold:", "sliding blocks", "at least 1")
  check_error(function() F.unfold(x, 0) end, "unfold:", "'kernel_size' must be positive")
  check_error(function() F.unfold(x[1][1], 2) end, "unfold:", "3-d {C,H,W} or 4-d {N,C,H,W}", "{3,4}")
  check_error(function() F.unfold(x:long(), 2) end, "unfold:", "floating-point", "int64")
  check_error(function() F.fold(ember.zeros(1, 7, 16), { 5, 5 }, 2) end, "fold:", "divisible", "7")
  check_error(function() F.fold(ember.zeros(1, 8, 15), { 5, 5 }, 2) end, "fold:", "16 sliding blocks",
    "{1,8,15} has 15")
  check_error(function() F.fold(ember.zeros(1, 8, 16), { 5, 5, 5 }, 2) end, "fold:", "'output_size'", "{5,5,5}")
end

-- a double backward where only grad_bias got a gradient records no graph
-- through weight (PyTorch: the result does not require grad and is grad_bias's
-- gradient expanded); missing gradients reach conv_dd_grad_output as NULL
function T.conv_double_backward_missing_gradients()
  local go = ember.ones(3, 2, 15, 9, { dtype = "float64", requires_grad = true })
  local x = ember.ones(3, 2, 6, 5, { dtype = "float64", requires_grad = true })
  local w = ember.ones(2, 2, 1, 3, { dtype = "float64" })
  local _, _, gb = ember.convolution_backward(go, x, w, { 2 }, { 3, 1 }, { 1, 0 }, { 1, 2 }, true, { 1, 0 }, 1, { 1, 1, 1 })
  local g = ember.autograd.grad({ gb:mean() }, { go, x }, { create_graph = true, allow_unused = true })
  check(g[1] ~= nil and not g[1].requires_grad, "d mean(grad_bias) / d grad_output records no graph")
  check(ember.allclose(g[1], ember.full({ 3, 2, 15, 9 }, 0.5, { dtype = "float64" })), "1 / #grad_bias everywhere")
  check(g[2] == nil, "input gets no gradient")
  -- with grad_input's gradient too, the graph through weight is recorded
  local gi, _, gb2 = ember.convolution_backward(go, x, w:clone():requires_grad_(), { 2 }, { 3, 1 }, { 1, 0 }, { 1, 2 },
    true, { 1, 0 }, 1, { 1, 1, 1 })
  local h = ember.autograd.grad({ gi:sum() + gb2:sum() }, { go }, { create_graph = true })[1]
  check(h.requires_grad, "through weight")
end

return T
