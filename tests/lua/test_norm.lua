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

return T
