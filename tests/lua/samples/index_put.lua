-- samples/index_put.lua -- gradcheck samples of index_put / index_put_
-- (schema/ops/index_put.yaml): gradients reach self (outside the written
-- positions, or everywhere with accumulate) and values (summed over
-- repeats with accumulate).
return function(H)
  local S = {}
  local t, m23, one, many = H.t, H.m23, H.one, H.many
  local function i64(v) return ember.tensor(v, { dtype = "int64" }) end

  S.index_put = function()
    return many({
      -- two adjacent index tensors, repeats accumulate
      { { m23(), t({ 0.1, 0.2, 0.3 }) },
        function(a, v) return a:index_put({ i64({ 1, 2, 1 }), i64({ 3, 1, 3 }) }, v, { accumulate = true }) end },
      -- nil (a whole dim) then an index tensor; values broadcast over the rows
      { { m23(), t({ { 0.5 }, { -0.5 } }) },
        function(a, v) return ember.index_put(a, { nil, i64({ 2, -1 }) }, v) end },
      -- a bool mask; a 0-dim value fills
      { { m23(), t(0.25) },
        function(a, v)
          return a:index_put({ ember.tensor({ { true, false, true }, { false, false, true } }) }, v * 3)
        end },
    })
  end
  S.index_put_ = function()
    return many({
      { { m23(), t({ { 0.1, 0.2, 0.3 } }) },
        function(a, v) return (a * 1):index_put_({ i64({ 2 }) }, v * v) end },
      -- through a view of a non-leaf: the base keeps its history (CopySlices)
      { { m23(), t({ 0.7, 0.9 }) },
        function(a, v)
          local b = a * 2
          b:select(2, 2):index_put_({ i64({ 1, 1 }) }, v, true)
          return b
        end },
    })
  end
  return S
end
