-- test_embed.lua -- the embed family (schema/ops/embed.yaml): values against
-- PyTorch 1.13 (torch.nn.functional with ids minus one), gradients,
-- determinism, edge cases and errors; the nn.Embedding/EmbeddingBag layers.
-- Gradient checks against finite differences: test_gradcheck.lua.
local T = {}
local F = ember.nn.functional

local function ids(v, dt) return ember.tensor(v, { dtype = dt or "int64" }) end
-- torch.arange(20.).reshape(5,4)*0.37 - 3
local function w54(dt) return ember.arange(20, { dtype = dt or "float32" }):reshape(5, 4) * 0.37 - 3 end

-- ---- embedding ----

function T.embedding_gathers_rows_by_1_based_id()
  local w = ember.arange(12, { dtype = "float32" }):reshape(4, 3)
  local y = F.embedding(ids({ { 2, 4 }, { 1, 2 } }), w)
  check_shape(y, { 2, 2, 3 })
  check_eq(y.dtype, "float32")
  check_tensor(y, { { { 3, 4, 5 }, { 9, 10, 11 } }, { { 0, 1, 2 }, { 3, 4, 5 } } }, 0)
  -- a 0-dim id gives one row; int32 ids work
  check_tensor(F.embedding(ids(3), w), { 6, 7, 8 }, 0)
  check_shape(F.embedding(ids(3), w), { 3 })
  check_tensor(F.embedding(ids({ 4, 1 }, "int32"), w), { { 9, 10, 11 }, { 0, 1, 2 } }, 0)
end

function T.embedding_dtypes_and_layouts()
  -- any weight dtype, as index_select
  local wi = ember.arange(6, { dtype = "int64" }):reshape(3, 2)
  local y = F.embedding(ids({ { 1, 2 } }), wi)
  check_eq(y.dtype, "int64")
  check_tensor(y, { { { 0, 1 }, { 2, 3 } } })
  check_tensor(F.embedding(ids({ 3 }), ember.ones(3, 2, { dtype = "bool" })), { { true, true } })
  local wh = w54("float16")
  check_eq(F.embedding(ids({ 5 }), wh).dtype, "float16")
  check_tensor(F.embedding(ids({ 5 }), wh), { { 2.92, 3.29, 3.66, 4.03 } }, 2e-3)
  check_eq(F.embedding(ids({ 2 }), w54("bfloat16")).dtype, "bfloat16")
  -- a transposed (non-contiguous) weight and non-contiguous ids
  local wt = ember.arange(12, { dtype = "float64" }):reshape(3, 4):t() -- (4, 3)
  check_tensor(F.embedding(ids({ 2, 4 }), wt), { { 1, 5, 9 }, { 3, 7, 11 } }, 0)
  local ix = ids({ { 1, 2 }, { 3, 4 } }):t()
  check_tensor(F.embedding(ix, wt), { { { 0, 4, 8 }, { 2, 6, 10 } }, { { 1, 5, 9 }, { 3, 7, 11 } } }, 0)
end

function T.embedding_empty()
  local w = w54()
  check_shape(F.embedding(ember.zeros(0, { dtype = "int64" }), w), { 0, 4 })
  check_shape(F.embedding(ember.zeros(2, 0, { dtype = "int64" }), w), { 2, 0, 4 })
  check_shape(F.embedding(ids({ 1, 1 }), ember.zeros(3, 0)), { 2, 0 })
  -- the gradient of an empty lookup is zeros of weight's shape
  local wg = w54():requires_grad_()
  F.embedding(ember.zeros(0, { dtype = "int64" }), wg):sum():backward()
  check_tensor(wg.grad, ember.zeros(5, 4):tolist(), 0)
  -- NaN and inf rows are copied as they are
  local wn = ember.tensor({ { 0 / 0, 1 }, { math.huge, -math.huge } })
  check_tensor(F.embedding(ids({ 2, 1 }), wn), { { math.huge, -math.huge }, { 0 / 0, 1 } })
end

