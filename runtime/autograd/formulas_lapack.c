/* formulas_lapack.c -- backward helpers of the LAPACK ops
 * (schema/derivatives/lapack.yaml): PyTorch 1.13's formulas for real
 * matrices, written with public ops only (matmul, transpose, mul, inv,
 * solve, svd, eigh, matrix_exp, ...) so that create_graph records them.
 *
 * Each helper opens its own temporaries scope (begin()/finish() over
 * em_ag_scope_begin/_end): every intermediate is registered with em_ag_tmp
 * and released at the end; the returned tensor is a new reference. The small wrappers below take
 * NULL (a failed step, error already set) and pass it on, so a chain of
 * steps needs one check at its end.
 *
 * Note [Absent gradients of several results]: the generated node hands a
 * formula zeros for a result whose gradient did not flow. torch passes an
 * undefined gradient instead and takes shortcuts on it (eigh's eigenvalues
 * alone, svd's S alone) that also avoid dividing by the gaps between
 * eigenvalues / singular values, which are zero for repeated ones. absent()
 * treats an all-zero gradient without history as undefined, so
 * ember.linalg.eigh(A) used only through its eigenvalues gets torch's
 * gradient even for repeated eigenvalues.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/em_formulas.h"
#include "em_ops.h"

/* ---- chainable steps (NULL in, NULL out) ----
 * Once a step fails, no further op may run: an op that succeeds can clear
 * the thread's error slot (recording a node with create_graph does), and
 * the failed step's message would be lost. OP(call) therefore evaluates
 * call only while the helper has not failed (lp_failed, reset by begin()
 * and restored by finish(), so helpers nest). */

static _Thread_local bool lp_failed;

static em_tensor *step(em_tensor *t) {
    if (!t) lp_failed = true;
    return em_ag_tmp(t);
}

#define TMP(x) em_ag_tmp(x)
#define OP(call) (lp_failed ? NULL : step(call))

typedef struct {
    int mark;
    bool failed; /* the enclosing helper's flag */
} lp_scope;

static lp_scope begin(void) {
    lp_scope sc = { em_ag_scope_begin(), lp_failed };
    lp_failed = false;
    return sc;
}

static em_tensor *mT(em_tensor *x) { return x ? OP(em_transpose(x, -2, -1)) : NULL; }
static em_tensor *mm(em_tensor *a, em_tensor *b) { return a && b ? OP(em_matmul(a, b)) : NULL; }
static em_tensor *add(em_tensor *a, em_tensor *b) { return a && b ? OP(em_add(a, b, em_scalar_int(1))) : NULL; }
static em_tensor *sub(em_tensor *a, em_tensor *b) { return a && b ? OP(em_sub(a, b, em_scalar_int(1))) : NULL; }
static em_tensor *mul(em_tensor *a, em_tensor *b) { return a && b ? OP(em_mul(a, b)) : NULL; }
static em_tensor *dvd(em_tensor *a, em_tensor *b) { return a && b ? OP(em_div(a, b)) : NULL; }
static em_tensor *neg(em_tensor *a) { return a ? OP(em_neg(a)) : NULL; }
static em_tensor *num(double v) { return OP(em_ag_scalar(v)); }
static em_tensor *unsq(em_tensor *a, int64_t d) { return a ? OP(em_unsqueeze(a, d)) : NULL; }
static em_tensor *sq(em_tensor *a, int64_t d) { return a ? OP(em_squeeze(a, &d)) : NULL; }
static em_tensor *inv(em_tensor *a) { return a ? OP(em_inv(a)) : NULL; }
static em_tensor *narrow(em_tensor *a, int64_t d, int64_t s, int64_t l) {
    return a ? OP(em_narrow(a, d < 0 ? d + a->ndim : d, s, l)) : NULL;
}
static em_tensor *cat2(em_tensor *a, em_tensor *b, int64_t d) {
    if (!a || !b) return NULL;
    em_tensor *l[2] = { a, b };
    return OP(em_cat((em_tensorlist){ l, 2 }, d < 0 ? d + a->ndim : d));
}

/* Ends the scope opened by begin(), keeping r (a new reference, or NULL
 * with the failed step's error). */
static em_tensor *finish(lp_scope sc, em_tensor *r) {
    if (r) em_tensor_retain(r);
    em_ag_scope_end(sc.mark);
    lp_failed = sc.failed;
    return r;
}

