-- test_linalg.lua -- the linalg family (products, einsum, norms,
-- matrix_power): values against PyTorch 1.13 (the expected numbers were
-- computed with torch from the same inputs), dtypes, shapes, edge cases,
-- gradients through the composites, and the errors.
local T = {}
local LA = ember.linalg

-- 1..n in the given shape (int64), as torch.arange(1, n + 1).reshape(...)
local function I(...)
  local n = 1
  for _, s in ipairs({ ... }) do n = n * s end
  return ember.arange(1, n + 1):reshape(...)
end
local x = I(2, 3):float() - 3.5

local function expect(t, want, dtype, shape, tol)
  check_eq(t.dtype, dtype, "dtype")
  check_shape(t, shape)
  check_tensor(t, want, tol > 0 and tol or nil)
end

function T.values_bmm()
  expect(ember.bmm(I(2,2,3), I(2,3,2)), {{{22, 28}, {49, 64}}, {{220, 244}, {301, 334}}}, "int64", {2, 2, 2}, 0)
  expect(ember.bmm(I(2,2,3):float(), I(2,2,3):float():transpose(2,3)), {{{14.0, 32.0}, {32.0, 77.0}}, {{194.0, 266.0}, {266.0, 365.0}}}, "float32", {2, 2, 2}, 1e-05)
  expect(ember.bmm(I(2,2,3):double():transpose(2,3), I(2,2,3):double()), {{{17.0, 22.0, 27.0}, {22.0, 29.0, 36.0}, {27.0, 36.0, 45.0}}, {{149.0, 166.0, 183.0}, {166.0, 185.0, 204.0}, {183.0, 204.0, 225.0}}}, "float64", {2, 3, 3}, 1e-10)
  expect(ember.bmm(I(2,2,3):to('bfloat16'), I(2,3,2):to('bfloat16')), {{{22.0, 28.0}, {49.0, 64.0}}, {{220.0, 244.0}, {300.0, 334.0}}}, "bfloat16", {2, 2, 2}, 0.01)
  expect(ember.bmm(I(2,2,3):to('int32'), I(2,3,2):to('int32')), {{{22, 28}, {49, 64}}, {{220, 244}, {301, 334}}}, "int32", {2, 2, 2}, 0)
  expect(ember.bmm(I(2,2,3):to('uint8'), I(2,3,2):to('uint8')), {{{22, 28}, {49, 64}}, {{220, 244}, {45, 78}}}, "uint8", {2, 2, 2}, 0)
  expect(ember.bmm(ember.zeros(2,3,0), ember.zeros(2,0,2)), {{{0.0, 0.0}, {0.0, 0.0}, {0.0, 0.0}}, {{0.0, 0.0}, {0.0, 0.0}, {0.0, 0.0}}}, "float32", {2, 3, 2}, 1e-05)
  expect(ember.bmm(ember.zeros(2,0,3, {dtype='bool'}), ember.zeros(2,3,2, {dtype='bool'})), {{}, {}}, "bool", {2, 0, 2}, 0)
end

function T.values_dot()
  expect(ember.dot(I(3), I(3)), 14, "int64", {}, 0)
  expect(I(6):float()[{{1,6,2}}]:dot(I(3):float()), 22.0, "float32", {}, 1e-05)
  expect(ember.dot(ember.zeros(0), ember.zeros(0)), 0.0, "float32", {}, 1e-05)
  expect(ember.dot(I(3):to('bfloat16'), I(3):to('bfloat16')), 14.0, "bfloat16", {}, 0.01)
  expect(ember.vdot(I(3):double(), I(3):double()), 14.0, "float64", {}, 1e-10)
  expect(ember.dot(ember.tensor({1e30, 1e30}), ember.tensor({1e10, 1e10})), math.huge, "float32", {}, 1e-05)
end

function T.values_mv()
  expect(ember.mv(I(2,3), I(3)), {14, 32}, "int64", {2}, 0)
  expect(I(3,2):float():t():mv(I(3):float()), {22.0, 28.0}, "float32", {2}, 1e-05)
  expect(ember.mv(I(2,3):float(), I(3):float():expand(3)), {14.0, 32.0}, "float32", {2}, 1e-05)
  expect(ember.mv(ember.zeros(2,0), ember.zeros(0)), {0.0, 0.0}, "float32", {2}, 1e-05)
end

function T.values_outer()
  expect(ember.outer(I(2), I(3):float()), {{1.0, 2.0, 3.0}, {2.0, 4.0, 6.0}}, "float32", {2, 3}, 1e-05)
  expect(ember.outer(I(2):bool(), ember.tensor({true, false})), {{true, false}, {true, false}}, "bool", {2, 2}, 0)
  expect(I(2):ger(I(3)), {{1, 2, 3}, {2, 4, 6}}, "int64", {2, 3}, 0)
  expect(ember.outer(ember.zeros(0), I(3)), {}, "float32", {0, 3}, 1e-05)
end

