-- samples/pool.lua -- gradcheck samples of the pool family (schema/ops/pool.yaml),
-- keyed by C name. Max pooling's inputs hold distinct values (no ties inside a
-- window: the maximum's position would be a kink), overlapping windows check
-- that the backward accumulates.
return function(H)
  local t, one, many = H.t, H.one, H.many
  local S = {}
  local F = ember.nn.functional

  -- A float64 tensor of the given shape with distinct values in [-5, 5).
  local function distinct(...)
    local shape = { ... }
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local v = {}
    for k = 1, n do v[k] = ((k * 389) % 1009) / 100 - 5 end
    return t(v):reshape(shape)
  end

  -- ---- max pooling ----
  S.max_pool2d_with_indices = function()
    return many({
      { { distinct(2, 2, 5, 5) }, function(a) local v = F.max_pool2d_with_indices(a, 2); return v end },
      { { distinct(2, 5, 6) }, function(a)
          local v = F.max_pool2d_with_indices(a, { 3, 2 }, 1, { 1, 0 }, 1, true); return v end },
      { { distinct(1, 1, 7, 7) }, function(a)
          local v = F.max_pool2d_with_indices(a, 2, { 2, 3 }, 1, 2, true); return v * v end },
    })
  end
  S.max_pool3d_with_indices = function()
    return many({
      { { distinct(1, 2, 4, 4, 4) }, function(a) local v = F.max_pool3d_with_indices(a, 2); return v end },
      { { distinct(2, 3, 4, 5) }, function(a)
          local v = F.max_pool3d_with_indices(a, { 2, 3, 2 }, 1, { 1, 1, 0 }, 1, true); return v end },
    })
  end
  S.max_pool1d_with_indices = function()
    return one({ distinct(2, 3, 7) }, function(a)
      local v = F.max_pool1d_with_indices(a, 3, 2, 1, 1, true); return v end)
  end
  S.max_pool1d = function()
    return many({
      { { distinct(2, 9) }, function(a) return F.max_pool1d(a, 2) end },
      { { distinct(1, 2, 9) }, function(a) return F.max_pool1d(a, 3, 1, 1, 2) end },
    })
  end
  S.max_pool2d = function()
    return many({
      { { distinct(1, 2, 4, 6) }, function(a) return F.max_pool2d(a, 2) end },
      { { distinct(2, 5, 5) }, function(a) return F.max_pool2d(a, 3, 2, 1, { ceil_mode = true }) end },
    })
  end
  S.max_pool3d = function()
    return one({ distinct(1, 1, 3, 4, 5) }, function(a) return F.max_pool3d(a, { 2, 2, 3 }, 1) end)
  end
  -- the backward ops: linear in grad_output; their derivative gathers by the indices
  local function backward_sample(nsp, x, k, s, p, d, ceil)
    local _, ix = (nsp == 2 and F.max_pool2d_with_indices or F.max_pool3d_with_indices)(x, k, s, p, d, ceil)
    local g = distinct(table.unpack(ix.shape)) / 3
    local bw = nsp == 2 and ember.max_pool2d_with_indices_backward or ember.max_pool3d_with_indices_backward
    return { { g }, function(go) return bw(go * go, x, k, s, p, d, ceil, ix) end }
  end
  S.max_pool2d_with_indices_backward = function()
    return many({
      backward_sample(2, distinct(2, 2, 5, 5), 2, 2, 0, 1, false),
      backward_sample(2, distinct(2, 5, 6), 3, 1, 1, 1, true),
    })
  end
  S.max_pool3d_with_indices_backward = function()
    return many({ backward_sample(3, distinct(1, 2, 3, 4, 4), 2, 1, 1, 1, false) })
  end

  -- ---- average pooling ----
  S.avg_pool1d = function()
    return many({
      { { distinct(2, 3, 7) }, function(a) return F.avg_pool1d(a, 3, 2, 1, true, false) end },
      { { distinct(2, 5) }, function(a) return F.avg_pool1d(a, 2) end },
    })
  end
  S.avg_pool2d = function()
    return many({
      { { distinct(2, 2, 5, 5) }, function(a) return F.avg_pool2d(a, 2) end },
      { { distinct(2, 5, 6) }, function(a) return F.avg_pool2d(a, { 3, 2 }, 2, 1, true, false) end },
      { { distinct(1, 1, 4, 5) }, function(a) return F.avg_pool2d(a, 3, 1, 1, { divisor_override = 4 }) end },
    })
  end
  S.avg_pool3d = function()
    return many({
      { { distinct(1, 2, 4, 4, 4) }, function(a) return F.avg_pool3d(a, 2, 1, 1, true) end },
      { { distinct(2, 3, 4, 5) }, function(a) return F.avg_pool3d(a, { 2, 3, 2 }, 2, { 1, 1, 0 }, false, false) end },
    })
  end
  local function avg_backward_sample(nsp, x, k, s, p, ceil, cip, div)
    local pool = nsp == 2 and F.avg_pool2d or F.avg_pool3d
    local y = pool(x, k, s, p, ceil, cip, div)
    local g = distinct(table.unpack(y.shape)) / 3
    local bw = nsp == 2 and ember.avg_pool2d_backward or ember.avg_pool3d_backward
    return { { g }, function(go) return bw(go * go, x, k, s, p, ceil, cip, div) end }
  end
  S.avg_pool2d_backward = function()
    return many({
      avg_backward_sample(2, distinct(2, 2, 5, 5), 3, 2, 1, true, false, nil),
      avg_backward_sample(2, distinct(2, 4, 6), 2, 1, 0, false, true, 3),
    })
  end
  S.avg_pool3d_backward = function()
    return many({ avg_backward_sample(3, distinct(1, 2, 3, 4, 4), 2, 1, 1, true, true, nil) })
  end

  -- ---- adaptive pooling ----
  S.adaptive_avg_pool1d = function()
    return one({ distinct(2, 3, 7) }, function(a) return F.adaptive_avg_pool1d(a, 3) end)
  end
  S.adaptive_avg_pool2d = function()
    return many({
      { { distinct(2, 2, 5, 7) }, function(a) return F.adaptive_avg_pool2d(a, { 3, 4 }) end },
      { { distinct(2, 4, 4) }, function(a) return F.adaptive_avg_pool2d(a, 1) * a:sum() end },
    })
  end
  S.adaptive_avg_pool3d = function()
    return one({ distinct(1, 2, 3, 4, 5) }, function(a) return F.adaptive_avg_pool3d(a, { 2, 3, 2 }) end)
  end
  -- the kernels behind them (all-ones output sizes are means)
  S._adaptive_avg_pool2d = function()
    return many({
      { { distinct(2, 2, 5, 7) }, function(a) return ember._adaptive_avg_pool2d(a, { 3, 4 }) end },
      { { distinct(2, 4, 4) }, function(a) return ember._adaptive_avg_pool2d(a, { 1, 1 }) * a:sum() end },
    })
  end
  S._adaptive_avg_pool3d = function()
    return one({ distinct(1, 2, 3, 4, 5) }, function(a) return ember._adaptive_avg_pool3d(a, { 1, 3, 2 }) end)
  end
  S.adaptive_max_pool1d = function()
    return one({ distinct(2, 3, 7) }, function(a) return F.adaptive_max_pool1d(a, 3) end)
  end
  S.adaptive_max_pool2d = function()
    return one({ distinct(2, 2, 5, 7) }, function(a) return F.adaptive_max_pool2d(a, { 3, 4 }) end)
  end
  S.adaptive_max_pool2d_with_indices = function()
    return many({
      { { distinct(2, 2, 5, 7) }, function(a) local v = F.adaptive_max_pool2d_with_indices(a, { 3, 4 }); return v end },
      { { distinct(3, 4, 5) }, function(a) local v = F.adaptive_max_pool2d_with_indices(a, 2); return v * v end },
    })
  end
  S.adaptive_avg_pool2d_backward = function()
    local x = distinct(2, 2, 5, 7)
    return one({ distinct(2, 2, 3, 4) / 3 }, function(g) return ember.adaptive_avg_pool2d_backward(g * g, x) end)
  end
  S.adaptive_avg_pool3d_backward = function()
    local x = distinct(1, 2, 3, 4, 5)
    return one({ distinct(1, 2, 2, 3, 2) / 3 }, function(g) return ember.adaptive_avg_pool3d_backward(g * g, x) end)
  end
  S.adaptive_max_pool2d_backward = function()
    local x = distinct(2, 2, 5, 7)
    local _, ix = F.adaptive_max_pool2d_with_indices(x, { 3, 4 })
    return one({ distinct(2, 2, 3, 4) / 3 }, function(g) return ember.adaptive_max_pool2d_backward(g * g, x, ix) end)
  end

  -- ---- power-average pooling (positive inputs: x^p of a negative x is NaN for fractional p) ----
  S.lp_pool1d = function()
    return one({ distinct(2, 3, 7) + 6 }, function(a) return F.lp_pool1d(a, 2, 3, 2) end)
  end
  S.lp_pool2d = function()
    return many({
      { { distinct(2, 2, 5, 5) + 6 }, function(a) return F.lp_pool2d(a, 3, 2) end },
      { { distinct(2, 4, 5) + 6 }, function(a) return F.lp_pool2d(a, 1.5, { 2, 3 }, 1, true) end },
    })
  end

  -- ---- unpooling ----
  S.max_unpool = function()
    -- distinct indices (a repeated one keeps the last value, and its gradient is a gather, as in PyTorch)
    local _, ix = F.max_pool2d(distinct(2, 2, 4, 6), 2, { return_indices = true })
    return one({ distinct(2, 2, 2, 3) }, function(a) return ember.max_unpool(a, ix, { 4, 6 }) * 2 end)
  end
  S.max_unpool1d = function()
    local _, ix = F.max_pool1d(distinct(2, 7), 2, { return_indices = true })
    return one({ distinct(2, 3) }, function(a) return F.max_unpool1d(a, ix, 2, { output_size = { 7 } }) end)
  end
  S.max_unpool2d = function()
    local _, ix = F.max_pool2d(distinct(1, 2, 4, 4), 2, { return_indices = true })
    return one({ distinct(1, 2, 2, 2) }, function(a) return F.max_unpool2d(a, ix, 2) end)
  end
  S.max_unpool3d = function()
    local _, ix = F.max_pool3d(distinct(1, 4, 4, 4), 2, { return_indices = true })
    return one({ distinct(1, 2, 2, 2) }, function(a) return F.max_unpool3d(a, ix, 2) end)
  end

  -- ---- pixel shuffle ----
  S.pixel_shuffle = function()
    return one({ distinct(2, 8, 2, 3) }, function(a) return F.pixel_shuffle(a, 2) end)
  end
  S.pixel_unshuffle = function()
    return one({ distinct(2, 6, 4) }, function(a) return ember.pixel_unshuffle(a, 2) end)
  end
  return S
end
