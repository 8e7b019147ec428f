-- test_norm.lua -- the normalisation family (ember.nn.functional's
-- layer_norm, batch_norm, group_norm, instance_norm, rms_norm,
-- local_response_norm and their native_* kernels): values against PyTorch
-- 1.13 (computed with torch on the same inputs), shapes, dtypes, empty and
-- non-contiguous inputs, gradients, and errors.
local T = {}
local F = ember.nn.functional

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end
local function maxdiff(a, b) return (a:double() - b:double()):abs():max():item() end

-- ---- layer_norm ----

local function X134()
  return f64({ { { 0.5, -1.2, 0.8, 2.0 }, { 1.5, 0.3, -0.7, 0.1 }, { 3.0, 1.0, 4.0, 1.5 } } })
end
local W4 = { 1.5, 0.5, -1.0, 2.0 }
local B4 = { 0.1, 0.2, -0.3, 0.4 }

function T.layer_norm_values_and_gradients()
  local x = X134():requires_grad_()
  local w, b = f64(W4):requires_grad_(), f64(B4):requires_grad_()
  local y = F.layer_norm(x, { 4 }, w, b)
  check_tensor(y, { { { 0.06719707423809754, -0.5544672925237557, -0.5405547889206177, 2.9804968266029905 },
    { 2.3859838507241293, 0.19999999999999998, 0.9699910281800719, -0.10799641127202886 },
    { 0.88621086284876, -0.37655463275575735, -1.6627654956045175, -1.067593610651019 } } }, 1e-12)
  check_eq(tostring(y.grad_fn):find("NativeLayerNorm") ~= nil, true);
  (y * ember.arange(0, 12, { dtype = "float64" }):reshape(1, 3, 4)):sum():backward()
  check_tensor(x.grad, { { { -0.9529741247097415, 1.6001262928008095, -3.0758272764458447, 2.428675108354777 },
    { -4.009586337850536, -2.063735420792617, -7.5329762305830865, 13.606297989226238 },
    { 7.23887756681674, -9.132668791983539, -6.1699409533623975, 8.063732178529197 } } }, 1e-10)
  check_tensor(w.grad, { 10.2890815371244, -11.886917974651144, 6.4888183648059785, -5.97900705812822 }, 1e-10)
  check_tensor(b.grad, { 12.0, 15.0, 18.0, 21.0 }, 1e-12)
end

