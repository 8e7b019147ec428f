-- test_loss2.lua -- the loss2 family: binary_cross_entropy,
-- binary_cross_entropy_with_logits (and their backward ops), kl_div,
-- ctc_loss. Values are PyTorch 1.13's (computed with torch on the same
-- inputs); errors name the op, the argument and the problem.
local T = {}
local F = ember.nn.functional
local ag = ember.autograd
local nan, inf = 0 / 0, math.huge

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end

-- ---- binary_cross_entropy ----

local function bx() return f64({ { 0.2, 0.7, 0.95 }, { 0.05, 0.5, 0.999 } }) end
local function bt() return f64({ { 0, 1, 0.3 }, { 1, 0.5, 1 } }) end
local function bw() return f64({ 0.5, 2, 1.5 }) end

local BCE = {
  none = { { 0.11157177565710485, 0.7133498878774649, 3.1686008697060872 }, { 1.4978661367769954, 1.3862943611198906, 0.0015007505003753014 } },
  sum = 6.879183781637918, mean = 1.1465306302729863,
  gx = { { 0.10416666666666664, -0.4761904761904762, 3.421052631578944 }, { -1.6666666666666667, 0.0, -0.2502502502502502 } },
  gt = { { 0.11552453009332421, -0.28243262012906784, -0.73610974479161 }, { 0.2453699149305367, 0.0, -1.726688694662138 } },
  ggx = { { -0.012084479589069962, -0.08415133427697274, 409.9215695516956 }, { -100.00813733423878, 0.0, 62.067275185403595 } },
  ggt = { { -0.16867597053471742, 1.9600215436666986, -32.136818517717224 }, { 5.417479681408416, -0.0, 557.3546534441032 } },
}

function T.bce_matches_pytorch()
  for _, red in ipairs({ "none", "sum", "mean" }) do
    check_tensor(F.binary_cross_entropy(bx(), bt(), bw(), red), BCE[red], 1e-12, "bce " .. red)
    check_tensor(F.binary_cross_entropy(bx():float(), bt():float(), bw():float(), { reduction = red }), BCE[red], 1e-5,
      "float32 bce " .. red)
  end
  check_tensor(F.binary_cross_entropy(bx(), bt()), 1.0636831715840867, 1e-12, "no weight")
  -- the log clamp at -100, targets outside [0, 1] taken as they are
  check_tensor(F.binary_cross_entropy(f64({ 0, 1, 0, 1, 0.5 }), f64({ 0, 1, 1, 0, 2 }), nil, "none"),
    { 0, 0, 100, 100, 0.6931471805599453 }, 1e-12)
  local f32 = { dtype = "float32" }
  check_tensor(F.binary_cross_entropy(ember.tensor({ 0, 1, 0, 1 }, f32), ember.tensor({ 0, 1, 1, 0 }, f32), { reduction = "sum" }), 200, 1e-6)
  -- non-contiguous operands and a weight of input's full shape
  local xt, tt = bx():t():contiguous():t(), bt():t():contiguous():t()
  check(not xt:is_contiguous())
  check_tensor(F.binary_cross_entropy(xt, tt, bw():expand(2, 3):contiguous(), "none"), BCE.none, 1e-12)
  check_tensor(F.binary_cross_entropy(bx():t(), bt():t(), bw():reshape(3, 1), "sum"), BCE.sum, 1e-12)
  -- 0-dim and empty: mean of nothing is NaN, sum 0
  check_tensor(F.binary_cross_entropy(ember.tensor(0.3), ember.tensor(1.0)), 1.2039728164672852, 1e-6)
  check_tensor(F.binary_cross_entropy(ember.zeros(0), ember.zeros(0)), nan)
  check_tensor(F.binary_cross_entropy(ember.zeros(0), ember.zeros(0), { reduction = "sum" }), 0)
  check_shape(F.binary_cross_entropy(ember.zeros(2, 0), ember.zeros(2, 0), { reduction = "none" }), { 2, 0 })
  check_eq(F.binary_cross_entropy(bx():float(), bt():float()).dtype, "float32")
  -- an integer weight is taken in input's dtype
  check_tensor(F.binary_cross_entropy(bx(), bt(), ember.tensor({ 1, 1, 1 })), 1.0636831715840867, 1e-12)
  -- a large input (several blocks, parallel): mean of a constant term
  local big = ember.full({ 1000, 37 }, 0.25)
  check_tensor(F.binary_cross_entropy(big, ember.zeros(1000, 37)), -math.log(0.75), 1e-6)
  check_tensor(F.binary_cross_entropy(big:double(), ember.ones(1000, 37, { dtype = "float64" }), nil, "sum"), 37000 * math.log(4), 1e-12)
