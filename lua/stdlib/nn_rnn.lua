-- nn_rnn.lua -- the recurrent layers of ember.nn (PyTorch's torch.nn.RNN,
-- LSTM, GRU and their cells), written over ember's ops; adds to ember.nn and
-- returns nothing, so it makes no ember.nn_rnn field (Note [Stdlib modules]).
--
-- Note [Recurrent layers]
-- Parameters are named, shaped, ordered and initialised as torch's: per layer
-- k and direction (suffix "" or "_reverse") weight_ih_lk {G, in},
-- weight_hh_lk {G, H_out}, bias_ih_lk {G}, bias_hh_lk {G} and, for an LSTM
-- with proj_size > 0, weight_hr_lk {proj_size, H}; G = H, 4H, 3H for
-- RNN, LSTM, GRU; gate order LSTM i,f,g,o and GRU r,z,n with
-- n = tanh(W_in x + b_in + r * (W_hn h + b_hn)); all uniform in
-- +-1/sqrt(hidden_size). A layer's forward projects the whole sequence at
-- once (x W_ih^T + b, one GEMM for all steps; for RNN and LSTM b_hh is
-- folded into that bias, GRU keeps it beside W_hh because r multiplies it),
-- then steps through time with one addmm per step. The per-step inputs
-- come from unbind (whose backward stacks the step gradients in one node),
-- never from select (whose backward would allocate a whole-sequence zero
-- tensor per step).
-- Variable lengths (forward's {lengths=}): at steps past a sequence's
-- length its state is kept (torch.where on a {N,1} mask) and its output is
-- zero, so h_n is each sequence's state at its last valid step and the
-- reverse direction starts at that step, exactly what torch computes over a
-- pack_padded_sequence; the output keeps all L steps (torch's
-- pad_packed_sequence with total_length = L).
local ember = require "ember"
local nn = require "ember.nn"
local F = nn.functional
local Module = nn.Module

local function errorf(fmt, ...) error(string.format(fmt, ...), 4) end
-- errorf for the check helpers below, called by the functions that would
-- otherwise raise the error themselves: one level up, so the message (and
-- the position it names) is the one those functions gave.
local function errorf_up(fmt, ...) error(string.format(fmt, ...), 5) end

local function shape_str(s)
  return "{" .. table.concat(s, ", ") .. "}"
end

local function nonneg_int(v, cls, what)
  if math.type(v) ~= "integer" or v < 0 then
    errorf("%s: %s: non-negative integer expected, got %s", cls, what, tostring(v))
  end
  return v
end

local GATES = { RNN = 1, LSTM = 4, GRU = 3 }
local INTEGER = { int8 = true, uint8 = true, int16 = true, int32 = true, int64 = true }

-- ---- one time step of each cell ----
-- xg: the input's part of the gates for this step ({N, G}: x W_ih^T + b_ih,
-- and + b_hh for RNN and LSTM); whh_t: W_hh^T; bhh: b_hh (GRU only, or
-- nil). Each returns the new state (LSTM: h, c).

local function rnn_step(act, xg, h, whh_t)
  local g = ember.addmm(xg, h, whh_t)
  if act == "tanh" then return g:tanh() end
  return g:relu()
end

local function lstm_step(xg, h, c, whh_t, whr_t)
  local gates = ember.addmm(xg, h, whh_t)
  local ch = gates:chunk(4, 2)
  local i, f, g, o = ch[1]:sigmoid(), ch[2]:sigmoid(), ch[3]:tanh(), ch[4]:sigmoid()
  local c1 = ember.addcmul(f * c, i, g)
  local h1 = o * c1:tanh()
  if whr_t then h1 = h1:mm(whr_t) end
  return h1, c1
end

local function gru_step(xg, h, whh_t, bhh)
  local hg = bhh and ember.addmm(bhh, h, whh_t) or h:mm(whh_t)
  local xc, hc = xg:chunk(3, 2), hg:chunk(3, 2)
  local r = (xc[1] + hc[1]):sigmoid()
  local z = (xc[2] + hc[2]):sigmoid()
  local n = ember.addcmul(xc[3], r, hc[3]):tanh()
  return ember.addcmul(n, z, h - n)
end