-- Note [Norm gradient memo] (formulas_norm.c): one backward kernel run gives
-- a node's three gradients; the results must not depend on which of x, w, b
-- require grad, on requires_grad set after the forward, or on other nodes.
function T.norm_gradients_any_subset_and_interleaved()
  local XW = { 10.2890815371244, -11.886917974651144, 6.4888183648059785, -5.97900705812822 }
  local XB = { 12.0, 15.0, 18.0, 21.0 }
  local XX1 = { -0.9529741247097415, 1.6001262928008095, -3.0758272764458447, 2.428675108354777 }
  local g = ember.arange(0, 12, { dtype = "float64" }):reshape(1, 3, 4)
  local function run(xg, wg, bg, late)
    local x, w, b = X134(), f64(W4), f64(B4)
    if xg then x:requires_grad_() end
    if wg and not late then w:requires_grad_() end
    if bg then b:requires_grad_() end
    local y = F.layer_norm(x, { 4 }, w, b)
    if late then w:requires_grad_() end -- after the forward: the node has no edge to w
    if not (xg or bg or (wg and not late)) then return x, w, b end
    (y * g):sum():backward()
    return x, w, b
  end
  for _, c in ipairs({ { false, true, true }, { false, true, false }, { false, false, true }, { true, false, true },
    { true, true, false }, { true, true, true } }) do
    local x, w, b = run(c[1], c[2], c[3])
    local what = string.format("x %s w %s b %s", tostring(c[1]), tostring(c[2]), tostring(c[3]))
    if c[1] then check_tensor(x.grad[1][1], XX1, 1e-10, what) else check_eq(x.grad, nil, what) end
    if c[2] then check_tensor(w.grad, XW, 1e-10, what) else check_eq(w.grad, nil, what) end
    if c[3] then check_tensor(b.grad, XB, 1e-12, what) else check_eq(b.grad, nil, what) end
  end
  -- w gets requires_grad after the forward: no gradient for it, x's is right,
  -- and the next backward (which could meet a kept w result) is right too
  local x, w = run(true, true, false, true)
  check_tensor(x.grad[1][1], XX1, 1e-10)
  check_eq(w.grad, nil)
  local _, w2, b2 = run(false, true, true)
  check_tensor(w2.grad, XW, 1e-10)
  check_tensor(b2.grad, XB, 1e-12)
  -- two nodes of each kind in one backward
  local x1, x2 = X134():requires_grad_(), X134():requires_grad_()
  local w1, w2b = f64(W4):requires_grad_(), (-f64(W4)):requires_grad_() -- node 2's dx is -node 1's
  local b1 = f64(B4):requires_grad_()
  local y = F.layer_norm(x1, { 4 }, w1, b1) + F.layer_norm(x2, { 4 }, w2b, nil)
  ;(y * g):sum():backward()
  check_tensor(x1.grad[1][1], XX1, 1e-10)
  local nx = {}
  for i, v in ipairs(XX1) do nx[i] = -v end
  check_tensor(x2.grad[1][1], nx, 1e-10)
  check_tensor(w1.grad, XW, 1e-10)
  check_tensor(w2b.grad, XW, 1e-10)
  check_tensor(b1.grad, XB, 1e-12)
  -- batch_norm and group_norm: weight without bias, and bias without weight
  local xb = ember.randn(4, 3, 5, { dtype = "float64" })
  local gb = ember.randn(4, 3, 5, { dtype = "float64" })
  local function bn(wq, bq)
    local xx, ww, bb = xb:clone():requires_grad_(), ember.ones(3, { dtype = "float64" }) * 1.5,
      ember.ones(3, { dtype = "float64" }) * 0.5
    if wq then ww:requires_grad_() end
    if bq then bb:requires_grad_() end
    ;(F.batch_norm(xx, nil, nil, ww, bb, true) * gb):sum():backward()
    return xx.grad, ww.grad, bb.grad
  end
  local rx, rw, rb = bn(true, true)
  for _, c in ipairs({ { true, false }, { false, true }, { false, false } }) do
    local gx, gw, gbb = bn(c[1], c[2])
    check_near(maxdiff(gx, rx), 0, 1e-12)
    if c[1] then check_near(maxdiff(gw, rw), 0, 1e-12) else check_eq(gw, nil) end
    if c[2] then check_near(maxdiff(gbb, rb), 0, 1e-12) else check_eq(gbb, nil) end
  end
  local function gn(wq, bq)
    local xx, ww, bb = xb:clone():requires_grad_(), ember.ones(3, { dtype = "float64" }) * 1.5,
      ember.ones(3, { dtype = "float64" }) * 0.5
    if wq then ww:requires_grad_() end
    if bq then bb:requires_grad_() end
    ;(F.group_norm(xx, 3, ww, bb) * gb):sum():backward()
    return xx.grad, ww.grad, bb.grad
  end
  rx, rw, rb = gn(true, true)
  for _, c in ipairs({ { true, false }, { false, true }, { false, false } }) do
    local gx, gw, gbb = gn(c[1], c[2])
    check_near(maxdiff(gx, rx), 0, 1e-12)
    if c[1] then check_near(maxdiff(gw, rw), 0, 1e-12) else check_eq(gw, nil) end
    if c[2] then check_near(maxdiff(gbb, rb), 0, 1e-12) else check_eq(gbb, nil) end
  end
end

function T.layer_norm_statistics_dtypes_and_options()
  local o, m, r = ember.native_layer_norm(X134(), { 3, 4 }, nil, nil, 1e-5)
  check_shape(m, { 1, 1, 1 })
  check_shape(r, { 1, 1, 1 })
  check_near(m:item(), 1.0666666666666667, 1e-12)
  check_near(r:item(), 0.7105675805918634, 1e-12)
  check_shape(o, { 1, 3, 4 })
  _, m = ember.native_layer_norm(X134(), { 4 }, nil, nil, 1e-5)
  check_shape(m, { 1, 3, 1 })
  -- float32 with eps as a number and normalized_shape as one integer
  local y = F.layer_norm(X134():float(), 4, nil, nil, 0.5)
  check_eq(y.dtype, "float32")
  check_tensor(y, { { { -0.01859840750694275, -1.2832907438278198, 0.2045826017856598, 1.0973066091537476 },
    { 1.133893370628357, -6.61717436400977e-09, -0.9449111819267273, -0.18898224830627441 },
    { 0.45083481073379517, -0.9918366074562073, 1.1721705198287964, -0.6311687231063843 } } }, 1e-6)
  local yb = F.layer_norm(X134():bfloat16(), { 4 })
  check_eq(yb.dtype, "bfloat16")
  check(maxdiff(yb, f64({ { { -0.01953125, -1.5, 0.2421875, 1.2890625 }, { 1.5390625, 0.0006103515625, -1.28125,
    -0.255859375 }, { 0.5234375, -1.1484375, 1.359375, -0.73046875 } } })) < 2e-2)
  local _, mb = ember.native_layer_norm(X134():bfloat16(), { 4 }, nil, nil, 1e-5)
  check_eq(mb.dtype, "bfloat16")
