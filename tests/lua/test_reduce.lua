-- test_reduce.lua -- behaviour of the reduce family (reductions and scans):
-- values against PyTorch 1.13 (computed there), dtypes, edge cases, and
-- errors that name the op and the problem.
local T = {}
local nan, inf = 0 / 0, 1 / 0
local function f64(v) return ember.tensor(v, { dtype = "float64" }) end

function T.cumsum_cumprod_values()
  local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float32" })
  check_tensor(x:cumsum(2), { { 1, 3, 6 }, { 4, 9, 15 } })
  check_tensor(ember.cumsum(x, 1), { { 1, 2, 3 }, { 5, 7, 9 } })
  check_tensor(x:cumprod(-1), { { 1, 2, 6 }, { 4, 20, 120 } })
  check_eq(x:cumsum(1, { dtype = "float64" }).dtype, "float64")
  -- integers and bool accumulate as int64 unless dtype is given
  local i = ember.tensor({ { 1, -2 }, { 3, 4 } }, { dtype = "int32" })
  check_eq(i:cumprod(1).dtype, "int64")
  check_tensor(i:cumprod(1), { { 1, -2 }, { 3, -8 } })
  check_tensor(i:cumsum(2, { dtype = "float32" }), { { 1, -1 }, { 3, 7 } })
  check_eq(i:cumsum(2, { dtype = "float32" }).dtype, "float32")
  check_tensor(ember.tensor({ true, false, true }):cumsum(1), { 1, 1, 2 })
  check_eq(ember.tensor({ 1, 2 }, { dtype = "uint8" }):cumsum(1).dtype, "int64")
  check_tensor(ember.tensor({ 200, 100 }, { dtype = "uint8" }):cumsum(1, { dtype = "uint8" }), { 200, 44 })
  -- 0-dim, empty, NaN, non-contiguous
  check_tensor(ember.tensor(3.0):cumsum(1), 3)
  check_shape(ember.zeros(0, 3):cumsum(2), { 0, 3 })
  check_tensor(f64({ 1, nan, 2 }):cumsum(1), { 1, nan, nan })
  local nc = ember.arange(12, { dtype = "float32" }):reshape(3, 4):t()
  check_tensor(nc:cumsum(1), { { 0, 4, 8 }, { 1, 9, 17 }, { 3, 15, 27 }, { 6, 22, 38 } })
  -- float32 accumulates in double like PyTorch: 1e8 + 1 + ... (8 ones) is
  -- exact, where a float accumulator would stay at 1e8
  local big = ember.cat({ ember.tensor({ 1e8 }), ember.ones(8) })
  check_eq(big:cumsum(1)[9]:item(), 100000008.0)
  -- wide inner dims (column blocks) agree with the row-by-row result
  local w = ember.randn(5, 700, { dtype = "float64" })
  local cs = w:cumsum(1)
  check(((cs[5] - w:sum(1)):abs():max():item()) < 1e-12)
end

function T.cumprod_gradient_with_zeros()
  -- values from PyTorch 1.13
  local a = f64({ 1.5, 2, 0, 3, 4 }):requires_grad_()
  a:cumprod(1):backward(f64({ 1, 2, 3, 4, 5 }))
  check_tensor(a.grad, { 5, 3, 225, 0, 0 })
  check_tensor(ember.cumprod_backward(f64({ 1, 2, 3, 4, 5 }), a:detach(), 1, a:detach():cumprod(1)),
    { 5, 3, 225, 0, 0 })
  check_error(function() return ember.cumprod_backward(f64({ 1, 2 }), f64({ 1, 2, 3 }), 1, f64({ 1, 2, 3 })) end,
    "cumprod_backward", "grad", "{2}", "{3}")
end

