"""render.py -- turns an abstract program (see README.md, "Programs") into
Lua source for ember and Python source for torch. Every 1-based/0-based,
inclusive/exclusive and spelling conversion lives here (and in the `py`
hooks of ops.py).

Abstract arguments are small lists:
  ["var", name]           a tensor variable
  ["num", x]              a Lua float / Python float ("nan", "inf", "-inf" allowed)
  ["int", n]  ["bool", b] a Lua integer / boolean
  ["dim", d] ["index", i] a Lua-style position: 1-based, negative from the end
  ["end", e]              Lua-style inclusive end (slice)
  ["ints", [..], style]   sizes; style "v" = varargs, "t" = a table/tuple
  ["dims", [..], style]   dims; style "1" = a single number, "t" = a table/tuple
  ["dtype", name]         a dtype name (float32, ...)
  ["none"]                nil / None
"""
import json
import math

import ops as OPS


def flatten(stmts):
    """The statements of a program with its no_grad blocks opened."""
    out = []
    for st in stmts:
        out += flatten(st['body']) if st['s'] == 'nograd' else [st]
    return out

PY_DTYPES = {'float32', 'float64', 'int64', 'int32', 'int8', 'uint8', 'bool', 'float16',
             'bfloat16'}
LUA_OPERATORS = {'add': '+', 'sub': '-', 'mul': '*', 'div': '/', 'pow': '^', 'remainder': '%'}
PY_OPERATORS = {'add': '+', 'sub': '-', 'mul': '*', 'div': '/', 'pow': '**', 'remainder': '%'}


# ---- literals ----

def lua_float(v):
    """A Lua float literal (never an integer literal), parenthesized when
    negative or special so it is safe next to an operator."""
    if v == 'nan' or (isinstance(v, float) and math.isnan(v)):
        return '(0/0)'
    if v == 'inf' or v == math.inf:
        return '(1/0)'
    if v == '-inf' or v == -math.inf:
        return '(-1/0)'
    s = repr(float(v))
    if s[0] == '-':
        return '(' + s + ')'
    return s


def py_float(v):
    if v == 'nan' or (isinstance(v, float) and math.isnan(v)):
        return 'nan'
    if v == 'inf' or v == math.inf:
        return 'inf'
    if v == '-inf' or v == -math.inf:
        return '(-inf)'
    s = repr(float(v))
    return '(' + s + ')' if s[0] == '-' else s


def _paren_int(n):
    return '(%d)' % n if n < 0 else str(n)


def py_pos(v):
    """Lua position (1-based, or negative from the end) -> Python index."""
    return v - 1 if v > 0 else v


def py_end(e):
    """Lua inclusive end -> Python exclusive end expression ('' = open)."""
    if e is None:
        return None
    if e > 0:
        return e
    return None if e == -1 else e + 1


def lua_arg(a):
    k = a[0]
    if k == 'var':
        return a[1]
    if k == 'num':
        return lua_float(a[1])
    if k == 'int':
        return _paren_int(a[1])
    if k == 'bool':
        return 'true' if a[1] else 'false'
    if k in ('dim', 'index', 'end'):
        return str(a[1])
    if k in ('ints', 'dims'):
        vals = [str(x) for x in a[1]]
        style = a[2] if len(a) > 2 else 't'
        if style in ('v', '1'):
            return ', '.join(vals)
        return '{' + ', '.join(vals) + '}'
    if k == 'dtype':
        return '"%s"' % a[1]
    if k == 'none':
        return 'nil'
    raise ValueError('bad arg %r' % (a,))


