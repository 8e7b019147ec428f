-- test_lapack.lua -- the LAPACK family (ember.linalg): values against
-- PyTorch 1.13 (computed with torch.linalg on the same inputs), batching,
-- empty and non-contiguous inputs, dtypes, options, and errors.
local T = {}
local L = ember.linalg

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end
local function A3() return f64({ { 2.0, 0.5, -0.3 }, { 0.4, 1.5, 0.2 }, { -0.6, 0.3, 1.8 } }) end
local function S3() -- A3 @ A3^T + I: symmetric positive-definite
  return f64({ { 5.34, 1.49, -1.59 }, { 1.49, 3.45, 0.57 }, { -1.59, 0.57, 4.69 } })
end
local function A32() return A3():narrow(2, 1, 2) end -- 3 x 2, not contiguous
local function eye(n, dt)
  local r = {}
  for i = 1, n do r[i] = {}; for j = 1, n do r[i][j] = i == j and 1.0 or 0.0 end end
  return ember.tensor(r, { dtype = dt or "float64" })
end
local function maxdiff(a, b) return (a - b):abs():max():item() end

-- ---- det, slogdet, inv ----

function T.det_values_aliases_and_dtypes()
  check_near(L.det(A3()):item(), 4.554, 1e-12)
  check_near(A3():det():item(), 4.554, 1e-12)
  check_near(ember.det(A3()):item(), 4.554, 1e-12)
  local d32 = L.det(A3():float())
  check_eq(d32.dtype, "float32")
  check_near(d32:item(), 4.553999900817871, 1e-7)
  -- non-contiguous input (a transpose): det([[1,3],[2,4]]) = -2
  check_near(L.det(f64({ { 1, 2 }, { 3, 4 } }):t()):item(), -2.0, 1e-12)
  check_eq(L.det(f64({ { 1, 2 }, { 2, 4 } })):item(), 0.0) -- singular: 0, no error
end

function T.det_batched_and_empty()
  local b = ember.stack({ A3(), eye(3), A3() * 2 })
  check_tensor(L.det(b), { 4.554, 1.0, 4.554 * 8 }, 1e-12)
  check_shape(L.det(ember.zeros(2, 4, 0, 0, { dtype = "float64" })), { 2, 4 })
  check_tensor(L.det(ember.zeros(2, 0, 0)), { 1.0, 1.0 }) -- the empty product
  check_eq(L.det(ember.zeros(0, 3, 3)).shape[1], 0)
end

function T.slogdet_sign_and_log()
  local s, l = L.slogdet(-A3())
  check_eq(s:item(), -1.0)
  check_near(l:item(), 1.5160059676415478, 1e-12)
  s, l = ember.slogdet(f64({ { 1, 2 }, { 2, 4 } }))
  check_eq(s:item(), 0.0)
  check_eq(l:item(), -math.huge)
  s, l = A3():slogdet()
  check_eq(s:item(), 1.0)
end

function T.inv_values_batched_and_alias()
  local want = { { 0.5797101449275363, -0.21739130434782608, 0.12077294685990336 },
    { -0.18445322793148883, 0.7509881422924901, -0.1141853315766359 },
    { 0.2239789196310935, -0.19762845849802366, 0.6148440931049626 } }
  check_tensor(L.inv(A3()), want, 1e-12)
  check_tensor(ember.inverse(A3()), want, 1e-12)
  check_tensor(A3():inverse(), want, 1e-12)
  check_tensor(L.inv(f64({ { 1, 2 }, { 3, 4 } }):t()), { { -2.0, 1.5 }, { 1.0, -0.5 } }, 1e-12)
  local b = L.inv(ember.stack({ A3(), A3() * 2 }))
  check(maxdiff(b[2] * 2, b[1]) < 1e-12)
  check(maxdiff(A3():matmul(L.inv(A3())), eye(3)) < 1e-12)
  check_shape(L.inv(ember.zeros(3, 0, 0)), { 3, 0, 0 })
  check_eq(L.inv(A3():float()).dtype, "float32")