/* The n x n identity (like's dtype and device): arange == arange^T. */
static em_tensor *eye(int64_t n, const em_tensor *like) {
    em_scalar end = em_scalar_int(n);
    em_tensor *r = OP(em_arange(em_scalar_int(0), &end, em_scalar_int(1), EM_INT64, like->device));
    em_tensor *e = r ? OP(em_eq(unsq(r, 1), unsq(r, 0))) : NULL;
    return e ? OP(em_to(e, like->dtype)) : NULL;
}

/* v (..., n) on the diagonal of (..., n, n) zeros. */
static em_tensor *diag_embed(em_tensor *v) {
    if (!v) return NULL;
    return mul(unsq(v, -1), eye(v->sizes[v->ndim - 1], v));
}

/* The lower triangle of a square matrix's shape with `diag` on the
 * diagonal and 1 below it (a constant mask). */
static em_tensor *tril_mask(int64_t n, const em_tensor *like, double diag) {
    em_scalar end = em_scalar_int(n);
    em_tensor *r = OP(em_arange(em_scalar_int(0), &end, em_scalar_int(1), EM_INT64, like->device));
    em_tensor *lo = r ? OP(em_gt(unsq(r, 1), unsq(r, 0))) : NULL; /* row > col */
    em_tensor *lof = lo ? OP(em_to(lo, like->dtype)) : NULL;
    em_tensor *d = eye(n, like);
    return add(lof, mul(d, num(diag)));
}

/* Any element true/nonzero? (reads a 0-dim bool) */
static bool any_true(em_tensor *b) {
    em_tensor *a = b ? OP(em_any(b, NULL, false)) : NULL;
    return a && *(const bool *)em_tensor_data(a);
}

/* See Note [Absent gradients of several results]. */
static bool absent(em_tensor *g) {
    if (!g) return true;
    if (em_requires_grad(g)) return false;
    return !any_true(OP(em_ne(g, num(0.0))));
}

/* ---- det, slogdet, inv ---- */

/* det's gradient grad * det * A^-T (torch's solve(A^T, grad det I)); when some matrix is singular (det 0),
 * torch's SVD form for the whole batch: U diag(alpha grad prod_{j != i} s_j) Vh
 * with alpha = det(U) det(Vh). */
em_tensor *em_ag_fn_det_backward(em_tensor *grad, em_tensor *A, em_tensor *det) {
    lp_scope mark = begin();
    em_tensor *r;
    if (!any_true(OP(em_eq(det, num(0.0))))) { /* solve(A^T, d I), as torch */
        em_tensor *d = unsq(unsq(mul(grad, det), -1), -1);
        em_tensor *dI = mul(d, eye(A->sizes[A->ndim - 1], A));
        em_tensor *At = mT(A);
        r = At && dI ? OP(em_solve(At, dI, true)) : NULL;
    } else {
        em_tensor *S = NULL, *Vh = NULL;
        em_tensor *U = OP(em_svd(A, false, &S, &Vh));
        TMP(S);
        TMP(Vh);
        em_tensor *r0 = NULL;
        if (U && S && Vh) {
            int64_t n = S->sizes[S->ndim - 1];
            em_tensor *I = eye(n, S);
            em_tensor *M = add(mul(unsq(S, -2), sub(num(1.0), I)), I); /* M[i][j] = s_j, 1 on the diagonal */
            int64_t last = M ? M->ndim - 1 : 0;
            em_tensor *P = M ? OP(em_prod(M, &last, false, EM_DTYPE_NONE)) : NULL;
            em_tensor *alpha = mul(OP(em_det(U)), OP(em_det(Vh)));
            em_tensor *D = mul(unsq(mul(alpha, grad), -1), P);
            r0 = mm(mul(U, unsq(D, -2)), Vh);
        }
        r = r0;
    }
    return finish(mark, r);
}

/* logabsdet's gradient: grad * A^-T. */
em_tensor *em_ag_fn_slogdet_backward(em_tensor *grad, em_tensor *A) {
    lp_scope mark = begin();
    return finish(mark, mul(unsq(unsq(grad, -1), -1), mT(inv(A))));
}

/* -A^-T grad A^-T from the saved inverse. */
em_tensor *em_ag_fn_inv_backward(em_tensor *grad, em_tensor *inverse) {
    lp_scope mark = begin();
    em_tensor *it = mT(inverse);
    return finish(mark, neg(mm(mm(it, grad), it)));
}

/* ---- solve ---- */

/* torch's vector-rhs rule (as em_cpu_solve): B 1-d, or shaped like A
 * without its last dim. */
