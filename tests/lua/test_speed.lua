-- test_speed.lua -- the training-step speed work (family speed): the fast
-- paths give the values they replaced (expected values from PyTorch 1.13)
-- and the layouts they promise. Timings are measured by make bench, never
-- asserted here.
local T = {}
local F = ember.nn.functional

-- Note [mm gradient layout]: linear's weight (multiplied as the
-- column-major t(weight)) gets a contiguous gradient, with PyTorch's values.
function T.linear_weight_grad_contiguous()
  local x = ember.arange(12):reshape(4, 3) / 10
  local W = (ember.arange(15):reshape(5, 3) / 7 - 1):requires_grad_()
  local b = (ember.arange(5) / 3):requires_grad_()
  local loss = (ember.relu(F.linear(x, W, b)) ^ 2):sum()
  loss:backward()
  check(W.grad:is_contiguous(), "weight gradient is contiguous")
  check_eq(W.grad:stride(1), 3)
  check_eq(W.grad:stride(2), 1)
  check_tensor(W.grad, { { 0, 0, 0 }, { 0, 0.046666670590639114, 0.09333334118127823 },
    { 2.5028574466705322, 3.0590479373931885, 3.6152384281158447 },
    { 7.405714511871338, 8.794285774230957, 10.182857513427734 },
    { 12.308571815490723, 14.529523849487305, 16.750476837158203 } }, 1e-5)
  check_tensor(b.grad, { 0, 0.46666669845581055, 5.5619049072265625, 13.885714530944824, 22.209524154663086 }, 1e-5)
  -- autograd.grad hands the gradient over as computed: in weight's layout
  local gW = ember.autograd.grad({ (ember.relu(F.linear(x, W, b)) ^ 2):sum() }, { W })[1]
  check(gW:is_contiguous(), "autograd.grad's weight gradient is contiguous")
  check_eq(gW:stride(1), 3)
  -- a second backward accumulates into the stolen buffer
  local g1 = W.grad:clone()
  loss = (ember.relu(F.linear(x, W, b)) ^ 2):sum()
  loss:backward()
  check_tensor(W.grad, (g1 * 2):tolist(), 1e-5)
end