end

function T.bce_gradients_match_pytorch()
  local x, t = bx():requires_grad_(), bt():requires_grad_()
  local gx, gt = table.unpack(ag.grad({ F.binary_cross_entropy(x, t, bw()) }, { x, t }, { create_graph = true }))
  check_tensor(gx, BCE.gx, 1e-12, "grad input")
  check_tensor(gt, BCE.gt, 1e-12, "grad target")
  check_eq(gx.grad_fn.name, "BinaryCrossEntropyBackwardBackward")
  local ggx, ggt = table.unpack(ag.grad({ (gx * gx):sum() + (gt * gx):sum() }, { x, t }))
  check_tensor(ggx, BCE.ggx, 1e-9, "gradgrad input")
  check_tensor(ggt, BCE.ggt, 1e-9, "gradgrad target")
  -- the backward op called directly: grad_output broadcasts, mean divides by the count
  check_tensor(ember.binary_cross_entropy_backward(f64(1.0), bx(), bt(), bw(), "mean"), BCE.gx, 1e-12)
  check_tensor(ember.binary_cross_entropy_backward(ember.full({ 2, 3 }, 1 / 6, { dtype = "float64" }), bx(), bt(), bw(), "none"),
    BCE.gx, 1e-12)
  check_tensor(ember.binary_cross_entropy_backward(ember.tensor(1.0), bx():float(), bt():float(), nil, "sum"),
    { { 1.25, -1.4285714285714286, 13.684210526315789 }, { -20, 0, -1.001001001001001 } }, 1e-5)
  -- at 0 and 1 the denominator is clamped at 1e-12 (PyTorch: +-1e12)
  check_tensor(ember.binary_cross_entropy_backward(ember.tensor(1.0), ember.tensor({ 0.2, 0.7, 1.0, 0.0 }),
    ember.tensor({ 0, 1, 0, 1 }, { dtype = "float32" }), nil, "sum"), { 1.25, -1.4285714285714286, 1e12, -1e12 }, 1e-5)
end

function T.bce_errors()
  local x = bx()
  check_error(function() return F.binary_cross_entropy(f64({ 0.5, 1.5 }), f64({ 1, 1 })) end,
    "binary_cross_entropy", "all elements of input should be between 0 and 1")
  check_error(function() return F.binary_cross_entropy(f64({ 0.5, nan }), f64({ 1, 1 })) end,
    "binary_cross_entropy", "between 0 and 1")
  check_error(function() return F.binary_cross_entropy(ember.full({ 100000 }, -0.5), ember.zeros(100000)) end,
    "binary_cross_entropy", "between 0 and 1")
  check_error(function() return F.binary_cross_entropy(x, f64({ 1, 0, 1 })) end, "binary_cross_entropy", "target",
    "{3}", "{2,3}")
  check_error(function() return F.binary_cross_entropy(x, bt(), f64({ 1, 2 })) end, "binary_cross_entropy", "weight",
    "{2}", "{2,3}")
  check_error(function() return F.binary_cross_entropy(x, bt(), ember.ones(2, 2, 3, { dtype = "float64" })) end,
    "binary_cross_entropy", "weight", "{2,2,3}")
  check_error(function() return F.binary_cross_entropy(x, bt():float()) end, "binary_cross_entropy", "target dtype",
    "float32", "float64")
  check_error(function() return F.binary_cross_entropy(ember.tensor({ 0, 1 }), ember.tensor({ 0, 1 })) end,
    "binary_cross_entropy", "floating", "int64")
  check_error(function() return F.binary_cross_entropy(x:half(), bt():half()) end, "binary_cross_entropy",
    "not implemented for float16")
  check_error(function() return F.binary_cross_entropy(x:bfloat16(), bt():bfloat16()) end, "binary_cross_entropy",
    "bfloat16")
  check_error(function() return F.binary_cross_entropy(x, bt(), nil, "avg") end, "binary_cross_entropy", "reduction", "avg")
  check_error(function() return ember.binary_cross_entropy_backward(ember.ones(2, { dtype = "float64" }), x, bt(), nil, "none") end,
    "binary_cross_entropy_backward", "grad_output", "{2}", "{2,3}")
  check_error(function() return ember.binary_cross_entropy_backward(ember.tensor({ 1 }), x, bt(), nil, "sum") end,
    "binary_cross_entropy_backward", "floating grad_output", "int64")
