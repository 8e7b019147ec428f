-- samples/binary.lua -- gradcheck samples of the binary family
-- (schema/ops/binary.yaml; Note [Schema files] in op_samples.lua).
-- Operands keep away from ties of maximum & co. and from the jumps of fmod
-- and the rounding divisions, except where a sample says gradgrad = false.
return function(H)
  local S = {}
  local t, m23, p23, v3, one, many = H.t, H.m23, H.p23, H.v3, H.one, H.many

  -- ---- maximum and minimum ----
  -- a tie splits the gradient equally, which is also the central difference
  local function tie() return t({ 1.0, -2.0, 0.5 }), t({ 1.0, 3.0, 0.25 }) end
  S.maximum = function()
    local r = many({
      { { m23(), v3() }, function(a, b) return ember.maximum(a, b) end },
      { { v3(), m23() }, function(a, b) return a:maximum(b) end },
    })
    local a, b = tie()
    r[#r + 1] = { inputs = { a, b }, fn = function(x, y) return ember.maximum(x, y) end, gradgrad = false }
    return r
  end
  S.minimum = function()
    local r = many({
      { { m23(), v3() }, function(a, b) return ember.minimum(a, b) end },
      { { v3(), m23() }, function(a, b) return a:minimum(b) end },
    })
    local a, b = tie()
    r[#r + 1] = { inputs = { a, b }, fn = function(x, y) return x:minimum(y) end, gradgrad = false }
    return r
  end
  S.fmax = function()
    return many({
      { { m23(), v3() }, function(a, b) return ember.fmax(a, b) end },
      { { v3(), m23() }, function(a, b) return a:fmax(b) end },
    })
  end
  S.fmin = function()
    return many({
      { { m23(), v3() }, function(a, b) return ember.fmin(a, b) end },
      { { v3(), m23() }, function(a, b) return a:fmin(b) end },
    })
  end

  -- ---- binary math ----
  S.atan2 = function()
    return many({
      { { m23(), v3() }, function(a, b) return ember.atan2(a, b) end },
      { { v3(), m23() }, function(a, b) return a:atan2(b) end },
      { { m23() }, function(a) return a:atan2(0.5) end },
    })
  end
  S.atan2_ = function() return one({ m23(), v3() }, function(a, b) return (a * 1):atan2_(b) end) end
  S.arctan2 = function() return one({ m23(), v3() }, function(a, b) return ember.arctan2(a, b) end) end
  S.arctan2_ = function() return one({ m23(), v3() }, function(a, b) return (a * 1):arctan2_(b) end) end
  local function fm_a() return t({ { 2.3, 5.7 }, { -1.6, 4.4 } }) end
  local function fm_b() return t({ { 1.0, 1.5 }, { 1.1, -2.0 } }) end
  S.fmod = function()
    return many({
      { { fm_a(), fm_b() }, function(a, b) return ember.fmod(a, b) end },
      { { fm_a() }, function(a) return a:fmod(1.5) end },
    })
  end
  S.fmod_ = function() return one({ fm_a(), fm_b() }, function(a, b) return (a * 1):fmod_(b) end) end
  S.hypot = function()
    return many({
      { { m23(), v3() }, function(a, b) return ember.hypot(a, b) end },
      { { v3() }, function(a) return a:hypot(0.75) end },
    })
  end
  S.hypot_ = function() return one({ m23(), v3() }, function(a, b) return (a * 1):hypot_(b) end) end
  S.copysign = function()
    return many({
      { { m23(), v3() }, function(a, b) return ember.copysign(a, b) end },
      { { v3() }, function(a) return a:copysign(-1) end },
    })
  end
  S.copysign_ = function() return one({ m23(), v3() }, function(a, b) return (a * 1):copysign_(b) end) end
  S.xlogy = function()
    return many({
      { { m23(), p23() }, function(a, b) return ember.xlogy(a, b) end },
      { { t({ 0.0, 1.5, -0.5 }), v3() * v3() }, function(a, b) return a:xlogy(b) end },
      { { v3() }, function(a) return a:xlogy(2) end },
    })
  end
  S.xlogy_ = function() return one({ m23(), p23() }, function(a, b) return (a * 1):xlogy_(b) end) end

  -- ---- division with a rounding mode: a zero gradient away from the jumps ----
  local function dv_b() return t({ { 0.7, 1.3, 0.9 }, { 1.7, 0.45, 2.3 } }) end
  S.div_Tensor_mode = function()
    return many({
      { { m23(), dv_b() }, function(a, b) return ember.div(a, b, { rounding_mode = "floor" }) + a end },
      { { m23(), dv_b() }, function(a, b) return a:div(b, { rounding_mode = "trunc" }) * b end },
    })
  end
  S.div__Tensor_mode = function()
    return one({ m23(), dv_b() }, function(a, b) return (a * 1):div_(b, { rounding_mode = "trunc" }) + a * b end)
  end

  -- ---- ternary ----
  S.lerp = function()
    return many({
      { { m23(), v3(), p23() * 0.3 }, function(a, b, w) return ember.lerp(a, b, w) end },
      { { m23(), v3(), t({ 0.2, 0.9, 0.6 }) }, function(a, b, w) return a:lerp(b, w) end },
      { { m23(), v3() }, function(a, b) return a:lerp(b, 0.25) end },
      { { m23(), v3() }, function(a, b) return a:lerp(b, 0.75) end },
    })
  end
  S.lerp_ = function()
    return one({ m23(), v3(), p23() * 0.3 }, function(a, b, w) return (a * 1):lerp_(b, w) end)
  end
  S.addcmul = function()
    return many({
      { { m23(), v3(), p23() }, function(a, b, c) return ember.addcmul(a, b, c, { value = 0.5 }) end },
      { { v3(), m23(), v3() }, function(a, b, c) return a:addcmul(b, c) end },
    })
  end
  S.addcmul_ = function()
    return one({ m23(), v3(), p23() }, function(a, b, c) return (a * 1):addcmul_(b, c, { value = -2 }) end)
  end
  S.addcdiv = function()
    return many({
      { { m23(), v3(), p23() }, function(a, b, c) return ember.addcdiv(a, b, c, { value = 0.5 }) end },
      { { v3(), m23(), p23() }, function(a, b, c) return a:addcdiv(b, c) end },
    })
  end
  S.addcdiv_ = function()
    return one({ m23(), v3(), p23() }, function(a, b, c) return (a * 1):addcdiv_(b, c, { value = 3 }) end)
  end
  return S
end