end

function T.inv_singular_is_an_error()
  check_error(function() L.inv(f64({ { 1, 2 }, { 2, 4 } })) end,
    "linalg.inv: The diagonal element 2 is zero", "singular")
  check_error(function() L.inv(ember.stack({ eye(2), f64({ { 1, 2 }, { 2, 4 } }) })) end,
    "linalg.inv: (Batch element 1): The diagonal element 2 is zero")
end

-- ---- solve ----

function T.solve_vector_matrix_left_and_broadcast()
  local b = f64({ 1.0, 2.0, 3.0 })
  local want = { 0.5072463768115942, 0.9749670619235837, 1.673254281949934 }
  check_tensor(L.solve(A3(), b), want, 1e-12)
  check_shape(L.solve(A3(), b), { 3 })
  -- B shaped like A without its last dim is a batch of vectors
  local bb = L.solve(ember.stack({ A3(), A3() }), ember.stack({ b, b }))
  check_shape(bb, { 2, 3 })
  check_tensor(bb[2], want, 1e-12)
  -- a matrix right-hand side; batch dims broadcast
  local X = L.solve(A3(), f64({ { 1, 0 }, { 2, 1 }, { 3, 0 } }))
  check_shape(X, { 3, 2 })
  check(maxdiff(A3():matmul(X), f64({ { 1, 0 }, { 2, 1 }, { 3, 0 } })) < 1e-12)
  check_shape(L.solve(ember.stack({ A3(), A3() }), f64({ { 1 }, { 2 }, { 3 } })), { 2, 3, 1 })
  check_shape(L.solve(A3(), ember.ones(4, 3, 2, { dtype = "float64" })), { 4, 3, 2 })
  -- X A = B
  check_tensor(L.solve(A3(), f64({ { 1.0, 2.0, 3.0 } }), { left = false }),
    { { 0.8827404479578389, 0.6916996047430832, 1.7369345630215192 } }, 1e-12)
end

function T.solve_errors()
  check_error(function() L.solve(f64({ { 1, 2 }, { 2, 4 } }), f64({ 1, 2 })) end,
    "linalg.solve: The solver failed because the input matrix is singular")
  check_error(function() L.solve(eye(2), f64({ 1, 2, 3 })) end,
    "linalg.solve: incompatible shapes of A and B for the equation AX = B", "{2,2}", "{3}")
  check_error(function() L.solve(eye(2), ember.ones(2)) end,
    "linalg.solve: expected A and B to have the same dtype", "float64", "float32")
  check_error(function() L.solve(eye(2), f64({ 1, 2 }), { left = false }) end,
    "linalg.solve: vector broadcasting of the left hand side is not supported for left=false")
  check_error(function() L.solve(ember.ones(2, 3, { dtype = "float64" }), f64({ 1, 2 })) end,
    "square matrices", "2 by 3")
end

-- ---- cholesky ----

function T.cholesky_lower_upper_batched()
  local Lw = { { 2.3108440016582685, 0.0, 0.0 }, { 0.6447860603877941, 1.741910140142019, 0.0 },
    { -0.6880602926285857, 0.5819196191777234, 1.9692492454039223 } }
  check_tensor(L.cholesky(S3()), Lw, 1e-12)
  local U = L.cholesky(S3(), { upper = true })
  check(maxdiff(U, L.cholesky(S3()):t()) < 1e-12)
  local b = L.cholesky(ember.stack({ S3(), eye(3) * 4 }))
  check_tensor(b[2], { { 2, 0, 0 }, { 0, 2, 0 }, { 0, 0, 2 } })
  check_shape(L.cholesky(ember.zeros(0, 0)), { 0, 0 })
  -- only the lower triangle is read
  local junk = S3():clone()
  junk[1][3] = 100.0
  check(maxdiff(L.cholesky(junk), L.cholesky(S3())) < 1e-12)
