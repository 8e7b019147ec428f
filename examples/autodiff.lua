-- autodiff.lua -- a classroom demo: a scalar expression, its gradient by
-- backward(), the same by finite differences, and the graph as DOT.
--   ember examples/autodiff.lua [graph.dot]
local x = ember.tensor(-4.0, {dtype = "float64", requires_grad = true})
local z = 2 * x + 2 + x
local q = z:relu() + z * x
local h = (z * z):relu()
local y = h + q + q * x
y:backward()
print(string.format("y = %g, dy/dx = %g (expected -20 and 46)", y:item(), x.grad:item()))

-- the same derivative by central differences
local function f(v)
  local xv = ember.tensor(v, {dtype = "float64"})
  local zv = 2 * xv + 2 + xv
  local qv = zv:relu() + zv * xv
  return ((zv * zv):relu() + qv + qv * xv):item()
end
local eps = 1e-6
print(string.format("finite differences: %g", (f(-4 + eps) - f(-4 - eps)) / (2 * eps)))

-- a second derivative: d2/dx2 of x^3 is 6x
local a = ember.tensor(2.0, {dtype = "float64", requires_grad = true})
local da = ember.autograd.grad({a ^ 3}, {a}, {create_graph = true})[1]
local dda = ember.autograd.grad({da}, {a})[1]
print(string.format("d/dx x^3 at 2 = %g, d2/dx2 = %g", da:item(), dda:item()))

-- the backward graph, for Graphviz (dot -Tpng graph.dot -o graph.png)
local path = arg and arg[1]
local dot = ember.autograd.dot(y)
if path then
  local f = assert(io.open(path, "w"))
  f:write(dot)
  f:close()
  print("graph written to " .. path)
else
  print(dot)
end