end

function T.layer_norm_noncontiguous_empty_and_rows()
  -- a transposed input gives the same as its contiguous copy
  local x = f64({ { 0.5, 1.5, 3.0 }, { -1.2, 0.3, 1.0 }, { 0.8, -0.7, 4.0 }, { 2.0, 0.1, 1.5 } }):t()
  check(maxdiff(F.layer_norm(x, { 4 }, f64(W4), f64(B4)), F.layer_norm(x:contiguous(), { 4 }, f64(W4), f64(B4))) == 0)
  check(maxdiff(F.layer_norm(x, { 4 }), F.layer_norm(X134()[1], { 4 })) < 1e-15)
  -- empty batch, and an empty group (torch: mean 0, rstd NaN)
  check_shape(F.layer_norm(ember.zeros(0, 4), { 4 }), { 0, 4 })
  local o, m, r = ember.native_layer_norm(ember.zeros(2, 0), { 0 }, nil, nil, 1e-5)
  check_shape(o, { 2, 0 })
  check_tensor(m, { { 0.0 }, { 0.0 } })
  check(r[1][1]:item() ~= r[1][1]:item())
  -- a constant row: (x - mean) = 0 exactly, the output is the bias
  check_tensor(F.layer_norm(ember.ones(2, 3), { 3 }, nil, f64({ 1, 2, 3 }):float()), { { 1, 2, 3 }, { 1, 2, 3 } })
  -- NaN stays in its row
  local yn = F.layer_norm(f64({ { 1, 0 / 0 }, { 1, 2 } }), { 2 })
  check(yn[1][1]:item() ~= yn[1][1]:item())
  check_tensor(yn[2], { -0.99998000059998, 0.99998000059998 }, 1e-12)
  -- many rows (parallel): each row is normalised on its own
  local big = ember.randn(300, 257, { dtype = "float64" })
  local ref = (big - big:mean(2, { keepdim = true })) / (big:var(2, { keepdim = true, correction = 0 }) + 1e-5):sqrt()
  check(maxdiff(F.layer_norm(big, { 257 }), ref) < 1e-12)
  check(maxdiff(F.layer_norm(big:float(), { 257 }), ref) < 1e-5)
end

function T.layer_norm_backward_op_masks_and_float32()
  local x = ember.randn(64, 70, { dtype = "float64" })
  local w, b = ember.randn(70, { dtype = "float64" }), ember.randn(70, { dtype = "float64" })
  local go = ember.randn(64, 70, { dtype = "float64" })
  local _, m, r = ember.native_layer_norm(x, { 70 }, w, b, 1e-5)
  local gi, gw, gb = ember.native_layer_norm_backward(go, x, { 70 }, m, r, w, b)
  check_shape(gi, { 64, 70 })
  check_shape(gw, { 70 })
  check(maxdiff(gb, go:sum(1)) < 1e-12)
  -- against autograd through a composite of ops
  local xr, wr, br = x:clone():requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_()
  local mu = xr:mean(2, { keepdim = true })
  local yr = (xr - mu) / ((xr - mu):pow(2):mean(2, { keepdim = true }) + 1e-5):sqrt() * wr + br
  yr:backward(go)
  check(maxdiff(gi, xr.grad) < 1e-11)
  check(maxdiff(gw, wr.grad) < 1e-11)
  -- masks: a masked-out result is empty
  local gi2, gw2, gb2 = ember.native_layer_norm_backward(go, x, { 70 }, m, r, w, b, true, false, false)
  check(maxdiff(gi2, gi) == 0)
  check_shape(gw2, { 0 })
  check_shape(gb2, { 0 })
  local _, gw3, gb3 = ember.native_layer_norm_backward(go, x, { 70 }, m, r, nil, nil)
  check_shape(gw3, { 0 })
  check_shape(gb3, { 0 })
  -- float32 agrees with float64
  local _, m32, r32 = ember.native_layer_norm(x:float(), { 70 }, w:float(), b:float(), 1e-5)
  local gi32, gw32 = ember.native_layer_norm_backward(go:float(), x:float(), { 70 }, m32, r32, w:float(), b:float())
  check(maxdiff(gi32, gi) < 1e-4)
  check(maxdiff(gw32, gw) < 1e-3)
