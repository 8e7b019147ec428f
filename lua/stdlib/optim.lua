-- optim.lua -- ember.optim (PyTorch's torch.optim): the optimizers and, in
-- ember.optim.lr_scheduler, the learning-rate schedulers. Pure Lua over
-- the bindings: every update is a few whole-tensor in-place ops run under
-- no_grad, following PyTorch 1.13's single-tensor (foreach=False) code
-- line by line, so results agree with it to rounding.
--
-- Arguments follow PyTorch's positional order after params; keyword-only
-- ones (and any positional one, by name) go in a trailing options table:
--   optim.SGD(net:parameters(), 0.1, 0.9)
--   optim.SGD(net:parameters(), { lr = 0.1, momentum = 0.9, nesterov = true })
-- A table whose [1] is set (betas = {0.9, 0.999}) is a positional value,
-- not the options table.
local ember = require "ember"
local is_tensor = ember.is_tensor
local unpack = table.unpack

local optim = {}
optim.__doc = [[
ember.optim: optimizers (PyTorch's torch.optim) and optim.lr_scheduler.
  SGD Adam AdamW RMSprop Adagrad Adadelta Adamax NAdam RAdam LBFGS
  opt = optim.Adam(net:parameters(), {lr = 1e-3})       or param groups:
  opt = optim.SGD({ {params = a, lr = 0.1}, {params = b} }, {lr = 0.01, momentum = 0.9})
  opt:zero_grad()  loss:backward()  opt:step([closure])
  opt.param_groups  opt.state  opt:state_dict()  opt:load_state_dict(sd)
  opt:add_param_group{params = ..., lr = ...}
  help(optim.lr_scheduler) for the schedulers.]]

local REQUIRED = setmetatable({}, { __tostring = function() return "<required parameter>" end })
optim.required = REQUIRED

local function is_module(v)
  return type(v) == "table" and rawget(v, "_kind") ~= nil
end

local function is_options(v)
  return type(v) == "table" and not is_module(v) and rawget(v, 1) == nil
end

-- Reads name's arguments after the first: positional in the order of
-- spec.positional, then the options table (keys of spec.defaults only).
-- Returns a table of every option, defaults filled in.
local function parse_args(name, spec, ...)
  local n = select("#", ...)
  local opts
  if n > 0 and is_options(select(n, ...)) then
    opts = select(n, ...)
    n = n - 1
  end
  if n > #spec.positional then
    error(string.format("%s: %d positional arguments after params given, at most %d expected",
      name, n, #spec.positional), 4)
  end
  local out = {}
  for i = 1, n do
    local v = select(i, ...)
    if v ~= nil then out[spec.positional[i]] = v end
  end
  if opts then
    for k, v in pairs(opts) do
      if spec.defaults[k] == nil then
        error(string.format("%s: unknown option '%s'", name, tostring(k)), 4)
      end
      out[k] = v
    end
  end
  for k, v in pairs(spec.defaults) do
    if out[k] == nil then out[k] = v end
  end
  return out
end

local function copy_table(t)
  local r = {}
  for k, v in pairs(t) do r[k] = v end
  return r
end

-- A deep copy: tables copied, tensors cloned (detached).
local function deep_copy(v)
  if is_tensor(v) then return v:detach():clone() end
  if type(v) ~= "table" then return v end
  local r = {}
  for k, x in pairs(v) do r[k] = deep_copy(x) end
  return r
end

local function fmt(v)
  if v == REQUIRED then return nil end
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = fmt(x) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  if v == false then return "false" end
  return tostring(v)
end

-- "Name(first, a, b=1, {c=2})": the call signature of a spec (positional
-- names with their defaults, then the options that are not positional), for
-- the class's __doc. Options whose default false stands for "not given"
-- (spec.unset) show as nil.
local function signature(name, first, spec)
  local parts, pos = { first }, {}
  for _, k in ipairs(spec.positional) do
    pos[k] = true
    local d = (spec.unset or {})[k] and "nil" or fmt(spec.defaults[k])
    parts[#parts + 1] = d and (k .. "=" .. d) or k
  end
  local kw = {}
  for k, v in pairs(spec.defaults) do
    if not pos[k] then kw[#kw + 1] = k .. "=" .. (fmt(v) or "required") end
  end
  table.sort(kw)
  if #kw > 0 then parts[#parts + 1] = "{" .. table.concat(kw, ", ") .. "}" end
  return name .. "(" .. table.concat(parts, ", ") .. ")"
end

-- ---- Optimizer ----

local Optimizer = { __name = "Optimizer" }
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

-- Defines optimizer class name: spec.positional (option names in PyTorch's
-- order after params), spec.defaults (REQUIRED for a mandatory one),
-- spec.check(group, err) validates a group's values, spec.init(p, state,
-- group) makes a parameter's state at its first step and
-- spec.update(group, p, grad, state) does one step of p (under no_grad).
local function define(name, spec)
  local cls = { __name = name, _spec = spec }
  cls.__index = cls
  cls.__doc = "optim." .. signature(name, "params", spec) .. "\n  " .. spec.doc ..
    "\n  Options may also be given by name in the trailing table; help(optim) for the API."
  cls.__tostring = Optimizer.__tostring
  setmetatable(cls, {
    __index = Optimizer,
    __call = function(c, params, ...)
      local defaults = parse_args(name, spec, ...)
      return Optimizer._new(c, params, defaults)
    end,
    __tostring = function() return "<optimizer class " .. name .. ">" end,
  })
  optim[name] = cls
  return cls
end

function Optimizer._new(cls, params, defaults)
  local name = cls.__name
  local self = setmetatable({ defaults = defaults, state = {}, param_groups = {} }, cls)
  if is_tensor(params) then
    error(name .. ": params: a list of tensors or of parameter groups expected, got a tensor", 3)
  end
  if is_module(params) then params = params:parameters() end
  if type(params) ~= "table" then
    error(name .. ": params: a list of tensors or of parameter groups expected, got " .. type(params), 3)
  end
  if #params == 0 then error(name .. ": optimizer got an empty parameter list", 3) end
  local groups = params
  if not (type(params[1]) == "table" and not is_module(params[1])) then groups = { { params = params } } end
  for _, g in ipairs(groups) do
    local ok, err = pcall(self.add_param_group, self, g)
    if not ok then error(err, 3) end
  end
  return self
end

function Optimizer:__tostring()
  local lines = { self.__name .. " (" }
  for i, g in ipairs(self.param_groups) do
    lines[#lines + 1] = "Parameter Group " .. (i - 1 + 1)
    local keys = {}
    for k in pairs(g) do if k ~= "params" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = g[k]
      if type(v) == "table" then
        local parts = {}
        for j, x in ipairs(v) do parts[j] = tostring(x) end
        v = "{" .. table.concat(parts, ", ") .. "}"
      end
      lines[#lines + 1] = "    " .. k .. ": " .. tostring(v)
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

--- opt:add_param_group(group): adds a group {params = tensor | list, opt = v, ...};
--- options it lacks come from the optimizer's defaults.
function Optimizer:add_param_group(group)
  local name = self.__name
  if type(group) ~= "table" or is_module(group) then
    error("add_param_group: group: table expected, got " .. type(group), 2)
  end
  local params = group.params
  if is_tensor(params) then params = { params }
  elseif is_module(params) then params = params:parameters()
  elseif type(params) ~= "table" then
    error("add_param_group: group.params: tensor or list of tensors expected, got " .. type(params), 2)
  end
  local g = copy_table(group)
  g.params = {}
  for i, p in ipairs(params) do
    if not is_tensor(p) then
      error(string.format("%s: optimizer can only optimize tensors, but params entry %d is a %s", name, i, type(p)), 2)
    end
    if not p.is_leaf then error(name .. ": can't optimize a non-leaf tensor", 2) end
    g.params[i] = p
  end
  for k, v in pairs(self.defaults) do
    if g[k] == nil then
      if v == REQUIRED then
        error(string.format("%s: parameter group didn't specify a value of required optimization parameter %s", name, k), 2)
      end
      g[k] = type(v) == "table" and copy_table(v) or v
    end
  end
  local seen, mine = {}, {}
  for _, other in ipairs(self.param_groups) do
    for _, p in ipairs(other.params) do seen[p] = true end
  end
  for _, p in ipairs(g.params) do
    if seen[p] then error(name .. ": some parameters appear in more than one parameter group", 2) end
    if mine[p] then
      error(name .. ": a parameter group contains a parameter twice (it would be updated twice per step)", 2)
    end
    mine[p] = true
  end
  local check = self._spec.check
  if check then
    check(g, function(msg) error(name .. ": " .. msg, 4) end)
  end
  self.param_groups[#self.param_groups + 1] = g
end

--- opt:zero_grad([{set_to_none=false}]): zeroes every parameter's gradient
--- in place, or drops it with set_to_none (PyTorch 1.13's default is false).
function Optimizer:zero_grad(opts)
  local none = opts == true or (type(opts) == "table" and opts.set_to_none)
  local g <close> = ember.no_grad()
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      if none then
        p.grad = nil
      else
        local gr = p.grad
        if gr then gr:zero_() end
      end
    end
  end
end

--- opt:step([closure]) -> closure's loss: one update of every parameter
--- that has a gradient; closure (run with grad enabled) re-evaluates the
--- model and returns the loss.
function Optimizer:step(closure)
  local loss
  if closure ~= nil then loss = ember.enable_grad(closure) end
  local spec = self._spec
  local g <close> = ember.no_grad()
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local grad = p.grad
      if grad then
        local st = self.state[p]
        if not st then
          st = {}
          self.state[p] = st
          spec.init(p, st, group)
        end
        spec.update(group, p, grad, st)
      end
    end
  end
  return loss
end

--- opt:state_dict() -> {state = {[i] = per-parameter state}, param_groups = {...}}:
--- parameters are numbered 1.. over the groups in order; a group's params
--- lists those numbers. Tensors in it are the live ones (not copies).
function Optimizer:state_dict()
  local index, n = {}, 0
  local groups = {}
  for gi, group in ipairs(self.param_groups) do
    local pg = copy_table(group)
    pg.params = {}
    for j, p in ipairs(group.params) do
      if not index[p] then
        n = n + 1
        index[p] = n
      end
      pg.params[j] = index[p]
    end
    groups[gi] = pg
  end
  local state = {}
  for p, st in pairs(self.state) do
    if index[p] then state[index[p]] = st end
  end
  return { state = state, param_groups = groups }
end

--- opt:load_state_dict(sd): restores state and group options from
--- state_dict() of an optimizer over parameters of the same shapes and
--- grouping (tensors are copied; floating state takes the parameter's dtype).
function Optimizer:load_state_dict(sd)
  local name = self.__name
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    error("load_state_dict: state_dict: a table with state and param_groups expected", 2)
  end
  local groups, saved = self.param_groups, sd.param_groups
  if #groups ~= #saved then
    error(string.format("%s: loaded state dict has a different number of parameter groups (%d, the optimizer has %d)",
      name, #saved, #groups), 2)
  end
  local by_id = {}
  for i, g in ipairs(groups) do
    if type(saved[i].params) ~= "table" or #saved[i].params ~= #g.params then
      error(string.format("%s: loaded state dict contains a parameter group that doesn't match the size of " ..
        "optimizer's group (group %d: %d parameters, the optimizer's has %d)", name, i,
        type(saved[i].params) == "table" and #saved[i].params or 0, #g.params), 2)
    end
    for j, id in ipairs(saved[i].params) do by_id[id] = g.params[j] end
  end
  local state = {}
  for id, st in pairs(sd.state) do
    local p = by_id[id]
    if p then
      local s = {}
      for k, v in pairs(st) do
        v = deep_copy(v)
        if is_tensor(v) and k ~= "step" and v.dtype ~= p.dtype and
            (v.dtype:find("float") or v.dtype == "bfloat16") then
          v = v:to(p.dtype)
        end
        s[k] = v
      end
      state[p] = s
    end
  end
  local new_groups = {}
  for i, g in ipairs(groups) do
    local ng = deep_copy(saved[i])
    ng.params = g.params
    new_groups[i] = ng
  end
  self.state = state
  for i = 1, #groups do groups[i] = new_groups[i] end
end

-- ---- validation helpers ----

local function need(cond, err, msg, ...)
  if not cond then err(string.format(msg, ...)) end
end

local function check_common(g, err)
  need(type(g.lr) == "number" and g.lr >= 0, err, "Invalid learning rate: %s", tostring(g.lr))
  if g.eps ~= nil then need(type(g.eps) == "number" and g.eps >= 0, err, "Invalid epsilon value: %s", tostring(g.eps)) end
  if g.weight_decay ~= nil then
    need(type(g.weight_decay) == "number" and g.weight_decay >= 0, err, "Invalid weight_decay value: %s",
      tostring(g.weight_decay))
  end
  if g.betas ~= nil then
    local b = g.betas
    need(type(b) == "table" and type(b[1]) == "number" and b[1] >= 0 and b[1] < 1, err,
      "Invalid beta parameter at index 1: %s", tostring(type(b) == "table" and b[1] or b))
    need(type(b[2]) == "number" and b[2] >= 0 and b[2] < 1, err,
      "Invalid beta parameter at index 2: %s", tostring(b[2]))
  end
end

local function zeros(p)
  return ember.zeros_like(p)
end

-- Whether p's step can run as one fused kernel (_fused_adam_, _fused_sgd_;
-- schema/ops/optimfused.yaml): p float32 or float64, and grad and the
-- state tensors given (nil ones are skipped) contiguous and of p's dtype.
-- Anything else (half types, non-contiguous parameters or state loaded in
-- another layout) runs the op-by-op chain below, which gives the same values
-- up to float rounding.
local function fusable(p, grad, ...)
  local dt = p.dtype
  if (dt ~= "float32" and dt ~= "float64") or not p:is_contiguous() then return false end
  if grad.dtype ~= dt or not grad:is_contiguous() then return false end
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    if t ~= nil and (t.dtype ~= dt or not t:is_contiguous()) then return false end
  end
  return true
end

-- grad, negated for maximize and with weight decay folded in (L2).
local function decayed(group, p, grad)
  if group.maximize then grad = -grad end
  if group.weight_decay ~= 0 then grad = ember.add(grad, p, { alpha = group.weight_decay }) end
  return grad
end

-- ---- the optimizers ----

--- optim.SGD(params, lr, momentum=0, dampening=0, weight_decay=0,
--- nesterov=false, {maximize=false}): stochastic gradient descent with
--- optional (Nesterov) momentum.
define("SGD", {
  doc = "Stochastic gradient descent with optional momentum (dampened, Nesterov) and L2 weight decay.",
  positional = { "lr", "momentum", "dampening", "weight_decay", "nesterov" },
  defaults = { lr = REQUIRED, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false },
  check = function(g, err)
    check_common(g, err)
    need(g.momentum >= 0, err, "Invalid momentum value: %s", tostring(g.momentum))
    need(not g.nesterov or (g.momentum > 0 and g.dampening == 0), err,
      "Nesterov momentum requires a momentum and zero dampening")
  end,
  init = function() end,
  update = function(group, p, grad, st)
    local momentum = group.momentum
    local buf = st.momentum_buffer
    if fusable(p, grad, buf) then
      local first = false
      if momentum ~= 0 and buf == nil then
        buf = ember.empty_like(p)
        st.momentum_buffer = buf
        first = true
      end
      ember._fused_sgd_(p, grad, momentum ~= 0 and buf or nil, { lr = group.lr, momentum = momentum,
        dampening = group.dampening, weight_decay = group.weight_decay, nesterov = group.nesterov,
        maximize = group.maximize, first_step = first })
      return
    end
    local d_p = decayed(group, p, grad)
    if momentum ~= 0 then
      if buf == nil then
        buf = d_p:clone()
        st.momentum_buffer = buf
      else
        buf:mul_(momentum):add_(d_p, { alpha = 1 - group.dampening })
      end
      if group.nesterov then d_p = ember.add(d_p, buf, { alpha = momentum }) else d_p = buf end
    end
    p:add_(d_p, { alpha = -group.lr })
  end,
})

local function adam_update(decoupled)
  return function(group, p, grad, st)
    if fusable(p, grad, st.exp_avg, st.exp_avg_sq, st.max_exp_avg_sq) then
      st.step = st.step + 1
      ember._fused_adam_(p, grad, st.exp_avg, st.exp_avg_sq, group.amsgrad and st.max_exp_avg_sq or nil, {
        lr = group.lr, beta1 = group.betas[1], beta2 = group.betas[2], eps = group.eps,
        weight_decay = group.weight_decay, amsgrad = group.amsgrad, maximize = group.maximize,
        step = st.step, decoupled = decoupled })
      return
    end
    if group.maximize then grad = -grad end
    st.step = st.step + 1
    if decoupled then
      p:mul_(1 - group.lr * group.weight_decay)
    elseif group.weight_decay ~= 0 then
      grad = ember.add(grad, p, { alpha = group.weight_decay })
    end
    local beta1, beta2 = group.betas[1], group.betas[2]
    st.exp_avg:mul_(beta1):add_(grad, { alpha = 1 - beta1 })
    st.exp_avg_sq:mul_(beta2):addcmul_(grad, grad, { value = 1 - beta2 })
    local bias_correction1 = 1 - beta1 ^ st.step
    local bias_correction2_sqrt = math.sqrt(1 - beta2 ^ st.step)
    local step_size = group.lr / bias_correction1
    local denom
    if group.amsgrad then
      ember.maximum(st.max_exp_avg_sq, st.exp_avg_sq, { out = st.max_exp_avg_sq })
      denom = st.max_exp_avg_sq:sqrt():div_(bias_correction2_sqrt):add_(group.eps)
    else
      denom = st.exp_avg_sq:sqrt():div_(bias_correction2_sqrt):add_(group.eps)
    end
    p:addcdiv_(st.exp_avg, denom, { value = -step_size })
  end
end

local function adam_init(p, st, group)
  st.step = 0
  st.exp_avg = zeros(p)
  st.exp_avg_sq = zeros(p)
  if group.amsgrad then st.max_exp_avg_sq = zeros(p) end
end

--- optim.Adam(params, lr=1e-3, betas={0.9, 0.999}, eps=1e-8,
--- weight_decay=0, amsgrad=false, {maximize=false}).
define("Adam", {
  doc = "Adam (Kingma & Ba) with L2 weight decay and optional AMSGrad.",
  positional = { "lr", "betas", "eps", "weight_decay", "amsgrad" },
  defaults = { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, amsgrad = false, maximize = false },
  check = check_common,
  init = adam_init,
  update = adam_update(false),
})

--- optim.AdamW(params, lr=1e-3, betas={0.9, 0.999}, eps=1e-8,
--- weight_decay=1e-2, amsgrad=false, {maximize=false}): Adam with
--- decoupled weight decay (p *= 1 - lr*weight_decay each step).
define("AdamW", {
  doc = "Adam with decoupled weight decay (p *= 1 - lr*weight_decay each step).",
  positional = { "lr", "betas", "eps", "weight_decay", "amsgrad" },
  defaults = { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 1e-2, amsgrad = false, maximize = false },
  check = check_common,
  init = adam_init,
  update = adam_update(true),
})

--- optim.RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0,
--- momentum=0, centered=false, {maximize=false}).
define("RMSprop", {
  doc = "RMSprop, optionally centered and with momentum.",
  positional = { "lr", "alpha", "eps", "weight_decay", "momentum", "centered" },
  defaults = { lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false, maximize = false },
  check = function(g, err)
    check_common(g, err)
    need(g.momentum >= 0, err, "Invalid momentum value: %s", tostring(g.momentum))
    need(g.alpha >= 0, err, "Invalid alpha value: %s", tostring(g.alpha))
  end,
  init = function(p, st, group)
    st.step = 0
    st.square_avg = zeros(p)
    if group.momentum > 0 then st.momentum_buffer = zeros(p) end
    if group.centered then st.grad_avg = zeros(p) end
  end,
  update = function(group, p, grad, st)
    st.step = st.step + 1
    grad = decayed(group, p, grad)
    local alpha = group.alpha
    st.square_avg:mul_(alpha):addcmul_(grad, grad, { value = 1 - alpha })
    local avg
    if group.centered then
      st.grad_avg:mul_(alpha):add_(grad, { alpha = 1 - alpha })
      avg = ember.addcmul(st.square_avg, st.grad_avg, st.grad_avg, { value = -1 }):sqrt()
    else
      avg = st.square_avg:sqrt()
    end
    avg:add_(group.eps)
    if group.momentum > 0 then
      st.momentum_buffer:mul_(group.momentum):addcdiv_(grad, avg)
      p:add_(st.momentum_buffer, { alpha = -group.lr })
    else
      p:addcdiv_(grad, avg, { value = -group.lr })
    end
  end,
})

--- optim.Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0,
--- initial_accumulator_value=0, eps=1e-10, {maximize=false}).
define("Adagrad", {
  doc = "Adagrad with learning-rate decay.",
  positional = { "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps" },
  defaults = { lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10,
    maximize = false },
  check = function(g, err)
    check_common(g, err)
    need(g.lr_decay >= 0, err, "Invalid lr_decay value: %s", tostring(g.lr_decay))
    need(g.initial_accumulator_value >= 0, err, "Invalid initial_accumulator_value value: %s",
      tostring(g.initial_accumulator_value))
  end,
  init = function(p, st, group)
    st.step = 0
    st.sum = ember.full_like(p, group.initial_accumulator_value)
  end,
  update = function(group, p, grad, st)
    st.step = st.step + 1
    grad = decayed(group, p, grad)
    local clr = group.lr / (1 + (st.step - 1) * group.lr_decay)
    st.sum:addcmul_(grad, grad, { value = 1 })
    local std = st.sum:sqrt():add_(group.eps)
    p:addcdiv_(grad, std, { value = -clr })
  end,
})

--- optim.Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, {maximize=false}).
define("Adadelta", {
  doc = "Adadelta.",
  positional = { "lr", "rho", "eps", "weight_decay" },
  defaults = { lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false },
  check = function(g, err)
    check_common(g, err)
    need(g.rho >= 0 and g.rho <= 1, err, "Invalid rho value: %s", tostring(g.rho))
  end,
  init = function(p, st)
    st.step = 0
    st.square_avg = zeros(p)
    st.acc_delta = zeros(p)
  end,
  update = function(group, p, grad, st)
    st.step = st.step + 1
    grad = decayed(group, p, grad)
    local rho, eps = group.rho, group.eps
    st.square_avg:mul_(rho):addcmul_(grad, grad, { value = 1 - rho })
    local std = ember.add(st.square_avg, eps):sqrt()
    local delta = ember.add(st.acc_delta, eps):sqrt():div_(std):mul_(grad)
    st.acc_delta:mul_(rho):addcmul_(delta, delta, { value = 1 - rho })
    p:add_(delta, { alpha = -group.lr })
  end,
})

--- optim.Adamax(params, lr=2e-3, betas={0.9, 0.999}, eps=1e-8,
--- weight_decay=0, {maximize=false}): Adam over the infinity norm.
define("Adamax", {
  doc = "Adamax: Adam over the infinity norm.",
  positional = { "lr", "betas", "eps", "weight_decay" },
  defaults = { lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, maximize = false },
  check = check_common,
  init = function(p, st)
    st.step = 0
    st.exp_avg = zeros(p)
    st.exp_inf = zeros(p)
  end,
  update = function(group, p, grad, st)
    st.step = st.step + 1
    grad = decayed(group, p, grad)
    local beta1, beta2 = group.betas[1], group.betas[2]
    st.exp_avg:mul_(beta1):add_(grad, { alpha = 1 - beta1 })
    st.exp_inf:mul_(beta2)
    ember.maximum(st.exp_inf, grad:abs():add_(group.eps), { out = st.exp_inf })
    local clr = group.lr / (1 - beta1 ^ st.step)
    p:addcdiv_(st.exp_avg, st.exp_inf, { value = -clr })
  end,
})

--- optim.NAdam(params, lr=2e-3, betas={0.9, 0.999}, eps=1e-8,
--- weight_decay=0, momentum_decay=4e-3, {maximize=false}): Adam with
--- Nesterov momentum (mu_product kept as a number, in double).
define("NAdam", {
  doc = "NAdam: Adam with Nesterov momentum (PyTorch 1.13 numerics).",
  positional = { "lr", "betas", "eps", "weight_decay", "momentum_decay" },
  defaults = { lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3,
    maximize = false },
  check = function(g, err)
    check_common(g, err)
    need(g.momentum_decay >= 0, err, "Invalid momentum_decay value: %s", tostring(g.momentum_decay))
  end,
  init = function(p, st)
    st.step = 0
    st.mu_product = 1.0
    st.exp_avg = zeros(p)
    st.exp_avg_sq = zeros(p)
  end,
  update = function(group, p, grad, st)
    st.step = st.step + 1
    local step = st.step
    local beta1, beta2 = group.betas[1], group.betas[2]
    local bias_correction2 = 1 - beta2 ^ step
    grad = decayed(group, p, grad)
    local mu = beta1 * (1 - 0.5 * 0.96 ^ (step * group.momentum_decay))
    local mu_next = beta1 * (1 - 0.5 * 0.96 ^ ((step + 1) * group.momentum_decay))
    st.mu_product = st.mu_product * mu
    -- PyTorch 1.13 multiplies by mu twice here (mu_product * mu * mu_next;
    -- 2.0 changed it to mu_product * mu_next); ember follows 1.13.
    local mu_product_next = st.mu_product * mu * mu_next
    st.exp_avg:mul_(beta1):add_(grad, { alpha = 1 - beta1 })
    st.exp_avg_sq:mul_(beta2):addcmul_(grad, grad, { value = 1 - beta2 })
    local denom = ember.div(st.exp_avg_sq, bias_correction2):sqrt():add_(group.eps)
    p:addcdiv_(grad, denom, { value = -group.lr * (1 - mu) / (1 - st.mu_product) })
    p:addcdiv_(st.exp_avg, denom, { value = -group.lr * mu_next / (1 - mu_product_next) })
  end,
})

--- optim.RAdam(params, lr=1e-3, betas={0.9, 0.999}, eps=1e-8,
--- weight_decay=0, {maximize=false}): rectified Adam.
define("RAdam", {
  doc = "RAdam: rectified Adam.",
  positional = { "lr", "betas", "eps", "weight_decay" },
  defaults = { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, maximize = false },
  check = check_common,
  init = function(p, st)
    st.step = 0
    st.exp_avg = zeros(p)
    st.exp_avg_sq = zeros(p)
  end,
  update = function(group, p, grad, st)
    st.step = st.step + 1
    local step = st.step
    local beta1, beta2 = group.betas[1], group.betas[2]
    local bias_correction1 = 1 - beta1 ^ step
    local bias_correction2 = 1 - beta2 ^ step
    grad = decayed(group, p, grad)
    st.exp_avg:mul_(beta1):add_(grad, { alpha = 1 - beta1 })
    st.exp_avg_sq:mul_(beta2):addcmul_(grad, grad, { value = 1 - beta2 })
    local bias_corrected_exp_avg = st.exp_avg / bias_correction1
    local rho_inf = 2 / (1 - beta2) - 1
    local rho_t = rho_inf - 2 * step * (beta2 ^ step) / bias_correction2
    if rho_t > 5 then
      local rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
      local adaptive_lr = ember.div(math.sqrt(bias_correction2), st.exp_avg_sq:sqrt():add_(group.eps))
      p:add_(bias_corrected_exp_avg * group.lr * adaptive_lr * rect, { alpha = -1.0 })
    else
      p:add_(bias_corrected_exp_avg * group.lr, { alpha = -1.0 })
    end
  end,
})

-- ---- LBFGS ----

local function cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds)
  local xmin_bound, xmax_bound
  if bounds then xmin_bound, xmax_bound = bounds[1], bounds[2]
  elseif x1 <= x2 then xmin_bound, xmax_bound = x1, x2
  else xmin_bound, xmax_bound = x2, x1 end
  local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
  local d2_square = d1 ^ 2 - g1 * g2
  if d2_square >= 0 then
    local d2 = math.sqrt(d2_square)
    local min_pos
    if x1 <= x2 then
      min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else
      min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    end
    return math.min(math.max(min_pos, xmin_bound), xmax_bound)
  end
  return (xmin_bound + xmax_bound) / 2
end

local function dot(a, b)
  return a:dot(b):item()
end

local function absmax(t)
  return t:abs():max():item()
end

-- PyTorch's _strong_wolfe (Nocedal & Wright, algorithms 3.5 and 3.6):
-- returns f_new, g_new, t, evaluations. obj(x, t, d) -> loss, flat grad.
local function strong_wolfe(obj, x, t, d, f, g, gtd)
  local c1, c2, tolerance_change, max_ls = 1e-4, 0.9, 1e-9, 25
  local d_norm = absmax(d)
  g = g:clone()
  local f_new, g_new = obj(x, t, d)
  local ls_func_evals = 1
  local gtd_new = dot(g_new, d)
  local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
  local done = false
  local ls_iter = 0
  local bracket, bracket_f, bracket_g, bracket_gtd
  while ls_iter < max_ls do
    if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev) then
      bracket, bracket_f = { t_prev, t }, { f_prev, f_new }
      bracket_g, bracket_gtd = { g_prev, g_new:clone() }, { gtd_prev, gtd_new }
      break
    end
    if math.abs(gtd_new) <= -c2 * gtd then
      bracket, bracket_f, bracket_g = { t }, { f_new }, { g_new }
      done = true
      break
    end
    if gtd_new >= 0 then
      bracket, bracket_f = { t_prev, t }, { f_prev, f_new }
      bracket_g, bracket_gtd = { g_prev, g_new:clone() }, { gtd_prev, gtd_new }
      break
    end
    local min_step = t + 0.01 * (t - t_prev)
    local max_step = t * 10
    local tmp = t
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, { min_step, max_step })
    t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new:clone(), gtd_new
    f_new, g_new = obj(x, t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
  end
  if ls_iter == max_ls then
    bracket, bracket_f, bracket_g, bracket_gtd = { 0, t }, { f, f_new }, { g, g_new }, { gtd, gtd_new }
  end
  local insuf_progress = false
  local low, high = 1, 2
  if #bracket == 2 and bracket_f[1] > bracket_f[2] then low, high = 2, 1 end
  while not done and ls_iter < max_ls do
    if math.abs(bracket[2] - bracket[1]) * d_norm < tolerance_change then break end
    t = cubic_interpolate(bracket[1], bracket_f[1], bracket_gtd[1], bracket[2], bracket_f[2], bracket_gtd[2])
    local bmax, bmin = math.max(bracket[1], bracket[2]), math.min(bracket[1], bracket[2])
    local eps = 0.1 * (bmax - bmin)
    if math.min(bmax - t, t - bmin) < eps then
      if insuf_progress or t >= bmax or t <= bmin then
        if math.abs(t - bmax) < math.abs(t - bmin) then t = bmax - eps else t = bmin + eps end
        insuf_progress = false
      else
        insuf_progress = true
      end
    else
      insuf_progress = false
    end
    f_new, g_new = obj(x, t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
    if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low] then
      bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new:clone(), gtd_new
      if bracket_f[1] <= bracket_f[2] then low, high = 1, 2 else low, high = 2, 1 end
    else
      if math.abs(gtd_new) <= -c2 * gtd then
        done = true
      elseif gtd_new * (bracket[high] - bracket[low]) >= 0 then
        bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
        bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
      end
      bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new:clone(), gtd_new
    end
  end
  return bracket_f[low], bracket_g[low], bracket[low], ls_func_evals
end

--- optim.LBFGS(params, lr=1, max_iter=20, max_eval=max_iter*5/4,
--- tolerance_grad=1e-7, tolerance_change=1e-9, history_size=100,
--- line_search_fn=nil | "strong_wolfe"): step(closure) is required; one
--- parameter group only. Scalars of the algorithm are Lua numbers (double).
local LBFGS = define("LBFGS", {
  doc = "L-BFGS; step(closure) re-evaluates the model; one parameter group; line_search_fn nil or \"strong_wolfe\".",
  positional = { "lr", "max_iter", "max_eval", "tolerance_grad", "tolerance_change", "history_size",
    "line_search_fn" },
  unset = { max_eval = true, line_search_fn = true },
  defaults = { lr = 1, max_iter = 20, max_eval = false, tolerance_grad = 1e-7, tolerance_change = 1e-9,
    history_size = 100, line_search_fn = false },
  check = function(g, err)
    check_common(g, err)
    need(math.type(g.max_iter) == "integer" and g.max_iter > 0, err, "Invalid max_iter value: %s", tostring(g.max_iter))
    need(g.line_search_fn == false or g.line_search_fn == "strong_wolfe", err,
      "only 'strong_wolfe' is supported as line_search_fn, got %s", tostring(g.line_search_fn))
    if g.max_eval == false then g.max_eval = g.max_iter * 5 // 4 end
  end,
})

function LBFGS:add_param_group(group)
  if #self.param_groups > 0 then
    error("LBFGS doesn't support per-parameter options (parameter groups)", 2)
  end
  return Optimizer.add_param_group(self, group)
end

function LBFGS:_params()
  return self.param_groups[1].params
end

function LBFGS:_gather_flat_grad()
  local views = {}
  for i, p in ipairs(self:_params()) do
    local g = p.grad
    views[i] = g and g:reshape(-1) or ember.zeros(p:numel(), { dtype = p.dtype })
  end
  return ember.cat(views, 1)
end

function LBFGS:_add_grad(step_size, update)
  local offset = 1
  for _, p in ipairs(self:_params()) do
    local n = p:numel()
    p:add_(update:narrow(1, offset, n):reshape(p.shape), { alpha = step_size })
    offset = offset + n
  end
end

local function call_closure(closure)
  local loss = ember.enable_grad(closure)
  return is_tensor(loss) and loss:item() or loss, loss
end

--- opt:step(closure) -> the first loss closure returned.
function LBFGS:step(closure)
  if type(closure) ~= "function" then
    error("LBFGS:step: closure: function expected (LBFGS re-evaluates the model), got " .. type(closure), 2)
  end
  local g <close> = ember.no_grad()
  local group = self.param_groups[1]
  local lr, max_iter, max_eval = group.lr, group.max_iter, group.max_eval
  local tolerance_grad, tolerance_change = group.tolerance_grad, group.tolerance_change
  local history_size = group.history_size
  local p1 = self:_params()[1]
  local state = self.state[p1]
  if not state then
    state = { func_evals = 0, n_iter = 0 }
    self.state[p1] = state
  end
  local loss, orig_loss = call_closure(closure)
  local current_evals = 1
  state.func_evals = state.func_evals + 1
  local flat_grad = self:_gather_flat_grad()
  local opt_cond = absmax(flat_grad) <= tolerance_grad
  if opt_cond then return orig_loss end
  local d, t = state.d, state.t
  local old_dirs, old_stps, ro, H_diag = state.old_dirs, state.old_stps, state.ro, state.H_diag
  local prev_flat_grad, prev_loss = state.prev_flat_grad, state.prev_loss
  local n_iter = 0
  while n_iter < max_iter do
    n_iter = n_iter + 1
    state.n_iter = state.n_iter + 1
    if state.n_iter == 1 then
      d = -flat_grad
      old_dirs, old_stps, ro, H_diag = {}, {}, {}, 1
    else
      local y = flat_grad - prev_flat_grad
      local s = d * t
      local ys = dot(y, s)
      if ys > 1e-10 then
        if #old_dirs == history_size then
          table.remove(old_dirs, 1)
          table.remove(old_stps, 1)
          table.remove(ro, 1)
        end
        old_dirs[#old_dirs + 1] = y
        old_stps[#old_stps + 1] = s
        ro[#ro + 1] = 1 / ys
        H_diag = ys / dot(y, y)
      end
      local num_old = #old_dirs
      local al = {}
      local q = -flat_grad
      for i = num_old, 1, -1 do
        al[i] = dot(old_stps[i], q) * ro[i]
        q:add_(old_dirs[i], { alpha = -al[i] })
      end
      local r = q * H_diag
      d = r
      for i = 1, num_old do
        local be_i = dot(old_dirs[i], r) * ro[i]
        r:add_(old_stps[i], { alpha = al[i] - be_i })
      end
    end
    if prev_flat_grad == nil then prev_flat_grad = flat_grad:clone()
    else prev_flat_grad:copy_(flat_grad) end
    prev_loss = loss
    if state.n_iter == 1 then
      t = math.min(1, 1 / flat_grad:abs():sum():item()) * lr
    else
      t = lr
    end
    local gtd = dot(flat_grad, d)
    if gtd > -tolerance_change then break end
    local ls_func_evals = 0
    if group.line_search_fn == "strong_wolfe" then
      local x_init = {}
      for i, p in ipairs(self:_params()) do x_init[i] = p:clone() end
      local function obj(x, step, dir)
        self:_add_grad(step, dir)
        local l = call_closure(closure)
        local fg = self:_gather_flat_grad()
        for i, p in ipairs(self:_params()) do p:copy_(x[i]) end
        return l, fg
      end
      loss, flat_grad, t, ls_func_evals = strong_wolfe(obj, x_init, t, d, loss, flat_grad, gtd)
      self:_add_grad(t, d)
      opt_cond = absmax(flat_grad) <= tolerance_grad
    else
      self:_add_grad(t, d)
      if n_iter ~= max_iter then
        loss = call_closure(closure)
        flat_grad = self:_gather_flat_grad()
        opt_cond = absmax(flat_grad) <= tolerance_grad
        ls_func_evals = 1
      end
    end
    current_evals = current_evals + ls_func_evals
    state.func_evals = state.func_evals + ls_func_evals
    if n_iter == max_iter then break end
    if current_evals >= max_eval then break end
    if opt_cond then break end
    if absmax(d * t) <= tolerance_change then break end
    if math.abs(loss - prev_loss) < tolerance_change then break end
  end
  state.d, state.t = d, t
  state.old_dirs, state.old_stps, state.ro, state.H_diag = old_dirs, old_stps, ro, H_diag
  state.prev_flat_grad, state.prev_loss = prev_flat_grad, prev_loss
  return orig_loss
end

-- ---- lr_scheduler ----
--
-- As PyTorch 1.13's: a scheduler sets each group's lr at construction
-- (its first step, epoch 0) and at every step(); get_lr is the recursive
-- ("chainable") form used by step(), _get_closed_form_lr the one used by
-- step(epoch). Epochs count from 0 as in PyTorch (they count steps, not
-- positions).

local S = {}
optim.lr_scheduler = S
S.__doc = [[
ember.optim.lr_scheduler (PyTorch's torch.optim.lr_scheduler):
  StepLR(opt, step_size, gamma=0.1)      MultiStepLR(opt, milestones, gamma=0.1)
  ExponentialLR(opt, gamma)              LinearLR(opt, start_factor=1/3, end_factor=1, total_iters=5)
  ConstantLR(opt, factor=1/3, total_iters=5)
  CosineAnnealingLR(opt, T_max, eta_min=0)
  CosineAnnealingWarmRestarts(opt, T_0, T_mult=1, eta_min=0)
  OneCycleLR(opt, max_lr, total_steps | {epochs=, steps_per_epoch=}, pct_start=0.3, ...)
  LambdaLR(opt, lr_lambda)               SequentialLR(opt, schedulers, milestones)
  ReduceLROnPlateau(opt, mode="min", factor=0.1, patience=10, ...): step(metric)
  Each also takes last_epoch (options table); sched:step(), sched:get_last_lr(),
  sched:state_dict(), sched:load_state_dict(sd).]]

local LRScheduler = { __name = "LRScheduler" }
LRScheduler.__index = LRScheduler
S.LRScheduler = LRScheduler

-- A scheduler class: cls(optimizer, ...) parses the arguments after the
-- optimizer by spec (as the optimizers do) and calls cls._init(self, optimizer, args).
local function scheduler(name, spec, parent)
  local cls = { __name = name, _spec = spec }
  cls.__index = cls
  cls.__doc = "optim.lr_scheduler." .. signature(name, "optimizer", spec) .. "\n  " .. spec.doc ..
    "\n  help(optim.lr_scheduler) for the API."
  setmetatable(cls, {
    __index = parent or LRScheduler,
    __call = function(c, optimizer, ...)
      if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
        error(name .. ": optimizer: an optimizer expected, got " .. type(optimizer), 2)
      end
      local args = parse_args(name, spec, ...)
      for k, v in pairs(args) do
        if v == REQUIRED then error(string.format("%s: missing required argument '%s'", name, k), 2) end
      end
      local self = setmetatable({}, c)
      local ok, err = pcall(c._init, self, optimizer, args)
      if not ok then error(err, 2) end
      return self
    end,
  })
  S[name] = cls
  return cls
end

local function group_lrs(opt)
  local r = {}
  for i, g in ipairs(opt.param_groups) do r[i] = g.lr end
  return r
end

-- The base constructor (PyTorch's _LRScheduler.__init__), run last by
-- every subclass's _init.
function LRScheduler:_setup(optimizer, last_epoch)
  self.optimizer = optimizer
  last_epoch = last_epoch or -1
  for i, g in ipairs(optimizer.param_groups) do
    if last_epoch == -1 then
      if g.initial_lr == nil then g.initial_lr = g.lr end
    elseif g.initial_lr == nil then
      error(string.format("%s: param 'initial_lr' is not specified in param_groups[%d] when resuming an optimizer",
        self.__name, i))
    end
  end
  self.base_lrs = {}
  for i, g in ipairs(optimizer.param_groups) do self.base_lrs[i] = g.initial_lr end
  self.last_epoch = last_epoch
  self:_initial_step()
end

function LRScheduler:_initial_step()
  self._step_count = 0
  self:step()
end

--- sched:step([epoch]): advances one epoch (or jumps to epoch, with the
--- closed form where the scheduler has one) and sets the groups' lr.
function LRScheduler:step(epoch)
  self._step_count = self._step_count + 1
  local values
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    values = self:get_lr()
  else
    self.last_epoch = epoch
    values = self._get_closed_form_lr and self:_get_closed_form_lr() or self:get_lr()
  end
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = values[i] end
  self._last_lr = group_lrs(self.optimizer)
end

--- sched:get_last_lr() -> list: the lr of each group after the last step.
function LRScheduler:get_last_lr()
  return { unpack(self._last_lr) }
end

--- sched:state_dict() -> table: the scheduler's fields but the optimizer
--- (and functions, which cannot be saved).
function LRScheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and type(v) ~= "function" then sd[k] = deep_copy(v) end
  end
  return sd
end

function LRScheduler:load_state_dict(sd)
  if type(sd) ~= "table" then error("load_state_dict: state_dict: table expected, got " .. type(sd), 2) end
  for k, v in pairs(sd) do self[k] = deep_copy(v) end
end

local function per_group(name, what, opt, v)
  if type(v) == "table" then
    if #v ~= #opt.param_groups then
      error(string.format("%s: expected %d values for %s, got %d", name, #opt.param_groups, what, #v))
    end
    return { unpack(v) }
  end
  local r = {}
  for i = 1, #opt.param_groups do r[i] = v end
  return r
end

-- A scheduler's positional names: list, then last_epoch (as PyTorch's).
local function with_epoch(list)
  local r = { unpack(list) }
  r[#r + 1] = "last_epoch"
  return r
end

--- LambdaLR(opt, lr_lambda [, last_epoch=-1]): lr = initial_lr * lr_lambda(epoch)
--- (one function, or a list of one per group).
local LambdaLR = scheduler("LambdaLR", {
  doc = "lr = initial_lr * lr_lambda(epoch) (one function or one per group).",
  positional = with_epoch({ "lr_lambda" }),
  defaults = { lr_lambda = REQUIRED, last_epoch = -1 } })
function LambdaLR:_init(opt, a)
  local fns = a.lr_lambda
  if type(fns) == "table" and not (getmetatable(fns) or {}).__call then
    if #fns ~= #opt.param_groups then
      error(string.format("LambdaLR: expected %d lr_lambdas, but got %d", #opt.param_groups, #fns))
    end
  else
    fns = per_group("LambdaLR", "lr_lambda", opt, fns)
  end
  self.lr_lambdas = fns
  self:_setup(opt, a.last_epoch)
end
function LambdaLR:get_lr()
  local r = {}
  for i, base in ipairs(self.base_lrs) do r[i] = base * self.lr_lambdas[i](self.last_epoch) end
  return r
end
function LambdaLR:state_dict()
  local sd = LRScheduler.state_dict(self)
  sd.lr_lambdas = nil
  return sd
end

--- StepLR(opt, step_size, gamma=0.1): lr *= gamma every step_size epochs.
local StepLR = scheduler("StepLR", {
  doc = "lr *= gamma every step_size epochs.",
  positional = with_epoch({ "step_size", "gamma" }),
  defaults = { step_size = REQUIRED, gamma = 0.1, last_epoch = -1 } })
function StepLR:_init(opt, a)
  if math.type(a.step_size) ~= "integer" or a.step_size < 1 then
    error("StepLR: step_size: positive integer expected, got " .. tostring(a.step_size))
  end
  self.step_size, self.gamma = a.step_size, a.gamma
  self:_setup(opt, a.last_epoch)
end
function StepLR:get_lr()
  local lrs = group_lrs(self.optimizer)
  if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return lrs end
  for i = 1, #lrs do lrs[i] = lrs[i] * self.gamma end
  return lrs
end
function StepLR:_get_closed_form_lr()
  local r = {}
  for i, base in ipairs(self.base_lrs) do r[i] = base * self.gamma ^ (self.last_epoch // self.step_size) end
  return r
end

--- MultiStepLR(opt, milestones, gamma=0.1): lr *= gamma at each milestone epoch.
local MultiStepLR = scheduler("MultiStepLR", {
  doc = "lr *= gamma at each milestone epoch.",
  positional = with_epoch({ "milestones", "gamma" }),
  defaults = { milestones = REQUIRED, gamma = 0.1, last_epoch = -1 } })
function MultiStepLR:_init(opt, a)
  if type(a.milestones) ~= "table" then
    error("MultiStepLR: milestones: list of integers expected, got " .. type(a.milestones))
  end
  self.milestones = { unpack(a.milestones) }
  table.sort(self.milestones)
  self.gamma = a.gamma
  self:_setup(opt, a.last_epoch)
end
function MultiStepLR:get_lr()
  local count = 0
  for _, m in ipairs(self.milestones) do if m == self.last_epoch then count = count + 1 end end
  local lrs = group_lrs(self.optimizer)
  if count == 0 then return lrs end
  for i = 1, #lrs do lrs[i] = lrs[i] * self.gamma ^ count end
  return lrs
end
function MultiStepLR:_get_closed_form_lr()
  local passed = 0
  for _, m in ipairs(self.milestones) do if m <= self.last_epoch then passed = passed + 1 end end
  local r = {}
  for i, base in ipairs(self.base_lrs) do r[i] = base * self.gamma ^ passed end
  return r
end

--- ConstantLR(opt, factor=1/3, total_iters=5): lr * factor until total_iters.
local ConstantLR = scheduler("ConstantLR", {
  doc = "lr * factor until epoch total_iters.",
  positional = with_epoch({ "factor", "total_iters" }),
  defaults = { factor = 1 / 3, total_iters = 5, last_epoch = -1 } })
function ConstantLR:_init(opt, a)
  if a.factor > 1 or a.factor < 0 then
    error("ConstantLR: constant multiplicative factor expected to be between 0 and 1")
  end
  self.factor, self.total_iters = a.factor, a.total_iters
  self:_setup(opt, a.last_epoch)
end
function ConstantLR:get_lr()
  local lrs = group_lrs(self.optimizer)
  if self.last_epoch == 0 then
    for i = 1, #lrs do lrs[i] = lrs[i] * self.factor end
  elseif self.last_epoch == self.total_iters then
    for i = 1, #lrs do lrs[i] = lrs[i] * (1 / self.factor) end
  end
  return lrs
end
function ConstantLR:_get_closed_form_lr()
  local r = {}
  local on = self.last_epoch >= self.total_iters and 1 or 0
  for i, base in ipairs(self.base_lrs) do r[i] = base * (self.factor + on * (1 - self.factor)) end
  return r
end

--- LinearLR(opt, start_factor=1/3, end_factor=1, total_iters=5): the
--- factor of initial_lr goes linearly from start_factor to end_factor.
local LinearLR = scheduler("LinearLR", {
  doc = "The factor of initial_lr goes linearly from start_factor to end_factor over total_iters epochs.",
  positional = with_epoch({ "start_factor", "end_factor", "total_iters" }),
  defaults = { start_factor = 1 / 3, end_factor = 1.0, total_iters = 5, last_epoch = -1 } })
function LinearLR:_init(opt, a)
  if a.start_factor > 1 or a.start_factor <= 0 then
    error("LinearLR: starting multiplicative factor expected to be greater than 0 and less or equal to 1")
  end
  if a.end_factor > 1 or a.end_factor < 0 then
    error("LinearLR: ending multiplicative factor expected to be between 0 and 1")
  end
  self.start_factor, self.end_factor, self.total_iters = a.start_factor, a.end_factor, a.total_iters
  self:_setup(opt, a.last_epoch)
end
function LinearLR:get_lr()
  local lrs = group_lrs(self.optimizer)
  local e, sf, ef, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
  if e == 0 then
    for i = 1, #lrs do lrs[i] = lrs[i] * sf end
  elseif e <= n then
    for i = 1, #lrs do lrs[i] = lrs[i] * (1 + (ef - sf) / (n * sf + (e - 1) * (ef - sf))) end
  end
  return lrs
end
function LinearLR:_get_closed_form_lr()
  local r = {}
  local sf, ef, n = self.start_factor, self.end_factor, self.total_iters
  for i, base in ipairs(self.base_lrs) do
    r[i] = base * (sf + (ef - sf) * math.min(n, self.last_epoch) / n)
  end
  return r
end

--- ExponentialLR(opt, gamma): lr *= gamma every epoch.
local ExponentialLR = scheduler("ExponentialLR", {
  doc = "lr *= gamma every epoch.",
  positional = with_epoch({ "gamma" }),
  defaults = { gamma = REQUIRED, last_epoch = -1 } })
function ExponentialLR:_init(opt, a)
  self.gamma = a.gamma
  self:_setup(opt, a.last_epoch)
end
function ExponentialLR:get_lr()
  local lrs = group_lrs(self.optimizer)
  if self.last_epoch == 0 then return lrs end
  for i = 1, #lrs do lrs[i] = lrs[i] * self.gamma end
  return lrs
end
function ExponentialLR:_get_closed_form_lr()
  local r = {}
  for i, base in ipairs(self.base_lrs) do r[i] = base * self.gamma ^ self.last_epoch end
  return r
end

--- CosineAnnealingLR(opt, T_max, eta_min=0): lr follows
--- eta_min + (initial_lr - eta_min)(1 + cos(pi epoch / T_max))/2 (recursively,
--- as PyTorch, so outside changes to lr carry on).
local CosineAnnealingLR = scheduler("CosineAnnealingLR", {
  doc = "Cosine annealing from initial_lr to eta_min over T_max epochs (and back).",
  positional = with_epoch({ "T_max", "eta_min" }),
  defaults = { T_max = REQUIRED, eta_min = 0, last_epoch = -1 } })
function CosineAnnealingLR:_init(opt, a)
  self.T_max, self.eta_min = a.T_max, a.eta_min
  self:_setup(opt, a.last_epoch)
end
function CosineAnnealingLR:get_lr()
  local e, T, emin = self.last_epoch, self.T_max, self.eta_min
  local lrs = group_lrs(self.optimizer)
  if e == 0 then return lrs end
  local r = {}
  if self._step_count == 1 and e > 0 then
    for i, base in ipairs(self.base_lrs) do r[i] = emin + (base - emin) * (1 + math.cos(e * math.pi / T)) / 2 end
  elseif (e - 1 - T) % (2 * T) == 0 then
    for i, base in ipairs(self.base_lrs) do r[i] = lrs[i] + (base - emin) * (1 - math.cos(math.pi / T)) / 2 end
  else
    for i = 1, #lrs do
      r[i] = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (lrs[i] - emin) + emin
    end
  end
  return r
end
function CosineAnnealingLR:_get_closed_form_lr()
  local r = {}
  for i, base in ipairs(self.base_lrs) do
    r[i] = self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
  end
  return r
end

--- CosineAnnealingWarmRestarts(opt, T_0, T_mult=1, eta_min=0): cosine
--- annealing restarted after T_0 epochs, the period growing by T_mult;
--- step(epoch) takes fractional epochs.
local CAWR = scheduler("CosineAnnealingWarmRestarts", {
  doc = "Cosine annealing restarted every T_i epochs, T_i growing by T_mult; step(epoch) takes fractions.",
  positional = with_epoch({ "T_0", "T_mult", "eta_min" }),
  defaults = { T_0 = REQUIRED, T_mult = 1, eta_min = 0, last_epoch = -1 } })
function CAWR:_init(opt, a)
  if math.type(a.T_0) ~= "integer" or a.T_0 <= 0 then
    error("CosineAnnealingWarmRestarts: expected positive integer T_0, but got " .. tostring(a.T_0))
  end
  if math.type(a.T_mult) ~= "integer" or a.T_mult < 1 then
    error("CosineAnnealingWarmRestarts: expected integer T_mult >= 1, but got " .. tostring(a.T_mult))
  end
  self.T_0, self.T_i, self.T_mult, self.eta_min = a.T_0, a.T_0, a.T_mult, a.eta_min
  self.T_cur = a.last_epoch
  self:_setup(opt, a.last_epoch)
end
function CAWR:get_lr()
  local r = {}
  for i, base in ipairs(self.base_lrs) do
    r[i] = self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
  end
  return r
end
function CAWR:step(epoch)
  self._step_count = (self._step_count or 0) + 1
  if epoch == nil and self.last_epoch < 0 then epoch = 0 end
  if epoch == nil then
    epoch = self.last_epoch + 1
    self.T_cur = self.T_cur + 1
    if self.T_cur >= self.T_i then
      self.T_cur = self.T_cur - self.T_i
      self.T_i = self.T_i * self.T_mult
    end
  else
    if epoch < 0 then error("CosineAnnealingWarmRestarts: expected non-negative epoch, but got " .. epoch, 2) end
    if epoch >= self.T_0 then
      if self.T_mult == 1 then
        self.T_cur = epoch % self.T_0
      else
        local n = math.floor(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
        self.T_cur = epoch - self.T_0 * (self.T_mult ^ n - 1) / (self.T_mult - 1)
        self.T_i = self.T_0 * self.T_mult ^ n
      end
    else
      self.T_i = self.T_0
      self.T_cur = epoch
    end
  end
  self.last_epoch = math.floor(epoch)
  local values = self:get_lr()
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = values[i] end
  self._last_lr = group_lrs(self.optimizer)
end

--- OneCycleLR(opt, max_lr, total_steps=nil, epochs=nil, steps_per_epoch=nil,
--- pct_start=0.3, anneal_strategy="cos", cycle_momentum=true,
--- base_momentum=0.85, max_momentum=0.95, div_factor=25,
--- final_div_factor=1e4, three_phase=false): the 1cycle policy (lr up to
--- max_lr then down, momentum or beta1 the other way); step once per batch.
local OneCycleLR = scheduler("OneCycleLR", { doc = "The 1cycle policy: lr up to max_lr then down, momentum (or beta1) the other way; step once per batch.",
  positional = with_epoch({ "max_lr", "total_steps", "epochs", "steps_per_epoch", "pct_start", "anneal_strategy",
    "cycle_momentum", "base_momentum", "max_momentum", "div_factor", "final_div_factor", "three_phase" }),
  unset = { total_steps = true, epochs = true, steps_per_epoch = true },
  defaults = { max_lr = REQUIRED, total_steps = false, epochs = false, steps_per_epoch = false, pct_start = 0.3,
    anneal_strategy = "cos", cycle_momentum = true, base_momentum = 0.85, max_momentum = 0.95, div_factor = 25.0,
    final_div_factor = 1e4, three_phase = false, last_epoch = -1 } })
function OneCycleLR:_init(opt, a)
  local function posint(v, what)
    if math.type(v) ~= "integer" or v <= 0 then
      error(string.format("OneCycleLR: expected positive integer %s, but got %s", what, tostring(v)))
    end
  end
  if a.total_steps then
    posint(a.total_steps, "total_steps")
    self.total_steps = a.total_steps
  elseif a.epochs or a.steps_per_epoch then
    posint(a.epochs, "epochs")
    posint(a.steps_per_epoch, "steps_per_epoch")
    self.total_steps = a.epochs * a.steps_per_epoch
  else
    error("OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch)")
  end
  local pct, n = a.pct_start, self.total_steps
  if type(pct) ~= "number" or pct < 0 or pct > 1 then
    error("OneCycleLR: expected float between 0 and 1 pct_start, but got " .. tostring(pct))
  end
  if a.three_phase then
    self._schedule_phases = {
      { end_step = pct * n - 1, start_lr = "initial_lr", end_lr = "max_lr", start_momentum = "max_momentum", end_momentum = "base_momentum" },
      { end_step = 2 * pct * n - 2, start_lr = "max_lr", end_lr = "initial_lr", start_momentum = "base_momentum", end_momentum = "max_momentum" },
      { end_step = n - 1, start_lr = "initial_lr", end_lr = "min_lr", start_momentum = "max_momentum", end_momentum = "max_momentum" },
    }
  else
    self._schedule_phases = {
      { end_step = pct * n - 1, start_lr = "initial_lr", end_lr = "max_lr", start_momentum = "max_momentum", end_momentum = "base_momentum" },
      { end_step = n - 1, start_lr = "max_lr", end_lr = "min_lr", start_momentum = "base_momentum", end_momentum = "max_momentum" },
    }
  end
  if a.anneal_strategy ~= "cos" and a.anneal_strategy ~= "linear" then
    error("OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got " .. tostring(a.anneal_strategy))
  end
  self.anneal_strategy = a.anneal_strategy
  local max_lrs = per_group("OneCycleLR", "max_lr", opt, a.max_lr)
  if a.last_epoch == -1 then
    for i, g in ipairs(opt.param_groups) do
      g.initial_lr = max_lrs[i] / a.div_factor
      g.max_lr = max_lrs[i]
      g.min_lr = g.initial_lr / a.final_div_factor
    end
  end
  self.cycle_momentum = a.cycle_momentum
  if self.cycle_momentum then
    local d = opt.defaults or {}
    if d.momentum == nil and d.betas == nil then
      error("OneCycleLR: optimizer must support momentum with `cycle_momentum` option enabled")
    end
    self.use_beta1 = d.betas ~= nil
    local maxm = per_group("OneCycleLR", "max_momentum", opt, a.max_momentum)
    local basem = per_group("OneCycleLR", "base_momentum", opt, a.base_momentum)
    if a.last_epoch == -1 then
      for i, g in ipairs(opt.param_groups) do
        if self.use_beta1 then g.betas = { maxm[i], g.betas[2] } else g.momentum = maxm[i] end
        g.max_momentum, g.base_momentum = maxm[i], basem[i]
      end
    end
  end
  self:_setup(opt, a.last_epoch)
end
function OneCycleLR:_anneal(start, stop, pct)
  if self.anneal_strategy == "cos" then
    return stop + (start - stop) / 2 * (math.cos(math.pi * pct) + 1)
  end
  return (stop - start) * pct + start
end
function OneCycleLR:get_lr()
  local step_num = self.last_epoch
  if step_num > self.total_steps then
    error(string.format("OneCycleLR: tried to step %d times. The specified number of total steps is %d",
      step_num + 1, self.total_steps), 3)
  end
  local lrs = {}
  local phases = self._schedule_phases
  for gi, g in ipairs(self.optimizer.param_groups) do
    local start_step, lr, mom = 0, nil, nil
    for i, ph in ipairs(phases) do
      if step_num <= ph.end_step or i == #phases then
        local pct = (step_num - start_step) / (ph.end_step - start_step)
        lr = self:_anneal(g[ph.start_lr], g[ph.end_lr], pct)
        if self.cycle_momentum then mom = self:_anneal(g[ph.start_momentum], g[ph.end_momentum], pct) end
        break
      end
      start_step = ph.end_step
    end
    lrs[gi] = lr
    if self.cycle_momentum then
      if self.use_beta1 then g.betas = { mom, g.betas[2] } else g.momentum = mom end
    end
  end
  return lrs
end

--- SequentialLR(opt, schedulers, milestones): runs schedulers[1] until
--- milestones[1], then schedulers[2] (restarted at epoch 0), and so on.
local SequentialLR = scheduler("SequentialLR", {
  doc = "Runs schedulers[1] until milestones[1], then schedulers[2] from epoch 0, ...",
  positional = with_epoch({ "schedulers", "milestones" }),
  defaults = { schedulers = REQUIRED, milestones = REQUIRED, last_epoch = -1 } })
function SequentialLR:_init(opt, a)
  local scheds, ms = a.schedulers, a.milestones
  for i, s in ipairs(scheds) do
    if s.optimizer ~= opt then
      error(string.format("SequentialLR: expects all schedulers to belong to the same optimizer, but got " ..
        "scheduler %d with a different one", i))
    end
  end
  if #ms ~= #scheds - 1 then
    error(string.format("SequentialLR: expects number of schedulers provided to be one more than the number of " ..
      "milestone points, but got number of schedulers %d and the number of milestones to be equal to %d",
      #scheds, #ms))
  end
  self._schedulers, self._milestones = scheds, { unpack(ms) }
  self.last_epoch = a.last_epoch + 1
  self.optimizer = opt
  for _, g in ipairs(opt.param_groups) do g.lr = g.initial_lr end
  for _, s in ipairs(scheds) do s.last_epoch = s.last_epoch - 1 end
  scheds[1]:_initial_step()
  self._last_lr = scheds[1]:get_last_lr()
end
function SequentialLR:step()
  self.last_epoch = self.last_epoch + 1
  local idx = 0
  for _, m in ipairs(self._milestones) do if m <= self.last_epoch then idx = idx + 1 end end
  local s = self._schedulers[idx + 1]
  if idx > 0 and self._milestones[idx] == self.last_epoch then s:step(0) else s:step() end
  self._last_lr = s:get_last_lr()
end
function SequentialLR:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and k ~= "_schedulers" then sd[k] = deep_copy(v) end
  end
  sd._schedulers = {}
  for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
  return sd
end
function SequentialLR:load_state_dict(sd)
  for k, v in pairs(sd) do
    if k ~= "_schedulers" then self[k] = deep_copy(v) end
  end
  for i, s in ipairs(sd._schedulers or {}) do self._schedulers[i]:load_state_dict(s) end
end

--- ReduceLROnPlateau(opt, mode="min", factor=0.1, patience=10,
--- threshold=1e-4, threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
--- step(metric) multiplies lr by factor after patience epochs without
--- improvement of metric (a number or 0-dim tensor).
local Plateau = scheduler("ReduceLROnPlateau", { doc = "step(metric): lr *= factor after patience epochs without improvement.",
  positional = { "mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps" },
  defaults = { mode = "min", factor = 0.1, patience = 10, threshold = 1e-4, threshold_mode = "rel", cooldown = 0,
    min_lr = 0, eps = 1e-8 } })
function Plateau:_init(opt, a)
  if a.factor >= 1 then error("ReduceLROnPlateau: factor should be < 1.0") end
  if a.mode ~= "min" and a.mode ~= "max" then error("ReduceLROnPlateau: mode " .. tostring(a.mode) .. " is unknown!") end
  if a.threshold_mode ~= "rel" and a.threshold_mode ~= "abs" then
    error("ReduceLROnPlateau: threshold mode " .. tostring(a.threshold_mode) .. " is unknown!")
  end
  self.optimizer = opt
  self.factor, self.patience, self.cooldown, self.eps = a.factor, a.patience, a.cooldown, a.eps
  self.min_lrs = per_group("ReduceLROnPlateau", "min_lr", opt, a.min_lr)
  self.mode, self.threshold, self.threshold_mode = a.mode, a.threshold, a.threshold_mode
  self.mode_worse = a.mode == "min" and math.huge or -math.huge
  self.last_epoch = 0
  self.best = self.mode_worse
  self.cooldown_counter = 0
  self.num_bad_epochs = 0
  self._last_lr = group_lrs(opt)
end
function Plateau:is_better(a, best)
  if self.mode == "min" and self.threshold_mode == "rel" then return a < best * (1 - self.threshold) end
  if self.mode == "min" then return a < best - self.threshold end
  if self.threshold_mode == "rel" then return a > best * (self.threshold + 1) end
  return a > best + self.threshold
end
function Plateau:step(metrics, epoch)
  local current = is_tensor(metrics) and metrics:item() or metrics
  if type(current) ~= "number" then
    error("ReduceLROnPlateau:step: metrics: number or 0-dim tensor expected, got " .. type(metrics), 2)
  end
  self.last_epoch = epoch or self.last_epoch + 1
  if self:is_better(current, self.best) then
    self.best = current
    self.num_bad_epochs = 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > self.patience then
    for i, g in ipairs(self.optimizer.param_groups) do
      local old = g.lr
      local new = math.max(old * self.factor, self.min_lrs[i])
      if old - new > self.eps then g.lr = new end
    end
    self.cooldown_counter = self.cooldown
    self.num_bad_epochs = 0
  end
  self._last_lr = group_lrs(self.optimizer)
end

return optim