function T.cummax_cummin()
  local v, i = ember.tensor({ 1, 3, 3, 2, nan, 5 }):cummax(1)
  check_tensor(v, { 1, 3, 3, 3, nan, nan })
  check_tensor(i, { 1, 2, 3, 3, 5, 5 })
  v, i = ember.tensor({ 1, 0, 0, 2, nan, -5 }):cummin(1)
  check_tensor(v, { 1, 0, 0, 0, nan, nan })
  check_tensor(i, { 1, 2, 3, 3, 5, 5 })
  v, i = ember.tensor({ { 2, 1 }, { 1, 3 } }, { dtype = "int32" }):cummax(1)
  check_eq(v.dtype, "int32")
  check_tensor(v, { { 2, 1 }, { 2, 3 } })
  check_tensor(i, { { 1, 1 }, { 1, 2 } })
  v, i = ember.tensor({ true, false, true }):cummin(1)
  check_tensor(v, { true, false, false })
  check_tensor(i, { 1, 2, 2 })
  check_shape((ember.zeros(0, 3):cummax(1)), { 0, 3 })
end

function T.logcumsumexp_values()
  local x = f64({ { 0.5, -1.2, 0.8, 0.1 }, { 1.5, 0.3, -0.7, 2.0 } })
  check_tensor(x:logcumsumexp(2), { { 0.5, 0.6678, 1.4292, 1.6640 }, { 1.5, 1.7633, 1.8450, 2.6186 } }, 1e-4)
  check_tensor(f64({ inf, 1, -inf, nan, 2 }):logcumsumexp(1), { inf, inf, inf, nan, nan })
  check_tensor(f64({ -inf, -inf, 1 }):logcumsumexp(1), { -inf, -inf, 1 })
  check_tensor(ember.tensor({ 1000, 1000 }, { dtype = "float32" }):logcumsumexp(1), { 1000, 1000.6931 }, 1e-6)
  check_error(function() return ember.tensor({ 1, 2 }):logcumsumexp(1) end, "logcumsumexp", "floating", "int64")
end

function T.nansum_nanmean_count_nonzero()
  check_tensor(ember.tensor({ 1, nan, 2 }):nansum(), 3)
  check_tensor(f64({ { nan, 1.5 } }):nansum(2, true), { { 1.5 } })
  check_eq(ember.tensor({ 1, 2 }, { dtype = "int32" }):nansum().dtype, "int64")
  check_tensor(ember.tensor({ true, true }):nansum(), 2)
  check_tensor(ember.tensor({ { nan, nan }, { 2, 3 } }):nanmean(2), { nan, 2.5 })
  check_eq(ember.tensor({ 1, nan }):nanmean({ dtype = "float64" }).dtype, "float64")
  check_error(function() return ember.tensor({ 1, 2 }):nanmean() end, "nanmean", "floating", "int64")
  local x = ember.tensor({ { 1, 0 }, { 2, 3 } })
  check_tensor(x:count_nonzero(), 3)
  check_tensor(x:count_nonzero(1), { 2, 1 })
  check_tensor(x:count_nonzero({ 1, 2 }), 3)
  check_eq(x:count_nonzero().dtype, "int64")
  check_tensor(ember.tensor(3.0):count_nonzero(), 1)
  check_tensor(ember.tensor({ nan, 0 }):count_nonzero(), 1)
  check_shape(ember.zeros(2, 0):count_nonzero(2), { 2 })
end