end

function T.layer_norm_double_backward()
  local x = X134():requires_grad_()
  local w = f64(W4):requires_grad_()
  local y = F.layer_norm(x, { 4 }, w)
  local gx, gw = table.unpack(ember.autograd.grad({ (y * y * y):sum() }, { x, w }, { create_graph = true }))
  check(gx.requires_grad and gw.requires_grad)
  check(ember.autograd.gradgradcheck(function(a, b) return F.layer_norm(a, { 4 }, b) end, { X134(), f64(W4) }))
end

function T.layer_norm_errors()
  check_error(function() F.layer_norm(ember.ones(2, 3), { 4 }) end,
    "layer_norm: input of shape {2,3} does not end in normalized_shape {4}")
  check_error(function() F.layer_norm(ember.ones(3), { 2, 3 }) end, "layer_norm", "{3}", "{2,3}")
  check_error(function() F.layer_norm(ember.ones(2, 3), {}) end,
    "layer_norm: normalized_shape must have at least one element")
  check_error(function() F.layer_norm(ember.ones(2, 3), { 3 }, ember.ones(4)) end,
    "layer_norm: weight of shape {4} must have normalized_shape {3}")
  check_error(function() F.layer_norm(ember.ones(2, 3), { 3 }, nil, ember.ones(2)) end,
    "layer_norm: bias of shape {2} must have normalized_shape {3}")
  check_error(function() F.layer_norm(ember.ones(2, 3), { 3 }, ember.ones(3, { dtype = "float64" })) end,
    "layer_norm: weight must have input's dtype float32, got float64")
  check_error(function() F.layer_norm(ember.ones(2, 3, { dtype = "int64" }), { 3 }) end,
    "layer_norm: argument 'input' must be float32, float64 or bfloat16, got int64")
  check_error(function() F.layer_norm(ember.ones(2, 3, { dtype = "float16" }), { 3 }) end, "layer_norm", "float16")
  check_error(function() ember.native_layer_norm(ember.ones(2, 3), { 2 }, nil, nil, 1e-5) end, "native_layer_norm")
  local _, m, r = ember.native_layer_norm(ember.ones(2, 3), { 3 }, nil, nil, 1e-5)
  check_error(function() ember.native_layer_norm_backward(ember.ones(2, 2), ember.ones(2, 3), { 3 }, m, r) end,
    "native_layer_norm_backward: grad_out of shape {2,2} must have input's shape {2,3}")
  check_error(function() ember.native_layer_norm_backward(ember.ones(2, 3), ember.ones(2, 3), { 3 }, ember.ones(3), r) end,
    "native_layer_norm_backward: mean of shape {3} must have one value per normalised group (2)")
end

-- ---- batch_norm ----

local function XB()
  return f64({ { { 0.5, -1.2, 0.8 }, { 2.0, 1.5, 0.3 } }, { { -0.7, 0.1, 3.0 }, { 1.0, 4.0, 1.5 } },
    { { 0.2, 0.9, -1.1 }, { 0.4, -0.3, 2.2 } } })
end