end

-- ---- binary_cross_entropy_with_logits ----

local function lx() return f64({ { 0.2, -3, 50 }, { -50, 0.5, 4 } }) end
local function pw() return f64({ 1.5, 0.5, 3 }) end

local BCEL = {
  none = { { 0.3990694346907959, 3.048587351573742, 52.5 }, { 37.5, 1.2111154762701601, 0.081674675630144 } },
  sum = 94.74044693816484, mean = 15.79007448969414,
  plain = { { 0.7981388693815918, 3.048587351573742, 35.0 }, { 50.0, 0.7240769841801067, 0.01814992791780978 } },
  gx = { { 0.274916998656239, -0.9525741268224333, 1.0499999999999998 }, { -0.75, 0.43368899680278195, -0.08093794482941163 } },
  gt = { { 0.04953471734539794, 2.951412648426258, -75.0 }, { 37.5, -1.4740769841801067, -5.94555021624657 } },
  ggx = { { -0.0942212258956869, 1.0450175171049532, -1.5749999999999997 }, { 0.5625, -0.9175075321632113, -0.3596573107730383 } },
  ggt = { { -0.36713821193231144, -1.0958843972784973, 109.35000000000001 }, { -27.0, 0.984344438488413, 9.49068750366441 } },
  gx_plain = { { 0.09163899955207966, -0.15876235447040554, 0.11666666666666665 }, { -0.16666666666666666, 0.020409888533642433, -0.0029977016603485915 } },
  gt_plain = { { -0.03333333333333333, 0.5, -8.333333333333334 }, { 8.333333333333334, -0.08333333333333333, -0.6666666666666666 } },
}

function T.bce_with_logits_matches_pytorch()
  for _, red in ipairs({ "none", "sum", "mean" }) do
    check_tensor(F.binary_cross_entropy_with_logits(lx(), bt(), bw(), red, pw()), BCEL[red], 1e-12, "bcel " .. red)
    check_tensor(F.binary_cross_entropy_with_logits(lx():float(), bt():float(), bw():float(), { reduction = red, pos_weight = pw():float() }),
      BCEL[red], 1e-5, "float32 bcel " .. red)
  end
  check_tensor(F.binary_cross_entropy_with_logits(lx(), bt(), { reduction = "none" }), BCEL.plain, 1e-12)
  check_tensor(F.binary_cross_entropy_with_logits(lx():t(), bt():t(), { reduction = "none" }):t(), BCEL.plain, 1e-12)
  -- infinities and NaN as PyTorch's formula gives them
  check_tensor(F.binary_cross_entropy_with_logits(ember.tensor({ inf, -inf, inf, -inf, nan }), ember.tensor({ 1, 1, 0, 0, 0 }, { dtype = "float32" }),
    { reduction = "none" }), { nan, nan, inf, nan, nan })
  -- the result has target's dtype (PyTorch computes in place in 1 - target)
  check_eq(F.binary_cross_entropy_with_logits(lx(), bt():float()).dtype, "float32")
  check_eq(F.binary_cross_entropy_with_logits(lx():float(), bt()).dtype, "float64")
  check_eq(F.binary_cross_entropy_with_logits(lx():float(), bt():float(), bw()).dtype, "float32")
  local b = F.binary_cross_entropy_with_logits(ember.tensor({ 0.2, -3, 50 }):bfloat16(), ember.tensor({ 0, 1, 0.3 }):bfloat16(),
    { reduction = "none" })
  check_eq(b.dtype, "bfloat16")
  check_tensor(b, { 0.796875, 3.046875, 35.0 }, 1e-2)
  check_tensor(F.binary_cross_entropy_with_logits(ember.zeros(0), ember.zeros(0)), nan)
  check_tensor(F.binary_cross_entropy_with_logits(ember.tensor(0.0), ember.tensor(1.0), { pos_weight = ember.tensor(2.0) }),
    2 * math.log(2), 1e-6)
  local big = ember.zeros(300, 301)
  check_tensor(F.binary_cross_entropy_with_logits(big, big, { reduction = "sum" }), 90300 * math.log(2), 1e-6)
