/* composite_grid.c -- the grid family's composite ops (schema/ops/grid.yaml,
 * `kernels: {Composite: em_comp_NAME}`; see Note [Composite ops] in
 * codegen/codegen.h): F.affine_grid as a matmul with a constant base grid,
 * F.grid_sample over the grid_sampler_2d kernel. Each checks what it can
 * name better than its parts, then calls ops through the public API.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/em_comp_error.h"

/* ---- affine_grid ---- */

/* PyTorch's linspace_from_neg_one in float32 (or float64 when dbl): n
 * values from -1 to 1 (linspace's two-sided formula), times (n - 1)/n
 * without align_corners; one point is 0. Written to v[0], v[stride], ... */
static void lin_from_neg_one(double *v, int64_t stride, int64_t n, bool ac, bool dbl) {
    for (int64_t i = 0; i < n; i++) {
        double x;
        if (n <= 1) {
            x = 0;
        } else if (dbl) {
            double step = 2.0 / (double)(n - 1);
            x = i < n / 2 ? -1 + step * (double)i : 1 - step * (double)(n - 1 - i);
            if (!ac) x = x * (double)(n - 1) / (double)n;
        } else {
            float step = 2.0f / (float)(n - 1);
            float y = i < n / 2 ? -1 + step * (float)i : 1 - step * (float)(n - 1 - i);
            if (!ac) y = y * (float)(n - 1) / (float)n;
            x = y;
        }
        v[i * stride] = x;
    }
}

/* F.affine_grid as PyTorch 1.13's (affine_grid_generator): the base grid
 * (points (x, y, 1) or (x, y, z, 1) over the output's spatial dims, last
 * dim fastest) times theta^T, so that autograd reaches theta through
 * matmul. The base grid is computed in float64 and cast to theta's dtype. */
em_tensor *em_comp_affine_grid(em_keyset ks, em_tensor *theta, em_intlist size, bool align_corners) {
    (void)ks;
    const char *op = "affine_grid";
    char a[128], b[128];
    if (!em_dtype_is_floating(theta->dtype)) {
        em_set_error(EM_ETYPE, "%s: argument 'theta' must be a float tensor, got %s", op, em_dtype_name(theta->dtype));
        return NULL;
    }
    if (size.n != 4 && size.n != 5) {
        em_set_error(EM_EVALUE, "%s: argument 'size' must have 4 entries (N, C, H, W) or 5 (N, C, D, H, W), got %s", op,
                     em_shape_str(size.n < 0 ? 0 : size.n, size.data, a, sizeof a));
        return NULL;
    }
    int nsp = size.n - 2; /* 2 or 3 spatial dims */
    if (theta->ndim != 3 || theta->sizes[1] != nsp || theta->sizes[2] != nsp + 1) {
        em_set_error(EM_ESHAPE, "%s: expected theta to be a batch of %s affine matrices (N, %d, %d) for size %s, got theta %s",
                     op, nsp == 2 ? "2-d" : "3-d", nsp, nsp + 1, em_shape_str(size.n, size.data, a, sizeof a),
                     em_shape_str(theta->ndim, theta->sizes, b, sizeof b));
        return NULL;
    }
    bool unit = false, nonpos = false, neg = false;
    for (int i = 0; i < size.n; i++) {
        if (size.data[i] <= 0) nonpos = true;
        if (size.data[i] < 0) neg = true;
        if (i >= 2 && size.data[i] == 1) unit = true;
    }
    if ((!(align_corners && unit) && nonpos) || neg) {
        em_set_error(EM_EVALUE, "%s: expected a positive output size, got %s", op, em_shape_str(size.n, size.data, a, sizeof a));
        return NULL;
    }
    if (theta->sizes[0] != size.data[0]) {
        em_set_error(EM_ESHAPE, "%s: size %s has batch size %lld but theta %s has %lld matrices", op,
                     em_shape_str(size.n, size.data, a, sizeof a), (long long)size.data[0],
                     em_shape_str(3, theta->sizes, b, sizeof b), (long long)theta->sizes[0]);
        return NULL;
    }
    int64_t pts = 1;
    for (int i = 2; i < size.n; i++) pts *= size.data[i] > 0 ? size.data[i] : 0;
    int64_t bsizes[2] = { pts, nsp + 1 };
    em_tensor *base = em_tensor_new(2, bsizes, EM_FLOAT64, em_cpu_device());
    if (!base) return NULL;
    double *v = em_tensor_data(base);
    bool dbl = theta->dtype == EM_FLOAT64;
    /* coordinate k (x = 0) runs along spatial dim nsp - 1 - k */
    double *lin = malloc(sizeof(double) * (size_t)(pts + 1));
    if (!lin) {
        em_tensor_release(base);
        em_set_error(EM_ENOMEM, "%s: out of memory for the base grid", op);
        return NULL;
    }
    int64_t inner = 1; /* points per step of the spatial dim of coordinate k */
    for (int k = 0; k < nsp; k++) {
        int64_t n = size.data[size.n - 1 - k];
        lin_from_neg_one(lin, 1, n, align_corners, dbl);
        for (int64_t p = 0; p < pts; p++) v[p * (nsp + 1) + k] = lin[(p / inner) % n];
        inner *= n;
    }
    for (int64_t p = 0; p < pts; p++) v[p * (nsp + 1) + nsp] = 1;
    free(lin);
    em_tensor *bt = theta->dtype == EM_FLOAT64 ? em_tensor_retain(base) : em_to(base, theta->dtype);
    em_tensor_release(base);
    if (bt && theta->device.type != EM_CPU) {
        em_tensor *d = em_to_device(bt, theta->device);
        em_tensor_release(bt);
        bt = d;
    }
    if (!bt) return NULL;
    em_tensor *tt = em_transpose(theta, 1, 2);                 /* (N, nsp + 1, nsp) */
    em_tensor *g = tt ? em_matmul(bt, tt) : NULL;              /* (N, pts, nsp) */
    em_tensor_release(tt);
    em_tensor_release(bt);
    if (!g) return em_comp_as_op_error(NULL, "matmul", op);
    int64_t osizes[5] = { size.data[0] };
    for (int i = 2; i < size.n; i++) osizes[i - 1] = size.data[i];
    osizes[size.n - 1] = nsp;
    em_tensor *rv = em_reshape(g, (em_intlist){ osizes, size.n });
    em_tensor_release(g);
    /* a tensor of its own, not a view of the product (torch's
     * affine_grid_generator is one op): an in-place write to the result,
     * even one made under no_grad, is a write to a result, not to a view */
    em_tensor *r = rv ? em_clone(rv) : NULL;
    em_tensor_release(rv);
    return r;
}