function T.batch_norm_training_values_running_stats_and_gradients()
  local x, w, b = XB():requires_grad_(), f64({ 1.5, -0.5 }):requires_grad_(), f64({ 0.1, 0.2 }):requires_grad_()
  local rm, rv = f64({ 0.3, -0.2 }), f64({ 1.2, 0.7 })
  local y = F.batch_norm(x, rm, rv, w, b, true, 0.3, 1e-3)
  check_tensor(y, { { { 0.3751934582913855, -1.7300364976377138, 0.746704626984756 },
    { -0.04914598556729888, 0.15847566907211688, 0.6567676402067147 } },
    { { -1.1108512164820963, -0.12015476663310844, 3.4711198640694727 },
      { 0.36609732371153264, -0.8796326041249619, 0.15847566907211688 } },
    { { 0.0036822895980150564, 0.8705416832158794, -1.6061994414065903 },
      { 0.6152433092788315, 0.9059136257740136, -0.13219464742306525 } } }, 1e-12)
  -- updated in place, the variance unbiased
  check_tensor(rm, { 0.29333333333333333, 0.28 }, 1e-12)
  check_tensor(rv, { 1.3348333333333333, 0.9789999999999999 }, 1e-12);
  (y * ember.arange(0, 18, { dtype = "float64" }):reshape(3, 2, 3)):sum():backward()
  check_tensor(x.grad, { { { -8.712359609319288, -7.139181647482131, -6.294702143436686 },
    { 2.7463210453437807, 2.4647295024049827, 2.370250432342231 } },
    { { -1.0458016004924044, 0.03501253851251464, 0.7022410663383545 },
      { 0.5221647223508582, -0.694989184968173, -0.4419736625468382 } },
    { { 6.207170797155399, 7.3076794890736085, 8.939941109650633 },
      { -1.8089130137140912, -2.0370438501168757, -3.120545991095874 } } }, 1e-10)
  check_tensor(w.grad, { 1.73371878723573, -6.976087595884377 }, 1e-10)
  check_tensor(b.grad, { 63.0, 90.0 }, 1e-12)
end

function T.batch_norm_eval_uses_running_stats()
  local x, w = XB():requires_grad_(), f64({ 1.5, -0.5 }):requires_grad_()
  local rm, rv = f64({ 0.29333333333333333, 0.28 }), f64({ 1.3348333333333333, 0.9789999999999999 })
  local y = F.batch_norm(x, rm, rv, w, f64({ 0.1, 0.2 }), false, 0.3, 1e-3)
  check_tensor(y[1], { { 0.36821653992522024, -1.8380808046209463, 0.7575631301392497 },
    { -0.6687311883149013, -0.4161930521768486, 0.1898984745544779 } }, 1e-12)
  check_tensor(rm, { 0.29333333333333333, 0.28 }); -- untouched
  (y * ember.arange(0, 18, { dtype = "float64" }):reshape(3, 2, 3)):sum():backward()
  check_tensor(x.grad[2], { { 7.786931804280588, 9.084753771660685, 10.382575739040783 },
    { -4.545686450484949, -5.050762722761054, -5.55583899503716 } }, 1e-10)
  check_tensor(w.grad, { 0.969040402310471, 93.33809511662427 }, 1e-10)
  -- native_batch_norm in eval returns empty statistics
  local _, sm, si = ember.native_batch_norm(XB(), nil, nil, rm, rv, false, 0.1, 1e-5)
  check_shape(sm, { 0 })
  check_shape(si, { 0 })
end

function T.batch_norm_shapes_dtypes_and_layouts()
  local x4 = ember.arange(0, 24):reshape(2, 3, 2, 2):sin()
  local y = F.batch_norm(x4, nil, nil, nil, nil, true)
  check_eq(y.dtype, "float32")
  check_tensor(y:reshape(-1):narrow(1, 1, 6), { -0.8617630004882812, 0.8362894058227539, 0.9731602668762207,
    -0.5769888758659363, -0.6645297408103943, -1.0394712686538696 }, 1e-6)
  -- (N, C), (N, C, L), (N, C, D, H, W) agree with one formula per channel
  for _, shape in ipairs({ { 5, 3 }, { 4, 3, 2 }, { 2, 3, 2, 2, 2 } }) do
    local x = ember.randn(shape, { dtype = "float64" })
    local dims = {}
    for d = 1, #shape do if d ~= 2 then dims[#dims + 1] = d end end
    local mean = x:mean(dims, { keepdim = true })
    local var = (x - mean):pow(2):mean(dims, { keepdim = true })
    check(maxdiff(F.batch_norm(x, nil, nil, nil, nil, true), (x - mean) / (var + 1e-5):sqrt()) < 1e-12)
  end
  -- non-contiguous input, float32 running stats of a bfloat16 input
  local x = XB():transpose(1, 3):contiguous():transpose(1, 3)
  check(maxdiff(F.batch_norm(x, nil, nil, nil, nil, true), F.batch_norm(XB(), nil, nil, nil, nil, true)) < 1e-15)
  local rm, rv = ember.zeros(2), ember.ones(2)
  local yb = F.batch_norm(XB():bfloat16(), rm, rv, nil, nil, true)
  check_eq(yb.dtype, "bfloat16")
  check(maxdiff(yb, F.batch_norm(XB(), nil, nil, nil, nil, true)) < 3e-2)
  check(math.abs(rm[1]:item() - 0.1 * XB()[{ {}, 1 }]:mean():item()) < 1e-3)
  -- a large batch (parallel over channels) against the composite formula
  local big = ember.randn(16, 8, 33, { dtype = "float64" })
  local m = big:mean({ 1, 3 }, { keepdim = true })
  local v = (big - m):pow(2):mean({ 1, 3 }, { keepdim = true })
  check(maxdiff(F.batch_norm(big:float(), nil, nil, nil, nil, true), (big - m) / (v + 1e-5):sqrt()) < 1e-5)
  -- empty batch in eval mode
  check_shape(F.batch_norm(ember.zeros(0, 2, 3), ember.zeros(2), ember.ones(2)), { 0, 2, 3 })
