-- test_misuse.lua -- autograd misuse (issue "Hardening", Behaviour under
-- faults): each misuse below is a clear error naming what went wrong, and
-- afterwards the state works: a new forward and backward give the right
-- gradients (and, where PyTorch allows it, the same graph can be used
-- again). Related tests elsewhere: test_autograd.lua
-- (retain_graph_required_for_second_backward, hook_errors_become_backward_errors,
-- function_backward_errors, function_saved_tensor_version_check,
-- function_saved_released_unless_retain_graph) and tests/check_faults.c
-- (interrupts in backward, out of memory in every allocation of a backward).

local T = {}
local ag = ember.autograd

local function leaf(v)
  return ember.tensor(v or { 1.0, 2.0, 3.0 }, { requires_grad = true })
end

-- A fresh graph on a fresh leaf: d/dx sum(x^2 * 3) = 6x.
local function backward_works()
  local x = leaf()
  local y = (x * x * 3):sum()
  y:backward()
  check_tensor(x.grad, { 6, 12, 18 }, 1e-6, "a new backward after the error")
end

-- ---- backward twice without retain_graph ----

function T.backward_twice_without_retain_graph()
  local x = leaf()
  local y = (x:exp() * x):sum()
  y:backward()
  local g1 = x.grad:clone()
  check_error(function() y:backward() end, "backward through the graph a second time", "retain_graph=true")
  check_error(function() ag.grad(y, x) end, "backward through the graph a second time")
  -- the failed passes added nothing
  check_tensor(x.grad, g1:tolist(), 0)
  backward_works()
  -- with retain_graph the second pass works and accumulates
  local z = (x * x):sum()
  z:backward({ retain_graph = true })
  z:backward()
  check_tensor(x.grad, { g1[1]:item() + 4, g1[2]:item() + 8, g1[3]:item() + 12 }, 1e-6)
end

-- ---- in-place changes of saved tensors ----

function T.inplace_change_of_a_saved_tensor()
  local x = leaf()
  local a = x * 2        -- a non-leaf
  local y = a:sin():sum() -- SinBackward saves a
  a:mul_(3)
  local err = check_error(function() y:backward() end,
    "a tensor needed for gradient computation was modified by an in-place operation")
  check(x.grad == nil, "the failed backward left a gradient")
  check(err:find("version", 1, true), err)
  backward_works()
  -- recomputing from the changed value works
  local y2 = a:sin():sum()
  y2:backward()
  check_tensor(x.grad, { 6 * math.cos(6), 6 * math.cos(12), 6 * math.cos(18) }, 1e-5)
end

function T.inplace_change_of_a_saved_output()
  local x = leaf()
  local e = x:exp() -- ExpBackward saves its result
  local y = e:sum()
  e:add_(1)
  check_error(function() y:backward() end, "modified by an in-place operation")
  backward_works()
end

-- a node saves what PyTorch 1.13's saves, no more: div with a rounding
-- mode saves other for self's (zero) gradient and self only for other's
-- (difftest seed 598 of the binary ops refused where torch passes)
function T.div_with_rounding_mode_saves_as_pytorch()
  local x = leaf()
  local a = x * 1
  local y = a:div(ember.rand(3) + 1, { rounding_mode = "floor" })
  a:add_(1) -- self is not saved: only self needs a gradient
  y:sum():backward()
  check_tensor(x.grad, { 0, 0, 0 }, 0)
  local w = ember.rand(3, { requires_grad = true })
  a = x * 1
  y = a:div(w + 1, { rounding_mode = "trunc" })
  a:add_(1) -- saved for other's gradient
  check_error(function() y:sum():backward() end, "modified by an in-place operation")
  local t = x * 1
  t:div_(t, { rounding_mode = "floor" })
  check_error(function() t:sum():backward() end, "modified by an in-place operation")
end

