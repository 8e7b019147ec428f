-- samples/embed.lua -- gradcheck samples of the embed family
-- (schema/ops/embed.yaml), keyed by C name. Ids repeat so that the backward
-- accumulates. padding_idx and scale_grad_by_freq deliberately make
-- embedding's gradient differ from the true derivative (a zero padding row,
-- rows divided by their counts), so embedding's samples use them only where
-- they change nothing (the padding row not looked up, each id once);
-- test_embed.lua checks their effect against PyTorch, and the backward op's
-- own samples (exact: it is linear in grad_output) use both. embedding_bag
-- leaves padding ids out of the forward too, so its gradient stays exact.
-- (max_norm rewrites weight in place outside autograd, as in PyTorch, so a
-- finite difference cannot see it: test_embed.lua tests it.)
return function(H)
  local t, many = H.t, H.many
  local S = {}
  local F = ember.nn.functional

  -- A float64 (rows, cols) weight with distinct values.
  local function w(rows, cols)
    local v = {}
    for k = 1, rows * cols do v[k] = ((k * 37) % 101) / 25 - 2 end
    return t(v):reshape(rows, cols)
  end
  local function ids(v) return ember.tensor(v, { dtype = "int64" }) end

  S.embedding = function()
    return many({
      { { w(5, 3) }, function(a) return F.embedding(ids({ 2, 5, 2, 1 }), a) end },
      { { w(4, 2) }, function(a) return F.embedding(ids({ { 1, 4, 4 }, { 4, 1, 2 } }), a, 3) end },
      { { w(4, 3) }, function(a)
          return F.embedding(ids({ { 1, 3 }, { 2, 2 } }), a, -1, { scale_grad_by_freq = false }) end },
      { { w(4, 3) }, function(a) return F.embedding(ids({ 1, 3, 2 }), a, -1, { scale_grad_by_freq = true }) end },
      { { w(3, 2) }, function(a) return F.embedding(ember.tensor(2, { dtype = "int32" }), a) end },
    })
  end
  S.embedding_dense = function()
    return many({
      { { w(5, 3) }, function(a) return ember.embedding_dense(a, ids({ 5, 1, 5 })) end },
      { { w(2, 4):t() }, function(a) return ember.embedding_dense(a, ids({ { 2, 1 }, { 3, 1 } }), 4) end },
    })
  end
  S.embedding_dense_backward = function()
    local g = t({ { 0.5, -1.2 }, { 1.5, 0.3 }, { -0.7, 0.9 }, { 1.1, -0.4 } })
    return many({
      { { g }, function(a) return ember.embedding_dense_backward(a * a, ids({ 2, 1, 2, 4 }), 5) end },
      { { g:clone() }, function(a)
          return ember.embedding_dense_backward(a * a, ids({ 2, 1, 2, 4 }), 4, 1, true) end },
    })
  end

  -- embedding_bag: PyTorch has no double backward for it (nor has ember)
  local function bags(list)
    local r = many(list)
    for _, s in ipairs(r) do s.gradgrad = false end
    return r
  end
  S.embedding_bag = function()
    local psw = t({ 0.5, -1.5, 2.0, 0.25, 1.0, -0.75 })
    return bags({
      { { w(5, 3) }, function(a) return F.embedding_bag(ids({ 1, 5, 2, 2, 2, 4 }), a, ids({ 1, 3, 3 })) end },
      { { w(5, 3) }, function(a)
          return F.embedding_bag(ids({ { 1, 5 }, { 2, 2 }, { 3, 4 } }), a, nil, nil, 2.0, false, "sum") end },
      { { w(5, 3) }, function(a)
          return F.embedding_bag(ids({ 1, 5, 2, 3, 2, 4 }), a, ids({ 1, 3, 6 }), { mode = "max" }) end },
      { { w(5, 3), psw }, function(a, p)
          return F.embedding_bag(ids({ 1, 5, 2, 2, 2, 4 }), a, ids({ 1, 3, 3, 7 }),
            { mode = "sum", per_sample_weights = p, include_last_offset = true, padding_idx = 4 }) end },
      { { w(4, 2) }, function(a)
          return F.embedding_bag(ids({ 1, 3, 2, 2, 3, 4 }), a, ids({ 1, 4 }), { mode = "mean", padding_idx = 2 }) end },
      { { w(4, 2) }, function(a)
          return F.embedding_bag(ids({ 1, 3, 2, 4 }), a, ids({ 1, 3 }),
            { mode = "mean", padding_idx = 2, scale_grad_by_freq = true }) end },
    })
  end
  S.embedding_bag_dense = function()
    return bags({
      { { w(2, 4):t() }, function(a)
          local out = ember.embedding_bag_dense(a, ids({ 4, 1, 1, 3 }), ids({ 1, 2 }), "sum"); return out end },
      { { w(4, 3), t({ 1.5, -0.5, 2.0 }) }, function(a, p)
          local out = ember.embedding_bag_dense(a, ids({ 4, 1, 4 }), ids({ 1, 3 }), "sum", p); return out end },
    })
  end
  return S
end