end

function T.batch_norm_errors()
  check_error(function() F.batch_norm(ember.ones(1, 3), nil, nil, nil, nil, true) end,
    "batch_norm: expected more than 1 value per channel when training, got input of shape {1,3}")
  check_error(function() F.batch_norm(ember.ones(2, 3), ember.zeros(4), ember.ones(3)) end,
    "batch_norm: running_mean must be of shape {3} (one value per channel), got {4}")
  check_error(function() F.batch_norm(ember.ones(2, 3), nil, nil) end,
    "batch_norm: running_mean and running_var must be given in evaluation mode")
  check_error(function() F.batch_norm(ember.ones(3), nil, nil, nil, nil, true) end,
    "batch_norm: input must have at least 2 dims")
  check_error(function() F.batch_norm(ember.ones(2, 3), nil, nil, ember.ones(2), nil, true) end,
    "batch_norm: weight must be of shape {3}")
  check_error(function() F.batch_norm(ember.ones(2, 3, { dtype = "int32" }), nil, nil, nil, nil, true) end,
    "batch_norm: argument 'input' must be float32, float64 or bfloat16, got int32")
  check_error(function() ember.native_batch_norm_backward(ember.ones(2, 3), ember.ones(2, 3), nil, nil, nil, nil,
    nil, true, 1e-5) end, "native_batch_norm_backward: save_mean and save_invstd must be given when train is true")
  check_error(function() ember.native_batch_norm(ember.ones(2, 3), nil, nil, ember.zeros(3, { dtype = "int64" }),
    nil, true, 0.1, 1e-5) end, "native_batch_norm: running_mean must be a floating tensor, got int64")
end

-- ---- group_norm ----

local function XG()
  return f64({ { { 0.5, -1.2, 0.8 }, { 2.0, 1.5, 0.3 }, { -0.7, 0.1, 3.0 }, { 1.0, 4.0, 1.5 } },
    { { 0.2, 0.9, -1.1 }, { 0.4, -0.3, 2.2 }, { 1.3, -0.6, 0.45 }, { 0.8, -2.1, 0.05 } } })
end

function T.group_norm_values_and_gradients()
  local x = XG():requires_grad_()
  local w, b = f64({ 1.5, -0.5, 0.8, 1.2 }):requires_grad_(), f64({ 0.1, 0.2, -0.3, 0.4 }):requires_grad_()
  local y = F.group_norm(x, 2, w, b)
  check_tensor(y[1], { { -0.12250959133156591, -2.6442849597559794, 0.322509591331566 },
    { -0.46752877399469783, -0.22029589473740235, 0.3730630154801068 },
    { -1.3850328781144348, -0.9874635792633442, 0.4537251290718593 },
    { 0.03970282291619909, 2.2760301289535834, 0.4124240405890965 } }, 1e-12);
  (y * ember.arange(0, 24, { dtype = "float64" }):reshape(2, 4, 3)):sum():backward()
  check_tensor(x.grad[2], { { 10.998400323592133, 16.232484963925344, 6.938453427029981 },
    { -12.873554953011098, -17.129282258815998, -4.166501502720358 },
    { -3.3465336657158122, -6.163127578156525, -3.48076178009574 },
    { 5.510410116033771, 1.192316540415053, 6.287696367519231 } }, 1e-10)
  check_tensor(w.grad, { -17.431150537480338, 25.399727804538287, 13.279375255436463, -11.563142438254514 }, 1e-10)
  check_tensor(b.grad, { 42.0, 60.0, 78.0, 96.0 }, 1e-12)
  local _, m, r = ember.native_group_norm(XG(), nil, nil, 2, 1e-5)
  check_shape(m, { 2, 2 })
  check_shape(r, { 2, 2 })