function T.values_matmul()
  expect(ember.matmul(I(3):float(), I(3):float()), 14.0, "float32", {}, 1e-05)
  expect(ember.matmul(I(3):float(), I(3,2):float()), {22.0, 28.0}, "float32", {2}, 1e-05)
  expect(ember.matmul(I(2,3):float(), I(3):float()), {14.0, 32.0}, "float32", {2}, 1e-05)
  expect(ember.matmul(I(2,1,2,3):float(), I(3,3,2):float()), {{{{22.0, 28.0}, {49.0, 64.0}}, {{58.0, 64.0}, {139.0, 154.0}}, {{94.0, 100.0}, {229.0, 244.0}}}, {{{76.0, 100.0}, {103.0, 136.0}}, {{220.0, 244.0}, {301.0, 334.0}}, {{364.0, 388.0}, {499.0, 532.0}}}}, "float32", {2, 3, 2, 2}, 1e-05)
  expect(ember.matmul(I(3):float(), I(2,3,2):float()), {{22.0, 28.0}, {58.0, 64.0}}, "float32", {2, 2}, 1e-05)
  expect(ember.matmul(I(2,2,3):float(), I(3):float()), {{14.0, 32.0}, {50.0, 68.0}}, "float32", {2, 2}, 1e-05)
  expect(ember.matmul(I(2,3), I(2,3,2)), {{{22, 28}, {49, 64}}, {{58, 64}, {139, 154}}}, "int64", {2, 2, 2}, 0)
end

function T.values_addmv()
  expect(ember.addmv(I(2), I(2,3), I(3), {beta=0.5, alpha=2.7}), {28, 64}, "int64", {2}, 0)
  expect(ember.addmv(ember.tensor({0/0, 1}), I(2,3):float(), I(3):float(), {beta=0}), {14.0, 32.0}, "float32", {2}, 1e-05)
  expect(ember.tensor(1.5):addmv(I(2,3):float(), I(3):float(), {alpha=-1}), {-12.5, -30.5}, "float32", {2}, 1e-05)
  expect(ember.addmv(I(2):float(), I(2,3), I(3)), {15, 34}, "int64", {2}, 0)
  expect(ember.addmv(I(2):float(), I(2,3):float(), I(3):float(), {alpha=0}), {1.0, 2.0}, "float32", {2}, 1e-05)
end

function T.values_baddbmm()
  expect(ember.baddbmm(I(2,2,2):float(), I(2,2,3):float(), I(2,3,2):float(), {beta=0.5, alpha=2}), {{{44.5, 57.0}, {99.5, 130.0}}, {{442.5, 491.0}, {605.5, 672.0}}}, "float32", {2, 2, 2}, 1e-05)
  expect(I(2):float():baddbmm(I(2,2,3):float(), I(2,3,2):float()), {{{23.0, 30.0}, {50.0, 66.0}}, {{221.0, 246.0}, {302.0, 336.0}}}, "float32", {2, 2, 2}, 1e-05)
  expect(ember.baddbmm(I(2,2,2), I(2,2,3), I(2,3,2), {beta=0.5}), {{{22, 28}, {49, 64}}, {{220, 244}, {301, 334}}}, "int64", {2, 2, 2}, 0)
end

function T.values_addbmm()
  expect(ember.addbmm(I(2,2):float(), I(2,2,3):float(), I(2,3,2):float()), {{243.0, 274.0}, {353.0, 402.0}}, "float32", {2, 2}, 1e-05)
  expect(I(2):float():addbmm(I(2,2,3):float(), I(2,3,2):float(), {beta=2, alpha=3}), {{728.0, 820.0}, {1052.0, 1198.0}}, "float32", {2, 2}, 1e-05)
  expect(ember.addbmm(I(2,2), I(2,2,3), I(2,3,2), {alpha=1.5}), {{243, 274}, {353, 402}}, "int64", {2, 2}, 0)
  expect(ember.addbmm(I(2,2):float(), ember.zeros(0,2,3), ember.zeros(0,3,2)), {{1.0, 2.0}, {3.0, 4.0}}, "float32", {2, 2}, 1e-05)
end

function T.values_kron()
  expect(ember.kron(I(2,2), I(2,3)), {{1, 2, 3, 2, 4, 6}, {4, 5, 6, 8, 10, 12}, {3, 6, 9, 4, 8, 12}, {12, 15, 18, 16, 20, 24}}, "int64", {4, 6}, 0)
  expect(ember.kron(I(2), I(2,3):float()), {{1.0, 2.0, 3.0, 2.0, 4.0, 6.0}, {4.0, 5.0, 6.0, 8.0, 10.0, 12.0}}, "float32", {2, 6}, 1e-05)
  expect(ember.kron(ember.tensor(2), I(3)), {2, 4, 6}, "int64", {3}, 0)
  expect(I(2):bool():kron(I(2):bool()), {true, true, true, true}, "bool", {4}, 0)
  expect(ember.kron(ember.zeros(0,2), I(2):float()), {}, "float32", {0, 4}, 1e-05)
end

