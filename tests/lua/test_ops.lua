-- test_ops.lua -- values of every op against hand-computed results,
-- broadcasting, type promotion (numbers on either side), reductions.
local T = {}
local t = ember.tensor

function T.binary_arith()
  local a, b = t({ 1.5, -2, 3 }), t({ 0.5, 4, -1 })
  check_tensor(a + b, { 2, 2, 2 })
  check_tensor(ember.add(a, b), { 2, 2, 2 })
  check_tensor(a:add(b, { alpha = 2 }), { 2.5, 6, 1 })
  check_tensor(a - b, { 1, -6, 4 })
  check_tensor(a:sub(b, { alpha = 2 }), { 0.5, -10, 5 })
  check_tensor(a * b, { 0.75, -8, -3 })
  check_tensor(a / b, { 3, -0.5, -3 })
  check_tensor(t({ 2, 3 }, { dtype = "float32" }) ^ t({ 3, 2 }), { 8, 9 })
  check_tensor(ember.pow(t({ 4.0, 9.0 }), 0.5), { 2, 3 })
  check_tensor(-a, { -1.5, 2, -3 })
  check_tensor(a:neg(), { -1.5, 2, -3 })
end

function T.remainder_sign_of_divisor()
  check_tensor(t({ 5, -5, 5, -5 }) % t({ 3, 3, -3, -3 }), { 2, 1, -1, -2 })
  check_tensor(t({ 5.5, -5.5 }) % 2, { 1.5, 0.5 })
  check_tensor(ember.remainder(t({ 7 }), 4), { 3 })
end

function T.numbers_on_either_side()
  local x = t({ 1.0, 2.0, 4.0 })
  check_tensor(x + 1, { 2, 3, 5 })
  check_tensor(1 + x, { 2, 3, 5 })
  check_tensor(10 - x, { 9, 8, 6 })
  check_tensor(x - 10, { -9, -8, -6 })
  check_tensor(2 * x, { 2, 4, 8 })
  check_tensor(2 / x, { 2, 1, 0.5 })
  check_tensor(x / 2, { 0.5, 1, 2 })
  check_tensor(x ^ 2, { 1, 4, 16 })
  check_tensor(2 ^ x, { 2, 4, 16 })
  check_tensor(7 % x, { 0, 1, 3 })
end

function T.type_promotion()
  local i = t({ 1, 2 })          -- int64
  local f = t({ 0.5, 0.5 })      -- float32
  check_eq((i + f).dtype, "float32")
  check_eq((i + 1).dtype, "int64")
  check_eq((i + 1.5).dtype, "float32")
  check_tensor(i + 1.5, { 2.5, 3.5 })
  check_eq((1.5 + i).dtype, "float32")
  check_eq((i / 2).dtype, "float32", "integer division is true division")
  check_tensor(i / 2, { 0.5, 1 })
  local d = t({ 1, 2 }, { dtype = "float64" })
  check_eq((d + f).dtype, "float64")
  check_eq((f + 2.5).dtype, "float32", "a number does not widen float32")
  local h = t({ 1, 2 }, { dtype = "float16" })
  check_eq((h * 2.0).dtype, "float16")
  local i32 = t({ 1, 2 }, { dtype = "int32" })
  check_eq((i32 + 1).dtype, "int32")
  check_eq((i32 + i).dtype, "int64")
  local b = t({ true, false })
  check_eq((b + 1).dtype, "int64")
  check_eq((b + b).dtype, "bool")
end

function T.broadcasting()
  local a = t({ { 1, 2, 3 }, { 4, 5, 6 } })
  local row = t({ 10, 20, 30 })
  local col = t({ { 100 }, { 200 } })
  check_tensor(a + row, { 11, 22, 33, 14, 25, 36 })
  check_shape(a + row, { 2, 3 })
  check_tensor(a + col, { 101, 102, 103, 204, 205, 206 })
  check_shape(col + row, { 2, 3 })
  check_tensor(col * row, { 1000, 2000, 3000, 2000, 4000, 6000 })
  check_shape(ember.ones(4, 1, 3) + ember.ones(2, 1), { 4, 2, 3 })
