-- iris.lua -- softmax regression on Fisher's iris with autograd and plain
-- gradient descent (no nn library yet).
--   ember examples/iris.lua [epochs]
local epochs = tonumber(arg and arg[1]) or 300
local here = (arg and arg[0] or ""):match("(.*/)") or "./"

-- read the CSV: a header "150,4,setosa,versicolor,virginica", then rows
local rows, labels = {}, {}
local f = assert(io.open(here .. "data/iris.csv"))
local header = f:read("l")
local names = {}
for w in header:gmatch("[^,]+") do names[#names + 1] = w end
for line in f:lines() do
  local v = {}
  for w in line:gmatch("[^,]+") do v[#v + 1] = tonumber(w) end
  rows[#rows + 1] = { v[1], v[2], v[3], v[4] }
  labels[#labels + 1] = v[5] + 1 -- 1-based class
end
f:close()
local n, classes = #rows, 3

-- standardise the features; one-hot targets
local X = ember.tensor(rows)
local mean = X:mean(1, true)
local std = ((X - mean) ^ 2):mean(1, true):sqrt()
X = (X - mean) / std
local onehot = {}
for i = 1, n do
  onehot[i] = { 0, 0, 0 }
  onehot[i][labels[i]] = 1
end
local Y = ember.tensor(onehot, {dtype = "float32"})

ember.manual_seed(0)
local W = (ember.randn(4, classes) * 0.01):requires_grad_()
local b = ember.zeros(classes, {requires_grad = true})
local lr = 0.5

local function loss_fn()
  local logits = X:matmul(W) + b
  local logp = logits - logits:exp():sum(2, true):log() -- log-softmax
  return -(Y * logp):sum() / n, logits
end

for epoch = 1, epochs do
  local loss = loss_fn()
  W.grad, b.grad = nil, nil
  loss:backward()
  do
    local g <close> = ember.no_grad()
    W:sub_(W.grad * lr)
    b:sub_(b.grad * lr)
  end
  if epoch == 1 or epoch % 100 == 0 then print(string.format("epoch %4d  loss %.4f", epoch, loss:item())) end
end

-- accuracy
local _, logits = loss_fn()
local correct = 0
for i, row in ipairs(logits:tolist()) do
  local best = 1
  for c = 2, classes do if row[c] > row[best] then best = c end end
  if best == labels[i] then correct = correct + 1 end
end
print(string.format("accuracy %.3f on %d flowers (%s)", correct / n, n, table.concat(names, ", ", 3)))
