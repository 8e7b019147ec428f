-- test_multi.lua -- ops with several results (sort, topk), list arguments
-- (cat, stack) and list results (split, chunk, unbind): values against
-- PyTorch 1.13 (indices converted to 1-based), overload resolution, the
-- bindings' errors, and views in a list result.
local T = {}
local t = ember.tensor
local nan = 0 / 0

local function shape(x) return table.concat(x.shape, ",") end

-- ---- several results ----

function T.sort_returns_values_and_indices()
  local x = t({ 1.0, 3, 3, 2, 3, nan, 0 })
  check_eq(select("#", x:sort()), 2)
  local v, i = x:sort()
  -- torch: values [0,1,2,3,3,3,nan], indices [6,0,3,1,2,4,5]
  check_tensor(v, { 0, 1, 2, 3, 3, 3, nan })
  check_tensor(i, { 7, 1, 4, 2, 3, 5, 6 })
  check_eq(i.dtype, "int64")
  v, i = ember.sort(x, 1, true) -- NaN first, ties in input order
  check_tensor(v, { nan, 3, 3, 3, 2, 1, 0 })
  check_tensor(i, { 6, 2, 3, 5, 4, 1, 7 })
  local _, i2 = x:sort({ descending = true, stable = true })
  check_tensor(i2, { 6, 2, 3, 5, 4, 1, 7 })
  check_tensor(ember.argsort(x, { descending = true }), { 6, 2, 3, 5, 4, 1, 7 })
  check_tensor(x:argsort(), { 7, 1, 4, 2, 3, 5, 6 })
end