end

function T.comparisons()
  local a, b = t({ 1, 2, 3 }), t({ 3, 2, 1 })
  check_tensor(a:eq(b), { false, true, false })
  check_tensor(a:ne(b), { true, false, true })
  check_tensor(a:lt(b), { true, false, false })
  check_tensor(a:le(b), { true, true, false })
  check_tensor(a:gt(b), { false, false, true })
  check_tensor(a:ge(b), { false, true, true })
  check_tensor(ember.gt(a, 1.5), { false, true, true })
  check_eq(a:eq(b).dtype, "bool")
  check(a ~= b, "__eq stays identity")
  check(a == a)
end

function T.unary()
  local x = t({ -1.0, 0.0, 2.0 })
  check_tensor(x:abs(), { 1, 0, 2 })
  check_tensor(x:relu(), { 0, 0, 2 })
  check_tensor(x:exp(), { math.exp(-1), 1, math.exp(2) }, 1e-5)
  check_tensor(t({ 1.0, math.exp(1) }):log(), { 0, 1 }, 1e-5)
  check_tensor(t({ 4.0, 9.0 }):sqrt(), { 2, 3 })
  local th = {}
  for i, v in ipairs({ -1, 0, 2 }) do th[i] = (math.exp(v) - math.exp(-v)) / (math.exp(v) + math.exp(-v)) end
  check_tensor(x:tanh(), th, 1e-5)
  check_tensor(x:sigmoid(), { 1 / (1 + math.exp(1)), 0.5, 1 / (1 + math.exp(-2)) }, 1e-5)
  check_eq(t({ 1, 4 }):sqrt().dtype, "float32", "integers give float32")
  check_tensor(t({ -3, 4 }):abs(), { 3, 4 })
  check_eq(t({ -3, 4 }):abs().dtype, "int64")
end

function T.reductions()
  local x = t({ { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } })
  check_eq(x:sum():item(), 21)
  check_shape(x:sum(), {})
  check_tensor(x:sum(1), { 5, 7, 9 })
  check_tensor(x:sum(2), { 6, 15 })
  check_tensor(x:sum(-1), { 6, 15 })
  check_shape(x:sum(2, { keepdim = true }), { 2, 1 })
  check_shape(x:sum(2, true), { 2, 1 })
  check_tensor(x:sum({ 1, 2 }), { 21 })
  check_tensor(x:mean(1), { 2.5, 3.5, 4.5 })
  check_eq(x:mean():item(), 3.5)
  check_tensor(ember.sum(x, 1), { 5, 7, 9 })
  check_shape(x:mean({ 1, 2 }, { keepdim = true }), { 1, 1 })
  check_eq(t({ 1, 2, 3 }):sum().dtype, "int64")
  check_eq(t({ true, true, false }):sum():item(), 2)
  check_eq(x:sum({ dtype = "float64" }).dtype, "float64")
  check_eq(t({ 1, 2 }):mean({ dtype = "float32" }):item(), 1.5)
  check_eq(x:sum({ dim = 2 }):numel(), 2, "dim by name")
end

function T.linear_algebra()
  local a = t({ { 1.0, 2.0 }, { 3.0, 4.0 } })
  local b = t({ { 5.0, 6.0 }, { 7.0, 8.0 } })
  check_tensor(a:mm(b), { 19, 22, 43, 50 })
  check_tensor(ember.matmul(a, b), { 19, 22, 43, 50 })
  check_tensor(a:matmul(t({ 1.0, 1.0 })), { 3, 7 })
  check_eq(t({ 1.0, 2.0 }):matmul(t({ 3.0, 4.0 })):item(), 11)
  check_tensor(a:t():mm(b), { 26, 30, 38, 44 }, 1e-5, "transposed input")
  check_shape(ember.ones(3, 2, 4):matmul(ember.ones(4, 5)), { 3, 2, 5 })
  check_tensor(t({ { 1, 2 } }):mm(t({ { 3 }, { 4 } })), { 11 })
