-- test_act2.lua -- the act2 family (schema/ops/act2.yaml): silu_, mish_,
-- hardsigmoid_, hardswish_ and torch.nn.functional's `inplace` argument,
-- against PyTorch 1.13 (reference numbers computed with it): values,
-- gradients through a non-leaf, the version counter (which tensor the
-- in-place node saves), leaves refused, integer dtypes, non-contiguous,
-- overlapping, empty and 0-dim inputs, and the error messages.
local ember = ember or require "ember"
local T = {}
local F = ember.nn.functional

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end

-- F.X(x, inplace = true) of x = X, the gradient of sum(G * y) wrt x's leaf
local X = { -4.1, -2.2, -0.4, 0.0, 0.7, 1.9, 3.6 }
local G = { 1, 2, 3, 4, 5, 6, 7 }
local REF = {
  silu = { { -0.06684024742290787, -0.21945107606330733, -0.1605249359550192, 0.0, 0.46773144051771626,
             1.652793898710304, 3.5042508231232827 },
           { -0.04944808495986802, -0.1956204695369321, 0.915624124772809, 2.0, 4.116933917366713,
             6.509604109408026, 7.466238801402298 } },
  mish = { { -0.06738500537843638, -0.23033609787797713, -0.18891648239351463, 0.0, 0.5611483776438518,
             1.8367436005523152, 3.594910319955246 },
           { -0.050386825283319524, -0.2246945776292029, 1.0427183970873126, 2.4, 4.84397434100093,
             6.449565546378279, 7.059414707091752 } },
  -- torch rounds hardsigmoid's 1/6 to float32 in its gradient (~1e-8)
  hardsigmoid = { { 0.0, 0.1333333333333333, 0.43333333333333335, 0.5, 0.6166666666666667, 0.8166666666666668, 1.0 },
                  { 0.0, 0.3333333432674408, 0.5000000149011612, 0.6666666865348816, 0.833333358168602,
                    1.0000000298023224, 0.0 } },
  hardswish = { { -0.0, -0.2933333333333333, -0.17333333333333334, 0.0, 0.43166666666666664, 1.5516666666666667, 3.6 },
                { 0.0, -0.4666666666666668, 1.1, 2.0, 3.6666666666666665, 6.8, 7.0 } },
}

function T.inplace_activations_values_and_gradients()
  for name, ref in pairs(REF) do
    for _, form in ipairs({ "op_", "positional", "options" }) do
      local a = f64(X):requires_grad_()
      local h = a * 1
      local y
      if form == "op_" then y = F[name .. "_"](h)
      elseif form == "positional" then y = F[name](h, true)
      else y = F[name](h, { inplace = true }) end
      check(rawequal(y, h), name .. " " .. form .. " returns its input")
      check_tensor(h, ref[1], 1e-12, name)
      y:backward(f64(G))
      check_tensor(a.grad, ref[2], 1e-7, name .. " grad")
    end
  end
end

