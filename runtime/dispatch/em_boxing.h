/* em_boxing.h -- the helpers every generated em_ops.c needs (included by
 * it only; build/gen/em_ops.c, emitted by codegen/emit_c.c): boxing C
 * arguments into em_ivalues for fallbacks (iv_*), unboxing them back for a
 * kernel (un_*), storing results on an em_stack (put_*) and running a boxed
 * call (run_boxed). They are static inline so that the generated fast
 * paths inline them; tests/check_dispatch.c exercises them directly.
 * See Note [How a call is dispatched] in em_dispatch.h.
 */
#ifndef EM_BOXING_H
#define EM_BOXING_H

#include "dispatch/em_dispatch.h"

/* ---- boxing: C arguments <-> em_ivalue (fallbacks see arguments boxed) ---- */

static inline em_ivalue iv_none(void) {
    em_ivalue v;
    v.tag = EM_IV_NONE;
    v.v.i = 0;
    return v;
}
static inline em_ivalue iv_tensor(em_tensor *t) {
    em_ivalue v = iv_none();
    if (t) { v.tag = EM_IV_TENSOR; v.v.t = t; }
    return v;
}
static inline em_ivalue iv_scalar(em_scalar s) {
    em_ivalue v;
    v.tag = EM_IV_SCALAR;
    v.v.s = s;
    return v;
}
static inline em_ivalue iv_opt_scalar(const em_scalar *s) { return s ? iv_scalar(*s) : iv_none(); }
static inline em_ivalue iv_int(int64_t i) {
    em_ivalue v;
    v.tag = EM_IV_INT;
    v.v.i = i;
    return v;
}
static inline em_ivalue iv_opt_int(const int64_t *i) { return i ? iv_int(*i) : iv_none(); }
static inline em_ivalue iv_list(em_intlist l) {
    em_ivalue v = iv_none();
    if (l.n >= 0) { v.tag = EM_IV_INTLIST; v.v.l = l; }
    return v;
}
static inline em_ivalue iv_double(double d) {
    em_ivalue v;
    v.tag = EM_IV_DOUBLE;
    v.v.d = d;
    return v;
}
static inline em_ivalue iv_bool(bool b) {
    em_ivalue v;
    v.tag = EM_IV_BOOL;
    v.v.b = b;
    return v;
}
static inline em_ivalue iv_tensorlist(em_tensorlist l) {
    em_ivalue v;
    v.tag = EM_IV_TENSORLIST;
    v.v.tl = l;
    return v;
}
static inline __attribute__((unused)) em_ivalue iv_flist(em_floatlist l) {
    em_ivalue v = iv_none();
    if (l.n >= 0) { v.tag = EM_IV_FLOATLIST; v.v.fl = l; }
    return v;
}
static inline __attribute__((unused)) em_ivalue iv_str(const char *s) {
    em_ivalue v;
    v.tag = EM_IV_STRING;
    v.v.str = s;
    return v;
}
static inline em_ivalue iv_dtype(em_dtype dt) {
    em_ivalue v = iv_none();
    if (dt != EM_DTYPE_NONE) { v.tag = EM_IV_DTYPE; v.v.dt = dt; }
    return v;
}

/* Unboxing: each reads st->args[i] into *out, or sets an EM_EINTERNAL error
 * (a fallback built a stack that does not match the schema) and returns it. */
