-- micrograd_moons.lua -- the micrograd demo in ember: two interleaving half
-- moons generated here (seeded), a 2-16-16-1 MLP (nn.Sequential) trained
-- with Adam on the logistic loss over the whole set until every training point is on its side,
-- and the decision boundary drawn in the terminal.
--   ember examples/micrograd_moons.lua [--short] [n_points]
-- --short trains on fewer points for at most 300 steps (make test runs it).
local nn, F, optim = ember.nn, ember.nn.functional, ember.optim

local short = false
local n = 200
for _, a in ipairs(arg or {}) do
  if a == "--short" then short = true; n = 60 else n = assert(math.tointeger(tonumber(a)), "n_points: an integer") end
end
local max_steps = short and 300 or 2000

-- ---- the data: sklearn's make_moons(n, noise=0.1) ----
-- the upper moon (label 0) is the half circle (cos t, sin t), the lower one
-- (label 1) is (1 - cos t, 0.5 - sin t), t uniform in [0, pi]; then noise.
local g = ember.Generator():manual_seed(1)
local half = n // 2
local t = ember.rand(n, { generator = g }) * math.pi
local upper = ember.stack({ t[{ { 1, half } }]:cos(), t[{ { 1, half } }]:sin() }, 2)
local lower = ember.stack({ 1 - t[{ { half + 1, n } }]:cos(), 0.5 - t[{ { half + 1, n } }]:sin() }, 2)
local X = ember.cat({ upper, lower }) + ember.randn(n, 2, { generator = g }) * 0.1
local y = ember.cat({ -ember.ones(half), ember.ones(n - half) }) -- labels -1 and +1, as micrograd

-- ---- the model: 2 inputs, two hidden layers of 16, one logit ----
ember.manual_seed(0)
local model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
print(model)
local opt = optim.Adam(model:parameters(), 0.02)

local function accuracy()
  local g <close> = ember.no_grad()
  local pred = model(X):squeeze(2):gt(0)
  return pred:eq(y:gt(0)):float():mean():item()
end

local steps, acc = 0, 0
for step = 1, max_steps do
  opt:zero_grad()
  local logits = model(X):squeeze(2)
  local loss = F.soft_margin_loss(logits, y) -- mean log(1 + exp(-y * logit)): the logistic loss
  loss:backward()
  opt:step()
  steps = step
  if step % 20 == 0 or step == 1 then
    acc = accuracy()
    print(string.format("step %4d  loss %.4f  accuracy %5.1f%%", step, loss:item(), 100 * acc))
  end
  if step % 10 == 0 then
    acc = accuracy()
    if acc == 1 then break end
  end
end
acc = accuracy()

-- ---- the decision boundary: one character per grid cell ----
-- '+' and '-' are the points of each class, '#' and '.' the regions the
-- model gives to them; an 'X' is a point on the wrong side.
local W, H = 64, 24
local x0, x1, y0, y1 = -1.6, 2.6, -1.1, 1.6
local gx, gy = {}, {}
for r = 1, H do
  for c = 1, W do
    gx[#gx + 1] = { x0 + (c - 0.5) / W * (x1 - x0), y1 - (r - 0.5) / H * (y1 - y0) }
  end
end
local region
do
  local g <close> = ember.no_grad()
  region = model(ember.tensor(gx)):squeeze(2):gt(0):tolist()
end
local rows = {}
for r = 1, H do
  rows[r] = {}
  for c = 1, W do rows[r][c] = region[(r - 1) * W + c] and "." or "#" end
end
local pts, labels = X:tolist(), y:tolist()
local logit_pts
do
  local g <close> = ember.no_grad()
  logit_pts = model(X):squeeze(2):tolist()
end
for i, p in ipairs(pts) do
  local c = math.floor((p[1] - x0) / (x1 - x0) * W) + 1
  local r = math.floor((y1 - p[2]) / (y1 - y0) * H) + 1
  if c >= 1 and c <= W and r >= 1 and r <= H then
    local right = (logit_pts[i] > 0) == (labels[i] == 1)
    rows[r][c] = not right and "X" or (labels[i] == 1 and "-" or "+")
  end
end
print(string.format("\ndecision boundary (%d points; '#' region of the upper moon '+', '.' of the lower moon '-'):", n))
for r = 1, H do print("  " .. table.concat(rows[r])) end

print(string.format("\ntrained for %d steps", steps))
print(string.format("train accuracy %.1f%%", 100 * acc))
if acc < 1 then os.exit(1) end