def py_arg(a):
    k = a[0]
    if k == 'var':
        return a[1]
    if k == 'num':
        return py_float(a[1])
    if k == 'int':
        return _paren_int(a[1])
    if k == 'bool':
        return 'True' if a[1] else 'False'
    if k in ('dim', 'index'):
        return _paren_int(py_pos(a[1]))
    if k == 'end':
        e = py_end(a[1])
        return 'None' if e is None else _paren_int(e)
    if k == 'ints':
        style = a[2] if len(a) > 2 else 't'
        vals = [str(x) for x in a[1]]
        if style == 'v':
            return ', '.join(vals)
        return '(' + ''.join(v + ', ' for v in vals).rstrip(' ') + ')'
    if k == 'dims':
        vals = [str(py_pos(x)) for x in a[1]]
        style = a[2] if len(a) > 2 else 't'
        if style == '1':
            return vals[0]
        return '(' + ''.join(v + ', ' for v in vals).rstrip(' ') + ')'
    if k == 'dtype':
        return 'torch.' + a[1]
    if k == 'none':
        return 'None'
    raise ValueError('bad arg %r' % (a,))


# ---- leaves ----

def _nest(flat, shape, leaf):
    if not shape:
        return leaf(flat[0])
    n = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * n:(i + 1) * n], shape[1:], leaf) for i in range(shape[0])]


def _lua_nested(x):
    return '{' + ', '.join(_lua_nested(e) for e in x) + '}' if isinstance(x, list) else x


def _py_nested(x):
    return '[' + ', '.join(_py_nested(e) for e in x) + ']' if isinstance(x, list) else x


def _leaf_value(dtype, lang):
    def f(v):
        if dtype == 'bool':
            return ('true' if v else 'false') if lang == 'lua' else ('True' if v else 'False')
        if isinstance(v, bool) or isinstance(v, int) and not dtype.startswith(('float', 'bfloat')):
            return _paren_int(int(v)) if lang == 'py' else str(int(v))
        return lua_float(v) if lang == 'lua' else py_float(v)
    return f


def lua_leaf(st):
    shape, dt = st['shape'], st['dtype']
    opts = []
    if st.get('dtype_given', True):
        opts.append('dtype = "%s"' % dt)
    if st.get('rg'):
        opts.append('requires_grad = true')
    o = '{' + ', '.join(opts) + '}' if opts else None
    if 0 in shape:
        return 'ember.zeros(%s)' % ', '.join([str(s) for s in shape] + ([o] if o else []))
    data = _lua_nested(_nest(st['values'], shape, _leaf_value(dt, 'lua')))
    return 'ember.tensor(%s)' % ', '.join([data] + ([o] if o else []))


def py_leaf(st):
    shape, dt = st['shape'], st['dtype']
    opts = []
    if st.get('dtype_given', True):
        opts.append('dtype=torch.%s' % dt)
    if st.get('rg'):
        opts.append('requires_grad=True')
    if 0 in shape:
        return 'torch.zeros(%s)' % ', '.join(['(%s)' % ''.join('%d, ' % s for s in shape)] + opts)
    data = _py_nested(_nest(st['values'], shape, _leaf_value(dt, 'py')))
    return 'torch.tensor(%s)' % ', '.join([data] + opts)


# ---- indexing ----

def lua_keys(keys):
    parts = []
    for k in keys:
        if k[0] == 'sel':
            parts.append(str(k[1]))
        elif k[0] == 'all':
            parts.append('{}')
        else:
            parts.append('{' + ', '.join(str(x) for x in k[1:]) + '}')
    return '{ ' + ', '.join(parts) + ' }'


def py_keys(keys):
    parts = []
    for k in keys:
        if k[0] == 'sel':
            parts.append(str(py_pos(k[1])))
        elif k[0] == 'all':
            parts.append(':')
        else:
            a = k[1]
            b = k[2] if len(k) > 2 else k[1]
            e = py_end(b)
            s = '%d:%s' % (py_pos(a), '' if e is None else e)
            if len(k) > 3:
                s += ':%d' % k[3]
            parts.append(s)
    return ', '.join(parts)


# ---- calls ----

def _outs(st):
    return st.get('outs') or []


