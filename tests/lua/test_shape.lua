-- test_shape.lua -- the shape family (schema/ops/shape.yaml): values against
-- PyTorch 1.13, views sharing storage, dtypes, empty and 0-dim tensors,
-- non-contiguous inputs, gradients, and error messages.
local ember = ember or require "ember"
local T = {}

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end
local function x234() return ember.arange(24, { dtype = "float64" }):reshape(2, 3, 4) end
local function list_tolist(l)
  local r = {}
  for i, t in ipairs(l) do r[i] = t:tolist() end
  return r
end
local function same(a, b) -- deep equality of nested Lua tables / numbers
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  if #a ~= #b then return false end
  for i = 1, #a do if not same(a[i], b[i]) then return false end end
  return true
end

-- ---- reshaping views ----

function T.flatten_matches_pytorch()
  local x = x234()
  check_shape(x:flatten(), { 24 })
  check_shape(x:flatten(2), { 2, 12 })
  check_shape(ember.flatten(x, 1, 2), { 6, 4 })
  check_shape(x:flatten(-2, -1), { 2, 12 })
  check_tensor(x:transpose(1, 3):flatten():narrow(1, 1, 8), { 0, 12, 4, 16, 8, 20, 1, 13 })
  check_shape(f64(3):flatten(), { 1 })
  local same_dim = x:flatten(2, 2) -- one dim: self itself (PyTorch)
  check_shape(same_dim, { 2, 3, 4 })
  same_dim[2][3][4] = -7
  check_eq(x[2][3][4]:item(), -7)
  -- a view of a contiguous tensor: writes reach the base
  local v = x:flatten()
  v[1] = 100
  check_eq(x[1][1][1]:item(), 100)
  check_shape(ember.zeros(2, 0, 3):flatten(2), { 2, 0 })
end

function T.unflatten_movedim_swapaxes()
  local x = x234()
  check_shape(x:unflatten(3, { 2, 2 }), { 2, 3, 2, 2 })
  check_shape(x:unflatten(-1, { -1, 1 }), { 2, 3, 4, 1 })
  check_shape(x:transpose(1, 3):unflatten(1, { 2, 2 }), { 2, 2, 3, 2 }) -- always a view
  check_tensor(x:transpose(1, 3):unflatten(1, { 2, 2 })[2][1][1], { 2, 14 })
  check_shape(ember.movedim(x, { 1, 2 }, { 3, 1 }), { 3, 4, 2 })
  check_shape(x:movedim(1, -1), { 3, 4, 2 })
  check_shape(x:moveaxis(3, 1), { 4, 2, 3 })
  check_shape(f64(1):movedim(1, 1), {})
  check_shape(x:swapaxes(1, 3), { 4, 3, 2 })
  check_shape(ember.swapdims(x, 1, 2), { 3, 2, 4 })
  local m = x:movedim(3, 1)
  m[1][1][1] = -5
  check_eq(x[1][1][1]:item(), -5, "movedim is a view")
end

