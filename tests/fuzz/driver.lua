-- driver.lua -- the Lua API fuzz target's interpreter (tests/fuzz/fuzz_lua.c):
-- fuzzer bytes become a program of op calls drawn from everything ember
-- exposes (functions of ember, ember.linalg, ember.nn.functional,
-- ember.autograd and every tensor method), with arguments from a pool of
-- tensors (random shapes incl. 0-sized and 0-dim, every dtype, views,
-- requires_grad) and odd values (NaN, +-inf, -0, huge, nil, strings,
-- tables, out-of-range dims), plus backward, autograd.grad and grad-mode
-- guards. Every call runs under pcall: only Lua errors are allowed; a
-- crash, a sanitizer report or a leak is a bug.
local ember = require "ember"

-- process-wide settings, printing, files and the modal grad-mode switches stay out
local SKIP = { help = 1, time = 1, set_num_threads = 1, set_memory_limit = 1, save = 1, save_npy = 1,
  savez = 1, savez_compressed = 1, no_grad = 1, enable_grad = 1, inference_mode = 1, set_grad_enabled = 1,
  set_printoptions = 1, draw = 1, dot = 1, trace = 1, steps = 1, detect_anomaly = 1, set_detect_anomaly = 1 }

local fns = {}
local function add(prefix, t)
  for name, f in pairs(t) do
    if type(f) == "function" and not SKIP[name] and not name:match("^_") then fns[#fns + 1] = { prefix .. name, f } end
  end
end
add("ember.", ember)
add("ember.linalg.", ember.linalg)
add("ember.nn.functional.", ember.nn.functional)
fns[#fns + 1] = { "ember.autograd.grad", ember.autograd.grad }
add("Tensor.", ember.Tensor)
table.sort(fns, function(a, b) return a[1] < b[1] end)
local byname = {}
for _, f in ipairs(fns) do byname[f[1]] = f end

local DTYPES = { "float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool" }
local ODD = { 0, 1, -1, 2, 3, 0.5, -0.0, 0 / 0, 1 / 0, -1 / 0, 1e300, 2 ^ 53, math.mininteger, math.maxinteger,
  7, -7, "float32", "int64", "sum", "mean", "none", "a", "", true, false, {}, { 1, 2 }, { -1 }, { 2, 3 },
  { { 1 }, { 2 } }, { keepdim = true }, { dtype = "float64" }, { requires_grad = true }, { 1, -1 } }

-- An input may start with "!NAME,NAME,...\n": its first calls are then
-- the functions of those full names ("Tensor.tolist", "ember.linalg.inv")
-- instead of the ones its bytes pick (the bytes are read all the same).
-- The list of functions changes as ops are added; a seed written this way
-- keeps reaching the function it was written for (tests/fuzz/README.md).
-- EMBER_FUZZ_TRACE=1 prints each call before it runs (reproducing a find:
-- `EMBER_FUZZ_TRACE=1 build/ember tests/fuzz/trace.lua INPUT`)
local TRACE = os.getenv("EMBER_FUZZ_TRACE") and function(name, mode, args, n)
  local s = {}
  for i = 1, n do
    local v = args[i]
    if ember.is_tensor(v) then
      s[i] = string.format("tensor(%s, {%s}%s)", v.dtype, table.concat(v:size(), ","), v.requires_grad and ", rg" or "")
    elseif type(v) == "table" then
      s[i] = "table"
    else
      s[i] = type(v) == "string" and string.format("%q", v) or tostring(v)
    end
  end
  io.stderr:write(string.format("fuzz call: %s(%s)%s\n", name, table.concat(s, ", "), mode == 0 and " under no_grad" or ""))
end

return function(bytes)
  local named = {}
  local head = bytes:match("^!([%w_.,]+)\n")
  if head then
    for name in head:gmatch("[^,]+") do named[#named + 1] = byname[name] or false end
    bytes = bytes:sub(#head + 3)
  end
  local pos = 0
  local function b()
    pos = pos + 1
    return bytes:byte(pos) or 0
  end
  local pool = {}
  -- tensors
  for k = 1, 1 + b() % 4 do
    local nd = b() % 4
    local shape = {}
    for d = 1, nd do shape[d] = b() % 5 end
    local dt = DTYPES[b() % #DTYPES + 1]
    local ok, t = pcall(function()
      local x = ember.randn(table.unpack(shape)) * 3
      x = x:to(dt)
      local v = b() % 6
      if v == 1 and x:dim() >= 2 then x = x:t()
      elseif v == 2 and x:dim() >= 1 and x:size(1) > 1 then x = x[{ { 1, -1, 2 } }]
      elseif v == 3 then x = x:unsqueeze(1):expand(2, table.unpack(x:size()))
      elseif v == 4 and (dt == "float32" or dt == "float64") then x = x:clone():requires_grad_()
      end
      return x
    end)
    if ok then pool[#pool + 1] = t end
  end
  local function arg()
    local c = b()
    if c < 110 and #pool > 0 then return pool[c % #pool + 1] end
    if c < 120 then return nil end
    return ODD[c % #ODD + 1]
  end
  for k = 1, math.max(1 + b() % 8, #named) do
    local f = fns[(b() * 256 + b()) % #fns + 1]
    if named[k] then f = named[k] end
    local n = b() % 5
    local args = {}
    for i = 1, n do args[i] = arg() end
    if f[1]:sub(1, 7) == "Tensor." and #pool > 0 and b() % 4 ~= 0 then args[1] = pool[b() % #pool + 1] end
    local mode = b() % 8
    if TRACE then TRACE(f[1], mode, args, n) end
    local ok, r
    if mode == 0 then
      ok, r = pcall(ember.no_grad, function() return f[2](table.unpack(args, 1, n)) end)
    else
      ok, r = pcall(f[2], table.unpack(args, 1, n))
    end
    if ok and ember.is_tensor(r) then
      pool[#pool + 1] = r
      local g = b() % 6
      if g == 0 and r.requires_grad then
        pcall(function() r:sum():backward() end)
      elseif g == 1 and r.requires_grad then
        pcall(function() r:sum():backward({ retain_graph = true, create_graph = true }) end)
      elseif g == 2 and r.requires_grad then
        local leaf
        for _, p in ipairs(pool) do if p.requires_grad and p.is_leaf then leaf = p end end
        if leaf then pcall(ember.autograd.grad, { r:sum() }, { leaf }, { allow_unused = true }) end
      end
    end
  end
end
