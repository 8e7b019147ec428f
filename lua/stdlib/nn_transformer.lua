-- nn_transformer.lua -- attention and transformer layers of ember.nn over
-- F.multi_head_attention_forward (schema/ops/attention.yaml): nn.MultiheadAttention,
-- TransformerEncoderLayer/Encoder, TransformerDecoderLayer/Decoder and
-- nn.Transformer, with PyTorch 1.13's submodule and parameter names (so
-- state_dict keys match torch's, ModuleList children numbered from 1) and
-- initialisation. Adds to ember.nn (lua/stdlib/nn.lua) and returns nothing,
-- so it makes no ember.nn_transformer field (Note [Stdlib modules]).
local ember = require "ember"
local nn = require "ember.nn"
require "ember.nn_layers" -- nn.LayerNorm, nn.Dropout
local F = nn.functional
local Module = nn.Module
local is_tensor = ember.is_tensor

local function errorf(fmt, ...) error(string.format(fmt, ...), 4) end

local function positive(v, cls, what)
  if math.type(v) ~= "integer" or v <= 0 then errorf("%s: %s: positive integer expected, got %s", cls, what, tostring(v)) end
  return v
end

local function opts_table(opts, cls)
  if opts == nil then return {} end
  if type(opts) ~= "table" or is_tensor(opts) then errorf("%s: options must be a table, got %s", cls, type(opts)) end
  return opts
end

-- The optional arguments of a forward: positional (PyTorch's order, names
-- lists them) and/or a trailing options table with the same names.
-- Returns a table name -> value.
local function forward_args(cls, names, ...)
  local n = select("#", ...)
  local out, last = {}, select(n > 0 and n or 1, ...)
  if n > 0 and type(last) == "table" and not is_tensor(last) then
    for k, v in pairs(last) do
      local known = false
      for _, nm in ipairs(names) do known = known or nm == k end
      if not known then errorf("%s: unknown option '%s' (expected one of %s)", cls, tostring(k), table.concat(names, ", ")) end
      out[k] = v
    end
    n = n - 1
  end
  if n > #names then errorf("%s: at most %d optional arguments, got %d", cls, #names, n) end
  for i = 1, n do
    local v = select(i, ...)
    if v ~= nil then out[names[i]] = v end
  end
  return out
end

-- ---- deep copies ----

-- Note [Module deep copy]: nn.Module has no clone, and TransformerEncoder
-- and TransformerDecoder copy their layer num_layers times as PyTorch's
-- _get_clones (copy.deepcopy) does. deepcopy(m) builds a module of m's
-- class from m's storage (Note [Module storage] in nn.lua): parameters and
-- buffers cloned (a parameter keeps its requires_grad), submodules copied
-- recursively (a module shared twice stays shared: memo), plain tables in
-- attributes copied, functions and other values shared, hooks kept. No
-- constructor runs, so any module -- a user's layer too -- can be copied.
local function copy_value(v, memo)
  if memo[v] ~= nil then return memo[v] end
  if is_tensor(v) then
    local c = v:detach():clone()
    if nn.is_parameter(v) then c = nn.Parameter(c, v.requires_grad) end
    memo[v] = c
    return c
  end
  if nn.is_module(v) then
    local c = setmetatable({}, getmetatable(v))
    memo[v] = c
    for k, field in pairs(v) do rawset(c, k, copy_value(field, memo)) end
    return c
  end
  if type(v) == "table" and getmetatable(v) == nil then
    local c = {}
    memo[v] = c
    for k, field in pairs(v) do c[copy_value(k, memo)] = copy_value(field, memo) end
    return c
  end
  return v
end

local function deepcopy(m) return copy_value(m, {}) end

-- ---- MultiheadAttention ----

