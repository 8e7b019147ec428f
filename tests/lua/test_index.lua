-- test_index.lua -- the index family (schema/ops/index.yaml) against values
-- computed with PyTorch 1.13 (indices shifted to ember's 1-based ones), edge
-- cases (empty, 0-dim, NaN, integer/bool dtypes, non-contiguous inputs),
-- gradients, and errors that name the op, the argument and the range.
local ember = ember or require "ember"
local T = {}
local nan = 0 / 0

local function x() return ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float32" }) end
local function xi() return ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }) end
local function i64(v) return ember.tensor(v, { dtype = "int64" }) end
local function ar6() return ember.arange(6, { dtype = "float32" }):view(2, 3) end

function T.index_select_values_dtypes_and_layouts()
  check_tensor(x():index_select(2, i64({ 3, 1, 3 })), { { 3, 1, 3 }, { 6, 4, 6 } })
  check_tensor(x():index_select(1, ember.tensor({ 2 }, { dtype = "int32" })), { { 4, 5, 6 } })
  check_tensor(x():index_select(-1, i64({ 2 })), { { 2 }, { 5 } })
  check_tensor(xi():t():index_select(1, i64({ 3, 1 })), { { 3, 6 }, { 1, 4 } }, 0, "non-contiguous self")
  check_tensor(ember.tensor({ true, false }):index_select(1, i64({ 2, 2, 1 })), { false, false, true })
  check_shape(x():index_select(2, i64({})), { 2, 0 })
  local s = ember.tensor(5.0):index_select(1, i64({ 1 }))
  check_shape(s, {}, "0-dim self gives 0-dim")
  check_eq(s:item(), 5)
  check_tensor(ember.arange(10):view(5, 2)[{ { 1, 5, 2 } }]:index_select(1, i64({ 3, 1 })), { { 8, 9 }, { 0, 1 } })
end

function T.index_add_copy_fill()
  check_tensor(x():index_add(2, i64({ 1, 1 }), ember.ones(2, 2), { alpha = 2 }), { { 5, 2, 3 }, { 8, 5, 6 } })
  check_tensor(xi():index_add(1, i64({ 2, 2 }), ember.tensor({ { 1, 1, 1 }, { 2, 2, 2 } })), { { 1, 2, 3 }, { 7, 8, 9 } })
  check_tensor(x():index_copy(2, i64({ 3, 1 }), ember.tensor({ { 7, 8 }, { 9, 10 } }, { dtype = "float32" })), { { 8, 2, 7 }, { 10, 5, 9 } })
  check_tensor(x():index_fill(1, i64({ 2 }), -1.5), { { 1, 2, 3 }, { -1.5, -1.5, -1.5 } })
  check_tensor(xi():index_fill(2, i64({ 1 }), 2.7), { { 2, 2, 3 }, { 2, 5, 6 } }, 0, "int self truncates the value")
  check_tensor(x():index_fill(2, i64({ 2 }), ember.tensor(nan)), { { 1, nan, 3 }, { 4, nan, 6 } })
  local y = x()
  local r = y:index_add_(2, i64({ 3 }), ember.ones(2, 1))
  check(rawequal(r, y) or r:data_ptr() == y:data_ptr(), "index_add_ returns self")
  check_tensor(y, { { 1, 2, 4 }, { 4, 5, 7 } })
  local z = ember.zeros(3, 2):t() -- non-contiguous self written in place
  z:index_copy_(2, i64({ 2 }), ember.ones(2, 1))
  check_tensor(z, { { 0, 1, 0 }, { 0, 1, 0 } })
  z:index_fill_(1, i64({ 1 }), 3)
  check_tensor(z, { { 3, 3, 3 }, { 0, 1, 0 } })
end

