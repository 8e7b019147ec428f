-- autograd.lua -- the Lua half of ember.autograd: grad-mode guards,
-- custom Functions, detect_anomaly, gradcheck and gradgradcheck.
--
-- The C half (runtime/lua/lua_autograd.c and the files split from it, listed
-- in runtime/lua/em_lua_int.h) provides ember.autograd.grad, dot,
-- differentiable_ops and the raw mode switches (_set_grad_enabled, ...) that
-- the guards below wrap. Every guard works in two forms:
--   ember.no_grad(function() ... end)   -- runs fn, returns its results,
--                                        -- restores the mode even on error
--   local g <close> = ember.no_grad()   -- restores when g goes out of scope
local ember = require "ember"
local autograd = ember.autograd

local set_grad = autograd._set_grad_enabled
local set_inference = autograd._set_inference_mode
local set_anomaly = autograd._set_anomaly_enabled

-- ---- guards ----

local Guard = {}
Guard.__index = Guard
Guard.__name = "ember.Guard"

function Guard:__close()
  local restore = self.restore
  if restore then
    self.restore = nil
    restore()
  end
end
Guard.close = Guard.__close

function Guard:__tostring()
  return "<" .. self.kind .. " guard" .. (self.restore and "" or " (closed)") .. ">"
end

-- Makes a guard constructor from enter(...), which switches the mode and
-- returns the function that restores it.
local function guard_maker(kind, enter, nparams)
  return function(...)
    local n = select("#", ...)
    local fn = select(nparams + 1, ...)
    if n > nparams and fn ~= nil and type(fn) ~= "function" then
      error(string.format("bad argument #%d to '%s' (function expected, got %s)",
        nparams + 1, kind, type(fn)), 2)
    end
    local g = setmetatable({ kind = kind, restore = enter(...) }, Guard)
    if fn == nil then return g end
    local _ <close> = g
    return fn()
  end
end

-- The one way the guards save and restore grad mode (as em_grad_guard does
-- in C, Note [Grad mode guard]): restore_grad(set_grad(on)) switches and
-- returns the function that puts the previous mode back.
local function restore_grad(prev)
  return function() set_grad(prev) end
end

ember.no_grad = guard_maker("no_grad", function()
  return restore_grad(set_grad(false))
end, 0)

-- enable_grad inside inference_mode leaves grad off: inference mode wins.
ember.enable_grad = guard_maker("enable_grad", function()
  if ember.is_inference_mode_enabled() then return function() end end
  return restore_grad(set_grad(true))
end, 0)

ember.set_grad_enabled = guard_maker("set_grad_enabled", function(on)
  if type(on) ~= "boolean" then
    error("bad argument #1 to 'set_grad_enabled' (boolean expected, got " .. type(on) .. ")", 4)
  end
  if on and ember.is_inference_mode_enabled() then return function() end end
  return restore_grad(set_grad(on))
end, 1)

ember.inference_mode = guard_maker("inference_mode", function()
  local restore = restore_grad(set_grad(false))
  local prev_inf = set_inference(true)
  return function()
    set_inference(prev_inf)
    restore()
  end
end, 0)

autograd.no_grad = ember.no_grad
autograd.enable_grad = ember.enable_grad
autograd.set_grad_enabled = ember.set_grad_enabled
autograd.inference_mode = ember.inference_mode

-- Anomaly mode: nodes remember the traceback of the op that made them;
-- backward errors name it, and NaN gradients become errors.
autograd.detect_anomaly = guard_maker("detect_anomaly", function()
  local prev = set_anomaly(true)
  return function() set_anomaly(prev) end
end, 0)

-- ---- custom Functions ----

local apply = autograd._function_apply

