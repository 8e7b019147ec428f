"""gen.py -- seeded random programs.

A program is a list of statements (see README.md). The generator keeps a
live torch namespace: each proposed statement is rendered to Python and run
there at once, so the generator always knows the real shapes, dtypes and
requires_grad of every variable and mostly emits programs that are valid for
torch. A statement torch refuses is dropped -- except that a few programs
(allow_error) keep their first refused statement and end there, so that
ember's errors are checked too.
"""
import math
import random
import warnings

import torch

import ops as OPS
import render

DTYPE_WEIGHTS = [('float32', 40), ('float64', 22), ('int64', 12), ('int32', 4), ('bool', 8),
                 ('int8', 3), ('uint8', 3), ('float16', 2), ('bfloat16', 2)]
FLOATS = ('float32', 'float64', 'float16', 'bfloat16')
VIEW_OPS = {'narrow', 'select', 'slice', 'view', 'reshape', 'transpose', 't', 'permute',
            'expand', 'squeeze', 'unsqueeze', 'detach'}


surface = OPS.surface


def _touch(S, k, names):
    """Marks statement k as running and reads every tensor's grad_fn (see
    render.py_stmt)."""
    S[0] = k
    for v in list(names.values()):
        if isinstance(v, torch.Tensor):
            try:
                v.grad_fn
            except RuntimeError:
                pass


def new_namespace():
    return {'torch': torch, 'nan': math.nan, 'inf': math.inf, '_touch': _touch}


class Rejected(Exception):
    pass


def _operand_names(st):
    """The variables a statement reads: its tensor arguments and the value
    it assigns."""
    names = [a[1] for a in st.get('args', []) if a[0] == 'var']
    names += [n for a in st.get('args', []) if a[0] == 'vars' for n in a[1]]
    if st.get('value', [None])[0] == 'var':
        names.append(st['value'][1])
    return names


