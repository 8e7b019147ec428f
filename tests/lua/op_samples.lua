-- op_samples.lua -- sample inputs for every differentiable op (OpInfo
-- style), used by test_gradcheck.lua. samples[NAME]() returns a list of
-- samples { inputs = {...}, fn = function(...) ... end, gradgrad = bool,
-- opts = {gradcheck options} }: small float64 tensors, positive where
-- log/sqrt/pow need it, away from the kinks of relu/abs/remainder.
-- gradgrad = false marks a sample whose double backward is not checked.
local ember = ember or require "ember"
local S = {}

local function t(v) return ember.tensor(v, { dtype = "float64" }) end
local function m23() return t({ { 0.5, -1.2, 0.8 }, { 1.5, 0.3, -0.7 } }) end
local function p23() return t({ { 0.5, 1.2, 0.8 }, { 1.5, 0.3, 2.1 } }) end
local function v3() return t({ 0.4, -0.9, 1.3 }) end

local function one(inputs, fn, extra)
  local s = { inputs = inputs, fn = fn, gradgrad = true }
  for k, v in pairs(extra or {}) do s[k] = v end
  return { s }
end

-- ---- elementwise binary ----
S.add = function()
  return {
    { inputs = { m23(), v3() }, fn = function(a, b) return ember.add(a, b) end, gradgrad = true },
    { inputs = { m23(), m23() }, fn = function(a, b) return a:add(b, { alpha = 2.5 }) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a + 3 end, gradgrad = true },
  }
end
S.add_ = function() return one({ m23(), v3() }, function(a, b) return a:clone():add_(b, { alpha = 2 }) end) end
S.sub = function()
  return {
    { inputs = { m23(), v3() }, fn = function(a, b) return ember.sub(a, b) end, gradgrad = true },
    { inputs = { v3(), m23() }, fn = function(a, b) return a:sub(b, { alpha = 0.5 }) end, gradgrad = true },
  }
end
S.sub_ = function() return one({ m23(), v3() }, function(a, b) return a:clone():sub_(b) end) end
S.mul = function()
  return {
    { inputs = { m23(), v3() }, fn = function(a, b) return a * b end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a * 1.5 end, gradgrad = true },
  }
end
S.mul_ = function()
  return one({ m23(), v3() }, function(a, b) return a:clone():mul_(b) end,
    { gradgrad = true })
end
S.div = function()
  return {
    { inputs = { m23(), p23() }, fn = function(a, b) return a / b end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return 2 / (a * a + 1) end, gradgrad = true },
  }
end
S.div_ = function()
  return one({ m23(), p23() }, function(a, b) return a:clone():div_(b) end,
    { gradgrad = true })
end
S.pow = function()
  return {
    { inputs = { p23(), m23() }, fn = function(a, b) return ember.pow(a, b) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a ^ 3 end, gradgrad = true },
    { inputs = { p23() }, fn = function(a) return a ^ 0.5 end, gradgrad = true },
  }
end
S.remainder = function()
  -- self/other well inside (k, k+1): away from the jumps
  return one({ t({ { 2.3, 5.7 }, { -1.6, 4.4 } }), t({ { 1.0, 1.5 }, { 1.1, 2.0 } }) },
    function(a, b) return ember.remainder(a, b) end, { opts = { eps = 1e-7 } })
end

-- ---- elementwise unary ----
S.neg = function() return one({ m23() }, function(a) return -a end) end
S.abs = function() return one({ m23() }, function(a) return a:abs() end) end
S.exp = function() return one({ m23() }, function(a) return a:exp() end) end
S.log = function() return one({ p23() }, function(a) return a:log() end) end
S.sqrt = function() return one({ p23() }, function(a) return a:sqrt() end) end
S.tanh = function() return one({ m23() }, function(a) return a:tanh() end) end
S.sigmoid = function() return one({ m23() }, function(a) return a:sigmoid() end) end
S.tanh_backward = function()
  return one({ m23(), t({ { 0.2, -0.5, 0.7 }, { 0.1, 0.9, -0.3 } }) },
    function(g, y) return ember.tanh_backward(g, y) end)
end
S.sigmoid_backward = function()
  return one({ m23(), t({ { 0.2, 0.5, 0.7 }, { 0.1, 0.9, 0.3 } }) },
    function(g, y) return ember.sigmoid_backward(g, y) end)
