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
    round = r23, trunc = m23, frac = m23, erf = m23, erfc = m23, erfinv = u23, lgamma = m23, digamma = m23,
  }
  for name, make in pairs(input) do
    S[name] = function() return H.one({ make() }, function(a) return a[name](a) end) end
    -- in place on a copy (a leaf that requires grad cannot be written)
    local ip = name .. "_"
    S[ip] = function() return H.one({ make() }, function(a) local c = a:clone(); return c[ip](c) end) end
  end
  S.logical_not_ = function()
    return H.one({ m23() }, function(a) local c = a:clone(); return c:logical_not_() + a end)
  end
  S.round_decimals = function()
    return H.one({ m23() }, function(a) return a:round({ decimals = 2 }) * a end)
  end
  S.round__decimals = function()
    return H.one({ m23() }, function(a) local c = a * 1; return c:round_({ decimals = 1 }) * a end)
  end
  -- clamp: no element on a bound; lo/hi select self, min and max (and
  -- max where max < min) somewhere
  local function lo23() return t({ { 0.0, -1.0, 0.9 }, { 1.0, 0.5, -1.0 } }) end
  local function hi3() return t({ 0.6, 2.0, 1.2 }) end
  S.clamp = function()
    return H.many({
      { { m23() }, function(a) return a:clamp(-0.5, 0.9) end },
      { { m23() }, function(a) return a:clamp(0) end },
      { { m23() }, function(a) return ember.clamp(a, nil, 0.6) end },
    })
  end
  S.clamp_ = function() return H.one({ m23() }, function(a) return a:clone():clamp_(-0.5, 0.9) end) end
  S.clamp_Tensor = function()
    return H.many({
      { { m23(), lo23(), hi3() }, function(a, lo, hi) return a:clamp(lo, hi) end },
      { { m23(), lo23() }, function(a, lo) return a:clamp(lo) end },
      { { m23(), hi3() }, function(a, hi) return a:clamp(nil, hi) end },
    })
  end
  S.clamp__Tensor = function()
    return H.one({ m23(), lo23(), hi3() }, function(a, lo, hi) return a:clone():clamp_(lo, hi) end)
  end
  S.clamp_min = function() return H.one({ m23() }, function(a) return a:clamp_min(0.1) end) end
  S.clamp_min_ = function() return H.one({ m23() }, function(a) return a:clone():clamp_min_(0.1) end) end
  S.clamp_min_Tensor = function()
    return H.one({ m23(), lo23() }, function(a, lo) return a:clamp_min(lo) end)
  end
  S.clamp_min__Tensor = function()
    return H.one({ m23(), lo23() }, function(a, lo) return a:clone():clamp_min_(lo) end)
  end
  S.clamp_max = function() return H.one({ m23() }, function(a) return a:clamp_max(0.1) end) end
  S.clamp_max_ = function() return H.one({ m23() }, function(a) return a:clone():clamp_max_(0.1) end) end
  S.clamp_max_Tensor = function()
    return H.one({ m23(), hi3() }, function(a, hi) return a:clamp_max(hi) end)
  end
  S.clamp_max__Tensor = function()
    return H.one({ m23(), hi3() }, function(a, hi) return a:clone():clamp_max_(hi) end)
  end
  -- nan_to_num of finite values passes the gradient (test_unary.lua: 0 elsewhere)
  S.nan_to_num = function()
    return H.one({ m23() }, function(a) return a:nan_to_num(0, 1, -1) end)
  end
  S.nan_to_num_ = function() return H.one({ m23() }, function(a) return a:clone():nan_to_num_(1) end) end
  S.polygamma = function()
    return H.many({
      { { m23() }, function(a) return ember.polygamma(1, a) end },
      { { p23() }, function(a) return a:polygamma(2) end },
    })
  end
  S.polygamma_ = function() return H.one({ H.p23() }, function(a) return a:clone():polygamma_(1) end) end
  -- the aliases (composites: their gradient is clamp's and trunc's)
  S.clip = function() return H.one({ m23() }, function(a) return a:clip(-0.5, 0.9) end) end
  S.clip_ = function() return H.one({ m23() }, function(a) return a:clone():clip_(nil, 0.9) end) end
  S.clip_Tensor = function()
    return H.one({ m23(), lo23(), hi3() }, function(a, lo, hi) return ember.clip(a, lo, hi) end)
  end
  S.clip__Tensor = function()
    return H.one({ m23(), lo23() }, function(a, lo) return a:clone():clip_(lo) end)
  end
  S.fix = function() return H.one({ m23() }, function(a) return a:fix() * a end) end
  S.fix_ = function() return H.one({ m23() }, function(a) return a:clone():fix_() * a end) end
  return S
end
