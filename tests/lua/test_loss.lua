-- test_loss.lua -- the loss family: softmax, log_softmax, softmin and
-- their backward ops; the losses. Values are PyTorch 1.13's (computed with
-- torch on the same inputs); errors name the op, the argument and the problem.
local T = {}
local F = ember.nn.functional
local ag = ember.autograd

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end
-- sin(0.7 k) * 3 for k = 0..23, shape {2, 3, 4}: every dim of it is
-- reduced once (dim 3 by rows, dims 1 and 2 by the strided path)
local function x234() return (ember.arange(0, 24, { dtype = "float64" }) * 0.7):sin():reshape(2, 3, 4) * 3 end
local function g234() return (ember.arange(0, 24, { dtype = "float64" }) * 0.3):cos():reshape(2, 3, 4) end

local SOFTMAX = {
  { { { 0.07150505936505173, 0.7261861666410699, 0.9829730877745162, 0.9946681737900777 }, { 0.9809694855288575, 0.6904153160183205, 0.06205929353529846, 0.006991340140838056 }, { 0.00764808899966611, 0.07678883113835418, 0.7429970910601656, 0.9838685092927281 } }, { { 0.9284949406349483, 0.27381383335893006, 0.017026912225483904, 0.005331826209922332 }, { 0.019030514471142422, 0.3095846839816796, 0.9379407064647015, 0.9930086598591621 }, { 0.9923519110003338, 0.9232111688616458, 0.25700290893983435, 0.016131490707271816 } } },
  { { { 0.2575786732398371, 0.8313986605392653, 0.7261635607819265, 0.4067106837077929 }, { 0.7036560356611722, 0.04201836022367576, 0.0027640549120279854, 0.0016017810141380538 }, { 0.03876529109899073, 0.12658297923705894, 0.27107238430604536, 0.591687535278069 } }, { { 0.3987357505066574, 0.16906762092750002, 0.08492247840447134, 0.009107082029443816 }, { 0.0016273761702454692, 0.010161360442092812, 0.2820389976726814, 0.950367661990251 }, { 0.5996368733230972, 0.8207710186304072, 0.6330385239228472, 0.04052525598030515 } } },
  { { { 0.024715600694734913, 0.17073074297731985, 0.4752228449553088, 0.3293308113726365 }, { 0.8519355403060253, 0.10887459698252808, 0.02282414802392744, 0.016365714687519427 }, { 0.005420471886914047, 0.03788004630530253, 0.2585121217350984, 0.6981873600726851 } }, { { 0.8118608183184677, 0.16284963367246677, 0.0208237634354011, 0.004465784573664598 }, { 0.0060433459833134934, 0.017851359718880303, 0.12613593295760142, 0.8499693613402047 }, { 0.5583622783064762, 0.36155942852025025, 0.07099014035386214, 0.009088152819411393 } } },
}
local LOG_SOFTMAX = {
  { { { -2.6379870714351967, -0.3199488691490889, -0.017173536855201642, -0.005346091123241562 }, { -0.019213925375729937, -0.3704619551914303, -2.779665003602293, -4.963083018532291 }, { -4.873299466315115, -2.5666960772901843, -0.29706314939967915, -0.01626301962655561 } }, { { -0.07419034717035226, -1.2953068438141055, -4.072960114576363, -5.234061470984874 }, { -3.9617115632973974, -1.172523608833675, -0.0640685446981196, -0.00701589406949079 }, { -0.007677485613538651, -0.07989728531443065, -1.3586678753189345, -4.126981972809574 } } },
  { { { -1.3564300783972616, -0.18464586325550966, -0.31997999919816505, -0.8996531971546016 }, { -0.35146562792954616, -3.169648608037442, -5.891056506404309, -6.436639134974221 }, { -3.2502299920142264, -2.0668572235155334, -1.3053693930071786, -0.5247765954702228 } }, { { -0.9194563609281093, -1.7774565202558958, -2.466016457404904, -4.698702923141115 }, { -6.420786272646906, -4.589162944015056, -1.2657099279857138, -0.0509063566363017 }, { -0.5114310181083427, -0.19751111387514939, -0.45722399941201186, -3.2058298947781223 } } },
  { { { -3.700320627653717, -1.767667565940644, -0.7439714376883365, -1.1106925277070951 }, { -0.160244411932761, -2.2175585454693354, -3.7799361796412394, -4.112566700273474 }, { -5.217572403314151, -3.2733307882441376, -1.3528126935408196, -0.3592677880661861 } }, { { -0.20842635952388774, -1.814927996740676, -3.8716604715445126, -5.411310363703742 }, { -5.108797449673296, -4.025675598930448, -2.070395120555934, -0.16255497562954097 }, { -0.5827472829918741, -1.0173288566476824, -2.645214279839373, -4.700783601628502 } } },
}

function T.softmax_every_dim_matches_pytorch()
  local x = x234()
  for d = 1, 3 do
    check_tensor(x:softmax(d), SOFTMAX[d], 1e-12, "softmax dim " .. d)
    check_tensor(F.log_softmax(x, d), LOG_SOFTMAX[d], 1e-12, "log_softmax dim " .. d)
    check_tensor(x:softmax(d - 4), SOFTMAX[d], 1e-12, "softmax negative dim " .. d)
    -- float32 through the vector exp
    check_tensor(x:float():softmax(d), SOFTMAX[d], 1e-6, "float32 softmax dim " .. d)
    check_tensor(x:float():log_softmax(d), LOG_SOFTMAX[d], 1e-6, "float32 log_softmax dim " .. d)
  end
  -- non-contiguous input: a transposed view
  local xt = x:transpose(2, 3)
  check(not xt:is_contiguous())
  check_tensor(xt:softmax(3):transpose(2, 3), SOFTMAX[2], 1e-12, "transposed input")
  check_tensor(xt:float():log_softmax(2):transpose(2, 3), LOG_SOFTMAX[3], 1e-6, "transposed float32")
