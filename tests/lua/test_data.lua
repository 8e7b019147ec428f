-- test_data.lua -- ember.data: the readers (runtime/lua/lua_serialize.c) and
-- datasets, samplers, collation and the DataLoader (lua/stdlib/data.lua).
local ember = require "ember"
local data = ember.data
local T = {}

local function tmpfile(text, suffix)
  local p = os.tmpname()
  os.remove(p)
  p = p .. (suffix or ".csv")
  local f = assert(io.open(p, "wb"))
  f:write(text)
  f:close()
  return p
end

function T.read_csv_numeric_with_header_columns_and_gzip()
  local p = tmpfile('a, b ,"c"\r\n1,2,3\r\n\r\n4,,6.5\n')
  local x, names = data.read_csv(p, {header = true})
  check_eq(x.dtype, "float32")
  check_shape(x, {2, 3})
  check_eq(table.concat(names, "|"), "a|b|c")
  check(x[2][2]:item() ~= x[2][2]:item(), "an empty field is NaN")
  local y, picked = data.read_csv(p, {header = true, columns = {3, 1}, dtype = "float64"})
  check_tensor(y, {{3, 1}, {6.5, 4}})
  check_eq(table.concat(picked, "|"), "c|a")
  check_error(function() data.read_csv(p) end, "read_csv", "line 1, column 1", "'a' is not a number")
  check_error(function() data.read_csv(p, {header = true, dtype = "int64"}) end, "line 4, column 2", "not an integer")
  check_error(function() data.read_csv(p, {header = true, columns = {4}}) end, "column 4, the file has 3")
  check_error(function() data.read_csv(p, {delimiter = ";;"}) end, "delimiter")
  os.remove(p)
  p = tmpfile("1,2\n3\n")
  check_error(function() data.read_csv(p) end, "read_csv", "line 2 has 1 fields, expected 2")
  os.remove(p)
  check_error(function() data.read_csv("/nonexistent.csv") end, "read_csv", "cannot open")
  -- the digits set ships gzip-compressed: read through zlib
  local d = data.read_csv("examples/data/digits.csv.gz", {dtype = "int64"})
  check_shape(d, {1797, 65})
  check_eq(d[1][65]:item(), 0)
  check_eq(d:max():item(), 16)
end

