-- test_composite.lua -- composite ops (kernels: {Composite: ...} in
-- ops.yaml; Note [Composite ops]) and op namespaces (namespace: in ops.yaml).
-- Expected numbers come from PyTorch 1.13.
local ember = ember or require "ember"
local T = {}

local function t(v) return ember.tensor(v, { dtype = "float64" }) end
local x = t({ { 0.5, -1.2, 0.8 }, { 1.5, 0.3, -0.7 } })
local w = t({ { 0.1, 0.2, 0.3 }, { -0.4, 0.5, -0.6 } })
local b = t({ 0.25, -0.5 })

function T.linear_matches_pytorch()
  local F = ember.nn.functional
  check_tensor(F.linear(x, w, b), { { 0.3, -1.78 }, { 0.25, -0.53 } }, 1e-12)
  check_tensor(F.linear(x[1], w, b), { 0.3, -1.78 }, 1e-12)
  check_tensor(F.linear(x, w[1]), { 0.05, 0 }, 1e-12)
  check_shape(F.linear(ember.ones(4, 5, 3, { dtype = "float64" }), w, b), { 4, 5, 2 })
end

function T.addmm_matches_pytorch()
  check_tensor(ember.addmm(b, x, w:t(), { beta = 0.5, alpha = 2 }), { { 0.225, -2.81 }, { 0.125, -0.31 } }, 1e-12)
  check_tensor(b:addmm(x, w:t()), { { 0.3, -1.78 }, { 0.25, -0.53 } }, 1e-12)
  -- integer addmm truncates alpha and beta (PyTorch 1.13)
  local i3 = ember.ones(3, 3, { dtype = "int64" })
  local ri = i3:addmm(i3, i3, { alpha = 2.7, beta = 1.9 })
  check_eq(ri.dtype, "int64")
  check_eq(ri[1][1]:item(), 7)
  -- beta = 0 ignores self's values: NaN does not propagate
  local nan = t({ { 0 / 0 } })
  check_tensor(ember.addmm(nan, x, w:t(), { beta = 0 }), { { 0.05, -1.28 }, { 0, -0.03 } }, 1e-12)
end

function T.composite_gradients_come_from_parts()
  local xs = x:clone():requires_grad_()
  local ws = w:clone():requires_grad_()
  local bs = b:clone():requires_grad_()
  local y = ember.nn.functional.linear(xs, ws, bs)
  check(y.grad_fn ~= nil)
  y:sum():backward()
  check_tensor(bs.grad, { 2, 2 })
  check_tensor(ws.grad, { { 2, -0.9, 0.1 }, { 2, -0.9, 0.1 } }, 1e-12)
  check_tensor(xs.grad, { { -0.3, 0.7, -0.3 }, { -0.3, 0.7, -0.3 } }, 1e-12)
end

function T.composite_errors_name_the_op()
  local F = ember.nn.functional
  check_error(function() return ember.addmm(b, x, w) end,
    "addmm: mat1 and mat2 shapes cannot be multiplied ({2,3} and {2,3})")
  check_error(function() return ember.addmm(ember.ones(3, 2, 2, { dtype = "float64" }), x, w:t()) end,
    "addmm: self of shape {3,2,2} does not broadcast to the product's shape {2,2}")
  check_error(function() return ember.addmm(b:to("float32"), x, w:t()) end,
    "addmm: self and mat2 must have the same dtype (float32 and float64)")
  check_error(function() return ember.addmm(b, x[1], w:t()) end, "addmm: mat1 must be a matrix, got a 1-D tensor")
  check_error(function() return F.linear(x, ember.ones(2, 4, { dtype = "float64" })) end,
    "linear: input {2,3} and weight {2,4}: input's last dim must be weight's in_features (4)")
  check_error(function() return F.linear(x, ember.ones(2, 2, 3)) end, "linear: weight must be 1-D or 2-D")
  check_error(function() return F.linear(x) end, "linear: missing argument 'weight'")
end

