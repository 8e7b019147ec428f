-- nn.lua -- the Lua half of ember.nn (PyTorch's torch.nn): Parameter,
-- Module with subclassing, containers, the simple layers, activation and
-- loss modules over ember.nn.functional, nn.init and nn.utils.
--
-- ember.nn is the generated namespace table that holds `functional`; this
-- chunk adds to it (Note [Stdlib modules] in runtime/lua/lua_module.c) and
-- returns it. Pure Lua over the bindings.
--
-- Note [Module storage]
-- A module instance is a table whose only raw fields are its bookkeeping
-- tables (_parameters, _buffers, _modules, _attrs, _kind, _order, hooks).
-- Every user assignment `self.name = v` therefore reaches __newindex, which
-- files v by what it is: an nn.Parameter into _parameters, a Module into
-- _modules, a tensor under a buffer's name into _buffers, anything else into
-- _attrs; _order keeps each kind's names in definition order, which is the
-- order of parameters(), state_dict(), the printed tree. __index reads the
-- same tables, then the class chain. Ember tensors are userdata and cannot
-- carry a flag, so "is a Parameter" is membership of a weak-keyed set.
local ember = require "ember"
local nn = ember.nn
local F = nn.functional
local unpack, pack = table.unpack, table.pack
local is_tensor = ember.is_tensor

nn.__doc = [[
ember.nn: neural-network building blocks (PyTorch's torch.nn).
  nn.Module:extend("Name")     a new module class (__init, forward)
  nn.Parameter(t)              a tensor a module registers as a parameter
  nn.Sequential, ModuleList, ModuleDict, Identity, Flatten, Unflatten, Linear,
  Bilinear, Conv*, ConvTranspose*, pools, BatchNorm*, LayerNorm, GroupNorm,
  RMSNorm, Dropout*, Embedding, EmbeddingBag, RNN, LSTM, GRU (and cells),
  MultiheadAttention, Transformer* layers,
  activations (ReLU, Sigmoid, Tanh, Softmax, LogSoftmax, ... as F provides them)
  and losses as modules; nn.init (initialisers), nn.utils (gradient clipping),
  nn.functional (the ops). help(nn.Module) for the module API.]]

local DTYPES = { float16 = true, bfloat16 = true, float32 = true, float64 = true, int8 = true,
  uint8 = true, int32 = true, int64 = true, bool = true }
local FLOATING = { float16 = true, bfloat16 = true, float32 = true, float64 = true }

-- ---- Parameter ----

local param_set = setmetatable({}, { __mode = "k" })

--- nn.Parameter(data [, requires_grad=true]) -> tensor: a leaf sharing
--- data's storage that modules register as a parameter when assigned.
function nn.Parameter(data, requires_grad)
  if data == nil then data = ember.empty(0) end
  if not is_tensor(data) then
    error("nn.Parameter: data: tensor expected, got " .. type(data), 2)
  end
  local p = data:detach()
  if requires_grad ~= false then p:requires_grad_(true) end
  param_set[p] = true
  return p
end

--- nn.is_parameter(v) -> bool: whether v was made by nn.Parameter.
function nn.is_parameter(v)
  return param_set[v] == true
end

-- ---- Module ----

local Module = { __name = "Module" }
nn.Module = Module

-- Metamethods a subclass inherits (Lua does not look metamethods up through
-- __index, so extend copies them).
local METAMETHODS = { "__newindex", "__call", "__tostring", "__len", "__eq", "__concat", "__close" }

local function is_module(v)
  return type(v) == "table" and rawget(v, "_kind") ~= nil
end
nn.is_module = is_module

local function class_name(m)
  return getmetatable(m).__name
end

-- The __index of a class's instances (Note [Module storage]).
local function make_index(cls)
  return function(self, k)
    local v = rawget(self, "_parameters")[k]
    if v ~= nil then return v end
    v = rawget(self, "_buffers")[k]
    if v ~= nil then return v end
    v = rawget(self, "_modules")[k]
    if v ~= nil then return v end
    v = rawget(self, "_attrs")[k]
    if v ~= nil then return v end
    if math.type(k) == "integer" then
      local get = cls._getitem
      if get then return get(self, k) end
    end
    return cls[k]
  end
end

local function construct(cls, ...)
  local self = setmetatable({
    _parameters = {}, _buffers = {}, _modules = {}, _attrs = { training = true },
    _kind = {}, _order = { _parameters = {}, _buffers = {}, _modules = {} },
    _non_persistent = {}, _pre_hooks = {}, _hooks = {},
  }, cls)
  cls.__init(self, ...)
  return self
end

local function class_meta(parent)
  return {
    __index = parent,
    __call = construct,
    __tostring = function(c) return "<nn module class " .. rawget(c, "__name") .. ">" end,
  }
end

Module.__index = make_index(Module)
setmetatable(Module, class_meta(nil))

--- Module:extend(name) -> class: a subclass named name. Define
--- cls:__init(...) (the constructor; storage exists before it runs, so
--- calling the parent's __init is needed only to reuse what it sets up)
--- and cls:forward(...); cls(...) makes an instance, and calling an
--- instance runs its forward hooks and forward. cls.super is the parent.
--- The methods may also come as a table: Module:extend("Net", {
--- __init = function(self, n) ... end, forward = function(self, x) ... end }).
function Module:extend(name, methods)
  if type(name) ~= "string" then
    error("Module:extend: name: string expected, got " .. type(name), 2)
  end
  if methods ~= nil and type(methods) ~= "table" then
    error("Module:extend: methods: table expected, got " .. type(methods), 2)
  end
  local cls = {}
  for _, mm in ipairs(METAMETHODS) do cls[mm] = self[mm] end
  cls.__name = name
  cls.super = self
  cls.__index = make_index(cls)
  for k, v in pairs(methods or {}) do cls[k] = v end
  return setmetatable(cls, class_meta(self))
end

function Module:__init() end

function Module:forward()
  error(string.format('Module [%s] is missing the required "forward" function', class_name(self)), 2)
end

-- Checks a new member's name: a non-empty string without "."; not a field
-- of the class (a method would be hidden); for register_*/add_module (not
-- assignment, which replaces a plain field as in PyTorch) not a plain field.
local function check_name(self, name, what, assignment)
  if type(name) ~= "string" then
    error(string.format("%s: name: string expected, got %s", what, type(name)), 3)
  end
  if name == "" or name:find(".", 1, true) then
    error(string.format("%s: name: %q must be non-empty and contain no \".\"", what, name), 3)
  end
  local kind = rawget(self, "_kind")[name]
  if kind == nil and ((not assignment and rawget(self, "_attrs")[name] ~= nil) or getmetatable(self)[name] ~= nil) then
    error(string.format("%s: attribute '%s' already exists", what, name), 3)
  end
end

-- Files value under name as kind (Note [Module storage]), taking the name
-- out of any other kind.
local function set_kind(self, kind, name, value)
  local kinds = rawget(self, "_kind")
  local old = kinds[name]
  if old ~= kind then
    if old then
      rawget(self, old)[name] = nil
      local order = rawget(self, "_order")[old]
      for i = 1, #order do
        if order[i] == name then table.remove(order, i) break end
      end
    end
    kinds[name] = kind
    local order = rawget(self, "_order")[kind]
    order[#order + 1] = name
  end
  rawget(self, "_attrs")[name] = nil
  rawget(self, kind)[name] = value
end

--- m:register_parameter(name, p): adds parameter p (an nn.Parameter, or
--- nil to reserve the name) under name; m.name = p does the same.
function Module:register_parameter(name, p)
  check_name(self, name, "register_parameter")
  if p ~= nil and not nn.is_parameter(p) then
    error(string.format("register_parameter: cannot assign %s object to parameter '%s' (nn.Parameter or nil required)",
      is_tensor(p) and "a plain tensor" or type(p), name), 2)
  end
  set_kind(self, "_parameters", name, p)
end

--- m:register_buffer(name, t [, persistent=true]): adds tensor t (or nil)
--- as a buffer: moved by to(), saved in state_dict() when persistent.
function Module:register_buffer(name, t, persistent)
  check_name(self, name, "register_buffer")
  if t ~= nil and not is_tensor(t) then
    error(string.format("register_buffer: cannot assign %s object to buffer '%s' (tensor or nil required)",
      type(t), name), 2)
  end
  set_kind(self, "_buffers", name, t)
  rawget(self, "_non_persistent")[name] = persistent == false or nil
end

--- m:add_module(name, module): adds a child module (or nil) under name;
--- m.name = module does the same. Also m:register_module.
function Module:add_module(name, m)
  check_name(self, name, "add_module")
  if m ~= nil and not is_module(m) then
    error(string.format("add_module: %s is not a Module subclass", type(m)), 2)
  end
  set_kind(self, "_modules", name, m)
end
Module.register_module = Module.add_module

function Module:__newindex(k, v)
  if type(k) == "number" then
    -- seq[i] = m in a list container replaces child i (1-based, negative
    -- from the end); other modules file the number as its string
    if getmetatable(self)._getitem then
      local n = #rawget(self, "_order")._modules
      if not is_module(v) then
        error(string.format("cannot assign %s as child %s (Module expected)", type(v), tostring(k)), 2)
      end
      if math.type(k) ~= "integer" or k == 0 or k > n or k < -n then
        error(string.format("index %s is out of range (1..%d); append adds a module", tostring(k), n), 2)
      end
      if k < 0 then k = n + 1 + k end
    end
    k = tostring(k)
  end
  local kind = rawget(self, "_kind")[k]
  if nn.is_parameter(v) then
    if kind ~= "_parameters" then check_name(self, k, "assignment", true) end
    set_kind(self, "_parameters", k, v)
  elseif is_module(v) then
    if kind ~= "_modules" then check_name(self, k, "assignment", true) end
    set_kind(self, "_modules", k, v)
  elseif kind == "_parameters" then
    if v ~= nil then
      error(string.format("cannot assign %s as parameter '%s' (nn.Parameter or nil expected)",
        is_tensor(v) and "a plain tensor" or type(v), k), 2)
    end
    rawget(self, "_parameters")[k] = nil
  elseif kind == "_buffers" then
    if v ~= nil and not is_tensor(v) then
      error(string.format("cannot assign %s as buffer '%s' (tensor or nil expected)", type(v), k), 2)
    end
    rawget(self, "_buffers")[k] = v
  elseif kind == "_modules" then
    if v ~= nil then
      error(string.format("cannot assign %s as child module '%s' (Module or nil expected)", type(v), k), 2)
    end
    rawget(self, "_modules")[k] = nil
  else
    rawget(self, "_attrs")[k] = v
  end
end

-- ---- hooks ----

local Handle = {}
Handle.__index = Handle
Handle.__name = "ember.nn.RemovableHandle"

--- handle:remove(): unregisters the hook (a second call does nothing).
function Handle:remove()
  local list = self.list
  for i = 1, #list do
    if list[i] == self.entry then table.remove(list, i) return end
  end
end

local function add_hook(list, fn, opts, what)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    error(what .. ": hook: function expected, got " .. type(fn), 3)
  end
  local entry = { fn = fn }
  if opts and opts.prepend then table.insert(list, 1, entry) else list[#list + 1] = entry end
  return setmetatable({ list = list, entry = entry }, Handle)
end

--- m:register_forward_pre_hook(fn [, {prepend=false}]) -> handle:
--- fn(module, args) runs before forward; args is the packed argument list
--- ({n=...}); returning a table (a list of new arguments) or a tensor (the
--- one new argument) replaces them, nil keeps them.
function Module:register_forward_pre_hook(fn, opts)
  return add_hook(rawget(self, "_pre_hooks"), fn, opts, "register_forward_pre_hook")
end

--- m:register_forward_hook(fn [, {prepend=false}]) -> handle:
--- fn(module, args, ...) runs after forward with forward's results as ...;
--- returning anything non-nil replaces the results.
function Module:register_forward_hook(fn, opts)
  return add_hook(rawget(self, "_hooks"), fn, opts, "register_forward_hook")
end

function Module:__call(...)
  local pre, post = rawget(self, "_pre_hooks"), rawget(self, "_hooks")
  if #pre == 0 and #post == 0 then return self:forward(...) end
  local args = pack(...)
  for _, h in ipairs({ unpack(pre) }) do
    local r = h.fn(self, args)
    if r ~= nil then
      if type(r) == "table" and not is_module(r) then args = pack(unpack(r, 1, r.n or #r))
      else args = pack(r) end
    end
  end
  local out = pack(self:forward(unpack(args, 1, args.n)))
  for _, h in ipairs({ unpack(post) }) do
    local r = pack(h.fn(self, args, unpack(out, 1, out.n)))
    if r.n > 0 and r[1] ~= nil then out = r end
  end
  return unpack(out, 1, out.n)
end

-- ---- traversal ----

local function list_iter(list)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

local function join(prefix, name)
  return prefix == "" and name or prefix .. "." .. name
end

-- {name, module} pairs of m and its descendants, each module once.
local function walk_modules(m, prefix, out, memo)
  if memo[m] then return out end
  memo[m] = true
  out[#out + 1] = { prefix, m }
  local mods = rawget(m, "_modules")
  for _, name in ipairs(rawget(m, "_order")._modules) do
    local c = mods[name]
    if c then walk_modules(c, join(prefix, name), out, memo) end
  end
  return out
end

-- {name, tensor} pairs of kind ("_parameters" or "_buffers") of m (and its
-- descendants when recurse), each tensor once.
local function named_members(m, kind, prefix, recurse)
  local mods = recurse and walk_modules(m, prefix or "", {}, {}) or { { prefix or "", m } }
  local out, memo = {}, {}
  for _, e in ipairs(mods) do
    local tbl = rawget(e[2], kind)
    for _, name in ipairs(rawget(e[2], "_order")[kind]) do
      local t = tbl[name]
      if t ~= nil and not memo[t] then
        memo[t] = true
        out[#out + 1] = { join(e[1], name), t }
      end
    end
  end
  return out
end

local function values(pairs_list)
  local out = {}
  for i, e in ipairs(pairs_list) do out[i] = e[2] end
  return out
end

--- m:named_parameters([{prefix="", recurse=true}]) -> iterator of
--- (dotted name, parameter) in definition order, each parameter once.
function Module:named_parameters(opts)
  opts = opts or {}
  return list_iter(named_members(self, "_parameters", opts.prefix, opts.recurse ~= false))
end

--- m:parameters([recurse=true]) -> list of the parameters (each once).
function Module:parameters(recurse)
  return values(named_members(self, "_parameters", "", recurse ~= false))
end

--- m:named_buffers([{prefix="", recurse=true}]) -> iterator of (name, buffer).
function Module:named_buffers(opts)
  opts = opts or {}
  return list_iter(named_members(self, "_buffers", opts.prefix, opts.recurse ~= false))
end

--- m:buffers([recurse=true]) -> list of the buffers.
function Module:buffers(recurse)
  return values(named_members(self, "_buffers", "", recurse ~= false))
end

local function named_children(m)
  local out, memo = {}, {}
  local mods = rawget(m, "_modules")
  for _, name in ipairs(rawget(m, "_order")._modules) do
    local c = mods[name]
    if c and not memo[c] then
      memo[c] = true
      out[#out + 1] = { name, c }
    end
  end
  return out
end

--- m:named_children() -> iterator of (name, child module).
function Module:named_children()
  return list_iter(named_children(self))
end

--- m:children() -> list of the direct child modules.
function Module:children()
  return values(named_children(self))
end

--- m:named_modules([{prefix=""}]) -> iterator of (dotted name, module)
--- over m (name "") and its descendants, each once.
function Module:named_modules(opts)
  return list_iter(walk_modules(self, (opts or {}).prefix or "", {}, {}))
end

--- m:get_submodule("a.b") -> the descendant at that dotted path ("" is m);
--- an error names the first missing part.
function Module:get_submodule(target)
  if type(target) ~= "string" then
    error("get_submodule: target: string expected, got " .. type(target), 2)
  end
  local m, path = self, ""
  for part in target:gmatch("[^.]+") do
    local c = rawget(m, "_modules")[part]
    if c == nil then
      error(string.format("get_submodule: %s has no attribute '%s'", path == "" and class_name(m) or path, part), 2)
    end
    m, path = c, join(path, part)
  end
  return m
end

--- m:get_parameter("a.b.weight") -> the parameter at that dotted path.
function Module:get_parameter(target)
  if type(target) ~= "string" then
    error("get_parameter: target: string expected, got " .. type(target), 2)
  end
  local prefix, name = target:match("^(.*)%.([^.]*)$")
  if not prefix then prefix, name = "", target end
  local ok, m = pcall(self.get_submodule, self, prefix)
  if not ok then error((m:gsub("^get_submodule", "get_parameter")), 2) end
  local p = rawget(m, "_parameters")[name]
  if p == nil then
    error(string.format("get_parameter: %s has no parameter '%s'", prefix == "" and class_name(m) or prefix, name), 2)
  end
  return p
end

--- m:modules() -> list of m and all its descendants.
function Module:modules()
  return values(walk_modules(self, "", {}, {}))
end

-- ---- modes and gradients ----

--- m:train([mode=true]) -> m: sets .training on m and its descendants.
function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then
    error("train: mode: boolean expected, got " .. type(mode), 2)
  end
  for _, m in ipairs(self:modules()) do rawget(m, "_attrs").training = mode end
  return self
end

--- m:eval() -> m: train(false).
function Module:eval()
  return self:train(false)
end

--- m:requires_grad_([on=true]) -> m: sets requires_grad of every parameter.
function Module:requires_grad_(on)
  if on == nil then on = true end
  for _, p in ipairs(self:parameters()) do p:requires_grad_(on) end
  return self
end

--- m:zero_grad([{set_to_none=false}]): zeroes the parameters' gradients
--- in place, or drops them (p.grad = nil) with set_to_none (PyTorch 1.13's
--- default is false).
function Module:zero_grad(opts)
  local none = type(opts) == "table" and opts.set_to_none or opts == true
  local g <close> = ember.no_grad()
  for _, p in ipairs(self:parameters()) do
    if none then
      p.grad = nil
    else
      local g = p.grad
      if g then g:zero_() end
    end
  end
end

--- m:apply(fn) -> m: calls fn(module) on every descendant, children
--- first, then on m.
function Module:apply(fn)
  for _, c in ipairs(self:children()) do c:apply(fn) end
  fn(self)
  return self
end

-- Replaces every parameter and buffer t of m and its descendants by fn(t)
-- (a new Parameter with the old requires_grad when fn returns another
-- tensor). Runs without grad.
function Module:_apply(fn)
  local g <close> = ember.no_grad()
  for _, m in ipairs(self:modules()) do
    local params = rawget(m, "_parameters")
    for _, name in ipairs(rawget(m, "_order")._parameters) do
      local p = params[name]
      if p ~= nil then
        local r = fn(p)
        if not rawequal(r, p) then params[name] = nn.Parameter(r, p.requires_grad) end
      end
    end
    local bufs = rawget(m, "_buffers")
    for _, name in ipairs(rawget(m, "_order")._buffers) do
      local b = bufs[name]
      if b ~= nil then bufs[name] = fn(b) end
    end
  end
  return self
end

--- m:to(dtype | device | tensor | {dtype=, device=}) -> m: converts the
--- floating parameters and buffers to dtype and moves all to device.
--- Parameters that change become new Parameter objects (ember tensors
--- cannot change dtype in place): build optimizers after to().
function Module:to(...)
  local dtype, device
  for i = 1, select("#", ...) do
    local a = select(i, ...)
    if type(a) == "string" and DTYPES[a] then dtype = a
    elseif is_tensor(a) then dtype, device = a.dtype, a.device
    elseif type(a) == "table" then dtype, device = a.dtype or dtype, a.device or device
    elseif a ~= nil then device = a end
  end
  if dtype and not FLOATING[dtype] then
    error("to: nn.Module.to only accepts floating point dtypes, but got desired dtype=" .. dtype, 2)
  end
  return self:_apply(function(t)
    local r = t
    if dtype and FLOATING[r.dtype] then r = r:to(dtype) end
    if device then r = r:to_device(device) end
    return r
  end)
end

function Module:float() return self:to("float32") end
function Module:double() return self:to("float64") end
function Module:half() return self:to("float16") end
function Module:bfloat16() return self:to("bfloat16") end
function Module:cpu() return self:to("cpu") end

-- ---- state_dict ----

-- {name, tensor} of the saved entries: parameters and persistent buffers of
-- m and, recursively, its children (shared modules appear under each name).
local function state_entries(m, prefix, out)
  local params = rawget(m, "_parameters")
  for _, name in ipairs(rawget(m, "_order")._parameters) do
    local p = params[name]
    if p ~= nil then out[#out + 1] = { prefix .. name, p } end
  end
  local bufs, np = rawget(m, "_buffers"), rawget(m, "_non_persistent")
  for _, name in ipairs(rawget(m, "_order")._buffers) do
    local b = bufs[name]
    if b ~= nil and not np[name] then out[#out + 1] = { prefix .. name, b } end
  end
  local mods = rawget(m, "_modules")
  for _, name in ipairs(rawget(m, "_order")._modules) do
    local c = mods[name]
    if c then state_entries(c, prefix .. name .. ".", out) end
  end
  return out
end

--- m:state_dict([{prefix="", keep_vars=false}]) -> table: dotted name ->
--- tensor for every parameter and persistent buffer (detached, sharing
--- storage, unless keep_vars).
function Module:state_dict(opts)
  opts = opts or {}
  local sd = {}
  for _, e in ipairs(state_entries(self, opts.prefix or "", {})) do
    sd[e[1]] = opts.keep_vars and e[2] or e[2]:detach()
  end
  return sd
end

local function shape_str(t)
  return "{" .. table.concat(t.shape, ", ") .. "}"
end

--- m:load_state_dict(sd [, {strict=true}]) -> {missing_keys=, unexpected_keys=}:
--- copies sd's tensors into the parameters and buffers of the same names.
--- Everything is checked before anything is copied: a shape mismatch is an
--- error naming the key and both shapes; with strict, missing and
--- unexpected keys are an error listing them.
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then
    error("load_state_dict: state_dict: table expected, got " .. type(sd), 2)
  end
  local strict = not (type(opts) == "table" and opts.strict == false)
  local entries = state_entries(self, "", {})
  local known, missing, unexpected, errors = {}, {}, {}, {}
  for _, e in ipairs(entries) do
    local name, t = e[1], e[2]
    known[name] = true
    local v = sd[name]
    if v == nil then
      missing[#missing + 1] = name
    elseif not is_tensor(v) then
      errors[#errors + 1] = string.format("expected a tensor for key %s, got %s", name, type(v))
    elseif #v.shape ~= #t.shape or shape_str(v) ~= shape_str(t) then
      errors[#errors + 1] = string.format(
        "size mismatch for %s: copying a param with shape %s from checkpoint, the shape in current model is %s",
        name, shape_str(v), shape_str(t))
    end
  end
  for k in pairs(sd) do
    if not known[k] then unexpected[#unexpected + 1] = tostring(k) end
  end
  table.sort(unexpected)
  if strict then
    if #unexpected > 0 then
      table.insert(errors, 1, "unexpected key(s) in state_dict: " .. table.concat(unexpected, ", "))
    end
    if #missing > 0 then
      table.insert(errors, 1, "missing key(s) in state_dict: " .. table.concat(missing, ", "))
    end
  end
  if #errors > 0 then
    error(string.format("load_state_dict: error(s) in loading state_dict for %s:\n\t%s",
      class_name(self), table.concat(errors, "\n\t")), 2)
  end
  local g <close> = ember.no_grad()
  for _, e in ipairs(entries) do
    local v = sd[e[1]]
    if v ~= nil then e[2]:copy_(v) end
  end
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- ---- printing ----

--- m:extra_repr() -> string: the text inside Name(...) of the printed
--- tree (override in a class; "" by default).
function Module:extra_repr()
  return ""
end

local function module_repr(m)
  local extra = m:extra_repr()
  local lines = {}
  if extra ~= "" then
    for line in (extra .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
  end
  local nextra = #lines
  local mods = rawget(m, "_modules")
  for _, name in ipairs(rawget(m, "_order")._modules) do
    local c = mods[name]
    if c then
      lines[#lines + 1] = "(" .. name .. "): " .. module_repr(c):gsub("\n", "\n  ")
    end
  end
  local s = class_name(m) .. "("
  if #lines > 0 then
    if nextra == 1 and #lines == 1 then s = s .. lines[1]
    else s = s .. "\n  " .. table.concat(lines, "\n  ") .. "\n" end
  end
  return s .. ")"
end

local function thousands(n)
  local s = tostring(n)
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end

--- tostring(m): PyTorch's module tree, and for a module with parameters a
--- last line with their count ("parameters: N (M trainable)").
function Module:__tostring()
  local s = module_repr(self)
  local total, trainable = 0, 0
  for _, p in ipairs(self:parameters()) do
    local n = p:numel()
    total = total + n
    if p.requires_grad then trainable = trainable + n end
  end
  if total > 0 then
    s = s .. "\nparameters: " .. thousands(total) .. " (" .. thousands(trainable) .. " trainable)"
  end
  return s
end

Module.__doc = [[
nn.Module: the base class of layers and models (PyTorch's torch.nn.Module).
  local Net = nn.Module:extend("Net")
  function Net:__init(n) self.fc = nn.Linear(n, 1); self.scale = nn.Parameter(ember.ones(1)) end
  function Net:forward(x) return self.fc(x) * self.scale end
  local net = Net(4); local y = net(ember.randn(8, 4))
  (or nn.Module:extend("Net", { __init = function(self, n) ... end, forward = ... }))
Assigning an nn.Parameter, a Module or (to a registered buffer name) a tensor
registers it in definition order; other values are plain fields.
  parameters() buffers() children() modules()           lists
  named_parameters() named_buffers() named_children() named_modules()
                                    iterators of (dotted name, value)
  get_submodule("a.b") get_parameter("a.b.weight")
  register_parameter register_buffer(name, t, persistent) add_module
  train([mode]) eval() .training  requires_grad_(b)  zero_grad{set_to_none=}
  state_dict() load_state_dict(sd, {strict=true})  apply(fn)
  to(dtype | device) float() double()  extra_repr()
  register_forward_pre_hook(fn) register_forward_hook(fn) -> handle:remove()
Sequential and ModuleList children are named "1", "2", ... (1-based).]]

-- ---- containers ----

local function normalize_index(n, i, what)
  if math.type(i) ~= "integer" then
    error(string.format("%s: index: integer expected, got %s", what, type(i)), 3)
  end
  local j = i < 0 and n + 1 + i or i
  if j < 1 or j > n then
    error(string.format("%s: index %d is out of range (1..%d)", what, i, n), 3)
  end
  return j
end

local function child_list(m)
  local out, mods = {}, rawget(m, "_modules")
  for i, name in ipairs(rawget(m, "_order")._modules) do out[i] = mods[name] end
  return out
end

local function list_len(self)
  return #rawget(self, "_order")._modules
end

local function list_getitem(self, i)
  local order = rawget(self, "_order")._modules
  if i < 1 - #order or i > #order or i == 0 then return nil end
  return rawget(self, "_modules")[order[i < 0 and #order + 1 + i or i]]
end

-- Renames a list container's children "1".."n" after an insertion.
local function renumber(self, mods_list)
  local kinds, order = rawget(self, "_kind"), rawget(self, "_order")
  for name in pairs(rawget(self, "_modules")) do kinds[name] = nil end
  order._modules = {}
  local store = {}
  rawset(self, "_modules", store)
  for i, m in ipairs(mods_list) do
    local name = tostring(i)
    kinds[name] = "_modules"
    order._modules[i] = name
    store[name] = m
  end
end

--- nn.Sequential(m1, m2, ...) or nn.Sequential{ {"name", m}, ... }:
--- calls its modules in order, each on the previous one's results.
local Sequential = Module:extend("Sequential")
nn.Sequential = Sequential
Sequential.__doc = [[
nn.Sequential(m1, m2, ...) or nn.Sequential{ {"name", m}, ... }: calls its modules in
order, each on the previous one's results. seq[i] (1-based, negative from the end), #seq,
ipairs(seq), seq:append(m); positional children are named "1", "2", ...]]
Sequential._getitem = list_getitem
Sequential.__len = list_len

function Sequential:__init(...)
  local n = select("#", ...)
  local first = ...
  if n == 1 and type(first) == "table" and not is_module(first) then
    for k in pairs(first) do
      if math.type(k) ~= "integer" or k < 1 or k > #first then
        error(string.format("Sequential: key %s: named modules go as a list of {name, module} pairs "
          .. "(a Lua table's keys have no order), e.g. nn.Sequential{ {\"fc\", nn.Linear(2, 3)} }", tostring(k)), 3)
      end
    end
    for i, e in ipairs(first) do
      if type(e) ~= "table" or type(e[1]) ~= "string" or not is_module(e[2]) then
        error(string.format("Sequential: entry %d: {name, module} expected", i), 3)
      end
      self:add_module(e[1], e[2])
    end
  else
    for i = 1, n do
      local m = select(i, ...)
      if not is_module(m) then
        error(string.format("Sequential: argument %d: Module expected, got %s", i, type(m)), 3)
      end
      self:add_module(tostring(i), m)
    end
  end
end

function Sequential:forward(...)
  local mods = child_list(self)
  if select("#", ...) == 1 then
    local x = ...
    for i = 1, #mods do x = mods[i](x) end
    return x
  end
  local r = pack(...)
  for i = 1, #mods do r = pack(mods[i](unpack(r, 1, r.n))) end
  return unpack(r, 1, r.n)
end

--- seq:append(m) -> seq: adds m at the end (named by its position).
function Sequential:append(m)
  if not is_module(m) then error("append: module: Module expected, got " .. type(m), 2) end
  self:add_module(tostring(#self + 1), m)
  return self
end

--- nn.ModuleList([modules]): a list of modules, indexed 1-based
--- (negative from the end), with #, ipairs, append, extend, insert.
local ModuleList = Module:extend("ModuleList")
nn.ModuleList = ModuleList
ModuleList.__doc = [[
nn.ModuleList([modules]): a list of child modules (registered, no forward): ml[i]
(1-based, negative from the end), #ml, ipairs(ml), ml:append(m), ml:extend(list), ml:insert(i, m).]]
ModuleList._getitem = list_getitem
ModuleList.__len = list_len

function ModuleList:__init(mods)
  if mods ~= nil then self:extend(mods) end
end

function ModuleList:append(m)
  if not is_module(m) then error("append: module: Module expected, got " .. type(m), 2) end
  self:add_module(tostring(#self + 1), m)
  return self
end

function ModuleList:extend(mods)
  if type(mods) ~= "table" then error("extend: modules: list expected, got " .. type(mods), 2) end
  local list = is_module(mods) and child_list(mods) or mods
  for i, m in ipairs(list) do
    if not is_module(m) then
      error(string.format("extend: entry %d: Module expected, got %s", i, type(m)), 2)
    end
    self:add_module(tostring(#self + 1), m)
  end
  return self
end

--- ml:insert(index, m): inserts m before position index (1-based).
function ModuleList:insert(index, m)
  if not is_module(m) then error("insert: module: Module expected, got " .. type(m), 2) end
  local list = child_list(self)
  local n = #list
  if math.type(index) ~= "integer" then error("insert: index: integer expected", 2) end
  local j = index < 0 and n + 1 + index or index
  j = math.max(1, math.min(j, n + 1))
  table.insert(list, j, m)
  renumber(self, list)
end

function ModuleList:forward()
  error("ModuleList has no forward: iterate over it in the parent's forward", 2)
end

--- nn.ModuleDict([{ {"name", m}, ... } or {name = m, ...}]): modules by
--- name (a list of pairs keeps its order; a map is added in sorted key
--- order); md[name], #md, md:keys(), md:values(), md:items() (iterator).
local ModuleDict = Module:extend("ModuleDict")
nn.ModuleDict = ModuleDict
ModuleDict.__doc = [[
nn.ModuleDict([{ {"name", m}, ... } | {name = m}]): child modules by name (no forward):
md[name], #md, md:keys(), md:values(), md:items(), md:update(t), md:pop(name).]]
ModuleDict.__len = list_len

function ModuleDict:__init(mods)
  if mods ~= nil then self:update(mods) end
end

function ModuleDict:update(mods)
  if type(mods) ~= "table" then error("update: modules: table expected, got " .. type(mods), 2) end
  if #mods > 0 then
    for i, e in ipairs(mods) do
      if type(e) ~= "table" or type(e[1]) ~= "string" or not is_module(e[2]) then
        error(string.format("update: entry %d: {name, module} expected", i), 2)
      end
      self:add_module(e[1], e[2])
    end
  else
    local keys = {}
    for k in pairs(mods) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do
      if not is_module(mods[k]) then
        error(string.format("update: entry %s: Module expected, got %s", tostring(k), type(mods[k])), 2)
      end
      self:add_module(k, mods[k])
    end
  end
  return self
end

function ModuleDict:keys()
  local out = {}
  for i, e in ipairs(named_children(self)) do out[i] = e[1] end
  return out
end

function ModuleDict:values()
  return self:children()
end

function ModuleDict:items()
  return self:named_children()
end

--- md:pop(name) -> module: removes and returns the module under name.
function ModuleDict:pop(name)
  local m = rawget(self, "_modules")[name]
  if m == nil then error("pop: no module named " .. tostring(name), 2) end
  local order = rawget(self, "_order")._modules
  for i = 1, #order do
    if order[i] == name then table.remove(order, i) break end
  end
  rawget(self, "_modules")[name] = nil
  rawget(self, "_kind")[name] = nil
  return m
end

function ModuleDict:forward()
  error("ModuleDict has no forward: index it in the parent's forward", 2)
end

-- ---- simple layers ----

--- nn.Identity(...): returns its input (any constructor arguments ignored).
local Identity = Module:extend("Identity")
nn.Identity = Identity
Identity.__doc = "nn.Identity(...): returns its inputs unchanged (constructor arguments are ignored)."
function Identity:forward(...) return ... end

--- nn.Flatten([start_dim=2, end_dim=-1]): input:flatten(start_dim, end_dim)
--- (1-based dims; 2 keeps the batch dim).
local Flatten = Module:extend("Flatten")
nn.Flatten = Flatten
Flatten.__doc = "nn.Flatten([start_dim=2, end_dim=-1]): input:flatten(start_dim, end_dim); 1-based dims, 2 keeps the batch."
function Flatten:__init(start_dim, end_dim)
  self.start_dim = start_dim or 2
  self.end_dim = end_dim or -1
end
function Flatten:forward(x) return x:flatten(self.start_dim, self.end_dim) end
function Flatten:extra_repr()
  return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim)
end

--- nn.Unflatten(dim, unflattened_size): input:unflatten(dim, sizes).
local Unflatten = Module:extend("Unflatten")
nn.Unflatten = Unflatten
Unflatten.__doc = "nn.Unflatten(dim, unflattened_size): input:unflatten(dim, sizes), dim 1-based."
function Unflatten:__init(dim, sizes)
  if math.type(dim) ~= "integer" then error("Unflatten: dim: integer expected, got " .. type(dim), 3) end
  if type(sizes) ~= "table" then error("Unflatten: unflattened_size: list expected, got " .. type(sizes), 3) end
  self.dim = dim
  self.unflattened_size = { unpack(sizes) }
end
function Unflatten:forward(x) return x:unflatten(self.dim, self.unflattened_size) end
function Unflatten:extra_repr()
  return string.format("dim=%d, unflattened_size={%s}", self.dim, table.concat(self.unflattened_size, ", "))
end

local function factory(opts)
  opts = opts or {}
  return { dtype = opts.dtype, device = opts.device }
end

--- nn.Linear(in_features, out_features [, bias=true] [, {dtype=, device=}]):
--- y = x W^T + b, W {out, in} kaiming_uniform_(a=sqrt(5)), b uniform in
--- +-1/sqrt(in_features), as PyTorch initialises them.
local Linear = Module:extend("Linear")
nn.Linear = Linear
Linear.__doc = [[
nn.Linear(in_features, out_features [, bias=true] [, {dtype=, device=}]): y = x W^T + b.
weight {out, in} from kaiming_uniform_(a=sqrt(5)) and bias uniform in +-1/sqrt(in_features),
as PyTorch initialises them; reset_parameters() draws them again.]]
function Linear:__init(in_features, out_features, bias, opts)
  if type(bias) == "table" then bias, opts = nil, bias end
  for i, v in ipairs({ in_features, out_features }) do
    if math.type(v) ~= "integer" or v < 0 then
      error(string.format("Linear: %s: non-negative integer expected, got %s",
        i == 1 and "in_features" or "out_features", tostring(v)), 3)
    end
  end
  self.in_features, self.out_features = in_features, out_features
  local fk = factory(opts)
  self.weight = nn.Parameter(ember.empty(out_features, in_features, fk))
  if bias ~= false then
    self.bias = nn.Parameter(ember.empty(out_features, fk))
  else
    self:register_parameter("bias", nil)
  end
  self:reset_parameters()
end
function Linear:reset_parameters()
  nn.init.kaiming_uniform_(self.weight, math.sqrt(5))
  if self.bias ~= nil then
    local fan_in = nn.init._calculate_fan_in_and_fan_out(self.weight)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    nn.init.uniform_(self.bias, -bound, bound)
  end
end
function Linear:forward(x) return F.linear(x, self.weight, self.bias) end
function Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s", self.in_features,
    self.out_features, tostring(self.bias ~= nil))
end

if F.bilinear then
  --- nn.Bilinear(in1_features, in2_features, out_features [, bias=true]):
  --- y = x1^T A x2 + b, A and b uniform in +-1/sqrt(in1_features).
  local Bilinear = Module:extend("Bilinear")
  nn.Bilinear = Bilinear
  Bilinear.__doc = "nn.Bilinear(in1, in2, out [, bias=true]): y = x1^T A x2 + b (F.bilinear), uniform init in +-1/sqrt(in1)."
  function Bilinear:__init(in1, in2, out, bias, opts)
    if type(bias) == "table" then bias, opts = nil, bias end
    self.in1_features, self.in2_features, self.out_features = in1, in2, out
    local fk = factory(opts)
    self.weight = nn.Parameter(ember.empty(out, in1, in2, fk))
    if bias ~= false then self.bias = nn.Parameter(ember.empty(out, fk))
    else self:register_parameter("bias", nil) end
    self:reset_parameters()
  end
  function Bilinear:reset_parameters()
    local bound = 1 / math.sqrt(self.weight.shape[2])
    nn.init.uniform_(self.weight, -bound, bound)
    if self.bias ~= nil then nn.init.uniform_(self.bias, -bound, bound) end
  end
  function Bilinear:forward(x1, x2) return F.bilinear(x1, x2, self.weight, self.bias) end
  function Bilinear:extra_repr()
    return string.format("in1_features=%d, in2_features=%d, out_features=%d, bias=%s",
      self.in1_features, self.in2_features, self.out_features, tostring(self.bias ~= nil))
  end
end

-- ---- activation and loss modules ----
--
-- Note [Functional wrappers]
-- Most activation and loss modules only store their constructor arguments
-- and call one op of ember.nn.functional with them. wrap() defines such a
-- class from a spec: the functional's name, the constructor's arguments in
-- PyTorch's order with their defaults, and how forward passes them (all by
-- name in the op's trailing options table). A class whose op is missing in
-- this build (issue 9's ops land family by family) is simply not defined,
-- so `nn.GELU` is nil until F.gelu exists. An `inplace` argument is passed
-- on like the others: F.NAME(x, {inplace = true}) writes the result into x
-- through the in-place op and returns x (schema/ops/act2.yaml).

local function fmt_value(v)
  if type(v) == "string" then return v end
  if type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = tostring(x) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

-- wrap(name, fname, args, ninputs): args is a list of {arg, default};
-- forward(self, input1..input_ninputs) calls F[fname](inputs..., opts).
local function wrap(name, fname, args, ninputs)
  local fn = F[fname]
  if not fn then return end
  local cls = Module:extend(name)
  nn[name] = cls
  ninputs = ninputs or 1
  cls._spec = args
  local sig = {}
  for i, a in ipairs(args) do
    sig[i] = a[1] .. (a[2] ~= nil and "=" .. (type(a[2]) == "string" and string.format("%q", a[2]) or tostring(a[2])) or "")
  end
  cls.__doc = string.format("nn.%s(%s): forward(%s) calls F.%s with these options by name; help(\"nn.functional.%s\").",
    name, table.concat(sig, ", "), ninputs == 1 and "input" or ninputs .. " inputs", fname, fname)
  function cls:__init(...)
    local n = select("#", ...)
    local opts = n > 0 and type(select(n, ...)) == "table" and not is_tensor(select(n, ...)) and select(n, ...) or nil
    if opts then n = n - 1 end
    if n > #args then
      error(string.format("%s: %d arguments given, at most %d expected", name, n, #args), 3)
    end
    for i, a in ipairs(args) do
      local v
      if i <= n then v = select(i, ...) end
      if v == nil and opts then v = opts[a[1]] end
      if v == nil then v = a[2] end
      if is_tensor(v) then self:register_buffer(a[1], v) else self[a[1]] = v end
    end
  end
  function cls:forward(...)
    local opts = {}
    for _, a in ipairs(args) do opts[a[1]] = self[a[1]] end
    if ninputs == 1 then return fn((...), opts) end
    local inputs = pack(...)
    inputs[ninputs + 1] = opts
    return fn(unpack(inputs, 1, ninputs + 1))
  end
  function cls:extra_repr()
    local parts = {}
    for _, a in ipairs(args) do
      local v = self[a[1]]
      if v ~= nil and not (a[1] == "inplace" and v == false) then
        parts[#parts + 1] = a[1] .. "=" .. fmt_value(v)
      end
    end
    return table.concat(parts, ", ")
  end
  return cls
end
nn._wrap = wrap

-- Sigmoid and Tanh: forward(x) = op(x).
local function simple(name, op)
  local cls = Module:extend(name)
  nn[name] = cls
  cls.__doc = string.format("nn.%s(): forward(x) = %s(x) elementwise.", name, name:lower())
  function cls:forward(x) return op(x) end
end
simple("Sigmoid", F.sigmoid or ember.sigmoid)
simple("Tanh", F.tanh or ember.tanh)

-- softmax's implicit dim for nil (PyTorch's legacy _get_softmax_dim,
-- 1-based): dim 1 for 0-, 1- and 3-d inputs, else 2.
local function softmax_dim(x, dim)
  if dim ~= nil then return dim end
  local nd = #x.shape
  return (nd == 0 or nd == 1 or nd == 3) and 1 or 2
end

for _, s in ipairs({ { "Softmax", "softmax" }, { "LogSoftmax", "log_softmax" }, { "Softmin", "softmin" } }) do
  local fn = F[s[2]]
  if fn then
    local cls = Module:extend(s[1])
    nn[s[1]] = cls
    cls.__doc = string.format("nn.%s(dim): F.%s(input, dim) (1-based dim; nil picks PyTorch's legacy implicit dim).",
      s[1], s[2])
    function cls:__init(dim) self.dim = dim end
    function cls:forward(x) return fn(x, softmax_dim(x, self.dim)) end
    function cls:extra_repr() return "dim=" .. tostring(self.dim) end
  end
end

-- Activations (PyTorch's module arguments, in order, with defaults).
wrap("ReLU", "relu", { { "inplace", false } })
wrap("ReLU6", "relu6", { { "inplace", false } })
wrap("LeakyReLU", "leaky_relu", { { "negative_slope", 0.01 }, { "inplace", false } })
wrap("ELU", "elu", { { "alpha", 1.0 }, { "inplace", false } })
wrap("SELU", "selu", { { "inplace", false } })
wrap("CELU", "celu", { { "alpha", 1.0 }, { "inplace", false } })
wrap("GELU", "gelu", { { "approximate", "none" } })
wrap("SiLU", "silu", { { "inplace", false } })
wrap("Mish", "mish", { { "inplace", false } })
local RReLU = wrap("RReLU", "rrelu", { { "lower", 1 / 8 }, { "upper", 1 / 3 }, { "inplace", false } })
if RReLU then -- slopes are drawn in training mode (the module's, as PyTorch's nn.RReLU)
  function RReLU:forward(x)
    return F.rrelu(x, { lower = self.lower, upper = self.upper, training = self.training, inplace = self.inplace })
  end
end
wrap("Softplus", "softplus", { { "beta", 1 }, { "threshold", 20 } })
wrap("Softsign", "softsign", {})
wrap("Hardtanh", "hardtanh", { { "min_val", -1.0 }, { "max_val", 1.0 }, { "inplace", false } })
wrap("Hardsigmoid", "hardsigmoid", { { "inplace", false } })
wrap("Hardswish", "hardswish", { { "inplace", false } })
wrap("LogSigmoid", "logsigmoid", {})
wrap("GLU", "glu", { { "dim", -1 } })
wrap("Tanhshrink", "tanhshrink", {})
wrap("Softshrink", "softshrink", { { "lambd", 0.5 } })
wrap("Hardshrink", "hardshrink", { { "lambd", 0.5 } })
wrap("Threshold", "threshold", { { "threshold" }, { "value" }, { "inplace", false } })

if F.prelu then
  --- nn.PReLU([num_parameters=1, init=0.25]): prelu with a learnt slope.
  local PReLU = Module:extend("PReLU")
  nn.PReLU = PReLU
  PReLU.__doc = "nn.PReLU([num_parameters=1, init=0.25]): F.prelu with a learnt slope per channel (or one)."
  function PReLU:__init(num_parameters, init, opts)
    self.num_parameters = num_parameters or 1
    self.init = init or 0.25
    self.weight = nn.Parameter(ember.full({ self.num_parameters }, self.init, factory(opts)))
  end
  function PReLU:forward(x) return F.prelu(x, self.weight) end
  function PReLU:extra_repr() return "num_parameters=" .. self.num_parameters end
end

-- Losses: reduction "mean" | "sum" | "none" (PyTorch's size_average and
-- reduce are deprecated and not taken).
local R = { "reduction", "mean" }
wrap("MSELoss", "mse_loss", { R }, 2)
wrap("L1Loss", "l1_loss", { R }, 2)
wrap("SmoothL1Loss", "smooth_l1_loss", { R, { "beta", 1.0 } }, 2)
wrap("HuberLoss", "huber_loss", { R, { "delta", 1.0 } }, 2)
wrap("CrossEntropyLoss", "cross_entropy", { { "weight" }, { "ignore_index", -100 }, R,
  { "label_smoothing", 0.0 } }, 2)
wrap("NLLLoss", "nll_loss", { { "weight" }, { "ignore_index", -100 }, R }, 2)
wrap("BCELoss", "binary_cross_entropy", { { "weight" }, R }, 2)
wrap("BCEWithLogitsLoss", "binary_cross_entropy_with_logits", { { "weight" }, R, { "pos_weight" } }, 2)
wrap("KLDivLoss", "kl_div", { R, { "log_target", false } }, 2)
wrap("PoissonNLLLoss", "poisson_nll_loss", { { "log_input", true }, { "full", false }, { "eps", 1e-8 }, R }, 2)
wrap("GaussianNLLLoss", "gaussian_nll_loss", { { "full", false }, { "eps", 1e-6 }, R }, 3)
wrap("CosineEmbeddingLoss", "cosine_embedding_loss", { { "margin", 0.0 }, R }, 3)
wrap("MarginRankingLoss", "margin_ranking_loss", { { "margin", 0.0 }, R }, 3)
wrap("HingeEmbeddingLoss", "hinge_embedding_loss", { { "margin", 1.0 }, R }, 2)
wrap("MultiMarginLoss", "multi_margin_loss", { { "p", 1 }, { "margin", 1.0 }, { "weight" }, R }, 2)
wrap("TripletMarginLoss", "triplet_margin_loss", { { "margin", 1.0 }, { "p", 2.0 }, { "eps", 1e-6 },
  { "swap", false }, R }, 3)
wrap("CTCLoss", "ctc_loss", { { "blank", 1 }, R, { "zero_infinity", false } }, 4)

-- Distances.
wrap("CosineSimilarity", "cosine_similarity", { { "dim", 2 }, { "eps", 1e-8 } }, 2)
wrap("PairwiseDistance", "pairwise_distance", { { "p", 2.0 }, { "eps", 1e-6 }, { "keepdim", false } }, 2)


-- ---- nn.init ----
--
-- Each initialiser fills its tensor in place without recording grad and
-- returns it, as torch.nn.init; the random ones take {generator=} last.

local init = {}
nn.init = init
init.__doc = [[
ember.nn.init: in-place initialisers (PyTorch's torch.nn.init), each returns its tensor.
  uniform_(t, a=0, b=1) normal_(t, mean=0, std=1) trunc_normal_(t, mean=0, std=1, a=-2, b=2)
  constant_(t, v) zeros_(t) ones_(t) eye_(t) dirac_(t, groups=1)
  xavier_uniform_(t, gain=1) xavier_normal_(t, gain=1)
  kaiming_uniform_(t, a=0, mode="fan_in", nonlinearity="leaky_relu") kaiming_normal_(...)
  orthogonal_(t, gain=1)  calculate_gain(nonlinearity, param)
  _calculate_fan_in_and_fan_out(t) -> fan_in, fan_out  (dim 2 is the input dim)]]

local function no_grad_fill(name, t, fn)
  if not is_tensor(t) then
    error(string.format("%s: tensor: tensor expected, got %s", name, type(t)), 3)
  end
  local g <close> = ember.no_grad()
  fn()
  return t
end

-- t:uniform_(a, b) or t:normal_(a, b), with {generator=} when opts has one.
local function fill_random(t, method, a, b, opts)
  if opts and opts.generator then return t[method](t, a, b, { generator = opts.generator }) end
  return t[method](t, a, b)
end

--- init.calculate_gain(nonlinearity [, param]) -> number: the recommended
--- gain (linear, conv*, sigmoid: 1; tanh: 5/3; relu: sqrt(2); leaky_relu:
--- sqrt(2 / (1 + slope^2)), slope param or 0.01; selu: 3/4).
function init.calculate_gain(nonlinearity, param)
  local linear = { linear = true, conv1d = true, conv2d = true, conv3d = true,
    conv_transpose1d = true, conv_transpose2d = true, conv_transpose3d = true }
  if linear[nonlinearity] or nonlinearity == "sigmoid" then return 1 end
  if nonlinearity == "tanh" then return 5.0 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2.0) end
  if nonlinearity == "leaky_relu" then
    local slope = 0.01
    if param ~= nil then
      if type(param) ~= "number" or type(param) == "boolean" then
        error("calculate_gain: negative_slope " .. tostring(param) .. " not a valid number", 2)
      end
      slope = param
    end
    return math.sqrt(2.0 / (1 + slope ^ 2))
  end
  if nonlinearity == "selu" then return 3.0 / 4 end
  error("calculate_gain: unsupported nonlinearity " .. tostring(nonlinearity), 2)
end

--- init._calculate_fan_in_and_fan_out(t) -> fan_in, fan_out:
--- size(2) and size(1) times the product of the dims after the second.
function init._calculate_fan_in_and_fan_out(t)
  local s = t.shape
  if #s < 2 then
    error("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions", 2)
  end
  local rf = 1
  for i = 3, #s do rf = rf * s[i] end
  return s[2] * rf, s[1] * rf
end

local function correct_fan(t, mode)
  mode = type(mode) == "string" and mode:lower() or mode
  if mode ~= "fan_in" and mode ~= "fan_out" then
    error("mode " .. tostring(mode) .. " not supported, please use one of fan_in, fan_out", 3)
  end
  local fan_in, fan_out = init._calculate_fan_in_and_fan_out(t)
  return mode == "fan_in" and fan_in or fan_out
end

function init.uniform_(t, a, b, opts)
  return no_grad_fill("uniform_", t, function() fill_random(t, "uniform_", a or 0, b or 1, opts) end)
end

function init.normal_(t, mean, std, opts)
  return no_grad_fill("normal_", t, function() fill_random(t, "normal_", mean or 0, std or 1, opts) end)
end

local function norm_cdf(x)
  return (1 + ember.tensor(x / math.sqrt(2), { dtype = "float64" }):erf():item()) / 2
end

--- init.trunc_normal_(t, mean=0, std=1, a=-2, b=2): normal values
--- redrawn... as PyTorch: inverse-CDF sampling restricted to [a, b].
function init.trunc_normal_(t, mean, std, a, b, opts)
  mean, std, a, b = mean or 0, std or 1, a or -2, b or 2
  return no_grad_fill("trunc_normal_", t, function()
    local l = norm_cdf((a - mean) / std)
    local u = norm_cdf((b - mean) / std)
    fill_random(t, "uniform_", 2 * l - 1, 2 * u - 1, opts)
    t:erfinv_()
    t:mul_(std * math.sqrt(2.0))
    t:add_(mean)
    t:clamp_(a, b)
  end)
end

function init.constant_(t, val)
  if type(val) ~= "number" and type(val) ~= "boolean" then
    error("constant_: val: number expected, got " .. type(val), 2)
  end
  return no_grad_fill("constant_", t, function() t:fill_(val) end)
end

function init.zeros_(t)
  return no_grad_fill("zeros_", t, function() t:zero_() end)
end

function init.ones_(t)
  return no_grad_fill("ones_", t, function() t:fill_(1) end)
end

--- init.eye_(t): the identity matrix into a 2-d t.
function init.eye_(t)
  if is_tensor(t) and #t.shape ~= 2 then
    error("eye_: only tensors with 2 dimensions are supported, got " .. #t.shape, 2)
  end
  return no_grad_fill("eye_", t, function()
    t:copy_(ember.eye(t.shape[1], t.shape[2], { dtype = t.dtype }))
  end)
end

--- init.dirac_(t [, groups=1]): the Dirac delta into a 3-, 4- or 5-d t
--- (convolution weights that keep their input channels).
function init.dirac_(t, groups)
  groups = groups or 1
  if is_tensor(t) and (#t.shape < 3 or #t.shape > 5) then
    error("dirac_: only tensors with 3, 4, or 5 dimensions are supported, got " .. #t.shape, 2)
  end
  local s = is_tensor(t) and t.shape or {}
  if is_tensor(t) and (math.type(groups) ~= "integer" or groups < 1 or s[1] % groups ~= 0) then
    error("dirac_: dim 1 is not divisible by groups", 2)
  end
  return no_grad_fill("dirac_", t, function()
    t:zero_()
    local out_per = s[1] // groups
    local n = math.min(out_per, s[2])
    if n == 0 then return end
    local idx = {}
    for d = 1, #s do idx[d] = {} end
    for g = 0, groups - 1 do
      for k = 1, n do
        local i = #idx[1] + 1
        idx[1][i] = g * out_per + k
        idx[2][i] = k
        for d = 3, #s do idx[d][i] = (s[d] - 1) // 2 + 1 end
      end
    end
    local ts = {}
    for d = 1, #s do ts[d] = ember.tensor(idx[d], { dtype = "int64" }) end
    t:index_put_(ts, ember.tensor(1, { dtype = t.dtype }))
  end)
end

function init.xavier_uniform_(t, gain, opts)
  return no_grad_fill("xavier_uniform_", t, function()
    local fan_in, fan_out = init._calculate_fan_in_and_fan_out(t)
    local std = (gain or 1) * math.sqrt(2.0 / (fan_in + fan_out))
    local a = math.sqrt(3.0) * std
    fill_random(t, "uniform_", -a, a, opts)
  end)
end

function init.xavier_normal_(t, gain, opts)
  return no_grad_fill("xavier_normal_", t, function()
    local fan_in, fan_out = init._calculate_fan_in_and_fan_out(t)
    local std = (gain or 1) * math.sqrt(2.0 / (fan_in + fan_out))
    fill_random(t, "normal_", 0, std, opts)
  end)
end

local function has_zero(t)
  for _, n in ipairs(t.shape) do if n == 0 then return true end end
  return false
end

-- kaiming's std: gain(nonlinearity, a) / sqrt(fan of mode).
local function kaiming_std(t, a, mode, nonlinearity)
  local fan = correct_fan(t, mode or "fan_in")
  return init.calculate_gain(nonlinearity or "leaky_relu", a or 0) / math.sqrt(fan)
end

--- init.kaiming_uniform_(t, a=0, mode="fan_in", nonlinearity="leaky_relu"):
--- uniform in +-gain*sqrt(3/fan) (a zero-element t is left as it is).
function init.kaiming_uniform_(t, a, mode, nonlinearity, opts)
  if is_tensor(t) and has_zero(t) then return t end
  return no_grad_fill("kaiming_uniform_", t, function()
    local bound = math.sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity)
    fill_random(t, "uniform_", -bound, bound, opts)
  end)
end

--- init.kaiming_normal_(t, a=0, mode="fan_in", nonlinearity="leaky_relu"):
--- normal with std gain/sqrt(fan).
function init.kaiming_normal_(t, a, mode, nonlinearity, opts)
  if is_tensor(t) and has_zero(t) then return t end
  return no_grad_fill("kaiming_normal_", t, function()
    fill_random(t, "normal_", 0, kaiming_std(t, a, mode, nonlinearity), opts)
  end)
end

--- init.orthogonal_(t [, gain=1]): a (semi-)orthogonal matrix (t viewed as
--- size(1) x rest) from the QR of a normal matrix, signs fixed by diag(R).
function init.orthogonal_(t, gain, opts)
  if is_tensor(t) and #t.shape < 2 then
    error("orthogonal_: only tensors with 2 or more dimensions are supported", 2)
  end
  if is_tensor(t) and t:numel() == 0 then return t end
  return no_grad_fill("orthogonal_", t, function()
    local rows = t.shape[1]
    local cols = t:numel() // rows
    local flat = fill_random(ember.empty(rows, cols, { dtype = t.dtype }), "normal_", 0, 1, opts)
    if rows < cols then flat = flat:t() end
    local q, r = ember.linalg.qr(flat)
    q = q * ember.diag(r, 0):sign()
    if rows < cols then q = q:t() end
    t:copy_(q:reshape(t.shape))
    t:mul_(gain or 1)
  end)
end

-- ---- nn.utils ----

local utils = {}
nn.utils = utils
utils.__doc = [[
ember.nn.utils (PyTorch's torch.nn.utils):
  clip_grad_norm_(params, max_norm, norm_type=2, error_if_nonfinite=false) -> total norm
  clip_grad_value_(params, clip_value)
  parameters_to_vector(params) -> 1-d tensor;  vector_to_parameters(vec, params)]]

local function param_list(params, what)
  if is_tensor(params) then return { params } end
  if is_module(params) then return params:parameters() end
  if type(params) ~= "table" then
    error(string.format("%s: parameters: tensor or list of tensors expected, got %s", what, type(params)), 3)
  end
  for i, p in ipairs(params) do
    if not is_tensor(p) then
      error(string.format("%s: parameters: entry %d is a %s, not a tensor", what, i, type(p)), 3)
    end
  end
  return params
end

local function norm_arg(v, what)
  if v == "inf" then return math.huge end
  if v == "-inf" then return -math.huge end
  if type(v) ~= "number" then
    error(string.format("%s: norm_type: number expected, got %s", what, type(v)), 3)
  end
  return v
end

--- utils.clip_grad_norm_(params, max_norm [, norm_type=2] [, error_if_nonfinite=false])
--- -> total_norm (0-dim tensor): the norm of all gradients together (as one
--- vector); each gradient is scaled in place by min(1, max_norm/(norm+1e-6)).
--- norm_type may be math.huge (or "inf"). Also takes {norm_type=, error_if_nonfinite=}.
function utils.clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite)
  if type(norm_type) == "table" then
    norm_type, error_if_nonfinite = norm_type.norm_type, norm_type.error_if_nonfinite
  end
  local ps = param_list(params, "clip_grad_norm_")
  if type(max_norm) ~= "number" then
    error("clip_grad_norm_: max_norm: number expected, got " .. type(max_norm), 2)
  end
  norm_type = norm_arg(norm_type or 2, "clip_grad_norm_")
  local grads = {}
  for _, p in ipairs(ps) do
    local g = p.grad
    if g then grads[#grads + 1] = g end
  end
  if #grads == 0 then return ember.tensor(0.0) end
  local g <close> = ember.no_grad()
  local total
  if norm_type == math.huge then
    local maxes = {}
    for i, gr in ipairs(grads) do maxes[i] = gr:abs():max() end
    total = #maxes == 1 and maxes[1] or ember.stack(maxes):max()
  else
    local norms = {}
    for i, gr in ipairs(grads) do norms[i] = ember.linalg.vector_norm(gr, norm_type) end
    total = ember.linalg.vector_norm(ember.stack(norms), norm_type)
  end
  if error_if_nonfinite and not total:isfinite():item() then
    error(string.format("clip_grad_norm_: the total norm of order %s for gradients from `parameters` " ..
      "is non-finite, so it cannot be clipped. To disable this error and scale the gradients by " ..
      "the non-finite norm anyway, set error_if_nonfinite=false", tostring(norm_type)), 2)
  end
  local coef = (ember.tensor(max_norm, { dtype = total.dtype }) / (total + 1e-6)):clamp(nil, 1.0)
  for _, gr in ipairs(grads) do gr:mul_(coef:to(gr.dtype)) end
  return total
end

--- utils.clip_grad_value_(params, clip_value): clamps every gradient in
--- place to [-clip_value, clip_value].
function utils.clip_grad_value_(params, clip_value)
  local ps = param_list(params, "clip_grad_value_")
  if type(clip_value) ~= "number" then
    error("clip_grad_value_: clip_value: number expected, got " .. type(clip_value), 2)
  end
  local g <close> = ember.no_grad()
  for _, p in ipairs(ps) do
    local gr = p.grad
    if gr then gr:clamp_(-clip_value, clip_value) end
  end
end

--- utils.parameters_to_vector(params) -> 1-d tensor: the parameters
--- flattened and concatenated (differentiable).
function utils.parameters_to_vector(params)
  local ps = param_list(params, "parameters_to_vector")
  local flat = {}
  for i, p in ipairs(ps) do flat[i] = p:reshape(-1) end
  if #flat == 0 then return ember.empty(0) end
  return ember.cat(flat)
end

--- utils.vector_to_parameters(vec, params): copies consecutive slices of
--- the 1-d vec into the parameters (PyTorch rebinds each .data to a view
--- of vec; ember tensors cannot, so values are copied).
function utils.vector_to_parameters(vec, params)
  if not is_tensor(vec) then
    error("vector_to_parameters: vec: tensor expected, got " .. type(vec), 2)
  end
  local ps = param_list(params, "vector_to_parameters")
  local total = 0
  for _, p in ipairs(ps) do total = total + p:numel() end
  if #vec.shape ~= 1 or vec.shape[1] ~= total then
    error(string.format("vector_to_parameters: vec: a 1-d tensor of %d elements expected, got shape %s",
      total, shape_str(vec)), 2)
  end
  local g <close> = ember.no_grad()
  local off = 1
  for _, p in ipairs(ps) do
    local n = p:numel()
    p:copy_(vec:narrow(1, off, n):reshape(p.shape))
    off = off + n
  end
end

return nn