end

function T.bce_with_logits_gradients_match_pytorch()
  local x, t = lx():requires_grad_(), bt():requires_grad_()
  local gx, gt = table.unpack(ag.grad({ F.binary_cross_entropy_with_logits(x, t, bw(), "sum", pw()) }, { x, t },
    { create_graph = true }))
  check_tensor(gx, BCEL.gx, 1e-12, "grad input")
  check_tensor(gt, BCEL.gt, 1e-12, "grad target")
  check_eq(gx.grad_fn.name, "BinaryCrossEntropyWithLogitsBackwardBackward")
  local ggx, ggt = table.unpack(ag.grad({ (gx * gx):sum() + (gt * gx):sum() }, { x, t }))
  check_tensor(ggx, BCEL.ggx, 1e-12, "gradgrad input")
  check_tensor(ggt, BCEL.ggt, 1e-12, "gradgrad target")
  gx, gt = table.unpack(ag.grad({ F.binary_cross_entropy_with_logits(x, t) }, { x, t }))
  check_tensor(gx, BCEL.gx_plain, 1e-12, "grad input, no weights")
  check_tensor(gt, BCEL.gt_plain, 1e-12, "grad target, no weights")
  check_tensor(ember.binary_cross_entropy_with_logits_backward(f64(1.0), lx(), bt(), bw(), pw(), "sum"), BCEL.gx, 1e-12)
  -- a float32 leaf with a float64 target gets a float32 gradient
  local xf = lx():float():requires_grad_()
  F.binary_cross_entropy_with_logits(xf, bt()):backward()
  check_eq(xf.grad.dtype, "float32")
  check_tensor(xf.grad, BCEL.gx_plain, 1e-6)
end

function T.bce_with_logits_errors()
  local x = lx()
  check_error(function() return F.binary_cross_entropy_with_logits(x, f64({ 1, 0, 1 })) end,
    "binary_cross_entropy_with_logits", "target", "{3}", "{2,3}")
  check_error(function() return F.binary_cross_entropy_with_logits(x, bt(), { pos_weight = ember.ones(2, 2, 3) }) end,
    "binary_cross_entropy_with_logits", "pos_weight", "{2,2,3}", "{2,3}")
  check_error(function() return F.binary_cross_entropy_with_logits(x, bt(), ember.ones(2)) end,
    "binary_cross_entropy_with_logits", "weight", "{2}")
  check_error(function() return F.binary_cross_entropy_with_logits(ember.tensor({ 1, 2 }), ember.tensor({ 0, 1 })) end,
    "binary_cross_entropy_with_logits", "floating", "int64")
  check_error(function() return F.binary_cross_entropy_with_logits(x, bt(), { reduction = "batchmean" }) end,
    "binary_cross_entropy_with_logits", "reduction", "batchmean")
end

function T.binary_loss_modules_match_functional()
  local m = ember.nn.BCELoss(bw(), { reduction = "sum" })
  check_tensor(m(bx(), bt()), BCE.sum, 1e-12)
  check_tensor(ember.nn.BCELoss()(bx(), bt()), 1.0636831715840867, 1e-12)
  local l = ember.nn.BCEWithLogitsLoss({ weight = bw(), reduction = "none", pos_weight = pw() })
  check_tensor(l(lx(), bt()), BCEL.none, 1e-12)
  check_tensor(ember.nn.BCEWithLogitsLoss()(lx(), bt()), F.binary_cross_entropy_with_logits(lx(), bt()):item(), 0)
end

-- ---- kl_div ----

local function kx() return f64({ { -1.2, -0.3, -2.0 }, { -0.7, -1.5, -0.1 } }) end
local function kt() return f64({ { 0.2, 0.5, 0.3 }, { 0.0, 0.6, 0.4 } }) end