-- PyTorch's silu_, mish_, hardsigmoid_, hardswish_ (and hardtanh_, relu6,
-- threshold_) save self's old value: a later write to the result is no
-- error; relu_, elu_, selu_, celu_, leaky_relu_ save the result: it is
function T.inplace_node_saves_what_pytorch_saves()
  local ok_after = { silu = {}, mish = {}, hardsigmoid = {}, hardswish = {}, hardtanh = {}, relu6 = {},
                     threshold = { 0.1, 20 } }
  local err_after = { relu = {}, elu = {}, selu = {}, celu = {}, leaky_relu = {} }
  for name, args in pairs(ok_after) do
    local a = f64({ -1.5, 0.5, 2 }):requires_grad_()
    local h = a * 1
    local args2 = { table.unpack(args) }
    args2[#args2 + 1] = { inplace = true }
    local y = F[name](h, table.unpack(args2))
    check(rawequal(y, h), name)
    y:mul_(2)
    y:sum():backward()
    check(a.grad ~= nil, name .. ": backward after a write")
  end
  for name, args in pairs(err_after) do
    local a = f64({ -1.5, 0.5, 2 }):requires_grad_()
    local args2 = { table.unpack(args) }
    args2[#args2 + 1] = { inplace = true }
    local y = F[name](a * 1, table.unpack(args2))
    y:mul_(2)
    check_error(function() y:sum():backward() end, "modified by an in-place operation")
  end
end

function T.functional_inplace_all_activations()
  -- F.X(a, ..., true) of a = {-2, -0.5, 0.25, 1.5, 7} (float32) in PyTorch
  local x = { -2, -0.5, 0.25, 1.5, 7 }
  local cases = {
    { "relu", {}, { 0.0, 0.0, 0.25, 1.5, 7.0 } },
    { "relu6", {}, { 0.0, 0.0, 0.25, 1.5, 6.0 } },
    { "elu", { 1.5 }, { -1.2969970703125, -0.5902040004730225, 0.25, 1.5, 7.0 } },
    { "leaky_relu", { 0.2 }, { -0.4000000059604645, -0.10000000149011612, 0.25, 1.5, 7.0 } },
    { "hardtanh", { -0.5, 0.5 }, { -0.5, -0.5, 0.25, 0.5, 0.5 } },
    { "selu", {}, { -1.5201665163040161, -0.6917581558227539, 0.2626752555370331, 1.5760514736175537,
                    7.354907035827637 } },
    { "celu", { 0.5 }, { -0.49084219336509705, -0.31606027483940125, 0.25, 1.5, 7.0 } },
    { "silu", {}, { -0.23840583860874176, -0.1887703388929367, 0.140544131398201, 1.226361632347107,
                    6.993622779846191 } },
    { "mish", {}, { -0.2525014579296112, -0.22074376046657562, 0.1695723980665207, 1.4033782482147217,
                    6.999988555908203 } },
    { "hardsigmoid", {}, { 0.1666666716337204, 0.4166666567325592, 0.5416666865348816, 0.75, 1.0 } },
    { "hardswish", {}, { -0.3333333432674408, -0.2083333283662796, 0.1354166716337204, 1.125, 7.0 } },
    { "threshold", { 0.3, 20 }, { 20.0, 20.0, 20.0, 1.5, 7.0 } },
  }
  for _, c in ipairs(cases) do
    local name, args, want = c[1], c[2], c[3]
    -- not in place: a new tensor, input untouched
    local a = ember.tensor(x)
    local r = F[name](a, table.unpack(args))
    check(not rawequal(r, a), name)
    check_tensor(r, want, 1e-6, name)
    check_tensor(a, x, 0, name .. " input kept")
    local p = { table.unpack(args) }
    p[#p + 1] = false
    check_tensor(F[name](a, table.unpack(p)), want, 1e-6, name .. " inplace = false")
    check_tensor(a, x, 0, name .. " input kept")
    -- in place, positional and in the options table
    p[#p] = true
    r = F[name](a, table.unpack(p))
    check(rawequal(r, a), name .. " returns input")
    check_tensor(a, want, 1e-6, name .. " in place")
    local b = ember.tensor(x)
    local q = { table.unpack(args) }
    q[#q + 1] = { inplace = true }
    check(rawequal(F[name](b, table.unpack(q)), b), name .. " {inplace = true}")
    check_tensor(b, want, 1e-6, name .. " {inplace = true}")
    -- a leaf that requires grad is refused, as in PyTorch
    check_error(function() F[name](ember.tensor(x, { requires_grad = true }), table.unpack(p)) end,
      name, "leaf")
  end
end

function T.gradients_through_functional_inplace()
  -- PyTorch: y = F.leaky_relu(a * 2, 0.1, True); y.backward([1, 2, 3])
  local a = ember.tensor({ -1, 0.5, 2 }, { requires_grad = true })
  local y = F.leaky_relu(a * 2, 0.1, true)
  y:backward(ember.tensor({ 1, 2, 3 }))
  check_tensor(a.grad, { 0.2, 4, 6 }, 1e-6)
  -- relu6 in place is hardtanh_ (its gradient 0 at the bound 6)
  a = ember.tensor({ -1, 0.5, 2 }, { requires_grad = true })
  y = F.relu6(a * 3, true)
  y:backward(ember.tensor({ 1, 2, 3 }))
  check_tensor(a.grad, { 0, 6, 0 })
  -- not in place: the same node as the op itself
  a = f64({ -1, 0.5, 2 }):requires_grad_()
  F.silu(a, false):sum():backward()
  local b = f64({ -1, 0.5, 2 }):requires_grad_()
  F.silu(b * 1, true):sum():backward()
  check_tensor(b.grad, a.grad:tolist(), 1e-15)
end

function T.ember_namespace_keeps_one_argument()
  -- torch.relu(x) takes no inplace: neither does ember.relu (nor selu, celu,
  -- threshold), while ember.nn.functional's take PyTorch's F signature
  check_error(function() ember.relu(ember.ones(2), true) end, "relu", "at most 1")
  check_error(function() ember.selu(ember.ones(2), true) end, "selu")
  check_error(function() ember.threshold(ember.ones(2), 0, 1, true) end, "threshold")
  check_tensor(ember.relu(ember.tensor({ -1, 1 })), { 0, 1 })
  check_tensor(ember.celu(ember.tensor({ 1.0 }), 0.5), { 1 })
  check_tensor(ember.tensor({ -1, 2 }):relu(), { 0, 2 })
end

function T.integer_and_special_inputs()
  -- integers: relu, relu6, hardtanh, threshold in place (PyTorch too)
  local i = ember.tensor({ -3, 2, 9 })
  F.relu(i, true)
  check_tensor(i, { 0, 2, 9 })
  check(i.dtype == "int64")
  i = ember.tensor({ -3, 2, 9 })
  F.relu6(i, true)
  check_tensor(i, { 0, 2, 6 })
  i = ember.tensor({ -3, 2, 9 })
  F.hardtanh(i, -2, 2, true)
  check_tensor(i, { -2, 2, 2 })
  i = ember.tensor({ -3, 2, 9 })
  F.threshold(i, 1, 5, true)
  check_tensor(i, { 5, 2, 9 })
  -- floating only for the others, the error names the function called
  for _, name in ipairs({ "silu", "mish", "hardswish", "hardsigmoid", "elu", "leaky_relu", "selu", "celu" }) do
    check_error(function() F[name](ember.tensor({ 1, 2 }), { inplace = true }) end, name, "int64")
  end
  check_error(function() F.silu_(ember.tensor({ 1, 2 })) end, "silu_", "int64")
  -- a non-contiguous input is written through its strides
  local m = ember.tensor({ { -1, 2 }, { -3, 4 } }, { dtype = "float32" })
  F.silu(m:t(), true)
  check_tensor(m, { { -0.2689414322376251, 1.7615940570831299 }, { -0.14227761328220367, 3.9280550479888916 } },
    1e-6)
  -- an input whose elements share memory is refused (PyTorch too)
  check_error(function() F.silu(ember.ones(1):expand(3), true) end, "silu")
  check_error(function() F.hardswish_(ember.ones(1):expand(3)) end, "hardswish_")
  check_error(function() F.relu(ember.ones(1):expand(3), true) end, "relu")
  -- empty and 0-dim
  local e = ember.empty(0)
  check(rawequal(F.mish(e, true), e))
  local z = ember.tensor(-1.5)
  F.hardswish(z, true)
  check_tensor(z, -0.375)
  -- bfloat16 computes in float32 (PyTorch: 0.310546875)
  local bf = ember.tensor({ 0.5 }, { dtype = "bfloat16" })
  F.silu(bf, true)
  check_tensor(bf, { 0.310546875 }, 0)
  -- float16 too (PyTorch 1.13 has no CPU kernel): rounded float32
  local h = ember.tensor({ 0.5 }, { dtype = "float16" })
  F.hardsigmoid(h, true)
  check_tensor(h, { 0.58349609375 }, 0)
end

function T.functional_errors()
  check_error(function() F.relu(ember.ones(2), "yes") end, "relu", "inplace")
  check_error(function() F.relu(ember.ones(2), true, {inplace = true}) end, "relu", "inplace")
  check_error(function() F.hardtanh(ember.tensor({ 1 }, { dtype = "uint8" }), -1, 1, true) end,
    "hardtanh", "uint8")
  -- relu6 of uint8 is fine (non-negative limits), as in PyTorch
  local u = ember.tensor({ 1, 9 }, { dtype = "uint8" })
  F.relu6(u, true)
  check_tensor(u, { 1, 6 })
end

function T.modules_with_inplace_call_the_inplace_op()
  local nn = ember.nn
  local mods = { nn.ReLU(true), nn.ReLU6(true), nn.LeakyReLU(0.2, true), nn.ELU(1.0, true), nn.SELU(true),
                 nn.CELU(1.0, true), nn.SiLU(true), nn.Mish(true), nn.Hardtanh(-1, 1, true),
                 nn.Hardsigmoid(true), nn.Hardswish(true), nn.Threshold(0.1, 20, true) }
  for _, m in ipairs(mods) do
    local x = ember.tensor({ -2.0, 0.5, 4.0 })
    check(rawequal(m(x), x), tostring(m) .. " returns its input")
    check(tostring(m):find("inplace=true", 1, true), tostring(m))
    -- through autograd: the in-place node of a non-leaf; a leaf refused
    local a = ember.tensor({ -2.0, 0.5, 4.0 }, { requires_grad = true })
    m(a * 1):sum():backward()
    check(a.grad ~= nil, tostring(m))
    check_error(function() m(ember.tensor({ -2.0, 0.5 }, { requires_grad = true })) end, "leaf")
  end
  -- not in place: a new tensor with the same values
  local x = ember.tensor({ -2.0, 0.5, 4.0 })
  local y = nn.SiLU()(x)
  check(not rawequal(y, x))
  check_tensor(x, { -2, 0.5, 4 })
  check_tensor(nn.SiLU(true)(x), y:tolist(), 0)
  check_eq(tostring(nn.ReLU()), "ReLU()")
  check_eq(tostring(nn.ReLU(true)), "ReLU(inplace=true)")
end

function T.help_names_the_functional_signature()
  local doc = ember.help and ember.help("nn.functional.relu")
  if doc then check(tostring(doc):find("inplace", 1, true), tostring(doc)) end
end

return T
