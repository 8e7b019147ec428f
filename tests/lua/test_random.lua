-- test_random.lua -- the random family: the counter-based generator (Note
-- [Random numbers]), the random factories and in-place samplers, checked by
-- their statistics on 1e5 draws (our generator differs from PyTorch's, so
-- the values themselves cannot be compared), their ranges, dtypes and
-- errors.
local T = {}

local N = 100000

local function stats(x)
  local d = x:to("float64")
  local m = d:mean():item()
  local v = ((d - m) * (d - m)):mean():item()
  return m, v
end

local function flat(x)
  return x:reshape(-1):tolist()
end

-- (helpers over ops every branch has: floor/equal/median come from other
-- families)
local function all_integers(x)
  for _, v in ipairs(flat(x:to("float64"))) do
    if v ~= math.floor(v) then return false end
  end
  return true
end

local function same(a, b)
  if a.dtype ~= b.dtype or a:numel() ~= b:numel() then return false end
  local x, y = flat(a), flat(b)
  for i = 1, #x do
    if x[i] ~= y[i] and not (x[i] ~= x[i] and y[i] ~= y[i]) then return false end
  end
  return true
end

local function median(x)
  local s = x:reshape(-1):sort()
  return s[(s:numel() + 1) // 2]:item()
end

-- Pearson's chi-square of counts[1..k] against expected[1..k].
local function chi2(counts, expected)
  local s = 0
  for i = 1, #expected do
    local c = counts[i] or 0
    s = s + (c - expected[i]) ^ 2 / expected[i]
  end
  return s
end

-- ---- the generator ----

function T.seed_fixes_every_value()
  local g = ember.Generator():manual_seed(123)
  local a = ember.randn(1000, { generator = g })
  local b = ember.rand(7, { generator = g, dtype = "float64" })
  g:manual_seed(123)
  check_tensor(ember.randn(1000, { generator = g }), a:tolist(), 0)
  check_tensor(ember.rand(7, { generator = g, dtype = "float64" }), b:tolist(), 0)
  check_eq(g:initial_seed(), 123)
  ember.manual_seed(5)
  local d = ember.randint(100, { 20 })
  ember.manual_seed(5)
  check_tensor(ember.randint(100, { 20 }), d:tolist(), 0)
end

function T.same_values_whatever_the_thread_count()
  local n0 = ember.get_num_threads and ember.get_num_threads() or 1
  local res = {}
  for pass, threads in ipairs({ 1, 3 }) do
    ember.set_num_threads(threads)
    local g = ember.Generator():manual_seed(99)
    local x = ember.empty(400, 500):t()
    x:uniform_(-1, 1, { generator = g })
    res[pass] = {
      ember.rand(200001, { generator = g }),
      ember.randn(200001, { generator = g, dtype = "float64" }),
      x,
      ember.bernoulli(ember.full({ 100000 }, 0.3), { generator = g }),
      ember.poisson(ember.full({ 50000 }, 12.5), { generator = g }),
    }
  end
  ember.set_num_threads(n0)
  for k = 1, #res[1] do
    check(same(res[1][k], res[2][k]), "result " .. k .. " differs between 1 and 3 threads")
  end
end

function T.generator_with_a_seed()
  local g = ember.Generator(42)
  check_eq(g:initial_seed(), 42)
  check(same(ember.rand(5, { generator = g }), ember.rand(5, { generator = ember.Generator():manual_seed(42) })))
  check_eq(ember.Generator("cpu"):initial_seed(), 67280421310721)
  check_error(function() return ember.Generator(1.5) end, "Generator", "seed", "non-integral")
  check_error(function() return ember.Generator("cuda") end, "Generator", "device")
end

function T.get_state_and_set_state_replay()
  local g = ember.Generator():manual_seed(8)
  ember.rand(5, { generator = g })
  local s = g:get_state()
  check_eq(s.dtype, "int64")
  check_tensor(s, { 8, 8 }, 0) -- seed 8, offset: 5 words rounded up to 8
  local a = ember.randn(9, { generator = g })
  check(g:set_state(s) == g)
  check_tensor(ember.randn(9, { generator = g }), a:tolist(), 0)
  check_error(function() g:set_state(ember.tensor({ 1.5, 2 })) end, "set_state", "state", "int64")
  check_error(function() g:set_state("x") end, "set_state", "state")
  check_error(function() g:set_state(ember.tensor({ 1, -4 })) end, "set_state", "offset", "-4")
end

function T.streams_of_calls_do_not_overlap()
  -- two consecutive calls read disjoint words: their values differ
  local g = ember.Generator():manual_seed(1)
  local a = ember.rand(3, { generator = g }):tolist()
  local b = ember.rand(3, { generator = g }):tolist()
  check(a[1] ~= b[1] and a[2] ~= b[2] and a[3] ~= b[3])
end

-- ---- rand, randn ----

function T.rand_is_uniform()
  ember.manual_seed(1)
  for _, dt in ipairs({ "float32", "float64", "float16", "bfloat16" }) do
    local x = ember.rand(N, { dtype = dt })
    check_eq(x.dtype, dt)
    check(x:ge(0):all():item() and x:lt(1):all():item(), dt .. " in [0, 1)")
    local m, v = stats(x)
    check_near(m, 0.5, 0.01, dt .. " mean")
    check_near(v, 1 / 12, 0.01, dt .. " variance")
  end
  -- float64 uses 53-bit uniforms: not all on float32's 2^-24 grid
  local d = ember.rand(100, { dtype = "float64" })
  check(not all_integers(d * 2 ^ 24), "float64 finer than 2^-24")
  check_shape(ember.rand(0), { 0 })
  check_shape(ember.rand({}), {})
end

function T.randn_is_standard_normal()
  ember.manual_seed(2)
  for _, dt in ipairs({ "float32", "float64", "bfloat16" }) do
    local x = ember.randn(N, { dtype = dt })
    local m, v = stats(x)
    check_near(m, 0, 0.015, dt .. " mean")
    check_near(v, 1, 0.02, dt .. " variance")
  end
  local x = ember.randn(N, { dtype = "float64" })
  local f = x:abs():gt(1.959964):to("float64"):mean():item()
  check_near(f, 0.05, 0.004, "two-sided 5% tail")
  check_shape(ember.randn(3, 0), { 3, 0 })
  check_error(function() return ember.rand(2, { dtype = "int32" }) end, "rand", "int32")
end

-- ---- randint, randperm ----

function T.randint_is_uniform_over_its_range()
  ember.manual_seed(3)
  local x = ember.randint(10, { N })
  check_eq(x.dtype, "int64")
  local counts = {}
  for _, v in ipairs(x:tolist()) do counts[v + 1] = (counts[v + 1] or 0) + 1 end
  local e = {}
  for i = 1, 10 do e[i] = N / 10 end
  check(chi2(counts, e) < 27.9, "chi-square with 9 df below its 0.1% point: " .. chi2(counts, e))
  local y = ember.randint(-3, 4, { 200, 50 })
  check_shape(y, { 200, 50 })
  check_eq(y:min():item(), -3)
  check_eq(y:max():item(), 3)
  -- a range past 2^32 uses 64 bits an element
  local big = ember.randint(0, 1 << 40, { 1000 })
  check(big:max():item() > (1 << 33), "values past 2^33 appear")
  check_shape(ember.randint(5, { 0 }), { 0 })
end

function T.randint_dtypes()
  local b = ember.randint(0, 2, { 1000 }, { dtype = "bool" })
  check_eq(b.dtype, "bool")
  check(b:any():item() and not b:all():item())
  local h = ember.randint(3, 9, { 100 }, { dtype = "float16" })
  check_eq(h.dtype, "float16")
  check(h:ge(3):all():item() and h:lt(9):all():item() and all_integers(h))
  check_eq(ember.randint(250, 256, { 10 }, { dtype = "uint8" }):min():item() >= 250, true)
  check_error(function() return ember.randint(5, 5, { 3 }) end, "randint", "from=5 >= to=5")
  check_error(function() return ember.randint(-3, 3, { 3 }, { dtype = "uint8" }) end, "randint", "out of bounds", "uint8")
  check_error(function() return ember.randint(0, 300, { 3 }, { dtype = "uint8" }) end, "randint", "299", "uint8")
  check_error(function() return ember.randint(5, { -1 }) end, "randint", "size", "-1")
end

function T.randperm_is_a_1_based_permutation()
  ember.manual_seed(4)
  local p = ember.randperm(1000)
  check_eq(p.dtype, "int64")
  local sorted = p:sort()
  check(same(sorted, ember.arange(1, 1001)), "a permutation of 1..n")
  check(not same(p, ember.arange(1, 1001)), "shuffled")
  -- every position sees every value about equally often
  local counts = {}
  for _ = 1, 3000 do
    local q = ember.randperm(4):tolist()
    counts[q[1]] = (counts[q[1]] or 0) + 1
  end
  check(chi2(counts, { 750, 750, 750, 750 }) < 16.3, "first position uniform")
  check_eq(ember.randperm(5, { dtype = "float32" }).dtype, "float32")
  check_shape(ember.randperm(0), { 0 })
  check_error(function() return ember.randperm(-1) end, "randperm", "'n'", "-1")
  check_error(function() return ember.randperm(3, { dtype = "bool" }) end, "randperm", "bool")
  check_error(function() return ember.randperm(256, { dtype = "uint8" }) end, "randperm", "uint8")
end

-- ---- in-place samplers ----

function T.uniform_normal_exponential_in_place()
  ember.manual_seed(5)
  local x = ember.empty(N, { dtype = "float64" })
  local v0 = x._version
  check(x:uniform_(2, 5) == x)
  check(x:ge(2):all():item() and x:lt(5):all():item())
  local m, v = stats(x)
  check_near(m, 3.5, 0.01)
  check_near(v, 0.75, 0.01)
  x:normal_(3, 2)
  m, v = stats(x)
  check_near(m, 3, 0.01)
  check_near(v, 4, 0.02)
  x:exponential_(2)
  m, v = stats(x)
  check(x:ge(0):all():item())
  check_near(m, 0.5, 0.01)
  check_near(v, 0.25, 0.02)
  x:log_normal_(0, 0.5)
  m = stats(x)
  check_near(m, math.exp(0.125), 0.01)
  x:cauchy_(1, 2)
  local med = median(x)
  check_near(med, 1, 0.05)
  if v0 then check(x._version > v0, "version bumped") end
  check(ember.zeros(3):normal_(4, 0):eq(4):all():item(), "std 0")
end

function T.samplers_fill_non_contiguous_self()
  local g = ember.Generator():manual_seed(6)
  local base = ember.zeros(4, 6)
  local v = base:t()
  v:uniform_(1, 2, { generator = g })
  check(base:ge(1):all():item() and base:lt(2):all():item(), "every element written")
  local s = base[{ {}, { 1, 6, 2 } }]
  s:fill_(0)
  s:exponential_()
  check(base[{ {}, { 2, 6, 2 } }]:ge(1):all():item(), "untouched columns kept")
end

function T.random_in_place_ranges()
  ember.manual_seed(7)
  local x = ember.empty(N)
  x:random_(5)
  check_eq(x:min():item(), 0)
  check_eq(x:max():item(), 4)
  check(all_integers(x))
  x:random_(3, 6)
  check_eq(x:min():item(), 3)
  check_eq(x:max():item(), 5)
  x:random_()
  check(x:ge(0):all():item() and x:le(2 ^ 24):all():item())
  check(x:max():item() > 2 ^ 23)
  local b = ember.empty(1000, { dtype = "bool" }):random_()
  check(b:any():item() and not b:all():item())
  local u = ember.empty(1000, { dtype = "uint8" }):random_()
  check(u:max():item() > 200)
  local i = ember.empty(1000, { dtype = "int8" }):random_(-5, nil)
  check_eq(i:min():item(), -5)
  check(i:max():item() > 100)
  check_error(function() ember.zeros(3):random_(5, 3) end, "random_", "from=5 >= to=3")
  check_error(function() ember.zeros(3):random_(0) end, "random_", "from=0 >= to=0")
  check_error(function() ember.zeros(3, { dtype = "int8" }):random_(200) end, "random_", "int8")
  check_error(function() ember.zeros(3, { dtype = "uint8" }):random_(-1, 3) end, "random_", "uint8")
end

function T.bernoulli_and_geometric_in_place()
  ember.manual_seed(8)
  local x = ember.empty(N)
  x:bernoulli_(0.3)
  check((x:eq(0):sum() + x:eq(1):sum()):item() == N)
  check_near(x:mean():item(), 0.3, 0.01)
  x:bernoulli_()
  check_near(x:mean():item(), 0.5, 0.01)
  local i = ember.zeros(1000, { dtype = "int64" }):bernoulli_(1)
  check(i:eq(1):all():item())
  local y = ember.zeros(2, 3):bernoulli_(ember.tensor({ 1.0, 0, 1 }))
  check_tensor(y, { { 1, 0, 1 }, { 1, 0, 1 } }, 0)
  x:geometric_(0.25)
  local m, v = stats(x)
  check(x:ge(1):all():item() and all_integers(x))
  check_near(m, 4, 0.02)
  check_near(v, 12, 0.05)
  check_eq(ember.zeros(3, { dtype = "int64" }):geometric_(0.5).dtype, "int64")
  check_error(function() ember.zeros(2):bernoulli_(1.5) end, "bernoulli_", "p", "1.5")
  check_error(function() ember.zeros(2):bernoulli_(ember.tensor({ 2.0 })) end, "bernoulli_", "p", "2")
  check_error(function() ember.zeros(3):bernoulli_(ember.zeros(2, 3)) end, "bernoulli_", "{2,3}", "{3}")
  check_error(function() ember.zeros(3):geometric_(0) end, "geometric_", "p", "(0, 1)")
  check_error(function() ember.zeros(3):geometric_(1) end, "geometric_", "p")
end

function T.in_place_sampler_errors()
  local i = ember.zeros(3, { dtype = "int64" })
  for _, f in ipairs({ "uniform_", "normal_", "exponential_", "cauchy_", "log_normal_" }) do
    check_error(function() i[f](i) end, f, "floating", "int64")
  end
  local x = ember.zeros(3)
  check_error(function() x:uniform_(2, 1) end, "uniform_", "from=2 > to=1")
  check_error(function() x:uniform_(0, math.huge) end, "uniform_", "finite")
  check_error(function() x:normal_(0, -1) end, "normal_", "std", "-1")
  check_error(function() x:exponential_(-1) end, "exponential_", "lambd", "-1")
  check_error(function() x:log_normal_(1, 0) end, "log_normal_", "std > 0")
  check_error(function() x:uniform_(0, 1, { generator = 3 }) end, "uniform_", "generator")
  check(ember.zeros(3):exponential_(0):eq(math.huge):all():item(), "lambd 0 gives inf as in PyTorch")
end

function T.in_place_samplers_and_autograd()
  local leaf = ember.zeros(3, { requires_grad = true })
  check_error(function() leaf:uniform_() end, "uniform_", "leaf")
  -- on a non-leaf the old values get a zero gradient (nothing flows)
  local a = ember.ones(3, { requires_grad = true })
  local y = a * 2
  y:normal_()
  check(y.requires_grad)
  local z = (y * a):sum()
  z:backward()
  check_tensor(a.grad, y:detach():tolist(), 1e-6)
  -- inside no_grad nothing is recorded
  ember.no_grad(function() leaf:uniform_() end)
  check(leaf:lt(1):all():item())
end

-- ---- bernoulli, multinomial, normal, poisson ----

function T.bernoulli_out_of_place()
  ember.manual_seed(9)
  local p = ember.tensor({ 0.0, 1.0, 0.25 }, { dtype = "float64" }):expand(N, 3)
  local r = ember.bernoulli(p)
  check_eq(r.dtype, "float64")
  check_shape(r, { N, 3 })
  local cols = r:mean(1):tolist()
  check_eq(cols[1], 0)
  check_eq(cols[2], 1)
  check_near(cols[3], 0.25, 0.01)
  local q = ember.zeros(N, { dtype = "int32" }):bernoulli(0.7)
  check_eq(q.dtype, "int32")
  check_near(q:to("float64"):mean():item(), 0.7, 0.01)
  check_shape(ember.bernoulli(ember.zeros(0, 2)), { 0, 2 })
  check_error(function() return ember.bernoulli(ember.tensor({ 0.5, 1.5 })) end, "bernoulli", "p", "1.5")
  check_error(function() return ember.bernoulli(ember.tensor({ 0, 1 })) end, "bernoulli", "floating", "int64")
  check_error(function() return ember.bernoulli(ember.zeros(2), 2.0) end, "bernoulli", "p=2")
  check_error(function() return ember.bernoulli(ember.tensor({ 0 / 0 })) end, "bernoulli", "nan")
  -- the probabilities get a zero gradient (PyTorch's formula)
  local w = ember.full({ 3 }, 0.5, { requires_grad = true })
  local r2 = ember.bernoulli(w)
  check(r2.requires_grad)
  r2:sum():backward()
  check_tensor(w.grad, { 0, 0, 0 }, 0)
  -- normal has no formula (tests/difftest/ops_random.py): no history
  check(not ember.normal(w, 1.0).requires_grad)
end

function T.multinomial_with_replacement_matches_the_weights()
  ember.manual_seed(10)
  local w = ember.tensor({ 1.0, 0, 3, 6 })
  local s = ember.multinomial(w, N, true)
  check_eq(s.dtype, "int64")
  check_shape(s, { N })
  local counts = {}
  for _, v in ipairs(s:tolist()) do counts[v] = (counts[v] or 0) + 1 end
  check_eq(counts[2], nil, "a zero weight is never drawn")
  check(chi2({ counts[1], counts[3], counts[4] }, { N * 0.1, N * 0.3, N * 0.6 }) < 13.8,
    "chi-square with 2 df below its 0.1% point")
  local s2 = ember.tensor({ { 1.0, 1 }, { 0, 1 } }, { dtype = "float64" }):multinomial(5, true)
  check_shape(s2, { 2, 5 })
  check(s2[2]:eq(2):all():item())
end

function T.multinomial_without_replacement()
  ember.manual_seed(11)
  local s = ember.multinomial(ember.ones(50), 50)
  check(same(s:sort(), ember.arange(1, 51)), "all categories, once each")
  local t = ember.multinomial(ember.tensor({ 1.0, 0, 1 }), 3)
  check_eq(t:tolist()[3], 2, "zero weight comes last")
  -- the first draw follows the weights
  local counts = {}
  local w = ember.tensor({ 1.0, 2, 7 })
  for _ = 1, 4000 do
    local f = w:multinomial(2):tolist()[1]
    counts[f] = (counts[f] or 0) + 1
  end
  check(chi2(counts, { 400, 800, 2800 }) < 13.8, "first draw follows the weights")
  check_shape(ember.multinomial(ember.ones(0, 3), 2), { 0, 2 })
  check_error(function() return ember.multinomial(ember.tensor({ 1.0, 0, 1 }), 4) end, "multinomial", "4", "3 categories")
  check_error(function() return ember.multinomial(ember.tensor({ 0.0, 0 }), 1) end, "multinomial", "sum to 0")
  check_error(function() return ember.multinomial(ember.tensor({ -1.0, 2 }), 1) end, "multinomial", "negative")
  check_error(function() return ember.multinomial(ember.tensor({ 1.0, math.huge }), 1) end, "multinomial", "inf")
  check_error(function() return ember.multinomial(ember.tensor({ 1.0, 2 }), 0) end, "multinomial", "num_samples", "0")
  check_error(function() return ember.multinomial(ember.zeros(2, 2, 2), 1) end, "multinomial", "1-d or 2-d", "3")
  check_error(function() return ember.multinomial(ember.tensor({ 1, 2 }), 1) end, "multinomial", "floating", "int64")
end

function T.normal_overloads()
  ember.manual_seed(12)
  local a = ember.normal(ember.full({ N }, 3.0), 2)
  local m, v = stats(a)
  check_near(m, 3, 0.02)
  check_near(v, 4, 0.03)
  local b = ember.normal(ember.zeros(N, 1), ember.tensor({ 1.0, 3 }))
  check_shape(b, { N, 2 })
  local _, v1 = stats(b[{ {}, 1 }])
  local _, v2 = stats(b[{ {}, 2 }])
  check_near(v1, 1, 0.03)
  check_near(v2, 9, 0.03)
  check_eq(ember.normal(1.0, ember.ones(2)).dtype, "float32")
  check_eq(ember.normal(ember.zeros(2, { dtype = "float64" }), ember.ones(2)).dtype, "float64")
  -- a trailing {} is the options table: normal(m, s, {}) is 0-dim float32
  local z = ember.normal(-1.5, 0.0, {})
  check_eq(z.dtype, "float32")
  check_shape(z, {})
  check_eq(z:item(), -1.5)
  local c = ember.normal(-1, 0.5, { N }, { dtype = "float64" })
  check_eq(c.dtype, "float64")
  m, v = stats(c)
  check_near(m, -1, 0.01)
  check_near(v, 0.25, 0.01)
  check_error(function() return ember.normal(ember.zeros(2), ember.ones(3)) end, "normal", "{2}", "{3}")
  check_error(function() return ember.normal(ember.zeros(2), -1.0) end, "normal", "std", "-1")
  check_error(function() return ember.normal(ember.zeros(2), ember.tensor({ 1.0, -1 })) end, "normal", "std", "-1")
  check_error(function() return ember.normal(ember.zeros(2, { dtype = "int64" }), 1.0) end, "normal", "floating")
  check_error(function() return ember.normal(0, -1, { 2 }) end, "normal", "std")
end

function T.poisson_counts()
  ember.manual_seed(13)
  for _, lam in ipairs({ 0.5, 3, 50, 1000 }) do
    local x = ember.poisson(ember.full({ N }, lam, { dtype = "float64" }))
    check(all_integers(x) and x:ge(0):all():item())
    local m, v = stats(x)
    check_near(m, lam, 0.02, "mean at rate " .. lam)
    check_near(v, lam, 0.05, "variance at rate " .. lam)
  end
  check_tensor(ember.poisson(ember.tensor({ 0.0, math.huge })), { 0, math.huge }, 0)
  check_eq(ember.poisson(ember.zeros(2, { dtype = "bfloat16" })).dtype, "bfloat16")
  check_error(function() return ember.poisson(ember.tensor({ -1.0 })) end, "poisson", "rate", "-1")
  check_error(function() return ember.poisson(ember.tensor({ 0 / 0 })) end, "poisson", "rate", "nan")
  check_error(function() return ember.poisson(ember.tensor({ 1, 2 })) end, "poisson", "floating", "int64")
end

function T.like_forms()
  ember.manual_seed(14)
  local x = ember.zeros(3, 4, { dtype = "float64" })
  local r = ember.rand_like(x)
  check_eq(r.dtype, "float64")
  check_shape(r, { 3, 4 })
  check_eq(ember.randn_like(x, { dtype = "float32" }).dtype, "float32")
  local i = ember.randint_like(x, 5)
  check_eq(i.dtype, "float64")
  check(i:ge(0):all():item() and i:lt(5):all():item())
  local j = ember.randint_like(ember.zeros(1000, { dtype = "int32" }), -2, 2)
  check_eq(j.dtype, "int32")
  check_eq(j:min():item(), -2)
  check_eq(j:max():item(), 1)
  check_error(function() return ember.rand_like(ember.zeros(2, { dtype = "int64" })) end, "rand_like", "floating", "int64")
  check_error(function() return ember.randint_like(x, 3, 3) end, "randint_like", "from=3 >= to=3")
end

-- ---- creation (values from PyTorch 1.13; indices 1-based) ----

function T.eye()
  check_tensor(ember.eye(3), { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, 0)
  local e = ember.eye(2, 3, { dtype = "int64" })
  check_eq(e.dtype, "int64")
  check_tensor(e, { { 1, 0, 0 }, { 0, 1, 0 } }, 0)
  check_tensor(ember.eye(3, 1), { { 1 }, { 0 }, { 0 } }, 0)
  check_tensor(ember.eye(2, { dtype = "bool" }), { { true, false }, { false, true } })
  check_shape(ember.eye(0), { 0, 0 })
  check_shape(ember.eye(2, 0), { 2, 0 })
  check_error(function() return ember.eye(-1) end, "eye", "'n'", "-1")
  check_error(function() return ember.eye(2, -1) end, "eye", "'m'", "-1")
end

function T.linspace_and_logspace()
  check_tensor(ember.linspace(0, 10, 5), { 0, 2.5, 5, 7.5, 10 }, 0)
  check_eq(ember.linspace(1, 2, 3).dtype, "float32")
  -- integral dtypes: from the ends, halves counted from each end, truncated
  check_tensor(ember.linspace(0, 10, 4, { dtype = "int64" }), { 0, 3, 6, 10 }, 0)
  check_tensor(ember.linspace(0, -7, 4, { dtype = "int64" }), { 0, -2, -4, -7 }, 0)
  check_tensor(ember.linspace(0, 10, 4, { dtype = "uint8" }), { 0, 3, 6, 10 }, 0)
  local d = ember.linspace(-1, 1, 7, { dtype = "float64" }):tolist()
  check_eq(d[1], -1)
  check_eq(d[7], 1)
  check_near(d[4], 5.5511151231257827e-17, 1e-30) -- PyTorch's value (1 - 3 * (2/6))
  check_tensor(ember.linspace(0.5, 1, 3, { dtype = "float16" }), { 0.5, 0.75, 1 }, 0)
  check_tensor(ember.linspace(3, 3, 1), { 3 }, 0)
  check_tensor(ember.linspace(0, 1, 1), { 0 }, 0)
  check_shape(ember.linspace(0, 1, 0), { 0 })
  check_error(function() return ember.linspace(0, 1, -1) end, "linspace", "steps", "-1")
  check_error(function() return ember.linspace(0, 1, 3, { dtype = "bool" }) end, "linspace", "bool")
  check_tensor(ember.logspace(0, 2, 3), { 1, 10, 100 }, 1e-6)
  check_tensor(ember.logspace(0, 3, 4, 2), { 1, 2, 4, 8 }, 0)
  check_tensor(ember.logspace(0, 2, 3, { dtype = "int64" }), { 1, 10, 100 }, 0)
  check_tensor(ember.logspace(-1, 1, 3, 2.5, { dtype = "float64" }), { 0.4, 1, 2.5 }, 1e-12)
  check_shape(ember.logspace(0, 1, 0), { 0 })
  check_error(function() return ember.logspace(0, 2, 3, { dtype = "bool" }) end, "logspace", "bool")
end

function T.arange_with_float_steps()
  -- PyTorch's length: ceil((end - start) / step)
  check_tensor(ember.arange(0, 1, 0.3), { 0, 0.3, 0.6, 0.9 }, 1e-6)
  check_tensor(ember.arange(1, 2.5, 0.5), { 1, 1.5, 2 }, 0)
  check_shape(ember.arange(0, 1, 0.1), { 10 })
  check_tensor(ember.arange(-1, 1, 0.25, { dtype = "float64" }), { -1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75 }, 0)
  check_tensor(ember.arange(0.5, 3, { dtype = "int64" }), { 0, 1, 2 }, 0)
  check_tensor(ember.arange(3, 0, -0.5), { 3, 2.5, 2, 1.5, 1, 0.5 }, 0)
end

function T.tril_and_triu_indices_are_1_based()
  check_tensor(ember.tril_indices(3, 3), { { 1, 2, 2, 3, 3, 3 }, { 1, 1, 2, 1, 2, 3 } }, 0)
  check_tensor(ember.tril_indices(3, 4, 1), { { 1, 1, 2, 2, 2, 3, 3, 3, 3 }, { 1, 2, 1, 2, 3, 1, 2, 3, 4 } }, 0)
  check_tensor(ember.tril_indices(3, 4, -1), { { 2, 3, 3 }, { 1, 1, 2 } }, 0)
  check_tensor(ember.triu_indices(3, 3), { { 1, 1, 1, 2, 2, 3 }, { 1, 2, 3, 2, 3, 3 } }, 0)
  check_tensor(ember.triu_indices(2, 4, -1), { { 1, 1, 1, 1, 2, 2, 2, 2 }, { 1, 2, 3, 4, 1, 2, 3, 4 } }, 0)
  check_shape(ember.tril_indices(0, 3), { 2, 0 })
  check_shape(ember.triu_indices(3, 3, 5), { 2, 0 })
  check_shape(ember.tril_indices(3, 3, -5), { 2, 0 })
  check_eq(ember.tril_indices(3, 3).dtype, "int64")
  check_eq(ember.tril_indices(3, 3, 0, { dtype = "int32" }).dtype, "int32")
  -- they index: the lower triangle's values of a matrix
  local m = ember.arange(1, 10):reshape(3, 3)
  local ix = ember.tril_indices(3, 3)
  local vals = {}
  for k = 1, ix:size(2) do vals[k] = m[ix[1][k]:item()][ix[2][k]:item()]:item() end
  check_eq(table.concat(vals, ","), "1,4,5,7,8,9")
  check_error(function() return ember.tril_indices(-1, 3) end, "tril_indices", "row", "-1")
  check_error(function() return ember.triu_indices(3, -2) end, "triu_indices", "col", "-2")
  check_error(function() return ember.tril_indices(3, 3, 0, { dtype = "float32" }) end, "tril_indices", "float32")
end

function T.empty_strided()
  local e = ember.empty_strided({ 2, 3 }, { 1, 2 })
  check_shape(e, { 2, 3 })
  check_eq(e:stride()[1], 1)
  check_eq(e:stride()[2], 2)
  check(not e:is_contiguous())
  e:copy_(ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }))
  check_tensor(e, { { 1, 2, 3 }, { 4, 5, 6 } }, 0)
  local z = ember.empty_strided({ 2, 3 }, { 0, 0 }, { dtype = "float64" })
  check_eq(z.dtype, "float64")
  check_eq(z:stride()[1], 0)
  check_shape(ember.empty_strided({ 0, 3 }, { 0, 0 }), { 0, 3 })
  check_error(function() return ember.empty_strided({ 2 }, { 1, 2 }) end, "empty_strided", "size", "stride")
  check_error(function() return ember.empty_strided({ 2, -1 }, { 1, 2 }) end, "empty_strided", "size", "-1")
  check_error(function() return ember.empty_strided({ 2, 3 }, { 1, -2 }) end, "empty_strided", "stride", "-2")
end

function T.like_factories()
  local x = ember.ones(2, 3, { dtype = "float64" })
  local z = ember.zeros_like(x)
  check_eq(z.dtype, "float64")
  check_tensor(z, { { 0, 0, 0 }, { 0, 0, 0 } }, 0)
  check_eq(ember.zeros_like(x, { dtype = "int32" }).dtype, "int32")
  check_tensor(ember.ones_like(ember.zeros(2, { dtype = "bool" })), { true, true })
  check_tensor(ember.full_like(ember.zeros(2, { dtype = "int64" }), 2.7), { 2, 2 }, 0)
  check_tensor(ember.full_like(ember.zeros(2), true), { 1, 1 }, 0)
  check_tensor(ember.full_like(x, -1.5, { dtype = "float32" }), { { -1.5, -1.5, -1.5 }, { -1.5, -1.5, -1.5 } }, 0)
  check_error(function() return ember.full_like(ember.zeros(2, { dtype = "uint8" }), 300) end, "full_like", "300")
  local e = ember.empty_like(x:t())
  check_shape(e, { 3, 2 })
  check(e:is_contiguous())
  -- no history from a tensor that requires grad
  local w = ember.ones(2, { requires_grad = true })
  check(not ember.zeros_like(w).requires_grad)
  check_shape(ember.zeros_like(ember.tensor(3.0)), {})
end

-- ---- conversions and introspection ----

local SIZES = { bool = 1, uint8 = 1, int8 = 1, int32 = 4, int64 = 8, float16 = 2, bfloat16 = 2,
  float32 = 4, float64 = 8 }

function T.element_size_and_nbytes()
  for dt, size in pairs(SIZES) do
    local x = ember.zeros(2, 3, { dtype = dt })
    check_eq(x:element_size(), size, dt)
    check_eq(x:nbytes(), 6 * size, dt)
    check_eq(math.type(x:nbytes()), "integer")
  end
  -- nbytes counts the view's elements, not its storage
  local b = ember.zeros(4, 5, { dtype = "float64" })
  check_eq(b[2]:nbytes(), 40)
  check_eq(b:t():nbytes(), 160)
  check_eq(ember.zeros(0, 3):nbytes(), 0)
  check_eq(ember.tensor(1.5):nbytes(), 4)
end

function T.stride_storage_offset_is_contiguous()
  local x = ember.zeros(3, 4)
  check_eq(table.concat(x:stride(), ","), "4,1")
  check_eq(x:stride(1), 4)
  check_eq(x:stride(-1), 1)
  check(x:is_contiguous())
  local t = x:t()
  check_eq(table.concat(t:stride(), ","), "1,4")
  check(not t:is_contiguous())
  check(t:contiguous():is_contiguous())
  check_eq(x[2]:storage_offset(), 4)
  check_eq(x[{ {}, { 2, 3 } }]:storage_offset(), 1)
  check(not x[{ {}, { 2, 3 } }]:is_contiguous())
  check(x[3]:is_contiguous())
  check_eq(x:expand(2, 3, 4):stride(1), 0)
  check_eq(#ember.tensor(2.0):stride(), 0)
end

function T.to_dtype_device_tensor_and_type()
  local x = ember.ones(2, 3)
  check(x:to("float32") == x, "same dtype: x itself")
  check_eq(x:to("float64").dtype, "float64")
  check_eq(x:to(ember.int32).dtype, "int32")
  check_eq(x:to("cpu", "int8").dtype, "int8")
  check(x:to("cpu") == x)
  -- another tensor: its dtype and device
  local o = ember.zeros(1, { dtype = "int64" })
  local y = x:to(o)
  check_eq(y.dtype, "int64")
  check_eq(tostring(y.device), tostring(o.device))
  check_tensor(y, { { 1, 1, 1 }, { 1, 1, 1 } }, 0)
  check(x:to(ember.zeros(5)) == x, "same dtype and device: x itself")
  -- type: the name, or a conversion
  check_eq(x:type(), "float32")
  check_eq(x:type("float16").dtype, "float16")
  check_eq(x:type(ember.bool).dtype, "bool")
  check(x:type("float32") == x)
  -- to() keeps history
  local w = ember.ones(2, { requires_grad = true })
  local d = w:to("float64")
  check(d.requires_grad)
  d:sum():backward()
  check_tensor(w.grad, { 1, 1 }, 0)
  check_error(function() return x:type("int7") end, "type", "dtype", "int7")
  check_error(function() return x:to(o, 3) end, "to", "after the tensor")
  check_error(function() return x:to("float128") end, "to", "float128")
end

function T.tolist_round_trips_every_dtype()
  local vals = {
    bool = { { true, false }, { false, true } },
    uint8 = { { 0, 255 }, { 7, 128 } },
    int8 = { { -128, 127 }, { 0, -1 } },
    int32 = { { -2147483648, 2147483647 }, { 0, 5 } },
    int64 = { { math.mininteger, math.maxinteger }, { (1 << 62) + 1, -3 } },
    float16 = { { 0.5, -65504 }, { 1 / 0, 0.099975586 } },
    bfloat16 = { { 0.5, -3.3895313892515355e38 }, { -1 / 0, 0.10009765625 } },
    float32 = { { 0.1, -1e30 }, { 1 / 0, 1.5 } },
    float64 = { { 0.1, -1e300 }, { 2 ^ 53 + 2, 5e-324 } },
  }
  for dt, v in pairs(vals) do
    local x = ember.tensor(v, { dtype = dt })
    local l = x:tolist()
    check_eq(type(l), "table", dt)
    check_eq(#l, 2, dt)
    local back = ember.tensor(l, { dtype = dt })
    check_eq(back.dtype, dt)
    check(same(back, x), dt .. " round trip")
    if dt == "bool" then
      check_eq(l[1][1], true)
      check_eq(math.type(l[1][2]), nil)
    elseif dt:sub(1, 5) ~= "float" and dt ~= "bfloat16" then
      check_eq(math.type(l[1][1]), "integer", dt)
      check_eq(l[1][1], v[1][1], dt)
      check_eq(l[1][2], v[1][2], dt)
    else
      check_eq(math.type(l[1][1]), "float", dt)
    end
  end
  check_eq(ember.tensor({ { math.maxinteger } }):tolist()[1][1], math.maxinteger)
  check_eq(ember.tensor(0.1, { dtype = "float64" }):tolist(), 0.1)
  check_eq(ember.tensor(7):tolist(), 7)
  check_eq(#ember.zeros(0):tolist(), 0)
  check_eq(#ember.zeros(2, 0):tolist()[2], 0)
  local nan = ember.tensor({ 0 / 0 }):tolist()[1]
  check(nan ~= nan)
  -- a non-contiguous view lists in its own order
  local t = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }):t():tolist()
  check_eq(t[1][2], 4)
  check_eq(t[3][1], 3)
  -- three levels of nesting
  local n3 = ember.arange(1, 9):reshape(2, 2, 2):tolist()
  check_eq(n3[2][1][2], 6)
end

return T
