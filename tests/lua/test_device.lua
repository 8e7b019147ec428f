-- test_device.lua -- device objects, {device=} on factories, x:to/x:cpu,
-- generators and seeding. (A non-cpu backend is exercised by the fake
-- device of tests/check_device.c; a stock build has only the cpu.)
local T = {}

function T.device_objects()
  local c = ember.device("cpu")
  check_eq(tostring(c), "cpu")
  check_eq(c.type, "cpu")
  check_eq(c.index, nil)
  local g = ember.device("cuda:1")
  check_eq(tostring(g), "cuda:1")
  check_eq(g.type, "cuda")
  check_eq(g.index, 1) -- device ids are 0-based, as in PyTorch
  check_eq(ember.device("cuda", 0).index, 0)
  check_eq(tostring(ember.device("cuda")), "cuda") -- no index, as torch.device("cuda")
  check_eq(ember.device("cuda").index, nil)
  check(ember.device("cuda:1") == ember.device("cuda", 1))
  check(ember.device("cuda") ~= ember.device("cuda:0"))
  check(ember.device("cpu") ~= ember.device("cuda"))
  check(ember.device(c) == c)
  check_eq(tostring(ember.device("privateuseone:2")), "privateuseone:2")
  check_eq(c.nonsense, nil)
end

function T.tensor_device()
  local x = ember.ones(2, 3)
  check(x.device == ember.device("cpu"))
  check_eq(tostring(x.device), "cpu")
  check_eq(x.device.type, "cpu")
  check_eq(tostring(x[1].device), "cpu") -- views too
  check(not tostring(x):find("device"), "cpu tensors print no device")
end

function T.factories_take_device()
  local cpu = ember.device("cpu")
  local made = {
    ember.empty(2, { device = "cpu" }),
    ember.zeros(2, 3, { device = cpu }),
    ember.ones({ 2 }, { device = "cpu", dtype = "float64" }),
    ember.full({ 2 }, 7, { device = "cpu:0" }),
    ember.arange(4, { device = "cpu" }),
    ember.rand(3, { device = "cpu" }),
    ember.randn(3, { device = cpu, dtype = "float64" }),
    ember.tensor({ 1, 2 }, { device = "cpu" }),
  }
  for i, t in ipairs(made) do check(t.device == cpu, "factory " .. i) end
  check_tensor(made[4], { 7, 7 })
  check_eq(made[3].dtype, "float64")
  local r = ember.zeros(2, { device = "cpu", requires_grad = true })
  check(r.requires_grad)
end

function T.unavailable_devices()
  for _, f in ipairs({ "empty", "zeros", "ones", "rand", "randn" }) do
    check_error(function() return ember[f](2, { device = "cuda:0" }) end,
      f .. ": device cuda:0 is not available: no backend registered")
  end
  check_error(function() return ember.full({ 2 }, 1, { device = "cuda" }) end,
    "full: device cuda:0 is not available")
  check_error(function() return ember.arange(3, { device = ember.device("cuda", 2) }) end,
    "arange: device cuda:2 is not available")
  check_error(function() return ember.tensor({ 1 }, { device = "privateuseone" }) end,
    "privateuseone:0 is not available")
  check_error(function() return ember.ones(2):to("cuda") end, "to_device: device cuda:0 is not available")
  check_error(function() return ember.to_device(ember.ones(2), "cuda:3") end, "cuda:3 is not available")
end

function T.bad_devices()
  check_error(function() return ember.device("tpu") end, "device", "expected one of cpu, cuda, privateuseone", "tpu")
  check_error(function() return ember.device("cuda:x") end, "device", "cuda:x", "0..127")
  check_error(function() return ember.device("cuda:-1") end, "device", "cuda:-1")
  check_error(function() return ember.device("cuda:01") end, "device", "cuda:01")
  check_error(function() return ember.device("") end, "device")
  check_error(function() return ember.device() end, "bad argument #1 to 'device'", "nil")
  check_error(function() return ember.device(3) end, "bad argument #1 to 'device'", "number")
  check_error(function() return ember.device("cuda:1", 2) end, "device", "index", "already")
  check_error(function() return ember.device("cuda", -1) end, "device", "index", "0..127")
  check_error(function() return ember.device("cuda", 1.5) end, "device", "index", "integer")
  check_error(function() return ember.zeros(2, { device = 3 }) end, "bad argument", "'zeros'", "device", "number")
  check_error(function() return ember.zeros(2, { device = "gpu" }) end, "'zeros'", "device", "gpu")
  check_error(function() return ember.zeros(2, { device = {} }) end, "'zeros'", "device", "table")
  check_error(function() return ember.rand(2, { generator = "g" }) end, "'rand'", "generator", "string")
  check_error(function() return ember.ones(2):to_device() end, "to_device", "device")