function T.masked_fill_select_scatter()
  check_tensor(x():masked_fill(x():gt(3), nan), { { 1, 2, 3 }, { nan, nan, nan } })
  check_tensor(ember.tensor({ 1.0, 2, 3 }):masked_fill(ember.tensor({ { true }, { false } }), 0),
    { { 0, 0, 0 }, { 1, 2, 3 } }, 0, "self broadcasts with the mask")
  check_tensor(ember.tensor({ true, false }):masked_fill(ember.tensor({ false, true }), 5), { true, true })
  check_tensor(x():masked_fill(ember.tensor(true), ember.tensor(7)), { { 7, 7, 7 }, { 7, 7, 7 } })
  check_tensor(x():masked_select(ember.tensor({ true, false, true })), { 1, 3, 4, 6 })
  check_shape(ember.zeros(0, 3):masked_select(ember.tensor({ true, false, true })), { 0 })
  check_tensor(x():t():masked_select(ember.tensor({ true, false })), { 1, 2, 3 }, 0, "non-contiguous self")
  check_tensor(x():masked_scatter(ember.tensor({ { false, true, false }, { true, false, true } }),
    ember.tensor({ 10, 20, 30, 40 }, { dtype = "float32" })), { { 1, 10, 3 }, { 20, 5, 30 } })
  local y = x():t()
  y:masked_scatter_(ember.tensor({ true, false }), ember.tensor({ { 7, 8, 9 } }, { dtype = "float32" }))
  check_tensor(y, { { 7, 4 }, { 8, 5 }, { 9, 6 } })
end

function T.scatter_and_scatter_add()
  check_tensor(x():scatter(2, i64({ { 3 }, { 1 } }), ember.tensor({ { 7 }, { 8 } }, { dtype = "float32" })),
    { { 1, 2, 7 }, { 8, 5, 6 } })
  check_tensor(x():scatter(1, i64({ { 2, 1, 2 } }), 0.5), { { 1, 0.5, 3 }, { 0.5, 5, 0.5 } })
  check_tensor(ember.zeros(3):scatter_add(1, i64({ 1, 3, 1, 1 }), ember.tensor({ 1.0, 2, 3, 4 })), { 8, 0, 2 })
  local src = ember.tensor({ { 2, 3 }, { 4, 5 } }, { dtype = "float32" })
  check_tensor(x():scatter(2, i64({ { 1, 1 }, { 3, 3 } }), src, { reduce = "multiply" }), { { 6, 2, 3 }, { 4, 5, 120 } })
  check_tensor(x():scatter(2, i64({ { 1, 1 }, { 3, 3 } }), src, { reduce = "add" }), { { 6, 2, 3 }, { 4, 5, 15 } })
  local y = xi()
  y:scatter_add_(2, i64({ { 1 }, { 1 } }), ember.tensor({ { 10 }, { 20 } }))
  check_tensor(y, { { 11, 2, 3 }, { 24, 5, 6 } })
  check_tensor(x():scatter(1, i64({}):view(0, 3), 9), { { 1, 2, 3 }, { 4, 5, 6 } }, 0, "empty index")
end