end

function T.fill_copy_clone()
  local x = ember.zeros(2, 2)
  x:fill_(3)
  check_tensor(x, { 3, 3, 3, 3 })
  x:zero_()
  check_tensor(x, { 0, 0, 0, 0 })
  x:copy_(t({ 1, 2 }))
  check_tensor(x, { 1, 2, 1, 2 })
  local c = x:clone()
  c:fill_(9)
  check_tensor(x, { 1, 2, 1, 2 }, nil, "clone owns its storage")
  check(x:contiguous():is_contiguous())
  check_eq(x:to("int32").dtype, "int32")
  x:add_(1)
  check_tensor(x, { 2, 3, 2, 3 })
  x:sub_(t({ 1, 1 }))
  check_tensor(x, { 1, 2, 1, 2 })
  x:mul_(2)
  check_tensor(x, { 2, 4, 2, 4 })
  x:div_(4)
  check_tensor(x, { 0.5, 1, 0.5, 1 })
  x:add_(t({ 1, 1 }), { alpha = 2 })
  check_tensor(x, { 2.5, 3, 2.5, 3 })
end

function T.factories()
  check_tensor(ember.zeros(2, 3), { 0, 0, 0, 0, 0, 0 })
  check_shape(ember.zeros({ 2, 3 }), { 2, 3 })
  check_tensor(ember.ones(3), { 1, 1, 1 })
  check_eq(ember.ones(2, { dtype = "int32" }).dtype, "int32")
  check_tensor(ember.full({ 2 }, 7), { 7, 7 })
  check_eq(ember.full({ 2 }, 7).dtype, "int64")
  check_eq(ember.full({ 2 }, 7.5).dtype, "float32")
  check_eq(ember.full({ 2 }, true).dtype, "bool")
  check_shape(ember.empty(4, 5), { 4, 5 })
  check_tensor(ember.arange(5), { 0, 1, 2, 3, 4 })
  check_eq(ember.arange(5).dtype, "int64")
  check_tensor(ember.arange(1, 2, 0.25), { 1, 1.25, 1.5, 1.75 })
  check_eq(ember.arange(1, 2, 0.25).dtype, "float32")
  check_tensor(ember.arange(5, 0, -2), { 5, 3, 1 })
  ember.manual_seed(42)
  local r1 = ember.randn(5):tolist()
  ember.manual_seed(42)
  local r2 = ember.randn(5):tolist()
  for i = 1, 5 do check_eq(r1[i], r2[i], "same seed, same values") end
  local u = ember.rand(1000)
  check(u:ge(0):sum():item() == 1000 and u:lt(1):sum():item() == 1000, "rand in [0,1)")
  local n = ember.randn(20000)
  check_near(n:mean():item(), 0, 0.05)
  check_near(((n * n):mean()):item(), 1, 0.05)
end

function T.threads()
  local n = ember.get_num_threads()
  check(n >= 1)
  ember.set_num_threads(1)
  check_eq(ember.get_num_threads(), 1)
  ember.set_num_threads(n)
end

function T.memory_stats()
  local s = ember.memory_stats()
  check(type(s.allocated) == "number" and type(s.cached) == "number" and type(s.peak) == "number")
  check(s.peak >= s.allocated)
end

function T.done_means_check()
  -- ember -e 'local a = ember.randn(3,4); print((a*2+1):sum(2))'
  local a = ember.randn(3, 4)
  local s = (a * 2 + 1):sum(2)
  check_shape(s, { 3 })
  local l = a:tolist()
  local want = {}
  for i = 1, 3 do
    want[i] = 0
    for j = 1, 4 do want[i] = want[i] + l[i][j] * 2 + 1 end
  end
  check_tensor(s, want, 1e-5)
end

return T
