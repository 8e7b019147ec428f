/* meta.c -- per-tensor autograd state: requires_grad, leaves, .grad,
 * grad_fn, history, detach, tensor hooks and AccumulateGrad. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "autograd/em_ag_alloc.h"
#include "em_kernels_decl.h"
#include "em_ops.h"

/* Note [AccumulateGrad is weak]
 * A leaf's meta points at its AccumulateGrad node without owning it, and
 * the node points back at the meta without owning the leaf: the graph
 * (edges of later nodes) keeps the node alive, the user keeps the leaf
 * alive, and neither keeps the other, so no cycle forms. Both pointers are
 * cleared under weak_lock by whichever side dies first. The one exception
 * is the alias of a saved leaf (Note [Saved leaves and views]), whose meta
 * owns its reference: a node's weak_var is only ever its leaf's own meta, so
 * a meta whose accumulator's weak_var is not itself holds a reference to
 * drop. The meta's pointer is atomic so that the meta's last owner can skip
 * the lock when it reads NULL (the non-leaves a graph frees by the
 * thousand): an acquire load of NULL means either no node was ever made or
 * its destroy already cleared the pointer, and that destroy touches the
 * meta no more after.
 *
 * weak_lock is a test-and-set lock, not a mutex: every op on a leaf takes
 * it (em_gradient_edge upgrades the weak pointer), and it is only ever
 * held for a few loads and stores (em_gradient_edge makes a missing node
 * outside it), so one locked exchange and a plain store replace the
 * mutex's two locked instructions and two calls; a waiter yields its time
 * slice. */
static atomic_flag weak_flag = ATOMIC_FLAG_INIT;
static inline void weak_lock(void) {
    while (atomic_flag_test_and_set_explicit(&weak_flag, memory_order_acquire)) sched_yield();
}
static inline void weak_unlock(void) { atomic_flag_clear_explicit(&weak_flag, memory_order_release); }

/* An AccumulateGrad node (Note [Node extras]: the weak pointer lives here,
 * not in every node). Every node with is_accumulate_grad is one. */
typedef struct {
    em_node base;
    em_ag_meta *weak_var;       /* its leaf's meta (weak), under weak_lock */
} accumulate_node;
#define ACC(n) ((accumulate_node *)(n))

/* Unlinks and returns the retain_grad hook of meta m from node n (NULL
 * when there is none). */
static em_hook *take_retain_hook(em_ag_meta *m, em_node *n) {
    if (!n->extra) return NULL;
    for (em_hook **h = &n->extra->pre_hooks; *h; h = &(*h)->next) {
        if ((*h)->retains_grad && (*h)->ud == m) {
            em_hook *found = *h;
            *h = found->next;
            found->next = NULL;
            return found;
        }
    }
    return NULL;
}

/* Ends retain_grad on m: frees its hook and drops the node holding it. */
static void drop_retain_hook(em_ag_meta *m) {
    if (m->retain_fn) free(take_retain_hook(m, m->retain_fn));
    em_node_release(m->retain_fn);
    m->retain_fn = NULL;
    m->retains_grad = false;
}

