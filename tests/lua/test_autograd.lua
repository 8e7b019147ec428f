-- test_autograd.lua -- the autograd API in Lua: leaves and requires_grad,
-- backward, autograd.grad, guards, hooks, custom Functions, anomaly mode,
-- dot, in-place safety, long chains and memory.
local T = {}
local ag = ember.autograd

local function f64(v, rg)
  return ember.tensor(v, { dtype = "float64", requires_grad = rg })
end

-- ---- leaves, properties ----

function T.leaf_properties()
  local x = ember.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
  check(x.requires_grad and x.is_leaf)
  check_eq(x.grad_fn, nil)
  check_eq(x.grad, nil)
  local y = x * 2
  check(y.requires_grad and not y.is_leaf)
  check_eq(tostring(y.grad_fn), "<MulBackward>")
  check_eq(y.grad_fn.name, "MulBackward")
  local z = ember.tensor({ 1.0, 2.0 })
  check(not z.requires_grad and z.is_leaf)
  z.requires_grad = true
  check(z.requires_grad)
  z:requires_grad_(false)
  check(not z.requires_grad)
  check(z:requires_grad_() == z, "requires_grad_ returns self")
  check(ember.randn(2, 3, { requires_grad = true }).requires_grad, "factory option")
  check(ember.zeros(2, { requires_grad = true }).requires_grad)
end

function T.requires_grad_errors()
  check_error(function() ember.tensor({ 1, 2 }):requires_grad_() end, "floating point")
  local x = ember.tensor({ 1.0 }, { requires_grad = true })
  local y = x * 2
  check_error(function() y.requires_grad = false end, "leaf")
  check_error(function() x.requires_grad = 1 end, "boolean expected")
  check_error(function() ember.tensor({ 1.0 }, { requires_grad = "yes" }) end, "requires_grad")
end

function T.grad_set_and_clear()
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  x.grad = ember.ones(2)
  check_tensor(x.grad, { 1, 1 })
  x.grad = nil
  check_eq(x.grad, nil)
  check_error(function() x.grad = ember.ones(3) end, "shape {3}", "{2}")
  check_error(function() x.grad = 5 end, "tensor or nil expected")
end

function T.detach_shares_data()
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local y = x * 1
  local d = y:detach()
  check(not d.requires_grad and d.is_leaf and d.grad_fn == nil)
  d[1] = 5
  check_tensor(y, { 5, 2 })
end

