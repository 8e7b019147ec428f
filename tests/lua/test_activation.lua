-- test_activation.lua -- the activation family (schema/ops/activation.yaml):
-- values and gradients against PyTorch 1.13 (the reference numbers below
-- were computed with it in float64, incl. NaN/inf, -0.0 and both sides of
-- every threshold), float32/bfloat16/float16, integer dtypes, in-place
-- forms, non-contiguous and empty inputs, and the error messages.
local ember = ember or require "ember"
local T = {}
local F = ember.nn.functional
local nan, inf = 0 / 0, math.huge

-- for each case: F.op(X) and the gradient of sum(G * F.op(X)) in PyTorch,
-- element by element (PyTorch's scalar loop; see activation.c's header)
local X = { -30.0, -4.0, -3.0, -2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 3.0, 4.0, 30.0, nan, inf, -inf }
local G = { 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2000000000000002, 1.3, 1.4, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 2.2 }
local CASES = {
  { "relu", function(a) return F.relu(a) end,
    { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 3.0, 4.0, 30.0, nan, inf, 0.0 },
    { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.3, 1.4, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 0.0 } },
  { "relu6", function(a) return F.relu6(a) end,
    { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 3.0, 4.0, 6.0, nan, 6.0, 0.0 },
    { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.3, 1.4, 1.5, 1.6, 1.7000000000000002, 1.8, 0.0, 2.0, 0.0, 0.0 } },
  { "leaky_relu", function(a) return F.leaky_relu(a) end,
    { -0.3, -0.04, -0.03, -0.025, -0.01, -0.005, -0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 3.0, 4.0, 30.0, nan, inf, -inf },
    { 0.005, 0.006, 0.006999999999999999, 0.008, 0.009000000000000001, 0.01, 0.011000000000000001, 0.012000000000000002, 1.3, 1.4, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 0.02, 2.1, 0.022000000000000002 } },
  { "leaky_relu_2", function(a) return F.leaky_relu(a, 0.2) end,
    { -6.0, -0.8, -0.6000000000000001, -0.5, -0.2, -0.1, -0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 3.0, 4.0, 30.0, nan, inf, -inf },
    { 0.1, 0.12, 0.13999999999999999, 0.16000000000000003, 0.18000000000000002, 0.2, 0.22000000000000003, 0.24000000000000005, 1.3, 1.4, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 0.4, 2.1, 0.44000000000000006 } },
  { "elu", function(a) return F.elu(a) end,
    { -0.9999999999999064, -0.9816843611112658, -0.950212931632136, -0.9179150013761012, -0.6321205588285577, -0.3934693402873666, 0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 3.0, 4.0, 30.0, nan, inf, -1.0 },
    { 4.6788114844200874e-14, 0.010989383333240507, 0.03485094785750476, 0.06566799889911905, 0.33109149705429813, 0.6065306597126334, 1.1, 1.2000000000000002, 1.3, 1.4, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 0.0 } },
  { "elu_2", function(a) return F.elu(a, 1.5) end,
    { -1.4999999999998597, -1.4725265416668987, -1.4253193974482041, -1.3768725020641517, -0.9481808382428365, -0.5902040104310499, 0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 3.0, 4.0, 30.0, nan, inf, -1.5 },
    { 7.018217226630131e-14, 0.016484074999860758, 0.05227642178625713, 0.09850199834867858, 0.4966372455814472, 0.9097959895689501, 1.6500000000000001, 1.8000000000000003, 1.3, 1.4, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 0.0 } },
  { "selu", function(a) return F.selu(a) end,
    { -1.758099340847212, -1.7258986281898945, -1.6705687287671118, -1.6137857588732423, -1.1113307378125625, -0.6917581878028713, 0.0, 0.0, 0.31521029620664415, 0.5253504936777402, 1.0507009873554805, 2.626752468388701, 3.1521029620664414, 4.202803949421922, 31.521029620664414, nan, inf, -1.7580993408473766 },
    { 8.225815386708091e-14, 0.019320427594489282, 0.06127142845618541, 0.11545086557930744, 0.5820917427313327, 1.0663411530445053, 1.9339092749321145, 2.1097192090168524, 1.3659112835621245, 1.4709813822976725, 1.5760514810332207, 1.6811215797687689, 1.786191678504317, 1.8912617772398648, 1.996331875975413, 2.101401974710961, 2.206472073446509, 0.0 } },
  { "celu", function(a) return F.celu(a, 0.7) end,
    { -0.7, -0.6976910459708426, -0.6903653492868647, -0.6803190381757196, -0.532244274490757, -0.35732083831013284, 0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 3.0, 4.0, 30.0, nan, inf, -0.7 },
    { 1.219969692667968e-19, 0.001979103294673498, 0.009634650174024732, 0.022492526814203582, 0.21568593122340832, 0.48954166193890875, 1.1000000187328887, 1.2000000204358787, 1.3, 1.4, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 0.0 } },
  { "gelu", function(a) return F.gelu(a) end,
    { -0.0, -0.00012668496733247991, -0.00404969409489031, -0.015524163314440398, -0.15865525393145702, -0.15426876936299344, -0.0, 0.0, 0.1853734266566858, 0.34573123063700656, 0.841344746068543, 2.4844758366855597, 2.99595030590511, 3.9998733150326675, 30.0, nan, inf, nan },
    { -2.2104692023178215e-195, -0.0003021897967358529, -0.008361953042928744, -0.030088868726516158, -0.07498392352891771, 0.13250487534383712, 0.55, 0.6000000000000001, 0.9520260968752429, 1.2144931745186278, 1.6249732058815296, 1.6601777374530322, 1.7203076002471127, 1.8009065693902078, 1.9000000000000001, nan, nan, nan } },
  { "gelu_tanh", function(a) return F.gelu(a, { approximate = "tanh" }) end,
    { -0.0, -7.024594819227126e-05, -0.0036373920817729943, -0.015084266089998577, -0.15880800939172324, -0.15428599017485606, -0.0, 0.0, 0.18537092354275922, 0.34571400982514394, 0.8411919906082768, 2.484915733910001, 2.996362607918227, 3.9999297540518075, 30.0, nan, inf, nan },
    { 0.0, -0.0002010739182733121, -0.008108916641678753, -0.030361260970132944, -0.07466767546120427, 0.13263009646535764, 0.55, 0.6000000000000001, 0.9519840871304424, 1.2143178649484994, 1.624446125768674, 1.660722521940266, 1.7196930832726482, 1.8006032217548198, 1.9000000000000001, nan, nan, nan } },
  { "silu", function(a) return F.silu(a) end,
    { -2.8072868906517896e-12, -0.07194483984836623, -0.14227761953270035, -0.18964545005310887, -0.2689414213699951, -0.1887703343990727, -0.0, 0.0, 0.1723327550434977, 0.3112296656009273, 0.7310585786300049, 2.3103545499468914, 2.8577223804672998, 3.928055160151634, 29.999999999997197, nan, inf, nan },
    { -1.356855330481567e-12, -0.031598768934643744, -0.061672874210618726, -0.07952088907322147, 0.06509653931566194, 0.2600388126973482, 0.55, 0.6000000000000001, 0.8421140134145477, 1.0359456622237126, 1.3915057678072302, 1.7590417781464427, 1.849776980225788, 1.8947963068039313, 1.900000000005151, nan, nan, nan } },
  { "mish", function(a) return F.mish(a) end,
    { -2.807286890651921e-12, -0.07259174079202535, -0.1456474612756246, -0.19681620390653337, -0.30340146137410895, -0.22074377465173, -0.0, 0.0, 0.20800137234811503, 0.3752452113048951, 0.8650983882673103, 2.471392304557881, 2.9865350049679575, 3.9974128069762385, 30.0, nan, inf, nan },
    { -1.356855330481696e-12, -0.0322639258760882, -0.06537518017262459, -0.08779485820014854, 0.053295080289655516, 0.28951067791351226, 0.66, 0.7200000000000001, 1.0176754894164695, 1.2409941255008181, 1.5735543301496884, 1.665807248210165, 1.7358817485800542, 1.8079791784267505, 1.9000000000000001, nan, nan, nan } },
  { "softplus", function(a) return F.softplus(a) end,
    { 9.357622968839737e-14, 0.018149927917809738, 0.04858735157374206, 0.07888973429254963, 0.31326168751822286, 0.4740769841801067, 0.6931471805599453, 0.6931471805599453, 0.8543552444685272, 0.9740769841801067, 1.3132616875182228, 2.5788897342925496, 3.048587351573742, 4.0181499279178094, 30.0, nan, inf, 0.0 },
    { 4.67881148441965e-14, 0.010791725977254934, 0.03319811122429675, 0.06068654401699486, 0.24204727923299563, 0.37754066879814546, 0.55, 0.6000000000000001, 0.7467752718551567, 0.8714430636825963, 1.0965878679450074, 1.4786269119660103, 1.6193760155981367, 1.7676248220682351, 1.9000000000000001, nan, 2.1, 0.0 } },
  { "softplus_2", function(a) return F.softplus(a, 2, 3) end,
    { 4.37825538134826e-27, 0.00016770318644788442, 0.0012378425688652247, 0.003357674244559034, 0.06346400552148625, 0.15663084375911143, 0.34657359027997264, 0.34657359027997264, 0.5187439752429428, 0.6566308437591114, 1.0634640055214863, 2.5, 3.0, 4.0, 30.0, nan, inf, 0.0 },
    { 4.37825538134826e-27, 0.00020121007827988687, 0.001730836209644342, 0.005354280739427885, 0.1072826298199058, 0.2689414213699951, 0.55, 0.6000000000000001, 0.839353198093534, 1.0234820100820068, 1.3211956169668235, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, nan, 2.1, 0.0 } },
  { "softsign", function(a) return F.softsign(a) end,
    { -0.967741935483871, -0.8, -0.75, -0.7142857142857143, -0.5, -0.3333333333333333, -0.0, 0.0, 0.23076923076923075, 0.3333333333333333, 0.5, 0.7142857142857143, 0.75, 0.8, 0.967741935483871, nan, nan, nan },
    { 0.00052029136316337, 0.023999999999999994, 0.04375000000000001, 0.0653061224489796, 0.225, 0.4444444444444444, 1.1, 1.2000000000000002, 0.7692307692307693, 0.6222222222222222, 0.375, 0.1306122448979592, 0.10625000000000001, 0.07199999999999995, 0.0019771071800208095, nan, nan, nan } },
  { "hardtanh", function(a) return F.hardtanh(a) end,
    { -1.0, -1.0, -1.0, -1.0, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, nan, 1.0, -1.0 },
    { 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.1, 1.2000000000000002, 1.3, 1.4, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0 } },
  { "hardtanh_2", function(a) return F.hardtanh(a, -2, 0.5) end,
    { -2.0, -2.0, -2.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, nan, 0.5, -2.0 },
    { 0.0, 0.0, 0.0, 0.0, 0.9, 1.0, 1.1, 1.2000000000000002, 1.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0 } },
  { "hardsigmoid", function(a) return F.hardsigmoid(a) end,
    { 0.0, 0.0, 0.0, 0.08333333333333333, 0.3333333333333333, 0.4166666666666667, 0.5, 0.5, 0.5499999999999999, 0.5833333333333334, 0.6666666666666666, 0.9166666666666666, 1.0, 1.0, 1.0, nan, 1.0, 0.0 },
    { 0.0, 0.0, 0.0, 0.13333333730697633, 0.15000000447034836, 0.1666666716337204, 0.18333333879709246, 0.2000000059604645, 0.21666667312383653, 0.23333334028720853, 0.2500000074505806, 0.26666667461395266, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 } },
  { "hardswish", function(a) return F.hardswish(a) end,
    { -0.0, -0.0, -0.0, -0.20833333333333334, -0.3333333333333333, -0.20833333333333334, -0.0, 0.0, 0.16499999999999998, 0.2916666666666667, 0.6666666666666666, 2.2916666666666665, 3.0, 4.0, 30.0, nan, inf, nan },
    { 0.0, 0.0, -0.35, -0.2666666666666667, 0.15000000000000002, 0.33333333333333337, 0.55, 0.6000000000000001, 0.78, 0.9333333333333332, 1.25, 2.1333333333333337, 2.5500000000000003, 1.8, 1.9000000000000001, 2.0, 2.1, 0.0 } },
  { "logsigmoid", function(a) return F.logsigmoid(a) end,
    { -30.000000000000092, -4.0181499279178094, -3.048587351573742, -2.5788897342925496, -1.3132616875182228, -0.9740769841801067, -0.6931471805599453, -0.6931471805599453, -0.5543552444685271, -0.4740769841801067, -0.31326168751822286, -0.07888973429254963, -0.04858735157374206, -0.018149927917809738, -9.357622968839737e-14, nan, 0.0, -inf },
    { 0.4999999999999532, 0.589208274022745, 0.6668018887757032, 0.7393134559830052, 0.6579527207670044, 0.6224593312018545, 0.55, 0.6000000000000001, 0.5532247281448434, 0.5285569363174036, 0.40341213205499266, 0.1213730880339897, 0.08062398440186355, 0.0323751779317648, 1.777948364079467e-13, nan, 0.0, 2.2 } },
  { "tanhshrink", function(a) return F.tanhshrink(a) end,
    { -29.0, -3.000670700260933, -2.0049452463132695, -1.5133857018485697, -0.23840584404423515, -0.03788284273999026, 0.0, 0.0, 0.008687387548409087, 0.03788284273999026, 0.23840584404423515, 1.5133857018485697, 2.0049452463132695, 3.000670700260933, 29.0, nan, inf, -inf },
    { 0.5, 0.5991954295901845, 0.6930937739841918, 0.7787262186534716, 0.5220230925473766, 0.2135522670340726, 0.0, 0.0, 0.110321949625382, 0.2989731738477017, 0.8700384875789609, 1.5574524373069432, 1.6832277368187518, 1.7975862887705534, 1.9000000000000001, nan, 2.1, 2.2 } },
  { "softshrink", function(a) return F.softshrink(a) end,
    { -29.5, -3.5, -2.5, -2.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 2.0, 2.5, 3.5, 29.5, 0.0, inf, -inf },
    { 0.5, 0.6, 0.7, 0.8, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 2.2 } },
  { "softshrink_2", function(a) return F.softshrink(a, 1) end,
    { -29.0, -3.0, -2.0, -1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5, 2.0, 3.0, 29.0, 0.0, inf, -inf },
    { 0.5, 0.6, 0.7, 0.8, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 2.2 } },
  { "hardshrink", function(a) return F.hardshrink(a) end,
    { -30.0, -4.0, -3.0, -2.5, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.5, 3.0, 4.0, 30.0, nan, inf, -inf },
    { 0.5, 0.6, 0.7, 0.8, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 2.2 } },
  { "hardshrink_2", function(a) return a:hardshrink(1) end,
    { -30.0, -4.0, -3.0, -2.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.5, 3.0, 4.0, 30.0, nan, inf, -inf },
    { 0.5, 0.6, 0.7, 0.8, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 2.2 } },
  { "threshold", function(a) return F.threshold(a, 0.5, -7) end,
    { -7.0, -7.0, -7.0, -7.0, -7.0, -7.0, -7.0, -7.0, -7.0, -7.0, 1.0, 2.5, 3.0, 4.0, 30.0, nan, inf, -7.0 },
    { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5, 1.6, 1.7000000000000002, 1.8, 1.9000000000000001, 2.0, 2.1, 0.0 } },
  { "sigmoid", function(a) return F.sigmoid(a) end,
    { 9.357622968839299e-14, 0.01798620996209156, 0.04742587317756678, 0.07585818002124355, 0.2689414213699951, 0.3775406687981454, 0.5, 0.5, 0.574442516811659, 0.6224593312018546, 0.7310585786300049, 0.9241418199787566, 0.9525741268224334, 0.9820137900379085, 0.9999999999999065, nan, 1.0, 0.0 },
    { 4.6788114844192115e-14, 0.010597623727974669, 0.03162366181163849, 0.05608297323608653, 0.17695073991733365, 0.2350037122015945, 0.275, 0.30000000000000004, 0.3177958051979696, 0.32900519708223225, 0.2949178998622228, 0.11216594647217291, 0.07680032154255041, 0.031792871183923994, 1.7761347947951595e-13, nan, 0.0, 0.0 } },
  { "tanh", function(a) return F.tanh(a) end,
    { -1.0, -0.999329299739067, -0.9950547536867305, -0.9866142981514303, -0.7615941559557649, -0.46211715726000974, -0.0, 0.0, 0.2913126124515909, 0.46211715726000974, 0.7615941559557649, 0.9866142981514303, 0.9950547536867305, 0.999329299739067, 1.0, nan, 1.0, -1.0 },
    { 0.0, 0.0008045704098155499, 0.006906226015808116, 0.021273781346528457, 0.3779769074526235, 0.7864477329659274, 1.1, 1.2000000000000002, 1.189678050374618, 1.1010268261522982, 0.6299615124210391, 0.042547562693056915, 0.016772263181248283, 0.00241371122944665, 0.0, nan, 0.0, 0.0 } },
}

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end
local function f32(v) return ember.tensor(v, { dtype = "float32" }) end

