-- test_unary.lua -- the unary family (schema/ops/unary.yaml): values against
-- PyTorch 1.13 (the reference numbers below were computed with it, float64),
-- dtypes, in-place and out= variants, edge cases and error messages.
local ember = ember or require "ember"
local T = {}
local nan, inf = 0 / 0, math.huge

-- torch.NAME(torch.tensor(X, dtype=torch.float64)).tolist()
local X = { -2.5, -1.2, -0.5, -0.0, 0.0, 0.3, 0.5, 1.5, 2.5, 7.0, nan, inf, -inf }
local REF = {
  rsqrt = { nan, nan, nan, -inf, inf, 1.8257418583505538, 1.414213562373095, 0.8164965809277261, 0.6324555320336759, 0.3779644730092272, nan, 0.0, nan },
  expm1 = { -0.9179150013761012, -0.6988057880877979, -0.3934693402873666, -0.0, 0.0, 0.3498588075760031, 0.6487212707001282, 3.481689070338065, 11.182493960703473, 1095.6331584284585, nan, inf, -1.0 },
  log1p = { nan, nan, -0.6931471805599453, -0.0, 0.0, 0.26236426446749106, 0.4054651081081644, 0.9162907318741551, 1.252762968495368, 2.0794415416798357, nan, inf, nan },
  log2 = { nan, nan, nan, -inf, -inf, -1.7369655941662063, -1.0, 0.5849625007211562, 1.3219280948873624, 2.807354922057604, nan, inf, nan },
  log10 = { nan, nan, nan, -inf, -inf, -0.5228787452803376, -0.3010299956639812, 0.17609125905568124, 0.3979400086720376, 0.8450980400142568, nan, inf, nan },
  sin = { -0.5984721441039564, -0.9320390859672263, -0.479425538604203, -0.0, 0.0, 0.29552020666133955, 0.479425538604203, 0.9974949866040544, 0.5984721441039564, 0.6569865987187891, nan, nan, nan },
  cos = { -0.8011436155469337, 0.3623577544766736, 0.8775825618903728, 1.0, 1.0, 0.955336489125606, 0.8775825618903728, 0.0707372016677029, -0.8011436155469337, 0.7539022543433046, nan, nan, nan },
  tan = { 0.7470222972386603, -2.5721516221263188, -0.5463024898437905, -0.0, 0.0, 0.30933624960962325, 0.5463024898437905, 14.101419947171719, -0.7470222972386603, 0.8714479827243188, nan, nan, nan },
  asin = { nan, nan, -0.5235987755982989, -0.0, 0.0, 0.30469265401539747, 0.5235987755982989, nan, nan, nan, nan, nan, nan },
  acos = { nan, nan, 2.0943951023931957, 1.5707963267948966, 1.5707963267948966, 1.2661036727794992, 1.0471975511965976, nan, nan, nan, nan, nan, nan },
  atan = { -1.1902899496825317, -0.8760580505981934, -0.4636476090008061, -0.0, 0.0, 0.2914567944778671, 0.4636476090008061, 0.982793723247329, 1.1902899496825317, 1.4288992721907328, nan, 1.5707963267948966, -1.5707963267948966 },
  sinh = { -6.0502044810397875, -1.5094613554121725, -0.5210953054937474, -0.0, 0.0, 0.3045202934471426, 0.5210953054937474, 2.1292794550948173, 6.0502044810397875, 548.3161232732465, nan, inf, -inf },
  cosh = { 6.132289479663686, 1.8106555673243747, 1.1276259652063807, 1.0, 1.0, 1.0453385141288605, 1.1276259652063807, 2.352409615243247, 6.132289479663686, 548.317035155212, nan, inf, inf },
  asinh = { -1.6472311463710958, -1.015973134179692, -0.48121182505960347, -0.0, 0.0, 0.29567304756342244, 0.48121182505960347, 1.1947632172871094, 1.6472311463710958, 2.644120761058629, nan, inf, -inf },
  acosh = { nan, nan, nan, nan, nan, nan, nan, 0.9624236501192069, 1.566799236972411, 2.6339157938496336, nan, inf, nan },
  atanh = { nan, nan, -0.5493061443340548, -0.0, 0.0, 0.30951960420311175, 0.5493061443340548, nan, nan, nan, nan, nan, nan },
  reciprocal = { -0.4, -0.8333333333333334, -2.0, -inf, inf, 3.3333333333333335, 2.0, 0.6666666666666666, 0.4, 0.14285714285714285, nan, 0.0, -0.0 },
  square = { 6.25, 1.44, 0.25, 0.0, 0.0, 0.09, 0.25, 2.25, 6.25, 49.0, nan, inf, inf },
  sgn = { -1.0, -1.0, -1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, -1.0 },
  deg2rad = { -0.04363323129985824, -0.020943951023931952, -0.008726646259971648, -0.0, 0.0, 0.005235987755982988, 0.008726646259971648, 0.026179938779914945, 0.04363323129985824, 0.12217304763960307, nan, inf, -inf },
  rad2deg = { -143.2394487827058, -68.75493541569878, -28.64788975654116, -0.0, 0.0, 17.188733853924695, 28.64788975654116, 85.94366926962348, 143.2394487827058, 401.07045659157626, nan, inf, -inf },
  floor = { -3.0, -2.0, -1.0, -0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 7.0, nan, inf, -inf },
  ceil = { -2.0, -1.0, -0.0, -0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 7.0, nan, inf, -inf },
  round = { -2.0, -1.0, -0.0, -0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 7.0, nan, inf, -inf },
  trunc = { -2.0, -1.0, -0.0, -0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 7.0, nan, inf, -inf },
  frac = { -0.5, -0.19999999999999996, -0.5, 0.0, 0.0, 0.3, 0.5, 0.5, 0.5, 0.0, nan, nan, nan },
}

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end
local function f32(v) return ember.tensor(v, { dtype = "float32" }) end

