-- test_soak.lua -- 500 steps of tests/soak.lua (make soak runs 10,000):
-- resident memory flat after warm-up (growth under 5%).
local T = {}
local EMBER = os.getenv("EMBER") or (arg and arg[-1]) or "ember"

function T.training_loop_memory_is_flat()
  if EMBER:find("/san-", 1, true) then -- ASan's quarantine holds freed memory: RSS means nothing there
    print("  (skipped under a sanitizer build: " .. EMBER .. ")")
    return
  end
  local p = io.popen("'" .. EMBER .. "' tests/soak.lua 500 2>&1")
  local out = p:read("a")
  local ok = p:close()
  check(ok and out:find("soak: 500 steps", 1, true), out)
  local g = tonumber(out:match("growth (%-?[%d.]+)%%"))
  check(g and g < 5, out)
end

return T
