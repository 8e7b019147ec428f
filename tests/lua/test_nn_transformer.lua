-- test_nn_transformer.lua -- the layers of lua/stdlib/nn_transformer.lua:
-- state_dict keys as PyTorch's (ModuleList children from 1), outputs and
-- gradients against PyTorch 1.13 with identical weights (every entry of the
-- state_dict set from a sine sequence by its place in torch's sorted key
-- list, in both), eval mode, masks, deep copies, initialisation and errors.
local ember = ember or require "ember"
local nn = ember.nn
local T = {}

local function seq(off, shape, scale)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 1, n do v[i] = math.sin(i * 1.3 + off) * (scale or 0.5) end
  return ember.tensor(v, { dtype = "float64" }):reshape(shape)
end

-- torch's key "layers.0.x" is ember's "layers.1.x"
local function ember_key(k)
  return (k:gsub("layers%.(%d+)", function(i) return "layers." .. (tonumber(i) + 1) end))
end

-- Sets m's state from torch_keys (torch's sorted state_dict keys) as the
-- reference script does; checks that m has exactly these keys.
local function fill(m, torch_keys)
  m:double()
  local sd = m:state_dict()
  local n = 0
  for _ in pairs(sd) do n = n + 1 end
  check_eq(n, #torch_keys, "number of state_dict entries")
  local new = {}
  for j, k in ipairs(torch_keys) do
    local ek = ember_key(k)
    local t = sd[ek]
    check(t ~= nil, "ember has no state_dict entry " .. ek)
    local v = seq(j - 1, t.shape, 0.3)
    if k:match("norm%d?%.weight$") then v = v + 1 end
    new[ek] = v
  end
  m:load_state_dict(new)
  return m
end

-- torch 1.13's results for the same weights and inputs (float64)
local R = {
  mha_keys = { "bias_k", "bias_v", "in_proj_bias", "k_proj_weight", "out_proj.bias", "out_proj.weight", "q_proj_weight", "v_proj_weight" },
  mha_out = { -0.17819238942944032, 0.25456561912029324, 0.24557934222043923, -0.10007454258403012, -0.22782046715815207, -0.03722169403775674, -0.139094343961201, 0.24249804558554394, 0.20517907474172375, -0.0923665958945962, -0.18658842866883074, -0.04048025677249731, -0.13553282107528597, 0.23645653040626902, 0.2009656068711419, -0.0867797595772902, -0.18177208059201905, -0.045547356917682386, -0.14520861980213823, 0.17478780827684814, 0.20398668192188618, -0.024785030698040292, -0.17810325230406865, -0.10714617945043489, -0.19285038940630744, 0.21998373484522465, 0.2565055819774861, -0.06431359858644159, -0.23488771336898445, -0.07374527051839555, -0.20855663844096323, 0.20115937899308833, 0.27018047893849595, -0.04401357310094073, -0.24637201750498888, -0.09528457692295134 },
  mha_w = { 0.29343932909245185, 0.0, 0.3426146415825132, 0.0, 0.36394602932503495, 0.22336695325691752, 0.23314080534162498, 0.2540168545518043, 0.0, 0.2894753868496532, 0.0, 0.3796196873438378, 0.339225740067134, 0.0, 0.28115457258902815, 0.2152301065508107, 0.0, 0.29887446021639763, 0.2946819042220481, 0.19121352901074357, 0.3100331775283751, 0.0, 0.3248666539857519, 0.0, 0.36510016848587296, 0.0, 0.0, 0.29118177377765914, 0.3131501836331892, 0.39566804258915167 },
  mha_gq = { 0.046040526559545714, 0.01895929390247109, -0.035897348738625115, -0.038164291379092115, 0.015479542260235976, 0.04644581022360793, 0.04158893670882936, 0.015295949416835057, -0.03340563960542073, -0.03316788834464535, 0.015660897045133265, 0.04154643157421216, 0.029414428408540604, 0.010175818106824506, -0.02397038956079576, -0.02299992036520029, 0.011665486048496028, 0.029240928071818575, -0.012367483704573322, 0.005276820755114026, 0.015190570446283152, 0.00285009884592599, -0.013665774240784167, -0.010161256049241627, -0.004596396010283998, 0.010136128004522094, 0.01001920074628108, -0.004775879077752553, -0.012574284864184035, -0.0019513338661696514, -0.00888579517905778, 0.0004556933949266498, 0.00912959007776747, 0.004428615908324246, -0.006760290941957568, -0.008045355724594352 },
  mha_gqw = { 0.03858810771446789, -0.010236572897345877, -0.04406465023280858, -0.01333791174471099, 0.036928898696791904, 0.03309478603228677, 0.015247933892548412, -0.011642713197265654, -0.021476758177109735, 0.0001526978872049075, 0.021558451189031307, 0.011381022992847501, -0.02815817424778561, -0.002792248114315908, 0.02666432804816828, 0.0170576011522094, -0.017538551393445335, -0.026440685059246932, -0.008577676748382654, 0.013245806979281904, 0.015664152450673326, -0.004865522115377803, -0.018267195383694534, -0.004907384619411786, 0.00035498334958799637, 0.009673677816457, 0.004820411619199863, -0.007094768893208366, -0.008616096355790739, 0.002485177528227217, 0.008015884899523065, -0.00494531604383527, -0.010661617397331733, -0.0007586242862241999, 0.010255755181469425, 0.006245429281631528 },
  mha_gbk = { 0.0364815450082006, -0.05777898020062786, -0.07540209624320643, 0.008185138897001528, 0.022112961999211766, -0.0009025429924028761 },
  mha_gow = { -0.18491284039737807, -0.4012942376768566, -0.1745863402246337, 0.05093607736409449, -0.14923570384390591, -0.5960130219193439, 0.30799238947099883, 0.6092307641879724, 0.30445103341860286, -0.01458861341831316, 0.23813019047752448, 0.8255811994815823, 0.26672087967534464, 0.571231041649563, 0.257331846946771, -0.060490380504845544, 0.21302556836999764, 0.8310715655556478, -0.12346566703921316, -0.21349540507016276, -0.11670620173638503, -0.017526521280958267, -0.09299906557396848, -0.2678562599740584, -0.24529346333772378, -0.5197245575932451, -0.23423090018693027, 0.052889824123072256, -0.1958078014835739, -0.7555434686712794, -0.04015726161458378, -0.13680047092527606, -0.04944914700697855, 0.045767035643748594, -0.035693584232577576, -0.22584713393847097 },
  enc_keys = { "layers.0.linear1.bias", "layers.0.linear1.weight", "layers.0.linear2.bias", "layers.0.linear2.weight", "layers.0.norm1.bias", "layers.0.norm1.weight", "layers.0.norm2.bias", "layers.0.norm2.weight", "layers.0.self_attn.in_proj_bias", "layers.0.self_attn.in_proj_weight", "layers.0.self_attn.out_proj.bias", "layers.0.self_attn.out_proj.weight", "layers.1.linear1.bias", "layers.1.linear1.weight", "layers.1.linear2.bias", "layers.1.linear2.weight", "layers.1.norm1.bias", "layers.1.norm1.weight", "layers.1.norm2.bias", "layers.1.norm2.weight", "layers.1.self_attn.in_proj_bias", "layers.1.self_attn.in_proj_weight", "layers.1.self_attn.out_proj.bias", "layers.1.self_attn.out_proj.weight", "norm.bias", "norm.weight" },
  enc_out = { -2.2882737184631967, 1.2667232568675701, 1.0033238410419458, -0.5474560675237693, -0.5916799822728801, 1.0267836441146747, 1.6043714081036826, 1.7233182544669639, 0.00782624940900065, -0.27825473936553335, -0.8512241740603694, -2.014905627654198, 1.2777770663517107, 1.7948735952631392, -1.2189419210934944, -0.7596292891712411, 0.2532675208910382, -0.3622617114646369, -0.5811629428135122, 0.056315620834156484, -0.4671783063783569, -0.43691910319548455, 2.023235631599999, -0.5775220198353332, -1.9192999961600847, -0.7746479665636822, 1.2981023729348213, -0.06284134966997178, 0.5944331806419736, 0.04437793165428699, -0.8887770290597253, 0.7292464815142876, 1.5020178208883133, -0.3601711237200175, -1.7955648036888066, 0.5924371170755673, 1.2647391642667867, 2.1263221570577855, -1.0400406664118567, -0.8313600343606774, -0.5596283015991552, 0.16439976246090363, -0.24666024844532175, 0.39025886055935355, -0.7193263797635029, -0.5211839296607405, 1.927541062432024, -0.6124141310819878 },
  enc_gsrc = { -4.401538496021762, 2.1126639910625813, -4.368723774061191, 3.3174187769746935, 0.02778947203407578, 2.068134858911832, 0.5339654091284154, -0.5887027529234495, 0.4718022598086484, -0.3191457807699811, 1.3150144721607528, -0.6828022155834248, 1.101484595888891, 2.0832526344614766, 0.6725699520662433, 0.1308176454985333, -1.0939245653702845, -2.9070855476177377, -1.2574177512929157, 0.4559876487286474, 0.6934889318241281, 0.9410713754575324, 0.6330389146452379, -1.6205086732015197, -1.6061096943718305, -0.3229304957686165, -1.3340923826954187, 0.8348520537327995, 1.2329506933903094, 1.2278171239320659, -2.6985564662431583, 1.8751528517798015, -1.6415449699652391, 0.6554454127283329, -0.26393652780090926, 1.7701396669488738, -0.16470188590444013, 1.9152898915944252, 2.136689386421464, -0.12302885421953971, -2.0133095245245753, -1.7356340436697437, -0.12191885118483989, 1.1932624961904124, -0.23328601666923712, -0.13588356609119617, 0.5520121233148483, -1.2553843916849248 },
  enc_g_l1w = { 0.11330967980357796, -0.9314255596560529, -0.5106171124279288, 0.4529038861526709, 0.49541296273753527, -0.2988499414164723, -0.06275708493912267, 0.10805533682479554, 0.24448996440655296, 0.05400244826798855, -0.14021712823194976, -0.12655176555076172, 0.9648029143901338, -0.8123845098414891, -1.3603538933414947, -0.36081278841220765, 0.4924037449848549, 0.985742903409837, 0.27448551305159846, 0.12059017412435838, -0.4869675090236679, -0.34376675843575316, 0.055770180468401855, 0.3590559508833442, 0.3137087800539977, -0.41371575552768597, -0.6855343760017221, 0.028129252435705004, 0.3175623677188724, -0.03438969216380739, -0.5241874817354453, -0.26014491534857287, 0.40783450889507805, 0.6093083435528175, 0.08561047839854015, -0.9260956431631591, 0.15262753101794305, -0.1030052840391192, -0.03839407839483521, 0.02783501262164374, -0.030202992249416145, 0.0035904212459882882, 0.36575528047249906, -0.4371704390213155, -0.6561295538241615, -0.13670223298022713, 0.2717068290168166, 0.43718220091096727 },
  enc_g_inw = { 0.07433643454787393, -0.10921184797871751, -0.12313602237961435, 0.04635016788742375, 0.13877190641013853, 0.05198763983194304, 0.20886874063936314, 0.2691713708824772, -0.14659135774011786, -0.1871609578036694, -0.10741396242415246, 0.10409173675192504, -0.05179723306069934, 0.13825835701749495, 0.10731722566417964, -0.06654686426983386, -0.15036303744393031, -0.04075501296485018, -0.09415678896043143, 0.07330371794843493, 0.1011313336647721, -0.04851193699088185, -0.0896496682771414, 0.005529384751238777, -0.07852027665525305, 0.053314086916323236, 0.15797733704932762, 0.0009017172117120754, -0.24911679221928834, -0.023396720174993297, 0.08568359986117167, -0.06755054998546686, -0.08408386634504386, 0.0486092420536547, 0.06276726569032089, -0.008054144504895553, -0.19835147303795636, -0.03328426606032435, 0.1625199268233078, 0.04655682738070874, -0.07778276397075283, -0.03707811777893044, -0.312823742162558, -0.14004526742179657, 0.1812956333240691, 0.09692595874881804, 0.07904585939350477, -0.045512337554358274, 0.14817048988909692, 0.02852335318290928, -0.11816958940410766, -0.03525663608788942, 0.050396022974149635, 0.025562894278406023, 0.06317578645059951, -0.08292618898097949, -0.11593430112026223, 0.014750134160729185, 0.21785336214052708, 0.013634178050176231, -0.0550588740872429, -0.0882427043613167, -0.05172010859823484, 0.023897736714878583, 0.1987568403924984, 0.028771250164655215, -0.1053286195821725, 0.05266806272836925, 0.13946403499220367, 0.0022398234576173058, -0.1968228377461695, -0.019107432504519923, -0.34551045885254755, 0.5380553568426143, 0.4032286411041699, -0.23330700924705464, -0.24848901950506702, -0.33517658099773, -1.2318849575892172, 0.4025972045034074, 0.7657346362550145, -0.17314626071512604, -0.12026196298745638, -0.13659586975447824, -0.3135451074581817, -0.32266679561822526, 0.0064375953668113625, 0.14067416540300784, 0.1841491510505909, 0.2620981106891708, 0.9754265646697926, -0.6650743801061707, -0.7315806538952425, 0.29153751832305286, 0.3168248232253883, 0.26880686640907825, 0.7535104806695965, -0.07243751154575379, -0.36763013682497275, 0.03569596535559324, 0.03090165557383184, -0.11422205529139866, -0.5723002227988676, 0.6263204811322363, 0.5348993919596922, -0.2724402604845652, -0.3002925098882674, -0.32991539839616085 },
  nf_keys = { "linear1.bias", "linear1.weight", "linear2.bias", "linear2.weight", "norm1.bias", "norm1.weight", "norm2.bias", "norm2.weight", "self_attn.in_proj_bias", "self_attn.in_proj_weight", "self_attn.out_proj.bias", "self_attn.out_proj.weight" },
  nf_out = { 0.6645244614394168, 0.4789376927702686, -1.0557279617009012, -1.236723597268031, 0.29612522808324127, 0.5924216135103765, -0.6125795135319658, -0.918288942695219, -0.5714265608075105, 0.20117903148540073, 0.3631745298046688, -0.45145160189287115, -1.0280522014505458, -0.6999878970259547, 0.9013298035219907, 1.294753230487039, -0.13663891024478103, -0.9827623951115612, 0.008070690220790905, 0.6006209541281442, 0.7232863611533805, 0.19623850351140143, -0.17860118003442094, 0.10106769190947267, 0.19034420123678905, -0.2969907159362316, -0.7533402007516388, -0.5613907784947996, -0.12488159215680578, -0.31425118736979596, -0.19410433488180334, -1.8176042062168087, -1.1953958973133982, 0.8269044274123759, 0.8214575851430034, -1.2387435145159893 },
  dec_keys = { "layers.0.linear1.bias", "layers.0.linear1.weight", "layers.0.linear2.bias", "layers.0.linear2.weight", "layers.0.multihead_attn.in_proj_bias", "layers.0.multihead_attn.in_proj_weight", "layers.0.multihead_attn.out_proj.bias", "layers.0.multihead_attn.out_proj.weight", "layers.0.norm1.bias", "layers.0.norm1.weight", "layers.0.norm2.bias", "layers.0.norm2.weight", "layers.0.norm3.bias", "layers.0.norm3.weight", "layers.0.self_attn.in_proj_bias", "layers.0.self_attn.in_proj_weight", "layers.0.self_attn.out_proj.bias", "layers.0.self_attn.out_proj.weight", "layers.1.linear1.bias", "layers.1.linear1.weight", "layers.1.linear2.bias", "layers.1.linear2.weight", "layers.1.multihead_attn.in_proj_bias", "layers.1.multihead_attn.in_proj_weight", "layers.1.multihead_attn.out_proj.bias", "layers.1.multihead_attn.out_proj.weight", "layers.1.norm1.bias", "layers.1.norm1.weight", "layers.1.norm2.bias", "layers.1.norm2.weight", "layers.1.norm3.bias", "layers.1.norm3.weight", "layers.1.self_attn.in_proj_bias", "layers.1.self_attn.in_proj_weight", "layers.1.self_attn.out_proj.bias", "layers.1.self_attn.out_proj.weight" },
  dec_out = { 0.9037910584880837, 1.6925602873355883, -1.218395945980926, -0.2151878991985324, 0.4405593954810009, -1.3056228678990447, 0.09724150009555073, 0.5737554322012662, -1.3785415605171272, 0.45833925727152885, 0.8806256643230025, -0.922583348886949, 0.09270429292356976, 0.36811709355958727, -1.3437737093262907, -0.08675109590821072, 1.3418352813785597, -0.39317140716551396, -1.1559722036474243, 0.6231519555637772, -0.994999000009161, 1.0914207938830385, -0.03191311960703666, -0.13960992024344576, -0.8812296567849947, 1.1320156399989025, -0.6244928547535477, 1.1435645684242808, -1.0386877943283754, -0.2001488044376165, 1.1641550648849757, 0.8592449662372069, -0.4999650424917534, -1.3185130757557482, 0.8845526401992737, -0.34063519772499223 },
  dec_gtgt = { 1.2056219149227017, -5.416444651848983, 4.443252667506558, -0.5374781850470642, 1.43774305416034, -0.3008517723010664, 0.17475799087192845, 1.2761377891656405, 0.734701637265531, -1.4042176032959395, 0.9808551955832612, -1.9796862672615945, -0.8407390743436403, -0.8760165370302373, 0.6402674596941635, 0.9332513606883175, 0.37570017442149073, -1.3017083642316587, -0.2569223628057426, 0.5289507558795583, -0.5498785757978236, -0.42638677594168684, 0.7284965724562733, 0.49095710308226737, -1.710551897556928, 3.3475004636864756, 1.156125950103904, -4.0767339297507, 0.43623390229780645, 0.2746480972588622, 0.8032972881892596, 1.2685126237434392, 0.16727176173727692, 2.79695461626061, -2.3757620845048106, -2.4880245495789084 },
  dec_g_mhw = { -0.0036694373875863964, 0.022882353232361673, 0.016208018164396848, -0.0601014377339666, -0.03989734299213482, 0.03056423111515636, 0.004321300748019026, 0.061579316555256884, -0.07658711798065296, 0.15356540661681606, -0.013119856863865307, -0.09306473237917495, 0.004135752586060493, -0.016237277386962807, -0.024472598485051487, 0.07667280992973538, 0.03848156820251143, -0.04060692466529377, -0.06820624401444572, -0.1539864813346796, 0.15864429981619882, -0.1931005208710048, 0.017691173632925793, 0.19831897668170004, 0.001506394072479125, -0.005244502600819857, 0.0725266921682118, -0.15827825460772638, -0.0625714435658585, 0.08245893236632686, 0.06836880026587325, 0.15342054264774166, -0.15081788346029196, 0.17602058128444154, -0.02444331073854172, -0.18942076393175616, 0.022715725183180876, 0.030535247913722533, -0.006379439085816479, -0.03394823287919806, -0.011782785972303898, 0.02764446998814717, 0.05400344477529983, 0.07114165500963991, -0.01594282601231323, -0.07967102957615846, -0.02668098816156128, 0.06539676341663052, -0.013871614225178045, -0.012967536190539971, 0.006934012742945251, 0.016677216763351543, 0.0019882591548844894, -0.015613502773484162, -0.10135966543944624, -0.11573713116947297, 0.03944057140703745, 0.13683774447280642, 0.0337673013091752, -0.11877231738077114, 0.010505373210794231, 0.0033953821346491574, -0.008688851723291247, -0.008043897450795402, 0.004385385431963101, 0.010390068383030315, 0.1056896285228058, 0.12400925750683557, -0.039344966279438766, -0.14505872229088274, -0.03826111030974213, 0.12458911791141893, 0.00032645573959356187, 0.09450474352522767, 0.05023336064533765, -0.06763001326422056, -0.08641525930142437, 0.021398051987376772, 0.020065550689779405, 0.22134436575586677, 0.09835316643491407, -0.16872565213015295, -0.18862099504238025, 0.06781386167446649, 0.010408566870852254, 0.023913973599465562, 0.0023853529803802803, -0.022637815343250125, -0.014496531154257796, 0.014882205137481756, 0.05203204751288974, -0.12523331395791057, -0.11903157708992239, 0.06155169907613096, 0.1519615918953541, 0.019747396579743424, 0.055161630330779664, -0.05110662963775978, -0.08250355745688218, 0.006967419683607425, 0.08623111066468077, 0.03916602250399459, -0.022520704515877867, 0.09789138683180758, 0.07489236713576783, -0.05782414586832882, -0.10582814970775543, 0.0012063337036618289 },
  tr_keys = { "decoder.layers.0.linear1.bias", "decoder.layers.0.linear1.weight", "decoder.layers.0.linear2.bias", "decoder.layers.0.linear2.weight", "decoder.layers.0.multihead_attn.in_proj_bias", "decoder.layers.0.multihead_attn.in_proj_weight", "decoder.layers.0.multihead_attn.out_proj.bias", "decoder.layers.0.multihead_attn.out_proj.weight", "decoder.layers.0.norm1.bias", "decoder.layers.0.norm1.weight", "decoder.layers.0.norm2.bias", "decoder.layers.0.norm2.weight", "decoder.layers.0.norm3.bias", "decoder.layers.0.norm3.weight", "decoder.layers.0.self_attn.in_proj_bias", "decoder.layers.0.self_attn.in_proj_weight", "decoder.layers.0.self_attn.out_proj.bias", "decoder.layers.0.self_attn.out_proj.weight", "decoder.norm.bias", "decoder.norm.weight", "encoder.layers.0.linear1.bias", "encoder.layers.0.linear1.weight", "encoder.layers.0.linear2.bias", "encoder.layers.0.linear2.weight", "encoder.layers.0.norm1.bias", "encoder.layers.0.norm1.weight", "encoder.layers.0.norm2.bias", "encoder.layers.0.norm2.weight", "encoder.layers.0.self_attn.in_proj_bias", "encoder.layers.0.self_attn.in_proj_weight", "encoder.layers.0.self_attn.out_proj.bias", "encoder.layers.0.self_attn.out_proj.weight", "encoder.norm.bias", "encoder.norm.weight" },
  tr_out = { -1.038536036849402, -0.8738616686489389, 0.5382169648988065, 0.6914454859172526, -0.2904809238901745, -1.130751029703817, 0.10767101541093627, 0.8570248760638873, 1.363442287563513, -0.8382250681889971, -0.7219591690540538, 0.5154149958823842, 1.0469481448034437, 1.5749976163358077, -0.31330239063011556, -1.3495157642683913 },
}

function T.multihead_attention_matches_pytorch()
  local m = fill(nn.MultiheadAttention(6, 2, { add_bias_kv = true, kdim = 4, vdim = 5, batch_first = true }), R.mha_keys)
  local q = seq(100, { 2, 3, 6 }):requires_grad_()
  local k, v = seq(101, { 2, 4, 4 }), seq(102, { 2, 4, 5 })
  local kpm = ember.tensor({ { false, false, false, true }, { false, true, false, false } })
  local am = ember.tensor({ { false, true, false, false }, { false, false, false, true }, { true, false, false, false } })
  local o, w = m(q, k, v, { key_padding_mask = kpm, attn_mask = am })
  check_shape(o, { 2, 3, 6 })
  check_shape(w, { 2, 3, 5 })
  check_tensor(o:flatten(), R.mha_out, 1e-10)
  check_tensor(w:flatten(), R.mha_w, 1e-10)
  ;(o:pow(2):sum() + (w * seq(103, { 2, 3, 5 })):sum()):backward()
  check_tensor(q.grad:flatten(), R.mha_gq, 1e-9)
  check_tensor(m.q_proj_weight.grad:flatten(), R.mha_gqw, 1e-9)
  check_tensor(m.bias_k.grad:flatten(), R.mha_gbk, 1e-9)
  check_tensor(m.out_proj.weight.grad:flatten(), R.mha_gow, 1e-9)
  -- positional options in PyTorch's order
  local o2 = m(q, k, v, kpm, false, am)
  check_tensor(o2:flatten(), R.mha_out, 1e-10)
end

function T.transformer_encoder_matches_pytorch()
  local layer = nn.TransformerEncoderLayer(6, 2, { dim_feedforward = 8, dropout = 0.1, activation = "gelu" })
  local enc = fill(nn.TransformerEncoder(layer, 2, { norm = nn.LayerNorm(6) }), R.enc_keys)
  enc:eval()
  local src = seq(110, { 4, 2, 6 }):requires_grad_()
  local mask = nn.Transformer.generate_square_subsequent_mask(4, { dtype = "float64" })
  local kpm = ember.tensor({ { false, false, false, true }, { false, false, false, false } })
  local o = enc(src, mask, kpm)
  check_tensor(o:flatten(), R.enc_out, 1e-9)
  o:pow(2):sum():backward()
  check_tensor(src.grad:flatten(), R.enc_gsrc, 1e-8)
  check_tensor(enc.layers[1].linear1.weight.grad:flatten(), R.enc_g_l1w, 1e-8)
  check_tensor(enc.layers[2].self_attn.in_proj_weight.grad:flatten(), R.enc_g_inw, 1e-8)
  -- the options-table spelling gives the same
  check_tensor(enc(src, { mask = mask, src_key_padding_mask = kpm }):flatten(), R.enc_out, 1e-9)
end

function T.encoder_layer_norm_first_batch_first_matches_pytorch()
  local l = fill(nn.TransformerEncoderLayer(6, 3, { dim_feedforward = 5, dropout = 0.0, norm_first = true,
    batch_first = true }), R.nf_keys)
  check_tensor(l(seq(120, { 2, 3, 6 })):flatten(), R.nf_out, 1e-10)
end

function T.transformer_decoder_matches_pytorch()
  local dec = fill(nn.TransformerDecoder(nn.TransformerDecoderLayer(6, 2, { dim_feedforward = 7, dropout = 0.2 }), 2),
    R.dec_keys)
  dec:eval()
  local tgt = seq(130, { 3, 2, 6 }):requires_grad_()
  local mem = seq(131, { 4, 2, 6 })
  local o = dec(tgt, mem, { tgt_mask = nn.Transformer.generate_square_subsequent_mask(3, { dtype = "float64" }),
    memory_key_padding_mask = ember.tensor({ { false, false, true, false }, { false, false, false, false } }) })
  check_tensor(o:flatten(), R.dec_out, 1e-9)
  o:pow(2):sum():backward()
  check_tensor(tgt.grad:flatten(), R.dec_gtgt, 1e-8)
  check_tensor(dec.layers[2].multihead_attn.in_proj_weight.grad:flatten(), R.dec_g_mhw, 1e-8)
end

function T.transformer_matches_pytorch()
  local tr = fill(nn.Transformer({ d_model = 4, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1,
    dim_feedforward = 6, dropout = 0.0 }), R.tr_keys)
  local o = tr(seq(140, { 3, 2, 4 }), seq(141, { 2, 2, 4 }),
    { tgt_mask = nn.Transformer.generate_square_subsequent_mask(2, { dtype = "float64" }) })
  check_tensor(o:flatten(), R.tr_out, 1e-10)
end

function T.square_subsequent_mask_and_is_causal()
  local m = nn.Transformer.generate_square_subsequent_mask(3)
  check(m.dtype == "float32")
  check_tensor(m, { { 0, -math.huge, -math.huge }, { 0, 0, -math.huge }, { 0, 0, 0 } })
  check_shape(nn.Transformer.generate_square_subsequent_mask(0), { 0, 0 })
  -- is_causal without a mask = the causal mask
  local a = nn.MultiheadAttention(4, 2)
  local x = ember.randn(3, 2, 4)
  local o1, w1 = a(x, x, x, { is_causal = true })
  local o2, w2 = a(x, x, x, { attn_mask = m })
  check_tensor(o1, o2:tolist(), 1e-6)
  check_tensor(w1, w2:tolist(), 1e-6)
  check(w1[1][1][2]:item() == 0, "a query does not see later keys")
end

function T.deep_copies_are_independent()
  local layer = nn.TransformerEncoderLayer(4, 2, { dim_feedforward = 6 })
  local enc = nn.TransformerEncoder(layer, 3)
  check_eq(#enc.layers, 3)
  for i = 1, 3 do
    local li = enc.layers[i]
    check(li ~= layer and li.self_attn ~= layer.self_attn, "a copy, not the layer itself")
    check_tensor(li.linear1.weight, layer.linear1.weight:tolist(), 0)
    check(li.self_attn.in_proj_weight.requires_grad, "copied parameters require grad")
  end
  -- changing one copy leaves the others and the original alone
  ember.no_grad(function() enc.layers[1].linear1.weight:fill_(7) end)
  check(enc.layers[2].linear1.weight[1][1]:item() ~= 7 and layer.linear1.weight[1][1]:item() ~= 7)
  -- parameters are distinct tensors: 3 x the layer's
  check_eq(#enc:parameters(), 3 * #layer:parameters())
  -- train/eval reach every copy
  enc:eval()
  check(not enc.layers[3].dropout1.training and not enc.layers[3].self_attn.training)
  -- an activation function survives the copy
  local l2 = nn.TransformerEncoderLayer(4, 2, { dim_feedforward = 6, activation = function(t) return t:tanh() end })
  local e2 = nn.TransformerEncoder(l2, 2)
  e2:eval()
  check_shape(e2(ember.randn(2, 1, 4)), { 2, 1, 4 })
end

function T.initialisation_and_parameter_names()
  ember.manual_seed(3)
  local m = nn.MultiheadAttention(16, 4)
  check_shape(m.in_proj_weight, { 48, 16 })
  check_tensor(m.in_proj_bias, ember.zeros(48):tolist())
  check_tensor(m.out_proj.bias, ember.zeros(16):tolist())
  local bound = math.sqrt(6 / (16 + 48)) -- xavier_uniform_ of {48, 16}
  check(m.in_proj_weight:abs():max():item() <= bound, "xavier_uniform_ bound")
  check(m.in_proj_weight:abs():max():item() > bound * 0.8, "xavier_uniform_ spread")
  local s = nn.MultiheadAttention(8, 2, { kdim = 3, vdim = 5, bias = false })
  check(s.in_proj_weight == nil and s.in_proj_bias == nil and s.out_proj.bias == nil)
  check_shape(s.k_proj_weight, { 8, 3 })
  check_shape(s.v_proj_weight, { 8, 5 })
  local o, w = s(ember.randn(2, 8), ember.randn(4, 3), ember.randn(4, 5), { need_weights = false })
  check_shape(o, { 2, 8 })
  check(w == nil)
  local tr = nn.Transformer({ d_model = 8, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 1, dim_feedforward = 4 })
  check(tr.encoder.layers[2].linear1.weight ~= nil and tr.decoder.norm ~= nil)
  check_eq(#tr.encoder.layers, 2)
end

function T.training_mode_dropout_changes_the_output()
  ember.manual_seed(5)
  local l = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0.5 })
  local x = ember.randn(4, 2, 8)
  local a, b = l(x), l(x)
  check((a - b):abs():max():item() > 1e-3, "dropout differs between calls while training")
  l:eval()
  check_tensor(l(x), l(x):tolist(), 0)
end

function T.errors()
  check_error(function() nn.MultiheadAttention(6, 4) end, "MultiheadAttention", "embed_dim (6)", "num_heads (4)")
  check_error(function() nn.MultiheadAttention(0, 1) end, "embed_dim", "positive")
  check_error(function() nn.MultiheadAttention(4, 2, { dropout = 2 }) end, "dropout")
  check_error(function() nn.TransformerEncoderLayer(4, 2, { activation = "tanh" }) end, "activation", "tanh")
  check_error(function() nn.TransformerEncoder("x", 2) end, "TransformerEncoder", "Module expected")
  check_error(function() nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2), -1) end, "num_layers")
  local m = nn.MultiheadAttention(4, 2)
  local x = ember.randn(3, 2, 4)
  check_error(function() m(x, x, x, { bogus = 1 }) end, "MultiheadAttention", "unknown option 'bogus'")
  check_error(function() m(x, nil, x) end, "key", "tensor expected")
  check_error(function() m(x, x, x, { attn_mask = ember.zeros(2, 2) }) end, "multi_head_attention_forward", "attn_mask")
  check_error(function() m(ember.randn(3, 2, 5), ember.randn(3, 2, 5), ember.randn(3, 2, 5)) end,
    "embed_dim_to_check is 4", "embedding dim 5")
  local tr = nn.Transformer({ d_model = 4, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 4 })
  check_error(function() tr(ember.randn(3, 2, 4), ember.randn(3, 3, 4)) end, "batch number of src (2) and tgt (3)")
  check_error(function() tr(ember.randn(3, 2, 4), ember.randn(3, 2, 5)) end, "d_model (4)")
  check_error(function() nn.Transformer.generate_square_subsequent_mask(-1) end, "sz")
  local d = nn.TransformerDecoderLayer(4, 2)
  check_error(function() d(x) end, "memory", "tensor expected")
end

return T
