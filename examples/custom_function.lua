-- custom_function.lua -- a new differentiable operation written in Lua with
-- ember.autograd.Function: a numerically stable softplus, its gradient
-- checked against finite differences (gradcheck) and, because its backward
-- is made of differentiable ops, its second derivative too (gradgradcheck);
-- then used as the activation of a tiny network fitted to |x| with SGD.
--   ember examples/custom_function.lua [--short]
-- --short runs 300 training steps instead of 2000 (make test runs it).
local ag, nn, F, optim = ember.autograd, ember.nn, ember.nn.functional, ember.optim
local short = arg and arg[1] == "--short"
ember.manual_seed(0)

-- softplus(x) = log(1 + exp(x)). Written that way it overflows for large x
-- (exp(100) is inf in float32) and loses everything for very negative x;
-- max(x, 0) + log1p(exp(-|x|)) is the same function and never overflows.
-- Its derivative is sigmoid(x).
local Softplus = ag.Function {
  name = "StableSoftplus",
  forward = function(ctx, x)
    ctx:save_for_backward(x)
    return x:clamp_min(0) + (-x:abs()):exp():log1p()
  end,
  backward = function(ctx, grad)
    local x = ctx.saved_tensors[1]
    return grad * x:sigmoid() -- differentiable in x and grad: double backward works
  end,
}

-- 1. the forward pass: the naive formula against the stable one
local x = ember.tensor({ -100, -1, 0, 1, 100 }, { dtype = "float32" })
print("x                      ", x)
print("log(1 + exp(x)), naive ", (x:exp() + 1):log())
print("StableSoftplus(x)      ", Softplus(x))
print("F.softplus(x)          ", F.softplus(x))

-- 2. the gradient: the graph node and the value against sigmoid
local xg = ember.tensor({ -2.0, 0.0, 3.0 }, { requires_grad = true })
local y = Softplus(xg):sum()
print("\ngrad_fn:", y.grad_fn.next_functions[1].name)
y:backward()
print("d/dx from backward:", xg.grad)
print("sigmoid(x):        ", xg:detach():sigmoid())

-- 3. gradcheck and gradgradcheck (float64 central differences)
local inputs = { ember.randn(6, { dtype = "float64" }) * 3 }
print("\ngradcheck:", ag.gradcheck(function(a) return Softplus(a) end, inputs))
print("gradgradcheck:", ag.gradgradcheck(function(a) return Softplus(a) end, inputs))

-- 4. a layer around it, in a tiny network fitted to |x| on [-2, 2]
local SoftplusLayer = nn.Module:extend("StableSoftplus")
function SoftplusLayer:forward(t) return Softplus(t) end

local model = nn.Sequential(nn.Linear(1, 8), SoftplusLayer(), nn.Linear(8, 1))
local xs = ember.linspace(-2, 2, 64):unsqueeze(2)
local ys = xs:abs()
local opt = optim.SGD(model:parameters(), 0.1, 0.9) -- lr 0.1, momentum 0.9
local steps = short and 300 or 2000
local first, last
for step = 1, steps do
  opt:zero_grad()
  local loss = F.mse_loss(model(xs), ys)
  loss:backward()
  opt:step()
  last = loss:item()
  first = first or last
  if step % (steps // 4) == 0 then print(string.format("step %4d  mse %.5f", step, last)) end
end
print(string.format("\nfitting |x| through StableSoftplus: mse %.4f -> %.5f", first, last))
