/* em_structured.h -- structured kernels: one meta function per op family
 * (name, name_, name.out), backend impls that only compute, and the
 * helpers the generated wrappers call (structured.c).
 *
 * Note [Structured kernels]
 * An ops.yaml entry `name.out(..., *, Tensor(a!) out) -> Tensor(a!)` with
 * `structured: em_meta_NAME` declares a family; `name` and `name_` say
 * `structured_delegate: name.out` and name no kernels. The family shares:
 *   em_status em_meta_NAME(em_meta *m, <the arguments of name.out but out>)
 *     hand-written, backend-independent (runtime/kernels/meta.c): checks
 *     the arguments and fills m's result shape, dtype and device (and the
 *     dtype the impl computes in). Errors name m->op, which the wrapper
 *     sets before the call ("add", "add_").
 *   em_status IMPL(em_keyset ks, const em_meta *m, <same arguments>, em_tensor *out)
 *     per backend key (`kernels: {CPU: em_cpu_add_impl}` on name.out):
 *     computes into out, which has m's shape and a dtype m->dtype can be
 *     cast to (m->dtype itself unless the caller gave out= or an in-place
 *     self of another dtype), and which may be an input itself (in-place)
 *     but never overlaps an input partially. It does not bump versions.
 * Codegen (codegen/emit_structured.c, build/gen/em_structured.c) writes
 * per backend key the kernels em_<key>_<op> (em_cpu_add, em_cpu_add_,
 * em_cpu_add_out) that the op table registers:
 *   functional  meta -> em_structured_alloc -> impl
 *   in-place    meta -> em_structured_check_inplace -> impl(out = self)
 *   out=        meta -> em_structured_check_out -> impl(out)
 * The Autograd kernel of name.out records nothing and refuses inputs that
 * require grad while grad mode is on (PyTorch's rule for out= arguments);
 * name and name_ keep their derivatives.yaml entries.
 */
#ifndef EM_STRUCTURED_H
#define EM_STRUCTURED_H

#include "core/em_core.h"

/* The dtypes an out= tensor may have (PyTorch's rule per op). */
typedef enum {
    EM_META_OUT_CAST = 0, /* any dtype the result casts to (elementwise ops) */
    EM_META_OUT_EXACT,    /* exactly m->dtype (matmul; sum with a dtype argument) */
    EM_META_OUT_ANY       /* any: the result takes out's dtype (sum without dtype) */
} em_meta_out;

/* What a meta function computes about an op's result. */
typedef struct em_meta {
    const char *op;              /* the op's name in error messages (set by the caller) */
    int ndim;                    /* the result's shape */
    int64_t sizes[EM_MAX_DIMS];
    em_dtype dtype;              /* the result's dtype */
    em_device device;            /* where the result lives (the inputs' device) */
    em_dtype compute;            /* the dtype the impl computes in (binary family) */
    em_meta_out out_dtype;       /* which dtypes an out= tensor may have */
    bool out_is_new;             /* the impl's out was allocated for this call (functional
                                    variant): a long impl may stop half-way (Note [Stoppable
                                    products] in kernels/cpu/linalg.c) */
} em_meta;

/* PyTorch's canCast: no cast into a lower category (float -> integer -> bool). */
EM_API bool em_structured_can_cast(em_dtype from, em_dtype to);
/* A new contiguous tensor of m's shape, dtype and device (from the device's
 * allocator), or NULL with the error set. Inline: the functional path of
 * every family is hot (1-element add). */
static inline em_tensor *em_structured_alloc(const em_meta *m) {
    return em_tensor_new(m->ndim, m->sizes, m->dtype, m->device);
}
/* The in-place checks: self has m's shape exactly (no broadcasting into
 * self), m->dtype can be cast to self's dtype, self has no internal
 * overlap and overlaps none of the n inputs (NULL entries skipped)
 * partially. EM_OK or the error, naming m->op and both shapes/dtypes. */
EM_API em_status em_structured_check_inplace(const em_meta *m, em_tensor *self, em_tensor *const *in,
                                             int n);
/* The out= checks: out is on m's device, its dtype is one m->out_dtype
 * allows (the wrapper sets EM_META_OUT_CAST before the meta runs), out
 * has no internal overlap and overlaps none of the n inputs partially,
 * then out takes m's shape when it has another (Note [out= resizing]). */
EM_API em_status em_structured_check_out(const em_meta *m, em_tensor *out, em_tensor *const *in, int n);

/* Note [out= resizing]
 * As PyTorch's resize_output: an out= tensor of another shape is resized
 * to the result's shape (PyTorch also warns when it had elements; ember has
 * no warning channel, so it does it silently): its sizes become the
 * result's with contiguous strides from its storage offset, and its
 * storage grows when too small (the old bytes are kept; views sharing the
 * storage see the new block, as in PyTorch). Borrowed memory
 * (em_tensor_from_blob) cannot grow: that is an error naming both shapes.
 * The overlap checks run before, on out as given (as PyTorch's), so an
 * empty out never overlaps; an impl still copies an input that shares
 * out's storage without being out itself before writing. */

#endif