function T.broadcast_to_and_tensors()
  local v = f64({ 1, 2, 3 })
  check_tensor(v:broadcast_to({ 2, 3 }), { 1, 2, 3, 1, 2, 3 })
  check_shape(ember.broadcast_to(f64({ { 1 }, { 2 } }), { 3, 2, -1 }), { 3, 2, 1 })
  local r = ember.broadcast_tensors({ ember.zeros(3, 1), ember.ones(2), ember.tensor(5) })
  check_eq(#r, 3)
  for i = 1, 3 do check_shape(r[i], { 3, 2 }) end
  check_tensor(r[3], { 5, 5, 5, 5, 5, 5 })
  check_eq(#ember.broadcast_tensors({}), 0)
  -- a tensor that has the shape already comes back itself (PyTorch), so it
  -- shares its .grad
  local a = f64({ 1, 2 }):requires_grad_()
  local b = ember.broadcast_tensors({ a, f64({ 3 }) })[1]
  check(b.is_leaf and b.requires_grad)
  b:sum():backward()
  check_tensor(a.grad, { 1, 1 })
  check_tensor(b.grad, { 1, 1 })
end

-- ---- flips, rolls, repeats ----

function T.flip_roll_rot90_match_pytorch()
  local x = x234()
  check_tensor(x:flip(1, 3)[1][1], { 15, 14, 13, 12 })
  check_tensor(ember.flip(x, { -1 })[2][3], { 23, 22, 21, 20 })
  check_tensor(x:flip({}), x:tolist())
  check_tensor(ember.roll(x, { 1, -2 }, { 1, 3 })[1], { { 14, 15, 12, 13 }, { 18, 19, 16, 17 }, { 22, 23, 20, 21 } })
  check_tensor(ember.arange(4):reshape(2, 2):roll(-5), { 1, 2, 3, 0 })
  check_tensor(ember.arange(6):reshape(2, 3):t():roll(1), { 5, 0, 3, 1, 4, 2 }) -- non-contiguous, flattened
  check_tensor(ember.arange(3):roll({ 1, 1 }, { 1, 1 }), { 1, 2, 0 }) -- a dim named twice rolls twice
  check_shape(ember.zeros(0, 3):roll(1, 1), { 0, 3 })
  check_tensor(x:rot90(1, { 2, 3 })[1], { { 3, 7, 11 }, { 2, 6, 10 }, { 1, 5, 9 }, { 0, 4, 8 } })
  local m = ember.arange(6, { dtype = "float64" }):reshape(2, 3)
  check_tensor(m:rot90(), { { 2, 5 }, { 1, 4 }, { 0, 3 } })
  check_tensor(m:rot90(-1), { { 3, 0 }, { 4, 1 }, { 5, 2 } })
  check_tensor(m:rot90(6), { { 5, 4, 3 }, { 2, 1, 0 } })
  check_tensor(m:rot90(4), m:tolist())
  -- a new tensor, not a view (PyTorch transposes its flip in place), with
  -- PyTorch's strides: flatten copies it
  check(not m:rot90():is_contiguous() and m:rot90(2):is_contiguous())
  local r = m:rot90(-3)
  r[1][1] = 100
  check_eq(m[1][3]:item(), 2)
  check_tensor(r, { { 100, 5 }, { 1, 4 }, { 0, 3 } })
  do
    local g <close> = ember.no_grad()
    r = ember.zeros(2, 3):rot90()
  end
  r[1] = ember.ones(2, { requires_grad = true }):sum() -- not a no_grad view: allowed
  check_tensor(m:fliplr(), { { 2, 1, 0 }, { 5, 4, 3 } })
  check_tensor(m:flipud(), { { 3, 4, 5 }, { 0, 1, 2 } })
end

-- flip keeps self's layout as PyTorch's empty_like(Preserve) does (strides
-- from PyTorch 1.13), so what a later view or reshape of it does matches
function T.flip_keeps_the_layout()
  local function st(x) return table.concat(x:flip(1):stride(), ",") end
  check_eq(st(ember.zeros(2, 3, 4):permute(3, 1, 2)), "1,12,4")
  check_eq(st(ember.zeros(4, 6)[{ {}, { 1, 6, 2 } }]:t()), "1,3")
  check_eq(st(ember.zeros(3, 1):expand(3, 4):t()), "3,1")
  check_eq(st(ember.zeros(2, 3, 4):permute(3, 1, 2)[{ {}, {}, { 2, 3 } }]), "1,8,4")
  check_eq(st(ember.zeros(3, 1, 2):permute(2, 3, 1)), "2,1,2")
  check_eq(st(ember.zeros(2, 1, 3):expand(2, 4, 3):permute(2, 1, 3)), "6,3,1")
  local x = ember.arange(24):reshape(2, 3, 4):permute(3, 1, 2)
  check_tensor(x:flip(1, 3):contiguous():flatten():narrow(1, 1, 8), { 11, 7, 3, 23, 19, 15, 10, 6 })
  check_eq(table.concat(ember.zeros(2, 3):rot90():stride(), ","), "1,3")
end

function T.flip_roll_every_dtype()
  for _, dt in ipairs({ "float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64" }) do
    local x = ember.tensor({ 1, 2, 3 }, { dtype = dt })
    check_eq(x:flip(1).dtype, dt)
    check_tensor(x:flip(1), { 3, 2, 1 }, 0, dt)
    check_tensor(x:roll(1), { 3, 1, 2 }, 0, dt)
    check_tensor(x["repeat"](x, 2), { 1, 2, 3, 1, 2, 3 }, 0, dt)
    check_tensor(ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = dt }):tril(), { 1, 0, 3, 4 }, 0, dt)
  end
  local b = ember.tensor({ true, false, false })
  check(same(b:roll(1):tolist(), { false, true, false }))
  check(same(ember.ones(2, 3, { dtype = "bool" }):tril():tolist(), { { true, false, false }, { true, true, false } }))
  check_tensor(ember.tensor({ 1.5, 2, 3 }, { dtype = "float16" }):flip(1), { 3, 2, 1.5 })
  -- NaN and inf move like any value
  local s = f64({ 0 / 0, 1 / 0, -1 / 0 }):flip(1)
  check(s[1]:item() == -1 / 0 and s[2]:item() == 1 / 0 and s[3]:item() ~= s[3]:item())
