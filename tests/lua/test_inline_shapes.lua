-- test_inline_shapes.lua -- tensors of more dims than a header keeps inline
-- (Note [Inline shapes] in runtime/core/em_core.h: up to 5 dims inline, up
-- to 16 in a spill block), shapes moving between the two (out= resizing,
-- empty_strided), and the tensor iterator's 1-element path (Note [Tensor
-- iterator] in runtime/kernels/cpu/em_cpu.h). Expected values from PyTorch
-- 1.13.
local T = {}

local function range_shape(n, d)
  local s = {}
  for i = 1, d do s[i] = n end
  return s
end

function T.six_dims_views_and_copies()
  local a = ember.arange(64.0):reshape(2, 2, 2, 2, 2, 2)
  check_shape(a, { 2, 2, 2, 2, 2, 2 })
  check_eq(a:dim(), 6)
  local p = a:permute(6, 5, 4, 3, 2, 1)
  local st = p:stride()
  for i, want in ipairs({ 1, 2, 4, 8, 16, 32 }) do check_eq(st[i], want, "stride " .. i) end
  check(not p:is_contiguous())
  local c = p:contiguous()
  check(c:is_contiguous())
  check_tensor(c:flatten():narrow(1, 1, 8), { 0, 32, 16, 48, 8, 40, 24, 56 })
  local s = a:sum(3)
  check_shape(s, { 2, 2, 2, 2, 2 })
  check_tensor(s:flatten():narrow(1, 1, 6), { 8, 10, 12, 14, 16, 18 })
  -- down to few dims (inline) and back up again
  local f = c:view(8, 8)
  check_shape(f, { 8, 8 })
  check_tensor(f[1], { 0, 32, 16, 48, 8, 40, 24, 56 })
  local u = a:unsqueeze(1):unsqueeze(4)
  check_shape(u, { 1, 2, 2, 1, 2, 2, 2, 2 })
  local ust = u:stride()
  for i, want in ipairs({ 64, 32, 16, 16, 8, 4, 2, 1 }) do
    if u:size(i) ~= 1 then check_eq(ust[i], want, "unsqueezed stride " .. i) end
  end
  check_eq(u:squeeze():dim(), 6)
end

function T.sixteen_dims()
  local t = ember.ones(table.unpack(range_shape(1, 15)))
  t = t:unsqueeze(1)
  check_eq(t:dim(), 16)
  check_eq(t:numel(), 1)
  check_tensor((t * 3):flatten(), { 3 })
  check_error(function() return t:unsqueeze(1) end)
  local big = ember.arange(65536.0):view(table.unpack(range_shape(2, 16)))
  check_eq(big:dim(), 16)
  check_eq(big:transpose(1, 16):contiguous():flatten()[2]:item(), 32768)
  check_eq(big:sum():item(), 65536 * 65535 / 2)
end

function T.broadcast_across_many_dims()
  local x = ember.arange(6.0):reshape(1, 2, 1, 3, 1, 1, 1)
  local y = ember.tensor({ 10, 20 }):reshape(2, 1, 1, 1, 1, 1, 1, 1)
  local z = x + y
  check_shape(z, { 2, 1, 2, 1, 3, 1, 1, 1 })
  check_tensor(z:flatten(), { 10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25 })
  -- an error message quotes both shapes of many dims
  check_error(function() return x + ember.ones(1, 1, 1, 4, 1, 1, 1) end, "add", "{1,2,1,3,1,1,1}",
    "{1,1,1,4,1,1,1}")
end

function T.empty_strided_many_dims()
  local e = ember.empty_strided({ 1, 2, 1, 2, 1, 2 }, { 8, 4, 4, 2, 2, 1 })
  check_shape(e, { 1, 2, 1, 2, 1, 2 })
  check(e:is_contiguous())
  local e2 = ember.empty_strided({ 2, 1, 2, 1, 2, 1, 2 }, { 1, 1, 2, 1, 4, 1, 8 })
  check(not e2:is_contiguous())
  local st = e2:stride()
  for i, want in ipairs({ 1, 1, 2, 1, 4, 1, 8 }) do check_eq(st[i], want, "stride " .. i) end
  e2:fill_(2)
  check_eq(e2:sum():item(), 32)
end