function T.values_and_gradients_match_pytorch_float64()
  for _, c in ipairs(CASES) do
    local a = f64(X)
    a.requires_grad = true
    local y = c[2](a)
    check_eq(y.dtype, "float64", c[1])
    check_tensor(y, c[3], 1e-12, c[1])
    y:backward(f64(G))
    -- PyTorch rounds two constants to float32 in float64 gradients: celu's
    -- 1/alpha (derivatives.yaml's 1.0/alpha.toFloat()) and hardsigmoid's 1/6
    -- (1.0f / 6.0f); ember keeps them in float64
    local tol = (c[1] == "celu" or c[1] == "hardsigmoid") and 1e-6 or 1e-12
    check_tensor(a.grad, c[4], tol, c[1] .. " gradient")
  end
end

function T.float32_matches_float64_within_float_precision()
  for _, c in ipairs(CASES) do
    local a = f32(X)
    a.requires_grad = true
    local y = c[2](a)
    check_eq(y.dtype, "float32", c[1])
    check_tensor(y, c[3], 2e-6, c[1] .. " float32")
    y:backward(f32(G))
    check_tensor(a.grad, c[4], 2e-6, c[1] .. " float32 gradient")
  end
end

-- the contiguous float32 loops are vectorised: a long input hits them (and
-- the pool); every element must agree with the float64 result
function T.long_float32_inputs_agree_with_float64()
  local x64 = ember.linspace(-12, 12, 100003, { dtype = "float64" })
  local x32 = x64:to(ember.float32)
  for _, c in ipairs(CASES) do
    local y64, y32 = c[2](x64), c[2](x32):to(ember.float64)
    local err = ((y32 - y64):abs() / (y64:abs() + 1)):max():item()
    check(err < 4e-6, c[1] .. ": max relative error " .. err)
    local a32 = x32:clone()
    a32.requires_grad = true
    c[2](a32):sum():backward()
    local a64 = x64:clone()
    a64.requires_grad = true
    c[2](a64):sum():backward()
    local gerr = ((a32.grad:to(ember.float64) - a64.grad):abs() / (a64.grad:abs() + 1)):max():item()
    check(gerr < 4e-6, c[1] .. ": max relative gradient error " .. gerr)
  end
end

function T.half_types_compute_in_float32()
  for _, dt in ipairs({ "bfloat16", "float16" }) do
    for _, c in ipairs(CASES) do
      local a = ember.tensor(X, { dtype = dt })
      local y = c[2](a)
      check_eq(y.dtype, dt, c[1])
      local want = c[2](a:to(ember.float32)):to(dt)
      -- composites round each step to dt (as in PyTorch); fused ops once
      local composite = c[1] == "softsign" or c[1] == "tanhshrink"
      check_tensor(y, want:tolist(), composite and 2e-2 or 0, c[1] .. " " .. dt)
    end
  end
end

function T.non_contiguous_and_empty_inputs()
  local base = f64({ { -2, 0.5, 3.5 }, { 1, -0.25, 7 } })
  local tr = base:t()
  check(not tr:is_contiguous())
  for _, c in ipairs(CASES) do
    check_tensor(c[2](tr), c[2](tr:contiguous()):tolist(), 0, c[1] .. " transposed")
    local e = c[2](ember.zeros(0, 3, { dtype = "float64" }))
    check_shape(e, { 0, 3 }, c[1] .. " empty")
    local s = c[2](f64(0.5))
    check_shape(s, {}, c[1] .. " 0-dim")
  end
end

-- as PyTorch: hardshrink takes a negative lambd (nothing is shrunk);
-- threshold_ writes an expanded tensor (threshold is idempotent); integer
-- numbers are converted into the dtype (-1 is 255 for uint8)
function T.pytorch_quirks_kept()
  check_tensor(F.hardshrink(f64({ -0.1, 0.2 }), -1), { -0.1, 0.2 }, 0)
  local e = ember.zeros(1):expand(3)
  ember.threshold_(e, 0.5, 2)
  check_tensor(e, { 2, 2, 2 }, 0)
  local u = ember.tensor({ 4, 255 }, { dtype = "uint8" })
  check_tensor(F.threshold(u, -1, 2), { 2, 2 })
  check_tensor(F.hardtanh(f64({ -3, 0.5 }), 0 / 0, 1), { nan, nan }, 0)
  -- mish_backward keeps self's dtype, the others promote
  check_eq(ember.mish_backward(f64({ 1 }), f32({ 1 })).dtype, "float32")
  check_eq(ember.silu_backward(f64({ 1 }), f32({ 1 })).dtype, "float64")
end

function T.backward_ops_broadcast_and_promote()
  local g = f32({ 1, 2 })
  local x = f64({ { -1, 2 }, { 0.5, -3 } })
  local r = ember.hardtanh_backward(g, x, -1, 1)
  check_eq(r.dtype, "float64")
  check_tensor(r, { { 0, 0 }, { 1, 0 } }, 0)
  check_tensor(ember.softshrink_backward(g, x, 0.6), { { 1, 2 }, { 0, 2 } }, 0)
  check_tensor(ember.leaky_relu_backward(g, x, 0.1, false), { { 0.1, 2 }, { 1, 0.2 } }, 1e-12)
end

-- integer dtypes: PyTorch keeps them for relu, relu6, hardtanh, threshold
function T.integer_inputs()
  local x = ember.tensor({ -3, 0, 2, 9 })
  check_eq(F.relu6(x).dtype, "int64")
  check_tensor(F.relu6(x), { 0, 0, 2, 6 })
  check_tensor(F.hardtanh(x, -2, 4), { -2, 0, 2, 4 })
  check_tensor(F.threshold(x, 1, 100), { 100, 100, 2, 9 })
  local b = ember.tensor({ 0, 7, 255 }, { dtype = "uint8" })
  check_tensor(F.relu6(b), { 0, 6, 6 })
  check_eq(F.relu6(b).dtype, "uint8")
  local i8 = ember.tensor({ -100, 5, 100 }, { dtype = "int8" })
  check_tensor(F.hardtanh(i8, -50, 50), { -50, 5, 50 })
  check_tensor(F.relu_(ember.tensor({ -1, 4 }, { dtype = "int32" })), { 0, 4 })
  -- softsign and tanhshrink divide / take tanh: integers give float32
  check_eq(F.softsign(x).dtype, "float32")
  check_tensor(F.softsign(x), { -0.75, 0, 2 / 3, 0.9 }, 1e-6)
  check_eq(F.tanhshrink(x).dtype, "float32")
end

function T.in_place_forms_write_self_and_match()
  local cases = {
    { function(a) return F.relu_(a) end, function(a) return F.relu(a) end },
    { function(a) return a:relu_() end, function(a) return F.relu(a) end },
    { function(a) return F.leaky_relu_(a, 0.3) end, function(a) return F.leaky_relu(a, 0.3) end },
    { function(a) return F.elu_(a, 0.5) end, function(a) return F.elu(a, 0.5) end },
    { function(a) return F.selu_(a) end, function(a) return F.selu(a) end },
    { function(a) return ember.celu_(a, 2) end, function(a) return ember.celu(a, 2) end },
    { function(a) return F.hardtanh_(a, -0.5, 2) end, function(a) return F.hardtanh(a, -0.5, 2) end },
    { function(a) return ember.threshold_(a, 1, 9) end, function(a) return ember.threshold(a, 1, 9) end },
  }
  for i, c in ipairs(cases) do
    local a = f64(X)
    local want = c[2](a)
    local v0 = a._version
    local r = c[1](a)
    check(rawequal(r, a) or r:data_ptr() == a:data_ptr(), "case " .. i .. " returns self")
    check_tensor(a, want:tolist(), 0, "case " .. i)
    if v0 then check(a._version > v0, "case " .. i .. " bumps the version") end
  end
  -- into a strided view: only the view's elements change
  local m = f64({ { -1, -2 }, { -3, -4 } })
  F.relu_(m:select(2, 1))
  check_tensor(m, { { 0, -2 }, { 0, -4 } }, 0)
end

function T.in_place_gradients_flow_through_the_result()
  local a = f64({ -1.5, -0.2, 0.4, 2 })
  a.requires_grad = true
  local y = F.elu_(a * 1, 0.5)
  y:sum():backward()
  local b = f64({ -1.5, -0.2, 0.4, 2 })
  b.requires_grad = true
  F.elu(b, 0.5):sum():backward()
  check_tensor(a.grad, b.grad:tolist(), 1e-12)
  -- a leaf that requires grad cannot be written in place
  local leaf = f64({ 1, 2 })
  leaf.requires_grad = true
  check_error(function() F.relu_(leaf) end, "relu_")
end

function T.in_place_leaky_relu_with_negative_slope_refuses_backward()
  local a = f64({ -1, 2 })
  a.requires_grad = true
  local y = F.leaky_relu_(a * 1, -0.5)
  check_tensor(y, { 0.5, 2 }, 0)
  check_error(function() y:sum():backward() end, "leaky_relu_backward", "negative_slope")
end

function T.namespaces_follow_pytorch()
  -- torch.X and Tensor.X exactly where PyTorch 1.13 has them
  for _, n in ipairs({ "relu", "relu_", "selu", "selu_", "celu", "celu_", "hardshrink", "threshold",
                       "threshold_", "sigmoid", "tanh" }) do
    check(ember[n] ~= nil, "ember." .. n)
  end
  for _, n in ipairs({ "relu6", "leaky_relu", "elu", "gelu", "silu", "mish", "softplus", "softsign",
                       "hardtanh", "hardsigmoid", "hardswish", "logsigmoid", "tanhshrink", "softshrink" }) do
    check(ember[n] == nil, "ember." .. n .. " should only be in nn.functional")
    check(F[n] ~= nil, "F." .. n)
  end
  for _, n in ipairs({ "relu_", "leaky_relu_", "elu_", "selu_", "celu_", "hardtanh_", "threshold_",
                       "sigmoid", "tanh", "relu", "hardshrink" }) do
    check(F[n] ~= nil, "F." .. n)
  end
  local x = f64({ -1, 1 })
  check_tensor(x:hardshrink(0.5), { -1, 1 }, 0)
  check(x.gelu == nil and x.silu == nil, "no Tensor.gelu / Tensor.silu in PyTorch 1.13")
end

function T.errors_name_the_op_and_the_problem()
  local x = f64({ -1, 1 })
  local i = ember.tensor({ -1, 1 })
  check_error(function() F.gelu(x, { approximate = "fast" }) end, "gelu", "approximate", "none", "tanh")
  check_error(function() F.softshrink(x, -0.5) end, "softshrink", "lambd", "-0.5")
  check_error(function() F.celu(x, 0) end, "celu", "alpha")
  check_error(function() F.leaky_relu(i) end, "leaky_relu", "int64")
  check_error(function() F.gelu(i) end, "gelu", "int64")
  check_error(function() F.silu(ember.tensor({ true })) end, "silu", "bool")
  check_error(function() F.relu6(ember.tensor({ true })) end, "relu6", "bool")
  check_error(function() F.hardtanh(ember.tensor({ 1 }, { dtype = "uint8" })) end,
    "hardtanh", "unsigned", "negative limits", "uint8")
  check_error(function() F.threshold(ember.tensor({ 1 }, { dtype = "int8" }), 1, 300) end,
    "threshold", "value", "300", "int8")
  check_error(function() F.elu(x, "a") end, "elu")
  check_error(function() F.hardtanh_backward(f64({ 1, 2, 3 }), f64({ 1, 2 }), -1, 1) end,
    "hardtanh_backward")
  check_error(function() F.relu_(ember.zeros(1):expand(3)) end, "relu_", "single memory location")
  check_error(function() F.elu_(ember.zeros(1):expand(3)) end, "elu_", "single memory location")
end

-- ---- prelu and glu ----

function T.prelu_and_glu_match_pytorch()
  local x = f64({ { { 0.5, -1.2 }, { -0.8, 1.5 }, { 0.3, -0.7 } } })
  local w = f64({ 0.2, -0.4, 0.6 })
  x.requires_grad, w.requires_grad = true, true
  local y = F.prelu(x, w)
  check_tensor(y, { { { 0.5, -0.24 }, { 0.32, 1.5 }, { 0.3, -0.42 } } }, 1e-12)
  y:backward(f64({ { { 1, 2 }, { 1, 2 }, { 1, 2 } } }))
  check_tensor(x.grad, { { { 1.0, 0.4 }, { -0.4, 2.0 }, { 1.0, 1.2 } } }, 1e-12)
  check_tensor(w.grad, { -2.4, -0.8, -1.4 }, 1e-12)
  -- a single weight for any shape, 1-d input (one channel), method form
  check_tensor(f64({ -2, 3 }):prelu(f64({ 0.5 })), { -1, 3 }, 0)
  check_tensor(ember.prelu(f64(-2), f64({ 0.5 })), -1, 0)
  local a = f64({ { 0.5, -1.2, 0.8, 1.5 }, { 0.3, -0.7, 2.1, -0.4 } })
  a.requires_grad = true
  local g = F.glu(a)
  check_tensor(g, { { 0.34498724056380625, -0.9810893714323723 }, { 0.2672709536413161, -0.2809186379212836 } }, 1e-12)
  g:sum():backward()
  check_tensor(a.grad, { { 0.6899744811276125, 0.8175744761936437, 0.1069548482601472, -0.17897574248439943 },
    { 0.8909031788043871, 0.401312339887548, 0.029158411440187618, -0.16818252201907039 } }, 1e-12)
  check_tensor(F.glu(a:detach(), 1), { { 0.2872212584058295, -0.3981746733982007, 0.7127225430435097,
    0.601968509831322 } }, 1e-12)
end

function T.prelu_and_glu_errors()
  check_error(function() F.prelu(ember.ones(2, 3), ember.ones(2)) end, "prelu", "weight", "2 elements", "3")
  check_error(function() F.prelu(ember.ones(2, 3), ember.ones(1, 3)) end, "prelu", "weight", "2 dims")
  check_error(function() F.prelu(ember.tensor({ 1, 2 }), ember.tensor({ 1 })) end, "prelu", "floating", "int64")
  check_error(function() F.glu(ember.ones(3, 3)) end, "glu", "even", "3")
  check_error(function() F.glu(ember.ones(3, 4), 3) end, "glu")
  check_error(function() F.glu(ember.tensor(1.0)) end, "glu", "0-dim")
  check_error(function() F.glu(ember.tensor({ 1, 2 })) end, "glu", "floating")
end

-- ---- dropout ----

function T.dropout_mask_statistics()
  ember.manual_seed(123)
  local x = ember.ones(100000)
  for _, p in ipairs({ 0.1, 0.5, 0.8 }) do
    local y = F.dropout(x, p)
    local zeros = y:eq(0):sum():item() / 1e5
    check(math.abs(zeros - p) < 0.01, "p " .. p .. ": zero fraction " .. zeros)
    check_near(y:mean():item(), 1, 0.02, "p " .. p .. ": mean scale")
    -- kept elements are scaled by exactly 1 / (1 - p)
    check_near(y:max():item(), 1 / (1 - p), 1e-6)
  end
  -- every dtype; p = 0 keeps, p = 1 drops everything
  for _, dt in ipairs({ "float16", "bfloat16", "float32", "float64" }) do
    local y = F.dropout(ember.ones(1000, { dtype = dt }), 0.5)
    check_eq(y.dtype, dt)
    check(y:eq(0):sum():item() > 400 and y:eq(2):sum():item() > 400, dt)
  end
  check_tensor(F.dropout(ember.ones(3), 0), { 1, 1, 1 }, 0)
  check_tensor(F.dropout(ember.ones(3), 1), { 0, 0, 0 }, 0)
  check_shape(F.dropout(ember.ones(0, 2), 0.5), { 0, 2 })
  -- non-contiguous input
  local t = ember.ones(40, 30):t()
  check_shape(F.dropout(t, 0.5), { 30, 40 })
end

function T.dropout_reproduces_with_the_seed()
  local x = ember.randn(1000)
  ember.manual_seed(9)
  local a = F.dropout(x, 0.3)
  ember.manual_seed(9)
  local b = F.dropout(x, 0.3)
  check(a:equal(b), "same seed, same mask")
  local c = F.dropout(x, 0.3)
  check(not a:equal(c), "the stream moves on")
  -- the mask does not depend on the thread count
  local n = ember.get_num_threads()
  ember.set_num_threads(1)
  ember.manual_seed(4)
  local one = F.dropout(ember.ones(300000), 0.5)
  ember.set_num_threads(2)
  ember.manual_seed(4)
  local two = F.dropout(ember.ones(300000), 0.5)
  ember.set_num_threads(n)
  check(one:equal(two), "mask independent of the thread count")
end

function T.dropout_gradient_is_mask_times_scale()
  ember.manual_seed(2)
  local x = ember.randn(50, 40, { dtype = "float64" })
  x.requires_grad = true
  local y = F.dropout(x, 0.25)
  local g = ember.randn(50, 40, { dtype = "float64" })
  y:backward(g)
  local mask = y:ne(0)
  check_tensor(x.grad, (g * mask:double() / 0.75):tolist(), 1e-12)
  -- native_dropout returns the mask it used
  ember.manual_seed(3)
  local o, m = ember.native_dropout(x:detach(), 0.5, true)
  check_eq(m.dtype, "bool")
  check_tensor(o, (x:detach() * m:double() * 2):tolist(), 1e-12)
  -- the output is input * mask * scale literally: NaN stays NaN, p = 1 gives 0 * NaN
  local on = ember.native_dropout(f64({ 0 / 0, -1 }), 1, true)
  check_tensor(on, { nan, 0 }, 0)
  check_tensor(ember.native_dropout_backward(f64({ 1, 2 }), ember.tensor({ true, false }), 4), { 4, 0 }, 0)
  -- not training: a copy and an all-true mask
  local o2, m2 = ember.native_dropout(f64({ 1, 2 }), 0.5, false)
  check_tensor(o2, { 1, 2 }, 0)
  check_tensor(m2, { true, true })
end

function T.dropout_training_false_and_inplace()
  local x = ember.randn(10)
  check(rawequal(F.dropout(x, 0.5, false), x), "training = false returns input itself")
  check(rawequal(F.alpha_dropout(x, 0.5), x), "alpha_dropout defaults to training = false")
  check(rawequal(F.feature_alpha_dropout(x, 0.5), x))
  check(rawequal(F.dropout2d(x, 0.5, false), x))
  local z = ember.ones(1000)
  local r = F.dropout(z, 0.5, true, true)
  check(rawequal(r, z), "inplace returns input")
  check(z:eq(0):sum():item() > 400 and z:eq(2):sum():item() > 400, "inplace wrote input")
  -- through autograd: in place on a non-leaf
  local a = ember.ones(100, { requires_grad = true })
  ember.manual_seed(6)
  local b = F.dropout(a * 1, 0.5, true, true)
  b:sum():backward()
  check_tensor(a.grad, (b:detach()):tolist(), 0)
end

function T.channel_dropout_zeroes_whole_channels()
  ember.manual_seed(8)
  local x = ember.ones(8, 16, 5, 5)
  local y = F.dropout2d(x, 0.5)
  local per = y:sum({ 3, 4 })  -- (8, 16): 0 or 2 * 25 per channel
  check(per:eq(0):logical_or(per:eq(50)):all():item(), "whole planes kept or dropped")
  local dropped = per:eq(0):sum():item()
  check(dropped > 20 and dropped < 108, "about half the channels: " .. dropped)
  -- unbatched inputs and the other ranks
  check_shape(F.dropout1d(ember.ones(4, 7), 0.5), { 4, 7 })
  local y1 = F.dropout1d(ember.ones(6, 9), 0.5)
  local rows = y1:sum(2)
  check(rows:eq(0):logical_or(rows:eq(18)):all():item(), "dropout1d of (C, L) drops whole rows")
  local y3 = F.dropout3d(ember.ones(2, 4, 3, 2, 2), 0.5)
  local v = y3:sum({ 3, 4, 5 })
  check(v:eq(0):logical_or(v:eq(24)):all():item(), "dropout3d drops whole volumes")
  check_shape(F.dropout3d(ember.ones(4, 3, 2, 2), 0.5), { 4, 3, 2, 2 })
  -- dropout2d of 3-d input is channel-wise over (N, C, L), as PyTorch 1.13
  local y23 = F.dropout2d(ember.ones(5, 6, 7), 0.5)
  local r = y23:sum(3)
  check(r:eq(0):logical_or(r:eq(14)):all():item())
end

function T.alpha_dropout_keeps_mean_and_variance()
  ember.manual_seed(10)
  local x = ember.randn(200000)
  local y = F.alpha_dropout(x, 0.3, true)
  check_near(y:mean():item(), 0, 0.02)
  check_near(y:var():item(), 1, 0.03)
  -- dropped elements all take one value: a * (-alpha') + b
  local z = F.alpha_dropout(ember.zeros(1000), 0.5, true)
  check(z:unique():numel() == 2)
  local fz = F.feature_alpha_dropout(ember.ones(4, 6, 3), 0.5, true)
  local spread = fz:amax(3) - fz:amin(3)
  check(spread:abs():max():item() < 1e-6, "one value per channel")
end

function T.dropout_errors()
  local x = ember.ones(4)
  for _, f in ipairs({ "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout" }) do
    check_error(function() F[f](ember.ones(2, 3), 1.5, true) end, f, "p", "between 0 and 1", "1.5")
    check_error(function() F[f](ember.ones(2, 3), -0.1, true) end, f, "p", "-0.1")
  end
  check_error(function() F.dropout1d(ember.ones(2, 2, 2, 2), 0.5) end, "dropout1d", "2D or 3D", "4D")
  check_error(function() F.dropout(ember.tensor({ 1, 2 }), 0.5) end, "dropout", "floating", "int64")
  check_error(function() ember.native_dropout(ember.tensor({ 1, 2 }), 0.5, true) end, "native_dropout", "int64")
  -- PyTorch's shortcuts come first: p = 0 and p = 1 take any dtype and rank
  check_tensor(F.dropout(ember.tensor({ 1, 2 }), 1), { 0, 0 })
  check_tensor(F.alpha_dropout(ember.tensor({ 1, 2 }), 0, true), { 1, 2 })
  check_tensor(F.feature_alpha_dropout(ember.ones(3), 1, true), { 0, 0, 0 }, 0)
  check_tensor(ember.native_dropout(ember.tensor({ 3 }), 0.5, false), { 3 })
  check_error(function() F.feature_alpha_dropout(x, 0.5, true) end, "feature_alpha_dropout", "2 dims")
  -- any mask dtype multiplies, promoting (as PyTorch)
  check_tensor(ember.native_dropout_backward(f64({ 1, 2 }), ember.tensor({ 1, 0 }), 2), { 2, 0 }, 0)
  check_eq(ember.native_dropout_backward(ember.tensor({ true }), ember.tensor({ true }), 2).dtype, "float32")
end

-- hardtanh_ keeps self's old value for its gradient, as PyTorch 1.13
-- (HardtanhBackward0): a later in-place write to the result is no error
-- (found by the difftest, seed 9112)
function T.hardtanh_inplace_then_written()
  local F = ember.nn.functional
  local a = ember.tensor({ 2.0, 0.5, -3.0 }, { requires_grad = true })
  local x = a * 1
  F.hardtanh_(x, 0, 1)
  check_tensor(x, { 1, 0.5, 0 })
  x:mul_(2)
  x:sum():backward()
  check_tensor(a.grad, { 0, 2, 0 })
  local b = ember.tensor({ 0.5, 0.5 }, { requires_grad = true })
  local v = (b * 1)[2]
  F.hardtanh_(v, 0, 1)
  v:mul_(3)
  v:backward()
  check_tensor(b.grad, { 0, 3 })
end

-- Note [Blocked activations] (activation.c): gelu's and silu's contiguous
-- float32 loops run blocks of 512 on a fast path and redo a block holding a
-- large |x| (> 13 for gelu's backward, > 87 for silu) or NaN with the
-- general functions, which strided inputs always use. The split must not
-- show: a contiguous input gives the strided input's bits, with the odd
-- elements in one block, in place too.
function T.blocked_float32_loops_match_the_strided_ones()
  local n = 1500
  local base = ember.zeros(n, 2)
  local col = base:select(2, 1) -- stride 2: the general loop
  col:copy_(ember.linspace(-12, 12, n))
  col[700] = 40; col[701] = -90; col[702] = -14; col[1300] = 0 / 0; col[1301] = -math.huge
  local x = col:contiguous()
  check(x:is_contiguous() and not col:is_contiguous())
  local g = ember.linspace(0.5, 2, n)
  for _, c in ipairs({
    { "gelu", F.gelu, function(gg, xx) return ember.gelu_backward(gg, xx) end },
    { "silu", F.silu, function(gg, xx) return ember.silu_backward(gg, xx) end },
  }) do
    check_tensor(c[2](x), c[2](col):tolist(), 0, c[1] .. " forward")
    check_tensor(c[3](g, x), c[3](g, col):tolist(), 0, c[1] .. "_backward")
    -- and the values: within float precision of float64
    local y64 = c[2](x:to(ember.float64))
    check_tensor(c[2](x), y64:tolist(), 2e-6, c[1] .. " vs float64")
    local b64 = c[3](g:to(ember.float64), x:to(ember.float64))
    check_tensor(c[3](g, x), b64:tolist(), 2e-6, c[1] .. "_backward vs float64")
  end
  local y = F.silu(x)
  local xi = x:clone()
  F.silu(xi, true) -- in place: the array form's separate reduction pass
  check_tensor(xi, y:tolist(), 0, "silu in place")
end

return T