function T.sort_along_dims_and_edges()
  local m = t({ { 3, 1, 2 }, { 0, 5, -1 } })
  local v, i = m:sort(1)
  check_tensor(v, { { 0, 1, -1 }, { 3, 5, 2 } })
  check_tensor(i, { { 2, 1, 2 }, { 1, 2, 1 } })
  v, i = m:sort(-1, true)
  check_tensor(v, { { 3, 2, 1 }, { 5, 0, -1 } })
  check_tensor(i, { { 1, 3, 2 }, { 2, 1, 3 } })
  check_eq(v.dtype, "int64")
  local e = ember.zeros(0, 3)
  v, i = e:sort(1)
  check_eq(shape(v), "0,3"); check_eq(shape(i), "0,3")
  v, i = t(2.5):sort()
  check_eq(#v.shape, 0); check_eq(i:item(), 1); check_eq(v:item(), 2.5)
  check_error(function() m:sort(3) end, "sort")
end

-- rows of 256 or more take the radix sort (Note [Sort keys]): the same
-- stable order as a reference sort, for every dtype, with ties, NaN and -0
function T.sort_long_rows_match_a_stable_reference()
  local nan = 0 / 0
  local function ref(vals, desc)
    local p = {}
    for i = 1, #vals do p[i] = i end
    local function key(v) return v ~= v and math.huge * 2 or v end
    table.sort(p, function(a, b)
      local x, y = vals[a], vals[b]
      local xn, yn = x ~= x, y ~= y
      local lt, gt
      if xn or yn then lt, gt = yn and not xn, xn and not yn
      else lt, gt = x < y, x > y end
      if desc then lt, gt = gt, lt end
      if lt then return true elseif gt then return false end
      return a < b
    end)
    return p
  end
  local cases = {
    { "float32", true }, { "float64", true }, { "float16", true }, { "bfloat16", true },
    { "int64", false }, { "int32", false }, { "int8", false }, { "uint8", false }, { "bool", false },
  }
  for _, c in ipairs(cases) do
    local dt, fl = c[1], c[2]
    local vals = {}
    for i = 1, 300 do
      local r = (i * 7919) % 23 - 11 -- many ties
      if dt == "uint8" then r = (i * 7919) % 23
      elseif dt == "bool" then r = (i * 7919) % 3 == 0 end
      if fl then
        if i % 37 == 0 then r = nan elseif i % 41 == 0 then r = -0.0 elseif i % 43 == 0 then r = 0.0
        elseif i % 53 == 0 then r = -math.huge else r = r / 4 end
      end
      vals[i] = r
    end
    local x = ember.tensor(vals, { dtype = dt })
    local rv = {}
    for i, v in ipairs(vals) do rv[i] = v == true and 1 or v == false and 0 or v end
    for _, desc in ipairs({ false, true }) do
      local want = ref(rv, desc)
      local _, got = x:sort(1, desc)
      local g = got:tolist()
      for i = 1, #want do
        if g[i] ~= want[i] then
          error(string.format("%s desc=%s: position %d is %d, want %d", dt, tostring(desc), i, g[i], want[i]))
        end
      end
      -- the same rows, as a column of a 2-d tensor (strided rows)
      local _, got2 = x:view(300, 1):expand(300, 2):sort(1, desc)
      check_tensor(got2:select(2, 2), want)
    end
  end
end

-- long rows (k * 64 <= n) take the heap select over the row in place: the
-- same tied positions as PyTorch 1.13 (values computed with it)
function T.topk_long_rows_pick_pytorchs_ties()
  local vals, ivals = {}, {}
  for i = 0, 999 do vals[i + 1] = (i * 7919) % 13; ivals[i + 1] = (i * 7919) % 13 end
  vals[501] = 0 / 0
  local x = ember.tensor(vals)
  local v, i = x:topk(5)
  check_tensor(i, { 501, 46, 20, 33, 59 })
  check(v[1]:item() ~= v[1]:item() and v[2]:item() == 12)
  v, i = x:topk(7, { largest = false })
  check_tensor(i, { 14, 53, 66, 79, 1, 40, 27 })
  v, i = ember.tensor(ivals, { dtype = "int64" }):topk(6)
  check_tensor(i, { 7, 20, 33, 72, 59, 46 })
  check_tensor(v, { 12, 12, 12, 12, 12, 12 })
  v, i = ember.tensor(vals, { dtype = "float64" }):topk(5)
  check_tensor(i, { 501, 46, 20, 33, 59 })
end

function T.topk_values_and_indices()
  local x = t({ 1.0, 5, 2, 4, 3 })
  local v, i = x:topk(2)
  check_tensor(v, { 5, 4 }); check_tensor(i, { 2, 4 })
  v, i = x:topk(3, { largest = false })
  check_tensor(v, { 1, 2, 3 }); check_tensor(i, { 1, 3, 5 })
  v, i = t({ 1.0, nan, 2 }):topk(1) -- NaN is the largest (PyTorch)
  check_tensor(v, { nan }); check_tensor(i, { 2 })
  local m = t({ { 3, 1, 2 }, { 0, 5, -1 } })
  v, i = m:topk(1, 1)
  check_tensor(v, { { 3, 5, 2 } }); check_tensor(i, { { 1, 2, 1 } })
  v, i = x:topk(0)
  check_eq(shape(v), "0"); check_eq(shape(i), "0")
  v, i = ember.zeros(0, 3):topk(0, 1)
  check_eq(shape(v), "0,3")
  -- ties: PyTorch's selection decides which equal values come back (Note
  -- [topk ties] in sort.c); expected indices from torch.topk, plus one
  local ties = t({ 1.0, 3, 3, 2, 3, nan, 0 })
  _, i = ties:topk(3)
  check_tensor(i, { 6, 3, 5 })
  local y = t({ 1.0, 3, 3, 2, 3, 0, 3, 3, 3, 1, 1, 3 })
  v, i = y:topk(4)
  check_tensor(v, { 3, 3, 3, 3 }); check_tensor(i, { 9, 8, 7, 12 })
  _, i = y:topk(2, { largest = false })
  check_tensor(i, { 6, 11 })
  check_error(function() x:topk(6) end, "topk: k (6) is out of range for dim 1 of size 5")
  check_error(function() x:topk(-1) end, "out of range")
end