function T.kl_div_matches_pytorch()
  local KL = {
    none = { { -0.0818875824868201, -0.19657359027997265, 0.23880815870221916 }, { 0.0, 0.5935046257404055, -0.326516292749662 } },
    sum = 0.22733531892616995, mean = 0.037889219821028323, batchmean = 0.11366765946308498,
  }
  for _, red in ipairs({ "none", "sum", "mean", "batchmean" }) do
    check_tensor(F.kl_div(kx(), kt(), red), KL[red], 1e-12, "kl_div " .. red)
    check_tensor(F.kl_div(kx():float(), kt():float(), { reduction = red }), KL[red], 1e-6, "float32 kl_div " .. red)
  end
  -- log_target: exp(t) (t - x); a target of log 0 = -inf gives NaN (PyTorch too)
  check_tensor(F.kl_div(kx(), kt():log(), "none", true),
    { { -0.08188758248682007, -0.19657359027997265, 0.23880815870221916 }, { nan, 0.5935046257404055, -0.32651629274966204 } }, 1e-12)
  check_tensor(F.kl_div(kx(), kt():log(), { log_target = true, reduction = "sum" }), nan)
  local x, t = kx():requires_grad_(), kt():requires_grad_()
  local gx, gt = table.unpack(ag.grad({ F.kl_div(x, t, "batchmean") }, { x, t }))
  check_tensor(gx, { { -0.1, -0.25, -0.15 }, { -0.0, -0.3, -0.2 } }, 1e-12)
  check_tensor(gt:narrow(1, 1, 1), { { 0.29528104378294984, 0.3034264097200273, 0.8980135978370319 } }, 1e-12)
  gx, gt = table.unpack(ag.grad({ F.kl_div(x, t, "sum", true) }, { x, t }))
  check_tensor(gx, { { -1.2214027581601699, -1.6487212707001282, -1.3498588075760032 }, { -1.0, -1.8221188003905089, -1.4918246976412703 } }, 1e-12)
  check_tensor(gt, { { 2.9313666195844075, 2.967698287260231, 4.454534065000811 }, { 1.7, 5.6485682812105775, 2.2377370464619055 } }, 1e-12)
  -- broadcasting, 0-dim batchmean (the sum), empty batch (NaN)
  check_shape(F.kl_div(ember.zeros(2, 3), ember.ones(3), "none"), { 2, 3 })
  check_tensor(F.kl_div(ember.tensor(-0.5), ember.tensor(0.3), "batchmean"), -0.21119184, 1e-6)
  check_tensor(F.kl_div(ember.zeros(0, 3), ember.zeros(0, 3), "batchmean"), nan)
  check_eq(F.kl_div(kx():float(), kt()).dtype, "float64")
  check_tensor(ember.nn.KLDivLoss({ reduction = "batchmean" })(kx(), kt()), KL.batchmean, 1e-12)
  check_tensor(ember.nn.KLDivLoss("sum", true)(kx(), kt()), F.kl_div(kx(), kt(), "sum", true):item(), 0)
end

function T.kl_div_errors()
  check_error(function() return F.kl_div(ember.tensor({ 1, 2 }), ember.tensor({ 1, 2 })) end, "kl_div", "integral", "int64")
  check_error(function() return F.kl_div(kx(), ember.tensor({ true, false, true })) end, "kl_div", "bool")
  check_error(function() return F.kl_div(kx(), kt(), "avg") end, "kl_div", "reduction", "avg")
  check_error(function() return F.kl_div(kx(), ember.ones(4)) end, "kl_div", "{2,3}", "{4}")
end

-- ---- ctc_loss ----

