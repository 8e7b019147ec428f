/* dispatch.c -- registration into the per-op kernel tables, fallbacks,
 * thread-local key sets and the slow path of a call (boxed fallbacks).
 * See Note [How a call is dispatched] in em_dispatch.h. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dispatch/em_dispatch.h"
#include "em_ops.h" /* generated: em_op_table[EM_OP_COUNT] */

static const int em_op_table_count = EM_OP_COUNT;

_Thread_local em_tls_keys em_disp_tls_keys;

/* Boxed fallbacks per key (e.g. tracing). Registration is rare and happens
 * before ops run concurrently; readers take a snapshot without locking. */
static em_boxed_fn fallback_fn[EM_KEY_COUNT];
static void *fallback_ud[EM_KEY_COUNT];
static em_keyset global_fallthrough;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

int em_disp_op_count(void) { return em_op_table_count; }

em_op *em_disp_op(int id) {
    if (id < 0 || id >= em_op_table_count) {
        em_set_error(EM_EINDEX, "dispatch: no op with id %d", id);
        return NULL;
    }
    return &em_op_table[id];
}

em_op *em_disp_find_op(const char *name) {
    for (int i = 0; i < em_op_table_count; i++)
        if (strcmp(em_op_table[i].name, name) == 0) return &em_op_table[i];
    em_set_error(EM_EVALUE, "dispatch: no op named '%s'", name ? name : "(null)");
    return NULL;
}

/* Recompute op->active: keys that have something to run (an unboxed kernel
 * or a boxed fallback), minus fallthroughs. Called with reg_lock held. */
static void refresh_active(em_op *op) {
    em_keyset fb = 0;
    for (int k = 0; k < EM_KEY_COUNT; k++)
        if (fallback_fn[k]) fb |= EM_KS(k);
    op->active = (op->has_kernel | fb) & ~(op->fallthrough | global_fallthrough);
}

static void refresh_all(void) {
    for (int i = 0; i < em_op_table_count; i++) refresh_active(&em_op_table[i]);
}

static em_status check_key(em_dispatch_key key, const char *what) {
    if ((int)key < 0 || key >= EM_KEY_COUNT)
        return em_set_error(EM_EVALUE, "%s: dispatch key %d out of range", what, (int)key);
    return EM_OK;
}

em_status em_disp_register_kernel(em_op *op, em_dispatch_key key, void *kernel) {
    if (!op || !kernel) return em_set_error(EM_EVALUE, "register_kernel: op and kernel must not be NULL");
    if (check_key(key, "register_kernel")) return EM_EVALUE;
    pthread_mutex_lock(&reg_lock);
    op->kernel[key] = kernel;
    op->has_kernel |= EM_KS(key);
    refresh_active(op);
    pthread_mutex_unlock(&reg_lock);
    return EM_OK;
}

void em_disp_deregister_kernel(em_op *op, em_dispatch_key key) {
    if (!op || (int)key < 0 || key >= EM_KEY_COUNT) return;
    pthread_mutex_lock(&reg_lock);
    op->kernel[key] = NULL;
    op->has_kernel &= ~EM_KS(key);
    refresh_active(op);
    pthread_mutex_unlock(&reg_lock);
}

em_status em_disp_register_fallthrough(em_op *op, em_dispatch_key key) {
    if (check_key(key, "register_fallthrough")) return EM_EVALUE;
    pthread_mutex_lock(&reg_lock);
    if (op) {
        op->fallthrough |= EM_KS(key);
        refresh_active(op);
    } else {
        global_fallthrough |= EM_KS(key);
        refresh_all();
    }
    pthread_mutex_unlock(&reg_lock);
    return EM_OK;
}

em_status em_disp_register_fallback(em_dispatch_key key, em_boxed_fn fn, void *ud) {
    if (check_key(key, "register_fallback")) return EM_EVALUE;
    pthread_mutex_lock(&reg_lock);
    fallback_fn[key] = fn;
    fallback_ud[key] = fn ? ud : NULL;
    if (fn) global_fallthrough &= ~EM_KS(key);
    refresh_all();
    pthread_mutex_unlock(&reg_lock);
    return EM_OK;
}

void *em_disp_resolve(const em_op *op, em_keyset ks, int *key_out, em_boxed_fn *boxed, void **boxed_ud) {
    *boxed = NULL;
    *boxed_ud = NULL;
    int k = em_keyset_highest(ks);
    if (key_out) *key_out = k;
    if (k < 0) {
        /* the arguments' backend keys were masked away: none has a kernel
         * (a tensor on a device whose backend lacks this op) */
        char have[128] = "";
        size_t off = 0;
        for (int b = 0; b < EM_KEY_AUTOGRAD && off < sizeof have; b++)
            if (op->has_kernel & EM_KS(b))
                off += (size_t)snprintf(have + off, sizeof have - off, "%s%s", off ? ", " : "",
                                        em_key_name((em_dispatch_key)b));
        em_set_error(EM_EDEVICE, "%s: no kernel for the arguments' device (%s has kernels for: %s)",
                     op->name, op->name, off ? have : "none");
        return NULL;
    }
    if (k >= EM_KEY_COUNT) {
        em_set_error(EM_EINTERNAL, "%s: dispatch key bit %d is not a known key", op->name, k);
        return NULL;
    }
    if (op->kernel[k]) return op->kernel[k];
    if (fallback_fn[k]) {
        *boxed = fallback_fn[k];
        *boxed_ud = fallback_ud[k];
        return NULL;
    }
    em_set_error(EM_EDEVICE, "%s: no kernel registered for dispatch key %s", op->name,
                 em_key_name((em_dispatch_key)k));
    return NULL;
}

em_status em_disp_call_boxed(const em_op *op, em_keyset ks, em_stack *st) {
    ks &= op->active;
    em_boxed_fn boxed;
    void *ud;
    int k;
    void *fn = em_disp_resolve(op, ks, &k, &boxed, &ud);
    if (fn) return op->call_unboxed_from_boxed(op, ks, st);
    if (boxed) return boxed(op, ks, st, ud);
    return em_error_kind() ? em_error_kind() : EM_EINTERNAL;
}

void em_stack_clear_rets(em_stack *st) {
    for (int i = 0; i < st->nrets; i++) {
        if (st->rets[i].tag == EM_IV_TENSOR) em_tensor_release(st->rets[i].v.t);
        if (st->rets[i].tag == EM_IV_TENSORLIST)
            em_tensors_free((em_tensor **)st->rets[i].v.tl.data, st->rets[i].v.tl.n);
        st->rets[i].tag = EM_IV_NONE;
    }
    st->nrets = 0;
}