function T.gather_picks_along_a_dim()
  local m = t({ { 1, 2, 3 }, { 4, 5, 6 } })
  check_tensor(m:gather(2, t({ { 3, 1 }, { 2, 2 } })), { { 3, 1 }, { 5, 5 } })
  check_tensor(ember.gather(m, 1, t({ { 2, 1, 2 } })), { { 4, 2, 6 } })
  check_error(function() m:gather(2, t({ { 4 } })) end,
    "gather: index 4 is out of bounds for dim 2 with size 3 (indices are 1-based)")
  check_error(function() m:gather(2, t({ { 0 } })) end, "index 0 is out of bounds")
  check_error(function() m:gather(2, t({ { 1.0 } })) end, "gather: index must be an int64 tensor, got float32")
  check_error(function() m:gather(2, t({ 1 })) end, "must have the same number of dims")
end

function T.sort_gradient_goes_to_the_picked_positions()
  local x = t({ 3.0, 1, 2 }, { dtype = "float64", requires_grad = true })
  local v, i = x:sort()
  check(not i.requires_grad, "indices are not differentiable")
  check(v.requires_grad)
  local loss = (v * t({ 1.0, 10, 100 }, { dtype = "float64" })):sum()
  loss:backward()
  check_tensor(x.grad, { 100, 1, 10 })
  local y = t({ 3.0, 1, 2 }, { dtype = "float64", requires_grad = true })
  local tv = y:topk(2)
  local loss2 = (tv * t({ 1.0, 10 }, { dtype = "float64" })):sum()
  loss2:backward()
  check_tensor(y.grad, { 1, 0, 10 })
end

-- ---- list arguments ----

function T.cat_and_stack()
  local a, b = t({ { 1, 2 } }), t({ { 3, 4 }, { 5, 6 } })
  check_tensor(ember.cat({ a, b }), { { 1, 2 }, { 3, 4 }, { 5, 6 } })
  check_tensor(ember.cat({ b, b }, 2), { { 3, 4, 3, 4 }, { 5, 6, 5, 6 } })
  check_tensor(ember.cat({ b, b }, -1), { { 3, 4, 3, 4 }, { 5, 6, 5, 6 } })
  -- dtype promotes over the list; 1-d empty tensors are skipped (PyTorch)
  local c = ember.cat({ t({ 1, 2 }), t({ 0.5 }) })
  check_eq(c.dtype, "float32"); check_tensor(c, { 1, 2, 0.5 })
  check_eq(shape(ember.cat({ ember.zeros(0), b })), "2,2")
  check_eq(shape(ember.cat({ ember.zeros(0), ember.zeros(0) })), "0")
  check_eq(shape(ember.cat({ a })), "1,2")
  local s = ember.stack({ t({ 1, 2 }), t({ 3, 4 }) })
  check_tensor(s, { { 1, 2 }, { 3, 4 } })
  check_tensor(ember.stack({ t({ 1, 2 }), t({ 3, 4 }) }, 2), { { 1, 3 }, { 2, 4 } })
  check_tensor(ember.stack({ t({ 1, 2 }), t({ 3, 4 }) }, -1), { { 1, 3 }, { 2, 4 } })
  check_eq(shape(ember.stack({ t(1), t(2), t(3) })), "3")
end

function T.list_argument_errors()
  local a = t({ { 1, 2 } })
  check_error(function() ember.cat({}) end, "cat: expected a non-empty list of tensors")
  check_error(function() ember.cat({ a, 3 }) end, "cat: argument 'tensors' element 2 is not a tensor (got number)")
  check_error(function() ember.cat({ a, a, "x" }) end, "element 3 is not a tensor (got string)")
  check_error(function() ember.cat(a) end, "bad argument #1 to 'cat' (tensors: table of tensors expected, got userdata)")
  check_error(function() ember.cat() end, "cat: missing argument 'tensors'")
  check_error(function() ember.cat({ a, t({ { 1, 2, 3 } }) }) end,
    "cat: sizes must match except in dim 1: element 1 is {1,2}, element 2 is {1,3}")
  check_error(function() ember.cat({ a, t({ 1, 2 }) }) end, "must have the same number of dims")
  check_error(function() ember.cat({ t(1), t(2) }) end, "zero-dimensional tensor")
  check_error(function() ember.cat({ a, a }, 3) end, "cat")
  check_error(function() ember.stack({ t({ 1, 2 }), t({ 1, 2, 3 }) }) end,
    "stack: every tensor must have one shape, but element 1 is {2} and element 2 is {3}")
  check_error(function() ember.stack({}) end, "stack: expected a non-empty list of tensors")
