-- test_ex_char_rnn.lua -- examples/char_rnn.lua in its short mode: it runs,
-- the loss falls under the entropy of the character frequencies (so the LSTM
-- learnt from context) and it prints a sample.
local T = {}
local q, run = shell_quote, run_cmd

function T.char_rnn_short_learns()
  local out, code = run(q(EMBER) .. " examples/char_rnn.lua --short", false)
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
  local out, code = run(q(EMBER) .. " examples/char_rnn.lua --bogus")
  check(code ~= 0 and out:find("unknown argument --bogus", 1, true), out)
end

return T