end
S.relu = function() return one({ m23() }, function(a) return a:relu() end) end
-- piecewise constant: a zero gradient away from the jumps
S.floor_divide = function()
  return {
    { inputs = { m23(), t({ { 0.7, 1.3, 0.9 }, { 1.7, 0.45, 2.3 } }) },
      fn = function(a, b) return ember.floor_divide(a, b) + a end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return (a * 3) // 2 + a end, gradgrad = true },
  }
end
S.sign = function() return one({ m23() }, function(a) return a:sign() * a end) end
S.threshold_backward = function()
  return one({ m23(), t({ { 0.2, -0.5, 0.7 }, { 0.1, 0.9, -0.3 } }) },
    function(g, y) return ember.threshold_backward(g * g, y, 0.05) end)
end
S.where = function()
  local c = ember.tensor({ { true, false, true }, { false, false, true } })
  return {
    { inputs = { m23(), v3() }, fn = function(a, b) return ember.where(c, a, b) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return ember.where(c, 2.5, a) end, gradgrad = true },
    -- the method's receiver is self: a:where(c, y) is where(c, a, y)
    { inputs = { m23() }, fn = function(a) return a:where(c, -1) end, gradgrad = true },
  }
end

-- ---- reductions ----
S.sum = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:sum() end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:sum(2) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:sum(1, { keepdim = true }) end, gradgrad = true },
  }
end
S.mean = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:mean() end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:mean(2, { keepdim = true }) end, gradgrad = true },
  }
end

-- ---- reductions: prod amax amin var std norm ----
-- distinct values for amax/amin and the inf norms (ties have no derivative);
-- prod with zeros: exact first derivatives, no double backward there
S.prod = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:prod() end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:prod(2) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:prod(1, { keepdim = true }) end, gradgrad = true },
    { inputs = { t({ { 0.5, 0, 2 }, { 1.5, 0.3, -0.7 } }) }, fn = function(a) return a:prod(2) end, gradgrad = false },
    { inputs = { t({ { 0.5, 0, 2 }, { 0, 0.3, -0.7 } }) }, fn = function(a) return a:prod() end, gradgrad = false },
  }
end
S.max = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:max() end, gradgrad = true },
    { inputs = { t({ { 1, 3 }, { 3, 2 } }) }, fn = function(a) return ember.max(a) end, gradgrad = false }, -- a tie shares (a kink for gradgrad)
  }
end
S.max_dim = function()
  return {
    { inputs = { m23() }, fn = function(a) return (a:max(2)) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return (ember.max(a, 1, true)) end, gradgrad = true },
  }
end
S.min = function() return one({ m23() }, function(a) return a:min() end) end
S.min_dim = function()
  return {
    { inputs = { m23() }, fn = function(a) return (a:min(-1)) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return (ember.min(a, 1, true)) end, gradgrad = true },
  }
end
S.amax = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:amax() end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:amax(2) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:amax({ 1, 2 }, { keepdim = true }) end, gradgrad = true },
  }
end
S.amin = function()
  return {
    { inputs = { m23() }, fn = function(a) return ember.amin(a) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:amin(1, { keepdim = true }) end, gradgrad = true },
  }
end
S.var = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:var() end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:var(2) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:var(1, { correction = 0, keepdim = true }) end, gradgrad = true },
  }
end
S.std = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:std() end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:std(2, { keepdim = true, correction = 2 }) end, gradgrad = true },
  }
end
S.norm = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:norm() end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:norm(1, 2) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:norm(math.huge, 2) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:norm(-math.huge) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:norm(3, 1, { keepdim = true }) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:norm(0.5) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return a:norm(2, { 1, 2 }) end, gradgrad = true },
  }
end

-- ---- linear algebra ----
S.mm = function()
  return one({ m23(), t({ { 0.1, 0.2 }, { -0.3, 0.4 }, { 0.5, -0.6 } }) },
    function(a, b) return ember.mm(a, b) end)
end
S.matmul = function()
  return {
    { inputs = { m23(), t({ { 0.1, 0.2 }, { -0.3, 0.4 }, { 0.5, -0.6 } }) },
      fn = function(a, b) return a:matmul(b) end, gradgrad = true },
    { inputs = { m23(), v3() }, fn = function(a, b) return a:matmul(b) end, gradgrad = true },
  }
end
S.addmm = function()
  local w = t({ { 0.1, 0.2 }, { -0.3, 0.4 }, { 0.5, -0.6 } })
  return {
    { inputs = { t({ 0.25, -0.5 }), m23(), w },
      fn = function(s, a, b) return ember.addmm(s, a, b, { beta = 0.5, alpha = 2 }) end, gradgrad = true },
    { inputs = { m23():matmul(w), m23(), w }, fn = function(s, a, b) return s:addmm(a, b) end, gradgrad = true },
  }
