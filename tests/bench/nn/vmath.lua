-- tests/bench/nn/vmath.lua -- issue 8's pointwise target in one family
-- (Note [Bench families]): the 1e7 float32 add and the transcendental
-- lines of bench.lua, same names and counting, so that
-- `make bench BENCH_ONLY=vmath` gives their ratios to add and to torch
-- (tests/bench/nn/vmath.py) in one short run. The full bench has these
-- lines already: this family runs only when named.
return function(B)
  if os.getenv("BENCH_ONLY") ~= "vmath" then return end
  local ember = B.ember
  local n = 10000000
  local a, b = ember.randn(n), ember.randn(n)
  local u = ember.rand(n) * 4 - 2
  local p = ember.rand(n) + 0.1
  local gb8 = function(t) return 8 * n / t / 1e9 end
  for _, th in ipairs({ 1, 2 }) do
    ember.set_num_threads(th)
    B.measure("ember_add_1e7_f32_t" .. th, function(t) return 12 * n / t / 1e9 end, "GB/s", 10,
      function() local c = a + b end)
    for _, c in ipairs({ { "exp", u }, { "log", p }, { "tanh", u }, { "sigmoid", u }, { "sin", u } }) do
      local name, x = c[1], c[2]
      B.measure("ember_" .. name .. "_1e7_f32_t" .. th, gb8, "GB/s", 5, function() local y = x[name](x) end)
    end
  end
end