function T.embedding_gradient_padding_and_scale_grad_by_freq()
  local g = ember.arange(24, { dtype = "float32" }):reshape(2, 3, 4) * 0.1
  local x = ids({ { 1, 5, 2 }, { 2, 2, 4 } })
  local w = w54():requires_grad_()
  F.embedding(x, w):backward(g)
  check_tensor(w.grad, { { 0.0, 0.1, 0.2, 0.3 }, { 3.6, 3.9, 4.2, 4.5 }, { 0, 0, 0, 0 },
    { 2.0, 2.1, 2.2, 2.3 }, { 0.4, 0.5, 0.6, 0.7 } }, 1e-6)
  w = w54():requires_grad_()
  F.embedding(x, w, 2, { scale_grad_by_freq = true }):backward(g)
  check_tensor(w.grad, { { 0.0, 0.1, 0.2, 0.3 }, { 0, 0, 0, 0 }, { 0, 0, 0, 0 },
    { 2.0, 2.1, 2.2, 2.3 }, { 0.4, 0.5, 0.6, 0.7 } }, 1e-6)
  -- padding_idx counts from the end when negative: -4 is row 2
  w = w54():requires_grad_()
  F.embedding(x, w, -4):backward(g)
  check_tensor(w.grad[2], { 0, 0, 0, 0 }, 0)
  -- scale_grad_by_freq alone: row 2 appears 3 times
  w = w54():requires_grad_()
  F.embedding(x, w, nil, { scale_grad_by_freq = true }):backward(g)
  check_tensor(w.grad[2], { 1.2, 1.3, 1.4, 1.5 }, 1e-6)
  -- the padding row still gives its values forward
  check_tensor(F.embedding(ids({ 2 }), w54(), 2), { { -1.52, -1.15, -0.78, -0.41 } }, 1e-6)
end

function T.embedding_dense_backward_direct()
  local g = ember.ones(2, 3, { dtype = "float64" })
  check_tensor(ember.embedding_dense_backward(g, ids({ 1, 2 }), 4), { { 1, 1, 1 }, { 1, 1, 1 }, { 0, 0, 0 }, { 0, 0, 0 } }, 0)
  check_tensor(ember.embedding_dense_backward(g, ids({ 3, 3 }), 3, 3), ember.zeros(3, 3):tolist(), 0)
  check_tensor(ember.embedding_dense_backward(g, ids({ 3, 3 }), 3, nil, true), { { 0, 0, 0 }, { 0, 0, 0 }, { 1, 1, 1 } }, 0)
  -- half types accumulate in float32
  local gh = ember.full({ 3000, 1 }, 0.1, { dtype = "float16" })
  local r = ember.embedding_dense_backward(gh, ember.ones(3000, { dtype = "int64" }), 1)
  check_eq(r.dtype, "float16")
  check_near(r:item(), 300, 0.3)
  check_eq(ember.embedding_dense_backward(gh:to("bfloat16"), ember.ones(3000, { dtype = "int32" }), 2).dtype,
    "bfloat16")
end

function T.embedding_backward_is_deterministic_across_thread_counts()
  ember.manual_seed(7)
  local w = ember.randn(300, 64):requires_grad_()
  local x = ember.randint(1, 301, { 4000, 8 })
  local g = ember.randn(4000, 8, 64)
  local n = ember.get_num_threads()
  local grads = {}
  for k, threads in ipairs({ 1, 2, 1, 2 }) do
    ember.set_num_threads(threads)
    w.grad = nil
    F.embedding(x, w, 7, { scale_grad_by_freq = k > 2 }):backward(g)
    grads[k] = w.grad:clone()
  end
  ember.set_num_threads(n)
  check(grads[1]:equal(grads[2]), "the same gradient with 1 and 2 threads")
  check(grads[3]:equal(grads[4]), "the same gradient with 1 and 2 threads (scale_grad_by_freq)")
  -- and it is the sum of the rows (an independent computation)
  local want = ember.zeros(300, 64):index_add(1, x:reshape(-1), g:reshape(-1, 64))
  want[7] = 0
  check(grads[1]:allclose(want, 1e-5, 1e-5), "gradient = index_add of the rows")
end

