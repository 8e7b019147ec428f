-- test_attention.lua -- the attention family (schema/ops/attention.yaml):
-- F.multi_head_attention_forward against values computed with PyTorch 1.13
-- (the inputs are deterministic sine sequences; R below is torch's output for
-- the same inputs in float64), masks, dropout, unbatched inputs, gradients
-- and error messages.
local ember = ember or require "ember"
local F = ember.nn.functional
local T = {}

-- seq(off, ...): float64 tensor of the given shape, v[i] = 0.5 sin(1.3 i + off)
local function seq(off, ...)
  local shape = { ... }
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 1, n do v[i] = math.sin(i * 1.3 + off) * 0.5 end
  return ember.tensor(v, { dtype = "float64" }):reshape(shape)
end

-- torch 1.13's results (F.multi_head_attention_forward in float64)
local R = {
  self_out = { -1.1480039971351028, 0.1889093817768983, 1.262393013792418, 0.7931899301165624, -1.1283903240311164, 0.030308195257270326, 1.094164740743499, 0.7941556156212094, -1.2426558380129487, -0.09476015402826723, 1.091237041340745, 0.9164806129492543, -1.2598204104687567, -0.2657115304814357, 0.9482144740964411, 0.9534150751501517, -1.253232170665037, -0.177768707701308, 1.0240315914801301, 0.9365154192984158, -1.036460186201247, -0.14662663679301083, 0.8364407658150519, 0.7295944899759347 },
  self_w = { 1.0, 0.0, 0.0, 0.5956324474219057, 0.4043675525780943, 0.0, 0.46432978877436665, 0.5356702112256333, 0.0, 0.5029997307885044, 0.0, 0.49700026921149576, 0.6407322476788975, 0.35926775232110264, 0.0, 0.3236528602382244, 0.37542811878031734, 0.3009190209814582 },
  self_gx = { 0.18028767814248806, 6.729533766106596, 3.4199971211037585, -4.899843318517179, -0.20702253260007628, 4.882723456536209, 2.81926814284254, -3.3744216049582274, -0.0500160155343199, 3.372110749504757, 1.8540873665041249, -2.3801783520897675, -0.48369090770921336, 2.1493747100281397, 1.6336013421248943, -1.2754018191122212, 0.016622228869536335, 0.07863441773171513, 0.025447000396084427, -0.0650203321357913, -0.18125781385848472, 2.36731275423318, 1.4477645913493284, -1.5927620896129862 },
  self_gw = { 0.007023850439966983, -0.013127928133256831, -0.01404726123579501, 0.005612676281339313, -0.008309336766398093, -0.02571117296711507, -0.005446080536136789, 0.022797532639091542, -0.15482903205315582, -0.18948455932377628, 0.05345523673004304, 0.21808298574204923, -0.22345231144914787, -0.2716065362046119, 0.0781434508861171, 0.31341309935805034, 0.02825281936475626, -0.04069422901053434, -0.050024136548953615, 0.013931433150931368, 0.224502153709253, -0.19939804086967225, -0.3311796384346031, 0.022217710178531122, -0.3557002999341116, -0.2863378584963722, 0.2025102164568067, 0.39468034986978684, 0.40580385754658965, 0.4192476936050937, -0.1815073236607446, -0.5163536865371596, 2.2197693341206417, 3.222014474466458, -0.4959991386581552, -3.4873728516461813, 0.6622046769308151, 1.3146855157493205, 0.04114899401449506, -1.2926709003534063, -1.7832808544135947, -2.3509376861590883, 0.525534699979686, 2.6320975194513694, -1.5457084862573958, -2.4619614509020185, 0.22856487778703577, 2.5842431250475277 },
  self_gow = { -8.46248554267481, -3.1674289076273667, 7.116503635064105, 8.328172667629307, -0.582239181833, -0.5493759421168569, 0.13979507356647902, 0.6044119782787436, 7.470744414862288, 2.487302172642263, -6.607096010513986, -7.322577882886271, 6.151975177321106, 2.349896682741193, -5.117496184831386, -6.057509212498367 },
  cross_out = { -0.7899818078946572, 0.00012649055195701475, 0.7274749609616313, 0.48073677027998457, -0.8390658915091077, -0.006660198114140481, 0.7701996910100979, 0.5275579555551116, -0.8105212306426659, 0.02694311039468472, 0.773142450638125, 0.49671211093700707, -0.8605601533705888, -0.025726267708857053, 0.7738284099489832, 0.5500242557864905, -0.8377057273527562, -0.027352901901490118, 0.7494497734564389, 0.5288072947384661, -0.873596802254027, -0.08041128248960067, 0.7356233766422495, 0.5689098805036524 },
  cross_w = { 0.08417122537640237, 0.13562145524042976, 0.24608180099891713, 0.17031001020301215, 0.09486346392212934, 0.1325275488028666, 0.1364244954562426, 0.08860918551673506, 0.19784234184549407, 0.13318178666760513, 0.17338079250879201, 0.10614487864715497, 0.1714314223443361, 0.12940959246988268, 0.08649116833233134, 0.20069099979578545, 0.2104373684289491, 0.1334359660230656, 0.10011435343029472, 0.14839100917089582, 0.12043913481867795, 0.11090320144647225, 0.18467066704274507, 0.197034174970703, 0.13920148016074185, 0.08020420049726619, 0.14324894396315885, 0.14473733191891275, 0.12591947402645623, 0.22318033296675224, 0.13971144974916544, 0.1360108732778216, 0.08567448540688417, 0.16019953361072084, 0.1293038509621996, 0.10935384062362358, 0.2446036678781929, 0.2040062701304128, 0.09188571713798871, 0.09917487508040586, 0.1353080856999666, 0.11566754344940937, 0.16683417842674467, 0.19772888727945373, 0.15190629556048635, 0.11512528530392076, 0.07580490514691995, 0.15282268400939122, 0.13977776427308333, 0.20499786158174138, 0.20183241683514316, 0.10756731891646451, 0.1225530552262675, 0.0777069983805515, 0.16689412003901366, 0.11844822902081815, 0.15064677073131572, 0.25354788532043937, 0.14739908159502554, 0.07590531332713422, 0.11860834861186713, 0.12829789184055485, 0.12559470857366314, 0.23988103258134083, 0.1585607351452259, 0.11745854403179166, 0.10353718323229556, 0.07968895829426914, 0.15622896777823264, 0.1446445789368442, 0.22841682053113127, 0.20295948987260823, 0.09467684541440582, 0.0958920902301689, 0.11889859607285475, 0.1460388628837959, 0.1131172949950352, 0.20125733007268137, 0.2056891558901481, 0.10172176816886142, 0.08066968148848426, 0.1509046079524172, 0.1313877138416913, 0.12836974258571632 },
  sep_out = { 0.15671301764986026, 0.23915897058685423, 0.06738691197209495, -0.1760151872140996, 0.15549155047393598, 0.23852432874289242, 0.06801369857961742, -0.17479322542019363, 0.1505545240542918, 0.23641955266997947, 0.07097847964023389, -0.16991035063997179 },
  sep_w = { 0.15201085815229687, 0.2576666616103136, 0.30336887414557967, 0.17457590902713188, 0.11237769706467801, 0.15230124423426522, 0.2580892967609893, 0.3026948552273373, 0.1756941635343892, 0.11122044024301894, 0.14748410520329153, 0.26893711039394985, 0.29510607936419475, 0.1731052465863058, 0.11536745845225813 },
  static_out = { -0.3876092044091263, 0.20628368743868059, 0.5182785247760693, 0.07855553753413805, -0.2889323845061782, 0.16242524726500865, 0.3785048840759302, -0.008558584044918272, -0.2961969517567561, 0.23510426283899405, 0.45387211222673185, -0.01061599390220426, -0.24233376762877798, 0.19428828838926473, 0.361762999128617, -0.056109329582792536, -0.34801039690297453, 0.25633298181166, 0.5255775748710395, 0.035345696469458884, -0.3219255418214433, 0.18811303474157542, 0.43556835475438044, 0.019224003148743327 },
  static_w = { 0.24668884616167921, 0.2558205100504374, 0.2403855810642501, 0.2571050627236333, 0.1980834951784868, 0.3212130077017791, 0.20838103990522255, 0.27232245721451154, 0.246932048061881, 0.26012355716261637, 0.22587507835204151, 0.2670693164234611, 0.26693742411169663, 0.23525265329525735, 0.22382553263650468, 0.27398438995654145, 0.27446686814463395, 0.21607286782338478, 0.2413075751997077, 0.2681526888322736, 0.2578198077854211, 0.2372717147998119, 0.2710698863598193, 0.2338385910549476 },
  qkv_out = { -0.9719045803122821, -0.07309026063998472, 0.8407911962755032, 0.6601346122190174, -1.0139275531918048, -0.034223397678142004, 0.919233715672567, 0.6947710054098298, -0.9710536258068625, -0.008154944056640079, 0.9007867985210132, 0.6514171753491284, -1.0491446782413338, -0.04289863477573588, 0.9463218543066834, 0.7288287315965827, -1.0044108909605272, -0.06173903445223744, 0.8839339843410704, 0.6892096169414645, -1.0907641334883553, -0.10641370119882307, 0.9284255745577705, 0.7755743871864278 },
}

