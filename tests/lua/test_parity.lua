-- test_parity.lua -- one regression test per difference from PyTorch 1.13
-- that random programs found (issue "Autograd and aliasing correctness",
-- items A-Q). Each expected value was computed by PyTorch from the same
-- program (0-based indices converted); the PyTorch line is in the comment.
local T = {}

local inf, nan = math.huge, 0 / 0
local function leaf(v) return ember.tensor(v, { requires_grad = true }) end

-- ---- views, in-place ops and history ----

-- A: a = [1,2,3]; b = a*2; v = b.narrow(0,0,2); b.mul_(3); v.sum().backward()
function T.A_view_sees_inplace_on_its_base()
  local a = leaf({ 1.0, 2.0, 3.0 })
  local b = a * 2
  local v = b:narrow(1, 1, 2)
  b:mul_(3)
  v:sum():backward()
  check_tensor(a.grad, { 6, 6, 0 })
  check_eq(tostring(v.grad_fn), "<AsStridedBackward>")
end

-- B: b = zeros(3); b.narrow(0,0,2).copy_(w); (b*c).sum().backward()
function T.B_write_into_view_of_a_tensor_without_history()
  local c = ember.tensor({ 1.0, 2.0, 3.0 })
  local w = leaf({ 5.0, 6.0 })
  local b = ember.zeros(3)
  b:narrow(1, 1, 2):copy_(w)
  check(not b.is_leaf and b.requires_grad, "the base takes the write's history")
  check_eq(tostring(b.grad_fn), "<CopySlices>")
  ;(b * c):sum():backward()
  check_tensor(w.grad, { 1, 2 })
  -- b[0:2] = w
  local w2 = leaf({ 5.0, 6.0 })
  local b2 = ember.zeros(3)
  b2[{ { 1, 2 } }] = w2
  ;(b2 * c):sum():backward()
  check_tensor(w2.grad, { 1, 2 })
  -- b = ones(3); b.narrow(0,1,2).mul_(w)
  local w3 = leaf({ 5.0, 6.0 })
  local b3 = ember.ones(3)
  b3:narrow(1, 2, 2):mul_(w3)
  ;(b3 * c):sum():backward()
  check_tensor(w3.grad, { 2, 3 })
end

-- y = x*1; y[0, :] = z; (y*y).sum().backward()
-- y = x*1; y.narrow(0,1,3).mul_(2); (y*y).sum().backward()
function T.B_write_into_view_of_a_result()
  local x = leaf({ { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } })
  local z = leaf({ 7.0, 8.0, 9.0 })
  local y = x * 1
  y[{ 1, {} }] = z
  ;(y * y):sum():backward()
  check_tensor(x.grad, { { 0, 0, 0 }, { 8, 10, 12 } })
  check_tensor(z.grad, { 14, 16, 18 })
  local x2 = leaf({ 1.0, 2.0, 3.0, 4.0, 5.0 })
  local y2 = x2 * 1
  y2:narrow(1, 2, 3):mul_(2)
  ;(y2 * y2):sum():backward()
  check_tensor(x2.grad, { 2, 16, 24, 32, 10 })
end

function T.B_view_of_a_leaf_that_requires_grad_stays_refused()
  local l = leaf({ 1.0, 2.0 })
  check_error(function() l:narrow(1, 1, 1):mul_(2) end, "mul_", "view of a leaf tensor that requires grad")
  check_error(function() l[1] = 0 end, "fill_", "view of a leaf tensor that requires grad")
  do
    local g <close> = ember.no_grad()
    l[1] = 5 -- allowed without grad mode (an optimizer step)
  end
  check_tensor(l, { 5, 2 })
end

-- with no_grad(): v = b[:2]; then v.copy_(w) with grad mode on raises
function T.B_view_made_in_no_grad_written_with_grad_mode_on()
  local w = leaf({ 1.0, 1.0 })
  local b = ember.zeros(3)
  local v
  do
    local g <close> = ember.no_grad()
    v = b[{ { 1, 2 } }]
  end
  check_error(function() v:copy_(w) end, "copy_", "view was created in no_grad mode")
  check_tensor(b, { 0, 0, 0 }, nil, "nothing was written")
  do
    local g <close> = ember.no_grad()
    v:copy_(w)
  end
  check_tensor(b, { 1, 1, 0 })
  check(not b.requires_grad)
end

-- C: v = tensor(2., requires_grad); a = zeros(3); a.fill_(v); (a*c).sum().backward()
function T.C_fill_with_a_tensor_value_that_requires_grad()
  local v = leaf(2.0)
  local a = ember.zeros(3)
  a:fill_(v)
  ;(a * ember.tensor({ 1.0, 2.0, 3.0 })):sum():backward()
  check_tensor(v.grad, { 6 })
  check_error(function() ember.zeros(2):fill_(ember.ones(2)) end, "fill_", "0-dim")
