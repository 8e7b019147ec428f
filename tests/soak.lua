-- soak.lua -- a long training loop whose resident memory must stay flat:
--   ember tests/soak.lua [steps=10000]      (make soak; tests/lua/test_soak.lua runs 500)
-- A 64-32-10 MLP (ember.nn, ember.optim.SGD with momentum) on the UCI digits
-- (examples/data/digits.csv.gz) in mini-batches from ember.data.DataLoader,
-- the loss as log_softmax + gather. Resident memory (VmRSS) is read after
-- a warm-up (a tenth of the steps, at least 200, at most half) and at the
-- end; prints
--   soak: N steps, rss after warm-up A MiB, at the end B MiB, growth G%
-- and exits 1 when G >= 5.
local ember = require "ember"
local nn, optim, data = ember.nn, ember.optim, ember.data
local steps = tonumber(arg and arg[1]) or 10000

local function rss_mib()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmRSS:%s+(%d+)")
    if kb then return tonumber(kb) / 1024 end
  end
end

ember.manual_seed(0)
local d = data.read_csv("examples/data/digits.csv.gz")
local X, Y = d[{ {}, { 1, 64 } }] / 16, d[{ {}, 65 }]:long() + 1
local loader = data.DataLoader(data.TensorDataset(X, Y), { batch_size = 64, shuffle = true, drop_last = true })
local model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
local opt = optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 })

local step, warm, loss = 0, nil, nil
while step < steps do
  for x, y in loader do
    opt:zero_grad()
    local logp = model(x):log_softmax(2)
    loss = -logp:gather(2, y:unsqueeze(2)):mean()
    loss:backward()
    opt:step()
    step = step + 1
    if step == math.min(steps // 2, math.max(steps // 10, 200)) then
      collectgarbage()
      warm = rss_mib()
    end
    if step >= steps then break end
  end
end
collectgarbage()
local final = rss_mib()
local growth = (final - warm) / warm * 100
print(string.format("soak: %d steps, rss after warm-up %.1f MiB, at the end %.1f MiB, growth %.2f%% (loss %.4f)",
  steps, warm, final, growth, loss:item()))
if growth >= 5 then os.exit(1) end
