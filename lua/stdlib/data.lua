-- data.lua -- ember.data: datasets, samplers and the DataLoader, as
-- torch.utils.data in Lua idiom (1-based indices; options in a trailing table).
--
--   local data = ember.data
--   local X, names = data.read_csv("digits.csv.gz", {header = false})  -- C (lua_serialize.c)
--   local ds = data.TensorDataset(X[{{}, {1, 64}}], X[{{}, 65}])
--   local train, test = data.random_split(ds, {0.8, 0.2}, {generator = g})
--   local loader = data.DataLoader(train, {batch_size = 64, shuffle = true})
--   for x, y in loader do ... end          -- one epoch; again for the next
--
-- The dataset protocol: `#ds` and `ds[i]` (i in 1..#ds), or methods
-- ds:len() and ds:get(i); a plain Lua array is a dataset. A sample that is an
-- array ({x, y}) is yielded unpacked by the loader (`for x, y in loader`), as
-- PyTorch unpacks tuples; any other sample (a tensor, a table with names) is
-- yielded as one value.
local ember = require "ember"

local data = ember.data -- made by the C side, holding read_csv and read_lines
data.__doc = "ember.data: Dataset protocol (#ds, ds[i]), TensorDataset, ConcatDataset, Subset, random_split, " ..
  "samplers, DataLoader{batch_size=, shuffle=, drop_last=, collate_fn=, sampler=, batch_sampler=, generator=}, " ..
  "read_csv, read_lines, default_collate"

local function errorf(fmt, ...) error(string.format(fmt, ...), 3) end

-- ---- the protocol ----

--- The number of samples of a dataset (ds:len(), or #ds).
function data.len(ds)
  if type(ds) == "table" and type(ds.len) == "function" then return ds:len() end
  return #ds
end

--- Sample i (1-based) of a dataset (ds:get(i), or ds[i]).
function data.get(ds, i)
  if type(ds) == "table" and type(ds.get) == "function" then return ds:get(i) end
  return ds[i]
end

-- A class whose instances answer #obj and obj[i] through len/get.
local function dataset_class(name)
  local C = {}
  C.__name = name
  C.__len = function(self) return self:len() end
  C.__index = function(self, k)
    if math.type(k) == "integer" then return self:get(k) end
    return C[k]
  end
  C.__tostring = function(self) return string.format("%s(%d samples)", name, self:len()) end
  return C
end

local function check_index(name, i, n)
  if math.type(i) ~= "integer" or i < 1 or i > n then
    errorf("%s: index %s out of range 1..%d", name, tostring(i), n)
  end
end

-- ---- datasets ----

local TensorDataset = dataset_class("TensorDataset")

--- TensorDataset(t1, t2, ...): sample i is {t1[i], t2[i], ...}; every tensor
--- has the same size along dim 1.
function data.TensorDataset(...)
  local ts = table.pack(...)
  if ts.n == 0 then errorf("TensorDataset: expected at least one tensor") end
  local n
  for k = 1, ts.n do
    local t = ts[k]
    if not ember.is_tensor(t) then errorf("TensorDataset: argument #%d is a %s, expected a tensor", k, type(t)) end
    if t:dim() == 0 then errorf("TensorDataset: tensor #%d is 0-dim (needs a first dim of samples)", k) end
    local s = t:size(1)
    if n and s ~= n then
      errorf("TensorDataset: size mismatch: tensor #1 has %d samples, tensor #%d has %d", n, k, s)
    end
    n = s
  end
  return setmetatable({tensors = {table.unpack(ts, 1, ts.n)}, n = n}, TensorDataset)
end
function TensorDataset:len() return self.n end
function TensorDataset:get(i)
  check_index("TensorDataset", i, self.n)
  local out = {}
  for k, t in ipairs(self.tensors) do out[k] = t[i] end
  return out
end

local Subset = dataset_class("Subset")

--- Subset(ds, indices): the samples of ds at the given 1-based indices (a
--- Lua array or a 1-d integer tensor).
function data.Subset(ds, indices)
  if ember.is_tensor(indices) then indices = indices:tolist() end
  if type(indices) ~= "table" then errorf("Subset: indices must be an array or a tensor, got %s", type(indices)) end
  local n = data.len(ds)
  for k, i in ipairs(indices) do
    if math.type(i) ~= "integer" or i < 1 or i > n then
      errorf("Subset: index %s (element %d) out of range 1..%d", tostring(i), k, n)
    end
  end
  return setmetatable({dataset = ds, indices = indices}, Subset)
end
function Subset:len() return #self.indices end
function Subset:get(i)
  check_index("Subset", i, #self.indices)
  return data.get(self.dataset, self.indices[i])
end

local ConcatDataset = dataset_class("ConcatDataset")

--- ConcatDataset({ds1, ds2, ...}): the samples of each in turn.
function data.ConcatDataset(list)
  if type(list) ~= "table" or #list == 0 then errorf("ConcatDataset: expected a non-empty array of datasets") end
  local ends, total = {}, 0
  for k, ds in ipairs(list) do
    total = total + data.len(ds)
    ends[k] = total
  end
  return setmetatable({datasets = list, ends = ends, n = total}, ConcatDataset)
end
function ConcatDataset:len() return self.n end
function ConcatDataset:get(i)
  check_index("ConcatDataset", i, self.n)
  local lo, hi = 1, #self.ends -- the first dataset whose end reaches i
  while lo < hi do
    local mid = (lo + hi) // 2
    if self.ends[mid] >= i then hi = mid else lo = mid + 1 end
  end
  local before = lo > 1 and self.ends[lo - 1] or 0
  return data.get(self.datasets[lo], i - before)
end

--- random_split(ds, lengths, {generator=}): Subsets of the given lengths
--- (counts summing to #ds, or fractions summing to 1, the remainder dealt
--- one by one from the first) over a random permutation.
function data.random_split(ds, lengths, opts)
  opts = opts or {}
  local n = data.len(ds)
  if type(lengths) ~= "table" or #lengths == 0 then errorf("random_split: lengths must be a non-empty array") end
  local counts, sum = {}, 0
  local fractions = true
  for _, l in ipairs(lengths) do
    if type(l) ~= "number" or l < 0 then errorf("random_split: lengths must be non-negative numbers") end
    sum = sum + l
    if math.type(l) == "integer" and l ~= 0 then fractions = false end
  end
  if fractions and math.abs(sum - 1) < 1e-9 then
    local given = 0
    for k, f in ipairs(lengths) do
      counts[k] = math.floor(n * f)
      given = given + counts[k]
    end
    local k = 1
    while given < n do -- PyTorch deals the remainder round-robin
      counts[k] = counts[k] + 1
      given = given + 1
      k = k % #counts + 1
    end
  else
    for k, l in ipairs(lengths) do
      if math.type(l) ~= "integer" then errorf("random_split: lengths must be integers or fractions summing to 1") end
      counts[k] = l
    end
    if sum ~= n then
      errorf("random_split: the lengths sum to %s, the dataset has %d samples", tostring(sum), n)
    end
  end
  local perm = ember.randperm(n, {generator = opts.generator}):tolist()
  local out, at = {}, 0
  for k, c in ipairs(counts) do
    out[k] = data.Subset(ds, table.move(perm, at + 1, at + c, 1, {}))
    at = at + c
  end
  return table.unpack(out)
end

-- ---- samplers: obj:iter() gives a function returning the next index (or batch) ----

local function sampler_class(name)
  local C = {}
  C.__index = C
  C.__name = name
  C.__len = function(self) return self:len() end
  return C
end

local Sequential = sampler_class("SequentialSampler")
--- SequentialSampler(ds): 1, 2, ..., #ds.
function data.SequentialSampler(ds) return setmetatable({n = data.len(ds)}, Sequential) end
function Sequential:len() return self.n end
function Sequential:iter()
  local i, n = 0, self.n
  return function()
    i = i + 1
    if i <= n then return i end
  end
end

local Random = sampler_class("RandomSampler")
--- RandomSampler(ds, {replacement=false, num_samples=#ds, generator=}).
function data.RandomSampler(ds, opts)
  opts = opts or {}
  local n = data.len(ds)
  local m = opts.num_samples or n
  if math.type(m) ~= "integer" or m < 0 then errorf("RandomSampler: num_samples must be a non-negative integer") end
  if not opts.replacement and opts.num_samples and m > n then
    errorf("RandomSampler: num_samples %d > %d samples without replacement", m, n)
  end
  return setmetatable({n = n, m = m, replacement = opts.replacement, generator = opts.generator}, Random)
end
function Random:len() return self.m end
function Random:iter()
  local order
  if self.replacement then
    order = self.n > 0 and ember.randint(1, self.n + 1, {self.m}, {generator = self.generator}):tolist() or {}
  else
    order = {}
    while #order < self.m do -- as many permutations as num_samples needs
      local p = ember.randperm(self.n, {generator = self.generator}):tolist()
      table.move(p, 1, math.min(#p, self.m - #order), #order + 1, order)
      if self.n == 0 then break end
    end
  end
  local i = 0
  return function()
    i = i + 1
    return order[i]
  end
end

local SubsetRandom = sampler_class("SubsetRandomSampler")
--- SubsetRandomSampler(indices, {generator=}): the indices in a random order.
function data.SubsetRandomSampler(indices, opts)
  if type(indices) ~= "table" then errorf("SubsetRandomSampler: indices must be an array") end
  return setmetatable({indices = indices, generator = (opts or {}).generator}, SubsetRandom)
end
function SubsetRandom:len() return #self.indices end
function SubsetRandom:iter()
  local p = ember.randperm(#self.indices, {generator = self.generator}):tolist()
  local i = 0
  return function()
    i = i + 1
    if p[i] then return self.indices[p[i]] end
  end
end

local Batch = sampler_class("BatchSampler")
--- BatchSampler(sampler, batch_size, drop_last): arrays of indices.
function data.BatchSampler(sampler, batch_size, drop_last)
  if math.type(batch_size) ~= "integer" or batch_size < 1 then
    errorf("BatchSampler: batch_size must be a positive integer, got %s", tostring(batch_size))
  end
  return setmetatable({sampler = sampler, batch_size = batch_size, drop_last = drop_last and true or false}, Batch)
end
function Batch:len()
  local n = #self.sampler
  if self.drop_last then return n // self.batch_size end
  return (n + self.batch_size - 1) // self.batch_size
end
function Batch:iter()
  local next_index = self.sampler:iter()
  local bs, drop = self.batch_size, self.drop_last
  return function()
    local b = {}
    for _ = 1, bs do
      local i = next_index()
      if i == nil then break end
      b[#b + 1] = i
    end
    if #b == 0 or (drop and #b < bs) then return nil end
    return b
  end
end

-- ---- collation ----

--- default_collate(samples): a batch from an array of samples: tensors are
--- stacked along a new dim 1, numbers become a tensor (int64 for integers,
--- float64 otherwise, as PyTorch), booleans a bool tensor, strings stay an
--- array, and tables are collated field by field (arrays position by position).
function data.default_collate(samples)
  local first = samples[1]
  if first == nil then errorf("default_collate: no samples") end
  if ember.is_tensor(first) then return ember.stack(samples) end
  local ty = type(first)
  if ty == "number" then
    local int = true
    for _, v in ipairs(samples) do if math.type(v) ~= "integer" then int = false break end end
    return ember.tensor(samples, {dtype = int and "int64" or "float64"})
  elseif ty == "boolean" then
    return ember.tensor(samples, {dtype = "bool"})
  elseif ty == "string" then
    return samples
  elseif ty == "table" then
    local out = {}
    for k in pairs(first) do
      local col = {}
      for j, s in ipairs(samples) do
        if type(s) ~= "table" or s[k] == nil then
          errorf("default_collate: sample %d lacks the field %s that sample 1 has", j, tostring(k))
        end
        col[j] = s[k]
      end
      out[k] = data.default_collate(col)
    end
    return out
  end
  errorf("default_collate: cannot collate a %s (expected tensors, numbers, booleans, strings or tables)", ty)
end

-- ---- DataLoader ----

local DataLoader = {}
DataLoader.__name = "DataLoader"
DataLoader.__index = DataLoader

--- DataLoader(ds, {batch_size=1, shuffle=false, drop_last=false, generator=,
--- sampler=, batch_sampler=, collate_fn=default_collate}). `for x, y in
--- loader do` runs one epoch (samples that are arrays come unpacked);
--- #loader is the number of batches. batch_size = false yields samples
--- one at a time without collation (PyTorch's batch_size=None).
function data.DataLoader(ds, opts)
  opts = opts or {}
  if type(opts) ~= "table" then errorf("DataLoader: options must be a table") end
  local self = setmetatable({dataset = ds, collate_fn = opts.collate_fn or data.default_collate}, DataLoader)
  local bs = opts.batch_size
  if bs == nil then bs = 1 end
  if opts.batch_sampler then
    if opts.batch_size ~= nil or opts.shuffle or opts.sampler or opts.drop_last then
      errorf("DataLoader: batch_sampler excludes batch_size, shuffle, sampler and drop_last")
    end
    self.batch_sampler = opts.batch_sampler
  else
    if opts.sampler and opts.shuffle then errorf("DataLoader: sampler excludes shuffle") end
    local sampler = opts.sampler or (opts.shuffle and data.RandomSampler(ds, {generator = opts.generator})
      or data.SequentialSampler(ds))
    if bs == false then
      self.sampler = sampler
    else
      if math.type(bs) ~= "integer" or bs < 1 then
        errorf("DataLoader: batch_size must be a positive integer or false, got %s", tostring(bs))
      end
      self.batch_sampler = data.BatchSampler(sampler, bs, opts.drop_last)
    end
  end
  self.batch_size = bs
  self.fast = getmetatable(ds) == TensorDataset and not opts.collate_fn
  return self
end

function DataLoader:__len()
  return self.batch_sampler and #self.batch_sampler or #self.sampler
end

-- The batch of the given indices (TensorDataset: one index_select per tensor).
function DataLoader:fetch(indices)
  if self.fast then
    local idx = ember.tensor(indices, {dtype = "int64"})
    local out = {}
    for k, t in ipairs(self.dataset.tensors) do out[k] = t:index_select(1, idx) end
    return out
  end
  local samples = {}
  for k, i in ipairs(indices) do samples[k] = data.get(self.dataset, i) end
  return self.collate_fn(samples)
end

local function unpack_sample(s)
  if type(s) == "table" and not ember.is_tensor(s) and s[1] ~= nil and getmetatable(s) == nil then
    return table.unpack(s, 1, #s)
  end
  return s
end

--- loader:iter(): a function returning the next batch (unpacked) until nil.
function DataLoader:iter()
  if self.batch_sampler then
    local nb = self.batch_sampler:iter()
    return function()
      local b = nb()
      if b == nil then return nil end
      return unpack_sample(self:fetch(b))
    end
  end
  local ni = self.sampler:iter()
  return function()
    local i = ni()
    if i == nil then return nil end
    return unpack_sample(data.get(self.dataset, i))
  end
end

-- `for ... in loader do`: the generic for calls loader(nil, control); a nil
-- control is the first call of a loop, which starts a new epoch (so a loop
-- left by break does not leave the next one half-way).
function DataLoader:__call(_, control)
  if control == nil then self.current = self:iter() end
  return self.current()
end

function DataLoader:__tostring()
  return string.format("DataLoader(%d batches of %s)", #self, tostring(self.batch_size))
end

return data