end

function T.group_norm_matches_layer_norm_and_dtypes()
  -- one group is layer_norm over (C, ...) followed by a per-channel affine
  local x = ember.randn(3, 6, 5, { dtype = "float64" })
  check(maxdiff(F.group_norm(x, 1), F.layer_norm(x, { 6, 5 })) < 1e-12)
  -- C groups is instance normalisation
  local m = x:mean(3, { keepdim = true })
  local v = (x - m):pow(2):mean(3, { keepdim = true })
  check(maxdiff(F.group_norm(x, 6), (x - m) / (v + 1e-5):sqrt()) < 1e-12)
  check(maxdiff(F.group_norm(x:float(), 3), F.group_norm(x, 3)) < 1e-5)
  check(maxdiff(F.group_norm(x:bfloat16(), 3), F.group_norm(x, 3)) < 5e-2)
  check_eq(F.group_norm(x:bfloat16(), 3).dtype, "bfloat16")
  -- non-contiguous, 2-d and empty inputs
  local xt = x:transpose(1, 3):contiguous():transpose(1, 3)
  check(maxdiff(F.group_norm(xt, 2), F.group_norm(x, 2)) == 0)
  check(maxdiff(F.group_norm(x[1]:t(), 3), F.layer_norm(x[1]:t():reshape(5, 3, 2), { 2 }):reshape(5, 6)) < 1e-12)
  check_shape(F.group_norm(ember.zeros(0, 4, 2), 2), { 0, 4, 2 })
end

function T.group_norm_errors()
  check_error(function() F.group_norm(ember.ones(2, 3), 2) end,
    "group_norm: the number of channels of input (shape {2,3}) must be divisible by num_groups, got num_groups=2")
  check_error(function() F.group_norm(ember.ones(2, 4), 0) end, "group_norm", "num_groups=0")
  check_error(function() F.group_norm(ember.ones(2, 4), 2, ember.ones(3)) end,
    "group_norm: weight must be of shape {4} (one value per channel), got {3}")
  check_error(function() F.group_norm(ember.ones(4), 2) end, "group_norm: input must have at least 2 dims")
  check_error(function() F.group_norm(ember.ones(2, 4, { dtype = "int64" }), 2) end, "group_norm", "int64")
end

-- ---- instance_norm, rms_norm, local_response_norm (composites) ----

function T.instance_norm_values_and_running_stats()
  local rm, rv = ember.zeros(4, { dtype = "float64" }), ember.ones(4, { dtype = "float64" })
  local y = F.instance_norm(XG(), rm, rv, f64({ 1, 2, 3, 4 }))
  check_tensor(y[1], { { 0.5299, -1.4005, 0.8706 }, { 2.0560, 0.6542, -2.7101 }, { -2.8310, -1.3211, 4.1521 },
    { -3.5560, 5.5880, -2.0320 } }, 1e-4)
  check_tensor(rm, { 0.0017, 0.1017, 0.0592, 0.0875 }, 1e-4)
  check_tensor(rv, { 1.0097, 1.0213, 1.1348, 1.1425 }, 1e-4)
  check(not rm.requires_grad)
  -- equals group_norm with C groups
  check(maxdiff(F.instance_norm(XG()), F.group_norm(XG(), 4)) < 1e-12)
  -- eval mode uses the running statistics
  local e = F.instance_norm(XG(), f64({ 0, 0, 0, 0 }), f64({ 1, 1, 1, 1 }), nil, nil, false, 0.1, 0)
  check(maxdiff(e, XG()) < 1e-12)
  check_error(function() F.instance_norm(ember.ones(2, 3)) end, "instance_norm: input must have at least 3 dims")
  check_error(function() F.instance_norm(ember.ones(2, 3, 1)) end,
    "instance_norm: expected more than 1 spatial element when training, got input of shape {2,3,1}")
  check_error(function() F.instance_norm(ember.ones(2, 3, 2), ember.zeros(2)) end,
    "instance_norm: running_mean must be of shape {3}")
  check_error(function() F.instance_norm(ember.ones(2, 3, 2), nil, nil, nil, nil, false) end,
    "instance_norm: running_mean and running_var must be given when use_input_stats is false")
