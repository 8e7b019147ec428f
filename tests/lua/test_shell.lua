-- test_shell.lua -- the `ember` executable: -e, scripts with arguments,
-- --version, --help, piped stdin, exit status, SIGINT. The binary comes from
-- $EMBER or the interpreter running this file (arg[-1]).
local T = {}

local EMBER = os.getenv("EMBER")
if not EMBER and arg then
  local i = -1
  while arg[i - 1] do i = i - 1 end -- the interpreter is the lowest index
  EMBER = arg[i]
end
EMBER = EMBER or "build/ember"

local function q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Runs a shell command; returns stdout+stderr (2>&1 when merge) and the exit code.
local function run(cmd, merge)
  local p = io.popen(cmd .. (merge and " 2>&1" or " 2>/dev/null"))
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

local function tmpfile(contents)
  local name = os.tmpname()
  local f = assert(io.open(name, "w"))
  f:write(contents)
  f:close()
  return name
end

function T.dash_e_prints()
  local out, code = run(q(EMBER) .. " -e " .. q("print(1 + 2)"))
  check_eq(code, 0)
  check_eq(out, "3\n")
end

function T.several_dash_e_then_script()
  local s = tmpfile("print(x + y, ...)\n")
  local out, code = run(q(EMBER) .. " -e 'x = 1' -e 'y = 2' " .. q(s) .. " a")
  os.remove(s)
  check_eq(code, 0)
  check_eq(out, "3\ta\n")
end

function T.script_args_like_lua()
  local s = tmpfile("print(arg[0] == ..., select('#', ...), arg[1], arg[2], arg[-1], ...)\n")
  local out, code = run(q(EMBER) .. " " .. q(s) .. " a b")
  check_eq(code, 0)
  check_eq(out, string.format("false\t2\ta\tb\t%s\ta\tb\n", EMBER))
  out = run(q(EMBER) .. " " .. q(s) .. " x")
  check(out:find("\tx\t", 1, true), "arg[1] set")
  local s2 = tmpfile("print(arg[0])\n")
  out = run(q(EMBER) .. " " .. q(s2))
  check_eq(out, s2 .. "\n")
  os.remove(s)
  os.remove(s2)
end

function T.done_means_check()
  local out, code = run(q(EMBER) .. " -e " ..
    q("ember.manual_seed(7); local a = ember.randn(3,4); print((a*2+1):sum(2)); " ..
      "for i = 1, 3 do local s = 0; for j = 1, 4 do s = s + a[i][j]:item() * 2 + 1 end; " ..
      "print(string.format('%.4f', s)) end"))
  check_eq(code, 0)
  local vals = {}
  for v in out:match("tensor%(%[(.-)%]%)"):gmatch("[-%d%.]+") do vals[#vals + 1] = tonumber(v) end
  check_eq(#vals, 3, "a tensor of shape {3}: " .. out)
  local i = 0
  for line in out:gmatch("[^\n]+") do
    if not line:find("tensor", 1, true) then
      i = i + 1
      check_near(vals[i], tonumber(line), 2e-4)
    end
  end
  check_eq(i, 3)
end

function T.version_and_help()
  local out, code = run(q(EMBER) .. " --version")
  check_eq(code, 0)
  check(out:find("^ember " .. ember.__version:gsub("%.", "%%.")), out)
  check(out:find("Lua 5.4", 1, true), out)
  out, code = run(q(EMBER) .. " --help")
  check_eq(code, 0)
  check(out:find("usage", 1, true) and out:find("-e", 1, true), out)
  out, code = run(q(EMBER) .. " --bogus", true)
  check(code ~= 0, "unknown option fails")
  check(out:find("--bogus", 1, true), out)
end

function T.stdin_piping()
  local out, code = run("printf 'print(1+1)\\n' | " .. q(EMBER))
  check_eq(code, 0)
  check_eq(out, "2\n")
  out = run("printf 'local a = ember.ones(2)\\nprint(a:sum():item())\\n' | " .. q(EMBER))
  check_eq(out, "2.0\n", "piped stdin is one chunk: locals carry over")
  out = run("printf '1 + 2, 4' | " .. q(EMBER))
  check_eq(out, "3\t4\n", "a lone expression prints its values")
  out = run("printf 'print(...)' | " .. q(EMBER) .. " - a b")
  check_eq(out, "a\tb\n", "'-' runs stdin as a script")
end

function T.interactive_without_tty()
  local out, code = run("printf 'x + 1\\nfor i = 1, 2 do\\nprint(i)\\nend\\nember.tensor({1, 2})\\n' | " ..
    q(EMBER) .. " -i -e 'x = 41'")
  check_eq(code, 0)
  check(out:find("42\n1\n2\ntensor([1, 2])\n", 1, true), out)
  check(not out:find("> ", 1, true), "no prompts when not a tty")
  out = run("printf 'error(\"boom\")\\nprint(\"after\")\\n' | " .. q(EMBER) .. " -i", true)
  check(out:find("boom", 1, true) and out:find("after", 1, true), "REPL continues after an error")
  check(out:find("traceback", 1, true), "errors carry a traceback")
end

function T.errors_exit_nonzero()
  local s = tmpfile("local x = ember.ones(2)\nlocal y = x + ember.ones(3)\n")
  local out, code = run(q(EMBER) .. " " .. q(s), true)
  os.remove(s)
  check(code ~= 0, "script error exits non-zero")
  check(out:find("add: shapes {2} and {3} cannot broadcast", 1, true), out)
  out, code = run(q(EMBER) .. " -e 'error(\"bad\")'", true)
  check(code ~= 0)
  check(out:find("bad", 1, true), out)
  out, code = run(q(EMBER) .. " /nonexistent/script.lua", true)
  check(code ~= 0)
  check(out:find("cannot open", 1, true), out)
  out, code = run("printf 'error(\"x\")' | " .. q(EMBER), true)
  check(code ~= 0, "piped stdin error exits non-zero")
end

function T.require_and_global_are_one_module()
  local out = run(q(EMBER) .. " -e " ..
    q("print(require('ember') == ember, package.loaded.ember == ember, package.preload.ember ~= nil)"))
  check_eq(out, "true\ttrue\ttrue\n")
end

function T.sigint_interrupts()
  -- the script sends SIGINT to itself once it is running (no race with
  -- start-up, which is slow under sanitizers); timeout only guards a hang
  local code_s = "local pid = io.open('/proc/self/stat'):read('n'); " ..
    "os.execute('(sleep 0.3; kill -INT ' .. pid .. ') &'); while true do end"
  local out, code = run("timeout 60 " .. q(EMBER) .. " -e " .. q(code_s), true)
  check(code ~= 0, "interrupted run fails")
  check(out:find("interrupted!", 1, true), out)
end

return T
