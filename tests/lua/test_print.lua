-- test_print.lua -- how values print: tensors' autograd suffixes and
-- ember.set_printoptions, ember.shell.repr (tables as Lua literals),
-- ember.time, help() of functions in namespaces.
local T = {}
local shell = require "ember.shell"

-- captures what fn writes through io.write
local function captured(fn, ...)
  local name = os.tmpname()
  local f = assert(io.open(name, "w"))
  local old = io.output()
  io.output(f)
  local ok, err = pcall(fn, ...)
  io.output(old)
  f:close()
  local g = assert(io.open(name))
  local s = g:read("a")
  g:close()
  os.remove(name)
  assert(ok, err)
  return s
end

function T.tensors_show_their_autograd_state()
  local x = ember.ones(2, { requires_grad = true })
  check_eq(tostring(x), "tensor([1., 1.], requires_grad=True)")
  check_eq(tostring(x * 2), "tensor([2., 2.], grad_fn=<MulBackward>)")
  check_eq(tostring((x * 2):detach()), "tensor([2., 2.])")
  check_eq(tostring(ember.ones(2, { dtype = "float64", requires_grad = true })),
    "tensor([1., 1.], dtype=float64, requires_grad=True)")
  ember.no_grad(function() check_eq(tostring(x * 2), "tensor([2., 2.])") end)
end

function T.set_printoptions_like_pytorch()
  local x = ember.tensor({ 1.23456, 2.5 })
  ember.set_printoptions({ precision = 2 })
  check_eq(tostring(x), "tensor([1.23, 2.50])")
  check_eq(ember.get_printoptions().precision, 2)
  ember.set_printoptions({ sci_mode = true })
  check_eq(tostring(x), "tensor([1.23e+00, 2.50e+00])")
  ember.set_printoptions({ profile = "default" })
  check_eq(tostring(x), "tensor([1.2346, 2.5000])")
  ember.set_printoptions({ threshold = 5, edgeitems = 2 })
  check_eq(tostring(ember.arange(10)), "tensor([0, 1,  ..., 8, 9])") -- PyTorch's two spaces
  ember.set_printoptions({ profile = "default" })
  check_eq(tostring(ember.arange(10)), "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])")
  check_error(function() ember.set_printoptions({ precison = 2 }) end, "set_printoptions", "precison")
  check_error(function() ember.set_printoptions({ precision = -1 }) end, "set_printoptions", "precision")
  check_error(function() ember.set_printoptions({ profile = "tiny" }) end, "set_printoptions", "profile")
  check_eq(ember.get_printoptions().precision, 4)
end

function T.repr_writes_lua_literals()
  local r = shell.repr
  check_eq(r({ 1, 2, { a = "s", b = { true } } }), '{1, 2, {a = "s", b = {true}}}')
  check_eq(r({}), "{}")
  check_eq(r({ [10] = 1, ["not a name"] = 2, ["end"] = 3 }), '{[10] = 1, ["end"] = 3, ["not a name"] = 2}')
  check_eq(r("a\nb"), '"a\\nb"')
  check_eq(r(0 / 0), "0/0")
  check_eq(r(-math.huge), "-math.huge")
  check_eq(r(ember.ones(2, 3).shape), "{2, 3}")
  local t = {}
  t.self = t
  check_eq(r(t), "{self = <cycle>}")
  local shared = { 1 }
  check_eq(r({ shared, shared }), "{{1}, {1}}") -- seen twice is not a cycle
  local long = {}
  for i = 1, 100 do long[i] = i end
  local s = r(long)
  check(s:find("... (70 more)", 1, true), s)
  check(s:find("\n", 1, true), "long tables wrap")
  check_eq(r({ { { { { 1 } } } } }), "{{{{{...}}}}}")
  check_eq(r({ ember.tensor({ 1, 2 }) }), "{tensor([1, 2])}")
end

function T.time_returns_the_results()
  local out = captured(function()
    local a, b = ember.time(function(x, y) return x + y, "two" end, 40, 2)
    check_eq(a, 42)
    check_eq(b, "two")
  end)
  check(out:match("^time: [%d.]+ [mu]?s\n$"), out)
  check_error(function() ember.time(3) end, "time", "function")
  check(ember.perf_counter() > 0)
end

function T.magic_commands()
  local code
  local out = captured(function() code = shell.magic("%time 1 + 1") end)
  check_eq(out, "")
  local v
  out = captured(function() v = load(code)() end)
  check_eq(v, 2)
  check(out:find("^time: "), out)
  out = captured(function() code = shell.magic("%time local a = 1") end)
  check(load(code), code)
  out = captured(function() code = shell.magic("%timing on") end)
  check_eq(out, "timing is on\n")
  check_eq(code, "")
  out = captured(function() shell.after(2.5) end)
  check_eq(out, "(2.5 s)\n")
  out = captured(function() shell.after(0.5) end)
  check_eq(out, "")
  captured(function() shell.magic("%timing off") end)
  out = captured(function() code = shell.magic("%nosuch") end)
  check(out:find("unknown command", 1, true))
  check_eq(code, nil)
end

function T.help_finds_functions_in_namespaces()
  check(captured(ember.help, ember.nn.functional.linear):find("^linear%("))
  check(captured(ember.help, ember.autograd.grad):find("autograd.grad", 1, true))
  check(captured(ember.help, ember.ones(1).sum):find("^sum%("))
  check(captured(shell.help):find("tensors and autodiff", 1, true))
  check(captured(shell.help, "nn.functional.linear"):find("^linear%("))
  check(captured(shell.help, ember.ones(2, 3)):find("shape {2, 3}", 1, true))
  check(captured(shell.help, { __doc = "my doc" }) == "my doc\n")
  check(captured(shell.help, "no_such_op"):find("no op named", 1, true))
end

return T
