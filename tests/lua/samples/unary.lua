-- samples/unary.lua -- gradcheck samples of the unary family
-- (schema/ops/unary.yaml); see op_samples.lua. Inputs sit inside each
-- function's domain and away from the jumps of floor/ceil/round/trunc/frac.
return function(H)
  local S = {}
  local t, m23, p23 = H.t, H.m23, H.p23
  -- |x| < 1 (asin, acos, atanh) and x > 1 (acosh)
  local function u23() return t({ { 0.5, -0.6, 0.3 }, { 0.7, 0.1, -0.35 } }) end
  local function g23() return t({ { 1.5, 2.2, 1.8 }, { 2.5, 1.3, 3.1 } }) end
  -- away from the halves where round jumps
  local function r23() return t({ { 0.4, -1.2, 0.8 }, { 1.3, 0.3, -0.7 } }) end
  local input = {
    rsqrt = p23, expm1 = m23, log1p = p23, log2 = p23, log10 = p23, sin = m23, cos = m23, tan = m23,
    asin = u23, acos = u23, atan = m23, sinh = m23, cosh = m23, asinh = m23, acosh = g23, atanh = u23,
    reciprocal = m23, square = m23, sgn = m23, deg2rad = m23, rad2deg = m23, floor = m23, ceil = m23,
    round = r23, trunc = m23, frac = m23,
  }
  for name, make in pairs(input) do
    S[name] = function() return H.one({ make() }, function(a) return a[name](a) end) end
    -- in place on a copy (a leaf that requires grad cannot be written)
    local ip = name .. "_"
    S[ip] = function() return H.one({ make() }, function(a) local c = a:clone(); return c[ip](c) end) end
  end
  S.round_decimals = function()
    return H.one({ m23() }, function(a) return a:round({ decimals = 2 }) * a end)
  end
  S.round__decimals = function()
    return H.one({ m23() }, function(a) local c = a * 1; return c:round_({ decimals = 1 }) * a end)
  end
  return S
end
