-- test_optim.lua -- ember.optim and ember.optim.lr_scheduler: each
-- optimizer and scheduler against numbers from PyTorch 1.13, param groups,
-- state_dict round trips, bad input.
local T = {}
local nn, optim = ember.nn, ember.optim
local S = optim.lr_scheduler

-- The fixed problem: p = {1, -2, 3, 0.5} (float64), loss = sum(p^2) +
-- 0.1 sum(p^3) + p1 p2; each row runs `steps` steps of zero_grad, backward,
-- step. Expected values: torch 1.13, the same loop with
-- torch.optim.NAME([p], **options), printed with %.17g.
local CASES = {
  { "SGD", {lr = 0.1}, 5, {0.78071222856472622, -1.2205529282974734, 0.69766962810175381, 0.15399967462698655} },
  { "SGD", {lr = 0.05, momentum = 0.9, dampening = 0.1, weight_decay = 0.01}, 5, {0.7517766459040599, -0.97448719800276928, -0.6761191479791443, -0.013175543575751035} },
  { "SGD", {lr = 0.05, momentum = 0.9, nesterov = true, maximize = true}, 5, {1.020862510109346, -3.6641178509857215, 22.579960929986886, 1.9599794784610041} },
  { "Adam", {lr = 0.1}, 5, {0.66178949309485513, -1.5001133119535111, 2.5024052334524982, 0.029387823179678238} },
  { "Adam", {lr = 0.1, betas = {0.8, 0.9}, weight_decay = 0.1, amsgrad = true}, 5, {0.63331905331843774, -1.5002947871227987, 2.5025965087736299, 0.036119260563485731} },
  { "Adam", {lr = 0.1, maximize = true}, 5, {1.4944945244210182, -2.4992307394762703, 3.5014476639849512, 1.0014605905561886} },
  { "AdamW", {lr = 0.1}, 5, {0.65827020916174694, -1.49115919533398, 2.4885181642282581, 0.028107254577829685} },
  { "AdamW", {lr = 0.1, weight_decay = 0.5, amsgrad = true, maximize = true}, 5, {1.2241346531248229, -1.9987209200036045, 2.7728128171006281, 0.84137567563299942} },
  { "RMSprop", {lr = 0.01}, 5, {0.78101145539741978, -1.6769957729876377, 2.6839939418173806, 0.22370238793027067} },
  { "RMSprop", {lr = 0.01, alpha = 0.9, momentum = 0.5, centered = true, weight_decay = 0.1}, 5, {0.8247701489996645, -1.7963661998013349, 2.7987738555644102, 0.30970038917010168} },
  { "Adagrad", {lr = 0.1}, 5, {0.7817851028717171, -1.67827747794367, 2.6852776363382991, 0.22481643269160084} },
  { "Adagrad", {lr = 0.1, lr_decay = 0.1, weight_decay = 0.1, initial_accumulator_value = 0.5}, 5, {0.84320722069700982, -1.7295226234694445, 2.7238446235817735, 0.27528402080384995} },
  { "Adadelta", {}, 5, {0.98391111232139361, -1.9835604935344728, 2.9835950522008727, 0.48370479518468307} },
  { "Adadelta", {lr = 0.5, rho = 0.8, weight_decay = 0.1}, 5, {0.99397666979771671, -1.9939417811318667, 2.9939456639661417, 0.49395944010329967} },
  { "Adamax", {lr = 0.1}, 5, {0.70103353959494896, -1.5043928053978119, 2.5220174812699958, 0.10385359389410032} },
  { "Adamax", {lr = 0.1, betas = {0.5, 0.7}, weight_decay = 0.1}, 5, {0.67282866272846564, -1.4976559255940569, 2.4878983666814083, -0.057793670887703721} },
  { "NAdam", {lr = 0.1}, 5, {0.74023288690749833, -1.5992643620066298, 2.6080434344221177, 0.16353465001289422} },
  { "NAdam", {lr = 0.1, momentum_decay = 0.01, weight_decay = 0.1}, 5, {0.71929204027089977, -1.5996109117388058, 2.6080127845927819, 0.16343583362622435} },
  { "RAdam", {lr = 0.1}, 8, {0.79186030387244322, -1.1605678926419301, 0.010228794019940432, 0.075121126650424516} },
  { "RAdam", {lr = 0.1, betas = {0.5, 0.6}, weight_decay = 0.1}, 8, {0.56699870219929061, -0.74952945253224246, 0.029648585450821947, 0.030763722336801358} },
}