end

function T.repeat_tile_match_pytorch()
  local y = ember.arange(6):reshape(2, 3)
  local yt = y:t()
  check_tensor(yt["repeat"](yt, 2, 2), { { 0, 3, 0, 3 }, { 1, 4, 1, 4 }, { 2, 5, 2, 5 }, { 0, 3, 0, 3 },
    { 1, 4, 1, 4 }, { 2, 5, 2, 5 } })
  check_shape(y["repeat"](y, 2, 1, 2), { 2, 2, 6 })
  check_shape(y["repeat"](y, 0, 1), { 0, 3 })
  check_shape(ember.tensor(7)["repeat"](ember.tensor(7), {}), {})
  check_shape(y:tile(2), { 2, 6 })
  check_shape(ember.tile(y, { 2, 1, 1 }), { 2, 2, 3 })
  -- gradient: the tiles' gradients sum
  local a = f64({ 1, 2 }):requires_grad_()
  local r = a["repeat"](a, 3, 2)
  r:sum():backward()
  check_tensor(a.grad, { 6, 6 })
end

function T.repeat_interleave_matches_pytorch()
  check_tensor(ember.repeat_interleave(ember.tensor({ 2, 0, 1 })), { 1, 1, 3 })
  check_eq(ember.repeat_interleave(ember.tensor({ 1, 2 }, { dtype = "int32" })).dtype, "int32")
  local y = ember.arange(6):reshape(2, 3)
  check_tensor(y:repeat_interleave(2), { 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5 })
  check_tensor(y:repeat_interleave(2, 1), { { 0, 1, 2 }, { 0, 1, 2 }, { 3, 4, 5 }, { 3, 4, 5 } })
  check_tensor(y:t():repeat_interleave(ember.tensor({ 1, 0, 2 }), 1), { { 0, 3 }, { 2, 5 }, { 2, 5 } })
  check_tensor(ember.repeat_interleave(ember.tensor({ { 1, 2 }, { 3, 4 } }), ember.tensor({ 2 })),
    { 1, 1, 2, 2, 3, 3, 4, 4 })
  check_tensor(y:repeat_interleave(2, 2, { output_size = 6 })[1], { 0, 0, 1, 1, 2, 2 })
  check_shape(ember.zeros(0):repeat_interleave(3), { 0 })
  -- always a copy, also when nothing repeats (PyTorch)
  local z = ember.zeros(3)
  local c = z:repeat_interleave(1)
  c[1] = 5
  check_eq(z[1]:item(), 0)
  check_tensor(ember.tensor(4):repeat_interleave(2), { 4, 4 })
  local a = f64({ 1, 2, 3 }):requires_grad_()
  a:repeat_interleave(ember.tensor({ 1, 0, 3 })):sum():backward()
  check_tensor(a.grad, { 1, 0, 3 })
end

-- ---- triangles, diagonals, trace ----

