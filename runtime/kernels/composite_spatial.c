/* composite_spatial.c -- the spatial family's composite ops
 * (schema/ops/spatial.yaml, `kernels: {Composite: em_comp_NAME}`; see Note
 * [Composite ops] in codegen/codegen.h): F.pad over constant_pad_nd,
 * pad_mode and pad_circular, interpolate over the upsample kernels, attention over matmul
 * and softmax. Each checks what it can name better than its parts, then
 * calls ops through the public API (em_ops.h), never a kernel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* ---- pad ---- */

/* r, or with r NULL the error of the kernel op `part` (its message starts
 * "part: ") renamed to the user's op: "op: ...". Returns r. */
static em_tensor *as_op_error(em_tensor *r, const char *part, const char *op) {
    if (r) return r;
    const char *msg = em_error_message();
    size_t n = strlen(part);
    if (strncmp(msg, part, n) == 0 && strncmp(msg + n, ": ", 2) == 0) {
        char *copy = strdup(msg + n + 2);
        em_status kind = em_error_kind();
        if (copy) em_set_error(kind, "%s: %s", op, copy);
        free(copy);
    }
    return NULL;
}

/* F.pad as PyTorch 1.13's C++ pad: the pad list's checks, then constant ->
 * constant_pad_nd(value or 0); other modes take no value (0 is accepted)
 * and pad the last 1, 2 or 3 dims of an input with 1 or 2 more dims. */
em_tensor *em_comp_pad(em_keyset ks, em_tensor *input, em_intlist pad, const char *mode, const em_scalar *value) {
    (void)ks;
    char b[128];
    if (pad.n % 2 != 0) {
        em_set_error(EM_EVALUE, "pad: argument 'pad' must have an even length ((left, right) pairs, last dim first), "
                     "got %d entries", pad.n);
        return NULL;
    }
    if (pad.n / 2 > input->ndim) {
        em_set_error(EM_EVALUE, "pad: argument 'pad' pads %d dims but input %s has %d", pad.n / 2,
                     em_shape_str(input->ndim, input->sizes, b, sizeof b), input->ndim);
        return NULL;
    }
    if (strcmp(mode, "constant") == 0)
        return as_op_error(em_constant_pad_nd(input, pad, value ? *value : em_scalar_int(0)), "constant_pad_nd", "pad");
    if (value && em_scalar_to_double(*value) != 0) {
        em_set_error(EM_EVALUE, "pad: mode '%s' takes no argument 'value' (got %g)", mode, em_scalar_to_double(*value));
        return NULL;
    }
    int k = pad.n / 2;
    if (k < 1 || k > 3 || input->ndim < k + 1 || input->ndim > k + 2) {
        em_set_error(EM_ESHAPE, "pad: mode '%s' pads the last 1, 2 or 3 dims of an input with 1 or 2 more dims "
                     "(2 pad entries for 2-d/3-d input, 4 for 3-d/4-d, 6 for 4-d/5-d), got %d pad entries for input %s",
                     mode, pad.n, em_shape_str(input->ndim, input->sizes, b, sizeof b));
        return NULL;
    }
    if (strcmp(mode, "circular") == 0) return as_op_error(em_pad_circular(input, pad), "pad_circular", "pad");
    return as_op_error(em_pad_mode(input, pad, mode), "pad_mode", "pad");
}
