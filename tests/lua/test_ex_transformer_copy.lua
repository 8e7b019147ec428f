-- test_ex_transformer_copy.lua -- examples/transformer_copy.lua in its short
-- mode: it runs, prints its token accuracy, and after 60 steps sorts far
-- better than chance (10% per token) -- the full run reaches >= 99%.
local T = {}
local EMBER = os.getenv("EMBER") or (arg and arg[-1]) or "ember"

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

function T.transformer_sort_example_learns()
  local p = io.popen(q(EMBER) .. " examples/transformer_copy.lua short 2>&1")
  local out = p:read("a")
  local _, _, code = p:close()
  check(code == 0, out)
  local acc = tonumber(out:match("token accuracy ([%d.]+)%%"))
  check(acc ~= nil, "no accuracy line in: " .. out)
  check(acc > 50, "token accuracy after 60 steps: " .. tostring(acc) .. "%\n" .. out)
end

return T