function T.inplace_on_a_leaf_that_requires_grad()
  local x = leaf()
  check_error(function() x:add_(1) end, "leaf", "in-place")
  check_tensor(x, { 1, 2, 3 }, 0, "the refused in-place op changed the leaf")
  ember.no_grad(function() x:add_(1) end)
  check_tensor(x, { 2, 3, 4 }, 0)
  backward_works()
end

-- ---- grad of a non-scalar without a gradient ----

function T.backward_of_a_non_scalar_without_a_gradient()
  local x = leaf()
  local y = x * 2
  check_error(function() y:backward() end, "grad can be implicitly created only for")
  check_error(function() ag.grad(y, x) end, "grad can be implicitly created only for")
  check(x.grad == nil)
  -- the graph is intact: backward with an explicit gradient works
  y:backward(ember.tensor({ 1.0, 10.0, 100.0 }))
  check_tensor(x.grad, { 2, 20, 200 }, 1e-6)
  -- a gradient of the wrong shape is an error too, naming both shapes
  local y2 = x * 3
  check_error(function() y2:backward(ember.ones(4)) end, "{4}", "{3}")
  backward_works()
end

function T.backward_of_a_tensor_without_grad()
  local t = ember.ones(3)
  check_error(function() t:sum():backward() end, "does not require grad")
  local x = leaf()
  check_error(function() ag.grad((x * 2):sum(), ember.ones(3)) end, "does not require grad")
  backward_works()
end

function T.grad_of_an_unused_input()
  local x, w = leaf(), leaf()
  local y = (x * 2):sum()
  check_error(function() ag.grad(y, { x, w }, { retain_graph = true }) end, "allow_unused")
  local g = ag.grad(y, { x, w }, { allow_unused = true })
  check_tensor(g[1], { 2, 2, 2 }, 0)
  check(g[2] == nil)
  backward_works()
end

-- ---- hooks returning the wrong thing, or failing ----

-- Registers a misbehaving hook on a fresh leaf, checks the backward error,
-- then removes the hook: the same graph (kept by retain_graph) and a new
-- one both work.
local function misbehaving_hook(hook, ...)
  local x = leaf()
  local h = x:register_hook(hook)
  local y = (x * x):sum()
  local err = check_error(function() y:backward({ retain_graph = true }) end, ...)
  check(x.grad == nil, "a failed hook let a gradient through")
  h:remove()
  y:backward()
  check_tensor(x.grad, { 2, 4, 6 }, 1e-6, "the same graph after the hook is gone")
  backward_works()
  return err
end

function T.hook_returning_the_wrong_shape()
  misbehaving_hook(function(g) return ember.ones(4) end, "hook", "shape {4}", "shape {3}")
end

function T.hook_returning_the_wrong_dtype()
  -- PyTorch: "hook 'hook' has changed the type of value"
  misbehaving_hook(function(g) return g:double() end, "hook", "dtype float64", "dtype float32")
  misbehaving_hook(function(g) return g:int() end, "hook", "dtype int32", "dtype float32")
end

function T.hook_returning_a_non_tensor()
  misbehaving_hook(function(g) return 42 end, "hook: must return a tensor or nil")
  misbehaving_hook(function(g) return { g } end, "hook: must return a tensor or nil")
end

function T.hook_that_errors()
  misbehaving_hook(function(g) error("hook exploded") end, "hook exploded")
  misbehaving_hook(function(g) return g.no_such_method() end, "no_such_method")
end

function T.hook_on_an_inner_tensor_that_errors()
  local x = leaf()
  local m = x * 2
  m:register_hook(function() error("inner hook failed") end)
  check_error(function() (m * m):sum():backward() end, "inner hook failed")
  check(x.grad == nil)
  backward_works()
end

