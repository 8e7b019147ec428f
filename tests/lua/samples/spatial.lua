-- samples/spatial.lua -- gradcheck samples of the spatial family
-- (schema/ops/spatial.yaml), keyed by C name. See op_samples.lua for the format.
return function(H)
  local t, one, many = H.t, H.one, H.many
  local S = {}
  local F = ember.nn.functional
  -- deterministic float64 tensors of any shape, no ties
  local function seq(...)
    local shape = { ... }
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local v = {}
    for i = 1, n do v[i] = math.sin(i * 1.7) + 0.1 * i end
    return ember.tensor(v, { dtype = "float64" }):reshape(shape)
  end

  -- ---- padding ----
  S.pad = function()
    return many({
      { { seq(2, 3, 4) }, function(a) return F.pad(a, { 1, 2 }) end },
      { { seq(2, 3, 4) }, function(a) return F.pad(a, { -1, 2, 1, 0, 0, 1 }, "constant", 1.5) end },
      { { seq(2, 3, 4) }, function(a) return F.pad(a, { 2, -1 }, "reflect") end },
      { { seq(1, 2, 3, 4) }, function(a) return F.pad(a, { 1, 2, 2, 1 }, "reflect") end },
      { { seq(2, 3, 4) }, function(a) return F.pad(a, { 3, 1, 1, 2 }, "replicate") end },
      { { seq(1, 2, 2, 3, 3) }, function(a) return F.pad(a, { 1, 1, 0, 2, 1, 0 }, "replicate") end },
      { { seq(2, 2, 3, 4) }, function(a) return F.pad(a, { 2, -1, 1, 3 }, "circular") end },
      { { seq(1, 1, 2, 2, 3) }, function(a) return F.pad(a, { 1, 1, 1, 2, 1, 1 }, "circular") end },
    })
  end
  S.constant_pad_nd = function()
    return many({
      { { seq(2, 3) }, function(a) return ember.constant_pad_nd(a, { 1, 2, -1, 1 }, 2) end },
      { { seq(2, 3, 2) }, function(a) return ember.constant_pad_nd(a, { 0, 0, 1, 1, 1, 0 }) * a:sum() end },
    })
  end
  S.pad_mode = function()
    return many({
      { { seq(3, 5) }, function(a) return ember.pad_mode(a, { 3, 2 }, "reflect") end },
      { { seq(2, 3, 4) }, function(a) return ember.pad_mode(a, { 1, 4, 2, 0 }, "replicate") end },
    })
  end
  S.pad_circular = function()
    return many({
      { { seq(1, 2, 3) }, function(a) return ember.pad_circular(a, { 2, 3 }) end },
      { { seq(2, 1, 3, 4) }, function(a) return ember.pad_circular(a, { -1, 3, 2, -1 }) end },
    })
  end
  S.pad_circular_backward = function()
    return many({
      { { seq(1, 2, 5) }, function(g) return ember.pad_circular_backward(g, { 1, 2, 3 }, { 1, 1 }) end },
      { { seq(1, 1, 4, 6) }, function(g) return ember.pad_circular_backward(g, { 1, 1, 3, 4 }, { 2, 0, -1, 2 }) end },
    })
  end
  S.pad_mode_backward = function()
    return many({
      { { seq(3, 10), seq(3, 5) }, function(g, s) return ember.pad_mode_backward(g, s, { 3, 2 }, "reflect") end },
      { { seq(2, 6, 6) }, function(g) return ember.pad_mode_backward(g, seq(2, 3, 4), { 1, 1, 2, 1 }, "replicate") end },
    })
  end

  -- ---- interpolation ----
  S.interpolate = function()
    return many({
      { { seq(1, 2, 5) }, function(a) return F.interpolate(a, 8, nil, "linear") end },
      { { seq(1, 1, 3, 4) }, function(a) return F.interpolate(a, nil, { 1.5, 2.3 }, "bicubic") end },
      { { seq(1, 1, 3, 4) }, function(a) return F.interpolate(a, { 5, 7 }, nil, "bilinear", true) end },
      { { seq(2, 1, 3, 4) }, function(a) return F.interpolate(a, nil, 1.7, "nearest") end },
      { { seq(1, 1, 2, 3, 2) }, function(a) return F.interpolate(a, nil, { 1.5, 2, 0.7 }, "trilinear") end },
      { { seq(1, 2, 5) }, function(a) return F.interpolate(a, 7, nil, "nearest-exact") end },
    })
  end
  S.upsample = function()
    return one({ seq(1, 1, 2, 3) }, function(a) return F.upsample(a, nil, 2, "bilinear") end)
  end
  S.upsample_nearest = function()
    return one({ seq(1, 1, 2, 3) }, function(a) return F.upsample_nearest(a, { 3, 5 }) end)
  end
  S.upsample_bilinear = function()
    return one({ seq(1, 1, 2, 3) }, function(a) return F.upsample_bilinear(a, nil, 1.5) end)
  end
  S.upsample_nd = function()
    return many({
      { { seq(1, 2, 3, 4) }, function(a) return ember.upsample_nd(a, { 5, 6 }, "cubic", false, 1.7, 1.6) end },
      { { seq(1, 2, 3) }, function(a) return ember.upsample_nd(a, { 7 }, "linear", true) end },
      { { seq(1, 1, 2, 2, 3) }, function(a) return ember.upsample_nd(a, { 3, 3, 2 }, "nearest") end },
    })
  end
  S.upsample_nd_backward = function()
    return many({
      { { seq(1, 2, 5, 6) }, function(g) return ember.upsample_nd_backward(g, { 1, 2, 3, 4 }, { 5, 6 }, "cubic") end },
      { { seq(1, 2, 7) }, function(g) return ember.upsample_nd_backward(g, { 1, 2, 3 }, { 7 }, "linear", true) end },
      { { seq(1, 1, 5) }, function(g) return ember.upsample_nd_backward(g, { 1, 1, 3 }, { 5 }, "nearest_exact") end },
    })
  end

  -- ---- attention ----
  S.scaled_dot_product_attention = function()
    local mask = ember.tensor({ { true, false, true, true }, { true, true, false, true }, { false, true, true, true } })
    return many({
      { { seq(2, 3, 4), seq(2, 4, 4) * 0.5, seq(2, 4, 2) },
        function(q, k, v) return F.scaled_dot_product_attention(q, k, v) end },
      { { seq(1, 3, 2), seq(1, 4, 2), seq(1, 4, 3) },
        function(q, k, v) return F.scaled_dot_product_attention(q, k, v, mask, 0, false, { scale = 0.7 }) end },
      { { seq(3, 2), seq(3, 2), seq(3, 2), seq(3, 3) * 0.1 },
        function(q, k, v, m) return F.scaled_dot_product_attention(q, k, v, m) end },
      { { seq(2, 3, 2), seq(2, 3, 2), seq(2, 3, 2) },
        function(q, k, v) return F.scaled_dot_product_attention(q, k, v, nil, 0, true) end },
    })
  end
  return S
end
