-- test_optimfused.lua -- the fused optimizer steps _fused_adam_ and
-- _fused_sgd_ (schema/ops/optimfused.yaml): optim.Adam/AdamW/SGD through
-- them against PyTorch 1.13, the same steps through the op-by-op path
-- (non-contiguous gradients), one direct step against the formula, bad input.
local T = {}
local optim = ember.optim

-- p0 = {{0.5, -1.2, 2}, {0.3, -0.7, 1.1}}, loss = sum(p^2) + sum(sin p), three
-- steps of zero_grad, backward, step; expected: torch 1.13 float64, the same
-- loop with torch.optim.NAME([p], **options).
local P0 = { { 0.5, -1.2, 2.0 }, { 0.3, -0.7, 1.1 } }
local CASES = {
  { "Adam", { lr = 0.1 }, { { 0.20126053142915717, -0.9027206773359537, 1.7003317664557902 }, { 0.0019531142106488375, -0.4204228296869093, 0.8005239015826249 } } },
  { "Adam", { lr = 0.1, weight_decay = 0.1, amsgrad = true }, { { 0.2013230537137086, -0.9026206650814415, 1.700345847189499 }, { 0.002061122769543733, -0.41761307574851975, 0.8005519775580315 } } },
  { "Adam", { lr = 0.05, betas = { 0.8, 0.99 }, eps = 1e-6, maximize = true }, { { 0.6503366689781082, -1.3505533644801049, 2.1501427996700597 }, { 0.4504353671076045, -0.8509944148727189, 1.250186286861397 } } },
  { "AdamW", { lr = 0.1, amsgrad = true }, { { 0.20007021730662433, -0.899474240610093, 1.6946449320915202 }, { 0.001361595613542252, -0.4189223057032223, 0.7975340701491398 } } },
  { "AdamW", { lr = 0.1, weight_decay = 0.5 }, { { 0.1451361748720677, -0.7494160177195491, 1.430225292638845 }, { -0.025690137707213553, -0.3531807899254034, 0.658770238055363 } } },
  { "SGD", { lr = 0.1 }, { { 0.024896051941923784, -0.7469661164139291, 1.0315122043954772 }, { -0.08669436290935117, -0.5548010913586242, 0.39795282795912057 } } },
  { "SGD", { lr = 0.1, momentum = 0.9 }, { { -0.40540867187806096, -0.31740786980827757, 0.16462881168771398 }, { -0.43898106215909666, -0.41847295199020196, -0.22973924034457588 } } },
  { "SGD", { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01 }, { { -0.5806974660825577, -0.23216004574382187, -0.3740887337761859 }, { -0.5699231176159825, -0.3838376519053363, -0.5519623993001563 } } },
  { "SGD", { lr = 0.1, momentum = 0.9, dampening = 0.3, maximize = true }, { { 1.4729309345014228, -2.36556820464076, 3.850045823419596 }, { 1.1157337359949637, -1.0571609601528642, 2.446228625936021 } } },
}

-- p after three steps of optim[name](opts) in dtype; strided: the
-- gradient is replaced by a non-contiguous copy, so the op-by-op path runs.
local function train(name, opts, dtype, strided)
  local p = ember.tensor(P0, { dtype = dtype, requires_grad = true })
  local opt = optim[name]({ p }, opts)
  for _ = 1, 3 do
    opt:zero_grad()
    local loss = (p * p):sum() + p:sin():sum()
    loss:backward()
    if strided then p.grad = p.grad:t():contiguous():t() end
    opt:step()
  end
  return p:detach()
end

function T.fused_steps_match_torch()
  for i, c in ipairs(CASES) do
    check_tensor(train(c[1], c[2], "float64"), c[3], 1e-12, "case " .. i .. " float64")
    check_tensor(train(c[1], c[2], "float32"), c[3], 2e-6, "case " .. i .. " float32")
  end
end

