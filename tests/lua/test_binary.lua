-- test_binary.lua -- the binary family (schema/ops/binary.yaml): values
-- against PyTorch 1.13 (computed there), dtypes and promotion, NaN/inf,
-- empty, 0-dim and non-contiguous operands, in-place and out= variants,
-- gradients where PyTorch's convention is not the central difference
-- (ties), and the errors.
local T = {}
local t = ember.tensor
local nan, inf = 0 / 0, math.huge
local function f64(v) return t(v, { dtype = "float64" }) end
local a23 = function() return f64({ { 0.5, -1.2, 0.8 }, { 1.5, 0.3, -0.7 } }) end
local b3 = function() return f64({ 0.4, -0.9, 1.3 }) end

-- ---- maximum and minimum ----

function T.maximum_minimum_nan_signed_zero_and_dtypes()
  local a, b = t({ 1.0, nan, 3, -0.0, 0.0 }), t({ 2.0, 1, nan, 0.0, -0.0 })
  check_tensor(ember.maximum(a, b), { 2, nan, nan, 0, 0 })
  check_tensor(a:minimum(b), { 1, nan, nan, -0.0, 0 })
  -- std::max returns the first operand on a tie: maximum(-0, 0) is -0
  check_eq(1 / ember.maximum(t({ -0.0 }), t({ 0.0 })):item(), -inf)
  check_eq(1 / ember.minimum(t({ 0.0 }), t({ -0.0 })):item(), inf)
  check_tensor(ember.fmax(t({ 1.0, nan, nan }), t({ nan, 2, nan })), { 1, 2, nan })
  check_tensor(ember.fmin(t({ nan, 1.0, nan }), t({ 2.0, nan, nan })), { 2, 1, nan })
  -- int8 with uint8 promotes to int32 in ember (int16 in torch, which ember lacks)
  local m = ember.maximum(t({ 1, -5 }, { dtype = "int8" }), t({ 200, 3 }, { dtype = "uint8" }))
  check_tensor(m, { 200, 3 })
  check_eq(ember.maximum(t({ 1, 2 }), t({ 1.5, 1.5 })).dtype, "float32")
  local bm = ember.maximum(t({ true, false }), t({ false, false }))
  check_eq(bm.dtype, "bool"); check_tensor(bm, { true, false })
  check_eq(ember.fmin(t({ 3 }, { dtype = "int32" }), 2).dtype, "int32")
end

function T.maximum_minimum_ties_split_the_gradient()
  local x, y = f64({ 1, 2, 3 }):requires_grad_(), f64({ 1, 1, 4 }):requires_grad_()
  ember.maximum(x, y):sum():backward()
  check_tensor(x.grad, { 0.5, 1, 0 }); check_tensor(y.grad, { 0.5, 0, 1 })
  x, y = f64({ 1, 2, 3 }):requires_grad_(), f64({ 1, 1, 4 }):requires_grad_()
  ember.minimum(x, y):sum():backward()
  check_tensor(x.grad, { 0.5, 0, 1 }); check_tensor(y.grad, { 0.5, 1, 0 })
  -- fmax/fmin: a tie, or a NaN other, gives self the whole gradient
  x, y = f64({ 1, 2, 3 }):requires_grad_(), f64({ 1, 1, nan }):requires_grad_()
  ember.fmin(x, y):sum():backward()
  check_tensor(x.grad, { 1, 0, 1 }); check_tensor(y.grad, { 0, 1, 0 })
  x, y = f64({ 1, 2 }):requires_grad_(), f64({ 1, 3 }):requires_grad_()
  ember.fmax(x, y):sum():backward()
  check_tensor(x.grad, { 1, 0 }); check_tensor(y.grad, { 0, 1 })
end

-- ---- binary math ----