static bool vector_rhs(const em_tensor *A, const em_input_meta *B) {
    if (B->ndim == 1) return true;
    if (A->ndim - 1 != B->ndim) return false;
    for (int d = 0; d < B->ndim; d++)
        if (B->sizes[d] != A->sizes[d]) return false;
    return true;
}

/* gB = solve(A^T, grad, left) for X = A^-1 B and for X = B A^-1. */
em_tensor *em_ag_fn_solve_backward_B(em_tensor *grad, em_tensor *A, bool left) {
    lp_scope mark = begin();
    em_tensor *At = mT(A);
    return finish(mark, At ? OP(em_solve(At, grad, left)) : NULL);
}

/* gA = -gB X^T (left) or -X^T gB (X A = B), vectors as n x 1 matrices. */
em_tensor *em_ag_fn_solve_backward_A(em_tensor *grad, em_tensor *A, const em_input_meta *B_meta, em_tensor *X,
                                     bool left) {
    lp_scope mark = begin();
    em_tensor *At = mT(A);
    em_tensor *gB = At ? OP(em_solve(At, grad, left)) : NULL;
    if (vector_rhs(A, B_meta)) {
        gB = unsq(gB, -1);
        X = unsq(X, -1);
    }
    return finish(mark, neg(left ? mm(gB, mT(X)) : mm(mT(X), gB)));
}

/* ---- cholesky ---- */

/* A = L L^T: gA = L^-T sym(Phi(L^T gL)) L^-1, Phi = lower triangle with the
 * diagonal halved, sym(X) = (X + X^T) / 2 (Murray 2016; torch's form).
 * upper: the result is U = L^T and its gradient is transposed first. */
em_tensor *em_ag_fn_cholesky_backward(em_tensor *grad, em_tensor *L, bool upper) {
    lp_scope mark = begin();
    if (upper) {
        L = mT(L);
        grad = mT(grad);
    }
    em_tensor *r = NULL;
    if (L && grad) {
        /* phi = tril(L^T grad) with its diagonal halved; tril rather than a
         * 0/1 mask, so that an infinite gradient does not become NaN */
        em_tensor *P = mm(mT(L), grad);
        em_tensor *diag = P ? OP(em_triu(P, 0)) : NULL;
        diag = diag ? OP(em_tril(diag, 0)) : NULL;
        em_tensor *phi = add(P ? OP(em_tril(P, -1)) : NULL, mul(diag, num(0.5)));
        em_tensor *M = mul(add(phi, mT(phi)), num(0.5));
        /* inv of L's lower triangle only: torch's triangular solves read
         * nothing else, so nothing flows to L's (zero) upper part */
        em_tensor *Li = inv(mul(L, tril_mask(L->sizes[L->ndim - 1], L, 1.0)));
        r = mm(mm(mT(Li), M), Li);
    }
    return finish(mark, r);
}

/* ---- qr ---- */

/* m >= n (Q m x n, R n x n): gA = (gQ + Q copyltu(M)) R^-T with
 * M = R gR^T - gQ^T Q and copyltu(M) = tril(M) + tril(M, -1)^T. */
static em_tensor *qr_backward_tall(em_tensor *gQ, em_tensor *gR, em_tensor *Q, em_tensor *R) {
    if (!gQ || !gR || !Q || !R) return NULL;
    int64_t n = R->sizes[R->ndim - 1];
    em_tensor *M = sub(mm(R, mT(gR)), mm(mT(gQ), Q));
    /* tril, not a 0/1 mask: an infinite M must not turn into NaN above the diagonal */
    em_tensor *low = M ? OP(em_tril(M, 0)) : NULL, *strict = M ? OP(em_tril(M, -1)) : NULL;
    em_tensor *C = add(low, mT(strict));
    /* R^-T from R's upper triangle only (torch's triangular solve) */
    return mm(add(gQ, mm(Q, C)), mT(inv(mul(R, mT(tril_mask(n, R, 1.0))))));
}

