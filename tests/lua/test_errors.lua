-- test_errors.lua -- every error is a catchable Lua error whose message
-- names the op, the argument and, for shapes, both shapes. Nothing crashes.
local T = {}
local x = ember.ones(2, 3)

function T.creation_errors()
  check_error(function() return ember.tensor({ { 1, 2 }, { 3 } }) end,
    "tensor", "ragged", "[2]", "expected 2 elements, got 1")
  check_error(function() return ember.tensor({ { 1, 2 }, 3 }) end, "tensor", "[2]", "got number")
  check_error(function() return ember.tensor({ { 1, 2 }, { 3, { 4 } } }) end, "tensor", "[2][2]")
  check_error(function() return ember.tensor({ 1, "a" }) end, "tensor", "[2]", "string")
  check_error(function() return ember.tensor("x") end, "tensor", "data", "got string")
  check_error(function() return ember.tensor({ 1 }, { dtype = "nope" }) end, "tensor", "dtype", "nope")
  check_error(function() return ember.tensor({ 1 }, { foo = 1 }) end, "bad option 'foo'", "tensor")
  check_error(function() return ember.zeros(-1) end, "zeros", "-1")
  check_error(function() return ember.ones(2, { dtype = 5 }) end, "ones", "dtype")
  check_error(function() return ember.ones(2, { dtype = "float128" }) end, "ones", "float128")
  check_error(function() return ember.full({ 2 }) end, "full", "fill_value")
  check_error(function() return ember.arange(0, 5, 0) end, "arange", "step")
end

function T.dim_out_of_range()
  check_error(function() return x:sum(5) end, "sum", "dim 5", "2 dims")
  check_error(function() return x:sum(0) end, "sum", "dim", "0")
  check_error(function() return x:sum(1.5) end, "sum", "dim", "integer")
  check_error(function() return x:transpose(1, 3) end, "transpose", "dim 3")
  check_error(function() return x:size(3) end, "size", "dim 3")
  check_error(function() return x:squeeze(4) end, "squeeze", "dim 4")
  check_error(function() return x:unsqueeze(5) end, "unsqueeze", "dim 5")
  check_error(function() return x:permute(1, 1) end, "permute", "twice")
  check_error(function() return x:permute(1) end, "permute")
end

function T.reduction_errors()
  local e = ember.zeros(0, 3)
  check_error(function() return e:amax() end, "amax", "no elements", "dim")
  check_error(function() return e:amin(1) end, "amin", "dim 1", "non-zero size")
  check_error(function() return x:amax({ 1, -2 }) end, "amax", "dim 1", "multiple times")
  check_error(function() return x:amax(3) end, "amax", "dim 3")
  check_error(function() return x:prod(3) end, "prod", "dim 3")
  check_error(function() return x:prod({ 1, 2 }) end, "prod", "dim")
  check_error(function() return x:all(0) end, "all", "dim")
  check_error(function() return x:any(5) end, "any", "dim 5")
  local xi = ember.tensor({ 1, 2 })
  check_error(function() return xi:var() end, "var", "floating", "int64")
  check_error(function() return xi:std() end, "std", "floating", "int64")
  check_error(function() return xi:norm() end, "norm", "floating", "int64")
  check_error(function() return x:norm(2, 1, { dtype = "int64" }) end, "norm", "output dtype", "int64")
  check_error(function() return x:norm("a") end, "norm", "p")
  check_error(function() return x:var(1, { correction = 1.5 }) end, "var", "correction")
  check_error(function() return x:prod(nil, { dtype = "float128" }) end, "prod", "dtype", "float128")
  check_error(function() return ember.zeros(0):argmax() end, "argmax", "no elements")
  check_error(function() return ember.zeros(2, 0):argmin(2) end, "argmin", "dim 2", "non-zero size")
  check_error(function() return x:argmax(3) end, "argmax", "dim 3")
end