function T.embedding_max_norm_renormalises_weight_in_place()
  local w = w54()
  local y = F.embedding(ids({ 5, 1, 5 }), w, nil, 2.5)
  local r1 = { -1.5122504234313965, -1.3257395029067993, -1.1392285823822021, -0.9527177214622498 }
  local r5 = { 1.042995572090149, 1.1751558780670166, 1.3073163032531738, 1.439476728439331 }
  check_tensor(w, { r1, { -1.52, -1.15, -0.78, -0.41 }, { -0.04, 0.33, 0.70, 1.07 },
    { 1.44, 1.81, 2.18, 2.55 }, r5 }, 1e-6)
  check_tensor(y, { r5, r1, r5 }, 1e-6)
  -- norm_type 1 and inf
  w = w54()
  F.embedding(ids({ 5, 1, 4 }), w, nil, 3.0, 1.0)
  check_tensor(w[4], { 0.5413533449172974, 0.6804510354995728, 0.8195489048957825, 0.9586465954780579 }, 1e-6)
  w = w54()
  F.embedding(ids({ 5, 1, 4 }), w, nil, 1.5, math.huge)
  check_tensor(w[1], { -1.4999998807907104, -1.3149999380111694, -1.1299998760223389, -0.9449999332427979 }, 1e-6)
  -- norm_type 3 in float64; row 3 (norm below max_norm) is left alone
  w = w54("float64")
  F.embedding(ids({ 5, 3 }), w, nil, 2.0, 3.0)
  check_tensor(w[5], { 1.044104966107214, 1.1764059378399774, 1.3087069095727408, 1.4410078813055043 }, 1e-12)
  check_tensor(w[3], { -0.04, 0.33, 0.70, 1.07 }, 1e-12)
  -- a leaf that requires grad is renormalised under no_grad; the gradient
  -- flows to the lookup as without max_norm
  w = w54():requires_grad_()
  F.embedding(ids({ 5 }), w, nil, 2.5):sum():backward()
  check_tensor(w.grad[5], { 1, 1, 1, 1 }, 0)
  check(w.is_leaf and w.requires_grad)
  check_near(w:detach()[5]:norm():item(), 2.5, 1e-5)
end

function T.embedding_renorm_direct()
  local w = w54()
  local r = ember.embedding_renorm_(w, ids({ 5, 5 }), 2.5, 2.0)
  check(rawequal(r, w) or r:data_ptr() == w:data_ptr(), "returns self")
  check_near(w[5]:norm():item(), 2.5, 1e-5)
  check_error(function() ember.embedding_renorm_(ember.ones(3, 2, { dtype = "int64" }), ids({ 1 }), 1.0, 2.0) end,
    "embedding_renorm_", "floating", "int64")
  check_error(function() ember.embedding_renorm_(w54(), ids({ 6 }), 1.0, 2.0) end,
    "embedding_renorm_", "id 6", "5 rows")
end

function T.embedding_errors()
  local w = w54()
  check_error(function() return F.embedding(ids({ 1, 6 }), w) end, "embedding", "id 6", "5 rows", "1-based")
  check_error(function() return F.embedding(ids({ 0 }), w) end, "embedding", "id 0", "valid: 1..5")
  check_error(function() return F.embedding(ids({ -1 }), w) end, "embedding", "id -1")
  check_error(function() return F.embedding(ids({ 6 }), w, nil, 1.0) end, "embedding", "id 6")
  check_error(function() return F.embedding(ember.tensor({ 1.0 }), w) end, "embedding", "input", "int64 or int32",
    "float32")
  check_error(function() return F.embedding(ids({ 1 }, "int8"), w) end, "embedding", "input", "int8")
  check_error(function() return F.embedding(ids({ 1 }), ember.ones(3)) end, "embedding", "weight", "2-d", "{3}")
  check_error(function() return F.embedding(ids({ 1 }), ember.ones(3, 2, 2)) end, "embedding", "weight", "{3,2,2}")
  check_error(function() return F.embedding(ids({ 1 }), w, 6) end, "embedding", "padding_idx 6", "5 rows")
  check_error(function() return F.embedding(ids({ 1 }), w, 0) end, "embedding", "padding_idx 0")
  check_error(function() return F.embedding(ids({ 1 }), w, -6) end, "embedding", "padding_idx -6")
  check_error(function() return F.embedding(ids({ 1 }), w, nil, nil, 2.0, false, true) end,
    "embedding", "sparse", "not supported")
  check_error(function() return F.embedding(ids({ 1 }), ember.zeros(0, 3)) end, "embedding", "id 1", "0 rows")
  check_error(function() return ember.embedding_dense_backward(ember.ones(2, 3), ids({ 1, 2, 3 }), 4) end,
    "embedding_dense_backward", "{2,3}", "{3}")
  check_error(function() return ember.embedding_dense_backward(ember.ones(2, 3), ids({ 1, 5 }), 4) end,
    "embedding_dense_backward", "id 5", "4 rows")
  check_error(function() return ember.embedding_dense_backward(ember.ones(2, 3, { dtype = "int64" }), ids({ 1, 2 }), 4) end,
    "embedding_dense_backward", "floating")
  check_error(function() return ember.embedding_dense_backward(ember.ones(2, 3), ids({ 1, 2 }), 4, 5) end,
    "embedding_dense_backward", "padding_idx 5")
  -- the weight is untouched by a failing max_norm lookup
  check_tensor(w, w54():tolist(), 0)
