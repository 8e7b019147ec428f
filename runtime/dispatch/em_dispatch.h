/* em_dispatch.h -- per-op kernel tables, thread-local key sets, registration.
 * Knows core; knows nothing of autograd, kernels or Lua.
 *
 * Note [How a call is dispatched]
 * The generated em_OP() computes
 *     ks = (OR of its tensor arguments' key sets | tls.include) & ~tls.exclude
 *     ks &= op->active     (keys with a kernel or fallback, minus fallthroughs)
 * and calls op->kernel[highest key in ks] -- one array index, no switch.
 * An entry is either an unboxed kernel (a C function with the op's own
 * signature, taking the key set as its first argument) or NULL, meaning the
 * key's boxed fallback is called with the arguments boxed on an em_stack.
 * Redispatch "below" a key: a kernel calls em_redispatch_OP(ks & below(k)).
 */
#ifndef EM_DISPATCH_H
#define EM_DISPATCH_H

#include "core/em_core.h"

/* ---- boxed values (fallbacks see arguments this way) ---- */

typedef enum {
    EM_IV_NONE, EM_IV_TENSOR, EM_IV_SCALAR, EM_IV_INT, EM_IV_DOUBLE,
    EM_IV_BOOL, EM_IV_INTLIST, EM_IV_DTYPE, EM_IV_TENSORLIST, EM_IV_STRING, EM_IV_FLOATLIST,
    EM_IV_DEVICE, EM_IV_GENERATOR
} em_ivalue_tag;

typedef struct {
    em_ivalue_tag tag;
    union {
        em_tensor *t;   /* borrowed for arguments; owned for results */
        em_scalar s;
        int64_t i;
        double d;
        bool b;
        em_intlist l;   /* borrowed */
        em_dtype dt;
        const char *str;  /* a str{...} argument: borrowed */
        em_floatlist fl;  /* borrowed */
        em_tensorlist tl; /* arguments: borrowed; results: an owned array of
                             owned tensors (Note [Several results]) */
        em_device dev;
        em_generator *g; /* borrowed */
    } v;
} em_ivalue;

#define EM_STACK_MAX 32
typedef struct {
    em_ivalue args[EM_STACK_MAX];
    int nargs;
    em_ivalue rets[4];   /* results: tensors (and tensor lists) are owned */
    int nrets;
} em_stack;

/* Boxing of Device / Device? (absent: type EM_DEVICE_NONE, boxed as none)
 * and Generator? (NULL: the default generator, boxed as none), for the
 * generated adapters. The unboxers return false on a tag of another type. */
static inline em_ivalue em_iv_device(em_device d) {
    em_ivalue v;
    v.tag = d.type == EM_DEVICE_NONE ? EM_IV_NONE : EM_IV_DEVICE;
    v.v.dev = d;
    return v;
}
static inline em_ivalue em_iv_generator(em_generator *g) {
    em_ivalue v;
    v.tag = g ? EM_IV_GENERATOR : EM_IV_NONE;
    v.v.g = g;
    return v;
}
static inline bool em_un_device(const em_stack *st, int i, bool optional, em_device *out) {
    if (st->args[i].tag == EM_IV_DEVICE) { *out = st->args[i].v.dev; return true; }
    if (st->args[i].tag == EM_IV_NONE && optional) { *out = em_no_device(); return true; }
    return false;
}
static inline bool em_un_generator(const em_stack *st, int i, em_generator **out) {
    if (st->args[i].tag == EM_IV_GENERATOR) { *out = st->args[i].v.g; return true; }
    if (st->args[i].tag == EM_IV_NONE) { *out = NULL; return true; }
    return false;
}

typedef struct em_op em_op;

/* A boxed kernel: reads st->args, writes st->rets (status EM_OK), or sets
 * the error and returns its status. */
typedef em_status (*em_boxed_fn)(const em_op *op, em_keyset ks, em_stack *st, void *ud);

/* ---- operators ---- */

struct em_op {
    const char *name;        /* "add" */
    const char *schema;      /* "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" */
    int id;                  /* index in the generated op table */
    void *kernel[EM_KEY_COUNT];   /* unboxed kernels (cast by generated code) */
    em_keyset has_kernel;    /* keys with an unboxed kernel */
    em_keyset fallthrough;   /* keys this op skips */
    em_keyset active;        /* derived: see Note [How a call is dispatched] */
    /* Calls the unboxed kernel for key with boxed arguments (generated). */
    em_status (*call_unboxed_from_boxed)(const em_op *op, em_keyset ks, em_stack *st);
};

/* The table of all ops; the generated code defines and registers them. */
EM_API int em_disp_op_count(void);
EM_API em_op *em_disp_op(int id);
EM_API em_op *em_disp_find_op(const char *name);

/* Registration. kernel is the op's unboxed C function cast to void*.
 * Returns EM_OK, or EM_EVALUE for a bad key. */
EM_API em_status em_disp_register_kernel(em_op *op, em_dispatch_key key, void *kernel);
/* Make key a fallthrough for this op, or for every op when op is NULL. */
EM_API em_status em_disp_register_fallthrough(em_op *op, em_dispatch_key key);
/* Install a boxed fallback for key, used for every op lacking an unboxed
 * kernel at that key. fn == NULL removes it. */
EM_API em_status em_disp_register_fallback(em_dispatch_key key, em_boxed_fn fn, void *ud);
/* Undo a registration (tests and plugins unloading). */
EM_API void em_disp_deregister_kernel(em_op *op, em_dispatch_key key);

/* ---- computing the key for a call ---- */

typedef struct { em_keyset include, exclude; } em_tls_keys;
/* The calling thread's include/exclude sets (guards edit them). */
EM_API extern _Thread_local em_tls_keys em_disp_tls_keys;

static inline em_keyset em_keys_below(em_dispatch_key k) { return EM_KS(k) - 1; }
static inline int em_keyset_highest(em_keyset ks) { return ks ? 63 - __builtin_clzll(ks) : -1; }

/* The key set for a call from its arguments' key sets (already OR-ed). */
static inline em_keyset em_disp_compute(const em_op *op, em_keyset args) {
    return ((args | em_disp_tls_keys.include) & ~em_disp_tls_keys.exclude) & op->active;
}

/* Resolve ks to a kernel. Returns the unboxed kernel (non-NULL), or NULL
 * with *boxed set to the fallback to call, or NULL/NULL with the error set
 * ("op 'X' has no kernel for key Y"). */
EM_API void *em_disp_resolve(const em_op *op, em_keyset ks, int *key_out,
                             em_boxed_fn *boxed, void **boxed_ud);

/* Call op boxed at ks (used by fallbacks to redispatch below themselves). */
EM_API em_status em_disp_call_boxed(const em_op *op, em_keyset ks, em_stack *st);
/* Release owned results on a stack. */
EM_API void em_stack_clear_rets(em_stack *st);

#endif
