-- samples/reduce.lua -- gradcheck samples of the reduce family (reductions
-- and scans); see Note [Schema files] in schema/ops.yaml. Values are
-- distinct where an op selects (median, kthvalue, mode, cummax): a tie is
-- a kink that finite differences cannot follow.
return function(H)
  local S = {}
  local t, m23, p23, v3, one, many = H.t, H.m23, H.p23, H.v3, H.one, H.many
  local function m34()
    return t({ { 0.5, -1.2, 0.8, 0.1 }, { 1.5, 0.3, -0.7, 2.0 }, { -0.4, 0.9, 1.1, -1.6 } })
  end
  local nan = 0 / 0

  S.cumsum = function()
    return many({
      { { m23() }, function(a) return a:cumsum(2) end },
      { { m34() }, function(a) return ember.cumsum(a * a, 1) end },
      { { m23() }, function(a) return a:cumsum(-1, { dtype = "float64" }) end },
      { { t(1.5) }, function(a) return a:cumsum(1) * a end },
    })
  end
  S.cumprod = function()
    return many({
      { { p23() }, function(a) return a:cumprod(2) end },
      { { m34() }, function(a) return ember.cumprod(a, 1) end },
      -- zeros: the O(n) kernel first, PyTorch's O(n^2) formula for gradgrad
      { { t({ { 0.5, 0.0, 0.8, 1.3 }, { 0.0, 0.3, 0.0, 2.0 } }) }, function(a) return a:cumprod(2) end },
      { { t({ 0.7, 1.2, 0.0 }) }, function(a) return a:cumprod(1) * a end },
    })
  end
  S.cummax = function()
    return many({
      { { m34() }, function(a) return (a:cummax(2)) end },
      { { m34() }, function(a) return (ember.cummax(a, 1)) end },
    })
  end
  S.cummin = function()
    return many({
      { { m34() }, function(a) return (a:cummin(2)) end },
      { { m23() }, function(a) return (ember.cummin(a * a, 1)) end },
    })
  end
  S.logcumsumexp = function()
    return many({
      { { m34() }, function(a) return a:logcumsumexp(2) end },
      { { m23() }, function(a) return ember.logcumsumexp(a * 3, 1) end },
    })
  end
  S.nansum = function()
    return many({
      { { m23() }, function(a) return a:nansum() end },
      { { m34() }, function(a) return ember.where(a:gt(1), nan, a):nansum(2) end },
      { { m23() }, function(a) return ember.nansum(a, { 1, 2 }, true, { dtype = "float64" }) end },
    })
  end
  S.nanmean = function()
    return many({
      { { m23() }, function(a) return a:nanmean(1) end },
      { { m34() }, function(a) return ember.where(a:gt(1), nan, a):nanmean(2, true) end },
    })
  end
  -- an int64 count: no gradient flows through it, only through a
  S.count_nonzero = function()
    return one({ m23() }, function(a) return a * a:count_nonzero(2):unsqueeze(2) end)
  end
  S.bucketize = function()
    return one({ m23() }, function(a) return a * ember.bucketize(a, t({ -1, 0, 1 })) end)
  end
  S.median = function() return one({ m23() }, function(a) return a:median() end) end
  S.median_dim = function()
    return many({
      { { m34() }, function(a) return (a:median(2)) end },
      { { m23() }, function(a) return (ember.median(a, 1, true)) end },
    })
  end
  S.nanmedian = function()
    return one({ m34() }, function(a) return ember.where(a:gt(1), nan, a):nanmedian() end)
  end
  S.nanmedian_dim = function()
    return many({
      { { m34() }, function(a) return (ember.where(a:gt(1), nan, a):nanmedian(2)) end },
      { { m23() }, function(a) return (a:nanmedian(1, true)) end },
    })
  end
  S.kthvalue = function()
    return many({
      { { m34() }, function(a) return (a:kthvalue(3)) end },
      { { m34() }, function(a) return (ember.kthvalue(a, 1, 1, true)) end },
    })
  end
  S.mode = function()
    return many({
      { { m34() }, function(a) return (a:mode()) end },
      { { m23() }, function(a) return (ember.mode(a, 1, true)) end },
    })
  end
  S.diff = function()
    return many({
      { { m34() }, function(a) return a:diff() end },
      { { m34() }, function(a) return ember.diff(a * a, 2, 1) end },
      { { m23(), v3():reshape(1, 3) }, function(a, b) return a:diff(1, 1, b, b * b) end },
    })
  end
  S.quantile = function()
    return many({
      { { m34() }, function(a) return a:quantile(0.3) end },
      { { m34() }, function(a) return ember.quantile(a, t({ 0.25, 0.6 }), 2, true) end },
      { { m34() }, function(a) return a:quantile(0.4, 1, { interpolation = "midpoint" }) end },
      { { m34() }, function(a) return a:quantile(t({ 0.2, 0.9 }), -1, { interpolation = "nearest" }) end },
    })
  end
  S.nanquantile = function()
    return many({
      { { m34() }, function(a) return ember.where(a:gt(1), nan, a):nanquantile(0.3, 2) end },
      { { m34() }, function(a) return a:nanquantile(t(0.7), 1, { interpolation = "higher" }) end },
    })
  end
  return S
end