-- the first operand column-major (mm's self side, through matmul and mm)
function T.mm_self_col_major_grad()
  for _, op in ipairs({ "matmul", "mm" }) do
    local V = (ember.arange(12):reshape(3, 4) / 5 - 1):requires_grad_()
    local z = ember.arange(6):reshape(3, 2) / 4
    local y = ember[op](V:t(), z)
    local loss = (y * y):sum()
    loss:backward()
    check(V.grad:is_contiguous(), op .. ": gradient is contiguous")
    check_tensor(V.grad, { { 0.17500002682209015, 0.3999999761581421, 0.625, 0.8500000238418579 },
      { 1.0250000953674316, 1.9999998807907104, 2.9749999046325684, 3.950000286102295 },
      { 1.8750001192092896, 3.5999999046325684, 5.324999809265137, 7.050000190734863 } }, 1e-5)
  end
end

-- create_graph keeps the history of the transposed gradients: the second
-- derivative through the new formulas matches the explicit one
function T.mm_col_major_double_backward()
  local W = ember.tensor({ { 1, -2, 0.5 }, { 0.25, 3, -1 } }, { dtype = "float64" }):requires_grad_()
  local x = ember.tensor({ { 0.5, 1, -1 }, { 2, 0, 1 } }, { dtype = "float64" }):requires_grad_()
  local y = (F.linear(x, W) ^ 2):sum()
  local gW = ember.autograd.grad({ y }, { W }, { create_graph = true })[1]
  -- d/dx sum(gW) where gW = 2 (x W^T)^T x: sum_ij gW_ij
  local gx = ember.autograd.grad({ gW:sum() }, { x })[1]
  local x2, W2 = x:detach():requires_grad_(), W:detach():requires_grad_()
  local o = x2:mm(W2:t())
  local gW2 = (o * 2):t():mm(x2)
  local gx2 = ember.autograd.grad({ gW2:sum() }, { x2 })[1]
  check_tensor(gx, gx2:tolist(), 1e-12)
end

-- the ternary loops' contiguous and scalar-weight fast paths
function T.ternary_fast_paths()
  local p = ember.arange(6):reshape(2, 3) / 3
  local a, c = ember.arange(6):reshape(2, 3) - 2.5, ember.arange(6):reshape(2, 3) + 1
  check_tensor(ember.addcdiv(p, a, c, { value = -0.5 }),
    { { 1.25, 0.7083333730697632, 0.75 }, { 0.9375, 1.183333396911621, 1.4583332538604736 } }, 1e-6)
  check_tensor(ember.addcmul(p, a, c, { value = 0.25 }),
    { { -0.625, -0.4166666567325592, 0.2916666865348816 }, { 1.5, 3.2083334922790527, 5.416666507720947 } }, 1e-6)
  local q = p:clone()
  check(q:addcdiv_(a, c, { value = -0.5 }) == q, "addcdiv_ returns self")
  check_tensor(q, ember.addcdiv(p, a, c, { value = -0.5 }):tolist(), 0)
  check_tensor(ember.lerp(p, a, ember.tensor(0.75)),
    { { -1.875, -1.0416666269302368, -0.2083333134651184 }, { 0.625, 1.4583333730697632, 2.2916667461395264 } }, 1e-6)
  check_tensor(ember.addcdiv(p:to("bfloat16"), a:to("bfloat16"), c:to("bfloat16"), { value = 0.3 }):float(),
    { { -0.75, 0.10888671875, 0.6171875 }, { 1.0390625, 1.4296875, 1.7890625 } }, 0)
  local i = ember.arange(6):reshape(2, 3):long()
  check_tensor(ember.addcmul(i, i, i + 1, { value = 3 }), { { 0, 7, 20 }, { 39, 64, 95 } }, 0)
  -- a strided (transposed) operand still takes the general loop
  local at = (ember.arange(6):reshape(3, 2) - 2.5):t()
  check_tensor(ember.addcdiv(p, at, c), (p + at / c):tolist(), 1e-6)
  -- long vectors (several chunks, vector and tail iterations)
  local n = 10007
  local u, v, w = ember.linspace(-3, 3, n), ember.linspace(1, 2, n), ember.linspace(0.5, 4, n)
  check_tensor(ember.addcdiv(u, v, w, { value = 0.7 }), (u + (v / w) * 0.7):tolist(), 1e-6)
  check_tensor(ember.addcmul(u, v, w, { value = 0.7 }), (u + (v * w) * 0.7):tolist(), 1e-6)
end

-- max_pool2d's 2x2 float32 loop (branch-free selects): ties keep the
-- first position, a NaN wins and the last NaN of a window is its index
function T.max_pool2d_2x2_nan_and_ties()
  local nan = 0 / 0
  local x = ember.tensor({ { { { 1, 1, 2, nan, 0, 5 }, { 1, 1, nan, 3, 5, 0 },
    { nan, nan, -1, -2, 4, 4 }, { 2, nan, -3, -1, 4, 4 } } } })
  local v, i = F.max_pool2d(x, 2, { return_indices = true })
  check_tensor(v, { { { { 1, nan, 5 }, { nan, -1, 4 } } } }, 0)
  check_tensor(i, { { { { 1, 9, 6 }, { 20, 15, 17 } } } }, 0)
  -- a wide plane (vector body and tail) against the general loop's float64
  ember.manual_seed(3)
  local y = ember.randn(2, 3, 10, 38)
  y[{ 1, 2, 3, 5 }] = nan
  local v32, i32 = F.max_pool2d(y, 2, { return_indices = true })
  local v64, i64 = F.max_pool2d(y:double(), 2, { return_indices = true })
  check(ember.equal(i32, i64), "indices agree with the general loop")
  check(ember.allclose(v32:double(), v64, { equal_nan = true }), "values agree with the general loop")
end

-- cross_entropy's backward with class targets (softmax stored in the
-- result, one exp per logit): PyTorch's values incl. -inf and +inf logits,
-- class weights, ignore_index (1-based targets here)
function T.cross_entropy_backward_one_exp()
  local inf = math.huge
  local nan = 0 / 0
  local x = ember.tensor({ { 1, 2, 3, -1 }, { 0.5, -inf, 2, 1 }, { inf, 0, 1, 2 }, { 3, 3, 3, 3 }, { -2, 5, 0, 1 } })
  x:requires_grad_()
  local t = ember.tensor({ 3, 1, 2, 4, 2 }, { dtype = "int64" })
  local w = ember.tensor({ 0.5, 2, 1, 1.5 })
  local l = F.cross_entropy(x, t, w, 4)
  l:backward()
  check(l:item() ~= l:item(), "the +inf row makes the loss NaN")
  check_tensor(x.grad, { { 0.016172150149941444, 0.043960463255643845, -0.06232127547264099, 0.002188662067055702 },
    { -0.07815960049629211, 0, 0.05713924765586853, 0.021020352840423584 }, { nan, nan, nan, nan }, { 0, 0, 0, 0 },
    { 0.00032320129685103893, -0.009203022345900536, 0.002388152526691556, 0.006491672247648239 } }, 1e-6)
  x.grad = nil
  F.cross_entropy(x, t, nil, -100, "sum"):backward()
  check_tensor(x.grad, { { 0.08894681930541992, 0.2417825311422348, -0.34276700019836426, 0.012037640437483788 },
    { -0.8597556352615356, 0, 0.6285316944122314, 0.23122388124465942 }, { nan, nan, nan, nan },
    { 0.25, 0.25, 0.25, -0.75 },
    { 0.0008888035663403571, -0.025308310985565186, 0.00656741950660944, 0.017852097749710083 } }, 1e-6)
  -- a long row (vector body and tail) against log_softmax's backward
  ember.manual_seed(5)
  local z = ember.randn(3, 1003):requires_grad_()
  local tz = ember.tensor({ 1, 500, 1003 }, { dtype = "int64" })
  F.cross_entropy(z, tz):backward()
  local z2 = z:detach():requires_grad_()
  F.nll_loss(F.log_softmax(z2, 2), tz):backward()
  check(ember.allclose(z.grad, z2.grad, { rtol = 1e-5, atol = 1e-8 }), "matches log_softmax + nll_loss")
end

return T