static void meta_free(void *p) {
    em_ag_meta *m = p;
    if (!m) return;
    drop_retain_hook(m);
    if (atomic_load_explicit(&m->grad_accumulator, memory_order_acquire)) {
        em_node *owned = NULL;
        weak_lock();
        em_node *acc = atomic_load_explicit(&m->grad_accumulator, memory_order_relaxed);
        if (acc) {
            if (ACC(acc)->weak_var == m) ACC(acc)->weak_var = NULL;
            else owned = acc; /* a saved leaf's alias: Note [Saved leaves and views] */
        }
        atomic_store_explicit(&m->grad_accumulator, NULL, memory_order_relaxed);
        weak_unlock();
        em_node_release(owned); /* outside weak_lock: its destroy takes it */
    }
    em_tensor_release(m->grad);
    em_node_release(m->grad_fn);
    em_ag_free_hooks(m->hooks);
    em_ag_small_free(m, sizeof *m);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void do_init(void) { em_core_set_autograd_meta_free(meta_free); }
void em_autograd_init(void) { pthread_once(&init_once, do_init); }

static em_ag_meta *get_meta(em_tensor *t, bool create) {
    if (t->autograd_meta || !create) return t->autograd_meta;
    em_autograd_init();
    /* from the node free lists: one recorded op makes one meta and the
     * graph frees it with the node (Note [Node free lists]) */
    em_ag_meta *m = em_ag_small_alloc(sizeof *m);
    if (m) memset(m, 0, sizeof *m);
    if (!m) {
        em_set_error(EM_ENOMEM, "autograd: out of memory");
        return NULL;
    }
    m->owner = t;
    t->autograd_meta = m;
    return m;
}

static void refresh_key(em_tensor *t) {
    em_ag_meta *m = t->autograd_meta;
    /* views keep the key: Note [View history] */
    if ((m && (m->requires_grad || m->grad_fn)) || t->view_base) t->keyset |= EM_KS(EM_KEY_AUTOGRAD);
    else t->keyset &= ~EM_KS(EM_KEY_AUTOGRAD);
}

/* ---- tensor-level API ---- */

bool em_requires_grad(const em_tensor *t) {
    em_ag_maybe_sync(t);
    const em_ag_meta *m = t ? t->autograd_meta : NULL;
    if (m && (m->requires_grad || m->grad_fn)) return true;
    /* a view requires grad when its base does, even one made in no_grad
     * mode that has no history of its own (PyTorch's
     * DifferentiableViewMeta): ops on it record, with no edge to it */
    const em_tensor *b = t ? t->view_base : NULL;
    const em_ag_meta *bm = b ? b->autograd_meta : NULL;
    return bm && (bm->requires_grad || bm->grad_fn);
}

bool em_is_leaf(const em_tensor *t) {
    em_ag_maybe_sync(t);
    const em_ag_meta *m = t ? t->autograd_meta : NULL;
    return !m || !m->grad_fn;
}

em_status em_set_requires_grad(em_tensor *t, bool on) {
    if (!t) return em_set_error(EM_EVALUE, "requires_grad_: tensor is NULL");
    if (!em_is_leaf(t)) {
        if (on) return EM_OK;
        return em_set_error(EM_EVALUE,
                            "requires_grad_: you can only change requires_grad of leaf tensors; "
                            "use detach() to get a tensor without history");
    }
    if (on && !em_dtype_is_floating(t->dtype))
        return em_set_error(EM_ETYPE, "requires_grad_: only floating point tensors can require "
                                      "gradients (got %s)", em_dtype_name(t->dtype));
    em_ag_meta *m = get_meta(t, on);
    if (!m) return on ? EM_ENOMEM : EM_OK;
    m->requires_grad = on;
    refresh_key(t);
    return EM_OK;
}

em_tensor *em_grad(const em_tensor *t) {
    const em_ag_meta *m = t ? t->autograd_meta : NULL;
    return m && m->grad ? em_tensor_retain(m->grad) : NULL;
}

em_status em_set_grad(em_tensor *t, em_tensor *g) {
    if (!t) return em_set_error(EM_EVALUE, "grad: tensor is NULL");
    if (g && (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim))) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        return em_set_error(EM_ESHAPE, "grad: assigned grad has shape %s but the tensor has shape %s",
                            em_shape_str(g->ndim, g->sizes, a, sizeof a),
                            em_shape_str(t->ndim, t->sizes, b, sizeof b));
    }
    em_ag_meta *m = get_meta(t, g != NULL);
    if (!m) return g ? EM_ENOMEM : EM_OK;
    em_tensor *old = m->grad;
    m->grad = em_tensor_retain(g);
    em_tensor_release(old);
    return EM_OK;
}

em_node *em_grad_fn(const em_tensor *t) {
    em_ag_maybe_sync(t);
    const em_ag_meta *m = t ? t->autograd_meta : NULL;
    return m ? m->grad_fn : NULL;
}

static em_hook *new_hook(void *fn, void *ud, void (*free_ud)(void *), int slot);
static void append_hook(em_hook **list, em_hook *h);

/* The pre-hook behind retain_grad(): stores the gradient flowing into the
 * tensor's slot of its grad_fn as its .grad (ud is the tensor's meta, which
 * removes this hook when it dies). */
static em_tensor *retain_grad_hook(void *ud, em_tensor *grad) {
    em_ag_meta *m = ud;
    if (!m->grad) {
        m->grad = em_is_grad_enabled() ? em_tensor_retain(grad) : em_clone(grad);
    } else {
        em_tensor *sum = em_add(m->grad, grad, em_scalar_int(1));
        if (!sum) return NULL;
        em_tensor_release(m->grad);
        m->grad = sum;
    }
    if (!m->grad) return NULL;
    em_clear_error();
    return NULL; /* the gradient itself is unchanged */
}

em_status em_retain_grad(em_tensor *t) {
    if (!em_requires_grad(t)) /* syncs a view's history first */
        return em_set_error(EM_EVALUE, "retain_grad: can't retain the grad of a tensor that does not require grad");
    if (em_is_leaf(t)) return EM_OK; /* leaves keep their grad anyway */
    em_ag_meta *m = t->autograd_meta;
    if (m->retains_grad) return EM_OK;
    if (!em_node_extras(m->grad_fn)) return EM_ENOMEM;
    em_hook *h = new_hook((void *)retain_grad_hook, m, NULL, (int)m->output_nr);
    if (!h) return EM_ENOMEM;
    h->retains_grad = true;
    append_hook(&m->grad_fn->extra->pre_hooks, h);
    m->retains_grad = true;
    em_node_retain(m->grad_fn);
    m->retain_fn = m->grad_fn;
    return EM_OK;
}

