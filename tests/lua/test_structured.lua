-- test_structured.lua -- out= variants of the structured families (add sub
-- mul div matmul sum; Note [Structured kernels] in
-- runtime/kernels/em_structured.h): the out= rules (shape, empty out takes
-- the result's shape, dtype casts, overlap, autograd), and that the
-- functional and in-place forms share the family's meta checks.
local T = {}

function T.out_returns_same_value()
  local a, b = ember.tensor({ 1, 2, 3 }), ember.tensor({ 10, 20, 30 })
  local c = ember.zeros(3)
  local r = ember.add(a, b, { out = c })
  check(rawequal(r, c), "ember.add returns out itself")
  check_tensor(c, { 11, 22, 33 })
  r = a:add(b, { alpha = 2, out = c })
  check(rawequal(r, c), "a:add returns out itself")
  check_tensor(c, { 21, 42, 63 })
  check(rawequal(ember.sub(a, b, { out = c }), c))
  check_tensor(c, { -9, -18, -27 })
  check(rawequal(a:mul(b, { out = c }), c))
  check_tensor(c, { 10, 40, 90 })
  check(rawequal(ember.div(b, a, { out = c }), c))
  check_tensor(c, { 10, 10, 10 })
  -- the functional forms still allocate
  local f = ember.add(a, b)
  check(not rawequal(f, a) and not rawequal(f, b))
  check_tensor(f, { 11, 22, 33 })
end

function T.out_broadcast_and_scalars()
  local a = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  local c = ember.empty(2, 3)
  ember.add(a, ember.tensor({ 1, 1, 1 }), { out = c })
  check_tensor(c, { 2, 3, 4, 5, 6, 7 })
  ember.mul(a, 2, { out = c })
  check_tensor(c, { 2, 4, 6, 8, 10, 12 })
  -- a non-contiguous out
  local t = ember.zeros(3, 2)
  local tv = t:t()
  ember.sub(a, 1, { out = tv })
  check_tensor(t, { 0, 3, 1, 4, 2, 5 })
end

function T.out_shape_rules()
  -- as PyTorch's resize_output: an out of another shape takes the result's
  -- (Note [out= resizing] in runtime/kernels/em_structured.h)
  local a, b = ember.ones(2, 3), ember.ones(2, 3)
  local o = ember.zeros(3, 2)
  check(rawequal(ember.add(a, b, { out = o }), o))
  check_shape(o, { 2, 3 })
  check_tensor(o, { 2, 2, 2, 2, 2, 2 })
  local small = ember.zeros(2, 5) -- shrinks
  ember.mul(ember.ones(3), 2, { out = small })
  check_shape(small, { 3 })
  check_tensor(small, { 2, 2, 2 })
  local e = ember.empty(0) -- grows from nothing
  local r = ember.add(a, b, { out = e })
  check(rawequal(r, e))
  check_shape(e, { 2, 3 })
  check_tensor(e, { 2, 2, 2, 2, 2, 2 })
  local e2 = ember.zeros(0, 4)
  ember.matmul(ember.ones(2, 3), ember.ones(3, 4), { out = e2 })
  check_shape(e2, { 2, 4 })
  check_tensor(e2, { 3, 3, 3, 3, 3, 3, 3, 3 })
  -- an empty view of a base grows the shared storage: the base sees the
  -- first elements of the result (as in PyTorch)
  local base = ember.zeros(4)
  local v = base:narrow(1, 1, 0)
  ember.add(ember.arange(0, 6):float():view(2, 3), 1, { out = v })
  check_shape(v, { 2, 3 })
  check_tensor(v, { 1, 2, 3, 4, 5, 6 })
  check_tensor(base, { 1, 2, 3, 4 })
  -- sum's keepdim shape too
  local s = ember.zeros(5)
  ember.sum(a, 2, true, { out = s })
  check_shape(s, { 2, 1 })
  check_tensor(s, { 3, 3 })
end

function T.out_dtype_rules()
  local i = ember.tensor({ 1, 2, 3 }, { dtype = "int64" })
  local f = ember.tensor({ 0.5, 0.5, 0.5 })
  -- float result into an integer out: refused, naming both dtypes
  check_error(function() return ember.add(i, f, { out = ember.zeros(3, { dtype = "int64" }) }) end,
    "add", "float32", "int64", "can't be cast")
  check_error(function() return ember.div(i, i, { out = ember.zeros(3, { dtype = "int32" }) }) end,
    "div", "float32", "int32")
  -- an integer result into a float64 out is a cast
  local o = ember.zeros(3, { dtype = "float64" })
  ember.add(i, i, { out = o })
  check_eq(o.dtype, ember.float64)
  check_tensor(o, { 2, 4, 6 })
  -- a float32 result into float64 is computed in float32, then cast
  ember.mul(f, f, { out = o })
  check_tensor(o, { 0.25, 0.25, 0.25 })
  -- into bool: refused; bool into int: allowed
  check_error(function() return ember.add(i, i, { out = ember.zeros(3, { dtype = "bool" }) }) end,
    "add", "int64", "bool")
  local bo = ember.tensor({ true, false, true })
  local io = ember.zeros(3, { dtype = "int32" })
  ember.mul(bo, bo, { out = io })
  check_tensor(io, { 1, 0, 1 })
  -- sum: dtype option and out dtype
  local s = ember.zeros(2, { dtype = "float64" })
  ember.sum(ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "int32" }), 2, { out = s })
  check_tensor(s, { 3, 7 })
  -- without dtype, sum computes in out's dtype (PyTorch): floats cast to int64 first
  local si = ember.zeros({}, { dtype = "int64" })
  ember.sum(ember.tensor({ 1e8, 1.5, -1e8, 3 }), { out = si })
  check_tensor(si, { 4 })
  local sb = ember.zeros({}, { dtype = "bool" })
  ember.sum(ember.tensor({ 1, 2 }), { out = sb })
  check_tensor(sb, { true })
  local sd = ember.zeros({}, { dtype = "float64" })
  ember.sum(ember.tensor({ 1e8, 1, -1e8, 3 }), { out = sd })
  check_tensor(sd, { 4 }, 0)
  -- with dtype, out must have it
  check_error(function() return ember.sum(f, 1, { dtype = "float64", out = ember.zeros({}) }) end,
    "sum", "out=", "float64", "float32")
