-- digits_cnn.lua -- a small convolutional network on the UCI handwritten
-- digits (examples/data/digits.csv.gz: 1797 images of 8x8 pixels in 0..16,
-- the digit in the last column; see digits.rst): the same seeded 80/20
-- split, DataLoader, Adam with a cosine schedule, loss curve and
-- safetensors round trip as digits_mlp.lua, with two 3x3 convolutions and
-- max pooling in front of the classifier.
--   ember examples/digits_cnn.lua [--short] [model.safetensors]
-- --short trains 5 epochs instead of 20 (make test runs it); without a
-- path the model goes to a temporary file that is removed at the end.
local nn, F, optim, data, utils = ember.nn, ember.nn.functional, ember.optim, ember.data, ember.utils

local short, path = false, nil
for _, a in ipairs(arg or {}) do
  if a == "--short" then short = true else path = a end
end
local epochs = short and 5 or 20
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
  return nn.Sequential(
    nn.Unflatten(2, { 1, 8, 8 }),               -- {N, 64} -> {N, 1, 8, 8}
    nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(),
    nn.MaxPool2d(2),                            -- {N, 16, 4, 4}
    nn.Conv2d(16, 32, 3, { padding = 1 }), nn.ReLU(),
    nn.MaxPool2d(2),                            -- {N, 32, 2, 2}
    nn.Flatten(),                               -- {N, 128}
    nn.Linear(128, 64), nn.ReLU(),
    nn.Linear(64, 10))
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
ember.save(file, model:state_dict(), { metadata = { example = "digits_cnn" } })
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