-- PyTorch's inputs: x = sin(0.7 k) * 2 (5, 2, 4), log_probs = log_softmax(x, 3);
-- torch's 0-based targets {{1,2,2},{3,1,0}} with blank 0 are ember's
-- {{2,3,3},{4,2,0}} with blank 1 (the 0 is padding past the length)
local function cx() return (ember.arange(0, 40, { dtype = "float64" }) * 0.7):sin():reshape(5, 2, 4) * 2 end
local function ctg() return ember.tensor({ { 2, 3, 3 }, { 4, 2, 0 } }) end
local CTC = {
  none = { 7.762528146178756, 3.4697252006171064 }, mean = 2.161185991184069, sum = 11.232253346795861,
  gx = { { { 0.027065271178476496, -0.7615169248195524, 0.4118933819178312, 0.3225582717232447 }, { 0.3077060190938497, 0.17930690436437274, 0.06327648643080508, -0.5502894098890275 } }, { { -0.0070023669212897054, -0.05591975630425544, -0.5259523654039944, 0.5888744886295395 }, { 0.030274305467353307, 0.11035738514912315, 0.05953803723059205, -0.20016972784706852 } }, { { -0.4073271117579207, 0.05463069390540454, -0.3649734240721034, 0.7176698419246196 }, { 0.129776607333362, -0.08451559093229823, 0.12241099855300855, -0.1676720149540723 } }, { { -0.5195835350456415, 0.08280851863341702, -0.20782392342399947, 0.644598939836224 }, { 0.018067675690490448, -0.40634165320950283, 0.29124869786030844, 0.09702527965870389 } }, { { 0.1329872694292094, 0.15626208320486906, -0.5761667309973454, 0.286917378363267 }, { 0.0, 0.0, 0.0, 0.0 } } },
  glp = { { { 0.004510878529746101, -0.12691948746992532, 0.06864889698630533, 0.05375971195387422 }, { 0.07692650477346241, 0.04482672609109318, 0.015819121607701266, -0.13757235247225688 } }, { { -0.0011670611535482798, -0.009319959384042557, -0.08765872756733234, 0.09814574810492335 }, { 0.007568576366838303, 0.02758934628728078, 0.01488450930764801, -0.05004243196176713 } }, { { -0.06788785195965344, 0.009105115650900764, -0.06082890401201721, 0.11961164032077004 }, { 0.0324441518333405, -0.021128897733074553, 0.030602749638252137, -0.041918003738518075 } }, { { -0.08659725584094022, 0.013801419772236187, -0.03463732057066654, 0.10743315663937077 }, { 0.004516918922622619, -0.1015854133023757, 0.07281217446507712, 0.024256319914675976 } }, { { 0.022164544904868223, 0.02604368053414484, -0.09602778849955756, 0.04781956306054448 }, { 0.0, 0.0, 0.0, 0.0 } } },
  gzero = { { { 0.0, 0.0, 0.0, 0.0 }, { 0.3553490706149049, -0.46931715202387714, 0.06327648643080507, 0.0506915949781666 } }, { { 0.0, 0.0, 0.0, 0.0 }, { 0.12508206661666899, -0.20595154570933194, 0.05953803723059204, 0.021331441862070498 } }, { { 0.0, 0.0, 0.0, 0.0 }, { -0.21655587667998122, 0.06305119524953079, 0.12241099855300855, 0.03109368287744148 } }, { { 0.0, 0.0, 0.0, 0.0 }, { 0.10916331520170998, -0.4974372927207228, 0.2912486978603085, 0.0970252796587039 } }, { { 0.0, 0.0, 0.0, 0.0 }, { 0.0, 0.0, 0.0, 0.0 } } },
}