em_tensor *em_detach(const em_tensor *t) {
    em_tensor *d = em_core_alias(t);
    if (!d) return NULL;
    d->autograd_meta = NULL;
    d->keyset = EM_KS(em_backend_key(d->device));
    return d;
}

/* ---- hooks ---- */

static int next_hook_id = 1;

static em_hook *new_hook(void *fn, void *ud, void (*free_ud)(void *), int slot) {
    em_hook *h = em_ag_calloc(1, sizeof *h);
    if (!h) {
        em_set_error(EM_ENOMEM, "register_hook: out of memory");
        return NULL;
    }
    h->fn = fn;
    h->ud = ud;
    h->free_ud = free_ud;
    h->slot = slot;
    h->id = __atomic_fetch_add(&next_hook_id, 1, __ATOMIC_RELAXED);
    return h;
}

static void append_hook(em_hook **list, em_hook *h) {
    while (*list) list = &(*list)->next;
    *list = h;
}

static bool remove_hook(em_hook **list, int id) {
    for (; *list; list = &(*list)->next) {
        if ((*list)->id == id) {
            em_hook *h = *list;
            *list = h->next;
            if (h->free_ud) h->free_ud(h->ud);
            free(h);
            return true;
        }
    }
    return false;
}

int em_register_hook(em_tensor *t, em_grad_hook_fn fn, void *ud, void (*free_ud)(void *)) {
    if (!em_requires_grad(t)) {
        em_set_error(EM_EVALUE, "register_hook: cannot register a hook on a tensor that doesn't require gradient");
        return -1;
    }
    em_ag_meta *m = t->autograd_meta;
    if (m->grad_fn && !em_node_extras(m->grad_fn)) return -1;
    em_hook *h = new_hook((void *)fn, ud, free_ud, (int)m->output_nr);
    if (!h) return -1;
    if (m->grad_fn) {
        append_hook(&m->grad_fn->extra->pre_hooks, h);
        if (free_ud) m->grad_fn->owner_thread = true; /* Lua hooks run on the Lua thread */
    } else {
        h->slot = 0;
        append_hook(&m->hooks, h);
        weak_lock();
        em_node *acc = atomic_load_explicit(&m->grad_accumulator, memory_order_relaxed);
        if (acc && free_ud) acc->owner_thread = true;
        weak_unlock();
    }
    return h->id;
}

em_status em_remove_hook(em_tensor *t, int id) {
    em_ag_meta *m = t ? t->autograd_meta : NULL;
    if (m && (remove_hook(&m->hooks, id) || (m->grad_fn && m->grad_fn->extra && remove_hook(&m->grad_fn->extra->pre_hooks, id))))
        return EM_OK;
    return em_set_error(EM_EVALUE, "remove: no hook with handle %d on this tensor", id);
}

int em_node_register_hook(em_node *n, em_node_hook_fn fn, void *ud, void (*free_ud)(void *)) {
    if (!em_node_extras(n)) return -1;
    em_hook *h = new_hook((void *)fn, ud, free_ud, 0);
    if (!h) return -1;
    append_hook(&n->extra->post_hooks, h);
    if (free_ud) n->owner_thread = true;
    return h->id;
}

em_status em_node_remove_hook(em_node *n, int id) {
    if (n && n->extra && remove_hook(&n->extra->post_hooks, id)) return EM_OK;
    return em_set_error(EM_EVALUE, "remove: no hook with handle %d on this node", id);
}

/* ---- AccumulateGrad ---- */

/* Takes the leaf (strong) if it is still alive, under weak_lock. */
static em_tensor *lock_leaf(em_node *self) {
    em_tensor *leaf = NULL;
    weak_lock();
    em_ag_meta *m = ACC(self)->weak_var;
    if (m) {
        long c = atomic_load(&m->owner->refcount);
        while (c > 0 && !atomic_compare_exchange_weak(&m->owner->refcount, &c, c + 1)) {}
        if (c > 0) leaf = m->owner;
    }
    weak_unlock();
    return leaf;
}

static em_tensor *run_grad_hooks(em_hook *h, em_tensor *grad) {
    for (; h && grad; h = h->next) {
        em_clear_error();
        em_tensor *r = ((em_grad_hook_fn)h->fn)(h->ud, grad);
        if (r) {
            em_tensor_release(grad);
            grad = r;
        } else if (em_error_kind() != EM_OK) {
            em_tensor_release(grad);
            return NULL;
        }
    }
    return grad;
}

