-- test_ex_basic.lua -- the short modes of examples/micrograd_moons.lua,
-- digits_mlp.lua, digits_cnn.lua and custom_function.lua still show what
-- the examples claim (weaker where the full run takes longer), and
-- man/ember-lua.7 renders without warnings and names only things that exist.
local T = {}
local q, run = shell_quote, run_cmd

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

-- ---- man/ember-lua.7 ----

local MAN = "man/ember-lua.7"

local function have(cmd)
  local _, code = run("command -v " .. cmd .. " >/dev/null")
  return code == 0
end

function T.ember_lua_man_page_renders_without_warnings()
  if not have("groff") then print("skipped: groff is not installed") return end
  local out, code = run("groff -ww -man -Tutf8 " .. MAN .. " >/dev/null")
  check(code == 0 and out == "", "groff -ww: " .. out)
  if have("man") then
    out, code = run("MANPAGER=cat MANWIDTH=80 man -l " .. MAN)
    check(code == 0 and out:find("EMBER-LUA(7)", 1, true) and out:find("ember.optim.lr_scheduler", 1, true), out)
  end
end

local function man_source()
  local f = assert(io.open(MAN))
  local src = f:read("a")
  f:close()
  return src
end

-- groff's escapes that the page uses, as plain characters.
local function unescape(src)
  return (src:gsub("\\f[BIRP]", ""):gsub("\\%-", "-"):gsub("\\%(dq", '"'):gsub("\\%(bu", "*")
    :gsub("\\ ", " "):gsub("\\&", ""):gsub("\\e", "\\"))
end

-- The page's text: no comments, no macro names (.B, .TP, ...), no escapes.
local function man_text()
  local lines = {}
  for line in unescape(man_source()):gmatch("[^\n]*") do
    if not line:match("^%.\\\"") then -- comments name no API
      lines[#lines + 1] = line:gsub("^%.%a+%s*", "")
    end
  end
  return table.concat(lines, "\n")
end

-- Every ember.X.Y, nn.X, F.X, optim.X, lr_scheduler.X, data.X, utils.X,
-- init.X and autograd.X name on the page resolves to a non-nil value
-- (NAME is a placeholder), and every method written x:NAME, m:NAME,
-- opt:NAME, ... exists on an object of that kind.
function T.ember_lua_man_page_names_exist()
  local text = man_text()
  local roots = { ember = ember, nn = ember.nn, F = ember.nn.functional, optim = ember.optim,
    lr_scheduler = ember.optim.lr_scheduler, data = ember.data, utils = ember.utils,
    init = ember.nn.init, autograd = ember.autograd }
  local checked, missing = 0, {}
  for root, rest in text:gmatch("%f[%w_.]([%a_]+)(%.[%a_][%w_.]*)") do
    local v = roots[root]
    if v ~= nil and not rest:find("NAME", 1, true) then
      for part in rest:gmatch("[%a_][%w_]*") do
        v = type(v) == "table" and v[part] or nil
      end
      checked = checked + 1
      if v == nil then missing[#missing + 1] = root .. rest:gsub("%.$", "") end
    end
  end
  -- objects for the methods and fields written on the page
  local leaf = ember.ones(2, 3, { requires_grad = true })
  local x = leaf * 2
  x:retain_grad()
  x:sum():backward()
  local net = ember.nn.Sequential(ember.nn.Linear(2, 2))
  local opt = ember.optim.SGD(net:parameters(), 0.1)
  local objects = { x = x, y = x, loss = x, m = net, seq = net,
    ml = ember.nn.ModuleList({ ember.nn.Identity() }), md = ember.nn.ModuleDict({ a = ember.nn.Identity() }),
    opt = opt, sched = ember.optim.lr_scheduler.StepLR(opt, 30),
    loader = ember.data.DataLoader({ 1, 2 }), g = ember.Generator(), timer = ember.utils.Timer(),
    bar = ember.utils.progress(1, { file = io.open("/dev/null", "w") }) }
  local methods = 0
  for name, sep, field in text:gmatch("%f[%w_.]([%a_]+)([:.])([%a_][%w_]*)") do
    local o = objects[name]
    if o ~= nil and not roots[name] then
      methods = methods + 1
      local ok, v = pcall(function() return o[field] end)
      if not ok or v == nil then missing[#missing + 1] = name .. sep .. field end
    end
  end
  check(checked > 150 and methods > 60, string.format("names found: %d, methods %d", checked, methods))
  check(#missing == 0, "names on the page that do not exist: " .. table.concat(missing, ", "))
end

-- The worked example of EXAMPLES runs as printed (writing to a temporary file).
function T.ember_lua_man_page_example_runs()
  local code = man_source():match("A classifier trained and saved:.-\n%.nf\n(.-)\n%.fi")
  code = code and unescape(code)
  check(code and code:find("opt:step()", 1, true), "the example is on the page")
  local path = os.tmpname()
  code = code:gsub('"model%.safetensors"', string.format("%q", path))
  local chunk, err = load(code, "=ember-lua.7 example")
  check(chunk, err)
  chunk()
  local sd = ember.load(path)
  os.remove(path)
  check_shape(sd["1.weight"], { 16, 4 })
end

return T