function T.atan2_hypot_fmod_copysign_xlogy_values()
  check_tensor(ember.atan2(a23(), b3()), { { 0.8960553845713439, -2.214297435588181, 0.5516549825285469 },
    { 1.3101939350475555, 2.819842099193151, -0.4939413689195812 } }, 1e-12)
  check_tensor(ember.arctan2(a23(), b3()), ember.atan2(a23(), b3()):tolist(), 0)
  check_tensor(a23():hypot(b3()), { { 0.6403124237432849, 1.5, 1.5264337522473748 },
    { 1.5524174696260025, 0.9486832980505138, 1.47648230602334 } }, 1e-12)
  check_tensor(ember.hypot(t({ 3.0, inf, nan }), t({ 4.0, nan, inf })), { 5, inf, inf })
  check_tensor(ember.fmod(t({ -7.5, 7.5, 5.0, -0.0 }), t({ 2.0, -2.0, inf, 1.0 })), { -1.5, 1.5, 5, -0.0 })
  check_eq(1 / ember.fmod(t({ -0.0 }), 1):item(), -inf)
  check_tensor(ember.fmod(t({ -7, 7 }), t({ 2, -2 })), { -1, 1 })
  check_tensor(ember.fmod(t({ 5, -5 }, { dtype = "int8" }), 3), { 2, -2 })
  check_tensor(ember.fmod(t({ math.mininteger }), -1), { 0 })
  -- copysign: integers give float32; -0 carries its sign
  local c = ember.copysign(t({ 3, -2 }), t({ -1.0, 0.0 }))
  check_eq(c.dtype, "float32"); check_tensor(c, { -3, 2 })
  check_eq(1 / ember.copysign(t({ 0.0 }), t({ -0.0 })):item(), -inf)
  check_tensor(ember.xlogy(t({ 0.0, 0, 1, 2, 0 }), t({ 0.0, nan, 0, inf, -1 })), { 0, nan, -inf, inf, 0 })
  check_tensor(ember.xlogy(t({ 2.0, 0.5 }), t({ 3.0, 0.25 })), { 2.1972246170043945, -0.6931471824645996 })
  check_eq(ember.atan2(t({ 1, 2 }), t({ 1, 0 })).dtype, "float32")
  check_tensor(ember.atan2(t({ 1, 2 }), t({ 1, 0 })), { 0.7853981852531433, 1.5707963705062866 })
  check_eq(ember.xlogy(t({ true }), 2).dtype, "float32")
  local h = ember.hypot(t({ 3.0 }, { dtype = "bfloat16" }), t({ 4.0 }, { dtype = "bfloat16" }))
  check_eq(h.dtype, "bfloat16"); check_tensor(h, { 5 })
end

function T.binary_math_gradients()
  local x, y = f64({ 0, 0, 2 }):requires_grad_(), f64({ 0, 1, 3 }):requires_grad_()
  ember.xlogy(x, y):sum():backward()
  check_tensor(x.grad, { 0, 0, 1.0986122886681098 }, 1e-12)
  check_tensor(y.grad, { nan, 0, 0.6666666666666666 }, 1e-12)
  x = f64({ 0, -2 }):requires_grad_()
  ember.copysign(x, f64({ -1, -1 })):sum():backward()
  check_tensor(x.grad, { 0, 1 })
  -- fmod's gradient for other is -trunc(self / other), also for a bool self
  y = f64({ 1.5, 0.4 }):requires_grad_()
  ember.fmod(t({ true, true }), y):sum():backward()
  check_tensor(y.grad, { -0.0, -2 })
end

-- ---- logical and bitwise ----

function T.logical_ops()
  local r = ember.logical_xor(t({ 0.0, nan, -0.0 }), t({ true, true, false }))
  check_eq(r.dtype, "bool"); check_tensor(r, { true, false, false })
  check_tensor(ember.logical_and(t({ 0, 1, 2 }), t({ 3.0, 0, 1 })), { false, false, true })
  check_tensor(t({ 0, 1 }, { dtype = "uint8" }):logical_or(0), { false, true })
  -- in place keeps self's dtype
  local f = t({ 2.5, 0, 1 })
  f:logical_and_(t({ 1, 1, 0 }))
  check_eq(f.dtype, "float32"); check_tensor(f, { 1, 0, 0 })
  -- not differentiable: inputs may require grad, the result has no history
  local g = f64({ 1, 0 }):requires_grad_()
  local o = ember.zeros(2, { dtype = "bool" })
  check(not ember.logical_or(g, g).requires_grad)
  check(ember.logical_or(g, 0, { out = o }) == o)
  check_tensor(o, { true, false })
  -- in place, self's autograd state stays as it was (PyTorch 1.13): a
  -- non-leaf keeps its history, a leaf that requires grad is written
  local h = g * 2
  h:logical_and_(t({ 1.0, 1.0 }))
  check(h.requires_grad); check_eq(tostring(h.grad_fn), "<MulBackward>")
  local leaf = f64({ 0, 3 }):requires_grad_()
  leaf:logical_or_(f64({ 1, 0 }))
  check(leaf.is_leaf and leaf.requires_grad); check_tensor(leaf, { 1, 1 })