/* Can AccumulateGrad take grad's storage although grad is a view? Yes when
 * grad is contiguous, covers its whole storage, has no history, and only
 * it and its root base (referenced by nothing but grad, without history)
 * hold the storage: the engine's slot and accumulate_apply's retain are
 * grad's only owners, as for the plain steal. */
static bool stealable_view(const em_tensor *grad) {
    const em_tensor *base = grad->view_base;
    return base && atomic_load(&grad->refcount) <= 2 && atomic_load(&base->refcount) == 1 &&
           !base->autograd_meta && !grad->autograd_meta && base->storage == grad->storage &&
           atomic_load(&grad->storage->refcount) == 2 && grad->storage->allocator && grad->is_contiguous &&
           grad->offset == 0 && (size_t)grad->numel * em_dtype_size(grad->dtype) == grad->storage->nbytes;
}

static em_status accumulate_apply(em_node *self, em_tensor **grads, em_tensor **out) {
    (void)out;
    em_tensor *leaf = lock_leaf(self);
    if (!leaf || !grads[0]) {
        em_tensor_release(leaf);
        return EM_OK;
    }
    em_ag_meta *m = leaf->autograd_meta;
    em_tensor *grad = em_tensor_retain(grads[0]);
    if (m->hooks) {
        grad = run_grad_hooks(m->hooks, grad);
        if (!grad) {
            em_tensor_release(leaf);
            return em_error_kind() ? em_error_kind() : EM_EINTERNAL;
        }
    }
    em_status st = EM_OK;
    if (!m->grad) {
        if (!em_is_grad_enabled() && atomic_load(&grad->refcount) <= 2 && grad->is_contiguous &&
            atomic_load(&grad->storage->refcount) == 1 &&
            !grad->autograd_meta && grad->storage->allocator) {
            /* steal: the input buffer (and our retain) are the only owners */
            m->grad = em_tensor_retain(grad);
        } else if (!em_is_grad_enabled() && stealable_view(grad)) {
            /* a dense view whose dead base holds the only other reference
             * to the storage (mm's transposed gradient after t's backward,
             * Note [mm gradient layout]): a plain header over its storage */
            m->grad = em_tensor_new_view(grad->storage, grad->offset, grad->ndim, grad->sizes, grad->strides,
                                         grad->dtype, NULL);
            if (!m->grad) st = em_error_kind();
        } else if (em_is_grad_enabled()) {
            m->grad = em_tensor_retain(grad); /* create_graph: keep its history */
        } else {
            m->grad = em_clone(grad);
            if (!m->grad) st = em_error_kind();
        }
    } else if (!em_is_grad_enabled() && !em_requires_grad(m->grad) &&
               em_core_internal_overlap(m->grad) != EM_OVERLAP_YES) {
        /* in place, unless .grad is an expanded view (kept from a
         * create_graph backward), which an in-place add would corrupt */
        em_tensor *r = em_add_(m->grad, grad, em_scalar_int(1));
        if (!r) st = em_error_kind();
        em_tensor_release(r);
    } else {
        em_tensor *sum = em_add(m->grad, grad, em_scalar_int(1));
        if (!sum) st = em_error_kind();
        else {
            em_tensor_release(m->grad);
            m->grad = sum;
        }
    }
    em_tensor_release(grad);
    em_tensor_release(leaf);
    return st;
}

static void accumulate_destroy(em_node *self) {
    weak_lock();
    em_ag_meta *m = ACC(self)->weak_var;
    if (m && atomic_load_explicit(&m->grad_accumulator, memory_order_relaxed) == self)
        atomic_store_explicit(&m->grad_accumulator, NULL, memory_order_release);
    ACC(self)->weak_var = NULL;
    weak_unlock();
}

static const em_node_vtable accumulate_vt = { "AccumulateGrad", accumulate_apply, NULL, accumulate_destroy };

static bool stale_no_grad_view(const em_tensor *t) {
    return t->view_base && t->view_no_grad && em_dtype_is_floating(t->dtype) &&
           t->view_version != em_tensor_version(t) && em_requires_grad(t->view_base);
}

em_status em_ag_stale_view_error(const char *op) {
    return em_set_error(EM_EVALUE, "%s%sa view was created in no_grad mode and its base or another view of "
                                   "its base has been modified in place since; using it with grad mode on "
                                   "is ambiguous, so it is forbidden: make the view outside the no_grad "
                                   "block, or use it only inside one", op ? op : "", op ? ": " : "");
}

em_status em_collect_edge(em_tensor *t, em_edge *out, bool *stale) {
    out->fn = NULL;
    out->input_nr = 0;
    if (stale_no_grad_view(t)) { /* no gradient reaches the base through it */
        if (!stale) return em_ag_stale_view_error(NULL);
        *stale = true;
        return EM_OK;
    }
    em_clear_error();
    *out = em_gradient_edge(t);
    return out->fn || em_error_kind() == EM_OK ? EM_OK : em_error_kind();
}

