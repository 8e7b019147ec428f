-- test_conv_winograd.lua -- the Winograd F(2x2, 3x3) path of conv2d's
-- forward, input and weight gradients (Note [Winograd convolution],
-- conv_winograd.c): float32 3x3 stride-1 convolutions with at least 8
-- channels on both sides take it; float64 keeps the im2col path, so each
-- case here compares the float32 results with float64's (the old path) on
-- shapes at and around the path's limits: channels 7 / 8 / 9 / odd, padding
-- 0..3 (3: the input gradient's padding is negative, a crop), odd and tiny
-- planes, planes whose tile rows straddle the chunks, wide rows, batch 1,
-- non-contiguous inputs, 2 threads, conv_transpose2d and the half types.
local T = {}
local F = ember.nn.functional

-- max |a - b| <= tol * max |b| (b float64; a any floating dtype)
local function close(a, b, tol, what)
  local scale = b:abs():max():item()
  local err = (a:double() - b):abs():max():item()
  check(err <= tol * (scale > 0 and scale or 1),
    string.format("%s: max error %.3g against a float64 maximum of %.3g", what, err, scale))
end

-- forward, input and weight gradient of conv2d in float32 (x32, w32 given,
-- maybe non-contiguous) against float64
local function compare(x32, w32, pad, what, tol)
  tol = tol or 1e-5
  local x64, w64 = x32:double(), w32:double()
  local y = F.conv2d(x32, w32, nil, 1, pad)
  local y64 = F.conv2d(x64, w64, nil, 1, pad)
  close(y, y64, tol, what .. " forward")
  local go = ember.randn(y.shape)
  local gi, gw = ember.convolution_backward(go, x32, w32, nil, { 1, 1 }, { pad, pad }, { 1, 1 }, false, { 0, 0 }, 1,
    { 1, 1, 0 })
  local gi64, gw64 = ember.convolution_backward(go:double(), x64, w64, nil, { 1, 1 }, { pad, pad }, { 1, 1 }, false,
    { 0, 0 }, 1, { 1, 1, 0 })
  check_eq(gi.dtype, x32.dtype)
  close(gi, gi64, tol, what .. " input gradient")
  close(gw, gw64, tol, what .. " weight gradient")
end

function T.winograd_matches_float64()
  ember.manual_seed(3)
  local cases = { -- N, Ci, H, W, Co, pad
    { 2, 16, 16, 16, 32, 1 }, -- the bench's layer
    { 1, 8, 8, 8, 8, 1 },     -- the smallest channel counts taken
    { 2, 7, 9, 9, 8, 1 },     -- 7 input channels: forward on im2col, input gradient on Winograd
    { 2, 8, 9, 9, 7, 1 },     -- and the other way round
    { 3, 9, 5, 7, 11, 2 },    -- channels not a multiple of the 6-row block, odd planes
    { 1, 13, 15, 13, 17, 0 },
    { 2, 8, 6, 6, 8, 3 },     -- padding 3: the input gradient crops
    { 1, 8, 1, 1, 8, 1 },     -- a 1x1 plane: one tile, mostly padding
    { 2, 8, 2, 3, 9, 2 },
    { 3, 8, 33, 5, 8, 1 },    -- 3-tile rows: chunks hold whole planes and parts of planes
    { 1, 8, 3, 300, 8, 1 },   -- a row of 150 tiles (one tile row per chunk)
    { 1, 8, 3, 1100, 8, 0 },  -- past the widest plane taken: im2col
  }
  for _, c in ipairs(cases) do
    local N, Ci, H, W, Co, p = table.unpack(c)
    compare(ember.randn(N, Ci, H, W), ember.randn(Co, Ci, 3, 3), p, table.concat(c, ","))
  end
end

function T.winograd_noncontiguous_and_threads()
  ember.manual_seed(4)
  -- a transposed plane and a channel slice of a larger tensor
  local xt = ember.randn(2, 8, 11, 10):transpose(3, 4)
  check(not xt:is_contiguous())
  compare(xt, ember.randn(12, 8, 3, 3), 1, "transposed input")
  local xs = ember.randn(2, 20, 9, 9):narrow(2, 3, 10)
  local ws = ember.randn(8, 10, 5, 3):narrow(3, 2, 3)
  compare(xs, ws, 1, "sliced input and weight")
  -- 2 threads split the chunks into runs: the same values as 1 thread
  local threads0 = ember.get_num_threads()
  local x, w = ember.randn(5, 16, 14, 14), ember.randn(24, 16, 3, 3)
  local r = {}
  for _, th in ipairs({ 1, 2 }) do
    ember.set_num_threads(th)
    local y = F.conv2d(x, w, nil, 1, 1)
    local gi, gw = ember.convolution_backward(y, x, w, nil, { 1, 1 }, { 1, 1 }, { 1, 1 }, false, { 0, 0 }, 1,
      { 1, 1, 0 })
    r[th] = { y, gi, gw }
  end
  ember.set_num_threads(threads0)
  check(ember.equal(r[1][1], r[2][1]), "forward: 2 threads differ from 1")
  check(ember.equal(r[1][2], r[2][2]), "input gradient: 2 threads differ from 1")
  -- the weight gradient sums per-job partials: equal up to rounding
  close(r[2][3], r[1][3]:double(), 1e-6, "weight gradient with 2 threads")
end

-- conv_transpose2d's forward is the input-gradient direction and its input
-- gradient the forward one; the half types compute in float32 (Winograd too)
function T.winograd_transposed_and_half()
  ember.manual_seed(5)
  local x, w = ember.randn(2, 8, 7, 9, { requires_grad = true }), ember.randn(8, 10, 3, 3, { requires_grad = true })
  local x64 = x:detach():double():requires_grad_(true)
  local w64 = w:detach():double():requires_grad_(true)
  local y = F.conv_transpose2d(x, w, nil, 1, 1)
  local y64 = F.conv_transpose2d(x64, w64, nil, 1, 1)
  close(y, y64:detach(), 1e-5, "conv_transpose2d forward")
  local go = ember.randn(y.shape)
  y:backward(go)
  y64:backward(go:double())
  close(x.grad, x64.grad, 1e-5, "conv_transpose2d input gradient")
  close(w.grad, w64.grad, 1e-5, "conv_transpose2d weight gradient")
  local xh, wh = ember.randn(2, 8, 6, 6), ember.randn(9, 8, 3, 3)
  for _, dt in ipairs({ "float16", "bfloat16" }) do
    local xd, wd = xh:to(dt), wh:to(dt)
    local yd = F.conv2d(xd, wd, nil, 1, 1)
    check_eq(yd.dtype, dt)
    close(yd, F.conv2d(xd:double(), wd:double(), nil, 1, 1), dt == "float16" and 2e-3 or 1e-2, dt .. " forward")
  end
end

return T