function T.values_cross()
  expect(ember.cross(I(2,3):float(), (I(2,3)*I(2,3)):float()), {{6.0, -6.0, 2.0}, {30.0, -48.0, 20.0}}, "float32", {2, 3}, 1e-05)
  expect(ember.cross(I(3,2), (I(3,2)*I(3,2))), {{30, 48}, {-20, -48}, {6, 16}}, "int64", {3, 2}, 0)
  expect(I(3,3):float():cross(I(3,3):float():t(), 2), {{2.0, -4.0, 2.0}, {10.0, -20.0, 10.0}, {18.0, -36.0, 18.0}}, "float32", {3, 3}, 1e-05)
  expect(ember.cross(I(2,3,1), I(1,3,4)), {{{3, 2, 1, 0}, {-6, -4, -2, 0}, {3, 2, 1, 0}}, {{15, 14, 13, 12}, {-30, -28, -26, -24}, {15, 14, 13, 12}}}, "int64", {2, 3, 4}, 0)
  expect(ember.linalg.cross(I(3,3):float(), I(3,3):float():t()), {{2.0, -4.0, 2.0}, {10.0, -20.0, 10.0}, {18.0, -36.0, 18.0}}, "float32", {3, 3}, 1e-05)
  expect(ember.linalg.cross(I(3,3):double(), I(3,3):double():t(), {dim=1}), {{-2.0, -10.0, -18.0}, {4.0, 20.0, 36.0}, {-2.0, -10.0, -18.0}}, "float64", {3, 3}, 1e-10)
end

