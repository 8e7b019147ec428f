-- test_maxmin.lua -- max/min (all, and over a dim with indices) and
-- argmax/argmin: overloads by argument kind, 1-based indices, ties and NaN
-- as PyTorch 1.13.
local ember = ember or require "ember"
local T = {}
local nan = 0 / 0

local function x() return ember.tensor({ { 1, 5, 5 }, { 4, nan, 6 }, { 2, 2, -1 } }) end

local function check_list(got, want, msg)
  check_eq(#got, #want, msg)
  for i = 1, #want do
    if want[i] ~= want[i] then check(got[i] ~= got[i], (msg or "") .. ": NaN expected at " .. i)
    else check_eq(got[i], want[i], msg) end
  end
end

function T.max_min_over_a_dim_return_values_and_1_based_indices()
  local v, i = x():max(2)
  check_list(v:tolist(), { 5, nan, 2 }, "max values")
  check_list(i:tolist(), { 2, 2, 1 }, "max indices: first of ties, NaN wins")
  check_eq(i.dtype, "int64")
  local v2, i2 = ember.min(x(), 1, true)
  check_shape(v2, { 1, 3 })
  check_list(v2:tolist()[1], { 1, nan, -1 })
  check_list(i2:tolist()[1], { 1, 2, 3 })
  local v3, i3 = ember.tensor({ 3, 1, 3 }):max(1)
  check_eq(v3:item(), 3)
  check_eq(i3:item(), 1)
  local v4, i4 = ember.zeros(0, 2):max(2)
  check_shape(v4, { 0 })
  check_shape(i4, { 0 })
end

function T.max_min_of_all_and_argmax()
  check(x():max():item() ~= x():max():item(), "max of a tensor with NaN is NaN")
  check_eq(ember.tensor({ { 1, 7 }, { 3, 2 } }):max():item(), 7)
  check_eq(ember.tensor({ { 1, 7 }, { 3, 2 } }):min():item(), 1)
  check_eq(x():argmax():item(), 5)
  check_list(x():argmin(2):tolist(), { 1, 2, 3 })
  check_shape(x():argmax(1, true), { 1, 3 })
end

function T.max_errors()
  check_error(function() return ember.zeros(2, 0):max(2) end, "max: expected reduction dim 2 to have non-zero size")
  check_error(function() return ember.zeros(0):max() end, "max: expected a reduction dim")
  check_error(function() return ember.zeros(0):argmax() end, "argmax")
  check_error(function() return x():max(3) end, "max: dim 3 out of range")
  check_error(function() return x():max("a") end, "max: no overload matches the arguments (tensor, string)")
end

function T.max_gradients()
  local a = ember.tensor({ { 1, 5, 5 }, { 4, 0, 6 } }, { dtype = "float64", requires_grad = true })
  local v = a:max(2)
  v:sum():backward()
  check_tensor(a.grad, { { 0, 1, 0 }, { 0, 0, 1 } })
  local b = ember.tensor({ 1, 5, 5 }, { dtype = "float64", requires_grad = true })
  b:max():backward()
  check_tensor(b.grad, { 0, 0.5, 0.5 }) -- ties share, as torch.max()
  local _, i = b:max(1)
  check(not i.requires_grad, "indices carry no gradient")
end

return T
