-- embed.lua -- the embed family's workloads (Note [Bench families]), paired
-- with embed.py: embedding and embedding_bag (sum) forward+backward over a
-- 50000x128 float32 weight with 4096x32 ids (issue 9), one thread and the
-- default count.
return function(B)
  local ember = B.ember
  local F = ember.nn.functional
  ember.manual_seed(0)
  local w = ember.randn(50000, 128):requires_grad_()
  local ids = ember.randint(1, 50001, { 4096, 32 })
  local g = ember.randn(4096, 32, 128)
  local gb = ember.randn(4096, 128)
  local nth = ember.get_num_threads()
  for _, s in ipairs({ { "t1", 1 }, { "tdef", nth } }) do
    ember.set_num_threads(s[2])
    B.measure("ember_embedding_50000x128_4096x32_fb_" .. s[1], function(t) return t * 1e3 end, "ms", 5, function()
      w.grad = nil
      F.embedding(ids, w):backward(g)
    end)
    B.measure("ember_embedding_bag_sum_50000x128_4096x32_fb_" .. s[1], function(t) return t * 1e3 end, "ms", 5,
      function()
        w.grad = nil
        F.embedding_bag(ids, w, nil, { mode = "sum" }):backward(gb)
      end)
  end
  ember.set_num_threads(nth)
end