function T.logsumexp_and_softmax_match_pytorch()
  local a = t({ { 1, 2, 3 }, { 4, 5, 7 } })
  check_tensor(a:logsumexp(2), { 3.4076059644443806, 7.169846019556286 }, 1e-12)
  check_tensor(ember.logsumexp(a, { 1, 2 }), 7.1928119148004015, 1e-12)
  check_tensor(a:logsumexp(1, true), { { 4.048587351573742, 5.048587351573742, 7.01814992791781 } }, 1e-12)
  check_tensor(a:softmax(2), { { 0.09003057317038046, 0.24472847105479764, 0.6652409557748219 },
    { 0.04201006613406606, 0.11419519938459449, 0.8437947344813395 } }, 1e-12)
  check_tensor(ember.nn.functional.log_softmax(a, 1), { { -3.048587351573742, -3.048587351573742, -4.01814992791781 },
    { -0.048587351573741945, -0.048587351573741945, -0.01814992791781 } }, 1e-12)
  -- edges, as PyTorch 1.13
  local inf = math.huge
  check_tensor(ember.logsumexp(ember.tensor({ 1, 2 }), 1), 2.3132617, 1e-6) -- integers compute in float32
  check_eq(ember.logsumexp(ember.tensor({ 1, 2 }), 1).dtype, "float32")
  check_tensor(ember.logsumexp(ember.zeros(2, 0), 2), { -inf, -inf })
  check_shape(ember.logsumexp(ember.zeros(2, 0), 1), { 0 })
  check_tensor(ember.logsumexp(ember.tensor({ inf, 1 }), 1), inf)
  check_tensor(ember.logsumexp(ember.tensor({ -inf, -inf }), 1), -inf)
  local nan2 = ember.softmax(ember.tensor({ -inf, -inf }), 1):tolist()
  check(nan2[1] ~= nan2[1] and nan2[2] ~= nan2[2], "softmax of an all -inf row is NaN")
  check_tensor(ember.softmax(ember.tensor(3.0), 1), 1)
  check_shape(ember.softmax(ember.zeros(2, 0), 2), { 2, 0 })
  check_tensor(ember.log_softmax(ember.tensor({ 1, 2, 3 }), 1, { dtype = "float64" }),
    { -2.4076059644443806, -1.4076059644443806, -0.4076059644443806 }, 1e-12)
  check_error(function() return ember.softmax(ember.tensor({ 1, 2 }), 1) end,
    "softmax: expected a floating tensor, got int64")
  check_error(function() return a:softmax(3) end, "softmax: dim 3 out of range")
  check_error(function() return ember.logsumexp(a, {}) end, "logsumexp: dim must name at least one dim")
  check_error(function() return ember.logsumexp(a, { 4 }) end, "logsumexp: dim 4 out of range")
end

function T.softmax_gradient_matches_pytorch()
  local a = t({ { 1, 2, 3 }, { 4, 5, 7 } }):requires_grad_()
  local w = t({ { 0.5, -1, 2 }, { 1, 1, -3 } })
  local y = a:softmax(2) * w
  y:sum():backward()
  check_tensor(a.grad, { { -0.05678847003696693, -0.5214597727496746, 0.5782482427866417 },
    { 0.1417914903965511, 0.3854292317750701, -0.5272207221716212 } }, 1e-12)
end

function T.namespaces_place_the_function()
  local F = ember.nn.functional
  check(type(F) == "table" and type(F.linear) == "function")
  check(ember.linear == nil, "linear lives only in ember.nn.functional")
  check(x.linear == nil, "linear has no method variant")
  check(require "ember.nn.functional" == F)
  check(type(ember.addmm) == "function" and type(x.addmm) == "function")
end

function T.stdlib_modules_are_preloaded()
  check(require "ember.autograd" == ember.autograd)
  check(package.preload["ember.autograd"] ~= nil)
  check(require "ember" == ember)
end

-- a bias of another dtype: PyTorch adds it in place for a 1-d input (the
-- product's dtype stays) and refuses it where it folds into one addmm
function T.linear_bias_dtype_like_pytorch()
  local F = ember.nn.functional
  local b64 = ember.tensor({ 0.5, -1.0 }, { dtype = "float64" })
  local y = F.linear(ember.tensor({ 1.0, 2.0, 3.0 }), ember.ones(2, 3), b64)
  check_eq(y.dtype, "float32")
  check_tensor(y, { 6.5, 5.0 })
  check_error(function() F.linear(ember.ones(5, 4, 3), ember.ones(2, 3), b64) end, "linear", "float64")
  check_error(function() F.linear(ember.ones(4, 3), ember.ones(2, 3), b64) end, "linear")
end

return T