/* ---- grid_sample ---- */

/* F.grid_sample: 4-d inputs go to grid_sampler_2d, 5-d (volumetric) ones
 * to grid_sampler_3d (their errors renamed to grid_sample). */
em_tensor *em_comp_grid_sample(em_keyset ks, em_tensor *input, em_tensor *grid, const char *mode,
                               const char *padding_mode, bool align_corners) {
    (void)ks;
    const char *op = "grid_sample";
    char a[128], b[128];
    if (input->ndim == 5 && grid->ndim == 5)
        return em_comp_as_op_error(em_grid_sampler_3d(input, grid, mode, padding_mode, align_corners),
                                   "grid_sampler_3d", op);
    if (input->ndim != 4 || grid->ndim != 4) {
        em_set_error(EM_ESHAPE, "%s: expected a 4-d input (N, C, H, W) and a 4-d grid (N, Ho, Wo, 2), or a 5-d input "
                     "(N, C, D, H, W) and a 5-d grid (N, Do, Ho, Wo, 3), got input %s and grid %s",
                     op, em_shape_str(input->ndim, input->sizes, a, sizeof a),
                     em_shape_str(grid->ndim, grid->sizes, b, sizeof b));
        return NULL;
    }
    return em_comp_as_op_error(em_grid_sampler_2d(input, grid, mode, padding_mode, align_corners), "grid_sampler_2d", op);
}

/* ---- rrelu ---- */

/* rrelu_: rrelu_with_noise's output copied into self (copy_, so autograd
 * sees an in-place op on self: refused on a leaf that requires grad). When
 * self requires grad, rrelu_with_noise runs on a clone of self: its node
 * saves its input, which copy_ must not change under it; the gradient
 * reaches self's old value through the clone. */
em_tensor *em_comp_rrelu_(em_keyset ks, em_tensor *self, em_scalar lower, em_scalar upper, bool training,
                          em_generator *generator) {
    (void)ks;
    em_tensor *noise = NULL;
    em_tensor *src = em_requires_grad(self) && em_is_grad_enabled() ? em_clone(self) : em_tensor_retain(self);
    if (!src) return NULL;
    em_tensor *r = em_rrelu_with_noise(src, lower, upper, training, generator, &noise);
    em_tensor_release(src);
    em_tensor_release(noise);
    if (!r) return em_comp_as_op_error(NULL, "rrelu_with_noise", "rrelu_");
    em_tensor *w = em_copy_(self, r);
    em_tensor_release(r);
    return em_comp_as_op_error(w, "copy_", "rrelu_");
}

/* F.rrelu: rrelu_with_noise's output (the default generator), or rrelu_
 * with inplace. */
em_tensor *em_comp_rrelu(em_keyset ks, em_tensor *input, em_scalar lower, em_scalar upper, bool training,
                         bool inplace) {
    (void)ks;
    if (inplace) return em_comp_as_op_error(em_rrelu_(input, lower, upper, training, NULL), "rrelu_", "rrelu");
    em_tensor *noise = NULL;
    em_tensor *r = em_rrelu_with_noise(input, lower, upper, training, NULL, &noise);
    em_tensor_release(noise);
    return em_comp_as_op_error(r, "rrelu_with_noise", "rrelu");
}