function T.nonzero_take_take_along_dim_one_hot()
  check_tensor(ember.tensor({ { 0, 1 }, { nan, 0 } }):nonzero(), { { 1, 2 }, { 2, 1 } }, 0, "NaN is nonzero")
  local n = ember.tensor({ 0, 3, 0, 2 }):nonzero()
  check_shape(n, { 2, 1 })
  check_eq(n.dtype, "int64")
  check_shape(ember.tensor(5):nonzero(), { 1, 0 })
  check_shape(ember.tensor(0):nonzero(), { 0, 0 })
  local tup = ember.tensor({ { true, false }, { true, true } }):nonzero_tuple()
  check_eq(#tup, 2)
  check_tensor(tup[1], { 1, 2, 2 })
  check_tensor(tup[2], { 1, 1, 2 })
  check_tensor(x():take(i64({ { 6, 1 }, { -1, -6 } })), { { 6, 1 }, { 6, 1 } })
  check_tensor(x():t():take(i64({ 2, 3 })), { 4, 2 }, 0, "row-major order of the non-contiguous view")
  check_tensor(x():take_along_dim(i64({ { 3 }, { 1 } }), 2), { { 3 }, { 4 } })
  check_tensor(x():take_along_dim(i64({ { 2 }, { 1 } }), 2), { { 2 }, { 4 } })
  check_tensor(x():take_along_dim(i64({ 6, 1 })), { 6, 1 })
  check_tensor(x():take_along_dim(i64({ { 2, 1, 2 } }), 1), { { 4, 2, 6 } })
  local oh = ember.nn.functional.one_hot(i64({ { 1, 3 }, { 2, 2 } }), 4)
  check_eq(oh.dtype, "int64")
  check_tensor(oh, { { { 1, 0, 0, 0 }, { 0, 0, 1, 0 } }, { { 0, 1, 0, 0 }, { 0, 1, 0, 0 } } })
  check_shape(ember.nn.functional.one_hot(i64({ 3, 1 })), { 2, 3 }, "num_classes = the largest class")
  check_shape(ember.nn.functional.one_hot(i64({}), 3), { 0, 3 })
end

function T.gradients_match_torch()
  local a = ember.tensor({ 1.0, 2, 3 }, { requires_grad = true })
  ;(a:index_select(1, i64({ 1, 1, 3 })) * ember.tensor({ 1.0, 2, 3 })):sum():backward()
  check_tensor(a.grad, { 3, 0, 3 })
  a = ember.tensor({ { 1.0, 2, 3 }, { 4, 5, 6 } }, { requires_grad = true })
  local s = ember.tensor({ { 1.0, 2 }, { 3, 4 } }, { requires_grad = true })
  ;(a:index_add(2, i64({ 3, 3 }), s, { alpha = 3 }) * ar6()):sum():backward()
  check_tensor(a.grad, { { 0, 1, 2 }, { 3, 4, 5 } })
  check_tensor(s.grad, { { 6, 6 }, { 15, 15 } })
  a = ember.tensor({ { 1.0, 2, 3 }, { 4, 5, 6 } }, { requires_grad = true })
  local v = ember.tensor(2.0, { requires_grad = true })
  ;(a:masked_fill(a:gt(2.5), v) * ar6()):sum():backward()
  check_tensor(a.grad, { { 0, 1, 0 }, { 0, 0, 0 } })
  check_eq(v.grad:item(), 14)
  a = ember.tensor({ 1.0, 2, 3 }, { requires_grad = true })
  ;(a:masked_select(ember.tensor({ { true, false, true }, { true, true, false } })) * ember.tensor({ 1.0, 2, 3, 4 }))
    :sum():backward()
  check_tensor(a.grad, { 4, 4, 2 })
  a = ember.tensor({ { 1.0, 2, 3 }, { 4, 5, 6 } }, { requires_grad = true })
  s = ember.tensor({ { 1.0, 2, 3 } }, { requires_grad = true })
  ;(a:scatter(1, i64({ { 2, 1, 2 } }), s) * ar6()):sum():backward()
  check_tensor(a.grad, { { 0, 0, 2 }, { 0, 4, 0 } })
  check_tensor(s.grad, { { 3, 1, 5 } })
  a = ember.tensor({ { 1.0, 2, 3 }, { 4, 5, 6 } }, { requires_grad = true })
  ;(a:take(i64({ 1, -1, 1 })) * ember.tensor({ 1.0, 2, 3 })):sum():backward()
  check_tensor(a.grad, { { 4, 0, 0 }, { 0, 0, 2 } })
end

function T.in_place_writes_keep_history()
  local a = ember.tensor({ 1.0, 2, 3, 4 }, { requires_grad = true })
  local s = ember.tensor({ 10.0, 20 }, { requires_grad = true })
  local y = a * 2
  y:index_copy_(1, i64({ 4, 1 }), s * 3)
  ;(y * ember.tensor({ 1.0, 2, 3, 4 })):sum():backward()
  check_tensor(a.grad, { 0, 4, 6, 0 }, 0, "written elements get no gradient")
  check_tensor(s.grad, { 12, 3 })
  local b = ember.tensor({ { 1.0, 2 }, { 3, 4 } }, { requires_grad = true })
  local z = b * 1
  z[2]:masked_fill_(ember.tensor({ true, false }), 0) -- a view of a non-leaf
  ;(z * z):sum():backward()
  check_tensor(b.grad, { { 2, 4 }, { 0, 8 } })
end

function T.errors_name_op_argument_and_range()
  check_error(function() return x():index_select(2, i64({ 4 })) end, "index_select", "index 4", "1..3")
  check_error(function() return x():index_select(2, i64({ 0 })) end, "index_select", "index 0", "1-based")
  check_error(function() return x():index_select(2, ember.tensor({ 1.0 })) end, "index_select", "int64", "float32")
  check_error(function() return x():index_select(2, i64({ { 1 } })) end, "index_select", "1-d")
  check_error(function() return x():index_select(3, i64({ 1 })) end, "index_select", "dim 3")
  check_error(function() return x():index_add(2, i64({ 1 }), ember.ones(2, 2)) end, "index_add", "source",
    "{2,2}", "{2,3}")
  check_error(function() return x():index_add(2, i64({ 1 }), ember.ones(2, 1, { dtype = "float64" })) end,
    "index_add", "float64", "same dtype")
  check_error(function() return x():index_copy(1, i64({ -1 }), ember.ones(1, 3)) end, "index_copy", "index -1")
  check_error(function() return x():index_fill(1, i64({ 1 }), ember.ones(2)) end, "index_fill", "value", "0-dim")
  check_error(function() return x():masked_fill(ember.ones(2, 3), 1) end, "masked_fill", "mask", "bool")
  check_error(function() return x():masked_fill_(ember.tensor({ { true }, { false }, { true } }), 1) end,
    "masked_fill_", "mask", "{3,1}", "{2,3}")
  check_error(function() return x():masked_select(ember.tensor({ true, false })) end, "masked_select", "{2}", "{2,3}")
  check_error(function() return x():masked_scatter(x():gt(0), ember.ones(3)) end, "masked_scatter", "source",
    "3 elements", "6")
  check_error(function() return x():scatter(2, i64({ { 4 } }), 1) end, "scatter", "index 4", "1..3")
  check_error(function() return x():scatter(2, i64({ 1 }), 1) end, "scatter", "index", "{1}", "{2,3}")
  check_error(function() return x():scatter(2, i64({ { 1, 2 } }), ember.ones(1, 1)) end, "scatter", "src", "{1,1}")
  check_error(function() return x():scatter_add(2, i64({ { 1 } }), ember.ones(1, 1, { dtype = "float64" })) end,
    "scatter_add", "src", "float64")
  check_error(function() return x():scatter(2, i64({ { 1 } }), ember.ones(1, 1), { reduce = "max" }) end,
    "scatter", "reduce", "max")
  check_error(function() return x():take(i64({ 7 })) end, "take", "index 7", "-6..-1")
  check_error(function() return x():take_along_dim(i64({ 1 }), 2) end, "take_along_dim", "dims")
  check_error(function() return ember.nn.functional.one_hot(i64({ 0, 1 })) end, "one_hot", "class 0", "1-based")
  check_error(function() return ember.nn.functional.one_hot(i64({ 3 }), 2) end, "one_hot", "class 3", "1..2")
  check_error(function() return ember.nn.functional.one_hot(i64({})) end, "one_hot", "empty")
  check_error(function() return ember.nn.functional.one_hot(x()) end, "one_hot", "int64")
  local e = ember.ones(2, 3):expand(3, 2, 3) -- in-place writes refuse shared memory, as PyTorch
  check_error(function() return e:scatter_(2, ember.ones(3, 2, 3):long(), ember.ones(3, 2, 3)) end, "scatter_",
    "single memory location")
  local f = ember.ones(1):expand(3) -- the fills still write there, as PyTorch 1.13 (deprecated there)
  f:masked_fill_(ember.tensor({ true }), 2)
  check_tensor(f, { 2, 2, 2 })
  f:index_fill_(1, i64({ 1 }), 3)
  check_tensor(f, { 3, 3, 3 })
  check_error(function() return e:index_add_(1, i64({ 1 }), ember.ones(1, 2, 3)) end, "index_add_", "memory location")
  check_eq(e:index_fill(1, i64({ 1 }), 2):sum():item(), 24, "the out-of-place op copies first")
  -- a bad index stops the write with the rows before it written, as torch's
  -- scatter_ (y.scatter_(1, [[0], [8]], 0) leaves [[0, 2, 3], [4, 5, 6]])
  local y = x()
  check_error(function() return y:scatter_(2, i64({ { 1 }, { 9 } }), 0) end, "scatter_", "index 9")
  check_tensor(y, { { 0, 2, 3 }, { 4, 5, 6 } })
  -- and bumps the version, so a saved self that was partly written is noticed
  local a = ember.ones(2, 3, { requires_grad = true })
  local b = a * 2
  local c = b:pow(2)
  check_error(function() return b:scatter_add_(2, i64({ { 1 }, { 9 } }), ember.ones(2, 1)) end, "scatter_add_",
    "index 9")
  check_tensor(b:detach(), { { 3, 2, 2 }, { 2, 2, 2 } })
  check_error(function() c:sum():backward() end, "modified by an in-place operation")
end

-- ---- Lua advanced indexing (Note [Advanced indexing], runtime/lua/lua_index.c) ----

local function f64(v, rg) return ember.tensor(v, { dtype = "float64", requires_grad = rg }) end
local function x4() return ember.arange(120, { dtype = "float64" }):view(2, 3, 4, 5) end

function T.lua_index_result_shapes_follow_torch()
  local x, i, m = x4(), i64({ 1, 2 }), ember.ones(3, 4):gt(0)
  -- torch: x[:,0,:,i] x[0,:,i] x[:,i,:,i] x[:,i,i] x[i,:,i] x[1,i] x[:,:,i]
  check_shape(x[{ {}, 1, {}, i }], { 2, 4, 2 }, "numbers select first")
  check_shape(x[{ 1, {}, i }], { 3, 2, 5 })
  check_shape(x[{ {}, i, {}, i }], { 2, 2, 4 }, "separated: in front")
  check_shape(x[{ {}, i, i }], { 2, 2, 5 }, "adjacent: in place")
  check_shape(x[{ i, {}, i }], { 2, 3, 5 })
  check_shape(x[{ 2, i }], { 2, 4, 5 })
  check_shape(x[{ {}, {}, i }], { 2, 3, 2, 5 })
  check_shape(x[{ {}, m }], { 2, 12, 5 }, "a mask covers its dims")
  check_shape(x[1][m], { 12, 5 })
  check_shape(x[{ i:view(2, 1), {}, i }], { 2, 2, 3, 5 }, "index tensors broadcast")
  check_eq(x[{ {}, i, {}, i }]:sum():item(), 768)
  check_eq(x[{ {}, i, i }]:sum():item(), 890)
  check_eq(x[{ 2, i, {}, -1 }]:sum():item(), 652)
  check_eq(x[{ {}, m }][{ 2, 7, 3 }]:item(), 92)
end

function T.lua_index_values()
  local x = ember.arange(24, { dtype = "float64" }):view(2, 3, 4)
  check_tensor(x[x:gt(20)], { 21, 22, 23 })
  check_tensor(x[i64({ -1, 1 })][{ {}, 1, 1 }], { 12, 0 }, 0, "negative from the end")
  check_tensor(x[{ {}, i64({ 1, 3 }), i64({ 2, 4 }) }], { { 1, 11 }, { 13, 23 } })
  check_tensor(x[i64(2)][{ 1 }], { 12, 13, 14, 15 }, 0, "a 0-dim index drops the dim")
  check_shape(x[x:gt(99)], { 0 })
  check_shape(x[i64({})], { 0, 3, 4 })
  local r = x[{ {}, i64({ 1 }) }]
  r[1][1][1] = 99
  check_eq(x[1][1][1]:item(), 0, "advanced reads copy")
  check_tensor(x[1]:t()[i64({ 4, 1 })], { { 3, 7, 11 }, { 0, 4, 8 } }, 0, "non-contiguous")
  check_tensor(ember.tensor({ 1, 2, 3 })[ember.tensor({ true, false, true })], { 1, 3 }, 0, "int64 data")
end

function T.lua_index_writes()
  local y = ember.zeros(3, 4)
  y[y:eq(0)] = 2
  y[i64({ 2 })] = 5
  y[{ {}, i64({ 1, 4 }) }] = ember.tensor({ 7.0, 8.0 })
  y[{ i64({ 1, 3 }), i64({ 2, 3 }) }] = -1
  check_tensor(y, { { 7, -1, 2, 8 }, { 7, 5, 5, 8 }, { 7, 2, -1, 8 } })
  local z = ember.zeros(2, 3, 4)
  z[{ i64({ 1, 2 }), {}, i64({ 1, 4 }) }] = ember.tensor({ 1.0, 2, 3 }) -- separated: a copy written back
  check_tensor(z, { { { 1, 0, 0, 0 }, { 2, 0, 0, 0 }, { 3, 0, 0, 0 } }, { { 0, 0, 0, 1 }, { 0, 0, 0, 2 }, { 0, 0, 0, 3 } } })
  local w = ember.zeros(2, 3, 4)
  w[{ {}, i64({ 1, 2 }), i64({ 1, 4 }) }] = ember.tensor({ { 1.0, 2 } })
  check_tensor(w[1], { { 1, 0, 0, 0 }, { 0, 0, 0, 2 }, { 0, 0, 0, 0 } })
  check_tensor(w[2], { { 1, 0, 0, 0 }, { 0, 0, 0, 2 }, { 0, 0, 0, 0 } })
  local b = ember.tensor({ 1, 2, 3, 4 })
  b[b:gt(2)] = ember.tensor({ 30, 40 })
  check_tensor(b, { 1, 2, 30, 40 }, 0, "a mask takes values in order")
  local t = ember.zeros(3, 2):t() -- writes through a non-contiguous tensor
  t[t:eq(0)] = 1
  t[{ i64({ 2 }), i64({ 3 }) }] = 7
  check_tensor(t, { { 1, 1, 1 }, { 1, 1, 7 } })
end

function T.lua_index_gradients_and_history()
  local w = ember.arange(12, { dtype = "float64" }):view(3, 4)
  local a = f64({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 } }, true)
  local v = f64({ 10, 20, 30 }, true)
  local y = a * 2
  y[a:gt(9.5)] = v
  ;(y * w):sum():backward()
  check_tensor(a.grad, { { 0, 2, 4, 6 }, { 8, 10, 12, 14 }, { 16, 0, 0, 0 } })
  check_tensor(v.grad, { 9, 10, 11 })
  a.grad = nil
  local s = f64(3, true)
  y = a * 1
  y[{ i64({ 1, 3 }), i64({ -1, 2 }) }] = s
  y[i64({ 2 })] = f64({ { 1, 1, 1, 1 } })
  ;(y * w):sum():backward()
  check_tensor(a.grad, { { 0, 1, 2, 0 }, { 0, 0, 0, 0 }, { 8, 0, 10, 11 } })
  check_eq(s.grad:item(), 12)
  a.grad = nil
  local r = a[{ {}, i64({ 2, 2, 4 }) }]
  ;(r * r):sum():backward()
  check_tensor(a.grad, { { 0, 8, 0, 8 }, { 0, 24, 0, 16 }, { 0, 40, 0, 24 } })
  a.grad = nil
  local q = a[a:lt(4)]
  ;(q * f64({ 1, 2, 3 })):sum():backward()
  check_tensor(a.grad, { { 1, 2, 3, 0 }, { 0, 0, 0, 0 }, { 0, 0, 0, 0 } })
  a.grad = nil
  local u = f64({ { 1, 2 } }, true)
  y = a * 1
  y[{ {}, i64({ 1, 3 }) }] = u * 3
  ;(y * w):sum():backward()
  check_tensor(a.grad, { { 0, 1, 0, 3 }, { 0, 5, 0, 7 }, { 0, 9, 0, 11 } })
  check_tensor(u.grad, { { 36, 54 } })
  check_error(function() local l = f64({ 1, 2 }, true); l[i64({ 1 })] = 0 end, "leaf")