end

function T.cholesky_not_positive_definite()
  check_error(function() L.cholesky(f64({ { 1, 2 }, { 2, 1 } })) end,
    "linalg.cholesky: The factorization could not be completed because the input is not positive-definite "
    .. "(the leading minor of order 2 is not positive-definite).")
  check_error(function() L.cholesky(ember.stack({ eye(2), -eye(2) })) end,
    "linalg.cholesky: (Batch element 1):", "leading minor of order 1")
end

-- ---- qr ----

function T.qr_modes()
  local Q, R = L.qr(A32())
  check_tensor(Q, { { -0.9407208683835975, 0.08763708510096398 }, { -0.18814417367671948, -0.9386234011158415 },
    { 0.2822162605150792, -0.3336253170740145 } }, 1e-12)
  check_tensor(R, { { -2.1260291625469296, -0.6679118165523541 }, { 0.0, -1.4642041542454844 } }, 1e-12)
  Q, R = L.qr(A32(), "complete")
  check_shape(Q, { 3, 3 }); check_shape(R, { 3, 2 })
  check(maxdiff(Q:matmul(R), A32()) < 1e-12)
  check(maxdiff(Q:t():matmul(Q), eye(3)) < 1e-12)
  Q, R = L.qr(A32(), "r")
  check_shape(Q, { 0 }); check_shape(R, { 2, 2 })
  Q, R = L.qr(A32():t()) -- wide
  check_shape(Q, { 2, 2 }); check_shape(R, { 2, 3 })
  check(maxdiff(Q:matmul(R), A32():t()) < 1e-12)
  Q, R = L.qr(ember.zeros(1, 2, 0, { dtype = "float64" }), "complete")
  check_tensor(Q, { { { 1, 0 }, { 0, 1 } } })
  check_error(function() L.qr(A32(), "full") end, "qr", "reduced")
end

function T.backward_errors_keep_their_message_with_create_graph()
  -- the gradient of a wide A divides by R's leading block, singular here;
  -- later ops of the formula must not wipe the message (they clear the
  -- error slot when they record a node)
  for _, cg in ipairs({ false, true }) do
    local a = ember.tensor({ { 0.0, -2.75 } }, { requires_grad = true })
    local _, R = L.qr(a, "complete")
    check_error(function() ember.autograd.grad({ R:sum() }, { a }, { create_graph = cg }) end,
      "QrBackward", "linalg.inv: The diagonal element 1 is zero")
  end
end

function T.qr_mode_r_is_not_differentiable()
  local a = A32():clone():requires_grad_()
  local _, R = L.qr(a, "r")
  check_error(function() R:sum():backward() end, "linalg.qr", "mode='r'")
end

-- ---- eigh, eigvalsh ----

function T.eigh_values_vectors_and_uplo()
  local e, V = L.eigh(S3())
  check_tensor(e, { 1.9692621311480258, 4.652222634945524, 6.858515233906452 }, 1e-12)
  check_tensor(V, { { 0.5313679306370255, 0.2501197671272753, 0.8093752061823511 },
    { -0.7116181200313754, 0.6501523904194717, 0.26627339423017515 },
    { 0.4596169856886678, 0.7174552050992762, -0.523459888761707 } }, 1e-10)
  check_tensor(L.eigvalsh(A3(), "U"), { 1.045148714677721, 1.897442562736568, 2.35740872258571 }, 1e-12)
  check(maxdiff(L.eigvalsh(S3()), e) < 1e-12)
  local bl = L.eigvalsh(ember.stack({ S3(), eye(3) }))
  check_tensor(bl[2], { 1, 1, 1 }, 1e-12)
  check_error(function() L.eigh(S3(), "X") end, "eigh", "L", "U")
end

