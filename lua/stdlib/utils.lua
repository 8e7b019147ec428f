-- utils.lua -- ember.utils: training conveniences.
--   for i in utils.progress(100, {desc = "epoch"}) do ... end   -- or progress(loader)
--   local bar = utils.progress(loader); for x, y in bar do ...; bar:set_postfix{loss = l} end
--   utils.plot({losses, accs}, {labels = {"loss", "acc"}, title = "training"})  -- braille, in the terminal
--   utils.plot_svg("curve.svg", losses, {title = "loss"})                    -- the same as an SVG file
--   local t = utils.Timer(); ...; print(t:elapsed()); utils.seed_everything(0)
local ember = require "ember"

local utils = ember.utils -- made by the C side, holding isatty
utils.__doc = "ember.utils: progress(n | iterable, {desc=, file=, every=}), plot(series, {width=, height=, " ..
  "title=, labels=, xlabel=, ylabel=, print=}), plot_svg(path, series, opts), Timer(), seed_everything(seed), isatty(f)"

local function errorf(fmt, ...) error(string.format(fmt, ...), 3) end

-- ---- Timer ----

local Timer = {}
Timer.__index = Timer
Timer.__name = "Timer"

--- Timer(): t:elapsed() seconds since creation or reset; t:lap() the seconds
--- since the last lap (or start) and starts a new one; t:reset().
function utils.Timer()
  local now = ember.perf_counter()
  return setmetatable({start = now, last = now}, Timer)
end
function Timer:elapsed() return ember.perf_counter() - self.start end
function Timer:lap()
  local now = ember.perf_counter()
  local d = now - self.last
  self.last = now
  return d
end
function Timer:reset()
  self.start = ember.perf_counter()
  self.last = self.start
end
function Timer:__tostring() return string.format("Timer(%.3f s)", self:elapsed()) end

--- seed_everything(seed): seeds ember's default generator and Lua's math.random.
function utils.seed_everything(seed)
  if math.type(seed) ~= "integer" then errorf("seed_everything: seed must be an integer, got %s", tostring(seed)) end
  ember.manual_seed(seed)
  math.randomseed(seed)
  return seed
end

-- ---- progress ----