class Gen:
    """One program's generator state: r (the seeded RNG), ns (the torch
    namespace the accepted statements ran in), stmts (accepted), names
    (variables in definition order), views (variables made by view ops)."""

    def __init__(self, seed, ops):
        self.r = random.Random(seed)
        self.ops = ops
        self.ns = new_namespace()
        self.stmts, self.names, self.views, self.novalues = [], [], set(), set()
        # index results (ops.INDEX_RESULTS) and their views: never written in place;
        # results of composite ops: never autograd.grad inputs (ember's graph
        # holds the composite's parts, torch's fused op saves its output)
        self.frozen, self.composite_outs = set(), set()
        self.shuffled = False  # pixel_shuffle/unshuffle called (see _register)
        self.counter = 0
        self.edge = self.r.choice([0.0, 0.0, 0.1, 0.25])  # share of edge values in leaves

    # ---- state queries ----

    def t(self, name):
        return self.ns[name]

    def tensors(self):
        return [n for n in self.names if n not in self.novalues
                and isinstance(self.ns.get(n), torch.Tensor)]

    @staticmethod
    def dtype_name(t):
        return str(t.dtype).replace('torch.', '')

    def pick(self, pred=None, inplace=False):
        """A variable holding a tensor (satisfying pred), recent ones and,
        for in-place ops, views more likely; None when there is none."""
        def ok(t):
            try:
                return pred is None or pred(t)
            except RuntimeError:  # torch refuses to read some views' autograd state
                return False
        cands = [n for n in self.tensors() if ok(self.ns[n]) and not (inplace and n in self.frozen)]
        if not cands:
            return None
        w = [1.0 + i / len(self.names) + (3.0 if inplace and n in self.views else 0.0)
             for i, n in enumerate(cands)]
        return self.r.choices(cands, w)[0]

    def fresh(self):
        self.counter += 1
        return 't%d' % self.counter

    # ---- argument makers ----

    def dtype(self, floats_only=False):
        ws = [(d, w) for d, w in DTYPE_WEIGHTS if not floats_only or d in FLOATS]
        return self.r.choices([d for d, _ in ws], [w for _, w in ws])[0]

    def number(self):
        r = self.r.random()
        if r < 0.4:
            return ['int', self.r.choice([-2, -1, 0, 1, 2, 3])]
        if r < 0.92:
            return ['num', self.r.choice([0.5, -1.5, 2.0, 0.0, -0.0, 1e-3, 3.25, -0.25, 1.0])]
        if r < 0.97:
            return ['num', self.r.choice(['nan', 'inf', '-inf'])]
        return ['bool', self.r.random() < 0.5]

    def dim_arg(self, d0, ndim):
        """0-based dim d0 of an ndim tensor as a Lua dim (sometimes negative)."""
        return ['dim', d0 - ndim if self.r.random() < 0.3 else d0 + 1]

    def dim(self, name):
        n = self.t(name).dim()
        if n == 0:
            return ['dim', self.r.choice([1, -1])]
        return self.dim_arg(self.r.randrange(n), n)

    def dims(self, name):
        n = self.t(name).dim()
        if n == 0:
            return ['dims', [1], '1']
        k = self.r.randint(1, n)
        ds = self.r.sample(range(n), k)
        lua = [d - n if self.r.random() < 0.3 else d + 1 for d in ds]
        return ['dims', lua, '1' if k == 1 and self.r.random() < 0.6 else 't']

    def values(self, dtype, n):
        out = []
        for _ in range(n):
            if dtype == 'bool':
                out.append(self.r.random() < 0.5)
            elif dtype in FLOATS:
                if self.r.random() < self.edge:
                    out.append(self.r.choice([0.0, -0.0, 'nan', 'inf', '-inf', 1.0, -1.0]))
                elif self.r.random() < 0.7:
                    out.append(self.r.randint(-12, 12) / 4.0)
                else:
                    out.append(round(self.r.uniform(-3, 3), 3))
            elif dtype == 'uint8':
                out.append(self.r.randint(0, 9))
            else:
                out.append(self.r.randint(-5, 5))
        return out

    def leaf(self, shape=None, dtype=None, rg=None):
        """(name, leaf statement) for a new tensor; random shape/dtype/
        requires_grad where not given (requires_grad only for floats)."""
        if shape is None:
            nd = self.r.choices([0, 1, 2, 3], [2, 4, 4, 2])[0]
            shape = [self.r.choices([0, 1, 2, 3, 4], [1, 5, 6, 5, 2])[0] for _ in range(nd)]
        dtype = dtype or self.dtype()
        if rg is None:
            rg = dtype in ('float32', 'float64') and self.r.random() < 0.5
        n = 1
        for s in shape:
            n *= s
        st = dict(s='leaf', out=self.fresh(), shape=list(shape), dtype=dtype,
                  values=self.values(dtype, n), rg=bool(rg and dtype in FLOATS))
        if dtype in ('float32', 'int64', 'bool') and n > 0 and self.r.random() < 0.3:
            if dtype != 'float32' or all(not isinstance(v, int) for v in st['values']):
                st['dtype_given'] = False
        return st['out'], st

    def partner(self, self_name, inplace=False, allow_number=True):
        """(arg, pre statements): the second operand of a binary op: a
        number, an existing tensor that broadcasts with self (to self's
        shape when in place), or a new leaf of such a shape."""
        t = self.t(self_name)
        r = self.r.random()
        if r < 0.3 and allow_number:
            return self.number(), []
        if r < 0.65:
            cands = []
            for n in self.tensors():
                if n.startswith('__'):
                    continue
                try:
                    b = torch.broadcast_shapes(t.shape, self.ns[n].shape)
                except RuntimeError:
                    continue
                if not inplace or list(b) == list(t.shape):
                    cands.append(n)
            if cands:
                return ['var', self.r.choice(cands)], []
        shape = list(t.shape)
        shape = shape[self.r.randint(0, len(shape)):] if self.r.random() < 0.3 else shape
        shape = [1 if self.r.random() < 0.25 else s for s in shape]
        if not inplace and self.r.random() < 0.1:
            shape.insert(0, self.r.choice([1, 2]))
        dt = self.dtype_name(t) if self.r.random() < 0.7 else self.dtype()
        name, st = self.leaf(shape=shape, dtype=dt)
        return ['var', name], [st]

    # ---- proposals: each returns a list of statements ----

    def propose_leaf(self):
        return [self.leaf()[1]]

    def propose_op(self, inplace_bias=False):
        ops = self.ops
        w = [OPS.MAP.get(o.name, {}).get('weight', 1.0) * (4.0 if inplace_bias and o.inplace else 1.0)
             for o in ops]
        op = self.r.choices(ops, w)[0]
        spec = OPS.MAP.get(op.name, {})
        res = (spec.get('gen') or OPS.gen_generic)(self, op)
        if res is None:
            raise Rejected()
        args, kw = res['args'], res.get('kw', {})
        style = res.get('style')
        if style is None:
            vs = [v for v in op.variants if v in ('method', 'function')]
            style = self.r.choice(vs)
            if (op.name in OPS.OPERATOR_OPS and not kw and len(args) == 2
                    and self.r.random() < 0.5):
                style = 'operator'
                if args[0][0] == 'var' and args[1][0] != 'var' and self.r.random() < 0.4 \
                        and op.name != 'remainder':
                    args = [args[1], args[0]]  # 2 / x, 2 ^ x
            elif op.name in OPS.UNARY_OPERATOR_OPS and self.r.random() < 0.5:
                style = 'operator'
        if style == 'method' and args[0][0] != 'var':
            style = 'function'
        st = dict(s='call', op=op.name, style=style, args=args)
        recv = [i for i, a in enumerate(op.args) if a.name == 'self']
        if style == 'method' and recv and recv[0] > 0:
            st['recv'] = recv[0]  # torch's method receiver is the argument named self
        if kw:
            st['kw'] = kw
        if res.get('novalues'):
            st['novalues'] = True
        if res.get('item'):
            st['item'] = res['item']  # a Tensor[] result: keep its 1-based element item (render.py)
        if not (op.inplace and self.r.random() < 0.5):
            st['outs'] = [self.fresh() for _ in op.returns]
        return res.get('pre', []) + [st]

    def _keys(self, t):
        keys = []
        for d in range(self.r.randint(1, t.dim())):
            size = t.shape[d]
            r = self.r.random()
            if size == 0 or r < 0.2:
                keys.append(['all'])
            elif r < 0.5:
                keys.append(['sel', OPS._pos(self, size)])
            else:
                a = self.r.randint(1, size)
                b = self.r.randint(a, size)
                k = ['range', a - size - 1 if self.r.random() < 0.2 else a]
                if self.r.random() < 0.8:
                    k.append(b - size - 1 if self.r.random() < 0.2 else b)
                    if self.r.random() < 0.2:
                        k.append(self.r.randint(1, 2))
                keys.append(k)
        return keys

    def propose_index(self):
        src = self.pick(pred=lambda t: t.dim() > 0)
        if src is None:
            raise Rejected()
        t = self.t(src)
        st = dict(s='index', out=self.fresh(), src=src)
        if self.r.random() < 0.3 and t.shape[0] > 0:
            st['num'] = OPS._pos(self, t.shape[0])
        else:
            st['keys'] = self._keys(t)
        return [st]

    def propose_setindex(self):
        dst = self.pick(pred=lambda t: t.dim() > 0, inplace=True)
        if dst is None:
            raise Rejected()
        t = self.t(dst)
        st = dict(s='setindex', dst=dst)
        if self.r.random() < 0.3 and t.shape[0] > 0:
            st['num'] = OPS._pos(self, t.shape[0])
            key = render.py_pos(st['num'])
        else:
            st['keys'] = self._keys(t)
            key = render.py_keys(st['keys'])
        try:
            target = eval('%s[%s]' % (dst, key), self.ns)
        except Exception:
            raise Rejected()
        pre = []
        if self.r.random() < 0.5:
            st['value'] = self.number()
        else:
            self.ns['__tgt'] = target
            self.names.append('__tgt')
            try:
                st['value'], pre = self.partner('__tgt', inplace=True)
            finally:
                self.names.remove('__tgt')
                del self.ns['__tgt']
        return pre + [st]

    def propose_nograd(self):
        body = []
        for _ in range(self.r.randint(1, 3)):
            k = self.r.random()
            body += self.propose_setindex() if k < 0.25 else self.propose_op(inplace_bias=True)
        return [dict(s='nograd', body=body, form='fn' if self.r.random() < 0.3 else 'close')]

    def _scalar_of(self, name):
        """(scalar var, pre statements): name itself when 0-dim, else a sum or mean of it."""
        t = self.t(name)
        if t.dim() == 0 and self.r.random() < 0.7:
            return name, []
        op = 'mean' if t.is_floating_point() and self.r.random() < 0.3 else 'sum'
        out = self.fresh()
        return out, [dict(s='call', op=op, style=self.r.choice(['method', 'function']),
                          args=[['var', name]], outs=[out])]

    def _requiring_grad(self):
        out = []
        for n in self.tensors():
            try:
                if self.ns[n].requires_grad:
                    out.append(n)
            except RuntimeError:
                pass
        return out

    def propose_grad(self):
        rg = self._requiring_grad()
        if not rg:
            raise Rejected()
        y, pre = self._scalar_of(self.r.choice(rg[-4:]))
        rg_in = [n for n in rg if n not in self.composite_outs]
        if not rg_in:
            raise Rejected()
        inputs = self.r.sample(rg_in, min(len(rg_in), self.r.randint(1, 3)))
        cg = self.r.random() < 0.5
        st = dict(s='grad', outputs=[y], inputs=inputs, create_graph=cg,
                  outs=[self.fresh() for _ in inputs])
        more = []
        if cg and self.r.random() < 0.6:  # a second derivative
            gname = st['outs'][0]
            sq = self.fresh()
            more.append(dict(s='call', op='mul', style='operator', args=[['var', gname], ['var', gname]],
                             outs=[sq]))
            s2 = self.fresh()
            more.append(dict(s='call', op='sum', style='method', args=[['var', sq]], outs=[s2]))
            if self.r.random() < 0.5:
                more.append(dict(s='grad', outputs=[s2], inputs=inputs, create_graph=False,
                                 outs=[self.fresh() for _ in inputs]))
            else:
                more.append(dict(s='backward', src=s2, retain=True))
        return pre + [st] + more

    def propose_backward(self, retain):
        rg = self._requiring_grad()
        if not rg:
            raise Rejected()
        y, pre = self._scalar_of(self.r.choice(rg[-3:]))
        return pre + [dict(s='backward', src=y, retain=retain)]

    def propose_retain_grad(self):
        # not on views: torch 1.13 segfaults on retain_grad of a view whose
        # base was modified in place under no_grad
        n = self.pick(pred=lambda t: t.requires_grad and not t.is_leaf and t._base is None)
        if n is None:
            raise Rejected()
        return [dict(s='retain_grad', src=n)]

    # ---- running proposals ----

    def _exec(self, stmts):
        c = [0]
        lines = []
        for st in stmts:
            lines += render.py_stmt(st, 0, c)
        S = [0]
        self.ns['S'] = S
        try:
            exec('\n'.join(lines), self.ns)
        finally:
            torch.set_grad_enabled(True)

    def _register(self, stmts):
        for st in stmts:
            if st['s'] == 'nograd':
                self._register(st['body'])
                continue
            outs = ([st['out']] if st.get('out') else []) + (st.get('outs') or [])
            if st['s'] == 'call':
                for k in OPS.INDEX_RESULTS.get(st['op'], []):
                    if k < len(outs):
                        self.frozen.add(outs[k])
                src = st.get('args', [[None, None]])[0]
                if (st['op'] in VIEW_OPS or st['op'] in OPS.ALIASING) and src[0] == 'var' and src[1] in self.frozen:
                    self.frozen.update(outs)
                if st['op'] in OPS.COMPOSITE:
                    self.composite_outs.update(outs)
                if (OPS.MAP.get(st['op']) or OPS.MAP.get(st['op'].split('.')[0]) or {}).get('freeze_args'):
                    # ops.py MAP 'freeze_args': never written in place afterwards
                    self.frozen.update(_operand_names(st))
            elif st['s'] == 'index' and st.get('src') in self.frozen:
                self.frozen.update(outs)
            elif st['s'] == 'grad' and self.shuffled:
                # README, "Differences accepted": a gradient through the
                # composite pixel_shuffle can be a view of an expanded one
                self.frozen.update(outs)
            if st['s'] == 'call' and st['op'] in ('pixel_shuffle', 'pixel_unshuffle'):
                self.shuffled = True
            for v in outs:
                self.names.append(v)
                if st.get('novalues'):
                    self.novalues.add(v)
                if st['s'] == 'index' or (st['s'] == 'call' and st['op'] in VIEW_OPS):
                    self.views.add(v)

    def _rebuild(self):
        self.ns = new_namespace()
        self._exec(self.stmts)

    def _undefined_cast(self, stmts, before):
        """True when a statement converted a float that is NaN, infinite or
        out of range to an integer dtype (undefined in C; torch's result is
        whatever the CPU gives). before: the float operands' values, taken
        before the statements ran."""
        for st, (vals, later) in zip(flatten(stmts), before):
            # operands defined by an earlier statement of the same proposal
            # (a new leaf) did not exist before: leaves do not change, so
            # their values now are their values then
            vals = vals + [t.detach() for t in (self.ns.get(n) for n in later)
                           if isinstance(t, torch.Tensor) and t.is_floating_point()]
            # and as they are now: an earlier statement of the proposal may
            # have changed them in place (x:mul_(nan), then y[i] = x)
            vals = vals + [t.detach() for t in (self.ns.get(n) for n in _operand_names(st))
                           if isinstance(t, torch.Tensor) and t.is_floating_point()]
            # and float numbers given as arguments (x:copy_(nan))
            nums = [a[1] for a in st.get('args', []) if a[0] == 'num']
            nums += [st['value'][1]] if st.get('value', [None])[0] == 'num' else []
            vals = vals + [torch.tensor([float(v) for v in nums], dtype=torch.float64)] if nums else vals
            if not vals:
                continue
            if st['s'] == 'setindex':
                res = self.ns.get(st['dst'])
            elif st.get('outs'):
                res = self.ns.get(st['outs'][0])
            else:
                res = self.ns.get(st['args'][0][1]) if st['args'][0][0] == 'var' else None
            if not isinstance(res, torch.Tensor) or res.is_floating_point() or res.dtype == torch.bool:
                continue
            info = torch.iinfo(res.dtype)
            for v in vals:
                if not torch.isfinite(v).all() or (v.numel() and (v.min() < info.min or v.max() > info.max)):
                    return True
        return False

    def _grads(self):
        out = {}
        for n in self.names:
            v = self.ns.get(n)
            if isinstance(v, torch.Tensor):
                try:
                    out[n] = None if v.grad is None else v.grad.tolist()
                except RuntimeError:
                    pass
        return out

    def _not_implemented_grad(self, stmts):
        """True when a create_graph gradient went through one of torch's
        backward kernels that has no derivative: its grad_fn is a
        NotImplemented node, so it requires grad in torch, while ember's
        composite gradient of a piecewise-constant function (multi_margin_loss
        with p = 1) has no history (ops_metric.py). Not a reference."""
        return any(type(getattr(self.ns.get(v), 'grad_fn', None)).__name__ == 'NotImplemented'
                   for st in stmts if st['s'] == 'grad' for v in st.get('outs', []))

    def _integer_requires_grad(self):
        """True when torch let an integer or bool tensor require grad (1.13
        does after copy_/fill_ from a tensor that requires grad): what
        follows is torch's quirk, not a reference."""
        for n in self.names:
            v = self.ns.get(n)
            try:
                if isinstance(v, torch.Tensor) and v.requires_grad and not v.is_floating_point():
                    return True
            except RuntimeError:
                pass
        return False

    def _int_target(self, stmts):
        """True when a statement writes into an integer or bool tensor."""
        for st in flatten(stmts):
            name = st.get('dst') if st['s'] == 'setindex' else (
                st['args'][0][1] if st['s'] == 'call' and st.get('args') and st['args'][0][0] == 'var' else None)
            v = self.ns.get(name) if name else None
            if isinstance(v, torch.Tensor) and not v.is_floating_point():
                return True
        return False

    def _quirky_stmt(self, stmts):
        """True for statements whose torch result is not a reference:
        pow with a bool number as exponent (torch 1.13's pow_backward does
        not see False as 0 and multiplies 0 by inf), and an in-place op
        whose input shares memory with what it writes without being it
        (torch then reads values it has already written; ember reads the
        input as it was)."""
        def shares(x, out):
            return isinstance(out, torch.Tensor) and isinstance(x, torch.Tensor) and x is not out and \
                x.numel() and out.numel() and x.storage().data_ptr() == out.storage().data_ptr() and \
                (x.storage_offset(), x.stride(), x.shape) != (out.storage_offset(), out.stride(), out.shape)

        for st in flatten(stmts):
            if st['s'] == 'setindex' and st.get('value', [None])[0] == 'var':
                # x[i] = y with y sharing x's memory (see the in-place case)
                if shares(self.ns.get(st['value'][1]), self.ns.get(st['dst'])):
                    return True
            if st['s'] != 'call':
                continue
            args = st.get('args', [])
            if st['op'] in ('contiguous', 'as_strided', 'view', 'reshape') and args and args[0][0] == 'var':
                # torch's elementwise results keep a permuted input's layout,
                # ember's are contiguous: contiguous() copies one and not the
                # other, as_strided reads a different order, view may fail,
                # reshape may copy in one and view in the other
                x = self.ns.get(args[0][1])
                if isinstance(x, torch.Tensor) and x._base is None and not x.is_contiguous():
                    return True
            if st['op'] == 'pow' and any(a[0] == 'bool' for a in args[1:]):
                return True
            if st['op'].endswith('_') and args and args[0][0] == 'var':
                out = self.ns.get(args[0][1])
                for a in args[1:]:
                    if a[0] == 'var' and shares(self.ns.get(a[1]), out):
                        return True
        return False

    def _int16(self):
        """True when torch made an int16 tensor (uint8 with int8 promotes to
        int16): ember has no int16 and promotes them to int32, by design."""
        return any(isinstance(v, torch.Tensor) and v.dtype == torch.int16 for v in self.ns.values())

    def _float_operands(self, stmts):
        out = []
        for st in flatten(stmts):
            names = _operand_names(st)
            ts = [self.ns.get(n) for n in names]
            out.append(([t.detach().clone() for t in ts if isinstance(t, torch.Tensor) and t.is_floating_point()],
                        [n for n in names if n not in self.ns]))
        return out

    def try_add(self, stmts, allow_error):
        """Runs stmts in torch; accepts them when they run, or when they
        raise and allow_error is set (returns 'error'); else restores the
        namespace and returns False. Refused whatever happens: undefined
        float-to-integer conversions, and errors that only say torch lacks
        a kernel for a dtype (float16 on CPU)."""
        counter = self.counter
        try:
            before = self._float_operands(stmts)
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                quirky = self._quirky_stmt(stmts)
        except Exception:  # noqa: BLE001
            before, quirky = [], False
        try:
            # torch 1.13's autograd.grad through CopySlices (x[i] = leaf)
            # accumulates into the leaf's .grad, which it must leave alone:
            # each top-level grad statement runs on its own and is watched
            grad_bug = False
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                for st in stmts:
                    grads = self._grads() if st['s'] == 'grad' else None
                    self._exec([st])
                    grad_bug = grad_bug or (grads is not None and self._grads() != grads)
            bad = quirky or grad_bug or self._undefined_cast(stmts, before) or \
                self._integer_requires_grad() or self._int16() or self._not_implemented_grad(stmts)
        except Exception as e:  # noqa: BLE001
            # torch 1.13's floor_divide has no derivative; ember's is 0 (as
            # for PyTorch's div(rounding_mode="floor")): not a reference
            # (nor is torch's missing double backward of pdist/cdist's
            # kernels, which ember has: ops_metric.py)
            # torch 1.13's fill_ (x[i] = t) runs the view checks on integer
            # targets, its copy_ does not; ember never treats integer views
            # as differentiable
            int_view_quirk = 'view was created in no_grad mode' in str(e) and self._int_target(stmts)
            if allow_error and 'not implemented for' not in str(e) and not int_view_quirk and not quirky and \
                    'derivative for aten::floor_divide' not in str(e) and 'INTERNAL ASSERT' not in str(e) and \
                    "derivative for '_cdist_backward'" not in str(e) and \
                    "derivative for '_pdist_backward'" not in str(e) and \
                    'ZeroTensors are immutable' not in str(e) and 'must be Tensor, not' not in str(e):
                self.stmts += stmts
                self._register(stmts)
                return 'error'
            bad = True
        if bad:
            self.counter = counter
            self._rebuild()
            return False
        self.stmts += stmts
        self._register(stmts)
        return True