end

-- F: x.float() is x; then an in-place op on it is refused (a leaf)
function T.F_conversions_to_the_same_dtype_return_self()
  local x = leaf({ 1.0, 2.0 })
  check(rawequal(x:float(), x), "float() of float32 is x")
  check(rawequal(x:to("float32"), x), "to(float32) is x")
  check(rawequal(x:contiguous(), x), "contiguous() of a contiguous tensor is x")
  local d = ember.ones(2, { dtype = "float64" })
  check(rawequal(d:double(), d), "double() of float64 is d")
  check_error(function() x:float():mul_(3) end, "leaf tensor that requires grad")
  check(not rawequal(x:double(), x))
  check(not rawequal(x:t():t(), x))
end

-- G: x[:] is not x, its _base is x
function T.G_whole_slice_is_a_view()
  local x = leaf({ 1.0, 2.0 })
  local v = x[{ {} }]
  check(not rawequal(v, x))
  check(not v.is_leaf, "a view of a leaf that requires grad has history")
  check_eq(tostring(v.grad_fn), "<SliceBackward>")
  local w = x[{}]
  check(not rawequal(w, x) and not w.is_leaf)
  local plain = ember.zeros(3)
  plain[{ {} }] = 4
  check_tensor(plain, { 4, 4, 4 })
end

-- M: b = x*2; b.zero_(); b.sum().backward() -> zeros; with sqrt the saved
-- result is stale
function T.M_zero_and_fill_keep_the_edge_to_the_old_history()
  local x = leaf({ 1.0, 2.0 })
  local b = x * 2
  b:zero_()
  b:sum():backward()
  check_tensor(x.grad, { 0, 0 })
  local x2 = leaf({ 1.0, 2.0 })
  local b2 = x2 * 2
  b2:fill_(3)
  ;(b2 * x2):sum():backward()
  check_tensor(x2.grad, { 3, 3 })
  local x3 = leaf({ 1.0, 4.0 })
  local s = x3:sqrt()
  s:zero_()
  check_error(function() s:sum():backward() end, "SqrtBackward", "modified by an in-place operation")
end

-- P: zeros(1).expand(3).add_(1) raises; fill_ of an expanded tensor works
function T.P_inplace_on_overlapping_memory_is_refused()
  check_error(function() ember.zeros(1):expand(3):add_(1) end, "add_", "more than one element")
  check_error(function() ember.zeros(3, 1):expand(3, 3):copy_(ember.ones(3, 3)) end, "copy_",
    "more than one element")
  check_error(function() ember.zeros(3, 1):expand(3, 3):mul_(2) end, "mul_", "more than one element")
  check_eq(ember.zeros(3, 1):expand(3, 3):fill_(2):sum():item(), 18)
  -- a transposed (non-overlapping) view is fine
  check_eq(ember.zeros(3, 3):t():add_(1):sum():item(), 9)
end

-- ---- gradient rules ----

-- D: y = x*1; grad([(y*3).sum()], [x, y], allow_unused) -> (3s, 3s)
function T.D_grad_wrt_an_intermediate_and_an_earlier_input()
  local x = leaf({ 1.0, 2.0 })
  local y = x * 1
  local g = ember.autograd.grad({ (y * 3):sum() }, { x, y }, { allow_unused = true, retain_graph = true })
  check_tensor(g[1], { 3, 3 })
  check_tensor(g[2], { 3, 3 })
  local g2 = ember.autograd.grad({ (y * 3):sum() }, { y, x })
  check_tensor(g2[1], { 3, 3 })
  check_tensor(g2[2], { 3, 3 })
end

-- E: x.long(), x.bool(), x.to(int64) never require grad
function T.E_casts_to_integer_or_bool_never_require_grad()
  local x = leaf({ 1.5, 2.0 })
  for _, r in ipairs({ x:long(), x:bool(), x:to("int64"), (x * 2):int(), (x * 2):sum():long() }) do
    check(not r.requires_grad and r.is_leaf and r.grad_fn == nil, r.dtype)
  end
  check_error(function() ember.tensor({ 1, 2 }):requires_grad_() end, "only floating point")
  -- an integer tensor written from one that requires grad stays out of the graph
  local i = ember.zeros(2, { dtype = "int64" })
  i:copy_(x)
  check(not i.requires_grad)
end

-- K: x.pow(0) at 0 -> 0; pow(x, e) with e == 0 -> 0; d/de at x == 0
function T.K_pow_gradient_at_zero()
  local x = leaf({ 0.0, 2.0 })
  x:pow(0):sum():backward()
  check_tensor(x.grad, { 0, 0 })
  local x2, e2 = leaf({ 0.0, 2.0 }), leaf({ 0.0, 0.0 })
  ember.pow(x2, e2):sum():backward()
  check_tensor(x2.grad, { 0, 0 })
  check_tensor(e2.grad, { 0, math.log(2) })
  local x3, e3 = leaf({ 0.0, 2.0 }), leaf({ -1.0, 2.0 })
  ember.pow(x3, e3):sum():backward()
  check_tensor(x3.grad, { -inf, 4 })
  check_tensor(e3.grad, { -inf, 4 * math.log(2) })
