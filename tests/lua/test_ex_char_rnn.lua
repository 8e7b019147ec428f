-- test_ex_char_rnn.lua -- examples/char_rnn.lua in its short mode: it runs,
-- the loss falls under the entropy of the character frequencies (so the LSTM
-- learnt from context) and it prints a sample.
local T = {}
local EMBER = os.getenv("EMBER") or (arg and arg[-1]) or "ember"

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

function T.char_rnn_short_learns()
  local p = io.popen(q(EMBER) .. " examples/char_rnn.lua --short 2>/dev/null")
  local out = p:read("a")
  local _, _, code = p:close()
  check(code == 0, out)
  local first, final, uniform, freq = out:match("loss ([%d.]+) %-> ([%d.]+) %(mean of the last %d+ steps%); " ..
    "uniform ([%d.]+), frequencies ([%d.]+)")
  first, final, uniform, freq = tonumber(first), tonumber(final), tonumber(uniform), tonumber(freq)
  check(first and final and uniform and freq, out)
  check_near(uniform, math.log(94), 1e-3, "log(vocab) of examples/data/ember_docs.txt")
  check(math.abs(first - uniform) < 0.3, "an untrained model starts near the uniform loss: " .. out)
  check(final < freq and freq < uniform, "the loss falls under the character-frequency entropy: " .. out)
  local sample = out:match("sample %(temperature [%d.]+%):\n(.-)\nloss ")
  check(sample and #sample >= 120 and sample:sub(1, 4) == "The ", "a sample of 120 characters after the prime: " .. out)
  check(select(2, out:gsub("\nstep +%d+ +loss", "")) >= 4, "the loss is printed as it goes: " .. out)
end

function T.char_rnn_rejects_unknown_arguments()
  local p = io.popen(q(EMBER) .. " examples/char_rnn.lua --bogus 2>&1")
  local out = p:read("a")
  local _, _, code = p:close()
  check(code ~= 0 and out:find("unknown argument --bogus", 1, true), out)
end

return T