function T.eigvalsh_gradient_with_repeated_eigenvalues()
  -- torch's V diag(g) V^T: finite where the eigenvector formula divides by 0
  local a = eye(3):requires_grad_()
  L.eigvalsh(a):sum():backward()
  check(maxdiff(a.grad, eye(3)) < 1e-12)
  local b = eye(3):requires_grad_()
  local l = L.eigh(b)
  l:sum():backward()
  check(maxdiff(b.grad, eye(3)) < 1e-12)
end

function T.eigvalsh_and_svdvals_keep_their_factors_not_A()
  -- their gradients come from eigh's / svd's node (the eigenvectors, U and
  -- Vh), so changing A in place afterwards does not break backward (torch)
  local a = S3():requires_grad_()
  local x = a * 1
  local l, s = L.eigvalsh(x), L.svdvals(x)
  do local g <close> = ember.no_grad(); x:zero_() end
  ;(l:sum() + s:sum()):backward()
  local _, V = L.eigh(S3())
  local U, _, Vh = L.svd(S3())
  check(maxdiff(a.grad, V:matmul(V:t()) + U:matmul(Vh)) < 1e-10)
end

-- ---- svd, svdvals, pinv, matrix_rank ----

function T.svd_full_and_reduced()
  local A = A3():narrow(1, 1, 2) -- 2 x 3
  local U, S, Vh = L.svd(A)
  check_tensor(S, { 2.2714323672210424, 1.276947532649878 }, 1e-12)
  check_tensor(U, { { -0.8762394988432131, -0.4818758560739427 }, { -0.4818758560739427, 0.876239498843213 } }, 1e-10)
  check_shape(Vh, { 3, 3 })
  check_tensor(Vh[1], { -0.8563888444082848, -0.5111019594005571, 0.07330030197723814 }, 1e-10)
  U, S, Vh = L.svd(A, false)
  check_shape(Vh, { 2, 3 })
  check(maxdiff((U * S):matmul(Vh), A) < 1e-12)
  check_tensor(L.svdvals(A), { 2.2714323672210424, 1.276947532649878 }, 1e-12)
  U, S, Vh = L.svd(ember.zeros(0, 3))
  check_shape(U, { 0, 0 }); check_shape(S, { 0 }); check_tensor(Vh, { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } })
  check_error(function() L.svd(f64({ { 0 / 0, 1 }, { 1, 1 } })) end,
    "linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values.")
end

function T.pinv_and_matrix_rank()
  check_tensor(L.pinv(A32()), { { 0.46128126805911024, -0.11289523652274415, -0.2043259308181293 },
    { -0.05985305044167418, 0.641046809213242, 0.2278543713365805 } }, 1e-12)
  check_tensor(L.pinv(A32(), { atol = 1.5 }), { { 0.3355251526755868, 0.1769261834199096, -0.0653578895182785 },
    { 0.17765463174129859, 0.09367928368472657, -0.03460584609281093 } }, 1e-12)
  check(maxdiff(L.pinv(S3(), { hermitian = true }), L.inv(S3())) < 1e-12)
  check(maxdiff(L.pinv(A3()), L.inv(A3())) < 1e-12)
  check_eq(L.matrix_rank(ember.tensor({ { 1.0, 2.0 }, { 2.0, 4.0 } })):item(), 1)
  check_eq(L.matrix_rank(A3(), { atol = 1.5 }):item(), 2)
  check_eq(L.matrix_rank(A3(), { rtol = 0.5 }):item(), 2)
  check_eq(L.matrix_rank(S3(), { hermitian = true }):item(), 3)
  local r = L.matrix_rank(ember.stack({ A3(), A3() * 0 }))
  check_eq(r.dtype, "int64")
  check_tensor(r, { 3, 0 })
  check_tensor(L.matrix_rank(ember.zeros(2, 0, 3)), { 0, 0 })
end

-- ---- lstsq ----