end

-- N: relu at NaN passes the gradient; a NaN gradient where x <= 0 is masked
function T.N_relu_backward_masks()
  local n = leaf({ nan, -1.0, 2.0 })
  n:relu():backward(ember.tensor({ 1.0, nan, 1.0 }))
  check_tensor(n.grad, { 1, 0, 1 })
end

-- O: with create_graph, gradients through abs and relu require grad
function T.O_create_graph_through_abs_and_relu()
  local a = leaf({ -1.0, 2.0 })
  local g = ember.autograd.grad({ a:abs():sum() }, { a }, { create_graph = true })
  check(g[1].requires_grad, "through abs")
  local g2 = ember.autograd.grad({ (a:relu() * a):sum() }, { a }, { create_graph = true })
  check(g2[1].requires_grad, "through relu")
  check_tensor(g2[1], { 0, 4 })
  g2[1]:sum():backward()
  check_tensor(a.grad, { 0, 2 })
end

-- gradients at singularities: PyTorch's formulas, inf where it gives inf
function T.gradients_at_singularities()
  local x, y = leaf({ 0.0, 2.0, -1.0 }), leaf({ 0.0, 0.0, 0.0 })
  ;(x / y):sum():backward()
  check_tensor(x.grad, { inf, inf, inf })
  check_tensor(y.grad, { nan, -inf, inf })
  local x2, y2 = leaf({ 0.0, 2.0, -1.0 }), leaf({ 0.0, 0.0, 0.0 })
  ember.remainder(x2, y2):sum():backward()
  check_tensor(x2.grad, { 1, 1, 1 })
  check_tensor(y2.grad, { nan, -inf, inf })
  local l = leaf({ 0.0, 1.0 })
  l:log():sum():backward()
  check_tensor(l.grad, { inf, 1 })
  local s = leaf({ 0.0, 4.0 })
  s:sqrt():sum():backward()
  check_tensor(s.grad, { inf, 0.25 })
  local e = leaf({ inf, -inf })
  ;(e * 2):exp():sum():backward()
  check_tensor(e.grad, { inf, 0 })
  local p, q = leaf({ inf, 1.0 }), leaf({ 2.0, 0.0 })
  ;(p / q):sum():backward()
  check_tensor(p.grad, { 0.5, inf })
  check_tensor(q.grad, { -inf, -inf })
  local z = leaf({ 0.0, 0.0 })
  z:abs():sum():backward()
  check_tensor(z.grad, { 0, 0 })
end

-- ---- inputs PyTorch refuses ----

-- H: bool subtraction and negation, abs of bool, pow in bool, int ^ -int
function T.H_bool_and_integer_power_refusals()
  local b = ember.tensor({ true, false })
  check_error(function() return b - 1.5 end, "sub", "bool")
  check_error(function() return 1.5 - b end, "sub", "bool")
  check_error(function() return ember.tensor({ 1.0 }) - true end, "sub", "bool")
  check_error(function() return -b end, "neg", "bool")
  check_error(function() return b:abs() end, "abs", "bool")
  check_error(function() return b:pow(b) end, "pow", "bool")
  check_error(function() return ember.tensor({ 2, 3 }) ^ -1 end, "integers to negative integer powers")
  check_error(function() return ember.arange(0, 3, 1, { dtype = "bool" }) end, "arange", "bool")
  -- what PyTorch allows stays allowed
  check_tensor(b ^ 2, { 1, 0 })                         -- torch: tensor([1, 0])
  check_tensor(b + 1.5, { 2.5, 1.5 })
  check_tensor(ember.tensor({ 2, 3 }) ^ ember.tensor({ -1, 2 }), { 0, 9 })
  check_tensor(ember.tensor({ 2, 4 }) ^ -1.0, { 0.5, 0.25 })
  check_tensor(b:sign(), { true, false })
end

-- Q: arange with an integral dtype truncates start, end and step first
function T.Q_arange_integral_dtype_from_float_arguments()
  check_shape(ember.arange(-0.5, 0.5, 2, { dtype = "int64" }), { 0 }) -- torch: tensor([])
  check_tensor(ember.arange(-0.5, 0.5, 2, { dtype = "int32" }), { 0 })
  check_tensor(ember.arange(0.5, 3, 1, { dtype = "int64" }), { 0, 1, 2 })
  check_tensor(ember.arange(-0.5, 2.5, 1, { dtype = "int64" }), { 0, 1 })
  check_error(function() ember.arange(-0.5, 3.2, 0.7, { dtype = "int64" }) end, "step must be nonzero")
end

return T
