/* check_autograd.c -- Check suite for the backward engine: dependencies,
 * ordering, accumulation, errors, reentrancy, a fake second device,
 * concurrent backward calls, saved-variable checks, deep graphs. Graphs are
 * built from hand-made nodes so the engine is tested on its own. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"

static em_tensor *filled(int n, float v) {
    em_tensor *t = em_full((em_intlist){ (int64_t[]){ n }, 1 }, em_scalar_float(v), EM_FLOAT32, em_no_device());
    ck_assert_ptr_nonnull(t);
    return t;
}

static float at(em_tensor *t, int i) { return (float)em_load_as_double((float *)em_tensor_data(t) + i, EM_FLOAT32); }

static em_tensor *leaf(int n, float v) {
    em_tensor *t = filled(n, v);
    ck_assert_int_eq(em_set_requires_grad(t, true), EM_OK);
    return t;
}

/* ---- a scaling node: out[j] = grads[0] * factor for every edge ---- */

typedef struct {
    double factor;
    int *order;      /* where to log the run order */
    int id;
    pthread_t *ran_on;
    int fail;        /* apply fails */
} scale_ud;

static _Thread_local int order_pos;
static int order_log[64];

static em_status scale_apply(void *ud_, em_node *node, em_tensor **grads, em_tensor **out) {
    scale_ud *ud = ud_;
    if (ud->order && order_pos < 64) ud->order[order_pos++] = ud->id;
    if (ud->ran_on) *ud->ran_on = pthread_self();
    if (ud->fail) return em_set_error(EM_EVALUE, "deliberate failure");
    if (!grads[0]) return EM_OK;
    for (int j = 0; j < node->num_next; j++) {
        em_tensor *f = em_full((em_intlist){ NULL, 0 }, em_scalar_float(ud->factor), EM_FLOAT32, em_no_device());
        out[j] = em_mul(grads[0], f);
        em_tensor_release(f);
        if (!out[j]) return em_error_kind();
    }
    return EM_OK;
}

static scale_ud *mk_ud(double factor, int id) {
    scale_ud *u = calloc(1, sizeof *u);
    u->factor = factor;
    u->id = id;
    u->order = order_log;
    return u;
}

/* Makes a node over the given inputs and a fresh result tensor y (n elems)
 * whose grad_fn it is. Returns y (owned). */
static em_tensor *apply_node(scale_ud *ud, em_tensor **inputs, int n_in, int n) {
    em_node *node = em_custom_node_new("ScaleBackward", 1, n_in, scale_apply, ud, free);
    ck_assert_ptr_nonnull(node);
    node->owner_thread = false;
    for (int i = 0; i < n_in; i++) node->next[i] = em_gradient_edge(inputs[i]);
    em_tensor *y = filled(n, 0.0f);
    ck_assert_int_eq(em_set_history(y, node, 0), EM_OK);
    em_node_release(node);
    return y;
}

static em_status run_backward(em_tensor *y) {
    em_tensor *g = filled((int)y->numel, 1.0f);
    em_status st = em_backward(&y, &g, 1, NULL, 0, NULL, NULL);
    em_tensor_release(g);
    return st;
}

START_TEST(test_autograd_chain_accumulates) {
    em_tensor *x = leaf(3, 1.0f);
    em_tensor *a = apply_node(mk_ud(2.0, 1), &x, 1, 3);
    em_tensor *b = apply_node(mk_ud(3.0, 2), &a, 1, 3);
    ck_assert_int_eq(run_backward(b), EM_OK);
    em_tensor *g = em_grad(x);
    ck_assert_ptr_nonnull(g);
    ck_assert_float_eq(at(g, 0), 6.0f);
    em_tensor_release(g);
    /* a second backward (no saved values here) accumulates into .grad */
    ck_assert_int_eq(run_backward(b), EM_OK);
    g = em_grad(x);
    ck_assert_float_eq(at(g, 2), 12.0f);
    em_tensor_release(g);
    ck_assert(em_is_leaf(x));
    ck_assert(!em_is_leaf(b));
    ck_assert_str_eq(em_node_name(em_grad_fn(b)), "ScaleBackward");
    em_tensor_release(b); em_tensor_release(a); em_tensor_release(x);
}
END_TEST

/* x feeds a (x2) and b (x3); c = node(a, b) with factor 1: dx = 5; the
 * AccumulateGrad of x receives two gradients summed in its InputBuffer,
 * and c runs before a and b (dependencies). */
START_TEST(test_autograd_diamond_and_order) {
    order_pos = 0;
    em_tensor *x = leaf(2, 1.0f);
    em_tensor *a = apply_node(mk_ud(2.0, 1), &x, 1, 2);
    em_tensor *b = apply_node(mk_ud(3.0, 2), &x, 1, 2);
    em_tensor *ab[2] = { a, b };
    em_tensor *c = apply_node(mk_ud(1.0, 3), ab, 2, 2);
    ck_assert_int_eq(run_backward(c), EM_OK);
    em_tensor *g = em_grad(x);
    ck_assert_float_eq(at(g, 1), 5.0f);
    ck_assert_int_eq(order_pos, 3);
    ck_assert_int_eq(order_log[0], 3);
    /* later-created nodes run first among the ready ones: b before a */
    ck_assert_int_eq(order_log[1], 2);
    ck_assert_int_eq(order_log[2], 1);
    em_tensor_release(g);
    em_tensor_release(c); em_tensor_release(b); em_tensor_release(a); em_tensor_release(x);
}
END_TEST

