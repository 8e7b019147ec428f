-- nn_layers.lua -- the layers of ember.nn over the ops of ember.nn.functional
-- (convolution, pooling, normalisation, dropout), initialised as PyTorch
-- initialises them. Adds to ember.nn (lua/stdlib/nn.lua) and returns nothing,
-- so it makes no ember.nn_layers field (Note [Stdlib modules]).
local ember = require "ember"
local nn = require "ember.nn"
local F = nn.functional
local Module = nn.Module

local function errorf(fmt, ...) error(string.format(fmt, ...), 4) end

-- n integers from a number or a list of n (PyTorch's _single/_pair/_triple)
local function tuple(v, n, cls, what)
  if math.type(v) == "integer" then
    local t = {}
    for i = 1, n do t[i] = v end
    return t
  end
  if type(v) == "table" and #v == n then
    for _, x in ipairs(v) do
      if math.type(x) ~= "integer" then errorf("%s: %s: integers expected", cls, what) end
    end
    return { table.unpack(v) }
  end
  errorf("%s: %s: an integer or a list of %d integers expected, got %s", cls, what, n, tostring(v))
end

local function positive(v, cls, what)
  if math.type(v) ~= "integer" or v <= 0 then errorf("%s: %s: positive integer expected, got %s", cls, what, tostring(v)) end
  return v
end

local function list_str(t) return "{" .. table.concat(t, ", ") .. "}" end

-- ---- convolutions ----

-- nn.ConvNd(in_channels, out_channels, kernel_size, {stride=1, padding=0
-- (or "same"/"valid"), dilation=1, groups=1, bias=true, dtype=, device=}):
-- weight {out, in/groups, k...} kaiming_uniform_(a=sqrt(5)), bias uniform in
-- +-1/sqrt(fan_in), as PyTorch's _ConvNd.reset_parameters.
local function conv_class(name, nd, transposed)
  local C = Module:extend(name)
  nn[name] = C
  local fname = transposed and ("conv_transpose" .. nd .. "d") or ("conv" .. nd .. "d")
  C.__doc = string.format("nn.%s(in_channels, out_channels, kernel_size, {stride=1, padding=0%s, %sdilation=1, " ..
    "groups=1, bias=true}): F.%s with a weight {%s} and bias {out} initialised as PyTorch does.",
    name, transposed and "" or " (or \"same\"/\"valid\")", transposed and "output_padding=0, " or "", fname,
    transposed and "in, out/groups, k..." or "out, in/groups, k...")
  function C:__init(in_channels, out_channels, kernel_size, opts)
    opts = opts or {}
    if type(opts) ~= "table" then errorf("%s: options must be a table", name) end
    self.in_channels = positive(in_channels, name, "in_channels")
    self.out_channels = positive(out_channels, name, "out_channels")
    self.kernel_size = tuple(kernel_size, nd, name, "kernel_size")
    self.stride = tuple(opts.stride or 1, nd, name, "stride")
    if type(opts.padding) == "string" and not transposed then
      if opts.padding ~= "same" and opts.padding ~= "valid" then
        errorf("%s: padding: \"same\", \"valid\" or integers expected, got \"%s\"", name, opts.padding)
      end
      self.padding = opts.padding
    else
      self.padding = tuple(opts.padding or 0, nd, name, "padding")
    end
    self.dilation = tuple(opts.dilation or 1, nd, name, "dilation")
    self.output_padding = transposed and tuple(opts.output_padding or 0, nd, name, "output_padding") or nil
    self.groups = positive(opts.groups or 1, name, "groups")
    if in_channels % self.groups ~= 0 or out_channels % self.groups ~= 0 then
      errorf("%s: in_channels (%d) and out_channels (%d) must be divisible by groups (%d)", name, in_channels,
        out_channels, self.groups)
    end
    local shape = transposed and { in_channels, out_channels // self.groups }
      or { out_channels, in_channels // self.groups }
    for _, k in ipairs(self.kernel_size) do shape[#shape + 1] = k end
    local fk = { dtype = opts.dtype, device = opts.device }
    self.weight = nn.Parameter(ember.empty(shape, fk))
    if opts.bias ~= false then
      self.bias = nn.Parameter(ember.empty(out_channels, fk))
    else
      self:register_parameter("bias", nil)
    end
    self:reset_parameters()
  end
  -- PyTorch's _ConvNd.reset_parameters is Linear's: kaiming_uniform_(a=sqrt(5)),
  -- bias uniform in +-1/sqrt(fan_in)
  C.reset_parameters = nn.Linear.reset_parameters
  if transposed then
    function C:forward(x)
      return F[fname](x, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups,
        self.dilation)
    end
  else
    function C:forward(x)
      return F[fname](x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
    end
  end
  function C:extra_repr()
    local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
      list_str(self.kernel_size), list_str(self.stride))
    if type(self.padding) == "string" then s = s .. ", padding=" .. self.padding
    else s = s .. ", padding=" .. list_str(self.padding) end
    if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
    if self.bias == nil then s = s .. ", bias=false" end
    return s
  end
end

if F.conv2d then
  conv_class("Conv1d", 1, false)
  conv_class("Conv2d", 2, false)
  conv_class("Conv3d", 3, false)
  conv_class("ConvTranspose1d", 1, true)
  conv_class("ConvTranspose2d", 2, true)
end

-- ---- pooling ----

local function pool_class(name, fname, nd, avg)
  local C = Module:extend(name)
  nn[name] = C
  C.__doc = string.format("nn.%s(kernel_size, {stride=kernel_size, padding=0, %s ceil_mode=false}): F.%s.",
    name, avg and "count_include_pad=true," or "dilation=1, return_indices=false,", fname)
  function C:__init(kernel_size, opts)
    opts = opts or {}
    if type(opts) ~= "table" then errorf("%s: options must be a table", name) end
    self.kernel_size = tuple(kernel_size, nd, name, "kernel_size")
    self.stride = opts.stride and tuple(opts.stride, nd, name, "stride") or { table.unpack(self.kernel_size) }
    self.padding = tuple(opts.padding or 0, nd, name, "padding")
    self.ceil_mode = opts.ceil_mode and true or false
    if avg then
      self.count_include_pad = opts.count_include_pad ~= false
      self.divisor_override = opts.divisor_override
    else
      self.dilation = tuple(opts.dilation or 1, nd, name, "dilation")
      self.return_indices = opts.return_indices and true or false
    end
  end
  if avg then
    function C:forward(x)
      if nd == 1 then
        return F[fname](x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)
      end
      return F[fname](x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
        self.divisor_override)
    end
  else
    function C:forward(x)
      return F[fname](x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
        self.return_indices)
    end
  end
  function C:extra_repr()
    return string.format("kernel_size=%s, stride=%s, padding=%s", list_str(self.kernel_size), list_str(self.stride),
      list_str(self.padding))
  end
end

if F.max_pool2d then
  pool_class("MaxPool1d", "max_pool1d", 1, false)
  pool_class("MaxPool2d", "max_pool2d", 2, false)
  pool_class("MaxPool3d", "max_pool3d", 3, false)
  pool_class("AvgPool1d", "avg_pool1d", 1, true)
  pool_class("AvgPool2d", "avg_pool2d", 2, true)
  pool_class("AvgPool3d", "avg_pool3d", 3, true)
  for _, spec in ipairs({ { "AdaptiveAvgPool1d", "adaptive_avg_pool1d", 1 }, { "AdaptiveAvgPool2d", "adaptive_avg_pool2d", 2 },
    { "AdaptiveMaxPool1d", "adaptive_max_pool1d", 1 }, { "AdaptiveMaxPool2d", "adaptive_max_pool2d", 2 } }) do
    local name, fname, nd = spec[1], spec[2], spec[3]
    local C = Module:extend(name)
    nn[name] = C
    C.__doc = string.format("nn.%s(output_size%s): F.%s.", name, fname:find("max") and ", {return_indices=false}" or "", fname)
    function C:__init(output_size, opts)
      self.output_size = tuple(output_size, nd, name, "output_size")
      self.return_indices = opts and opts.return_indices and true or false
    end
    function C:forward(x)
      if fname:find("max") then return F[fname](x, self.output_size, self.return_indices) end
      return F[fname](x, self.output_size)
    end
    function C:extra_repr() return "output_size=" .. list_str(self.output_size) end
  end
end

-- ---- normalisation ----

if F.batch_norm then
  -- nn.BatchNormNd(num_features, {eps=1e-5, momentum=0.1 (false: PyTorch's
  -- None, a cumulative average), affine=true, track_running_stats=true}): F.batch_norm with the
  -- batch statistics in training mode (updating running_mean/running_var in
  -- place) and the running ones in eval mode, as torch.nn._BatchNorm.
  local function bn_class(name, dims)
    local C = Module:extend(name)
    nn[name] = C
    C.__doc = string.format("nn.%s(num_features, {eps=1e-5, momentum=0.1, affine=true, track_running_stats=true}): " ..
      "batch normalisation of a %s input; buffers running_mean, running_var, num_batches_tracked.", name, dims)
    function C:__init(num_features, opts)
      opts = opts or {}
      self.num_features = positive(num_features, name, "num_features")
      self.eps = opts.eps or 1e-5
      -- PyTorch's momentum=None (a cumulative average) is momentum = false here
      if opts.momentum == false then self.momentum = nil
      else self.momentum = opts.momentum == nil and 0.1 or opts.momentum end
      self.affine = opts.affine ~= false
      self.track_running_stats = opts.track_running_stats ~= false
      local fk = { dtype = opts.dtype, device = opts.device }
      if self.affine then
        self.weight = nn.Parameter(ember.ones(num_features, fk))
        self.bias = nn.Parameter(ember.zeros(num_features, fk))
      else
        self:register_parameter("weight", nil)
        self:register_parameter("bias", nil)
      end
      if self.track_running_stats then
        self:register_buffer("running_mean", ember.zeros(num_features, fk))
        self:register_buffer("running_var", ember.ones(num_features, fk))
        self:register_buffer("num_batches_tracked", ember.zeros({}, { dtype = "int64" }))
      else
        self:register_buffer("running_mean", nil)
        self:register_buffer("running_var", nil)
        self:register_buffer("num_batches_tracked", nil)
      end
    end
    function C:reset_running_stats()
      if self.track_running_stats then
        ember.no_grad(function()
          self.running_mean:zero_()
          self.running_var:fill_(1)
          self.num_batches_tracked:zero_()
        end)
      end
    end
    function C:forward(x)
      local factor = self.momentum or 0.0
      if self.training and self.track_running_stats then
        ember.no_grad(function() self.num_batches_tracked:add_(1) end)
        if self.momentum == nil then factor = 1.0 / self.num_batches_tracked:item() end
      end
      local use_batch = self.training or not self.track_running_stats
      local rm = (not self.training or self.track_running_stats) and self.running_mean or nil
      local rv = (not self.training or self.track_running_stats) and self.running_var or nil
      return F.batch_norm(x, rm, rv, self.weight, self.bias, use_batch, factor, self.eps)
    end
    function C:extra_repr()
      return string.format("%d, eps=%g, momentum=%s, affine=%s, track_running_stats=%s", self.num_features,
        self.eps, tostring(self.momentum), tostring(self.affine), tostring(self.track_running_stats))
    end
  end
  bn_class("BatchNorm1d", "(N, C) or (N, C, L)")
  bn_class("BatchNorm2d", "(N, C, H, W)")
  bn_class("BatchNorm3d", "(N, C, D, H, W)")
end

-- nn.LayerNorm(normalized_shape, {eps=1e-5, elementwise_affine=true}),
-- nn.RMSNorm(normalized_shape, {eps=nil, elementwise_affine=true}):
-- weight ones, bias zeros (LayerNorm only).
local function shape_arg(v, cls)
  if math.type(v) == "integer" then return { v } end
  if type(v) == "table" and #v > 0 then return { table.unpack(v) } end
  errorf("%s: normalized_shape: an integer or a list of integers expected, got %s", cls, tostring(v))
end

if F.layer_norm then
  local LayerNorm = Module:extend("LayerNorm")
  nn.LayerNorm = LayerNorm
  LayerNorm.__doc = "nn.LayerNorm(normalized_shape, {eps=1e-5, elementwise_affine=true}): F.layer_norm over the last dims."
  function LayerNorm:__init(normalized_shape, opts)
    opts = opts or {}
    self.normalized_shape = shape_arg(normalized_shape, "LayerNorm")
    self.eps = opts.eps or 1e-5
    self.elementwise_affine = opts.elementwise_affine ~= false
    local fk = { dtype = opts.dtype, device = opts.device }
    if self.elementwise_affine then
      self.weight = nn.Parameter(ember.ones(self.normalized_shape, fk))
      self.bias = nn.Parameter(ember.zeros(self.normalized_shape, fk))
    else
      self:register_parameter("weight", nil)
      self:register_parameter("bias", nil)
    end
  end
  function LayerNorm:forward(x) return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps) end
  function LayerNorm:extra_repr()
    return string.format("%s, eps=%g, elementwise_affine=%s", list_str(self.normalized_shape), self.eps,
      tostring(self.elementwise_affine))
  end
end

if F.rms_norm then
  local RMSNorm = Module:extend("RMSNorm")
  nn.RMSNorm = RMSNorm
  RMSNorm.__doc = "nn.RMSNorm(normalized_shape, {eps=nil (the dtype's eps), elementwise_affine=true}): F.rms_norm."
  function RMSNorm:__init(normalized_shape, opts)
    opts = opts or {}
    self.normalized_shape = shape_arg(normalized_shape, "RMSNorm")
    self.eps = opts.eps
    if opts.elementwise_affine ~= false then
      self.weight = nn.Parameter(ember.ones(self.normalized_shape, { dtype = opts.dtype, device = opts.device }))
    else
      self:register_parameter("weight", nil)
    end
  end
  function RMSNorm:forward(x) return F.rms_norm(x, self.normalized_shape, self.weight, self.eps) end
  function RMSNorm:extra_repr() return string.format("%s, eps=%s", list_str(self.normalized_shape), tostring(self.eps)) end
end

if F.group_norm then
  local GroupNorm = Module:extend("GroupNorm")
  nn.GroupNorm = GroupNorm
  GroupNorm.__doc = "nn.GroupNorm(num_groups, num_channels, {eps=1e-5, affine=true}): F.group_norm."
  function GroupNorm:__init(num_groups, num_channels, opts)
    opts = opts or {}
    self.num_groups = positive(num_groups, "GroupNorm", "num_groups")
    self.num_channels = positive(num_channels, "GroupNorm", "num_channels")
    if num_channels % num_groups ~= 0 then
      errorf("GroupNorm: num_channels (%d) must be divisible by num_groups (%d)", num_channels, num_groups)
    end
    self.eps = opts.eps or 1e-5
    self.affine = opts.affine ~= false
    local fk = { dtype = opts.dtype, device = opts.device }
    if self.affine then
      self.weight = nn.Parameter(ember.ones(num_channels, fk))
      self.bias = nn.Parameter(ember.zeros(num_channels, fk))
    else
      self:register_parameter("weight", nil)
      self:register_parameter("bias", nil)
    end
  end
  function GroupNorm:forward(x) return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps) end
  function GroupNorm:extra_repr()
    return string.format("%d, %d, eps=%g, affine=%s", self.num_groups, self.num_channels, self.eps, tostring(self.affine))
  end
end

-- ---- dropout ----

if F.dropout then
  for _, spec in ipairs({ { "Dropout", "dropout" }, { "Dropout1d", "dropout1d" }, { "Dropout2d", "dropout2d" },
    { "Dropout3d", "dropout3d" }, { "AlphaDropout", "alpha_dropout" } }) do
    local name, fname = spec[1], spec[2]
    local C = Module:extend(name)
    nn[name] = C
    C.__doc = string.format("nn.%s(p=0.5, {inplace=false}): F.%s while training, the identity in eval mode.", name, fname)
    function C:__init(p, opts)
      if p == nil then p = 0.5 end
      if type(p) ~= "number" or p < 0 or p > 1 then errorf("%s: p: a probability in [0, 1] expected, got %s", name, tostring(p)) end
      self.p = p
      self.inplace = opts and opts.inplace and true or false
    end
    function C:forward(x) return F[fname](x, self.p, self.training, self.inplace) end
    function C:extra_repr() return string.format("p=%g, inplace=%s", self.p, tostring(self.inplace)) end
  end
end

-- ---- embeddings ----

-- A 1-based padding_idx as PyTorch's Embedding stores it: nil, or a row in
-- 1..n (negative counts from the end).
local function padding_arg(p, n, cls)
  if p == nil then return nil end
  if math.type(p) ~= "integer" then errorf("%s: padding_idx: an integer expected, got %s", cls, tostring(p)) end
  if p >= 1 and p <= n then return p end
  if p <= -1 and p >= -n then return n + p + 1 end
  errorf("%s: padding_idx %d must be within num_embeddings (%d rows; 1-based, valid: 1..%d or -%d..-1)", cls, p, n,
    n, n)
end

-- The weight of an Embedding/EmbeddingBag: opts._weight (shape-checked) as
-- the parameter, else N(0, 1) with the padding row zeroed (PyTorch's
-- reset_parameters; EmbeddingBag zeroes it too).
local function embedding_weight(self, cls, num_embeddings, embedding_dim, opts)
  if math.type(num_embeddings) ~= "integer" or num_embeddings < 0 then
    errorf("%s: num_embeddings: a non-negative integer expected, got %s", cls, tostring(num_embeddings))
  end
  if math.type(embedding_dim) ~= "integer" or embedding_dim < 0 then
    errorf("%s: embedding_dim: a non-negative integer expected, got %s", cls, tostring(embedding_dim))
  end
  self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
  self.padding_idx = padding_arg(opts.padding_idx, num_embeddings, cls)
  self.max_norm, self.norm_type = opts.max_norm, opts.norm_type or 2.0
  self.scale_grad_by_freq, self.sparse = opts.scale_grad_by_freq and true or false, opts.sparse and true or false
  if self.sparse then errorf("%s: sparse=true is not supported (ember has no sparse tensors)", cls) end
  if opts._weight ~= nil then
    local w = opts._weight
    local s = ember.is_tensor(w) and w.shape or {}
    if #s ~= 2 or s[1] ~= num_embeddings or s[2] ~= embedding_dim then
      errorf("%s: _weight of shape {%s} does not match num_embeddings and embedding_dim {%d, %d}", cls,
        table.concat(s, ","), num_embeddings, embedding_dim)
    end
    self.weight = nn.Parameter(w)
  else
    self.weight = nn.Parameter(ember.empty(num_embeddings, embedding_dim, { dtype = opts.dtype, device = opts.device }))
    self:reset_parameters()
  end
end

local function embedding_reset(self)
  nn.init.normal_(self.weight)
  if self.padding_idx ~= nil then
    local g <close> = ember.no_grad()
    self.weight[self.padding_idx]:fill_(0)
  end
end

local function embedding_repr(self, extra)
  local s = string.format("%d, %d", self.num_embeddings, self.embedding_dim)
  if self.padding_idx ~= nil then s = s .. ", padding_idx=" .. self.padding_idx end
  if self.max_norm ~= nil then s = s .. ", max_norm=" .. tostring(self.max_norm) end
  if self.norm_type ~= 2 then s = s .. ", norm_type=" .. tostring(self.norm_type) end
  if self.scale_grad_by_freq then s = s .. ", scale_grad_by_freq=true" end
  return s .. (extra or "")
end

-- from_pretrained(embeddings, {freeze=true, ...}): a layer over the given
-- 2-d tensor (shared, not copied), trainable unless freeze.
local function from_pretrained(C, cls, embeddings, opts)
  opts = opts or {}
  if not ember.is_tensor(embeddings) or embeddings:dim() ~= 2 then
    errorf("%s.from_pretrained: embeddings must be a 2-d tensor", cls)
  end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o._weight, o.freeze = embeddings, nil
  local m = C(embeddings.shape[1], embeddings.shape[2], o)
  m.weight:requires_grad_(opts.freeze == false)
  return m
end

if F.embedding then
  local Embedding = Module:extend("Embedding")
  nn.Embedding = Embedding
  Embedding.__doc = "nn.Embedding(num_embeddings, embedding_dim, {padding_idx=, max_norm=, norm_type=2, " ..
    "scale_grad_by_freq=false, sparse=false, _weight=, dtype=, device=}): F.embedding over a weight initialised " ..
    "N(0, 1) with the (1-based) padding row zeroed; nn.Embedding.from_pretrained(embeddings, {freeze=true, ...})."
  function Embedding:__init(num_embeddings, embedding_dim, opts)
    opts = opts or {}
    if type(opts) ~= "table" then errorf("Embedding: options must be a table") end
    embedding_weight(self, "Embedding", num_embeddings, embedding_dim, opts)
  end
  Embedding.reset_parameters = embedding_reset
  function Embedding:forward(input)
    return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq,
      self.sparse)
  end
  function Embedding:extra_repr() return embedding_repr(self) end
  function Embedding.from_pretrained(embeddings, opts) return from_pretrained(Embedding, "Embedding", embeddings, opts) end
end

if F.embedding_bag then
  local EmbeddingBag = Module:extend("EmbeddingBag")
  nn.EmbeddingBag = EmbeddingBag
  EmbeddingBag.__doc = "nn.EmbeddingBag(num_embeddings, embedding_dim, {max_norm=, norm_type=2, " ..
    "scale_grad_by_freq=false, mode=\"mean\", sparse=false, _weight=, include_last_offset=false, padding_idx=, " ..
    "dtype=, device=}): F.embedding_bag; m(input [, offsets [, per_sample_weights]]) with 1-based offsets; " ..
    "nn.EmbeddingBag.from_pretrained(embeddings, {freeze=true, ...})."
  function EmbeddingBag:__init(num_embeddings, embedding_dim, opts)
    opts = opts or {}
    if type(opts) ~= "table" then errorf("EmbeddingBag: options must be a table") end
    local mode = opts.mode or "mean"
    if mode ~= "sum" and mode ~= "mean" and mode ~= "max" then
      errorf("EmbeddingBag: mode: \"sum\", \"mean\" or \"max\" expected, got %s", tostring(mode))
    end
    self.mode = mode
    self.include_last_offset = opts.include_last_offset and true or false
    embedding_weight(self, "EmbeddingBag", num_embeddings, embedding_dim, opts)
  end
  EmbeddingBag.reset_parameters = embedding_reset
  function EmbeddingBag:forward(input, offsets, per_sample_weights)
    return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
      self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)
  end
  function EmbeddingBag:extra_repr()
    return embedding_repr(self, ", mode=" .. self.mode .. (self.include_last_offset and ", include_last_offset=true" or ""))
  end
  function EmbeddingBag.from_pretrained(embeddings, opts)
    return from_pretrained(EmbeddingBag, "EmbeddingBag", embeddings, opts)
  end
end