static inline em_status bad_arg(const em_stack *st, int i, const char *op, const char *name) {
    return em_set_error(EM_EINTERNAL, "%s: boxed argument %d ('%s') has the wrong type (tag %d)",
                        op, i + 1, name, (int)st->args[i].tag);
}
static inline em_status un_tensor(const em_stack *st, int i, const char *op, const char *name,
                                  bool optional, em_tensor **out) {
    const em_ivalue *v = &st->args[i];
    if (v->tag == EM_IV_TENSOR && v->v.t) { *out = v->v.t; return EM_OK; }
    if (v->tag == EM_IV_NONE && optional) { *out = NULL; return EM_OK; }
    return bad_arg(st, i, op, name);
}
static inline em_status un_scalar(const em_stack *st, int i, const char *op, const char *name,
                                  em_scalar *out) {
    const em_ivalue *v = &st->args[i];
    switch (v->tag) {
    case EM_IV_SCALAR: *out = v->v.s; return EM_OK;
    case EM_IV_INT: *out = em_scalar_int(v->v.i); return EM_OK;
    case EM_IV_DOUBLE: *out = em_scalar_float(v->v.d); return EM_OK;
    case EM_IV_BOOL: *out = em_scalar_bool(v->v.b); return EM_OK;
    default: return bad_arg(st, i, op, name);
    }
}
static inline em_status un_opt_scalar(const em_stack *st, int i, const char *op, const char *name,
                                      em_scalar *buf, const em_scalar **out) {
    *out = NULL;
    if (st->args[i].tag == EM_IV_NONE) return EM_OK;
    if (un_scalar(st, i, op, name, buf) != EM_OK) return EM_EINTERNAL;
    *out = buf;
    return EM_OK;
}
static inline em_status un_int(const em_stack *st, int i, const char *op, const char *name,
                               int64_t *out) {
    if (st->args[i].tag != EM_IV_INT) return bad_arg(st, i, op, name);
    *out = st->args[i].v.i;
    return EM_OK;
}
static inline em_status un_opt_int(const em_stack *st, int i, const char *op, const char *name,
                                   int64_t *buf, const int64_t **out) {
    *out = NULL;
    if (st->args[i].tag == EM_IV_NONE) return EM_OK;
    if (un_int(st, i, op, name, buf) != EM_OK) return EM_EINTERNAL;
    *out = buf;
    return EM_OK;
}
static inline em_status un_list(const em_stack *st, int i, const char *op, const char *name,
                                bool optional, em_intlist *out) {
    const em_ivalue *v = &st->args[i];
    if (v->tag == EM_IV_INTLIST) { *out = v->v.l; return EM_OK; }
    if (v->tag == EM_IV_NONE && optional) { out->data = NULL; out->n = -1; return EM_OK; }
    return bad_arg(st, i, op, name);
}
static inline em_status un_double(const em_stack *st, int i, const char *op, const char *name,
                                  double *out) {
    const em_ivalue *v = &st->args[i];
    if (v->tag == EM_IV_DOUBLE) { *out = v->v.d; return EM_OK; }
    if (v->tag == EM_IV_INT) { *out = (double)v->v.i; return EM_OK; }
    return bad_arg(st, i, op, name);
}
static inline em_status un_bool(const em_stack *st, int i, const char *op, const char *name,
                                bool *out) {
    if (st->args[i].tag != EM_IV_BOOL) return bad_arg(st, i, op, name);
    *out = st->args[i].v.b;
    return EM_OK;
}
static inline em_status un_dtype(const em_stack *st, int i, const char *op, const char *name,
                                 bool optional, em_dtype *out) {
    const em_ivalue *v = &st->args[i];
    if (v->tag == EM_IV_DTYPE) { *out = v->v.dt; return EM_OK; }
    if (v->tag == EM_IV_NONE && optional) { *out = EM_DTYPE_NONE; return EM_OK; }
    return bad_arg(st, i, op, name);
}
static inline __attribute__((unused)) em_status un_tensorlist(const em_stack *st, int i, const char *op,
                                                              const char *name, em_tensorlist *out) {
    if (st->args[i].tag != EM_IV_TENSORLIST) return bad_arg(st, i, op, name);
    *out = st->args[i].v.tl;
    return EM_OK;
}
static inline __attribute__((unused)) em_status un_flist(const em_stack *st, int i, const char *op,
                                                         const char *name, em_floatlist *out) {
    const em_ivalue *v = &st->args[i];
    if (v->tag == EM_IV_FLOATLIST) { *out = v->v.fl; return EM_OK; }
    if (v->tag == EM_IV_NONE) { out->data = NULL; out->n = -1; return EM_OK; }
    return bad_arg(st, i, op, name);
}
static inline __attribute__((unused)) em_status un_str(const em_stack *st, int i, const char *op,
                                                       const char *name, const char **out) {
    if (st->args[i].tag != EM_IV_STRING || !st->args[i].v.str) return bad_arg(st, i, op, name);
    *out = st->args[i].v.str;
    return EM_OK;
}

/* ---- boxed call plumbing ---- */

/* The adapters' checks before unboxing: a kernel at the highest key and the
 * schema's argument count. Returns the kernel, or NULL with the error set. */