START_TEST(test_autograd_error_poisons_task) {
    order_pos = 0;
    em_tensor *x = leaf(2, 1.0f);
    scale_ud *bad = mk_ud(2.0, 1);
    bad->fail = 1;
    em_tensor *a = apply_node(mk_ud(2.0, 9), &x, 1, 2);
    em_tensor *b = apply_node(bad, &a, 1, 2);
    em_status st = run_backward(b);
    ck_assert_int_ne(st, EM_OK);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "ScaleBackward"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "deliberate failure"));
    ck_assert_int_eq(order_pos, 1); /* the node after the failing one never ran */
    em_tensor *g = em_grad(x);
    ck_assert_ptr_null(g);
    em_tensor_release(b); em_tensor_release(a); em_tensor_release(x);
}
END_TEST

START_TEST(test_autograd_implicit_grad_rules) {
    em_tensor *x = leaf(3, 1.0f);
    em_tensor *y = apply_node(mk_ud(2.0, 1), &x, 1, 3);
    /* implicit gradient only for single-element outputs */
    ck_assert_int_ne(em_backward(&y, NULL, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{3}"));
    /* a gradient of the wrong shape names both shapes */
    em_tensor *g = filled(2, 1.0f);
    ck_assert_int_ne(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{2}"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{3}"));
    /* a tensor without history */
    em_tensor *plain = filled(1, 1.0f);
    ck_assert_int_ne(em_backward(&plain, NULL, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "does not require grad"));
    em_tensor_release(plain); em_tensor_release(g); em_tensor_release(y); em_tensor_release(x);
}
END_TEST

/* ---- grad(): captures without touching .grad ---- */

START_TEST(test_autograd_grad_captures) {
    em_tensor *x = leaf(2, 1.0f), *w = leaf(2, 1.0f);
    em_tensor *a = apply_node(mk_ud(2.0, 1), &x, 1, 2);
    em_tensor *aw[2] = { a, w };
    em_tensor *y = apply_node(mk_ud(5.0, 2), aw, 2, 2);
    em_tensor *g = filled(2, 1.0f), *out[2] = { NULL, NULL };
    em_backward_opts o = { .retain_graph = true, .accumulate = false };
    em_tensor *inputs[2] = { x, w };
    ck_assert_int_eq(em_backward(&y, &g, 1, inputs, 2, out, &o), EM_OK);
    ck_assert_float_eq(at(out[0], 0), 10.0f);
    ck_assert_float_eq(at(out[1], 0), 5.0f);
    ck_assert_ptr_null(em_grad(x)); /* grad() does not accumulate */
    em_tensor_release(out[0]); em_tensor_release(out[1]);
    /* an input not in the graph: error unless allow_unused */
    em_tensor *z = leaf(2, 1.0f);
    em_tensor *inz[1] = { z };
    ck_assert_int_ne(em_backward(&y, &g, 1, inz, 1, out, &o), EM_OK);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "allow_unused"));
    o.allow_unused = true;
    ck_assert_int_eq(em_backward(&y, &g, 1, inz, 1, out, &o), EM_OK);
    ck_assert_ptr_null(out[0]);
    em_tensor_release(z); em_tensor_release(g); em_tensor_release(y); em_tensor_release(a);
    em_tensor_release(w); em_tensor_release(x);
}
END_TEST

/* ---- saved variables ---- */

typedef struct {
    em_node base;
    em_saved_var saved;
} saving_node;

static em_status saving_apply(em_node *self, em_tensor **grads, em_tensor **out) {
    saving_node *n = (saving_node *)self;
    em_tensor *s = em_saved_unpack(&n->saved, self);
    if (!s) return em_error_kind();
    out[0] = em_mul(grads[0], s);
    em_tensor_release(s);
    return out[0] ? EM_OK : em_error_kind();
}
static void saving_release(em_node *self) { em_saved_release(&((saving_node *)self)->saved); }
static const em_node_vtable saving_vt = { "SavingBackward", saving_apply, saving_release, saving_release };

static em_tensor *saving_op(em_tensor *x, em_tensor *to_save) {
    saving_node *n = (saving_node *)em_node_new(sizeof(saving_node), &saving_vt, 1, 1);
    n->base.next[0] = em_gradient_edge(x);
    em_saved_save(&n->saved, to_save, false);
    em_tensor *y = filled((int)x->numel, 0.0f);
    em_set_history(y, &n->base, 0);
    em_node_release(&n->base);
    return y;
}

START_TEST(test_autograd_retain_graph) {
    em_tensor *x = leaf(2, 1.0f), *s = filled(2, 3.0f);
    em_tensor *y = saving_op(x, s);
    em_tensor *g = filled(2, 1.0f);
    em_backward_opts keep = { .retain_graph = true, .accumulate = true };
    ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, &keep), EM_OK);
    ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK); /* frees */
    em_tensor *gx = em_grad(x);
    ck_assert_float_eq(at(gx, 0), 6.0f);
    em_tensor_release(gx);
    ck_assert_int_ne(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "retain_graph=true"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "SavingBackward"));
    em_tensor_release(g); em_tensor_release(y); em_tensor_release(s); em_tensor_release(x);
}
END_TEST

