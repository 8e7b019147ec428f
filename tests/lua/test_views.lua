-- test_views.lua -- views share storage with their base; indexing, Torch7
-- slicing and assignment through indices; shapes and contiguity of views.
local T = {}

local function base()
  return ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }) -- int64 {2,3}
end

function T.index_selects_dim1()
  local x = base()
  check_tensor(x[1], { 1, 2, 3 })
  check_tensor(x[2], { 4, 5, 6 })
  check_tensor(x[-1], { 4, 5, 6 })
  check_shape(x[1], { 3 })
  check_eq(x[2][3]:item(), 6)
  check_shape(x[2][3], {})
end

function T.write_through_index()
  local x = base()
  x[1] = 0
  check_tensor(x, { 0, 0, 0, 4, 5, 6 })
  x[2][2] = 50
  check_tensor(x, { 0, 0, 0, 4, 50, 6 })
  x[1] = ember.tensor({ 7, 8, 9 })
  check_tensor(x, { 7, 8, 9, 4, 50, 6 })
  local row = x[2]
  row[1] = -1
  check_eq(x[2][1]:item(), -1, "a selected row is a view")
end

function T.torch7_slicing()
  local x = ember.arange(24):view(2, 3, 4)
  check_shape(x[{ {}, { 1, 2 }, 2 }], { 2, 2 })
  check_tensor(x[{ {}, { 1, 2 }, 2 }], { 1, 5, 13, 17 })
  check_shape(x[{ 1 }], { 3, 4 })
  check_shape(x[{ {}, {}, { 2 } }], { 2, 3, 1 })
  check_tensor(x[{ 2, 3, { 1, 4, 2 } }], { 20, 22 })
  check_tensor(x[{ 1, 1, { -2, -1 } }], { 2, 3 })
  check_tensor(x[{ 2, -1, -1 }], { 23 })
  check_shape(x[{ 2, -1, -1 }], {})
end

function T.write_through_slice()
  local x = ember.zeros(3, 4)
  x[{ {}, 2 }] = 1
  check_tensor(x:sum(1), { 0, 3, 0, 0 })
  x[{ { 2, 3 }, { 3, 4 } }] = ember.tensor({ { 5, 6 }, { 7, 8 } })
  check_tensor(x[{ 3 }], { 0, 1, 7, 8 })
  x[{ 1, { 1, 4, 3 } }] = 9
  check_tensor(x[1], { 9, 1, 0, 9 })
end

function T.transpose_permute()
  local x = base()
  local y = x:transpose(1, 2)
  check_shape(y, { 3, 2 })
  check(not y:is_contiguous())
  check_tensor(y, { 1, 4, 2, 5, 3, 6 })
  y[1][2] = 40
  check_eq(x[2][1]:item(), 40, "transpose shares storage")
  check_shape(x:t(), { 3, 2 })
  local z = ember.zeros(2, 3, 4):permute(3, 1, 2)
  check_shape(z, { 4, 2, 3 })
  check_eq(z:stride(1), 1)
  check(not z:is_contiguous())
  check(z:contiguous():is_contiguous())
end

function T.narrow_select_slice()
  local x = ember.arange(10)
  local n = x:narrow(1, 3, 4)
  check_tensor(n, { 2, 3, 4, 5 })
  n[1] = 100
  check_eq(x[3]:item(), 100)
  check_tensor(x:select(1, 2), { 1 })
  local m = base()
  check_tensor(m:select(2, 3), { 3, 6 })
  check_tensor(x:slice(1, 2, 6, 2), { 1, 3, 5 })
  check_tensor(x:slice(1, 8), { 7, 8, 9 })
  check_eq(x:slice(1, 2, 6, 2):storage_offset(), 1)
end

function T.squeeze_unsqueeze_expand()
  local x = ember.zeros(1, 3, 1)
  check_shape(x:squeeze(), { 3 })
  check_shape(x:squeeze(1), { 3, 1 })
  check_shape(x:squeeze(2), { 1, 3, 1 })
  local v = ember.tensor({ 1, 2, 3 })
  check_shape(v:unsqueeze(1), { 1, 3 })
  check_shape(v:unsqueeze(2), { 3, 1 })
  check_shape(v:unsqueeze(-1), { 3, 1 })
  local e = v:unsqueeze(1):expand(4, 3)
  check_shape(e, { 4, 3 })
  check_eq(e:stride(1), 0)
  check_tensor(e:sum(1), { 4, 8, 12 })
  v[1] = 10
  check_eq(e[4][1]:item(), 10, "expand shares storage")
end

function T.view_reshape()
  local x = ember.arange(6)
  local v = x:view(2, 3)
  check_shape(v, { 2, 3 })
  v[1][1] = 42
  check_eq(x[1]:item(), 42, "view shares storage")
  check_shape(x:view(-1, 2), { 3, 2 })
  check_shape(x:view({ 3, 2 }), { 3, 2 })
  local t = v:t()
  local r = t:reshape(6)
  check_shape(r, { 6 })
  check_tensor(r, { 42, 3, 1, 4, 2, 5 })
  check(r:is_contiguous())
  local rv = v:reshape(3, 2)
  rv[1][1] = 7
  check_eq(x[1]:item(), 7, "reshape of a contiguous tensor is a view")
  check_shape(ember.reshape(x, { 6, 1 }), { 6, 1 })
end

function T.len_and_numbers()
  check_eq(#ember.zeros(5, 2), 5)
  check_eq(#ember.zeros(0), 0)
end

return T
