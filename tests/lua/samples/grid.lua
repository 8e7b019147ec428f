-- samples/grid.lua -- gradcheck samples of the grid family
-- (schema/ops/grid.yaml), keyed by C name. See op_samples.lua for the format.
-- grid_sampler_2d's samples say gradgrad = false: its gradients are
-- grid_sampler_2d_backward's, which has no derivative in PyTorch 1.13 either
-- (differentiating its node raises, as PyTorch). Grid points stay away from
-- the kinks (integer pixel coordinates, the clamp and reflection edges).
return function(H)
  local many = H.many
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
  -- grid values in (-1.4, 1.4): some points outside the input
  local function grid(...)
    local shape = { ... }
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local v = {}
    for i = 1, n do v[i] = 1.37 * math.sin(i * 2.3 + 0.4) end
    return ember.tensor(v, { dtype = "float64" }):reshape(shape)
  end
  local function nogg(list)
    for _, s in ipairs(list) do s.gradgrad = false end
    return list
  end

  S.grid_sampler_2d = function()
    local r = {}
    for _, mode in ipairs({ "bilinear", "nearest", "bicubic" }) do
      for _, pad in ipairs({ "zeros", "border", "reflection" }) do
        for _, ac in ipairs({ false, true }) do
          r[#r + 1] = { { seq(2, 2, 3, 4), grid(2, 2, 3, 2) },
            function(a, g) return ember.grid_sampler_2d(a, g, mode, pad, ac) end }
        end
      end
    end
    return nogg(many(r))
  end
  -- grid_sampler_2d_backward's formulas are PyTorch's "not implemented"
  -- (they only raise; test_grid.lua checks that): no samples
  S.grid_sampler_2d_backward = function() return {} end
  S.grid_sampler_3d = function()
    local r = {}
    for _, mode in ipairs({ "bilinear", "nearest" }) do
      for _, pad in ipairs({ "zeros", "border", "reflection" }) do
        for _, ac in ipairs({ false, true }) do
          r[#r + 1] = { { seq(2, 2, 2, 3, 4), grid(2, 1, 2, 3, 3) },
            function(a, g) return ember.grid_sampler_3d(a, g, mode, pad, ac) end }
        end
      end
    end
    return nogg(many(r))
  end
  S.grid_sampler_3d_backward = function() return {} end
  S.grid_sample = function()
    return nogg(many({
      { { seq(1, 2, 3, 2, 4), grid(1, 2, 2, 1, 3) },
        function(a, g) return F.grid_sample(a, g, "bilinear", "border", false) end },
      { { seq(1, 3, 4, 5), grid(1, 3, 2, 2) }, function(a, g) return F.grid_sample(a, g) end },
      { { seq(2, 1, 2, 3), grid(2, 4, 1, 2):transpose(2, 3) },
        function(a, g) return F.grid_sample(a, g, "bicubic", "reflection", true) end },
      -- 1-pixel axes: reflection's span is 0 with align_corners
      { { seq(1, 2, 1, 3), grid(1, 2, 2, 2) },
        function(a, g) return F.grid_sample(a, g, "bilinear", "reflection", true) end },
    }))
  end
  S.affine_grid = function()
    local r = many({
      { { seq(2, 2, 3) }, function(t) return F.affine_grid(t, { 2, 1, 3, 4 }) end },
      { { seq(1, 2, 3) }, function(t) return F.affine_grid(t, { 1, 3, 2, 1 }, true) end },
      { { seq(2, 3, 4) }, function(t) return F.affine_grid(t, { 2, 1, 2, 3, 2 }) end },
      -- the spatial transformer: sample an input at an affine grid
      { { seq(1, 2, 3), seq(1, 2, 4, 4) * 0.3 },
        function(t, a) return F.grid_sample(a, F.affine_grid(t * 0.2, { 1, 2, 3, 3 }), "bilinear", "border") end },
    })
    r[#r].gradgrad = false
    return r
  end
  S.upsample_aa = function()
    return many({
      { { seq(1, 2, 5, 6) }, function(a) return ember.upsample_aa(a, { 2, 3 }, "linear") end },
      { { seq(2, 1, 3, 4) }, function(a) return ember.upsample_aa(a, { 5, 2 }, "cubic", true) end },
      { { seq(1, 1, 5, 7) }, function(a) return F.interpolate(a, nil, { 0.6, 1.7 }, "bicubic", nil, nil, true) end },
    })
  end
  S.upsample_aa_backward = function()
    return many({
      { { seq(1, 2, 2, 3) }, function(g) return ember.upsample_aa_backward(g, { 1, 2, 5, 6 }, { 2, 3 }, "linear") end },
      { { seq(1, 1, 5, 2) }, function(g) return ember.upsample_aa_backward(g, { 1, 1, 3, 4 }, { 5, 2 }, "cubic", true) end },
    })
  end
  -- rrelu: a private generator seeded inside fn, so that every evaluation
  -- of gradcheck draws the same slopes; inputs away from 0 (the kink)
  local function drawn(f)
    return function(...)
      return f(ember.Generator():manual_seed(5), ...)
    end
  end
  S.rrelu_with_noise = function()
    return many({
      { { seq(2, 3) }, drawn(function(gen, a)
        local o = ember.rrelu_with_noise(a, 0.1, 0.4, true, { generator = gen }); return o end) },
      { { seq(3, 2) }, function(a) local o = ember.rrelu_with_noise(a, 0.2, 0.3); return o end },
    })
  end
  S.rrelu = function()
    return many({
      { { seq(2, 3) }, function(a) return F.rrelu(a) end },
      { { seq(2, 3) }, function(a) return F.rrelu(a * 1, 0.1, 0.5, false, true) end },
    })
  end
  S.rrelu_ = function()
    return many({
      { { seq(2, 3) }, drawn(function(gen, a) return ember.rrelu_(a * 1, 0.1, 0.4, true, { generator = gen }) end) },
    })
  end
  return S
end