function T.node_hook_returning_the_wrong_thing()
  local x = leaf()
  local y = x:exp()
  y.grad_fn:register_hook(function() return 7 end)
  check_error(function() y:sum():backward() end, "must return nil or a table of gradients")
  local x2 = leaf()
  local y2 = x2:exp()
  y2.grad_fn:register_hook(function() return { "not a tensor" } end)
  check_error(function() y2:sum():backward() end, "gradient 1: tensor, false or nil expected")
  local x3 = leaf()
  local y3 = x3:exp()
  y3.grad_fn:register_hook(function() return { ember.ones(5) } end)
  check_error(function() y3:sum():backward() end, "node hook: gradient 1 has shape {5}", "has shape {3}")
  check(x3.grad == nil, "a wrong-shaped gradient from a node hook reached the leaf")
  local y4 = x3:exp()
  y4.grad_fn:register_hook(function(gi) return { gi[1]:double() } end)
  check_error(function() y4:sum():backward() end, "node hook: gradient 1 has dtype float64", "dtype float32")
  check(x3.grad == nil, "a wrong-typed gradient from a node hook reached the leaf")
  backward_works()
end

-- ---- custom Functions that fail or return the wrong count ----

function T.custom_function_failing_or_returning_the_wrong_count()
  local a = leaf({ 1.0, 2.0 })
  local b = leaf({ 3.0, 4.0 })
  local Few = ag.Function {
    name = "Few",
    forward = function(ctx, p, q) return p * q end,
    backward = function(ctx, g) return g end,
  }
  check_error(function() Few(a, b):sum():backward() end, "Function Few.backward returned 1 gradient, expected 2")
  local Many = ag.Function {
    name = "Many",
    forward = function(ctx, p) return p * 2 end,
    backward = function(ctx, g) return g, g, g end,
  }
  check_error(function() Many(a):sum():backward() end, "Function Many.backward returned 3 gradients, expected 1")
  local Shape = ag.Function {
    name = "Shape",
    forward = function(ctx, p) return p:sum() end,
    backward = function(ctx, g) return ember.ones(5) end,
  }
  check_error(function() Shape(a):backward() end, "Function Shape.backward: gradient 1 has shape {5} but input 1 has shape {2}")
  local Boom = ag.Function {
    name = "Boom",
    forward = function(ctx, p) return p * 1 end,
    backward = function() error("custom backward failed") end,
  }
  check_error(function() Boom(a):sum():backward() end, "custom backward failed")
  local FwdBoom = ag.Function {
    name = "FwdBoom",
    forward = function() error("custom forward failed") end,
    backward = function(ctx, g) return g end,
  }
  check_error(function() FwdBoom(a) end, "custom forward failed")
  local NotTensor = ag.Function {
    name = "NotTensor",
    forward = function(ctx, p) return "text" end,
    backward = function(ctx, g) return g end,
  }
  -- as in PyTorch, a non-tensor output is returned as it is, with no graph
  check_eq(NotTensor(a), "text")
  check(a.grad == nil and b.grad == nil, "a failed Function let a gradient through")
  -- a correct Function on the same leaves works afterwards
  local Good = ag.Function {
    name = "Good",
    forward = function(ctx, p, q)
      ctx:save_for_backward(p, q)
      return p * q
    end,
    backward = function(ctx, g)
      local p, q = ctx.saved_tensors[1], ctx.saved_tensors[2]
      return g * q, g * p
    end,
  }
  Good(a, b):sum():backward()
  check_tensor(a.grad, { 3, 4 }, 0)
  check_tensor(b.grad, { 1, 2 }, 0)
  backward_works()
end

-- ---- grad-mode guards left by an error ----

function T.grad_mode_restored_after_an_error_inside_no_grad()
  check(ember.is_grad_enabled())
  check_error(function() ember.no_grad(function() error("inside no_grad") end) end, "inside no_grad")
  check(ember.is_grad_enabled(), "an error inside no_grad left grad mode off")
  check_error(function() ember.enable_grad(function() error("inside enable_grad") end) end, "inside enable_grad")
  check(ember.is_grad_enabled())
  backward_works()
end

return T