function T.median_kthvalue_mode_values()
  -- indices among equal values are PyTorch's (Note [Order statistic ties])
  local x = ember.tensor({ { 2, 7, 7, 1, 7 }, { 3, 3, 1, 1, 5 } })
  local v, i = x:median(2)
  check_tensor(v, { 7, 3 }); check_tensor(i, { 2, 1 })
  v, i = x:kthvalue(3, 2)
  check_tensor(v, { 7, 3 }); check_tensor(i, { 3, 1 })
  v, i = x:mode(2)
  check_tensor(v, { 7, 1 }); check_tensor(i, { 5, 4 })
  v, i = ember.tensor({ 3, 1, 1, 2, 1 }, { dtype = "float32" }):kthvalue(2)
  check_tensor(v, 1); check_tensor(i, 5)
  v, i = ember.tensor({ 5, 1, 5, 1, 3, 3 }):mode()
  check_tensor(v, 1); check_tensor(i, 4)
  v, i = ember.tensor({ 3, 1, 2, 2, 3, 3, 1, 1, 1, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3 }):mode()
  check_tensor(v, 3); check_tensor(i, 1)
  check_tensor(ember.tensor({ 1, 4, 2, 3 }):median(), 2)
  -- NaN: median takes the first NaN of a row, nanmedian skips them
  local y = ember.tensor({ { 1, nan, 3, 0.5 }, { nan, nan, nan, nan } })
  v, i = y:median(2)
  check_tensor(v, { nan, nan }); check_tensor(i, { 2, 1 })
  v, i = y:nanmedian(2)
  check_tensor(v, { 1, nan }); check_tensor(i, { 1, 3 })
  check_tensor(y:nanmedian(), 1)
  check_tensor(y:median(), nan)
  -- rows of NaN: the index libstdc++'s nth_element leaves (PyTorch's)
  local want = { 0, 0, 0, 2, 2, 3, 5, 6, 7, 8, 8 }
  for n = 1, 11 do
    local _, k = ember.full({ 1, n }, nan):nanmedian(2)
    check_eq(k:item(), want[n] + 1, "nanmedian of " .. n .. " NaNs")
  end
  -- keepdim, 0-dim, empty, non-contiguous
  v, i = x:median(1, true)
  check_shape(v, { 1, 5 }); check_tensor(v, { { 2, 3, 1, 1, 5 } })
  v, i = ember.tensor(5.0):kthvalue(1)
  check_tensor(v, 5); check_tensor(i, 1)
  check_tensor(ember.zeros(0):median(), nan)
  v, i = x:t():mode(1)
  check_tensor(v, { 7, 1 }); check_tensor(i, { 5, 4 })
  v, i = ember.tensor({ { true, false }, { true, true } }):mode(2)
  check_tensor(v, { false, true })
end

function T.order_statistic_errors()
  check_error(function() return ember.tensor({ 1.0, 2.0 }):kthvalue(3) end, "kthvalue", "k 3", "out of range")
  check_error(function() return ember.tensor({ 1.0, 2.0 }):kthvalue(0) end, "kthvalue", "k 0")
  check_error(function() return ember.zeros(0):mode(1) end, "mode", "dim 1", "non-zero size")
  check_error(function() return ember.zeros(2, 0):median(2) end, "median", "dim 2", "non-zero size")
  check_error(function() return ember.tensor({ true }):median() end, "median", "bool")
  check_error(function() return ember.ones(2, 3):cumsum(3) end, "cumsum", "dim 3")
  check_error(function() return ember.ones(2, 3):cummax() end, "cummax")
  check_error(function() return ember.ones(2, 3):median(1.5) end, "median")
end

function T.diff_values()
  local x = ember.tensor({ { 1, 4, 9 }, { 2, 2, 5 } })
  check_tensor(x:diff(), { { 3, 5 }, { 0, 3 } })
  check_tensor(x:diff(2), { { 2 }, { 3 } })
  check_shape(x:diff(5), { 2, 0 })
  check_tensor(ember.diff(x, 1, 1), { { 1, -2, -4 } })
  check_tensor(x:diff(1, 2, ember.tensor({ { 0 }, { 0 } }), ember.tensor({ { 10 }, { 1 } })),
    { { 1, 3, 5, 1 }, { 2, 0, 3, -4 } })
  check_tensor(ember.tensor({ true, false, false }):diff(), { true, false })
  -- n == 0 copies self and ignores prepend; a negative n only joins (PyTorch 1.13)
  local c = x:diff(0, 2, ember.zeros(2, 1, { dtype = "float64" }))
  check_eq(c.dtype, "int64"); check_tensor(c, { { 1, 4, 9 }, { 2, 2, 5 } })
  check_shape(x:diff(-1, 2, ember.zeros(2, 1)), { 2, 4 })
  -- prepend promotes; non-contiguous input
  local p = x:diff(1, 2, ember.tensor({ { 0.5 }, { 0 } }))
  check_tensor(p, { { 0.5, 3, 5 }, { 2, 0, 3 } })
  check_tensor(x:t():diff(1, 1), { { 3, 0 }, { 5, 3 } })
  check_error(function() return ember.tensor(3.0):diff() end, "diff", "0-dim")
  check_error(function() return x:diff(1, 2, ember.tensor({ 0, 0 })) end, "diff", "prepend", "dims")
  check_error(function() return x:diff(1, 3) end, "diff", "dim 3")
