-- test_examples.lua -- the scripts in examples/ run and print what they claim.
local T = {}
local q, run = shell_quote, run_cmd

function T.autodiff_example()
  local dot = os.tmpname()
  local out, code = run(q(EMBER) .. " examples/autodiff.lua " .. q(dot))
  check(code == 0, out)
  check(out:find("y = -20, dy/dx = 46", 1, true), out)
  check(out:find("finite differences: 46", 1, true), out)
  check(out:find("d2/dx2 = 12", 1, true), out)
  local f = assert(io.open(dot))
  local text = f:read("a")
  f:close()
  os.remove(dot)
  check(text:find("digraph", 1, true) and text:find("MulBackward", 1, true), text)
end

function T.autodiff_tour_example()
  local out, code = run(q(EMBER) .. " examples/autodiff_tour.lua")
  check(code == 0, out)
  check(out:find("[3] AddBackward", 1, true), out)
  check(out:find("dy/dw from backward:\ttensor([0.7116, 0.2071])", 1, true), out)
  check(out:find("dy/dw by hand:      \ttensor([0.7116, 0.2071])", 1, true), out)
  check(out:find("false\tgradcheck: Jacobian mismatch", 1, true), out)
  check(out:find("SquareBackward", 1, true), out)
  local lines = 0
  for _ in io.lines("examples/autodiff_tour.lua") do lines = lines + 1 end
  check(lines < 60, "the tour stays under 60 lines")
end

function T.iris_example_learns()
  local out, code = run(q(EMBER) .. " examples/iris.lua 200")
  check(code == 0, out)
  local acc = tonumber(out:match("accuracy ([%d.]+)"))
  check(acc and acc > 0.9, out)
end

function T.host_embedding_example()
  local host = os.getenv("EMBER_HOST")
  if not host then return end -- run by make test, which builds it
  local out, code = run(q(host))
  check(code == 0, out)
  check(out:find("sum from C: 10", 1, true), out)
  check(out:find("from Lua:\ttensor([2., 4., 6., 8.])", 1, true), out)
  check(out:find("shared memory:\ttensor([100.,   2.,   3.,   4.])", 1, true), out)
end

return T