function T.values_tensordot()
  expect(ember.tensordot(I(2,3,4):float(), I(3,4,5):float()), {{2938.0, 3016.0, 3094.0, 3172.0, 3250.0}, {7042.0, 7264.0, 7486.0, 7708.0, 7930.0}}, "float32", {2, 5}, 1e-05)
  expect(ember.tensordot(I(2,3,4):float(), I(4,3,5):float(), {2,3}, {2,1}), {{2608.0, 2686.0, 2764.0, 2842.0, 2920.0}, {6712.0, 6934.0, 7156.0, 7378.0, 7600.0}}, "float32", {2, 5}, 1e-05)
  expect(ember.tensordot(I(2,3):float(), I(2,3):float(), 0), {{{{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, {{2.0, 4.0, 6.0}, {8.0, 10.0, 12.0}}, {{3.0, 6.0, 9.0}, {12.0, 15.0, 18.0}}}, {{{4.0, 8.0, 12.0}, {16.0, 20.0, 24.0}}, {{5.0, 10.0, 15.0}, {20.0, 25.0, 30.0}}, {{6.0, 12.0, 18.0}, {24.0, 30.0, 36.0}}}}, "float32", {2, 3, 2, 3}, 1e-05)
  expect(ember.tensordot(I(2,3), I(3,2), 1), {{22, 28}, {49, 64}}, "int64", {2, 2}, 0)
  expect(ember.tensordot(I(2,3):float(), I(3,2):float(), {-1}, {1}), {{22.0, 28.0}, {49.0, 64.0}}, "float32", {2, 2}, 1e-05)
end

function T.values_einsum()
  expect(ember.einsum('bij,bjk->bik', {I(2,2,3), I(2,3,2)}), {{{22, 28}, {49, 64}}, {{220, 244}, {301, 334}}}, "int64", {2, 2, 2}, 0)
  expect(ember.einsum('ij->i', {I(2,3):bool()}), {3, 3}, "int64", {2}, 0)
  expect(ember.einsum('ij->i', {I(2,3):to('int32')}), {6, 15}, "int64", {2}, 0)
  expect(ember.einsum('ij,j->i', {I(2,3):to('int32'), I(3):to('int32')}), {14, 32}, "int32", {2}, 0)
  expect(ember.einsum('ii->i', {I(3,3)}), {1, 5, 9}, "int64", {3}, 0)
  expect(ember.einsum('ii', {I(3,3):float()}), 15.0, "float32", {}, 1e-05)
  expect(ember.einsum('ji', {I(3,2)}), {{1, 3, 5}, {2, 4, 6}}, "int64", {2, 3}, 0)
  expect(ember.einsum('...ij->...ji', {I(2,3,2)}), {{{1, 3, 5}, {2, 4, 6}}, {{7, 9, 11}, {8, 10, 12}}}, "int64", {2, 2, 3}, 0)
  expect(ember.einsum('...ij->ij', {I(2,3,2)}), {{8, 10}, {12, 14}, {16, 18}}, "int64", {3, 2}, 0)
  expect(ember.einsum('...i,...i', {I(2,3), I(3)}), {14, 32}, "int64", {2}, 0)
  expect(ember.einsum('i,i->i', {I(1), I(3)}), {1, 2, 3}, "int64", {3}, 0)
  expect(ember.einsum(' i j -> j ', {I(2,3)}), {5, 7, 9}, "int64", {3}, 0)
  expect(ember.einsum('Ab,ba', {I(2,3), I(3,2)}), {{22, 28}, {49, 64}}, "int64", {2, 2}, 0)
  expect(ember.einsum('aB,Ba', {I(2,3), I(3,2)}), 86, "int64", {}, 0)
  expect(ember.einsum('iij->j', {I(2,2,4):float()}), {14.0, 16.0, 18.0, 20.0}, "float32", {4}, 1e-05)
  expect(ember.einsum('i,j', {I(2), I(3)}), {{1, 2, 3}, {2, 4, 6}}, "int64", {2, 3}, 0)
  expect(ember.einsum('ij,jk,kl->li', {I(2,3):double(), I(3,2):double(), I(2,2):double()}), {{106.0, 241.0}, {156.0, 354.0}}, "float64", {2, 2}, 1e-10)
  expect(ember.einsum('bij,bkj->bik', {I(2,2,3):float(), I(1,4,3):float()}), {{{14.0, 32.0, 50.0, 68.0}, {32.0, 77.0, 122.0, 167.0}}, {{50.0, 122.0, 194.0, 266.0}, {68.0, 167.0, 266.0, 365.0}}}, "float32", {2, 2, 4}, 1e-05)
  expect(ember.einsum('i,i', {ember.zeros(0), ember.zeros(0)}), 0.0, "float32", {}, 1e-05)
  expect(ember.einsum('', {ember.tensor(3.0)}), 3.0, "float32", {}, 1e-05)
  expect(ember.einsum(',->', {ember.tensor(3.0), ember.tensor(2.0)}), 6.0, "float32", {}, 1e-05)
  expect(ember.einsum('ij,ij->ij', {I(2,3):float(), I(2,3):float():t():contiguous():t()}), {{1.0, 4.0, 9.0}, {16.0, 25.0, 36.0}}, "float32", {2, 3}, 1e-05)
end

function T.values_vector_norm()
  expect(LA.vector_norm(x), 4.183300018310547, "float32", {}, 1e-05)
  expect(LA.vector_norm(x, 1, 2), {4.5, 4.5}, "float32", {2}, 1e-05)
  expect(LA.vector_norm(x, 0), 6.0, "float32", {}, 1e-05)
  expect(LA.vector_norm(x, math.huge, {1, 2}, true), {{2.5}}, "float32", {1, 1}, 1e-05)
  expect(LA.vector_norm(x, -math.huge, 1), {0.5, 1.5, 0.5}, "float32", {3}, 1e-05)
  expect(LA.vector_norm(x, 3.5, -1), {2.615267515182495, 2.615267515182495}, "float32", {2}, 1e-05)
  expect(LA.vector_norm(x, -1, -1), {0.32608696818351746, 0.32608693838119507}, "float32", {2}, 1e-05)
  expect(LA.vector_norm(x, 2, nil, false, {dtype='float64'}), 4.183300132670378, "float64", {}, 1e-10)
  expect(LA.vector_norm(x, 2, {}), 4.183300018310547, "float32", {}, 1e-05)
  expect(LA.vector_norm(ember.zeros(0,3), math.huge, 2), {}, "float32", {0}, 1e-05)
  expect(LA.vector_norm(ember.zeros(0,3), 2, 1), {0.0, 0.0, 0.0}, "float32", {3}, 1e-05)
  expect(LA.vector_norm(ember.tensor(-2.0)), 2.0, "float32", {}, 1e-05)
  expect(LA.vector_norm(x:to('float16')), 4.18359375, "float16", {}, 0.002)
  expect(LA.vector_norm(x:t(), 1, 1), {4.5, 4.5}, "float32", {2}, 1e-05)
end

function T.values_matrix_norm()
  expect(LA.matrix_norm(x), 4.183300018310547, "float32", {}, 1e-05)
  expect(LA.matrix_norm(x, 1), 3.0, "float32", {}, 1e-05)
  expect(LA.matrix_norm(x, -1), 3.0, "float32", {}, 1e-05)
  expect(LA.matrix_norm(x, math.huge), 4.5, "float32", {}, 1e-05)
  expect(LA.matrix_norm(x, -math.huge, {1, 2}, true), {{4.5}}, "float32", {1, 1}, 1e-05)
  expect(LA.matrix_norm(x, 1, {2, 1}), 4.5, "float32", {}, 1e-05)
  expect(LA.matrix_norm(I(2,2,3):float(), math.huge, {1, 3}), {24.0, 33.0}, "float32", {2}, 1e-05)
  expect(LA.matrix_norm(I(2,2,3):float(), math.huge, {1, 3}, true), {{{24.0}, {33.0}}}, "float32", {1, 2, 1}, 1e-05)
  expect(LA.matrix_norm(x, 'fro', {1, 2}, false, {dtype='float64'}), 4.183300132670378, "float64", {}, 1e-10)
  expect(LA.matrix_norm(ember.zeros(0,3), 1), 0.0, "float32", {}, 1e-05)
  expect(LA.matrix_norm(ember.zeros(0,3)), 0.0, "float32", {}, 1e-05)
end

function T.values_norm()
  expect(LA.norm(x), 4.183300018310547, "float32", {}, 1e-05)
  expect(LA.norm(I(2,2,2):float()), 14.282856941223145, "float32", {}, 1e-05)
  expect(LA.norm(I(2,2,2):float(), 3, 2), {{3.0365891456604004, 4.160167694091797}, {7.763936519622803, 8.99588394165039}}, "float32", {2, 2}, 1e-05)
  expect(LA.norm(x, 1), 3.0, "float32", {}, 1e-05)
  expect(LA.norm(x, 'fro'), 4.183300018310547, "float32", {}, 1e-05)
  expect(LA.norm(I(3):float(), 3), 3.301927328109741, "float32", {}, 1e-05)
  expect(LA.norm(x, nil, {1, 2}), 4.183300018310547, "float32", {}, 1e-05)
  expect(LA.norm(x, nil, 1), {2.5495097637176514, 2.1213202476501465, 2.5495097637176514}, "float32", {3}, 1e-05)
  expect(LA.norm(x, math.huge, {2, 1}, true), {{3.0}}, "float32", {1, 1}, 1e-05)
end

function T.matrix_power_even_powers()
  local a = ember.tensor({ { 0.6, -0.3 }, { 0.2, 0.9 } }, { dtype = "float64" })
  local p = a
  for n = 2, 8 do
    p = p:matmul(a)
    check_tensor(a:matrix_power(n), p:tolist(), 1e-12, "n = " .. n)
  end
end

function T.values_matrix_power()
  expect(LA.matrix_power(I(2,2), 3), {{37, 54}, {81, 118}}, "int64", {2, 2}, 0)
  expect(LA.matrix_power(I(2,2):float(), 0), {{1.0, 0.0}, {0.0, 1.0}}, "float32", {2, 2}, 1e-05)
  expect(ember.matrix_power(I(2,2,2):float(), 5), {{{1069.0, 1558.0}, {2337.0, 3406.0}}, {{152393.0, 177474.0}, {207053.0, 241130.0}}}, "float32", {2, 2, 2}, 1e-05)
  expect(LA.matrix_power(I(2,2):bool(), 0), {{true, false}, {false, true}}, "bool", {2, 2}, 0)
  expect(I(2,2):matrix_power(1), {{1, 2}, {3, 4}}, "int64", {2, 2}, 0)
  expect(ember.matrix_power(ember.zeros(2,0,0), 0), {{}, {}}, "float32", {2, 0, 0}, 1e-05)
end
-- ---- edge cases and autograd ----

function T.bmm_large_and_noncontiguous_batches()
  -- every batch through BLAS, also when the batch stride is not the matrix size
  local a = ember.randn(5, 7, 4, { dtype = "float64" })
  local b = ember.randn(4, 5, 6, { dtype = "float64" }):permute(2, 1, 3)
  local r = ember.bmm(a, b)
  for i = 1, 5 do check_tensor(r[i], ember.mm(a[i], b[i]):tolist(), 1e-12) end
end

function T.half_products_compute_in_float32()
  -- PyTorch 1.13 has no CPU float16 bmm/mv (bfloat16 only); ember computes both in float32
  local a, b = I(2, 2, 3):float() / 4, I(2, 3, 2):float() / 8
  for _, dt in ipairs({ "float16", "bfloat16" }) do
    local r = ember.bmm(a:to(dt), b:to(dt))
    check_eq(r.dtype, dt)
    check_tensor(r, ember.bmm(a, b):tolist(), 1e-2)
    check_tensor(ember.mv(a[1]:to(dt), b[1]:select(2, 1):to(dt)), ember.mv(a[1], b[1]:select(2, 1)):tolist(), 1e-2)
    check_tensor(ember.dot(a[1][1]:to(dt), a[2][2]:to(dt)), ember.dot(a[1][1], a[2][2]):item(), 1e-2)
  end
end

function T.products_of_integers_wrap()
  local big = ember.tensor({ 2 ^ 62 | 0, 2 }, { dtype = "int64" })
  check_eq(ember.dot(big, ember.tensor({ 4, 1 })):item(), 2) -- 2^64 wraps to 0, plus 2
end

function T.matmul_gradients_reduce_broadcast_batches()
  local a = ember.randn(2, 1, 2, 3, { dtype = "float64", requires_grad = true })
  local b = ember.randn(3, 3, 2, { dtype = "float64", requires_grad = true })
  ember.matmul(a, b):sum():backward()
  check_shape(a.grad, { 2, 1, 2, 3 })
  check_shape(b.grad, { 3, 3, 2 })
  -- d/da of sum(a @ b) is the row sums of b summed over the broadcast batch
  local want = b:detach():sum({ 1, 3 })
  check_tensor(a.grad[1][1][1], want:tolist(), 1e-12)
  local v = ember.randn(3, { dtype = "float64", requires_grad = true })
  ember.matmul(v, b):sum():backward()
  check_shape(v.grad, { 3 })
  check_tensor(v.grad, b:detach():sum({ 1, 3 }):tolist(), 1e-12)
end

function T.matrix_power_zero_keeps_history()
  local a = ember.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }, { requires_grad = true })
  local r = LA.matrix_power(a, 0)
  check(r.requires_grad)
  r:sum():backward()
  check_tensor(a.grad, { { 0, 0 }, { 0, 0 } })
  -- n = 1 is a copy, not self
  local c = a:detach():matrix_power(1)
  c[1][1] = 9
  check_eq(a[1][1]:item(), 1)