em_tensor *em_ag_fn_qr_backward(em_tensor *gQ, em_tensor *gR, em_tensor *Q, em_tensor *R, const char *mode) {
    if (strcmp(mode, "r") == 0) {
        em_set_error(EM_EVALUE, "linalg.qr: the derivative of linalg.qr depends on Q, which is not computed when "
                     "mode='r'; use mode='reduced' to differentiate through linalg.qr");
        return NULL;
    }
    int64_t m = Q->sizes[Q->ndim - 2], n = R->sizes[R->ndim - 1];
    if (strcmp(mode, "complete") == 0 && m > n) {
        em_set_error(EM_EVALUE, "linalg.qr: the QR decomposition is not differentiable when mode='complete' and "
                     "nrows > ncols");
        return NULL;
    }
    lp_scope mark = begin();
    em_tensor *r;
    if (m >= n) {
        r = qr_backward_tall(gQ, gR, Q, R);
    } else {
        /* m < n (Q m x m, R = [R1 | R2] m x n), torch 1.13's form (which the
         * double backward follows too): with B = gR R^T - Q^T gQ,
         * gA = [Q tril(B^T - B) R1^-T | 0] + Q gR. */
        em_tensor *B = sub(mm(gR, mT(R)), mm(mT(Q), gQ));
        em_tensor *S = sub(mT(B), B);
        em_tensor *skew = S ? OP(em_tril(S, 0)) : NULL;
        em_tensor *R1 = narrow(R, -1, 0, m);
        em_tensor *left = mm(mm(Q, skew), mT(inv(mul(R1, mT(tril_mask(m, R1, 1.0))))));
        em_tensor *R2 = narrow(R, -1, m, n - m);
        em_tensor *zero = R2 ? OP(em_zeros_like(R2, EM_DTYPE_NONE)) : NULL;
        r = add(cat2(left, zero, -1), mm(Q, gR));
    }
    return finish(mark, r);
}

/* ---- eigh ---- */

/* V diag(g) V^T */
static em_tensor *conj_diag(em_tensor *V, em_tensor *g) { return mm(mul(V, unsq(g, -2)), mT(V)); }

/* torch's linalg_eig_backward for Hermitian input: with gV,
 * gA = V (skew(V^T gV) / 2 / E + diag(gL)) V^T, E[i][j] = l_j - l_i (1 on
 * the diagonal); without it V diag(gL) V^T. */
em_tensor *em_ag_fn_eigh_backward(em_tensor *gL, em_tensor *gV, em_tensor *L, em_tensor *V) {
    lp_scope mark = begin();
    em_tensor *r;
    if (absent(gV)) {
        r = conj_diag(V, gL);
    } else {
        em_tensor *VhgV = mm(mT(V), gV);
        em_tensor *sk = mul(sub(VhgV, mT(VhgV)), num(0.5));
        em_tensor *E = add(sub(unsq(L, -2), unsq(L, -1)), eye(L->sizes[L->ndim - 1], L));
        em_tensor *inner = add(dvd(sk, E), diag_embed(gL));
        r = mm(mm(V, inner), mT(V));
    }
    return finish(mark, r);
}

/* ---- svd ---- */

/* torch's svd_backward (real case; distinct singular values assumed where
 * gU or gVh flow). full_matrices: the columns of U / rows of Vh past k and
 * their gradients take no part (torch narrows them too). */
em_tensor *em_ag_fn_svd_backward(em_tensor *gU, em_tensor *gS, em_tensor *gVh, em_tensor *U, em_tensor *S,
                                 em_tensor *Vh, bool full_matrices) {
    lp_scope mark = begin();
    int64_t k = S->sizes[S->ndim - 1];
    int64_t m = U->sizes[U->ndim - 2], n = Vh->sizes[Vh->ndim - 1];
    bool hasU = !absent(gU), hasV = !absent(gVh);
    if (full_matrices) {
        U = narrow(U, -1, 0, k);
        Vh = narrow(Vh, -2, 0, k);
        gU = hasU ? narrow(gU, -1, 0, k) : NULL;
        gVh = hasV ? narrow(gVh, -2, 0, k) : NULL;
    }
    em_tensor *r;
    if (!hasU && !hasV) {
        r = mm(mul(U, unsq(gS, -2)), Vh);
        return finish(mark, r);
    }
    em_tensor *UhgU = hasU ? mm(mT(U), gU) : NULL, *VhgV = hasV ? mm(Vh, mT(gVh)) : NULL;
    if (hasU) UhgU = sub(UhgU, mT(UhgU));
    if (hasV) VhgV = sub(VhgV, mT(VhgV));
    em_tensor *S2 = mul(S, S);
    em_tensor *E = add(sub(unsq(S2, -2), unsq(S2, -1)), eye(k, S));
    em_tensor *ret;
    if (hasU && hasV) ret = dvd(add(mul(UhgU, unsq(S, -2)), mul(unsq(S, -1), VhgV)), E);
    else if (hasU) ret = mul(UhgU, dvd(unsq(S, -2), E));
    else ret = mul(unsq(S, -1), dvd(VhgV, E));
    ret = add(ret, diag_embed(gS));
    if (m > k && hasU) {
        em_tensor *gA = mm(U, ret);
        em_tensor *gUSinv = dvd(gU, unsq(S, -2));
        gA = sub(add(gA, gUSinv), mm(U, mm(mT(U), gUSinv)));
        r = mm(gA, Vh);
    } else if (n > k && hasV) {
        em_tensor *gA = mm(ret, Vh);
        em_tensor *SinvgVh = dvd(gVh, unsq(S, -1));
        gA = sub(add(gA, SinvgVh), mm(mm(SinvgVh, mT(Vh)), Vh));
        r = mm(U, gA);
    } else {
        r = mm(mm(U, ret), Vh);
    }
    return finish(mark, r);
}