-- out= resizing moves a shape into the spill block and back inline
function T.out_resize_spills_and_unspills()
  local o = ember.zeros(2)
  ember.add(ember.ones(2, 1, 1, 1, 1, 1, 3), 1, { out = o })
  check_shape(o, { 2, 1, 1, 1, 1, 1, 3 })
  check_tensor(o:flatten(), { 2, 2, 2, 2, 2, 2 })
  ember.mul(ember.tensor({ 3, 4 }), 2, { out = o })
  check_shape(o, { 2 })
  check_tensor(o, { 6, 8 })
  local d = ember.zeros(1, 1, 1, 1, 1, 1, 1, 2)
  ember.add(ember.ones(2), 1, { out = d })
  check_shape(d, { 2 })
  check(d:is_contiguous())
  check_tensor(d, { 2, 2 })
end

function T.autograd_many_dims()
  local a = ember.randn(2, 1, 3, 1, 2, 2, { dtype = "float64", requires_grad = true })
  local b = a:permute(6, 5, 4, 3, 2, 1):contiguous():view(2, 2, 1, 3, 1, 2, 1)
  local l = (b * b):sum() + a:squeeze():sum()
  l:backward()
  check_shape(a.grad, { 2, 1, 3, 1, 2, 2 })
  check(((a.grad - (a * 2 + 1)):abs():max():item()) < 1e-12)
end

-- ---- the iterator's 1-element path ----

function T.one_element_shapes_and_dtypes()
  -- a 0-dim int64 and a {1,1,1} float32: float32 of shape {1,1,1}
  local x = ember.tensor(3, { dtype = "int64" }) + ember.ones(1, 1, 1)
  check_shape(x, { 1, 1, 1 })
  check_eq(x.dtype, "float32")
  check_tensor(x, { 4 })
  local y = ember.tensor({ { 5 } }, { dtype = "int32" }) + ember.tensor(2.5, { dtype = "float64" })
  check_eq(y.dtype, "float64")
  check_shape(y, { 1, 1 })
  check_tensor(y, { 7.5 })
  local z = ember.tensor({ { 5 } }, { dtype = "int32" }) * ember.tensor({ 2.5 }, { dtype = "float64" })
  check_eq(z.dtype, "float64")
  check_tensor(z, { 12.5 })
  local b = ember.tensor(true) + ember.tensor({ { true } })
  check_eq(b.dtype, "bool")
  check_tensor(b, { true })
  check_tensor(ember.tensor({ 0 / 0 }):reshape(1, 1):tanh(), { 0 / 0 })
  check_tensor(ember.tensor(math.huge):exp(), { math.huge })
  local w = ember.where(ember.tensor(true), ember.tensor(2.5), ember.ones(1, 1))
  check_shape(w, { 1, 1 })
  check_tensor(w, { 2.5 })
  -- many dims of size 1: the output has the inputs' most dims
  check_shape(ember.ones(1, 1, 1, 1, 1, 1, 1):tanh(), { 1, 1, 1, 1, 1, 1, 1 })
  check_shape(ember.tensor(1.5, { dtype = "float64" }) * ember.ones(1, 1, 1, 1, 1, 1, { dtype = "int64" }),
    { 1, 1, 1, 1, 1, 1 })
end

function T.one_element_non_contiguous_and_out()
  -- a 1-element view at an offset with odd strides
  local base = ember.arange(12.0):reshape(3, 4)
  local v = base:narrow(1, 3, 1):narrow(2, 2, 1):t()
  check_tensor(v + ember.tensor(100, { dtype = "int64" }), { 109 })
  check_tensor(v:tanh(), { math.tanh(9) })
  -- out of more dims than the inputs is resized to the result's shape
  local o = ember.zeros(1, 1, 1)
  ember.add(ember.tensor(2.0), ember.tensor({ 3.0 }), { out = o })
  check_shape(o, { 1 })
  check_tensor(o, { 5 })
  o = ember.zeros(1, 1)
  ember.mul(ember.tensor({ { 2 } }, { dtype = "int64" }), ember.tensor(1.5), { out = o })
  check_shape(o, { 1, 1 })
  check_tensor(o, { 3 })
  -- in place on a 1-element view writes through to the base
  v:add_(ember.tensor(1, { dtype = "int64" }))
  check_eq(base[3][2]:item(), 10)
  -- 1-element backward (the formulas run on the 1-element path)
  local a = ember.tensor({ { 0.5 } }, { dtype = "float64", requires_grad = true })
  local r = (a * 3):tanh() * a
  r:backward()
  local t = math.tanh(1.5)
  check_near(a.grad:item(), t + 0.5 * 3 * (1 - t * t), 1e-12)
end

return T