end

function T.einsum_bmm_pattern_is_one_bmm_of_views()
  -- 'bij,bjk->bik' needs no copy of either operand: the result equals bmm
  local a, b = ember.randn(3, 4, 5), ember.randn(3, 5, 2)
  check_tensor(ember.einsum("bij,bjk->bik", { a, b }), ember.bmm(a, b):tolist(), 1e-6)
end

function T.einsum_lone_operand_is_a_view()
  local a = I(2, 3):float()
  local v = ember.einsum("ij->ji", { a })
  v[1][2] = 100
  check_eq(a[2][1]:item(), 100)
end

function T.norm_gradients()
  local a = ember.tensor({ { 3.0, -4.0 }, { 1.0, 2.0 } }, { requires_grad = true })
  LA.vector_norm(a, 2, 2):sum():backward()
  check_tensor(a.grad, { { 0.6, -0.8 }, { 1 / math.sqrt(5), 2 / math.sqrt(5) } })
  a.grad = nil
  LA.matrix_norm(a, 1):backward() -- column abs-sums 4 and 6: the second column
  check_tensor(a.grad, { { 0, -1 }, { 0, 1 } })
end

function T.einsum_follows_pytorch_dtypes()
  -- nothing to contract: a broadcast mul, which promotes and takes bool
  local r = ember.einsum("i,j", { I(2), I(3):float() })
  check_eq(r.dtype, "float32")
  check_tensor(r, { { 1, 2, 3 }, { 2, 4, 6 } })
  check_tensor(ember.einsum("ij,j->ij", { I(2, 2):bool(), ember.tensor({ true, false }) }),
    { { true, false }, { true, false } })
  -- labels summed out of one operand promote integers, then bmm
  check_eq(ember.einsum("Bk,BjA->A", { ember.ones(3, 2, { dtype = "int32" }), ember.ones(3, 2, 4, { dtype = "int32" }) })
    .dtype, "int64")
  -- a size-1 contracted label is squeezed, not summed: the dtype stays
  check_eq(ember.einsum("ij,j->i", { I(2, 1):to("int8"), I(1):to("int8") }).dtype, "int8")
  -- an empty contraction has history, as in PyTorch 1.13
  local e = ember.zeros(2, 0, { requires_grad = true })
  local z = ember.einsum("ij,j->i", { e, ember.zeros(0) })
  check(z.requires_grad)
  check_tensor(z, { 0, 0 })
