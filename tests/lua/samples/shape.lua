-- samples/shape.lua -- gradcheck samples of the shape family
-- (schema/ops/shape.yaml), keyed by C name (repeat_interleave_self_int is
-- repeat_interleave.self_int). See op_samples.lua for the format.
return function(H)
  local t, m23, p23, v3, one, many = H.t, H.m23, H.p23, H.v3, H.one, H.many
  local S = {}
  local function m34()
    return t({ { 0.5, -1.2, 0.8, 2.2 }, { 1.5, 0.3, -0.7, 0.1 }, { -0.4, 1.1, 0.9, -2.0 } })
  end
  local function c234() return t({ { { 0.5, -1.2, 0.8, 2.2 }, { 1.5, 0.3, -0.7, 0.1 }, { -0.4, 1.1, 0.9, -2.0 } },
    { { 0.2, 0.6, -0.9, 1.3 }, { -1.1, 0.7, 0.4, -0.3 }, { 0.8, -0.6, 1.7, 0.05 } } }) end

  -- ---- reshaping views ----
  S.flatten = function()
    return many({
      { { c234() }, function(a) return a:flatten() end },
      { { c234() }, function(a) return ember.flatten(a:transpose(1, 3), 2) * 2 end },
      { { t(1.5) }, function(a) return a:flatten() * a end },
    })
  end
  S.unflatten = function()
    return many({
      { { m34() }, function(a) return a:unflatten(2, { 2, -1 }) end },
      { { m34() }, function(a) return ember.unflatten(a:t(), 1, { 2, 2 }) * 3 end },
    })
  end
  S.movedim = function()
    return many({
      { { c234() }, function(a) return a:movedim(1, 3) end },
      { { c234() }, function(a) return ember.movedim(a, { 1, 2 }, { 3, 1 }) * a:permute(2, 3, 1) end },
    })
  end
  S.moveaxis = function() return one({ c234() }, function(a) return a:moveaxis(-1, 1) end) end
  S.swapaxes = function() return one({ c234() }, function(a) return a:swapaxes(1, 3) end) end
  S.swapdims = function() return one({ m23() }, function(a) return ember.swapdims(a, 2, 1) end) end
  S.broadcast_to = function()
    return many({
      { { v3() }, function(a) return a:broadcast_to({ 2, 3 }) end },
      { { t({ { 0.5 }, { -1.5 } }) }, function(a) return ember.broadcast_to(a, { 2, 2, -1 }) * 2 end },
    })
  end
  S.broadcast_tensors = function()
    return one({ m23(), t({ { 0.3 }, { -0.6 } }) }, function(a, b)
      local r = ember.broadcast_tensors({ a, b })
      return r[1] * r[2]
    end)
  end

  -- ---- flips, rolls and repeats ----
  S.flip = function()
    return many({
      { { m34() }, function(a) return a:flip(1) end },
      { { c234() }, function(a) return ember.flip(a, { 1, -1 }) end },
      { { m23() }, function(a) return a:t():flip(1, 2) * a:t() end },
    })
  end
  S.fliplr = function() return one({ m34() }, function(a) return a:fliplr() end) end
  S.flipud = function() return one({ v3() }, function(a) return ember.flipud(a) * a end) end
  S.roll = function()
    return many({
      { { m34() }, function(a) return a:roll(1) end },
      { { m34() }, function(a) return ember.roll(a, { 2, -1 }, { 1, 2 }) * a end },
      { { m34() }, function(a) return a:t():roll(-5, 2) end },
    })
  end
  S.rot90 = function()
    return many({
      { { m23() }, function(a) return a:rot90() end },
      { { c234() }, function(a) return ember.rot90(a, -1, { 3, 1 }) end },
      { { m23() }, function(a) return a:rot90(2) * a end },
    })
  end
  S["repeat"] = function()
    return many({
      { { m23() }, function(a) return a["repeat"](a, 2, 1) end },
      { { v3() }, function(a) return a["repeat"](a, 2, 1, 2) end },
      { { m23() }, function(a) return a:t()["repeat"](a:t(), { 1, 3 }) * 2 end },
    })
  end
  S.tile = function()
    return many({
      { { m23() }, function(a) return a:tile(2) end },
      { { v3() }, function(a) return ember.tile(a, { 2, 2 }) end },
    })
  end
  S.repeat_interleave_self_int = function()
    return many({
      { { m23() }, function(a) return a:repeat_interleave(2) end },
      { { m23() }, function(a) return ember.repeat_interleave(a, 3, 2) end },
    })
  end
  S.repeat_interleave_self_Tensor = function()
    return many({
      { { m23() }, function(a) return a:repeat_interleave(ember.tensor({ 2, 0, 1 }), 2) end },
      { { v3() }, function(a) return ember.repeat_interleave(a, ember.tensor({ 3 })) * a:sum() end },
    })
  end

  -- ---- triangles, diagonals, trace ----
  S.tril = function()
    return many({
      { { m34() }, function(a) return a:tril() end },
      { { c234() }, function(a) return ember.tril(a, -1) end },
      { { m23() }, function(a) return a:tril(1) * a end },
    })
  end
  S.triu = function()
    return many({
      { { m34() }, function(a) return a:triu() end },
      { { c234() }, function(a) return ember.triu(a, 2) end },
    })
  end
  S.diagonal = function()
    return many({
      { { m34() }, function(a) return a:diagonal() end },
      { { c234() }, function(a) return ember.diagonal(a, -1, 3, 2) end },
      { { m34() }, function(a) return a:t():diagonal(1) * 2 end },
    })
  end
  S.diag = function()
    return many({
      { { v3() }, function(a) return ember.diag(a) end },
      { { v3() }, function(a) return a:diag(-1) * 2 end },
      { { m34() }, function(a) return a:diag(1) end },
    })
  end
  S.diag_embed = function()
    return many({
      { { m23() }, function(a) return a:diag_embed() end },
      { { m23() }, function(a) return ember.diag_embed(a, 1, 1, 3) end },
    })
  end
  S.trace = function()
    return many({
      { { m34() }, function(a) return a:trace() end },
      { { m23() }, function(a) return ember.trace(a:t()) * a:sum() end },
    })
  end

  -- ---- slicing views and copies ----
  S.narrow_copy = function() return one({ m34() }, function(a) return a:narrow_copy(2, 2, 2) end) end
  S.unfold = function()
    return many({
      { { m34() }, function(a) return a:unfold(2, 2, 1) end },
      { { c234() }, function(a) return a:unfold(1, 1, 2) * 2 end },
      { { m34() }, function(a) return a:t():unfold(-1, 2, 2) end },
    })
  end
  S.meshgrid = function()
    return many({
      { { v3(), t({ 0.2, -0.7 }) }, function(a, b)
        local g = ember.meshgrid({ a, b })
        return g[1] * g[2]
      end },
      { { v3(), t({ 0.2, -0.7 }) }, function(a, b)
        local g = ember.meshgrid({ a, b }, { indexing = "xy" })
        return g[1] + g[2] * 2
      end },
    })
  end
  S.atleast_1d = function() return one({ t(0.7) }, function(a) return ember.atleast_1d(a) * 2 end) end
  S.atleast_2d = function() return one({ v3() }, function(a) return ember.atleast_2d(a) * 2 end) end
  S.atleast_3d = function() return one({ m23() }, function(a) return ember.atleast_3d(a) * 2 end) end
  S.atleast_1d_Sequence = function()
    return one({ t(0.7), v3() }, function(a, b)
      local r = ember.atleast_1d({ a, b })
      return r[1] * r[2]
    end)
  end
  S.atleast_2d_Sequence = function()
    return one({ v3() }, function(a) return ember.atleast_2d({ a })[1] * 2 end)
  end
  S.atleast_3d_Sequence = function()
    return one({ v3(), m23() }, function(a, b)
      local r = ember.atleast_3d({ a, b })
      return ember.cat({ r[1]:reshape(3, 1, 1), r[2]:reshape(3, 2, 1) }, 2)
    end)
  end

  -- ---- stacking and splitting ----
  S.hstack = function()
    return many({
      { { v3(), t({ 0.2, -0.7 }) }, function(a, b) return ember.hstack({ a, b }) end },
      { { m23(), t({ { 0.2 }, { -0.7 } }) }, function(a, b) return ember.hstack({ a, b * b }) end },
    })
  end
  S.vstack = function() return one({ v3(), m23() }, function(a, b) return ember.vstack({ a, b }) end) end
  S.row_stack = function() return one({ v3(), v3() }, function(a, b) return ember.row_stack({ a, b * a }) end) end
  S.dstack = function() return one({ m23(), m23() }, function(a, b) return ember.dstack({ a, b }) end) end
  S.column_stack = function()
    return one({ t({ 0.2, -0.7 }), m23() }, function(a, b) return ember.column_stack({ a, b }) end)
  end
  S.tensor_split_sections = function()
    return one({ m34() }, function(a)
      local p = a:tensor_split(2, 2)
      return ember.cat({ p[2] * 2, p[1] }, 2)
    end)
  end
  S.tensor_split_indices = function()
    return one({ m34() }, function(a)
      local p = ember.tensor_split(a, { 2, -1 }, 2)
      return ember.cat({ p[3], p[1] * 3 }, 2)
    end)
  end
  S.hsplit_int = function() return one({ m34() }, function(a) return a:hsplit(2)[2] * 2 end) end
  S.hsplit_array = function() return one({ m34() }, function(a) return a:hsplit({ 2 })[2] end) end
  S.vsplit_int = function() return one({ m34() }, function(a) return a:vsplit(3)[3] * 2 end) end
  S.vsplit_array = function() return one({ m34() }, function(a) return ember.vsplit(a, { 3 })[1] end) end
  S.dsplit_int = function() return one({ c234() }, function(a) return a:dsplit(2)[1] end) end
  S.dsplit_array = function() return one({ c234() }, function(a) return a:dsplit({ 2, 4 })[2] end) end
  return S
end
