/* node.c -- graph nodes: allocation, iterative deletion, saved variables,
 * formula scopes, broadcasting reduction, custom (Lua) nodes, grad modes.
 * See em_autograd.h for the notes on the invariants kept here. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "autograd/em_ag_alloc.h"
#include "em_ops.h"

/* per thread, as PyTorch's sequence numbers: they only order one thread's
 * nodes in the ready queue (newest first), and a shared counter cost a
 * locked instruction per recorded op */
static _Thread_local uint64_t next_sequence_nr;
static const int64_t no_sizes[1] = { 0 }; /* the interned shape of every 0-dim tensor */

/* ---- grad mode, inference mode, anomaly mode (thread-local) ---- */

static _Thread_local bool inference_mode;
static _Thread_local bool anomaly_mode;

bool em_is_grad_enabled(void) { return !(em_disp_tls_keys.exclude & EM_KS(EM_KEY_AUTOGRAD)); }

bool em_set_grad_enabled(bool on) {
    bool prev = em_is_grad_enabled();
    if (on) em_disp_tls_keys.exclude &= ~EM_KS(EM_KEY_AUTOGRAD);
    else em_disp_tls_keys.exclude |= EM_KS(EM_KEY_AUTOGRAD);
    return prev;
}

bool em_is_inference_mode(void) { return inference_mode; }

/* Inference mode is no-grad that cannot be re-enabled by enable_grad
 * inside it: it also records itself so that guards can tell. */
bool em_set_inference_mode(bool on) {
    bool prev = inference_mode;
    inference_mode = on;
    return prev;
}

bool em_is_anomaly_enabled(void) { return anomaly_mode; }
bool em_set_anomaly_enabled(bool on) {
    bool prev = anomaly_mode;
    anomaly_mode = on;
    return prev;
}

static char *(*trace_provider)(void *ud);
static void *trace_provider_ud;
void em_ag_set_trace_provider(char *(*fn)(void *ud), void *ud) {
    trace_provider = fn;
    trace_provider_ud = ud;
}

/* ---- nodes ---- */

/* Note [Node free lists]
 * A recorded op allocates one node and the graph frees it again at the next
 * step, so each thread keeps freed node blocks by size class (multiples of
 * NODE_CLASS_STEP bytes up to NODE_CLASS_MAX) on a free list of its own and
 * hands them out again before asking malloc. The lists are bounded
 * (NODE_CACHE_BYTES per thread; beyond that blocks go back to free()), are
 * freed when the thread exits (free_thread_lists; a node freed later on an
 * exiting thread goes straight to free()), and take no locks: a block
 * freed on another thread simply joins that thread's list. Every node
 * allocation still asks the fault hook first (Note [Autograd allocation
 * faults]), whether or not the list serves it. Under AddressSanitizer the
 * lists are off, so a use after free of a node is still caught. */
#if defined(__SANITIZE_ADDRESS__)
#define NODE_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NODE_CACHE 0
#endif
#endif
#ifndef NODE_CACHE
#define NODE_CACHE 1
#endif
#define NODE_CLASS_STEP 16
#define NODE_CLASS_MAX 1024                         /* bytes; larger nodes use malloc */
#define NODE_CLASSES (NODE_CLASS_MAX / NODE_CLASS_STEP) /* classes 1..NODE_CLASSES */
#define NODE_CACHE_BYTES ((size_t)4 << 20)          /* per thread */

typedef struct free_block { struct free_block *next; } free_block;
static _Thread_local free_block *node_free[NODE_CLASSES + 1];
static _Thread_local size_t node_cache_bytes;
static _Thread_local bool node_cache_closed; /* the thread is exiting */
static _Thread_local bool node_cache_noted;  /* the exit hook is registered */
static void note_thread_lists(void);

/* A block of at least total bytes for a node (its class in *cls, 0 for a
 * plain malloc), from this thread's free list when it has one. NULL when
 * out of memory or when the fault hook fires (slot not set). */