local function loss_of(p)
  return (p * p):sum() + (p ^ 3):sum() * 0.1 + p[1] * p[2]
end

local function fresh()
  return nn.Parameter(ember.tensor({ 1.0, -2.0, 3.0, 0.5 }, { dtype = "float64" }))
end

local function run(opt, p, steps)
  for _ = 1, steps do
    opt:zero_grad()
    loss_of(p):backward()
    opt:step()
  end
end

function T.optimizers_match_torch()
  for i, c in ipairs(CASES) do
    local p = fresh()
    local opt = optim[c[1]]({ p }, c[2])
    run(opt, p, c[3])
    check_tensor(p, c[4], 1e-12, string.format("case %d (%s)", i, c[1]))
  end
end

function T.optimizers_float32()
  -- the same updates in float32 stay within float32 rounding of torch's float64 numbers
  for i, c in ipairs(CASES) do
    local p = nn.Parameter(ember.tensor({ 1.0, -2.0, 3.0, 0.5 }))
    run(optim[c[1]]({ p }, c[2]), p, c[3])
    check_eq(p.dtype, "float32")
    check_tensor(p, c[4], 1e-4, string.format("float32 case %d (%s)", i, c[1]))
  end
end

function T.positional_arguments()
  -- SGD(params, lr, momentum, dampening, weight_decay, nesterov) as PyTorch
  local p = fresh()
  local opt = optim.SGD({ p }, 0.05, 0.9, 0.1, 0.01)
  run(opt, p, 5)
  check_tensor(p, CASES[2][4], 1e-12)
  local q = fresh()
  local a = optim.Adam({ q }, 0.1, { 0.8, 0.9 }, 1e-8, 0.1, true)
  run(a, q, 5)
  check_tensor(q, CASES[5][4], 1e-12)
  check_eq(a.param_groups[1].betas[1], 0.8)
  check_eq(a.defaults.amsgrad, true)
end

function T.lbfgs_matches_torch()
  -- torch 1.13: LBFGS([p], lr=0.5 | 1, max_iter=10, history_size=4,
  -- line_search_fn=None | "strong_wolfe"), two step(closure) calls on
  -- loss = sum((p-1)^2) + 0.1 sum(p^4) + p1 p2; final p, func_evals, n_iter.
  local want = {
    { false, 0.5, {0.63288287014183253, 0.63284815984304243, 0.8688471016225533, 0.86882903590286953}, 20, 20 },
    { "strong_wolfe", 1, {0.63286805088507692, 0.63286999476644501, 0.86883072730883393, 0.86882945563731673}, 11, 11 },
  }
  for _, w in ipairs(want) do
    local p = fresh()
    local opt = optim.LBFGS({ p }, { lr = w[2], max_iter = 10, history_size = 4, line_search_fn = w[1] or nil })
    local function closure()
      opt:zero_grad()
      local l = ((p - 1) ^ 2):sum() + (p ^ 4):sum() * 0.1 + p[1] * p[2]
      l:backward()
      return l
    end
    local first = opt:step(closure)
    check(ember.is_tensor(first), "step returns the closure's first loss")
    opt:step(closure)
    check_tensor(p, w[3], 1e-9, tostring(w[1]))
    check_eq(opt.state[p].func_evals, w[4])
    check_eq(opt.state[p].n_iter, w[5])
  end
end