local MATH = { "rsqrt", "expm1", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
  "cosh", "asinh", "acosh", "atanh", "reciprocal", "square", "sgn", "deg2rad", "rad2deg", "floor", "ceil",
  "round", "trunc", "frac" }

function T.float64_values_match_pytorch()
  for _, name in ipairs(MATH) do
    local r = ember[name](f64(X))
    check_eq(r.dtype, "float64", name)
    check_tensor(r, REF[name], 1e-12, name)
    check_tensor(f64(X)[name](f64(X)), REF[name], 1e-12, name .. " (method)")
  end
end

function T.float32_and_half_values()
  for _, name in ipairs(MATH) do
    local r = f32(X)[name](f32(X))
    check_eq(r.dtype, "float32", name)
    check_tensor(r, REF[name], 1e-5, name .. " float32")
  end
  -- float16/bfloat16 compute in float32 and round the result
  local h = ember.tensor({ 0.5, 1.5, -2.0 }, { dtype = "bfloat16" }):sin()
  check_eq(h.dtype, "bfloat16")
  check_tensor(h:float(), { 0.478515625, 0.99609375, -0.91015625 }, 0) -- torch, bfloat16
  -- deg2rad/rad2deg multiply by the constant rounded to the dtype, as torch
  check_tensor(ember.tensor({ 2.75 }, { dtype = "bfloat16" }):rad2deg():float(), { 157 }, 0)
  check_tensor(ember.tensor({ 2.75 }, { dtype = "float16" }):rad2deg():float(), { 157.5 }, 0)
  local g = ember.tensor({ 0.5, 4.0 }, { dtype = "float16" }):rsqrt()
  check_eq(g.dtype, "float16")
  check_tensor(g:float(), { 1.4140625, 0.5 }, 0)
end

function T.integer_inputs_give_float32_or_keep_their_dtype()
  local i = ember.tensor({ 1, 2, -3 })
  check_eq(i:sin().dtype, "float32")
  check_tensor(i:sin(), { 0.8414709568023682, 0.9092974066734314, -0.14112000167369843 }, 1e-7)
  check_eq(ember.tensor({ true, false }):log1p().dtype, "float32")
  check_tensor(ember.tensor({ 0, 2 }):reciprocal(), { inf, 0.5 })
  for _, name in ipairs({ "floor", "ceil", "round", "trunc" }) do
    local r = i[name](i)
    check_eq(r.dtype, "int64", name)
    check_tensor(r, { 1, 2, -3 }, 0, name)
  end
  check_eq(ember.tensor({ 1, 2 }, { dtype = "int8" }):floor().dtype, "int8")
  check_tensor(ember.tensor({ 3, 20 }, { dtype = "uint8" }):square(), { 9, 144 })
  check_tensor(ember.tensor({ 3, 20 }, { dtype = "int8" }):square(), { 9, -112 }) -- wraps, as torch
  local sb = ember.tensor({ true, false }):square()
  check_eq(sb.dtype, "int64")
  check_tensor(sb, { 1, 0 })
  local s = ember.tensor({ true, false }):sgn()
  check_eq(s.dtype, "bool")
  check_tensor(ember.tensor({ -3, 0, 5 }, { dtype = "int32" }):sgn(), { -1, 0, 1 })
  check_eq(ember.tensor({ 7 }, { dtype = "int32" }):deg2rad().dtype, "float32")