end

function T.out_overlap()
  local x = ember.arange(1, 7)
  -- out overlapping an input partially: refused
  check_error(function() return ember.add(x:narrow(1, 1, 4), 1, { out = x:narrow(1, 2, 4) }) end,
    "add", "single memory location")
  -- out being an input itself is fine for elementwise ops
  local y = ember.tensor({ 1, 2, 3 })
  ember.add(y, y, { out = y })
  check_tensor(y, { 2, 4, 6 })
  -- matmul into one of its operands: computed first, then written
  local m = ember.tensor({ { 1, 2 }, { 3, 4 } })
  ember.matmul(m, m, { out = m })
  check_tensor(m, { 7, 10, 15, 22 })
  -- out with internal overlap (expanded): refused
  check_error(function() return ember.add(ember.ones(3), 1, { out = ember.zeros(1):expand(3) }) end,
    "add")
end

function T.out_autograd()
  local a = ember.ones(3, { requires_grad = true })
  local c = ember.zeros(3)
  check_error(function() return ember.add(a, 1, { out = c }) end,
    "add", "out= arguments don't support automatic differentiation", "requires grad")
  check_error(function() return a:sum({ out = ember.zeros({}) }) end, "sum", "out=")
  check_error(function() return ember.matmul(ember.ones(2, 2), ember.ones(2, 2), { out = ember.zeros(2, 2, { requires_grad = true }) }) end,
    "matmul", "out=")
  -- under no_grad it writes and records nothing
  ember.no_grad(function()
    ember.add(a, 1, { out = c })
  end)
  check_tensor(c, { 2, 2, 2 })
  check(c.grad_fn == nil and not c.requires_grad)
  -- functional and in-place keep their derivatives
  local x = ember.tensor({ 1.0, 2, 3 }, { requires_grad = true })
  local y = ember.tensor({ 4.0, 5, 6 }, { requires_grad = true })
  local z = (x * y):sum()
  z:backward()
  check_tensor(x.grad, { 4, 5, 6 })
  check_tensor(y.grad, { 1, 2, 3 })
