-- digits_mlp.lua -- a multilayer perceptron on the UCI handwritten digits
-- (examples/data/digits.csv.gz: 1797 images of 8x8 pixels in 0..16, the
-- digit in the last column; see digits.rst): a seeded 80/20 train/test
-- split, a DataLoader, nn.Sequential, Adam with a cosine learning-rate
-- schedule, the loss curve in the terminal, then the model saved as
-- safetensors, reloaded into a fresh model and evaluated again.
--   ember examples/digits_mlp.lua [--short] [model.safetensors]
-- --short trains 3 epochs instead of 30 (make test runs it); without a
-- path the model goes to a temporary file that is removed at the end.
local nn, F, optim, data, utils = ember.nn, ember.nn.functional, ember.optim, ember.data, ember.utils

local short, path = false, nil
for _, a in ipairs(arg or {}) do
  if a == "--short" then short = true else path = a end
end
local epochs = short and 3 or 30
local here = (arg and arg[0] or ""):match("(.*/)") or "./"

-- ---- the data ----
local rows = data.read_csv(here .. "data/digits.csv.gz") -- {1797, 65} float32
local images = rows[{ {}, { 1, 64 } }] / 16              -- pixels scaled to [0, 1]
local labels = rows[{ {}, 65 }]:long() + 1               -- class k is the digit k - 1 (1-based classes)
local g = ember.Generator():manual_seed(42)
local train_set, test_set = data.random_split(data.TensorDataset(images, labels), { 0.8, 0.2 }, { generator = g })
local train_loader = data.DataLoader(train_set, { batch_size = 32, shuffle = true, generator = g })
local test_loader = data.DataLoader(test_set, { batch_size = 512 })
print(string.format("%d training and %d test images of %d classes", #train_set, #test_set, 10))

-- ---- the model ----
local function make_model()
  return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
end
ember.manual_seed(1)
local model = make_model()
print(model)
local opt = optim.Adam(model:parameters(), 3e-3)
local sched = optim.lr_scheduler.CosineAnnealingLR(opt, epochs) -- lr from 3e-3 down to 0 over the run

-- The fraction of the test set a model classifies right (argmax is 1-based,
-- as the labels).
local function evaluate(m)
  m:eval()
  local g <close> = ember.no_grad()
  local right, total = 0, 0
  for x, y in test_loader do
    right = right + m(x):argmax(2):eq(y):sum():item()
    total = total + y:numel()
  end
  m:train()
  return right / total
end

-- ---- training ----
local timer = utils.Timer()
local losses = {}
for epoch = 1, epochs do
  local sum, n = 0, 0
  for x, y in train_loader do
    opt:zero_grad()
    local loss = F.cross_entropy(model(x), y)
    loss:backward()
    opt:step()
    sum, n = sum + loss:item() * y:numel(), n + y:numel()
  end
  sched:step()
  losses[epoch] = sum / n
  if epoch == 1 or epoch % 5 == 0 or epoch == epochs then
    print(string.format("epoch %3d  loss %.4f  test accuracy %.1f%%", epoch, losses[epoch], 100 * evaluate(model)))
  end
end
print(string.format("trained %d epochs in %.1f s", epochs, timer:elapsed()))
utils.plot(losses, { title = "training loss", xlabel = "epoch", width = 50, height = 10, color = false })

local acc = evaluate(model)
print(string.format("test accuracy %.1f%%", 100 * acc))

-- ---- save, reload into a fresh model, evaluate again ----
local file = path or os.tmpname()
ember.save(file, model:state_dict(), { metadata = { example = "digits_mlp" } })
local state, meta = ember.load(file)
ember.manual_seed(2) -- other initial weights: the accuracy below must come from the file
local fresh = make_model()
fresh:load_state_dict(state)
local acc2 = evaluate(fresh)
print(string.format("saved to %s (%s), reloaded: test accuracy %.1f%%", path or "a temporary file", meta.example, 100 * acc2))
if not path then os.remove(file) end
if acc2 ~= acc then
  print("the reloaded model differs")
  os.exit(1)
end