end

-- ---- embedding_bag ----

local bx = function() return ids({ 1, 5, 2, 2, 2, 4 }) end
local boff = function() return ids({ 1, 3, 3, 6 }) end

function T.embedding_bag_modes()
  local w = w54()
  check_tensor(F.embedding_bag(bx(), w, boff(), { mode = "sum" }), { { -0.08, 0.66, 1.40, 2.14 }, { 0, 0, 0, 0 },
    { -4.56, -3.45, -2.34, -1.23 }, { 1.44, 1.81, 2.18, 2.55 } }, 1e-5)
  check_tensor(F.embedding_bag(bx(), w, boff()), { { -0.04, 0.33, 0.70, 1.07 }, { 0, 0, 0, 0 },
    { -1.52, -1.15, -0.78, -0.41 }, { 1.44, 1.81, 2.18, 2.55 } }, 1e-5)
  check_tensor(F.embedding_bag(bx(), w, boff(), { mode = "max" }), { { 2.92, 3.29, 3.66, 4.03 }, { 0, 0, 0, 0 },
    { -1.52, -1.15, -0.78, -0.41 }, { 1.44, 1.81, 2.18, 2.55 } }, 1e-5)
  -- the kernel's max indices: 1-based rows, 0 for the empty bag
  local out, mi = ember.embedding_bag_dense(w, bx(), boff(), "max")
  check_tensor(mi, { { 5, 5, 5, 5 }, { 0, 0, 0, 0 }, { 2, 2, 2, 2 }, { 4, 4, 4, 4 } })
  check_tensor(out, F.embedding_bag(bx(), w, boff(), { mode = "max" }):tolist(), 0)
  -- 2-d input: one bag per row; include_last_offset as PyTorch drops the last row's bag there
  local x2 = ids({ { 1, 2 }, { 3, 3 }, { 4, 5 } })
  check_tensor(F.embedding_bag(x2, w, nil, { mode = "sum" }), { { -4.52, -3.78, -3.04, -2.30 },
    { -0.08, 0.66, 1.40, 2.14 }, { 4.36, 5.10, 5.84, 6.58 } }, 1e-5)
  check_shape(F.embedding_bag(x2, w, nil, { mode = "sum", include_last_offset = true }), { 2, 4 })
  check_tensor(F.embedding_bag(ids({ { 1, 2 }, { 3, 3 } }), w, nil, { mode = "max" }),
    { { -1.52, -1.15, -0.78, -0.41 }, { -0.04, 0.33, 0.70, 1.07 } }, 1e-5)
end