end
S.linear = function()
  local F = ember.nn.functional
  local w = t({ { 0.1, 0.2, 0.3 }, { -0.4, 0.5, -0.6 } })
  return {
    { inputs = { m23(), w, t({ 0.25, -0.5 }) }, fn = function(x, w, b) return F.linear(x, w, b) end, gradgrad = true },
    { inputs = { v3(), w }, fn = function(x, w) return F.linear(x, w) end, gradgrad = true },
    { inputs = { m23():view(1, 2, 3), w, t({ 0.25, -0.5 }) }, fn = function(x, w, b) return F.linear(x, w, b) end,
      gradgrad = true },
  }
end
S.logsumexp = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:logsumexp(2) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return ember.logsumexp(a, { 1, 2 }, true) end, gradgrad = true },
  }
end
S.softmax = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:softmax(2) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return ember.nn.functional.softmax(a, 1) end, gradgrad = true },
  }
end
S.log_softmax = function()
  return {
    { inputs = { m23() }, fn = function(a) return a:log_softmax(-1) end, gradgrad = true },
    { inputs = { m23() }, fn = function(a) return ember.log_softmax(a, 1) end, gradgrad = true },
  }
end

-- ---- copies and conversions ----
S.copy_ = function()
  return one({ m23(), v3() }, function(a, b) return (a * 1):copy_(b) end)
end
-- the overwritten values get zero gradient; a * a keeps a in the graph
S.fill_ = function()
  return {
    { inputs = { m23(), t(1.5) }, fn = function(a, v) local y = a * a; y:fill_(v); return y * a end,
      gradgrad = true },
    { inputs = { m23() }, fn = function(a) local y = a * a; y:narrow(2, 1, 2):fill_(2); return y end,
      gradgrad = true },
  }
end
S.zero_ = function()
  return one({ m23() }, function(a) local y = a * a; y:select(1, 2):zero_(); return y * a end)
end
S.clone = function() return one({ m23() }, function(a) return a:clone() end) end
S.contiguous = function() return one({ m23() }, function(a) return a:t():contiguous() end) end
S.to = function()
  -- through float32 and back: float32 rounding needs a larger step
  return one({ m23() }, function(a) return a:to("float32"):to("float64") end,
    { opts = { eps = 1e-3, atol = 1e-3, rtol = 1e-2 } })
end
-- to_device: on a cpu-only build the move to "cpu" is the identity (the
-- fake device of tests/check_device.c covers a real move and its backward)
S.to_device = function()
  return one({ m23() }, function(a) return ember.to_device(a, "cpu") * a:to(ember.device("cpu")) end)
end

-- ---- views ----
S.view = function() return one({ m23() }, function(a) return a:view(3, 2) end) end
S.reshape = function() return one({ m23() }, function(a) return a:t():reshape(6) end) end
S.transpose = function() return one({ m23() }, function(a) return a:transpose(1, 2) end) end
S.t = function() return one({ m23() }, function(a) return a:t() end) end
S.permute = function()
  return one({ t({ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } } }) * 0.1 },
    function(a) return a:permute(3, 1, 2) end)
end
S.expand = function() return one({ v3() }, function(a) return a:expand(2, 3) end) end
-- the double backward of these runs through narrow_backward & co.
S.narrow = function()
  return one({ m23() }, function(a) return (a * a):narrow(2, 2, 2) end)
end
S.select = function()
  return one({ m23() }, function(a) return (a * a):select(2, -1) end)
end
S.slice = function()
  return one({ t({ 1, 2, 3, 4, 5, 6 }) * 0.3 }, function(a) return (a * a):slice(1, 2, 5, 2) end)
end
S.narrow_backward = function()
  return one({ v3() }, function(g) return ember.narrow_backward(g * g, { 2, 3 }, 1, 2, 1):view(6) end)
end
S.select_backward = function()
  return one({ v3() }, function(g) return ember.select_backward(g * g, { 2, 3 }, 1, -1) end)
end
S.slice_backward = function()
  return one({ t({ 0.5, -1.5 }) }, function(g) return ember.slice_backward(g * g, { 5 }, 1, 2, 4, 2) end)
end
S.as_strided = function()
  return {
    { inputs = { m23() }, fn = function(a) return (a * a):as_strided({ 2, 2 }, { 1, 2 }, 1) end, gradgrad = true },
    -- overlapping windows: gradients of shared elements add up
    { inputs = { v3() }, fn = function(a) return (a * a):as_strided({ 2, 2 }, { 1, 1 }) end, gradgrad = true },
  }
