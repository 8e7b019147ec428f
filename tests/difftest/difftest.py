#!/usr/bin/python3
"""difftest.py -- differential testing of ember against PyTorch.

Generates seeded random tensor programs (gen.py), renders each to Lua for
ember and to Python for torch (render.py), runs them (ember in batches in
one process, torch in this process), compares every recorded tensor, and
shrinks each kind of difference to a minimal program that is saved under
regressions/. See README.md.

  tests/difftest/difftest.py                    # CI: regressions, then seeds 0:5000 within 150 s
  tests/difftest/difftest.py --seeds 0:200 -v
  tests/difftest/difftest.py --regressions
  tests/difftest/difftest.py --list
  tests/difftest/difftest.py --show 17          # print seed 17's program in both languages

Exit status 1 when any program differs; the last line is
`difftest: N passed, M failed`.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import importlib.util  # noqa: E402

import ops as OPS  # noqa: E402
import render  # noqa: E402

REG_DIR = os.path.join(HERE, 'regressions')
TOL = {'float32': 1e-4, 'float64': 1e-7, 'float16': 2e-3, 'bfloat16': 3e-2}  # bf16: 8-bit mantissa, errors compound over a few ops
EMBER_TIMEOUT = 120
CI_SEEDS, CI_TIME = range(0, 5000), 150  # the default run (no mode given)
FLOATS = ('float32', 'float64', 'float16', 'bfloat16')
# as gen.VIEW_OPS (this process does not import torch)
VIEW_OPS = {'narrow', 'select', 'slice', 'view', 'reshape', 'transpose', 't', 'permute',
            'expand', 'squeeze', 'unsqueeze', 'detach'}

# ---- the torch side: a worker process (torch can crash; we cannot) ----


def _pyval(v):
    if isinstance(v, float):
        if math.isnan(v):
            return 'nan'
        if math.isinf(v):
            return 'inf' if v > 0 else '-inf'
    return v


def _ptensor(t):
    t = t.detach()
    return {'dtype': str(t.dtype).replace('torch.', ''), 'shape': list(t.shape),
            'v': [_pyval(x) for x in t.reshape(-1).tolist()]}


def _precord(v):
    import torch
    if v is None:
        return None
    if not isinstance(v, torch.Tensor):
        return {'err': 'not a tensor: %s' % type(v).__name__}
    try:
        r = _ptensor(v)
        r['rg'], r['leaf'] = bool(v.requires_grad), bool(v.is_leaf)
        r['grad'] = None if v.grad is None else _ptensor(v.grad)
    except Exception as e:  # noqa: BLE001
        return {'err': 'torch: %s' % str(e).split('\n')[0][:200], 'torch_refused': True}
    return r


def run_torch(prog):
    """(worker only) Runs prog in torch; returns {'ok': True, 'vars': {name:
    record}} or {'ok': False, 'step': k, 'err': message} (k: the statement
    that raised, -1 while recording)."""
    import torch
    import gen
    ns = gen.new_namespace()
    try:
        exec(render.py_program_source(prog), ns)
    except SyntaxError as e:
        return {'ok': False, 'step': 0, 'err': 'harness: python does not compile the program: %s' % e}
    S, rec = [0], {}
    try:
        ns['__prog'](S, lambda n, v: rec.__setitem__(n, _precord(v)))
        return {'ok': True, 'vars': rec}
    except Exception as e:  # noqa: BLE001 -- any torch error is a result
        return {'ok': False, 'step': S[0], 'err': '%s: %s' % (type(e).__name__, str(e).split('\n')[0])}
    finally:
        torch.set_grad_enabled(True)


def worker_main():
    """`difftest.py --worker`: reads requests {"cmd": "gen"|"run"|"valid",
    "items": [...]} as JSON lines from stdin and answers one JSON line per
    item: gen: seed -> program, run: program -> run_torch's result, valid:
    program -> whether the generator would accept it (gen.acceptable)."""
    import torch
    import gen
    torch.set_num_threads(1)
    warnings.simplefilter('ignore')
    sup, _ = gen.surface(os.path.join(ROOT, 'schema'))
    for line in sys.stdin:
        req = json.loads(line)
        for item in req['items']:
            try:
                if req['cmd'] == 'gen':
                    r = gen.generate(item, sup)
                elif req['cmd'] == 'valid':
                    r = gen.acceptable(item, sup)
                else:
                    r = run_torch(item)
            except Exception:  # noqa: BLE001 -- a harness bug: report it, go on
                import traceback
                r = {'torch_crash': 'harness error: ' + traceback.format_exc()[-800:]}
            sys.stdout.write(json.dumps(r) + '\n')
            sys.stdout.flush()
    return 0


class TorchWorker:
    """The torch worker process, restarted when it dies. gen(seeds) and
    run(progs) return one answer per item; an item during which torch
    crashed gets {'torch_crash': why} (the program is then skipped)."""

    def __init__(self):
        self.proc = None

    def _start(self):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), '--worker'],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def _request(self, cmd, items):
        out = []
        while len(out) < len(items):
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            rest = items[len(out):]
            try:
                self.proc.stdin.write(json.dumps({'cmd': cmd, 'items': rest}) + '\n')
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
            for _ in rest:
                line = self.proc.stdout.readline()
                if not line:
                    self.proc.wait()
                    out.append({'torch_crash': 'torch worker died (status %s)' % self.proc.returncode})
                    self.proc = None
                    break
                out.append(json.loads(line))
        return out

    def gen(self, seeds):
        return self._request('gen', list(seeds))

    def run(self, progs):
        return self._request('run', list(progs))

    def valid(self, prog):
        r = self._request('valid', [prog])[0]
        return r is True

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()


class EmberBatch:
    """ember running one batch of programs in a child process (started by
    the constructor so torch can run meanwhile); results() waits and returns
    one result per program, in run_torch's format, or {'crash': text} for a
    program during which ember died or hung (later programs are rerun)."""

    def __init__(self, exe, progs):
        self.exe, self.progs = exe, progs
        fd, self.path = tempfile.mkstemp(prefix='difftest_', suffix='.lua')
        with os.fdopen(fd, 'w') as f:
            f.write(render.lua_batch(progs))
        for attempt in range(5):  # the executable may be being relinked
            try:
                self.proc = subprocess.Popen([exe, self.path], stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE)
                break
            except OSError:
                if attempt == 4:
                    raise
                time.sleep(3)

    def results(self):
        try:
            out, err = self.proc.communicate(timeout=EMBER_TIMEOUT)
            hung = False
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            hung = True
        os.unlink(self.path)
        got = {}
        for line in out.decode('utf-8', 'replace').splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict) and 'i' in r:
                got[r['i'] - 1] = r
        res = [got.get(i) for i in range(len(self.progs))]
        if None in res:
            k = res.index(None)
            why = 'ember hung (killed after %d s)' % EMBER_TIMEOUT if hung else \
                'ember exited with status %s: %s' % (self.proc.returncode,
                                                     err.decode('utf-8', 'replace').strip()[-400:])
            res[k] = {'crash': why}
            if k + 1 < len(res):
                res[k + 1:] = EmberBatch(self.exe, self.progs[k + 1:]).results()
        return res


def run_both(exe, progs):
    """(ember results, torch results) for progs; ember runs meanwhile."""
    b = EmberBatch(exe, progs)
    t = WORKER.run(progs)
    return b.results(), t


WORKER = TorchWorker()


# ---- comparing ----


def _num(x):
    if isinstance(x, str):
        return {'nan': math.nan, 'inf': math.inf, '-inf': -math.inf}.get(x, x)
    return float(x) if isinstance(x, bool) else x


def _values_diff(dtype, a, b, floor=0.0, slack=0.0):
    """Index of the first element where value lists a (ember) and b (torch)
    differ, or None; floats within max(TOL[dtype], floor) relative to the
    tensor's largest finite magnitude (at least 1), or within slack
    absolutely, NaN equal to NaN."""
    if len(a) != len(b):
        return 0
    tol = TOL.get(dtype)
    if tol is not None:
        tol = max(tol, floor)
    if tol is None:
        for i, (x, y) in enumerate(zip(a, b)):
            if _num(x) != _num(y):
                return i
        return None
    fa, fb = [_num(x) for x in a], [_num(y) for y in b]
    scale = max([1.0] + [abs(y) for y in fb if isinstance(y, float) and math.isfinite(y)]
                + [abs(y) for y in fb if isinstance(y, int)])
    for i, (x, y) in enumerate(zip(fa, fb)):
        if isinstance(x, str) or isinstance(y, str):
            return i
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                return i
        elif math.isinf(x) or math.isinf(y):
            if x != y:
                return i
        elif abs(x - y) > max(tol * scale, slack):
            return i
    return None


def _short(vals, n=8):
    s = ', '.join(str(v) for v in vals[:n])
    return '[' + s + (', ...' if len(vals) > n else '') + ']'


def _tensor_diffs(what, e, t, values=True, floor=0.0, slack=0.0):
    if e['dtype'] != t['dtype']:
        return [('dtype', '%s: dtype ember %s, torch %s' % (what, e['dtype'], t['dtype']))]
    if e['shape'] != t['shape']:
        return [('shape', '%s: shape ember %s, torch %s' % (what, e['shape'], t['shape']))]
    if values:
        i = _values_diff(t['dtype'], e['v'], t['v'], floor, slack)
        if i is not None:
            return [('values', '%s: values differ at flat index %d: ember %s, torch %s' % (
                what, i, _short(e['v']), _short(t['v'])))]
    return []


def _defs(prog, out=None):
    """{var: the statement that defines it} over prog (blocks included)."""
    out = {} if out is None else out
    for st in prog:
        if st['s'] == 'nograd':
            _defs(st['body'], out)
        else:
            for v in ([st['out']] if st.get('out') else []) + (st.get('outs') or []):
                out.setdefault(v, st)
    return out


CASTS = {'float', 'double', 'half', 'bfloat16', 'long', 'int', 'byte', 'char', 'bool', 'to'}


def _stmt_label(st):
    """What a statement is, for messages: its op, or its kind."""
    if st is None:
        return '?'
    if st['s'] == 'call':
        return st['op']
    return st['s']


def _family(label):
    """Groups labels whose differences usually share a cause."""
    if label in VIEW_OPS or label == 'index':
        return 'view'
    if label in CASTS:
        return 'cast'
    return label


# README, "Differences accepted": torch's matmul of a 2-d by a batched operand
# saves a folded copy and its `3.25 / x` saves reciprocal(x)'s result, where
# ember's nodes save the operand: a later in-place write into the operand
# makes ember's backward refuse where torch's passes.
SAVED_DIFFERS = __import__('re').compile(
    r'(MatmulBackward|DivBackward)\w*: a tensor needed for gradient computation was modified by an in-place')
# README, "Differences accepted": torch 1.13's retain_grad hook adds an
# undefined gradient when a double backward reaches the retained tensor's node
# without a gradient for it (internal error; ember passes)
TORCH_UNDEFINED = __import__('re').compile(r'Expected a proper Tensor but got None')
COMPARISONS = {'eq', 'ne', 'lt', 'le', 'gt', 'ge'}


def _operand(tvars, arg):
    """A comparison operand as (flat float values, shape), or None."""
    if arg[0] == 'var':
        v = tvars.get(arg[1])
        if not isinstance(v, dict) or 'v' not in v:
            return None
        return [float(_num(x)) for x in v['v']], v['shape']
    if arg[0] in ('num', 'int'):
        return [float(_num(arg[1]))], []
    return None


def _near_tie(st, tvars, ev, tv, tol):
    """Whether every element where a comparison's results differ compares
    two operands within tol (relative, at least 1): a rounding difference
    upstream (a reduction in another order) flipped a near-tie."""
    import numpy as np
    ops_ = [_operand(tvars, a) for a in st.get('args', [])[:2]]
    if len(ops_) != 2 or None in ops_:
        return False
    try:
        a = np.array(ops_[0][0], dtype=float).reshape(ops_[0][1])
        b = np.array(ops_[1][0], dtype=float).reshape(ops_[1][1])
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        return False
    a, b = a.reshape(-1), b.reshape(-1)
    if len(a) != len(ev['v']):
        return False
    for i, (x, y) in enumerate(zip(ev['v'], tv['v'])):
        if x != y and not (math.isfinite(a[i]) and math.isfinite(b[i]) and
                           abs(a[i] - b[i]) <= tol * max(1.0, abs(a[i]), abs(b[i]))):
            return False
    return True


def _cancelled(ev, tv):
    """Whether float values that compared equal (within the tolerance,
    relative to the tensor's largest magnitude) still disagree by over 1%
    relative in some element: cancellation noise (a sum of normalised
    values is ~1e-7 in one system and ~3e-7 in the other), which a later
    division or log amplifies without limit."""
    if tv.get('dtype') not in FLOATS or 'v' not in ev or 'v' not in tv:
        return False
    for x, y in zip(ev['v'], tv['v']):
        x, y = _num(x), _num(y)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isfinite(x) and \
                math.isfinite(y) and x != y and abs(x - y) > 1e-2 * max(abs(x), abs(y)):
            return True
    return False


def compare(prog, e, t):
    """Differences between ember's result e and torch's t for prog, as a
    list of (category, message); [] when they agree."""
    if 'torch_crash' in t:
        return []
    if 'crash' in e:
        return [('crash', e['crash'])]
    for who, r in (('ember', e), ('torch', t)):
        if str(r.get('err', '')).startswith('harness'):
            return [('harness', '%s: %s' % (who, r['err']))]
    if e['ok'] != t['ok']:
        if not e['ok'] and SAVED_DIFFERS.search(str(e['err'])):
            return []  # README, "Differences accepted": what a node saves
        if not e['ok']:
            return [('error:ember', 'ember raised at statement %s, torch did not: %s' % (e['step'], e['err']))]
        if TORCH_UNDEFINED.search(str(t['err'])) and any(st['s'] == 'retain_grad' for st in _flatten(prog)):
            return []  # README, "Differences accepted": retain_grad in a double backward
        return [('error:torch', 'torch raised at statement %s, ember did not: %s' % (t['step'], t['err']))]
    if not e['ok']:
        if e['step'] < t['step']:
            return [('error:ember', 'ember raised at statement %s, torch only at statement %s: %s' % (
                e['step'], t['step'], e['err']))]
        if t['step'] < e['step']:
            return [('error:torch', 'torch raised at statement %s, ember only at statement %s: %s' % (
                t['step'], e['step'], t['err']))]
        return []
    diffs = []
    defs = _defs(prog)
    has_backward = any(st['s'] == 'backward' for st in _flatten(prog))
    # a float64 result may come from float32 arithmetic (x:double(), type
    # promotion): values are compared at the precision of the program's
    # least precise floating dtype
    floor = max([TOL[r['dtype']] for r in t['vars'].values()
                 if isinstance(r, dict) and r.get('dtype') in TOL] + [0.0])
    # comparisons accepted as flipped near-ties, values that are cancellation
    # noise (_cancelled), and what uses them: values not compared
    flipped = set()
    for n in render.defined_vars(prog):
        ev, tv = e['vars'].get(n, 'missing'), t['vars'].get(n, 'missing')
        what = '%s (%s)' % (n, _stmt_label(defs.get(n)))
        if ev is None or tv is None or ev == 'missing' or tv == 'missing':
            if ev != tv:
                diffs.append(('none', '%s: ember %s, torch %s' % (
                    what, 'nil' if ev is None else ev if ev == 'missing' else 'a tensor',
                    'None' if tv is None else tv if tv == 'missing' else 'a tensor')))
            continue
        if tv.get('torch_refused'):
            continue  # torch raises on reading this tensor's autograd state: nothing to compare
        if 'err' in ev or 'err' in tv:
            diffs.append(('record', '%s: recording failed: ember %s, torch %s' % (
                what, ev.get('err'), tv.get('err'))))
            continue
        novalues = defs.get(n, {}).get('novalues')
        # floor_divide turns a 1-ulp difference of its floating input (a
        # reduction in another order) into a difference of 1: its values
        # are compared within 1 (README, "Differences accepted")
        slack = 1.0 if defs.get(n, {}).get('op') == 'floor_divide' else 0.0
        st_n = defs.get(n, {})
        if set(_uses(st_n)) & flipped:  # computed from a flipped near-tie: values may differ
            flipped.add(n)
            novalues = True
        d = _tensor_diffs(what, ev, tv, values=not novalues, floor=floor, slack=slack)
        if d and d[0][0] == 'values' and st_n.get('op') in COMPARISONS and \
                _near_tie(st_n, t['vars'], ev, tv, max(floor, 1e-4)):
            d = []  # README, "Differences accepted": comparisons of near-ties
            flipped.add(n)
        if not d and not novalues and _cancelled(ev, tv):
            flipped.add(n)  # README, "Differences accepted": cancellation noise
        if tv['rg'] and tv['dtype'] not in FLOATS:
            # torch 1.13 lets an integer or bool tensor gain history when a
            # tensor that requires grad is copied or filled into it; ember
            # refusing that is not a difference we report
            diffs += d
            continue
        if ev['rg'] != tv['rg']:
            d.append(('requires_grad', '%s: requires_grad ember %s, torch %s' % (what, ev['rg'], tv['rg'])))
        if ev['leaf'] != tv['leaf']:
            d.append(('is_leaf', '%s: is_leaf ember %s, torch %s' % (what, ev['leaf'], tv['leaf'])))
        eg, tg = ev['grad'], tv['grad']
        if eg is None and tg is not None and ev['leaf'] and not has_backward:
            # torch 1.13's autograd.grad through CopySlices (x[i] = leaf)
            # accumulates into the leaf's .grad; .grad must stay unset
            tg = None
        if (eg is None) != (tg is None):
            d.append(('grad', '%s: .grad ember %s, torch %s' % (
                what, 'nil' if eg is None else _short(eg['v']), 'None' if tg is None else _short(tg['v']))))
        elif eg is not None:
            d += [('grad', m.replace(what, what + '.grad', 1)) for _, m in _tensor_diffs(what, eg, tg, floor=floor)]
        diffs += d
    return diffs


def signature(prog, diffs, e, t):
    """What kind of difference this is, for grouping and for shrinking:
    (category of the first difference, the op of the statement it is
    about: the erroring statement or the first differing variable's)."""
    cat, msg = diffs[0]
    label = '?'
    if cat.startswith('error'):
        step = e.get('step') if cat == 'error:ember' else t.get('step')
        flat = _flatten(prog)
        if isinstance(step, int) and 1 <= step <= len(flat):
            label = _stmt_label(flat[step - 1])
    elif cat != 'crash':
        label = msg.split('(', 1)[1].split(')', 1)[0] if '(' in msg else '?'
    return (cat, _family(label))


# ---- shrinking ----


_flatten = render.flatten


def _uses(st):
    u = [a[1] for a in st.get('args', []) if a[0] == 'var']
    u += [n for a in st.get('args', []) if a[0] == 'vars' for n in a[1]]
    u += [a[1] for a in st.get('kw', {}).values() if a[0] == 'var']
    for k in ('src', 'dst'):
        if k in st:
            u.append(st[k])
    if st.get('value', [None])[0] == 'var':
        u.append(st['value'][1])
    return u + st.get('outputs', []) + st.get('inputs', [])


def prune(prog, drop):
    """prog without the statements whose flat index is in drop, and without
    every statement that then uses an undefined variable; empty blocks go."""
    defined, idx = set(), [0]

    def walk(stmts):
        out = []
        for st in stmts:
            if st['s'] == 'nograd':
                body = walk(st['body'])
                if body:
                    out.append(dict(st, body=body))
                continue
            i = idx[0]
            idx[0] += 1
            if i in drop or any(v not in defined for v in _uses(st)):
                continue
            defined.update(([st['out']] if st.get('out') else []) + (st.get('outs') or []))
            out.append(st)
        return out
    return walk(prog)


def _simpler_leaves(prog):
    """Candidate programs, each with one leaf made simpler: no
    requires_grad, an explicit dtype, or plainer values."""
    flat = _flatten(prog)
    for i, st in enumerate(flat):
        if st['s'] != 'leaf':
            continue
        variants = []
        if st.get('rg'):
            variants.append(dict(st, rg=False))
        if st.get('dtype_given') is False:
            variants.append({k: v for k, v in st.items() if k != 'dtype_given'})
        vals = st['values']
        one = True if st['dtype'] == 'bool' else (1.0 if st['dtype'] in FLOATS else 1)
        if any(v != one for v in vals):
            variants.append(dict(st, values=[one] * len(vals)))
        if st['dtype'] in FLOATS:
            r = [v if isinstance(v, str) else float(round(v)) for v in vals]
            if r != vals:
                variants.append(dict(st, values=r))
        for v in variants:
            yield _replace_flat(prog, i, v)


def _replace_flat(prog, k, new):
    idx = [0]

    def walk(stmts):
        out = []
        for st in stmts:
            if st['s'] == 'nograd':
                out.append(dict(st, body=walk(st['body'])))
                continue
            out.append(new if idx[0] == k else st)
            idx[0] += 1
        return out
    return walk(prog)


def shrink(exe, prog, sig, deadline, log):
    """A smaller program showing the same signature: delta debugging over
    statements (chunks of halving size, each removal cascading to the
    statements that depended on it), then simpler leaves. Stops at deadline."""
    tries = [0]

    def same(cand):
        tries[0] += 1
        (e,), (t,) = run_both(exe, [cand])
        d = compare(cand, e, t)
        return bool(d) and signature(cand, d, e, t) == sig and WORKER.valid(cand)

    n = len(_flatten(prog))
    chunk = max(1, n // 2)
    while time.time() < deadline:
        changed, i = False, 0
        while i < len(_flatten(prog)) and time.time() < deadline:
            cand = prune(prog, set(range(i, i + chunk)))
            if cand != prog and cand and same(cand):
                prog, changed = cand, True
            else:
                i += chunk
        if chunk == 1 and not changed:
            break
        if not changed or chunk > 1:
            chunk = max(1, chunk // 2)
    changed = True
    while changed and time.time() < deadline:
        changed = False
        for cand in _simpler_leaves(prog):
            if time.time() >= deadline:
                break
            if same(cand):
                prog, changed = cand, True
                break
    log('    shrunk in %d runs to %d statements' % (tries[0], len(_flatten(prog))))
    return prog


# ---- regressions ----


def _skeleton(prog, sig):
    def sk(st):
        if st['s'] == 'nograd':
            return ['nograd'] + [sk(b) for b in st['body']]
        if st['s'] == 'leaf':
            return ['leaf', st['dtype'], bool(st.get('rg')), len(st['shape'])]
        return [st['s'], st.get('op'), st.get('style')]
    return json.dumps([list(sig)] + [sk(s) for s in prog])


def load_regressions():
    out = []
    for path in sorted(glob.glob(os.path.join(REG_DIR, '*.json'))):
        with open(path) as f:
            out.append((path, json.load(f)))
    return out


def save_regression(prog, sig, diffs, seed):
    """Writes regressions/NNNN.json unless a saved one has the same program,
    or the same statement skeleton and signature; returns the path or None."""
    os.makedirs(REG_DIR, exist_ok=True)
    key, skel = render.program_json(prog), _skeleton(prog, sig)
    nums = [0]
    for path, r in load_regressions():
        if render.program_json(r['program']) == key or _skeleton(r['program'], r.get('signature', [])) == skel:
            return None
        try:
            nums.append(int(os.path.basename(path).split('.')[0]))
        except ValueError:
            pass
    path = os.path.join(REG_DIR, '%04d.json' % (max(nums) + 1))
    with open(path, 'w') as f:
        json.dump({'seed': seed, 'signature': list(sig), 'diffs': [m for _, m in diffs[:6]],
                   'lua': render.lua_standalone(prog).split('\n'),
                   'python': render.py_standalone(prog).split('\n'),
                   'program': prog}, f, indent=1)
        f.write('\n')
    return path


# ---- reporting ----


def show_failure(prog, diffs, e, t, out):
    out('  --- ember (Lua) ---')
    for line in render.lua_standalone(prog).split('\n'):
        out('    ' + line)
    out('  --- torch (Python) ---')
    for line in render.py_standalone(prog).split('\n')[2:]:
        out('    ' + line)
    out('  --- differences ---')
    for _, m in diffs[:8]:
        out('    ' + m)
    if len(diffs) > 8:
        out('    ... and %d more' % (len(diffs) - 8))
    for who, r in (('ember', e), ('torch', t)):
        if r.get('ok') is False:
            out('    (%s error at statement %s: %s)' % (who, r['step'], r['err']))


def parse_seeds(s):
    a, _, b = s.partition(':')
    return range(int(a), int(b)) if b else range(int(a), int(a) + 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seeds', help='seed range A:B (B exclusive)')
    ap.add_argument('--ops', help='draw only these ops (comma-separated names, overloads by base '
                    'name): a quick check of new ops; sets EMBER_DIFFTEST_OPS for the workers')
    ap.add_argument('--time-limit', type=float, help='stop after S seconds (shrinking included)')
    ap.add_argument('--regressions', action='store_true', help='replay tests/difftest/regressions/')
    ap.add_argument('--ember', default=os.path.join(ROOT, 'build', 'ember'), help='ember executable')
    ap.add_argument('--list', action='store_true', help='list the op surface and what is not covered')
    ap.add_argument('--show', type=int, metavar='SEED', help="print a seed's program and results")
    ap.add_argument('--batch', type=int, default=40, help='programs per ember process')
    ap.add_argument('--no-shrink', action='store_true')
    ap.add_argument('--no-save', action='store_true', help='do not write new regressions')
    ap.add_argument('-v', '--verbose', action='store_true')
    ap.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ops:
        os.environ['EMBER_DIFFTEST_OPS'] = args.ops
    out = lambda s='': print(s, flush=True)  # noqa: E731
    log = out if args.verbose else (lambda s='': None)
    t0 = time.time()
    if args.worker:
        return worker_main()
    if importlib.util.find_spec('torch') is None:
        out('difftest: PyTorch is not importable by %s; install torch (1.13) for this '
            'interpreter (on Debian run the script with /usr/bin/python3)' % sys.executable)
        out('difftest: 0 passed, 1 failed')
        return 2
    sup, unsup = OPS.surface(os.path.join(ROOT, 'schema'))

    if args.list:
        out('generated (%d):' % len(sup))
        for o in sup:
            spec = OPS.MAP.get(o.name, {})
            how = 'special' if spec.get('gen') else 'generic'
            py = ' torch:%s' % ('custom' if spec.get('py') else spec.get('pyname', o.name))
            out('  %-18s %-8s %-16s%s' % (o.name, how, ','.join(o.variants), py))
        out('not generated (%d):' % len(unsup))
        for o, why in unsup:
            out('  %-18s %s' % (o.name, why))
        return 0
    if not os.access(args.ember, os.X_OK):
        out('difftest: ember executable not found at %s (run make, or pass --ember)' % args.ember)
        out('difftest: 0 passed, 1 failed')
        return 2
    if args.show is not None:
        prog = WORKER.gen([args.show])[0]
        if isinstance(prog, dict):
            out('difftest: no program for seed %d: %s' % (args.show, prog['torch_crash']))
            return 2
        (e,), (t,) = run_both(args.ember, [prog])
        d = compare(prog, e, t)
        show_failure(prog, d, e, t, out)
        out(json.dumps(prog))
        return 1 if d else 0
    if unsup and not args.worker:
        log('not generated: ' + ', '.join('%s (%s)' % (o.name, why) for o, why in unsup))

    do_reg = args.regressions or not args.seeds
    seeds = parse_seeds(args.seeds) if args.seeds else (None if args.regressions else CI_SEEDS)
    limit = args.time_limit if args.time_limit is not None else (None if args.seeds or args.regressions else CI_TIME)
    deadline = t0 + limit if limit else float('inf')
    passed = failed = skipped = 0

    if do_reg:
        regs = load_regressions()
        if regs:
            progs = [r['program'] for _, r in regs]
            es, ts = [], []
            for i in range(0, len(progs), args.batch):
                e, t = run_both(args.ember, progs[i:i + args.batch])
                es += e
                ts += t
            for (path, r), prog, e, t in zip(regs, progs, es, ts):
                d = compare(prog, e, t)
                if d:
                    failed += 1
                    out('FAIL regression %s: %s' % (os.path.relpath(path, ROOT), d[0][1]))
                    if args.verbose:
                        show_failure(prog, d, e, t, out)
                else:
                    passed += 1
                    log('ok   regression %s' % os.path.relpath(path, ROOT))
        out('difftest: regressions: %d passed, %d failed' % (passed, failed))

    groups = {}  # signature -> [seeds, prog, diffs, e, t]
    if seeds is not None:
        seeds = list(seeds)
        n_run = 0
        for i in range(0, len(seeds), args.batch):
            if time.time() > deadline - (0.3 * limit if limit and groups else 0):
                out('difftest: time limit reached after %d of %d seeds' % (n_run, len(seeds)))
                break
            chunk = seeds[i:i + args.batch]
            progs = WORKER.gen(chunk)
            for s, p in zip(chunk, progs):
                if isinstance(p, dict):
                    if p['torch_crash'].startswith('harness'):
                        out('difftest: seed %d FAILED in the generator: %s' % (s, p['torch_crash']))
                        failed += 1
                    else:
                        out('difftest: seed %d skipped: %s' % (s, p['torch_crash']))
                        skipped += 1
            chunk = [s for s, p in zip(chunk, progs) if not isinstance(p, dict)]
            progs = [p for p in progs if not isinstance(p, dict)]
            es, ts = run_both(args.ember, progs)
            for s, prog, e, t in zip(chunk, progs, es, ts):
                n_run += 1
                if 'torch_crash' in t:
                    out('difftest: seed %d skipped: torch crashed running it' % s)
                    skipped += 1
                    continue
                d = compare(prog, e, t)
                if not d:
                    passed += 1
                    continue
                failed += 1
                sig = signature(prog, d, e, t)
                if sig in groups:
                    groups[sig][0].append(s)
                else:
                    groups[sig] = [[s], prog, d, e, t]
                    log('seed %d: new difference %s: %s' % (s, sig, d[0][1]))
            log('  %d seeds, %d passed, %d failed, %d kinds, %.1f s' % (
                n_run, passed, failed, len(groups), time.time() - t0))

    for n, (sig, (gseeds, prog, d, e, t)) in enumerate(sorted(groups.items(), key=lambda kv: kv[1][0][0])):
        out()
        out('DIFFERENCE %d: %s in %s -- %d program(s), seeds %s' % (
            n + 1, sig[0], sig[1], len(gseeds), ', '.join(map(str, gseeds[:8])) + (' ...' if len(gseeds) > 8 else '')))
        if not args.no_shrink and time.time() < deadline:
            prog = shrink(args.ember, prog, sig, min(deadline, time.time() + 30), log)
            (e,), (t,) = run_both(args.ember, [prog])
            d = compare(prog, e, t) or d
        show_failure(prog, d, e, t, out)
        if not args.no_save:
            path = save_regression(prog, signature(prog, d, e, t) if d else sig, d, gseeds[0])
            if path:
                out('  saved %s' % os.path.relpath(path, ROOT))

    WORKER.close()
    out('difftest: %.1f s%s' % (time.time() - t0, ', %d programs skipped (torch crashed)' % skipped if skipped else ''))
    out('difftest: %d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