START_TEST(test_autograd_version_check) {
    em_tensor *x = leaf(2, 1.0f), *s = filled(2, 3.0f);
    em_tensor *y = saving_op(x, s);
    uint32_t v0 = em_tensor_version(s);
    em_tensor *r = em_add_(s, s, em_scalar_int(1)); /* modifies the saved tensor */
    em_tensor_release(r);
    ck_assert_uint_eq(em_tensor_version(s), v0 + 1);
    ck_assert_int_ne(run_backward(y), EM_OK);
    const char *m = em_error_message();
    char want0[32], want1[32];
    snprintf(want0, sizeof want0, "version %u", v0);
    snprintf(want1, sizeof want1, "version %u", v0 + 1);
    ck_assert_ptr_nonnull(strstr(m, "modified by an in-place operation"));
    ck_assert_ptr_nonnull(strstr(m, "SavingBackward"));
    ck_assert_ptr_nonnull(strstr(m, "{2}"));
    ck_assert_ptr_nonnull(strstr(m, want0));
    ck_assert_ptr_nonnull(strstr(m, want1));
    ck_assert_ptr_nonnull(strstr(m, "detect_anomaly"));
    em_tensor_release(y); em_tensor_release(s); em_tensor_release(x);
}
END_TEST

/* Note [Saved numbers]: a wrapped number is saved as its value; unpacking
 * gives a wrapped number of the same dtype and bits, once per backward
 * until the saved values are freed, after which it refuses as a tensor
 * does. */
START_TEST(test_autograd_saved_numbers) {
    static const double vals[] = { 2.5, -0.0, 7.0, 1.0 };
    for (int k = 0; k < 4; k++) {
        em_scalar v = k == 2 ? em_scalar_int(7) : k == 3 ? em_scalar_bool(true) : em_scalar_float(vals[k]);
        em_tensor *x = leaf(2, 1.0f), *w = em_tensor_wrapped_scalar(v);
        ck_assert_ptr_nonnull(w);
        em_tensor *y = saving_op(x, w);
        saving_node *n = (saving_node *)em_grad_fn(y);
        ck_assert(n->saved.is_number);
        ck_assert_ptr_null(n->saved.data); /* no tensor kept */
        em_dtype dt = w->dtype;
        em_tensor_release(w);
        for (int r = 0; r < 2; r++) {
            em_tensor *u = em_saved_unpack(&n->saved, &n->base);
            ck_assert_ptr_nonnull(u);
            ck_assert(u->wrapped_number);
            ck_assert_int_eq(u->ndim, 0);
            ck_assert_int_eq(u->dtype, dt);
            double got = em_load_as_double(em_tensor_data(u), u->dtype);
            ck_assert(got == (k == 2 ? 7.0 : vals[k]));
            if (k == 1) ck_assert(signbit(got)); /* -0 keeps its sign */
            em_tensor_release(u);
        }
        em_tensor *g = filled(2, 1.0f);
        em_backward_opts keep = { .retain_graph = true, .accumulate = true };
        ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, &keep), EM_OK);
        ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK); /* frees */
        ck_assert_int_ne(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK);
        ck_assert_ptr_nonnull(strstr(em_error_message(), "retain_graph=true"));
        em_tensor_release(g); em_tensor_release(y); em_tensor_release(x);
    }
    /* the generated kernels: x * 3 saves 3 as a number, and its gradient is 3 */
    em_tensor *x = leaf(3, 2.0f), *three = em_tensor_wrapped_scalar(em_scalar_float(3.0));
    em_tensor *y = em_mul(x, three);
    em_tensor_release(three);
    ck_assert_int_eq(run_backward(y), EM_OK);
    em_tensor *gx = em_grad(x);
    ck_assert_float_eq(at(gx, 0), 3.0f);
    ck_assert_float_eq(at(gx, 2), 3.0f);
    em_tensor_release(gx); em_tensor_release(y); em_tensor_release(x);
}
END_TEST

/* Note [Saved outputs]: tanh saves its result as the storage; unpacking
 * rebuilds it from the node's meta, version-checked, and after the saved
 * values are freed says so. */
START_TEST(test_autograd_saved_outputs) {
    em_tensor *x = leaf(3, 0.5f);
    em_tensor *y = em_tanh(x);
    ck_assert_ptr_nonnull(y);
    em_tensor *g = filled(3, 1.0f);
    em_backward_opts keep = { .retain_graph = true, .accumulate = true };
    ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, &keep), EM_OK);
    ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK);
    em_tensor *gx = em_grad(x);
    float d = 1.0f - tanhf(0.5f) * tanhf(0.5f);
    ck_assert_float_eq_tol(at(gx, 1), 2 * d, 1e-6f);
    em_tensor_release(gx);
    ck_assert_int_ne(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "retain_graph=true"));
    em_tensor_release(y);
    /* written in place after the forward: the backward refuses, naming it */
    y = em_tanh(x);
    em_tensor *r = em_mul_(y, g);
    em_tensor_release(r);
    ck_assert_int_ne(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "TanhBackward"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "modified by an in-place operation"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{3}"));
    em_tensor_release(y); em_tensor_release(g); em_tensor_release(x);
}
END_TEST

/* Note [Wrapped number cache] (tensor.c): a wrapped number comes back only
 * when nothing else holds it or its storage and it is as it was made. */
START_TEST(test_autograd_wrapped_number_cache) {
    em_tensor *a = em_tensor_wrapped_scalar(em_scalar_float(0.25));
    em_tensor *b = em_tensor_wrapped_scalar(em_scalar_float(0.25));
    ck_assert_ptr_ne(a, b); /* a is held: two numbers, two tensors */
    *(double *)em_tensor_data(a) = 0.5; /* its holder may write it */
    em_tensor_release(a);
    em_tensor_release(b);
    em_tensor *c = em_tensor_wrapped_scalar(em_scalar_float(0.25));
    ck_assert(em_load_as_double(em_tensor_data(c), c->dtype) == 0.25);
    em_tensor *d = em_tensor_wrapped_scalar(em_scalar_int(3));
    ck_assert_int_eq(d->dtype, EM_INT64);
    em_tensor *r = em_add_(c, c, em_scalar_int(1)); /* written in place: version 1 */
    em_tensor_release(r);
    em_tensor_release(c);
    em_tensor *e = em_tensor_wrapped_scalar(em_scalar_float(1.25));
    ck_assert(em_load_as_double(em_tensor_data(e), e->dtype) == 1.25);
    ck_assert_uint_eq(em_tensor_version(e), 0);
    em_tensor *al = em_detach(e); /* an alias holds the storage */
    em_tensor_release(e);
    em_tensor *f = em_tensor_wrapped_scalar(em_scalar_float(1.25));
    ck_assert_ptr_ne(f, al);
    ck_assert_ptr_ne(f->storage, al->storage);
    em_tensor_release(f); em_tensor_release(al); em_tensor_release(d);
    em_memory_empty_cache();
}
END_TEST