/* Note [Node size classes]
 * Class c holds blocks of c * NODE_CLASS_STEP - NODE_CHUNK_HEAD bytes:
 * glibc's malloc puts an 8-byte size word before each block and rounds
 * the chunk to 16 bytes, so a request of 16c - 8 bytes fills a chunk of
 * exactly 16c bytes, where a request of 16c would take 16c + 16. Node
 * blocks are laid out with 8-byte alignment (em_node_new) for the same
 * reason: every 8 bytes a node does not need is 16 bytes of chunk half
 * the time. */
#define NODE_CHUNK_HEAD 8
static inline size_t node_class(size_t total) {
    return (total + NODE_CHUNK_HEAD + NODE_CLASS_STEP - 1) / NODE_CLASS_STEP;
}

static void *node_block_alloc(size_t total, uint8_t *cls) {
    *cls = 0;
    if (em_memory_test_fail()) return NULL;
    if (!NODE_CACHE || total > NODE_CLASS_MAX - NODE_CHUNK_HEAD) return malloc(total);
    size_t c = node_class(total);
    *cls = (uint8_t)c;
    free_block *b = node_free[c];
    if (b) {
        node_free[c] = b->next;
        node_cache_bytes -= c * NODE_CLASS_STEP;
        return b;
    }
    return malloc(c * NODE_CLASS_STEP - NODE_CHUNK_HEAD);
}

/* Returns a node's block to this thread's free list, or to free() when the
 * list is full, the thread is exiting, or the block is not of a class. */
static void node_block_free(void *p, uint8_t cls) {
    size_t bytes = (size_t)cls * NODE_CLASS_STEP;
    if (!cls || node_cache_closed || node_cache_bytes + bytes > NODE_CACHE_BYTES) {
        free(p);
        return;
    }
    if (!node_cache_noted) { /* register the exit hook */
        note_thread_lists();
        node_cache_noted = true;
    }
    free_block *b = p;
    b->next = node_free[cls];
    node_free[cls] = b;
    node_cache_bytes += bytes;
}

void *em_ag_small_alloc(size_t n) {
    uint8_t cls;
    return node_block_alloc(n, &cls);
}

void em_ag_small_free(void *p, size_t n) {
    node_block_free(p, NODE_CACHE && n <= NODE_CLASS_MAX - NODE_CHUNK_HEAD ? (uint8_t)node_class(n) : 0);
}

/* Frees this thread's free lists (at thread exit). */
static void node_cache_drain(void) {
    for (int c = 0; c <= NODE_CLASSES; c++) {
        while (node_free[c]) {
            free_block *b = node_free[c];
            node_free[c] = b->next;
            free(b);
        }
    }
    node_cache_bytes = 0;
}

/* One allocation holds the node, its edges and its input metas (in that
 * order, each 8-byte aligned, Note [Node size classes]): a recorded op
 * costs one malloc, not three. */
_Static_assert(_Alignof(em_edge) <= 8 && _Alignof(em_input_meta) <= 8 && sizeof(em_edge) % 8 == 0,
               "Note [Node size classes]: node blocks are laid out 8-byte aligned");