end

function T.round_with_decimals()
  -- torch.round(torch.tensor([...], dtype=torch.float64), decimals=2)
  check_tensor(f64({ 1.2345, 123.456, -0.125, 2.675, 0.5 }):round({ decimals = 2 }),
    { 1.23, 123.46, -0.12, 2.68, 0.5 }, 1e-15)
  check_tensor(ember.round(f32({ 1234.5678, 15.0, 25.0, -35.0 }), { decimals = -1 }), { 1230, 20, 20, -40 }, 0)
  check_tensor(f32({ 0.5, 1.5, 2.5, -0.5, -1.5 }):round(), { 0, 2, 2, -0.0, -2 }, 0)
  check_tensor(f32({ 0.5, 1.5, 2.5 }):round({ decimals = 0 }), { 0, 2, 2 }, 0)
  local y = f32({ 1.25, 3.14159 })
  check(rawequal(y:round_({ decimals = 1 }), y), "round_ returns self")
  check_tensor(y, { 1.2, 3.1 }, 1e-6)
  check_error(function() return ember.tensor({ 15, 25 }):round({ decimals = 1 }) end,
    "round", "int64", "floating")
  check_error(function() return f32({ 1 }):round({ decimals = 1.5 }) end, "round", "decimals")
end

function T.in_place_and_out_variants()
  local x = f64({ 0.5, -1.5, 2.25 })
  local y = x:clone()
  check(rawequal(y:sin_(), y), "sin_ returns self")
  check_tensor(y, { math.sin(0.5), math.sin(-1.5), math.sin(2.25) }, 1e-15)
  for _, name in ipairs({ "cos_", "floor_", "ceil_", "round_", "trunc_", "reciprocal_", "rsqrt_", "expm1_",
    "log1p_", "frac_", "square_", "tan_", "atan_", "sgn_", "deg2rad_" }) do
    local z = f64({ 0.25, 0.75 })
    local want = ember[name:sub(1, -2)](z)
    z[name](z)
    check_tensor(z, want:tolist(), 1e-15, name)
  end
  -- in place through a view writes the base
  local b = f32({ { 1.5, 2.5 }, { -0.5, 3.7 } })
  b[2]:floor_()
  check_tensor(b, { { 1.5, 2.5 }, { -1, 3 } })
  -- integers keep their dtype in place where the result is an integer
  local i = ember.tensor({ 4, -2 })
  i:floor_(); i:square_()
  check_tensor(i, { 16, 4 })
  -- out=: the result cast into out's dtype
  local o = ember.zeros(3, { dtype = "float64" })
  check(rawequal(ember.sin(f32({ 1, 2, 3 }), { out = o }), o))
  check_tensor(o, { math.sin(1), math.sin(2), math.sin(3) }, 1e-6)
  local o2 = ember.empty(0)
  x:log2({ out = o2 })
  check_shape(o2, { 3 })
end

function T.non_contiguous_empty_and_0_dim()
  local t = f32({ { 1, 2, 3 }, { 4, 5, 6 } }):t()
  check_tensor(t:sin(), { { math.sin(1), math.sin(4) }, { math.sin(2), math.sin(5) }, { math.sin(3), math.sin(6) } },
    1e-6)
  local e = ember.zeros(0, 3):cos()
  check_shape(e, { 0, 3 })
  local s = ember.tensor(2.5, { dtype = "float64" }):floor()
  check_shape(s, {})
  check_eq(s:item(), 2)
  local tt = f64({ { 1.5, 2.5 }, { 3.5, 4.5 } }):t()
  tt:round_()
  check_tensor(tt, { { 2, 4 }, { 2, 4 } })
end

function T.gradients_of_rounding_are_zero_and_frac_passes()
  local x = f64({ 0.3, 1.7, -2.2 }):requires_grad_()
  local g = ember.autograd.grad({ (x:floor() + x:ceil() + x:round() + x:trunc() + x:sgn()):sum() }, { x })[1]
  check_tensor(g, { 0, 0, 0 })
  check_tensor(ember.autograd.grad({ x:frac():sum() }, { x })[1], { 1, 1, 1 })
  check_tensor(ember.autograd.grad({ x:square():sum() }, { x })[1], { 0.6, 3.4, -4.4 }, 1e-12)
end