/* Note [Version counter sharing]: a tensor made with its storage uses the
 * counter in the storage header. A header on another storage that shares
 * that counter keeps the first storage alive (ASan sees a use after free
 * otherwise), and a fresh counter over a shared storage is its own. */
START_TEST(test_autograd_version_in_storage) {
    em_tensor *a = filled(2, 1.0f), *b = filled(3, 2.0f);
    ck_assert_ptr_eq(a->version, &a->storage->version);
    em_tensor *d = em_detach(a); /* same storage, same counter */
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_eq(d->version, a->version);
    em_tensor *c = em_tensor_new_view(b->storage, 0, 1, (int64_t[]){ 3 }, (int64_t[]){ 1 }, EM_FLOAT32, a->version);
    ck_assert_ptr_nonnull(c);
    em_tensor *f = em_tensor_new_view(a->storage, 0, 1, (int64_t[]){ 2 }, (int64_t[]){ 1 }, EM_FLOAT32, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_ne(f->version, a->version);
    uint32_t v0 = em_tensor_version(a); /* em_full may have written a in place */
    em_tensor *r = em_add_(d, d, em_scalar_int(1));
    em_tensor_release(r);
    ck_assert_uint_eq(em_tensor_version(a), v0 + 1);
    ck_assert_uint_eq(em_tensor_version(c), v0 + 1);
    ck_assert_uint_eq(em_tensor_version(f), 0);
    em_tensor_release(a);
    em_tensor_release(d);
    em_tensor_release(f); /* a's storage now lives through c's counter only */
    em_tensor_release(b);
    em_tensor_bump_version(c);
    ck_assert_uint_eq(em_tensor_version(c), v0 + 2);
    em_tensor_release(c);
}
END_TEST

/* ---- reentrant backward ---- */

static int reentrant_levels;

static em_status reentrant_apply(void *ud, em_node *node, em_tensor **grads, em_tensor **out) {
    int *depth_left = ud;
    reentrant_levels++;
    if (*depth_left > 0) {
        (*depth_left)--;
        /* a nested backward on a fresh little graph from inside a node */
        em_tensor *x = leaf(1, 1.0f);
        em_node *n = em_custom_node_new("Reentrant", 1, 1, reentrant_apply, depth_left, NULL);
        n->next[0] = em_gradient_edge(x);
        em_tensor *y = filled(1, 0.0f);
        em_set_history(y, n, 0);
        em_node_release(n);
        em_status st = em_backward(&y, NULL, 1, NULL, 0, NULL, NULL);
        em_tensor_release(y);
        em_tensor_release(x);
        if (st != EM_OK) return st;
    }
    out[0] = grads[0] ? em_tensor_retain(grads[0]) : NULL;
    return EM_OK;
}

START_TEST(test_autograd_reentrant) {
    int depth_left = 10;
    reentrant_levels = 0;
    em_tensor *x = leaf(1, 1.0f);
    em_node *n = em_custom_node_new("Reentrant", 1, 1, reentrant_apply, &depth_left, NULL);
    n->next[0] = em_gradient_edge(x);
    em_tensor *y = filled(1, 0.0f);
    em_set_history(y, n, 0);
    em_node_release(n);
    ck_assert_int_eq(em_backward(&y, NULL, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_int_eq(reentrant_levels, 11);
    /* beyond the bound: a clear error, not a stack overflow */
    depth_left = 1000;
    ck_assert_int_ne(em_backward(&y, NULL, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "reentrant"));
    em_tensor_release(y); em_tensor_release(x);
}
END_TEST

/* ---- a fake second device: its nodes run on the device's worker ---- */

START_TEST(test_autograd_device_worker_thread) {
    em_tensor *x = leaf(2, 1.0f);
    scale_ud *dev = mk_ud(2.0, 1);
    pthread_t ran_on = pthread_self(), cpu_ran_on = 0;
    dev->ran_on = &ran_on;
    dev->order = NULL;
    em_tensor *a = apply_node(dev, &x, 1, 2);
    /* pretend a's node consumes a tensor on the second device type */
    em_node_input_meta(em_grad_fn(a))[0].device.type = EM_CUDA;
    scale_ud *cpu = mk_ud(3.0, 2);
    cpu->ran_on = &cpu_ran_on;
    cpu->order = NULL;
    em_tensor *b = apply_node(cpu, &a, 1, 2);
    ck_assert_int_eq(run_backward(b), EM_OK);
    ck_assert(!pthread_equal(ran_on, pthread_self()));
    ck_assert(pthread_equal(cpu_ran_on, pthread_self()));
    em_tensor *g = em_grad(x);
    ck_assert_float_eq(at(g, 0), 6.0f);
    /* owner_thread nodes (Lua) stay on the calling thread even then */
    em_grad_fn(a)->owner_thread = true;
    ck_assert_int_eq(run_backward(b), EM_OK);
    ck_assert(pthread_equal(ran_on, pthread_self()));
    em_tensor_release(g); em_tensor_release(b); em_tensor_release(a); em_tensor_release(x);
}
END_TEST

/* ---- two C threads running backward on separate graphs ---- */

static void *backward_worker(void *arg) {
    long k = (long)arg;
    for (int it = 0; it < 300; it++) {
        em_tensor *x = filled(4, 1.0f);
        em_set_requires_grad(x, true);
        scale_ud *u1 = calloc(1, sizeof *u1), *u2 = calloc(1, sizeof *u2);
        u1->factor = (double)k;
        u2->factor = 2.0;
        em_node *n1 = em_custom_node_new("A", 1, 1, scale_apply, u1, free);
        n1->owner_thread = false;
        n1->next[0] = em_gradient_edge(x);
        em_tensor *a = filled(4, 0.0f);
        em_set_history(a, n1, 0);
        em_node_release(n1);
        if (it % 3 == 0) em_node_input_meta(em_grad_fn(a))[0].device.type = EM_CUDA; /* share the worker */
        em_node *n2 = em_custom_node_new("B", 1, 1, scale_apply, u2, free);
        n2->owner_thread = false;
        n2->next[0] = em_gradient_edge(a);
        em_tensor *b = filled(4, 0.0f);
        em_set_history(b, n2, 0);
        em_node_release(n2);
        em_tensor *g = filled(4, 1.0f);
        if (em_backward(&b, &g, 1, NULL, 0, NULL, NULL) != EM_OK) return (void *)1;
        em_tensor *gx = em_grad(x);
        bool ok = gx && at(gx, 3) == (float)(2 * k);
        em_tensor_release(gx); em_tensor_release(g); em_tensor_release(b); em_tensor_release(a);
        em_tensor_release(x);
        if (!ok) return (void *)2;
    }
    return NULL;
}

START_TEST(test_autograd_concurrent_backward) {
    pthread_t t1, t2;
    pthread_create(&t1, NULL, backward_worker, (void *)3L);
    pthread_create(&t2, NULL, backward_worker, (void *)5L);
    void *r1, *r2;
    pthread_join(t1, &r1);
    pthread_join(t2, &r2);
    ck_assert_ptr_null(r1);
    ck_assert_ptr_null(r2);
}
END_TEST

/* ---- Note [Node generations]: tasks that share nodes ---- */

/* x -> a (x2), b (x3) -> c (a, b; x1) -> d (x7): d/dx = 35 per element. */
typedef struct {
    em_tensor *x, *a, *b, *c, *d;
} shared_graph;

/* A scale node's data that logs nothing (threads share these nodes). */
static scale_ud *quiet_ud(double factor) {
    scale_ud *u = mk_ud(factor, 0);
    u->order = NULL;
    return u;
}

static void shared_graph_make(shared_graph *G) {
    G->x = leaf(4, 1.0f);
    G->a = apply_node(quiet_ud(2.0), &G->x, 1, 4);
    G->b = apply_node(quiet_ud(3.0), &G->x, 1, 4);
    em_tensor *ab[2] = { G->a, G->b };
    G->c = apply_node(quiet_ud(1.0), ab, 2, 4);
    G->d = apply_node(quiet_ud(7.0), &G->c, 1, 4);
}

static void shared_graph_free(shared_graph *G) {
    em_tensor_release(G->d); em_tensor_release(G->c); em_tensor_release(G->b);
    em_tensor_release(G->a); em_tensor_release(G->x);
}

/* grad(d, x) with retain_graph, `iters` times; returns NULL when every
 * result was 35 * the seed. */
static void *shared_grad_worker(void *arg) {
    shared_graph *G = arg;
    em_backward_opts o = { .retain_graph = true, .accumulate = false };
    for (int it = 0; it < 300; it++) {
        em_tensor *g = filled(4, (float)(1 + it % 5)), *out = NULL;
        em_status st = em_backward(&G->d, &g, 1, &G->x, 1, &out, &o);
        bool ok = st == EM_OK && out && at(out, 0) == 35.0f * (float)(1 + it % 5) &&
                  at(out, 3) == 35.0f * (float)(1 + it % 5);
        em_tensor_release(out);
        em_tensor_release(g);
        if (!ok) return (void *)1;
    }
    return NULL;
}

/* Three threads run backward over one graph at once: whichever task claims
 * a node first, the others count its dependencies in their side tables,
 * and every result is right. One node runs on the device worker in half
 * the runs so the tasks' items also meet on a shared queue. */
START_TEST(test_autograd_concurrent_shared_graph) {
    shared_graph G;
    shared_graph_make(&G);
    for (int round = 0; round < 2; round++) {
        em_node_input_meta(em_grad_fn(G.b))[0].device.type = round ? EM_CUDA : EM_CPU;
        pthread_t th[3];
        for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, shared_grad_worker, &G), 0);
        for (int i = 0; i < 3; i++) {
            void *r;
            pthread_join(th[i], &r);
            ck_assert_ptr_null(r);
        }
    }
    em_node_input_meta(em_grad_fn(G.b))[0].device.type = EM_CPU;
    /* every claim was handed back: a lone backward claims all nodes again */
    ck_assert_ptr_null(shared_grad_worker(&G));
    em_node *ns[4] = { em_grad_fn(G.a), em_grad_fn(G.b), em_grad_fn(G.c), em_grad_fn(G.d) };
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(atomic_load(&ns[i]->task), 0);
    shared_graph_free(&G);
}
END_TEST

/* Edges to one leaf from several threads, each keeping only a few: the
 * leaf's AccumulateGrad dies and is made again all the time, so threads
 * meet a node whose count is reaching 0 (em_gradient_edge must not revive
 * it), make one outside weak_lock and lose the race to install it. Every
 * edge is an AccumulateGrad of the leaf, and the two edges a thread holds
 * at once are one node (the meta's pointer was live). Run under TSan by
 * make tsan. */
static void *leaf_edge_worker(void *arg) {
    em_tensor *x = arg;
    em_node *keep[2] = { NULL, NULL };
    for (int it = 0; it < 4000; it++) {
        em_edge e = em_gradient_edge(x);
        if (!e.fn || !e.fn->is_accumulate_grad || e.input_nr != 0) return (void *)1;
        em_edge again = em_gradient_edge(x);
        bool same = again.fn == e.fn;
        em_node_release(again.fn);
        if (!same) return (void *)2;
        em_node_release(keep[it % 2]);
        keep[it % 2] = it % 3 ? e.fn : NULL;
        if (!keep[it % 2]) em_node_release(e.fn);
    }
    em_node_release(keep[0]);
    em_node_release(keep[1]);
    return NULL;
}

START_TEST(test_autograd_concurrent_leaf_edges) {
    em_tensor *x = leaf(2, 1.5f);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, leaf_edge_worker, x), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_ptr_null(r);
    }
    /* the leaf still takes its gradient: x.grad = 3 * ones */
    em_tensor *y = apply_node(mk_ud(3.0, 0), &x, 1, 2), *ones = filled(2, 1.0f);
    ck_assert_int_eq(em_backward(&y, &ones, 1, NULL, 0, NULL, NULL), EM_OK);
    em_tensor *g = em_grad(x);
    ck_assert_float_eq(g ? at(g, 1) : 0.0f, 3.0f);
    em_tensor_release(g);
    em_tensor_release(ones);
    em_tensor_release(y);
    em_tensor_release(x);
}
END_TEST