function T.param_groups()
  local a, b = fresh(), fresh()
  local opt = optim.SGD({ { params = { a } }, { params = b, lr = 0.05, momentum = 0.9, dampening = 0.1,
    weight_decay = 0.01 } }, { lr = 0.1 })
  check_eq(#opt.param_groups, 2)
  check_eq(opt.param_groups[1].lr, 0.1)
  check_eq(opt.param_groups[1].momentum, 0)
  check_eq(opt.param_groups[2].lr, 0.05)
  for _ = 1, 5 do
    opt:zero_grad()
    loss_of(a):backward()
    loss_of(b):backward()
    opt:step()
  end
  check_tensor(a, CASES[1][4], 1e-12)
  check_tensor(b, CASES[2][4], 1e-12)
  -- add_param_group takes the defaults
  local c = fresh()
  opt:add_param_group({ params = c, momentum = 0.5 })
  check_eq(opt.param_groups[3].lr, 0.1)
  check_eq(opt.param_groups[3].momentum, 0.5)
  check_error(function() opt:add_param_group({ params = { a } }) end, "more than one parameter group")
  check_error(function() optim.SGD({ c, c }, 0.1) end, "SGD", "contains a parameter twice")
  -- a module's parameters
  local lin = nn.Linear(3, 2)
  local o2 = optim.Adam(lin:parameters())
  check_eq(#o2.param_groups[1].params, 2)
end

function T.zero_grad_and_missing_grads()
  local p, q = fresh(), fresh()
  local opt = optim.SGD({ p, q }, 0.1)
  loss_of(p):backward()
  opt:step() -- q has no grad: untouched, no state
  check_tensor(q, { 1, -2, 3, 0.5 })
  opt:zero_grad()
  check_tensor(p.grad, { 0, 0, 0, 0 }) -- PyTorch 1.13's default: zeroed in place
  opt:zero_grad({ set_to_none = true })
  check_eq(p.grad, nil)
  -- maximize with Adam state per parameter
  local a = optim.Adam({ p })
  loss_of(p):backward()
  a:step()
  check_eq(a.state[p].step, 1)
  check_shape(a.state[p].exp_avg, { 4 })
end

function T.step_closure()
  local p = fresh()
  local opt = optim.SGD({ p }, 0.1)
  for _ = 1, 5 do
    local l = opt:step(function()
      opt:zero_grad()
      local l = loss_of(p)
      check(ember.is_grad_enabled(), "closure runs with grad enabled")
      l:backward()
      return l
    end)
    check(ember.is_tensor(l))
  end
  check_tensor(p, CASES[1][4], 1e-12)
  -- the update itself records nothing
  check(p.is_leaf and p.grad_fn == nil)
end

function T.state_dict_round_trip()
  for _, name in ipairs({ "SGD", "Adam", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam" }) do
    local c
    for _, row in ipairs(CASES) do if row[1] == name and next(row[2]) then c = row end end
    local p = fresh()
    local opt = optim[name]({ p }, c[2])
    run(opt, p, 3)
    local sd = opt:state_dict()
    check_eq(sd.param_groups[1].params[1], 1)
    check(sd.state[1] ~= nil, name .. " state saved")
    -- a new optimizer over a copy of p continues where the first stopped
    local q = nn.Parameter(p:detach():clone())
    local opt2 = optim[name]({ q }, { lr = 123 })
    opt2:load_state_dict(sd)
    check_eq(opt2.param_groups[1].lr, c[2].lr or opt.defaults.lr)
    run(opt2, q, c[3] - 3)
    check_tensor(q, c[4], 1e-12, name .. " after load_state_dict")
    -- loaded state is a copy
    if opt2.state[q].exp_avg then check(not rawequal(opt2.state[q].exp_avg, opt.state[p].exp_avg)) end
  end
end

function T.optimizer_errors()
  local p = fresh()
  check_error(function() optim.SGD({ p }) end, "SGD", "required optimization parameter lr")
  check_error(function() optim.SGD({ p }, -0.1) end, "SGD", "Invalid learning rate: -0.1")
  check_error(function() optim.SGD({ p }, 0.1, { nesterov = true }) end, "Nesterov momentum requires")
  check_error(function() optim.SGD({ p }, { lr = 0.1, momentun = 0.9 }) end, "SGD", "unknown option 'momentun'")
  check_error(function() optim.Adam({ p }, { betas = { 1.0, 0.9 } }) end, "Adam", "Invalid beta parameter at index 1")
  check_error(function() optim.Adam({ p }, { eps = -1 }) end, "Invalid epsilon value")
  check_error(function() optim.Adam({}) end, "Adam", "empty parameter list")
  check_error(function() optim.Adam(p) end, "Adam", "params", "got a tensor")
  check_error(function() optim.Adam({ p * 2 }) end, "non-leaf")
  check_error(function() optim.Adam({ p, 3 }) end, "params entry 2 is a number")
  check_error(function() optim.Adam({ p }, 0.1, { 0.9, 0.99 }, 1e-8, 0, false, 7) end, "at most 5 expected")
  check_error(function() optim.RMSprop({ p }, { alpha = -1 }) end, "Invalid alpha value")
  check_error(function() optim.LBFGS({ p }):step() end, "LBFGS", "closure")
  check_error(function() optim.LBFGS({ p }, { line_search_fn = "armijo" }) end, "strong_wolfe")
  check_error(function() optim.LBFGS({ p }):add_param_group({ params = fresh() }) end, "parameter groups")
  local opt = optim.Adam({ p })
  check_error(function() opt:load_state_dict({ state = {}, param_groups = {} }) end,
    "different number of parameter groups")
  check_error(function()
    opt:load_state_dict({ state = {}, param_groups = { { params = { 1, 2 } } } })
  end, "doesn't match the size")
  check_error(function() opt:load_state_dict(5) end, "load_state_dict")
end

-- ---- schedulers ----

-- Expected lrs: torch 1.13, SGD([{params: [p]}, {params: [q], lr: 0.5}],
-- lr=0.1, momentum=0.9); the scheduler built as in each test; 12 (15 for
-- the plateau ones) rounds of opt.step(); sched.step(); get_last_lr(),
-- printed with %.17g.
local W = {}
W.StepLR = { {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.050000000000000003, 0.25}, {0.050000000000000003, 0.25}, {0.050000000000000003, 0.25}, {0.025000000000000001, 0.125}, {0.025000000000000001, 0.125}, {0.025000000000000001, 0.125}, {0.012500000000000001, 0.0625}, {0.012500000000000001, 0.0625}, {0.012500000000000001, 0.0625}, {0.0062500000000000003, 0.03125} }
W.MultiStepLR = { {0.10000000000000001, 0.5}, {0.029999999999999999, 0.14999999999999999}, {0.029999999999999999, 0.14999999999999999}, {0.029999999999999999, 0.14999999999999999}, {0.0026999999999999997, 0.0135}, {0.0026999999999999997, 0.0135}, {0.0026999999999999997, 0.0135}, {0.0026999999999999997, 0.0135}, {0.00080999999999999985, 0.0040499999999999998}, {0.00080999999999999985, 0.0040499999999999998}, {0.00080999999999999985, 0.0040499999999999998}, {0.00080999999999999985, 0.0040499999999999998} }
W.ExponentialLR = { {0.080000000000000016, 0.40000000000000002}, {0.064000000000000015, 0.32000000000000006}, {0.051200000000000016, 0.25600000000000006}, {0.040960000000000017, 0.20480000000000007}, {0.032768000000000012, 0.16384000000000007}, {0.026214400000000013, 0.13107200000000005}, {0.020971520000000011, 0.10485760000000005}, {0.016777216000000008, 0.083886080000000043}, {0.013421772800000007, 0.067108864000000032}, {0.010737418240000006, 0.05368709120000003}, {0.008589934592000005, 0.042949672960000025}, {0.0068719476736000045, 0.03435973836800002} }
W.CosineAnnealingLR = { {0.091405764746872634, 0.45320916362186214}, {0.068905764746872628, 0.33070916362186215}, {0.041094235253127359, 0.17929083637813789}, {0.018594235253127367, 0.0567908363781379}, {0.01, 0.01}, {0.018594235253127367, 0.056790836378137872}, {0.041094235253127387, 0.17929083637813795}, {0.068905764746872669, 0.33070916362186226}, {0.091405764746872689, 0.45320916362186237}, {0.10000000000000006, 0.50000000000000022}, {0.091405764746872717, 0.45320916362186248}, {0.068905764746872683, 0.33070916362186231} }
W.CosineAnnealingWarmRestarts = { {0.075250000000000011, 0.37524999999999997}, {0.025750000000000012, 0.12575000000000006}, {0.10000000000000001, 0.5}, {0.093368257487329728, 0.46657333824421748}, {0.075250000000000011, 0.37524999999999997}, {0.050500000000000003, 0.2505}, {0.025750000000000012, 0.12575000000000006}, {0.0076317425126702842, 0.034426661755782545}, {0.10000000000000001, 0.5}, {0.09831332840130888, 0.49149849365912252}, {0.093368257487329728, 0.46657333824421748}, {0.085501785668734107, 0.42692314190604358} }
W.OneCycleLR = { {0.34978965421958308, 0.69957930843916616}, {0.87928515912212868, 1.7585703182442574}, {0.99441543545091171, 1.9888308709018234}, {0.93301296984141169, 1.8660259396828234}, {0.81174565394976295, 1.6234913078995259}, {0.64737899769510332, 1.2947579953902066}, {0.46263710266697505, 0.92527420533395011}, {0.28306099820869923, 0.56612199641739847}, {0.1334775301888306, 0.2669550603776612}, {0.034566987425395219, 0.069133974850790439}, {3.9999999999999998e-06, 7.9999999999999996e-06}, {0.034566987425395164, 0.069133974850790328} }  -- momentum after: [0.9465436874322102, 0.9465436874322102]
W.LinearLR = { {0.041250000000000002, 0.20624999999999999}, {0.057500000000000009, 0.28749999999999998}, {0.07375000000000001, 0.36874999999999997}, {0.090000000000000024, 0.45000000000000001}, {0.090000000000000024, 0.45000000000000001}, {0.090000000000000024, 0.45000000000000001}, {0.090000000000000024, 0.45000000000000001}, {0.090000000000000024, 0.45000000000000001}, {0.090000000000000024, 0.45000000000000001}, {0.090000000000000024, 0.45000000000000001}, {0.090000000000000024, 0.45000000000000001}, {0.090000000000000024, 0.45000000000000001} }
W.ConstantLR = { {0.050000000000000003, 0.25}, {0.050000000000000003, 0.25}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5} }
W.LambdaLR = { {0.050000000000000003, 0.45000000000000001}, {0.033333333333333333, 0.40500000000000003}, {0.025000000000000001, 0.36450000000000005}, {0.020000000000000004, 0.32805000000000001}, {0.016666666666666666, 0.29524500000000004}, {0.014285714285714285, 0.26572050000000003}, {0.012500000000000001, 0.23914845000000004}, {0.011111111111111112, 0.21523360500000005}, {0.010000000000000002, 0.19371024450000005}, {0.0090909090909090922, 0.17433922005000005}, {0.0083333333333333332, 0.15690529804500003}, {0.0076923076923076927, 0.14121476824050005} }
W.SequentialLR = { {0.010000000000000002, 0.050000000000000003}, {0.10000000000000002, 0.5}, {0.10000000000000001, 0.5}, {0.090000000000000011, 0.45000000000000001}, {0.081000000000000016, 0.40500000000000003}, {0.07290000000000002, 0.36450000000000005}, {0.065610000000000016, 0.32805000000000006}, {0.059049000000000018, 0.29524500000000009}, {0.05314410000000002, 0.26572050000000008}, {0.047829690000000022, 0.23914845000000007}, {0.043046721000000024, 0.21523360500000008}, {0.03874204890000002, 0.19371024450000007} }
W.ReduceLROnPlateau = { {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.050000000000000003, 0.25}, {0.050000000000000003, 0.25}, {0.050000000000000003, 0.25}, {0.050000000000000003, 0.25}, {0.025000000000000001, 0.20000000000000001}, {0.025000000000000001, 0.20000000000000001}, {0.025000000000000001, 0.20000000000000001}, {0.025000000000000001, 0.20000000000000001}, {0.012500000000000001, 0.20000000000000001}, {0.012500000000000001, 0.20000000000000001}, {0.012500000000000001, 0.20000000000000001} }
W.ReduceLROnPlateauMax = { {0.10000000000000001, 0.5}, {0.10000000000000001, 0.5}, {0.010000000000000002, 0.050000000000000003}, {0.010000000000000002, 0.050000000000000003}, {0.0010000000000000002, 0.005000000000000001}, {0.0010000000000000002, 0.005000000000000001}, {0.00010000000000000003, 0.00050000000000000012}, {0.00010000000000000003, 0.00050000000000000012}, {1.0000000000000004e-05, 5.0000000000000016e-05}, {1.0000000000000004e-05, 5.0000000000000016e-05}, {1.0000000000000004e-06, 5.0000000000000021e-06}, {1.0000000000000004e-06, 5.0000000000000021e-06}, {1.0000000000000005e-07, 5.0000000000000019e-07}, {1.0000000000000005e-07, 5.0000000000000019e-07}, {1.0000000000000005e-08, 5.0000000000000024e-08} }

local function sched_opt()
  local p, q = nn.Parameter(ember.zeros(2)), nn.Parameter(ember.zeros(2))
  return optim.SGD({ { params = { p } }, { params = { q }, lr = 0.5 } }, { lr = 0.1, momentum = 0.9 })
end

local MAKE = {
  StepLR = function(o) return S.StepLR(o, 3, { gamma = 0.5 }) end,
  MultiStepLR = function(o) return S.MultiStepLR(o, { 2, 5, 5, 9 }, 0.3) end,
  ExponentialLR = function(o) return S.ExponentialLR(o, 0.8) end,
  CosineAnnealingLR = function(o) return S.CosineAnnealingLR(o, 5, { eta_min = 0.01 }) end,
  CosineAnnealingWarmRestarts = function(o) return S.CosineAnnealingWarmRestarts(o, 3, { T_mult = 2, eta_min = 0.001 }) end,
  OneCycleLR = function(o) return S.OneCycleLR(o, { 1.0, 2.0 }, { total_steps = 12 }) end,
  LinearLR = function(o) return S.LinearLR(o, { start_factor = 0.25, end_factor = 0.9, total_iters = 4 }) end,
  ConstantLR = function(o) return S.ConstantLR(o, { factor = 0.5, total_iters = 3 }) end,
  LambdaLR = function(o) return S.LambdaLR(o, { function(e) return 1 / (e + 1) end, function(e) return 0.9 ^ e end }) end,
  SequentialLR = function(o)
    return S.SequentialLR(o, { S.ConstantLR(o, { factor = 0.1, total_iters = 2 }), S.ExponentialLR(o, { gamma = 0.9 }) },
      { 3 })
  end,
}

local function check_lrs(got, want, msg)
  check_eq(#got, #want, msg)
  for i = 1, #want do check_near(got[i], want[i], 1e-12, msg) end
end

function T.schedulers_match_torch()
  for name, make in pairs(MAKE) do
    local opt = sched_opt()
    local s = make(opt)
    for i, want in ipairs(W[name]) do
      opt:step()
      s:step()
      check_lrs(s:get_last_lr(), want, name .. " step " .. i)
      check_near(opt.param_groups[2].lr, want[2], 1e-12, name)
    end
  end
end

function T.one_cycle_momentum()
  local opt = sched_opt()
  local s = MAKE.OneCycleLR(opt)
  for _ = 1, 12 do s:step() end
  check_near(opt.param_groups[1].momentum, 0.9465436874322102, 1e-12) -- torch 1.13, same run
  check_error(function() s:step() end, "OneCycleLR", "tried to step 14 times", "total steps is 12")
  -- three phases, linear, cycling Adam's beta1 (torch 1.13: OneCycleLR(Adam([p], lr=0.1), 0.5,
  -- epochs=2, steps_per_epoch=3, three_phase=True, anneal_strategy="linear"), 5 steps)
  local want = { { 0.3799999999999999, 0.875 }, { 0.017647294117647056, 0.95 }, { 0.011765529411764704, 0.95 },
    { 0.0058837647058823505, 0.95 }, { 1.9999999999985307e-06, 0.95 } }
  local a = optim.Adam({ nn.Parameter(ember.zeros(2)) }, 0.1)
  local s3 = S.OneCycleLR(a, 0.5, { epochs = 2, steps_per_epoch = 3, three_phase = true, anneal_strategy = "linear" })
  for i, w in ipairs(want) do
    s3:step()
    check_near(s3:get_last_lr()[1], w[1], 1e-12)
    check_near(a.param_groups[1].betas[1], w[2], 1e-12)
  end
end

function T.plateau_matches_torch()
  local metrics = { 1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9 }
  local cases = {
    { W.ReduceLROnPlateau, function(o) return S.ReduceLROnPlateau(o, { patience = 2, factor = 0.5, cooldown = 1,
      min_lr = { 0.0, 0.2 } }) end },
    { W.ReduceLROnPlateauMax, function(o) return S.ReduceLROnPlateau(o, "max", { threshold_mode = "abs",
      threshold = 0.1, patience = 1 }) end },
  }
  for ci, c in ipairs(cases) do
    local opt = sched_opt()
    local s = c[2](opt)
    for i, m in ipairs(metrics) do
      s:step(i % 2 == 0 and ember.tensor(m, { dtype = "float64" }) or m) -- numbers or 0-dim tensors
      check_lrs(s:get_last_lr(), c[1][i], "plateau case " .. ci .. " step " .. i)
    end
  end
end

function T.scheduler_closed_form_and_state()
  -- torch 1.13: StepLR(SGD([p], lr=0.1), 3, 0.5).step(7) -> 0.025;
  -- CosineAnnealingWarmRestarts(.., 3, 2).step(5.5) -> 0.06294095225512604, T_cur 2.5, T_i 6
  local o = optim.SGD({ nn.Parameter(ember.zeros(1)) }, 0.1)
  local s = S.StepLR(o, 3, 0.5)
  s:step(7)
  check_near(s:get_last_lr()[1], 0.025, 1e-15)
  local o2 = optim.SGD({ nn.Parameter(ember.zeros(1)) }, 0.1)
  local c = S.CosineAnnealingWarmRestarts(o2, 3, 2)
  c:step(5.5)
  check_near(c:get_last_lr()[1], 0.06294095225512604, 1e-12)
  check_near(c.T_cur, 2.5, 1e-15)
  check_eq(c.T_i, 6)
  -- state_dict: a fresh scheduler loaded mid-run continues identically
  local opt = sched_opt()
  local a = MAKE.CosineAnnealingLR(opt)
  for _ = 1, 4 do a:step() end
  local sd = a:state_dict()
  check_eq(sd.optimizer, nil)
  check_eq(sd.last_epoch, 4)
  local opt2 = sched_opt()
  local b = MAKE.CosineAnnealingLR(opt2)
  b:load_state_dict(sd)
  for i = 1, #opt.param_groups do opt2.param_groups[i].lr = opt.param_groups[i].lr end
  for i = 5, 8 do
    a:step()
    b:step()
    check_lrs(b:get_last_lr(), W.CosineAnnealingLR[i])
  end
  -- SequentialLR saves its children
  local sq = MAKE.SequentialLR(sched_opt())
  local ssd = sq:state_dict()
  check_eq(#ssd._schedulers, 2)
  check_eq(ssd._schedulers[1].optimizer, nil)
end

function T.scheduler_errors()
  local o = sched_opt()
  check_error(function() S.StepLR({}, 3) end, "StepLR", "optimizer")
  check_error(function() S.StepLR(o) end, "StepLR", "missing required argument 'step_size'")
  check_error(function() S.StepLR(o, 0) end, "StepLR", "step_size")
  check_error(function() S.LinearLR(o, { start_factor = 2 }) end, "LinearLR", "starting multiplicative factor")
  check_error(function() S.LambdaLR(o, { function() return 1 end }) end, "LambdaLR", "expected 2 lr_lambdas")
  check_error(function() S.CosineAnnealingWarmRestarts(o, 0) end, "positive integer T_0")
  check_error(function() S.OneCycleLR(o, 1.0) end, "OneCycleLR", "total_steps OR (epochs AND steps_per_epoch)")
  check_error(function() S.OneCycleLR(o, { 1.0 }, 10) end, "expected 2 values for max_lr")
  check_error(function() S.OneCycleLR(optim.Adagrad({ nn.Parameter(ember.zeros(1)) }), 1.0, 10) end,
    "must support momentum")
  check_error(function() S.ReduceLROnPlateau(o, "middle") end, "mode middle is unknown")
  check_error(function() S.ReduceLROnPlateau(o, { factor = 1.5 }) end, "factor should be < 1.0")
  check_error(function() S.ReduceLROnPlateau(o):step("x") end, "metrics")
  check_error(function() S.SequentialLR(o, { S.ExponentialLR(o, 0.9) }, { 3 }) end, "one more than the number")
  check_error(function() S.StepLR(optim.SGD({ nn.Parameter(ember.zeros(1)) }, 0.1), 3, { last_epoch = 5 }) end,
    "initial_lr")
end

function T.help_docs()
  check(type(optim.__doc) == "string" and optim.__doc:find("SGD", 1, true))
  check(type(S.__doc) == "string" and S.__doc:find("OneCycleLR", 1, true))
  -- each class documents its signature, built from its argument spec
  check_eq(optim.SGD.__doc:match("^[^\n]*"),
    "optim.SGD(params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=false, {maximize=false})")
  check(optim.LBFGS.__doc:find("max_eval=nil", 1, true))
  check(S.StepLR.__doc:find("lr_scheduler.StepLR(optimizer, step_size, gamma=0.1, last_epoch=-1)", 1, true))
  for _, name in ipairs({ "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam" }) do
    check(optim[name].__doc:find("optim." .. name .. "(params, lr=", 1, true), name)
  end
end

function T.training_loop_matches_torch()
  -- torch 1.13, float64: Sequential(Linear(3, 4), Tanh(), Linear(4, 2)) with the weights below,
  -- x = (arange(15)/7 - 1):reshape(5, 3), y = sin(arange(10)):reshape(5, 2), Adam(lr=0.05),
  -- StepLR(2, 0.5); 4 rounds of zero_grad, mse, backward, clip_grad_norm_(1.0), step, sched step.
  local m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)):double()
  m:load_state_dict({
    ["1.weight"] = (ember.arange(12.0, { dtype = "float64" }) / 10 - 0.5):reshape(4, 3),
    ["1.bias"] = ember.tensor({ 0.1, -0.1, 0.2, 0.0 }, { dtype = "float64" }),
    ["3.weight"] = (ember.arange(8.0, { dtype = "float64" }) / 8 - 0.4):reshape(2, 4),
    ["3.bias"] = ember.tensor({ 0.05, -0.05 }, { dtype = "float64" }),
  })
  local x = (ember.arange(15.0, { dtype = "float64" }) / 7 - 1):reshape(5, 3)
  local y = ember.arange(10.0, { dtype = "float64" }):sin():reshape(5, 2)
  local opt = optim.Adam(m:parameters(), { lr = 0.05 })
  local sched = S.StepLR(opt, 2, 0.5)
  local losses = { 0.53450360246138939, 0.47156703493805752, 0.43662487724612042, 0.42784997835712613 }
  local norms = { 0.45658437008353703, 0.29563010983951094, 0.17024848357350172, 0.11889281355567521 }
  for i = 1, 4 do
    opt:zero_grad()
    local loss = ((m(x) - y) ^ 2):mean()
    loss:backward()
    check_near(nn.utils.clip_grad_norm_(m:parameters(), 1.0):item(), norms[i], 1e-12, "norm " .. i)
    opt:step()
    sched:step()
    check_near(loss:item(), losses[i], 1e-12, "loss " .. i)
  end
  local sd = m:state_dict()
  check_tensor(sd["1.weight"]:reshape(-1), { -0.36487752227107889, -0.26255225992749132, -0.16038677825752576,
    -0.34477928840020222, -0.24373533147618587, -0.14226841093456619, -0.039424977422592822, 0.060984753615195619,
    0.16149964710583584, 0.28461011018016302, 0.38172572543076744, 0.47923589356167551 }, 1e-12)
  check_tensor(sd["1.bias"], { 0.071579525324367038, -0.072543054630324899, 0.34296808886128644, -0.14493910959105274 },
    1e-12)
  check_tensor(sd["3.weight"]:reshape(-1), { -0.26911815766908115, -0.17495539199789134, -0.14916666919386948,
    -0.15956787816848211, 0.23703808952077141, 0.37026224608031888, 0.23980486864290668, 0.33846811818831102 }, 1e-12)
  check_tensor(sd["3.bias"], { 0.19408389765628337, 0.097004243195013495 }, 1e-12)
end

return T