local L, N, E, H, S = 3, 2, 4, 2, 5
local mha = F.multi_head_attention_forward
local function weights()
  return seq(1, 3 * E, E), seq(2, 3 * E), seq(3, E, E), seq(4, E)
end

function T.mha_self_attention_masks_and_gradients_match_pytorch()
  local w, b, ow, ob = weights()
  local x = seq(0, L, N, E):requires_grad_()
  w:requires_grad_()
  ow:requires_grad_()
  local am = ember.tensor({ { false, true, false }, { false, false, true }, { false, false, false } })
  local kpm = ember.tensor({ { false, false, true }, { false, false, false } })
  local o, a = mha(x, x, x, E, H, w, b, nil, nil, false, 0.0, ow, ob, { key_padding_mask = kpm, attn_mask = am })
  check_shape(o, { L, N, E })
  check_shape(a, { N, L, L })
  check_tensor(o:flatten(), R.self_out, 1e-10)
  check_tensor(a:flatten(), R.self_w, 1e-10)
  ;(o:pow(2):sum() + (a * seq(5, N, L, L)):sum()):backward()
  check_tensor(x.grad:flatten(), R.self_gx, 1e-9)
  check_tensor(w.grad:flatten(), R.self_gw, 1e-9)
  check_tensor(ow.grad:flatten(), R.self_gow, 1e-9)
