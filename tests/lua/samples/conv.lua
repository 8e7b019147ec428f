-- samples/conv.lua -- gradcheck samples of the conv family (convolution and
-- its backward op, the conv/conv_transpose composites, unfold/fold); see
-- op_samples.lua for the format. Tiny float64 tensors: convolution is
-- bilinear, so any values do; gradgrad checks convolution_backward's own
-- formulas (and, for convolution_backward, the third order).
return function(H)
  local S = {}
  local ember = ember or require "ember"
  local F = ember.nn.functional
  local one, many = H.one, H.many
  -- a deterministic tensor of the given shape, values in (-1, 1)
  local seed = 0
  local function r(...)
    local shape, n = { ... }, 1
    for _, s in ipairs(shape) do n = n * s end
    seed = seed + 1
    return ember.arange(n, { dtype = "float64" }):mul(0.77):add(seed * 0.31):sin():reshape(shape)
  end
  local function flat(...)
    local l = {}
    for i, x in ipairs({ ... }) do l[i] = x:reshape(-1) end
    return ember.cat(l)
  end

  S.convolution = function()
    return many({
      { { r(2, 2, 4, 4), r(3, 2, 2, 2), r(3) }, function(x, w, b)
        return ember.convolution(x, w, b, { 1, 1 }, { 1, 0 }, { 1, 1 }, false, { 0, 0 }, 1) end },
      { { r(1, 4, 5), r(4, 2, 3) }, function(x, w)
        return ember.convolution(x, w, nil, { 2 }, { 1 }, { 2 }, false, { 0 }, 2) end },
      { { r(1, 2, 3), r(2, 2, 2), r(4) }, function(x, w, b)
        return ember.convolution(x, w, b, { 2 }, { 1 }, { 1 }, true, { 1 }, 2) end },
      { { r(1, 1, 3, 2, 3), r(2, 1, 2, 1, 2) }, function(x, w)
        return ember.convolution(x, w, nil, { 1, 1, 2 }, { 0, 1, 1 }, { 1, 1, 1 }, false, { 0, 0, 0 }, 1) end },
    })
  end
  S.convolution_backward = function()
    return many({
      { { r(1, 3, 3, 2), r(1, 2, 4, 3), r(3, 2, 2, 2) }, function(go, x, w)
        return flat(ember.convolution_backward(go, x, w, { 3 }, { 1, 1 }, { 0, 0 }, { 1, 1 }, false, { 0, 0 }, 1)) end },
      { { r(2, 4, 5), r(2, 2, 3), r(2, 2, 2) }, function(go, x, w)
        return flat(ember.convolution_backward(go, x, w, { 4 }, { 2 }, { 1 }, { 1 }, true, { 1 }, 2)) end },
      { { r(1, 2, 3), r(1, 2, 4), r(2, 2, 2) }, function(go, x, w)
        local gi = ember.convolution_backward(go, x, w, nil, { 1 }, { 0 }, { 1 }, false, { 0 }, 1, { 1, 0, 0 })
        return gi end },
    })
  end
  S.conv1d = function()
    return many({
      { { r(2, 2, 5), r(3, 2, 3), r(3) }, function(x, w, b) return F.conv1d(x, w, b, 2, 1) end },
      { { r(2, 5), r(2, 1, 2) }, function(x, w) return ember.conv1d(x, w, nil, 1, 0, 2, 2) end },
    })
  end
  S.conv1d_padding = function()
    return one({ r(1, 2, 5), r(2, 2, 2) }, function(x, w) return F.conv1d(x, w, nil, 1, "same") end)
  end
  S.conv2d = function()
    return many({
      { { r(2, 2, 4, 3), r(3, 2, 2, 2), r(3) }, function(x, w, b) return F.conv2d(x, w, b, { 2, 1 }, 1) end },
      { { r(2, 4, 4), r(4, 1, 3, 3) }, function(x, w) return F.conv2d(x, w, nil, 1, 1, 1, 2) end },
      { { r(1, 2, 3, 3), r(3, 2, 1, 1) }, function(x, w) return F.conv2d(x, w) end },
    })
  end
  S.conv2d_padding = function()
    return many({
      { { r(1, 1, 4, 3), r(2, 1, 2, 3) }, function(x, w) return F.conv2d(x, w, { padding = "same" }) end },
      { { r(1, 1, 4, 3), r(2, 1, 2, 3) }, function(x, w) return F.conv2d(x, w, nil, 1, "valid") end },
    })
  end
  S.conv3d = function()
    return one({ r(1, 1, 3, 3, 2), r(2, 1, 2, 2, 1), r(2) }, function(x, w, b) return F.conv3d(x, w, b, 1, { 1, 0, 0 }) end)
  end
  S.conv3d_padding = function()
    return one({ r(1, 3, 2, 3), r(1, 1, 2, 1, 2) }, function(x, w) return F.conv3d(x, w, nil, 1, "same") end)
  end
  S.conv_transpose1d = function()
    return many({
      { { r(1, 2, 3), r(2, 3, 2), r(3) }, function(x, w, b) return F.conv_transpose1d(x, w, b, 2, 1, 1) end },
      { { r(4, 3), r(4, 1, 3) }, function(x, w) return F.conv_transpose1d(x, w, nil, 1, 0, 0, 2, 2) end },
    })
  end
  S.conv_transpose2d = function()
    return many({
      { { r(1, 2, 2, 3), r(2, 2, 3, 2), r(2) }, function(x, w, b) return F.conv_transpose2d(x, w, b, 2, 1, { 1, 0 }) end },
      { { r(2, 2, 2), r(2, 1, 2, 2) }, function(x, w) return F.conv_transpose2d(x, w, nil, 1, 0, 0, 2) end },
    })
  end
  S.conv_transpose3d = function()
    return one({ r(1, 1, 2, 2, 2), r(1, 2, 2, 1, 2) }, function(x, w) return F.conv_transpose3d(x, w, nil, { 1, 2, 1 }) end)
  end
  S.functional_unfold = function()
    return many({
      { { r(2, 2, 3, 4) }, function(x) return F.unfold(x, 2) end },
      { { r(1, 3, 3) }, function(x) return F.unfold(x, { 2, 3 }, 2, 1, { 2, 1 }) end },
    })
  end
  S.fold = function()
    return many({
      { { r(1, 8, 6) }, function(x) return F.fold(x, { 3, 4 }, 2) end },
      { { r(4, 9) }, function(x) return F.fold(x, 4, { 2, 1 }, 1, 1, 2) end },
    })
  end
  return S
end
