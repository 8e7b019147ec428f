-- rnn.lua -- the recurrent layers (lua/stdlib/nn_rnn.lua): a 2-layer LSTM,
-- hidden 256, input 256, batch 32, 50 steps, forward + backward of the sum
-- of its output, one thread; and the same GRU. Paired with rnn.py
-- (Note [Bench families]).
return function(B)
  local ember = B.ember
  local nn = ember.nn
  if not nn.LSTM then
    print("ember_lstm skipped: this build lacks nn.LSTM")
    return
  end
  local nth = ember.get_num_threads()
  ember.set_num_threads(1)
  ember.manual_seed(0)
  local x = ember.randn(50, 32, 256)
  for _, cls in ipairs({ "LSTM", "GRU" }) do
    local m = nn[cls](256, 256, { num_layers = 2 })
    local function step()
      m:zero_grad()
      local y = m(x)
      y:sum():backward()
    end
    B.measure("ember_" .. cls:lower() .. "_l2_h256_b32_s50_fwdbwd_t1", function(t) return t * 1e3 end, "ms", 2,
      step)
    local function fwd()
      local g <close> = ember.no_grad()
      local y = m(x)
    end
    B.measure("ember_" .. cls:lower() .. "_l2_h256_b32_s50_fwd_t1", function(t) return t * 1e3 end, "ms", 2, fwd)
  end
  ember.set_num_threads(nth)
end