-- One step of the cell of mode ("RNN", "LSTM" or "GRU"; act: the RNN's
-- nonlinearity, bhh: GRU's b_hh, whr_t: an LSTM's W_hr^T or nil); returns
-- the new state (LSTM: h, c).
local function cell_step(mode, act, xg, h, c, whh_t, bhh, whr_t)
  if mode == "LSTM" then return lstm_step(xg, h, c, whh_t, whr_t) end
  if mode == "GRU" then return gru_step(xg, h, whh_t, bhh) end
  return rnn_step(act, xg, h, whh_t)
end

-- ---- argument checks shared by the layers and the cells ----

-- The nonlinearity option of nn.RNN / nn.RNNCell (mode "RNN"; "tanh" when
-- nil); the other modes refuse one. owner names the class that takes it.
local function check_nonlinearity(name, mode, nl, owner)
  if mode == "RNN" then
    nl = nl or "tanh"
    if nl ~= "tanh" and nl ~= "relu" then
      errorf_up("%s: nonlinearity: \"tanh\" or \"relu\" expected, got %s", name,
        type(nl) == "string" and ("\"" .. nl .. "\"") or tostring(nl))
    end
  elseif nl ~= nil then
    errorf_up("%s: nonlinearity: only %s takes a nonlinearity", name, owner)
  end
end

-- Checks a forward's input: a tensor of nd - 1 (unbatched) or nd dims,
-- the last input_size, of the parameters' dtype. Returns its dims.
local function check_input(name, input, nd, input_size, dtype)
  if not ember.is_tensor(input) then errorf_up("%s: input: tensor expected, got %s", name, type(input)) end
  local dims = #input.shape
  if dims ~= nd - 1 and dims ~= nd then
    errorf_up("%s: input: expected a %d-d (unbatched) or %d-d tensor, got shape %s", name, nd - 1, nd,
      shape_str(input.shape))
  end
  if input.shape[dims] ~= input_size then
    local want = { table.unpack(input.shape) }
    want[dims] = input_size
    errorf_up("%s: input: expected shape %s (last dim input_size=%d), got %s", name, shape_str(want), input_size,
      shape_str(input.shape))
  end
  if input.dtype ~= dtype then
    errorf_up("%s: input: dtype %s expected (the parameters' dtype), got %s", name, dtype, input.dtype)
  end
  return dims
end

-- ---- the multi-layer modules ----

local RNNBase = Module:extend("RNNBase")
nn.RNNBase = RNNBase

