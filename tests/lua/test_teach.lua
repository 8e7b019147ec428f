-- test_teach.lua -- the classroom side of ember.autograd (lua/stdlib/teach.lua):
-- formulas, grad_accumulator, trace / steps / backward{trace=true}, dot with
-- labels, draw, and gradcheck naming the suspect ops.
local T = {}
local ag = ember.autograd

local function captured(fn, ...)
  local name = os.tmpname()
  local f = assert(io.open(name, "w"))
  local old = io.output()
  io.output(f)
  local r = table.pack(pcall(fn, ...))
  io.output(old)
  f:close()
  local g = assert(io.open(name))
  local s = g:read("a")
  g:close()
  os.remove(name)
  assert(r[1], r[2])
  return s, table.unpack(r, 2, r.n)
end

local function model()
  local x = ember.tensor({ 1.0, 2.0 })
  local w = ember.tensor({ 0.5, -1.0 }, { requires_grad = true })
  return x, w, (w * x):tanh():sum()
end

function T.formulas_come_from_derivatives_yaml()
  local f = ag.formulas("MulBackward")
  check_eq(#f, 2)
  check_eq(f[1].input, "self"); check_eq(f[1].formula, "grad * other")
  check_eq(f[2].input, "other"); check_eq(f[2].formula, "grad * self")
  check_eq(ag.formulas("AccumulateGrad"), nil)
  check_eq(ag.formulas("NoSuchBackward"), nil)
  local w = ember.ones(2, { requires_grad = true })
  local y = (w * 2):sum()
  check(y.grad_fn.next_functions[1].next_functions[1] == w.grad_accumulator)
  check_eq(w.grad_accumulator.id, y.grad_fn.next_functions[1].next_functions[1].id)
  check_eq(ember.ones(2).grad_accumulator, nil)
  check_eq(y.grad_accumulator, nil)
end

function T.trace_prints_each_node_and_accumulates()
  local x, w, y = model()
  local out, steps = captured(ag.trace, y)
  check_eq(#steps, 4)
  check_eq(steps[1].name, "SumBackward")
  check_eq(steps[2].name, "TanhBackward")
  check_eq(steps[3].name, "MulBackward")
  check_eq(steps[4].name, "AccumulateGrad")
  check_eq(steps[3].edges[1].input, "self")
  check_eq(steps[3].edges[1].formula, "grad * other")
  check_eq(steps[3].edges[1].to, "AccumulateGrad")
  check_tensor(steps[3].edges[1].grad, w.grad:tolist(), 1e-6)
  check(out:find("[3] MulBackward", 1, true), out)
  check(out:find("receives  tensor(1.)", 1, true), out)
  check(out:find("= tanh_backward(grad, result)", 1, true), out)
  -- like backward: .grad accumulates, the graph is freed unless retained
  local t = math.tanh
  check_tensor(w.grad, { 1 * (1 - t(0.5) ^ 2), 2 * (1 - t(-2) ^ 2) }, 1e-6)
  check_error(function() y:backward() end, "second time")
  check_error(function() ag.trace(w) end, "trace", "no history")
  check_error(function() ag.trace(3) end, "trace", "tensor expected")
end

function T.backward_trace_option_and_steps()
  local _, w, y = model()
  local out = captured(function() y:backward { trace = true, retain_graph = true } end)
  check(out:find("[1] SumBackward", 1, true), out)
  local g1 = w.grad:clone()
  local names = {}
  for s in ag.steps(y, { retain_graph = true }) do names[#names + 1] = s.name end
  check_eq(table.concat(names, " "), "SumBackward TanhBackward MulBackward AccumulateGrad")
  check_tensor(w.grad, (g1 * 2):tolist(), 1e-6) -- two backward passes
  y:backward { trace = false }
  check_tensor(w.grad, (g1 * 3):tolist(), 1e-6)
end

function T.dot_labels_values_and_grads()
  local _, w, y = model()
  check_error(function() ag.dot(y, { grads = true }) end, "dot", "traced backward")
  captured(ag.trace, y, { retain_graph = true })
  local d = ag.dot(y, { values = true, grads = true, inputs = { w = w } })
  check(d:find("digraph backward", 1, true), d)
  check(d:find('w (leaf)\\nvalue tensor([ 0.5000, -1.0000])', 1, true), d)
  check(d:find("MulBackward\\nreceives", 1, true), d)
  check(d:find("grad tensor(", 1, true), d)
  check(ag.dot(y):find("MulBackward", 1, true)) -- without options: the plain DOT
  check_error(function() ag.dot(w, {}) end, "dot", "no history")
  local have_dot = os.execute("command -v dot >/dev/null 2>&1")
  local path = os.tmpname() .. ".svg"
  if have_dot then
    check_eq(ag.draw(y, path), path)
    local f = assert(io.open(path))
    check(f:read("a"):find("<svg", 1, true))
    f:close()
    os.remove(path)
  else
    check_error(function() ag.draw(y, path) end, "draw", "Graphviz")
  end
  check_error(function() ag.draw(y, 3) end, "draw", "path")
end

function T.gradcheck_names_the_suspects()
  local Bad = ag.Function {
    name = "Bad",
    forward = function(ctx, a) return a * 3 end,
    backward = function(ctx, g) return g * 2 end,
  }
  local ok, msg = ag.gradcheck(function(a) return Bad(a):exp():sum() end, { ember.tensor({ 0.5, 1.0 }) },
    { raise = false })
  check_eq(ok, false)
  check(msg:find("Jacobian mismatch", 1, true), msg)
  check(msg:find("ops between them: SumBackward, ExpBackward, BadBackward", 1, true), msg)
  check_error(function() ag.gradcheck(function(a) return Bad(a) end, { ember.tensor({ 0.5 }) }) end,
    "BadBackward")
  check(ag.gradcheck(function(a) return (a * 3):exp() end, { ember.tensor({ 0.5, 1.0 }) }))
end

return T