end

function T.lua_index_errors()
  local x = ember.zeros(2, 3)
  check_error(function() return x[i64({ 3 })] end, "index 3", "size 2", "1..2")
  check_error(function() return x[i64({ 0 })] end, "index 0", "1-based")
  check_error(function() return x[{ {}, i64({ -4 }) }] end, "index -4", "dim 2", "size 3")
  check_error(function() return x[ember.tensor({ 1.0 })] end, "index", "int64", "float32")
  check_error(function() return x[ember.tensor({ true, false, true })] end, "mask", "{3}", "{2,3}")
  check_error(function() return x[{ i64({ 1, 2 }), i64({ 1, 2, 3 }) }] end, "index", "{2}", "{3}", "broadcast")
  check_error(function() return x[{ 1, 1, i64({ 1 }) }] end, "too many indices")
  check_error(function() x[i64({ 1 })] = "a" end, "index", "value", "string")
  check_error(function() x[{ {}, i64({ 1, 2 }) }] = ember.ones(3) end, "index", "{3}")
  check_error(function() x[x:gt(0)] = ember.ones(2, 3) end, "masked_scatter_")
end

function T.scatter_reduce_values_and_gradients()
  local x = ember.tensor({ { 1.0, 2, 3 }, { 4, 5, 6 } })
  local idx = i64({ { 1, 1, 3 }, { 2, 2, 2 } })
  local src = ember.tensor({ { 10.0, 20, 30 }, { -1, 7, nan } })
  local want = { -- PyTorch 1.13, include_self true / false
    sum = { { { 31, 2, 33 }, { 4, nan, 6 } }, { { 30, 2, 30 }, { 4, nan, 6 } } },
    prod = { { { 200, 2, 90 }, { 4, nan, 6 } }, { { 200, 2, 30 }, { 4, nan, 6 } } },
    mean = { { { 31 / 3, 2, 16.5 }, { 4, nan, 6 } }, { { 15, 2, 30 }, { 4, nan, 6 } } },
    amax = { { { 20, 2, 30 }, { 4, nan, 6 } }, { { 20, 2, 30 }, { 4, nan, 6 } } },
    amin = { { { 1, 2, 3 }, { 4, nan, 6 } }, { { 10, 2, 30 }, { 4, nan, 6 } } },
  }
  for red, w in pairs(want) do
    check_tensor(x:scatter_reduce(2, idx, src, red), w[1], 1e-6, red)
    check_tensor(ember.scatter_reduce(x, 2, idx, src, red, { include_self = false }), w[2], 1e-6, red .. " excluding self")
  end
  local xi, si = xi(), ember.tensor({ { 10, 20, 30 }, { -1, 7, 2 } })
  check_tensor(xi:scatter_reduce(2, idx, si, "mean"), { { 10, 2, 16 }, { 4, 3, 6 } }, 0, "integer mean floors")
  check_tensor(xi:scatter_reduce(2, idx, si, "mean", { include_self = false }), { { 15, 2, 30 }, { 4, 2, 6 } })
  local y = x:t():contiguous():t() -- non-contiguous in place
  y:scatter_reduce_(2, idx, ember.ones(2, 3), "sum")
  check_tensor(y, { { 3, 2, 4 }, { 4, 8, 6 } })
  local gw = ember.arange(6, { dtype = "float64" }):view(2, 3)
  local grads = { -- PyTorch 1.13: a.grad, s.grad for include_self true and false
    sum = { { { 0, 1, 2 }, { 3, 4, 5 } }, { { 0, 0, 2 }, { 4, 4, 4 } }, { { 0, 1, 0 }, { 3, 0, 5 } }, { { 0, 0, 2 }, { 4, 4, 4 } } },
    mean = { { { 0, 1, 1 }, { 3, 1, 5 } }, { { 0, 0, 1 }, { 1, 1, 1 } }, { { 0, 1, 0 }, { 3, 0, 5 } },
      { { 0, 0, 2 }, { 4 / 3, 4 / 3, 4 / 3 } } },
    amax = { { { 0, 1, 0 }, { 3, 0, 5 } }, { { 0, 0, 2 }, { 0, 4, 0 } }, { { 0, 1, 0 }, { 3, 0, 5 } }, { { 0, 0, 2 }, { 0, 4, 0 } } },
    amin = { { { 0, 1, 2 }, { 3, 0, 5 } }, { { 0, 0, 0 }, { 4, 0, 0 } }, { { 0, 1, 0 }, { 3, 0, 5 } }, { { 0, 0, 2 }, { 4, 0, 0 } } },
  }
  for red, g in pairs(grads) do
    for k, inc in ipairs({ true, false }) do
      local a = f64({ { 1, 2, 3 }, { 4, 5, 6 } }, true)
      local s = f64({ { 10, 2, 30 }, { -1, 7, 2 } }, true)
      ;(a:scatter_reduce(2, idx, s, red, { include_self = inc }) * gw):sum():backward()
      check_tensor(a.grad, g[2 * k - 1], 1e-6, red .. " self grad")
      check_tensor(s.grad, g[2 * k], 1e-6, red .. " src grad")
    end
  end
  -- prod with zeros: the product of the other factors (values from PyTorch 1.13)
  local w = (ember.arange(8, { dtype = "float64" }) + 1):view(2, 4)
  for k, want in ipairs({
    { { { 2, 0, 3, 4 }, { 5, 6, 0, 40 } }, { { 1, 0, 0 }, { 0, 0, 8 } } },
    { { { 0, 0, 3, 4 }, { 5, 6, 0, 0 } }, { { 1, 6, 0 }, { 0, 0, 8 } } },
  }) do
    local a = f64({ { 1, 0, 2, 3 }, { 2, 3, 0, 1 } }, true)
    local s = f64({ { 2, 0, 3 }, { 0, 0, 5 } }, true)
    local r = a:scatter_reduce(2, i64({ { 1, 2, 2 }, { 3, 3, 4 } }), s, "prod", { include_self = k == 1 })
    ;(r * w):sum():backward()
    check_tensor(a.grad, want[1], 1e-12, "prod self grad")
    check_tensor(s.grad, want[2], 1e-12, "prod src grad")
  end
  check_error(function() return x:scatter_reduce(2, idx, src, "max") end, "scatter_reduce", "reduce", "max")
  check_error(function() return x:scatter_reduce(2, idx, si, "sum") end, "scatter_reduce", "src", "int64")