def lua_call(st):
    op, style, args, kw = st['op'], st['style'], st.get('args', []), st.get('kw', {})
    la = [lua_arg(a) for a in args]
    if style == 'operator':
        if len(la) == 1:
            return '(-%s)' % la[0]
        return '(%s %s %s)' % (la[0], LUA_OPERATORS[op], la[1])
    if kw:
        la.append('{' + ', '.join('%s = %s' % (k, lua_arg(v)) for k, v in sorted(kw.items())) + '}')
    name = op.split('.')[0]  # an overload (max.dim) is called by its base name
    if style == 'method':
        k = st.get('recv', 0)
        return '%s:%s(%s)' % (la[k], name, ', '.join(la[:k] + la[k + 1:]))
    ns = OPS.NAMESPACE.get(op)
    return 'ember.%s%s(%s)' % (ns + '.' if ns else '', name, ', '.join(la))


def py_call(st):
    op, style, args, kw = st['op'], st['style'], st.get('args', []), st.get('kw', {})
    pa = [py_arg(a) for a in args]
    pk = {k: py_arg(v) for k, v in kw.items()}
    if style == 'operator':
        if len(pa) == 1:
            return '(-%s)' % pa[0]
        return '(%s %s %s)' % (pa[0], PY_OPERATORS[op], pa[1])
    if style == 'function':  # torch functions take sizes and dims as one tuple
        pa = [py_arg(a[:2] + ['t']) if a[0] in ('ints', 'dims') and a[2:] == ['v'] else p
              for a, p in zip(args, pa)]
    spec = OPS.MAP.get(op) or {}
    post = spec.get('post', lambda call: call)
    if spec.get('py'):
        return post(spec['py'](st, pa, pk))
    if OPS.is_aten(op):
        return 'torch.ops.aten.%s(%s)' % (op, ', '.join(pa + ['%s=%s' % kv for kv in sorted(pk.items())]))
    name = spec.get('pyname', op.split('.')[0])
    kws = ['%s=%s' % (k, v) for k, v in sorted(pk.items())]
    if style == 'method':
        k = st.get('recv', 0)
        return post('%s.%s(%s)' % (pa[k], name, ', '.join(pa[:k] + pa[k + 1:] + kws)))
    ns = OPS.NAMESPACE.get(op)
    return post('torch.%s%s(%s)' % (ns + '.' if ns else '', name, ', '.join(pa + kws)))


# ---- statements ----

def lua_stmt(st, ind, counter):
    """Lua lines for one statement (blocks recurse). counter is a one-item
    list holding the next step number; each leaf statement is preceded by
    `S.step = k`, so an error reports which statement raised."""
    p = '  ' * ind
    s = st['s']
    if s == 'nograd':
        if st.get('form') == 'fn':
            lines = [p + 'ember.no_grad(function()']
        else:
            lines = [p + 'do', p + '  local __g <close> = ember.no_grad()']
        for b in st['body']:
            lines += lua_stmt(b, ind + 1, counter)
        lines.append(p + ('end)' if st.get('form') == 'fn' else 'end'))
        return lines
    counter[0] += 1
    lines = [p + 'S.step = %d' % counter[0]]
    if s == 'leaf':
        lines.append(p + '%s = %s' % (st['out'], lua_leaf(st)))
    elif s == 'call':
        rhs = lua_call(st)
        outs = _outs(st)
        lines.append(p + ('%s = %s' % (', '.join(outs), rhs) if outs else rhs if st['style'] != 'operator' else '_ = ' + rhs))
    elif s == 'index':
        key = str(st['num']) if 'num' in st else lua_keys(st['keys'])
        lines.append(p + '%s = %s[%s]' % (st['out'], st['src'], key))
    elif s == 'setindex':
        key = str(st['num']) if 'num' in st else lua_keys(st['keys'])
        lines.append(p + '%s[%s] = %s' % (st['dst'], key, lua_arg(st['value'])))
    elif s == 'backward':
        lines.append(p + '%s:backward(%s)' % (st['src'], '{retain_graph = true}' if st.get('retain') else ''))
    elif s == 'retain_grad':
        lines.append(p + '%s:retain_grad()' % st['src'])
    elif s == 'grad':
        opts = 'create_graph = %s, allow_unused = true, retain_graph = true' % (
            'true' if st.get('create_graph') else 'false')
        lines.append(p + 'do local __r = ember.autograd.grad({%s}, {%s}, {%s})' % (
            ', '.join(st['outputs']), ', '.join(st['inputs']), opts))
        lines.append(p + '  ' + '; '.join('%s = __r[%d]' % (o, i + 1) for i, o in enumerate(st['outs'])) + ' end')
    else:
        raise ValueError('bad statement %r' % s)
    return lines