function T.ctc_loss_matches_pytorch()
  local lp = cx():log_softmax(3)
  for _, red in ipairs({ "none", "mean", "sum" }) do
    check_tensor(F.ctc_loss(lp, ctg(), { 5, 4 }, { 3, 2 }, 1, red), CTC[red], 1e-12, "ctc " .. red)
  end
  check_tensor(F.ctc_loss(lp, ctg(), { 5, 4 }, { 3, 2 }), CTC.mean, 1e-12, "defaults")
  -- concatenated targets, lengths as tensors (any integer dtype), float32
  check_tensor(F.ctc_loss(lp, ember.tensor({ 2, 3, 3, 4, 2 }), ember.tensor({ 5, 4 }), ember.tensor({ 3, 2 }), { reduction = "none" }),
    CTC.none, 1e-12, "concatenated")
  check_tensor(F.ctc_loss(lp, ctg():int(), ember.tensor({ 5, 4 }, { dtype = "int32" }), ember.tensor({ 3, 2 }, { dtype = "int32" })),
    CTC.mean, 1e-12, "int32")
  local f = F.ctc_loss(lp:float(), ctg(), { 5, 4 }, { 3, 2 }, { reduction = "none" })
  check_eq(f.dtype, "float32")
  check_tensor(f, { 7.762527942657471, 3.4697251319885254 }, 1e-6)
  -- another blank (torch's blank 2 = ember's 3)
  check_tensor(F.ctc_loss(lp, ember.tensor({ { 2, 1, 1 }, { 4, 2, 4 } }), { 5, 4 }, { 3, 2 }, 3, "none"),
    { 7.932461167013286, 5.2791453010101845 }, 1e-12, "blank 3")
  -- unbatched (T, C) with (S) targets: a 0-dim loss for none
  local u = F.ctc_loss(lp:select(2, 2), ember.tensor({ 4, 2 }), { 4 }, { 2 }, { reduction = "none" })
  check_eq(u:dim(), 0)
  check_tensor(u, 3.4697252006171064, 1e-12)
  check_tensor(F.ctc_loss(lp:select(2, 2), ember.tensor({ 4, 2 }), ember.tensor(4), ember.tensor(2)), 3.4697252006171064 / 2, 1e-12)
  check_tensor(F.ctc_loss(lp:select(2, 2), ember.tensor({ { 4, 2, 1 } }), { 4 }, { 2 }, { reduction = "sum" }), 3.4697252006171064, 1e-12)
  -- impossible alignments are inf; zero_infinity zeroes them
  local same = ember.full({ 2, 3 }, 2)
  check_tensor(F.ctc_loss(lp, same, { 3, 4 }, { 3, 2 }, { reduction = "none" }), { inf, 2.397949246071681 }, 1e-12)
  check_tensor(F.ctc_loss(lp, same, { 3, 4 }, { 3, 2 }, { zero_infinity = true }), 0.5994873115179202, 1e-12)
  -- empty targets, non-contiguous log_probs, an input length of 0
  check_tensor(F.ctc_loss(lp, ctg(), { 5, 3 }, { 0, 0 }, { reduction = "none" }), { 13.431606475782612, 1.4514905084909957 }, 1e-12)
  local lpt = lp:transpose(1, 2):contiguous():transpose(1, 2)
  check(not lpt:is_contiguous())
  check_tensor(F.ctc_loss(lpt, ctg(), { 5, 4 }, { 3, 2 }, { reduction = "sum" }), CTC.sum, 1e-12)
  check_tensor(F.ctc_loss(lp, ctg(), { 0, 0 }, { 0, 1 }, { reduction = "none" }), { 0, inf })
  -- the module
  check_tensor(ember.nn.CTCLoss({ reduction = "sum" })(lp, ctg(), { 5, 4 }, { 3, 2 }), CTC.sum, 1e-12)
  check_tensor(ember.nn.CTCLoss(3, "none")(lp, ember.tensor({ { 2, 1, 1 }, { 4, 2, 4 } }), { 5, 4 }, { 3, 2 }),
    { 7.932461167013286, 5.2791453010101845 }, 1e-12)
end

function T.ctc_loss_gradients_match_pytorch()
  local x = cx():requires_grad_()
  local gx = ag.grad({ F.ctc_loss(x:log_softmax(3), ctg(), { 5, 4 }, { 3, 2 }, { reduction = "sum" }) }, { x })[1]
  check_tensor(gx, CTC.gx, 1e-12, "through log_softmax")
  -- with respect to log_probs: PyTorch's gradient (Note [CTC])
  local lp = cx():log_softmax(3):requires_grad_()
  check_tensor(ag.grad({ F.ctc_loss(lp, ctg(), { 5, 4 }, { 3, 2 }) }, { lp })[1], CTC.glp, 1e-12, "log_probs")
  check_tensor(ag.grad({ F.ctc_loss(lp, ember.full({ 2, 3 }, 2), { 3, 4 }, { 3, 2 }, { reduction = "sum", zero_infinity = true }) }, { lp })[1],
    CTC.gzero, 1e-12, "zero_infinity")
  -- the backward ops directly
  local nll, alpha = ember._ctc_loss(lp:detach(), ctg(), { 5, 4 }, { 3, 2 })
  check_tensor(nll, CTC.none, 1e-12)
  check_shape(alpha, { 2, 5, 7 })
  check_eq(alpha:select(1, 2):select(1, 5):select(1, 1):item(), -inf) -- past sample 2's input length
  local g = ember._ctc_loss_backward(ember.ones(2, { dtype = "float64" }), lp:detach(), ctg(), { 5, 4 }, { 3, 2 }, nll, alpha, 1)
  check_shape(g, { 5, 2, 4 })
  -- float32 gradient
  local lpf = cx():float():log_softmax(3):requires_grad_()
  check_tensor(ag.grad({ F.ctc_loss(lpf, ctg(), { 5, 4 }, { 3, 2 }) }, { lpf })[1], CTC.glp, 1e-5, "float32")
  -- no double backward (PyTorch has none either): create_graph records a
  -- node that refuses to run
  local gl = ag.grad({ F.ctc_loss(lp, ctg(), { 5, 4 }, { 3, 2 }) }, { lp }, { create_graph = true })[1]
  check_tensor(gl, CTC.glp, 1e-12)
  check_error(function() return ag.grad({ (gl * gl):sum() }, { lp }) end, "_ctc_loss_backward", "not implemented")