end

function T.mha_cross_attention_bias_kv_zero_attn_float_mask_match_pytorch()
  local w, b, ow, ob = weights()
  local q, kv = seq(6, L, N, E), seq(7, S, N, E)
  local o, a = mha(q, kv, kv, E, H, w, b, seq(8, 1, 1, E), seq(9, 1, 1, E), true, 0.0, ow, ob,
    { attn_mask = seq(10, N * H, L, S), average_attn_weights = false })
  check_shape(a, { N, H, L, S + 2 })
  check_tensor(o:flatten(), R.cross_out, 1e-10)
  check_tensor(a:flatten(), R.cross_w, 1e-10)
end

function T.mha_separate_weights_unbatched_float_key_padding_mask_match_pytorch()
  local _, _, ow = weights()
  local o, a = mha(seq(13, L, E), seq(11, S, 3), seq(12, S, 5), E, H, nil, nil, nil, nil, false, 0.0, ow, nil,
    { key_padding_mask = seq(17, S), use_separate_proj_weight = true, q_proj_weight = seq(14, E, E),
      k_proj_weight = seq(15, E, 3), v_proj_weight = seq(16, E, 5) })
  check_shape(o, { L, E })
  check_shape(a, { L, S })
  check_tensor(o:flatten(), R.sep_out, 1e-10)
  check_tensor(a:flatten(), R.sep_w, 1e-10)
end