end

function T.softmax_long_float32_row_matches_pytorch()
  -- 37 elements: two blocks of 16 lanes and a tail
  local y = (ember.arange(0, 37, { dtype = "float32" }) * 1.3):sin() * 5
  check_tensor(y:softmax(1), { 0.000923243525903672, 0.11419741809368134, 0.012153838761150837, 2.96381585940253e-05, 1.1140860806335695e-05, 0.0027067202609032393, 0.13602715730667114, 0.004552299622446299, 1.4713442396896426e-05, 2.0449831936275586e-05, 0.007545662112534046, 0.12825211882591248, 0.0015823465073481202, 8.866441930877045e-06, 4.4868007535114884e-05, 0.01906467229127884, 0.09597765654325485, 0.0005363129312172532, 6.641349045821698e-06, 0.00011341835488565266, 0.04180141165852547, 0.05778789147734642, 0.00018645700765773654, 6.267750450206222e-06, 0.00031627906719222665, 0.07666841149330139, 0.028666986152529716, 6.986665539443493e-05, 7.472939159924863e-06, 0.0009273384348489344, 0.11433298140764236, 0.012107699178159237, 2.9542972697527148e-05, 1.1164025636389852e-05, 0.002718443050980568, 0.1360594630241394, 0.004533181432634592 }, 1e-5)
  check_tensor(y:log_softmax(1), { -6.987617492675781, -2.1698265075683594, -4.4101104736328125, -10.426447868347168, -11.404891014099121, -5.912017822265625, -1.9949007034301758, -5.392122745513916, -11.126749038696289, -10.79753589630127, -4.886782646179199, -2.0537571907043457, -6.448846340179443, -11.6332368850708, -10.011785507202148, -3.959918260574341, -2.343639850616455, -7.530792713165283, -11.922195434570312, -9.084426879882812, -3.1748251914978027, -2.85097599029541, -8.587309837341309, -11.980093002319336, -8.05888557434082, -2.568265438079834, -3.552009105682373, -9.56892204284668, -11.804222106933594, -6.983191967010498, -2.16864013671875, -4.413913726806641, -10.429664611816406, -11.402813911437988, -5.907695770263672, -1.9946632385253906, -5.396331310272217 }, 1e-5)
  local s = y:softmax(1):sum():item()
  check_near(s, 1, 1e-6, "sums to 1")
end

