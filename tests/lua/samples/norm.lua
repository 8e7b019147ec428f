-- samples/norm.lua -- gradcheck samples of the normalisation family.
-- Groups have well-spread values (a group of equal values has rstd =
-- 1/sqrt(eps) and derivatives of order eps^-1.5, too steep for finite
-- differences).
return function(H)
  local S = {}
  local F = ember.nn.functional
  local t = H.t
  local function x234()
    return t({ { { 0.5, -1.2, 0.8, 2.0 }, { 1.5, 0.3, -0.7, 0.1 }, { 3.0, 1.0, 4.0, 1.5 } },
      { { -0.4, 0.9, 1.7, -2.2 }, { 0.2, -0.6, 1.1, 0.75 }, { -1.3, 2.4, 0.35, -0.8 } } })
  end
  local function w4() return t({ 1.5, 0.5, -1.0, 2.0 }) end
  local function b4() return t({ 0.1, 0.2, -0.3, 0.4 }) end
  local function w34() return t({ { 1.2, -0.5, 0.7, 1.1 }, { 0.9, 1.3, -0.8, 0.6 }, { 0.4, 1.0, 1.6, -1.4 } }) end

  S.layer_norm = function()
    return H.many({
      { { x234(), w4(), b4() }, function(x, w, b) return F.layer_norm(x, { 4 }, w, b) end },
      { { x234() }, function(x) return F.layer_norm(x, 4, nil, nil, 1e-3) end },
      { { x234(), w34() }, function(x, w) return F.layer_norm(x, { 3, 4 }, w) end },
      { { x234(), b4() }, function(x, b) return F.layer_norm(x:transpose(1, 2), { 4 }, nil, b) end },
    })
  end
  S.native_layer_norm = function()
    return H.many({
      { { x234(), w4(), b4() }, function(x, w, b) return (ember.native_layer_norm(x, { 4 }, w, b, 1e-5)) end },
      { { x234(), w34() }, function(x, w) return (ember.native_layer_norm(x, { 3, 4 }, w, nil, 0.1)) end },
    })
  end
  -- the backward op itself (its double-backward formulas): the statistics
  -- come from the forward kernel, without history. Its formulas, like
  -- torch's layer_norm_double_backward, use the saved mean and rstd as they
  -- are, so they are not differentiated again through them: the third
  -- derivative (gradgrad of this op) is not checked; layer_norm's own
  -- gradgradcheck covers the second.
  S.native_layer_norm_backward = function()
    local function run(go, x, w, ns, which)
      local _, m, r = ember.native_layer_norm(x:detach(), ns, nil, nil, 1e-5)
      local gi, gw, gb = ember.native_layer_norm_backward(go, x, ns, m, r, w, w and w:detach() or nil)
      if which == 1 then return gi elseif which == 2 then return gw else return gb end
    end
    local go = function() return x234() * 0.7 - 0.2 end
    local r = H.many({
      { { go(), x234(), w4() }, function(g, x, w) return run(g, x, w, { 4 }, 1) end },
      { { go(), x234(), w4() }, function(g, x, w) return run(g, x, w, { 4 }, 2) end },
      { { go(), x234(), w4() }, function(g, x, w) return run(g, x, w, { 4 }, 3) end },
      { { go(), x234() }, function(g, x) return run(g, x, nil, { 3, 4 }, 1) end },
      { { go(), x234(), w34() }, function(g, x, w)
        local gi, gw, gb = ember.native_layer_norm_backward(g, x, { 3, 4 },
          select(2, ember.native_layer_norm(x:detach(), { 3, 4 }, nil, nil, 1e-5)),
          select(3, ember.native_layer_norm(x:detach(), { 3, 4 }, nil, nil, 1e-5)), w, w:detach())
        return ember.cat({ gi:reshape(-1), gw:reshape(-1) * 0.5, gb:reshape(-1) })
      end },
    })
    for _, smp in ipairs(r) do smp.gradgrad = false end
    return r
  end
  -- batch_norm: (N, C, L) = (3, 2, 3)
  local function xb()
    return t({ { { 0.5, -1.2, 0.8 }, { 2.0, 1.5, 0.3 } }, { { -0.7, 0.1, 3.0 }, { 1.0, 4.0, 1.5 } },
      { { 0.2, 0.9, -1.1 }, { 0.4, -0.3, 2.2 } } })
  end
  local function w2() return t({ 1.5, -0.5 }) end
  local function b2() return t({ 0.1, 0.2 }) end
  local function rm() return t({ 0.3, -0.2 }) end
  local function rv() return t({ 1.2, 0.7 }) end
  S.batch_norm = function()
    return H.many({
      { { xb(), w2(), b2() }, function(x, w, b) return F.batch_norm(x, nil, nil, w, b, true) end },
      { { xb() }, function(x) return F.batch_norm(x, rm(), rv(), nil, nil, true, 0.3, 1e-3) end },
      { { xb(), w2(), b2() }, function(x, w, b) return F.batch_norm(x, rm(), rv(), w, b) end },
      { { xb(), w2() }, function(x, w) return F.batch_norm(x:reshape(3, 6):t():reshape(6, 3):t(), nil, nil,
        w:repeat_interleave(3), nil, true) end },
      { { xb(), w2() }, function(x, w) return F.batch_norm(x:reshape(1, 3, 2, 3):transpose(2, 3), nil, nil, w, nil, true) end },
    })
  end
  S.native_batch_norm = function()
    return H.many({
      { { xb(), w2(), b2() }, function(x, w, b) return (ember.native_batch_norm(x, w, b, nil, nil, true, 0.1, 1e-5)) end },
      { { xb(), w2(), b2() }, function(x, w, b) return (ember.native_batch_norm(x, w, b, rm(), rv(), false, 0.1, 1e-5)) end },
    })
  end
  -- as native_layer_norm_backward: the saved statistics are used as they
  -- are (torch's batchnorm_double_backward too), so no third derivative
  S.native_batch_norm_backward = function()
    local function stats(x) local _, m, i = ember.native_batch_norm(x:detach(), nil, nil, nil, nil, true, 0.1, 1e-5); return m, i end
    local go = function() return xb() * 0.6 + 0.3 end
    local r = H.many({
      { { go(), xb(), w2() }, function(g, x, w) local m, i = stats(x)
        return (ember.native_batch_norm_backward(g, x, w, nil, nil, m, i, true, 1e-5)) end },
      { { go(), xb(), w2() }, function(g, x, w) local m, i = stats(x)
        local _, gw, gb = ember.native_batch_norm_backward(g, x, w, nil, nil, m, i, true, 1e-5)
        return gw * gb end },
      { { go(), xb() }, function(g, x) local m, i = stats(x)
        return (ember.native_batch_norm_backward(g, x, nil, nil, nil, m, i, true, 1e-5)) end },
      { { go(), xb(), w2() }, function(g, x, w)
        local gi, gw = ember.native_batch_norm_backward(g, x, w, rm(), rv(), nil, nil, false, 1e-5)
        return ember.cat({ gi:reshape(-1), gw }) end },
    })
    for _, smp in ipairs(r) do smp.gradgrad = false end
    return r
  end
  -- group_norm: (N, C, L) = (2, 4, 3)
  local function xg()
    return t({ { { 0.5, -1.2, 0.8 }, { 2.0, 1.5, 0.3 }, { -0.7, 0.1, 3.0 }, { 1.0, 4.0, 1.5 } },
      { { 0.2, 0.9, -1.1 }, { 0.4, -0.3, 2.2 }, { 1.3, -0.6, 0.45 }, { 0.8, -2.1, 0.05 } } })
  end
  local function c4() return t({ 1.5, -0.5, 0.8, 1.2 }) end
  S.group_norm = function()
    return H.many({
      { { xg(), c4(), b4() }, function(x, w, b) return F.group_norm(x, 2, w, b) end },
      { { xg() }, function(x) return F.group_norm(x, 4, nil, nil, 1e-3) end },
      { { xg(), c4() }, function(x, w) return F.group_norm(x:transpose(2, 3):reshape(2, 4, 3), 1, w) end },
    })
  end
  S.native_group_norm = function()
    return H.many({
      { { xg(), c4(), b4() }, function(x, w, b) return (ember.native_group_norm(x, w, b, 2, 1e-5)) end },
    })
  end
  S.native_group_norm_backward = function()
    local function run(g, x, w, which)
      local _, m, r = ember.native_group_norm(x:detach(), nil, nil, 2, 1e-5)
      return select(which, ember.native_group_norm_backward(g, x, m, r, w, 2))
    end
    local r = H.many({
      { { xg() * 0.6 + 0.2, xg(), c4() }, function(g, x, w) return run(g, x, w, 1) end },
      { { xg() * 0.6 + 0.2, xg(), c4() }, function(g, x, w) return run(g, x, w, 2) end },
      { { xg() * 0.6 + 0.2, xg() }, function(g, x) return run(g, x, nil, 1) end },
    })
    for _, smp in ipairs(r) do smp.gradgrad = false end
    return r
  end
  S.instance_norm = function()
    return H.many({
      { { xg(), c4(), b4() }, function(x, w, b) return F.instance_norm(x, nil, nil, w, b) end },
      { { xg() }, function(x) return F.instance_norm(x, t({ 0.1, 0.2, 0.3, 0.4 }), t({ 1, 2, 3, 4 })) end },
      { { xg(), c4() }, function(x, w) return F.instance_norm(x, t({ 0.1, 0.2, 0.3, 0.4 }), t({ 1, 2, 3, 4 }), w, nil,
        false) end },
    })
  end
  S.rms_norm = function()
    return H.many({
      { { x234(), w4() }, function(x, w) return F.rms_norm(x, { 4 }, w) end },
      { { x234() }, function(x) return F.rms_norm(x, { 3, 4 }, nil, 1e-3) end },
    })
  end
  S.local_response_norm = function()
    return H.many({
      { { xg() }, function(x) return F.local_response_norm(x, 3, 0.5, 0.75, 1.0) end },
      { { xg() }, function(x) return F.local_response_norm(x:reshape(2, 4, 3, 1), 2) end },
    })
  end
  return S
end
