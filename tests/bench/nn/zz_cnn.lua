-- zz_cnn.lua -- the small CNN training step of ../shared/bench/torch_ref.py's cnn()
-- (2 x (conv3x3 + relu + max_pool2) + linear, batch 64 of 1x28x28, cross_entropy,
-- plain SGD lr 0.01), written with ember.nn.functional and in-place updates under
-- no_grad. Paired with zz_cnn.py (Note [Bench families]); issue 9's target is
-- <= 0.7x PyTorch's step time. Named zz_ to run after the op families.
return function(B)
  local ember = B.ember
  local F = ember.nn.functional
  if not (F.conv2d and F.max_pool2d and F.cross_entropy) then
    print("ember_cnn_b64_step skipped: this build lacks conv2d, max_pool2d or cross_entropy")
    return
  end
  local function param(...) return (ember.randn(...) * 0.1):requires_grad_() end
  local w1, b1 = param(16, 1, 3, 3), param(16)
  local w2, b2 = param(32, 16, 3, 3), param(32)
  local w3, b3 = param(10, 32 * 7 * 7), param(10)
  local params = {w1, b1, w2, b2, w3, b3}
  local x, y = ember.randn(64, 1, 28, 28), ember.randint(1, 11, {64})
  local function step()
    for _, p in ipairs(params) do p.grad = nil end
    local h = F.max_pool2d(F.conv2d(x, w1, b1, 1, 1):relu(), 2)
    h = F.max_pool2d(F.conv2d(h, w2, b2, 1, 1):relu(), 2)
    local loss = F.cross_entropy(F.linear(h:flatten(2), w3, b3), y)
    loss:backward()
    ember.no_grad(function()
      for _, p in ipairs(params) do p:sub_(p.grad * 0.01) end
    end)
  end
  local nth = ember.get_num_threads()
  for _, s in ipairs({{"tdef", nth}, {"t1", 1}, {"t2", 2}}) do
    ember.set_num_threads(s[2])
    B.measure("ember_cnn_b64_step_" .. s[1], function(t) return t * 1e3 end, "ms", 10, step)
  end
  ember.set_num_threads(nth)
end