end

function T.matrix_power_association()
  -- (a @ a) @ a for n = 3: where inf * 0 lands, as in PyTorch
  local a = ember.tensor({ { 1.0, 1 / 0 }, { 1.5, -2.25 } })
  check_tensor(a:matrix_power(3), { { 0 / 0, 0 / 0 }, { 1 / 0, -1 / 0 } })
end

function T.add_products_keep_history_for_zero_scales()
  local s = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local r = ember.addmv(s, I(2, 3):float(), I(3):float(), { beta = 0 })
  check(r.requires_grad)
  r:sum():backward()
  check_tensor(s.grad, { 0, 0 })
  local m = I(2, 3):float():requires_grad_()
  local r2 = ember.addmv(s:detach(), m, I(3):float(), { alpha = 0 })
  check(r2.requires_grad)
  check_tensor(r2, { 1, 2 })
end

function T.matmul_every_case_gradchecks()
  local ag = ember.autograd
  local function d(...) return ember.randn({ ... }, { dtype = "float64" }) end
  ember.manual_seed(3)
  local cases = {
    { d(3), d(3) }, { d(2, 3), d(3) }, { d(3), d(3, 2) }, { d(2, 1, 2, 3), d(3, 3, 2) },
    { d(3), d(2, 3, 2) }, { d(2, 2, 3), d(3) }, { d(2, 3), d(4, 3, 2) }, { d(1, 2, 3), d(2, 1, 3, 2) },
  }
  for i, c in ipairs(cases) do
    check(ag.gradcheck(function(a, b) return a:matmul(b) end, c), "case " .. i)
    check(ag.gradgradcheck(function(a, b) return a:matmul(b) end, c), "case " .. i .. " (gradgrad)")
  end
end