function T.embedding_bag_offsets_weights_and_padding()
  local w = w54()
  -- include_last_offset: the last offset closes the bag before it; ids after it are in no bag
  check_tensor(F.embedding_bag(bx(), w, boff(), { mode = "sum", include_last_offset = true }),
    { { -0.08, 0.66, 1.40, 2.14 }, { 0, 0, 0, 0 }, { -4.56, -3.45, -2.34, -1.23 } }, 1e-5)
  check_tensor(F.embedding_bag(bx(), w, ids({ 1, 3, 4 }), { mode = "sum", include_last_offset = true }),
    { { -0.08, 0.66, 1.40, 2.14 }, { -1.52, -1.15, -0.78, -0.41 } }, 1e-5)
  -- the last offset may be n + 1 (an empty last bag)
  check_tensor(F.embedding_bag(bx(), w, ids({ 1, 7 }), { mode = "sum" })[2], { 0, 0, 0, 0 }, 0)
  check_tensor(F.embedding_bag(bx(), w, boff(), { mode = "sum", per_sample_weights = ember.arange(6, { dtype = "float32" }) }),
    { { 2.92, 3.29, 3.66, 4.03 }, { 0, 0, 0, 0 }, { -13.68, -10.35, -7.02, -3.69 }, { 7.2, 9.05, 10.9, 12.75 } }, 1e-5)
  -- padding ids are left out; a mean divides by the other ids
  check_tensor(F.embedding_bag(bx(), w, boff(), { padding_idx = 2 }), { { -0.04, 0.33, 0.70, 1.07 }, { 0, 0, 0, 0 },
    { 0, 0, 0, 0 }, { 1.44, 1.81, 2.18, 2.55 } }, 1e-5)
  check_tensor(F.embedding_bag(ids({ 1, 2, 5, 2, 2, 4 }), w, boff(), { padding_idx = 2 }), { { -3.0, -2.63, -2.26, -1.89 },
    { 0, 0, 0, 0 }, { 2.92, 3.29, 3.66, 4.03 }, { 1.44, 1.81, 2.18, 2.55 } }, 1e-5)
  check_tensor(F.embedding_bag(bx(), w, boff(), { mode = "max", padding_idx = -4 })[3], { 0, 0, 0, 0 }, 0)
  -- max_norm renormalises the referenced rows first
  local wm = w54()
  F.embedding_bag(ids({ 5, 1, 5 }), wm, ids({ 1 }), 2.5)
  check_near(wm[5]:norm():item(), 2.5, 1e-5)
  check_near(wm[1]:norm():item(), 2.5, 1e-5)
  check_tensor(wm[2], w54()[2]:tolist(), 0)
end

function T.embedding_bag_dtypes_and_empty()
  local w = w54("float64")
  check_eq(F.embedding_bag(bx(), w, boff()).dtype, "float64")
  local h = F.embedding_bag(ids({ 1, 5, 2, 2, 2, 4 }, "int32"), w54("float16"), ids({ 1, 3, 3, 6 }, "int32"))
  check_eq(h.dtype, "float16")
  check_tensor(h, { { -0.04, 0.33, 0.70, 1.07 }, { 0, 0, 0, 0 }, { -1.52, -1.15, -0.78, -0.41 },
    { 1.44, 1.81, 2.18, 2.55 } }, 4e-3)
  check_tensor(F.embedding_bag(ember.zeros(0, { dtype = "int64" }), w54(), ids({ 1, 1 })), { { 0, 0, 0, 0 }, { 0, 0, 0, 0 } }, 0)
  check_shape(F.embedding_bag(ember.zeros(0, 3, { dtype = "int64" }), w54()), { 0, 4 })
  check_shape(F.embedding_bag(bx(), w54(), ember.zeros(0, { dtype = "int64" })), { 0, 4 })
  -- ember gives zero rows for bags of length 0 (PyTorch fails making its offsets)
  check_tensor(F.embedding_bag(ember.zeros(2, 0, { dtype = "int64" }), w54()), { { 0, 0, 0, 0 }, { 0, 0, 0, 0 } }, 0)
  -- a non-contiguous weight
  local wt = ember.arange(12, { dtype = "float64" }):reshape(3, 4):t()
  check_tensor(F.embedding_bag(ids({ 2, 4 }), wt, ids({ 1 }), { mode = "sum" }), { { 4, 12, 20 } }, 0)
end

function T.embedding_bag_gradients()
  local g = ember.arange(16, { dtype = "float32" }):reshape(4, 4)
  local w = w54():requires_grad_()
  F.embedding_bag(bx(), w, boff(), { mode = "max" }):backward(g)
  check_tensor(w.grad, { { 0, 0, 0, 0 }, { 8, 9, 10, 11 }, { 0, 0, 0, 0 }, { 12, 13, 14, 15 }, { 0, 1, 2, 3 } }, 0)
  w = w54():requires_grad_()
  F.embedding_bag(ids({ 1, 2, 5, 2, 2, 4 }), w, boff(), { padding_idx = 2 }):backward(g)
  check_tensor(w.grad, { { 0, 1, 2, 3 }, { 0, 0, 0, 0 }, { 0, 0, 0, 0 }, { 12, 13, 14, 15 }, { 8, 9, 10, 11 } }, 1e-6)
  w = w54():requires_grad_()
  local p = ember.arange(6, { dtype = "float32" }):requires_grad_()
  F.embedding_bag(bx(), w, boff(), { mode = "sum", per_sample_weights = p, padding_idx = 5 }):backward(g)
  check_tensor(p.grad, { -12.82, 0, -34.82, -34.82, -34.82, 109.58 }, 1e-5)
  check_tensor(w.grad, { { 0, 0, 0, 0 }, { 72, 81, 90, 99 }, { 0, 0, 0, 0 }, { 60, 65, 70, 75 }, { 0, 0, 0, 0 } }, 1e-5)