end

function T.to_and_cpu()
  local x = ember.tensor({ { 1, 2 }, { 3, 4 } })
  check(rawequal(x:cpu(), x), "x:cpu() of a cpu tensor is x")
  check(rawequal(x:to("cpu"), x))
  check(rawequal(x:to(ember.device("cpu")), x))
  check(rawequal(x:to("int64"), x))
  local y = x:to("cpu", "float64")
  check_eq(y.dtype, "float64")
  check_tensor(y, { 1, 2, 3, 4 })
  check_eq(x:to("float32").dtype, "float32")
  check_eq(x:to(ember.float64).dtype, "float64")
  check_error(function() return x:to("cpu", "int7") end, "to", "dtype", "int7")
  check_error(function() return x:to("cuda:x") end, "bad argument #2 to 'to'", "device", "cuda:x")
  check_error(function() return x:to("int7") end, "bad argument #2 to 'to'", "dtype", "int7")
  check_error(function() return x:to() end, "to", "dtype")
  check_error(function() return x:to("cpu", "float32", 3) end, "to", "at most a device and a dtype")
  -- differentiable, the identity on the cpu
  local a = ember.ones(3, { requires_grad = true })
  local b = a:to("cpu", "float64") * 2
  b:sum():backward()
  check_tensor(a.grad, { 2, 2, 2 })
  check_eq(a.grad.dtype, "float32")
end

function T.generators()
  local g = ember.Generator()
  check_eq(g:initial_seed(), 67280421310721) -- torch.Generator()'s default
  check(rawequal(g:manual_seed(5), g), "manual_seed returns the generator")
  check_eq(g:initial_seed(), 5)
  local a = ember.rand(5, { generator = g })
  g:manual_seed(5)
  local b = ember.rand(5, { generator = g })
  check_tensor(b, a:tolist(), 0)
  local c = ember.rand(5, { generator = g }) -- the stream moved on
  check((c - a):abs():sum():item() > 0)
  -- independent of the default generator
  local h = ember.Generator():manual_seed(5)
  ember.manual_seed(5)
  ember.rand(100)
  check_tensor(ember.randn(4, { generator = h }), ember.randn(4, { generator = ember.Generator():manual_seed(5) }):tolist(), 0)
  -- seed(): a fresh seed, reported by initial_seed
  local s = g:seed()
  check_eq(math.type(s), "integer")
  check_eq(g:initial_seed(), s)
  check(tostring(g):find("ember.Generator", 1, true))
end

function T.default_generator()
  local d = ember.manual_seed(42)
  check(rawequal(d, ember.default_generator), "manual_seed returns the default generator")
  check_eq(ember.initial_seed(), 42)
  local a = ember.randn(6)
  ember.default_generator:manual_seed(42)
  check_tensor(ember.randn(6), a:tolist(), 0)
  ember.manual_seed(42)
  check_tensor(ember.randn(6, { generator = ember.default_generator }), a:tolist(), 0)
  local s = ember.seed()
  check_eq(ember.initial_seed(), s)
  ember.manual_seed(-1) -- any 64-bit pattern, as torch.manual_seed(-1)
  check_eq(ember.initial_seed(), -1)
  check_error(function() return ember.manual_seed(1.5) end, "manual_seed", "seed", "non-integral")
  check_error(function() return ember.Generator():manual_seed("x") end, "manual_seed", "seed", "string")
end

function T.threads_setting()
  local n = ember.get_num_threads()
  ember.set_num_threads(1)
  check_eq(ember.get_num_threads(), 1)
  local x = ember.rand(100000)
  local s1 = x:sum():item()
  ember.set_num_threads(2)
  check_eq(ember.get_num_threads(), 2)
  check_eq(x:sum():item(), s1)
  ember.set_num_threads(n)
end

return T