/* Retains acc unless its count already reached 0 -- its destroy is then
 * waiting for weak_lock, which the caller holds, to unlink it: a plain
 * retain would revive a node about to be freed. */
static bool retain_live(em_node *acc) {
    int c = atomic_load_explicit(&acc->refcount, memory_order_relaxed);
    while (c > 0 && !atomic_compare_exchange_weak_explicit(&acc->refcount, &c, c + 1, memory_order_relaxed,
                                                           memory_order_relaxed)) {}
    return c > 0;
}

em_edge em_gradient_edge(em_tensor *t) {
    em_edge e = { NULL, 0 };
    em_ag_maybe_sync(t);
    em_ag_meta *m = t ? t->autograd_meta : NULL;
    if (!m) return e;
    if (m->grad_fn) {
        em_node_retain(m->grad_fn);
        e.fn = m->grad_fn;
        e.input_nr = m->output_nr;
        return e;
    }
    if (!m->requires_grad) return e;
    weak_lock();
    em_node *acc = atomic_load_explicit(&m->grad_accumulator, memory_order_relaxed);
    bool live = acc && retain_live(acc);
    weak_unlock();
    if (live) {
        e.fn = acc;
        return e;
    }
    /* none (or one being destroyed): make one outside the lock -- making a
     * node can run Lua (the anomaly trace), and a collection there may
     * finalize a leaf, whose meta_free takes weak_lock -- then install it
     * unless another thread installed one meanwhile */
    em_input_meta im;
    em_node *made = em_input_meta_from(&im, t) == EM_OK ? em_node_new(sizeof(accumulate_node), &accumulate_vt, 1, 0) : NULL;
    if (!made) return e; /* the error is set */
    made->is_accumulate_grad = true;
    made->sequence_nr = UINT64_MAX; /* leaves run as soon as they are ready */
    em_node_input_meta(made)[0] = im;
    weak_lock();
    acc = atomic_load_explicit(&m->grad_accumulator, memory_order_relaxed);
    if (!acc || !retain_live(acc)) {
        ACC(made)->weak_var = m;
        atomic_store_explicit(&m->grad_accumulator, made, memory_order_relaxed);
        if (m->hooks) made->owner_thread = true;
        acc = made;
        made = NULL;
    }
    weak_unlock();
    em_node_release(made); /* another thread's won: unlinked, its destroy touches nothing */
    e.fn = acc;
    return e;
}

/* Note [Saved leaves and views]
 * A node that owned a saved input could close a cycle of C references that
 * no collector sees, and the whole graph would leak once Lua drops its
 * tensors (PyTorch has these cycles and warns about create_graph):
 * - a leaf x: with create_graph, x.grad can be the result of a graph that
 *   saves x again (x:sin()'s backward records cos(x)): x -> x.grad -> ... ->
 *   x;
 * - a view v of x: v's base is x, so the same cycle runs through v;
 * - a tensor t that retains its grad: t -> t.grad -> ... -> t.
 * So em_saved_save keeps an alias of such an input: the same storage,
 * geometry and version counter (unpacking still refuses a tensor written
 * in place since), without a base or a .grad, whose meta holds t's grad_fn
 * and output_nr -- or, for a leaf, a reference to the leaf's
 * AccumulateGrad (Note [AccumulateGrad is weak]) instead of the leaf. Ops
 * on the alias (a double backward's formulas) record the same edges as ops
 * on t, so their gradients still reach x.grad while x lives, and are
 * dropped once nobody can read them. Nothing accumulates into an alias's
 * own .grad. Other inputs are saved by reference (no alias to make).
 * - an input of an in-place op that shares the written tensor's storage
 *   (`y:mul_(y)`, `v:mul_(base)`): the op moves the written tensor's
 *   history (and its base's) onto the node that saved it, so the node would
 *   own a tensor whose grad_fn is the node itself (em_saved_save_beside;
 *   the fuzzer's LeakSanitizer found it).
 * One cycle remains: a tensor whose retain_grad() runs after a node saved
 * it, when a later create_graph backward unpacks that node's result. */
bool em_ag_save_as_alias(const em_tensor *t) {
    const em_ag_meta *m = t->autograd_meta;
    return t->view_base || (m && ((m->requires_grad && !m->grad_fn) || m->retains_grad));
}

