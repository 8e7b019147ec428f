-- tests/bench/nn/loss.lua -- the loss family's workloads (Note [Bench
-- families]): softmax / log_softmax 512x1000 float32 forward+backward,
-- cross_entropy 512x1000 forward+backward, the MLP training step
-- (784-512-512-10, batch 128, SGD momentum 0.9, lr 0.01, written with
-- F.linear, ember.relu, F.cross_entropy and in-place updates under
-- no_grad). _tN: N threads on both sides; _tdef: each side's default
-- thread count (torch 1.13: cores / 2).
return function(B)
  local ember, measure = B.ember, B.measure
  local F = ember.nn.functional
  local ms = function(t) return t * 1e3 end
  local default_threads = ember.get_num_threads()
  ember.manual_seed(0)
  local x = ember.randn(512, 1000, { requires_grad = true })
  local g = ember.randn(512, 1000)
  local y = ember.randint(1, 1001, { 512 })
  for _, th in ipairs({ 1, 2 }) do
    ember.set_num_threads(th)
    for _, name in ipairs({ "softmax", "log_softmax" }) do
      local fn = F[name]
      measure(string.format("ember_%s_512x1000_fwd_bwd_t%d", name, th), ms, "ms/iter", 20, function()
        fn(x, 2):backward(g)
        x.grad = nil
      end)
    end
    measure(string.format("ember_cross_entropy_512x1000_fwd_bwd_t%d", th), ms, "ms/iter", 20, function()
      F.cross_entropy(x, y):backward()
      x.grad = nil
    end)
  end

  -- the MLP step; nn.Linear's initialisation (uniform in +-1/sqrt(fan_in))
  local sizes = { 784, 512, 512, 10 }
  local params, bufs = {}, {}
  for i = 1, 3 do
    local bound = 1 / math.sqrt(sizes[i])
    params[#params + 1] = (ember.rand(sizes[i + 1], sizes[i]) * (2 * bound) - bound):requires_grad_()
    params[#params + 1] = (ember.rand(sizes[i + 1]) * (2 * bound) - bound):requires_grad_()
  end
  for i, p in ipairs(params) do bufs[i] = ember.zeros_like(p) end
  local xb, yb = ember.randn(128, 784), ember.randint(1, 11, { 128 })
  local function step()
    for _, p in ipairs(params) do p.grad = nil end
    local h = ember.relu(F.linear(xb, params[1], params[2]))
    h = ember.relu(F.linear(h, params[3], params[4]))
    local loss = F.cross_entropy(F.linear(h, params[5], params[6]), yb)
    loss:backward()
    local guard <close> = ember.no_grad()
    for i, p in ipairs(params) do
      bufs[i]:mul_(0.9):add_(p.grad)
      p:add_(bufs[i], { alpha = -0.01 })
    end
  end
  for _, th in ipairs({ "def", 1, 2 }) do
    ember.set_num_threads(th == "def" and default_threads or th)
    measure("ember_mlp_b128_step_t" .. th, ms, "ms/step", 20, step)
  end
  ember.set_num_threads(default_threads)
end
