"""ops_lapack.py -- difftest entries of the LAPACK family (ember.linalg).

The generic generator would hand these ops mostly vectors and integer
tensors (refused by both systems, which is checked too); the generators
below pick or make float32/float64 matrices of the shapes each op takes
(square where it must be, batch dims sometimes, sizes 0..4), symmetric
positive-definite leaves for cholesky, and the ops' options. Ops in
ember.linalg are torch.linalg.NAME in Python (ops.NAMESPACE).

Accepted differences (the lead copies them into README.md):
  - Non-finite inputs are not generated for these ops: what LAPACK makes of
    NaN/inf (NaN or inf in a determinant, an error or NaNs from a solve)
    depends on its blocking and threads, and differed between ember's and
    torch's calls of the same OpenBLAS routine.
  - Generated matrices are well-conditioned where values would amplify
    rounding (inv, solve, slogdet, qr, eigh with well-separated eigenvalues,
    svd with well-separated singular values): ember and torch run the same
    LAPACK routines (float32 through the s* ones) but not always the same
    BLAS calls around them, and eigenvector/singular-vector signs of nearly
    degenerate problems may flip on last-bit differences.
  - lstsq with the gelsy driver (explicit, or the CPU default): torch 1.13
    pivots from an uninitialised jpvt array and, in about half of the calls
    in a busy process, reports rank 1 and a wrong solution for a
    well-conditioned 2 x 4 matrix. The torch side of a gelsy call is
    computed by gelsd (same rank and minimum-norm solution for these
    well-conditioned matrices) with gelsy's empty residuals and singular values.
  - matrix_exp: ember's scaling and squaring with Pade approximants
    (Higham 2005) and torch 1.13's Taylor-polynomial method agree to
    rounding, not to the bit, so programs that feed its result to eigh/qr
    may rarely see an eigenvector / Householder sign flip.
  - the double-backward gradient with respect to qr's Q of a wide matrix
    (create_graph through qr, then a gradient w.r.t. Q itself) follows
    another (equivalent on the manifold) form of the formula than torch's.
  - det of an empty (n = 0) matrix: torch gives its input no gradient
    (None), ember an empty one; not generated with requires_grad.
  - eigh/svd: an all-zero gradient of the eigenvectors / U, Vh that has no
    history is treated as absent (torch's undefined gradient), so using only
    the eigenvalues / singular values of a matrix with repeated ones gives
    torch's finite gradient where torch, handed explicit zeros, would give
    NaN (Note [Absent gradients of several results]).
"""
import torch

from ops import *  # noqa: F401,F403

FLOATS_ = ['float32', 'float64']


def _is_mat(t, square):
    return (t.dim() >= 2 and t.dtype in (torch.float32, torch.float64)
            and (not square or t.shape[-1] == t.shape[-2]))


def _well_conditioned(t, cond=1e3):
    """Finite, and every matrix of t far from singular (condition number
    below cond)."""
    if t.numel() == 0:
        return True
    x = t.detach().double()
    if not bool(x.isfinite().all()):
        return False
    s = torch.linalg.svdvals(x)
    if s.numel() == 0:
        return True
    return bool((s[..., -1] * cond > s[..., 0]).all()) and bool((s[..., 0] > 1e-6).all())


def _batch(g):
    return g.r.choice([[], [], [], [2], [1], [3, 1]])


def _leaf(g, shape, values=None):
    name, st = g.leaf(shape=shape, dtype=g.r.choice(FLOATS_))
    if values is not None:
        st['values'] = values
    return name, st


def _finite(t):
    return bool(t.detach().isfinite().all())


def _finite_leaf(g, shape):
    """A new float leaf of shape with finite values."""
    name, st = _leaf(g, shape)
    st['values'] = [v if v not in ('nan', 'inf', '-inf') else 1.0 for v in st['values']]
    return name, st


