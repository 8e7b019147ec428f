-- optim.lua -- bench family "optim" (Note [Bench families]): one
-- optimizer step (the parameter update only; gradients are set once) over
-- the parameters of a 784-512-512-10 MLP, ms/step, one thread; paired with
-- optim.py's torch.optim runs of the same workloads.
return function(B)
  local ember = B.ember
  local nn, optim = ember.nn, ember.optim
  ember.set_num_threads(1)
  ember.manual_seed(0)
  local mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
  local params = mlp:parameters()
  for _, p in ipairs(params) do p.grad = ember.randn(p.shape) * 0.01 end
  local ms = function(t) return t * 1e3 end
  local adam = optim.Adam(params, { lr = 1e-3 })
  B.measure("ember_adam_mlp_step", ms, "ms/step", 5, function() adam:step() end)
  local adamw = optim.AdamW(params, { lr = 1e-3 })
  B.measure("ember_adamw_mlp_step", ms, "ms/step", 5, function() adamw:step() end)
  local sgd = optim.SGD(params, { lr = 0.01, momentum = 0.9 })
  B.measure("ember_sgd_momentum_mlp_step", ms, "ms/step", 5, function() sgd:step() end)
end
