-- bench_index.lua -- the index family beside PyTorch (tests/bench/bench_index_torch.py, same
-- workloads, same output lines): gather, scatter_add, index_select, index_add on 1e6 and
-- 1e7 float32 elements, cumsum on 1e7, sort and topk(100) on 1e6 and 1e7.
-- `build/bench_host tests/bench/bench_index.lua [threads]` (wall clock: now()) or
-- `build/ember tests/bench/bench_index.lua [threads]` (os.clock, process CPU time: a wall
-- time at one thread only); one thread by default. Lines: NAME n=N MS ms (median of 7).
local ember = ember or require "ember"
local clock = now or os.clock
ember.set_num_threads(tonumber(arg and arg[1]) or 1)
ember.manual_seed(0)
local function med(f, reps)
  f() -- warm up (the caching allocator, the pool's threads)
  local ts = {}
  for r = 1, reps do local t0 = clock(); f(); ts[#ts + 1] = clock() - t0 end
  table.sort(ts); return ts[(#ts + 1) // 2]
end
local function line(name, n, f) print(string.format("%s n=%d %.3f ms", name, n, 1e3 * med(f, 7))) end
local only = os.getenv("BENCH_INDEX_ONLY") -- a Lua pattern on the names
local function run(name, n, f) if not only or name:match(only) then line(name, n, f) end end
for _, N in ipairs({ 1000, 3162 }) do
  local x = ember.randn(N, N)
  local idx = (ember.rand(N, N) * N):long() + 1
  local src = ember.randn(N, N)
  local rows = (ember.rand(N) * N):long() + 1
  local z = ember.zeros(N, N)
  local n = N * N
  run("gather_d2", n, function() return x:gather(2, idx) end)
  run("gather_d1", n, function() return x:gather(1, idx) end)
  run("scatter_add_d2", n, function() return z:scatter_add(2, idx, src) end)
  run("scatter_add_d1", n, function() return z:scatter_add(1, idx, src) end)
  run("index_select_d1", n, function() return x:index_select(1, rows) end)
  run("index_select_d2", n, function() return x:index_select(2, rows) end)
  run("index_add_d1", n, function() return z:index_add(1, rows, src) end)
  run("index_add_d2", n, function() return z:index_add(2, rows, src) end)
end
for _, n in ipairs({ 1000000, 10000000 }) do
  local v = ember.randn(n)
  run("cumsum", n, function() return v:cumsum(1) end)
  run("sort", n, function() return v:sort() end)
  run("topk100", n, function() return v:topk(100) end)
end