-- Note [softmax's exp] (loss_softmax.c): a float32 row whose max - min is at
-- most 86 takes the fast exp, a wider one the general exp; both give PyTorch's
-- values, down to the subnormal results (18 elements: a block of 16 and a tail)
function T.softmax_float32_rows_either_side_of_the_fast_exp()
  local x = ember.tensor({ { 0, -20, -85.5, -1, -40, 3, -82.5, 2.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 },
    { 0, -20, -85.5, -86.5, -90, -103, -1, 2.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 } }, { dtype = "float32" })
  local y, l = x:softmax(2), x:log_softmax(2)
  check_tensor(y, { { 0.022048676386475563, 4.544571316489332e-11, 1.626313366532239e-39, 0.008111255243420601, 9.367059818740402e-20, 0.4428595304489136, 3.2665385439586017e-38, 0.26860788464546204, 0.022048676386475563, 0.022048676386475563, 0.022048676386475563, 0.022048676386475563, 0.022048676386475563, 0.022048676386475563, 0.022048676386475563, 0.022048676386475563, 0.022048676386475563, 0.05993451923131943 },
    { 0.03957471624016762, 8.156957748139959e-11, 2.9190364232442405e-39, 1.0738542495691084e-39, 3.242744776294059e-41, 0.0, 0.01455872505903244, 0.48211875557899475, 0.03957471624016762, 0.03957471624016762, 0.03957471624016762, 0.03957471624016762, 0.03957471624016762, 0.03957471624016762, 0.03957471624016762, 0.03957471624016762, 0.03957471624016762, 0.10757523775100708 } }, 1e-6)
  -- the tiny ones relative to PyTorch's (subnormals keep fewer digits)
  local tiny = { { 1, 3, 1.626313366532239e-39 }, { 1, 7, 3.2665385439586017e-38 }, { 2, 3, 2.9190364232442405e-39 },
    { 2, 4, 1.0738542495691084e-39 }, { 2, 5, 3.242744776294059e-41 } }
  for _, t in ipairs(tiny) do check_near(y[t[1]][t[2]]:item() / t[3], 1, 1e-3, "softmax tiny " .. t[1] .. "," .. t[2]) end
  check_eq(y[2][6]:item(), 0)
  check_tensor(l, { { -3.814502716064453, -23.814502716064453, -89.31449890136719, -4.814502716064453, -43.81450271606445, -0.8145026564598083, -86.31449890136719, -1.3145027160644531, -3.814502716064453, -3.814502716064453, -3.814502716064453, -3.814502716064453, -3.814502716064453, -3.814502716064453, -3.814502716064453, -3.814502716064453, -3.814502716064453, -2.814502716064453 },
    { -3.229564666748047, -23.229564666748047, -88.72956848144531, -89.72956848144531, -93.22956848144531, -106.22956848144531, -4.229564666748047, -0.7295647859573364, -3.229564666748047, -3.229564666748047, -3.229564666748047, -3.229564666748047, -3.229564666748047, -3.229564666748047, -3.229564666748047, -3.229564666748047, -3.229564666748047, -2.229564666748047 } }, 1e-5)
end

function T.softmax_dtypes_and_edges()
  local b = ember.tensor({ { 1, 2, 3 }, { 0.5, 0.25, -1 } }, { dtype = "bfloat16" })
  check_eq(b:softmax(2).dtype, "bfloat16")
  check_tensor(b:softmax(2), { { 0.08984375, 0.2451171875, 0.6640625 }, { 0.5, 0.388671875, 0.111328125 } }, 1e-2)
  check_tensor(b:log_softmax(1), { { -0.474609375, -0.16015625, -0.0181884765625 }, { -0.97265625, -1.9140625, -4.03125 } }, 1e-2)
  check_eq(b:half():softmax(2).dtype, "float16") -- PyTorch CPU has no float16 kernel; ember computes in float32
  -- dtype casts first: integers, and float32 -> float64
  local i = ember.tensor({ 1, 2, 3 })
  local r = ember.softmax(i, 1, { dtype = "float64" })
  check_eq(r.dtype, "float64")
  check_tensor(r, { 0.09003057317038046, 0.24472847105479764, 0.6652409557748219 }, 1e-12)
  check_eq(ember.softmax(i:float(), 1, { dtype = "float64" }).dtype, "float64")
  check_error(function() return i:log_softmax(1) end, "log_softmax", "expected a floating tensor", "int64")
  check_error(function() return ember.tensor({ true }):softmax(1) end, "softmax", "floating", "bool")
  -- inf, NaN, -inf rows as PyTorch: a row with +inf or NaN is NaN, an all -inf row NaN
  local inf, nan = math.huge, 0 / 0
  check_tensor(ember.softmax(ember.tensor({ inf, 1 }), 1), { nan, nan })
  check_tensor(ember.log_softmax(ember.tensor({ nan, 1 }), 1), { nan, nan })
  check_tensor(ember.log_softmax(ember.tensor({ -inf, -inf }), 1), { nan, nan })
  check_tensor(ember.softmax(ember.tensor({ -inf, 1 }), 1), { 0, 1 })
  check_tensor(ember.log_softmax(ember.tensor({ -inf, 1 }), 1), { -inf, 0 })
  check_tensor(ember.log_softmax(ember.tensor({ { -inf, 1 }, { -inf, 2 } }), 1), { { nan, -1.3132616281509399 }, { nan, -0.3132616281509399 } }, 1e-6)
  -- 0-dim and empty tensors
  check_tensor(ember.softmax(ember.tensor(3.0), 1), 1)
  check_tensor(ember.log_softmax(ember.tensor(3.0), -1), 0)
  check_shape(ember.softmax(ember.zeros(2, 0), 1), { 2, 0 })
  check_shape(ember.zeros(0, 3):log_softmax(2), { 0, 3 })
  local e = ember.zeros(2, 0, { dtype = "int64" }):softmax(2)
  check_eq(e.dtype, "int64") -- PyTorch returns empty integer tensors as they are
  check_error(function() return x234():softmax(4) end, "softmax", "dim 4")
  check_error(function() return ember.softmax(x234()) end, "softmax", "dim")
end

local SM_GRAD = { [2] = { { { 0.13291868021745806, 0.22658847279919636, 0.3594470351395407, 0.38795427581105274 }, { -0.08557221404490001, -0.02571777402107591, -0.0015410797942284945, -0.00027642478876967826 }, { -0.04734646617255806, -0.20087069877812044, -0.3579059553453121, -0.387677851022283 } }, { { -0.44462412615192926, -0.2413772364815171, -0.10438404705533101, -0.009427811337846658 }, { -0.00021290519578377311, -0.003290110003831222, -0.02939267722072866, 0.009780246176190667 }, { 0.44483703134771296, 0.24466734648534824, 0.13377672427605972, -0.0003524348383440591 } } },
  [3] = { { { 0.005319920261264515, 0.02912357891000181, 0.019285042728461394, -0.05372854189972779 }, { 0.05060384854887492, -0.025283062555782915, -0.012100476947829716, -0.013220309045262358 }, { 0.0013346315987549937, 0.003013059528470297, -0.0016488486371468926, -0.0026988424900782865 } }, { { -0.03194440193698189, 0.021411302315650357, 0.00764545420310379, 0.002887645418227892 }, { -0.004286636503212059, -0.007476798012459222, -0.020449308564354618, 0.03221274308002596 }, { -0.006885432585516172, 0.009891134628516467, -0.0015808917502065113, -0.0014248102927938 } } } }
local SM_GRADGRAD = { [2] = { { { 0.02869956975579521, -0.12423862158680286, -0.23317598409304377, 0.11189230891925836 }, { -0.028438078781334156, 0.0018880629175678394, -0.0009121818323018844, -0.0010030710506564243 }, { -0.0002614909744610408, 0.12235055866923504, 0.23408816592534576, -0.11088923786860187 } }, { { 0.15947066336735258, 0.15380788272527202, 0.03085350645446713, 0.00034777536143870414 }, { -0.0012493038858675276, -0.0013265334824994958, -0.011030677863483494, -0.0003395379655336979 }, { -0.1582213594814851, -0.15248134924277254, -0.019822828590983638, -8.23739590500591e-06 } } },
  [3] = { { { -0.00011135044913379833, 0.0004839245801246161, -0.0030542720997700254, 0.0026816979687792077 }, { -0.004912884384563259, 0.002527600896538919, 0.0010969021870805976, 0.0012883813009437475 }, { 9.179803512213134e-06, 2.9768766228539104e-05, -1.2568110224475647e-05, -2.638045951627584e-05 } }, { { -0.00189201862290959, 0.001367355036009293, 0.0003931445520525611, 0.00013151903484773776 }, { 0.00022951116961556322, 0.000425648516389127, 0.0014581299396193865, -0.002113289625624081 }, { -7.785582163049013e-05, 9.514989691782394e-05, -1.7510571006814355e-05, 2.164957194805799e-07 } } } }
local LSM_GRAD = { [2] = { { { 0.8390225920284026, 0.8539045648893178, 1.1098893245249386, 0.9757394298119956 }, { -0.07740196359142423, 0.06561089664337617, -0.22611897496459082, -0.5034514083925374 }, { -0.7616206284369783, -0.9195154615326938, -0.8837703495603478, -0.4722880214194581 } }, { { -0.9569319688660127, -0.8361481752157929, -0.5832224561483688, -0.22390673799677502 }, { 0.08725339471221304, 0.3713535104342903, 0.32595475623900055, -0.5334764980923073 }, { 0.8696785741537997, 0.46479466478150255, 0.25726769990936815, 0.7573832360890823 } } },
  [3] = { { { 0.9159105548500309, 0.37446234310239584, -0.7915065508319984, -0.49886634712042865 }, { 0.6170466472046874, 0.10328561553212297, -0.2203787416192308, -0.49995352111757946 }, { -0.7177773631792554, -0.7669865983013551, -0.05445312371968904, 1.5392170852002998 } }, { { 0.9898010017437162, -0.34751090092112746, -0.4418716564217059, -0.20041844440088227 }, { 0.07580581973818346, 0.3434374612100917, 0.3906346809034553, -0.8098779618517304 }, { -1.1202800887061708, -0.34730695485263063, 0.6857242791947146, 0.7818627643640866 } } } }
local LSM_GRADGRAD = { [2] = { { { -0.22758891611960858, -0.052259268664702846, 0.30966209249146787, 0.6085000400141081 }, { 0.18428349585174056, 0.005440917339584727, -0.0017154221024945364, -0.0017295396280446241 }, { 0.04330542026786801, 0.0468183513251181, -0.30794667038897333, -0.6067705003860635 } }, { { 0.13202105312002504, 0.23807643003304294, 0.1465979095658722, -0.006671843592494407 }, { 2.594249681957099e-05, -0.0016885916063271928, -0.07452390813027374, 0.1508611976957412 }, { -0.1320469956168446, -0.23638783842671576, -0.07207400143559846, -0.14418935410324682 } } },
  [3] = { { { -0.2303672554376233, -0.9623073418747837, 1.0918276795924169, 0.10084691771999017 }, { 0.047540000700197885, -0.027368755580404993, -0.010154457225920104, -0.010016787893872817 }, { -0.06847748094257518, -0.4920349839488353, -2.024683205167539, 2.585195670058949 } }, { { 0.9542550697267097, -0.8207226650714251, -0.11407879457806581, -0.019453610077219373 }, { -0.01656489251278387, -0.06741896123492783, -0.4994134136635927, 0.5833972674113047 }, { 1.7682629561000487, -0.9376324807280885, -0.7305895099131651, -0.10004096545879508 } } } }

function T.softmax_gradients_match_pytorch()
  for d = 2, 3 do
    local x = x234():requires_grad_()
    local gi = ag.grad({ x:softmax(d) }, { x }, { grad_outputs = { g234() }, create_graph = true })[1]
    check_tensor(gi, SM_GRAD[d], 1e-12, "softmax grad dim " .. d)
    check_eq(gi.grad_fn.name, "SoftmaxBackwardDataBackward")
    check_tensor(ag.grad({ (gi * gi):sum() }, { x })[1], SM_GRADGRAD[d], 1e-12, "softmax gradgrad dim " .. d)
    gi = ag.grad({ x:log_softmax(d) }, { x }, { grad_outputs = { g234() }, create_graph = true })[1]
    check_tensor(gi, LSM_GRAD[d], 1e-12, "log_softmax grad dim " .. d)
    check_tensor(ag.grad({ (gi * gi):sum() }, { x })[1], LSM_GRADGRAD[d], 1e-12, "log_softmax gradgrad dim " .. d)
  end
  -- the backward ops called directly, float32 (computed in output's dtype)
  local o = x234():float():softmax(2)
  check_tensor(ember._softmax_backward_data(g234():float(), o, 2, "float32"), SM_GRAD[2], 1e-6)
  -- input_dtype names the gradient's dtype (softmax with dtype=)
  local r = ember._log_softmax_backward_data(g234(), x234():log_softmax(3), 3, "float32")
  check_eq(r.dtype, "float32")
  check_tensor(r, LSM_GRAD[3], 1e-6)
  -- a float32 leaf through dtype=float64 gets a float32 gradient
  local x = x234():float():requires_grad_()
  x:softmax(3, { dtype = "float64" }):mul(g234()):sum():backward()
  check_eq(x.grad.dtype, "float32")
  check_tensor(x.grad, SM_GRAD[3], 1e-6)
end

function T.softmax_gradcheck_strided_and_3d()
  local x = x234():requires_grad_()
  for d = 1, 3 do
    check(ag.gradcheck(function(a) return a:softmax(d) end, { x }), "softmax gradcheck dim " .. d)
    check(ag.gradgradcheck(function(a) return a:log_softmax(d) end, { x }), "log_softmax gradgradcheck dim " .. d)
    check(ag.gradgradcheck(function(a) return a:softmax(d) * a end, { x }), "softmax gradgradcheck dim " .. d)
  end
  -- 70 columns: a full block of 64 and a partial one on the strided path
  local w = ember.randn(3, 2, 70, { dtype = "float64" }):requires_grad_()
  check(ag.gradcheck(function(a) return a:log_softmax(2) end, { w }), "wide strided log_softmax")
  check(ag.gradcheck(function(a) return a:softmax(1) end, { w }), "wide strided softmax")
end

function T.softmin_matches_pytorch()
  check_tensor(F.softmin(f64({ { 1, 2, 3 }, { 0.5, 0.25, -1 } }), 2), { { 0.6652409557748218, 0.2447284710547976, 0.09003057317038045 }, { 0.14780404965619495, 0.18978415644793137, 0.6624117938958736 } }, 1e-12)
  local r = F.softmin(ember.tensor({ 1, 2, 3 }), 1, { dtype = "float64" })
  check_eq(r.dtype, "float64")
  check_tensor(r, { 0.6652409557748218, 0.2447284710547976, 0.09003057317038045 }, 1e-12)
  check(ember.softmin == nil, "softmin is only in nn.functional, as in PyTorch")
  check_error(function() return F.softmin(ember.tensor({ true, false }), 1) end, "softmin", "bool")
  check_error(function() return F.softmin(ember.ones(2), 2) end, "softmin", "dim 2")
end

function T.softmax_backward_op_errors()
  local g, o = ember.ones(2, 3), ember.ones(3, 2)
  check_error(function() return ember._softmax_backward_data(g, o, 1, "float32") end,
    "_softmax_backward_data", "grad_output", "{2,3}", "{3,2}")
  check_error(function() return ember._log_softmax_backward_data(g, g:long(), 1, "float32") end,
    "_log_softmax_backward_data", "floating", "int64")
  check_error(function() return ember._softmax_backward_data(g, g, 1, "int64") end,
    "_softmax_backward_data", "input_dtype", "int64")
  check_error(function() return ember._softmax_backward_data(g, g, 3, "float32") end,
    "_softmax_backward_data", "dim 3")
end

-- ---- cross_entropy and nll_loss ----

-- sin(0.9 k) * 2, k = 0..11, shape {4, 3}; targets 1-based, one ignored
local function x43() return (ember.arange(0, 12, { dtype = "float64" }) * 0.9):sin():reshape(4, 3) * 2 end
local T43 = { 3, -100, 1, 2 }
local function w3() return f64({ 0.5, 2.0, 1.5 }) end
-- class probabilities: softmax of cos(k) over the classes
local function q43() return ember.arange(0, 12, { dtype = "float64" }):cos():reshape(4, 3):softmax(2) end

function T.cross_entropy_matches_pytorch()
  local x, t, w = x43(), ember.tensor(T43), w3()
  check_tensor(F.cross_entropy(x, t), 1.801165598712078, 1e-12)
  check_tensor(F.cross_entropy(x, t, nil, nil, "sum"), 5.403496796136234, 1e-12)
  check_tensor(F.cross_entropy(x, t, { reduction = "none" }), { 0.6019919196272031, 0.0, 3.360044233893255, 1.4414606426157766 }, 1e-12)
  for _, red in ipairs({ "mean", "sum", "none" }) do
    local want = ({ mean = 1.3903516758347496, sum = 5.5614067033389984, none = { 1.0225657591130912, 0.0, 1.7252304484763246, 2.8136104957495824 } })[red]
    check_tensor(F.cross_entropy(x, t, w, { reduction = red, label_smoothing = 0.25 }), want, 1e-12, red)
  end
  -- float32 through the fused kernel's vector exp
  local r = F.cross_entropy(x:float(), t)
  check_eq(r.dtype, "float32")
  check_tensor(r, 1.8011655807495117, 1e-6)
  -- (N, C, d1) input, (N, d1) target; an input of shape (C) with a 0-dim target
  local x3, t3 = x234(), ember.tensor({ { 1, 2, 3, -100 }, { 3, 3, 1, 2 } })
  check_tensor(F.cross_entropy(x3, t3), 1.29390186078094, 1e-12)
  check_tensor(F.cross_entropy(x3, t3, { reduction = "none", label_smoothing = 0.1 }), { { 1.3860579271689033, 3.033388803727314, 1.4253793169934492, 0.0 }, { 0.7220103713536203, 0.39656435509250454, 2.3590464911578346, 0.31099702679118946 } }, 1e-12)
  check_tensor(F.cross_entropy(f64({ 1, 2, 0.5 }), ember.tensor(2)), 0.4643687841079449, 1e-12)
  -- every target ignored: mean is 0/0 = NaN (PyTorch), sum 0
  local all = ember.full({ 4 }, -100, { dtype = "int64" })
  check_tensor(F.cross_entropy(x, all), 0 / 0)
  check_tensor(F.cross_entropy(x, all, { reduction = "sum" }), 0.0)
  -- another ignore_index: compared with the raw (1-based) target values
  check_tensor(F.cross_entropy(x, ember.tensor({ 3, 2, 1, 2 }), nil, 2, "sum"),
    F.cross_entropy(x:index_select(1, ember.tensor({ 1, 3 })), ember.tensor({ 3, 1 }), { reduction = "sum" }):item(), 1e-12)
end

function T.cross_entropy_probability_targets_match_pytorch()
  local x, q, w = x43(), q43(), w3()
  check_tensor(F.cross_entropy(x, q, w, { label_smoothing = 0.2 }), 2.556806284142044, 1e-12)
  check_tensor(F.cross_entropy(x, q, { reduction = "none" }), { 1.7696392666037495, 2.300412794686822, 2.2774344574861924, 2.1476969465370686 }, 1e-12)
  local xr, qr = x:requires_grad_(), q:requires_grad_()
  local gx, gq = table.unpack(ag.grad({ F.cross_entropy(xr, qr, w, { label_smoothing = 0.2, reduction = "sum" }) }, { xr, qr }))
  check_tensor(gx, { { -0.15502496461395424, -0.23294723733407843, 0.3879722019480328 }, { 1.0540296605019368, -0.3056153400669449, -0.7484143204349919 }, { -0.17659098227092132, -0.5305039987195379, 0.7070949809904591 }, { 0.87950380820228, -0.18152646225153352, -0.6979773459507466 } }, 1e-12)
  check_tensor(gq, { { 1.0198748725534375, 1.5728533794058026, 0.7223903035526438 }, { 0.08467809958760261, 3.1223934336421935, 3.6258182937202323 }, { 1.344017693557302, 2.8494199325001297, 0.2726154372995688 }, { 0.13036719656364693, 2.3063370281852427, 3.81692328077992 } }, 1e-12)
end

function T.cross_entropy_gradients_match_pytorch()
  local x = x43():requires_grad_()
  local t = ember.tensor(T43)
  -- without create_graph: the fused backward kernel; with it: ops (double backward)
  local g0 = ag.grad({ F.cross_entropy(x, t, w3(), { label_smoothing = 0.25 }) }, { x })[1]
  check_tensor(g0, { { 0.018059513882523706, 0.09475107214262375, -0.11281058602514746 }, { 0.0, 0.0, 0.0 }, { -0.09801590330676328, -0.011830151822203172, 0.10984605512896643 }, { 0.32043784270576836, -0.30823327542931184, -0.01220456727645658 } }, 1e-12)
  local gi = ag.grad({ F.cross_entropy(x, t, w3(), { label_smoothing = 0.25 }) }, { x }, { create_graph = true })[1]
  check_tensor(gi, { { 0.018059513882523706, 0.09475107214262375, -0.11281058602514746 }, { 0.0, 0.0, 0.0 }, { -0.09801590330676328, -0.011830151822203172, 0.10984605512896643 }, { 0.32043784270576836, -0.30823327542931184, -0.01220456727645658 } }, 1e-12)
  check_tensor(ag.grad({ (gi * gi):sum() }, { x })[1], { { 0.0024480456934244236, 0.03265176398538339, -0.03509980967880781 }, { 0.0, 0.0, 0.0 }, { -0.0022160104398000016, -0.0056065997426467205, 0.007822610182446723 }, { 0.10756394344494723, -0.10108515723579377, -0.006478786209153461 } }, 1e-12)
  local x3 = x234():requires_grad_()
  F.cross_entropy(x3, ember.tensor({ { 1, 2, 3, -100 }, { 3, 3, 1, 2 } }), w3()):backward()
  check_tensor(x3.grad, { { { -0.03907480667158752, 0.17503129695563477, 0.11465740433398838, 0.0 }, { 0.03703452819269327, -0.20168034521606826, 0.00043642972295178715, 0.0 }, { 0.0020402784788942484, 0.026649048260433465, -0.1150938340569402, 0.0 } }, { { 0.06295827639578801, 0.026694887514868426, -0.04816197482081729, 0.0019172804272513304 }, { 0.0002569541321440215, 0.0016044253329620221, 0.01484415777224639, -0.010448913265210311 }, { -0.06321523052793201, -0.028299312847830452, 0.033317817048570904, 0.008531632837958979 } } }, 1e-12)
  -- the fused backward op called directly, float32
  local gf = ember.cross_entropy_backward(ember.tensor(1.0), x43():float(), t, w3():float(), -100, "mean", 0.25)
  check_tensor(gf, { { 0.018059513882523706, 0.09475107214262375, -0.11281058602514746 }, { 0.0, 0.0, 0.0 }, { -0.09801590330676328, -0.011830151822203172, 0.10984605512896643 }, { 0.32043784270576836, -0.30823327542931184, -0.01220456727645658 } }, 1e-6)
end

function T.nll_loss_matches_pytorch()
  local x, t, w = x43(), ember.tensor(T43), w3()
  check_tensor(F.nll_loss(x, t, w), -0.9493130865114061, 1e-12)
  check_tensor(F.nll_loss(x, t, w, { reduction = "sum" }), -3.7972523460456244, 1e-12)
  check_tensor(F.nll_loss(x, t, w, -100, "none"), { -2.9215428926345854, 0.0, 0.7727644875559871, -1.6484739409670264 }, 1e-12)
  local xr = x:requires_grad_()
  check_tensor(ag.grad({ F.nll_loss(xr, t, w, { reduction = "sum" }) * 3 }, { xr })[1], { { 0.0, 0.0, -4.5 }, { 0.0, 0.0, 0.0 }, { -1.5, 0.0, 0.0 }, { 0.0, -6.0, 0.0 } }, 1e-12)
  check_tensor(ember.nll_loss_backward(ember.tensor(3.0, { dtype = "float64" }), x, t, w, -100, "sum"), { { 0.0, 0.0, -4.5 }, { 0.0, 0.0, 0.0 }, { -1.5, 0.0, 0.0 }, { 0.0, -6.0, 0.0 } }, 1e-12)
  -- cross_entropy is nll_loss of log_softmax
  check_tensor(F.nll_loss(x:log_softmax(2), t, w, { reduction = "none" }), F.cross_entropy(x, t, w, { reduction = "none" }):tolist(), 1e-12)
  check_tensor(F.nll_loss(x, ember.full({ 4 }, -100, { dtype = "int64" })), 0 / 0)
end

function T.class_loss_errors()
  local x, t = x43(), ember.tensor(T43)
  check_error(function() return F.cross_entropy(x, ember.tensor({ 4, 1, 1, 1 })) end,
    "cross_entropy", "target 4", "1..3")
  check_error(function() return F.nll_loss(x, ember.tensor({ 0, 1, 1, 1 })) end, "nll_loss", "target 0", "1..3")
  check_error(function() return F.cross_entropy(x, ember.tensor({ 1, 2 })) end,
    "cross_entropy", "target {2}", "{4,3}", "{4}")
  check_error(function() return F.cross_entropy(x, t:int()) end, "cross_entropy", "int64", "int32")
  check_error(function() return F.nll_loss(x, x) end, "nll_loss", "target", "int64", "float64")
  check_error(function() return F.cross_entropy(x, ember.zeros(4, 2, { dtype = "float64" })) end,
    "cross_entropy", "probability target {4,2}", "{4,3}")
  check_error(function() return F.cross_entropy(x, q43():float()) end, "cross_entropy", "float32", "float64")
  check_error(function() return F.cross_entropy(x, t, f64({ 1, 2 })) end, "cross_entropy", "weight {2}", "3")
  check_error(function() return F.cross_entropy(x, t, ember.ones(3)) end, "cross_entropy", "weight dtype float32")
  check_error(function() return F.cross_entropy(ember.tensor(1.0), ember.tensor(1)) end, "cross_entropy", "0-dim")
  check_error(function() return F.cross_entropy(t, t) end, "cross_entropy", "floating input", "int64")
  check_error(function() return F.cross_entropy(x, t, { reduction = "avg" }) end, "cross_entropy", "reduction", "avg")
  check_error(function() return F.cross_entropy(x, t, { label_smoothing = 1.5 }) end, "cross_entropy", "label_smoothing", "1.5")
  check_error(function() return ember.nll_loss_backward(ember.ones(2, { dtype = "float64" }), x, t, nil, -100, "mean") end,
    "nll_loss_backward", "grad_output {2}", "0-dim")
end

-- ---- regression losses ----

-- x43() against a target of shape {3} (broadcast along the rows)
local function t3() return f64({ 0.3, -0.4, 1.1 }) end
local REG = {}
do
  REG.mse_loss = { kw = {}, mean = 2.219365387701802, sum = 26.632384652421624,
    none = { { 0.09, 3.867727244790148, 0.7185872568042349 }, { 0.30775839183413495, 0.23526466166372698, 9.33339304149578 }, { 3.4059771979778546, 0.18803306977295003, 0.2374961114912376 }, { 2.6888772077103655, 1.4987561598986503, 4.060514308982543 } },
    gx = { { -0.049999999999999996, 0.3277756365424945, 0.14128254362606502 }, { 0.09245996007794324, -0.08084014776495081, -0.5091767058883656 }, { -0.3075881625186624, 0.0722713001614499, 0.08122262128305102 }, { 0.2732966036150287, 0.20403949508058553, -0.3358452979251071 } }, gt = { -0.008168401174309559, -0.5232462840195791, 0.6225168389043567 },
    ggx = { { -0.013943866275230147, 0.2836739735206912, -0.16041143175943057 }, { 0.03354278708408427, 0.14746871208487608, -0.3772311815975741 }, { -0.09980658711478428, 0.19850586139367632, -0.18043140587376855 }, { 0.09382166826311276, 0.2424285930333882, -0.31945404560982127 } }, ggt = { -0.013614001957182612, -0.8720771400326317, 1.0375280648405947 } }
  REG.l1_loss = { kw = {}, mean = 1.237899237241852, sum = 14.854790846902224,
    none = { { 0.3, 1.966653819254967, 0.8476952617563902 }, { 0.5547597604676595, 0.4850408865897049, 3.055060235330194 }, { 1.8455289751119743, 0.43362780096869946, 0.48733572769830613 }, { 1.6397796216901726, 1.2242369704835132, 2.0150717875506428 } },
    gx = { { -0.08333333333333333, 0.08333333333333333, 0.08333333333333333 }, { 0.08333333333333333, -0.08333333333333333, -0.08333333333333333 }, { -0.08333333333333333, 0.08333333333333333, 0.08333333333333333 }, { 0.08333333333333333, 0.08333333333333333, -0.08333333333333333 } }, gt = { 0.0, -0.16666666666666666, 0.0 } }
  REG.smooth_l1_loss = { kw = { beta = 0.6 }, mean = 0.94801279445663, sum = 11.37615353347956,
    none = { { 0.075, 1.666653819254967, 0.5476952617563902 }, { 0.2564653265284458, 0.19605388471977248, 2.7550602353301943 }, { 1.5455289751119743, 0.1566942248107917, 0.197913426242698 }, { 1.3397796216901725, 0.9242369704835132, 1.7150717875506427 } },
    gx = { { -0.041666666666666664, 0.08333333333333333, 0.08333333333333333 }, { 0.07704996673161937, -0.06736678980412568, -0.08333333333333333 }, { -0.08333333333333333, 0.060226083467874926, 0.06768551773587586 }, { 0.08333333333333333, 0.08333333333333333, -0.08333333333333333 } }, gt = { -0.03538330006495271, -0.15952596033041588, 0.015647815597457468 },
    ggx = { { -0.0017453796115872115, 0.0, 0.0 }, { 0.0312314629990478, 0.025599769590636173, -0.0 }, { 0.0, 0.06104223438841412, 0.014454917260671774 }, { 0.0, 0.0, -0.0 } }, ggt = { -0.029486083387460588, -0.0866420039790503, -0.014454917260671774 } }
  REG.huber_loss = { kw = { delta = 0.6 }, mean = 0.5688076766739781, sum = 6.825692120087737,
    none = { { 0.045, 0.9999922915529801, 0.3286171570538341 }, { 0.15387919591706747, 0.11763233083186349, 1.6530361411981165 }, { 0.9273173850671845, 0.09401653488647502, 0.1187480557456188 }, { 0.8038677730141035, 0.5545421822901079, 1.0290430725303856 } },
    gx = { { -0.024999999999999998, 0.049999999999999996, 0.049999999999999996 }, { 0.04622998003897162, -0.040420073882475406, -0.049999999999999996 }, { -0.049999999999999996, 0.03613565008072495, 0.04061131064152551 }, { 0.049999999999999996, 0.049999999999999996, -0.049999999999999996 } }, gt = { -0.021229980038971624, -0.09571557619824954, 0.009388689358474485 },
    ggx = { { -0.000628336660171396, 0.0, 0.0 }, { 0.011243326679657207, 0.009215917052629023, -0.0 }, { 0.0, 0.021975204379829083, 0.005203770213841837 }, { 0.0, 0.0, -0.0 } }, ggt = { -0.01061499001948581, -0.031191121432458106, -0.005203770213841837 } }
end

function T.regression_losses_match_pytorch()
  for name, r in pairs(REG) do
    local x, t = x43(), t3()
    for _, red in ipairs({ "mean", "sum", "none" }) do
      local kw = { reduction = red }
      for k, v in pairs(r.kw) do kw[k] = v end
      check_tensor(F[name](x, t, kw), r[red], 1e-12, name .. " " .. red)
      check_tensor(F[name](x:float(), t:float(), kw), r[red], 1e-5, name .. " float32 " .. red)
    end
    -- gradients (the backward ops) and second derivatives (their formulas)
    local xr, tr = x:requires_grad_(), t:requires_grad_()
    local gx, gt = table.unpack(ag.grad({ F[name](xr, tr, r.kw) }, { xr, tr }, { create_graph = true }))
    check_tensor(gx, r.gx, 1e-12, name .. " grad input")
    check_tensor(gt, r.gt, 1e-12, name .. " grad target")
    if r.ggx then
      local ggx, ggt = table.unpack(ag.grad({ (gx * gx):sum() + (gt * gt):sum() }, { xr, tr }))
      check_tensor(ggx, r.ggx, 1e-12, name .. " gradgrad input")
      check_tensor(ggt, r.ggt, 1e-12, name .. " gradgrad target")
    end
  end
  -- beta = 0 is l1_loss
  check_tensor(F.smooth_l1_loss(x43(), t3(), { beta = 0 }), 1.237899237241852, 1e-12)
  -- empty: mean is NaN, sum 0 (PyTorch)
  check_tensor(F.mse_loss(ember.zeros(0), ember.zeros(0)), 0 / 0)
  check_tensor(F.huber_loss(ember.zeros(0), ember.zeros(0), { reduction = "sum" }), 0)
  check_shape(F.smooth_l1_loss(ember.zeros(2, 0), ember.zeros(0), { reduction = "none" }), { 2, 0 })
  -- dtype promotion: float32 with float64 gives float64
  check_eq(F.mse_loss(x43():float(), t3()).dtype, "float64")
  check_eq(F.l1_loss(x43():bfloat16(), t3():bfloat16()).dtype, "bfloat16")
  -- non-contiguous input
  check_tensor(F.mse_loss(x43():t():t(), t3(), { reduction = "sum" }), REG.mse_loss.sum, 1e-12)
  check_tensor(F.mse_loss(x43():t(), ember.tensor({ 0.3, -0.4, 1.1 }, { dtype = "float64" }):reshape(3, 1), { reduction = "sum" }),
    REG.mse_loss.sum, 1e-12)
end

function T.regression_loss_errors()
  local x = x43()
  check_error(function() return F.mse_loss(ember.tensor({ 1, 2 }), ember.tensor({ 1, 3 })) end, "mse_loss", "floating", "int64")
  check_error(function() return F.l1_loss(ember.tensor({ 1, 2 }), ember.tensor({ 1, 3 })) end, "l1_loss", "floating", "int64")
  check_error(function() return F.mse_loss(x, ember.ones(4)) end, "mse_loss", "{4,3}", "{4}")
  check_error(function() return F.huber_loss(x, x, { delta = 0 }) end, "huber_loss", "delta", "positive", "0")
  check_error(function() return F.smooth_l1_loss(x, x, { beta = -1 }) end, "smooth_l1_loss", "beta", "-1")
  check_error(function() return F.mse_loss(x, x, { reduction = "avg" }) end, "mse_loss", "reduction", "avg")
  check_error(function() return ember.mse_loss_backward(x, x, ember.ones(2, 2, { dtype = "float64" }), "none") end,
    "mse_loss_backward", "{4,3}", "{2,2}")
end

return T
