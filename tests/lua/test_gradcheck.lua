-- test_gradcheck.lua -- every op with a backward formula (the schema's list,
-- ember.autograd.differentiable_ops()) against finite differences, from the
-- samples in op_samples.lua; gradcheck's own error reporting.
local T = {}
local ag = ember.autograd
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
local samples = dofile(dir .. "/op_samples.lua")

local function f64(v) return ember.tensor(v, { dtype = "float64" }) end

function T.every_differentiable_op_has_samples()
  local missing = {}
  for _, name in ipairs(ag.differentiable_ops()) do
    if not samples[name] then missing[#missing + 1] = name end
  end
  check(#missing == 0, "differentiable ops without samples in op_samples.lua: "
    .. table.concat(missing, ", "))
  check(#ag.differentiable_ops() > 10)
end

function T.gradcheck_every_op()
  ember.manual_seed(7)
  local failures = {}
  for _, name in ipairs(ag.differentiable_ops()) do
    local make = samples[name]
    if make then
      for i, s in ipairs(make()) do
        local o = { raise = false, name = name .. " sample " .. i }
        for k, v in pairs(s.opts or {}) do o[k] = v end
        local ok, okv, msg = pcall(ag.gradcheck, s.fn, s.inputs, o)
        if not ok then failures[#failures + 1] = o.name .. ": " .. tostring(okv)
        elseif not okv then failures[#failures + 1] = msg end
      end
    end
  end
  check(#failures == 0, "\n  " .. table.concat(failures, "\n  "))
end

function T.gradgradcheck_every_twice_differentiable_op()
  ember.manual_seed(11)
  local failures = {}
  for _, name in ipairs(ag.differentiable_ops()) do
    local make = samples[name]
    if make then
      for i, s in ipairs(make()) do
        if s.gradgrad then
          local o = { raise = false, name = name .. " sample " .. i .. " (gradgrad)" }
          for k, v in pairs(s.opts or {}) do o[k] = v end
          local ok, okv, msg = pcall(ag.gradgradcheck, s.fn, s.inputs, o)
          if not ok then failures[#failures + 1] = o.name .. ": " .. tostring(okv)
          elseif not okv then failures[#failures + 1] = msg end
        end
      end
    end
  end
  check(#failures == 0, "\n  " .. table.concat(failures, "\n  "))
end

function T.gradcheck_reports_a_wrong_gradient()
  local Wrong = ag.Function {
    name = "Wrong",
    forward = function(ctx, x) return x * x end,
    backward = function(ctx, g) return g * 3 end,
  }
  local ok, msg = ag.gradcheck(function(x) return Wrong(x) end, { f64({ 1.0, 2.0 }) }, { raise = false })
  check(not ok)
  check(msg:find("input 1", 1, true) and msg:find("element 1", 1, true)
    and msg:find("numerical 2", 1, true) and msg:find("analytical 3", 1, true), msg)
  check_error(function() ag.gradcheck(function(x) return Wrong(x) end, { f64({ 1.0 }) }) end,
    "Jacobian mismatch")
end

function T.gradcheck_accepts_single_tensor_and_passes_non_tensors()
  check(ag.gradcheck(function(x) return x:exp() end, f64({ 0.1, 0.2 })))
  check(ag.gradcheck(function(x, k) return x * k end, { f64({ 0.1 }), 3 }))
  check(ag.gradgradcheck(function(x) return (x * x * x):sum() end, { f64({ 0.5, -0.3 }) }))
end

return T
