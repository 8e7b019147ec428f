-- samples/activation.lua -- gradcheck samples of the activation family
-- (schema/ops/activation.yaml); see op_samples.lua. m23's elements sit away
-- from every kink used here (0, +-1, +-3, +-0.6, 0.1).
return function(H)
  local S = {}
  local t, m23 = H.t, H.m23
  local F = ember.nn.functional
  -- a wider spread: both sides of +-3 (hardsigmoid, hardswish) and large |x|
  local function w23() return t({ { -4.1, -2.2, 0.7 }, { 3.6, -0.4, 1.9 } }) end
  local function g23() return t({ { 0.3, -0.8, 1.1 }, { -0.5, 0.9, 0.6 } }) end
  local function unary(name, make, opts)
    return function()
      return H.one({ make() }, function(a)
        if opts then return F[name](a, table.unpack(opts)) end
        return F[name](a)
      end)
    end
  end
  -- out-of-place forms
  S.leaky_relu = function()
    return H.many({
      { { m23() }, function(a) return F.leaky_relu(a) end },
      { { m23() }, function(a) return F.leaky_relu(a, 0.2) end },
      { { m23() }, function(a) return F.leaky_relu(a, -0.3) end },
    })
  end
  S.elu = function()
    return H.many({
      { { m23() }, function(a) return F.elu(a) end },
      { { w23() }, function(a) return F.elu(a, 1.3) end },
    })
  end
  S.selu = unary("selu", w23)
  S.celu = function()
    return H.many({
      { { m23() }, function(a) return F.celu(a) end },
      { { w23() }, function(a) return ember.celu(a, 0.7) end },
    })
  end
  S.gelu = function()
    return H.many({
      { { w23() }, function(a) return F.gelu(a) end },
      { { w23() }, function(a) return F.gelu(a, { approximate = "tanh" }) end },
    })
  end
  S.silu = unary("silu", w23)
  S.mish = unary("mish", w23)
  S.softplus = function()
    return H.many({
      { { w23() }, function(a) return F.softplus(a) end },
      { { m23() }, function(a) return F.softplus(a, 2, 1.5) end },
    })
  end
  S.hardtanh = function()
    return H.many({
      { { m23() }, function(a) return F.hardtanh(a) end },
      { { m23() }, function(a) return F.hardtanh(a, -0.6, 0.9) end },
    })
  end
  S.hardsigmoid = unary("hardsigmoid", w23)
  S.hardswish = unary("hardswish", w23)
  S.logsigmoid = unary("logsigmoid", w23)
  S.softshrink = unary("softshrink", m23, { 0.6 })
  S.hardshrink = function()
    return H.many({
      { { m23() }, function(a) return F.hardshrink(a, 0.6) end },
      { { m23() }, function(a) return a:hardshrink(0.2) end },
    })
  end
  S.threshold = function()
    return H.one({ m23() }, function(a) return ember.threshold(a, 0.1, 20) end)
  end
  -- in-place forms, on a copy (a leaf that requires grad cannot be written)
  S.relu_ = function() return H.one({ m23() }, function(a) return a:clone():relu_() end) end
  S.leaky_relu_ = function()
    return H.one({ m23() }, function(a) return F.leaky_relu_(a:clone(), 0.2) end)
  end
  S.elu_ = function() return H.one({ w23() }, function(a) return F.elu_(a:clone(), 1.3) end) end
  S.selu_ = function() return H.one({ w23() }, function(a) return ember.selu_(a:clone()) end) end
  S.celu_ = function() return H.one({ w23() }, function(a) return F.celu_(a:clone(), 0.7) end) end
  S.hardtanh_ = function()
    return H.one({ m23() }, function(a) return F.hardtanh_(a:clone(), -0.6, 0.9) end)
  end
  S.threshold_ = function()
    return H.one({ m23() }, function(a) return ember.threshold_(a:clone(), 0.1, 20) end)
  end
  -- backward ops (both inputs differentiable; their own double backward)
  S.leaky_relu_backward = function()
    return H.many({
      { { g23(), m23() }, function(g, x) return ember.leaky_relu_backward(g, x, 0.2, false) end },
      { { g23(), m23() }, function(g, x) return ember.leaky_relu_backward(g, x, 0.2, true) end },
    })
  end
  S.elu_backward = function()
    return H.many({
      { { g23(), w23() }, function(g, x) return ember.elu_backward(g, 1.3, 1.1, 0.8, false, x) end },
      { { g23(), m23() }, function(g, x) return ember.elu_backward(g, 1.3, 1.1, 0.8, true, x) end },
    })
  end
  S.gelu_backward = function()
    return H.many({
      { { g23(), w23() }, function(g, x) return ember.gelu_backward(g, x) end },
      { { g23(), w23() }, function(g, x) return ember.gelu_backward(g, x, { approximate = "tanh" }) end },
    })
  end
  S.silu_backward = function()
    return H.one({ g23(), w23() }, function(g, x) return ember.silu_backward(g, x) end)
  end
  S.mish_backward = function()
    return H.one({ g23(), w23() }, function(g, x) return ember.mish_backward(g, x) end)
  end
  S.softplus_backward = function()
    return H.one({ g23(), m23() }, function(g, x) return ember.softplus_backward(g, x, 2, 1.5) end)
  end
  S.hardtanh_backward = function()
    return H.one({ g23(), m23() }, function(g, x) return ember.hardtanh_backward(g, x, -1, 1) end)
  end
  S.hardsigmoid_backward = function()
    return H.one({ g23(), w23() }, function(g, x) return ember.hardsigmoid_backward(g, x) end)
  end
  S.hardswish_backward = function()
    return H.one({ g23(), w23() }, function(g, x) return ember.hardswish_backward(g, x) end)
  end
  S.log_sigmoid_backward = function()
    return H.one({ g23(), w23() }, function(g, x) return ember.log_sigmoid_backward(g, x) end)
  end
  S.softshrink_backward = function()
    return H.one({ g23(), m23() }, function(g, x) return ember.softshrink_backward(g, x, 0.6) end)
  end
  S.hardshrink_backward = function()
    return H.one({ g23(), m23() }, function(g, x) return ember.hardshrink_backward(g, x, 0.6) end)
  end
  -- composites (gradcheck runs over them too)
  S.relu6 = function()
    return H.one({ t({ { 0.5, -1.2, 6.8 }, { 1.5, 5.3, -0.7 } }) }, function(a) return F.relu6(a) end)
  end
  S.prelu = function()
    local x4 = t({ { { { 0.5, -1.2 } }, { { -0.8, 1.5 } }, { { 0.3, -0.7 } } } }) -- (1, 3, 1, 2)
    return H.many({
      { { m23(), t({ 0.25 }) }, function(a, w) return F.prelu(a, w) end },
      { { m23(), t({ 0.2, -0.4, 0.6 }) }, function(a, w) return a:prelu(w) end },
      { { x4, t({ 0.2, -0.4, 0.6 }) }, function(a, w) return ember.prelu(a, w) end },
    })
  end
  S.glu = function()
    return H.many({
      { { w23() }, function(a) return F.glu(a, 1) end },
      { { t({ { 0.5, -1.2, 0.8, 1.5 }, { 0.3, -0.7, 2.1, -0.4 } }) }, function(a) return F.glu(a) end },
    })
  end
  -- dropout: reseeded inside fn, so every evaluation draws the same mask
  local function seeded(f) return function(...) ember.manual_seed(5); return f(...) end end
  S.native_dropout = function()
    return H.one({ w23() }, seeded(function(a) local o = ember.native_dropout(a, 0.4, true); return o end))
  end
  S.native_dropout_backward = function()
    local mask = ember.tensor({ { true, false, true }, { false, true, true } })
    return H.one({ g23() }, function(g) return ember.native_dropout_backward(g, mask, 2.5) end)
  end
  S.dropout = function()
    return H.many({
      { { w23() }, seeded(function(a) return F.dropout(a, 0.4) end) },
      { { w23() }, seeded(function(a) return F.dropout(a * 1, 0.3, true, true) end) },
      { { w23() }, function(a) return F.dropout(a, 0.4, false) end },
    })
  end
  local function x4() return t({ { { 0.5, -1.2 }, { -0.8, 1.5 }, { 0.3, -0.7 }, { 1.1, 0.2 } } }) end
  S.dropout1d = function() return H.one({ x4() }, seeded(function(a) return F.dropout1d(a, 0.5) end)) end
  S.dropout2d = function() return H.one({ x4() }, seeded(function(a) return F.dropout2d(a, 0.5) end)) end
  S.dropout3d = function()
    return H.one({ x4() }, seeded(function(a) return F.dropout3d(a:reshape(1, 4, 1, 2), 0.5) end))
  end
  S.alpha_dropout = function()
    return H.one({ w23() }, seeded(function(a) return F.alpha_dropout(a, 0.3, true) end))
  end
  S.feature_alpha_dropout = function()
    return H.one({ x4() }, seeded(function(a) return F.feature_alpha_dropout(a, 0.3, true) end))
  end
  S.softsign = unary("softsign", w23)
  S.tanhshrink = unary("tanhshrink", w23)
  return S
end