flatten = render.flatten


def flat_len(stmts):
    return sum(flat_len(s['body']) if s['s'] == 'nograd' else 1 for s in stmts)


def acceptable(prog, ops):
    """True when the generator would accept prog statement by statement:
    the shrinker must not reach a program whose torch result is not a
    reference (an undefined float-to-integer cast, say)."""
    g = Gen(0, ops)
    for st in prog:
        r = g.try_add([st], True)
        if r is False:
            return False
        if r == 'error':
            return True  # the program ends here
    return True


def generate(seed, ops):
    """The program for seed (deterministic): a list of statements."""
    g = Gen(seed, ops)
    target = g.r.randint(3, 24)
    allow_error = g.r.random() < 0.08
    for _ in range(target * 6):
        if flat_len(g.stmts) >= target:
            break
        counter = g.counter
        k = g.r.random()
        try:
            if len(g.tensors()) < 2 or k < 0.12:
                prop = g.propose_leaf()
            elif k < 0.62:
                prop = g.propose_op()
            elif k < 0.72:
                prop = g.propose_index()
            elif k < 0.78:
                prop = g.propose_setindex()
            elif k < 0.85:
                prop = g.propose_nograd()
            elif k < 0.93:
                prop = g.propose_grad()
            elif k < 0.96:
                prop = g.propose_retain_grad()
            else:
                prop = g.propose_backward(retain=True)
        except Rejected:
            g.counter = counter
            continue
        # a new leaf never fails: only other statements count as the error
        if g.try_add(prop, allow_error and prop[-1]['s'] != 'leaf') == 'error':
            return g.stmts
    if g.r.random() < 0.6:
        for _ in range(3):
            try:
                if g.try_add(g.propose_backward(retain=False), False):
                    break
            except Rejected:
                break
    return g.stmts
