"""schema.py -- reads schema/ops.yaml into Op records (name, args, returns,
variants) so the harness's op surface grows with the schema."""
import os
import re

import yaml


class Arg:
    """One argument of a `func:` signature: type ('Tensor', 'dim[]?', ...,
    alias annotations like (a!) stripped), name, default (string or None)
    and whether it is keyword-only (after `*`)."""

    def __init__(self, type_, name, default, kwonly):
        self.type, self.name, self.default, self.kwonly = type_, name, default, kwonly

    @property
    def optional(self):
        return self.default is not None or self.type.endswith('?')

    def __repr__(self):
        d = '' if self.default is None else '=' + self.default
        return '%s%s %s%s' % ('*' if self.kwonly else '', self.type, self.name, d)


class Op:
    """One ops.yaml entry. `inplace` is true for `Tensor(a!) self` ops;
    `returns` is a list of return type strings (one for `-> Tensor`)."""

    def __init__(self, name, args, returns, variants, func, doc='', kernels=None, namespace=None):
        self.name, self.args, self.returns, self.variants = name, args, returns, variants
        self.func, self.doc = func, doc
        self.composite = 'Composite' in (kernels or {})  # runs other ops (Note [Composite ops])
        ns = namespace if isinstance(namespace, list) else [namespace] if namespace else []
        # where the function variant lives: '' (ember itself) or e.g. 'nn.functional'
        self.namespace = '' if not ns or 'ember' in ns else ns[0]
        self.inplace = bool(args) and '!' in args[0].raw_type if args else False

    def __repr__(self):
        return self.func


def _split_top(s):
    """Splits s at top-level commas (not inside parentheses/brackets/braces)."""
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur)
            cur = ''
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [x.strip() for x in out]


def parse_func(func):
    """Parses 'name(Type a, Type b=d, *, Type c=d) -> Ret' into
    (name, [Arg], [return types]). Raises ValueError on a malformed line."""
    m = re.match(r'^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\((.*)\)\s*->\s*(.+?)\s*$', func)
    if not m:
        raise ValueError('cannot parse func: %r' % func)
    name, argstr, ret = m.groups()
    args, kwonly = [], False
    for part in _split_top(argstr):
        if part == '*':
            kwonly = True
            continue
        default = None
        if '=' in part:
            part, default = [x.strip() for x in part.split('=', 1)]
        typ, aname = part.rsplit(None, 1)
        raw = typ
        typ = re.sub(r'\([a-z]!?\)', '', typ)  # Tensor(a!) -> Tensor
        a = Arg(typ, aname, default, kwonly)
        a.raw_type = raw
        args.append(a)
    ret = ret.strip()
    if ret.startswith('(') and ret.endswith(')'):
        rets = _split_top(ret[1:-1])
    else:
        rets = [ret]
    rets = [re.sub(r'\([a-z]!?\)', '', r).split()[0] for r in rets]
    return name, args, rets


def ops_files(schema_dir):
    """The ops files in the order codegen reads them (Note [Schema files]):
    ops.yaml, then ops/*.yaml by name."""
    d = os.path.join(schema_dir, 'ops')
    more = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith('.yaml')) \
        if os.path.isdir(d) else []
    return [os.path.join(schema_dir, 'ops.yaml')] + more


def load_ops(path):
    """Every entry of the ops files as an Op, in file order: path is the
    schema directory (every file) or one ops file."""
    entries = []
    for p in ops_files(path) if os.path.isdir(path) else [path]:
        with open(p) as f:
            entries += yaml.safe_load(f) or []
    ops = []
    for e in entries:
        if not isinstance(e, dict) or 'func' not in e:
            continue
        name, args, rets = parse_func(e['func'])
        variants = [v.strip() for v in str(e.get('variants', 'function')).split(',')]
        ops.append(Op(name, args, rets, variants, e['func'], e.get('doc', ''), e.get('kernels'),
                      e.get('namespace')))
    return ops
