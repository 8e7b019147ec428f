-- samples/linalg.lua -- gradcheck samples of the linalg family (products,
-- einsum, norms, matrix_power); see op_samples.lua for the format.
return function(H)
  local S = {}
  local t, m23, v3, one, many = H.t, H.m23, H.v3, H.one, H.many
  local ember = ember or require "ember"
  local function b223() return t({ { { 0.5, -1.2, 0.8 }, { 1.5, 0.3, -0.7 } }, { { 0.2, 0.9, -1.1 }, { -0.4, 0.6, 1.3 } } }) end
  local function b232() return t({ { { 0.1, 0.2 }, { -0.3, 0.4 }, { 0.5, -0.6 } }, { { 0.7, -0.8 }, { 0.9, 1.0 }, { -1.1, 0.2 } } }) end
  local function m32() return t({ { 0.1, 0.2 }, { -0.3, 0.4 }, { 0.5, -0.6 } }) end
  -- distinct row and column abs-sums (matrix norms 1 and inf are kinks at ties)
  local function md() return t({ { 0.5, -1.2, 0.8 }, { 1.5, 0.4, -0.9 } }) end
  local function sq() return t({ { 0.6, -0.3 }, { 0.2, 0.9 } }) end

  S.bmm = function() return one({ b223(), b232() }, function(a, b) return ember.bmm(a, b) end) end
  S.dot = function() return one({ v3(), t({ 0.3, 0.7, -0.2 }) }, function(a, b) return a:dot(b) end) end
  S.vdot = function() return one({ v3(), t({ 0.3, 0.7, -0.2 }) }, function(a, b) return ember.vdot(a, b) end) end
  S.mv = function() return one({ m23(), v3() }, function(a, b) return a:mv(b) end) end
  S.outer = function() return one({ v3(), t({ 0.5, -1.0 }) }, function(a, b) return ember.outer(a, b) end) end
  S.ger = function() return one({ v3(), t({ 0.5, -1.0 }) }, function(a, b) return a:ger(b) end) end
  S.addmv = function()
    return many({
      { { t({ 0.25, -0.5 }), m23(), v3() }, function(s, a, b) return ember.addmv(s, a, b, { beta = 0.5, alpha = 2 }) end },
      { { t({ 0.75 }), m23(), v3() }, function(s, a, b) return s:addmv(a, b) end },
    })
  end
  S.baddbmm = function()
    return many({
      { { t({ 0.25, -0.5 }), b223(), b232() }, function(s, a, b) return s:baddbmm(a, b, { beta = 0.5, alpha = -1.5 }) end },
      { { b223():bmm(b232()), b223(), b232() }, function(s, a, b) return ember.baddbmm(s, a, b) end },
    })
  end
  S.addbmm = function()
    return many({
      { { t({ 0.25, -0.5 }), b223(), b232() }, function(s, a, b) return s:addbmm(a, b, { beta = 2, alpha = 0.5 }) end },
      { { sq(), b223(), b232() }, function(s, a, b) return ember.addbmm(s, a, b) end },
    })
  end
  S.kron = function()
    return many({
      { { m23(), sq() }, function(a, b) return ember.kron(a, b) end },
      { { v3(), m23() }, function(a, b) return a:kron(b) end },
    })
  end
  S.cross = function()
    return many({
      { { m23(), md() }, function(a, b) return ember.cross(a, b) end },
      { { v3():view(1, 3), md() }, function(a, b) return a:cross(b, 2) end },
    })
  end
  S.linalg_cross = function()
    return one({ m23(), md() }, function(a, b) return ember.linalg.cross(a, b) end)
  end
  S.tensordot = function()
    return many({
      { { b223(), b232() }, function(a, b) return ember.tensordot(a, b) end },
      { { m23(), m32() }, function(a, b) return ember.tensordot(a, b, 1) end },
      { { v3(), t({ 0.5, -1.0 }) }, function(a, b) return ember.tensordot(a, b, 0) end },
    })
  end
  S.tensordot_dimlists = function()
    return one({ b223(), b232() }, function(a, b) return ember.tensordot(a, b, { 1, 3 }, { 1, 2 }) end)
  end
  S.einsum = function()
    return many({
      { { b223(), b232() }, function(a, b) return ember.einsum("bij,bjk->bik", { a, b }) end },
      { { sq() }, function(a) return ember.einsum("ii->i", { a }) end },
      { { m23(), m32(), sq() }, function(a, b, c) return ember.einsum("ij,jk,kl->li", { a, b, c }) end },
      { { b223() }, function(a) return ember.einsum("...ij->...j", { a }) end },
      { { v3(), t({ 0.5, -1.0 }) }, function(a, b) return ember.einsum("i,j", { a, b }) end },
      { { b223(), v3() }, function(a, b) return ember.einsum("bij,j->", { a, b }) end },
    })
  end
  S.linalg_vector_norm = function()
    local LA = ember.linalg
    return many({
      { { m23() }, function(a) return LA.vector_norm(a) end },
      { { m23() }, function(a) return LA.vector_norm(a, 1, 2) end },
      { { m23() }, function(a) return LA.vector_norm(a, 3.5, { 1 }, true) end },
      { { md() }, function(a) return LA.vector_norm(a, math.huge, 2) end },
      { { m23() }, function(a) return LA.vector_norm(a, -1) end },
    })
  end
  S.linalg_matrix_norm = function()
    local LA = ember.linalg
    return many({
      { { md() }, function(a) return LA.matrix_norm(a, 1) end },
      { { md() }, function(a) return LA.matrix_norm(a, -1) end },
      { { md() }, function(a) return LA.matrix_norm(a, math.huge, { 1, 2 }, true) end },
      { { md() }, function(a) return LA.matrix_norm(a, -math.huge) end },
      -- singular values (distinct for md)
      { { md() }, function(a) return LA.matrix_norm(a, 2) end },
      { { md() }, function(a) return LA.matrix_norm(a, -2, { 2, 1 }, true) end },
    })
  end
  S.linalg_matrix_norm_str_ord = function()
    return many({
      { { b223() }, function(a) return ember.linalg.matrix_norm(a, "fro", { 1, 3 }) end },
      { { b223() }, function(a) return ember.linalg.matrix_norm(a, "nuc", { 1, 3 }) end },
    })
  end
  S.linalg_norm = function()
    local LA = ember.linalg
    return many({
      { { b223() }, function(a) return LA.norm(a) end },
      { { md() }, function(a) return LA.norm(a, 1) end },
      { { m23() }, function(a) return LA.norm(a, 3, 2) end },
      { { b223() }, function(a) return LA.norm(a, nil, { 2, 3 }) end },
    })
  end
  S.linalg_norm_ord_str = function()
    return one({ m23() }, function(a) return ember.linalg.norm(a, "fro") end)
  end
  S.matrix_power = function()
    return many({
      { { sq() }, function(a) return a:matrix_power(3) end },
      { { sq() }, function(a) return ember.linalg.matrix_power(a, 0) end },
      { { sq() }, function(a) return a:matrix_power(-3) end },
      { { sq():view(1, 2, 2):expand(2, 2, 2) * t({ 1.0, -0.5 }):view(2, 1, 1) }, function(a) return ember.matrix_power(a, 2) end },
    })
  end
  return S
end