function T.fused_and_op_by_op_agree()
  for i, c in ipairs(CASES) do
    local a, b = train(c[1], c[2], "float64"), train(c[1], c[2], "float64", true)
    check_tensor(a, b:tolist(), 1e-14, "case " .. i .. " float64")
    a, b = train(c[1], c[2], "float32"), train(c[1], c[2], "float32", true)
    check_tensor(a, b:tolist(), 1e-6, "case " .. i .. " float32")
  end
end

function T.fused_state_is_the_optimizers_state()
  -- the buffers the fused step writes are the ones state_dict hands out
  local p = ember.tensor(P0, { dtype = "float64", requires_grad = true })
  local opt = optim.SGD({ p }, { lr = 0.1, momentum = 0.9 })
  local loss = (p * p):sum()
  loss:backward()
  opt:step()
  local buf = opt:state_dict().state[1].momentum_buffer
  check_tensor(buf, { { 1.0, -2.4, 4.0 }, { 0.6, -1.4, 2.2 } }, 1e-15, "first buffer = grad")
  local a = optim.Adam({ p }, { lr = 0.1 })
  a:step()
  local st = a:state_dict().state[1]
  check_eq(st.step, 1, "Adam step")
  check_tensor(st.exp_avg, { { 0.1, -0.24, 0.4 }, { 0.06, -0.14, 0.22 } }, 1e-14, "exp_avg")
end

function T.direct_adam_step_matches_the_formula()
  for _, dt in ipairs({ "float64", "float32" }) do
    local p = ember.tensor({ 1.0, -2.0, 0.5 }, { dtype = dt })
    local g = ember.tensor({ 0.5, 0.25, -1.0 }, { dtype = dt })
    local m = ember.tensor({ 0.1, -0.1, 0.0 }, { dtype = dt })
    local v = ember.tensor({ 0.01, 0.04, 0.0 }, { dtype = dt })
    local mx = ember.tensor({ 0.02, 0.0, 0.0 }, { dtype = dt })
    local r = ember._fused_adam_(p, g, m, v, mx, { lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
      weight_decay = 0.1, amsgrad = true, step = 3 })
    check_tensor(r, p:tolist(), 0, "returns self's values")
    local want_p, want_m, want_v, want_mx = {}, {}, {}, {}
    local P, G, M, V, MX = { 1.0, -2.0, 0.5 }, { 0.5, 0.25, -1.0 }, { 0.1, -0.1, 0.0 }, { 0.01, 0.04, 0.0 }, { 0.02, 0.0, 0.0 }
    local ss, bc2 = 0.01 / (1 - 0.9 ^ 3), math.sqrt(1 - 0.999 ^ 3)
    for i = 1, 3 do
      local gi = G[i] + 0.1 * P[i]
      want_m[i] = 0.9 * M[i] + 0.1 * gi
      want_v[i] = 0.999 * V[i] + 0.001 * gi * gi
      want_mx[i] = math.max(MX[i], want_v[i])
      want_p[i] = P[i] - ss * want_m[i] / (math.sqrt(want_mx[i]) / bc2 + 1e-8)
    end
    local tol = dt == "float64" and 1e-14 or 1e-6
    check_tensor(p, want_p, tol, dt .. " p")
    check_tensor(m, want_m, tol, dt .. " exp_avg")
    check_tensor(v, want_v, tol, dt .. " exp_avg_sq")
    check_tensor(mx, want_mx, tol, dt .. " max_exp_avg_sq")
  end
end