/* ---- pinv, lstsq ---- */

/* torch's pinv_backward (real case), arranged to multiply the smallest
 * matrices. */
static em_tensor *pinv_grad(em_tensor *grad, em_tensor *P, em_tensor *A) {
    if (!grad || !P || !A) return NULL;
    int64_t m = A->sizes[A->ndim - 2], n = A->sizes[A->ndim - 1];
    em_tensor *Ph = mT(P), *gh = mT(grad);
    if (m <= n) {
        em_tensor *K = mm(gh, P);
        em_tensor *KPh = mm(K, Ph);
        em_tensor *t1 = neg(mT(mm(P, K)));
        em_tensor *t3 = mm(mm(A, P), KPh);
        em_tensor *t4 = mm(mm(Ph, P), sub(gh, mm(K, A)));
        return add(sub(add(t1, KPh), t3), t4);
    }
    em_tensor *K = mm(P, gh);
    em_tensor *PhK = mm(Ph, K);
    em_tensor *t1 = neg(mT(mm(K, P)));
    em_tensor *t2 = mm(mm(sub(gh, mm(A, K)), P), Ph);
    em_tensor *t4 = mm(mm(PhK, P), A);
    return sub(add(add(t1, t2), PhK), t4);
}

em_tensor *em_ag_fn_pinv_backward(em_tensor *grad, em_tensor *pinvA, em_tensor *A) {
    lp_scope mark = begin();
    return finish(mark, pinv_grad(grad, pinvA, A));
}

/* lstsq's solution X = pinv(A) B: gA = pinv_backward(gX B^T, pinv(A), A),
 * gB = pinv(A)^T gX (b a vector when it has one dim fewer than A). */
em_tensor *em_ag_fn_lstsq_backward_self(em_tensor *grad, em_tensor *A, em_tensor *B) {
    lp_scope mark = begin();
    bool vec = B->ndim == A->ndim - 1;
    em_tensor *P = OP(em_pinv(A, NULL, NULL, false));
    em_tensor *g = vec ? unsq(grad, -1) : grad, *Bm = vec ? unsq(B, -1) : B;
    return finish(mark, pinv_grad(mm(g, mT(Bm)), P, A));
}

em_tensor *em_ag_fn_lstsq_backward_b(em_tensor *grad, em_tensor *A, em_tensor *B) {
    lp_scope mark = begin();
    bool vec = B->ndim == A->ndim - 1;
    em_tensor *P = OP(em_pinv(A, NULL, NULL, false));
    em_tensor *r = mm(mT(P), vec ? unsq(grad, -1) : grad);
    return finish(mark, vec ? sq(r, -1) : r);
}

/* ---- matrix_exp ---- */

/* The adjoint of exp's differential: exp([[A^T, G], [0, A^T]]) has
 * d/dt exp(A + t E) paired with G in its upper right block (torch's
 * linalg_matrix_exp_differential with adjoint = true). */
em_tensor *em_ag_fn_matrix_exp_backward(em_tensor *A, em_tensor *grad) {
    lp_scope mark = begin();
    int64_t n = A->sizes[A->ndim - 1];
    em_tensor *At = mT(A);
    em_tensor *Z = OP(em_zeros((em_intlist){ A->sizes, A->ndim }, A->dtype, A->device));
    em_tensor *g = grad && A && grad->dtype != A->dtype ? OP(em_to(grad, A->dtype)) : grad;
    em_tensor *M = cat2(cat2(At, g, -1), cat2(Z, At, -1), -2);
    em_tensor *E = M ? OP(em_matrix_exp(M)) : NULL;
    return finish(mark, narrow(narrow(E, -2, 0, n), -1, n, n));
}