function T.mha_static_kv_and_three_projections_match_pytorch()
  local w, b, ow, ob = weights()
  local q, k2, v2 = seq(6, L, N, E), seq(20, S, N, E), seq(21, S, N, E)
  local o, a = mha(q, k2, v2, E, H, w, b, nil, nil, false, 0.0, ow, ob,
    { static_k = seq(18, N * H, 4, E // H), static_v = seq(19, N * H, 4, E // H) })
  check_shape(a, { N, L, 4 })
  check_tensor(o:flatten(), R.static_out, 1e-10)
  check_tensor(a:flatten(), R.static_w, 1e-10)
  o = mha(q, k2, v2, E, H, w, b, nil, nil, false, 0.0, ow, ob)
  check_tensor(o:flatten(), R.qkv_out, 1e-10)
end

function T.mha_need_weights_dropout_and_masks()
  local w, b, ow, ob = weights()
  local x = seq(0, L, N, E)
  local o, a = mha(x, x, x, E, H, w, b, nil, nil, false, 0.0, ow, ob, { need_weights = false })
  check(a == nil, "need_weights = false gives nil weights")
  check_tensor(o:flatten(), mha(x, x:clone(), x:clone(), E, H, w, b, nil, nil, false, 0.0, ow, ob):flatten():tolist(), 1e-12)
  -- dropout_p = 1 while training drops every weight: the output is out_proj_bias
  o, a = mha(x, x, x, E, H, w, b, nil, nil, false, 1.0, ow, ob)
  check_tensor(o, ob:expand(L, N, E):tolist(), 1e-12)
  check_tensor(a, ember.zeros(N, L, L):tolist())
  -- not training: no dropout
  local o2 = mha(x, x, x, E, H, w, b, nil, nil, false, 1.0, ow, ob, { training = false })
  check_tensor(o2, mha(x, x, x, E, H, w, b, nil, nil, false, 0.0, ow, ob):tolist(), 1e-12)
  -- dropout 0.5: weights are 0 or twice the undropped ones
  local _, a0 = mha(x, x, x, E, H, w, b, nil, nil, false, 0.0, ow, ob, { average_attn_weights = false })
  local _, ad = mha(x, x, x, E, H, w, b, nil, nil, false, 0.5, ow, ob, { average_attn_weights = false })
  local r = ad / a0
  check(((r:eq(0)) + (r - 2):abs():lt(1e-9)):all(), "dropped weights are 0 or scaled by 2")
  -- a uint8 mask acts as bool; a bool mask equals the -inf float mask
  local am = ember.tensor({ { 0, 1, 0 }, { 0, 0, 1 }, { 0, 0, 0 } }, { dtype = "uint8" })
  local fm = ember.zeros(L, L, { dtype = "float64" }):masked_fill(am:bool(), -math.huge)
  check_tensor(mha(x, x, x, E, H, w, b, nil, nil, false, 0.0, ow, ob, { attn_mask = am }),
    mha(x, x, x, E, H, w, b, nil, nil, false, 0.0, ow, ob, { attn_mask = fm }):tolist(), 1e-12)
  -- a fully masked row gives NaN, as PyTorch
  local all = ember.ones(L, L, { dtype = "bool" })
  check(mha(x, x, x, E, H, w, b, nil, nil, false, 0.0, ow, ob, { attn_mask = all }):isnan():all(), "NaN rows")
end

function T.mha_float32_noncontiguous_and_empty()
  local w, b, ow, ob = weights()
  local x = seq(0, N, L, E):transpose(1, 2) -- (L, N, E), not contiguous
  local o64 = mha(x, x, x, E, H, w, b, nil, nil, false, 0.0, ow, ob)
  local xf = x:float()
  local o32 = mha(xf, xf, xf, E, H, w:float(), b:float(), nil, nil, false, 0.0, ow:float(), ob:float())
  check(o32.dtype == "float32", "float32 stays float32")
  check_tensor(o32, o64:tolist(), 1e-5)
  -- bfloat16 and float16 compute (torch 1.13's CPU has bfloat16 only; ember both)
  for _, dt in ipairs({ "bfloat16", "float16" }) do
    local xh = x:to(dt)
    local oh, ah = mha(xh, xh, xh, E, H, w:to(dt), b:to(dt), nil, nil, false, 0.0, ow:to(dt), ob:to(dt))
    check(oh.dtype == dt and ah.dtype == dt, dt .. " results")
    check((oh:double() - o64):abs():max():item() < 0.1, dt .. " close to float64")
  end
  check_tensor(o64, mha(x:contiguous(), x:contiguous(), x:contiguous(), E, H, w, b, nil, nil, false, 0.0, ow, ob):tolist(), 1e-12)
  -- a batch of 0 and a target length of 0
  local o, a = mha(ember.zeros(L, 0, E, { dtype = "float64" }), ember.zeros(S, 0, E, { dtype = "float64" }),
    ember.zeros(S, 0, E, { dtype = "float64" }), E, H, w, b, nil, nil, false, 0.0, ow, ob)
  check_shape(o, { L, 0, E })
  check_shape(a, { 0, L, S })
  o = mha(ember.zeros(0, N, E, { dtype = "float64" }), seq(7, S, N, E), seq(7, S, N, E), E, H, w, b, nil, nil, false, 0.0, ow, ob)
  check_shape(o, { 0, N, E })
end

function T.mha_errors()
  local w, b, ow, ob = weights()
  local x = seq(0, L, N, E)
  local function call(q, k, v, emb, heads, opts, ww, bb)
    return mha(q, k, v, emb, heads, ww or w, bb or b, nil, nil, false, 0.0, ow, ob, opts)
  end
  check_error(function() call(x, x, x, 6, H) end, "multi_head_attention_forward", "embed_dim_to_check is 6",
    "embedding dim 4")
  check_error(function() call(x, x, x, E, 3) end, "multi_head_attention_forward", "embed_dim 4 not divisible by num_heads 3")
  check_error(function() call(x, x, x, E, 0) end, "num_heads", "positive")
  check_error(function() call(seq(0, 2, L, N, E), x, x, E, H) end, "query", "(L, N, E)")
  check_error(function() call(x, seq(0, S, E), seq(0, S, E), E, H) end, "key_ and value must be 3-d")
  check_error(function() call(x, seq(0, S, N, E), seq(0, S + 1, N, E), E, H) end, "key_ shape", "value shape")
  check_error(function() call(x, seq(0, S, 3, E), seq(0, S, 3, E), E, H) end, "same batch size")
  check_error(function() call(x, x, x, E, H, { attn_mask = ember.zeros(L, L + 1) }) end, "attn_mask must have shape",
    "{3,3}", "{4,3,3}", "{3,4}")
  check_error(function() call(x, x, x, E, H, { attn_mask = ember.zeros(2, L, L) }) end, "attn_mask", "{2,3,3}")
  check_error(function() call(x, x, x, E, H, { attn_mask = ember.zeros(L, L, { dtype = "int64" }) }) end,
    "attn_mask must be bool, uint8 or float", "int64")
  check_error(function() call(x, x, x, E, H, { key_padding_mask = ember.zeros(N, L + 1, { dtype = "bool" }) }) end,
    "key_padding_mask must have shape {2,3}", "{2,4}")
  check_error(function() call(x, x, x, E, H, { key_padding_mask = ember.zeros(L, { dtype = "bool" }) }) end,
    "key_padding_mask must be (N, S)")
  check_error(function() call(x, x, x, E, H, { key_padding_mask = ember.zeros(N, L, { dtype = "int32" }) }) end,
    "key_padding_mask must be bool or float")
  check_error(function() call(x, x, x, E, H, { key_padding_mask = ember.zeros(N, L), attn_mask = ember.zeros(L, L) }) end,
    "float key_padding_mask")
  check_error(function() call(x, x, x, E, H, nil, seq(0, 3 * E, E + 1)) end, "in_proj_weight", "{12,4}", "{12,5}")
  check_error(function() call(x, x, x, E, H, nil, nil, seq(0, E)) end, "in_proj_bias", "{12}", "{4}")
  check_error(function() mha(x, x, x, E, H, nil, b, nil, nil, false, 0.0, ow, ob) end, "in_proj_weight is nil")
  check_error(function() call(x, x, x, E, H, { use_separate_proj_weight = true, q_proj_weight = seq(0, E, E) }) end,
    "k_proj_weight is nil")
  check_error(function() call(x, x, x, E, H, { use_separate_proj_weight = true, q_proj_weight = seq(0, E, E),
    k_proj_weight = seq(0, E, 3), v_proj_weight = seq(0, E, E) }) end, "k_proj_weight", "{4,4}", "{4,3}")
  check_error(function() mha(x, x, x, E, H, w, b, seq(0, 1, 1, E), nil, false, 0.0, ow, ob) end, "bias_k and bias_v")
  check_error(function() mha(x, x, x, E, H, w, b, nil, nil, false, 1.5, ow, ob) end, "dropout_p", "1.5")
  check_error(function() mha(x, x, x, E, H, w, b, nil, nil, false, 0.0, seq(0, E, E + 1), ob) end, "out_proj_weight")
  check_error(function() call(x, x, x, E, H, { static_k = seq(0, N * H, 2, 3) }) end, "static_k", "(4, S, 2)", "{4,2,3}")
  check_error(function() call(x:int(), x:int(), x:int(), E, H) end, "query must be a float tensor", "int32")
end

return T
