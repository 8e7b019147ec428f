-- teach.lua -- ember.autograd for teaching how a gradient is computed
-- (module ember.teach; its functions are also ember.autograd's):
--   ember.autograd.trace(y)              run y's backward node by node, printing for
--   y:backward{trace = true}             each node the gradient it received, its
--                                        formulas (derivatives.yaml) and what it sends
--   for s in ember.autograd.steps(y) do print(s) end     the same, one step at a time
--   ember.autograd.dot(y, {values = true, grads = true, inputs = {x = x}})
--   ember.autograd.draw(y, "graph.svg")  the graph through Graphviz's dot
-- and gradcheck's mismatch message names the ops between the output and the input.
local ember = require "ember"
local autograd = require "ember.autograd"

local M = {}

-- ---- the graph ----

-- Every node reachable from root, each once, parents before children.
local function collect(root)
  local list, seen = {}, {}
  local function visit(n)
    if seen[n.id] then return end
    seen[n.id] = true
    list[#list + 1] = n
    for _, nx in ipairs(n.next_functions) do
      if nx then visit(nx) end
    end
  end
  visit(root)
  return list
end

-- A tensor as a short string: small ones in full, larger by shape.
local function brief(t)
  if not t then return "none" end
  if t:numel() <= 8 then return (tostring(t):gsub("%s*\n%s*", " ")) end
  return "tensor of shape {" .. table.concat(t.shape, ", ") .. "}, dtype " .. t.dtype
end
M.brief = brief

-- ---- recorded backward passes ----

local Step = {}
Step.__index = Step

function Step:__tostring()
  local lines = { string.format("[%d] %s", self.index, self.name) }
  lines[#lines + 1] = "    receives  " .. brief(self.grad_output)
  for i, e in ipairs(self.edges) do
    local f = e.formula and ("  = " .. e.formula) or ""
    lines[#lines + 1] = string.format("    %-9s %s%s", i == 1 and "sends" or "", (e.input and e.input .. " <- " or "")
      .. brief(e.grad) .. (e.to and ("  to " .. e.to) or ""), f)
  end
  return table.concat(lines, "\n")
end

-- last recorded steps of each graph root (weak: they go with the graph)
local recorded = setmetatable({}, { __mode = "k" })

-- Runs y's backward with a hook on every node; returns its steps in the
-- order the engine ran them. backward_opts go to y:backward.
local function record(y, grad, backward_opts)
  if not ember.is_tensor(y) then error("trace: y: tensor expected, got " .. type(y), 3) end
  local root = y.grad_fn
  if not root then
    error("trace: y has no history (a leaf, or made without recording): nothing to trace", 3)
  end
  local steps, handles = {}, {}
  for _, n in ipairs(collect(root)) do
    local formulas = autograd.formulas(n.name) or {}
    local nexts = n.next_functions
    handles[#handles + 1] = n:register_hook(function(grad_inputs, grad_outputs)
      local s = setmetatable({ index = #steps + 1, name = n.name, node = n,
        grad_output = grad_outputs[1] or nil, grad_outputs = grad_outputs, edges = {} }, Step)
      for i = 1, math.max(#grad_inputs, #formulas) do
        local f = formulas[i] or {}
        local g = grad_inputs[i]
        s.edges[i] = { input = f.input, formula = f.formula, grad = g or nil,
          to = nexts[i] and nexts[i].name or nil }
      end
      steps[#steps + 1] = s
    end)
  end
  local ok, err = pcall(y.backward, y, grad, backward_opts)
  for _, h in ipairs(handles) do h:remove() end
  if not ok then error(err, 0) end
  recorded[root.id] = steps
  return steps
end

--- trace(y, [grad], [{retain_graph=, print=true}]) -> steps: runs y:backward
--- (accumulating .grad like backward) and prints each node as it runs.
function M.trace(y, grad, opts)
  if type(grad) == "table" and not ember.is_tensor(grad) then grad, opts = nil, grad end
  opts = opts or {}
  local steps = record(y, grad, { retain_graph = opts.retain_graph })
  if opts.print ~= false then
    io.write("backward of ", brief(y), "\n")
    for _, s in ipairs(steps) do io.write(tostring(s), "\n") end
  end
  return steps
end

--- steps(y, [grad], [opts]): an iterator over the steps of y's backward
--- (run once, then replayed one step per loop turn).
function M.steps(y, grad, opts)
  if type(grad) == "table" and not ember.is_tensor(grad) then grad, opts = nil, grad end
  local steps = record(y, grad, { retain_graph = (opts or {}).retain_graph })
  local i = 0
  return function()
    i = i + 1
    return steps[i]
  end
end

-- y:backward{trace = true, retain_graph=}: the C method calls M.trace
-- (runtime/lua/lua_backward.c).

-- ---- DOT with labels, and drawing ----

local c_dot = autograd.dot

local function esc(s) return (s:gsub('["\\]', "\\%0"):gsub("\n", "\\n")) end

--- dot(y, [{values=, grads=, inputs={name=tensor}}]) -> DOT text. values
--- labels the output and the named inputs with their values; grads labels
--- every node with the gradient it received in y's last traced backward
--- (trace, steps or backward{trace=true}) and the inputs with their .grad.
function M.dot(y, opts)
  if opts == nil then return c_dot(y) end
  if not ember.is_tensor(y) then error("dot: y: tensor expected, got " .. type(y), 2) end
  local root = y.grad_fn
  if not root then error("dot: y has no history: no graph to draw", 2) end
  local steps = recorded[root.id]
  if opts.grads and not steps then
    error("dot: grads = true needs a traced backward of y first: ember.autograd.trace(y, {retain_graph = true})"
      .. " or y:backward{trace = true, retain_graph = true}", 2)
  end
  local got = {}
  for _, s in ipairs(steps or {}) do got[s.node.id] = s end
  local names = {}
  for name, t in pairs(opts.inputs or {}) do
    local acc = ember.is_tensor(t) and t.grad_accumulator
    if acc then names[acc.id] = { name = name, t = t } end
  end
  local out = { "digraph backward {", '  node [shape=box, fontname="monospace"];' }
  local ids = {}
  for i, n in ipairs(collect(root)) do ids[n.id] = "n" .. i end
  out[#out + 1] = string.format('  out [label="%s", shape=ellipse];', esc("output " ..
    (opts.values and brief(y:detach()) or "{" .. table.concat(y.shape, ", ") .. "}")))
  out[#out + 1] = "  out -> " .. ids[root.id] .. ";"
  for _, n in ipairs(collect(root)) do
    local label = { n.name }
    local leaf = names[n.id]
    if leaf then
      label[1] = leaf.name .. " (leaf)"
      if opts.values then label[#label + 1] = "value " .. brief(leaf.t:detach()) end
      if opts.grads and leaf.t.grad then label[#label + 1] = "grad " .. brief(leaf.t.grad) end
    elseif opts.grads and got[n.id] then
      label[#label + 1] = "receives " .. brief(got[n.id].grad_output)
    end
    out[#out + 1] = string.format('  %s [label="%s"];', ids[n.id], esc(table.concat(label, "\n")))
    for _, nx in ipairs(n.next_functions) do
      if nx then out[#out + 1] = "  " .. ids[n.id] .. " -> " .. ids[nx.id] .. ";" end
    end
  end
  out[#out + 1] = "}"
  return table.concat(out, "\n") .. "\n"
end
autograd.dot = M.dot

--- draw(y, path, [dot opts]): renders the graph with Graphviz's dot into
--- path (format from its extension: svg, png, pdf); an error says how to
--- install Graphviz when dot is missing.
function M.draw(y, path, opts)
  if type(path) ~= "string" then error("draw: path: string expected, got " .. type(path), 2) end
  local fmt = path:match("%.(%w+)$") or "svg"
  local text = M.dot(y, opts or {})
  if not os.execute("command -v dot >/dev/null 2>&1") then
    error("draw: Graphviz's dot is not installed (Debian: apt-get install graphviz); "
      .. "ember.autograd.dot(y) gives the DOT text", 2)
  end
  local src = os.tmpname()
  local f = assert(io.open(src, "w"))
  f:write(text)
  f:close()
  local q = function(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
  local ok = os.execute("dot -T" .. fmt .. " -o " .. q(path) .. " " .. q(src) .. " 2>/dev/null")
  os.remove(src)
  if not ok then error("draw: dot failed to write " .. path .. " as " .. fmt, 2) end
  return path
end

-- ---- gradcheck that names the suspects ----

-- The nodes on some path from root to the node target (by id), in order.
local function between(root, target_id)
  local memo, list = {}, {}
  local function reaches(n)
    if memo[n.id] ~= nil then return memo[n.id] end
    memo[n.id] = false
    local r = n.id == target_id
    for _, nx in ipairs(n.next_functions) do
      if nx and reaches(nx) then r = true end
    end
    memo[n.id] = r
    if r and n.id ~= target_id then table.insert(list, 1, n.name) end
    return r
  end
  reaches(root)
  return list
end
M.between = between

local c_gradcheck = autograd.gradcheck
--- gradcheck as before; a mismatch also names the ops between that output
--- and that input: one of their formulas (derivatives.yaml, shown by
--- ember.autograd.formulas(name)) or a custom Function is suspect.
function M.gradcheck(fn, inputs, opts)
  opts = opts or {}
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.raise = false
  local ok, msg = c_gradcheck(fn, inputs, o)
  if ok then return true end
  local oi, ii = tostring(msg):match("output (%d+).- input (%d+)")
  if oi then
    -- rebuild the graph of that output on float64 leaves, as gradcheck does
    local args = {}
    for i, x in ipairs(inputs) do
      if ember.is_tensor(x) and (x.dtype == "float32" or x.dtype == "float64" or x.dtype == "float16"
          or x.dtype == "bfloat16") then
        args[i] = x:detach():to("float64"):requires_grad_()
      else
        args[i] = x
      end
    end
    local res = table.pack(pcall(fn, table.unpack(args, 1, #inputs)))
    local outs = {}
    for i = 2, res.n do
      if ember.is_tensor(res[i]) then outs[#outs + 1] = res[i] end
    end
    local out, x = outs[tonumber(oi)], args[tonumber(ii)]
    if out and out.grad_fn and ember.is_tensor(x) and x.grad_accumulator then
      local ops = between(out.grad_fn, x.grad_accumulator.id)
      if #ops > 0 then
        msg = msg .. "\n  ops between them: " .. table.concat(ops, ", ")
          .. " (one of their formulas is suspect: ember.autograd.formulas(name) shows them)"
      end
    end
  end
  if opts.raise ~= false then error(msg, 2) end
  return false, msg
end
autograd.gradcheck = M.gradcheck

autograd.trace, autograd.steps, autograd.draw = M.trace, M.steps, M.draw
return M