local function hms(s)
  if s ~= s or s == math.huge then return "?" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return string.format("%d:%02d:%02d", s // 3600, s % 3600 // 60, s % 60) end
  return string.format("%02d:%02d", s // 60, s % 60)
end

local Progress = {}
Progress.__index = Progress
Progress.__name = "Progress"

--- progress(n | iterable, {desc=, total=, file=io.stderr, every=1 (s, between
--- plain lines)}): counts iterations of `for ... in bar do`, drawing a bar
--- with the count, rate and ETA on a terminal (redrawn at most 10 times a
--- second), or printing a plain line every `every` seconds and at the end
--- otherwise. The iterable may be a number n (yields 1..n), an array, a
--- function iterator, or anything callable in a generic for (a DataLoader);
--- #iterable gives the total when it has one. bar:set_postfix{k = v} adds
--- fields; bar:close() ends the line (done automatically at the end).
function utils.progress(it, opts)
  opts = opts or {}
  local file = opts.file or (io and io.stderr)
  if not file then errorf("progress: no file to draw on (this state has no io library; pass {file=})") end
  local self = setmetatable({desc = opts.desc, file = file, every = opts.every or 1,
    n = 0, postfix = "", closed = false}, Progress)
  local ty = type(it)
  if math.type(it) == "integer" then
    if it < 0 then errorf("progress: the count must be >= 0, got %d", it) end
    self.total = it
    local i = 0
    self.source = function() i = i + 1; if i <= it then return i end end
  elseif ty == "table" and getmetatable(it) == nil then
    self.total = #it
    local i = 0
    self.source = function() i = i + 1; return it[i] end
  elseif ty == "function" then
    self.source = it
  elseif (ty == "table" or ty == "userdata") and getmetatable(it) and getmetatable(it).__call then
    local ok, n = pcall(function() return #it end)
    if ok then self.total = n end
    local control
    self.source = function()
      local r = table.pack(it(nil, control))
      control = r[1]
      return table.unpack(r, 1, r.n)
    end
  else
    errorf("progress: expected a count, an array or an iterable, got %s", ty)
  end
  self.total = opts.total or self.total
  self.tty = io ~= nil and io.type(self.file) == "file" and utils.isatty(self.file)
  self.t0 = ember.perf_counter()
  self.shown = -math.huge
  return self
end

--- bar:set_postfix{loss = 0.12, acc = 0.9}: fields printed after the rate
--- (numbers with 4 significant digits, in name order).
function Progress:set_postfix(t)
  if type(t) ~= "table" then errorf("set_postfix: expected a table of fields") end
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = t[k]
    if ember.is_tensor(v) then v = v:item() end
    parts[#parts + 1] = k .. "=" .. (type(v) == "number" and string.format("%.4g", v) or tostring(v))
  end
  self.postfix = table.concat(parts, ", ")
end

-- The status line.
function Progress:line(final)
  local el = ember.perf_counter() - self.t0
  local rate = el > 0 and self.n / el or 0
  local head = self.desc and (self.desc .. ": ") or ""
  local speed = rate >= 1 and string.format("%.2fit/s", rate) or (rate > 0 and string.format("%.2fs/it", 1 / rate) or "?it/s")
  local tail = string.format("%s<%s, %s", hms(el), self.total and rate > 0 and hms((self.total - self.n) / rate) or "?", speed)
  if self.postfix ~= "" then tail = tail .. ", " .. self.postfix end
  if self.total and self.total > 0 then
    local frac = math.min(self.n / self.total, 1)
    local width = 24
    local full = math.floor(frac * width)
    local bar = string.rep("█", full)
    if full < width then
      local part = math.floor((frac * width - full) * 8)
      bar = bar .. (part > 0 and utf8.char(0x2590 - part) or " ") .. string.rep(" ", width - full - 1)
    end
    return string.format("%s%3d%%|%s| %d/%d [%s]", head, math.floor(frac * 100), bar, self.n, self.total, tail)
  end
  return string.format("%s%d [%s]", head, self.n, tail)
end

function Progress:show(final)
  local now = ember.perf_counter()
  if self.tty then
    if final or now - self.shown >= 0.1 then
      self.file:write("\r" .. self:line(final) .. "\27[K" .. (final and "\n" or ""))
      self.file:flush()
      self.shown = now
    end
  elseif final or now - self.shown >= self.every then
    self.file:write(self:line(final) .. "\n")
    self.file:flush()
    self.shown = now
  end
end

--- bar:update(k): counts k more iterations (for bars driven by hand).
function Progress:update(k)
  self.n = self.n + (k or 1)
  self:show(false)
end

function Progress:close()
  if self.closed then return end
  self.closed = true
  self:show(true)
end

function Progress:__call()
  if self.started then self.n = self.n + 1 end
  self.started = true
  local r = table.pack(self.source())
  if r[1] == nil then
    self:close()
    return nil
  end
  self:show(false)
  return table.unpack(r, 1, r.n)
end

-- ---- plots ----

-- series: an array of numbers, a 1-d tensor, {x = ..., y = ...}, or an
-- array of those. Returns an array of {x = {...}, y = {...}}.
local function as_list(v, what)
  if ember.is_tensor(v) then
    if v:dim() ~= 1 then errorf("plot: %s must be 1-d, got %d dims", what, v:dim()) end
    return v:double():tolist()
  end
  if type(v) ~= "table" then errorf("plot: %s must be an array of numbers or a 1-d tensor, got %s", what, type(v)) end
  for i, e in ipairs(v) do
    if type(e) ~= "number" then errorf("plot: %s element %d is a %s, expected a number", what, i, type(e)) end
  end
  return v
end

local function normalise(series)
  local function one(s, k)
    if type(s) == "table" and not ember.is_tensor(s) and s.y ~= nil then
      local y = as_list(s.y, "series " .. k .. " y")
      local x = s.x and as_list(s.x, "series " .. k .. " x")
      if x and #x ~= #y then errorf("plot: series %d has %d x values and %d y values", k, #x, #y) end
      if not x then x = {}; for i = 1, #y do x[i] = i end end
      return {x = x, y = y}
    end
    local y = as_list(s, "series " .. k)
    local x = {}
    for i = 1, #y do x[i] = i end
    return {x = x, y = y}
  end
  if ember.is_tensor(series) or (type(series) == "table" and (type(series[1]) == "number" or series.y ~= nil)) then
    return {one(series, 1)}
  end
  if type(series) ~= "table" or #series == 0 then errorf("plot: expected a series or an array of series") end
  local out = {}
  for k, s in ipairs(series) do out[k] = one(s, k) end
  return out
end

local function bounds(list)
  local x0, x1, y0, y1 = math.huge, -math.huge, math.huge, -math.huge
  for _, s in ipairs(list) do
    for i = 1, #s.y do
      local x, y = s.x[i], s.y[i]
      if y == y and y ~= math.huge and y ~= -math.huge then
        x0, x1 = math.min(x0, x), math.max(x1, x)
        y0, y1 = math.min(y0, y), math.max(y1, y)
      end
    end
  end
  if x0 > x1 then x0, x1, y0, y1 = 0, 1, 0, 1 end
  if x0 == x1 then x0, x1 = x0 - 1, x1 + 1 end
  if y0 == y1 then y0, y1 = y0 - 1, y1 + 1 end
  return x0, x1, y0, y1
end

local function fmt(v)
  local s = string.format("%.4g", v)
  return s
end

local COLORS = {"\27[34m", "\27[31m", "\27[32m", "\27[33m", "\27[35m", "\27[36m"}
local MARKS = {"⣿", "⠶", "⠒", "⠤", "⠉", "⠆"}

--- plot(series, {width=60, height=15, title=, labels=, xlabel=, ylabel=,
--- color=isatty(stdout), print=true}): the series drawn with Unicode braille
--- dots (2x4 per character) between labelled axes; returns the text (and
--- prints it unless print=false). Series: an array of numbers, a 1-d
--- tensor, {x=, y=}, or an array of those (one colour each on a terminal).
function utils.plot(series, opts)
  opts = opts or {}
  local list = normalise(series)
  local W, H = opts.width or 60, opts.height or 15
  if math.type(W) ~= "integer" or W < 4 or math.type(H) ~= "integer" or H < 2 then
    errorf("plot: width must be an integer >= 4 and height >= 2")
  end
  local color = opts.color
  if color == nil then
    color = io ~= nil and utils.isatty(io.stdout) and (os.getenv and os.getenv("NO_COLOR") or "") == ""
  end
  local x0, x1, y0, y1 = bounds(list)
  local PW, PH = W * 2, H * 4
  -- cells[r][c] = {bits, series}
  local bits, owner = {}, {}
  for r = 1, H do bits[r], owner[r] = {}, {}; for c = 1, W do bits[r][c] = 0 end end
  local DOT = {{0x01, 0x08}, {0x02, 0x10}, {0x04, 0x20}, {0x40, 0x80}}
  local function set(px, py, k)
    if px < 0 or px >= PW or py < 0 or py >= PH then return end
    local c, r = px // 2 + 1, py // 4 + 1
    bits[r][c] = bits[r][c] | DOT[py % 4 + 1][px % 2 + 1]
    owner[r][c] = k
  end
  local function to_px(x, y)
    return math.floor((x - x0) / (x1 - x0) * (PW - 1) + 0.5), math.floor((y1 - y) / (y1 - y0) * (PH - 1) + 0.5)
  end
  for k, s in ipairs(list) do
    local px, py
    for i = 1, #s.y do
      local y = s.y[i]
      if y == y and math.abs(y) ~= math.huge then
        local qx, qy = to_px(s.x[i], y)
        if px then -- a line from the previous point
          local steps = math.max(math.abs(qx - px), math.abs(qy - py), 1)
          for t = 0, steps do
            set(math.floor(px + (qx - px) * t / steps + 0.5), math.floor(py + (qy - py) * t / steps + 0.5), k)
          end
        else
          set(qx, qy, k)
        end
        px, py = qx, qy
      else
        px = nil
      end
    end
  end
  local ylab = {fmt(y1), fmt((y0 + y1) / 2), fmt(y0)}
  local lw = 0
  for _, l in ipairs(ylab) do lw = math.max(lw, #l) end
  local out = {}
  if opts.title then out[#out + 1] = string.rep(" ", lw + 2) .. opts.title end
  if opts.ylabel then out[#out + 1] = string.rep(" ", lw + 2) .. "(" .. opts.ylabel .. ")" end
  for r = 1, H do
    local lab = r == 1 and ylab[1] or (r == H and ylab[3]) or (r == (H + 1) // 2 and ylab[2]) or ""
    local row = {string.rep(" ", lw - #lab) .. lab .. " ┤"}
    for c = 1, W do
      local ch = bits[r][c] == 0 and " " or utf8.char(0x2800 + bits[r][c])
      if color and owner[r][c] then ch = COLORS[(owner[r][c] - 1) % #COLORS + 1] .. ch .. "\27[0m" end
      row[#row + 1] = ch
    end
    out[#out + 1] = table.concat(row)
  end
  out[#out + 1] = string.rep(" ", lw + 1) .. "└" .. string.rep("─", W)
  local xl, xr = fmt(x0), fmt(x1)
  local mid = opts.xlabel and ("(" .. opts.xlabel .. ")") or ""
  local gap = math.max(1, W - #xl - #xr - #mid)
  out[#out + 1] = string.rep(" ", lw + 2) .. xl .. string.rep(" ", gap // 2) .. mid ..
    string.rep(" ", gap - gap // 2) .. xr
  if opts.labels then
    local parts = {}
    for k, name in ipairs(opts.labels) do
      local m = color and (COLORS[(k - 1) % #COLORS + 1] .. "⣿\27[0m") or MARKS[(k - 1) % #MARKS + 1]
      parts[#parts + 1] = m .. " " .. tostring(name)
    end
    out[#out + 1] = string.rep(" ", lw + 2) .. table.concat(parts, "   ")
  end
  local text = table.concat(out, "\n")
  if opts.print ~= false then print(text) end
  return text
end

local function xml(s) return (tostring(s):gsub("[&<>\"]", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;"})) end

--- plot_svg(path, series, {width=640, height=400, title=, labels=, xlabel=,
--- ylabel=}): the same plot as an SVG file (polylines, axes with 5 ticks,
--- a legend), written without external tools. Returns the path.
function utils.plot_svg(path, series, opts)
  if type(path) ~= "string" then errorf("plot_svg: path must be a string") end
  opts = opts or {}
  local list = normalise(series)
  local W, H = opts.width or 640, opts.height or 400
  local L, R, T, B = 70, 20, opts.title and 40 or 20, 50
  local x0, x1, y0, y1 = bounds(list)
  local function sx(x) return L + (x - x0) / (x1 - x0) * (W - L - R) end
  local function sy(y) return T + (y1 - y) / (y1 - y0) * (H - T - B) end
  local pal = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf"}
  local o = {string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" ' ..
    'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">', W, H, W, H),
    string.format('<rect width="%d" height="%d" fill="white"/>', W, H)}
  if opts.title then
    o[#o + 1] = string.format('<text x="%g" y="24" text-anchor="middle" font-size="16">%s</text>', W / 2, xml(opts.title))
  end
  o[#o + 1] = string.format('<path d="M%g %gV%gH%g" stroke="black" fill="none"/>', L, T, H - B, W - R)
  for i = 0, 4 do
    local xv, yv = x0 + (x1 - x0) * i / 4, y0 + (y1 - y0) * i / 4
    o[#o + 1] = string.format('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>' ..
      '<text x="%.1f" y="%d" text-anchor="middle">%s</text>', sx(xv), H - B, sx(xv), H - B + 5, sx(xv), H - B + 18, fmt(xv))
    o[#o + 1] = string.format('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' ..
      '<text x="%d" y="%.1f" text-anchor="end">%s</text>', L, sy(yv), W - R, sy(yv), L - 6, sy(yv) + 4, fmt(yv))
  end
  if opts.xlabel then
    o[#o + 1] = string.format('<text x="%g" y="%d" text-anchor="middle">%s</text>', (L + W - R) / 2, H - 12, xml(opts.xlabel))
  end
  if opts.ylabel then
    o[#o + 1] = string.format('<text x="16" y="%g" text-anchor="middle" transform="rotate(-90 16 %g)">%s</text>',
      (T + H - B) / 2, (T + H - B) / 2, xml(opts.ylabel))
  end
  for k, s in ipairs(list) do
    local pts, segs = {}, {}
    for i = 1, #s.y do
      local y = s.y[i]
      if y == y and math.abs(y) ~= math.huge then
        pts[#pts + 1] = string.format("%.2f,%.2f", sx(s.x[i]), sy(y))
      elseif #pts > 0 then
        segs[#segs + 1] = pts; pts = {}
      end
    end
    if #pts > 0 then segs[#segs + 1] = pts end
    for _, p in ipairs(segs) do
      o[#o + 1] = string.format('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>',
        table.concat(p, " "), pal[(k - 1) % #pal + 1])
    end
  end
  if opts.labels then
    for k, name in ipairs(opts.labels) do
      local y = T + 6 + (k - 1) * 16
      o[#o + 1] = string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>' ..
        '<text x="%d" y="%d">%s</text>', W - R - 120, y, W - R - 100, y, pal[(k - 1) % #pal + 1], W - R - 95, y + 4, xml(name))
    end
  end
  o[#o + 1] = "</svg>\n"
  if not io then errorf("plot_svg: this state has no io library (a sandbox)") end
  local f, err = io.open(path, "w")
  if not f then errorf("plot_svg: cannot write '%s': %s", path, tostring(err)) end
  f:write(table.concat(o, "\n"))
  f:close()
  return path
end

return utils