end

function T.index_put_and_accumulate()
  local x = ember.zeros(3, 4, { dtype = "float64" })
  check_tensor(x:index_put({ i64({ 1, 1, 3 }), i64({ 2, 2, 4 }) }, f64({ 1, 2, 3 }), { accumulate = true }),
    { { 0, 3, 0, 0 }, { 0, 0, 0, 0 }, { 0, 0, 0, 3 } }, 0, "repeats accumulate")
  check_tensor(ember.index_put(x, { i64({ 1, 3 }) }, 5), { { 5, 5, 5, 5 }, { 0, 0, 0, 0 }, { 5, 5, 5, 5 } })
  check_tensor(x, { { 0, 0, 0, 0 }, { 0, 0, 0, 0 }, { 0, 0, 0, 0 } }, 0, "index_put copies")
  check(rawequal(x:index_put_({ i64({ 2 }) }, f64({ 1, 2, 3, 4 })), x), "index_put_ returns self")
  check_tensor(x[2], { 1, 2, 3, 4 })
  x:index_put_({ x:gt(2) }, 0.5, { accumulate = true })
  check_tensor(x[2], { 1, 2, 3.5, 4.5 }, 0, "a mask in the list")
  local y = ember.zeros(3)
  y[i64({ 1 })] = f64({ 2.5 }) -- values cast to the target's dtype
  check_tensor(y, { 2.5, 0, 0 })
  local a = ember.tensor({ 1.0, 2, 3 }, { requires_grad = true })
  local v = ember.tensor({ 5.0, 6 }, { requires_grad = true })
  local z = (a * 2):index_put({ i64({ 1, 1 }) }, v, { accumulate = true })
  ;(z * ember.tensor({ 1.0, 2, 3 })):sum():backward()
  check_tensor(a.grad, { 2, 4, 6 }) -- PyTorch 1.13
  check_tensor(v.grad, { 1, 1 })
  check_error(function() return x:index_put({ 1 }, 2) end, "index_put", "indices", "element 1", "number")
  check_error(function() return x:index_put({}, 2) end, "index_put", "indices", "empty")
  check_error(function() return x:index_put({ i64({ 1 }) }, 2, { acc = true }) end, "index_put", "acc")
  check_error(function() return x:index_put({ i64({ 9 }) }, 2) end, "index 9", "size 3")
end

return T