/* A node whose apply runs a nested backward over the outer task's own
 * nodes (which the outer task holds): the inner task keeps its counts in
 * its side table, and both tasks deliver the right gradients. */
static shared_graph *nested_graph;
static int nested_calls;

static em_status nested_apply(void *ud, em_node *node, em_tensor **grads, em_tensor **out) {
    nested_calls++;
    em_tensor *g = filled(4, 1.0f);
    em_backward_opts o = { .retain_graph = true, .accumulate = true };
    em_status st = em_backward(&nested_graph->d, &g, 1, NULL, 0, NULL, &o);
    em_tensor_release(g);
    if (st != EM_OK) return st;
    out[0] = grads[0] ? em_tensor_retain(grads[0]) : NULL;
    return EM_OK;
}

START_TEST(test_autograd_reentrant_shared_nodes) {
    nested_calls = 0;
    shared_graph G;
    shared_graph_make(&G);
    nested_graph = &G;
    /* e = N(d): the outer task reaches d, c, a, b and x's AccumulateGrad
     * before N runs the inner backward from d */
    em_node *n = em_custom_node_new("Nested", 1, 1, nested_apply, NULL, NULL);
    ck_assert_ptr_nonnull(n);
    n->next[0] = em_gradient_edge(G.d);
    em_tensor *e = filled(4, 0.0f);
    ck_assert_int_eq(em_set_history(e, n, 0), EM_OK);
    em_node_release(n);
    em_tensor *g = filled(4, 2.0f);
    em_backward_opts o = { .retain_graph = true, .accumulate = true };
    ck_assert_int_eq(em_backward(&e, &g, 1, NULL, 0, NULL, &o), EM_OK);
    ck_assert_int_eq(nested_calls, 1);
    em_tensor *gx = em_grad(G.x);
    ck_assert_ptr_nonnull(gx);
    ck_assert_float_eq(at(gx, 2), 35.0f * 1 + 35.0f * 2); /* inner (seed 1) + outer (seed 2) */
    em_tensor_release(gx);
    em_tensor_release(g); em_tensor_release(e);
    shared_graph_free(&G);
}
END_TEST

