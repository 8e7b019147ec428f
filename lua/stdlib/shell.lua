-- shell.lua -- the interactive shell's Lua side (module ember.shell): how
-- results print (tables as readable Lua literals), help() with a tour,
-- ember.time, and the %-commands. repl/repl.c calls M.show, M.magic and
-- M.after; the shell makes M.help the global help and keeps _ as the last
-- result. Everything here also works from a script (ember.shell.repr(t)).
local ember = require "ember"

local M = {}

-- Options of the shell: timing prints the time of a line that ran longer
-- than a second; max_items and max_depth bound how much of a table prints.
M.options = { timing = false, max_items = 30, max_depth = 4, width = 78 }

local keywords = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or
  repeat return then true until while]]):gmatch("%a+") do keywords[w] = true end

local function is_name(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil and not keywords[s]
end

local function scalar(v)
  local t = type(v)
  if t == "string" then return (string.format("%q", v):gsub("\\\n", "\\n")) end
  if t == "number" and math.type(v) == "float" then
    if v ~= v then return "0/0" end
    if v == math.huge then return "math.huge" end
    if v == -math.huge then return "-math.huge" end
  end
  return tostring(v)
end

-- Keys in a stable order: the array part 1..n, then the other keys with
-- numbers before strings, each sorted.
local function sorted_keys(t, n)
  local keys = {}
  for k in pairs(t) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end

--- repr(v) -> string: v as a readable Lua literal. Tables nest (up to
--- options.max_depth), a table met again inside itself prints as
--- <cycle>, long ones show options.max_items entries and "... (N more)";
--- tensors and values with __tostring print through it.
function M.repr(v, opts)
  opts = opts or M.options
  local max_items, max_depth, width = opts.max_items or 30, opts.max_depth or 4, opts.width or 78
  local active = {}
  local function rec(x, indent, depth)
    if type(x) ~= "table" then
      if ember.is_tensor(x) then
        return (tostring(x):gsub("\n", "\n" .. indent))
      end
      return scalar(x)
    end
    local mt = getmetatable(x)
    if mt and mt.__tostring then return tostring(x) end
    if active[x] then return "<cycle>" end
    if next(x) == nil then return "{}" end
    if depth >= max_depth then return "{...}" end
    active[x] = true
    local n = #x
    local parts, count, total = {}, 0, 0
    for _ in pairs(x) do total = total + 1 end
    local inner = indent .. "  "
    for i = 1, n do
      if count == max_items then break end
      count = count + 1
      parts[#parts + 1] = rec(x[i], inner, depth + 1)
    end
    for _, k in ipairs(sorted_keys(x, n)) do
      if count == max_items then break end
      count = count + 1
      local key = is_name(k) and k or "[" .. rec(k, inner, depth + 1) .. "]"
      parts[#parts + 1] = key .. " = " .. rec(x[k], inner, depth + 1)
    end
    if total > count then parts[#parts + 1] = "... (" .. (total - count) .. " more)" end
    active[x] = nil
    local line = "{" .. table.concat(parts, ", ") .. "}"
    local multi = line:find("\n", 1, true)
    if #line + #indent <= width and not multi then return line end
    if multi then return "{\n" .. inner .. table.concat(parts, ",\n" .. inner) .. "\n" .. indent .. "}" end
    -- single-line entries fill the lines
    local lines, cur = {}, nil
    for i, p in ipairs(parts) do
      local item = p .. (i < #parts and "," or "")
      if cur and #inner + #cur + 1 + #item > width then
        lines[#lines + 1] = cur
        cur = nil
      end
      cur = cur and cur .. " " .. item or item
    end
    lines[#lines + 1] = cur
    return "{\n" .. inner .. table.concat(lines, "\n" .. inner) .. "\n" .. indent .. "}"
  end
  return rec(v, "", 0)
end

--- show(...): prints the results of a shell line, one per line when one
--- of them spans several lines, else tab-separated (as Lua's REPL).
function M.show(...)
  local args = table.pack(...) -- not select(i, ...) per value: quadratic for a line returning 1e6 values
  local n = args.n
  if n == 0 then return end
  local parts, multi = {}, false
  for i = 1, n do
    parts[i] = M.repr(args[i])
    multi = multi or parts[i]:find("\n", 1, true) ~= nil
  end
  io.write(table.concat(parts, multi and "\n" or "\t"), "\n")
end

local function human_time(s)
  if s >= 1 then return string.format("%.3g s", s) end
  if s >= 1e-3 then return string.format("%.3g ms", s * 1e3) end
  return string.format("%.3g us", s * 1e6)
end
M.human_time = human_time

--- ember.time(fn, ...): calls fn(...), prints its wall time and returns
--- fn's results.
function M.time(fn, ...)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    error("time: fn: function expected, got " .. type(fn), 2)
  end
  local t0 = ember.perf_counter()
  local r = table.pack(fn(...))
  io.write("time: ", human_time(ember.perf_counter() - t0), "\n")
  return table.unpack(r, 1, r.n)
end
ember.time = M.time

--- magic(line) -> code or nil: the Lua code a %-command line runs, or nil
--- (after printing why) when it is not one the shell knows.
---   %time EXPR-OR-STATEMENT    runs it and prints its wall time
---   %timing on|off             print the time of lines slower than 1 s
function M.magic(line)
  local cmd, rest = line:match("^%%(%a+)%s*(.-)%s*$")
  if cmd == "time" and rest ~= "" then
    if load("return " .. rest, "=stdin") then
      return "return ember.time(function() return " .. rest .. "\nend)"
    end
    return "ember.time(function() " .. rest .. "\nend)"
  elseif cmd == "timing" and (rest == "on" or rest == "off" or rest == "") then
    if rest ~= "" then M.options.timing = rest == "on" end
    io.write("timing is ", M.options.timing and "on" or "off", "\n")
    return ""
  end
  io.write("unknown command ", line, " (%time EXPR, %timing on|off)\n")
  return nil
end

--- after(seconds): called by the shell after each line with its wall
--- time; prints it when timing is on and the line took over a second.
function M.after(seconds)
  if M.options.timing and seconds > 1 then io.write("(", human_time(seconds), ")\n") end
end

local TOUR = [[
ember: tensors and autodiff in Lua.

  x = ember.randn(3, 4)              a 3x4 tensor (also zeros, ones, arange, tensor{...})
  y = (x * 2):sum(2)                 ops as functions, methods and operators; dims are 1-based
  w = ember.ones(4, {requires_grad = true})
  loss = (x:matmul(w) ^ 2):mean()
  loss:backward(); print(w.grad)     gradients, as in PyTorch
  ember.no_grad(function() ... end)  run without recording the graph

In this shell:
  help(ember.add), help(x.sum), help("conv2d")   one op: signature, options, doc
  ember.help()                        every op by name;  man ember-ops  the reference
  _                                   the last result
  %time EXPR                          run and print the wall time (or ember.time(fn))
  %timing on                          print the time of every line slower than a second
  ember.set_printoptions{precision=2} how tensors print
  Tab completes names, fields, methods and (inside a string) file names;
  Ctrl-C stops a running computation; Ctrl-D leaves.
]]

--- help([x]): a short tour, or the documentation of x: an ember function
--- or method (help(ember.add), help(x.sum)), an op name ("conv2d"), a
--- tensor (its shape, dtype and grad state), or a table with a `__doc`
--- string (modules) -- else the table's fields.
function M.help(x)
  if x == nil then
    io.write(TOUR)
    return
  end
  if type(x) == "function" or type(x) == "string" then
    local ok, err = pcall(ember.help, x)
    if ok then return end
    if type(x) == "string" then
      -- a dotted path such as "nn.functional.relu" or "autograd.grad"
      local v = ember
      for part in x:gmatch("[^.]+") do v = type(v) == "table" and v[part] or nil end
      if v ~= nil and v ~= x then return M.help(v) end
    end
    io.write((tostring(err):gsub("^help: ", "")), "\n")
    return
  end
  if ember.is_tensor(x) then
    local shape = table.concat(x.shape, ", ")
    io.write(string.format("a tensor of shape {%s}, dtype %s, on %s", shape, x.dtype, tostring(x.device)))
    if x.grad_fn then io.write(", made by ", x.grad_fn.name)
    elseif x.requires_grad then io.write(", a leaf that requires grad") end
    io.write("\nmethods: help(x.sum) for one; ember.help() lists the ops\n")
    return
  end
  if type(x) == "table" then
    local doc = rawget(x, "__doc") or (getmetatable(x) or {}).__doc
    if type(doc) == "string" then
      io.write(doc, doc:sub(-1) == "\n" and "" or "\n")
      return
    end
    local names = {}
    for k, v in pairs(x) do
      if type(k) == "string" then names[#names + 1] = type(v) == "table" and k .. "." or k end
    end
    table.sort(names)
    io.write("a table with ", #names, " named fields:\n")
    local line = " "
    for _, n in ipairs(names) do
      if #line + #n + 1 > M.options.width then
        io.write(line, "\n")
        line = " "
      end
      line = line .. " " .. n
    end
    io.write(line, "\n")
    return
  end
  io.write("a ", type(x), " value: ", M.repr(x), "\n")
end

return M