end

function T.embedding_bag_scale_grad_by_freq()
  -- each row divided by its own id's count, as embedding does (PyTorch 1.13's
  -- CPU embedding_bag gives row 4 0.5 here: see ops_embed.py)
  local w = ember.ones(5, 1):requires_grad_()
  F.embedding_bag(ids({ 3, 3, 1, 5, 4 }), w, ids({ 1 }), { mode = "sum", scale_grad_by_freq = true }):sum():backward()
  check_tensor(w.grad, { { 1 }, { 0 }, { 1 }, { 1 }, { 1 } }, 1e-7)
  w.grad = nil
  F.embedding_bag(ids({ { 3, 3 }, { 1, 3 } }), w, nil, { scale_grad_by_freq = true }):sum():backward()
  check_tensor(w.grad, { { 0.5 }, { 0 }, { 0.5 }, { 0 }, { 0 } }, 1e-7)
end

function T.embedding_renorm_of_an_expanded_weight()
  -- nothing to rescale: nothing written, nothing refused (as PyTorch)
  local e = ember.ones(1, 2):expand(3, 2)
  check_shape(F.embedding(ember.zeros(0, { dtype = "int64" }), e, nil, 2.0), { 0, 2 })
  check_shape(F.embedding(ids({ 1 }), e, nil, 2.0), { 1, 2 })
  check_error(function() return F.embedding(ids({ 1 }), e, nil, 0.5) end, "embedding_renorm_", "memory location")
end

function T.embedding_bag_backward_is_deterministic_across_thread_counts()
  ember.manual_seed(11)
  local w = ember.randn(200, 48):requires_grad_()
  local x = ember.randint(1, 201, { 3000, 6 })
  local g = ember.randn(3000, 48)
  local n = ember.get_num_threads()
  for _, mode in ipairs({ "sum", "mean", "max" }) do
    local grads = {}
    for k, threads in ipairs({ 1, 2 }) do
      ember.set_num_threads(threads)
      w.grad = nil
      F.embedding_bag(x, w, nil, { mode = mode }):backward(g)
      grads[k] = w.grad:clone()
    end
    ember.set_num_threads(n)
    check(grads[1]:equal(grads[2]), mode .. ": the same gradient with 1 and 2 threads")
  end
  -- the sum mode gradient is the index_add of each id's bag row
  w.grad = nil
  F.embedding_bag(x, w, nil, { mode = "sum" }):backward(g)
  local rows = g:unsqueeze(2):expand(3000, 6, 48):reshape(-1, 48)
  local want = ember.zeros(200, 48):index_add(1, x:reshape(-1), rows)
  check(w.grad:allclose(want, 1e-4, 1e-4), "gradient = index_add of the bag rows")
end

