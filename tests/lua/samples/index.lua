-- samples/index.lua -- gradcheck samples of the index family (schema/ops/index.yaml).
-- Index tensors are 1-based int64; repeated indices check accumulation.
return function(H)
  local S = {}
  local t, m23, p23, v3, one, many = H.t, H.m23, H.p23, H.v3, H.one, H.many
  local function i64(v) return ember.tensor(v, { dtype = "int64" }) end
  local function mask23() return ember.tensor({ { true, false, true }, { false, false, true } }) end

  S.index_select = function()
    return many({
      { { m23() }, function(a) return a:index_select(2, i64({ 3, 1, 3 })) end },
      { { m23() }, function(a) return ember.index_select(a, -2, i64({ 2 })) end },
      { { v3() }, function(a) return a:index_select(1, i64({ 2, 2, 1, 3 })) * 2 end },
    })
  end
  S.index_add = function()
    return many({
      { { m23(), t({ { 0.1, 0.2 }, { 0.3, 0.4 } }) },
        function(a, s) return a:index_add(2, i64({ 3, 3 }), s, { alpha = 2 }) end },
      { { m23(), t({ { 0.1, 0.2, 0.3 } }) }, function(a, s) return ember.index_add(a, 1, i64({ 2 }), s) end },
    })
  end
  S.index_add_ = function()
    return one({ m23(), t({ { 0.1, 0.2 }, { 0.3, 0.4 } }) },
      function(a, s) return a:clone():index_add_(2, i64({ 1, 3 }), s * s, { alpha = -1.5 }) end)
  end
  S.index_copy = function()
    return one({ m23(), t({ { 0.1, 0.2 }, { 0.3, 0.4 } }) },
      function(a, s) return a:index_copy(2, i64({ 3, 1 }), s) end)
  end
  S.index_copy_ = function()
    return one({ m23(), t({ { 0.1, 0.2, 0.3 } }) },
      function(a, s) return a:clone():index_copy_(1, i64({ 2 }), s * 2) end)
  end
  S.index_fill = function()
    return many({
      { { m23() }, function(a) return a:index_fill(2, i64({ 1, 3 }), 0.5) end },
      { { m23(), t(1.5) }, function(a, v) return a:index_fill(1, i64({ 2 }), v) end },
    })
  end
  S.index_fill_ = function()
    return one({ m23(), t(0.7) }, function(a, v) return a:clone():index_fill_(2, i64({ 2 }), v * v) end)
  end
  S.masked_fill = function()
    return many({
      { { m23() }, function(a) return a:masked_fill(mask23(), 2.5) end },
      { { v3(), t(-0.5) }, function(a, v) return ember.masked_fill(a, mask23(), v) end }, -- broadcast self
    })
  end
  S.masked_fill_ = function()
    return one({ m23(), t(0.3) }, function(a, v) return a:clone():masked_fill_(ember.tensor({ true, false, true }), v) end)
  end
  S.masked_select = function()
    return many({
      { { m23() }, function(a) return a:masked_select(mask23()) end },
      { { v3() }, function(a) return a:masked_select(mask23()) * 3 end }, -- self broadcast: grads sum
    })
  end
  S.masked_scatter = function()
    return many({
      { { m23(), t({ 0.1, 0.2, 0.3, 0.4, 0.5 }) }, function(a, s) return a:masked_scatter(mask23(), s) end },
      { { m23(), t({ { 0.1, 0.2 }, { 0.3, 0.4 } }) },
        function(a, s) return a:masked_scatter(ember.tensor({ false, true, false }), s) end },
    })
  end
  S.masked_scatter_ = function()
    return one({ m23(), t({ 0.1, 0.2, 0.3 }) }, function(a, s) return a:clone():masked_scatter_(mask23(), s * s) end)
  end
  S.scatter = function()
    return many({
      { { m23(), t({ { 0.1, 0.2 }, { 0.3, 0.4 } }) },
        function(a, s) return a:scatter(2, i64({ { 3, 1 }, { 2, 3 } }), s) end },
      { { m23(), p23() }, function(a, s) return ember.scatter(a, 1, i64({ { 2, 1, 2 } }), s) end }, -- src larger
      { { m23() }, function(a) return a:scatter(2, i64({ { 1 }, { 3 } }), 4.0) end },
    })
  end
  S.scatter_ = function()
    return one({ m23(), t({ { 0.1, 0.2, 0.3 } }) },
      function(a, s) return a:clone():scatter_(1, i64({ { 2, 2, 1 } }), s * 2) end)
  end
  S.scatter_add = function()
    return many({
      { { m23(), t({ { 0.1, 0.2 }, { 0.3, 0.4 } }) },
        function(a, s) return a:scatter_add(2, i64({ { 3, 3 }, { 1, 3 } }), s) end },
      { { m23(), p23() }, function(a, s) return ember.scatter_add(a, 1, i64({ { 2, 1, 2 } }), s) end },
    })
  end
  S.scatter_add_ = function()
    return one({ m23(), t({ { 0.1, 0.2, 0.3 }, { 0.4, 0.5, 0.6 } }) },
      function(a, s) return a:clone():scatter_add_(1, i64({ { 2, 2, 1 }, { 2, 1, 1 } }), s * s) end)
  end
  S.take = function()
    return many({
      { { m23() }, function(a) return a:take(i64({ { 1, -1 }, { 6, 1 } })) end },
      { { m23() }, function(a) return ember.take(a:t(), i64({ 2, 5 })) * 2 end }, -- non-contiguous
    })
  end
  S.take_along_dim = function()
    return many({
      { { m23() }, function(a) return a:take_along_dim(i64({ { 3, 1 }, { 2, 2 } }), 2) end },
      { { m23() }, function(a) return a:take_along_dim(i64({ 6, 1, 1 })) end },
      { { m23() }, function(a) return a:take_along_dim(i64({ { 1 } , { 3 } }), 2) end },
    })
  end
  -- scatter_reduce: values kept apart (no ties) so amax/amin are smooth there
  S.scatter_reduce_two = function() -- keyed by C name (scatter_reduce.two)
    local src = function() return t({ { 0.1, 2.2, 0.3 }, { -0.4, 1.7, 0.6 } }) end
    local ix = function() return i64({ { 1, 1, 3 }, { 2, 2, 2 } }) end
    local r = {}
    for _, red in ipairs({ "sum", "mean", "amax", "amin", "prod" }) do
      for _, inc in ipairs({ true, false }) do
        r[#r + 1] = { { m23(), src() }, function(a, s) return a:scatter_reduce(2, ix(), s, red, { include_self = inc }) end }
      end
    end
    return many(r)
  end
  S.scatter_reduce__two = function()
    return many({
      { { m23(), t({ { 0.1, 2.2, 0.3 } }) },
        function(a, s) return a:clone():scatter_reduce_(1, i64({ { 2, 1, 2 } }), s * 2, "mean") end },
      { { m23(), t({ { 0.1, 2.2, 0.3 } }) },
        function(a, s) return a:clone():scatter_reduce_(1, i64({ { 2, 1, 2 } }), s, "amax", { include_self = false }) end },
      { { m23(), t({ { 0.1, 2.2, 0.3 } }) },
        function(a, s) return a:clone():scatter_reduce_(1, i64({ { 2, 1, 2 } }), s, "prod") end },
    })
  end
  return S
end
