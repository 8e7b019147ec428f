-- samples/loss.lua -- gradcheck samples of the loss family (softmax's
-- backward ops, softmin, the losses); see Note [Schema files] in
-- schema/ops.yaml. softmax and log_softmax keep their samples in
-- op_samples.lua; test_loss.lua gradchecks their strided (inner dim) path.
return function(H)
  local S = {}
  local t, m23, p23, v3, one, many = H.t, H.m23, H.p23, H.v3, H.one, H.many
  local function m234()
    return t({ { { 0.5, -1.2, 0.8, 0.1 }, { 1.5, 0.3, -0.7, 2.0 }, { -0.4, 0.9, 1.1, -1.6 } },
               { { 0.2, 0.7, -0.3, 1.4 }, { -1.1, 0.6, 0.05, -0.2 }, { 0.9, -0.5, 1.3, 0.4 } } })
  end
  local F = ember.nn.functional

  S.softmin = function()
    return many({
      { { m23() }, function(a) return F.softmin(a, 2) end },
      { { m234() }, function(a) return F.softmin(a, 2, { dtype = "float64" }) end },
    })
  end
  -- output is any tensor here: the backward ops are polynomials in it
  -- (exp of it for log_softmax), so finite differences follow them anywhere
  S._softmax_backward_data = function()
    return many({
      { { m23(), p23() }, function(g, o) return ember._softmax_backward_data(g, o * 0.3, 2, "float64") end },
      { { m234(), m234() }, function(g, o) return ember._softmax_backward_data(g, o:softmax(1), 1, "float64") end },
      { { m234(), m234() }, function(g, o) return ember._softmax_backward_data(g * g, o:softmax(2), -2, "float64") end },
    })
  end
  S._log_softmax_backward_data = function()
    return many({
      { { m23(), m23() }, function(g, o) return ember._log_softmax_backward_data(g, o, 2, "float64") end },
      { { m234(), m234() }, function(g, o) return ember._log_softmax_backward_data(g, o:log_softmax(2), 2, "float64") end },
      { { v3(), v3() }, function(g, o) return ember._log_softmax_backward_data(g, o:log_softmax(1), 1, "float64") end },
    })
  end
  -- class losses: targets are 1-based (-100 is ignored by default)
  local function w3() return t({ 0.5, 2.0, 1.5 }) end
  local function tgt() return ember.tensor({ 3, -100, 1 }) end
  local function m33() return t({ { 0.5, -1.2, 0.8 }, { 1.5, 0.3, -0.7 }, { -0.4, 0.9, 1.1 } }) end
  S.cross_entropy = function()
    return many({
      { { m33() }, function(a) return F.cross_entropy(a, tgt()) end },
      { { m33() }, function(a) return F.cross_entropy(a, tgt(), w3(), { reduction = "sum", label_smoothing = 0.3 }) end },
      { { m33() }, function(a) return F.cross_entropy(a, tgt(), w3(), { reduction = "none", label_smoothing = 0.1 }) end },
      { { m33() }, function(a) return F.cross_entropy(a, ember.tensor({ 3, 2, 1 }), nil, 2, "mean", 0.2) end },
      { { m234() }, function(a) return F.cross_entropy(a, ember.tensor({ { 1, 2, 3, -100 }, { 3, 3, 1, 2 } }), w3()) end },
      { { v3() }, function(a) return F.cross_entropy(a, ember.tensor(2)) end },
      -- probability targets: both arguments differentiable
      { { m33(), p23():reshape(2, 3):softmax(2) }, function(a, q) return F.cross_entropy(a:narrow(1, 1, 2), q, w3(), { label_smoothing = 0.2 }) end },
      { { m23(), m23() }, function(a, q) return F.cross_entropy(a, q:softmax(2), { reduction = "none" }) end },
    })
  end
  S.nll_loss = function()
    return many({
      { { m33() }, function(a) return F.nll_loss(a, tgt()) end },
      { { m33() }, function(a) return F.nll_loss(a * a, tgt(), w3(), { reduction = "sum" }) end },
      { { m234() }, function(a) return F.nll_loss(a:log_softmax(2), ember.tensor({ { 1, 2, 3, -100 }, { 3, 3, 1, 2 } }), w3(), -100, "none") end },
    })
  end
  S.nll_loss_backward = function()
    return many({
      { { t(1.5), m33() }, function(g, a) return ember.nll_loss_backward(g, a, tgt(), w3(), -100, "mean") end },
      { { v3(), m33() }, function(g, a) return ember.nll_loss_backward(g * g, a, tgt(), nil, -100, "none") end },
    })
  end
  -- regression losses: input and target broadcast; no |d| at a kink (beta, delta)
  local function pw(name)
    return function()
      return many({
        { { m23(), v3() }, function(a, b) return F[name](a, b) end },
        { { m23(), m23() }, function(a, b) return F[name](a, b * 0.5, "sum") end },
        { { m23(), v3() }, function(a, b) return F[name](a * a, b, { reduction = "none" }) end },
      })
    end
  end
  S.mse_loss = pw("mse_loss")
  S.l1_loss = pw("l1_loss")
  S.smooth_l1_loss = function()
    return many({
      { { m23(), v3() }, function(a, b) return F.smooth_l1_loss(a, b) end },
      { { m23(), v3() }, function(a, b) return F.smooth_l1_loss(a, b, "sum", 0.45) end },
      { { m23(), v3() }, function(a, b) return F.smooth_l1_loss(a * a, b, { reduction = "none", beta = 2.0 }) end },
      { { m23(), v3() }, function(a, b) return F.smooth_l1_loss(a, b, { beta = 0.0 }) end },
    })
  end
  S.huber_loss = function()
    return many({
      { { m23(), v3() }, function(a, b) return F.huber_loss(a, b) end },
      { { m23(), v3() }, function(a, b) return F.huber_loss(a, b, "sum", 0.45) end },
      { { m23(), v3() }, function(a, b) return F.huber_loss(a * a, b, { reduction = "none", delta = 2.0 }) end },
    })
  end
  local function pwb(name, p)
    local function call(g, a, b, red)
      if p then return ember[name](g, a, b, red, p) end
      return ember[name](g, a, b, red)
    end
    return function()
      return many({
        { { t(1.3), m23(), v3() }, function(g, a, b) return call(g, a, b, "mean") end },
        { { m23(), m23(), v3() }, function(g, a, b) return call(g, a, b * 0.5, "none") end },
      })
    end
  end
  S.mse_loss_backward = pwb("mse_loss_backward")
  S.smooth_l1_loss_backward = pwb("smooth_l1_loss_backward", 0.45)
  S.huber_loss_backward = pwb("huber_loss_backward", 0.45)
  return S
end
