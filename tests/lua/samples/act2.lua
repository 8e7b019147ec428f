-- samples/act2.lua -- gradcheck samples of the act2 family
-- (schema/ops/act2.yaml); see op_samples.lua. The in-place ops run on a
-- clone (a leaf that requires grad is refused), through the F.X(inplace)
-- form too; w23 spans both sides of +-3 (hardsigmoid, hardswish).
return function(H)
  local S = {}
  local t = H.t
  local F = ember.nn.functional
  local function w23() return t({ { -4.1, -2.2, 0.7 }, { 3.6, -0.4, 1.9 } }) end
  local function inplace(name)
    return function()
      return H.many({
        { { w23() }, function(a) return F[name .. "_"](a:clone()) end },
        { { w23() }, function(a) return F[name](a * 1, true) end },
        { { w23() }, function(a) return F[name](a:clone(), { inplace = true }) end },
      })
    end
  end
  S.silu_ = inplace("silu")
  S.mish_ = inplace("mish")
  S.hardsigmoid_ = inplace("hardsigmoid")
  S.hardswish_ = inplace("hardswish")
  -- the F forms with inplace (functional_X, Note [Shadowed names]): out of
  -- place, in place positionally and by the options table; m23 stays
  -- away from every kink (0, +-1, 0.1, +-0.6)
  local m23 = H.m23
  local function functional(name, make, args)
    return function()
      local function call(x, inplace)
        local a = { table.unpack(args) }
        a[#a + 1] = inplace
        return F[name](x, table.unpack(a))
      end
      return H.many({
        { { make() }, function(x) return call(x, false) end },
        { { make() }, function(x) return call(x * 1, true) end },
        { { make() }, function(x) return call(x:clone(), { inplace = true }) end },
      })
    end
  end
  S.functional_relu = functional("relu", m23, {})
  S.functional_relu6 = functional("relu6", w23, {})
  S.functional_elu = functional("elu", w23, { 1.3 })
  S.functional_leaky_relu = functional("leaky_relu", m23, { 0.2 })
  S.functional_hardtanh = functional("hardtanh", m23, { -0.6, 0.9 })
  S.functional_selu = functional("selu", w23, {})
  S.functional_celu = functional("celu", w23, { 0.7 })
  S.functional_silu = functional("silu", w23, {})
  S.functional_mish = functional("mish", w23, {})
  S.functional_hardsigmoid = functional("hardsigmoid", w23, {})
  S.functional_hardswish = functional("hardswish", w23, {})
  S.functional_threshold = functional("threshold", m23, { 0.1, 20 })
  return S
end