end

function T.bitwise_ops_and_metamethods()
  local x = t({ 5, 3, -8 })
  check_tensor(x & 6, { 4, 2, 0 })
  check_tensor(x | 8, { 13, 11, -8 })
  check_tensor(x ~ 1, { 4, 2, -7 })
  check_tensor(6 & x, { 4, 2, 0 })
  check_tensor(x << 2, { 20, 12, -32 })
  check_tensor(x >> 1, { 2, 1, -4 })
  check_tensor(ember.bitwise_and(t({ true, true }), t({ true, false })), { true, false })
  check_eq((t({ true }) ~ true).dtype, "bool")
  check_tensor(ember.bitwise_and(t({ true, false }), t({ 3, 2 })), { 1, 0 })
  check_eq(ember.bitwise_xor(t({ 5 }, { dtype = "uint8" }), t({ 3 }, { dtype = "int8" })).dtype, "int32")
  check_eq((t({ 1, 2 }, { dtype = "uint8" }) << 3).dtype, "uint8")
  -- shifts wrap in the element's width; counts are masked as on x86
  -- (Note [Shift counts]), which is what torch 1.13 computes here
  check_tensor(ember.bitwise_left_shift(t({ 1, 3, 200 }, { dtype = "uint8" }), t({ 7, 9, 1 }, { dtype = "uint8" })),
    { 128, 0, 144 })
  check_tensor(ember.bitwise_right_shift(t({ -128, -1, 64 }, { dtype = "int8" }), t({ 3, 7, 2 }, { dtype = "int8" })),
    { -16, -1, 16 })
  check_tensor(t({ 1, 1, 1, -1 }, { dtype = "int32" }) << t({ 31, 32, 33, -1 }, { dtype = "int32" }),
    { -2147483648, 1, 2, -2147483648 })
  check_tensor(t({ -8, 8, -8, 8 }) >> t({ 1, 64, 70, -1 }), { -4, 8, -1, 0 })
  local y = t({ 1, 2 })
  check(y:bitwise_or_(4) == y); check_tensor(y, { 5, 6 })
  y:bitwise_left_shift_(1); check_tensor(y, { 10, 12 })
end

-- ---- division with a rounding mode ----