function T.tril_triu_diagonal_match_pytorch()
  local x = x234()
  check_tensor(x:tril(1)[2], { { 12, 13, 0, 0 }, { 16, 17, 18, 0 }, { 20, 21, 22, 23 } })
  check_tensor(ember.triu(x, -1)[1], { { 0, 1, 2, 3 }, { 4, 5, 6, 7 }, { 0, 9, 10, 11 } })
  check_tensor(x:tril(-10), ember.zeros(2, 3, 4):tolist())
  check_tensor(x:triu(-10), x:tolist())
  check_tensor(x:transpose(2, 3):tril()[1], { { 0, 0, 0 }, { 1, 5, 0 }, { 2, 6, 10 }, { 3, 7, 11 } })
  check_tensor(x:diagonal(1, 2, 3), { { 1, 6, 11 }, { 13, 18, 23 } })
  check_tensor(ember.diagonal(x, 0, 1, 3), { { 0, 13 }, { 4, 17 }, { 8, 21 } })
  check_shape(x:diagonal(5, 2, 3), { 2, 0 })
  local d = x:diagonal(0, 2, 3)
  d[1][1] = -1
  check_eq(x[1][1][1]:item(), -1, "diagonal is a view")
  check_tensor(ember.diag_embed(f64({ { 1, 2 }, { 3, 4 } }), -1, 1, 3),
    { { { 0, 0, 0 }, { 0, 0, 0 } }, { { 1, 0, 0 }, { 3, 0, 0 } }, { { 0, 2, 0 }, { 0, 4, 0 } } })
  check_tensor(ember.diag(ember.tensor({ 1, 2 }), 1), { { 0, 1, 0 }, { 0, 0, 2 }, { 0, 0, 0 } })
  check_tensor(ember.arange(12):reshape(3, 4):diag(-1), { 4, 9 })
  local t = ember.arange(12, { dtype = "float64" }):reshape(3, 4):trace()
  check_eq(t:item(), 15)
  check_eq(ember.ones(2, 2, { dtype = "int8" }):trace().dtype, "int64")
  check_eq(ember.ones(2, 2, { dtype = "float16" }):trace().dtype, "float16")
  -- non-square: the gradient is the diagonal's (PyTorch 1.13's trace_backward
  -- also marks element {3,1})
  local a = ember.ones(3, 1, { dtype = "float64" }):requires_grad_()
  a:trace():backward()
  check_tensor(a.grad, { 1, 0, 0 })
  check_tensor(ember.arange(4):reshape(1, 4):diag(-2), {}) -- PyTorch overflows here
end

-- ---- slicing, unfold, meshgrid ----

function T.narrow_copy_unfold_meshgrid()
  local x = x234()
  local c = x:narrow_copy(3, 2, 2)
  check_tensor(c[1][1], { 1, 2 })
  c[1][1][1] = 99
  check_eq(x[1][1][2]:item(), 1, "narrow_copy copies")
  -- a non-contiguous self is read through its strides (PyTorch 1.13's CPU
  -- kernel reads it as contiguous: ember's answer is narrow's)
  local y = ember.arange(6, { dtype = "float64" }):reshape(2, 3):t()
  check_tensor(ember.narrow_copy(y, 2, 1, 2), { 0, 3, 1, 4, 2, 5 })
  check_tensor(y:narrow_copy(1, 2, 2), { 1, 4, 2, 5 })
  check_tensor(x:unfold(3, 3, 1)[2][3], { { 20, 21, 22 }, { 21, 22, 23 } })
  check_shape(x:unfold(1, 1, 2), { 1, 3, 4, 1 })
  check_shape(x:unfold(3, 2, 3), { 2, 3, 1, 2 })
  check_shape(f64(5):unfold(1, 1, 1), { 1 })
  local u = x:unfold(3, 2, 2)
  u[1][1][1][1] = 42
  check_eq(x[1][1][1]:item(), 42, "unfold is a view")
  local g = ember.meshgrid({ ember.tensor({ 1, 2 }), ember.tensor({ 3, 4, 5 }) })
  check_tensor(g[1], { { 1, 1, 1 }, { 2, 2, 2 } })
  check_tensor(g[2], { { 3, 4, 5 }, { 3, 4, 5 } })
  local h = ember.meshgrid({ ember.tensor({ 1, 2 }), ember.tensor({ 3, 4, 5 }), ember.tensor(7) }, { indexing = "xy" })
  check_shape(h[1], { 3, 2, 1 })
  check_tensor(h[2][1], { { 3 }, { 3 } })
end

-- ---- atleast, stacking, splitting ----

