-- test_utils.lua -- ember.utils (lua/stdlib/utils.lua): progress, plot,
-- plot_svg, Timer, seed_everything, isatty.
local ember = require "ember"
local utils = ember.utils
local T = {}

-- a file-like sink for the progress bar
local function sink()
  local s = {text = ""}
  function s:write(...) for _, v in ipairs({...}) do self.text = self.text .. v end return self end
  function s:flush() end
  return s
end

function T.progress_counts_and_prints_plain_lines_off_a_terminal()
  local out = sink()
  local bar = utils.progress(4, {desc = "epoch", file = out, every = 0})
  local seen = {}
  for i in bar do seen[#seen + 1] = i; bar:set_postfix{loss = 1 / i} end
  check_eq(table.concat(seen, ","), "1,2,3,4")
  check(out.text:find("epoch: 100%|", 1, true), out.text)
  check(out.text:find("4/4 [", 1, true), out.text)
  check(out.text:find("loss=0.25]", 1, true), out.text)
  check(not out.text:find("\r", 1, true), "no carriage returns off a terminal")
  -- an iterable that yields several values, and an array
  local loader = ember.data.DataLoader(ember.data.TensorDataset(ember.ones(5, 2), ember.zeros(5)), {batch_size = 2})
  out = sink()
  local n = 0
  for x, y in utils.progress(loader, {file = out, every = 1e9}) do
    check(x:size(1) == y:size(1), "both values reach the loop"); n = n + 1
  end
  check_eq(n, 3)
  check(out.text:find("3/3", 1, true), "the total comes from #loader: " .. out.text)
  local words = {}
  for w in utils.progress({"a", "b"}, {file = sink()}) do words[#words + 1] = w end
  check_eq(table.concat(words), "ab")
  check_error(function() utils.progress("x") end, "progress", "expected a count")
end

function T.plot_draws_braille_with_axes_and_labels()
  local y = {}
  for i = 1, 30 do y[i] = (i - 15) ^ 2 end
  local text = utils.plot({y, ember.tensor(y) / 2}, {width = 30, height = 6, title = "parabola",
    labels = {"full", "half"}, xlabel = "step", print = false, color = false})
  local lines = {}
  for l in (text .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  check(lines[1]:find("parabola", 1, true), text)
  check(text:find("225", 1, true) and text:find("└", 1, true) and text:find("(step)", 1, true), text)
  check(text:find("full", 1, true) and text:find("half", 1, true), text)
  local dots = 0
  for _, c in utf8.codes(text) do if c > 0x2800 and c <= 0x28ff then dots = dots + 1 end end
  check(dots > 30, "braille dots drawn: " .. dots)
  check_error(function() utils.plot({1, "x"}) end, "plot", "element 2 is a string")
  check_error(function() utils.plot(ember.ones(2, 2)) end, "plot", "must be 1-d")
end

function T.plot_svg_writes_a_well_formed_file()
  local p = os.tmpname()
  utils.plot_svg(p, {{x = {0, 1, 2}, y = {3, 1, 2}}}, {title = "a <b>", labels = {"loss"}})
  local f = assert(io.open(p))
  local s = f:read("a")
  f:close()
  os.remove(p)
  check(s:find("^<svg") and s:find("</svg>", 1, true), "svg root")
  check(s:find("<polyline", 1, true), "a polyline per series")
  check(s:find("a &lt;b&gt;", 1, true), "text is escaped")
  local open, close = 0, 0
  for _ in s:gmatch("<text") do open = open + 1 end
  for _ in s:gmatch("</text>") do close = close + 1 end
  check_eq(open, close)
end

function T.timer_and_seed_everything()
  local t = utils.Timer()
  local a = t:elapsed()
  check(a >= 0 and t:lap() >= 0, "elapsed and lap")
  utils.seed_everything(5)
  local r1, m1 = ember.rand(3), math.random()
  utils.seed_everything(5)
  check(ember.equal(ember.rand(3), r1) and math.random() == m1, "both generators reseeded")
  check_error(function() utils.seed_everything(1.5) end, "seed_everything", "integer")
  check_eq(type(utils.isatty(io.stderr)), "boolean")
end

return T
