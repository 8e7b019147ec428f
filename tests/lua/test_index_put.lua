-- test_index_put.lua -- index_put / index_put_ as schema ops (a Tensor?[]
-- argument, Note [Tensor lists]): values computed with PyTorch 1.13 (indices
-- shifted to ember's 1-based ones), nil entries as PyTorch's None (a whole
-- dim, as x[:, i] = v), dtypes, layouts, history, and errors naming the op.
-- The basic cases and errors are in test_index.lua (index_put_and_accumulate).
local ember = ember or require "ember"
local T = {}
local nan = 0 / 0

local function i64(v) return ember.tensor(v, { dtype = "int64" }) end
local function x24() return ember.arange(24, { dtype = "float32" }):view(2, 3, 4) end

function T.index_put_nil_entries_and_non_adjacent_indices()
  -- torch: y[[0, 1], :, [3, 0]] = [[10, 20, 30], [40, 50, 60]] (B in front)
  local y = x24():index_put({ i64({ 1, 2 }), nil, i64({ 4, 1 }) }, ember.tensor({ { 10, 20, 30 }, { 40, 50, 60 } }))
  check_tensor(y, { { { 0, 1, 2, 10 }, { 4, 5, 6, 20 }, { 8, 9, 10, 30 } },
    { { 40, 13, 14, 15 }, { 50, 17, 18, 19 }, { 60, 21, 22, 23 } } })
  -- torch: y[:, [0, 2]] = [-1, -2, -3, -4]
  y = x24():index_put({ nil, i64({ 1, 3 }) }, ember.tensor({ -1, -2, -3, -4 }))
  check_tensor(y, { { { -1, -2, -3, -4 }, { 4, 5, 6, 7 }, { -1, -2, -3, -4 } },
    { { -1, -2, -3, -4 }, { 16, 17, 18, 19 }, { -1, -2, -3, -4 } } })
  check_error(function() return x24():index_put({ nil, nil }, 1) end, "index_put", "indices", "empty")
  local z = x24()
  check_error(function() return z:index_put_({ i64({ 1 }), nil, nil, i64({ 1 }) }, 1) end, "index_put_", "indices",
    "too many", "3 dims", "got 4")
end

function T.index_put_negative_int32_and_empty_indices()
  -- torch: y.index_put_((tensor([-1]), tensor([0, 0])), tensor([1., 2]).view(2, 1), accumulate=True); y[1]
  local y = x24()
  y:index_put_({ i64({ -1 }), ember.tensor({ 1, 1 }, { dtype = "int32" }) }, ember.tensor({ 1, 2 }):view(2, 1), true)
  check_tensor(y[2], { { 15, 16, 17, 18 }, { 16, 17, 18, 19 }, { 20, 21, 22, 23 } })
  local e = ember.ones(2, 2)
  e:index_put_({ i64({}) }, 5)
  check_tensor(e, { { 1, 1 }, { 1, 1 } }, 0, "an empty index writes nothing")
end

function T.index_put_integer_bool_nan_and_non_contiguous()
  -- torch: z = arange(6).view(2, 3); z.index_put_((tensor([0, 0, 1]), tensor([2, 2, 0])), tensor([5, 7, 9]), accumulate=True)
  local z = ember.arange(6):view(2, 3)
  z:index_put_({ i64({ 1, 1, 2 }), i64({ 3, 3, 1 }) }, ember.tensor({ 5, 7, 9 }), { accumulate = true })
  check_tensor(z, { { 0, 1, 14 }, { 12, 4, 5 } })
  check(z.dtype == "int64", "int64 stays int64")
  local b = ember.zeros(2, 3, { dtype = "bool" })
  b:index_put_({ i64({ 2 }) }, true)
  check(b:tolist()[2][3] == true and b:tolist()[1][1] == false, "bool self, a boolean value")
  -- a transposed (non-contiguous) self is written in place; NaN passes through
  local base = ember.zeros(3, 2)
  local t = base:t()
  t:index_put_({ i64({ 2 }), i64({ 3 }) }, nan)
  check_tensor(t, { { 0, 0, 0 }, { 0, 0, nan } })
  check_tensor(base, { { 0, 0 }, { 0, 0 }, { 0, nan } }, 0, "written through the view")
  -- values cast to self's dtype (ember accepts what torch refuses: see ops_index.py)
  local f = ember.zeros(3)
  f:index_put_({ i64({ 2 }) }, ember.tensor({ 4 }))
  check_tensor(f, { 0, 4, 0 })
end

function T.index_put_keeps_history_through_views()
  local a = ember.tensor({ { 1.0, 2 }, { 3, 4 } }, { requires_grad = true })
  local v = ember.tensor({ 10.0, 20 }, { requires_grad = true })
  local b = a * 3
  b:select(1, 2):index_put_({ i64({ 2, 2 }) }, v, { accumulate = true })
  check_tensor(b, { { 3, 6 }, { 9, 42 } })
  ;(b * ember.tensor({ { 1.0, 2 }, { 3, 4 } })):sum():backward()
  -- PyTorch 1.13: a.grad = 3 * w, v.grad = [4, 4]
  check_tensor(a.grad, { { 3, 6 }, { 9, 12 } })
  check_tensor(v.grad, { 4, 4 })
  local leaf = ember.zeros(2, { requires_grad = true })
  check_error(function() return leaf:index_put_({ i64({ 1 }) }, 1) end, "leaf", "in-place")
end

function T.index_put_errors_name_op_and_argument()
  local x = ember.zeros(3, 4)
  check_error(function() return x:index_put_({ i64({ 1, 2 }) }, ember.ones(3, 4)) end, "index_put_", "{3,4}", "{2,4}")
  check_error(function() return x:index_put({ ember.tensor({ 1.5 }) }, 1) end, "index_put", "int64", "float32")
  check_error(function() return x:index_put({ ember.tensor({ true, false }) }, 1) end, "index_put", "mask",
    "{2}", "{3,4}")
  check_error(function() return x:index_put(i64({ 1 }), 1) end, "index_put", "indices", "table")
  check_error(function() return x:index_put({ i64({ 1 }), "a" }, 1) end, "index_put", "indices", "element 2",
    "string")
  check_error(function() return x:index_put({ i64({ 1 }) }, "a") end, "index_put", "values")
  check_error(function() return x:index_put({ i64({ 1 }) }, 1, { accumulate = 1 }) end, "index_put", "accumulate")
  check_error(function() return x:index_put({ i64({ -4 }) }, 1) end, "index_put", "index -4", "size 3")
end

return T
