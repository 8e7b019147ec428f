-- samples/lapack.lua -- gradcheck samples of the LAPACK family (ember.linalg).
-- Well-conditioned float64 inputs: symmetric positive-definite matrices made
-- inside fn (a @ a^T + I) for cholesky, symmetrised ones (a + a^T) for eigh,
-- as torch's OpInfos do (these ops read one triangle only); results that
-- carry a sign gauge (eigenvectors, singular vectors) enter squared.
return function(H)
  local S = {}
  local L = ember.linalg
  local t = H.t
  local function sq3() return t({ { 2.0, 0.5, -0.3 }, { 0.4, 1.5, 0.2 }, { -0.6, 0.3, 1.8 } }) end
  local function bat() -- 2 x 2 x 2
    return t({ { { 1.5, -0.4 }, { 0.3, 2.0 } }, { { -1.2, 0.7 }, { 0.5, 0.9 } } })
  end
  local function m32() return t({ { 0.5, -1.2 }, { 1.5, 0.3 }, { -0.7, 0.9 } }) end
  local function flat(x)
    local n = 1
    for _, s in ipairs(x.shape) do n = n * s end
    return x:reshape(n)
  end
  local function spd(a) return a:matmul(a:t()) + ember.tensor({ { 1.0, 0, 0 }, { 0, 1.0, 0 }, { 0, 0, 1.0 } },
      { dtype = "float64" }) end
  local function sym(a) return a + a:transpose(-1, -2) end

  S.det = function()
    local r = H.many({
      { { sq3() }, function(a) return L.det(a) end },
      { { bat() }, function(a) return a:det() end },
    })
    -- singular: torch's SVD form of the gradient (the adjugate). Its finite
    -- differences step off the singular set onto the solve form, whose
    -- rounding near a singular matrix swamps a second difference quotient,
    -- so only the first derivative is checked here.
    r[#r + 1] = { inputs = { t({ { 1.0, 2.0 }, { 2.0, 4.0 } }) }, fn = function(a) return ember.det(a) end,
                  gradgrad = false }
    return r
  end
  S.slogdet = function()
    return H.many({
      { { sq3() }, function(a) local _, l = L.slogdet(a); return l end },
      { { bat() }, function(a) local s, l = a:slogdet(); return l * 2 end },
    })
  end
  S.inv = function()
    return H.many({ { { sq3() }, function(a) return L.inv(a) end }, { { bat() }, function(a) return L.inv(a) end } })
  end
  S.inverse = function() return H.one({ sq3() }, function(a) return a:inverse() end) end
  S.solve = function()
    return H.many({
      { { sq3(), H.v3() }, function(a, b) return L.solve(a, b) end },
      { { sq3(), m32() }, function(a, b) return L.solve(a, b) end },
      -- batch dims broadcast (A 2x2x2, B 2x1), and X A = B
      { { bat(), t({ { 0.3 }, { -1.1 } }) }, function(a, b) return L.solve(a, b) end },
      { { sq3(), m32():t() }, function(a, b) return L.solve(a, b, { left = false }) end },
    })
  end
  S.cholesky = function()
    return H.many({
      { { sq3() }, function(a) return L.cholesky(spd(a)) end },
      { { sq3() }, function(a) return L.cholesky(spd(a), { upper = true }) end },
    })
  end
  S.qr = function()
    return H.many({
      { { m32() }, function(a) local q, r = L.qr(a); return ember.cat({ flat(q), flat(r) }) end },
      { { m32():t() }, function(a) local q, r = L.qr(a); return ember.cat({ flat(q), flat(r) }) end },
      { { sq3() }, function(a) local q, r = L.qr(a, "complete"); return ember.cat({ flat(q), flat(r) }) end },
      { { m32() }, function(a) local _, r = L.qr(a); return r end }, -- Q's gradient does not flow
    })
  end
  S.eigh = function()
    return H.many({
      { { sq3() }, function(a) local l, v = L.eigh(sym(a)); return ember.cat({ l, flat(v * v) }) end },
      { { sq3() }, function(a) local l = L.eigh(sym(a), "U"); return l end },
    })
  end
  S.eigvalsh = function() return H.one({ sq3() }, function(a) return L.eigvalsh(sym(a)) end) end
  S.svd = function()
    local function all(u, s, vh) return ember.cat({ flat(u * u), s, flat(vh * vh) }) end
    return H.many({
      { { m32() }, function(a) return all(L.svd(a, false)) end },
      { { m32():t() }, function(a) return all(L.svd(a, false)) end },
      { { m32() }, function(a) local u, s, vh = L.svd(a); local u2 = u:narrow(2, 1, 2); return ember.cat({ flat(u2 * u2 * s), flat(vh * vh) }) end },
      { { sq3() }, function(a) local _, s = L.svd(a); return s end },
    })
  end
  S.svdvals = function()
    return H.many({ { { m32() }, function(a) return L.svdvals(a) end }, { { bat() }, function(a) return L.svdvals(a) end } })
  end
  S.pinv = function()
    return H.many({
      { { m32() }, function(a) return L.pinv(a) end },
      { { m32():t() }, function(a) return L.pinv(a) end },
      { { sq3() }, function(a) return L.pinv(sym(a), { hermitian = true }) end },
    })
  end
  S.lstsq = function()
    return H.many({
      { { m32(), t({ { 1.0, -0.5 }, { 0.2, 0.7 }, { -1.3, 0.4 } }) }, function(a, b) local x = L.lstsq(a, b); return x end },
      { { m32(), H.v3() }, function(a, b) local x = L.lstsq(a, b, nil, { driver = "gelsd" }); return x end },
      { { m32():t(), t({ { 1.0 }, { -0.5 } }) }, function(a, b) local x = L.lstsq(a, b); return x end },
    })
  end
  S.matrix_exp = function()
    return H.many({
      { { sq3() }, function(a) return L.matrix_exp(a * 0.3) end },
      { { bat() }, function(a) return a:matrix_exp() end },
      { { sq3() }, function(a) return ember.matrix_exp(a * 4) end }, -- scaled and squared
    })
  end
  return S
end
