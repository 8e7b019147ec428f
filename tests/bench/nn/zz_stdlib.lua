-- zz_stdlib.lua -- issue 10's training steps written as a user of the
-- stdlib writes them: torch_ref.py's MLP (784-512-512-10, batch 128) as an
-- nn.Sequential with nn.CrossEntropyLoss and optim.SGD (lr 0.01), the same
-- with optim.Adam (lr 1e-3), the small CNN with nn modules and SGD; and the
-- peak resident memory of a process that trains the MLP for 50 steps
-- (VmHWM, in a child build/ember). Paired with zz_stdlib.py (Note [Bench
-- families]); targets <= 0.65x, <= 0.65x and <= 0.7x PyTorch's step, and
-- <= 50 MiB of memory.
local MLP_SRC = [[
local ember = require "ember"
local nn, optim = ember.nn, ember.optim
ember.manual_seed(0)
local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
local loss_fn = nn.CrossEntropyLoss()
local opt = optim.%s(model:parameters(), { lr = %g })
local x, y = ember.randn(128, 784), ember.randint(1, 11, { 128 })
local function step()
  opt:zero_grad()
  loss_fn(model(x), y):backward()
  opt:step()
end
]]

return function(B)
  local ember = B.ember
  local nn = ember.nn
  if not (nn and nn.Sequential and ember.optim) then
    print("ember_stdlib skipped: this build lacks ember.nn or ember.optim")
    return
  end
  local nth = ember.get_num_threads()
  for _, o in ipairs({ { "sgd", "SGD", 0.01 }, { "adam", "Adam", 1e-3 } }) do
    local step = load(MLP_SRC:format(o[2], o[3]) .. "return step")()
    for _, s in ipairs({ { "t1", 1 }, { "tdef", nth } }) do
      ember.set_num_threads(s[2])
      B.measure("ember_nn_mlp_" .. o[1] .. "_step_" .. s[1], function(t) return t * 1e3 end, "ms", 10, step)
    end
  end
  ember.manual_seed(0)
  local model = nn.Sequential(nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
  local loss_fn = nn.CrossEntropyLoss()
  local opt = ember.optim.SGD(model:parameters(), { lr = 0.01 })
  local x, y = ember.randn(64, 1, 28, 28), ember.randint(1, 11, { 64 })
  local function cnn_step()
    opt:zero_grad()
    loss_fn(model(x), y):backward()
    opt:step()
  end
  for _, s in ipairs({ { "t1", 1 }, { "tdef", nth } }) do
    ember.set_num_threads(s[2])
    B.measure("ember_nn_cnn_sgd_step_" .. s[1], function(t) return t * 1e3 end, "ms", 10, cnn_step)
  end
  ember.set_num_threads(nth)
  -- peak resident memory of a whole MLP training run (a fresh process)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(MLP_SRC:format("SGD", 0.01), [[
for _ = 1, 50 do step() end
for line in io.lines("/proc/self/status") do
  local kb = line:match("^VmHWM:%s*(%d+)")
  if kb then print(tonumber(kb) / 1024) end
end
]])
  f:close()
  local p = io.popen("build/ember " .. path .. " 2>/dev/null")
  local mib = tonumber(p:read("a"):match("[%d.]+"))
  p:close()
  os.remove(path)
  if mib then
    print(string.format("%-28s %10.2f %s best=%.2f n=%d", "ember_nn_mlp_train_peak_rss", mib, "MiB", mib, 1))
  end
end