function T.index_out_of_range()
  check_error(function() return x[0] end, "index 0 out of range for dim 1 of size 2")
  check_error(function() return x[5] end, "index 5 out of range for dim 1 of size 2")
  check_error(function() return x[-3] end, "index -3 out of range for dim 1 of size 2")
  check_error(function() return x[1.5] end, "index", "integer")
  check_error(function() return x[{ 1, 7 }] end, "index 7 out of range for dim 2 of size 3")
  check_error(function() return x[{ { 1, 3 } }] end, "index 3 out of range for dim 1 of size 2")
  check_error(function() return x[{ { 1, 2 }, {}, 1 }] end, "too many indices")
  check_error(function() return x[{ { 1, 2, 0 } }] end, "step")
  check_error(function() return x[{ "a" }] end, "index", "string")
  check_error(function() x[5] = 1 end, "index 5 out of range")
  check_error(function() return ember.tensor(3)[1] end, "0-dim")
  check_error(function() return x:select(2, 4) end, "select", "index 4", "size 3")
  check_error(function() return x:narrow(1, 2, 5) end, "narrow", "{2,3}")
  check_error(function() return ember.ones(2):item() end, "item", "2 elements")
  check_error(function() return #ember.tensor(3) end, "len", "0-dim")
end

function T.shape_mismatch_names_both_shapes()
  check_error(function() return x + ember.ones(4, 5) end, "add", "{2,3}", "{4,5}")
  check_error(function() return x * ember.ones(4) end, "mul", "{2,3}", "{4}")
  check_error(function() return x:mm(ember.ones(4, 5)) end, "mm", "{2,3}", "{4,5}")
  check_error(function() return x:matmul(ember.ones(2)) end, "matmul", "{2,3}", "{2}")
  check_error(function() return x:view(7) end, "view", "{7}", "{2,3}")
  check_error(function() return x:expand(3, 3) end, "expand", "{2,3}", "{3,3}")
  check_error(function() x[1] = ember.ones(4) end, "copy_", "{3}", "{4}")
  check_error(function() x:add_(ember.ones(3, 3)) end, "add_", "{2,3}", "{3,3}")
end

function T.wrong_type()
  check_error(function() return x + "a" end, "bad argument #2 to 'add'", "other", "string")
  check_error(function() return "a" + x end, "bad argument #1 to 'add'", "self", "string")
  check_error(function() return x * {} end, "mul", "table")
  check_error(function() return x:add(nil) end, "add", "other")
  check_error(function() return ember.add() end, "add", "self")
  check_error(function() return ember.add(x, x, x, x) end, "add", "at most 2 arguments, got 4")
  check_error(function() return ember.manual_seed("a") end, "manual_seed", "seed", "string")
  check_error(function() return ember.set_num_threads(0) end, "set_num_threads", "0")
  check_error(function() x.foo = 3 end, "foo")
  check_error(function() x[1] = "a" end, "value", "string")
  check_error(function() return x:to("int7") end, "to", "dtype", "int7")
  check_error(function() return ember.sum({ 1, 2 }) end, "sum", "self")
end

function T.unsupported_dtype()
  check_error(function() return ember.tensor({ 1, 2 }):mean() end, "mean", "int64")
  check_error(function() local i = ember.tensor({ 1, 2 }); i:div_(2) end, "div_", "int64")
  check_error(function() local i = ember.tensor({ 1, 2 }); i:add_(1.5) end, "add_", "float32", "int64")
  check_error(function() return -ember.tensor({ true }) end, "neg", "bool")
  check_error(function() return ember.randn(2, { dtype = "int64" }) end, "randn", "int64")
end

function T.bad_option_name()
  check_error(function() return x:sum({ keepdims = true }) end, "bad option 'keepdims' to 'sum'", "keepdim")
  check_error(function() return x:add(x, { alfa = 2 }) end, "bad option 'alfa' to 'add'", "alpha")
  check_error(function() return x:sum({ dtype = "float128" }) end, "sum", "dtype", "float128")
  check_error(function() return ember.zeros(2, { dtype = true }) end, "zeros", "dtype")
end

function T.closed_tensor()
  local y = ember.ones(2)
  getmetatable(y).__close(y)
  check_error(function() return y:sum() end, "tensor used after close")
  check_error(function() return y[1] end, "tensor used after close")
  check_error(function() return x + y end, "tensor used after close")
  check_error(function() return y.shape end, "tensor used after close")
end

-- Note [Tensor userdata]: a tensor is recognised by its block (pointer and
-- tag word), so a foreign userdata of the same size (io.stdout's
-- luaL_Stream is two words too) is not one, and a tensor whose metatable
-- was replaced is still one to the functions
function T.foreign_userdata_is_not_a_tensor()
  check_error(function() return ember.add(io.stdout, 1) end, "add", "tensor expected, got userdata")
  check_error(function() return ember.add(x, io.stdout) end, "add", "other", "userdata")
  check_error(function() return ember.Tensor.sum(io.stderr) end, "sum", "userdata")
  check_eq(ember.is_tensor(io.stdout), false)
  check_eq(ember.is_tensor(x), true)
  local y = ember.ones(2)
  local mt = getmetatable(y)
  debug.setmetatable(y, nil)
  check_eq(ember.is_tensor(y), true)
  check_tensor(ember.add(y, 1), { 2, 2 })
  debug.setmetatable(y, mt)
  check_tensor(y + 1, { 2, 2 })
end

function T.errors_leave_state_usable()
  for _ = 1, 100 do
    pcall(function() return x + ember.ones(4) end)
    pcall(function() return 1 + x + "a" end)
  end
  check_tensor(x + 1, { 2, 2, 2, 2, 2, 2 })
end

function T.fuzz_never_crashes()
  -- every function and method with odd arguments: errors, never a crash
  local closed = ember.ones(2)
  getmetatable(closed).__close(closed)
  local values = { nil, 0, -1, 1, 2, 3, 2.5, 1e300, 0 / 0, -1 / 0, "a", "float64", {}, { 1, 2 },
    { { 1 }, { 2 } }, { -1 }, { keepdim = true }, { dtype = "int32" }, { alpha = "x" }, true, false,
    ember.ones(2, 3), ember.tensor(5), ember.zeros(0), ember.tensor({ true }), closed, print,
    ember.ones(2, 3):t(), ember.arange(6):view(2, 3)[{ {}, { 1, 3, 2 } }] }
  local nv = 29
  local fns = {}
  for name, f in pairs(ember) do
    -- the grad-mode switches change the thread's mode by design (statement form)
    local modal = { no_grad = 1, enable_grad = 1, inference_mode = 1, set_grad_enabled = 1 }
    -- help and time print (time calls its argument); the memory cap and the
    -- thread count are process-wide settings; the writers would write files
    -- named by the odd strings below
    local skip = { help = 1, time = 1, set_num_threads = 1, set_memory_limit = 1, save = 1, save_npy = 1,
      savez = 1, savez_compressed = 1 }
    if type(f) == "function" and not skip[name] and not modal[name] then
      fns[#fns + 1] = { name, f }
    end
  end
  for name, f in pairs(ember.Tensor) do
    if type(f) == "function" then fns[#fns + 1] = { "Tensor." .. name, f } end
  end
  table.sort(fns, function(a, b) return a[1] < b[1] end)
  math.randomseed(12345)
  local calls = 0
  for _, nf in ipairs(fns) do
    for _ = 1, 60 do
      local n = math.random(0, 4)
      local args = {}
      for i = 1, n do args[i] = values[math.random(1, nv)] end
      if nf[1]:sub(1, 7) == "Tensor." and math.random() < 0.7 then
        args[1] = values[math.random(22, nv)]
      end
      pcall(nf[2], table.unpack(args, 1, n))
      calls = calls + 1
    end
  end
  -- metamethods and indexing with odd operands
  local x = ember.ones(2, 3)
  for i = 1, nv do
    local v = values[i]
    pcall(function() return x + v end)
    pcall(function() return v - x end)
    pcall(function() return x * v end)
    pcall(function() return v / x end)
    pcall(function() return x ^ v end)
    pcall(function() return v % x end)
    pcall(function() return x[v] end)
    pcall(function() x[v] = v end)
    pcall(function() x[v] = 1 end)
    pcall(function() return x[{ v, v }] end)
    pcall(function() return x[{ { v, v } }] end)
    pcall(function() return #v end)
    pcall(function() return -v end)
    pcall(tostring, v)
  end
  check(calls > 0)
  check_tensor(x, { 1, 1, 1, 1, 1, 1 }, nil, "x unchanged by failed writes")
end

-- window options past 2^31 are errors naming the argument, not int64
-- overflow in the output-size arithmetic (fuzz finds: unfold's kernel_size)
function T.huge_window_options()
  local F = ember.nn.functional
  local x = ember.randn(1, 2, 4, 4)
  check_error(function() return F.unfold(x, 2 ^ 53) end, "unfold", "kernel_size", "at most 2147483647")
  check_error(function() return F.unfold(x, 2, 1, 2 ^ 40) end, "unfold", "padding", "at most")
  check_error(function() return F.fold(ember.randn(1, 4, 4), { 3, 3 }, 2 ^ 31) end, "fold", "kernel_size", "at most")
  check_error(function() return F.conv2d(x, ember.randn(1, 2, 2, 2), nil, 1, 2 ^ 62) end, "conv2d", "padding", "at most")
  check_error(function() return F.conv2d(x, ember.randn(1, 2, 2, 2), nil, 2 ^ 40) end, "conv2d", "stride", "at most")
  check_error(function() return F.max_pool2d(x, 2, 2, 0, 2 ^ 40) end, "max_pool2d", "dilation", "at most")
  check_error(function() return F.avg_pool2d(x, 2 ^ 40) end, "avg_pool2d", "kernel_size", "at most")
  local y, i = F.max_pool2d(x, 2, { return_indices = true })
  check_error(function() return F.max_unpool2d(y, i, 2 ^ 40) end, "max_unpool2d", "kernel_size")
  check(F.unfold(x, 2):size(2) == 8)
  -- a bin count past memory is the allocation's error (fuzz find: histc
  -- called calloc with a count whose byte size overflows)
  check_error(function() return ember.histc(ember.randn(1), math.maxinteger) end, "histc", "too many elements")
  -- a split size near 2^63 is one piece (fuzz find: the piece count formed
  -- size + split_size - 1 in int64)
  check_error(function() return F.adaptive_avg_pool2d(ember.randn(2, 2, 4), 2 ^ 53) end, "adaptive_avg_pool2d",
    "output_size", "too many elements")
  check_error(function() return F.lp_pool2d(ember.randn(1, 2, 4, 4), -7, math.mininteger) end, "lp_pool2d",
    "kernel_size")
  local parts = ember.randn(3, 2):split(math.maxinteger)
  check(#parts == 1 and parts[1]:size(1) == 3, "one piece")
  -- chunks near 2^63: pieces of one (fuzz find: the piece size formed
  -- size + chunks - 1 in int64; PyTorch computes it the same way, wraps and
  -- refuses, but gives 5 pieces for 2^40 chunks of 5)
  parts = ember.arange(1, 6):chunk(math.maxinteger)
  check(#parts == 5 and parts[5]:item() == 5, "five pieces of one")
  -- the same shape of arithmetic in slicing and integer arange: a step near
  -- 2^63 takes one element (Python's and PyTorch's slices: x[0:5:2**62])
  local x = ember.arange(1, 6)
  check(ember.equal(x[{ { 1, 5, math.maxinteger } }], ember.tensor({ 1 })), "a huge step takes the first element")
  check(ember.equal(ember.arange(0, 10, 1 << 62), ember.tensor({ 0 })), "arange with a huge step")
end

return T