-- RNNBase:__init(mode, name, input_size, hidden_size, opts): mode is "RNN",
-- "LSTM" or "GRU"; opts as torch's keyword arguments (a number in place of
-- opts is num_layers, as torch's third positional argument).
function RNNBase:__init(mode, name, input_size, hidden_size, opts)
  if math.type(opts) == "integer" then opts = { num_layers = opts } end
  opts = opts or {}
  if type(opts) ~= "table" then errorf("%s: options must be a table, got %s", name, type(opts)) end
  self.mode, self._name = mode, name
  self.input_size = nonneg_int(input_size, name, "input_size")
  self.hidden_size = nonneg_int(hidden_size, name, "hidden_size")
  if hidden_size == 0 then errorf("%s: hidden_size: must be positive, got 0", name) end
  self.num_layers = nonneg_int(opts.num_layers or 1, name, "num_layers")
  if self.num_layers == 0 then errorf("%s: num_layers: must be positive, got 0", name) end
  check_nonlinearity(name, mode, opts.nonlinearity, "nn.RNN")
  self.nonlinearity = opts.nonlinearity or "tanh"
  self.bias = opts.bias ~= false
  self.batch_first = opts.batch_first == true
  local p = opts.dropout or 0
  if type(p) ~= "number" or p < 0 or p > 1 then
    errorf("%s: dropout: a probability in [0, 1] expected, got %s", name, tostring(p))
  end
  self.dropout = p
  self.bidirectional = opts.bidirectional == true
  self.proj_size = nonneg_int(opts.proj_size or 0, name, "proj_size")
  if self.proj_size > 0 and mode ~= "LSTM" then
    errorf("%s: proj_size: only nn.LSTM supports a projection", name)
  end
  if self.proj_size >= hidden_size then
    errorf("%s: proj_size: must be smaller than hidden_size (%d), got %d", name, hidden_size, self.proj_size)
  end
  local D = self.bidirectional and 2 or 1
  local G = GATES[mode] * hidden_size
  local H_out = self.proj_size > 0 and self.proj_size or hidden_size
  local fk = { dtype = opts.dtype, device = opts.device }
  local names = {}
  for layer = 0, self.num_layers - 1 do
    local in_size = layer == 0 and input_size or H_out * D
    for dir = 0, D - 1 do
      local sfx = "_l" .. layer .. (dir == 1 and "_reverse" or "")
      local entry = { "weight_ih" .. sfx, "weight_hh" .. sfx }
      self["weight_ih" .. sfx] = nn.Parameter(ember.empty(G, in_size, fk))
      self["weight_hh" .. sfx] = nn.Parameter(ember.empty(G, H_out, fk))
      if self.bias then
        self["bias_ih" .. sfx] = nn.Parameter(ember.empty(G, fk))
        self["bias_hh" .. sfx] = nn.Parameter(ember.empty(G, fk))
        entry[3], entry[4] = "bias_ih" .. sfx, "bias_hh" .. sfx
      end
      if self.proj_size > 0 then
        self["weight_hr" .. sfx] = nn.Parameter(ember.empty(self.proj_size, hidden_size, fk))
        entry.hr = "weight_hr" .. sfx
      end
      names[#names + 1] = entry
    end
  end
  self._weight_names = names
  self:reset_parameters()
end

--- rnn:reset_parameters(): every parameter uniform in +-1/sqrt(hidden_size),
--- as torch's RNNBase.reset_parameters.
function RNNBase:reset_parameters()
  local stdv = 1 / math.sqrt(self.hidden_size)
  for _, w in ipairs(self:parameters()) do nn.init.uniform_(w, -stdv, stdv) end
end

function RNNBase:extra_repr()
  local s = string.format("%d, %d", self.input_size, self.hidden_size)
  if self.proj_size ~= 0 then s = s .. ", proj_size=" .. self.proj_size end
  if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
  if self.mode == "RNN" and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity=" .. self.nonlinearity end
  if not self.bias then s = s .. ", bias=false" end
  if self.batch_first then s = s .. ", batch_first=true" end
  if self.dropout ~= 0 then s = s .. ", dropout=" .. self.dropout end
  if self.bidirectional then s = s .. ", bidirectional=true" end
  return s
end

-- The lengths option as a Lua list of N integers in 1..L (nil when absent
-- or when every sequence is L long).
local function read_lengths(name, lengths, N, L)
  if lengths == nil then return nil end
  local list
  if ember.is_tensor(lengths) then
    if #lengths.shape ~= 1 or not INTEGER[lengths.dtype] then
      errorf("%s: lengths: a 1-d integer tensor or a list expected, got a %s tensor of shape %s", name,
        lengths.dtype, shape_str(lengths.shape))
    end
    list = lengths:tolist()
  elseif type(lengths) == "table" then
    list = lengths
  else
    errorf("%s: lengths: a 1-d integer tensor or a list expected, got %s", name, type(lengths))
  end
  if #list ~= N then
    errorf("%s: lengths: %d lengths expected (the batch size), got %d", name, N, #list)
  end
  local full = true
  for i = 1, N do
    local v = list[i]
    if math.type(v) ~= "integer" or v < 1 or v > L then
      errorf("%s: lengths: entry %d must be an integer in 1..%d (the sequence length), got %s", name, i, L,
        tostring(v))
    end
    if v ~= L then full = false end
  end
  if full then return nil end
  return list
end

-- masks[t] = {valid, ended} ({N, 1} bools: step t is within / past each
-- sequence) for the steps t at which some sequence has ended; nil at steps
-- where all are valid.
local function step_masks(list, L, N)
  local lens = ember.tensor(list, { dtype = "int64" }):reshape(N, 1)
  local minlen = math.huge
  for _, v in ipairs(list) do minlen = math.min(minlen, v) end
  local masks = {}
  for t = minlen + 1, L do masks[t] = { lens:ge(t), lens:lt(t) } end
  return masks
end

-- Runs one layer in one direction over xg (a list of L {N, G} input gate
-- parts, time-major) from the initial state h0 (and c0); returns the list
-- of L outputs and the final state(s). See Note [Recurrent layers].
function RNNBase:_run_direction(xg, h0, c0, whh_t, bhh, whr_t, reverse, masks)
  local L = #xg
  local outs = {}
  local h, c = h0, c0
  local mode, act = self.mode, self.nonlinearity
  local t0, t1, dt = 1, L, 1
  if reverse then t0, t1, dt = L, 1, -1 end
  for t = t0, t1, dt do
    local hn, cn = cell_step(mode, act, xg[t], h, c, whh_t, bhh, whr_t)
    local m = masks and masks[t]
    if m then
      outs[t] = hn:masked_fill(m[2], 0)
      h = ember.where(m[1], hn, h)
      if cn then c = ember.where(m[1], cn, c) end
    else
      outs[t], h, c = hn, hn, cn
    end
  end
  return outs, h, c
end

-- Checks an initial state t against the shape want and the dtype of the
-- input. Called by read_state only: its errors are raised one level up
-- (errorf_up), as when the forwards called it directly.
local function check_state(name, what, t, want, unbatched, dtype)
  if not ember.is_tensor(t) then errorf_up("%s: %s: tensor expected, got %s", name, what, type(t)) end
  if t.dtype ~= dtype then
    errorf_up("%s: %s: dtype %s expected (the input's), got %s", name, what, dtype, t.dtype)
  end
  local s = t.shape
  local ok = #s == #want
  for i = 1, #want do ok = ok and s[i] == want[i] end
  if not ok then
    if unbatched and #s ~= 2 then
      errorf_up("%s: %s: for unbatched 2-d input, %s should also be 2-d, got shape %s", name, what, what,
        shape_str(s))
    end
    errorf_up("%s: %s: expected shape %s, got %s", name, what, shape_str(want), shape_str(s))
  end
end

-- The initial state hx given to a forward, checked against the input's
-- dtype: for an LSTM a list of two tensors named names[1], names[2] of
-- shapes hwant, cwant, else one tensor hx of shape hwant (unbatched2d: the
-- input is an unbatched 2-d one, for check_state's message). Returns h, c
-- (c nil but for an LSTM).
local function read_state(name, mode, hx, names, hwant, cwant, unbatched2d, dtype)
  if mode ~= "LSTM" then
    check_state(name, "hx", hx, hwant, unbatched2d, dtype)
    return hx, nil
  end
  if type(hx) ~= "table" or ember.is_tensor(hx) or #hx ~= 2 then
    errorf_up("%s: hx: a list {%s, %s} of two tensors expected, got %s", name, names[1], names[2],
      ember.is_tensor(hx) and "a tensor" or type(hx))
  end
  check_state(name, names[1], hx[1], hwant, unbatched2d, dtype)
  check_state(name, names[2], hx[2], cwant, unbatched2d, dtype)
  return hx[1], hx[2]
end

--- rnn:forward(input [, hx] [, {lengths=}]) -> output, h_n (LSTM: output,
--- {h_n, c_n}). input {L, N, input_size} ({N, L, input_size} with
--- batch_first) or unbatched {L, input_size}; hx {num_layers*D, N, H_out}
--- (LSTM: {h_0, c_0}, c_0 {num_layers*D, N, hidden_size}), zeros by
--- default; lengths (an int64 tensor or a list of N integers in 1..L) masks
--- the steps past each sequence's end (Note [Recurrent layers]).
function RNNBase:forward(input, hx, opts)
  local name, mode = self._name, self.mode
  if opts == nil and type(hx) == "table" and not ember.is_tensor(hx) and hx.lengths ~= nil then
    hx, opts = nil, hx
  end
  opts = opts or {}
  local D = self.bidirectional and 2 or 1
  local H, P = self.hidden_size, self.proj_size
  local H_out = P > 0 and P or H
  local dims = check_input(name, input, 3, self.input_size, self[self._weight_names[1][1]].dtype)
  local unbatched = dims == 2
  local x = input
  if unbatched then x = x:unsqueeze(2)
  elseif self.batch_first then x = x:transpose(1, 2) end
  local L, N = x.shape[1], x.shape[2]
  if L == 0 then
    errorf("%s: input: the sequence length must be positive, got shape %s", name, shape_str(input.shape))
  end
  local nl = self.num_layers * D
  -- initial states
  local h0s, c0s
  local hwant = unbatched and { nl, H_out } or { nl, N, H_out }
  local cwant = unbatched and { nl, H } or { nl, N, H }
  if hx == nil then
    local z = ember.zeros(nl, N, H_out, { dtype = x.dtype })
    h0s = z:unbind(1)
    if mode == "LSTM" then c0s = ember.zeros(nl, N, H, { dtype = x.dtype }):unbind(1) end
  else
    local h0, c0 = read_state(name, mode, hx, { "h_0", "c_0" }, hwant, cwant, unbatched, x.dtype)
    if unbatched then
      h0 = h0:unsqueeze(2)
      c0 = c0 and c0:unsqueeze(2)
    end
    h0s = h0:unbind(1)
    c0s = c0 and c0:unbind(1)
  end
  local lens = read_lengths(name, opts.lengths, N, L)
  local masks = lens and step_masks(lens, L, N)
  local drop = self.dropout > 0 and self.training
  local hn, cn = {}, {}
  local layer_in = x
  for layer = 0, self.num_layers - 1 do
    local in_size = layer_in.shape[3]
    local x2 = layer_in:reshape(L * N, in_size)
    local outs = {}
    for dir = 0, D - 1 do
      local k = layer * D + dir + 1
      local names = self._weight_names[k]
      local wih, whh = self[names[1]], self[names[2]]
      local bih, bhh = names[3] and self[names[3]], names[4] and self[names[4]]
      local whr = names.hr and self[names.hr]
      local proj
      if bih then
        local b = mode == "GRU" and bih or (bih + bhh)
        proj = ember.addmm(b, x2, wih:t())
      else
        proj = x2:mm(wih:t())
      end
      local xg = proj:reshape(L, N, proj.shape[2]):unbind(1)
      local o, h, c = self:_run_direction(xg, h0s[k], c0s and c0s[k], whh:t(), mode == "GRU" and bhh or nil,
        whr and whr:t(), dir == 1, masks)
      outs[dir + 1] = ember.stack(o)
      hn[k], cn[k] = h, c
    end
    layer_in = D == 2 and ember.cat(outs, 3) or outs[1]
    if drop and layer < self.num_layers - 1 then layer_in = F.dropout(layer_in, self.dropout, true) end
  end
  local output = layer_in
  local h_n, c_n = ember.stack(hn), mode == "LSTM" and ember.stack(cn) or nil
  if unbatched then
    output, h_n = output:squeeze(2), h_n:squeeze(2)
    c_n = c_n and c_n:squeeze(2)
  elseif self.batch_first then
    output = output:transpose(1, 2)
  end
  if mode == "LSTM" then return output, { h_n, c_n } end
  return output, h_n
end

local function layer_class(mode, doc)
  local C = RNNBase:extend(mode)
  nn[mode] = C
  C.__doc = doc
  function C:__init(input_size, hidden_size, opts)
    RNNBase.__init(self, mode, mode, input_size, hidden_size, opts)
  end
  return C
end

local COMMON_DOC = "{num_layers=1, bias=true, batch_first=false, dropout=0, bidirectional=false%s}):\n%s\n" ..
  "Parameters weight_ih_lK, weight_hh_lK, bias_ih_lK, bias_hh_lK (and ..._reverse) as torch's, uniform in\n" ..
  "+-1/sqrt(hidden_size). forward(input [, hx] [, {lengths=}]): input {L, N, input_size} ({N, L, .} with\n" ..
  "batch_first; {L, input_size} unbatched) -> output {L, N, D*H_out}, %s; lengths (int64 tensor or list,\n" ..
  "1..L) keeps each sequence's state past its end and zeroes its outputs there (torch's packed sequences)."

layer_class("RNN", "nn.RNN(input_size, hidden_size, " .. string.format(COMMON_DOC, ", nonlinearity=\"tanh\"",
  "Elman RNN, h_t = tanh|relu(x_t W_ih^T + b_ih + h_(t-1) W_hh^T + b_hh), layer by layer.", "h_n {num_layers*D, N, H}"))
layer_class("LSTM", "nn.LSTM(input_size, hidden_size, " .. string.format(COMMON_DOC, ", proj_size=0",
  "Long short-term memory, gates i,f,g,o as torch's; proj_size > 0 adds weight_hr_lK (h_t = (o*tanh(c_t)) W_hr^T).",
  "{h_n, c_n}; hx = {h_0, c_0}"))
layer_class("GRU", "nn.GRU(input_size, hidden_size, " .. string.format(COMMON_DOC, "",
  "Gated recurrent unit, gates r,z,n with n = tanh(W_in x + b_in + r*(W_hn h + b_hn)) as torch's.",
  "h_n {num_layers*D, N, H}"))

-- ---- the cells ----

local function cell_class(mode)
  local name = mode == "RNN" and "RNNCell" or (mode .. "Cell")
  local C = Module:extend(name)
  nn[name] = C
  --- nn.XCell(input_size, hidden_size [, bias=true] [, {bias=, nonlinearity=, dtype=, device=}])
  function C:__init(input_size, hidden_size, bias, opts)
    if type(bias) == "table" then bias, opts = nil, bias end
    if bias ~= nil and type(bias) ~= "boolean" then
      errorf("%s: bias: boolean expected, got %s", name, type(bias))
    end
    opts = opts or {}
    if type(opts) ~= "table" then errorf("%s: options must be a table, got %s", name, type(opts)) end
    if bias == nil then bias = opts.bias ~= false end
    self.input_size = nonneg_int(input_size, name, "input_size")
    self.hidden_size = nonneg_int(hidden_size, name, "hidden_size")
    self.bias = bias
    check_nonlinearity(name, mode, opts.nonlinearity, "nn.RNNCell")
    if mode == "RNN" then self.nonlinearity = opts.nonlinearity or "tanh" end
    local G = GATES[mode] * hidden_size
    local fk = { dtype = opts.dtype, device = opts.device }
    self.weight_ih = nn.Parameter(ember.empty(G, input_size, fk))
    self.weight_hh = nn.Parameter(ember.empty(G, hidden_size, fk))
    if bias then
      self.bias_ih = nn.Parameter(ember.empty(G, fk))
      self.bias_hh = nn.Parameter(ember.empty(G, fk))
    else
      self:register_parameter("bias_ih", nil)
      self:register_parameter("bias_hh", nil)
    end
    self:reset_parameters()
  end
  function C:reset_parameters()
    local stdv = self.hidden_size > 0 and 1 / math.sqrt(self.hidden_size) or 0
    for _, w in ipairs(self:parameters()) do nn.init.uniform_(w, -stdv, stdv) end
  end
  function C:extra_repr()
    local s = string.format("%d, %d", self.input_size, self.hidden_size)
    if not self.bias then s = s .. ", bias=false" end
    if mode == "RNN" and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity=" .. self.nonlinearity end
    return s
  end
  -- forward(input [, hx]): input {N, input_size} or unbatched {input_size};
  -- hx {N, H} (LSTMCell: {h, c}), zeros by default. Returns h' (LSTMCell: h', c').
  function C:forward(input, hx)
    local unbatched = check_input(name, input, 2, self.input_size, self.weight_ih.dtype) == 1
    local x = unbatched and input:unsqueeze(1) or input
    local N, H = x.shape[1], self.hidden_size
    local want = unbatched and { H } or { N, H }
    local h, c
    if hx == nil then
      h = ember.zeros(N, H, { dtype = x.dtype })
      c = mode == "LSTM" and ember.zeros(N, H, { dtype = x.dtype }) or nil
    else
      h, c = read_state(name, mode, hx, { "h", "c" }, want, want, false, x.dtype)
      if unbatched then
        h = h:unsqueeze(1)
        c = c and c:unsqueeze(1)
      end
    end
    local xg = F.linear(x, self.weight_ih, self.bias_ih)
    if self.bias_hh ~= nil and mode ~= "GRU" then xg = xg + self.bias_hh end
    local h1, c1 = cell_step(mode, self.nonlinearity, xg, h, c, self.weight_hh:t(), self.bias_hh)
    if unbatched then
      h1 = h1:squeeze(1)
      c1 = c1 and c1:squeeze(1)
    end
    if mode == "LSTM" then return h1, c1 end
    return h1
  end
  return C
end

cell_class("RNN").__doc = [[
nn.RNNCell(input_size, hidden_size [, bias=true] [, {nonlinearity="tanh", dtype=}]): one Elman step,
h' = tanh|relu(x W_ih^T + b_ih + h W_hh^T + b_hh). forward(input [, hx]) -> h'; input {N, input_size}
or {input_size}, hx {N, H} (zeros by default). Parameters as torch's, uniform in +-1/sqrt(hidden_size).]]
cell_class("LSTM").__doc = [[
nn.LSTMCell(input_size, hidden_size [, bias=true] [, {dtype=}]): one LSTM step (gates i,f,g,o as torch's).
forward(input [, {h, c}]) -> h', c' (two values); zeros by default. Parameters weight_ih {4H, in},
weight_hh {4H, H}, bias_ih, bias_hh {4H}, uniform in +-1/sqrt(hidden_size).]]
cell_class("GRU").__doc = [[
nn.GRUCell(input_size, hidden_size [, bias=true] [, {dtype=}]): one GRU step, gates r,z,n with
n = tanh(W_in x + b_in + r*(W_hn h + b_hn)), h' = (1-z)*n + z*h. forward(input [, hx]) -> h'.
Parameters weight_ih {3H, in}, weight_hh {3H, H}, bias_ih, bias_hh {3H}, uniform in +-1/sqrt(hidden_size).]]