def _matrix(g, square, well=False, sizes=(0, 1, 2, 3, 3, 4), cond=1e3):
    """(name, pre): an existing finite float matrix (square if asked) or a
    new leaf; well: only a well-conditioned one (new leaves are retried).
    Non-finite inputs are left out: what LAPACK makes of NaN/inf depends on
    its blocking and threads (README of the family's report)."""
    if g.r.random() < 0.5:
        s = g.pick(pred=lambda t: _is_mat(t, square) and _finite(t) and (not well or _well_conditioned(t, cond)))
        if s is not None:
            return s, []
    for _ in range(8):
        n = g.r.choice(sizes)
        m = n if square else g.r.choice([1, 2, 3, 4])
        name, st = _leaf(g, _batch(g) + [m, n])
        x = torch.tensor([float(v) for v in st['values']], dtype=torch.float64).reshape(st['shape'])
        if _finite(x) and (not well or _well_conditioned(x, cond)):
            return name, [st]
    return None, []


def _spd_values(g, batch, n):
    """Values of symmetric, diagonally dominant (so positive-definite) n x n
    matrices over the batch."""
    out = []
    count = 1
    for b in batch:
        count *= b
    for _ in range(count):
        a = [[0.0] * n for _ in range(n)]
        for i in range(n):
            for j in range(i):
                a[i][j] = a[j][i] = g.r.randint(-8, 8) / 4.0
        for i in range(n):
            a[i][i] = sum(abs(v) for v in a[i]) + g.r.randint(1, 8) / 4.0
        out += [v for row in a for v in row]
    return out


def gen_square(g, op):
    s, pre = _matrix(g, True, well=op.name in ('inv', 'inverse', 'slogdet'))
    if s is None:
        return None
    x = g.t(s) if not pre else torch.tensor([float(v) for v in pre[0]['values']]).reshape(pre[0]['shape'])
    rg = g.t(s).requires_grad if not pre else pre[0]['rg']
    if op.name == 'det' and rg and (x.numel() == 0 or not _well_conditioned(x)):
        # torch's det gives an empty matrix no gradient (None, ember an empty
        # one) and a 1 x 1 zero matrix -0.0 (ember its derivative, 1)
        return None
    return dict(args=[['var', s]], pre=pre, style='method' if op.name in ('det', 'slogdet', 'matrix_exp', 'inverse')
                and g.r.random() < 0.3 else 'function')


def gen_matrix_exp(g, op):
    r = gen_square(g, op)
    if r is None:
        return None
    x = g.t(r['args'][0][1]) if not r['pre'] else None
    if x is not None and (not bool(x.detach().isfinite().all()) or float(x.detach().abs().max() if x.numel() else 0) > 4):
        return None  # exp of large entries: float32 rounding grows with the norm
    if r['pre'] and any(v in ('nan', 'inf', '-inf') for v in r['pre'][0]['values']):
        return None
    return r


def gen_cholesky(g, op):
    if g.r.random() < 0.15:  # also: a matrix that is usually not positive-definite
        s, pre = _matrix(g, True)
    else:
        batch, n = _batch(g), g.r.choice([0, 1, 2, 3, 4])
        s, st = _leaf(g, batch + [n, n], _spd_values(g, batch, n))
        pre = [st]
    if s is None:
        return None
    kw = {'upper': ['bool', g.r.random() < 0.5]} if g.r.random() < 0.5 else {}
    return dict(args=[['var', s]], kw=kw, pre=pre, style='function')


def _distinct_eigs(t, uplo):
    """The eigenvalues of the symmetric matrices eigh reads (t's uplo
    triangle) well apart: eigenvectors (and every gradient) depend on
    1 / their gaps, and float32 rounding with them."""
    if t.numel() == 0:
        return True
    x = t.detach().double()
    if not bool(x.isfinite().all()):
        return False
    x = x.tril() + x.tril(-1).mT if uplo == 'L' else x.triu() + x.triu(1).mT
    e = torch.linalg.eigvalsh(x)
    if e.shape[-1] < 2:
        return True
    scale = e.abs().amax(-1, keepdim=True).clamp(min=1e-300)
    return bool(((e[..., 1:] - e[..., :-1]) / scale > 5e-2).all())