em_node *em_node_new(size_t size, const em_node_vtable *vt, int num_inputs, int num_next) {
    if (size < sizeof(em_node)) size = sizeof(em_node);
    size = (size + 7) & ~(size_t)7;
    size_t edges_at = size, meta_at = edges_at + (size_t)num_next * sizeof(em_edge);
    size_t total = meta_at + (size_t)num_inputs * sizeof(em_input_meta);
    /* malloc, not the power-of-two caching allocator: a retained graph
     * grows by one node per op, and rounding a 600-byte node up to 1 KiB
     * costs more in fresh pages than the allocator saves */
    uint8_t cls;
    em_node *n = node_block_alloc(total, &cls);
    if (!n) {
        em_set_error(EM_ENOMEM, "autograd: out of memory making a %s node", vt ? vt->name : "graph");
        return NULL;
    }
    memset(n, 0, meta_at); /* the header and the edges after it, in one call */
    em_edge *next = (em_edge *)((char *)n + edges_at); /* never NULL (Note [Node header]) */
    em_input_meta *im = (em_input_meta *)((char *)n + meta_at);
    for (int i = 0; i < num_inputs; i++)
        im[i] = (em_input_meta){ .sizes = no_sizes, .ndim = 0, .dtype = EM_FLOAT32, .device = em_cpu_device() };
    atomic_init(&n->refcount, 1);
    atomic_init(&n->task, 0);
    n->alloc_class = cls;
    n->vt = vt;
    n->sequence_nr = next_sequence_nr++;
    n->num_inputs = num_inputs;
    n->num_next = num_next;
    n->next = next;
    if (anomaly_mode) {
        char *tb = trace_provider ? trace_provider(trace_provider_ud) : NULL;
        const char *name = vt ? vt->name : "?";
        size_t len = strlen(name) + (tb ? strlen(tb) : 0) + 64;
        /* no error on failure: the node just has no trace */
        em_node_extra *x = calloc(1, sizeof *x);
        char *trace = x ? malloc(len) : NULL;
        if (!trace) free(x);
        if (trace) {
            x->anomaly_trace = trace;
            n->extra = x;
            size_t op_len = strlen(name);
            if (op_len > 8 && strcmp(name + op_len - 8, "Backward") == 0) op_len -= 8;
            /* the node's name less "Backward", in lower case: MulBackward -> mul */
            char op[64];
            size_t k = 0;
            for (; k < op_len && k + 1 < sizeof op; k++) op[k] = (char)tolower((unsigned char)name[k]);
            op[k] = 0;
            snprintf(trace, len, "forward op '%s'%s%s", op, tb ? ", called at:\n" : "", tb ? tb : "");
        }
        free(tb);
    }
    return n;
}

em_node_extra *em_node_extras(em_node *n) {
    if (n->extra) return n->extra;
    n->extra = em_memory_test_fail() ? NULL : calloc(1, sizeof *n->extra);
    if (!n->extra) em_set_error(EM_ENOMEM, "autograd: out of memory adding to a %s node", em_node_name(n));
    return n->extra;
}

