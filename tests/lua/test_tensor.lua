-- test_tensor.lua -- creation, printing, item/tolist, dtypes and properties.
local T = {}

function T.create_nested()
  local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  check_eq(x.dtype, "int64")
  check_shape(x, { 2, 3 })
  check_eq(x.ndim, 2)
  check_eq(tostring(x.device), "cpu")
  check_eq(x:numel(), 6)
  check_eq(x:dim(), 2)
  check_eq(#x, 2)
  check_tensor(x, { 1, 2, 3, 4, 5, 6 })
end

function T.shape_prints_and_compares()
  local x = ember.zeros(2, 3)
  check_eq(tostring(x.shape), "{2, 3}")
  check_eq(tostring(ember.tensor(1).shape), "{}")
  check(x.shape == ember.ones(2, 3).shape, "equal shapes compare equal")
  check(x.shape ~= ember.ones(3, 2).shape)
  check_eq(#x.shape, 2)
end

function T.create_infers_dtype()
  check_eq(ember.tensor({ 1, 2 }).dtype, "int64")
  check_eq(ember.tensor({ 1, 2.5 }).dtype, "float32")
  check_eq(ember.tensor({ 1.0, 2.0 }).dtype, "float32")
  check_eq(ember.tensor({ true, false }).dtype, "bool")
  check_eq(ember.tensor(3).dtype, "int64")
  check_eq(ember.tensor(3.5).dtype, "float32")
  check_eq(ember.tensor(true).dtype, "bool")
  check_eq(ember.tensor({}).dtype, "float32")
  check_shape(ember.tensor({}), { 0 })
  check_shape(ember.tensor(3), {})
end

function T.create_with_dtype()
  for _, dt in ipairs({ "float64", "float32", "float16", "bfloat16", "int32", "int64", "int8",
                        "uint8", "bool" }) do
    local x = ember.tensor({ 1, 0, 1 }, { dtype = dt })
    check_eq(x.dtype, dt)
    check_eq(x:type(), dt)
    check_eq(ember[dt], dt, "dtype constant")
  end
  local y = ember.tensor({ 1.5, 2.25 }, { dtype = ember.float64 })
  check_tensor(y, { 1.5, 2.25 })
  -- large int64 values stay exact
  local big = ember.tensor({ 9007199254740993 })
  check_eq(big:item(), 9007199254740993)
end

function T.create_copy_of_tensor()
  local a = ember.tensor({ 1, 2 })
  local b = ember.tensor(a, { dtype = "float64" })
  check_eq(b.dtype, "float64")
  b[1] = 5
  check_eq(a[1]:item(), 1, "copy does not share storage")
end

function T.item_values()
  check_eq(math.type(ember.tensor(7):item()), "integer")
  check_eq(ember.tensor(7):item(), 7)
  check_eq(math.type(ember.tensor(2.5):item()), "float")
  check_eq(ember.tensor(2.5):item(), 2.5)
  check_eq(ember.tensor(true):item(), true)
  check_eq(ember.tensor({ { 4 } }):item(), 4)
end

-- an empty tensor's data may be NULL: tolist must not offset it (UBSan,
-- found by make fuzz)
function T.tolist_of_empty_tensors()
  local l = ember.zeros(2, 0, 3):tolist()
  check(#l == 2 and #l[1] == 0 and #l[2] == 0)
  check(#ember.zeros(0):tolist() == 0)
end

-- float -> integer casts of NaN and out-of-range values give what x86's
-- conversions (and so PyTorch) give, never C's undefined behaviour (found
-- by make fuzz under UBSan)
function T.float_to_integer_casts_out_of_range()
  local x = ember.tensor({ 0 / 0, 1e30, -1e30, 3.7, -2.5, 300.5, -129.5, 1e10, 255.9 })
  check_eq(x:long():tolist()[1], math.mininteger)
  check_eq(x:long():tolist()[4], 3)
  check_tensor(x:int(), { -2147483648, -2147483648, -2147483648, 3, -2, 300, -129, -2147483648, 255 })
  check_tensor(x:to("uint8"), { 0, 0, 0, 3, 254, 44, 127, 0, 255 })
  check_tensor(x:double():to("int8"), { 0, 0, 0, 3, -2, 44, 127, 0, -1 })
end

function T.tolist_nested()
  local l = ember.tensor({ { 1, 2 }, { 3, 4 } }):tolist()
  check_eq(#l, 2)
  check_eq(l[2][1], 3)
  check_eq(math.type(l[1][1]), "integer")
  local f = ember.tensor({ 0.5, 1.5 }):tolist()
  check_eq(f[2], 1.5)
  check_eq(ember.tensor(3):tolist(), 3)
  local b = ember.tensor({ true, false }):tolist()
  check_eq(b[1], true)
  check_eq(b[2], false)
end

function T.size_stride()
  local x = ember.zeros(2, 3, 4)
  local s = x:size()
  check_eq(#s, 3)
  check_eq(s[3], 4)
  check_eq(x:size(2), 3)
  check_eq(x:size(-1), 4)
  local st = x:stride()
  check_eq(st[1], 12)
  check_eq(st[2], 4)
  check_eq(st[3], 1)
  check_eq(x:stride(1), 12)
  check_eq(x:is_contiguous(), true)
  check_eq(x:storage_offset(), 0)
end

function T.conversions()
  local x = ember.tensor({ 1.7, -2.2 })
  check_eq(x:double().dtype, "float64")
  check_eq(x:half().dtype, "float16")
  check_eq(x:long().dtype, "int64")
  check_eq(x:int().dtype, "int32")
  check_eq(x:bool().dtype, "bool")
  check_eq(x:float().dtype, "float32")
  check_tensor(x:long(), { 1, -2 })
  check_tensor(x:bool(), { true, true })
  check_tensor(ember.tensor({ 0.5, 1.25 }):half(), { 0.5, 1.25 })
end

function T.properties_unknown_key_is_nil()
  local x = ember.ones(2)
  check_eq(x.nonexistent, nil)
  check_eq(x[{}] ~= nil, true)
  check(type(x.add) == "function")
  check(ember.is_tensor(x))
  check(not ember.is_tensor({}))
  check(not ember.is_tensor(3))
  check_eq(type(ember.__version), "string")
end

function T.tostring_float()
  check_eq(tostring(ember.tensor({ { 1.5, 2 }, { 3, 4 } })),
    "tensor([[1.5000, 2.0000],\n        [3.0000, 4.0000]])")
  check_eq(tostring(ember.tensor({ 1.0, 2.0 }, { dtype = "float32" })), "tensor([1., 2.])")
  check_eq(tostring(ember.tensor({ -1.5, 2.25 })), "tensor([-1.5000,  2.2500])")
  check_eq(tostring(ember.tensor(3.5)), "tensor(3.5000)")
  check_eq(tostring(ember.tensor({ 1e-5, 1 })), "tensor([1.0000e-05, 1.0000e+00])")
  check_eq(tostring(ember.tensor({ 1, 1e9 }, { dtype = "float64" })),
    "tensor([1.0000e+00, 1.0000e+09], dtype=float64)")
  check_eq(tostring(ember.tensor({ 0 / 0, 1 / 0, -1 / 0, 1.5 })),
    "tensor([   nan,    inf,   -inf, 1.5000])")
end

function T.tostring_int_bool()
  check_eq(tostring(ember.tensor({ 1, 2 })), "tensor([1, 2])")
  check_eq(tostring(ember.tensor({ 1, -20 })), "tensor([  1, -20])")
  check_eq(tostring(ember.tensor({ 1, 2 }, { dtype = "int32" })), "tensor([1, 2], dtype=int32)")
  check_eq(tostring(ember.tensor({ true, false })), "tensor([ True, False])")
  check_eq(tostring(ember.tensor(5)), "tensor(5)")
end

function T.tostring_empty()
  check_eq(tostring(ember.tensor({})), "tensor([])")
  check_eq(tostring(ember.zeros(0, 3)), "tensor([], size={0,3})")
  check_eq(tostring(ember.zeros(0, { dtype = "int64" })), "tensor([], dtype=int64)")
end

function T.tostring_summarised()
  local s = tostring(ember.arange(2000))
  check_eq(s, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])")
  local m = tostring(ember.zeros(100, 100))
  check(m:find("...", 1, true), "has ellipsis")
  local lines = 0
  for _ in m:gmatch("\n") do lines = lines + 1 end
  check_eq(lines, 6, "3 rows, ..., 3 rows")
end

function T.tostring_wraps_long_rows()
  local s = tostring(ember.arange(30):float() + 0.5)
  check(s:find("\n", 1, true), "long vector wraps")
  for line in s:gmatch("[^\n]+") do check(#line <= 80, "line within 80 columns") end
end

function T.close_and_gc()
  do
    local x <close> = ember.ones(3)
    check_eq(x:numel(), 3)
  end
  local y = ember.ones(2)
  local mt = getmetatable(y)
  mt.__close(y)
  mt.__close(y) -- idempotent
  check_error(function() return y:numel() end, "tensor used after close")
  check_error(function() return y + 1 end, "tensor used after close")
  check_eq(tostring(y), "tensor(<closed>)")
  y = nil
  collectgarbage()
end

function T.require_returns_same_module()
  check(require("ember") == ember)
  check(package.loaded.ember == ember)
end

local function captured(fn)
  local name = os.tmpname()
  local f = assert(io.open(name, "w"))
  local old = io.output()
  io.output(f)
  local ok, err = pcall(fn)
  io.output(old)
  f:close()
  f = assert(io.open(name))
  local text = f:read("a")
  f:close()
  os.remove(name)
  if not ok then error(err, 0) end
  return text
end

function T.help_known_and_unknown()
  local add = captured(function() ember.help("add") end)
  check(add:find("add(Tensor self, Tensor other", 1, true), add)
  check_eq(captured(function() ember.help(ember.add) end), add)
  local sum = captured(function() ember.help(ember.ones(1).sum) end)
  check(sum:find("sum(Tensor self", 1, true), sum)
  check(captured(function() ember.help("tensor") end):find("ember.tensor(", 1, true))
  local all = captured(function() ember.help() end)
  check(all:find("matmul", 1, true) and all:find("tensor", 1, true), all)
  check_error(function() ember.help("nosuchop") end, "nosuchop")
  check_error(function() ember.help(42) end, "help", "number")
end

-- a bool byte other than 0/1 would be undefined behaviour in every kernel
-- that loads it (the sanitizer build catches it): empty bool starts false
function T.empty_bool_starts_false()
  local b = ember.empty(2, 3, { dtype = "bool" })
  check_tensor(b, { { false, false, false }, { false, false, false } })
  check_eq(b:sum():item(), 0)
end

return T
