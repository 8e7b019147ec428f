-- autodiff_tour.lua -- how ember computes a gradient, shown step by step:
-- the graph, the backward pass node by node with the formulas it applies,
-- a hand check, and what gradcheck says about a wrong formula.
--   ember examples/autodiff_tour.lua [graph.svg]
local ag = ember.autograd

-- a tiny model: y = sum(tanh(w * x + b))
local x = ember.tensor({ 1.0, 2.0 })
local w = ember.tensor({ 0.5, -1.0 }, { requires_grad = true })
local b = ember.tensor({ 0.1, 0.2 }, { requires_grad = true })
local y = ((w * x + b):tanh()):sum()
print("y =", y)

-- 1. the graph that recorded it: each node is the backward of one op
print("\n1. the graph (read from y.grad_fn down to the leaves)")
local function show(node, depth)
  print(string.rep("  ", depth) .. node.name)
  for _, nx in ipairs(node.next_functions) do if nx then show(nx, depth + 1) end end
end
show(y.grad_fn, 1)

-- 2. backward, node by node: what each receives, its formula, what it sends
print("\n2. the backward pass, traced")
ag.trace(y, { retain_graph = true })

-- 3. check one gradient by hand: dy/dw = x * (1 - tanh(w*x + b)^2)
print("\n3. by hand")
local t = (w * x + b):tanh():detach()
local by_hand = x * (1 - t * t)
print("dy/dw from backward:", w.grad)
print("dy/dw by hand:      ", by_hand)
print("dy/db (the same without x):", b.grad)

-- 4. the graph with values and gradients (Graphviz text; a picture with dot)
print("\n4. as a picture")
local text = ag.dot(y, { values = true, grads = true, inputs = { w = w, b = b } })
print(text:sub(1, 120) .. "...")
if arg and arg[1] then
  local ok, err = pcall(ag.draw, y, arg[1], { grads = true, inputs = { w = w, b = b } })
  print(ok and ("wrote " .. arg[1]) or err)
end

-- 5. a wrong formula: a custom Function whose backward forgets a factor
print("\n5. gradcheck finds a wrong gradient")
local Square = ag.Function {
  name = "Square",
  forward = function(ctx, a) ctx:save_for_backward(a); return a * a end,
  backward = function(ctx, g) local a = ctx.saved_tensors[1]; return g * a end, -- should be 2 * a
}
local ok, msg = ag.gradcheck(function(a) return Square(a):sum() end, { ember.tensor({ 1.5, -2.0 }) },
  { raise = false })
print(ok, msg)