static inline void *adapter_kernel(const em_op *op, em_keyset ks, const em_stack *st, int nargs) {
    int k = em_keyset_highest(ks);
    void *fn = (unsigned)k < EM_KEY_COUNT ? op->kernel[k] : NULL;
    if (!fn) {
        em_set_error(EM_EINTERNAL, "%s: no unboxed kernel for dispatch key %s", op->name,
                     k >= 0 && k < EM_KEY_COUNT ? em_key_name((em_dispatch_key)k) : "(none)");
        return NULL;
    }
    if (st->nargs != nargs) {
        em_set_error(EM_EINTERNAL, "%s: boxed call with %d arguments, the schema has %d",
                     op->name, st->nargs, nargs);
        return NULL;
    }
    return fn;
}

/* Stores a kernel's k results (r and the k-1 out-parameters, owned) as the
 * stack's return values. On failure (r NULL) releases any out-parameter the
 * kernel set and returns the error. See Note [Several results] in codegen.h. */
static inline em_status put_results(const em_op *op, em_stack *st, em_tensor *r, em_tensor **outs, int k) {
    if (!r) {
        for (int i = 1; i < k; i++) {
            em_tensor_release(outs[i - 1]);
            outs[i - 1] = NULL;
        }
        if (em_error_kind() != EM_OK) return em_error_kind();
        return em_set_error(EM_EINTERNAL, "%s: kernel failed without setting an error", op->name);
    }
    st->rets[0] = iv_tensor(r);
    for (int i = 1; i < k; i++) {
        if (!outs[i - 1]) {
            st->nrets = i;
            em_stack_clear_rets(st);
            return em_set_error(EM_EINTERNAL, "%s: kernel left result %d unset", op->name, i + 1);
        }
        st->rets[i] = iv_tensor(outs[i - 1]);
    }
    st->nrets = k;
    return EM_OK;
}
static inline __attribute__((unused)) em_status put_result(const em_op *op, em_stack *st, em_tensor *r) {
    return put_results(op, st, r, NULL, 1);
}
/* A Tensor[] result: the array (owned, with its n tensors) as rets[0]. */
static inline __attribute__((unused)) em_status put_list_result(const em_op *op, em_stack *st,
                                                                em_tensor **r, int n) {
    if (!r) {
        if (em_error_kind() != EM_OK) return em_error_kind();
        return em_set_error(EM_EINTERNAL, "%s: kernel failed without setting an error", op->name);
    }
    st->rets[0].tag = EM_IV_TENSORLIST;
    st->rets[0].v.tl.data = r;
    st->rets[0].v.tl.n = n;
    st->nrets = 1;
    return EM_OK;
}

/* Runs a boxed call that resolve chose (fallback, or an unboxed kernel that
 * was registered after the fast path looked) and checks that it left k
 * tensor results (one owned tensor list when list is set) on the stack.
 * EM_OK, or the error with the stack's results released. */
static inline em_status run_boxed(const em_op *op, em_keyset ks, em_stack *st, void *fn,
                           em_boxed_fn boxed, void *ud, int k, bool list) {
    em_status s;
    st->nrets = 0;
    s = fn ? op->call_unboxed_from_boxed(op, ks, st) : boxed(op, ks, st, ud);
    if (s != EM_OK) {
        em_stack_clear_rets(st);
        if (em_error_kind() == EM_OK)
            em_set_error(EM_EINTERNAL, "%s: boxed kernel failed without setting an error", op->name);
        return em_error_kind();
    }
    bool ok = st->nrets == k;
    for (int i = 0; ok && i < k; i++)
        ok = list ? st->rets[i].tag == EM_IV_TENSORLIST && (st->rets[i].v.tl.data || !st->rets[i].v.tl.n)
                  : st->rets[i].tag == EM_IV_TENSOR && st->rets[i].v.t;
    if (!ok) {
        em_stack_clear_rets(st);
        return em_set_error(EM_EINTERNAL, "%s: boxed kernel returned %d values, the schema has %d %s",
                            op->name, st->nrets, k, list ? "tensor list" : "tensor(s)");
    }
    return EM_OK;
}

/* Takes the owned tensor rets[i] off the stack. */
static inline __attribute__((unused)) em_tensor *take_ret(em_stack *st, int i) {
    em_tensor *t = st->rets[i].v.t;
    st->rets[i].tag = EM_IV_NONE;
    return t;
}

#endif