/* Note [Node free lists]: a freed node's block comes back for the next
 * node of its size class with a cleared header. */
START_TEST(test_autograd_node_free_list) {
    em_node *a = em_node_new(sizeof(em_node), NULL, 1, 2);
    ck_assert_ptr_nonnull(a);
    a->owner_thread = true;
    a->saved_released = true;
    atomic_store(&a->task, (uint_fast64_t)5 << 32 | 77);
    em_node *keep = em_node_new(sizeof(em_node), NULL, 1, 1);
    a->next[1] = (em_edge){ keep, 0 };
    em_node_retain(keep);
    em_node_release(a);
    em_node *b = em_node_new(sizeof(em_node), NULL, 1, 2);
    ck_assert_ptr_nonnull(b);
#if !defined(__SANITIZE_ADDRESS__)
    ck_assert_ptr_eq(a, b); /* off under AddressSanitizer, which must see the free */
#endif
    ck_assert(!b->owner_thread && !b->saved_released);
    ck_assert_uint_eq(atomic_load(&b->task), 0);
    ck_assert_ptr_null(b->next[0].fn);
    ck_assert_ptr_null(b->next[1].fn);
    ck_assert_ptr_null(em_node_pre_hooks(b));
    ck_assert_int_eq(atomic_load(&keep->refcount), 1);
    em_node_release(b);
    em_node_release(keep);
}
END_TEST