def gen_eigh(g, op):
    s, pre = _matrix(g, True)
    if s is None:
        return None
    uplo = g.r.choice(['L', 'U'])
    x = g.t(s) if not pre else torch.tensor([float(v) for v in pre[0]['values']]).reshape(pre[0]['shape'])
    if not _distinct_eigs(x, uplo):
        return None
    args = [['var', s]]
    if uplo == 'U' or g.r.random() < 0.5:
        args.append(['str', uplo])
    return dict(args=args, pre=pre, style='function')


def gen_solve(g, op):
    a, pre = _matrix(g, True, well=True)
    if a is None:
        return None
    A = g.t(a) if not pre else torch.zeros(pre[0]['shape'])
    n, batch = A.shape[-1], list(A.shape[:-2])
    left = g.r.random() < 0.8
    k = g.r.choice([1, 2, 3])
    shape = g.r.choice([[n], batch + [n], batch + ([n, k] if left else [k, n]), [n, k] if left else [k, n],
                        [2] + batch + [n, k] if left else [k, n]])
    if not left and shape in ([n], batch + [n]):
        shape = [k, n]  # torch refuses a vector B for X A = B (tested in test_lapack.lua)
    b, st = _finite_leaf(g, shape)
    kw = {} if left and g.r.random() < 0.5 else {'left': ['bool', left]}
    return dict(args=[['var', a], ['var', b]], kw=kw, pre=pre + [st], style='function')


def gen_qr(g, op):
    s, pre = _matrix(g, False, well=True)
    if s is None:
        return None
    x = g.t(s) if not pre else torch.tensor([float(v) for v in pre[0]['values']]).reshape(pre[0]['shape'])
    rg = g.t(s).requires_grad if not pre else pre[0]['rg']
    m, n = x.shape[-2], x.shape[-1]
    if rg and (x.numel() == 0 or (m < n and not _well_conditioned(x[..., :m]))):
        # the gradient of a wide A divides by its leading square block's R
        # (ember refuses a singular one where torch returns inf/NaN), and
        # torch 1.13 fails on empty ones ("Expected a proper Tensor")
        return None
    if x.numel():
        # a column already zero below the diagonal: Householder's sign then
        # hangs on whether the rounding of the input left it exactly zero
        # (a last-bit difference flips Q's column and R's row)
        k = min(m, n)
        for j in range(k):
            below = x[..., j + 1:, j].abs().amax(-1) if j + 1 < m else None
            if below is not None and bool((below <= 1e-6 * x[..., :, j].abs().amax(-1)).any()):
                return None
    args = [['var', s]]
    if g.r.random() < 0.6:
        args.append(['str', g.r.choice(['reduced', 'complete', 'r'])])
    return dict(args=args, pre=pre, style='function')


def _distinct_svals(t):
    """Singular values well apart (the svd gradient divides by their gaps)."""
    if t.numel() == 0:
        return True
    s = torch.linalg.svdvals(t.detach().double())
    if s.shape[-1] < 2:
        return True
    gaps = (s[..., :-1] - s[..., 1:]) / s[..., :1].clamp(min=1e-300)
    return bool((gaps > 5e-2).all())


def gen_svd(g, op):
    s, pre = _matrix(g, False, well=True)
    if s is None:
        return None
    x = g.t(s) if not pre else torch.tensor([float(v) for v in pre[0]['values']]).reshape(pre[0]['shape'])
    if op.name == 'svd' and not _distinct_svals(x):
        return None
    args = [['var', s]]
    if op.name == 'svd' and g.r.random() < 0.6:
        args.append(['bool', g.r.random() < 0.5])
    return dict(args=args, pre=pre, style='function')