def py_stmt(st, ind, counter, touch=True):
    """Python lines for one statement; see lua_stmt. With touch, the step
    line is `_touch(S, k, locals())`, which also reads every tensor's
    grad_fn: torch refreshes a view's stale history only when it is read,
    and whether it was read changes what torch does next (an in-place op on
    a view of a base that gained history in between is refused as "a leaf
    Variable" when it was not); the harness reads it always."""
    p = '    ' * ind
    s = st['s']
    if s == 'nograd':
        lines = [p + 'with torch.no_grad():']
        for b in st['body']:
            lines += py_stmt(b, ind + 1, counter, touch)
        return lines
    counter[0] += 1
    lines = [p + ('_touch(S, %d, locals())' % counter[0] if touch else 'S[0] = %d' % counter[0])]
    if s == 'leaf':
        lines.append(p + '%s = %s' % (st['out'], py_leaf(st)))
    elif s == 'call':
        rhs = py_call(st)
        outs = _outs(st)
        lines.append(p + ('%s = %s' % (', '.join(outs) + (',' if len(outs) > 1 else ''), rhs) if outs else rhs))
    elif s == 'index':
        key = str(py_pos(st['num'])) if 'num' in st else py_keys(st['keys'])
        lines.append(p + '%s = %s[%s]' % (st['out'], st['src'], key))
    elif s == 'setindex':
        key = str(py_pos(st['num'])) if 'num' in st else py_keys(st['keys'])
        lines.append(p + '%s[%s] = %s' % (st['dst'], key, py_arg(st['value'])))
    elif s == 'backward':
        lines.append(p + '%s.backward(%s)' % (st['src'], 'retain_graph=True' if st.get('retain') else ''))
    elif s == 'retain_grad':
        lines.append(p + '%s.retain_grad()' % st['src'])
    elif s == 'grad':
        lines.append(p + '%s, = torch.autograd.grad([%s], [%s], create_graph=%s, allow_unused=True, retain_graph=True)' % (
            ', '.join(st['outs']), ', '.join(st['outputs']), ', '.join(st['inputs']),
            bool(st.get('create_graph'))))
    else:
        raise ValueError('bad statement %r' % s)
    return lines


def defined_vars(stmts):
    """Names the program defines, in order (blocks included)."""
    out = []
    for st in stmts:
        if st['s'] == 'nograd':
            out += [v for v in defined_vars(st['body']) if v not in out]
            continue
        for v in ([st['out']] if st.get('out') else []) + _outs(st):
            if v not in out:
                out.append(v)
    return out


# ---- whole programs ----