/* Note [Node header], Note [Node size classes]: the nodes of the 1M scalar
 * chain (y * 0.999, y + 0.001, tanh on a 1-element float32 tensor) fill
 * malloc chunks of 192, 160 and 144 bytes (free-list classes 12, 10, 9),
 * the bench's bytes per node; and a node's input metas sit after its edges. */
START_TEST(test_autograd_scalar_chain_node_bytes) {
    em_tensor *x = leaf(1, 0.5f);
    em_tensor *w = em_tensor_wrapped_scalar(em_scalar_float(0.999));
    em_tensor *m = em_mul(x, w);
    em_tensor_release(w);
    w = em_tensor_wrapped_scalar(em_scalar_float(0.001));
    em_tensor *a = em_add(m, w, em_scalar_int(1));
    em_tensor *t = em_tanh(a);
    ck_assert_ptr_nonnull(t);
    const em_node *nodes[3] = { em_grad_fn(m), em_grad_fn(a), em_grad_fn(t) };
    const int classes[3] = { 12, 10, 9 };
    for (int i = 0; i < 3; i++) {
        ck_assert_ptr_nonnull(nodes[i]);
#if !defined(__SANITIZE_ADDRESS__) /* no free lists, so no classes, under AddressSanitizer */
        ck_assert_int_le(nodes[i]->alloc_class, classes[i]);
        ck_assert_int_gt(nodes[i]->alloc_class, 0);
#else
        (void)classes;
#endif
        const em_input_meta *im = em_node_input_meta(nodes[i]);
        ck_assert_ptr_eq(im, (const void *)(nodes[i]->next + nodes[i]->num_next));
        ck_assert_int_eq(im[0].ndim, 1);
        ck_assert_int_eq(im[0].sizes[0], 1);
        ck_assert_int_eq(im[0].dtype, EM_FLOAT32);
    }
    em_tensor_release(w);
    em_tensor_release(t);
    em_tensor_release(a);
    em_tensor_release(m);
    em_tensor_release(x);
}
END_TEST

/* Threads that make and free graphs and exit: their free lists go with
 * them (valgrind / LeakSanitizer see no leak, and nothing crashes). */
static void *graph_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 50; i++) {
        em_tensor *x = leaf(2, 1.0f);
        em_tensor *a = apply_node(quiet_ud(2.0), &x, 1, 2);
        em_tensor_release(a);
        em_tensor_release(x);
    }
    return NULL;
}

START_TEST(test_autograd_free_list_thread_exit) {
    for (int r = 0; r < 8; r++) {
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, graph_thread, NULL), 0);
        pthread_join(th, NULL);
    }
}
END_TEST

/* ---- a chain of a million nodes: no recursion on depth ---- */

START_TEST(test_autograd_deep_chain) {
    const int N = 1000000;
    em_tensor *x = leaf(1, 1.0f);
    em_tensor *cur = em_tensor_retain(x);
    for (int i = 0; i < N; i++) {
        scale_ud *u = mk_ud(1.0, 0);
        u->order = NULL;
        em_node *n = em_custom_node_new("Step", 1, 1, scale_apply, u, free);
        n->owner_thread = false;
        n->next[0] = em_gradient_edge(cur);
        em_tensor *y = filled(1, 0.0f);
        em_set_history(y, n, 0);
        em_node_release(n);
        em_tensor_release(cur);
        cur = y;
    }
    ck_assert_int_eq(run_backward(cur), EM_OK);
    em_tensor *g = em_grad(x);
    ck_assert_float_eq(at(g, 0), 1.0f);
    em_tensor_release(g);
    em_memory_stats before;
    em_memory_get_stats(&before);
    em_tensor_release(cur); /* frees a million nodes and tensors iteratively */
    em_memory_stats after;
    em_memory_get_stats(&after);
    ck_assert(after.allocated < before.allocated);
    em_tensor_release(x);
}
END_TEST

/* ---- generated kernels: in-place rules (Note [View history]) ---- */

START_TEST(test_autograd_inplace_rules) {
    em_tensor *x = leaf(3, 2.0f), *one = filled(3, 1.0f);
    /* a leaf that requires grad cannot be written in place... */
    ck_assert_ptr_null(em_add_(x, one, em_scalar_int(1)));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "leaf"));
    /* ...nor through a view of it */
    em_tensor *v = em_narrow(x, 0, 0, 2);
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_null(em_mul_(v, v));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "view"));
    /* a view of a non-leaf result may be written: its base's history
     * becomes a CopySlices around the write, and the view's is rebuilt */
    em_tensor *y = em_mul(x, x);
    em_tensor *w = em_narrow(y, 0, 1, 2), *two = filled(2, 1.0f);
    em_tensor *wr = em_add_(w, two, em_scalar_int(1));
    ck_assert_ptr_nonnull(wr);
    em_tensor_release(wr);
    ck_assert_str_eq(em_node_name(em_grad_fn(y)), "CopySlices");
    ck_assert_str_eq(em_node_name(em_grad_fn(w)), "AsStridedBackward");
    /* in-place on the non-leaf itself records: d/dx sum(x*x + 1) = 2x */
    em_tensor *r = em_add_(y, one, em_scalar_int(1));
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(em_node_name(em_grad_fn(y)), "AddBackward");
    em_tensor *s = em_sum(y, (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE);
    ck_assert_int_eq(em_backward(&s, NULL, 1, NULL, 0, NULL, NULL), EM_OK);
    em_tensor *g = em_grad(x);
    ck_assert_float_eq(at(g, 0), 4.0f);
    /* under no-grad the leaf may be updated (an optimizer step) */
    em_grad_guard gm = em_grad_guard_begin(false);
    em_tensor *u = em_sub_(x, g, em_scalar_float(0.5));
    em_grad_guard_end(gm);
    ck_assert_ptr_nonnull(u);
    ck_assert_float_eq(at(x, 1), 0.0f);
    em_tensor_release(u); em_tensor_release(g); em_tensor_release(s); em_tensor_release(r);
    em_tensor_release(w); em_tensor_release(two); em_tensor_release(y); em_tensor_release(v);
    em_tensor_release(one);
    em_tensor_release(x);
}
END_TEST