function T.lstsq_drivers_and_results()
  local b = f64({ 1.0, 2.0, 3.0 })
  local X, res, rank, sv = L.lstsq(A32(), b, nil, { driver = "gelsd" })
  check_tensor(X, { -0.3774869974, 1.9058036820 }, 1e-9)
  check_tensor(res, { 5.9919507967 }, 1e-9)
  check_eq(rank:item(), 2)
  check_tensor(sv, { 2.2960541969, 1.3557784202 }, 1e-9)
  -- the default driver gelsy: no residuals, no singular values
  X, res, rank, sv = L.lstsq(A32(), b)
  check_tensor(X, { -0.3774869974, 1.9058036820 }, 1e-9)
  check_shape(res, { 0 }); check_shape(sv, { 0 }); check_eq(rank:item(), 2)
  -- gels: no rank
  X, res, rank = L.lstsq(A32(), b:unsqueeze(2), nil, { driver = "gels" })
  check_shape(X, { 2, 1 }); check_shape(rank, { 0 }); check_tensor(res, { 5.9919507967 }, 1e-9)
  -- rank-deficient: no residuals
  X, res = L.lstsq(f64({ { 1, 1 }, { 1, 1 }, { 1, 1 } }), b, nil, { driver = "gelsd" })
  check_shape(res, { 0 })
  check_tensor(X, { 1.0, 1.0 }, 1e-12)
  check_error(function() L.lstsq(A32(), f64({ 1, 2 })) end, "linalg.lstsq", "self.size(-2) should match")
  check_error(function() L.lstsq(A32(), ember.ones(2, 3, 1, { dtype = "float64" })) end, "linalg.lstsq",
    "self.dim() must be greater or equal to b.dim()")
  check_error(function() L.lstsq(A32(), b, nil, { driver = "qr" }) end, "lstsq", "gelsy")
end

-- empty right-hand sides and empty systems (shapes from PyTorch 1.13); a
-- b with no columns once overran the solution's buffer (fuzz find)
function T.lstsq_empty_shapes()
  local cases = {
    { { 4, 0 }, { 4, 0 }, { 0, 0 } }, { { 4, 3 }, { 4, 0 }, { 3, 0 } }, { { 4, 0 }, { 4 }, { 0 } },
    { { 0, 3 }, { 0, 2 }, { 3, 2 } }, { { 2, 4, 0 }, { 2, 4, 0 }, { 2, 0, 0 } },
  }
  for _, c in ipairs(cases) do
    for _, d in ipairs({ "gelsy", "gels", "gelsd", "gelss" }) do
      local X = L.lstsq(ember.zeros(table.unpack(c[1])), ember.zeros(table.unpack(c[2])), nil, { driver = d })
      check_shape(X, c[3])
      check_eq(X:sum():item(), 0)
    end
  end
  local _, res, _, sv = L.lstsq(ember.zeros(4, 3), ember.zeros(4, 0), nil, { driver = "gelsd" })
  check_shape(res, { 0 }); check_shape(sv, { 3 })
  _, res = L.lstsq(ember.zeros(4, 0), ember.zeros(4), nil, { driver = "gels" })
  check_shape(res, { 1 })
end

-- ---- matrix_exp ----

function T.matrix_exp_values()
  check_tensor(L.matrix_exp(A3()), { { 8.582928534517128, 2.8434211833787915, -1.840117129430502 },
    { 2.1284848528086022, 5.099654440350207, 0.7595505641242366 },
    { -3.923987748685056, 0.773695611450277, 6.726487266184659 } }, 1e-10)
  -- a norm large enough for scaling and squaring
  check_tensor(ember.matrix_exp(A3() * 5), { { 109523.45818681395, 49053.35825896301, -38280.687451543345 },
    { 29589.589338626207, 18237.79937796996, -5315.82464015404 },
    { -92649.87035066036, -32106.480131591594, 42441.053312886295 } }, 1e-9)
  check(maxdiff(ember.zeros(2, 3, 3, { dtype = "float64" }):matrix_exp(), ember.stack({ eye(3), eye(3) })) == 0)
  check_shape(L.matrix_exp(ember.zeros(0, 0)), { 0, 0 })
  local small = f64({ { 0.001, 0.002 }, { -0.003, 0.0 } }) -- a low Pade degree
  check(maxdiff(L.matrix_exp(small), eye(2) + small + small:matmul(small) * 0.5) < 1e-8)