function T.read_lines()
  local p = tmpfile("one\r\ntwo\n\nthree", ".txt")
  local l = data.read_lines(p)
  check_eq(#l, 4)
  check_eq(l[1], "one")
  check_eq(l[3], "")
  check_eq(l[4], "three")
  os.remove(p)
end

function T.datasets()
  local x, y = ember.arange(10):reshape(5, 2), ember.arange(5)
  local ds = data.TensorDataset(x, y)
  check_eq(#ds, 5)
  check_tensor(ds[2][1], {2, 3})
  check_eq(ds[2][2]:item(), 1)
  check_error(function() return ds[6] end, "TensorDataset", "index 6 out of range 1..5")
  check_error(function() data.TensorDataset(x, ember.arange(4)) end, "size mismatch", "tensor #1 has 5", "tensor #2 has 4")
  local sub = data.Subset(ds, {5, 1})
  check_eq(#sub, 2)
  check_eq(sub[1][2]:item(), 4)
  check_error(function() data.Subset(ds, {0}) end, "Subset", "out of range 1..5")
  local cat = data.ConcatDataset({{10, 20}, {30}, ds})
  check_eq(#cat, 8)
  check_eq(cat[3], 30)
  check_eq(cat[4][2]:item(), 0)
  -- an object with len/get methods is a dataset too
  local squares = {len = function() return 4 end, get = function(_, i) return i * i end}
  check_eq(data.len(squares), 4)
  check_eq(data.get(squares, 3), 9)
end

function T.random_split_is_seeded_and_partitions()
  local ds = {}
  for i = 1, 10 do ds[i] = i end
  local g = ember.Generator():manual_seed(7)
  local a, b = data.random_split(ds, {0.75, 0.25}, {generator = g})
  check_eq(#a, 8) -- floor(7.5) + the remainder dealt first
  check_eq(#b, 2)
  local seen = {}
  for i = 1, #a do seen[a[i]] = true end
  for i = 1, #b do check(not seen[b[i]], "the parts are disjoint"); seen[b[i]] = true end
  for i = 1, 10 do check(seen[i], "the parts cover the dataset") end
  local g2 = ember.Generator():manual_seed(7)
  local a2 = data.random_split(ds, {0.75, 0.25}, {generator = g2})
  for i = 1, #a do check_eq(a2[i], a[i]) end
  check_error(function() data.random_split(ds, {3, 3}) end, "random_split", "sum to 6", "10 samples")
end

function T.dataloader_batches_shuffles_and_collates()
  local x, y = ember.arange(20, {dtype = "float32"}):reshape(10, 2), ember.arange(10)
  local loader = data.DataLoader(data.TensorDataset(x, y), {batch_size = 4})
  check_eq(#loader, 3)
  local sizes, total = {}, 0
  for xb, yb in loader do
    sizes[#sizes + 1] = xb:size(1)
    check_eq(yb:size(1), xb:size(1))
    total = total + yb:sum():item()
  end
  check_eq(table.concat(sizes, ","), "4,4,2")
  check_eq(total, 45)
  -- drop_last, shuffle with a generator: every sample once per epoch
  local g = ember.Generator():manual_seed(1)
  loader = data.DataLoader(data.TensorDataset(x, y), {batch_size = 3, shuffle = true, drop_last = true, generator = g})
  check_eq(#loader, 3)
  local seen, n = {}, 0
  for _, yb in loader do
    for _, v in ipairs(yb:tolist()) do check(not seen[v], "no repeat"); seen[v] = true; n = n + 1 end
  end
  check_eq(n, 9)
  -- a loop left by break starts over next time
  local first
  for xb in data.DataLoader(data.TensorDataset(x), {batch_size = 2}) do first = xb; break end
  check_tensor(first, {{0, 1}, {2, 3}})
  -- the default collate: numbers, booleans, strings, nested tables
  local rows = {{a = 1, b = {true, 2.5}, s = "x"}, {a = 2, b = {false, 3.5}, s = "y"}}
  local batch
  for b in data.DataLoader(rows, {batch_size = 2}) do batch = b end
  check_eq(batch.a.dtype, "int64")
  check_tensor(batch.b[2], {2.5, 3.5})
  check_eq(batch.b[1].dtype, "bool")
  check_eq(batch.s[2], "y")
  -- a custom collate_fn and batch_size = false
  local sums = {}
  for s in data.DataLoader({1, 2, 3, 4}, {batch_size = 2, collate_fn = function(l) return l[1] + l[2] end}) do
    sums[#sums + 1] = s
  end
  check_eq(table.concat(sums, ","), "3,7")
  local items = {}
  for v in data.DataLoader({5, 6}, {batch_size = false}) do items[#items + 1] = v end
  check_eq(table.concat(items, ","), "5,6")
  -- samplers
  local bs = data.BatchSampler(data.SequentialSampler({1, 2, 3, 4, 5}), 2, false)
  check_eq(#bs, 3)
  local got = {}
  for b in data.DataLoader({10, 20, 30, 40, 50}, {batch_sampler = bs}) do got[#got + 1] = b:sum():item() end
  check_eq(table.concat(got, ","), "30,70,50")
  local rs = data.RandomSampler({1, 2, 3}, {replacement = true, num_samples = 7})
  check_eq(#rs, 7)
  local it, k = rs:iter(), 0
  while true do local i = it(); if not i then break end; check(i >= 1 and i <= 3, "in range"); k = k + 1 end
  check_eq(k, 7)
  check_error(function() data.DataLoader({1}, {batch_size = 0}) end, "DataLoader", "batch_size")
  check_error(function() data.DataLoader({1}, {sampler = rs, shuffle = true}) end, "sampler excludes shuffle")
  check_error(function() data.default_collate({print}) end, "default_collate", "cannot collate a function")
end

return T