end

function T.out_version_bump()
  local a = ember.ones(3, { requires_grad = true })
  local c = ember.ones(3)
  local y = a * c -- saves c
  ember.no_grad(function() ember.add(c, 1, { out = c }) end)
  check_error(function() y:sum():backward() end, "modified")
end

function T.sum_out()
  local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  local c = ember.zeros(3)
  check(rawequal(x:sum(1, { out = c }), c))
  check_tensor(c, { 5, 7, 9 })
  local k = ember.zeros(2, 1)
  ember.sum(x, 2, true, { out = k })
  check_tensor(k, { 6, 15 })
  local all = ember.zeros({})
  x:sum({ out = all })
  check_tensor(all, { 21 })
  local d = ember.zeros(2, { dtype = "float64" })
  ember.sum(x, 2, { dtype = "float64", out = d })
  check_tensor(d, { 6, 15 })
  check_error(function() return x:sum(3, { out = c }) end, "sum", "dim 3")
end

function T.matmul_out()
  local a = ember.tensor({ { 1.0, 2 }, { 3, 4 } })
  local v = ember.tensor({ 1.0, 1 })
  local c = ember.zeros(2)
  check(rawequal(ember.matmul(a, v, { out = c }), c))
  check_tensor(c, { 3, 7 })
  -- out must have the operands' dtype (PyTorch)
  check_error(function() return a:matmul(a, { out = ember.zeros(2, 2, { dtype = "float64" }) }) end,
    "matmul", "out=", "float32", "float64")
  local c2 = ember.zeros(2, 2)
  a:matmul(a, { out = c2 })
  check_tensor(c2, { 7, 10, 15, 22 })
  -- a transposed (non-contiguous) out
  local ct = ember.zeros(2, 2)
  a:matmul(a, { out = ct:t() })
  check_tensor(ct, { 7, 15, 10, 22 })
  -- batched, broadcast
  local bo = ember.zeros(3, 2, 2)
  ember.matmul(ember.ones(3, 2, 2), a, { out = bo })
  check_tensor(bo, { 4, 6, 4, 6, 4, 6, 4, 6, 4, 6, 4, 6 })
  check_error(function() return ember.matmul(a, ember.ones(3), { out = c }) end, "matmul", "{2,2}", "{3}")
end

function T.inplace_shares_meta()
  local x = ember.ones(3)
  check_error(function() return x:add_(ember.ones(2, 3)) end, "add_", "{3}", "{2,3}")
  local i = ember.ones(3, { dtype = "int64" })
  check_error(function() return i:add_(ember.ones(3)) end, "add_", "float32", "int64", "can't be cast")
  check_error(function() return i:div_(i) end, "div_", "float32", "int64")
  local f = ember.ones(3)
  f:add_(ember.ones(3, { dtype = "float64" }))
  check_eq(f.dtype, ember.float32)
  check_tensor(f, { 2, 2, 2 })
end

function T.unknown_options_still_error()
  local a = ember.ones(2)
  check_error(function() return ember.add(a, a, { outt = a }) end, "bad option 'outt'", "add")
  check_error(function() return ember.add(a, a, { out = a, foo = 1 }) end, "bad option 'foo'", "add")
  check_error(function() return ember.add(a, a, { out = 3 }) end, "add", "argument 'out' must be a tensor", "number")
  check_error(function() return ember.ones({}):add(1, { out = 3 }) end, "add", "argument 'out' must be a tensor")
end

return T