end

function T.quantile_values()
  -- values from PyTorch 1.13
  local x = ember.tensor({ { 0.5, -1.2, 0.8, 0.1 }, { 1.5, 0.3, nan, 2.0 } })
  local q = ember.tensor({ 0.25, 0.5 })
  local want = {
    linear = { { { -0.225, nan }, { 0.3, nan } }, { 0.18, 1.26 } },
    lower = { { { -1.2, nan }, { 0.1, nan } }, { 0.1, 0.3 } },
    higher = { { { 0.1, nan }, { 0.5, nan } }, { 0.5, 1.5 } },
    midpoint = { { { -0.55, nan }, { 0.3, nan } }, { 0.3, 0.9 } },
    nearest = { { { 0.1, nan }, { 0.5, nan } }, { 0.1, 1.5 } },
  }
  for m, w in pairs(want) do
    check_tensor(x:quantile(q, 2, { interpolation = m }), w[1], 1e-5, m)
    local r = x:nanquantile(0.4, 2, true, { interpolation = m })
    check_shape(r, { 2, 1 }); check_tensor(r, w[2], 1e-5, "nan " .. m)
  end
  check_tensor(x[1]:quantile(0.3), -0.03, 1e-5)
  check_tensor(ember.tensor(2.0):quantile(0.3), 2)
  check_shape(x[1]:quantile(ember.tensor({ 0.3 }), 1, true), { 1, 1 })
  check_shape(x:quantile(ember.tensor({ 0.3, 0.2 }), { keepdim = true }), { 2, 1, 1 })
  check_eq(f64({ 1, 2 }):quantile(0.5).dtype, "float64")
  -- PyTorch's lerp: an infinite neighbour gives NaN on the far side
  check_tensor(ember.tensor({ 1, inf }):quantile(0.75), nan)
  check_tensor(ember.tensor({ { -1 }, { -inf }, { 1 } }):nanquantile(0.1, 1, { interpolation = "midpoint" }), { -inf })
  check_error(function() return ember.tensor({ 1, 2 }):quantile(0.5) end, "quantile", "float32 or float64", "int64")
  check_error(function() return x:quantile(1.5) end, "quantile", "q", "[0, 1]", "1.5")
  check_error(function() return x:quantile(f64({ 0.5 })) end, "quantile", "q", "float32", "float64")
  check_error(function() return ember.zeros(0):quantile(0.5) end, "quantile", "empty")
  check_error(function() return x:quantile(ember.ones(2, 2)) end, "quantile", "q", "2 dims")
  check_error(function() return x:quantile(0.5, 1, { interpolation = "cubic" }) end, "quantile", "interpolation")
end