function T.embedding_bag_errors()
  local w = w54()
  check_error(function() return F.embedding_bag(bx(), w) end, "embedding_bag", "offsets")
  check_error(function() return F.embedding_bag(ids({ { 1 } }), w, ids({ 1 })) end, "embedding_bag", "offsets", "2-d")
  check_error(function() return F.embedding_bag(ids({ { { 1 } } }), w) end, "embedding_bag", "1-d", "3 dims")
  check_error(function() return F.embedding_bag(bx(), w, ids({ 2, 3 })) end, "embedding_bag", "offsets[1] must be 1",
    "got 2")
  check_error(function() return F.embedding_bag(bx(), w, ids({ 1, 4, 3 })) end, "embedding_bag", "decrease")
  check_error(function() return F.embedding_bag(bx(), w, ids({ 1, 8 })) end, "embedding_bag", "offsets[2] = 8",
    "6 ids")
  check_error(function() return F.embedding_bag(bx(), w, ids({ { 1 } })) end, "embedding_bag", "offsets", "1-d")
  check_error(function() return F.embedding_bag(bx(), w, ember.tensor({ 1.0 })) end, "embedding_bag", "offsets",
    "float32")
  check_error(function() return F.embedding_bag(bx(), w, ember.zeros(0, { dtype = "int64" }), { include_last_offset = true }) end,
    "embedding_bag", "include_last_offset")
  check_error(function() return F.embedding_bag(ids({ 1, 6 }), w, ids({ 1 })) end, "embedding_bag", "id 6", "5 rows")
  check_error(function() return F.embedding_bag(bx(), w, boff(), { per_sample_weights = ember.ones(6) }) end,
    "embedding_bag", "per_sample_weights", "mode='sum'")
  check_error(function() return F.embedding_bag(bx(), w, boff(), { mode = "sum", per_sample_weights = ember.ones(5) }) end,
    "embedding_bag", "per_sample_weights", "{5}", "{6}")
  check_error(function()
    return F.embedding_bag(bx(), w, boff(), { mode = "sum", per_sample_weights = ember.ones(6, { dtype = "float64" }) }) end,
    "embedding_bag", "per_sample_weights", "float64", "float32")
  check_error(function() return F.embedding_bag(bx(), w, boff(), { mode = "max", scale_grad_by_freq = true }) end,
    "embedding_bag", "max", "scale_grad_by_freq")
  check_error(function() return F.embedding_bag(bx(), w, boff(), { mode = "median" }) end, "embedding_bag", "mode")
  check_error(function() return F.embedding_bag(bx(), w:to("int64"), boff()) end, "embedding_bag", "weight", "int64")
  check_error(function() return F.embedding_bag(bx(), w, boff(), { padding_idx = 9 }) end, "embedding_bag",
    "padding_idx 9")
  check_error(function() return F.embedding_bag(bx(), w, boff(), { sparse = true }) end, "embedding_bag", "sparse")
  check_error(function() return F.embedding_bag(ember.tensor({ 1.0 }), w, boff()) end, "embedding_bag", "input",
    "float32")
end

-- ---- nn.Embedding / nn.EmbeddingBag ----

function T.nn_embedding_layer()
  local nn = ember.nn
  ember.manual_seed(3)
  local m = nn.Embedding(10, 3, { padding_idx = -1 })
  check_eq(m.padding_idx, 10)
  check_shape(m.weight, { 10, 3 })
  check(m.weight.requires_grad)
  check_tensor(m.weight[10], { 0, 0, 0 }, 0)
  -- N(0, 1): a large table has mean ~0 and std ~1
  local big = nn.Embedding(20000, 10)
  check_near(big.weight:mean():item(), 0, 0.02)
  check_near(big.weight:std():item(), 1, 0.02)
  local y = m(ids({ { 1, 10 }, { 3, 3 } }))
  check_shape(y, { 2, 2, 3 })
  check_tensor(y[1][2], { 0, 0, 0 }, 0)
  y:sum():backward()
  check_tensor(m.weight.grad[3], { 2, 2, 2 }, 0)
  check_tensor(m.weight.grad[10], { 0, 0, 0 }, 0)
  -- state_dict round trip
  local sd = m:state_dict()
  check(sd.weight ~= nil)
  local m2 = nn.Embedding(10, 3)
  m2:load_state_dict(sd)
  check(m2.weight:equal(m.weight))
  check(tostring(m):find("Embedding(10, 3, padding_idx=10)", 1, true), tostring(m))
  -- dtype and max_norm
  local md = nn.Embedding(4, 2, { dtype = "float64", max_norm = 0.5 })
  check_eq(md.weight.dtype, "float64")
  md(ids({ 1, 2 }))
  check(md.weight[1]:norm():item() <= 0.5 + 1e-6 and md.weight[2]:norm():item() <= 0.5 + 1e-6)
  -- _weight is used as it is
  local w = ember.ones(3, 2)
  local mw = nn.Embedding(3, 2, { _weight = w, padding_idx = 1 })
  check_tensor(mw.weight[1], { 1, 1 }, 0)
end