def gen_pinv(g, op):
    herm = g.r.random() < 0.3
    s, pre = _matrix(g, herm, well=True, cond=30)
    if s is None:
        return None
    if herm:  # hermitian reads the lower triangle: that matrix must be well-conditioned
        x = g.t(s) if not pre else torch.tensor([float(v) for v in pre[0]['values']]).reshape(pre[0]['shape'])
        x = x.detach().double()
        if x.numel() and not _well_conditioned(x.tril() + x.tril(-1).mT, 30):
            return None
    kw = {}
    if herm or g.r.random() < 0.3:
        kw['hermitian'] = ['bool', herm]
    if g.r.random() < 0.3:
        kw['atol'] = ['num', g.r.choice([0.0, 0.5, 1e-3])]
    if g.r.random() < 0.3:
        kw['rtol'] = ['num', g.r.choice([0.0, 0.1, 1e-6])]
    return dict(args=[['var', s]], kw=kw, pre=pre, style='function')


def gen_matrix_rank(g, op):
    r = gen_pinv(g, op)
    if r is not None:
        r['kw'].pop('atol', None) if r['kw'].get('atol') == ['num', 1e-3] else None
    return r


def gen_lstsq(g, op):
    # its gradient goes through pinv (squaring the condition number)
    a, pre = _matrix(g, False, well=True, cond=30)
    if a is None:
        return None
    A = g.t(a) if not pre else torch.zeros(pre[0]['shape'])
    m, batch = A.shape[-2], list(A.shape[:-2])
    x = g.t(a) if not pre else torch.tensor([float(v) for v in pre[0]['values']]).reshape(pre[0]['shape'])
    rg = g.t(a).requires_grad if not pre else pre[0]['rg']
    if x.numel() and bool((x.abs().amax(-2) == 0).any()):
        return None  # a zero column: torch's gelsy pivots from uninitialized jpvt and may report rank 0
    # b's batch dims are A's: torch 1.13 broadcasts them inconsistently
    # (internal asserts, a vector b growing a dim); ember broadcasts as solve.
    # A vector b only without gradients: torch 1.13's lstsq backward fails on
    # it (shape errors) or sums over the wrong dims.
    shape = g.r.choice([batch + [m, g.r.choice([1, 2])], batch + [m]])
    if rg:
        shape = batch + [m, g.r.choice([1, 2])]
    b, st = _finite_leaf(g, shape)
    if len(shape) == len(batch) + 1:
        st['rg'] = False
    kw = {}
    if g.r.random() < 0.6:
        kw['driver'] = ['str', g.r.choice(['gelsy', 'gels', 'gelsd', 'gelss'])]
    return dict(args=[['var', a], ['var', b]], kw=kw, pre=pre + [st], style='function')


def _py_lstsq(st, pa, pk):
    # torch 1.13's gelsy (the CPU default) pivots from an uninitialised
    # jpvt array and returns a wrong rank and solution about half the time,
    # even for a well-conditioned matrix (docstring): its results are taken
    # from gelsd instead, with gelsy's empty singular values
    if pk.get('driver', "'gelsy'") == "'gelsy'":
        pk = dict(pk, driver="'gelsd'")
        kws = ['%s=%s' % kv for kv in sorted(pk.items())]
        return ('(lambda r: (r.solution, r.residuals.new_empty(0), r.rank, r.singular_values.new_empty(0)))'
                '(torch.linalg.lstsq(%s))' % ', '.join(pa + kws))
    kws = ['%s=%s' % kv for kv in sorted(pk.items())]
    return 'torch.linalg.lstsq(%s)' % ', '.join(pa + kws)


MAP = {
    'det': dict(gen=gen_square),
    'slogdet': dict(gen=gen_square),
    'inv': dict(gen=gen_square),
    'inverse': dict(gen=gen_square, weight=0.4),
    'matrix_exp': dict(gen=gen_matrix_exp),
    'solve': dict(gen=gen_solve),
    'cholesky': dict(gen=gen_cholesky),
    'qr': dict(gen=gen_qr),
    'eigh': dict(gen=gen_eigh),
    'eigvalsh': dict(gen=gen_eigh, weight=0.6),
    'svd': dict(gen=gen_svd),
    'svdvals': dict(gen=gen_svd, weight=0.6),
    'pinv': dict(gen=gen_pinv),
    'matrix_rank': dict(gen=gen_matrix_rank, weight=0.5),
    'lstsq': dict(gen=gen_lstsq, py=_py_lstsq),
}
