-- run.lua -- the Lua test runner: `build/ember tests/lua/run.lua [files...]`.
-- Loads every tests/lua/test_*.lua (or the files given); each returns a table
-- of named test functions (or calls test(name, fn)). Prints each failure with
-- its message and closes with exactly `lua: N passed, N failed`.

local dir = (arg and arg[0] or "tests/lua/run.lua"):match("^(.*)/[^/]*$") or "."

-- ---- running programs (globals for the tests of examples/ and tools) ----

-- the ember under test (the runner's own interpreter unless $EMBER)
EMBER = os.getenv("EMBER") or (arg and arg[-1]) or "ember"

-- s quoted for sh
function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- run_cmd(cmd [, stderr=true]) -> output, exit code: runs cmd through sh;
-- the output has stderr too unless stderr is false (then it is dropped).
function run_cmd(cmd, stderr)
  local p = io.popen(cmd .. (stderr == false and " 2>/dev/null" or " 2>&1"))
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

-- ---- assertions (globals for the test files) ----

local function fail(msg, level)
  error(msg, (level or 1) + 1)
end

function check(cond, msg)
  if not cond then fail("check failed" .. (msg and (": " .. msg) or ""), 2) end
end

function check_eq(got, want, msg)
  if got ~= want then
    fail(string.format("%sexpected %s, got %s", msg and (msg .. ": ") or "",
      tostring(want), tostring(got)), 2)
  end
end

function check_near(got, want, tol, msg)
  tol = tol or 1e-5
  if type(got) ~= "number" or math.abs(got - want) > tol * math.max(1, math.abs(want)) then
    fail(string.format("%sexpected %s (+-%g), got %s", msg and (msg .. ": ") or "",
      tostring(want), tol, tostring(got)), 2)
  end
end

local function flatten(v, out)
  if type(v) == "table" then
    for i = 1, #v do flatten(v[i], out) end
  else
    out[#out + 1] = v
  end
  return out
end

-- Compares a tensor's values (any shape) with a nested table; bool and
-- integers exactly, floats within tol.
function check_tensor(t, want, tol, msg)
  if not ember.is_tensor(t) then fail((msg or "") .. " not a tensor: " .. tostring(t), 2) end
  local got = flatten(t:tolist(), {})
  local exp = flatten(want, {})
  if #got ~= #exp then
    fail(string.format("%s%d values expected, got %d: %s", msg and (msg .. ": ") or "",
      #exp, #got, tostring(t)), 2)
  end
  for i = 1, #exp do
    local g, e = got[i], exp[i]
    local ok
    if type(e) == "number" and type(g) == "number" then
      if e ~= e then ok = g ~= g
      elseif e == math.huge or e == -math.huge then ok = g == e
      else ok = math.abs(g - e) <= (tol or 1e-5) * math.max(1, math.abs(e)) end
    else
      ok = g == e
    end
    if not ok then
      fail(string.format("%svalue %d: expected %s, got %s in %s", msg and (msg .. ": ") or "",
        i, tostring(e), tostring(g), tostring(t)), 2)
    end
  end
end

function check_shape(t, shape, msg)
  local s = t.shape
  local ok = #s == #shape
  for i = 1, #shape do ok = ok and s[i] == shape[i] end
  if not ok then
    fail(string.format("%sshape {%s} expected, got {%s}", msg and (msg .. ": ") or "",
      table.concat(shape, ","), table.concat(s, ",")), 2)
  end
end

-- fn must raise; the message must contain every given substring (plain).
function check_error(fn, ...)
  local ok, err = pcall(fn)
  if ok then fail("expected an error, got none", 2) end
  err = tostring(err)
  for _, part in ipairs({ ... }) do
    if not err:find(part, 1, true) then
      fail(string.format("error message %q lacks %q", err, part), 2)
    end
  end
  return err
end

-- ---- collecting tests ----

local files = {}
if arg and #arg > 0 then
  for i = 1, #arg do files[#files + 1] = arg[i] end
else
  local p = io.popen('ls "' .. dir .. '"/test_*.lua 2>/dev/null')
  for line in p:lines() do files[#files + 1] = line end
  p:close()
end
table.sort(files)

local passed, failed = 0, 0
local registered

function test(name, fn)
  registered[#registered + 1] = { name, fn }
end

local function traceback(e)
  return debug.traceback(tostring(e), 2)
end

for _, file in ipairs(files) do
  registered = {}
  local chunk, err = loadfile(file)
  local ok, ret = false, err
  if chunk then ok, ret = xpcall(chunk, traceback) end
  if not ok then
    failed = failed + 1
    io.write(string.format("FAIL %s (loading): %s\n", file, tostring(ret)))
  else
    if type(ret) == "table" then
      local names = {}
      for name, fn in pairs(ret) do
        if type(fn) == "function" then names[#names + 1] = name end
      end
      table.sort(names)
      for _, name in ipairs(names) do registered[#registered + 1] = { name, ret[name] } end
    end
    local short = file:match("([^/]*)%.lua$") or file
    for _, t in ipairs(registered) do
      local tok, terr = xpcall(t[2], traceback)
      if tok then
        passed = passed + 1
      else
        failed = failed + 1
        io.write(string.format("FAIL %s.%s: %s\n", short, t[1], tostring(terr)))
      end
    end
  end
end

io.write(string.format("lua: %d passed, %d failed\n", passed, failed))
io.stdout:flush()
os.exit(failed == 0 and 0 or 1, true) -- close the state: finalizers run