function T.next_functions()
  local a = ember.tensor({ 1.0 }, { requires_grad = true })
  local b = ember.tensor({ 2.0 })
  local y = a * b
  local nf = y.grad_fn.next_functions
  check_eq(#nf, 2)
  check_eq(nf[1].name, "AccumulateGrad")
  check_eq(nf[2], false)
  local z = y + a
  check(z.grad_fn.next_functions[1] == y.grad_fn, "nodes compare by identity")
end

-- ---- backward ----

function T.classic_scalar_graph()
  local x = f64(-4.0, true)
  local z = 2 * x + 2 + x
  local q = z:relu() + z * x
  local h = (z * z):relu()
  local y = h + q + q * x
  y:backward()
  check_near(y:item(), -20, 1e-12)
  check_near(x.grad:item(), 46, 1e-12)
end

function T.backward_accumulates_and_explicit_grad()
  local x = ember.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
  local y = x * x
  y:backward(ember.ones(3), { retain_graph = true })
  check_tensor(x.grad, { 2, 4, 6 })
  y:backward(ember.tensor({ 1.0, 0.0, 1.0 }))
  check_tensor(x.grad, { 4, 4, 12 })
end

function T.backward_implicit_only_for_scalars()
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  check_error(function() (x * 2):backward() end, "implicitly", "single-element")
  check_error(function() (x * 2):backward(ember.ones(3)) end, "shape")
  check_error(function() ember.ones(2):backward() end, "does not require grad")
  check_error(function() (x * 2):sum():backward({ bogus = true }) end, "bogus")
end

function T.backward_opts_only_and_inputs()
  local a = ember.tensor({ 1.0 }, { requires_grad = true })
  local b = ember.tensor({ 2.0 }, { requires_grad = true })
  local y = (a * b):sum()
  y:backward({ inputs = { a } })
  check_tensor(a.grad, { 2 })
  check_eq(b.grad, nil)
end

function T.retain_graph_required_for_second_backward()
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local y = (x * x):sum()
  y:backward()
  check_error(function() y:backward() end, "retain_graph=true")
end

function T.retain_grad_of_non_leaf()
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local m = x * 3
  m:retain_grad()
  check(m.retains_grad)
  local y = (m * m):sum()
  y:backward()
  check_tensor(m.grad, { 6, 12 })
  check_tensor(x.grad, { 18, 36 })
end

-- ---- autograd.grad ----

function T.grad_second_derivative_of_cube()
  local x = f64(1.5, true)
  local y = x ^ 3
  local g = ag.grad({ y }, { x }, { create_graph = true })
  check_near(g[1]:item(), 3 * 1.5 ^ 2, 1e-12)
  local g2 = ag.grad(g[1], x)
  check_near(g2[1]:item(), 6 * 1.5, 1e-12)
  check_eq(x.grad, nil, "grad() leaves .grad alone")
end

function T.hessian_vector_product()
  -- f(x) = sum(x^3): H = diag(6x); Hv = 6 x v
  local x = f64({ 1.0, 2.0, -1.0 }, true)
  local v = f64({ 1.0, 0.5, 2.0 })
  local f = (x ^ 3):sum()
  local g = ag.grad(f, x, { create_graph = true })[1]
  local hv = ag.grad((g * v):sum(), x)[1]
  check_tensor(hv, { 6, 6, -12 }, 1e-12)
end

function T.grad_allow_unused_and_errors()
  local a = ember.tensor({ 1.0 }, { requires_grad = true })
  local b = ember.tensor({ 2.0 }, { requires_grad = true })
  local y = (a * 3):sum()
  check_error(function() ag.grad(y, { a, b }, { retain_graph = true }) end, "allow_unused")
  local g = ag.grad(y, { a, b }, { allow_unused = true })
  check_tensor(g[1], { 3 })
  check_eq(g[2], nil)
  local y2 = a * 2
  local g2 = ag.grad({ y2 }, { a }, { grad_outputs = { ember.tensor({ 5.0 }) } })
  check_tensor(g2[1], { 10 })
  check_error(function() ag.grad({ a * 2 }, { a }, { grad_outputs = { ember.ones(1), ember.ones(1) } }) end,
    "grad_outputs")
  check_error(function() ag.grad({}, { a }) end, "empty")
  check_error(function() ag.grad({ "x" }, { a }) end, "tensor expected")
end

-- ---- guards ----

function T.no_grad_function_and_close_forms()
  local x = ember.tensor({ 1.0 }, { requires_grad = true })
  local r1, r2 = ember.no_grad(function() return x * 2, 7 end)
  check(r1.grad_fn == nil and not r1.requires_grad)
  check_eq(r2, 7)
  check(ember.is_grad_enabled())
  do
    local g <close> = ember.no_grad()
    check(not ember.is_grad_enabled())
    check_eq((x * 2).grad_fn, nil)
    do
      local g2 <close> = ember.enable_grad()
      check(ember.is_grad_enabled())
      check((x * 2).grad_fn ~= nil)
    end
    check(not ember.is_grad_enabled(), "nested guard restores")
  end
  check(ember.is_grad_enabled())
end

function T.guards_restore_on_error()
  local ok, err = pcall(ember.no_grad, function() error("boom") end)
  check(not ok and tostring(err):find("boom", 1, true))
  check(ember.is_grad_enabled())
  ok = pcall(function()
    local g <close> = ember.inference_mode()
    error("inner")
  end)
  check(not ok)
  check(ember.is_grad_enabled() and not ember.is_inference_mode_enabled())
  check_error(function() ember.no_grad(42) end, "function expected")
end

function T.inference_mode_wins_over_enable_grad()
  local x = ember.tensor({ 1.0 }, { requires_grad = true })
  ember.inference_mode(function()
    check(ember.is_inference_mode_enabled() and not ember.is_grad_enabled())
    ember.enable_grad(function()
      check(not ember.is_grad_enabled(), "enable_grad inside inference_mode stays off")
      check_eq((x * 2).grad_fn, nil)
    end)
  end)
  check(not ember.is_inference_mode_enabled())
end

function T.set_grad_enabled_statement_and_guard()
  ember.set_grad_enabled(false)
  check(not ember.is_grad_enabled())
  ember.set_grad_enabled(true)
  check(ember.is_grad_enabled())
  do
    local g <close> = ember.set_grad_enabled(false)
    check(not ember.is_grad_enabled())
  end
  check(ember.is_grad_enabled())
  local v = ember.set_grad_enabled(false, function() return ember.is_grad_enabled() end)
  check_eq(v, false)
  check(ember.is_grad_enabled())
  check_error(function() ember.set_grad_enabled("no") end, "boolean expected")
end

-- ---- hooks ----

function T.tensor_hook_sees_and_replaces_grad()
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local seen
  local h = x:register_hook(function(g) seen = g:tolist() return g * 10 end)
  ;(x * 3):sum():backward()
  check_eq(seen[1], 3)
  check_tensor(x.grad, { 30, 30 })
  h:remove()
  h:remove() -- twice is fine
  x.grad = nil
  ;(x * 3):sum():backward()
  check_tensor(x.grad, { 3, 3 })
end

function T.hook_on_non_leaf()
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local m = x * 2
  m:register_hook(function(g) return g * 0 end)
  ;(m * m):sum():backward()
  check_tensor(x.grad, { 0, 0 })
end

function T.hook_errors_become_backward_errors()
  local x = ember.tensor({ 1.0 }, { requires_grad = true })
  x:register_hook(function() error("hook exploded") end)
  check_error(function() (x * 2):sum():backward() end, "hook exploded")
  local y = ember.tensor({ 1.0 }, { requires_grad = true })
  y:register_hook(function() return ember.ones(3) end)
  check_error(function() (y * 2):sum():backward() end, "shape {3}")
  check_error(function() ember.ones(2):register_hook(print) end, "doesn't require gradient")
end

function T.node_hook()
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local y = x * 3
  local gin, gout
  local h = y.grad_fn:register_hook(function(grad_inputs, grad_outputs)
    gin, gout = grad_inputs, grad_outputs
  end)
  y:sum():backward()
  check_tensor(gin[1], { 3, 3 })
  check_tensor(gout[1], { 1, 1 })
  h:remove()
end

-- ---- custom Functions ----

local Exp = ag.Function {
  name = "MyExp",
  forward = function(ctx, x)
    local r = x:exp()
    ctx:save_for_backward(r)
    return r
  end,
  backward = function(ctx, g)
    return g * ctx.saved_tensors[1]
  end,
}

function T.function_forward_backward()
  local x = f64({ 0.0, 1.0 }, true)
  local y = Exp(x)
  check_eq(y.grad_fn.name, "MyExpBackward")
  y:sum():backward()
  check_tensor(x.grad, { 1, math.exp(1) }, 1e-12)
  local y2 = Exp.apply(x)
  check(y2.requires_grad)
  check(ag.gradcheck(function(a) return Exp(a) end, { f64({ 0.3, -0.2 }) }))
end

function T.function_non_tensor_args_and_ctx_fields()
  local needs = {}
  local Scale = ag.Function {
    forward = function(ctx, x, k)
      ctx.k = k
      needs[#needs + 1] = ctx.needs_input_grad
      return x * k
    end,
    backward = function(ctx, g) return g * ctx.k, nil end,
  }
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local y = Scale(x, 4)
  check_eq(y.grad_fn.name, "FunctionBackward")
  y:sum():backward()
  check_tensor(x.grad, { 4, 4 })
  local n = ember.no_grad(function() return Scale(x, 2) end)
  check_eq(n.grad_fn, nil)
  check(needs[1][1] == true and needs[1][2] == false)
  check(needs[2][1] == false, "no_grad: nothing needs a gradient")
end

function T.function_backward_errors()
  local Bad1 = ag.Function {
    name = "MyFn",
    forward = function(ctx, a, b) return a * b end,
    backward = function(ctx, g) return g end,
  }
  local a = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local b = ember.tensor({ 3.0, 4.0 }, { requires_grad = true })
  check_error(function() Bad1(a, b):sum():backward() end,
    "Function MyFn.backward returned 1 gradient, expected 2")
  local Bad2 = ag.Function {
    name = "MyFn",
    forward = function(ctx, a, b) return a:sum() + b:sum() end,
    backward = function(ctx, g) return ember.ones(2), ember.ones(3) end,
  }
  local c = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  check_error(function() Bad2(a, c):backward() end,
    "Function MyFn.backward: gradient 2 has shape {3} but input 2 has shape {2}")
  local Bad3 = ag.Function {
    name = "Boom",
    forward = function(ctx, x) return x * 1 end,
    backward = function() error("custom failure") end,
  }
  check_error(function() Bad3(a):sum():backward() end, "custom failure")
  check_error(function() ag.Function { forward = 1, backward = print } end, "forward must be")
end

function T.function_returning_input_is_aliased()
  local Id = ag.Function {
    forward = function(ctx, x) return x end,
    backward = function(ctx, g) return g * 2 end,
  }
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local y = Id(x)
  check(x.is_leaf and x.grad_fn == nil, "the input keeps its (leaf) identity")
  check(not y.is_leaf)
  y:sum():backward()
  check_tensor(x.grad, { 2, 2 })
end

function T.function_saved_tensor_version_check()
  local Sq = ag.Function {
    name = "Sq",
    forward = function(ctx, x)
      ctx:save_for_backward(x)
      return x * x
    end,
    backward = function(ctx, g) return g * 2 * ctx.saved_tensors[1] end,
  }
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local m = x * 1
  local y = Sq(m)
  ember.no_grad(function() m:add_(1) end)
  check_error(function() y:sum():backward() end, "modified by an in-place operation")
end

function T.function_double_backward()
  local Cube = ag.Function {
    name = "Cube",
    forward = function(ctx, x)
      ctx:save_for_backward(x)
      return x * x * x
    end,
    backward = function(ctx, g)
      local x = ctx.saved_tensors[1]
      return g * 3 * x * x
    end,
  }
  local x = f64(2.0, true)
  local g = ag.grad(Cube(x), x, { create_graph = true })[1]
  check_near(g:item(), 12, 1e-12)
  check_near(ag.grad(g, x)[1]:item(), 12, 1e-12)
end

-- The ctx's saved tensors are released by the node's own release callback:
-- after a backward without retain_graph they are gone (reading them, or a
-- second backward, fails like PyTorch's "Trying to backward through the
-- graph a second time"); with retain_graph they stay for the next backward.
function T.function_saved_released_unless_retain_graph()
  local ctxs = {}
  local Sq = ag.Function {
    name = "Sq",
    forward = function(ctx, x)
      ctxs[#ctxs + 1] = ctx
      ctx:save_for_backward(x)
      return x * x
    end,
    backward = function(ctx, g) return g * 2 * ctx.saved_tensors[1] end,
  }
  local x = f64({ 1.0, 2.0 }, true)
  local y = Sq(x):sum()
  y:backward({ retain_graph = true })
  check_tensor(ctxs[1].saved_tensors[1], { 1, 2 }, 0)
  y:backward()
  check_tensor(x.grad, { 4, 8 }, 0)
  check_error(function() return ctxs[1].saved_tensors end, "SqBackward",
    "backward through the graph a second time")
  check_error(function() y:backward() end, "SqBackward", "backward through the graph a second time",
    "retain_graph=true")
  -- autograd.grad releases too; with retain_graph it keeps them
  local y2 = Sq(x):sum()
  check_tensor(ag.grad(y2, x, { retain_graph = true })[1], { 2, 4 }, 0)
  check_tensor(ctxs[2].saved_tensors[1], { 1, 2 }, 0)
  check_tensor(ag.grad(y2, x)[1], { 2, 4 }, 0)
  check_error(function() ag.grad(y2, x) end, "backward through the graph a second time")
  -- only nodes that ran release: a backward through another graph of x
  -- leaves this node's saved tensors alone
  local y3 = Sq(x):sum()
  ;(x * 3):sum():backward()
  check_tensor(ctxs[3].saved_tensors[1], { 1, 2 }, 0)
  y3:backward()
  check_error(function() return ctxs[3].saved_tensors end, "backward through the graph a second time")
end

-- ---- in-place safety ----

function T.inplace_on_saved_tensor_is_refused()
  local a = ember.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
  local b = a * 1
  local c = b * b -- saves b
  b:mul_(2)
  local err = check_error(function() c:sum():backward() end, "modified by an in-place operation",
    "MulBackward", "{3}")
  check(err:find("version 0", 1, true) and err:find("version 1", 1, true), err)
end

function T.inplace_on_leaf_requiring_grad()
  local a = ember.tensor({ 1.0 }, { requires_grad = true })
  check_error(function() a:add_(1) end, "leaf", "in-place")
  ember.no_grad(function() a:add_(1) end)
  check_tensor(a, { 2 })
end

-- ---- anomaly mode ----

function T.detect_anomaly_names_forward_op()
  local x = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local err
  ag.detect_anomaly(function()
    check(ag.is_anomaly_enabled())
    local b = x * 1
    local c = b * b
    b:mul_(2)
    err = check_error(function() c:sum():backward() end, "modified by an in-place operation",
      "forward op 'mul'")
  end)
  check(err:find("test_autograd", 1, true), "the traceback names the script: " .. err)
  check(not ag.is_anomaly_enabled())
end

function T.detect_anomaly_reports_nan()
  local x = ember.tensor({ 0.0, 1.0 }, { requires_grad = true })
  do
    local g <close> = ag.detect_anomaly()
    local y = x:sqrt() * 0 -- d sqrt at 0 is inf; inf * 0 = nan
    check_error(function() y:sum():backward() end, "nan")
  end
  check(not ag.is_anomaly_enabled())
end

-- ---- dot ----

function T.dot_text()
  local x = ember.tensor({ 1.0 }, { requires_grad = true })
  local s = ag.dot((x * 2):exp())
  check(s:find("digraph", 1, true) and s:find("ExpBackward", 1, true) and s:find("MulBackward", 1, true), s)
end

-- ---- long chains and memory ----

-- Runs in a child ember when $EMBER is set (the test runner sets it): a
-- million nodes raise the process's RSS for good, which test_gc measures.
local chain_src = [[
local n = tonumber(...)
local x = ember.tensor(1.0, { dtype = "float64", requires_grad = true })
local y = x
for _ = 1, n do y = y * 1.0000001 + 0 end
y:backward()
local want = 1.0000001 ^ n
assert(math.abs(x.grad:item() - want) <= 1e-9 * want, "grad " .. x.grad:item() .. " ~= " .. want)
y = nil
collectgarbage()
print("chain ok")
]]

function T.long_chain_backward_and_free()
  local n = os.getenv("EMBER_QUICK") and 100000 or 1000000
  local exe = os.getenv("EMBER")
  if not exe then
    load(chain_src)(n)
    return
  end
  local path = os.tmpname()
  local f = io.open(path, "w")
  f:write(chain_src)
  f:close()
  local p = io.popen(string.format('"%s" "%s" %d 2>&1', exe, path, n))
  local out = p:read("a")
  local ok = p:close()
  os.remove(path)
  check(ok and out:find("chain ok", 1, true), out)
end

function T.create_graph_loop_memory_flat()
  local x = ember.randn(64, { dtype = "float64", requires_grad = true })
  local function step()
    local y = (x * x * x):sum()
    local g = ag.grad(y, x, { create_graph = true })[1]
    ;(g * g):sum():backward()
    x.grad = nil
  end
  step()
  collectgarbage(); collectgarbage()
  local base = ember.memory_stats().allocated
  for _ = 1, 200 do step() end
  collectgarbage(); collectgarbage()
  local now = ember.memory_stats().allocated
  check(now <= base, string.format("allocated grew from %d to %d", base, now))
end

function T.hooks_freed_with_tensors()
  -- registry refs of hooks are released (deferred) when their tensors die
  local before
  for round = 1, 2 do
    for _ = 1, 200 do
      local x = ember.tensor({ 1.0 }, { requires_grad = true })
      x:register_hook(function(g) return g end)
      ;(x * 2):sum():backward()
    end
    collectgarbage(); collectgarbage()
    ember.ones(1) -- a binding call drains the pending unrefs
    local n = 0
    for _, v in pairs(debug.getregistry()) do
      if type(v) == "function" then n = n + 1 end
    end
    if round == 1 then before = n else check(n <= before + 5, string.format("registry %d -> %d", before, n)) end
  end
end

-- ---- help ----

function T.help_knows_autograd()
  local out = {}
  local old = io.output()
  local path = os.tmpname()
  io.output(path)
  ember.help(ag.grad)
  ember.help("no_grad")
  io.output():close()
  io.output(old)
  local f = io.open(path)
  local text = f:read("a")
  f:close()
  os.remove(path)
  check(text:find("autograd.grad(outputs", 1, true) and text:find("no_grad", 1, true), text)
  out = nil
end

return T
