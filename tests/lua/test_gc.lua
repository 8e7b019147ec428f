-- test_gc.lua -- allocation is reported to Lua's collector (Note [GC
-- pressure]): a loop making 1 MB tensors stays flat without collectgarbage().
local T = {}

-- a full collection, then one more after an op has run the finalizers'
-- owed steps; empty_cache also drops the small tensors each thread keeps
-- for Lua numbers (Note [Wrapped number cache]), 8 live bytes each
local function collect() collectgarbage(); ember.empty(0); collectgarbage(); ember.empty_cache() end

local function rss_mb()
  local f = io.open("/proc/self/statm")
  if not f then return nil end
  local _, resident = f:read("n", "n")
  f:close()
  return resident * 4096 / 2 ^ 20
end

function T.rss_flat_in_allocation_loop()
  collectgarbage()
  local before = rss_mb()
  local peak_alloc = 0
  for i = 1, 2000 do
    local a = ember.ones(262144) -- 1 MB of float32
    local b = a * 2
    if i % 100 == 0 then
      local s = ember.memory_stats().allocated
      if s > peak_alloc then peak_alloc = s end
    end
    b = nil
  end
  local after = rss_mb()
  -- under a sanitizer build ASan's quarantine keeps freed blocks resident
  -- (and earlier tests raise the baseline): only the allocator's own peak
  -- below means something there
  local san = (os.getenv("EMBER") or ""):find("/san-", 1, true)
  if before and not san then
    check(after < 200, string.format("RSS %.1f MB after 2000 x 1 MB tensors", after))
    check(after - before < 150, string.format("RSS grew by %.1f MB", after - before))
  end
  check(peak_alloc < 150 * 2 ^ 20,
    string.format("live tensor bytes peaked at %.1f MB", peak_alloc / 2 ^ 20))
end

function T.incremental_mode_also_flat()
  collectgarbage("incremental")
  local peak_alloc = 0
  for i = 1, 500 do
    local a = ember.zeros(262144)
    if i % 50 == 0 then
      local s = ember.memory_stats().allocated
      if s > peak_alloc then peak_alloc = s end
    end
  end
  collectgarbage("generational")
  check(peak_alloc < 150 * 2 ^ 20,
    string.format("live tensor bytes peaked at %.1f MB", peak_alloc / 2 ^ 20))
end

function T.errors_do_not_leak_temporaries()
  local x = ember.ones(3)
  for _ = 1, 10 do pcall(ember.add, 1, "a") end -- warm up
  collectgarbage()
  collectgarbage()
  local base = ember.memory_stats().allocated
  for _ = 1, 1000 do
    pcall(ember.add, 1, "a")          -- a wrapped number, then a bad argument
    pcall(ember.add, 2.5, x, { alpha = "z" })
    pcall(function() return x + ember.ones(2) end)
    pcall(function() return x[{ { 1, 2 }, 5 }] end)
  end
  collectgarbage()
  collectgarbage()
  local now = ember.memory_stats().allocated
  check(now - base < 4096, string.format("allocated grew by %d bytes", now - base))
end

function T.close_frees_now()
  collectgarbage()
  local base = ember.memory_stats().allocated
  do
    local big <close> = ember.zeros(1000000)
    check(ember.memory_stats().allocated >= base + 4000000)
  end
  check(ember.memory_stats().allocated < base + 4000000, "freed at scope exit")
end

-- Note [Saved leaves and views]: x:sin()'s create_graph backward makes
-- x.grad the result of cos(x), which saves x; a node that owned x (or a
-- view of x, or a tensor retaining its grad) would close a cycle x ->
-- x.grad -> graph -> x, and every iteration would leak.
function T.create_graph_on_a_saved_leaf_frees_the_graph()
  collect()
  local base = ember.memory_stats().allocated
  for _ = 1, 50 do
    local x = ember.randn(1000, { requires_grad = true })
    x:sin():sum():backward({ create_graph = true })
    local w = ember.randn(1000, { requires_grad = true })
    local g = ember.autograd.grad({ (w * w:exp()):sum() }, { w }, { create_graph = true })[1]
    w.grad = g -- the same cycle, closed by hand
    local v = ember.randn(1000, { requires_grad = true })
    v:view(10, 100):sin():sum():backward({ create_graph = true })
    local r = ember.randn(1000, { requires_grad = true })
    local t = r * 2
    t:retain_grad()
    t:sin():sum():backward({ create_graph = true })
    check(t.grad ~= nil and r.grad ~= nil)
  end
  collect()
  local now = ember.memory_stats().allocated
  check(now == base, string.format("%d bytes of tensors still live", now - base))