local MHA = Module:extend("MultiheadAttention")
nn.MultiheadAttention = MHA
MHA.__doc = [[
nn.MultiheadAttention(embed_dim, num_heads, {dropout=0, bias=true, add_bias_kv=false,
add_zero_attn=false, kdim=embed_dim, vdim=embed_dim, batch_first=false}): PyTorch's
multi-head attention over F.multi_head_attention_forward. Parameters in_proj_weight {3E, E}
(or q_proj_weight, k_proj_weight, v_proj_weight when kdim/vdim differ from E), in_proj_bias
{3E}, out_proj (a Linear), bias_k/bias_v {1, 1, E}; xavier_uniform_ weights, zero biases.
forward(query, key, value, {key_padding_mask=, need_weights=true, attn_mask=,
average_attn_weights=true, is_causal=false}) -> output, weights (nil unless need_weights);
query (L, N, E) or (N, L, E) with batch_first, or unbatched (L, E). is_causal without an
attn_mask masks the keys after each query's position.]]

function MHA:__init(embed_dim, num_heads, opts)
  opts = opts_table(opts, "MultiheadAttention")
  self.embed_dim = positive(embed_dim, "MultiheadAttention", "embed_dim")
  self.num_heads = positive(num_heads, "MultiheadAttention", "num_heads")
  self.kdim = opts.kdim or embed_dim
  self.vdim = opts.vdim or embed_dim
  positive(self.kdim, "MultiheadAttention", "kdim")
  positive(self.vdim, "MultiheadAttention", "vdim")
  self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
  local dropout = opts.dropout or 0.0
  if type(dropout) ~= "number" or dropout < 0 or dropout > 1 then
    errorf("MultiheadAttention: dropout: a probability in [0, 1] expected, got %s", tostring(dropout))
  end
  self.dropout = dropout
  self.batch_first = opts.batch_first and true or false
  self.head_dim = embed_dim // num_heads
  if self.head_dim * num_heads ~= embed_dim then
    errorf("MultiheadAttention: embed_dim (%d) must be divisible by num_heads (%d)", embed_dim, num_heads)
  end
  local fk = { dtype = opts.dtype, device = opts.device }
  if not self._qkv_same_embed_dim then
    self.q_proj_weight = nn.Parameter(ember.empty(embed_dim, embed_dim, fk))
    self.k_proj_weight = nn.Parameter(ember.empty(embed_dim, self.kdim, fk))
    self.v_proj_weight = nn.Parameter(ember.empty(embed_dim, self.vdim, fk))
    self:register_parameter("in_proj_weight", nil)
  else
    self.in_proj_weight = nn.Parameter(ember.empty(3 * embed_dim, embed_dim, fk))
    self:register_parameter("q_proj_weight", nil)
    self:register_parameter("k_proj_weight", nil)
    self:register_parameter("v_proj_weight", nil)
  end
  local bias = opts.bias ~= false
  if bias then
    self.in_proj_bias = nn.Parameter(ember.empty(3 * embed_dim, fk))
  else
    self:register_parameter("in_proj_bias", nil)
  end
  self.out_proj = nn.Linear(embed_dim, embed_dim, bias, fk)
  if opts.add_bias_kv then
    self.bias_k = nn.Parameter(ember.empty(1, 1, embed_dim, fk))
    self.bias_v = nn.Parameter(ember.empty(1, 1, embed_dim, fk))
  else
    self:register_parameter("bias_k", nil)
    self:register_parameter("bias_v", nil)
  end
  self.add_zero_attn = opts.add_zero_attn and true or false
  self:_reset_parameters()
end

-- PyTorch's MultiheadAttention._reset_parameters.
function MHA:_reset_parameters()
  local init = nn.init
  if self._qkv_same_embed_dim then
    init.xavier_uniform_(self.in_proj_weight)
  else
    init.xavier_uniform_(self.q_proj_weight)
    init.xavier_uniform_(self.k_proj_weight)
    init.xavier_uniform_(self.v_proj_weight)
  end
  if self.in_proj_bias ~= nil then
    init.constant_(self.in_proj_bias, 0.0)
    init.constant_(self.out_proj.bias, 0.0)
  end
  if self.bias_k ~= nil then init.xavier_normal_(self.bias_k) end
  if self.bias_v ~= nil then init.xavier_normal_(self.bias_v) end
end

local MHA_ARGS = { "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal" }

function MHA:forward(query, key, value, ...)
  local o = forward_args("MultiheadAttention", MHA_ARGS, ...)
  for i, v in ipairs({ query, key, value }) do
    if not is_tensor(v) then
      errorf("MultiheadAttention: %s: tensor expected, got %s", ({ "query", "key", "value" })[i], type(v))
    end
  end
  local batched = query:dim() == 3
  if self.batch_first and batched then
    -- (N, L, E) -> (L, N, E); the same variable stays the same (self-attention's shortcut)
    local q = query:transpose(1, 2)
    local k = rawequal(key, query) and q or key:transpose(1, 2)
    local v = rawequal(value, key) and k or value:transpose(1, 2)
    query, key, value = q, k, v
  end
  local attn_mask = o.attn_mask
  if o.is_causal and attn_mask == nil then
    local L, S = query.shape[1], key.shape[1]
    attn_mask = ember.ones(L, S, { dtype = "bool", device = query.device }):triu(1)
  end
  local need_weights = o.need_weights ~= false
  local out, w
  if not self._qkv_same_embed_dim then
    out, w = F.multi_head_attention_forward(query, key, value, self.embed_dim, self.num_heads,
      self.in_proj_weight, self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
      self.out_proj.weight, self.out_proj.bias,
      { training = self.training, key_padding_mask = o.key_padding_mask, need_weights = need_weights,
        attn_mask = attn_mask, use_separate_proj_weight = true, q_proj_weight = self.q_proj_weight,
        k_proj_weight = self.k_proj_weight, v_proj_weight = self.v_proj_weight,
        average_attn_weights = o.average_attn_weights ~= false })
  else
    out, w = F.multi_head_attention_forward(query, key, value, self.embed_dim, self.num_heads,
      self.in_proj_weight, self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
      self.out_proj.weight, self.out_proj.bias,
      { training = self.training, key_padding_mask = o.key_padding_mask, need_weights = need_weights,
        attn_mask = attn_mask, average_attn_weights = o.average_attn_weights ~= false })
  end
  if self.batch_first and batched then out = out:transpose(1, 2) end
  return out, w
end

function MHA:extra_repr()
  return string.format("embed_dim=%d, num_heads=%d, dropout=%g, batch_first=%s", self.embed_dim, self.num_heads,
    self.dropout, tostring(self.batch_first))
end

-- ---- encoder and decoder layers ----

-- activation "relu" | "gelu" | a function (PyTorch's _get_activation_fn).
local function activation_fn(a, cls)
  if a == nil or a == "relu" then return "relu", F.relu or ember.relu end
  if a == "gelu" then return "gelu", F.gelu end
  if type(a) == "function" or (type(a) == "table" and nn.is_module(a)) then return a, a end
  errorf('%s: activation: "relu", "gelu" or a function expected, got %s', cls, tostring(a))
end

-- The options both layer kinds share, checked; sets the common fields.
local function layer_init(self, cls, d_model, nhead, opts)
  opts = opts_table(opts, cls)
  positive(d_model, cls, "d_model")
  positive(nhead, cls, "nhead")
  local dff = positive(opts.dim_feedforward or 2048, cls, "dim_feedforward")
  local p = opts.dropout or 0.1
  if type(p) ~= "number" or p < 0 or p > 1 then errorf("%s: dropout: a probability in [0, 1] expected, got %s", cls, tostring(p)) end
  local eps = opts.layer_norm_eps or 1e-5
  local fk = { dtype = opts.dtype, device = opts.device }
  local mha = { dropout = p, batch_first = opts.batch_first, dtype = opts.dtype, device = opts.device }
  return dff, p, eps, fk, mha
end

local function layer_tail(self, d_model, dff, p, eps, fk, opts, cls, nnorm)
  self.linear1 = nn.Linear(d_model, dff, fk)
  self.dropout = nn.Dropout(p)
  self.linear2 = nn.Linear(dff, d_model, fk)
  self.norm_first = opts.norm_first and true or false
  for i = 1, nnorm do self["norm" .. i] = nn.LayerNorm(d_model, { eps = eps, dtype = opts.dtype, device = opts.device }) end
  for i = 1, nnorm do self["dropout" .. i] = nn.Dropout(p) end
  local name, fn = activation_fn(opts.activation, cls)
  self.activation_name = type(name) == "string" and name or nil
  if type(name) ~= "string" then
    if nn.is_module(fn) then self.activation = fn else self._activation_fn = fn end
  end
end

local function activation_of(self)
  if self.activation_name == "gelu" then return F.gelu end
  if self.activation_name == "relu" then return F.relu or ember.relu end
  return self.activation or self._activation_fn
end

-- linear2(dropout(activation(linear1(x)))) then dropout_k (PyTorch's _ff_block)
local function ff_block(self, x, k)
  local act = activation_of(self)
  return self["dropout" .. k](self.linear2(self.dropout(act(self.linear1(x)))))
end

local TEL = Module:extend("TransformerEncoderLayer")
nn.TransformerEncoderLayer = TEL
TEL.__doc = [[
nn.TransformerEncoderLayer(d_model, nhead, {dim_feedforward=2048, dropout=0.1,
activation="relu"|"gelu"|function, layer_norm_eps=1e-5, batch_first=false, norm_first=false}):
self-attention then a feed-forward block, each with a residual connection and a LayerNorm
(after, or before with norm_first), as PyTorch's. Submodules self_attn, linear1, dropout,
linear2, norm1, norm2, dropout1, dropout2. forward(src, src_mask, src_key_padding_mask)
(or forward(src, {src_mask=, src_key_padding_mask=})).]]

function TEL:__init(d_model, nhead, opts)
  local cls = "TransformerEncoderLayer"
  opts = opts_table(opts, cls)
  local dff, p, eps, fk, mo = layer_init(self, cls, d_model, nhead, opts)
  self.self_attn = MHA(d_model, nhead, mo)
  layer_tail(self, d_model, dff, p, eps, fk, opts, cls, 2)
end

local TEL_ARGS = { "src_mask", "src_key_padding_mask", "is_causal" }

function TEL:forward(src, ...)
  local o = forward_args("TransformerEncoderLayer", TEL_ARGS, ...)
  local function sa(x)
    local y = self.self_attn(x, x, x, { attn_mask = o.src_mask, key_padding_mask = o.src_key_padding_mask,
      need_weights = false, is_causal = o.is_causal })
    return self.dropout1(y)
  end
  local x = src
  if self.norm_first then
    x = x + sa(self.norm1(x))
    x = x + ff_block(self, self.norm2(x), 2)
  else
    x = self.norm1(x + sa(x))
    x = self.norm2(x + ff_block(self, x, 2))
  end
  return x
end

local TDL = Module:extend("TransformerDecoderLayer")
nn.TransformerDecoderLayer = TDL
TDL.__doc = [[
nn.TransformerDecoderLayer(d_model, nhead, {dim_feedforward=2048, dropout=0.1,
activation="relu"|"gelu"|function, layer_norm_eps=1e-5, batch_first=false, norm_first=false}):
self-attention, attention over the encoder's memory, then a feed-forward block, each with a
residual connection and a LayerNorm, as PyTorch's. Submodules self_attn, multihead_attn,
linear1, dropout, linear2, norm1-3, dropout1-3. forward(tgt, memory, tgt_mask, memory_mask,
tgt_key_padding_mask, memory_key_padding_mask) (or an options table with those names).]]

function TDL:__init(d_model, nhead, opts)
  local cls = "TransformerDecoderLayer"
  opts = opts_table(opts, cls)
  local dff, p, eps, fk, mo = layer_init(self, cls, d_model, nhead, opts)
  self.self_attn = MHA(d_model, nhead, mo)
  self.multihead_attn = MHA(d_model, nhead, mo)
  layer_tail(self, d_model, dff, p, eps, fk, opts, cls, 3)
end

local TDL_ARGS = { "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
  "tgt_is_causal", "memory_is_causal" }

function TDL:forward(tgt, memory, ...)
  local o = forward_args("TransformerDecoderLayer", TDL_ARGS, ...)
  if not is_tensor(memory) then errorf("TransformerDecoderLayer: memory: tensor expected, got %s", type(memory)) end
  local function sa(x)
    return self.dropout1(self.self_attn(x, x, x, { attn_mask = o.tgt_mask, key_padding_mask = o.tgt_key_padding_mask,
      need_weights = false, is_causal = o.tgt_is_causal }))
  end
  local function ca(x)
    return self.dropout2(self.multihead_attn(x, memory, memory, { attn_mask = o.memory_mask,
      key_padding_mask = o.memory_key_padding_mask, need_weights = false, is_causal = o.memory_is_causal }))
  end
  local x = tgt
  if self.norm_first then
    x = x + sa(self.norm1(x))
    x = x + ca(self.norm2(x))
    x = x + ff_block(self, self.norm3(x), 3)
  else
    x = self.norm1(x + sa(x))
    x = self.norm2(x + ca(x))
    x = self.norm3(x + ff_block(self, x, 3))
  end
  return x
end

-- ---- stacks ----

local function clones(layer, n, cls)
  if not nn.is_module(layer) then errorf("%s: %s: Module expected, got %s", cls, "layer", type(layer)) end
  if math.type(n) ~= "integer" or n < 0 then errorf("%s: num_layers: non-negative integer expected, got %s", cls, tostring(n)) end
  local list = {}
  for i = 1, n do list[i] = deepcopy(layer) end
  return nn.ModuleList(list)
end

local TE = Module:extend("TransformerEncoder")
nn.TransformerEncoder = TE
TE.__doc = [[
nn.TransformerEncoder(encoder_layer, num_layers, {norm=}): num_layers deep copies of
encoder_layer (layers[1..n]; state_dict keys layers.1.self_attn.in_proj_weight, ...) applied
in turn, then norm if given. forward(src, mask, src_key_padding_mask) (or an options table).]]

function TE:__init(encoder_layer, num_layers, opts)
  opts = opts_table(opts, "TransformerEncoder")
  self.layers = clones(encoder_layer, num_layers, "TransformerEncoder")
  self.num_layers = num_layers
  if opts.norm ~= nil then self.norm = opts.norm end
end

function TE:forward(src, ...)
  local o = forward_args("TransformerEncoder", { "mask", "src_key_padding_mask", "is_causal" }, ...)
  local x = src
  for _, layer in ipairs(self.layers) do
    x = layer(x, { src_mask = o.mask, src_key_padding_mask = o.src_key_padding_mask, is_causal = o.is_causal })
  end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

local TD = Module:extend("TransformerDecoder")
nn.TransformerDecoder = TD
TD.__doc = [[
nn.TransformerDecoder(decoder_layer, num_layers, {norm=}): num_layers deep copies of
decoder_layer applied in turn, then norm if given. forward(tgt, memory, tgt_mask, memory_mask,
tgt_key_padding_mask, memory_key_padding_mask) (or an options table).]]

function TD:__init(decoder_layer, num_layers, opts)
  opts = opts_table(opts, "TransformerDecoder")
  self.layers = clones(decoder_layer, num_layers, "TransformerDecoder")
  self.num_layers = num_layers
  if opts.norm ~= nil then self.norm = opts.norm end
end

function TD:forward(tgt, memory, ...)
  local o = forward_args("TransformerDecoder", TDL_ARGS, ...)
  local x = tgt
  for _, layer in ipairs(self.layers) do x = layer(x, memory, o) end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

-- ---- Transformer ----

local TR = Module:extend("Transformer")
nn.Transformer = TR
TR.__doc = [[
nn.Transformer({d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=, custom_decoder=,
layer_norm_eps=1e-5, batch_first=false, norm_first=false}): encoder and decoder stacks with
final LayerNorms, every matrix xavier_uniform_, as PyTorch's. forward(src, tgt, src_mask,
tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask).
nn.Transformer.generate_square_subsequent_mask(sz): {sz, sz} float32, -inf above the diagonal.]]

function TR:__init(opts)
  opts = opts_table(opts, "Transformer")
  local d = opts.d_model or 512
  local h = opts.nhead or 8
  local lo = { dim_feedforward = opts.dim_feedforward, dropout = opts.dropout, activation = opts.activation,
    layer_norm_eps = opts.layer_norm_eps, batch_first = opts.batch_first, norm_first = opts.norm_first,
    dtype = opts.dtype, device = opts.device }
  local no = { eps = opts.layer_norm_eps or 1e-5, dtype = opts.dtype, device = opts.device }
  self.encoder = opts.custom_encoder or
    TE(TEL(d, h, lo), opts.num_encoder_layers or 6, { norm = nn.LayerNorm(d, no) })
  self.decoder = opts.custom_decoder or
    TD(TDL(d, h, lo), opts.num_decoder_layers or 6, { norm = nn.LayerNorm(d, no) })
  self.d_model, self.nhead = d, h
  self.batch_first = opts.batch_first and true or false
  for _, p in ipairs(self:parameters()) do
    if p:dim() > 1 then nn.init.xavier_uniform_(p) end
  end
end

local TR_ARGS = { "src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask",
  "memory_key_padding_mask" }

function TR:forward(src, tgt, ...)
  local o = forward_args("Transformer", TR_ARGS, ...)
  local bdim = self.batch_first and 1 or 2
  if src:dim() == 3 and tgt:dim() == 3 and src.shape[bdim] ~= tgt.shape[bdim] then
    errorf("Transformer: the batch number of src (%d) and tgt (%d) must be equal", src.shape[bdim], tgt.shape[bdim])
  end
  if src.shape[src:dim()] ~= self.d_model or tgt.shape[tgt:dim()] ~= self.d_model then
    errorf("Transformer: the feature number of src and tgt must be equal to d_model (%d), got %d and %d", self.d_model,
      src.shape[src:dim()], tgt.shape[tgt:dim()])
  end
  local memory = self.encoder(src, { mask = o.src_mask, src_key_padding_mask = o.src_key_padding_mask })
  return self.decoder(tgt, memory, { tgt_mask = o.tgt_mask, memory_mask = o.memory_mask,
    tgt_key_padding_mask = o.tgt_key_padding_mask, memory_key_padding_mask = o.memory_key_padding_mask })
end

--- nn.Transformer.generate_square_subsequent_mask(sz [, {dtype=, device=}]): a {sz, sz}
--- float mask, -inf above the diagonal and 0 elsewhere (a query sees its own and earlier positions).
function TR.generate_square_subsequent_mask(sz, opts)
  if math.type(sz) ~= "integer" or sz < 0 then
    error("generate_square_subsequent_mask: sz: non-negative integer expected, got " .. tostring(sz), 2)
  end
  opts = opts or {}
  return ember.full({ sz, sz }, -math.huge, { dtype = opts.dtype or "float32", device = opts.device }):triu(1)
end