LUA_PRELUDE = r'''
local ember = ember or require "ember"
ember.set_num_threads(1)
local out = io.stdout
local fmt, concat, mtype = string.format, table.concat, math.type
local function jstr(s)
  return '"' .. tostring(s):gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' elseif c == '\\' then return '\\\\' end
    return fmt('\\u%04x', c:byte())
  end) .. '"'
end
local function jnum(v)
  if type(v) == "boolean" then return v and "true" or "false" end
  if mtype(v) == "integer" then return fmt("%d", v) end
  if v ~= v then return '"nan"' end
  if v == 1/0 then return '"inf"' end
  if v == -1/0 then return '"-inf"' end
  return fmt("%.17g", v)
end
local function flat(v, acc)
  if type(v) == "table" then for i = 1, #v do flat(v[i], acc) end
  else acc[#acc + 1] = jnum(v) end
  return acc
end
local function jtensor(t)
  local sh = {}
  for i, s in ipairs(t.shape) do sh[i] = fmt("%d", s) end
  return '"dtype":' .. jstr(t.dtype) .. ',"shape":[' .. concat(sh, ",") .. '],"v":[' ..
    concat(flat(t:tolist(), {}), ",") .. ']'
end
local function enc(name, v)
  if v == nil then return jstr(name) .. ':null' end
  local ok, s = pcall(function()
    if not ember.is_tensor(v) then return '{"err":' .. jstr("not a tensor: " .. type(v)) .. '}' end
    local g = v.grad
    return '{' .. jtensor(v) .. ',"rg":' .. tostring(v.requires_grad) .. ',"leaf":' ..
      tostring(v.is_leaf) .. ',"grad":' .. (g == nil and 'null' or '{' .. jtensor(g) .. '}') .. '}'
  end)
  return jstr(name) .. ':' .. (ok and s or '{"err":' .. jstr(s) .. '}')
end
local P = {}
'''

LUA_MAIN = r'''
for i = 1, #P do
  local S, rec = { step = 0 }, {}
  local chunk, cerr = load(P[i], "=program" .. i)
  local ok, err
  if chunk then
    ok, err = pcall(chunk(), S, function(n, v) rec[#rec + 1] = enc(n, v) end)
  else
    ok, err = false, "harness: lua does not compile the program: " .. cerr
  end
  pcall(ember.set_grad_enabled, true)
  if ok then
    out:write('{"i":', i, ',"ok":true,"vars":{', concat(rec, ","), '}}\n')
  else
    out:write('{"i":', i, ',"ok":false,"step":', S.step, ',"err":', jstr(err), '}\n')
  end
  out:flush()
end
'''


def lua_program_fn(prog):
    """`P[#P+1] = [==[ return function(S, R) ... end ]==]`: one program as
    source, compiled by the batch loop on its own so that a program Lua
    cannot compile fails alone (as a harness error)."""
    names = defined_vars(prog)
    lines = ['P[#P + 1] = [==[ return function(S, R)']
    for i in range(0, len(names), 50):
        lines.append('  local ' + ', '.join(names[i:i + 50]))
    lines.append('  local _')
    c = [0]
    for st in prog:
        lines += lua_stmt(st, 1, c)
    lines.append('  S.step = -1')
    for n in names:
        lines.append('  R("%s", %s)' % (n, n))
    lines.append('end ]==]')
    return '\n'.join(lines)


def lua_batch(progs):
    return LUA_PRELUDE + '\n'.join(lua_program_fn(p) for p in progs) + '\n' + LUA_MAIN


def lua_standalone(prog):
    """A readable Lua reproducer (no harness prelude)."""
    c = [0]
    lines = []
    for st in prog:
        lines += [l for l in lua_stmt(st, 0, c) if not l.strip().startswith('S.step')]
    names = defined_vars(prog)
    return ('local ' + ', '.join(names) + '\n' if names else '') + '\n'.join(lines)


def py_program_source(prog):
    """Python source of `def __prog(S, R): ...` for one program."""
    names = defined_vars(prog)
    lines = ['def __prog(S, R):']
    if names:
        lines.append('    ' + ' = '.join(names) + ' = None')
    c = [0]
    for st in prog:
        lines += py_stmt(st, 1, c)
    lines.append('    S[0] = -1')
    for n in names:
        lines.append('    R(%r, %s)' % (n, n))
    return '\n'.join(lines)


def py_standalone(prog):
    c = [0]
    lines = ['import torch', 'nan, inf = float("nan"), float("inf")']
    for st in prog:
        lines += [l for l in py_stmt(st, 0, c, touch=False) if not l.strip().startswith('S[0]')]
    return '\n'.join(lines)


def program_json(prog):
    return json.dumps(prog, sort_keys=True, separators=(',', ':'))