function T.bucketize_bincount_histc()
  -- bucketize: PyTorch's bucket + 1, like searchsorted
  local b = ember.tensor({ 1, 3, 5, 7, 9 })
  local v = ember.tensor({ { 3, 6, 9 }, { 3, 6, 9 } })
  check_tensor(ember.bucketize(v, b), { { 2, 4, 5 }, { 2, 4, 5 } })
  check_tensor(ember.bucketize(v, b, { right = true }), { { 3, 4, 6 }, { 3, 4, 6 } })
  check_eq(ember.bucketize(v, b, { out_int32 = true }).dtype, "int32")
  check_tensor(ember.bucketize(ember.tensor(4.5), b), 3)
  check_tensor(ember.bucketize(ember.tensor({ true }), b), { 1 })
  check_tensor(ember.bucketize(ember.tensor({ nan, -inf, inf }), ember.tensor({ 0.0, 1.0 })), { 3, 1, 3 })
  check_error(function() return ember.bucketize(v, ember.ones(2, 2)) end, "bucketize", "boundaries", "1-d")
  -- bincount: raw values, a 0 counts in slot 1
  local x = ember.tensor({ 0, 1, 1, 3 })
  check_tensor(x:bincount(), { 1, 2, 0, 1 })
  local w = ember.bincount(x, ember.tensor({ 0.5, 1, 1, 2 }))
  check_eq(w.dtype, "float32"); check_tensor(w, { 0.5, 2, 0, 2 })
  check_eq(x:bincount(ember.tensor({ 1, 1, 1, 2 })).dtype, "float64")
  check_tensor(x:bincount(nil, 6), { 1, 2, 0, 1, 0, 0 })
  check_tensor(ember.zeros(0, { dtype = "int64" }):bincount(ember.zeros(0), 3), { 0, 0, 0 })
  check_eq(ember.zeros(0, { dtype = "int64" }):bincount(ember.zeros(0), 3).dtype, "int64")
  check_tensor(ember.tensor({ 2 }, { dtype = "uint8" }):bincount(nil, 1), { 0, 0, 1 })
  check_error(function() return ember.tensor({ -1, 1 }):bincount() end, "bincount", "non-negative", "-1")
  check_error(function() return ember.tensor({ 1.0 }):bincount() end, "bincount", "integer", "float32")
  check_error(function() return ember.tensor({ { 1 } }):bincount() end, "bincount", "1-d")
  check_error(function() return x:bincount(ember.ones(3)) end, "bincount", "weights", "{3}", "{4}")
  check_error(function() return x:bincount(nil, -1) end, "bincount", "minlength")
  -- histc (values from PyTorch 1.13)
  check_tensor(ember.tensor({ 1.0, 2.0, 1.0 }):histc(4, 0, 3), { 0, 2, 1, 0 })
  check_tensor(ember.tensor({ 1, 2, 1, 2.5, 7 }):histc(5), { 3, 1, 0, 0, 1 })
  check_tensor(ember.tensor({ nan }):histc(4, 0, 1), { 1, 0, 0, 0 })
  check_tensor(ember.tensor({ 5.0 }):histc(3), { 0, 1, 0 })
  check_tensor(f64({ -1, 0, 1, 4 }):histc(2, 0, 1), { 1, 1 })
  check_eq(f64({ 1 }):histc(2).dtype, "float64")
  check_error(function() return ember.tensor({ 1, 2 }):histc() end, "histc", "floating", "int64")
  check_error(function() return ember.tensor({ 1.0 }):histc(0) end, "histc", "bins", "0")
  check_error(function() return ember.tensor({ 1.0 }):histc(2, 3, 1) end, "histc", "max", "min")
  check_error(function() return ember.tensor({ 1.0, nan }):histc(2) end, "histc", "not finite")
  check_error(function() return ember.ones(3):histc(2, 0, 1e300) end, "histc", "not finite", "float32")
end

function T.unique_values()
  local x = ember.tensor({ { 2.0, 1, 2 }, { 3, 1, -0.0 } })
  local u, inv, cnt = x:unique()
  check_tensor(u, { 0, 1, 2, 3 })
  check_shape(inv, { 0 }); check_shape(cnt, { 0 })
  u, inv, cnt = ember.unique(x, true, true, true)
  check_tensor(inv, { { 3, 2, 3 }, { 4, 2, 1 } })
  check_tensor(cnt, { 1, 2, 2, 1 })
  -- the first occurrence represents a value: -0.0 before 0.0 stays -0.0
  check_eq(1 / ember.tensor({ -0.0, 0.0 }):unique():item(), -inf)
  -- with counts PyTorch's _unique2 also fills the inverse
  u, inv, cnt = ember.tensor({ 7, 3, 7 }):unique({ return_counts = true })
  check_tensor(inv, { 2, 1, 2 }); check_tensor(cnt, { 1, 2 })
  u, inv, cnt = ember.tensor({ true, false, true }):unique({ return_inverse = true, return_counts = true })
  check_tensor(u, { false, true }); check_tensor(inv, { 2, 1, 2 }); check_tensor(cnt, { 1, 2 })
  u, inv = ember.tensor(3):unique({ return_inverse = true })
  check_tensor(u, { 3 }); check_shape(inv, {}); check_tensor(inv, 1)
  u, inv, cnt = ember.zeros(0, 2):unique({ return_inverse = true, return_counts = true })
  check_shape(u, { 0 }); check_shape(inv, { 0, 2 }); check_shape(cnt, { 0 })
  -- NaN: each its own value, last
  u, inv, cnt = ember.tensor({ nan, 1, nan }):unique({ return_counts = true })
  check_tensor(u, { 1, nan, nan }); check_tensor(cnt, { 1, 1, 1 }); check_tensor(inv, { 2, 1, 3 })
  -- non-contiguous input, integer dtypes kept
  local nc = ember.tensor({ { 5, 1 }, { 5, 2 } }, { dtype = "int32" }):t()
  u, inv = nc:unique({ return_inverse = true })
  check_eq(u.dtype, "int32"); check_tensor(u, { 1, 2, 5 }); check_tensor(inv, { { 3, 3 }, { 1, 2 } })
  -- the results carry no history
  local g = f64({ 1, 2, 1 }):requires_grad_()
  check(not g:unique().requires_grad)