-- F = ember.autograd.Function{name = "MyFn", forward = fn(ctx, ...), backward = fn(ctx, ...)}
-- F(...) and F.apply(...) run forward under no_grad and attach a node
-- named MyFnBackward (FunctionBackward without a name) to its outputs.
function autograd.Function(def)
  if type(def) ~= "table" then
    error("bad argument #1 to 'Function' (table expected, got " .. type(def) .. ")", 2)
  end
  if type(def.forward) ~= "function" then
    error("Function: forward must be a function, got " .. type(def.forward), 2)
  end
  if type(def.backward) ~= "function" then
    error("Function: backward must be a function, got " .. type(def.backward), 2)
  end
  if def.name ~= nil and type(def.name) ~= "string" then
    error("Function: name must be a string, got " .. type(def.name), 2)
  end
  local F = {}
  for k, v in pairs(def) do F[k] = v end
  F.apply = function(...) return apply(def, ...) end
  return setmetatable(F, {
    __call = function(_, ...) return apply(def, ...) end,
    __tostring = function() return "<Function " .. (def.name or "?") .. ">" end,
  })
end

-- ---- gradcheck ----

local function flat_values(t)
  local out = {}
  local function walk(v)
    if type(v) == "table" then
      for i = 1, #v do walk(v[i]) end
    else
      out[#out + 1] = v
    end
  end
  walk(t:tolist())
  return out
end

local function is_float(t)
  local d = t.dtype
  return d == "float64" or d == "float32" or d == "float16" or d == "bfloat16"
end

-- The tensor outputs of fn(...) as a list (other values are ignored).
local function tensor_outputs(...)
  local outs = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if ember.is_tensor(v) and is_float(v) then outs[#outs + 1] = v end
  end
  return outs
end

local function call_list(fn, args, n)
  return fn(table.unpack(args, 1, n))
end

local function prepare(inputs)
  if ember.is_tensor(inputs) then inputs = { inputs } end
  if type(inputs) ~= "table" then
    error("gradcheck: inputs: a tensor or a list expected, got " .. type(inputs), 3)
  end
  local n = inputs.n or #inputs
  local args, diff = {}, {}
  for i = 1, n do
    local v = inputs[i]
    if ember.is_tensor(v) and is_float(v) then
      local leaf = ember.tensor(v, { dtype = "float64" })
      leaf:requires_grad_(true)
      args[i] = leaf
      diff[#diff + 1] = i
    else
      args[i] = v
    end
  end
  return args, diff, n
end

local function fail(raise, msg)
  if raise then error(msg, 3) end
  return false, msg
end

-- The analytic Jacobian columns: J[o][k][j] = d out_o[k] / d input_j (a flat
-- list per input), from one autograd.grad per output element.
local function analytic(outs, args, diff)
  local xs = {}
  for j, i in ipairs(diff) do xs[j] = args[i] end
  local J = {}
  for o, out in ipairs(outs) do
    J[o] = {}
    local numel = out:numel()
    for k = 1, numel do
      local row
      if out.requires_grad then
        local go = ember.zeros(out.shape, { dtype = out.dtype })
        go:view(-1)[k] = 1
        local gs = autograd.grad({ out }, xs, { grad_outputs = { go }, retain_graph = true,
          allow_unused = true })
        row = {}
        for j = 1, #xs do
          row[j] = gs[j] and flat_values(gs[j]) or false
        end
      else
        row = {}
        for j = 1, #xs do row[j] = false end
      end
      J[o][k] = row
    end
  end
  return J
end

local function fmt_index(shape, k)
  if #shape == 0 then return "" end
  local idx, rem = {}, k - 1
  for d = #shape, 1, -1 do
    idx[d] = rem % shape[d] + 1
    rem = rem // shape[d]
  end
  return " {" .. table.concat(idx, ",") .. "}"
end

-- gradcheck(fn, inputs, {eps=1e-6, atol=1e-5, rtol=1e-3, raise=true})
-- Checks fn's analytic gradients against central differences in float64.
-- Floating tensor inputs are converted to float64 leaves requiring grad;
-- other inputs are passed through. Returns true, or raises (false, msg
-- with raise=false) naming the output, the input, the element and both values.
function autograd.gradcheck(fn, inputs, opts)
  opts = opts or {}
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  local raise = opts.raise ~= false
  local label = opts.name and (opts.name .. ": ") or ""
  local args, diff, n = prepare(inputs)
  if #diff == 0 then return fail(raise, "gradcheck: no floating point tensor among the inputs") end
  local outs = tensor_outputs(call_list(fn, args, n))
  if #outs == 0 then return fail(raise, "gradcheck: fn returned no floating point tensor") end
  local J = analytic(outs, args, diff)
  -- numerical: perturb copies of each input element under no_grad
  return ember.no_grad(function()
    local base = {}
    for i = 1, n do base[i] = args[i] end
    for j, i in ipairs(diff) do
      local x = ember.tensor(args[i]:detach())
      base[i] = x
      local flat = x:view(-1)
      for e = 1, x:numel() do
        local v = flat[e]:item()
        -- read the values at once: an output may be a view of the input
        local function values()
          local r = tensor_outputs(call_list(fn, base, n))
          for o = 1, #r do r[o] = flat_values(r[o]) end
          return r
        end
        flat[e] = v + eps
        local plus = values()
        flat[e] = v - eps
        local minus = values()
        flat[e] = v
        for o = 1, #outs do
          local p, m = plus[o], minus[o]
          if not p or not m or #p ~= #m or #p ~= outs[o]:numel() then
            return fail(raise, string.format("%sgradcheck: output %d changed between calls",
              label, o))
          end
          for k = 1, #p do
            local num = (p[k] - m[k]) / (2 * eps)
            local col = J[o][k][j]
            local ana = col and col[e] or 0.0
            if not (math.abs(num - ana) <= atol + rtol * math.abs(num)) then
              return fail(raise, string.format(
                "%sgradcheck: Jacobian mismatch for output %d%s with respect to input %d, "
                .. "element %d%s: numerical %.10g, analytical %.10g", label, o,
                fmt_index(outs[o].shape, k), i, e, fmt_index(x.shape, e), num, ana))
            end
          end
        end
      end
      base[i] = args[i]
    end
    return true
  end)
end

-- gradgradcheck(fn, inputs, {grad_outputs=, eps=, atol=, rtol=, raise=})
-- gradcheck of (inputs..., grad_outputs...) -> the gradients of fn's
-- outputs (computed with create_graph=true), i.e. the second derivatives.
-- grad_outputs default to random float64 tensors shaped like the outputs.
function autograd.gradgradcheck(fn, inputs, opts)
  opts = opts or {}
  local args, diff, n = prepare(inputs)
  local outs = tensor_outputs(call_list(fn, args, n))
  local gos = opts.grad_outputs
  if gos == nil then
    gos = {}
    for o, out in ipairs(outs) do gos[o] = ember.randn(out.shape, { dtype = "float64" }) end
  elseif ember.is_tensor(gos) then
    gos = { gos }
  end
  local all = {}
  for i = 1, n do all[i] = args[i] end
  for o = 1, #outs do all[n + o] = gos[o] end
  all.n = n + #outs
  local function gradfn(...)
    local a = table.pack(...)
    -- the numerical pass runs under no_grad with plain copies: the
    -- gradient of fn is still taken, from fresh leaves
    local _ <close> = ember.enable_grad()
    for _, i in ipairs(diff) do
      if not a[i].requires_grad then a[i] = ember.tensor(a[i]):requires_grad_() end
    end
    local out = tensor_outputs(call_list(fn, a, n))
    local xs = {}
    for _, i in ipairs(diff) do xs[#xs + 1] = a[i] end
    local go = {}
    for o = 1, #out do go[o] = a[n + o] end
    local live, live_go = {}, {}
    for o = 1, #out do
      if out[o].requires_grad then
        live[#live + 1] = out[o]
        live_go[#live_go + 1] = go[o]
      end
    end
    local res = {}
    if #live > 0 and #xs > 0 then
      local gs = autograd.grad(live, xs, { grad_outputs = live_go, create_graph = true,
        allow_unused = true })
      for j = 1, #xs do
        res[j] = gs[j] or ember.zeros(xs[j].shape, { dtype = xs[j].dtype })
      end
    end
    return table.unpack(res, 1, #xs)
  end
  local o2 = {}
  for k, v in pairs(opts) do o2[k] = v end
  o2.grad_outputs = nil
  return autograd.gradcheck(gradfn, all, o2)
end

return autograd
