-- test_spatial.lua -- the spatial family (schema/ops/spatial.yaml): F.pad,
-- interpolate and attention against values computed with PyTorch 1.13,
-- dtypes, empty and non-contiguous inputs, gradients, and error messages.
local ember = ember or require "ember"
local F = ember.nn.functional
local T = {}

-- deterministic float64 tensors of any shape (the samples' values)
local function seq(...)
  local shape = { ... }
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 1, n do v[i] = math.sin(i * 1.7) + 0.1 * i end
  return ember.tensor(v, { dtype = "float64" }):reshape(shape)
end
local function grad_of(x, fn)
  x = x:detach():requires_grad_()
  fn(x):pow(2):sum():backward()
  return x.grad
end

-- ---- pad ----

function T.pad_modes_match_pytorch()
  local x = ember.arange(12.0):reshape(1, 3, 4)
  check_tensor(F.pad(x, { 1, 2, 2, 0 }, "reflect"), {
    { { 9, 8, 9, 10, 11, 10, 9 }, { 5, 4, 5, 6, 7, 6, 5 }, { 1, 0, 1, 2, 3, 2, 1 },
      { 5, 4, 5, 6, 7, 6, 5 }, { 9, 8, 9, 10, 11, 10, 9 } } })
  -- circular wraps around the cropped tensor (PyTorch 1.13's _pad_circular)
  check_tensor(F.pad(x:reshape(1, 1, 3, 4), { 2, -1, 1, 1 }, "circular"), {
    { { { 9, 10, 8, 9, 10 }, { 1, 2, 0, 1, 2 }, { 5, 6, 4, 5, 6 }, { 9, 10, 8, 9, 10 }, { 1, 2, 0, 1, 2 } } } })
  check_tensor(F.pad(ember.arange(8.0):reshape(1, 1, 2, 2, 2), { 1, 0, 0, 1, 1, 0 }, "replicate"):flatten(),
    { 0, 0, 1, 2, 2, 3, 2, 2, 3, 0, 0, 1, 2, 2, 3, 2, 2, 3, 4, 4, 5, 6, 6, 7, 6, 6, 7 })
  -- non-contiguous input
  check_tensor(F.pad(x:transpose(2, 3), { 1, 1 }, "reflect"),
    { { { 4, 0, 4, 8, 4 }, { 5, 1, 5, 9, 5 }, { 6, 2, 6, 10, 6 }, { 7, 3, 7, 11, 7 } } })
  -- negative pads crop first
  local r = ember.arange(4.0):reshape(1, 1, 4)
  check_tensor(F.pad(r, { -1, 2 }, "reflect"), { { { 1, 2, 3, 2, 1 } } })
  check_tensor(F.pad(r, { -1, 2 }, "replicate"), { { { 1, 2, 3, 3, 3 } } })
  check_tensor(F.pad(r, { -1, 2 }, "circular"), { { { 1, 2, 3, 1, 2 } } })
  check_tensor(F.pad(r, { 4, 0 }, "circular"), { { { 0, 1, 2, 3, 0, 1, 2, 3 } } })
  check_tensor(F.pad(r, { -2, -1 }, "reflect"), { { { 2 } } })
  -- value 0 is accepted with a non-constant mode, as in PyTorch
  check_tensor(F.pad(r, { 1, 1 }, "reflect", 0), { { { 1, 0, 1, 2, 3, 2 } } })
  -- unbatched inputs
  check_shape(F.pad(ember.ones(2, 3), { 2, 2 }, "reflect"), { 2, 7 })
  check_shape(F.pad(ember.ones(2, 3, 4), { 1, 1, 1, 1 }, "replicate"), { 2, 5, 6 })
  check_shape(F.pad(ember.ones(2, 3, 4, 5), { 1, 1, 1, 1, 1, 1 }, "replicate"), { 2, 5, 6, 7 })
end

function T.pad_constant_any_dims_and_dtypes()
  local x = ember.ones(2, 3)
  check_tensor(F.pad(x, { 1, 1 }, "constant", 2.5), { { 2.5, 1, 1, 1, 2.5 }, { 2.5, 1, 1, 1, 2.5 } })
  check_shape(F.pad(ember.ones(2, 3, 4), { 1, 1, 1, 1, 1, 1 }), { 4, 5, 6 })
  check_shape(F.pad(ember.ones(2, 3, 4), { -1, -1, -1, -1, -1, -1 }), { 0, 1, 2 })
  check_shape(F.pad(ember.ones(2, 3, 4), { -2, -2 }), { 2, 3, 0 })
  check_tensor(F.pad(ember.arange(4.0):reshape(1, 1, 4), { -3, -1 }), {})
  local i = F.pad(ember.ones(2, 3, { dtype = "int64" }), { 1, 1 }, "constant", 2.5)
  check_eq(i.dtype, "int64")
  check_tensor(i, { { 2, 1, 1, 1, 2 }, { 2, 1, 1, 1, 2 } })
  check_tensor(F.pad(ember.tensor({ true, false }), { 1, 0 }, "constant", 2), { true, true, false })
  local h = F.pad(ember.ones(2, { dtype = "float16" }), { 0, 1 }, "constant", -1)
  check_eq(h.dtype, "float16")
  check_tensor(h, { 1, 1, -1 })
  check_tensor(F.pad(ember.tensor(1.0), {}), 1)
  check_tensor(F.pad(ember.ones(1, 1, 0), { 1, 1 }), { { { 0, 0 } } })
  check_tensor(F.pad(ember.tensor({ 0 / 0, 1 }), { 1, 0 }, "constant", 1 / 0), { 1 / 0, 0 / 0, 1 })
  -- circular copies any dtype; empty batches pass through
  check_tensor(F.pad(ember.tensor({ { { 1, 2, 3 } } }), { 1, 1 }, "circular"), { { { 3, 1, 2, 3, 1 } } })
  check_shape(F.pad(ember.ones(0, 2, 3), { 1, 1 }, "reflect"), { 0, 2, 5 })
  check_shape(F.pad(ember.ones(0, 4), { 1, 1 }, "reflect"), { 0, 6 })
  check_error(function() F.pad(ember.ones(0, 4), { 1, 1 }, "replicate") end, "pad:", "non-empty", "{0,4}")
  check_shape(F.pad(ember.ones(2, 0, 3), { 1, 1 }, "circular"), { 2, 0, 5 })
  check_tensor(ember.constant_pad_nd(ember.ones(2), { 1, 1 }, 3), { 3, 1, 1, 3 })
end

function T.pad_gradients_match_pytorch()
  check_tensor(grad_of(seq(2, 3, 4), function(a) return F.pad(a, { 3, 1, 1, 2 }, "replicate") end):flatten(),
    { 17.4666369672395, -0.22216440810732485, -2.5032587293109296, 7.152906809108865, 10.387896900987922,
      -0.19974937518708447, 0.1637257755259336, 6.636647259425983, 31.121773755134722, 0.23161504872265914,
      5.706005845114808, 26.397514801712028, 19.06181447321478, 1.7128062170245473, 7.436233416088673,
      19.834184493205797, 8.914901280205621, 2.1432784643368086, 5.346655779132441, 10.116330744480095,
      28.567999875995387, 11.431970390998455, 19.7136017927438, 29.288319088198385 }, 1e-9)
  check_tensor(grad_of(seq(1, 2, 3, 4), function(a) return F.pad(a, { 2, -1, 1, 2 }, "circular") end):flatten(),
    { 4.366659241809875, -0.4443288162146497, -5.006517458621859, 0.0, 5.193948450493961, -0.7989975007483379,
      0.6549031021037344, 0.0, 5.1869622925224546, 0.3088200649635455, 7.6080077934864105, 0.0,
      4.765453618303695, 3.4256124340490945, 14.872466832177347, 0.0, 4.4574506401028104, 8.573113857347234,
      21.386623116529766, 0.0, 4.761333312665899, 15.24262718799794, 26.284802390325066, 0.0 }, 1e-9)
  check_tensor(grad_of(seq(2, 5), function(a) return F.pad(a, { 4, 3 }, "reflect") end):flatten(),
    { 2.1833296209049373, -0.3332466121609873, -3.7548880939663944, 5.364680106831649, 5.193948450493961,
      -0.19974937518708447, 0.4911773265778008, 9.954970889138973, 7.780443438783681, 0.15441003248177276 }, 1e-9)
  -- float32 gradients through the float32 path
  local g = grad_of(ember.ones(1, 1, 3), function(a) return F.pad(a, { 2, 2 }, "reflect") end)
  check_eq(g.dtype, "float32")
  check_tensor(g, { { { 4, 6, 4 } } })
  -- constant: the gradient crops back, also for negative pads
  check_tensor(grad_of(ember.arange(4.0):reshape(1, 4), function(a) return F.pad(a, { -1, 2 }, "constant", 5) end),
    { { 0, 2, 4, 6 } })
end

function T.pad_double_backward_depends_on_self_as_pytorch()
  -- reflect/replicate: the gradient depends on x (with zero derivative), circular's does not
  local x = ember.ones(1, 1, 4, { requires_grad = true })
  local g = ember.autograd.grad({ F.pad(x, { 1, 1 }, "replicate"):sum() }, { x }, { create_graph = true })[1]
  check(g.requires_grad)
  local gg = ember.autograd.grad({ (g * g):sum() }, { x })[1]
  check_tensor(gg, { { { 0, 0, 0, 0 } } })
  g = ember.autograd.grad({ F.pad(x, { 1, 1 }, "circular"):sum() }, { x }, { create_graph = true })[1]
  check(not g.requires_grad)
  -- circular keeps nothing of x: writing into x after the pad does not break the backward
  local y = ember.ones(1, 1, 3, { requires_grad = true }) * 1
  local z = F.pad(y, { 1, 1 }, "circular")
  y:add_(1)
  z:sum():backward()
end

function T.pad_errors_name_op_argument_and_values()
  local x = ember.ones(1, 1, 4)
  check_error(function() F.pad(x, { 1, 1, 1 }) end, "pad:", "'pad'", "even length", "3 entries")
  check_error(function() F.pad(ember.tensor(1.0), { 1, 1 }) end, "pad:", "'pad'", "pads 1 dims", "{}")
  check_error(function() F.pad(x, { 4, 3 }, "reflect") end, "pad:", "(4, 3)", "dim 3", "less than its size", "{1,1,4}")
  check_error(function() F.pad(ember.ones(2, 3, 1), { 1, 1 }, "reflect") end, "pad:", "(1, 1)", "{2,3,1}")
  check_error(function() F.pad(x, { -2, -2 }, "reflect") end, "pad:", "{-2,-2}", "every padded dim", "{1,1,0}")
  check_error(function() F.pad(x, { -3, -2 }, "replicate") end, "pad:", "(-3, -2)", "size -1")
  -- one non-empty padded dim is enough (PyTorch)
  check_shape(F.pad(ember.ones(1, 2, 6), { 0, 1, -1, -1 }, "reflect"), { 1, 0, 7 })
  check_error(function() F.pad(x, { 1, 1 }, "reflect", 2) end, "pad:", "'value'", "reflect")
  check_error(function() F.pad(x, { 1, 1 }, "wrap") end, "pad", "mode", "wrap")
  check_error(function() F.pad(ember.ones(3), { 2, 2 }, "reflect") end, "pad:", "2 pad entries", "{3}")
  check_error(function() F.pad(ember.ones(2, 3, 4), { 1, 1, 1, 1, 1, 1 }, "replicate") end, "pad:", "{2,3,4}")
  check_error(function() F.pad(ember.ones(2, 3), { 1, 1 }, "circular") end, "pad:", "circular", "3-dim", "{2,3}")
  check_error(function() F.pad(x, { 5, 0 }, "circular") end, "pad:", "wraps around", "(5, 0)")
  check_error(function() F.pad(x, { 3, -2 }, "circular") end, "pad:", "wraps around", "keeps 2")
  check_error(function() F.pad(x, { -3, -2 }) end, "pad:", "(-3, -2)", "crops more", "{1,1,4}")
  check_error(function() F.pad(ember.ones(2, 0, 3), { 1, 1 }, "reflect") end, "pad:", "non-empty", "{2,0,3}")
  check_error(function() F.pad(ember.ones(1, 2, 3, { dtype = "int64" }), { 1, 1 }, "reflect") end,
    "pad:", "int64")
  check_error(function() F.pad(ember.ones(1, 2, 3, { dtype = "uint8" }), { 1, 1 }, "constant", 300) end,
    "pad:", "300", "uint8")
  check_error(function() ember.pad_mode_backward(ember.ones(1, 1, 5), ember.ones(1, 1, 3), { 1, 2 }, "reflect") end,
    "pad_mode_backward:", "{1,1,5}", "{1,1,6}")
  check_error(function() ember.pad_mode_backward(ember.ones(1, 1, 5, { dtype = "int64" }), ember.ones(1, 1, 3),
    { 1, 1 }, "reflect") end, "pad_mode_backward:", "int64")
  check_error(function() ember.pad_circular_backward(ember.ones(1, 1, 5), { 1, 1, 3 }, { 1, 2 }) end,
    "pad_circular_backward:", "{1,1,5}", "{1,1,6}")
  check_error(function() ember.pad_circular_backward(ember.ones(1, 1, 5), { 1, -1, 3 }, { 1, 1 }) end,
    "pad_circular_backward:", "negative size")
  check_error(function() ember.pad_mode(ember.ones(1, 1, 5), { 1, 1 }, "circular") end, "pad_mode", "circular")
  -- PyTorch 1.13: once a pad is positive, no padded dim may become empty
  check_error(function() F.pad(ember.ones(4, 2, 2), { -1, -1, -1, 1 }) end, "pad:", "(-1, -1)", "empty")
  check_shape(F.pad(ember.ones(4, 2, 2), { -1, -1, -1, 0 }), { 4, 1, 0 })
end

-- ---- interpolate ----

function T.interpolate_matches_pytorch()
  check_tensor(F.interpolate(seq(1, 1, 2, 3), nil, { 1.5, 2.3 }, "bicubic"):flatten(),
    { 1.248646581728733, 0.9498443503999024, 0.3960776450999907, -0.20137987434137986, -0.5275562127480709,
      -0.6368675016069739, 1.033404440329632, 0.9591968305303219, 0.8760209346529597, 0.5992852521487119,
      0.13985776437886377, -0.2774447412977215, 0.8181622989305306, 0.9685493106607415, 1.3559642242059295,
      1.3999503786388046, 0.8072717415057991, 0.08197801901153116 }, 1e-9)
  check_tensor(F.interpolate(seq(1, 2, 3), 5, nil, "linear", true):flatten(),
    { 1.0916648104524687, 0.5180618542128187, -0.05554110202683121, -0.34067789217728184, -0.6258146823277324,
      0.8941133511386081, 1.0963002318810493, 1.2984871126234903, 0.599306212514974, -0.09987468759354223 }, 1e-9)
  check_tensor(F.interpolate(seq(1, 1, 2, 2), 3):flatten(),
    { 1.0916648104524687, 1.0916648104524687, -0.05554110202683121, 1.0916648104524687, 1.0916648104524687,
      -0.05554110202683121, -0.6258146823277324, -0.6258146823277324, 0.8941133511386081 }, 1e-9)
  -- dtypes: uint8 (nearest), bfloat16 (computed in float32)
  local u = ember.tensor({ { { 1, 2, 3 } } }, { dtype = "uint8" })
  check_tensor(F.interpolate(u, 5), { { { 1, 1, 2, 2, 3 } } })
  check_tensor(F.interpolate(u, 5, nil, "nearest-exact"), { { { 1, 1, 2, 3, 3 } } })
  check_eq(F.interpolate(u, 5).dtype, "uint8")
  local bf = F.interpolate(ember.tensor({ { { 1, 2, 3 } } }, { dtype = "bfloat16" }), 5, nil, "linear")
  check_eq(bf.dtype, "bfloat16")
  check_tensor(bf, { { { 1.0, 1.40625, 2.0, 2.59375, 3.0 } } }, 1e-2) -- PyTorch rounds its bfloat16 weights: 1.40625, ours 1.3984
  -- empty batch, non-contiguous input, deprecated aliases
  check_shape(F.interpolate(ember.zeros(0, 2, 3), 5, nil, "linear"), { 0, 2, 5 })
  local x = seq(1, 1, 3, 4)
  check_tensor(F.interpolate(x:transpose(3, 4), { 6, 5 }, nil, "bilinear"),
    F.interpolate(x:transpose(3, 4):contiguous(), { 6, 5 }, nil, "bilinear"):tolist(), 1e-12)
  check_tensor(F.upsample_bilinear(x, { 5, 7 }), F.interpolate(x, { 5, 7 }, nil, "bilinear", true):tolist(), 1e-12)
  check_tensor(F.upsample_nearest(x, nil, 2), F.interpolate(x, nil, 2):tolist(), 1e-12)
  check_tensor(F.upsample(x, { 4, 4 }, nil, "bicubic"), F.interpolate(x, { 4, 4 }, nil, "bicubic"):tolist(), 1e-12)
end

function T.interpolate_gradients_match_pytorch()
  check_tensor(grad_of(seq(1, 1, 3, 4), function(a) return F.interpolate(a, { 5, 7 }, nil, "bilinear") end):flatten(),
    { 5.0367383052135715, 0.4006526817112201, -1.15609779965189, 4.086948176952647, 6.407806599302456,
      1.1097366843425038, 2.129150156381337, 8.429239393214527, 5.903688226864286, 1.9554276999927014,
      5.27626721228941, 10.393382287904101 }, 1e-9)
  check_tensor(grad_of(seq(1, 1, 3, 4), function(a) return F.interpolate(a, nil, 1.6, "bicubic", true) end):flatten(),
    { 3.198784057207494, -0.23453918375573712, -1.9643365080760786, 2.3204104810383654, 4.670314984488247,
      0.02405820167255429, 1.0207998217598369, 6.146186012502742, 3.5067567408906597, 0.7058051991332412,
      3.894566446376423, 6.577766243665728 }, 1e-9)
end

function T.interpolate_errors_name_op_argument_and_values()
  local x = ember.ones(1, 1, 3, 4)
  check_error(function() F.interpolate(x, 5, nil, "cubic") end, "interpolate:", "'mode'", "cubic")
  check_error(function() F.interpolate(x, 5, nil, "nearest", true) end, "interpolate:", "'align_corners'", "nearest")
  check_error(function() F.interpolate(x, 5, 2.0) end, "interpolate:", "only one of")
  check_error(function() F.interpolate(x) end, "interpolate:", "either")
  check_error(function() F.interpolate(x, { 2, 3, 4 }) end, "interpolate:", "'size'", "3 entries", "{1,1,3,4}")
  check_error(function() F.interpolate(x, 5, nil, "nearest", nil, true) end, "interpolate:", "recompute_scale_factor")
  check_error(function() F.interpolate(x, 5, nil, "area", nil, nil, true) end, "interpolate:", "antialias",
    "bilinear and bicubic")
  check_error(function() F.interpolate(ember.ones(1, 2, 3), 5, nil, "linear", nil, nil, true) end, "interpolate:",
    "antialias")
  check_error(function() F.interpolate(x, 5, nil, "linear") end, "interpolate:", "4-d", "'linear'", "3-d")
  check_error(function() F.interpolate(ember.ones(2, 3), 5) end, "interpolate:", "{2,3}")
  check_error(function() F.interpolate(x, { 0, 2 }) end, "interpolate:", "greater than 0", "{0,2}")
  check_error(function() F.interpolate(x, nil, 0.1) end, "interpolate:", "greater than 0")
  check_error(function() F.interpolate(x:long(), 5) end, "interpolate:", "int64")
  check_error(function() F.interpolate(x:half(), 5, nil, "bilinear") end, "interpolate:", "float16")
  check_error(function() F.upsample(x, 5, nil, "area", true) end, "upsample:", "align_corners", "area")
  check_error(function() ember.upsample_nd(x, { 5, 5, 5 }, "linear") end, "upsample_nd:", "{5,5,5}", "{1,1,3,4}")
  check_error(function() ember.upsample_nd(ember.ones(1, 1, 4), { 5 }, "cubic") end, "upsample_nd:", "bicubic", "4-d")
  check_error(function() ember.upsample_nd_backward(ember.ones(1, 1, 4), { 1, 1, 3 }, { 5 }, "linear") end,
    "upsample_nd_backward:", "{1,1,4}", "{1,1,5}")
end

-- ---- attention ----

local function seq_off(off, ...)
  local shape = { ... }
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 1, n do v[i] = math.sin(i * 1.7 + off) + 0.1 * i end
  return ember.tensor(v, { dtype = "float64" }):reshape(shape)
end

-- PyTorch 1.13 has no F.scaled_dot_product_attention: the expected values
-- are PyTorch 2.1's documented math written in torch 1.13
function T.scaled_dot_product_attention_matches_pytorch_math()
  local q, k, v = seq_off(0, 2, 3, 4), seq_off(1, 2, 5, 4), seq_off(2, 2, 5, 3)
  local m = ember.tensor({ { true, false, true, true, false }, { true, true, false, false, true },
    { false, true, true, true, true } })
  check_tensor(F.scaled_dot_product_attention(q, k, v, m):flatten(),
    { 0.5410217770163097, 0.4623621358792992, 0.651181535127074, 0.38135516534809083, 0.43412829682861875,
      1.1774241582057878, 0.9786889592725558, 1.4551700469019782, 1.0423850241434127, 2.974162894464412,
      3.086181661959428, 1.9200472073013042, 2.1761390327141976, 3.7149024325792013, 3.377220992926948,
      2.328067342957217, 3.634707947894484, 3.129662628459999 }, 1e-9)
  -- causal = a lower-triangular bool mask; a float mask adds; scale replaces 1/sqrt(E)
  local tri = ember.ones(3, 5, { dtype = "bool" }):tril()
  check_tensor(F.scaled_dot_product_attention(q, k, v, nil, 0, true),
    F.scaled_dot_product_attention(q, k, v, tri):tolist(), 1e-12)
  local add = seq_off(3, 3, 5)
  local w = ((q:matmul(k:transpose(-2, -1)) * 0.3) + add):softmax(-1)
  check_tensor(F.scaled_dot_product_attention(q, k, v, add, 0, false, { scale = 0.3 }), w:matmul(v):tolist(), 1e-12)
  -- float32, broadcast batch dims
  local r = F.scaled_dot_product_attention(q:float():unsqueeze(2):expand(2, 3, 3, 4), k:float():unsqueeze(2),
    v:float():unsqueeze(2))
  check_shape(r, { 2, 3, 3, 3 })
  check_eq(r.dtype, "float32")
end

function T.scaled_dot_product_attention_dropout()
  ember.manual_seed(3)
  local q, k, v = ember.randn(4, 16, 8), ember.randn(4, 16, 8), ember.ones(4, 16, 8)
  -- with v = 1 each output is the kept weights' sum / (1 - p): mean 1 over many rows
  local r = F.scaled_dot_product_attention(q, k, v, nil, 0.5)
  check_near(r:mean():item(), 1, 0.1)
  check(r:std():item() > 0.05)
  check_tensor(F.scaled_dot_product_attention(q, k, v, nil, 1.0):abs():sum(), 0)
  -- gradients flow through the kept weights
  local qq = q:clone():requires_grad_()
  F.scaled_dot_product_attention(qq, k, ember.randn(4, 16, 8), nil, 0.3):sum():backward()
  check_shape(qq.grad, { 4, 16, 8 })
end

function T.scaled_dot_product_attention_errors()
  local q, k, v = ember.ones(2, 3, 4), ember.ones(2, 5, 4), ember.ones(2, 5, 3)
  check_error(function() F.scaled_dot_product_attention(q, ember.ones(2, 5, 3), v) end,
    "scaled_dot_product_attention:", "{2,3,4}", "{2,5,3}")
  check_error(function() F.scaled_dot_product_attention(q, k, ember.ones(2, 4, 3)) end,
    "scaled_dot_product_attention:", "{2,4,3}")
  check_error(function() F.scaled_dot_product_attention(ember.ones(4), k, v) end,
    "scaled_dot_product_attention:", "at least 2 dims", "{4}")
  check_error(function() F.scaled_dot_product_attention(q, k, v, nil, 1.5) end,
    "scaled_dot_product_attention:", "'dropout_p'", "1.5")
  check_error(function() F.scaled_dot_product_attention(q, k, v, ember.ones(3, 5, { dtype = "bool" }), 0, true) end,
    "scaled_dot_product_attention:", "is_causal")
  check_error(function() F.scaled_dot_product_attention(q:long(), k:long(), v:long()) end,
    "scaled_dot_product_attention:", "int64")
  check_error(function() F.scaled_dot_product_attention(q, k, v, ember.ones(4, 4)) end,
    "scaled_dot_product_attention")
end

return T
