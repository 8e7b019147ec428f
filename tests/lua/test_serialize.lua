-- test_serialize.lua -- ember.save/load (safetensors), save_npy/load_npy and
-- savez/load_npz (runtime/lua/lua_serialize.c, Note [Serialized files]).
local ember = require "ember"
local T = {}

local function tmp(suffix)
  local p = os.tmpname()
  os.remove(p)
  return p .. suffix
end

local function slurp(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function spit(p, s)
  local f = assert(io.open(p, "wb"))
  f:write(s)
  f:close()
end

-- every dtype, with values that must survive bit for bit
local function samples()
  return {
    f32 = ember.tensor({1.5, -0.0, 1 / 0, -1 / 0, 3.25e-39}, {dtype = "float32"}),
    f64 = ember.tensor({{1 / 3, -2.5}, {1e300, 5e-324}}, {dtype = "float64"}),
    f16 = ember.tensor({0.1, 65504, -2}, {dtype = "float16"}),
    bf16 = ember.tensor({0.1, 3e38, -2}, {dtype = "bfloat16"}),
    i64 = ember.tensor({math.maxinteger, math.mininteger, 0}, {dtype = "int64"}),
    i32 = ember.tensor({2147483647, -2147483648}, {dtype = "int32"}),
    i8 = ember.tensor({127, -128}, {dtype = "int8"}),
    u8 = ember.tensor({0, 255}, {dtype = "uint8"}),
    b = ember.tensor({true, false, true}),
    scalar = ember.tensor(7.5),
    empty = ember.zeros(0, 3),
  }
end

local function same(a, b)
  if a.dtype ~= b.dtype then return false end
  local sa, sb = a:size(), b:size()
  if #sa ~= #sb then return false end
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  return ember.equal(a, b)
end

function T.safetensors_round_trip_every_dtype_bit_exact()
  local p, q = tmp(".safetensors"), tmp(".safetensors")
  local s = samples()
  ember.save(p, s)
  local back = ember.load(p)
  for k, v in pairs(s) do check(same(back[k], v), "round trip of " .. k) end
  ember.save(q, back)
  check(slurp(p) == slurp(q), "saving what was loaded writes the same bytes")
  os.remove(p); os.remove(q)
end

function T.safetensors_nested_tables_single_tensor_and_metadata()
  local p = tmp(".safetensors")
  local w = ember.arange(6, {dtype = "float32"}):reshape(2, 3)
  ember.save(p, {fc = {weight = w:t(), bias = ember.ones(3)}, layers = {ember.zeros(2), ember.ones(2)}},
    {metadata = {epoch = "3"}})
  local t, md = ember.load(p)
  check_tensor(t.fc.weight, {{0, 3}, {1, 4}, {2, 5}})
  check(t.fc.weight:is_contiguous(), "loaded tensors are contiguous")
  check_tensor(t.layers[2], {1, 1})
  check_eq(md.epoch, "3")
  check(md["ember.nested"] == nil, "ember's own keys are not the user's metadata")
  -- a flat table with dotted keys (a state_dict) stays flat
  ember.save(p, {["fc.weight"] = w})
  t = ember.load(p)
  check(t["fc.weight"] and t.fc == nil, "a flat table loads flat")
  -- one tensor
  ember.save(p, w)
  check(same(ember.load(p), w), "a single tensor loads as itself")
  os.remove(p)
end

function T.safetensors_spec_built_file_loads()
  -- built byte by byte from the published format: u64 little-endian header
  -- length, a JSON header, then the data block the offsets tile
  local header = '{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},' ..
                 '"b":{"dtype":"I64","shape":[1],"data_offsets":[16,24]},' ..
                 '"__metadata__":{"format":"pt"}}'
  local data = string.pack("<ffff", 1, 2, 3, 4.5) .. string.pack("<i8", -9)
  local p = tmp(".safetensors")
  spit(p, string.pack("<I8", #header) .. header .. data)
  local t, md = ember.load(p)
  check_tensor(t.a, {{1, 2}, {3, 4.5}})
  check_eq(t.a.dtype, "float32")
  check_eq(t.b:item(), -9)
  check_eq(md.format, "pt")
  os.remove(p)
end

function T.safetensors_bad_files_are_clear_errors()
  local p = tmp(".safetensors")
  local function file(header, data)
    spit(p, string.pack("<I8", #header) .. header .. (data or ""))
  end
  local function bad(...) check_error(function() ember.load(p) end, "load", ...) end
  spit(p, "abc"); bad("truncated")
  spit(p, string.pack("<I8", 200000000) .. "{}"); bad("over the 100 MB limit")
  spit(p, string.pack("<I8", 50) .. "{}"); bad("truncated", "the header needs 50 bytes")
  file("{not json"); bad("not valid JSON")
  file("[1,2]"); bad("not a JSON object")
  file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', string.rep("\0", 4)); bad("outside the data block")
  file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
    string.rep("\0", 12)); bad("overlaps")
  file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', string.rep("\0", 8)); bad("leaves a gap")
  file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', string.rep("\0", 8)); bad("4 bytes after the last")
  file('{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', string.rep("\0", 8)); bad("need 12 bytes")
  file('{"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}', string.rep("\0", 8)); bad("dtype C64")
  file('{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}'); bad("not a size")
  file('{"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', "\1\2"); bad("byte 2", "not 0 or 1")
  file('{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets":[4,8]}}',
    string.rep("\0", 8)); bad("duplicate")
  file('{"__metadata__":{"k":1}}'); bad("not a string")
  check_error(function() ember.load(p .. ".missing") end, "load", "cannot open")
  check_error(function() ember.load("/tmp") end, "load", "not a regular file")
  os.remove(p)
end

function T.save_refuses_bad_values_and_keeps_the_previous_file()
  local p = tmp(".safetensors")
  ember.save(p, {a = ember.ones(2)})
  local before = slurp(p)
  check_error(function() ember.save(p, {a = ember.ones(2), b = 3}) end, "save", "'b' is a number")
  check_error(function() ember.save(p, 42) end, "save", "expected a tensor or a table of tensors")
  check_error(function() ember.save(p, {x = {["y.z"] = ember.ones(1)}}) end, "save", "holds '.'")
  check_error(function() ember.save(p, {a = ember.ones(1)}, {metadata = {k = 1}}) end, "save", "strings to strings")
  local cyc = {}; cyc.self = cyc
  check_error(function() ember.save(p, cyc) end, "save", "deeper than 32")
  check(slurp(p) == before, "a refused save leaves the file as it was")
  check_error(function() ember.save("/nonexistent-dir/x.safetensors", ember.ones(1)) end, "save",
    "cannot create a temporary file")
  os.remove(p)
end

function T.npy_round_trip_and_errors()
  local p = tmp(".npy")
  local x = ember.arange(24, {dtype = "int32"}):reshape(2, 3, 4):permute(3, 1, 2)
  ember.save_npy(p, x)
  local y = ember.load_npy(p)
  check(same(x:contiguous(), y), "npy round trip of a permuted tensor")
  check(slurp(p):sub(1, 6) == "\x93NUMPY", "magic")
  check((#slurp(p) - 24 * 4) % 64 == 0, "the header pads the data to 64 bytes")
  for k, v in pairs(samples()) do
    if k ~= "bf16" then
      ember.save_npy(p, v)
      check(same(ember.load_npy(p), v), "npy round trip of " .. k)
    end
  end
  check_error(function() ember.save_npy(p, ember.ones(2, {dtype = "bfloat16"})) end, "save_npy", "no bfloat16")
  -- hand-built: big-endian float64, Fortran order, format 2.0
  local dict = "{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }"
  local hdr = dict .. string.rep(" ", 64 - (12 + #dict + 1) % 64) .. "\n"
  spit(p, "\x93NUMPY\2\0" .. string.pack("<I4", #hdr) .. hdr .. string.pack(">dddddd", 1, 4, 2, 5, 3, 6))
  check_tensor(ember.load_npy(p), {{1, 2, 3}, {4, 5, 6}})
  local function bad(s, ...) spit(p, s); check_error(function() ember.load_npy(p) end, "load_npy", ...) end
  bad("hello world", "not an .npy file")
  bad("\x93NUMPY\1\0" .. string.pack("<I2", 200) .. "{", "truncated")
  local d2 = "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }"
  bad("\x93NUMPY\1\0" .. string.pack("<I2", #d2) .. d2 .. string.rep("\0", 8), "not one ember has")
  local d3 = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
  bad("\x93NUMPY\1\0" .. string.pack("<I2", #d3) .. d3 .. string.rep("\0", 8), "truncated", "need 16")
  local d4 = "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }"
  bad("\x93NUMPY\1\0" .. string.pack("<I2", #d4) .. d4 .. string.rep("\0", 4), "descr")
  os.remove(p)
end

function T.npz_stored_and_deflated()
  local p = tmp(".npz")
  local s = samples()
  s.bf16 = nil
  ember.savez(p, s)
  local back = ember.load_npz(p)
  for k, v in pairs(s) do check(same(back[k], v), "npz round trip of " .. k) end
  ember.savez_compressed(p, {big = ember.zeros(10000)})
  check(#slurp(p) < 2000, "savez_compressed deflates")
  check(same(ember.load_npz(p).big, ember.zeros(10000)), "deflated round trip")
  -- a flipped byte in a member fails its CRC
  local z = slurp(p)
  local i = #z // 3
  spit(p, z:sub(1, i - 1) .. string.char((z:byte(i) + 1) % 256) .. z:sub(i + 1))
  check_error(function() ember.load_npz(p) end, "load_npz")
  spit(p, "PK not really")
  check_error(function() ember.load_npz(p) end, "load_npz", "not a zip archive")
  check_error(function() ember.savez(p, {a = {b = ember.ones(1)}}) end, "savez", "nests tables")
  os.remove(p)
end

-- a write past the file size limit (ulimit -f, as a full disk) fails with
-- the system's error and leaves the previous file as it was
function T.full_disk_keeps_the_previous_file()
  local EMBER = os.getenv("EMBER") or (arg and arg[-1]) or "ember"
  local p = tmp(".safetensors")
  ember.save(p, ember.ones(10))
  local before = slurp(p)
  local code = string.format("local ok, e = pcall(ember.save, %q, ember.ones(100000)); print(ok, e)", p)
  local f = io.popen("sh -c 'ulimit -f 4; trap \"\" XFSZ; exec \"$0\" -e \"$1\"' '" .. EMBER .. "' '" ..
    code:gsub("'", "'\\''") .. "' 2>&1")
  local out = f:read("a")
  f:close()
  check(out:find("false", 1, true) and out:find("the previous file is unchanged", 1, true), out)
  check(slurp(p) == before, "the previous file is intact")
  local leftovers = io.popen("ls " .. p .. ".tmp.* 2>/dev/null"):read("a")
  check(leftovers == "", "no temporary file left: " .. leftovers)
  os.remove(p)
end

-- NumPy reads what ember writes and the reverse (skipped without numpy)
function T.numpy_interoperates()
  local py = "/usr/bin/python3"
  local probe = io.popen(py .. " -c 'import numpy' 2>&1 && echo yes")
  local have = probe:read("a"):find("yes")
  probe:close()
  if not have then print("  (skipped: " .. py .. " cannot import numpy)"); return end
  local a, b, c = tmp(".npy"), tmp(".npz"), tmp(".npy")
  ember.save_npy(a, ember.arange(6, {dtype = "float32"}):reshape(2, 3))
  ember.savez_compressed(b, {x = ember.tensor({1, 2, 3}), y = ember.tensor({true, false})})
  local code = string.format([=[
import numpy as np
a = np.load(%q); assert a.dtype == np.float32 and a.tolist() == [[0, 1, 2], [3, 4, 5]], a
z = np.load(%q); assert z["x"].tolist() == [1, 2, 3] and z["y"].tolist() == [True, False]
np.save(%q, np.asfortranarray(np.arange(12, dtype=">i8").reshape(3, 4)))
np.savez_compressed(%q, u=np.array([0.5, 1.5], dtype=np.float16), v=np.eye(2))
print("ok")
]=], a, b, c, b)
  local script = tmp(".py")
  spit(script, code)
  local f = io.popen(py .. " " .. script .. " 2>&1")
  local out = f:read("a")
  f:close()
  check(out:find("ok"), out)
  check_tensor(ember.load_npy(c), {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}})
  local z = ember.load_npz(b)
  check_tensor(z.u, {0.5, 1.5})
  check_eq(z.u.dtype, "float16")
  check_tensor(z.v, {{1, 0}, {0, 1}})
  os.remove(a); os.remove(b); os.remove(c); os.remove(script)
end

return T