end
S.as_strided_backward = function()
  return {
    { inputs = { t({ { 0.5, -1.0 }, { 2.0, 0.3 } }) },
      fn = function(g) return ember.as_strided_backward(g * g, { 2, 3 }, { 3, 1 }, 0, { 2, 2 }, { 1, 2 }, 1) end,
      gradgrad = true },
    -- an input geometry that reads locations twice: they share the gradient
    { inputs = { t({ { 0.5, -1.0 }, { 2.0, 0.3 } }) },
      fn = function(g) return ember.as_strided_backward(g * g, { 2, 3 }, { 1, 1 }, 0, { 2, 2 }, { 1, 2 }, 0) end,
      gradgrad = true },
  }
end
S.as_strided_double_backward = function()
  return one({ m23() }, function(g)
    return ember.as_strided_double_backward(g * g, { 2, 3 }, { 1, 1 }, 0, { 2, 2 }, { 1, 2 }, 1)
  end)
end
S.squeeze = function()
  return {
    { inputs = { t({ { 1.0, 2.0, 3.0 } }) }, fn = function(a) return a:squeeze() end, gradgrad = true },
    { inputs = { t({ { 1.0, 2.0, 3.0 } }) }, fn = function(a) return a:squeeze(1) end, gradgrad = true },
  }
end
S.unsqueeze = function() return one({ v3() }, function(a) return a:unsqueeze(2) end) end

-- ---- several results and tensor lists (samples keyed by C name: split_sizes
-- is split.sizes, stack_list is stack) ----
local function m34()
  return t({ { 0.5, -1.2, 0.8, 2.2 }, { 1.5, 0.3, -0.7, 0.1 }, { -0.4, 1.1, 0.9, -2.0 } })
end
local function idx23() return ember.tensor({ { 1, 3 }, { 2, 2 } }) end -- int64, a repeated index
local function many(list)
  local r = {}
  for _, s in ipairs(list) do r[#r + 1] = { inputs = s[1], fn = s[2], gradgrad = true } end
  return r
end
S.sort = function()
  return many({
    { { m34() }, function(a) local v = a:sort(); return v end },
    { { m34() }, function(a) local v, i = a:sort(1, true); return v * 2 end },
  })
end
S.topk = function()
  return many({
    { { m34() }, function(a) local v = a:topk(2); return v end },
    { { m34() }, function(a) local v = a:topk(2, 1, { largest = false }); return v end },
  })
end
S.gather = function()
  return one({ m23() }, function(a) return a:gather(2, idx23()) end)
end
S.gather_backward = function()
  return one({ t({ { 0.5, -1.2 }, { 1.5, 0.3 } }) }, function(g)
    return ember.gather_backward(g * g, { 2, 3 }, 2, idx23())
  end)
end
S.cat = function()
  return many({
    { { m23(), t({ { 0.1, 0.2, 0.3 } }) }, function(a, b) return ember.cat({ a, b }) end },
    { { m23(), m23() }, function(a, b) return ember.cat({ a, b * b, a }, -1) end },
    { { m23() }, function(a) return ember.cat({ ember.zeros(0, { dtype = "float64" }), a }) end },
  })
end
S.stack_list = function()
  return many({
    { { m23(), p23() }, function(a, b) return ember.stack({ a, b }) end },
    { { v3(), v3() }, function(a, b) return ember.stack({ a, b * b }, 2) end },
  })
end
S.split = function()
  return many({
    { { m23() }, function(a) local p = a:split(2, 2); return ember.cat({ p[1] * 2, p[2] * 3 }, 2) end },
    -- only one piece used: the others' gradients are undefined (zeros)
    { { m34() }, function(a) return a:split(1)[2] * 2 end },
  })
end
S.split_sizes = function()
  return one({ m34() }, function(a) local p = a:split({ 1, 3 }, 2); return p[2] * p[2] end)
end
S.chunk = function()
  return one({ m34() }, function(a) local p = a:chunk(2); return ember.cat({ p[2], p[1] * 3 }) end)
end
S.unbind = function()
  return many({
    { { m23() }, function(a) local r = a:unbind(); return r[1] * 2 + r[2] * r[2] end },
    { { m23() }, function(a) return a:unbind(2)[3] end },
  })
end

-- Note [Schema files]: each op family keeps its samples in samples/FAMILY.lua
-- (a table NAME -> function like S.NAME above, given the helpers below).
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
local p = io.popen('ls "' .. dir .. '"/samples/*.lua 2>/dev/null')
local fam = {}
for line in p:lines() do fam[#fam + 1] = line end
p:close()
table.sort(fam)
local H = { t = t, m23 = m23, p23 = p23, v3 = v3, one = one, many = many }
for _, file in ipairs(fam) do
  for name, make in pairs(dofile(file)(H)) do
    assert(not S[name], "samples for " .. name .. " given twice (" .. file .. ")")
    S[name] = make
  end
end

return S