end

-- ---- list results ----

function T.split_chunk_unbind()
  local x = ember.arange(5)
  local p = x:split(2)
  check_eq(#p, 3)
  check_tensor(p[1], { 0, 1 }); check_tensor(p[2], { 2, 3 }); check_tensor(p[3], { 4 })
  p = ember.split(x, { 2, 3 }) -- the int[] overload
  check_eq(#p, 2); check_tensor(p[2], { 2, 3, 4 })
  p = ember.zeros(0):split(2)
  check_eq(#p, 1); check_eq(shape(p[1]), "0")
  local m = ember.arange(6):reshape(2, 3)
  p = m:split(2, 2)
  check_tensor(p[1], { { 0, 1 }, { 3, 4 } }); check_tensor(p[2], { { 2 }, { 5 } })
  p = ember.arange(5):chunk(3)
  check_eq(#p, 3); check_tensor(p[3], { 4 })
  p = ember.arange(6):chunk(4) -- PyTorch: 3 chunks of 2
  check_eq(#p, 3); check_tensor(p[3], { 4, 5 })
  check_eq(#ember.zeros(0):chunk(2), 2)
  local u = m:unbind()
  check_eq(#u, 2); check_tensor(u[2], { 3, 4, 5 })
  u = m:unbind(2)
  check_eq(#u, 3); check_tensor(u[3], { 2, 5 })
  check_eq(#ember.zeros(0, 2):unbind(), 0)
end

function T.list_result_errors()
  local x = ember.arange(5)
  check_error(function() x:split(-1) end, "split: split_size must be non-negative, got -1")
  check_error(function() x:split(0) end, "split: split_size can only be 0 if the dim's size is 0")
  check_error(function() x:split({ 2, 2 }) end, "split: split_sizes must sum to 5 (the size of dim 1), but they sum to 4")
  check_error(function() x:split({ 6, -1 }) end, "split_sizes[2] is -1")
  check_error(function() x:chunk(0) end, "chunk: chunks must be greater than 0, got 0")
  check_error(function() t(1):unbind() end, "unbind: expects a tensor with at least one dim")
  check_error(function() x:split(2, 2) end, "split")
end

function T.list_results_are_views_of_the_base()
  local base = ember.zeros(4)
  local p = base:split(2)
  base:fill_(7)
  check_tensor(p[2], { 7, 7 })
  p[1]:fill_(1) -- no grad recorded: writing through the view is allowed
  check_tensor(base, { 1, 1, 7, 7 })
  local u = base:unbind()
  u[4]:fill_(3)
  check_tensor(base, { 1, 1, 7, 3 })
end

function T.inplace_on_a_multi_output_view_is_refused()
  local a = ember.ones(4, { requires_grad = true })
  local b = a * 1
  local p = b:split(2)
  check_error(function() p[1]:mul_(2) end,
    "mul_: the tensor is (a view of) output 1 of SplitBackward, one of several views returned by one op; "
    .. "such views cannot be modified in place")
  check_error(function() b:unbind()[2]:add_(1) end, "output 2 of UnbindBackward")
  check_error(function() b:chunk(2)[2]:zero_() end, "output 2 of ChunkBackward")
  -- a view of such a view is refused too (PyTorch propagates it)
  check_error(function() p[2]:narrow(1, 2, 1):mul_(2) end, "(a view of) output 2 of SplitBackward")
  check_error(function() p[1][1]:add_(1) end, "output 1 of SplitBackward")
  -- out of place is fine, and so is a write under no_grad
  local q = p[1] * 2
  q:sum():backward()
  check_tensor(a.grad, { 2, 2, 0, 0 })
  do
    local g <close> = ember.no_grad()
    p[2]:fill_(5)
  end
  check_tensor(b, { 1, 1, 5, 5 })
end

-- ---- str arguments with a closed set of values ----

function T.searchsorted_and_its_side()
  local s = t({ 1, 3, 5, 7, 9 })
  local v = t({ 3, 6, 9, 0, 10 })
  -- torch (+1): left [2,4,5,1,6], right [3,4,6,1,6]
  check_tensor(ember.searchsorted(s, v), { 2, 4, 5, 1, 6 })
  check_tensor(ember.searchsorted(s, v, { side = "left" }), { 2, 4, 5, 1, 6 })
  check_tensor(ember.searchsorted(s, v, { side = "right" }), { 3, 4, 6, 1, 6 })
  check_tensor(ember.searchsorted(t({ { 1, 3, 5 }, { 2, 4, 6 } }), t({ { 3, 6 }, { 1, 4 } })), { { 2, 4 }, { 1, 2 } })
  local r = ember.searchsorted(s, 4)
  check_eq(#r.shape, 0); check_eq(r:item(), 3); check_eq(r.dtype, "int64")
  check_eq(shape(ember.searchsorted(s, ember.zeros(0))), "0")
  check_tensor(ember.searchsorted(t({ 0.5, 1.5 }), t({ 1, 2 })), { 2, 3 }) -- int values, float boundaries
end

function T.str_argument_errors()
  local s = t({ 1, 3, 5 })
  check_error(function() ember.searchsorted(s, 2, { side = "middle" }) end,
    "to 'searchsorted' (side: expected one of \"left\", \"right\", got \"middle\")")
  check_error(function() ember.searchsorted(s, 2, { side = 1 }) end,
    "side: expected one of \"left\", \"right\", got number")
  check_error(function() ember.searchsorted(t(1), 2) end, "sorted_sequence must have at least one dim")
  check_error(function() ember.searchsorted(t({ { 1, 2 } }), t({ 1, 2, 3 })) end,
    "searchsorted: sorted_sequence {1,2} and self {3} must have the same leading dims")
end

-- ---- overloads and bindings ----

function T.overload_resolution_and_its_error()
  local x = ember.arange(6)
  check_eq(#x:split(4), 2)       -- a number: split(split_size)
  check_eq(#x:split({ 1, 5 }), 2) -- a table: split.sizes
  check_eq(#ember.split(x, 3, 1), 2)
  check_eq(#x:split({ 3, 3 }, { dim = 1 }), 2)
  check_error(function() x:split("a") end,
    "split: no overload matches the arguments (tensor, string); expected one of: "
    .. "split(Tensor(a) self, int split_size, dim dim=1) -> Tensor[] | "
    .. "split.sizes(Tensor(a) self, int[] split_sizes, dim dim=1) -> Tensor[]")
  check_error(function() x:split(2, 1, 3) end, "split: no overload matches the arguments (tensor, number, number, number)")
  check_error(function() x:split(2, { bogus = 1 }) end, "no overload matches")
  check_eq(type(ember.split), "function")
  check_eq(ember.split_sizes, nil)
end

function T.keyword_arguments_of_multi_result_ops()
  local x = t({ 2.0, 1, 3 })
  local v, i = x:sort({ dim = 1, descending = true })
  check_tensor(v, { 3, 2, 1 }); check_tensor(i, { 3, 1, 2 })
  check_error(function() x:sort({ bogus = true }) end, "bad option 'bogus' to 'sort'")
  check_error(function() x:topk() end, "topk: missing argument 'k'")
  check_error(function() x:sort(1, "yes") end, "descending: boolean expected, got string")
end

return T