function T.results_are_not_views()
  -- kron and matrix_norm return tensors of their own (PyTorch's do), so an
  -- in-place write moves their history; a write in grad mode to one made
  -- under no_grad is allowed
  local a = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local r = ember.kron(a, ember.ones(2))
  r:retain_grad()
  local f = r:fill_(0.5)
  f:sum():backward()
  check_tensor(r.grad, { 1, 1, 1, 1 })
  local n
  ember.no_grad(function() n = LA.matrix_norm(ember.ones(2, 2, 2), math.huge, { 2, 3 }) end)
  n[1] = ember.tensor(3.0, { requires_grad = true })
  check(n.requires_grad)
end

function T.vector_norm_inf_gradient_signed_zeros()
  -- PyTorch: sign(x) * (grad * mask), so -0 at a negative x off the max
  local x = ember.tensor({ { 1.156 }, { -0.75 } }, { requires_grad = true })
  local g = ember.autograd.grad({ LA.vector_norm(x, math.huge) }, { x })[1]
  check_tensor(x:detach() / g, { { 1.156 }, { 1 / 0 } })
end

-- ---- errors: the op, the argument, the problem (both shapes on a mismatch) ----

function T.product_errors()
  check_error(function() return ember.bmm(I(2, 3), I(2, 3, 2)) end, "bmm", "self", "3-d", "2-d")
  check_error(function() return ember.bmm(I(2, 2, 3), I(2, 3)) end, "bmm", "mat2", "3-d")
  check_error(function() return ember.bmm(I(2, 2, 3):float(), I(2, 3, 2)) end, "bmm", "dtype", "float32", "int64")
  check_error(function() return ember.bmm(I(2, 2, 3), I(3, 3, 2)) end, "bmm", "{2,2,3}", "{3,3,2}", "batch")
  check_error(function() return ember.bmm(I(2, 2, 3), I(2, 4, 2)) end, "bmm", "{2,2,3}", "{2,4,2}", "3 != 4")
  check_error(function() return ember.bmm(I(2, 2, 3):bool(), I(2, 3, 2):bool()) end, "bmm", "bool")
  check_error(function() return ember.dot(I(1, 3), I(3)) end, "dot", "1-d", "2-d")
  check_error(function() return ember.dot(I(3), I(4)) end, "dot", "3", "4")
  check_error(function() return ember.dot(I(3):float(), I(3)) end, "dot", "float32", "int64")
  check_error(function() return ember.vdot(I(3):bool(), I(3):bool()) end, "vdot", "bool")
  check_error(function() return ember.mv(I(3), I(3)) end, "mv", "self", "2-d")
  check_error(function() return ember.mv(I(2, 3), I(2)) end, "mv", "{2,3}", "{2}", "3 != 2")
  check_error(function() return ember.mv(I(2, 3):float(), I(3)) end, "mv", "float32", "int64")
  check_error(function() return ember.outer(I(2, 1), I(3)) end, "outer", "self", "1-d", "2-d")
  check_error(function() return ember.outer(I(2), ember.tensor(3)) end, "outer", "vec2", "0-d")
  check_error(function() return ember.matmul(I(2, 3), I(2)) end, "matmul", "{2,3}", "{2}")
end

function T.add_product_errors()
  check_error(function() return ember.addmv(I(3), I(2, 3), I(3)) end, "addmv", "self", "{3}", "{2}")
  check_error(function() return ember.addmv(I(2), I(2, 3), I(2)) end, "addmv", "{2,3}", "{2}")
  check_error(function() return ember.addmv(I(2), I(3), I(3)) end, "addmv", "mat", "2-d")
  check_error(function() return ember.addmv(I(2), I(2, 3), I(3):float()) end, "addmv", "int64", "float32")
  check_error(function() return ember.baddbmm(I(3, 2, 2), I(2, 2, 3), I(2, 3, 2)) end, "baddbmm", "self",
    "{3,2,2}", "{2,2,2}")
  check_error(function() return ember.baddbmm(I(2, 2), I(2, 3), I(2, 3, 2)) end, "baddbmm", "batch1", "3-d")
  check_error(function() return ember.addbmm(I(2, 2, 2), I(2, 2, 3), I(2, 3, 2)) end, "addbmm", "self",
    "{2,2,2}", "{2,2}")
  check_error(function() return ember.addbmm(I(2, 2), I(2, 2, 3), I(3, 3, 2)) end, "addbmm", "batch",
    "{2,2,3}", "{3,3,2}")
end

function T.cross_tensordot_errors()
  check_error(function() return ember.cross(I(2, 2):float(), I(2, 2):float()) end, "cross", "size 3", "{2,2}")
  check_error(function() return ember.cross(I(2, 3):float(), I(2, 3):float(), 1) end, "cross", "dim 1", "3")
  check_error(function() return ember.cross(I(3), I(1, 3)) end, "cross", "number of dims", "{3}", "{1,3}")
  check_error(function() return ember.cross(I(3), I(3):float()) end, "cross", "int64", "float32")
  check_error(function() return ember.cross(I(3):bool(), I(3):bool()) end, "cross", "bool")
  check_error(function() return LA.cross(I(3, 2):float(), I(3, 2):float()) end, "linalg.cross", "dim 2", "size 3")
  check_error(function() return LA.cross(I(2, 3), I(3, 3)) end, "linalg.cross")
  check_error(function() return ember.tensordot(I(2, 3), I(2, 3), -1) end, "tensordot", "dims", "-1")
  check_error(function() return ember.tensordot(I(2, 3), I(2, 3), 3) end, "tensordot", "dims", "3")
  check_error(function() return ember.tensordot(I(2, 3), I(4, 3), { 1 }, { 1 }) end, "tensordot", "size 2",
    "size 4", "dim 1")
  check_error(function() return ember.tensordot(I(2, 3), I(2, 3), { 1 }, { 1, 2 }) end, "tensordot", "same length")
  check_error(function() return ember.tensordot(I(2, 3), I(3, 3), { 2, 2 }, { 1, 2 }) end, "tensordot", "dim 2",
    "twice")
  check_error(function() return ember.tensordot(I(2, 3), I(2, 3), { 3 }, { 1 }) end, "tensordot", "dim 3")
  check_error(function() return ember.tensordot(I(2, 3):float(), I(3, 2), 1) end, "tensordot", "float32", "int64")
end

function T.einsum_errors()
  check_error(function() return ember.einsum("ij,jk", { I(2, 3), I(2, 2) }) end, "einsum", "subscript j", "size 2",
    "size 3")
  check_error(function() return ember.einsum("ij,jk->ik", { I(2, 3), I(3, 2), I(2) }) end, "einsum",
    "2 operands, but 3 were given")
  check_error(function() return ember.einsum("ij,jk->ik", { I(2, 3) }) end, "einsum", "more operands than the 1 given")
  check_error(function() return ember.einsum("ij->k", { I(2, 3) }) end, "einsum", "output subscript k")
  check_error(function() return ember.einsum("ij->ii", { I(2, 3) }) end, "einsum", "more than once")
  check_error(function() return ember.einsum("ij", { I(2, 3, 4) }) end, "einsum", "2 subscripts", "3 dims")
  check_error(function() return ember.einsum("i1", { I(3) }) end, "einsum", "invalid subscript '1'")
  check_error(function() return ember.einsum("i..j", { I(3) }) end, "einsum", "ellipsis")
  check_error(function() return ember.einsum("...i...", { I(3) }) end, "einsum", "more than one ellipsis")
  check_error(function() return ember.einsum("i-j", { I(3) }) end, "einsum", "->")
  check_error(function() return ember.einsum("i,i", { I(3), I(3):float() }) end, "einsum", "bmm", "dtype",
    "int64", "float32")
  check_error(function() return ember.einsum("i", {}) end, "einsum", "at least one operand")
  check_error(function() return ember.einsum(3, { I(3) }) end, "einsum", "equation", "string")
  check_error(function() return ember.einsum("ij", { I(3), 2 }) end, "einsum", "tensors", "element 2")
  check_error(function() return ember.einsum("ij,jk->ik", { I(2, 3):bool(), I(3, 2):bool() }) end, "bmm", "bool")
end

function T.norm_errors()
  check_error(function() return LA.vector_norm(I(2, 3)) end, "linalg.vector_norm", "floating", "int64")
  check_error(function() return LA.vector_norm(x, 2, nil, false, { dtype = "int64" }) end, "linalg.vector_norm",
    "dtype", "int64")
  check_error(function() return LA.vector_norm(x:double(), 2, nil, false, { dtype = "float32" }) end,
    "linalg.vector_norm", "narrowing", "float64", "float32")
  check_error(function() return LA.vector_norm(ember.zeros(0, 3), math.huge) end, "linalg.vector_norm", "inf",
    "empty")
  check_error(function() return LA.vector_norm(ember.zeros(0, 3), -1, 1) end, "linalg.vector_norm", "empty")
  check_error(function() return LA.vector_norm(x, 2, 3) end, "linalg.vector_norm", "dim 3")
  check_error(function() return LA.vector_norm(x, "fro") end, "vector_norm", "ord")
  check_error(function() return LA.matrix_norm(I(3):float()) end, "linalg.matrix_norm", "at least 2 dims")
  check_error(function() return LA.matrix_norm(I(2, 3)) end, "linalg.matrix_norm", "floating", "int64")
  check_error(function() return LA.matrix_norm(x, 3) end, "linalg.matrix_norm", "ord 3", "not supported")
  check_error(function() return LA.matrix_norm(x, "abc") end, "matrix_norm", "abc")
  check_error(function() return LA.matrix_norm(x, 1, { 1, 1 }) end, "linalg.matrix_norm", "dim 1 twice")
  check_error(function() return LA.matrix_norm(x, 1, { 1 }) end, "linalg.matrix_norm", "2 dims")
  check_error(function() return LA.matrix_norm(ember.zeros(3, 0), 1) end, "linalg.matrix_norm", "non-empty")
  check_error(function() return LA.norm(I(2, 2, 2):float(), 2) end, "linalg.norm", "1-d or 2-d", "3-d")
  check_error(function() return LA.norm(x, nil, { 1, 2, 2 }) end, "linalg.norm", "1 or 2 dims")
  check_error(function() return LA.norm(x, 3) end, "linalg.norm", "ord 3")
  check_error(function() return LA.norm(I(3):float(), "fro") end, "linalg.norm", "2-d", "1-d")
  check_error(function() return LA.norm(x, "fro", 1) end, "linalg.norm", "2 dims")
  check_error(function() return LA.norm(I(2, 3)) end, "linalg.norm", "floating", "int64")
end

-- the singular-value norms and negative powers (values from PyTorch 1.13)
function T.svd_norms_and_negative_powers()
  local A = ember.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } })
  check_near(LA.matrix_norm(A, 2):item(), 5.4649857, 1e-5)
  check_near(LA.matrix_norm(A, -2):item(), 0.3659662, 1e-5)
  check_near(LA.matrix_norm(A, "nuc"):item(), 5.8309519, 1e-5)
  check_near(LA.norm(A, 2):item(), 5.4649857, 1e-5)
  check_near(LA.norm(A, "nuc"):item(), 5.8309519, 1e-5)
  check_tensor(LA.matrix_power(A, -2), { { 5.5, -2.5 }, { -3.75, 1.75 } }, 1e-5)
  check_tensor(A:matrix_power(-1), { { -2.0, 1.0 }, { 1.5, -0.5 } }, 1e-5)
  local r = LA.matrix_norm(ember.ones(2, 3, 4), 2, { 1, 3 }, true)
  check_eq(table.concat(r.shape, ","), "1,3,1")
  check_tensor(r:view(-1), { 2.8284271, 2.8284271, 2.8284271 }, 1e-5)
