-- samples/loss2.lua -- gradcheck samples of the loss2 family (the binary
-- losses and their backward ops, kl_div, ctc_loss); see Note [Schema files]
-- in schema/ops.yaml and op_samples.lua for the format.
return function(H)
  local S = {}
  local t, m23, p23, v3, many = H.t, H.m23, H.p23, H.v3, H.many
  local F = ember.nn.functional
  -- probabilities away from 0 and 1 (bce's input), targets in [0, 1]
  local function q23() return t({ { 0.2, 0.7, 0.45 }, { 0.9, 0.35, 0.6 } }) end
  local function y23() return t({ { 0.0, 1.0, 0.3 }, { 0.8, 0.5, 1.0 } }) end
  local function w3() return t({ 0.5, 2.0, 1.5 }) end

  S.binary_cross_entropy = function()
    return many({
      { { q23(), y23() }, function(x, y) return F.binary_cross_entropy(x, y) end },
      { { q23(), y23() }, function(x, y) return F.binary_cross_entropy(x, y, w3(), "sum") end },
      { { q23() }, function(x) return F.binary_cross_entropy(x, y23(), w3():reshape(1, 3), { reduction = "none" }) end },
    })
  end
  S.binary_cross_entropy_backward = function()
    return many({
      { { t(1.3), q23(), y23() }, function(g, x, y) return ember.binary_cross_entropy_backward(g, x, y, w3(), "mean") end },
      { { m23(), q23(), y23() }, function(g, x, y) return ember.binary_cross_entropy_backward(g, x, y, nil, "none") end },
    })
  end
  S.binary_cross_entropy_with_logits = function()
    return many({
      { { m23(), y23() }, function(x, y) return F.binary_cross_entropy_with_logits(x, y) end },
      { { m23(), y23() }, function(x, y) return F.binary_cross_entropy_with_logits(x, y, w3(), "sum", p23():narrow(1, 1, 1)) end },
      { { m23() }, function(x) return F.binary_cross_entropy_with_logits(x * 3, y23(), nil, "none", w3()) end },
    })
  end
  S.binary_cross_entropy_with_logits_backward = function()
    return many({
      { { t(0.7), m23(), y23() }, function(g, x, y) return ember.binary_cross_entropy_with_logits_backward(g, x, y, w3(), v3():abs(), "mean") end },
      { { m23(), m23(), y23() }, function(g, x, y) return ember.binary_cross_entropy_with_logits_backward(g, x, y, nil, nil, "none") end },
    })
  end
  -- kl_div: input and target both differentiable (target > 0 away from
  -- xlogy's kink at 0; any target for log_target)
  S.kl_div = function()
    return many({
      { { m23(), q23() }, function(x, y) return F.kl_div(x, y) end },
      { { m23(), q23() }, function(x, y) return F.kl_div(x, y, "batchmean") end },
      { { m23(), v3() }, function(x, y) return F.kl_div(x, y, { reduction = "none", log_target = true }) end },
      { { m23(), m23() }, function(x, y) return F.kl_div(x * 0.5, y:exp(), "sum") end },
    })
  end
  -- ctc_loss: through log_softmax (Note [CTC]: PyTorch's gradient is the
  -- true one for normalised log_probs); gradgrad = false: PyTorch has no
  -- double backward for ctc_loss either (_ctc_loss_backward has no formula)
  local function x524()
    return (ember.arange(0, 40, { dtype = "float64" }) * 0.7):sin():reshape(5, 2, 4) * 2
  end
  local function ctc(inputs, fn) return { inputs = inputs, fn = fn, gradgrad = false } end
  S.ctc_loss = function()
    local tg = ember.tensor({ { 2, 3, 3 }, { 4, 2, 0 } })
    return {
      ctc({ x524() }, function(x) return F.ctc_loss(x:log_softmax(3), tg, { 5, 4 }, { 3, 2 }) end),
      ctc({ x524() }, function(x) return F.ctc_loss(x:log_softmax(3), ember.tensor({ 3, 1, 3, 4, 1 }), ember.tensor({ 4, 5 }), ember.tensor({ 2, 3 }), 2, "none") end),
      ctc({ x524():select(2, 1) }, function(x) return F.ctc_loss(x:log_softmax(2), ember.tensor({ 3, 3 }), { 5 }, { 2 }, { reduction = "sum" }) end),
    }
  end
  S.ctc_loss_Tensor = function()
    return {
      ctc({ x524() }, function(x) return F.ctc_loss(x:log_softmax(3), ember.tensor({ { 2, 4 }, { 3, 3 } }), ember.tensor({ 5, 4 }), ember.tensor({ 2, 2 }), { reduction = "sum" }) end),
      ctc({ x524():select(2, 2) }, function(x) return F.ctc_loss(x:log_softmax(2), ember.tensor({ 4, 2 }), ember.tensor(5), ember.tensor(2)) end),
    }
  end
  S._ctc_loss = function()
    return {
      ctc({ x524() }, function(x) return (ember._ctc_loss(x:log_softmax(3), ember.tensor({ { 2, 2 }, { 4, 3 } }), { 5, 3 }, { 2, 1 }, 1)) end),
    }
  end
  -- _ctc_loss_backward's formula is PyTorch's "not implemented" (it only
  -- records the node create_graph needs and fails when run): nothing to
  -- gradcheck; test_loss2.lua checks that it fails with its message
  S._ctc_loss_backward = function() return {} end
  return S
end