function T.unary_errors_name_op_argument_and_problem()
  check_error(function() return ember.tensor({ true }):floor() end, "floor", "bool")
  check_error(function() return ember.tensor({ 1, 2 }):frac() end, "frac", "int64")
  check_error(function() return ember.tensor({ 1, 2 }):sin_() end, "sin_", "float32", "int64")
  check_error(function() return ember.tensor({ true }):square_() end, "square_", "int64", "bool")
  check_error(function() return ember.sin("x") end, "sin", "self")
  check_error(function() return ember.sin(f32({ 1 }), { out = 3 }) end, "sin", "out")
  check_error(function() return f32({ 1 }):requires_grad_():sin_() end, "sin_", "leaf")
end

-- ---- clamp ----

function T.clamp_with_number_bounds()
  local x = f32({ 1.0, nan, -2.0, 0.5 })
  check_tensor(x:clamp(0, 1), { 1, nan, 0, 0.5 })
  check_tensor(x:clamp(nil, 0.7), { 0.7, nan, -2, 0.5 }, 1e-7)
  check_tensor(ember.clamp(x, { min = 0.2 }), { 1, nan, 0.2, 0.5 }, 1e-7)
  check_tensor(x:clip(-1, 1), { 1, nan, -1, 0.5 })
  check_tensor(f32({ 1, 2, 3 }):clamp(2, 1), { 1, 1, 1 }, 0) -- min > max: max wins, as torch
  -- NaN bounds as torch 1.13: both bounds or clamp_min/clamp_max -> NaN; one bound of clamp -> x
  check_tensor(x:clamp(nan, 1), { nan, nan, nan, nan })
  check_tensor(x:clamp(nil, nan), { 1, nan, -2, 0.5 })
  check_tensor(x:clamp(nan), { 1, nan, -2, 0.5 })
  check_tensor(x:clamp_min(nan), { nan, nan, nan, nan })
  check_tensor(x:clamp_max(nan), { nan, nan, nan, nan })
  -- dtypes: numbers promote like x + number
  local i = ember.tensor({ 1, 5, -3 })
  check_eq(i:clamp(0.5).dtype, "float32")
  check_tensor(i:clamp(0.5), { 1, 5, 0.5 })
  check_eq(i:clamp(0, 3).dtype, "int64")
  check_tensor(i:clamp(0, 3), { 1, 3, 0 })
  check_tensor(i:clamp_max(2), { 1, 2, -3 })
  local b = ember.tensor({ true, false })
  check_eq(b:clamp(nil, 0).dtype, "int64")
  check_tensor(b:clamp(nil, 0), { 0, 0 })
  check_tensor(b:clamp_min(0), { 1, 0 })
  check_tensor(ember.tensor({ 1, 2 }, { dtype = "uint8" }):clamp(-1), { 255, 255 }) -- -1 wraps, as torch
  check_eq(ember.tensor({ 1.5 }, { dtype = "float16" }):clamp(0, 1).dtype, "float16")
  -- in place and out=
  local y = x:clone()
  check(rawequal(y:clamp_(0, 1), y))
  check_tensor(y, { 1, nan, 0, 0.5 })
  local k = ember.tensor({ 1, 7 })
  k:clamp_(0, 3); k:clamp_min_(2); k:clamp_max_(2)
  check_tensor(k, { 2, 2 })
  local o = ember.zeros(4)
  check(rawequal(ember.clamp(x, -1, 0.7, { out = o }), o))
  check_tensor(o, { 0.7, nan, -1, 0.5 }, 1e-7)
end

