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
  return S
end
