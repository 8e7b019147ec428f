-- samples/metric.lua -- gradcheck samples of the metric family (distances,
-- bilinear, normalize, the losses); see op_samples.lua for the format.
-- pdist/cdist's direct kernels differentiate twice through their
-- create_graph formulas (PyTorch 1.13 has no double backward there).
return function(H)
  local S = {}
  local t, m23, p23, v3, one, many = H.t, H.m23, H.p23, H.v3, H.one, H.many
  local F = ember.nn.functional
  -- no ties among the largest coordinate differences (p = inf) and no zero ones
  local function m43() return t({ { 0.5, -1.2, 0.8 }, { 1.4, 0.35, -0.6 }, { -0.25, 0.95, 1.15 }, { 0.61, -0.47, 0.09 } }) end
  local function m33() return t({ { 0.1, 0.7, -0.3 }, { -1.07, 0.21, 0.44 }, { 0.8, -0.6, 1.2 } }) end

  S.bilinear = function()
    local w = t({ { { 0.2, -0.1, 0.3 }, { 0.5, 0.4, -0.6 } }, { { -0.3, 0.8, 0.1 }, { 0.7, -0.2, 0.9 } } })
    return many({
      { { t({ { 0.3, -0.7 }, { 1.1, 0.4 } }), p23(), w, t({ 0.1, -0.2 }) },
        function(a, b, w, c) return F.bilinear(a, b, w, c) end },
      { { t({ 0.3, -0.7 }), v3(), w }, function(a, b, w) return ember.bilinear(a, b, w) end },
    })
  end
  S.cosine_similarity = function()
    return many({
      { { m23(), p23() * 0.5 }, function(a, b) return F.cosine_similarity(a, b) end },
      { { m23(), v3() }, function(a, b) return ember.cosine_similarity(a, b, 1, 1e-6) end },
    })
  end
  S.pairwise_distance = function()
    return many({
      { { m23(), p23() * 0.5 }, function(a, b) return F.pairwise_distance(a, b) end },
      { { m23(), v3() }, function(a, b) return F.pairwise_distance(a, b, 3, 1e-6, true) end },
      { { m23(), v3() }, function(a, b) return ember.pairwise_distance(a, b, 1) end },
    })
  end
  S.pdist = function()
    return many({
      { { m43() }, function(a) return F.pdist(a) end },
      { { m43() }, function(a) return F.pdist(a, 1) end },
      { { m43() }, function(a) return F.pdist(a, 1.5) end },
      { { m43() }, function(a) return F.pdist(a, 3) end },
      { { m43() }, function(a) return ember.pdist(a, math.huge) end },
    })
  end
  S._pdist_forward = function()
    return one({ m43() }, function(a) return ember._pdist_forward(a, 2.5) end)
  end
  S.cdist = function()
    return many({
      { { m43(), m33() }, function(a, b) return F.cdist(a, b) end },
      { { m43(), m33() }, function(a, b) return F.cdist(a, b, 1) end },
      { { m43(), m33() }, function(a, b) return ember.cdist(a, b, 0.5) end },
      { { m43(), m33() }, function(a, b) return ember.cdist(a, b, math.huge) end },
      { { m43(), m33() }, function(a, b) return F.cdist(a:view(2, 2, 3), b, 3) end },
      { { m43(), m33() }, function(a, b) return F.cdist(a, b, 2, "use_mm_for_euclid_dist") end },
    })
  end
  S._cdist_forward = function()
    return one({ m43(), m33() }, function(a, b) return ember._cdist_forward(a, b, 1.5) end)
  end
  S._euclidean_dist = function()
    return one({ m43():view(1, 4, 3), m33():view(1, 3, 3) }, function(a, b) return ember._euclidean_dist(a, b) end)
  end
  S.normalize = function()
    return many({
      { { m23() }, function(a) return F.normalize(a) end },
      { { m23() }, function(a) return F.normalize(a, 1, 1) end },
      { { m23() }, function(a) return F.normalize(a, 3, -1, 1e-3) end },
    })
  end

  -- ---- losses (inputs away from the kinks of their clamps) ----
  local function sgn23() return t({ { 1, -1, 1 }, { -1, -1, 1 } }) end
  S.poisson_nll_loss = function()
    return many({
      { { m23(), p23() }, function(a, b) return F.poisson_nll_loss(a, b) end },
      { { p23(), p23() * 2.2 }, function(a, b) return F.poisson_nll_loss(a, b, false, true, { reduction = "sum" }) end },
      { { m23() }, function(a) return F.poisson_nll_loss(a, p23(), true, false, { reduction = "none" }) end },
    })
  end
  S.gaussian_nll_loss = function()
    return many({
      { { m23(), v3(), p23() }, function(a, b, v) return F.gaussian_nll_loss(a, b, v) end },
      { { m23(), p23(), t({ 0.6, 1.3 }) }, function(a, b, v) return F.gaussian_nll_loss(a, b, v, true, 1e-6, "none") end },
    })
  end
  S.cosine_embedding_loss = function()
    return many({
      { { m23(), p23() }, function(a, b) return F.cosine_embedding_loss(a, b, ember.tensor({ 1, -1 })) end },
      { { m23(), p23() }, function(a, b) return F.cosine_embedding_loss(a, b, ember.tensor({ -1, -1 }), -0.5, { reduction = "sum" }) end },
    })
  end
  S.margin_ranking_loss = function()
    return one({ m23(), p23() }, function(a, b) return F.margin_ranking_loss(a, b, sgn23(), 0.1, { reduction = "none" }) end)
  end
  S.triplet_margin_loss = function()
    return many({
      { { m23(), p23(), v3():view(1, 3) * 2 }, function(a, b, c) return F.triplet_margin_loss(a, b, c:expand(2, 3), 1.5) end },
      { { m23(), p23() * 0.7, m23() * -1.5 }, function(a, b, c) return F.triplet_margin_loss(a, b, c, 2, 1, 1e-6, true) end },
    })
  end
  S.hinge_embedding_loss = function()
    return one({ m23() }, function(a) return F.hinge_embedding_loss(a, sgn23(), 0.9) end)
  end
  S.multi_margin_loss = function()
    return many({
      { { m23() }, function(a) return F.multi_margin_loss(a, ember.tensor({ 2, 3 })) end },
      { { m23() }, function(a) return F.multi_margin_loss(a, ember.tensor({ 1, 3 }), 2, 0.9, t({ 0.5, 1.5, 2.0 })) end },
    })
  end
  S.soft_margin_loss = function()
    return one({ m23() }, function(a) return F.soft_margin_loss(a, sgn23()) end)
  end
  S.multilabel_soft_margin_loss = function()
    return many({
      { { m23() }, function(a) return F.multilabel_soft_margin_loss(a, t({ { 1, 0, 1 }, { 0, 0, 1 } })) end },
      { { m23(), p23() }, function(a, w) return F.multilabel_soft_margin_loss(a, t({ { 1, 0, 1 }, { 0, 0.5, 1 } }), w[1], { reduction = "none" }) end },
    })
  end
  return S
end