end

function T.unique_consecutive_values()
  local x = ember.tensor({ { 1, 1, 2 }, { 2, 3, 1 } })
  local u, inv, cnt = x:unique_consecutive()
  check_tensor(u, { 1, 2, 3, 1 }); check_shape(inv, { 0 }); check_shape(cnt, { 0 })
  u, inv, cnt = ember.unique_consecutive(x, true, true)
  check_tensor(inv, { { 1, 1, 2 }, { 2, 3, 4 } }); check_tensor(cnt, { 2, 2, 1, 1 })
  u, inv, cnt = x:unique_consecutive({ return_counts = true })
  check_shape(inv, { 0 }); check_tensor(cnt, { 2, 2, 1, 1 })
  -- NaN never equals its neighbour; -0.0 == 0.0 keeps the first
  u = ember.tensor({ nan, nan, -0.0, 0.0 }):unique_consecutive()
  check_tensor(u, { nan, nan, 0 }); check_eq(1 / u[3]:item(), -inf)
  u, inv, cnt = ember.tensor(5):unique_consecutive(true, true)
  check_tensor(u, { 5 }); check_shape(inv, {}); check_tensor(inv, 1); check_tensor(cnt, { 1 })
  u, inv = ember.zeros(0, 2):unique_consecutive(true)
  check_shape(u, { 0 }); check_shape(inv, { 0, 2 })
  u = x:t():unique_consecutive()
  check_tensor(u, { 1, 2, 1, 3, 2, 1 })
end

function T.mean_dtype_option()
  -- integers need dtype (PyTorch: "could not infer output dtype")
  local m = ember.tensor({ 1, 2 }):mean({ dtype = "float64" })
  check_eq(m.dtype, "float64"); check_tensor(m, 1.5)
  check_tensor(ember.tensor({ { 1.0, 2 }, { 3, 4 } }, { dtype = "float16" }):mean(2, { dtype = "float32" }), { 1.5, 3.5 })
  check_error(function() return ember.tensor({ 1, 2 }):mean() end, "mean", "floating", "int64")
  check_error(function() return ember.tensor({ 1.0 }):mean({ dtype = "int64" }) end, "mean", "dtype", "int64")
  local a = ember.tensor({ 1.0, 2.0 }, { requires_grad = true })
  a:mean({ dtype = "float64" }):backward()
  check_eq(a.grad.dtype, "float32"); check_tensor(a.grad, { 0.5, 0.5 })
end

function T.gradients_flow_to_the_selected_element()
  local a = f64({ { 0.5, 3, 1 }, { 2, 0, -1 } }):requires_grad_()
  local v = a:cummax(2)
  v:sum():backward()
  check_tensor(a.grad, { { 1, 2, 0 }, { 3, 0, 0 } })
  local b = f64({ 4, 1, 3, 2 }):requires_grad_()
  local m = b:median()
  m:backward()
  check_tensor(b.grad, { 0, 0, 0, 1 })
end

-- norm's p is a number: a boolean is refused as torch's kernel does
-- (found by the difftest, seed 9104)
function T.norm_refuses_boolean_p()
  check_error(function() return ember.norm(ember.ones(3), true) end, "norm", "p", "boolean")
end

return T
