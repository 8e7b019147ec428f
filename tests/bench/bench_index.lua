-- bench_index.lua -- the index family beside PyTorch (tests/bench/bench_index_torch.py, same
-- workloads, same output lines): gather, scatter_add, index_select, index_add on 1e6 and
-- 1e7 float32 elements. `build/ember tests/bench/bench_index.lua [threads]`; one thread by default
-- (os.clock is process CPU time, so t1 figures are wall times). Lines: NAME n=N MS ms.
ember.set_num_threads(tonumber(arg and arg[1]) or 1)
ember.manual_seed(0)
local function med(f, reps)
  local ts = {}
  for r = 1, reps do local t0 = os.clock(); f(); ts[#ts + 1] = os.clock() - t0 end
  table.sort(ts); return ts[(#ts + 1) // 2]
end
for _, N in ipairs({ 1000, 3162 }) do
  local x = ember.randn(N, N)
  local idx = (ember.rand(N, N) * N):long() + 1
  local src = ember.randn(N, N)
  local rows = (ember.rand(N) * N):long() + 1
  local z = ember.zeros(N, N)
  local n = N * N
  print(string.format("gather_d2 n=%d %.3f ms", n, 1e3 * med(function() return x:gather(2, idx) end, 7)))
  print(string.format("gather_d1 n=%d %.3f ms", n, 1e3 * med(function() return x:gather(1, idx) end, 7)))
  print(string.format("scatter_add_d2 n=%d %.3f ms", n, 1e3 * med(function() return z:scatter_add(2, idx, src) end, 7)))
  print(string.format("scatter_add_d1 n=%d %.3f ms", n, 1e3 * med(function() return z:scatter_add(1, idx, src) end, 7)))
  print(string.format("index_select_d1 n=%d %.3f ms", n, 1e3 * med(function() return x:index_select(1, rows) end, 7)))
  print(string.format("index_select_d2 n=%d %.3f ms", n, 1e3 * med(function() return x:index_select(2, rows) end, 7)))
  print(string.format("index_add_d1 n=%d %.3f ms", n, 1e3 * med(function() return z:index_add(1, rows, src) end, 7)))
  print(string.format("index_add_d2 n=%d %.3f ms", n, 1e3 * med(function() return z:index_add(2, rows, src) end, 7)))
end