/* Note [Grad mode guard]: guards nest and restore the caller's mode, and
 * the engine leaves the caller's mode as it found it -- after a
 * create_graph backward, a failing one, and one started under no_grad. */
START_TEST(test_autograd_grad_guard) {
    em_set_grad_enabled(true);
    em_grad_guard g1 = em_grad_guard_begin(false);
    ck_assert(!em_is_grad_enabled());
    em_grad_guard g2 = em_grad_guard_begin(true);
    ck_assert(em_is_grad_enabled());
    em_grad_guard_end(g2);
    ck_assert(!em_is_grad_enabled());
    em_grad_guard_end(g1);
    ck_assert(em_is_grad_enabled());

    em_tensor *x = leaf(2, 1.0f);
    em_tensor *y = apply_node(mk_ud(2.0, 1), &x, 1, 2);
    scale_ud *bad = mk_ud(1.0, 2);
    bad->fail = 1;
    em_tensor *z = apply_node(bad, &y, 1, 2);
    em_tensor *g = filled(2, 1.0f);
    em_backward_opts cg = { true, true, true, false };
    for (int on = 0; on < 2; on++) {
        em_set_grad_enabled(on);
        ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, &cg), EM_OK);
        ck_assert_int_eq(em_is_grad_enabled(), on);
        ck_assert_int_eq(em_backward(&z, &g, 1, NULL, 0, NULL, &cg), EM_EVALUE);
        ck_assert_ptr_nonnull(strstr(em_error_message(), "deliberate failure"));
        ck_assert_int_eq(em_is_grad_enabled(), on);
    }
    em_set_grad_enabled(true);
    em_tensor_release(g); em_tensor_release(z); em_tensor_release(y); em_tensor_release(x);
}
END_TEST

/* A custom node's release_saved callback (em_custom_node_set_release) runs
 * once the node has run in a backward without retain_graph, never with it,
 * and the node then counts as released. */
static int released_count;
static void count_release(void *ud) { (void)ud; released_count++; }

START_TEST(test_autograd_custom_node_release) {
    released_count = 0;
    em_tensor *x = leaf(2, 1.0f);
    em_tensor *y = apply_node(mk_ud(2.0, 1), &x, 1, 2);
    em_node *n = em_grad_fn(y);
    ck_assert_int_eq(em_custom_node_set_release(n, count_release), EM_OK);
    em_tensor *g = filled(2, 1.0f);
    em_backward_opts keep = { true, false, true, false };
    ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, &keep), EM_OK);
    ck_assert_int_eq(released_count, 0);
    ck_assert(!n->saved_released);
    ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_int_eq(released_count, 1);
    ck_assert(n->saved_released);
    em_tensor *gx = em_grad(x);
    ck_assert_float_eq(at(gx, 0), 4.0f);
    ck_assert_int_eq(em_custom_node_set_release(n, NULL), EM_OK); /* removed: nothing is called */
    ck_assert_int_eq(em_backward(&y, &g, 1, NULL, 0, NULL, NULL), EM_OK);
    ck_assert_int_eq(released_count, 1);
    /* only custom nodes take one */
    em_tensor *w = em_mul(y, y);
    ck_assert_int_eq(em_custom_node_set_release(em_grad_fn(w), count_release), EM_EVALUE);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "MulBackward is not a custom node"));
    em_tensor_release(w);
    em_tensor_release(gx); em_tensor_release(g); em_tensor_release(y); em_tensor_release(x);
}
END_TEST

Suite *make_autograd_suite(void) {
    Suite *s = suite_create("autograd");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_autograd_chain_accumulates);
    tcase_add_test(tc, test_autograd_diamond_and_order);
    tcase_add_test(tc, test_autograd_error_poisons_task);
    tcase_add_test(tc, test_autograd_implicit_grad_rules);
    tcase_add_test(tc, test_autograd_grad_captures);
    tcase_add_test(tc, test_autograd_retain_graph);
    tcase_add_test(tc, test_autograd_version_check);
    tcase_add_test(tc, test_autograd_saved_numbers);
    tcase_add_test(tc, test_autograd_saved_outputs);
    tcase_add_test(tc, test_autograd_wrapped_number_cache);
    tcase_add_test(tc, test_autograd_version_in_storage);
    tcase_add_test(tc, test_autograd_reentrant);
    tcase_add_test(tc, test_autograd_device_worker_thread);
    tcase_add_test(tc, test_autograd_concurrent_backward);
    tcase_add_test(tc, test_autograd_concurrent_shared_graph);
    tcase_add_test(tc, test_autograd_concurrent_leaf_edges);
    tcase_add_test(tc, test_autograd_reentrant_shared_nodes);
    tcase_add_test(tc, test_autograd_node_free_list);
    tcase_add_test(tc, test_autograd_scalar_chain_node_bytes);
    tcase_add_test(tc, test_autograd_free_list_thread_exit);
    tcase_add_test(tc, test_autograd_deep_chain);
    tcase_add_test(tc, test_autograd_inplace_rules);
    tcase_add_test(tc, test_autograd_grad_guard);
    tcase_add_test(tc, test_autograd_custom_node_release);
    suite_add_tcase(s, tc);
    return s;
}
