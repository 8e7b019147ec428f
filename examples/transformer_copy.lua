-- transformer_copy.lua -- a tiny encoder-only transformer learns to sort
-- sequences of digits: token embedding (a Parameter read with index_select)
-- plus learned positions, nn.TransformerEncoder, a linear head per position,
-- cross-entropy against the sorted sequence. Sorting needs attention: each
-- output position must count how many input digits are smaller.
--   ember examples/transformer_copy.lua [steps]
--   ember examples/transformer_copy.lua short    (a few seconds, for the tests)
-- Prints the loss now and then and at the end `token accuracy NN.N%` on fresh
-- sequences (the share of output digits in the right place).
local nn, F, optim = ember.nn, ember.nn.functional, ember.optim

local short = arg and arg[1] == "short"
local steps = short and 60 or tonumber(arg and arg[1]) or 800
local V, L, D, BATCH = 10, 8, 64, 64 -- digits 0-9, sequence length, model width, batch

ember.manual_seed(0)
ember.set_num_threads(1) -- small matrices: one thread is as fast and never spins

-- a batch of random digit sequences (as 1-based token ids) and their sorted version,
-- both {BATCH, L} int64
local function batch(n)
  local x = ember.randint(1, V + 1, { n, L })
  local sorted = x:sort(2)
  return x, sorted
end

local Model = nn.Module:extend("SortNet")
function Model:__init()
  self.tok = nn.Parameter(ember.randn(V, D) * 0.1)
  self.pos = nn.Parameter(ember.randn(L, D) * 0.1)
  local layer = nn.TransformerEncoderLayer(D, 4, { dim_feedforward = 128, dropout = 0.0, batch_first = true })
  self.encoder = nn.TransformerEncoder(layer, 2)
  self.head = nn.Linear(D, V)
end
function Model:forward(x) -- x {N, L} token ids -> logits {N, L, V}
  local n = x.shape[1]
  local h = self.tok:index_select(1, x:flatten()):reshape(n, L, D) + self.pos
  return self.head(self.encoder(h))
end

local model = Model()
local opt = optim.Adam(model:parameters(), { lr = 3e-3 })

local function accuracy(n)
  local g <close> = ember.no_grad()
  model:eval()
  local x, y = batch(n)
  local pred = model(x):argmax(3)
  model:train()
  return pred:eq(y):float():mean():item()
end

local t0 = os.clock()
for step = 1, steps do
  local x, y = batch(BATCH)
  local logits = model(x)
  local loss = F.cross_entropy(logits:reshape(BATCH * L, V), y:flatten())
  opt:zero_grad()
  loss:backward()
  opt:step()
  if step % 200 == 0 or step == steps then
    print(string.format("step %4d  loss %.4f", step, loss:item()))
  end
end
print(string.format("%d steps in %.1f s (CPU time)", steps, os.clock() - t0))
print(string.format("token accuracy %.1f%%", 100 * accuracy(1000)))
