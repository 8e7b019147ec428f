-- test_nn_layers.lua -- the layers of lua/stdlib/nn_layers.lua: shapes, that
-- each forward is its F op with the module's parameters, PyTorch's
-- initialisation bounds, BatchNorm's running statistics, train/eval, errors.
local ember = require "ember"
local nn, F = ember.nn, ember.nn.functional
local T = {}

function T.convolutions()
  ember.manual_seed(0)
  local c = nn.Conv2d(3, 8, 3, { padding = 1 })
  check_shape(c.weight, { 8, 3, 3, 3 })
  local bound = 1 / math.sqrt(3 * 9)
  check(c.weight:abs():max():item() <= bound + 1e-6 and c.bias:abs():max():item() <= bound + 1e-6,
    "PyTorch's init bounds")
  local x = ember.randn(2, 3, 5, 5)
  local y = c(x)
  check_shape(y, { 2, 8, 5, 5 })
  check(ember.allclose(y, F.conv2d(x, c.weight, c.bias, 1, 1)), "forward is F.conv2d")
  check_shape(nn.Conv2d(3, 8, 3, { padding = "same", bias = false })(x), { 2, 8, 5, 5 })
  check_shape(nn.Conv1d(4, 6, 3, { stride = 2 })(ember.randn(2, 4, 9)), { 2, 6, 4 })
  local t = nn.ConvTranspose2d(8, 3, 2, { stride = 2 })
  check_shape(t.weight, { 8, 3, 2, 2 })
  check_shape(t(y), { 2, 3, 10, 10 })
  check_shape(nn.Conv2d(4, 4, 3, { groups = 4 }).weight, { 4, 1, 3, 3 })
  check_error(function() nn.Conv2d(3, 8, 3, { groups = 2 }) end, "Conv2d", "divisible by groups")
  check_error(function() nn.Conv2d(3, 8, { 3 }) end, "Conv2d", "kernel_size")
  check(tostring(c):find("Conv2d(3, 8, kernel_size={3, 3}", 1, true), tostring(c))
  local n = 0
  for _ in pairs(c:state_dict()) do n = n + 1 end
  check_eq(n, 2)
end

function T.pooling()
  local x = ember.randn(2, 3, 8, 8)
  check(ember.equal((nn.MaxPool2d(2)(x)), (F.max_pool2d(x, 2))), "MaxPool2d")
  local v, i = nn.MaxPool2d(2, { return_indices = true })(x)
  check_shape(i, { 2, 3, 4, 4 })
  check(ember.allclose(nn.AvgPool2d(3, { stride = 1, padding = 1 })(x), F.avg_pool2d(x, 3, 1, 1)), "AvgPool2d")
  check_shape(nn.AdaptiveAvgPool2d(1)(x), { 2, 3, 1, 1 })
  check_shape(nn.MaxPool1d(2)(ember.randn(2, 3, 8)), { 2, 3, 4 })
end

function T.batch_norm_running_statistics()
  local bn = nn.BatchNorm1d(3)
  local x = ember.randn(16, 3) * 2 + 5
  bn:train()
  local y = bn(x)
  check(y:mean(1):abs():max():item() < 1e-4, "training normalises with the batch statistics")
  check_tensor(bn.running_mean, (x:mean(1) * 0.1):tolist(), 1e-5)
  check_tensor(bn.running_var, (ember.ones(3) * 0.9 + x:var(1) * 0.1):tolist(), 1e-4) -- unbiased
  check_eq(bn.num_batches_tracked:item(), 1)
  bn:eval()
  local z = bn(x)
  local want = (x - bn.running_mean) / (bn.running_var + 1e-5):sqrt()
  check(ember.allclose(z, want, 1e-4, 1e-5), "eval uses the running statistics")
  local sd = bn:state_dict()
  check(sd.running_mean and sd.running_var and sd.num_batches_tracked and sd.weight, "buffers in the state dict")
  -- momentum = false: a cumulative average (PyTorch's None)
  local cum = nn.BatchNorm2d(2, { momentum = false })
  local a, b = ember.randn(4, 2, 3, 3), ember.randn(4, 2, 3, 3) + 1
  cum(a); cum(b)
  check_tensor(cum.running_mean, ((a:mean({ 1, 3, 4 }) + b:mean({ 1, 3, 4 })) / 2):tolist(), 1e-5)
  -- gradients reach the affine parameters
  bn:train()
  bn(x):sum():backward()
  check(bn.weight.grad and bn.bias.grad, "weight and bias get gradients")
  check_error(function() nn.BatchNorm1d(0) end, "BatchNorm1d", "num_features")
end

function T.layer_group_rms_norm_and_dropout()
  local x = ember.randn(4, 6)
  local ln = nn.LayerNorm(6)
  check(ember.allclose(ln(x), F.layer_norm(x, { 6 }, ln.weight, ln.bias)), "LayerNorm")
  check_eq(#ln:parameters(), 2)
  check_shape(nn.GroupNorm(2, 6)(ember.randn(2, 6, 3)), { 2, 6, 3 })
  check_error(function() nn.GroupNorm(4, 6) end, "GroupNorm", "divisible")
  local r = nn.RMSNorm({ 6 })
  check(ember.allclose(r(x), x / (x:pow(2):mean(2, true) + 1.1920928955078125e-07):sqrt(), 1e-5), "RMSNorm")
  local d = nn.Dropout(0.5)
  local big = ember.ones(10000)
  local out = d(big)
  local zeros = (out:eq(0)):sum():item()
  check(zeros > 4000 and zeros < 6000, "training drops about half: " .. zeros)
  d:eval()
  check(ember.equal(d(big), big), "eval is the identity")
  check_error(function() nn.Dropout(1.5) end, "Dropout", "probability")
  -- a small CNN of these layers trains end to end
  ember.manual_seed(1)
  local net = nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Dropout(0.1), nn.Linear(4 * 4 * 4, 3))
  local opt = ember.optim.SGD(net:parameters(), { lr = 0.1 })
  local xb, yb = ember.randn(8, 1, 8, 8), ember.tensor({ 1, 2, 3, 1, 2, 3, 1, 2 })
  local first, last
  for step = 1, 30 do
    opt:zero_grad()
    local loss = F.cross_entropy(net(xb), yb)
    loss:backward()
    opt:step()
    if step == 1 then first = loss:item() end
    last = loss:item()
  end
  check(last < first * 0.5, string.format("the loss falls: %.3f -> %.3f", first, last))
end

return T