em_tensor *em_ag_saved_alias(em_tensor *t) {
    em_clear_error();
    em_edge e = em_gradient_edge(t); /* syncs a stale view's history first */
    if (!e.fn && em_error_kind() != EM_OK) return NULL;
    em_tensor *a = em_core_alias(t);
    em_ag_meta *m = a && e.fn ? get_meta(a, true) : NULL;
    if (!a || (e.fn && !m)) {
        em_tensor_release(a);
        em_node_release(e.fn);
        return NULL;
    }
    if (!e.fn) { /* no history: the data only */
        a->keyset = EM_KS(em_backend_key(a->device));
        return a;
    }
    if (e.fn->is_accumulate_grad) {
        m->requires_grad = true;
        atomic_store_explicit(&m->grad_accumulator, e.fn, memory_order_relaxed); /* owned: meta_free releases it */
    } else {
        m->grad_fn = e.fn;
        m->output_nr = e.input_nr;
    }
    refresh_key(a);
    return a;
}

/* ---- history ---- */

em_status em_set_history_take(em_tensor *t, em_node *node, uint32_t nr) {
    em_ag_meta *m = get_meta(t, true);
    if (!m) return EM_ENOMEM;
    if ((int)nr < node->num_inputs && em_input_meta_from(&em_node_input_meta(node)[nr], t) != EM_OK) return EM_ENOMEM;
    em_node *old = m->grad_fn;
    m->grad_fn = node;
    m->output_nr = nr;
    m->requires_grad = false;
    refresh_key(t);
    em_node_release(old);
    return EM_OK;
}

em_status em_set_history(em_tensor *t, em_node *node, uint32_t nr) {
    em_node_retain(node);
    em_status st = em_set_history_take(t, node, nr);
    if (st != EM_OK) em_node_release(node);
    return st;
}

/* ---- views: CopySlices and regenerated history (Note [View history]) ---- */

