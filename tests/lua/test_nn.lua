-- test_nn.lua -- ember.nn's Lua half: Parameter, Module (registration,
-- traversal, modes, hooks, state_dict, to, printing), containers, the
-- simple layers, activation/loss wrappers, nn.init and nn.utils; values
-- against PyTorch 1.13 where they are deterministic.
local T = {}
local nn = ember.nn
local F = nn.functional

local function names_of(iter)
  local out = {}
  for name in iter do out[#out + 1] = name end
  return table.concat(out, " ")
end

-- A model with every kind of member, assigned in a deliberate order.
local Net = nn.Module:extend("Net")
function Net:__init(n)
  self.fc1 = nn.Linear(n, 8)
  self.scale = nn.Parameter(ember.ones(1))
  self:register_buffer("steps", ember.zeros(1))
  self:register_buffer("cache", ember.zeros(2), false)
  self.act = nn.ReLU()
  self.fc2 = nn.Linear(8, 2, false)
  self.label = "net" -- a plain field
end
function Net:forward(x)
  return self.fc2(self.act(self.fc1(x))) * self.scale
end

function T.parameter_marking()
  local t = ember.ones(2, 3)
  local p = nn.Parameter(t)
  check(nn.is_parameter(p))
  check(not nn.is_parameter(t), "only the Parameter is marked")
  check(p.requires_grad and p.is_leaf)
  p:detach():fill_(5) -- shares storage with t, as torch.nn.Parameter
  check_tensor(t, { { 5, 5, 5 }, { 5, 5, 5 } })
  check(not nn.Parameter(ember.ones(1), false).requires_grad)
  -- a non-leaf becomes a leaf
  local y = ember.ones(2, { requires_grad = true }) * 2
  local q = nn.Parameter(y)
  check(q.is_leaf and q.grad_fn == nil)
  check_error(function() nn.Parameter(3) end, "nn.Parameter", "tensor expected, got number")
  -- a plain tensor requiring grad is not a parameter (as in PyTorch)
  local M = nn.Module:extend("M")
  function M:__init() self.w = ember.ones(2, { requires_grad = true }) end
  check_eq(#M():parameters(), 0)
end

function T.registration_order_and_names()
  local net = Net(4)
  check_eq(names_of(net:named_parameters()), "scale fc1.weight fc1.bias fc2.weight")
  check_eq(names_of(net:named_buffers()), "steps cache")
  check_eq(names_of(net:named_children()), "fc1 act fc2")
  check_eq(names_of(net:named_modules()), " fc1 act fc2")
  check_eq(#net:parameters(), 4)
  check_eq(#net:buffers(), 2)
  check_eq(#net:children(), 3)
  check_eq(#net:modules(), 4)
  check_eq(#net:parameters(false), 1, "recurse = false")
  check_eq(net.label, "net")
  check_shape(net.fc1.weight, { 8, 4 })
  check_eq(net.fc2.bias, nil)
  -- named_parameters with a prefix
  check_eq(names_of(net.fc1:named_parameters({ prefix = "a" })), "a.weight a.bias")
  -- reassigning a parameter name keeps its place; nil keeps the slot
  net.scale = nn.Parameter(ember.full({ 1 }, 2.0))
  check_eq(names_of(net:named_parameters()), "scale fc1.weight fc1.bias fc2.weight")
  net.scale = nil
  check_eq(names_of(net:named_parameters()), "fc1.weight fc1.bias fc2.weight")
  -- a buffer takes tensors
  net.steps = ember.full({ 1 }, 3.0)
  check_tensor(net.steps, { 3 })
  -- a shared module and parameter count once
  local S = nn.Module:extend("Shared")
  function S:__init()
    self.a = nn.Linear(2, 2)
    self.b = self.a
  end
  local s = S()
  check_eq(#s:parameters(), 2)
  check_eq(#s:modules(), 2)
  local sd = s:state_dict()
  check(sd["a.weight"] and sd["b.weight"], "state_dict names a shared module under each name")
end

function T.assignment_errors()
  local net = Net(2)
  check_error(function() net.fc1 = 3 end, "cannot assign number as child module 'fc1'")
  check_error(function() net.scale = ember.ones(1) end, "cannot assign a plain tensor as parameter 'scale'")
  check_error(function() net.steps = "x" end, "cannot assign string as buffer 'steps'")
  -- assignment replaces a plain field (as PyTorch's setattr); register_* refuses it
  net.tag = 1
  net.tag = nn.Parameter(ember.ones(1))
  check(nn.is_parameter(net.tag))
  net.tag2 = 1
  check_error(function() net:register_buffer("tag2", ember.ones(1)) end, "attribute 'tag2' already exists")
  check_error(function() net.eval = nn.ReLU() end, "attribute 'eval' already exists")
  check_error(function() net:register_buffer("train", ember.ones(1)) end, "register_buffer", "attribute 'train' already exists")
  check_error(function() net:register_parameter("a.b", nil) end, "register_parameter", "\"a.b\"")
  check_error(function() net:register_parameter("w", ember.ones(1)) end, "register_parameter", "nn.Parameter or nil required")
  check_error(function() net:add_module("m", {}) end, "add_module", "not a Module")
  check_error(function() nn.Module:extend(3) end, "extend", "string expected")
  local Bare = nn.Module:extend("Bare")
  check_error(function() Bare()(ember.ones(1)) end, "Module [Bare] is missing the required \"forward\" function")
end

function T.forward_and_backward()
  ember.manual_seed(1)
  local net = Net(4)
  local x = ember.randn(3, 4)
  local y = net(x)
  check_shape(y, { 3, 2 })
  local manual = (x:matmul(net.fc1.weight:t()) + net.fc1.bias):relu():matmul(net.fc2.weight:t()) * net.scale
  check_tensor(y, manual:tolist(), 1e-6)
  y:sum():backward()
  for name, p in net:named_parameters() do check(p.grad ~= nil, name .. " has a grad") end
  net:zero_grad()
  check_tensor(net.fc1.bias.grad, { 0, 0, 0, 0, 0, 0, 0, 0 }) -- zeroed in place (1.13 default)
  net:zero_grad({ set_to_none = true })
  check_eq(net.fc1.bias.grad, nil)
  net:requires_grad_(false)
  check(not net.fc1.weight.requires_grad)
  check(not net(x).requires_grad)
end

function T.train_eval_apply()
  local net = Net(2)
  check_eq(net.training, true)
  check(rawequal(net:eval(), net))
  check_eq(net.training, false)
  check_eq(net.fc1.training, false)
  net:train()
  check_eq(net.act.training, true)
  net:train(false)
  check_eq(net.fc2.training, false)
  check_error(function() net:train("yes") end, "train", "boolean expected")
  local order = {}
  net:apply(function(m) order[#order + 1] = getmetatable(m).__name end)
  check_eq(table.concat(order, " "), "Linear ReLU Linear Net") -- children first
  -- apply as an initialiser
  net:apply(function(m) if getmetatable(m) == nn.Linear then nn.init.zeros_(m.weight) end end)
  check_eq(net.fc1.weight:abs():sum():item(), 0)
end

function T.hooks()
  local lin = nn.Linear(2, 2)
  local log = {}
  local h1 = lin:register_forward_pre_hook(function(m, args)
    log[#log + 1] = "pre" .. args.n
    return args[1] * 0 -- replace the input
  end)
  local h2 = lin:register_forward_hook(function(m, args, out)
    log[#log + 1] = "post"
    return out + 100
  end)
  local y = lin(ember.ones(1, 2))
  check_eq(table.concat(log, ","), "pre1,post")
  check_tensor(y, { (lin.bias + 100):tolist() }, 1e-6)
  h1:remove()
  h1:remove() -- twice is harmless
  h2:remove()
  local x = ember.ones(1, 2)
  check_tensor(lin(x), F.linear(x, lin.weight, lin.bias):tolist(), 1e-6)
  -- prepend runs first; nil keeps args and results
  local order = {}
  lin:register_forward_hook(function() order[#order + 1] = "a" end)
  lin:register_forward_hook(function() order[#order + 1] = "b" end, { prepend = true })
  lin(x)
  check_eq(table.concat(order), "ba")
  check_error(function() lin:register_forward_hook(5) end, "register_forward_hook", "function expected")
end

function T.state_dict_round_trip()
  ember.manual_seed(2)
  local a, b = Net(3), Net(3)
  a.steps:fill_(7)
  local sd = a:state_dict()
  local keys = {}
  for k in pairs(sd) do keys[#keys + 1] = k end
  table.sort(keys)
  check_eq(table.concat(keys, " "), "fc1.bias fc1.weight fc2.weight scale steps") -- no non-persistent cache
  check(not sd["fc1.weight"].requires_grad, "detached unless keep_vars")
  check(a:state_dict({ keep_vars = true })["fc1.weight"].requires_grad)
  local r = b:load_state_dict(sd)
  check_eq(#r.missing_keys, 0)
  check_eq(#r.unexpected_keys, 0)
  check(b.fc1.weight:equal(a.fc1.weight))
  check_tensor(b.steps, { 7 })
  check(not rawequal(b.fc1.weight, a.fc1.weight), "values are copied into b's own parameters")
  -- strict = false reports instead of failing
  local partial = { ["fc1.weight"] = sd["fc1.weight"], extra = ember.ones(1) }
  local r2 = b:load_state_dict(partial, { strict = false })
  check_eq(table.concat(r2.missing_keys, " "), "scale steps fc1.bias fc2.weight")
  check_eq(table.concat(r2.unexpected_keys, " "), "extra")
end

function T.state_dict_errors()
  local net = Net(3)
  local sd = net:state_dict()
  sd["fc1.weight"] = ember.zeros(8, 5)
  local before = net.fc1.bias:clone()
  sd["fc1.bias"] = ember.full({ 8 }, 9.0)
  check_error(function() net:load_state_dict(sd) end, "load_state_dict", "for Net",
    "size mismatch for fc1.weight", "{8, 5}", "{8, 3}")
  check(net.fc1.bias:equal(before), "nothing is copied when a check fails")
  local sd2 = net:state_dict()
  sd2.scale = nil
  sd2.bogus = ember.ones(1)
  check_error(function() net:load_state_dict(sd2) end, "missing key(s) in state_dict: scale",
    "unexpected key(s) in state_dict: bogus")
  local sd3 = net:state_dict()
  sd3.scale = 1
  check_error(function() net:load_state_dict(sd3, { strict = false }) end, "expected a tensor for key scale")
  check_error(function() net:load_state_dict(5) end, "load_state_dict", "table expected")
end

function T.to_dtype()
  local net = Net(3)
  net:register_buffer("count", ember.zeros(1, { dtype = "int64" }))
  local old = net.fc1.weight
  check(rawequal(net:to("float64"), net))
  check_eq(net.fc1.weight.dtype, "float64")
  check_eq(net.steps.dtype, "float64")
  check_eq(net.count.dtype, "int64", "integer buffers keep their dtype")
  check(nn.is_parameter(net.fc1.weight) and net.fc1.weight.requires_grad)
  check(net.fc1.weight:to("float32"):equal(old), "values kept")
  check_eq(net(ember.ones(2, 3, { dtype = "float64" })).dtype, "float64")
  net:float()
  check_eq(net.fc2.weight.dtype, "float32")
  local same = net.fc2.weight
  net:to("cpu")
  check(rawequal(net.fc2.weight, same), "already there: the same parameter")
  net:to(ember.device("cpu"))
  check_error(function() net:to("int32") end, "floating point dtypes", "int32")
end

function T.printing()
  local m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Sequential(nn.Flatten(), nn.Tanh()), nn.Linear(3, 1, false))
  -- torch 1.13 prints the same tree with 0-based names, True/False and start_dim=1
  check_eq(tostring(m), table.concat({
    "Sequential(",
    "  (1): Linear(in_features=4, out_features=3, bias=true)",
    "  (2): ReLU()",
    "  (3): Sequential(",
    "    (1): Flatten(start_dim=2, end_dim=-1)",
    "    (2): Tanh()",
    "  )",
    "  (4): Linear(in_features=3, out_features=1, bias=false)",
    ")",
    "parameters: 18 (18 trainable)" }, "\n"))
  check_eq(tostring(nn.ReLU()), "ReLU()")
  check_eq(tostring(nn.Unflatten(2, { 3, 4 })), "Unflatten(dim=2, unflattened_size={3, 4})")
  check_eq(tostring(nn.Softmax(2)), "Softmax(dim=2)")
  local big = nn.Linear(1000, 1000)
  big.weight:requires_grad_(false)
  check(tostring(big):find("parameters: 1,001,000 (1,000 trainable)", 1, true))
  -- a custom extra_repr and the shell's repr
  local C = nn.Module:extend("Custom")
  function C:extra_repr() return "k=1\nj=2" end
  check_eq(tostring(C()), "Custom(\n  k=1\n  j=2\n)")
  check_eq(ember.shell.repr(nn.Identity()), "Identity()")
  check(tostring(nn.Linear):find("Linear", 1, true))
end

function T.table_style_and_paths()
  local Two = nn.Module:extend("Two", {
    __init = function(self) self.inner = nn.Sequential(nn.Linear(2, 3), nn.ReLU()) end,
    forward = function(self, x) return self.inner(x) end,
  })
  local m = Two()
  check_shape(m(ember.ones(4, 2)), { 4, 3 })
  check(rawequal(m:get_submodule("inner.1"), m.inner[1]))
  check(rawequal(m:get_submodule(""), m))
  check(rawequal(m:get_parameter("inner.1.bias"), m.inner[1].bias))
  check_error(function() m:get_submodule("inner.7") end, "get_submodule", "inner has no attribute '7'")
  check_error(function() m:get_parameter("inner.1.gain") end, "get_parameter", "inner.1 has no parameter 'gain'")
  check_error(function() m:get_parameter("nope.w") end, "get_parameter", "Two has no attribute 'nope'")
  check_error(function() nn.Module:extend("X", 5) end, "extend", "methods: table expected")
end

function T.subclass_of_a_layer()
  local Scaled = nn.Linear:extend("Scaled")
  function Scaled:__init(i, o)
    nn.Linear.__init(self, i, o)
    self.k = 3
  end
  function Scaled:forward(x) return nn.Linear.forward(self, x) * self.k end
  local s = Scaled(2, 2)
  check_eq(Scaled.super, nn.Linear)
  local x = ember.ones(1, 2)
  check_tensor(s(x), (F.linear(x, s.weight, s.bias) * 3):tolist(), 1e-6)
  check_eq(tostring(s), "Scaled(in_features=2, out_features=2, bias=true)\nparameters: 6 (6 trainable)")
  check_eq(names_of(s:named_parameters()), "weight bias")
end

function T.sequential()
  ember.manual_seed(3)
  local seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
  check_eq(#seq, 3)
  check_eq(getmetatable(seq[1]), nn.Linear)
  check(rawequal(seq[-1], seq[3]))
  check_eq(seq[4], nil)
  local x = ember.randn(5, 3)
  check_tensor(seq(x), seq[3](seq[2](seq[1](x))):tolist(), 1e-6)
  check_eq(names_of(seq:named_parameters()), "1.weight 1.bias 3.weight 3.bias")
  seq:append(nn.Tanh())
  check_eq(#seq, 4)
  local named = nn.Sequential({ { "enc", nn.Linear(3, 2) }, { "act", nn.Sigmoid() } })
  check_eq(names_of(named:named_children()), "enc act")
  check_shape(named(x), { 5, 2 })
  local n = 0
  for i, m in ipairs(seq) do n = n + 1 check(rawequal(m, seq[i])) end
  check_eq(n, 4)
  local t = nn.Tanh()
  seq[-1] = t -- replaces the last child in place
  check(rawequal(seq[4], t))
  check_eq(#seq, 4)
  check_error(function() seq[6] = nn.ReLU() end, "index 6 is out of range (1..4)")
  check_error(function() seq[1] = 5 end, "cannot assign number as child 1")
  local empty = nn.Sequential()
  check(rawequal(empty(x), x), "an empty Sequential is the identity")
  check_error(function() nn.Sequential(nn.ReLU(), 3) end, "Sequential", "argument 2", "Module expected")
  check_error(function() nn.Sequential({ { "a", 3 } }) end, "Sequential", "entry 1")
  -- a hash table of names has no order: refused rather than an empty Sequential
  check_error(function() nn.Sequential({ fc = nn.Linear(2, 3) }) end, "Sequential", "key fc", "{name, module}")
end

function T.module_list_and_dict()
  local ml = nn.ModuleList({ nn.Linear(2, 2), nn.ReLU() })
  check_eq(#ml, 2)
  ml:append(nn.Tanh())
  ml:insert(1, nn.Identity())
  check_eq(#ml, 4)
  check_eq(getmetatable(ml[1]), nn.Identity)
  check_eq(getmetatable(ml[2]), nn.Linear)
  check_eq(getmetatable(ml[-1]), nn.Tanh)
  check_eq(names_of(ml:named_parameters()), "2.weight 2.bias")
  ml:extend(nn.ModuleList({ nn.Sigmoid() }))
  check_eq(#ml, 5)
  check_error(function() ml(ember.ones(1)) end, "ModuleList has no forward")
  check_error(function() ml:append(5) end, "append", "Module expected")
  local md = nn.ModuleDict({ { "b", nn.Linear(1, 1) }, { "a", nn.ReLU() } })
  check_eq(table.concat(md:keys(), " "), "b a")
  check_eq(getmetatable(md.b), nn.Linear)
  check_eq(getmetatable(md["a"]), nn.ReLU)
  check_eq(#md, 2)
  md:update({ z = nn.Tanh(), c = nn.Sigmoid() }) -- a map: sorted keys
  check_eq(table.concat(md:keys(), " "), "b a c z")
  check_eq(getmetatable(md:pop("a")), nn.ReLU)
  check_eq(table.concat(md:keys(), " "), "b c z")
  check_eq(names_of(md:items()), "b c z")
  check_eq(#md:values(), 3)
  check_error(function() md:update({ { "k", 1 } }) end, "update", "entry 1")
  check_error(function() md:pop("nope") end, "pop", "nope")
  check_error(function() nn.ModuleDict({ { "keys", nn.ReLU() } }) end, "attribute 'keys' already exists")
end

function T.simple_layers()
  local x = ember.arange(24.0):reshape(2, 3, 4)
  check_shape(nn.Flatten()(x), { 2, 12 })
  check_shape(nn.Flatten(1)(x), { 24 })
  check_shape(nn.Flatten(2, 2)(x), { 2, 3, 4 })
  check_shape(nn.Unflatten(3, { 2, 2 })(x), { 2, 3, 2, 2 })
  check(rawequal(nn.Identity(5, "ignored")(x), x))
  local a, b = nn.Identity()(x, 2)
  check_eq(b, 2)
  check_error(function() nn.Unflatten("x", { 2 }) end, "Unflatten", "dim")
  -- activations (ReLU, Sigmoid, Tanh, Softmax, LogSoftmax) and in-place ReLU
  local v = ember.tensor({ { -1.0, 0.5, 2.0 } })
  check_tensor(nn.ReLU()(v), { { 0, 0.5, 2 } })
  check_tensor(nn.Sigmoid()(v), ember.sigmoid(v):tolist())
  check_tensor(nn.Tanh()(v), ember.tanh(v):tolist())
  check_tensor(nn.Softmax(2)(v), F.softmax(v, 2):tolist())
  check_tensor(nn.LogSoftmax(2)(v), F.log_softmax(v, 2):tolist())
  -- the legacy implicit dim: 2 for a 2-d input, 1 for 1-d and 3-d
  check_tensor(nn.Softmax()(v), F.softmax(v, 2):tolist())
  check_tensor(nn.Softmax()(ember.tensor({ 1.0, 2.0 })), F.softmax(ember.tensor({ 1.0, 2.0 }), 1):tolist())
  local w = v:clone()
  local r = nn.ReLU(true)(w)
  check_tensor(w, { { 0, 0.5, 2 } }, 0, "inplace writes into the input")
  check(rawequal(r, w) or r:equal(w))
  check_eq(tostring(nn.ReLU(true)), "ReLU(inplace=true)")
end

function T.linear_init_and_errors()
  ember.manual_seed(4)
  local lin = nn.Linear(400, 300)
  local bound = 1 / math.sqrt(400) -- kaiming_uniform_(a = sqrt(5)) gives 1/sqrt(fan_in)
  check(lin.weight:abs():max():item() <= bound)
  check(lin.weight:abs():max():item() > 0.95 * bound, "fills the range")
  check(lin.bias:abs():max():item() <= bound)
  check_near(lin.weight:std():item(), bound / math.sqrt(3), 0.02) -- std of U(-b, b)
  local d = nn.Linear(2, 3, { dtype = "float64" })
  check_eq(d.weight.dtype, "float64")
  check_eq(d.bias.dtype, "float64")
  local z = nn.Linear(0, 3) -- fan_in 0: bias bound 0, no error
  check_tensor(z.bias, { 0, 0, 0 })
  check_error(function() nn.Linear(-1, 2) end, "Linear", "in_features", "non-negative integer")
  check_error(function() nn.Linear(2, 2.5) end, "Linear", "out_features")
  check_error(function() lin(ember.ones(2, 3)) end, "linear")
end

function T.functional_wrappers()
  -- each wrapper exists exactly when its F op does (Note [Functional wrappers])
  local pairs_ = { GELU = "gelu", LeakyReLU = "leaky_relu", ELU = "elu", SiLU = "silu", Mish = "mish",
    Softplus = "softplus", Hardtanh = "hardtanh", MSELoss = "mse_loss", L1Loss = "l1_loss",
    CrossEntropyLoss = "cross_entropy", NLLLoss = "nll_loss", BCELoss = "binary_cross_entropy",
    BCEWithLogitsLoss = "binary_cross_entropy_with_logits", KLDivLoss = "kl_div", HuberLoss = "huber_loss",
    SmoothL1Loss = "smooth_l1_loss", Softmin = "softmin", PReLU = "prelu", Bilinear = "bilinear" }
  for mod, fn in pairs(pairs_) do
    check_eq(nn[mod] ~= nil, F[fn] ~= nil, mod)
  end
  -- the wrapper machinery itself, over an F op this build has
  local Lin = nn._wrap("WrappedSoftmax", "softmax", { { "dim", 1 } })
  local v = ember.tensor({ { 1.0, 2.0 }, { 3.0, 5.0 } })
  check_tensor(Lin(2)(v), F.softmax(v, 2):tolist())
  check_tensor(Lin({ dim = 2 })(v), F.softmax(v, 2):tolist())
  check_tensor(Lin()(v), F.softmax(v, 1):tolist())
  check_eq(tostring(Lin(2)), "WrappedSoftmax(dim=2)")
  check_error(function() Lin(1, 2) end, "WrappedSoftmax", "at most 1 expected")
  nn.WrappedSoftmax = nil
  check_eq(nn._wrap("Nope", "no_such_op", {}), nil)
  check_eq(nn.Nope, nil)
end

-- ---- nn.init ----

function T.calculate_gain()
  -- torch 1.13's nn.init.calculate_gain
  local want = { { "linear", nil, 1 }, { "conv2d", nil, 1 }, { "sigmoid", nil, 1 }, { "tanh", nil, 1.6666666666666667 },
    { "relu", nil, 1.4142135623730951 }, { "leaky_relu", nil, 1.4141428569978354 },
    { "leaky_relu", 0.2, 1.3867504905630728 }, { "selu", nil, 0.75 } }
  for _, w in ipairs(want) do check_near(nn.init.calculate_gain(w[1], w[2]), w[3], 1e-15, w[1]) end
  check_error(function() nn.init.calculate_gain("swish") end, "calculate_gain", "unsupported nonlinearity swish")
  check_error(function() nn.init.calculate_gain("leaky_relu", "x") end, "negative_slope x not a valid number")
end

function T.fans()
  local fi, fo = nn.init._calculate_fan_in_and_fan_out(ember.empty(16, 3, 5, 5))
  check_eq(fi, 75)
  check_eq(fo, 400)
  fi, fo = nn.init._calculate_fan_in_and_fan_out(ember.empty(10, 20))
  check_eq(fi, 20)
  check_eq(fo, 10)
  check_error(function() nn.init._calculate_fan_in_and_fan_out(ember.empty(5)) end, "fewer than 2 dimensions")
  check_error(function() nn.init.kaiming_uniform_(ember.empty(5)) end, "fewer than 2 dimensions")
  check_error(function() nn.init.kaiming_normal_(ember.empty(3, 3), 0, "fan_mid") end, "mode fan_mid not supported")
end

function T.init_distributions()
  ember.manual_seed(5)
  local t = ember.empty(200, 500)
  check(rawequal(nn.init.uniform_(t, -2, 3), t))
  check(t:min():item() >= -2 and t:max():item() < 3)
  nn.init.normal_(t, 1, 2)
  check_near(t:mean():item(), 1, 0.02)
  check_near(t:std():item(), 2, 0.02)
  nn.init.xavier_uniform_(t, 2)
  local a = 2 * math.sqrt(6 / 700)
  check(t:abs():max():item() <= a and t:abs():max():item() > 0.99 * a)
  nn.init.xavier_normal_(t)
  check_near(t:std():item(), math.sqrt(2 / 700), 0.02)
  nn.init.kaiming_uniform_(t, 0, "fan_in", "relu")
  local b = math.sqrt(2) * math.sqrt(3 / 500)
  check(t:abs():max():item() <= b and t:abs():max():item() > 0.99 * b)
  nn.init.kaiming_normal_(t, 0, "fan_out", "relu")
  check_near(t:std():item(), math.sqrt(2 / 200), 0.02)
  nn.init.trunc_normal_(t, 0.5, 1, -1, 1.5)
  check(t:min():item() >= -1 and t:max():item() <= 1.5)
  -- the mean of N(0.5, 1) truncated to [-1, 1.5]: mu + (phi(-1.5) - phi(1)) / (Phi(1) - Phi(-1.5))
  local phi = function(z) return math.exp(-z * z / 2) / math.sqrt(2 * math.pi) end
  check_near(t:mean():item(), 0.5 + (phi(-1.5) - phi(1)) / (0.8413447460685429 - 0.0668072012688581), 0.01)
  -- a generator makes fills reproducible
  local g1, g2 = ember.Generator(), ember.Generator()
  g1:manual_seed(7)
  g2:manual_seed(7)
  local u, v = ember.empty(5, 5), ember.empty(5, 5)
  nn.init.kaiming_uniform_(u, math.sqrt(5), "fan_in", "leaky_relu", { generator = g1 })
  nn.init.kaiming_uniform_(v, math.sqrt(5), "fan_in", "leaky_relu", { generator = g2 })
  check(u:equal(v))
  -- no grad recorded on parameters
  local p = nn.Parameter(ember.empty(3, 3))
  nn.init.xavier_uniform_(p)
  check(p.is_leaf and p.grad_fn == nil)
  -- zero-element tensors are left alone
  nn.init.kaiming_uniform_(ember.empty(0, 3))
  nn.init.orthogonal_(ember.empty(0, 3))
end

function T.init_deterministic()
  local t = ember.empty(2, 3)
  nn.init.constant_(t, 0.5)
  check_tensor(t, { { 0.5, 0.5, 0.5 }, { 0.5, 0.5, 0.5 } })
  nn.init.zeros_(t)
  check_eq(t:abs():sum():item(), 0)
  nn.init.ones_(t)
  check_eq(t:sum():item(), 6)
  nn.init.eye_(t)
  check_tensor(t, { { 1, 0, 0 }, { 0, 1, 0 } })
  local i = nn.init.eye_(ember.empty(3, 2, { dtype = "int64" }))
  check_tensor(i, { { 1, 0 }, { 0, 1 }, { 0, 0 } })
  check_error(function() nn.init.eye_(ember.empty(2, 2, 2)) end, "eye_", "2 dimensions")
  check_error(function() nn.init.constant_(t, "x") end, "constant_", "number expected")
  check_error(function() nn.init.zeros_(5) end, "zeros_", "tensor expected")
  -- dirac_: a 3x3 conv weight that passes its input channels through
  local w = nn.init.dirac_(ember.empty(4, 2, 3, 3))
  check_eq(w:sum():item(), 2)
  check_eq(w[1][1][2][2]:item(), 1)
  check_eq(w[2][2][2][2]:item(), 1)
  local g = nn.init.dirac_(ember.empty(4, 2, 3), 2) -- groups = 2: two identities
  check_eq(g:sum():item(), 4)
  check_eq(g[3][1][2]:item(), 1)
  check_error(function() nn.init.dirac_(ember.empty(3, 3)) end, "dirac_", "3, 4, or 5 dimensions")
  check_error(function() nn.init.dirac_(ember.empty(3, 2, 3), 2) end, "dirac_", "divisible by groups")
end

function T.orthogonal()
  ember.manual_seed(6)
  for _, shape in ipairs({ { 3, 5 }, { 5, 3 }, { 4, 2, 3 } }) do
    local t = ember.empty(shape, { dtype = "float64" })
    nn.init.orthogonal_(t, 2)
    local m = t:reshape(shape[1], -1)
    local g = shape[1] <= m.shape[2] and m:matmul(m:t()) or m:t():matmul(m)
    local n = g.shape[1]
    check_tensor(g, (ember.eye(n, { dtype = "float64" }) * 4):tolist(), 1e-10, "orthogonal " .. table.concat(shape, "x"))
  end
  check_error(function() nn.init.orthogonal_(ember.empty(3)) end, "orthogonal_", "2 or more dimensions")
end

-- ---- nn.utils ----

local function with_grads()
  local a = nn.Parameter(ember.zeros(2, 3, { dtype = "float64" }))
  local b = nn.Parameter(ember.zeros(4, { dtype = "float64" }))
  a.grad = ember.tensor({ { 1, -2, 3 }, { 0.5, 4, -1 } }, { dtype = "float64" })
  b.grad = ember.tensor({ 2, -3, 0.25, 1 }, { dtype = "float64" })
  return { a, b }
end

local function all_grads(ps)
  local out = {}
  for _, p in ipairs(ps) do
    for _, v in ipairs(p.grad:reshape(-1):tolist()) do out[#out + 1] = v end
  end
  return out
end

function T.clip_grad_norm()
  -- torch 1.13: nn.utils.clip_grad_norm_([a, b], 2.0, norm_type) with these grads
  local cases = {
    { 2, 6.7314560089181299, { 0.2971124969453585, -0.594224993890717, 0.8913374908360756, 0.14855624847267926,
      1.188449987781434, -0.2971124969453585, 0.594224993890717, -0.8913374908360756, 0.07427812423633963,
      0.2971124969453585 } },
    { 1, 17.75, { 0.11267604999008168, -0.22535209998016337, 0.33802814997024505, 0.05633802499504084,
      0.45070419996032673, -0.11267604999008168, 0.22535209998016337, -0.33802814997024505, 0.02816901249752042,
      0.11267604999008168 } },
    { math.huge, 4, { 0.49999987500003124, -0.9999997500000625, 1.4999996250000938, 0.24999993750001562,
      1.999999500000125, -0.49999987500003124, 0.9999997500000625, -1.4999996250000938, 0.12499996875000781,
      0.49999987500003124 } },
    { 3.5, 4.8278683337926065, { 0.4142614188004275, -0.828522837600855, 1.2427842564012825, 0.20713070940021375,
      1.65704567520171, -0.4142614188004275, 0.828522837600855, -1.2427842564012825, 0.10356535470010687,
      0.4142614188004275 } },
  }
  for _, c in ipairs(cases) do
    local ps = with_grads()
    local total = nn.utils.clip_grad_norm_(ps, 2.0, c[1])
    check_near(total:item(), c[2], 1e-14, "norm_type " .. c[1])
    check_tensor(ember.tensor(all_grads(ps), { dtype = "float64" }), c[3], 1e-14)
  end
  -- below max_norm: unchanged (scaled by exactly 1)
  local ps = with_grads()
  check_near(nn.utils.clip_grad_norm_(ps, 100.0):item(), 6.7314560089181299, 1e-14)
  check_tensor(ember.tensor(all_grads(ps), { dtype = "float64" }), { 1, -2, 3, 0.5, 4, -1, 2, -3, 0.25, 1 })
  -- "inf" as a string, a single tensor, a module, no grads
  ps = with_grads()
  check_near(nn.utils.clip_grad_norm_(ps[2], 1.0, "inf"):item(), 3, 1e-14)
  check_eq(nn.utils.clip_grad_norm_(nn.Linear(2, 2), 1.0):item(), 0)
  -- non-finite
  ps = with_grads()
  ps[1].grad = ember.tensor({ { 0 / 0, 1, 1 }, { 1, 1, 1 } }, { dtype = "float64" })
  check(nn.utils.clip_grad_norm_(ps, 1.0):isnan():item())
  ps[1].grad = ember.tensor({ { math.huge, 1, 1 }, { 1, 1, 1 } }, { dtype = "float64" })
  check_error(function() nn.utils.clip_grad_norm_(ps, 1.0, 2, true) end, "clip_grad_norm_", "non-finite")
  check_error(function() nn.utils.clip_grad_norm_(ps, 1.0, { error_if_nonfinite = true }) end, "non-finite")
  check_error(function() nn.utils.clip_grad_norm_(ps, "x") end, "clip_grad_norm_", "max_norm")
  check_error(function() nn.utils.clip_grad_norm_({ 1 }, 1.0) end, "clip_grad_norm_", "entry 1")
end

function T.clip_grad_value()
  local ps = with_grads()
  nn.utils.clip_grad_value_(ps, 1.5)
  -- torch 1.13: clip_grad_value_(.., 1.5)
  check_tensor(ember.tensor(all_grads(ps), { dtype = "float64" }), { 1.0, -1.5, 1.5, 0.5, 1.5, -1.0, 1.5, -1.5, 0.25, 1.0 })
  check_error(function() nn.utils.clip_grad_value_(ps, nil) end, "clip_grad_value_", "clip_value")
end

function T.parameters_vector()
  local a = nn.Parameter(ember.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }))
  local b = nn.Parameter(ember.tensor({ 5.0, 6.0 }))
  local v = nn.utils.parameters_to_vector({ a, b })
  check_tensor(v, { 1, 2, 3, 4, 5, 6 })
  check(v.requires_grad, "differentiable")
  v:sum():backward()
  check_tensor(a.grad, { { 1, 1 }, { 1, 1 } })
  nn.utils.vector_to_parameters(ember.arange(6.0) * 10, { a, b })
  check_tensor(a, { { 0, 10 }, { 20, 30 } })
  check_tensor(b, { 40, 50 })
  check(a.is_leaf and a.grad_fn == nil)
  check_error(function() nn.utils.vector_to_parameters(ember.zeros(5), { a, b }) end,
    "vector_to_parameters", "6 elements", "{5}")
  check_error(function() nn.utils.vector_to_parameters({ 1 }, { a }) end, "vector_to_parameters", "tensor expected")
end

function T.docs()
  for _, t in ipairs({ nn, nn.Module, nn.init, nn.utils }) do
    check(type(rawget(t, "__doc")) == "string", "__doc")
  end
  for _, cls in ipairs({ nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.Identity, nn.Flatten, nn.Unflatten,
    nn.Linear, nn.ReLU, nn.Sigmoid, nn.Tanh, nn.Softmax, nn.LogSoftmax }) do
    check(type(rawget(cls, "__doc")) == "string" and rawget(cls, "__doc"):find("nn." .. cls.__name, 1, true), cls.__name)
  end
  check(nn._wrap("DocProbe", "softmax", { { "dim", 1 } }).__doc:find('nn.DocProbe(dim=1)', 1, true))
  nn.DocProbe = nil
  -- help() of a class and of an instance prints the class's doc
  local out = {}
  local write = io.write
  io.write = function(...) for _, s in ipairs({ ... }) do out[#out + 1] = s end end
  local ok, err = pcall(function()
    ember.shell.help(nn.Linear)
    ember.shell.help(nn.Linear(2, 2))
  end)
  io.write = write
  check(ok, tostring(err))
  local text = table.concat(out)
  local _, count = text:gsub("nn%.Linear%(in_features, out_features", "")
  check_eq(count, 2)
  -- nn still holds the generated functional namespace
  check(nn.functional.linear ~= nil)
end

return T