end

function T.matrix_power_errors()
  check_error(function() return LA.matrix_power(I(2, 3), 2) end, "matrix_power", "square", "{2,3}")
  check_error(function() return LA.matrix_power(I(3), 2) end, "matrix_power", "at least 2 dims")
  check_error(function() return LA.matrix_power(ember.zeros(2, 2), -1) end, "singular")
  check_error(function() return LA.matrix_power(I(2, 2):bool(), 2) end, "matmul", "bool")
end

function T.namespaces_and_help()
  check(LA.norm ~= ember.norm and LA.cross ~= ember.cross)
  check(ember.linalg.linalg_norm == nil and ember.linalg_norm == nil)
  check(LA.matrix_power == ember.matrix_power)
  local function captured(fn) -- help() writes to io.output()
    local name = os.tmpname()
    local f = assert(io.open(name, "w"))
    local old = io.output()
    io.output(f)
    local ok, err = pcall(fn)
    io.output(old)
    f:close()
    f = assert(io.open(name))
    local text = f:read("a")
    f:close()
    os.remove(name)
    if not ok then error(err, 0) end
    return text
  end
  check(captured(function() ember.help("linalg.norm") end):find("torch.linalg.norm", 1, true))
  check(captured(function() ember.help("einsum") end):find("bij,bjk->bik", 1, true))
end

return T
