-- test_ex_transformer_copy.lua -- examples/transformer_copy.lua in its short
-- mode: it runs, prints its token accuracy, and after 60 steps sorts far
-- better than chance (10% per token) -- the full run reaches >= 99%.
local T = {}
local q, run = shell_quote, run_cmd

function T.transformer_sort_example_learns()
  local out, code = run(q(EMBER) .. " examples/transformer_copy.lua short")
  check(code == 0, out)
  local acc = tonumber(out:match("token accuracy ([%d.]+)%%"))
  check(acc ~= nil, "no accuracy line in: " .. out)
  check(acc > 50, "token accuracy after 60 steps: " .. tostring(acc) .. "%\n" .. out)
end

return T