end

function T.results_have_torchs_column_major_strides()
  local function strides(t) return table.concat(t:stride(), ",") end
  local B = A32():contiguous()
  check_eq(strides(L.inv(A3())), "1,3")
  check_eq(strides(L.inv(ember.stack({ A3(), A3() }))), "9,1,3")
  check_eq(strides(L.solve(A3(), B)), "1,3")
  check_eq(strides(L.solve(A3(), B:t(), { left = false })), "3,1")
  check_eq(strides(L.cholesky(S3(), { upper = true })), "1,3")
  local Q, R = L.qr(B)
  check_eq(strides(Q) .. " " .. strides(R), "1,3 1,2")
  local _, V = L.eigh(S3())
  check_eq(strides(V), "1,3")
  local U, _, Vh = L.svd(B)
  check_eq(strides(U) .. " " .. strides(Vh), "1,3 1,2")
  check_eq(strides(L.lstsq(B, B)), "1,3") -- the first 2 rows of a 3-row block
  check_eq(strides(L.pinv(B)), "3,1")
  -- and they are ordinary tensors for every other op
  check(maxdiff(L.inv(A3()):contiguous():view(9):reshape(3, 3), L.inv(A3())) == 0)
end

-- ---- errors common to the family ----

-- residuals of an empty batch are (0, k) for every driver but gelsy, as
-- torch's (full rank holds for no matrix at all); found by the difftest
function T.lstsq_residuals_of_an_empty_batch()
  local A, B = ember.zeros(0, 3, 1, { dtype = "float64" }), ember.zeros(0, 3, 2, { dtype = "float64" })
  for _, d in ipairs({ "gels", "gelsd", "gelss" }) do
    local _, res = L.lstsq(A, B, { driver = d })
    check_shape(res, { 0, 2 })
  end
  local _, res = L.lstsq(A, B, { driver = "gelsy" })
  check_shape(res, { 0 })
end

function T.integer_and_half_inputs_are_refused()
  local ops = {
    det = function(x) return L.det(x) end, slogdet = function(x) return L.slogdet(x) end,
    inv = function(x) return L.inv(x) end, cholesky = function(x) return L.cholesky(x) end,
    qr = function(x) return L.qr(x) end, eigh = function(x) return L.eigh(x) end,
    eigvalsh = function(x) return L.eigvalsh(x) end, svd = function(x) return L.svd(x) end,
    svdvals = function(x) return L.svdvals(x) end, pinv = function(x) return L.pinv(x) end,
    matrix_exp = function(x) return L.matrix_exp(x) end, matrix_rank = function(x) return L.matrix_rank(x) end,
  }
  for name, f in pairs(ops) do
    check_error(function() f(ember.ones(2, 2, { dtype = "int64" })) end, "linalg." .. name,
      "argument 'A'", "float32 or float64", "int64")
    check_error(function() f(ember.ones(2, 2, { dtype = "float16" })) end, "linalg." .. name, "float16")
    check_error(function() f(ember.ones(3)) end, "linalg." .. name, "at least 2 dimensions", "{3}")
  end
  check_error(function() L.det(ember.ones(2, 3)) end,
    "linalg.det: argument 'A' must be batches of square matrices, but they are 2 by 3 matrices")
  check_error(function() L.solve(ember.ones(2, 2, { dtype = "int32" }), ember.ones(2)) end,
    "linalg.solve", "int32")
  check_error(function() L.lstsq(ember.ones(3, 2, { dtype = "int64" }), ember.ones(3)) end,
    "linalg.lstsq", "'self'", "int64")
end

return T