function T.atleast_and_stacks_match_pytorch()
  check_shape(ember.atleast_1d(ember.tensor(1)), { 1 })
  check_shape(ember.atleast_2d(ember.tensor({ 1, 2 })), { 1, 2 })
  check_shape(ember.atleast_3d(ember.tensor({ 1, 2 })), { 1, 2, 1 })
  check_shape(ember.atleast_3d(ember.zeros(2, 3)), { 2, 3, 1 })
  check_shape(ember.atleast_3d(ember.zeros(2, 3, 4, 5)), { 2, 3, 4, 5 })
  local l = ember.atleast_2d({ ember.tensor(1), ember.zeros(3) })
  check_shape(l[1], { 1, 1 }); check_shape(l[2], { 1, 3 })
  check_tensor(ember.hstack({ ember.tensor({ 1, 2 }), ember.tensor({ 3 }) }), { 1, 2, 3 })
  check_shape(ember.hstack({ ember.tensor(1), ember.tensor(2) }), { 2 })
  check_shape(ember.hstack({ ember.zeros(2, 1), ember.zeros(2, 3) }), { 2, 4 })
  check_tensor(ember.vstack({ ember.tensor({ 1, 2 }), ember.tensor({ { 3, 4 } }) }), { { 1, 2 }, { 3, 4 } })
  check_shape(ember.row_stack({ ember.zeros(3), ember.zeros(3) }), { 2, 3 })
  check_shape(ember.dstack({ ember.tensor({ 1, 2 }), ember.tensor({ 3, 4 }) }), { 1, 2, 2 })
  check_tensor(ember.column_stack({ ember.tensor({ 1, 2 }), ember.zeros(2, 2, { dtype = "int64" }) }),
    { { 1, 0, 0 }, { 2, 0, 0 } })
  check_shape(ember.column_stack({ ember.tensor(1), ember.tensor(2) }), { 1, 2 })
  -- dtype promotes over the list, as cat
  check_eq(ember.hstack({ ember.tensor({ 1 }), f64({ 2 }) }).dtype, "float64")
end

