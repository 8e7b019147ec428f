-- samples/random.lua -- gradcheck samples of the random family (Note [Schema
-- files]). The in-place samplers overwrite self: its old values get a zero
-- gradient, while the graph around them stays. Each fn draws from its own
-- freshly seeded generator, so every evaluation sees the same numbers and
-- the finite differences are exact: d/da (sampler(a * 2) * a) = the samples.
return function(H)
  local S = {}
  local function sampler(call)
    return function()
      return H.one({ H.m23() }, function(a)
        local g = ember.Generator():manual_seed(17)
        return call(a * 2, { generator = g }) * a
      end)
    end
  end
  S.uniform_ = sampler(function(y, o) return y:uniform_(-1, 2, o) end)
  S.normal_ = sampler(function(y, o) return y:normal_(1, 3, o) end)
  S.log_normal_ = sampler(function(y, o) return y:log_normal_(0, 0.5, o) end)
  S.exponential_ = sampler(function(y, o) return y:exponential_(1.5, o) end)
  S.cauchy_ = sampler(function(y, o) return y:cauchy_(0, 1, o) end)
  S.geometric_ = sampler(function(y, o) return y:geometric_(0.4, o) end)
  S.random_ = sampler(function(y, o) return y:random_(o) end)
  S.random__to = sampler(function(y, o) return y:random_(7, o) end)
  S.random__from = sampler(function(y, o) return y:random_(-3, 4, o) end)
  S.bernoulli__float = sampler(function(y, o) return y:bernoulli_(0.4, o) end)
  S.bernoulli__Tensor = sampler(function(y, o)
    return y:bernoulli_(H.t({ 0.2, 0.9, 0.5 }), o)
  end)
  -- out-of-place: the samples are piecewise constant in the probabilities
  -- and rates (a fixed generator), so their gradient is zero, as PyTorch's
  S.bernoulli = sampler(function(y, o) return ember.bernoulli(y:sigmoid(), o) end)
  S.poisson = sampler(function(y, o) return ember.poisson(y * y + 0.5, o) end)
  -- the _like factories: results without history, used beside a
  S.zeros_like = function() return H.one({ H.m23() }, function(a) return ember.zeros_like(a) + a * a end) end
  S.ones_like = function() return H.one({ H.m23() }, function(a) return ember.ones_like(a) * a end) end
  S.full_like = function() return H.one({ H.m23() }, function(a) return ember.full_like(a, 2.5) * a end) end
  S.empty_like = function()
    return H.one({ H.m23() }, function(a) return ember.empty_like(a):fill_(-1.5) * a end)
  end
  return S
end
