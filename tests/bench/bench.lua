-- bench.lua -- ember's own figures (run by bench_host, which provides now()).
-- Prints `name median unit best=X n=R`, like ../shared/bench.
local ember = require "ember"
local REPS = 7

local function measure(name, work, unit, inner, fn, lower_is_better)
  local t = {}
  fn() -- warm up
  for r = 1, REPS do
    local t0 = now()
    for _ = 1, inner do fn() end
    t[r] = (now() - t0) / inner
  end
  table.sort(t)
  local med, best = work(t[(REPS + 1) // 2]), work(t[1])
  print(string.format("%-28s %10.2f %s best=%.2f n=%d", name, med, unit, best, REPS))
  return med
end

local results = {}
-- Note [Bench families]: each op family's workloads are a file
-- tests/bench/nn/FAMILY.lua returning function(B), B = {ember, measure, now,
-- REPS, results}, paired by name with tests/bench/nn/FAMILY.py (run by
-- torch_bench.py). Files run in name order; `BENCH_ONLY=FAMILY` runs one.
local default_threads = ember.get_num_threads()
local function run_families()
  local only = os.getenv("BENCH_ONLY")
  local ls = io.popen("ls tests/bench/nn/*.lua 2>/dev/null")
  local files = {}
  for f in ls:lines() do files[#files + 1] = f end
  ls:close()
  table.sort(files)
  local B = {ember = ember, measure = measure, now = now, REPS = REPS, results = results}
  for _, f in ipairs(files) do
    local fam = f:match("([^/]+)%.lua$")
    if not only or only == fam then
      -- each family starts at the default thread count (its "tdef" lines),
      -- whatever the one before it left set
      ember.set_num_threads(default_threads)
      local ok, err = pcall(function() dofile(f)(B) end)
      if not ok then print("bench family " .. fam .. " failed: " .. tostring(err)) end
    end
  end
end
if os.getenv("BENCH_ONLY") then run_families(); return results end
-- Note [Interleaved floor]: the floor (`c = a + b` on bare userdata with
-- __gc, no tensor work), ember's 1-element a + b and the recorded one
-- (a requires grad), each ns per op including the collector's share, are
-- timed in interleaved rounds -- floor, add, recorded add, 21 times, 50,000
-- ops each, a full collection before each so no round pays for the garbage
-- of the one before (what a round leaves for that untimed collection is at
-- most one collector cycle's worth, a few thousand objects, so a few per
-- cent of the round's own collection work, alike for all three) -- and
-- each ratio to the floor is the median of the rounds' own ratios. A shared host's noise comes in bursts of a few
-- milliseconds to seconds; timed one after the other, the floor and the op
-- could land in different bursts and their ratio swing by 1.5x either way.
local function interleaved()
  local fa, fb = floor_new(), floor_new()
  local a, b = ember.ones(1), ember.ones(1)
  local ag = ember.ones(1, {requires_grad = true})
  local N, R = 50000, 21
  local loops = {
    function() local c; for _ = 1, N do c = fa + fb end end,
    function() local c; for _ = 1, N do c = a + b end end,
    function() local c; for _ = 1, N do c = ag + b end end,
  }
  local t = {{}, {}, {}}
  for _, f in ipairs(loops) do f() end -- warm up
  for r = 1, R do
    for k = 1, 3 do
      collectgarbage()
      local t0 = now()
      loops[k]()
      t[k][r] = (now() - t0) / N * 1e9
    end
  end
  local function median(v)
    local s = {}
    for i = 1, #v do s[i] = v[i] end
    table.sort(s)
    return s[(#s + 1) // 2], s[1]
  end
  local names = {"lua_floor_add_metamethod", "ember_add_1elem", "ember_add_1elem_grad"}
  for k = 1, 3 do
    local med, best = median(t[k])
    print(string.format("%-28s %10.2f %s best=%.2f n=%d", names[k], med, "ns/op", best, R))
  end
  for k = 2, 3 do
    local q = {}
    for r = 1, R do q[r] = t[k][r] / t[1][r] end
    local med, best = median(q)
    print(string.format("%-28s %10.3f %s best=%.3f n=%d", names[k] .. "_floor", med, "x", best, R))
  end
end
interleaved()
-- 1e7-element add (out of place) and sum: GB/s, counted like torch_ref.py
do
  local n = 10000000
  local a, b = ember.randn(n), ember.randn(n)
  for _, th in ipairs({1, 2}) do
    ember.set_num_threads(th)
    results["add_t" .. th] = measure("ember_add_1e7_f32_t" .. th, function(t) return 12 * n / t / 1e9 end, "GB/s", 10,
      function() local c = a + b end)
    results["sum_t" .. th] = measure("ember_sum_1e7_f32_t" .. th, function(t) return 4 * n / t / 1e9 end, "GB/s", 10,
      function() local s = a:sum() end)
  end
end
-- reductions of 1e7 float32 (GB/s of input read): the whole vector, a
-- 1000x10000 matrix over its last dim (runs) and its first dim (columns),
-- and prod/amax/var/norm (ops a build without them skips)
do
  local n = 10000000
  local a = ember.randn(n)
  local m = a:view(1000, 10000)
  local gbs = function(t) return 4 * n / t / 1e9 end
  for _, th in ipairs({1, 2}) do
    ember.set_num_threads(th)
    results["sum_last_t" .. th] = measure("ember_sum_1e3x1e4_dim2_t" .. th, gbs, "GB/s", 10,
      function() local s = m:sum(2) end)
    results["sum_first_t" .. th] = measure("ember_sum_1e3x1e4_dim1_t" .. th, gbs, "GB/s", 10,
      function() local s = m:sum(1) end)
    if a.prod then
      measure("ember_prod_1e7_f32_t" .. th, gbs, "GB/s", 10, function() local s = a:prod() end)
      measure("ember_amax_1e7_f32_t" .. th, gbs, "GB/s", 10, function() local s = a:amax() end)
      measure("ember_amax_1e3x1e4_dim1_t" .. th, gbs, "GB/s", 10, function() local s = m:amax(1) end)
      measure("ember_var_1e7_f32_t" .. th, gbs, "GB/s", 10, function() local s = a:var() end)
      measure("ember_var_1e3x1e4_dim2_t" .. th, gbs, "GB/s", 10, function() local s = m:var(2) end)
      measure("ember_norm_1e7_f32_t" .. th, gbs, "GB/s", 10, function() local s = a:norm() end)
    end
  end
end
-- transcendental functions on 1e7 float32, out of place: GB/s counted as 8
-- bytes per element (torch_bench.py's pointwise(); ops a build lacks are skipped)
do
  local n = 10000000
  local a = ember.rand(n) * 4 - 2
  local p = ember.rand(n) + 0.1
  local gbs = function(t) return 8 * n / t / 1e9 end
  for _, th in ipairs({1, 2}) do
    ember.set_num_threads(th)
    for _, c in ipairs({ { "exp", a }, { "log", p }, { "tanh", a }, { "sigmoid", a }, { "sin", a } }) do
      local name, x = c[1], c[2]
      if x[name] then
        measure("ember_" .. name .. "_1e7_f32_t" .. th, gbs, "GB/s", 5, function() local y = x[name](x) end)
      end
    end
  end
end
-- indexing, scans and sorting at one thread: Melem/s (torch_bench.py's indexing())
do
  ember.set_num_threads(1)
  local n = 1000000
  local mel = function(k) return function(t) return k / t / 1e6 end end
  -- rows x 1000 float32: 1e6 and 1e7 elements
  for _, c in ipairs({ { "1e6", 1000, 5 }, { "1e7", 10000, 3 } }) do
    local tag, rows_n, inner = c[1], c[2], c[3]
    local N = rows_n * 1000
    local x, src = ember.randn(rows_n, 1000), ember.randn(rows_n, 1000)
    local idx = (ember.rand(rows_n, 1000) * 1000):to("int64") + 1
    local rows = (ember.rand(rows_n) * rows_n):to("int64") + 1
    measure("ember_gather_" .. tag .. "_dim2_t1", mel(N), "Melem/s", inner, function() local y = x:gather(2, idx) end)
    if x.scatter_add_ then
      measure("ember_scatter_add_" .. tag .. "_dim2_t1", mel(N), "Melem/s", inner,
        function() local y = ember.zeros(rows_n, 1000):scatter_add_(2, idx, src) end)
    end
    if x.index_select then
      measure("ember_index_select_" .. tag .. "_dim1_t1", mel(N), "Melem/s", inner,
        function() local y = x:index_select(1, rows) end)
    end
    if x.index_add_ then
      measure("ember_index_add_" .. tag .. "_dim1_t1", mel(N), "Melem/s", inner,
        function() local y = ember.zeros(rows_n, 1000):index_add_(1, rows, src) end)
    end
  end
  local v = ember.randn(10000000)
  if v.cumsum then
    measure("ember_cumsum_1e7_f32_t1", mel(10000000), "Melem/s", 3, function() local y = v:cumsum(1) end)
  end
  local v6 = v:narrow(1, 1, n)
  measure("ember_sort_1e6_f32_t1", mel(n), "Melem/s", 3, function() local y = v6:sort() end)
  measure("ember_topk100_1e6_f32_t1", mel(n), "Melem/s", 3, function() local y = v6:topk(100) end)
end
-- 1024x1024 float32 matmul: GFLOP/s
do
  local n = 1024
  local a, b = ember.randn(n, n), ember.randn(n, n)
  for _, th in ipairs({1, 2}) do
    ember.set_num_threads(th)
    results["mm_t" .. th] = measure("ember_matmul_f32_n1024_t" .. th, function(t) return 2 * n ^ 3 / t / 1e9 end, "GFLOP/s", 5,
      function() local c = a:matmul(b) end)
    -- cblas_sgemm called directly, in the same process and minute
    measure("direct_sgemm_n1024_t" .. th, function(t) return 2 * n ^ 3 / t / 1e9 end, "GFLOP/s", 5,
      function() sgemm_direct(n) end)
  end
end
-- autograd: recording overhead and the 10k scalar chain of torch_ref.py
if ember.ones(1, {requires_grad = true}).backward then
  -- the sections above leave dozens of 40 MB tensors as garbage; collected
  -- during the chain's runs, their frees (munmap) would be timed with them
  collectgarbage()
  collectgarbage()
  ember.set_num_threads(default_threads)
  -- the 10k scalar chain: 21 runs (as torch_bench.py's and
  -- micrograd_ref.py's chain), their medians; a run takes ~5 ms, so a
  -- burst of the host's noise spoils a few runs, not the median
  do
    local N, CHAIN_REPS = 10000, 21
    local fw, bw = {}, {}
    local function run()
      local x = ember.full({1}, 0.5, {requires_grad = true})
      local t0 = now()
      local y = x
      for i = 0, N - 1 do
        local r = i % 3
        if r == 0 then y = y * 0.999 elseif r == 1 then y = y + 0.001 else y = y:tanh() end
      end
      local t1 = now()
      y:backward(ember.ones(1))
      local t2 = now()
      return t1 - t0, t2 - t1
    end
    run()
    for r = 1, CHAIN_REPS do fw[r], bw[r] = run() end
    local tot = {}
    for r = 1, CHAIN_REPS do tot[r] = fw[r] + bw[r] end
    for name, t in pairs({forward = fw, backward = bw, total = tot}) do
      table.sort(t)
      print(string.format("%-28s %10.3f %s best=%.3f n=%d", "ember_chain10k_" .. name,
        t[(CHAIN_REPS + 1) // 2] / N * 1e6, "us/node", t[1] / N * 1e6, CHAIN_REPS))
    end
  end
  -- the 1M-node chain: its forward per node against the 10k chain's (it
  -- must not slow down with the graph's size) and its backward; one
  -- untimed run first, as the 10k chain has (the first run of a process
  -- also pays the kernel's first touch of ~200 MB, ~50,000 page faults),
  -- then the median of 3
  do
    local N = 1000000
    local fw, bw = {}, {}
    for r = 0, 3 do
      collectgarbage(); collectgarbage()
      local x = ember.full({1}, 0.5, {requires_grad = true})
      local t0 = now()
      local y = x
      for i = 0, N - 1 do
        local k = i % 3
        if k == 0 then y = y * 0.999 elseif k == 1 then y = y + 0.001 else y = y:tanh() end
      end
      local t1 = now()
      y:backward(ember.ones(1))
      if r > 0 then fw[r], bw[r] = t1 - t0, now() - t1 end
    end
    for name, t in pairs({forward = fw, backward = bw}) do
      table.sort(t)
      print(string.format("%-28s %10.3f %s best=%.3f n=%d", "ember_chain1m_" .. name, t[2] / N * 1e6,
        "us/node", t[1] / N * 1e6, 3))
    end
  end
  -- memory per recorded node: a fresh process builds the 1M chain and
  -- reports its resident-memory growth (VmRSS, after a full collection)
  -- per node; that includes the data the graph keeps (the tanh results
  -- it saves: 4 bytes every third node)
  do
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write([[
local ember = require "ember"
local function rss() for l in io.lines("/proc/self/status") do local v = l:match("^VmRSS:%s+(%d+)"); if v then return tonumber(v) end end end
local N = 1000000
local x = ember.full({1}, 0.5, {requires_grad = true})
local w = (x * 0.999 + 0.001):tanh(); w = nil -- whatever an op makes once
collectgarbage(); collectgarbage()
local m0 = rss()
local y = x
for i = 0, N - 1 do
  local k = i % 3
  if k == 0 then y = y * 0.999 elseif k == 1 then y = y + 0.001 else y = y:tanh() end
end
collectgarbage(); collectgarbage()
print((rss() - m0) * 1024 / N)
]])
    f:close()
    local p = io.popen((os.getenv("EMBER") or "build/ember") .. " " .. path)
    local b = tonumber(p:read("a"):match("[%d.]+"))
    p:close()
    os.remove(path)
    if b then print(string.format("%-28s %10.2f %s best=%.2f n=%d", "ember_chain1m_bytes_per_node", b, "B/node", b, 1)) end
  end
else
  print("ember_autograd_benchmarks skipped: no backward() in this build")
end
-- startup: `ember -e ''` (median of 21 runs, through os.execute's shell),
-- beside spawning /bin/true the same way
do
  local ember_bin = os.getenv("EMBER") or "build/ember"
  local function spawn_ms(cmd, reps)
    local t = {}
    os.execute(cmd)
    for r = 1, reps do
      local t0 = now()
      os.execute(cmd)
      t[r] = (now() - t0) * 1e3
    end
    table.sort(t)
    return t[(reps + 1) // 2], t[1]
  end
  local med, best = spawn_ms(ember_bin .. " -e ''", 21)
  print(string.format("%-28s %10.2f %s best=%.2f n=%d", "ember_startup", med, "ms", best, 21))
  med, best = spawn_ms("/bin/true", 21)
  print(string.format("%-28s %10.2f %s best=%.2f n=%d", "spawn_bin_true", med, "ms", best, 21))
end
run_families()
return results