end

function T.rms_norm_values_dtypes_and_errors()
  check_tensor(F.rms_norm(XG(), { 3 }, f64({ 1, 2, 3 }))[1], { { 0.5674, -2.7233, 2.7233 }, { 1.3758, 2.0637, 0.6191 },
    { -0.3934, 0.1124, 5.0576 }, { 0.3948, 3.1582, 1.7765 } }, 1e-4)
  -- eps None: float32's machine epsilon (torch.finfo(float32).eps)
  check_tensor(F.rms_norm(XG():float(), { 4, 3 })[2], { { 0.1822, 0.8200, -1.0022 }, { 0.3645, -0.2733, 2.0045 },
    { 1.1845, -0.5467, 0.4100 }, { 0.7289, -1.9134, 0.0456 } }, 1e-4)
  check_tensor(F.rms_norm(ember.zeros(1, 2), { 2 }), { { 0, 0 } })
  check_eq(F.rms_norm(XG():bfloat16(), { 3 }).dtype, "bfloat16")
  check(maxdiff(F.rms_norm(XG():bfloat16(), { 3 }), F.rms_norm(XG(), { 3 })) < 3e-2)
  check_error(function() F.rms_norm(ember.ones(2, 3), { 2 }) end,
    "rms_norm: input of shape {2,3} does not end in normalized_shape {2}")
  check_error(function() F.rms_norm(ember.ones(2, 3), { 3 }, ember.ones(2)) end,
    "rms_norm: weight of shape {2} must have normalized_shape {3}")
  check_error(function() F.rms_norm(ember.ones(2, 3, { dtype = "int64" }), { 3 }) end,
    "rms_norm: argument 'input' must be a floating tensor, got int64")
end

function T.local_response_norm_values_and_errors()
  check_tensor(F.local_response_norm(XG(), 3, 0.5, 0.75, 1.0)[1], { { 0.3346, -0.8376, 0.7340 },
    { 1.2924, 1.0462, 0.1456 }, { -0.4300, 0.0351, 1.3535 }, { 0.8467, 1.5091, 0.6794 } }, 1e-4)
  check_tensor(F.local_response_norm(XG():reshape(2, 4, 3, 1), 2)[1]:reshape(4, 3), { { 0.5000, -1.1999, 0.8000 },
    { 1.9997, 1.4998, 0.3000 }, { -0.6999, 0.1000, 2.9990 }, { 0.9999, 3.9976, 1.4994 } }, 1e-4)
  check_shape(F.local_response_norm(ember.zeros(0, 3, 2), 2), { 0, 3, 2 })
  check_error(function() F.local_response_norm(ember.ones(2, 3), 2) end,
    "local_response_norm: expected an input of 3 or more dims, got 2")
  check_error(function() F.local_response_norm(ember.ones(2, 3, 2), 0) end,
    "local_response_norm: size must be positive, got 0")
end

-- torch's F.group_norm refuses one value per group (_verify_batch_size);
-- found by the difftest (seed 9952)
function T.group_norm_one_value_per_group()
  check_error(function() return ember.nn.functional.group_norm(ember.ones(1, 2), 2) end, "group_norm",
    "more than 1 value", "{1,2}")
  check_shape(ember.nn.functional.group_norm(ember.ones(2, 2), 2), { 2, 2 })
end

-- batch_norm and group_norm save no bias (as torch): changing the bias in
-- place after the forward leaves the backward working (difftest seed 589)
function T.norm_bias_changed_in_place_after_forward()
  local x = ember.randn(4, 2, 3, { dtype = "float64", requires_grad = true })
  local w, b = ember.ones(2, { dtype = "float64" }), ember.zeros(2, { dtype = "float64" })
  local y1 = ember.nn.functional.group_norm(x, 1, w, b)
  local y2 = ember.nn.functional.batch_norm(x, nil, nil, w, b, true)
  b:add_(1)
  ;(y1:sum() + y2:sum()):backward()
  check(x.grad ~= nil)
end

return T