function T.nn_embedding_from_pretrained()
  local nn = ember.nn
  local e = ember.tensor({ { 1.0, 2.3, 3.0 }, { 4.0, 5.1, 6.3 } })
  local m = nn.Embedding.from_pretrained(e)
  check(not m.weight.requires_grad, "frozen by default")
  check_tensor(m(ids({ 2 })), { { 4.0, 5.1, 6.3 } }, 1e-6)
  local t = nn.Embedding.from_pretrained(e, { freeze = false, padding_idx = 1 })
  check(t.weight.requires_grad)
  check_eq(t.padding_idx, 1)
  check_tensor(t.weight[1], { 1.0, 2.3, 3.0 }, 1e-6)
  local b = nn.EmbeddingBag.from_pretrained(e, { mode = "sum" })
  check(not b.weight.requires_grad)
  check_tensor(b(ids({ { 1, 2 } })), { { 5.0, 7.4, 9.3 } }, 1e-6)
  check_error(function() return nn.Embedding.from_pretrained(ember.ones(3)) end, "Embedding.from_pretrained", "2-d")
end

function T.nn_embedding_bag_layer()
  local nn = ember.nn
  ember.manual_seed(5)
  local m = nn.EmbeddingBag(6, 4, { mode = "sum", padding_idx = 2 })
  check_tensor(m.weight[2], { 0, 0, 0, 0 }, 0)
  local x, off = ids({ 1, 3, 2, 6, 6 }), ids({ 1, 3 })
  local y = m(x, off)
  check_shape(y, { 2, 4 })
  check(y[1]:allclose(m.weight[1] + m.weight[3]))
  check(y[2]:allclose(m.weight[6] * 2))
  local p = ember.tensor({ 1.0, 2.0, 3.0, 0.5, 0.5 })
  check(m(x, off, p)[1]:allclose(m.weight[1] + m.weight[3] * 2))
  check_eq(m.mode, "sum")
  check(tostring(m):find("EmbeddingBag(6, 4, padding_idx=2, mode=sum)", 1, true), tostring(m))
  local sd = m:state_dict()
  local m2 = nn.EmbeddingBag(6, 4)
  m2:load_state_dict(sd)
  check(m2.weight:equal(m.weight))
  check_eq(nn.EmbeddingBag(3, 2).mode, "mean")
  -- trains: one SGD step moves the used rows only
  local opt = ember.optim.SGD(m:parameters(), { lr = 0.1 })
  local before = m.weight:clone()
  opt:zero_grad()
  m(x, off):sum():backward()
  opt:step()
  check(not m.weight[1]:equal(before[1]))
  check(m.weight[4]:equal(before[4]))
  check(m.weight[2]:equal(before[2]), "the padding row gets no gradient")
end

function T.nn_embedding_errors()
  local nn = ember.nn
  check_error(function() return nn.Embedding(5, 2, { padding_idx = 6 }) end, "Embedding", "padding_idx 6")
  check_error(function() return nn.Embedding(5, 2, { padding_idx = 0 }) end, "Embedding", "padding_idx 0")
  check_error(function() return nn.Embedding(-1, 2) end, "Embedding", "num_embeddings")
  check_error(function() return nn.Embedding(5, 2.5) end, "Embedding", "embedding_dim")
  check_error(function() return nn.Embedding(5, 2, { sparse = true }) end, "Embedding", "sparse")
  check_error(function() return nn.Embedding(5, 2, { _weight = ember.ones(4, 2) }) end, "Embedding", "_weight",
    "{4,2}", "{5, 2}")
  check_error(function() return nn.EmbeddingBag(5, 2, { mode = "median" }) end, "EmbeddingBag", "mode")
  local m = nn.Embedding(5, 2)
  check_error(function() return m(ids({ 6 })) end, "embedding", "id 6", "5 rows")
end

function T.nn_bilinear_works()
  local nn = ember.nn
  ember.manual_seed(1)
  local m = nn.Bilinear(3, 4, 2)
  check_shape(m.weight, { 2, 3, 4 })
  local x1, x2 = ember.randn(5, 3), ember.randn(5, 4)
  local y = m(x1, x2)
  check_shape(y, { 5, 2 })
  -- y[n, o] = x1[n] . A[o] . x2[n] + b[o]
  local a = m.weight:detach()
  for n = 1, 5 do
    for o = 1, 2 do
      local v = (x1[n]:unsqueeze(1):matmul(a[o]):matmul(x2[n]:unsqueeze(2))):item() + m.bias[o]:item()
      check_near(y[n][o]:item(), v, 1e-5)
    end
  end
  y:sum():backward()
  check_shape(m.weight.grad, { 2, 3, 4 })
  check_shape(m.bias.grad, { 2 })
end

return T
