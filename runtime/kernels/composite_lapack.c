/* composite_lapack.c -- the LAPACK family's composite ops (inverse,
 * eigvalsh, svdvals), written with public ops only as composite.c explains
 * (Note [Composite ops] in codegen/codegen.h). */
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* torch.inverse is linalg.inv. */
em_tensor *em_comp_inverse(em_keyset ks, em_tensor *self) {
    (void)ks;
    return em_inv(self);
}

/* The checks of the LAPACK kernels (lapack.c), so that errors name the
 * composite the user called. */
static bool check_matrix(const em_tensor *A, const char *op, bool square) {
    char b[EM_SHAPE_STR_MAX];
    if (A->dtype != EM_FLOAT32 && A->dtype != EM_FLOAT64) {
        em_set_error(EM_ETYPE, "%s: expected argument 'A' to be a float32 or float64 tensor, got %s", op,
                     em_dtype_name(A->dtype));
        return false;
    }
    if (A->ndim < 2) {
        em_set_error(EM_ESHAPE, "%s: argument 'A' must have at least 2 dimensions, got shape %s", op,
                     em_shape_str(A->ndim, A->sizes, b, sizeof b));
        return false;
    }
    if (square && A->sizes[A->ndim - 2] != A->sizes[A->ndim - 1]) {
        em_set_error(EM_ESHAPE, "%s: argument 'A' must be batches of square matrices, but they are %lld by %lld "
                     "matrices", op, (long long)A->sizes[A->ndim - 2], (long long)A->sizes[A->ndim - 1]);
        return false;
    }
    return true;
}

/* eigh's eigenvalues: as in torch, the gradient then comes from eigh's
 * node, which keeps the eigenvectors (not A, which may change in place). */
em_tensor *em_comp_eigvalsh(em_keyset ks, em_tensor *A, const char *UPLO) {
    (void)ks;
    if (!check_matrix(A, "linalg.eigvalsh", true)) return NULL;
    em_tensor *V = NULL;
    em_tensor *L = em_eigh(A, UPLO, &V);
    em_tensor_release(V);
    return L;
}

/* svd's S (reduced), likewise. */
em_tensor *em_comp_svdvals(em_keyset ks, em_tensor *A) {
    (void)ks;
    if (!check_matrix(A, "linalg.svdvals", false)) return NULL;
    em_tensor *S = NULL, *Vh = NULL;
    em_tensor *U = em_svd(A, false, &S, &Vh);
    em_tensor_release(U);
    em_tensor_release(Vh);
    return S;
}
