-- test_ex_basic.lua -- the short modes of examples/micrograd_moons.lua,
-- digits_mlp.lua, digits_cnn.lua and custom_function.lua still show what
-- the examples claim (weaker where the full run takes longer), and
-- man/ember-lua.7 renders without warnings and names only things that exist.
local T = {}
local EMBER = os.getenv("EMBER") or (arg and arg[-1]) or "ember"

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

function T.micrograd_moons_reaches_100_percent()
  local out, code = run(q(EMBER) .. " examples/micrograd_moons.lua --short")
  check(code == 0, out)
  check(out:find("train accuracy 100.0%", 1, true), out)
  -- the boundary: 24 rows of 64 characters, both regions and both classes present
  local rows = 0
  for line in out:gmatch("[^\n]+") do
    if line:match("^  [#.+%-X]+$") and #line == 66 then rows = rows + 1 end
  end
  check_eq(rows, 24, "rows of the decision boundary")
  check(out:find("#", 1, true) and out:find("%.%.%.") and out:find("+", 1, true) and out:find("-", 1, true), out)
  check(not out:find("X", 1, true), "no point on the wrong side: " .. out)
end

-- Runs a digits example in short mode with a model path; checks the test
-- accuracy, the loss plot, the file (a safetensors state_dict with the
-- given first weight shape) and the reloaded model's identical accuracy.
local function digits(script, min_acc, first_key, first_shape)
  local path = os.tmpname()
  local out, code = run(q(EMBER) .. " examples/" .. script .. " --short " .. q(path))
  check(code == 0, out)
  local acc = tonumber(out:match("\ntest accuracy (%d+%.%d)%%"))
  check(acc and acc >= min_acc, string.format("test accuracy >= %g%%: %s", min_acc, out))
  local again = tonumber(out:match("reloaded: test accuracy (%d+%.%d)%%"))
  check_eq(again, acc, "accuracy after the safetensors round trip")
  check(out:find("training loss", 1, true) and out:find("┤", 1, true), "the loss curve is drawn: " .. out)
  local sd, meta = ember.load(path)
  os.remove(path)
  check_eq(meta.example, script:match("^(.*)%.lua$"), "metadata")
  check(ember.is_tensor(sd[first_key]), "the file holds " .. first_key)
  check_shape(sd[first_key], first_shape)
end

function T.digits_mlp_short_learns_and_reloads()
  digits("digits_mlp.lua", 90, "1.weight", { 128, 64 })
end

function T.digits_cnn_short_learns_and_reloads()
  digits("digits_cnn.lua", 90, "2.weight", { 16, 1, 3, 3 })
end

function T.custom_function_checks_and_trains()
  local out, code = run(q(EMBER) .. " examples/custom_function.lua --short")
  check(code == 0, out)
  check(out:find("gradcheck:\ttrue", 1, true), out)
  check(out:find("gradgradcheck:\ttrue", 1, true), out)
  check(out:find("grad_fn:\tStableSoftplusBackward", 1, true), out)
  -- the stable forward is finite where the naive one overflows
  check(out:find("naive \ttensor([0.0000, 0.3133, 0.6931, 1.3133,    inf])", 1, true), out)
  check(out:find("StableSoftplus(x)      \ttensor([3.7835e-44, 3.1326e-01, 6.9315e-01, 1.3133e+00, 1.0000e+02])", 1, true), out)
  local first, last = out:match("mse ([%d.]+) %-> ([%d.]+)")
  first, last = tonumber(first), tonumber(last)
  check(first and last and last < first / 20, "the fit improves 20-fold: " .. out)
end

return T