function T.clamp_with_tensor_bounds()
  local x = f32({ 1.0, nan, -2.0, 0.5 })
  local lo = f32({ 0.0, 0.0, 0.0, 1.0 })
  check_tensor(x:clamp(lo, 0.8), { 0.8, nan, 0, 0.8 }, 1e-7)
  check_tensor(x:clamp(nil, lo), { 0, nan, -2, 0.5 })
  check_tensor(x:clamp_min(lo), { 1, nan, 0, 1 })
  check_tensor(x:clamp_max(lo), { 0, nan, -2, 0.5 })
  -- NaN in a bound gives NaN where it is used (torch's maximum/minimum)
  local nb = f32({ nan, 1, 1, 1 })
  check_tensor(x:clamp(nb), { nan, nan, 1, 1 })
  check_tensor(x:clamp_max(nb), { nan, nan, -2, 0.5 })
  check_tensor(x:clamp(ember.tensor(nan), ember.tensor(1.0)), { nan, nan, nan, nan })
  -- broadcasting and promotion over the three
  check_tensor(ember.tensor({ { 1, 2 } }):clamp(ember.tensor({ { 1 }, { 2 } })), { { 1, 2 }, { 2, 2 } })
  local p = ember.tensor({ 1, 2 }, { dtype = "int8" }):clamp(ember.tensor(1.5, { dtype = "float64" }))
  check_eq(p.dtype, "float64")
  check_tensor(p, { 1.5, 2 })
  check_eq(ember.tensor({ 1, 2 }, { dtype = "int32" }):clamp(ember.tensor({ 1 })).dtype, "int64")
  check_eq(ember.tensor({ true, false }):clamp(ember.tensor({ true, true })).dtype, "bool")
  check_tensor(ember.tensor({ true, false }):clamp_min(ember.tensor({ true, true })), { true, true })
  check_tensor(x:clip(lo, 0.8), { 0.8, nan, 0, 0.8 }, 1e-7)
  local y = f32({ 1, 2 })
  y:clamp_(f64({ 1.5, 1.5 }))
  check_eq(y.dtype, "float32")
  check_tensor(y, { 1.5, 2 })
  local o = ember.zeros(2, { dtype = "float64" })
  ember.clamp(f32({ 1, 2 }), f32({ 0, 0 }), nil, { out = o }) -- tensor bounds: any out dtype it casts to
  check_tensor(o, { 1, 2 })
end

function T.clamp_gradients_pass_at_the_bounds()
  local z = f64({ 0.5, 2.0, 1.0 }):requires_grad_()
  check_tensor(ember.autograd.grad({ z:clamp(0.5, 1.5):sum() }, { z })[1], { 1, 0, 1 })
  check_tensor(ember.autograd.grad({ z:clamp_min(1.0):sum() }, { z })[1], { 0, 1, 1 })
  check_tensor(ember.autograd.grad({ z:clamp_max(1.0):sum() }, { z })[1], { 1, 0, 1 })
  -- tensor bounds (torch 1.13): min gets grad where self < min (and min < max),
  -- max where self > max or max < min
  local x = f64({ 0.5, -1.2, 0.8, 1.5, 0.3, -0.7 }):requires_grad_()
  local lo = f64({ 0.0, -1.0, 0.9, 1.0, 0.3, -1.0 }):requires_grad_()
  local hi = f64({ 0.6, 2.0, 1.2, 0.6, 2.0, -0.8 }):requires_grad_()
  local y = x:clamp(lo, hi)
  check_tensor(y, { 0.5, -1.0, 0.9, 0.6, 0.3, -0.8 })
  local g = ember.autograd.grad({ y:sum() }, { x, lo, hi })
  check_tensor(g[1], { 1, 0, 0, 0, 1, 0 })
  check_tensor(g[2], { 0, 1, 1, 0, 0, 0 })
  check_tensor(g[3], { 0, 0, 0, 1, 0, 1 })
end

function T.clamp_errors()
  local x = f32({ 1, 2 })
  check_error(function() return x:clamp() end, "clamp", "at least one of 'min' or 'max'")
  check_error(function() return x:clamp(nil, nil) end, "clamp", "min", "max")
  check_error(function() return ember.tensor({ true }):clamp(false, true) end, "clamp", "bool")
  check_error(function() return ember.tensor({ 1, 2 }, { dtype = "uint8" }):clamp(0, 300) end,
    "clamp", "300", "uint8")
  check_error(function() return x:clamp_(f32({ { 1 }, { 2 } })) end, "clamp_", "{2}", "{2,2}")
  check_error(function() return x:clamp(f32({ 1, 2, 3 })) end, "clamp", "{2}", "{3}")
  check_error(function() return ember.clamp(x, 0, 1, { out = ember.zeros(2, { dtype = "float64" }) }) end,
    "clamp", "out", "float32", "float64")
  check_error(function() return ember.tensor({ 1, 2 }):clamp_(0.5) end, "clamp_", "float32", "int64")
  check_error(function() return x:clamp("a") end, "clamp")
end

-- ---- predicates, logical_not, bitwise_not ----

function T.predicates_give_bool()
  local pnan = math.abs(0 / 0) -- 0/0 is a negative NaN on x86; abs clears its sign
  local x = f32({ -2.0, 0.0, -0.0, pnan, -pnan, inf, -inf, 3.0 })
  -- torch.isnan(...) etc. of the same values
  check_tensor(x:isnan(), { false, false, false, true, true, false, false, false })
  check_tensor(ember.isinf(x), { false, false, false, false, false, true, true, false })
  check_tensor(x:isfinite(), { true, true, true, false, false, false, false, true })
  check_tensor(x:isposinf(), { false, false, false, false, false, true, false, false })
  check_tensor(x:isneginf(), { false, false, false, false, false, false, true, false })
  check_tensor(x:signbit(), { true, false, true, false, true, false, true, false })
  check_tensor(x:logical_not(), { false, true, true, false, false, false, false, false })
  for _, name in ipairs({ "isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit", "logical_not" }) do
    check_eq(x[name](x).dtype, "bool", name)
    check_eq(ember[name](f64({ 1 })).dtype, "bool", name)
    check_eq(ember[name](ember.tensor({ 1 }, { dtype = "bfloat16" })).dtype, "bool", name)
  end
  local i = ember.tensor({ -2, 0, 5 }, { dtype = "int8" })
  check_tensor(i:isnan(), { false, false, false })
  check_tensor(i:isinf(), { false, false, false })
  check_tensor(i:isfinite(), { true, true, true })
  check_tensor(i:signbit(), { true, false, false })
  check_tensor(i:logical_not(), { false, true, false })
  check_tensor(ember.tensor({ 3 }, { dtype = "uint8" }):signbit(), { false })
  check_tensor(ember.tensor({ true, false }):signbit(), { false, false })
  check_tensor(ember.tensor({ true, false }):logical_not(), { false, true })
  -- non-contiguous, empty, 0-dim; no history from an input that requires grad
  check_tensor(f32({ { 1, nan }, { inf, 2 } }):t():isfinite(), { { true, false }, { false, true } })
  check_shape(ember.zeros(0, 2):isnan(), { 0, 2 })
  check_shape(ember.tensor(nan):isnan(), {})
  local g = f64({ 1, nan }):requires_grad_()
  check(not g:isnan().requires_grad and not g:logical_not().requires_grad)
  -- logical_not.out: any out dtype
  local o = ember.zeros(3)
  ember.logical_not(f64({ 0, 2, nan }), { out = o })
  check_tensor(o, { 1, 0, 0 })
  -- not differentiable: its out= takes an input that requires grad (as torch)
  ember.logical_not(g, { out = o[{ { 1, 2 } }] })
  check_tensor(o, { 0, 0, 0 })
end

function T.bitwise_not_and_the_tilde_operator()
  local i = ember.tensor({ -2, 0, 5 })
  check_tensor(i:bitwise_not(), { 1, -1, -6 })
  check_tensor(~i, { 1, -1, -6 })
  check_tensor(ember.tensor({ 1, 255 }, { dtype = "uint8" }):bitwise_not(), { 254, 0 })
  check_eq((~ember.tensor({ 1 }, { dtype = "int32" })).dtype, "int32")
  check_tensor(~ember.tensor({ true, false }), { false, true })
  local j = ember.tensor({ 7, -8 }, { dtype = "int8" })
  check(rawequal(j:bitwise_not_(), j))
  check_tensor(j, { -8, 7 })
  check_error(function() return ~f32({ 1 }) end, "bitwise_not", "float32")
  check_error(function() return f64({ 1 }):bitwise_not() end, "bitwise_not", "float64")
  check_error(function() return ember.bitwise_not(i, { out = ember.zeros(3, { dtype = "int32" }) }) end,
    "bitwise_not", "int64", "int32")
  check_error(function() return ember.isnan("x") end, "isnan", "self")
end

-- ---- nan_to_num ----

function T.nan_to_num_replaces_nan_and_infinities()
  local x = f32({ nan, inf, -inf, 1.5 })
  -- torch.nan_to_num: 0, the dtype's max and lowest by default
  check_tensor(x:nan_to_num(), { 0, 3.4028234663852886e38, -3.4028234663852886e38, 1.5 }, 1e-7)
  check_tensor(ember.nan_to_num(f64({ nan, inf, -inf })), { 0, 1.7976931348623157e308, -1.7976931348623157e308 })
  check_tensor(ember.tensor({ nan, inf, -inf }, { dtype = "float16" }):nan_to_num():float(), { 0, 65504, -65504 })
  check_tensor(x:nan_to_num(1, 2, -3), { 1, 2, -3, 1.5 })
  check_tensor(x:nan_to_num({ posinf = 9 }), { 0, 9, -3.4028234663852886e38, 1.5 }, 1e-7)
  check_tensor(x:nan_to_num(nil, nil, -1), { 0, 3.4028234663852886e38, -1, 1.5 }, 1e-7)
  local i = ember.tensor({ 1, 2 })
  check_eq(i:nan_to_num(1.5, 2.5).dtype, "int64")
  check_tensor(i:nan_to_num(1.5, 2.5), { 1, 2 })
  check_tensor(ember.tensor({ true, false }):nan_to_num(), { true, false })
  local y = x:clone()
  check(rawequal(y:nan_to_num_(-1), y))
  check_tensor(y, { -1, 3.4028234663852886e38, -3.4028234663852886e38, 1.5 }, 1e-7)
  check_tensor(f32({ { nan, 1 }, { 2, inf } }):t():nan_to_num(0, 5), { { 0, 2 }, { 1, 5 } })
  -- the gradient passes where self is finite
  local z = f64({ nan, 2.0, inf }):requires_grad_()
  check_tensor(ember.autograd.grad({ z:nan_to_num():sum() }, { z })[1], { 0, 1, 0 })
  check_error(function() return ember.nan_to_num(x, { out = ember.zeros(4, { dtype = "float64" }) }) end,
    "nan_to_num", "float32", "float64")
  check_error(function() return x:nan_to_num("a") end, "nan_to_num", "nan")
end

-- ---- special functions ----

-- torch.NAME(torch.tensor(XS / XE, dtype=torch.float64)).tolist(); polygammaN is torch.polygamma(N, ...)
local XS = { -2.5, -1.2, -0.5, -0.0, 0.0, 0.3, 0.5, 1.5, 2.5, 7.0, nan, inf, -inf, -3.0, 1e-20 }
local XE = { -1.0, -0.9, -0.3, 0.0, 0.2, 0.7, 0.95, 1.0, 1.5, nan }
local REF_SP = {
  erf = { -0.999593047982555, -0.9103139782296354, -0.5204998778130465, -0.0, 0.0, 0.3286267594591274, 0.5204998778130465, 0.9661051464753108, 0.999593047982555, 1.0, nan, 1.0, -1.0, -0.9999779095030014, 1.1283791670955125e-20 },
  erfc = { 1.999593047982555, 1.9103139782296354, 1.5204998778130465, 1.0, 1.0, 0.6713732405408726, 0.4795001221869535, 0.033894853524689274, 0.0004069520174449589, 4.183825607779414e-23, nan, 0.0, 2.0, 1.9999779095030015, 1.0 },
  lgamma = { -0.05624371649767405, 1.5791760340399836, 1.2655121234846454, inf, inf, 1.0957979948180756, 0.5723649429247001, -0.12078223763524522, 0.2846828704729192, 6.579251212010101, nan, inf, inf, inf, 46.051701859880914 },
  digamma = { 1.1031566406452433, 4.868324766627195, 0.03648997397857639, inf, -inf, -3.502524222200133, -1.9635100260214229, 0.036489973978576194, 0.7031566406452431, 1.872784335098467, nan, inf, nan, nan, -1e+20 },
  erfinv = { -inf, -1.1630871536766743, -0.2724627147267544, 0.0, 0.1791434546212917, 0.7328690779592169, 1.385903824349678, inf, nan, nan },
  polygamma1 = { 9.53924664493752, 27.993918581753697, 8.934802200117687, inf, inf, 12.245364544940365, 4.934802202073678, 0.9348022009716718, 0.4903577562398206, 0.1535451779624394, nan, 0.0, nan, 7.311989052578831e+31, 1.0000000000000002e+40 },
  polygamma2 = { -0.1082040516417282, 246.72729169898602, -0.82879664423432, -inf, -inf, -75.27253658872601, -16.828796644234316, -0.8287966442343201, -0.23620405164172736, -0.023530472985855234, nan, nan, -inf, -inf, -2.0000000000000003e+60 },
  polygamma3 = { 194.74787621918756, 3768.264410589005, 193.40909103400242, inf, inf, 743.1417646550497, 97.40909103400242, 1.4090910340024367, 0.2239058488172521, 0.007198198563125444, nan, nan, inf, inf, 6.000000000000002e+80 },
}

function T.special_functions_match_pytorch()
  for _, name in ipairs({ "erf", "erfc", "lgamma", "digamma" }) do
    check_tensor(ember[name](f64(XS)), REF_SP[name], 1e-12, name)
    check_tensor(f32(XS)[name](f32(XS)), REF_SP[name], 1e-5, name .. " float32")
  end
  check_tensor(f64(XE):erfinv(), REF_SP.erfinv, 1e-12, "erfinv")
  check_tensor(f32(XE):erfinv(), REF_SP.erfinv, 1e-5, "erfinv float32")
  for n = 1, 3 do
    check_tensor(ember.polygamma(n, f64(XS)), REF_SP["polygamma" .. n], 1e-10, "polygamma " .. n)
    check_tensor(f64(XS):polygamma(n), REF_SP["polygamma" .. n], 1e-10, "x:polygamma " .. n)
  end
  check_tensor(f64(XS):polygamma(0), REF_SP.digamma, 1e-12, "polygamma 0 is digamma")
  -- integers give float32; in place; out=
  local i = ember.tensor({ 1, 2 })
  check_eq(i:lgamma().dtype, "float32")
  check_tensor(ember.polygamma(2, i), { -2.4041138063191885, -0.40411380631918857 }, 1e-6)
  local y = f64({ 0.5, 2 })
  check(rawequal(y:digamma_(), y))
  check_tensor(y, { -1.9635100260214235, 0.42278433509846713 }, 1e-12)
  local z = f64({ 0.25 })
  z:erf_(); z:erfinv_()
  check_tensor(z, { 0.25 }, 1e-12)
  local o = ember.zeros(2, { dtype = "float64" })
  ember.polygamma(1, f32({ 1, 2 }), { out = o })
  check_tensor(o, { 1.6449340668482264, 0.6449340668482264 }, 1e-6)
  check_eq(ember.tensor({ 0.5 }, { dtype = "bfloat16" }):erf().dtype, "bfloat16")
end

function T.special_function_gradients()
  local x = f64({ 0.5, 1.5, 3.0 }):requires_grad_()
  -- d lgamma = digamma, d digamma = polygamma(1), d polygamma(n) = polygamma(n + 1)
  check_tensor(ember.autograd.grad({ x:lgamma():sum() }, { x })[1], x:detach():digamma():tolist(), 1e-12)
  check_tensor(ember.autograd.grad({ x:digamma():sum() }, { x })[1], x:detach():polygamma(1):tolist(), 1e-12)
  check_tensor(ember.autograd.grad({ x:polygamma(2):sum() }, { x })[1], x:detach():polygamma(3):tolist(), 1e-12)
  local e = f64({ 0.3 }):requires_grad_()
  -- d erfinv(y) = sqrt(pi)/2 exp(erfinv(y)^2)
  local v = math.exp(e:detach():erfinv():item() ^ 2) * math.sqrt(math.pi) / 2
  check_tensor(ember.autograd.grad({ e:erfinv():sum() }, { e })[1], { v }, 1e-12)
  check_error(function() return ember.polygamma(-1, x) end, "polygamma", "negative n")
  check_error(function() return ember.polygamma(1.5, x) end, "polygamma", "order")
  check_error(function() return ember.tensor({ 1 }):erf_() end, "erf_", "float32", "int64")
end

-- logical_not_ writes 1/0 in self's own dtype; through history its
-- gradient is zero (torch 1.13 passes the old gradient through unchanged)
function T.logical_not_in_place()
  local b = ember.tensor({ 0, 3, -2 }, { dtype = "int32" })
  check(rawequal(b:logical_not_(), b))
  check_tensor(b, { 1, 0, 0 })
  check(b.dtype == "int32")
  check_tensor(ember.tensor({ true, false }):logical_not_(), { false, true })
  local a = ember.tensor({ 0.0, 2.0, -1.0 }, { requires_grad = true })
  local x = a * 2
  x:logical_not_()
  check_tensor(x, { 1, 0, 0 })
  x:sum():backward()
  check_tensor(a.grad, { 0, 0, 0 })
  check_error(function() return a:logical_not_() end, "logical_not_", "leaf")
end

-- signed zeros that later ops can see (atan2, 1/x): torch 1.13 keeps -0 in
-- expm1 (every dtype) and gives +0 from elu/selu/celu at -0 (its exp(x) - 1)
function T.signed_zeros()
  local function sign_of_first(t) return 1 / t[1]:item() end
  for _, dt in ipairs({ "float32", "float64" }) do
    local x = ember.tensor({ -0.0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, { dtype = dt })
    check(sign_of_first(x:expm1()) == -math.huge, dt .. " expm1(-0)")
    check(sign_of_first(x:expm1():atan2(ember.tensor(1.0, { dtype = dt }))) == -math.huge, dt .. " atan2(expm1(-0), 1)")
    for _, op in ipairs({ "elu", "selu", "celu" }) do
      check(sign_of_first(ember.nn.functional[op](x)) == math.huge, dt .. " " .. op .. "(-0)")
    end
  end
end

return T