end

-- an in-place op whose other input shares the written tensor's storage
-- saves that input as an alias: the op moves the written tensor's history
-- onto the saving node, which owned the tensor itself before (a cycle that
-- leaked the graph; the lua fuzz target's LeakSanitizer found it)
function T.inplace_op_reading_its_target_frees_the_graph()
  collect()
  local base = ember.memory_stats().allocated
  for _ = 1, 50 do
    local x = ember.randn(100, { requires_grad = true })
    local y = x * 1
    y:mul_(y)
    local z = x * 1
    z:fmod_(z)
    local b = x * 1
    b:narrow(1, 1, 50):mul_(b:narrow(1, 1, 50) * 1)
    local v = (x * 1):view(10, 10)
    local w = v:t()
    check(not pcall(v.add_, v, w, { alpha = 2 })) -- refused: w overlaps v partially
  end
  collect()
  local now = ember.memory_stats().allocated
  check(now == base, string.format("%d bytes of tensors still live", now - base))
  -- the saved values keep their version: a backward through them is refused as in PyTorch
  local x = ember.randn(3, { requires_grad = true })
  local y = x * 1
  y:mul_(y)
  local ok, err = pcall(function() y:sum():backward() end)
  check(not ok and tostring(err):find("modified by an in-place operation", 1, true), tostring(err))
end

function T.saved_leaf_alias_keeps_leaf_semantics()
  -- the double backward still accumulates into the leaf, through its hooks
  local x = ember.tensor({ 0.5, 1.0 }, { requires_grad = true })
  local calls = 0
  x:register_hook(function(g) calls = calls + 1; return g end)
  x:sin():sum():backward({ create_graph = true })
  local g = x.grad
  x.grad = nil
  g:sum():backward()
  check(calls == 2, "the leaf's hook ran for both backward passes")
  check(ember.allclose(x.grad, -x:detach():sin()), "d2 sin = -sin")
  -- a leaf written in place after it was saved is refused, as before
  local y = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local s = y:sin():sum()
  ember.no_grad(function() y:add_(1) end)
  local ok, err = pcall(function() s:backward() end)
  check(not ok and tostring(err):find("modified by an in-place operation", 1, true), tostring(err))
  -- a leaf that died before the second backward: its gradient is dropped
  local z = ember.tensor({ 1.0 }, { requires_grad = true })
  z:exp():sum():backward({ create_graph = true })
  local gz = z.grad
  z = nil
  collectgarbage()
  gz:sum():backward()
end

-- Note [GC pressure]: a metamethod runs the collection step a push owes
-- before its op allocates (em_lua_mm_operand), as a generated binding does,
-- so `return p / b` in a loop frees the previous result first and reuses its
-- block: one output live at a time, not two in turn (a fresh process, for
-- its own peak)
function T.metamethod_loop_keeps_one_output()
  local code = [[
local ember = require "ember"
local p, b = ember.ones(262144), ember.ones(262144) -- 1 MiB each, the peak 2 MiB
collectgarbage()
local f = function() return p / b end
for _ = 1, 50 do f() end
print(ember.memory_stats().peak)
]]
  local out = run_cmd(shell_quote(EMBER) .. " -e " .. shell_quote(code), false)
  local peak = tonumber(out:match("%d+"))
  check(peak ~= nil, "peak printed: " .. out)
  check(peak < 3.5 * 2 ^ 20, string.format("peak %.2f MiB: two outputs were live at once", (peak or 0) / 2 ^ 20))
end

return T