end

function T.ctc_loss_errors()
  local lp = cx():log_softmax(3)
  local c = "ctc_loss"
  check_error(function() return F.ctc_loss(lp, ember.tensor({ { 1, 3, 3 }, { 4, 2, 0 } }), { 5, 4 }, { 3, 2 }) end,
    c, "target label 1", "sample 1", "position 1", "blank")
  check_error(function() return F.ctc_loss(lp, ember.tensor({ { 2, 5, 3 }, { 4, 2, 0 } }), { 5, 4 }, { 3, 2 }) end,
    c, "target label 5", "1..4")
  check_error(function() return F.ctc_loss(lp, ember.tensor({ { 2, 3, 3 }, { 4, 0, 0 } }), { 5, 4 }, { 3, 2 }) end,
    c, "target label 0", "sample 2", "position 2")
  check_error(function() return F.ctc_loss(lp, ctg(), { 6, 4 }, { 3, 2 }) end, c, "input_lengths", "6", "T = 5")
  check_error(function() return F.ctc_loss(lp, ctg(), { 5, -1 }, { 3, 2 }) end, c, "input_lengths", "-1")
  check_error(function() return F.ctc_loss(lp, ctg(), { 5, 4 }, { 4, 2 }) end, c, "target_lengths", "4", "S = 3")
  check_error(function() return F.ctc_loss(lp, ctg(), { 5, 4 }, { 3, -2 }) end, c, "target_lengths", "negative")
  check_error(function() return F.ctc_loss(lp, ctg(), { 5 }, { 3 }) end, c, "one entry per sample (2)")
  check_error(function() return F.ctc_loss(lp, ember.tensor({ 2, 3, 3, 4 }), { 5, 4 }, { 3, 2 }) end, c, "concatenated", "{4}", "5")
  check_error(function() return F.ctc_loss(lp, ctg(), { 5, 4 }, { 3, 2 }, 5) end, c, "blank", "1..4", "5")
  check_error(function() return F.ctc_loss(lp, ctg(), { 5, 4 }, { 3, 2 }, 0) end, c, "blank", "0")
  check_error(function() return F.ctc_loss(lp:half(), ctg(), { 5, 4 }, { 3, 2 }) end, c, "float32 or float64", "float16")
  check_error(function() return F.ctc_loss(lp, ctg():double(), { 5, 4 }, { 3, 2 }) end, c, "targets", "integer", "float64")
  check_error(function() return F.ctc_loss(lp, ctg(), ember.tensor({ 5.0, 4.0 }), ember.tensor({ 3, 2 })) end,
    c, "input_lengths", "integral", "float32")
  check_error(function() return F.ctc_loss(lp:sum(3):sum(2), ctg(), { 5, 4 }, { 3, 2 }) end, c, "(T, N, C)", "{5}")
  check_error(function() return F.ctc_loss(lp:select(2, 1), ctg(), { 5, 4 }, { 3, 2 }) end, c, "one entry per sample (1)")
  check_error(function() return F.ctc_loss(lp:select(2, 1), ember.tensor({ 2, 3, 4 }), { 5 }, { 2 }) end, c, "concatenated", "{3}", "2")
  check_error(function() return F.ctc_loss(lp, ember.ones(2, 2, 2, { dtype = "int64" }), { 5, 4 }, { 3, 2 }) end, c, "padded", "{2,2,2}")
  check_error(function() return F.ctc_loss(lp, ctg(), { 5, 4 }, { 3, 2 }, 1, "batchmean") end, c, "reduction", "batchmean")
end

return T