function T.div_rounding_modes()
  local a, b = t({ 7.0, -7, 7, -0.5, 1, 0 }), t({ 2.0, 2, -2, 3, 0, 0 })
  check_tensor(ember.div(a, b, { rounding_mode = "floor" }), { 3, -4, -4, -1, inf, nan })
  local tr = a:div(b, { rounding_mode = "trunc" })
  check_tensor(tr, { 3, -3, -3, -0.0, inf, nan })
  check_eq(1 / tr[4]:item(), -inf)
  local i, j = t({ 7, -7, 7, -7 }), t({ 2, 2, -2, -2 })
  local fl = ember.div(i, j, { rounding_mode = "floor" })
  check_eq(fl.dtype, "int64"); check_tensor(fl, { 3, -4, -4, 3 })
  check_tensor(ember.div(i, j, { rounding_mode = "trunc" }), { 3, -3, -3, 3 })
  check_tensor(ember.div(t({ -128 }, { dtype = "int8" }), t({ -1 }, { dtype = "int8" }), { rounding_mode = "trunc" }),
    { -128 })
  -- plain division is still true division, and `/` is unchanged
  check_tensor(i / j, { 3.5, -3.5, -3.5, 3.5 })
  -- floor_divide floors in PyTorch 1.13 (-7 // 2 is -4), as div(floor) does
  check_tensor(i // 2, { 3, -4, 3, -4 })
  check_tensor(ember.floor_divide(t({ -7.5, 0.5 }), t({ 2.0, -2.0 })), { -4, -1 })
  -- % is remainder (the sign of the divisor), unlike fmod
  check_tensor(t({ -7, 7, -7 }) % t({ 2, -2, -2 }), { 1, -1, -1 })
  check_tensor(t({ -7.5, 5.0, 3 }) % t({ 2.0, 0.0, -inf }), { 0.5, nan, -inf })
  -- in place and out=
  local x = t({ 7.0, -7 })
  check(x:div_(2, { rounding_mode = "floor" }) == x); check_tensor(x, { 3, -4 })
  local o = ember.zeros(2, { dtype = "int64" })
  check(ember.div(t({ -7, 7 }), 2, { out = o, rounding_mode = "trunc" }) == o)
  check_tensor(o, { -3, 3 })
  -- piecewise constant: a zero gradient
  local g = f64({ 1.5, -2.5 }):requires_grad_()
  ember.div(g, 2, { rounding_mode = "floor" }):sum():backward()
  check_tensor(g.grad, { 0, 0 })
end

-- ---- ternary ----

function T.lerp_addcmul_addcdiv()
  check_tensor(ember.lerp(a23(), b3(), 0.3), { { 0.47, -1.11, 0.95 }, { 1.17, -0.06, -0.1 } }, 1e-12)
  check_tensor(a23():lerp(b3(), f64({ 0.25, 0.75, 1.5 })), { { 0.475, -0.975, 1.55 }, { 1.225, -0.6, 2.3 } }, 1e-12)
  check_tensor(ember.lerp(t({ 1.0, 2, inf }), t({ 3.0, 4, 5 }), t({ 0.25, 0.75, 0.5 })), { 1.5, 3.5, inf })
  check_tensor(ember.addcmul(a23(), b3(), a23(), { value = 0.5 }),
    { { 0.6, -0.66, 1.32 }, { 1.8, 0.165, -1.155 } }, 1e-12)
  check_tensor(ember.addcdiv(a23(), b3(), f64({ 2, 4, -0.5 }), { value = -2 }), { { 0.1, -0.75, 6 }, { 1.1, 0.75, 4.5 } },
    1e-12)
  local ci = ember.addcmul(t({ 1, 2 }, { dtype = "int32" }), t({ 3, 4 }, { dtype = "int32" }),
    t({ 5, 6 }, { dtype = "int32" }), { value = 2 })
  check_eq(ci.dtype, "int32"); check_tensor(ci, { 31, 50 })
  -- a float value with integer tensors is truncated, as in torch
  check_tensor(ember.addcmul(t({ 1, 2 }), t({ 1, 2 }), t({ 1, 2 }), { value = 0.5 }), { 1, 2 })
  check_tensor(ember.addcdiv(t({ 1, 2 }), t({ 1.0, 2 }), t({ 1.0, 2 }), { value = 2 }), { 3, 4 })
  -- a 0-dim float64 operand does not promote dimensioned float32 ones
  check_eq(ember.addcmul(t({ 1.0, 2 }), f64(2), t({ 3.0, 2 })).dtype, "float32")
  local x = f64({ 1, -2 }):requires_grad_()
  local w, e = f64({ 0.25, 0.5 }):requires_grad_(), f64({ 3, 2 }):requires_grad_()
  ember.lerp(x, e, w):sum():backward()
  check_tensor(x.grad, { 0.75, 0.5 }); check_tensor(e.grad, { 0.25, 0.5 }); check_tensor(w.grad, { 2, 4 })
  local y = t({ 1.0, 2 })
  check(y:addcmul_(t({ 2.0, 2 }), t({ 3.0, 1 })) == y); check_tensor(y, { 7, 4 })
  y:addcdiv_(t({ 2.0, 2 }), t({ 4.0, 1 }), { value = 2 }); check_tensor(y, { 8, 8 })
  y:lerp_(t({ 0.0, 0 }), 0.5); check_tensor(y, { 4, 4 })
end

-- ---- where with numbers ----

function T.where_number_branches_promote_like_torch()
  local c = t({ true, false })
  local r = ember.where(c, 1.5, t({ 1, 2 }, { dtype = "int32" }))
  check_eq(r.dtype, "float32"); check_tensor(r, { 1.5, 2 })
  check_eq(ember.where(c, 1.5, 2.5).dtype, "float32")
  check_eq(ember.where(c, 1, 2).dtype, "int64")
  check_eq(ember.where(c, 1, t({ 1.0, 2 }, { dtype = "float16" })).dtype, "float16")
  check_eq(ember.where(c, f64(1.5), t({ 1.0, 2 })).dtype, "float32")
  check_tensor(ember.where(c, t({ 1, 2 }, { dtype = "uint8" }), -1), { 1, 255 })
  check_tensor(ember.where(t({ 1, 0 }, { dtype = "uint8" }), t({ 1.0, 2 }), t({ 3.0, 4 })), { 1, 4 })
  check_error(function() return ember.where(t({ 1, 0 }), 1.0, 2.0) end, "where", "condition", "int64")
end

-- ---- closeness and equality ----

function T.isclose_allclose_equal()
  check_tensor(ember.isclose(t({ 1.0, nan, inf, 1.0 }), t({ 1.0 + 1e-6, nan, inf, -inf }), { equal_nan = true }),
    { true, true, true, false })
  check_tensor(ember.isclose(t({ nan }), t({ nan })), { false })
  -- float32 arithmetic, as torch: 1 vs 1.00001 is not close
  check_tensor(t({ 1.0, 1.0, 100 }):isclose(t({ 1.00001, 1.0001, 100.001 })), { false, false, true })
  check_tensor(ember.isclose(t({ 1, 2 }), t({ 1, 3 }), { rtol = 0.5, atol = 0 }), { true, true })
  check_tensor(ember.isclose(t({ true }), t({ false }), { atol = 1 }), { true })
  check_eq(ember.allclose(t({ 1.0 }), t({ 1.0, 1.0 })), true)
  check_eq(ember.allclose(t({ 1.0 }), t({ 2.0 })), false)
  check_eq(t({ 1.0, nan }):allclose(t({ 1.0, nan }), { equal_nan = true }), true)
  check_eq(ember.equal(t({ 1 }), t({ 1.0 })), true)
  check_eq(ember.equal(t({ 1.0, 2 }), t({ { 1.0, 2 } })), false)
  check_eq(ember.equal(t({ nan }), t({ nan })), false)
  check_eq(ember.equal(ember.zeros(0), ember.zeros(0)), true)
  check_eq(t({ 1, 2 }):equal(t({ 1, 2 }, { dtype = "uint8" })), true)
  check_eq(type(ember.equal(t({ 1 }), t({ 2 }))), "boolean")
end

-- ---- shapes, layouts and out= ----

function T.empty_zero_dim_and_non_contiguous()
  check_shape(ember.maximum(ember.zeros(0), t({ 1.0 })), { 0 })
  check_shape(ember.atan2(t(1.0), t({ { 1.0, 2 } })), { 1, 2 })
  check_shape(ember.lerp(ember.zeros(0, 3), ember.zeros(3), 0.5), { 0, 3 })
  check_eq(ember.hypot(t(3.0), t(4.0)).ndim or #ember.hypot(t(3.0), t(4.0)).shape, 0)
  local m = f64({ { 1, 2, 3 }, { 4, 5, 6 } }):t()
  check_tensor(ember.fmod(m, 4), { { 1, 0 }, { 2, 1 }, { 3, 2 } })
  check_tensor(ember.addcmul(m, m, f64({ 1, 0 })), { { 2, 4 }, { 4, 5 }, { 6, 6 } })
  check_tensor(t({ { 1, 2 }, { 4, 8 } }):t() & 6, { { 0, 4 }, { 2, 0 } })
end

function T.out_variants()
  local o = ember.empty(3)
  check(ember.maximum(t({ 1.0, 5, 3 }), t({ 4.0, 2, 3 }), { out = o }) == o)
  check_tensor(o, { 4, 5, 3 })
  local d = ember.empty(2, { dtype = "float64" })
  ember.atan2(t({ 1, 2 }), t({ 1, 0 }), { out = d }); check_tensor(d, { 0.7853981633974483, 1.5707963267948966 }, 1e-6)
  local r = ember.empty(0)
  ember.lerp(t({ 1.0, 2 }), t({ 3.0, 4 }), 0.5, { out = r }); check_tensor(r, { 2, 3 })
  check_error(function() return ember.atan2(t({ 1.0 }), t({ 1.0 }), { out = ember.empty(1, { dtype = "int64" }) }) end,
    "atan2", "float32", "int64")
end

-- ---- errors ----

function T.errors_name_the_op_argument_and_problem()
  check_error(function() return t({ 1.5 }) & 1 end, "bitwise_and", "float32", "self and other")
  check_error(function() return ember.bitwise_left_shift(t({ true }), t({ true })) end, "bitwise_left_shift", "bool")
  check_error(function() return ember.hypot(t({ 1 }), t({ 2 })) end, "hypot", "int64")
  check_error(function() return ember.fmod(t({ true }), t({ true })) end, "fmod", "bool")
  check_error(function() return ember.fmod(t({ 1, 2 }), 0) end, "fmod", "division by zero")
  check_error(function() return ember.div(t({ 1 }), 0, { rounding_mode = "floor" }) end, "div", "division by zero")
  check_error(function() return ember.div(t({ 1 }), 2, { rounding_mode = "round" }) end, "div", "rounding_mode",
    "trunc", "floor", "round")
  check_error(function() return ember.maximum(ember.ones(2, 3), ember.ones(4)) end, "maximum", "{2,3}", "{4}")
  check_error(function() return ember.lerp(ember.ones(2, 3), ember.ones(4), 0.5) end, "lerp", "{2,3}", "{4}")
  check_error(function() return ember.lerp(t({ 1 }), t({ 2 }), 0.5) end, "lerp", "int64", "self")
  check_error(function() return ember.lerp(t({ 1.0 }), f64({ 2 }), 0.5) end, "lerp", "end", "float32", "float64")
  check_error(function() return ember.lerp(t({ 1.0 }), t({ 2.0 }), f64(0.5)) end, "lerp", "weight", "float64")
  check_error(function() return ember.addcdiv(t({ 1.0 }), t({ 1 }), t({ 2 })) end, "addcdiv", "integer division",
    "tensor1", "tensor2")
  check_error(function() return ember.addcmul(t({ true }), t({ true }), t({ true })) end, "addcmul", "bool")
  local u8 = t({ 1 }, { dtype = "uint8" })
  check_error(function() return ember.addcmul(u8, u8, u8, { value = -0.25 }) end, "addcmul", "value", "uint8",
    "overflow")
  check_error(function() return ember.isclose(t({ 1.0 }), f64({ 1 })) end, "isclose", "float32", "float64")
  check_error(function() return ember.isclose(t({ 1.0 }), t({ 1.0 }), { atol = -1 }) end, "isclose", "atol")
  check_error(function() return ember.allclose(t({ 1 }), t({ 1.0 })) end, "allclose", "int64", "float32")
  check_error(function() return ember.isclose(t({ 1.0, 2 }), t({ 1.0, 3, 4 })) end, "isclose", "{2}", "{3}")
  local i = t({ 1, 2 })
  check_error(function() return i:atan2_(t({ 1.0, 1 })) end, "atan2_", "float32", "int64")
  check_error(function() return t({ 1.0 }):maximum(t({ 1.0 }), { out = 3 }) end, "maximum", "out")
  local leaf = f64({ 1, 2 }):requires_grad_()
  check_error(function() return leaf:hypot_(f64({ 1, 1 })) end, "leaf")
  check_error(function() return ember.maximum(leaf, leaf, { out = ember.empty(2, { dtype = "float64" }) }) end,
    "maximum", "out=", "requires grad")
end

return T
