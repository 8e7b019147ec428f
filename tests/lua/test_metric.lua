-- test_metric.lua -- the metric family (bilinear, cosine_similarity,
-- pairwise_distance, pdist, cdist, normalize, the losses): values against
-- PyTorch 1.13 (the expected numbers were computed with torch from the same
-- inputs), dtypes, shapes, edge cases, gradients and the errors.
local T = {}
local F = ember.nn.functional

-- deterministic inputs, as torch.arange(1, n + 1) * 0.7 -> sin (S) and * 1.3 -> cos (C)
local function S(...)
  local s, dt = { ... }, "float64"
  if type(s[#s]) == "string" then dt = table.remove(s) end
  local n = 1
  for _, v in ipairs(s) do n = n * v end
  return (ember.arange(1, n + 1):double() * 0.7):sin():reshape(s):to(dt)
end
local function C(...)
  local s, dt = { ... }, "float64"
  if type(s[#s]) == "string" then dt = table.remove(s) end
  local n = 1
  for _, v in ipairs(s) do n = n * v end
  return (ember.arange(1, n + 1):double() * 1.3):cos():reshape(s):to(dt)
end
-- 1..n in the given shape (int64)
local function I(...)
  local n = 1
  for _, s in ipairs({ ... }) do n = n * s end
  return ember.arange(1, n + 1):reshape(...)
end

-- positive inputs: |S| + 0.1
local function P(...) return S(...):abs() + 0.1 end

local function expect(t, want, dtype, shape, tol)
  check_eq(t.dtype, dtype, "dtype")
  check_shape(t, shape)
  check_tensor(t, want, tol > 0 and tol or nil)
end

function T.values_bilinear()
  expect(F.bilinear(S(3,4), C(3,5), S(2,4,5), C(2)), {{0.0196983683, -1.1946971184}, {-0.0490510415, -0.6150750903}, {1.1688366276, -0.7883804481}}, "float64", {3, 2}, 1e-10)
  expect(F.bilinear(S(2,3,4, 'float32'), C(2,3,5, 'float32'), S(2,4,5, 'float32')), {{{-0.2478003502, -0.3378084302}, {-0.3165499568, 0.2418136597}, {0.9013378024, 0.0685082525}}, {{-1.3498437405, -0.5054959059}, {1.5446120501, 0.9407140613}, {-1.442841053, -1.2439035177}}}, "float32", {2, 3, 2}, 1e-05)
  expect(ember.bilinear(S(4), C(5), S(2,4,5), C(2)), {0.0196983683, -1.1946971184}, "float64", {2}, 1e-10)
  expect(F.bilinear(I(2,3), I(2,3), I(2,3,3)), {{228, 552}, {1245, 3270}}, "int64", {2, 2}, 0)
  expect(F.bilinear(ember.zeros(0,3), ember.zeros(0,2), ember.ones(4,3,2)), {}, "float32", {0, 4}, 0)
end

function T.values_cosine_similarity()
  expect(F.cosine_similarity(S(3,4), C(3,4)), {-0.6118331912, 0.4056964823, -0.1832918454}, "float64", {3}, 1e-10)
  expect(F.cosine_similarity(S(3,4, 'float32'), C(1,4, 'float32'), 1), {0.24412781, -0.3026554286, -0.3060570061, 0.289352715}, "float32", {4}, 1e-05)
  expect(F.cosine_similarity(S(3,4):t(), C(4,3), -1, 0.5), {0.5438876819, -0.2219904037, 0.1781090417, -0.2935053546}, "float64", {4}, 1e-10)
  expect(F.cosine_similarity(I(2,3), S(2,3, 'float32')), {0.9528344274, -0.6447701454}, "float32", {2}, 1e-05)
  expect(F.cosine_similarity(ember.zeros(2,3), C(2,3, 'float32')), {0.0, 0.0}, "float32", {2}, 1e-05)
  expect(F.cosine_similarity(ember.tensor(2.0), ember.tensor(-3.0), 1), -1.0, "float32", {}, 1e-06)
  expect(F.cosine_similarity(ember.zeros(0,3), ember.zeros(0,3)), {}, "float32", {0}, 0)
  expect(F.cosine_similarity(S(2,3, 'bfloat16'), C(2,3, 'bfloat16')), {-0.765625, -0.216796875}, "bfloat16", {2}, 0.02)
end

function T.values_pairwise_distance()
  expect(F.pairwise_distance(S(3,4), C(3,4)), {2.4656310858, 1.6200810202, 2.2807336352}, "float64", {3}, 1e-10)
  expect(F.pairwise_distance(S(3,4), C(4), 1, 1e-6, true), {{3.941729534}, {1.989268693}, {3.8647450551}}, "float64", {3, 1}, 1e-10)
  expect(F.pairwise_distance(S(3,4, 'float32'), C(3,4, 'float32'), math.huge), {1.8423395157, 1.3273699284, 1.8487775326}, "float32", {3}, 1e-05)
  expect(F.pairwise_distance(S(3,4), C(3,4), 0), {4.0, 4.0, 4.0}, "float64", {3}, 0)
  expect(F.pairwise_distance(I(2,3), I(2,3):flip(2)), {2.8284270763, 2.8284270763}, "float32", {2}, 1e-05)
  expect(F.pairwise_distance(ember.tensor(1.0), ember.tensor(3.5)), 2.4999990463, "float32", {}, 1e-06)
  expect(F.pairwise_distance(S(3), C(3), 3, 0), 2.1771689284, "float64", {}, 1e-10)
end

function T.values_pdist()
  expect(F.pdist(S(5,3), 2.0), {2.2114748252, 2.4446294942, 0.0156389053, 2.2296036635, 1.61355425, 2.2082013144, 0.023765119, 2.4519816375, 1.6024596521, 2.2264357018}, "float64", {10}, 1e-10)
  expect(F.pdist(S(5,3), 0.0), {3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0}, "float64", {10}, 1e-10)
  expect(F.pdist(S(5,3), 1.0), {3.3802476338, 4.0897821339, 0.0240978739, 3.4199533107, 2.4863138459, 3.3871245906, 0.0397056769, 4.0966590907, 2.4628481441, 3.4268302676}, "float64", {10}, 1e-10)
  expect(F.pdist(S(5,3), 0.5), {9.175761627, 12.0194580898, 0.0665286272, 9.3214711233, 6.8641344601, 9.2319927185, 0.1165873926, 12.0289802045, 6.7718215722, 9.3764622804}, "float64", {10}, 1e-10)
  expect(F.pdist(S(5,3), 1.5), {2.5204680051, 2.8884353001, 0.0178439109, 2.5442549034, 1.84105713, 2.5198321629, 0.0280629946, 2.895417755, 1.8272437875, 2.5437287684}, "float64", {10}, 1e-10)
  expect(F.pdist(S(5,3), 3.0), {1.9692151092, 2.0905344259, 0.0139938379, 1.9831718731, 1.4438233448, 1.9641350652, 0.0203393646, 2.0985271984, 1.4332173711, 1.9781642638}, "float64", {10}, 1e-10)
  expect(F.pdist(S(5,3), math.huge), {1.7347851391, 1.6266702999, 0.0127689115, 1.7429051266, 1.3174407628, 1.7261746805, 0.0158897878, 1.6394392113, 1.301550975, 1.7342946681}, "float64", {10}, 1e-10)
  expect(F.pdist(S(4,3, 'float32')), {2.2114748955, 2.4446296692, 0.0156389326, 1.6135542393, 2.20820117, 2.4519817829}, "float32", {6}, 1e-05)
  expect(ember.pdist(S(3,4):t()), {0.893020305, 1.1791915911, 0.9360435721, 0.3700238581, 0.7210404786, 0.648220647}, "float64", {6}, 1e-10)
  expect(F.pdist(S(1,3)), {}, "float64", {0}, 0)
  expect(F.pdist(ember.zeros(3,0)), {0.0, 0.0, 0.0}, "float32", {3}, 0)
end

function T.values_cdist()
  expect(F.cdist(S(3,4), C(2,4), 2.0), {{2.4656295954, 2.2495308296}, {1.2875614181, 1.6200824756}, {2.3327798145, 2.6526133079}}, "float64", {3, 2}, 1e-10)
  expect(F.cdist(S(3,4), C(2,4), 0.0), {{4.0, 4.0}, {4.0, 4.0}, {4.0, 4.0}}, "float64", {3, 2}, 1e-10)
  expect(F.cdist(S(3,4), C(2,4), 1.0), {{3.941727534, 3.9707676243}, {1.989272693, 2.3579154373}, {3.8647430551, 4.9142779049}}, "float64", {3, 2}, 1e-10)
  expect(F.cdist(S(3,4), C(2,4), 0.5), {{12.9393380801, 14.6989533924}, {6.0648076905, 6.5824673256}, {13.4078467136, 18.812836175}}, "float64", {3, 2}, 1e-10)
  expect(F.cdist(S(3,4), C(2,4), 1.5), {{2.8391724325, 2.6752594437}, {1.4639074746, 1.8147969923}, {2.7144590113, 3.2230582409}}, "float64", {3, 2}, 1e-10)
  expect(F.cdist(S(3,4), C(2,4), 3.0), {{2.1773363391, 1.9577043076}, {1.1655601101, 1.4630870669}, {2.0471385132, 2.2370534638}}, "float64", {3, 2}, 1e-10)
  expect(F.cdist(S(3,4), C(2,4), math.huge), {{1.8423384834, 1.8109309688}, {1.0997833092, 1.3273708534}, {1.7141005381, 1.935889836}}, "float64", {3, 2}, 1e-10)
  expect(F.cdist(S(2,1,3,4), C(3,2,4)), {{{{2.4656295954, 2.2495308296}, {1.2875614181, 1.6200824756}, {2.3327798145, 2.6526133079}}, {{1.6804958896, 1.2515240735}, {2.2285291368, 2.4520463341}, {2.2807327067, 1.3065084784}}, {{2.0244031529, 2.5011377828}, {2.4749345217, 1.9266650589}, {1.319464938, 1.9480512112}}}, {{{1.5370837286, 0.8880149983}, {1.9486833983, 2.7507504951}, {1.9071419906, 0.7112087765}}, {{1.4986480905, 2.237057384}, {2.6451312092, 1.5850073834}, {0.6813393825, 1.8372356931}}, {{2.7578919745, 2.4109081313}, {0.5951381925, 1.1591999557}, {2.7602649151, 2.6854289565}}}}, "float64", {2, 3, 3, 2}, 1e-10)
  expect(F.cdist(S(3,4, 'float32'), C(2,4, 'float32'), 2, 'use_mm_for_euclid_dist'), {{2.4656295776, 2.2495307922}, {1.2875614166, 1.6200824976}, {2.3327798843, 2.6526134014}}, "float32", {3, 2}, 1e-05)
  expect(ember.cdist(S(4,3):t(), C(2,4)), {{1.2898880702, 1.2938734175}, {1.0249856754, 1.6321486133}, {1.0275301318, 1.9502992214}}, "float64", {3, 2}, 1e-10)
  local big = F.cdist(S(30,3), C(2,3))
  check_tensor(big, {{2.4620112582, 0.8281553798}, {0.5309516282, 1.6236844637}, {1.4713789006, 2.1660763348}, {2.4604907889, 0.8226086665}, {0.5165339405, 1.6425159562}, {1.4792326111, 2.1539218817}, {2.4586740762, 0.8170388828}, {0.5028379851, 1.6612572134}, {1.4871511756, 2.1416001459}, {2.4565598609, 0.8114437652}, {0.4899147864, 1.6799020973}, {1.4951375262, 2.1291160795}, {2.4541469811, 0.8058213648}, {0.4778164882, 1.6984445583}, {1.5031944354, 2.1164746986}, {2.4514343731, 0.8001700621}, {0.4665956352, 1.7168786339}, {1.5113245115, 2.1036810814}, {2.4484210709, 0.7944885812}, {0.4563042665, 1.7351984477}, {1.5195301936, 2.0907403672}, {2.4451062071, 0.7887760042}, {0.4469928233, 1.7533982083}, {1.5278137474, 2.0776577547}, {2.4414890123, 0.7830317866}, {0.4387088872, 1.7714722089}, {1.5361772612, 2.0644385002}, {2.437568816, 0.7772557718}, {0.4314957913, 1.7894148259}, {1.5446226421, 2.0510879161}}, 1e-10)
  check_tensor(F.cdist(S(30,3), C(2,3), 2, 'donot_use_mm_for_euclid_dist'), {{2.4620112582, 0.8281553798}, {0.5309516282, 1.6236844637}, {1.4713789006, 2.1660763348}, {2.4604907889, 0.8226086665}, {0.5165339405, 1.6425159562}, {1.4792326111, 2.1539218817}, {2.4586740762, 0.8170388828}, {0.5028379851, 1.6612572134}, {1.4871511756, 2.1416001459}, {2.4565598609, 0.8114437652}, {0.4899147864, 1.6799020973}, {1.4951375262, 2.1291160795}, {2.4541469811, 0.8058213648}, {0.4778164882, 1.6984445583}, {1.5031944354, 2.1164746986}, {2.4514343731, 0.8001700621}, {0.4665956352, 1.7168786339}, {1.5113245115, 2.1036810814}, {2.4484210709, 0.7944885812}, {0.4563042665, 1.7351984477}, {1.5195301936, 2.0907403672}, {2.4451062071, 0.7887760042}, {0.4469928233, 1.7533982083}, {1.5278137474, 2.0776577547}, {2.4414890123, 0.7830317866}, {0.4387088872, 1.7714722089}, {1.5361772612, 2.0644385002}, {2.437568816, 0.7772557718}, {0.4314957913, 1.7894148259}, {1.5446226421, 2.0510879161}}, 1e-10)
  expect(F.cdist(ember.zeros(0,3):double(), C(2,3)), {}, "float64", {0, 2}, 0)
  expect(F.cdist(ember.zeros(2,0), ember.zeros(3,0)), {{0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}}, "float32", {2, 3}, 0)
end

function T.values_normalize()
  expect(F.normalize(S(3,4)), {{0.4301025529, 0.6579211547, 0.5763091571, 0.2236499578}, {-0.2340425909, -0.5815154086, -0.6554924432, -0.4211811394}, {0.0114971582, 0.4492401312, 0.6756984509, 0.5843652311}}, "float64", {3, 4}, 1e-10)
  expect(F.normalize(S(3,4, 'float32'), 1, 1), {{0.6366952062, 0.3919828832, 0.3046087027, 0.1839731187}, {-0.3466871679, -0.3466871977, -0.3466871679, -0.3466871977}, {0.0166175663, 0.2613299191, 0.3487040997, 0.4693396688}}, "float32", {3, 4}, 1e-05)
  expect(F.normalize(S(2,3,2), math.huge, 3, 0.5), {{{0.6537296299, 1.0}, {1.0, 0.388072886}, {-0.4024701452, -1.0}}, {{-1.0, -0.6425415636}, {0.0255924558, 1.0}, {1.0, 0.8648313908}}}, "float64", {2, 3, 2}, 1e-10)
  expect(F.normalize(ember.zeros(2,2)), {{0.0, 0.0}, {0.0, 0.0}}, "float32", {2, 2}, 0)
  expect(F.normalize(S(4), 2, 1), {0.4301025529, 0.6579211547, 0.5763091571, 0.2236499578}, "float64", {4}, 1e-10)
end

function T.grads_distances()
  local z = ember.zeros(2,3,{dtype='float64', requires_grad=true})
  F.cosine_similarity(z, C(2,3)):sum():backward()
  check_tensor(z.grad, {{23170785.12855867, -74223821.03682011, -62880355.49533942}, {43201128.006498195, 90049489.40566021, 4975137.8620143505}}, 1e-10)
  local x = S(3,4):requires_grad_()
  F.cosine_similarity(x, C(3,4)):sum():backward()
  check_tensor(x.grad, {{0.3190309549, -0.1904240641, -0.1535866898, 0.3424163744}, {0.5057212076, 0.1818454986, -0.251865621, -0.1401065821}, {0.2961622489, 0.4692838663, 0.0109089381, -0.3792103134}}, 1e-10)
  z = ember.zeros(2,3,{dtype='float64', requires_grad=true})
  F.normalize(z):sum():backward()
  check_tensor(z.grad, {{1000000000000.0, 1000000000000.0, 1000000000000.0}, {1000000000000.0, 1000000000000.0, 1000000000000.0}}, 1e-10)
  x = S(3,2):requires_grad_(); local y = S(3,2):requires_grad_()
  F.cdist(x, y, 2, 'use_mm_for_euclid_dist'):sum():backward()
  check_tensor(x.grad, {{0.153209172, 1.8291772124}, {1.0283469441, -0.2427966521}, {-1.1815561161, -1.5863805602}}, 1e-8)
  check_tensor(y.grad, {{0.153209172, 1.8291772124}, {1.0283469441, -0.2427966521}, {-1.1815561161, -1.5863805602}}, 1e-8)
  x = S(3,2):requires_grad_(); local y = S(3,2):requires_grad_()
  F.cdist(x, y, 2, 'donot_use_mm_for_euclid_dist'):sum():backward()
  check_tensor(x.grad, {{0.153209172, 1.8291772124}, {1.0283469441, -0.2427966521}, {-1.1815561161, -1.5863805602}}, 1e-8)
  check_tensor(y.grad, {{0.153209172, 1.8291772124}, {1.0283469441, -0.2427966521}, {-1.1815561161, -1.5863805602}}, 1e-8)
  x = ember.tensor({{1,2},{1,2},{0,5}}, {dtype='float64', requires_grad=true})
  F.pdist(x, 1.5):sum():backward()
  check_tensor(x.grad, {{0.5444516301, -0.9430178856}, {0.5444516301, -0.9430178856}, {-1.0889032602, 1.8860357712}}, 1e-10)
  x = S(3,4):requires_grad_(); y = C(2,4):requires_grad_()
  F.cdist(x, y, math.huge):backward(C(3,2))
  check_tensor(x.grad, {{0.0, 0.2674988286, -0.8568887534, 0.0}, {-0.4685166713, 0.0, 0.0, 0.7259323042}, {0.0, 0.0, 1.0305430463, 0.0}}, 1e-10)
  check_tensor(y.grad, {{0.0, -0.2674988286, -0.9765876257, -0.7259323042}, {0.4685166713, 0.0, 0.8029333328, 0.0}}, 1e-10)
  x = S(2,1,3,4):requires_grad_(); y = C(3,2,4):requires_grad_()
  F.cdist(x, y, 0.5):sum():backward()
  check_tensor(x.grad, {{{{-35.0730873885, 27.355384913, 7.8482180829, -11.4127950454}, {26.3065157632, -22.3571816128, -31.3100269609, -18.1146261953}, {-5.3172738747, -0.1229451865, 27.9878339553, 10.824240565}}}, {{{16.3321018772, -10.068849954, -10.9454495765, 4.7403082802}, {-22.3261847704, -24.5224713211, 1.3056319756, 35.7234432159}, {13.3904941607, 10.3210298743, -9.0418188057, -12.4768487568}}}}, 1e-10)
  check_tensor(y.grad, {{{-7.2144149046, 3.7457290952, -3.6808241827, 6.2340201394}, {25.3686632979, 19.8934180208, -7.262953926, 6.3149071018}}, {{55.6176327109, 11.0141369536, 0.9472258522, -42.3901070613}, {-32.6324982731, 15.6413997153, 1.419095518, 8.7353007935}}, {{-20.647356285, -2.9208665874, 19.843513958, 6.6779278631}, {-13.8045923136, -27.9787839105, 2.8895541099, 5.1442291}}}, 1e-10)
end

function T.cosine_similarity_clamp_keeps_the_norm_gradient()
  -- PyTorch 1.13 clamps the squared norms under no_grad, then sqrt: below
  -- eps the value is eps and d|x|/dx is x / eps (torch's numbers)
  local x = ember.tensor({ 0.3, -0.2, 0.1 }, { dtype = "float64", requires_grad = true })
  local y = ember.tensor({ 0.5, 1.5, -2.0 }, { dtype = "float64" })
  local c = F.cosine_similarity(x, y, 1, 0.5)
  check_near(c:item(), -0.27456258919345766, 1e-12)
  c:backward()
  check_tensor(x.grad, { 0.72170738, 0.95704674, -1.45910405 }, 1e-7)
  -- inf rows: p = inf skips the NaN of inf - inf, p = 0 and 1 propagate it
  local r = ember.tensor({ { -0.5, math.huge }, { 1, 2 } })
  check_tensor(F.cdist(r, r, math.huge), { { 0, math.huge }, { math.huge, 0 } })
  check_tensor(F.cdist(r, r, 0), { { 0 / 0, 2 }, { 2, 0 } })
  check_tensor(F.cdist(r, r, 1), { { 0 / 0, math.huge }, { math.huge, 0 } })
end

function T.double_backward_through_the_distances()
  -- a plain backward runs the kernel ops _pdist_backward/_cdist_backward;
  -- create_graph records the same terms as ops (values against PyTorch's
  -- first derivative; gradgradcheck in test_gradcheck checks the second)
  for _, p in ipairs({ 0.5, 1, 1.5, 2, 3, math.huge }) do
    local x = S(4, 3):requires_grad_()
    local g1 = ember.autograd.grad({ F.pdist(x, p):sum() }, { x })[1]
    local g2 = ember.autograd.grad({ F.pdist(x, p):sum() }, { x }, { create_graph = true })[1]
    check(g2.requires_grad, "pdist create_graph")
    check_tensor(g2:detach(), g1:tolist(), 1e-12)
    local y, z = S(2, 3, 3):requires_grad_(), C(3, 3):requires_grad_()
    local h1 = ember.autograd.grad({ F.cdist(y, z, p):sum() }, { y, z })
    local h2 = ember.autograd.grad({ F.cdist(y, z, p):sum() }, { y, z }, { create_graph = true })
    check_tensor(h2[1]:detach(), h1[1]:tolist(), 1e-12)
    check_tensor(h2[2]:detach(), h1[2]:tolist(), 1e-12)
    h2[1]:sum():backward()
  end
end

function T.errors_distances()
  check_error(function() return F.bilinear(S(3, 4), S(3, 5), S(2, 4, 4)) end, "bilinear", "input2", "5", "4")
  check_error(function() return F.bilinear(S(3, 4), S(2, 4), S(2, 4, 4)) end, "bilinear", "batch", "3", "2")
  check_error(function() return F.bilinear(S(3, 4), S(3, 4), S(4, 4)) end, "bilinear", "weight", "3-d")
  check_error(function() return F.bilinear(S(3, 4), S(3, 4), S(2, 4, 4), S(3)) end, "bilinear", "bias", "{2}")
  check_error(function() return F.bilinear(S(3, 4), S(3, 1, 4), S(2, 4, 4)) end, "bilinear", "dims")
  check_error(function() return F.cosine_similarity(I(3, 2), I(3, 2)) end, "cosine_similarity", "floating", "int64")
  check_error(function() return F.cosine_similarity(S(3, 2), S(4, 2)) end, "cosine_similarity", "{3,2}", "{4,2}")
  check_error(function() return F.cosine_similarity(S(3, 2), S(3, 2), 3) end, "cosine_similarity", "dim")
  check_error(function() return F.cosine_similarity(S(3), S(3)) end, "cosine_similarity", "dim")
  check_error(function() return F.pairwise_distance(S(3, 2), S(4, 2)) end, "pairwise_distance", "{3,2}", "{4,2}")
  check_error(function() return F.pdist(S(2, 3, 2)) end, "pdist", "2-d", "3-d")
  check_error(function() return F.pdist(S(3, 2), -1) end, "pdist", "p", "non-negative")
  check_error(function() return F.pdist(I(3, 2)) end, "pdist", "float", "int64")
  check_error(function() return F.pdist(S(3, 2, "float16")) end, "pdist", "float16")
  check_error(function() return F.cdist(S(3), S(3)) end, "cdist", "x1", "2 dims")
  check_error(function() return F.cdist(S(3, 2), S(3, 4)) end, "cdist", "{3,2}", "{3,4}", "columns")
  check_error(function() return F.cdist(S(3, 2), S(3, 2), -1) end, "cdist", "p", "non-negative")
  check_error(function() return F.cdist(S(2, 3, 2), S(3, 4, 2)) end, "cdist", "broadcast")
  check_error(function() return F.cdist(S(3, 2), S(3, 2), 2, "foo") end, "cdist", "compute_mode", "foo")
  check_error(function() return F.cdist(S(3, 2), S(3, 2, "float32")) end, "cdist", "float64", "float32")
  check_error(function() return F.cdist(I(3, 2), I(3, 2)) end, "cdist", "x1", "int64")
  check_error(function() return F.normalize(I(3, 2)) end, "normalize", "floating", "int64")
  check_error(function() return F.normalize(S(3)) end, "normalize", "dim")
  check_error(function() return ember._cdist_forward(S(2, 3, 2), S(3, 2), 2) end, "_cdist_forward", "batch")
  check_error(function() return ember._euclidean_dist(S(3, 2), S(3, 4)) end, "_euclidean_dist", "{3,2}", "{3,4}")
  check_error(function() return ember._pdist_backward(S(2), S(3, 2), 2, S(3)) end, "_pdist_backward", "grad", "{3}")
  check_error(function() return ember._cdist_backward(S(3, 3), S(3, 2), S(2, 2), 2, S(3, 2)) end,
    "_cdist_backward", "grad", "{3,2}", "{3,3}")
end

function T.values_losses()
  expect(F.poisson_nll_loss(S(3,4), P(3,4), true, false, {reduction='mean'}), 1.3314135576, "float64", {}, 1e-10)
  expect(F.poisson_nll_loss(S(3,4), P(3,4), true, false, {reduction='sum'}), 15.9769626906, "float64", {}, 1e-10)
  expect(F.poisson_nll_loss(S(3,4), P(3,4), true, false, {reduction='none'}), {{1.4250583371, 1.6093603042, 1.5393057788, 1.2522079442}, {0.8622635702, 1.2650938011, 1.4378501313, 0.993541859}, {1.0149919524, 1.4316407536, 1.6110159907, 1.5346322679}}, "float64", {3, 4}, 1e-10)
  expect(F.poisson_nll_loss(P(3,4), C(3,4):abs() * 3, false, true, {eps=1e-3}), 2.3248395176, "float64", {}, 1e-10)
  expect(F.poisson_nll_loss(S(3,4,'float32'), I(4), true, true), 2.3659188747, "float32", {}, 1e-05)
  expect(F.gaussian_nll_loss(S(3,4), C(3,4), P(3,4)), 0.6055779432, "float64", {}, 1e-10)
  expect(F.gaussian_nll_loss(S(3,4), C(3,4), P(3), true, 1e-6, 'none'), {{0.8665741816, 3.0516163034, 2.4678893562, 0.7832066168}, {1.771540975, 1.3545224028, 0.9604913747, 0.9622111088}, {1.1067383484, 0.9327594645, 1.5870408504, 2.6744599104}}, "float64", {3, 4}, 1e-10)
  expect(F.gaussian_nll_loss(S(3,4), C(4), P(3,1) * 0.01, false, 0.05, 'sum'), 113.8156600606, "float64", {}, 1e-10)
  expect(F.cosine_embedding_loss(S(3,4), C(3,4), ember.tensor({1,-1,1})), 1.0669405063, "float64", {}, 1e-10)
  expect(F.cosine_embedding_loss(S(3,4), C(3,4), ember.tensor({1.0,-1,0}), -0.2, {reduction='none'}), {1.6118331912, 0.6056964823, 0.0}, "float64", {3}, 1e-10)
  expect(F.cosine_embedding_loss(S(4), C(4), ember.tensor(-1), -0.5), 0.0, "float64", {}, 1e-10)
  expect(F.margin_ranking_loss(S(5), C(5), ember.tensor({1,-1,1,1,-1})), 0.3951734009, "float64", {}, 1e-10)
  expect(F.margin_ranking_loss(S(2,3), C(2,3), S(2,3):sign(), 0.3, {reduction='none'}), {{0.0, 0.0, 0.0}, {0.4335285211, 0.0, 0.0}}, "float64", {2, 3}, 1e-10)
  expect(F.triplet_margin_loss(S(3,4), C(3,4), S(3,4) * 2), 1.6357945001, "float64", {}, 1e-10)
  expect(F.triplet_margin_loss(S(3,4), C(3,4), S(3,4) * 2, 0.5, 1, 1e-6, true, {reduction='none'}), {1.6138685999, 0.0218291867, 1.8637381834}, "float64", {3}, 1e-10)
  expect(F.triplet_margin_loss(S(4,'float32'), C(4,'float32'), S(4,'float32') * 2, 2, math.huge), 2.8568906784, "float32", {}, 1e-05)
  expect(F.hinge_embedding_loss(S(3,4), S(3,4):sign()), 1.0150425688, "float64", {}, 1e-10)
  expect(F.hinge_embedding_loss(S(3,4), ember.tensor({1,-1,0,1}), 0.5, {reduction='none'}), {{0.6442176872, 0.0, 0.8632093666, 0.3349881502}, {-0.3507832277, 1.3715757724, 0.5, -0.6312666379}, {0.0168139005, 0.0, 0.9881682339, 0.8545989081}}, "float64", {3, 4}, 1e-10)
  expect(F.multi_margin_loss(S(3,4), ember.tensor({1,4,2})), 0.7357169777, "float64", {}, 1e-10)
  expect(F.multi_margin_loss(S(3,4), ember.tensor({1,4,2}), 2, 0.7, C(4), {reduction='none'}), {0.1391937797, 0.1516043385, -0.4011573389}, "float64", {3}, 1e-10)
  expect(F.multi_margin_loss(S(4,'float32'), ember.tensor(3), 1, 1, nil, {reduction='sum'}), 0.5937568545, "float32", {}, 1e-05)
  expect(F.multi_margin_loss(S(4), ember.tensor({3}), 1, 1, nil, {reduction='none'}), {0.5937568669}, "float64", {1}, 1e-10)
  expect(F.multi_margin_loss(S(4), ember.tensor(3), 1, 1, nil, {reduction='none'}), 0.5937568669, "float64", {}, 1e-10)
  expect(F.soft_margin_loss(S(3,4), C(3,4):sign()), 0.8287497985, "float64", {}, 1e-10)
  expect(F.soft_margin_loss(S(3,4)*30, C(3,4):sign(), {reduction='none'}), {{4e-09, 29.5634918997, 25.8962809995, 4.32002e-05}, {10.5235237273, 26.1472731724, 0.0, 6e-09}, {0.4724116732, 2.8e-09, 29.6450470163, 25.6379672427}}, "float64", {3, 4}, 1e-10)
  expect(F.multilabel_soft_margin_loss(S(3,4) * 5, C(3,4):gt(0):double()), 2.144280372, "float64", {}, 1e-10)
  expect(F.multilabel_soft_margin_loss(S(3,4), C(3,4):gt(0):double(), P(4), {reduction='none'}), {0.7833013633, 0.6187447364, 0.6863857765}, "float64", {3}, 1e-10)
  expect(F.multilabel_soft_margin_loss(S(4), C(4):gt(0):double(), nil, {reduction='sum'}), 0.8698600871, "float64", {}, 1e-10)
  expect(F.hinge_embedding_loss(ember.zeros(0), ember.zeros(0)), 0/0, "float32", {}, 0)
  expect(F.margin_ranking_loss(ember.zeros(0), ember.zeros(0), ember.zeros(0), 0, {reduction='sum'}), 0.0, "float32", {}, 0)
end

-- PyTorch 1.13's kernel never computes the skipped terms (j = y or z <= 0),
-- so an inf/NaN class weight gives neither NaN values nor NaN gradients there
function T.multi_margin_loss_nonfinite_weight()
  local F = ember.nn.functional
  local x = ember.tensor({{-0.25, -0.25}, {-0.25, -0.25}})
  check(F.multi_margin_loss(x, ember.tensor({1, 1}), 2, 0.0, ember.tensor({-1/0, 0/0})):item() == 0)
  x = ember.tensor({{-0.25, -0.25, 0.5}, {1.0, 0.0, 2.0}}, {requires_grad = true})
  local l = F.multi_margin_loss(x, ember.tensor({1, 3}), 2, 0.3, ember.tensor({-1/0, 0/0, 2.0}))
  l:backward()
  check(l:item() == -math.huge)
  -- torch: [[inf, -inf, -inf], [0, 0, 0]]
  local g = x.grad:tolist()
  check(g[1][1] == math.huge and g[1][2] == -math.huge and g[1][3] == -math.huge)
  check(g[2][1] == 0 and g[2][2] == 0 and g[2][3] == 0)
end

function T.grads_losses()
  do
    local a = S(3,4):requires_grad_()
    F.multi_margin_loss(a, ember.tensor({1,4,2}), 2, 0.7, C(4)):backward()
    check_tensor(a.grad, {{-0.1048146984, 0.046421392, 0.040971533, 0.0174217735}, {0.0765621373, 0.0358954724, 0.027237531, -0.1396951406}, {-0.0085442237, 0.2840045301, -0.147267991, -0.1281923155}}, 1e-9)
  end
  do
    local a = S(3,4):requires_grad_()
    local b = S(3,4):requires_grad_()
    F.cosine_embedding_loss(a, b, ember.tensor({1,-1,1}), 0.1):backward()
    check_tensor(a.grad, {{-0.0, -0.0, -0.0, -0.0}, {-0.0, -0.0, -0.0, -0.0}, {-0.0, -0.0, -0.0, -0.0}}, 1e-9)
    check_tensor(b.grad, {{-0.0, -0.0, -0.0, -0.0}, {-0.0, -0.0, -0.0, -0.0}, {-0.0, -0.0, -0.0, -0.0}}, 1e-9)
  end
  do
    local a = S(3,4):requires_grad_()
    local b = S(3,4):requires_grad_()
    F.gaussian_nll_loss(a, C(3,4), b:abs() * 0.01, false, 0.005):backward()
    check_tensor(a.grad, {{4.8730792153, 15.5795067241, 15.3414082014, -2.2254753524}, {-22.122847557, -8.8492133278, -0.2945944504, -0.92779575}, {-10.5130406362, -3.1768809189, 9.7004625237, 18.0277215016}}, 1e-9)
    check_tensor(b.grad, {{-1.360136132, -14.5209799066, -14.0732588569, -0.2138310993}, {29.2818897084, 4.650708459, -0.0372037132, -0.0143565637}, {-6.5481080717, -0.5421334648, -5.6037728307, -19.4511687369}}, 1e-9)
  end
  do
    local a = S(3,4):requires_grad_()
    local b = S(3,4):requires_grad_()
    local c = S(3,4):requires_grad_()
    F.triplet_margin_loss(a, b, c, 1, 2, 1e-6, true):backward()
    check_tensor(a.grad, {{0.0833333333, 0.0833333333, 0.0833333333, 0.0833333333}, {0.0833333333, 0.0833333333, 0.0833333333, 0.0833333333}, {0.0833333333, 0.0833333333, 0.0833333333, 0.0833333333}}, 1e-9)
    check_tensor(b.grad, {{-0.25, -0.25, -0.25, -0.25}, {-0.25, -0.25, -0.25, -0.25}, {-0.25, -0.25, -0.25, -0.25}}, 1e-9)
    check_tensor(c.grad, {{0.1666666667, 0.1666666667, 0.1666666667, 0.1666666667}, {0.1666666667, 0.1666666667, 0.1666666667, 0.1666666667}, {0.1666666667, 0.1666666667, 0.1666666667, 0.1666666667}}, 1e-9)
  end
  do
    local a = S(3,4):requires_grad_()
    F.multilabel_soft_margin_loss(a, C(3,4):gt(0):double(), C(4):abs()):backward()
    check_tensor(a.grad, {{-0.0076748479, 0.0519980249, 0.0425475425, -0.0162820251}, {-0.0130808598, -0.0503474611, 0.0164789901, 0.0135566621}, {-0.0110520847, -0.0243796886, 0.0440838098, 0.0273899132}}, 1e-9)
  end
end

function T.losses_edges()
  -- soft_margin_loss keeps input's dtype; multi_margin_loss skips NaN margins (PyTorch's z > 0)
  expect(F.soft_margin_loss(S(2, "float32"), S(2), { reduction = "none" }), { 0.5070160627365112, 0.32111355662345886 }, "float32", { 2 }, 1e-6)
  local x = ember.tensor({ { math.huge, math.huge, 0 } })
  check_tensor(F.multi_margin_loss(x, ember.tensor({ 1 })), { 0 })
  -- a 1-d input with a 0-dim or {1} target
  check_shape(F.multi_margin_loss(S(4), ember.tensor(3), 1, 1, nil, { reduction = "none" }), {})
  check_shape(F.multi_margin_loss(S(4), ember.tensor({ 3 }), 1, 1, nil, { reduction = "none" }), { 1 })
end

function T.errors_losses()
  check_error(function() return F.poisson_nll_loss(S(3), S(3), true, false, { reduction = "avg" }) end,
    "poisson_nll_loss", "reduction", "avg")
  check_error(function() return F.poisson_nll_loss(S(3), S(4)) end, "{3}", "{4}")
  check_error(function() return F.gaussian_nll_loss(S(3, 4), S(3, 4), P(2)) end, "gaussian_nll_loss", "var", "{2}", "{3,4}")
  check_error(function() return F.gaussian_nll_loss(S(3, 4), S(3, 4), -P(3, 4)) end, "gaussian_nll_loss", "var", "negative")
  check_error(function() return F.cosine_embedding_loss(S(3, 4), S(3, 4), ember.ones(3, 1)) end,
    "cosine_embedding_loss", "target", "2-d")
  check_error(function() return F.cosine_embedding_loss(S(3, 4), S(4), ember.ones(3)) end,
    "cosine_embedding_loss", "{3,4}", "{4}")
  check_error(function() return F.margin_ranking_loss(S(3, 4), S(3), S(3)) end, "margin_ranking_loss", "{3,4}", "{3}")
  check_error(function() return F.triplet_margin_loss(S(3, 4), S(3, 4), S(4)) end, "triplet_margin_loss", "2-d", "1-d")
  check_error(function() return F.multi_margin_loss(S(3, 4), ember.tensor({ 1, 4, 2 }), 3) end, "multi_margin_loss", "p", "3")
  check_error(function() return F.multi_margin_loss(S(3, 4), ember.tensor({ 1, 5, 2 })) end,
    "multi_margin_loss", "target 5", "4 classes")
  check_error(function() return F.multi_margin_loss(S(3, 4), ember.tensor({ 1, 0, 2 })) end,
    "multi_margin_loss", "target 0", "1-based")
  check_error(function() return F.multi_margin_loss(S(3, 4), ember.tensor({ 1.0, 2, 2 })) end,
    "multi_margin_loss", "target", "int64", "float32")
  check_error(function() return F.multi_margin_loss(S(3, 4), ember.tensor({ 1, 2 })) end, "multi_margin_loss", "{2}", "{3}")
  check_error(function() return F.multi_margin_loss(S(2, 3, 4), ember.tensor({ 1, 2 })) end, "multi_margin_loss", "{2,3,4}")
  check_error(function() return F.multi_margin_loss(S(3, 4), ember.tensor({ 1, 4, 2 }), 1, 1, S(3)) end,
    "multi_margin_loss", "weight", "{4}")
  check_error(function() return F.multi_margin_loss(I(3, 4), ember.tensor({ 1, 4, 2 })) end, "multi_margin_loss", "int64")
  check_error(function() return F.multi_margin_loss(S(3, 0), ember.tensor({ 1, 1, 1 })) end, "multi_margin_loss", "C > 0")
  check_error(function() return F.soft_margin_loss(S(3), S(2)) end, "{3}", "{2}")
  check_error(function() return F.soft_margin_loss(S(3), S(2, 3)) end, "soft_margin_loss", "{2,3}", "{3}")
  check_error(function() return F.soft_margin_loss(I(3), S(3)) end, "soft_margin_loss", "floating")
  check_error(function() return F.soft_margin_loss(S(3), S(3):requires_grad_()) end, "soft_margin_loss", "target")
  check_error(function() return F.multi_margin_loss(S(3, 4), ember.tensor({ 1, 4, 2 }), 1, 1, S(4):requires_grad_()) end,
    "multi_margin_loss", "weight", "grad")
  check_error(function() return F.multilabel_soft_margin_loss(ember.tensor(1.0), ember.tensor(1.0)) end,
    "multilabel_soft_margin_loss", "0-d")
end

return T