function T.tensor_split_positions_are_1_based()
  local a = ember.arange(7)
  check(same(list_tolist(a:tensor_split(3)), { { 0, 1, 2 }, { 3, 4 }, { 5, 6 } }))
  -- Note [tensor_split positions]: split before 1-based elements 2 and 6
  check(same(list_tolist(a:tensor_split({ 2, 6 })), { { 0 }, { 1, 2, 3, 4 }, { 5, 6 } }))
  check(same(list_tolist(ember.arange(5):tensor_split({ 4, 2 })), { { 0, 1, 2 }, {}, { 1, 2, 3, 4 } }))
  check(same(list_tolist(ember.arange(5):tensor_split({ -2, 11 })), { { 0, 1, 2 }, { 3, 4 }, {} }))
  check(same(list_tolist(ember.arange(5):tensor_split({ 6 })), { { 0, 1, 2, 3, 4 }, {} }))
  local shapes = {}
  for i, p in ipairs(ember.zeros(2, 7):tensor_split(3, 2)) do shapes[i] = p.shape[2] end
  check(same(shapes, { 3, 2, 2 }))
  check_eq(#ember.zeros(2, 0):tensor_split(3, 2), 3)
  local x = ember.arange(6):reshape(2, 3)
  local p = x:tensor_split(2, 2)
  p[2][1][1] = 50
  check_eq(x[1][3]:item(), 50, "the pieces are views")
  check(same(list_tolist(ember.arange(6):hsplit(3)), { { 0, 1 }, { 2, 3 }, { 4, 5 } }))
  check(same(list_tolist(x:hsplit({ 2 })), { { { 0 }, { 3 } }, { { 1, 50 }, { 4, 5 } } }))
  check_eq(#ember.zeros(4, 2):vsplit(2), 2)
  check_shape(ember.zeros(1, 2, 6):dsplit({ 3, 5 })[2], { 1, 2, 2 })
  -- the existing split with sizes and chunk, as PyTorch
  check(same(list_tolist(ember.arange(5):split({ 2, 3 })), { { 0, 1 }, { 2, 3, 4 } }))
  check(same(list_tolist(ember.arange(5):chunk(3)), { { 0, 1 }, { 2, 3 }, { 4 } }))
  check(same(list_tolist(ember.arange(6):chunk(4)), { { 0, 1 }, { 2, 3 }, { 4, 5 } }))
end

-- In-place writes through the composite views reach the base's history
-- (gradients from PyTorch 1.13).
function T.inplace_through_composite_views()
  local function run(f)
    local a = ember.arange(12, { dtype = "float64" }):reshape(3, 4):requires_grad_()
    local x = a * 1
    f(x);
    (x * x):sum():backward()
    return a.grad
  end
  check_tensor(run(function(x) x:diagonal():mul_(3) end), { { 0, 2, 4, 6 }, { 8, 90, 12, 14 }, { 16, 18, 180, 22 } })
  check_tensor(run(function(x) x:unfold(2, 2, 2):mul_(2) end), { { 0, 8, 16, 24 }, { 32, 40, 48, 56 }, { 64, 72, 80, 88 } })
  check_tensor(run(function(x) x:tensor_split(2, 2)[2]:mul_(2) end),
    { { 0, 2, 16, 24 }, { 8, 10, 48, 56 }, { 16, 18, 80, 88 } })
  check_tensor(run(function(x) x:movedim(1, 2)[1]:mul_(2) end), { { 0, 2, 4, 6 }, { 32, 10, 12, 14 }, { 64, 18, 20, 22 } })
  check_tensor(run(function(x) x:flatten()[{ { 2, 3 } }]:mul_(2) end),
    { { 0, 8, 16, 6 }, { 8, 10, 12, 14 }, { 16, 18, 20, 22 } })
end

-- Composites with a Tensor[] argument are not in differentiable_ops (their
-- gradients come from their parts); gradcheck their samples here.
function T.gradcheck_list_argument_composites()
  local S = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua") .. "/op_samples.lua")
  local failures = {}
  for _, name in ipairs({ "broadcast_tensors", "meshgrid", "atleast_1d_Sequence", "atleast_2d_Sequence",
    "atleast_3d_Sequence", "hstack", "vstack", "row_stack", "dstack", "column_stack" }) do
    for i, s in ipairs(S[name]()) do
      local o = { raise = false, name = name .. " sample " .. i }
      local ok, msg = ember.autograd.gradcheck(s.fn, s.inputs, o)
      if not ok then failures[#failures + 1] = msg end
      ok, msg = ember.autograd.gradgradcheck(s.fn, s.inputs, o)
      if not ok then failures[#failures + 1] = msg end
    end
  end
  check(#failures == 0, "\n  " .. table.concat(failures, "\n  "))
end

-- ---- errors: the op, the argument and the problem ----

function T.errors_name_op_argument_and_problem()
  local x = ember.zeros(2, 3)
  check_error(function() return x:flatten(2, 1) end, "flatten", "start_dim (2) cannot come after end_dim (1)")
  check_error(function() return x:flatten(3) end, "flatten", "dim 3")
  check_error(function() return x:unflatten(2, { 2, 2 }) end, "unflatten", "{2,2}", "(3)")
  check_error(function() return x:unflatten(2, { -1, -1 }) end, "unflatten", "only one size can be -1")
  check_error(function() return x:movedim({ 1, 2 }, { 1 }) end, "movedim", "same number of dims")
  check_error(function() return x:movedim({ 1, 1 }, { 1, 2 }) end, "movedim", "more than once in source")
  check_error(function() return x:swapaxes(1, 3) end, "swapaxes", "dim 3")
  check_error(function() return x:broadcast_to({ 3, 3 }) end, "broadcast_to", "{2,3}", "{3,3}")
  check_error(function() return x:broadcast_to({ 3 }) end, "broadcast_to", "{2,3}", "{3}")
  check_error(function() return ember.broadcast_tensors({ x, ember.zeros(4) }) end,
    "broadcast_tensors", "{2,3}", "{4}")
  check_error(function() return x:flip(1, 1) end, "flip", "dim 1 appears more than once")
  check_error(function() return x:flip(3) end, "flip", "dim 3")
  check_error(function() return ember.zeros(3):fliplr() end, "fliplr", "at least 2 dims", "1-dim")
  check_error(function() return ember.tensor(1):flipud() end, "flipud", "at least 1 dim")
  check_error(function() return x:roll({ 1, 1 }, 1) end, "roll", "2 shifts and 1 dim")
  check_error(function() return x:roll({ 1, 1 }) end, "roll", "2 shifts and 0 dims")
  check_error(function() return x:rot90(1, { 1, 1 }) end, "rot90", "must differ")
  check_error(function() return x:rot90(1, { 1 }) end, "rot90", "2 dims")
  check_error(function() return x["repeat"](x, 2) end, "repeat", "1 entry", "2 dims")
  check_error(function() return x["repeat"](x, 2, -1) end, "repeat", "repeats[2] is -1")
  check_error(function() return ember.repeat_interleave(ember.tensor({ 1, -2 })) end,
    "repeat_interleave", "repeats[2] is -2")
  check_error(function() return ember.repeat_interleave(ember.tensor({ 1.5 })) end,
    "repeat_interleave", "int64 or int32", "float32")
  check_error(function() return ember.repeat_interleave(ember.tensor(2)) end, "repeat_interleave", "1-d")
  check_error(function() return x:repeat_interleave(ember.tensor({ 1, 2 }), 2) end,
    "repeat_interleave", "one element or 3")
  check_error(function() return x:repeat_interleave(-1) end, "repeat_interleave", "non-negative")
  check_error(function() return ember.tensor(1):repeat_interleave(2, 1) end, "repeat_interleave", "at least 1 dim")
  check_error(function() return x:repeat_interleave(2, 1, { output_size = 3 }) end, "repeat_interleave", "output_size")
  check_error(function() return ember.zeros(3):tril() end, "tril", "at least 2 dims")
  check_error(function() return ember.zeros(3):triu() end, "triu", "at least 2 dims")
  check_error(function() return x:diagonal(0, 1, 1) end, "diagonal", "dim1 and dim2 must differ")
  check_error(function() return ember.zeros(3):diagonal() end, "diagonal", "at least 2 dims")
  check_error(function() return ember.zeros(2, 2, 2):diag() end, "diag", "1-d or 2-d", "3-dim")
  check_error(function() return ember.tensor(1):diag_embed() end, "diag_embed")
  check_error(function() return ember.zeros(3):trace() end, "trace", "matrix")
  check_error(function() return ember.ones(2, 2, { dtype = "bool" }):trace() end, "trace", "bool")
  check_error(function() return x:narrow_copy(2, 3, 2) end, "narrow")
  check_error(function() return x:unfold(2, 4, 1) end, "unfold", "size is 4", "between 0 and 3")
  check_error(function() return x:unfold(2, 2, 0) end, "unfold", "step must be positive")
  check_error(function() return ember.meshgrid({ x }) end, "meshgrid", "tensors[1]", "0-d or 1-d")
  check_error(function() return ember.meshgrid({ ember.zeros(2), ember.zeros(2, { dtype = "int64" }) }) end,
    "meshgrid", "same dtype")
  check_error(function() return ember.meshgrid({}) end, "meshgrid", "non-empty")
  check_error(function() return ember.meshgrid({ ember.zeros(2) }, { indexing = "ji" }) end, "meshgrid", "indexing")
  check_error(function() return ember.hstack({}) end, "hstack", "non-empty")
  check_error(function() return ember.vstack({ ember.zeros(2), ember.zeros(3) }) end, "cat")
  check_error(function() return ember.tensor(1):tensor_split(2) end, "tensor_split", "at least 1 dim")
  check_error(function() return x:tensor_split(0) end, "tensor_split", "sections must be greater than 0")
  check_error(function() return x:tensor_split({ 0 }) end, "tensor_split", "indices[1] is 0", "1-based")
  check_error(function() return x:hsplit(2) end, "hsplit", "size 3", "2 equal sections")
  check_error(function() return ember.zeros(3):vsplit(1) end, "vsplit", "at least 2 dims")
  check_error(function() return x:dsplit({ 1 }) end, "dsplit", "at least 3 dims")
  -- sizes that overflow int64 are errors, not wrapped-around shapes
  check_error(function() return x["repeat"](x, 1 << 62, 4) end, "repeat", "repeats[1]", "too large")
  check_error(function() return x:repeat_interleave(1 << 62) end, "repeat_interleave", "too large")
  check_error(function() return ember.repeat_interleave(ember.tensor({ 1 << 62, 1 << 62 })) end,
    "repeat_interleave", "sum to more than")
  check_error(function() return x:diag_embed(math.maxinteger) end, "diag_embed", "offset", "too large")
end

function T.extreme_offsets_and_shifts()
  local x = f64({ { 1, 2, 3 }, { 4, 5, 6 } })
  check_shape(x:diagonal(math.mininteger), { 0 })
  check_shape(x:diagonal(math.maxinteger), { 0 })
  check_tensor(x:tril(math.mininteger), { 0, 0, 0, 0, 0, 0 })
  check_tensor(x:triu(math.mininteger), x:tolist())
  check_shape(x:unfold(2, 1, math.maxinteger), { 2, 1, 1 })
  -- math.mininteger is 4 modulo 6: a roll by 4 (PyTorch 1.13 overflows and rolls by 2)
  check_tensor(x:roll(math.mininteger), { 3, 4, 5, 6, 1, 2 })
  local a = x:clone():requires_grad_()
  a:roll(math.mininteger, 2):mul(f64({ { 1, 2, 3 }, { 4, 5, 6 } })):sum():backward()
  check_tensor(a.grad, { { 2, 3, 1 }, { 5, 6, 4 } })
end

return T