void em_node_retain(em_node *n) {
    if (n) atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

const char *em_node_name(const em_node *n) { return n && n->vt ? n->vt->name : "(none)"; }

void em_ag_free_hooks(em_hook *h) {
    while (h) {
        em_hook *next = h->next;
        if (h->free_ud) h->free_ud(h->ud);
        free(h);
        h = next;
    }
}

/* Note [Iterative node deletion]
 * Dropping the last reference to the head of a chain of a million nodes
 * must not recurse a million times. Nodes whose count reaches zero go on
 * a thread-local list; the outermost release drains it, and destroying a
 * node (its saved tensors, its edges) only appends more nodes. */
static _Thread_local em_node **graveyard;
static _Thread_local size_t graveyard_n, graveyard_cap;
static _Thread_local bool draining;
static _Thread_local em_tensor **scope_stack;
static _Thread_local int scope_n, scope_cap;

/* Thread-local lists are freed when their thread exits. */
static pthread_key_t tls_key;
static pthread_once_t tls_key_once = PTHREAD_ONCE_INIT;
static void free_thread_lists(void *unused) {
    (void)unused;
    node_cache_closed = true;
    node_cache_drain();
    free(graveyard);
    graveyard = NULL;
    graveyard_cap = graveyard_n = 0;
    free(scope_stack);
    scope_stack = NULL;
    scope_cap = scope_n = 0;
}
static void make_tls_key(void) { pthread_key_create(&tls_key, free_thread_lists); }
static void note_thread_lists(void) {
    pthread_once(&tls_key_once, make_tls_key);
    pthread_setspecific(tls_key, (void *)1);
}

static void destroy_node(em_node *n) {
    if (n->vt && n->vt->destroy) n->vt->destroy(n);
    for (int i = 0; i < n->num_next; i++) em_node_release(n->next[i].fn);
    if (n->extra) {
        em_ag_free_hooks(n->extra->pre_hooks);
        em_ag_free_hooks(n->extra->post_hooks);
        free(n->extra->anomaly_trace);
        free(n->extra);
    }
    node_block_free(n, n->alloc_class); /* edges and input metas live in the same block */
}

/* Note [Sole owner release]
 * A holder that reads a count of 1 holds the only reference: no other
 * thread can release it, nor retain it -- retaining needs a reference --
 * except through a weak pointer. So such a release skips the locked
 * decrement (a plain store of 0), for every node but AccumulateGrad, the
 * one node a weak pointer upgrades (em_gradient_edge's retain_live, under
 * weak_lock), and for every storage (em_storage_release: nothing points
 * to a storage without a reference). The acquire load pairs with the
 * release decrements of earlier holders, as the decrement's would. */
void em_node_release(em_node *n) {
    if (!n) return;
    if (!n->is_accumulate_grad && atomic_load_explicit(&n->refcount, memory_order_acquire) == 1)
        atomic_store_explicit(&n->refcount, 0, memory_order_relaxed); /* Note [Sole owner release] */
    else if (atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (graveyard_n == graveyard_cap) {
        size_t cap = graveyard_cap ? graveyard_cap * 2 : 256;
        em_node **g = em_ag_realloc(graveyard, cap * sizeof *g);
        if (!g) { /* no memory for the list: destroy in place (recursion is bounded by memory) */
            destroy_node(n);
            return;
        }
        if (!graveyard) note_thread_lists();
        graveyard = g;
        graveyard_cap = cap;
    }
    graveyard[graveyard_n++] = n;
    if (draining) return;
    draining = true;
    while (graveyard_n > 0) destroy_node(graveyard[--graveyard_n]);
    draining = false;
    if (graveyard_cap > 4096) { /* do not keep a huge list around */
        free(graveyard);
        graveyard = NULL;
        graveyard_cap = 0;
    }
}

/* ---- saved variables ---- */

/* Whether output t may be saved as its storage (Note [Saved outputs]):
 * fresh and contiguous, and its grad_fn's meta for it says its shape. */
static bool output_as_storage(const em_tensor *t) {
    const em_ag_meta *m = t->autograd_meta;
    if (!m || !m->grad_fn || t->offset != 0 || !t->is_contiguous || t->view_base ||
        t->version != &t->storage->version || m->output_nr >= (uint32_t)m->grad_fn->num_inputs)
        return false;
    const em_input_meta *im = &em_node_input_meta(m->grad_fn)[m->output_nr];
    return im->ndim == t->ndim && im->dtype == t->dtype && im->device.type == t->device.type &&
           im->device.index == t->device.index &&
           (t->ndim == 0 || memcmp(im->sizes, t->sizes, (size_t)t->ndim * sizeof(int64_t)) == 0);
}

/* The header of a saved output kept as its storage (Note [Saved outputs]):
 * the geometry from owner's meta for it; NULL with the error set. */
static em_tensor *output_from_storage(const em_saved_var *sv, const em_node *owner) {
    if (!owner || sv->output_nr >= (uint32_t)owner->num_inputs) {
        em_set_error(EM_EINTERNAL, "%s: a saved result was unpacked without its node", em_node_name(owner));
        return NULL;
    }
    const em_input_meta *im = &em_node_input_meta(owner)[sv->output_nr];
    return em_tensor_on_storage(sv->storage, im->ndim, im->sizes, im->dtype);
}

/* em_saved_save, with an input saved as an alias when as_alias is set
 * (em_saved_save_beside) or em_ag_save_as_alias says so. */
static em_status saved_save(em_saved_var *sv, em_tensor *t, bool is_output, bool as_alias) {
    memset(sv, 0, sizeof *sv);
    if (!t) return EM_OK;
    sv->was_saved = true;
    if (!is_output && t->wrapped_number && t->ndim == 0 && !t->autograd_meta && t->device.type == EM_CPU &&
        (t->dtype == EM_FLOAT64 || t->dtype == EM_INT64 || t->dtype == EM_BOOL)) {
        /* Note [Saved numbers] */
        const void *p = em_tensor_data(t);
        if (t->dtype == EM_FLOAT64) memcpy(&sv->number, p, sizeof(double));
        else if (t->dtype == EM_INT64) memcpy(&sv->number, p, sizeof(int64_t));
        else sv->number = *(const uint8_t *)p != 0;
        sv->number_dtype = (uint8_t)t->dtype;
        sv->is_number = true;
        return EM_OK;
    }
    sv->version = em_tensor_version(t);
    sv->is_output = is_output;
    if (is_output && output_as_storage(t)) {
        /* Note [Saved outputs] */
        em_storage_retain(t->storage);
        sv->storage = t->storage;
        sv->output_nr = ((em_ag_meta *)t->autograd_meta)->output_nr;
        sv->is_storage = true;
        return EM_OK;
    }
    if (is_output) {
        /* See Note [Saved variables]: keep the data, not the history. */
        em_tensor *alias = em_core_alias(t);
        if (!alias) { /* nothing saved: the op fails rather than its backward later */
            sv->was_saved = false;
            return em_error_kind() != EM_OK ? em_error_kind() : em_set_error(EM_ENOMEM, "out of memory saving a result for backward");
        }
        if (alias->autograd_meta) alias->autograd_meta = NULL; /* core never copies meta */
        alias->keyset = EM_KS(em_backend_key(alias->device));
        sv->data = alias;
        em_ag_meta *m = t->autograd_meta;
        sv->output_nr = m ? m->output_nr : 0;
    } else if (as_alias || em_ag_save_as_alias(t)) {
        /* not t itself: Note [Saved leaves and views] (meta.c) */
        sv->data = em_ag_saved_alias(t);
        if (!sv->data) {
            sv->was_saved = false;
            return em_error_kind() != EM_OK ? em_error_kind() : EM_ENOMEM;
        }
    } else {
        sv->data = em_tensor_retain(t);
    }
    return EM_OK;
}

em_status em_saved_save(em_saved_var *sv, em_tensor *t, bool is_output) { return saved_save(sv, t, is_output, false); }

em_status em_saved_save_beside(em_saved_var *sv, em_tensor *t, const em_tensor *written) {
    return saved_save(sv, t, false, t && t->storage == written->storage);
}

em_tensor *em_saved_unpack(em_saved_var *sv, em_node *owner) {
    if (!sv->was_saved) return NULL;
    if (sv->is_number) {
        em_scalar v;
        if (sv->number_dtype == EM_FLOAT64) {
            double d;
            memcpy(&d, &sv->number, sizeof d);
            v = em_scalar_float(d);
        } else if (sv->number_dtype == EM_INT64) {
            v = em_scalar_int((int64_t)sv->number);
        } else {
            v = em_scalar_bool(sv->number != 0);
        }
        return em_tensor_wrapped_scalar(v);
    }
    if (!sv->data) {
        em_set_error(EM_EVALUE,
                     "%s: trying to backward through the graph a second time (or to read saved tensors "
                     "after they were freed): saved values are freed by backward() and "
                     "autograd.grad(); pass retain_graph=true to the first call if you need to "
                     "backward through the graph again", em_node_name(owner));
        return NULL;
    }
    /* an output kept as its storage (Note [Saved outputs]): its header again */
    em_tensor *rebuilt = sv->is_storage ? output_from_storage(sv, owner) : NULL;
    if (sv->is_storage && !rebuilt) return NULL;
    const em_tensor *sd = rebuilt ? rebuilt : sv->data;
    uint32_t now = em_tensor_version(sd);
    if (now != sv->version) {
        char shape[EM_SHAPE_STR_MAX];
        em_shape_str(sd->ndim, sd->sizes, shape, sizeof shape);
        em_set_error(EM_EVALUE,
                     "%s: a tensor needed for gradient computation was modified by an in-place "
                     "operation: the %s tensor of shape %s was saved at version %u and is now at "
                     "version %u. Hint: run the forward pass under ember.autograd.detect_anomaly() "
                     "to find the op that created this node%s%s",
                     em_node_name(owner), em_dtype_name(sd->dtype), shape, sv->version, now,
                     owner && em_node_anomaly_trace(owner) ? "; it was " : "",
                     owner && em_node_anomaly_trace(owner) ? em_node_anomaly_trace(owner) : "");
        em_tensor_release(rebuilt);
        return NULL;
    }
    if (!sv->is_output || !em_is_grad_enabled() || !owner) return rebuilt ? rebuilt : em_tensor_retain(sv->data);
    /* create_graph: rebuild the output with its history (grad_fn = owner). */
    em_tensor *t = rebuilt ? rebuilt : em_core_alias(sv->data);
    if (!t) return NULL;
    t->autograd_meta = NULL;
    t->keyset = EM_KS(em_backend_key(t->device));
    if (em_set_history(t, owner, sv->output_nr) != EM_OK) {
        em_tensor_release(t);
        return NULL;
    }
    return t;
}

void em_saved_release(em_saved_var *sv) {
    if (sv->is_storage) {
        em_storage *st = sv->storage;
        sv->storage = NULL;
        sv->is_storage = false;
        em_storage_release(st);
        return;
    }
    em_tensor *d = sv->data;
    sv->data = NULL;
    sv->is_number = false; /* released: unpacking now says so, as for a tensor */
    em_tensor_release(d);
}

/* ---- formula scopes (Note [Formula scopes]) ---- */

int em_ag_scope_begin(void) { return scope_n; }

em_tensor *em_ag_tmp(em_tensor *t) {
    if (!t) return NULL;
    if (scope_n == scope_cap) {
        int cap = scope_cap ? scope_cap * 2 : 64;
        em_tensor **s = realloc(scope_stack, (size_t)cap * sizeof *s);
        if (!s) {
            /* cannot track it: keep it alive rather than free it early */
            return t;
        }
        if (!scope_stack) note_thread_lists();
        scope_stack = s;
        scope_cap = cap;
    }
    scope_stack[scope_n++] = t;
    return t;
}

void em_ag_scope_end(int mark) {
    while (scope_n > mark) em_tensor_release(scope_stack[--scope_n]);
}

em_tensor *em_ag_tmp_take(em_tensor *t, int mark) {
    if (t && scope_n > mark && scope_stack[scope_n - 1] == t) {
        scope_n--;
        return t;
    }
    return em_tensor_retain(t);
}

/* ---- reducing a gradient to its input's shape ---- */

/* ---- interned shapes (Note [Interned shapes], em_autograd.h) ---- */

typedef struct shape_entry {
    struct shape_entry *next;   /* the bucket's chain */
    uint64_t hash;
    int32_t ndim;
    int64_t sizes[];
} shape_entry;

static pthread_mutex_t shape_lock = PTHREAD_MUTEX_INITIALIZER;
static shape_entry **shape_buckets; /* [shape_cap], a power of two; under shape_lock */
static size_t shape_cap, shape_count;
#define SHAPE_TLC 64 /* the per-thread cache: direct-mapped by hash */
static _Thread_local const shape_entry *shape_tlc[SHAPE_TLC];
static _Thread_local const shape_entry *shape_last; /* the last one this thread interned */

static uint64_t shape_hash(int ndim, const int64_t *sizes) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)ndim;
    for (int i = 0; i < ndim; i++) {
        h ^= (uint64_t)sizes[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    return h;
}

static inline bool shape_same(const shape_entry *e, int ndim, const int64_t *sizes) {
    if (e->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (e->sizes[i] != sizes[i]) return false;
    return true;
}

static inline bool shape_is(const shape_entry *e, uint64_t h, int ndim, const int64_t *sizes) {
    return e->hash == h && shape_same(e, ndim, sizes);
}

/* Doubles the bucket array (shape_lock held); on failure keeps the old one
 * (chains just grow longer). */
static void shape_grow(void) {
    size_t cap = shape_cap ? shape_cap * 2 : 256;
    shape_entry **b = em_ag_calloc(cap, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < shape_cap; i++) {
        shape_entry *e = shape_buckets[i];
        while (e) {
            shape_entry *next = e->next;
            e->next = b[e->hash & (cap - 1)];
            b[e->hash & (cap - 1)] = e;
            e = next;
        }
    }
    free(shape_buckets);
    shape_buckets = b;
    shape_cap = cap;
}

/* em_ag_intern_shape past its fast path: the thread's cache, then the
 * shared table (made out of line so the fast path saves no registers). */
static __attribute__((noinline)) const int64_t *intern_slow(int ndim, const int64_t *sizes) {
    uint64_t h = shape_hash(ndim, sizes);
    const shape_entry *c = shape_tlc[h & (SHAPE_TLC - 1)];
    if (c && shape_is(c, h, ndim, sizes)) {
        shape_last = c;
        return c->sizes;
    }
    pthread_mutex_lock(&shape_lock);
    shape_entry *e = NULL;
    if (shape_cap) {
        e = shape_buckets[h & (shape_cap - 1)];
        while (e && !shape_is(e, h, ndim, sizes)) e = e->next;
    }
    if (!e) {
        if (shape_count >= shape_cap / 2 * 3 || !shape_cap) shape_grow();
        e = shape_cap ? em_ag_malloc(sizeof *e + sizeof(int64_t) * (size_t)ndim) : NULL;
        if (e) {
            e->hash = h;
            e->ndim = ndim;
            memcpy(e->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
            e->next = shape_buckets[h & (shape_cap - 1)];
            shape_buckets[h & (shape_cap - 1)] = e;
            shape_count++;
        }
    }
    pthread_mutex_unlock(&shape_lock);
    if (!e) {
        em_set_error(EM_ENOMEM, "autograd: out of memory recording a shape");
        return NULL;
    }
    shape_tlc[h & (SHAPE_TLC - 1)] = shape_last = e;
    return e->sizes;
}

/* The fast path: no dims, or the shape this thread interned last (a graph
 * records runs of one shape). */
static inline const int64_t *intern_shape(int ndim, const int64_t *sizes) {
    if (ndim <= 0) return no_sizes;
    const shape_entry *l = shape_last;
    if (l && shape_same(l, ndim, sizes)) return l->sizes;
    return intern_slow(ndim, sizes);
}

const int64_t *em_ag_intern_shape(int ndim, const int64_t *sizes) { return intern_shape(ndim, sizes); }

em_status em_input_meta_from(em_input_meta *m, const em_tensor *t) {
    const int64_t *sizes = intern_shape(t->ndim, t->sizes);
    if (!sizes) return EM_ENOMEM;
    m->sizes = sizes;
    m->ndim = (int8_t)t->ndim;
    m->dtype = (int8_t)t->dtype;
    m->device = t->device;
    m->col_major = t->ndim == 2 && t->sizes[0] > 1 && t->sizes[1] > 1 && t->strides[0] == 1 &&
                   t->strides[1] == t->sizes[0];
    return EM_OK;
}

em_tensor *em_ag_reduce_to(em_tensor *grad, const em_input_meta *meta) {
    if (!grad) return NULL;
    bool same = grad->ndim == meta->ndim;
    for (int i = 0; same && i < meta->ndim; i++) same = grad->sizes[i] == meta->sizes[i]; /* no memcmp call: mostly 0-2 dims */
    if (!same) {
        int lead = grad->ndim - meta->ndim;
        if (lead < 0) {
            /* a gradient with fewer dims than its input: broadcast it up */
            em_tensor *z = em_zeros((em_intlist){ meta->sizes, meta->ndim }, grad->dtype, meta->device);
            em_tensor *r = z ? em_add(z, grad, em_scalar_int(1)) : NULL;
            em_tensor_release(z);
            em_tensor_release(grad);
            grad = r;
            if (!grad) return NULL;
        } else {
            /* sum the leading dims away, then the broadcast size-1 dims
             * with keepdim: the result has the input's shape without a
             * reshape, so it is never a view */
            int64_t dims[EM_MAX_DIMS];
            em_tensor *r = grad;
            for (int i = 0; i < lead; i++) dims[i] = i;
            if (lead > 0) {
                r = em_sum(grad, (em_intlist){ dims, lead }, false, EM_DTYPE_NONE);
                em_tensor_release(grad);
                if (!r) return NULL;
            }
            int nd = 0;
            for (int i = 0; i < r->ndim && i < meta->ndim; i++)
                if (meta->sizes[i] == 1 && r->sizes[i] != 1) dims[nd++] = i;
            if (nd > 0) {
                em_tensor *k = em_sum(r, (em_intlist){ dims, nd }, true, EM_DTYPE_NONE);
                em_tensor_release(r);
                if (!k) return NULL;
                r = k;
            }
            if (r->ndim != meta->ndim ||
                memcmp(r->sizes, meta->sizes, sizeof(int64_t) * (size_t)meta->ndim) != 0) {
                em_tensor *v = em_reshape(r, (em_intlist){ meta->sizes, meta->ndim });
                em_tensor_release(r);
                if (!v) return NULL;
                r = v;
            }
            grad = r;
        }
    }
    if (grad->dtype != meta->dtype && em_dtype_is_floating(meta->dtype)) {
        em_tensor *c = em_to(grad, meta->dtype);
        em_tensor_release(grad);
        grad = c;
    }
    return grad;
}

/* ---- custom nodes (Lua Functions) ---- */

typedef struct {
    em_node base;
    em_custom_apply_fn apply;
    void *ud;
    void (*free_ud)(void *);
    void (*release_ud)(void *); /* frees the saved state in ud; see em_custom_node_set_release */
    char name[48];
    em_node_vtable vt;
} custom_node;

static em_status custom_apply(em_node *self, em_tensor **grads, em_tensor **out) {
    custom_node *c = (custom_node *)self;
    return c->apply(c->ud, self, grads, out);
}

static void custom_release_saved(em_node *self) {
    custom_node *c = (custom_node *)self;
    c->release_ud(c->ud);
}

static void custom_destroy(em_node *self) {
    custom_node *c = (custom_node *)self;
    if (c->free_ud) c->free_ud(c->ud);
    c->ud = NULL;
}

em_node *em_custom_node_new(const char *name, int num_inputs, int num_next, em_custom_apply_fn apply,
                            void *ud, void (*free_ud)(void *)) {
    custom_node *c = (custom_node *)em_node_new(sizeof(custom_node), NULL, num_inputs, num_next);
    if (!c) return NULL;
    snprintf(c->name, sizeof c->name, "%s", name ? name : "CustomBackward");
    c->vt.name = c->name;
    c->vt.apply = custom_apply;
    c->vt.release_saved = NULL;
    c->vt.destroy = custom_destroy;
    c->base.vt = &c->vt;
    c->base.owner_thread = true; /* Lua code runs on the thread that owns the state */
    c->apply = apply;
    c->ud = ud;
    c->free_ud = free_ud;
    return &c->base;
}

em_status em_custom_node_set_release(em_node *node, void (*release_saved)(void *ud)) {
    if (!node || node->vt->apply != custom_apply)
        return em_set_error(EM_EVALUE, "set_release: %s is not a custom node",
                            node ? em_node_name(node) : "NULL");
    custom_node *c = (custom_node *)node;
    c->release_ud = release_saved;
    c->vt.release_saved = release_saved ? custom_release_saved : NULL;
    return EM_OK;
}