function T.direct_sgd_step_and_edges()
  local p = ember.tensor({ 1.0, -2.0 })
  local buf = ember.tensor({ 0.5, 0.5 })
  ember._fused_sgd_(p, ember.tensor({ 1.0, 1.0 }), buf, { lr = 0.5, momentum = 0.5, dampening = 0.5 })
  check_tensor(buf, { 0.75, 0.75 }, 1e-7, "buffer")
  check_tensor(p, { 0.625, -2.375 }, 1e-7, "p")
  -- no momentum: the buffer is neither needed nor touched
  ember._fused_sgd_(p, ember.tensor({ 1.0, 2.0 }), nil, { lr = 0.5 })
  check_tensor(p, { 0.125, -3.375 }, 1e-7, "plain step")
  -- empty parameters, NaN and inf propagate
  local e = ember.empty(0)
  ember._fused_adam_(e, ember.empty(0), ember.empty(0), ember.empty(0), nil, { lr = 0.1, beta1 = 0.9,
    beta2 = 0.999, eps = 1e-8, step = 1 })
  check_shape(e, { 0 })
  local q = ember.tensor({ 1.0, 2.0 })
  ember._fused_adam_(q, ember.tensor({ 0 / 0, math.huge }), ember.zeros(2), ember.zeros(2), nil,
    { lr = 0.1, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, step = 1 })
  local l = q:tolist()
  check(l[1] ~= l[1] and l[2] ~= l[2], "NaN gradient -> NaN; inf / inf -> NaN, as in PyTorch")
  -- the version counter moves: a tensor saved for backward before the step is refused after it
  local w = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local y = (w * w):sum()
  ember.no_grad(function() ember._fused_sgd_(w, ember.tensor({ 1.0, 1.0 }), nil, { lr = 1 }) end)
  check_error(function() y:backward() end, "modified by an in-place operation")
end

function T.non_contiguous_or_half_parameters_take_the_op_by_op_path()
  local base = ember.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }, { dtype = "float64" })
  local p = base:t():detach():requires_grad_() -- a non-contiguous leaf
  local opt = optim.Adam({ p }, { lr = 0.1 })
  p:sum():backward()
  opt:step()
  check_tensor(p, { { 0.9, 2.9 }, { 1.9, 3.9 } }, 1e-7, "first Adam step is about -lr * sign(grad)")
end

function T.errors()
  local f = function() return ember.zeros(3) end
  local adam = function(p, g, m, v, mx, o)
    o = o or {}
    local opts = { lr = 0.1, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, step = o.step or 1, amsgrad = o.amsgrad }
    return ember._fused_adam_(p, g, m, v, mx, opts)
  end
  check_error(function() return adam(ember.zeros(3, { dtype = "int64" }), f(), f(), f()) end,
    "_fused_adam_", "float32 or float64", "int64")
  check_error(function() return adam(f(), ember.zeros(3, { dtype = "float64" }), f(), f()) end,
    "_fused_adam_", "grad", "dtype")
  check_error(function() return adam(f(), f(), ember.zeros(4), f()) end, "_fused_adam_", "exp_avg", "{4}", "{3}")
  check_error(function() return adam(f(), f(), f(), f(), nil, { amsgrad = true }) end,
    "_fused_adam_", "max_exp_avg_sq")
  check_error(function() return adam(f(), f(), f(), f(), nil, { step = 0 }) end, "_fused_adam_", "step", "0")
  check_error(function() return adam(ember.zeros(3, 2):t(), ember.zeros(2, 3), ember.zeros(2, 3), ember.zeros(2, 3)) end,
    "_fused_adam_", "contiguous")
  local shared = f()
  check_error(function() return adam(f(), f(), shared, shared) end, "_fused_adam_", "share memory")
  check_error(function() return ember._fused_sgd_(f(), f(), nil, { lr = 0.1, momentum = 0.9 }) end,
    "_fused_sgd_", "momentum_buffer")
  check_error(function() return ember._fused_sgd_(f(), f(), f(), { lr = 0.1, nesterov = true }) end,
    "_fused_sgd_", "Nesterov")
  check_error(function() return ember._fused_sgd_(f(), f(), ember.zeros(2), { lr = 0.1, momentum = 0.5 }) end,
    "_fused_sgd_", "momentum_buffer", "{2}")
  check_error(function() return ember._fused_sgd_(f(), f(), nil, {}) end, "_fused_sgd_", "lr")
end

return T
