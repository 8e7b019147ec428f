-- char_rnn.lua -- a character-level LSTM trained on ember's own documentation
-- (examples/data/ember_docs.txt), then sampled with a temperature.
--   ember examples/char_rnn.lua [--short] [--steps N] [--temperature T] [--seed S]
-- The full run takes well under a minute on 2 cores; --short is the few-second
-- run that tests/lua/test_ex_char_rnn.lua checks. The run fails (exit code 1)
-- unless the final loss ends under the entropy of the character frequencies
-- (so the model has learnt from context), itself well under log(vocab).
local ember = require "ember"
local nn, F, optim, data, utils = ember.nn, ember.nn.functional, ember.optim, ember.data, ember.utils

-- ---- options ----
local opt = { short = false, steps = nil, temperature = 0.7, seed = 0 }
local i = 1
while arg and arg[i] do
  local a = arg[i]
  if a == "--short" then opt.short = true
  elseif a == "--steps" then opt.steps = math.tointeger(tonumber(arg[i + 1])); i = i + 1
  elseif a == "--temperature" then opt.temperature = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--seed" then opt.seed = math.tointeger(tonumber(arg[i + 1])); i = i + 1
  else error("char_rnn.lua: unknown argument " .. a .. " (--short, --steps N, --temperature T, --seed S)") end
  i = i + 1
end
local cfg = opt.short and { hidden = 64, seq = 32, batch = 16, steps = 100, lr = 1e-2, every = 25 }
  or { hidden = 128, seq = 64, batch = 32, steps = 300, lr = 5e-3, every = 25 }
cfg.steps = opt.steps or cfg.steps
utils.seed_everything(opt.seed)

-- ---- the text as 1-based character ids ----
local here = (arg and arg[0] or ""):match("(.*/)") or "./"
local f = assert(io.open(here .. "data/ember_docs.txt", "rb"))
local text = f:read("a")
f:close()
local chars, index = {}, {}
for c in text:gmatch(".") do
  if not index[c] then chars[#chars + 1] = c; index[c] = true end
end
table.sort(chars)
for k, c in ipairs(chars) do index[c] = k end
local V = #chars
local ids = {}
for k = 1, #text do ids[k] = index[text:sub(k, k)] end
local stream = ember.tensor(ids, { dtype = "int64" })
-- the entropy of the character frequencies: the loss of the best model that
-- ignores context, which the LSTM must beat
local counts, unigram = {}, 0
for _, c in ipairs(ids) do counts[c] = (counts[c] or 0) + 1 end
for _, n in pairs(counts) do unigram = unigram - n / #ids * math.log(n / #ids) end
print(string.format("%d characters, vocabulary %d: uniform baseline log(%d) = %.3f, character frequencies alone %.3f",
  #text, V, V, math.log(V), unigram))

-- windows of seq + 1 characters: input = the first seq, target = the last seq
local Windows = {}
Windows.__index = Windows
function Windows:len() return #text - cfg.seq end
function Windows:get(k) return { stream:narrow(1, k, cfg.seq), stream:narrow(1, k + 1, cfg.seq) } end
local loader = data.DataLoader(setmetatable({}, Windows), { batch_size = cfg.batch, shuffle = true, drop_last = true })

-- ---- the model: one-hot characters -> LSTM -> linear to logits ----
local CharRNN = nn.Module:extend("CharRNN")
function CharRNN:__init(vocab, hidden)
  self.vocab = vocab
  self.lstm = nn.LSTM(vocab, hidden, { batch_first = true })
  self.head = nn.Linear(hidden, vocab)
end
-- x: {N, L} ids; returns logits {N, L, vocab} and the LSTM state
function CharRNN:forward(x, state)
  local out, st = self.lstm(F.one_hot(x, self.vocab):float(), state)
  return self.head(out), st
end

local model = CharRNN(V, cfg.hidden)
local opt_ = optim.Adam(model:parameters(), { lr = cfg.lr })

-- ---- training ----
local step, losses, first, recent = 0, {}, nil, {}
local bar = utils.progress(cfg.steps, { desc = "training" })
local batches = loader:iter()
for _ in bar do
  local x, y = batches()
  if x == nil then batches = loader:iter(); x, y = batches() end
  step = step + 1
  local logits = model(x)
  local loss = F.cross_entropy(logits:reshape(-1, V), y:reshape(-1))
  opt_:zero_grad()
  loss:backward()
  nn.utils.clip_grad_norm_(model:parameters(), 5)
  opt_:step()
  local l = loss:item()
  first = first or l
  recent[#recent + 1] = l
  if #recent > 10 then table.remove(recent, 1) end
  bar:set_postfix({ loss = l })
  losses[#losses + 1] = l
  if step % cfg.every == 0 or step == 1 then
    io.stdout:write(string.format("step %4d  loss %.3f\n", step, l))
    io.stdout:flush()
  end
end
local final = 0
for _, l in ipairs(recent) do final = final + l end
final = final / #recent

-- ---- sampling: feed one character at a time, carrying the LSTM state ----
local function sample(prime, n, temperature)
  local g <close> = ember.no_grad()
  model:eval()
  local out, state, logits = { prime }, nil, nil
  for k = 1, #prime do
    logits, state = model(ember.tensor({ { index[prime:sub(k, k)] } }), state)
  end
  for _ = 1, n do
    local p = F.softmax(logits:reshape(V) / temperature, 1)
    local c = ember.multinomial(p, 1):item()
    out[#out + 1] = chars[c]
    logits, state = model(ember.tensor({ { c } }), state)
  end
  model:train()
  return table.concat(out)
end

print(string.format("sample (temperature %.2f):", opt.temperature))
print(sample("The ", opt.short and 120 or 400, opt.temperature))
print(string.format("loss %.3f -> %.3f (mean of the last %d steps); uniform %.3f, frequencies %.3f", first, final,
  #recent, math.log(V), unigram))
if not (final < unigram) then
  io.stderr:write("char_rnn.lua: the loss did not fall under the entropy of the character frequencies\n")
  os.exit(1)
end