void em_geometry_from(em_geometry *g, const em_tensor *t) {
    g->ndim = t->ndim;
    g->offset = t->offset;
    memcpy(g->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(g->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
}

static pthread_mutex_t view_lock = PTHREAD_MUTEX_INITIALIZER;

/* The view's grad_fn becomes the AsStridedBackward of as_strided(base,
 * view geometry), made by as_strided's own Autograd kernel (called
 * directly, so that grad mode does not matter: a history query must give
 * the same answer inside no_grad). Caller holds view_lock. */
static void regenerate(em_tensor *t) {
    em_tensor *b = t->view_base, *fake = NULL;
    em_ag_meta *m = t->autograd_meta;
    em_tensor *tmp = NULL;
    if (!em_requires_grad(b) && em_dtype_is_floating(b->dtype)) { /* b is a root: no sync, no lock */
        /* the view had history but its base needs no gradient: PyTorch
         * still gives it an AsStridedBackward, one whose edge leads
         * nowhere; record it on a stand-in and cut the edge below */
        fake = em_core_alias(b);
        if (fake && em_set_requires_grad(fake, true) != EM_OK) {
            em_tensor_release(fake);
            fake = NULL;
        }
    }
    em_tensor *src = fake ? fake : b;
    if (em_requires_grad(src)) {
        int64_t off = t->offset;
        tmp = em_ag_k_as_strided(src->keyset | EM_KS(EM_KEY_AUTOGRAD), src, (em_intlist){ t->sizes, t->ndim },
                                 (em_intlist){ t->strides, t->ndim }, &off);
        if (!tmp) {
            /* out of memory: keep the old history; the next query retries */
            em_tensor_release(fake);
            em_clear_error();
            return;
        }
    }
    em_ag_meta *tm = tmp ? tmp->autograd_meta : NULL;
    if (fake && tm && tm->grad_fn && tm->grad_fn->num_next > 0) {
        em_node_release(tm->grad_fn->next[0].fn);
        tm->grad_fn->next[0] = (em_edge){ NULL, 0 };
    }
    em_tensor_release(fake);
    if (tm && tm->grad_fn) {
        em_set_history(t, tm->grad_fn, 0);
    } else if (m && m->grad_fn) {
        em_node *old = m->grad_fn;
        drop_retain_hook(m);
        m->grad_fn = NULL;
        m->output_nr = 0;
        em_node_release(old);
    }
    t->view_version = em_tensor_version(t);
    em_tensor_release(tmp);
}

void em_ag_sync_view(em_tensor *t) {
    if (!t || !t->view_base) return;
    pthread_mutex_lock(&view_lock);
    if (t->view_version != em_tensor_version(t)) {
        em_ag_meta *m = t->autograd_meta;
        /* PyTorch: a view with no history whose base needs no gradient
         * stays as it is (and is looked at again after the next write);
         * a view made in no_grad mode is not regenerated (recording with
         * it is refused, see em_collect_edge) */
        if (!(t->view_no_grad && em_dtype_is_floating(t->dtype)) &&
            ((m && m->grad_fn) || em_requires_grad(t->view_base)))
            regenerate(t);
    }
    pthread_mutex_unlock(&view_lock);
}

typedef struct {
    em_node base;
    em_geometry base_geom;  /* the base when the view was written */
    em_geometry view_geom;  /* the view written */
    em_node *fn;            /* owned: the in-place op's node */
} copy_slices;

/* A new tensor with g's sizes and strides over fresh storage that also
 * covers other (both geometries shifted by the same amount so that the
 * lowest offset is 0). *shift receives the amount subtracted. */
static em_tensor *strided_like(const em_geometry *g, const em_geometry *other, em_dtype dtype, int64_t *shift) {
    int64_t lo = g->offset < other->offset ? g->offset : other->offset, hi = lo;
    const em_geometry *gs[2] = { g, other };
    for (int k = 0; k < 2; k++) {
        int64_t last = gs[k]->offset;
        for (int d = 0; d < gs[k]->ndim; d++) {
            if (gs[k]->sizes[d] == 0) { last = lo; break; }
            last += (gs[k]->sizes[d] - 1) * gs[k]->strides[d];
        }
        if (last > hi) hi = last;
    }
    int64_t n = hi - lo + 1;
    em_storage *st = em_storage_new((size_t)n * em_dtype_size(dtype), em_cpu_device());
    if (!st) return NULL;
    em_tensor *r = em_tensor_new_view(st, g->offset - lo, g->ndim, g->sizes, g->strides, dtype, NULL);
    em_storage_release(st);
    *shift = lo;
    return r;
}

/* CopySlices' gradient: the base's gradient everywhere but in the view's
 * region, where the in-place node's gradient for its self input goes;
 * the node's other inputs get its gradients as they are. Written with ops,
 * so with create_graph a double backward goes through it. */
static em_status copy_slices_apply(em_node *self, em_tensor **grads, em_tensor **out) {
    copy_slices *cs = (copy_slices *)self;
    em_node *fn = cs->fn;
    em_tensor *grad = grads[0];
    if (!grad) return EM_OK;
    int n = fn->num_next;
    em_tensor *fn_small[8] = { NULL };
    em_tensor **fn_out = n <= 8 ? fn_small : em_ag_calloc((size_t)n, sizeof *fn_out);
    em_tensor *result = NULL, *slice = NULL, *sc = NULL, *r = NULL;
    em_status st = EM_OK;
    int64_t shift = 0;
    if (!fn_out) return em_set_error(EM_ENOMEM, "CopySlices: out of memory");
    result = strided_like(&cs->base_geom, &cs->view_geom, grad->dtype, &shift);
    if (!result || !(r = em_copy_(result, grad))) goto fail;
    em_tensor_release(r);
    int64_t voff = cs->view_geom.offset - shift;
    slice = em_as_strided(result, (em_intlist){ cs->view_geom.sizes, cs->view_geom.ndim },
                          (em_intlist){ cs->view_geom.strides, cs->view_geom.ndim }, &voff);
    if (!slice || !(sc = em_clone(slice))) goto fail;
    if ((st = fn->vt->apply(fn, &sc, fn_out)) != EM_OK) goto done;
    if (self->next[0].fn) {
        r = fn_out[0] ? em_copy_(slice, fn_out[0]) : em_zero_(slice);
        if (!r) goto fail;
        em_tensor_release(r);
        out[0] = result;
        result = NULL;
    }
    for (int j = 1; j < n; j++) {
        out[j] = fn_out[j];
        fn_out[j] = NULL;
    }
    goto done;
fail:
    st = em_error_kind() ? em_error_kind() : em_set_error(EM_EINTERNAL, "CopySlices: backward failed");
done:
    for (int j = 0; j < n; j++) em_tensor_release(fn_out[j]);
    if (fn_out != fn_small) free(fn_out);
    em_tensor_release(result);
    em_tensor_release(slice);
    em_tensor_release(sc);
    return st;
}

static void copy_slices_release_saved(em_node *self) {
    em_node *fn = ((copy_slices *)self)->fn;
    if (fn && fn->vt->release_saved) fn->vt->release_saved(fn);
}

static void copy_slices_destroy(em_node *self) {
    copy_slices *cs = (copy_slices *)self;
    em_node_release(cs->fn);
    cs->fn = NULL;
}

static const em_node_vtable copy_slices_vt = { "CopySlices", copy_slices_apply, copy_slices_release_saved,
                                               copy_slices_destroy };

/* The base b of view t takes the in-place write recorded by fn. */
static em_status rebase_view(em_tensor *t, em_node *fn) {
    em_tensor *b = t->view_base;
    if (em_ag_check_inplace(t, em_node_name(fn)) != EM_OK) return em_error_kind();
    copy_slices *cs = (copy_slices *)em_node_new(sizeof *cs, &copy_slices_vt, 1, fn->num_next);
    if (!cs) return EM_ENOMEM;
    em_geometry_from(&cs->base_geom, b);
    em_geometry_from(&cs->view_geom, t);
    em_node_retain(fn);
    cs->fn = fn;
    cs->base.owner_thread = fn->owner_thread;
    cs->base.next[0] = em_gradient_edge(b);
    for (int j = 1; j < fn->num_next; j++) {
        cs->base.next[j] = fn->next[j];
        if (cs->base.next[j].fn) em_node_retain(cs->base.next[j].fn);
    }
    em_status st = em_set_history(b, &cs->base, 0);
    em_node_release(&cs->base);
    if (st != EM_OK) return st;
    /* the view's history now comes from the base's: regenerate it */
    pthread_mutex_lock(&view_lock);
    regenerate(t);
    pthread_mutex_unlock(&view_lock);
    return EM_OK;
}

static _Thread_local bool setitem_write;

bool em_ag_set_setitem(bool on) {
    bool prev = setitem_write;
    setitem_write = on;
    return prev;
}

em_status em_rebase_history(em_tensor *t, em_node *node) {
    if (t->view_base) return rebase_view(t, node);
    em_ag_meta *m = t->autograd_meta;
    if (m && !m->grad_fn && m->requires_grad)
        return em_set_error(EM_EVALUE, "%s: a leaf tensor that requires grad is being used in an "
                                       "in-place operation (do it under ember.no_grad())", em_node_name(node));
    if (m && m->retains_grad && m->retain_fn && m->retain_fn != node && !setitem_write) {
        /* retain_grad follows the tensor to the in-place op's node (not
         * to a CopySlices its base gets: PyTorch 1.13 moves it only here,
         * from wherever it was) */
        if (!em_node_extras(node)) return EM_ENOMEM;
        em_hook *h = take_retain_hook(m, m->retain_fn);
        if (h) {
            h->slot = 0;
            append_hook(&node->extra->pre_hooks, h);
            em_node_release(m->retain_fn);
            em_node_retain(node);
            m->retain_fn = node;
        }
    }
    return em_set_history(t, node, 0);
}

/* ---- in-place checks (Note [View history]) ---- */

em_status em_ag_mark_multi_view(em_tensor *t, const char *name) {
    em_ag_meta *m = t->autograd_meta;
    if (t->view_base && m) {
        m->multi_view_of = name;
        m->multi_view_nr = m->output_nr < UINT16_MAX ? (uint16_t)m->output_nr : UINT16_MAX;
    }
    return EM_OK;
}

void em_ag_inherit_multi_view(em_tensor *view, const em_tensor *src) {
    const em_ag_meta *s = src->autograd_meta;
    em_ag_meta *m = view->autograd_meta;
    if (!s || !s->multi_view_of || !m || !view->view_base) return;
    m->multi_view_of = s->multi_view_of;
    m->multi_view_nr = s->multi_view_nr;
}

em_status em_ag_check_inplace(em_tensor *self, const char *op) {
    em_ag_meta *m = self->autograd_meta;
    if (m && m->multi_view_of && self->view_base) {
        char nr[32] = "";
        if (m->multi_view_nr < UINT16_MAX) snprintf(nr, sizeof nr, " %u", (unsigned)m->multi_view_nr + 1);
        return em_set_error(EM_EVALUE, "%s: the tensor is (a view of) output%s of %s, one of several "
                                       "views returned by one op; such views cannot be modified in place "
                                       "(use an out-of-place op, or clone() the view first)",
                            op, nr, m->multi_view_of);
    }
    if (m && !m->grad_fn && m->requires_grad)
        return em_set_error(EM_EVALUE, "%s: a leaf tensor that requires grad is being used in an "
                                       "in-place operation (do it under ember.no_grad())", op);
    /* integer and bool views are not differentiable views (PyTorch) */
    em_tensor *b = em_dtype_is_floating(self->dtype) ? self->view_base : NULL;
    if (b && self->view_no_grad)
        return em_set_error(EM_EVALUE, "%s: a view was created in no_grad mode and is being modified in "
                                       "place with grad mode enabled; this is ambiguous, so it is "
                                       "forbidden: make both the view and the in-place op inside the "
                                       "no_grad block (not tracked) or both outside it (tracked)", op);
    /* PyTorch's rule: the view requires grad and its base is a leaf (the
     * base may itself not require grad: a view made a leaf with
     * requires_grad_ hangs off it) */
    if (b && em_requires_grad(self) && em_is_leaf(b))
        return em_set_error(EM_EVALUE, "%s: a view of a leaf tensor that requires grad is being used in an "
                                       "in-place operation (clone() the view first, or do it under "
                                       "ember.no_grad())", op);
    return EM_OK;
}
