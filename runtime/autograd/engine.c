/* engine.c -- the backward engine: GraphTask, ready queues, InputBuffers,
 * one worker thread per accelerator device, reentrant backward.
 *
 * Note [Engine threads]
 * The thread that calls em_backward runs CPU work from its own ready queue
 * (thread-local) until its GraphTask has no outstanding items. Each
 * accelerator device type has one worker thread with its own queue,
 * started on first use; nodes whose inputs live on that device run there.
 * Nodes marked owner_thread (Lua functions and hooks) always run on the
 * calling thread, so no Lua state is touched from another thread. A worker
 * that finishes a GraphTask's last item wakes the task's owner. Readiness
 * is an in-degree countdown: a node is pushed when every edge into it has
 * delivered (its InputBuffer then holds the summed gradients). Queues pop
 * by (reentrant depth, sequence_nr), deepest and newest first.
 *
 * Layout: ready queues; device workers; per-task node info; evaluate()
 * and its steps (capture_grads, node_is_needed, run_pre_hooks, apply_node,
 * deliver_outputs); the graph root; dependencies and exec info;
 * em_backward() and its steps (make_root, task_new, mark_inputs, run_task,
 * collect_grads, task_free). Grad mode changes go through em_grad_guard
 * (Note [Grad mode guard] in em_autograd.h). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "autograd/em_ag_alloc.h"
#include "em_ops.h"

#define MAX_REENTRANT_DEPTH 60

typedef struct graph_task graph_task;

/* InputBuffers of up to INLINE_INPUTS slots (nearly every node) live
 * inside the node_info / ready_item instead of a malloc'd array. */
#define INLINE_INPUTS 2

/* Note [Ready items borrow their node]
 * A ready item does not own a reference to its node: every node a task
 * reaches is reachable from the task's graph root through edges, each
 * edge owns a reference (em_edge.fn), edges are only released when their
 * node is destroyed (destroy_node, node.c), and em_backward holds the
 * root until the task is freed, after its last item finished. So the
 * nodes of a running task cannot be freed, and a retain and release per
 * item (two locked instructions a node) would guard nothing. */
typedef struct {
    em_node *node;        /* borrowed (Note [Ready items borrow their node]) */
    graph_task *task;
    em_tensor **buffer;   /* [node->num_inputs], owned; NULL: use inl */
    em_tensor *inl[INLINE_INPUTS];
} ready_item;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    ready_item *heap;
    size_t n, cap;
} ready_queue;

/* Per-node state of one GraphTask: one entry of the task's arena (info[],
 * freed at once with the task), found through the node's generation or,
 * when another task holds the node, the task's side table (Note [Node
 * generations]). */
typedef struct {
    em_node *node;
    int32_t deps;          /* edges not yet delivered */
    int8_t needed;         /* exec_info: -1 unknown, 0 skip, 1 run */
    int8_t is_target;
    bool claimed;          /* node->task is this task's: reset it at the end */
    em_tensor **buffer;    /* not-ready InputBuffer (heap, > INLINE_INPUTS slots) */
    em_tensor *inl[INLINE_INPUTS]; /* not-ready InputBuffer (inline) */
} node_info;

/* A side-table entry: a node another task had claimed, and its slot. */
typedef struct {
    em_node *key;
    uint32_t slot;
} side_entry;

typedef struct {
    em_node *node;
    uint32_t input_nr;
    int out_index;
} capture;

struct graph_task {
    atomic_long outstanding;
    pthread_mutex_t lock;       /* guards the infos' deps and buffers while running */
    uint32_t gen;               /* this task's generation (never 0; Note [Node generations]) */
    node_info *info;            /* the arena: [info_n] of info_cap, one per reached node */
    uint32_t info_n, info_cap;
    side_entry *side;           /* open addressing on the node pointer */
    size_t side_cap, side_n;
    bool has_exec_info;
    capture *captures;
    int n_captures;
    em_tensor **captured;       /* [n_inputs] for grad() */
    atomic_bool has_error;
    em_status err;
    char errmsg[1024];
    int depth;
    bool keep_graph, create_graph;
    bool threaded;              /* some node runs on a device worker */
    ready_queue *owner_queue;
};

/* Note [Single-threaded tasks]
 * A GraphTask none of whose nodes runs on a device worker is touched by
 * its owner thread alone, so its lock and its owner queue's lock are
 * skipped, and its count of outstanding items is kept without locked
 * instructions (outstanding_add) -- the locks unless another task on this thread's queue is threaded (a
 * reentrant backward inside a threaded one), whose workers may push into
 * the same queue. threaded_on_this_thread counts those. */
static _Thread_local int threaded_on_this_thread;

static inline void task_lock(graph_task *t) {
    if (t->threaded) pthread_mutex_lock(&t->lock);
}
static inline void task_unlock(graph_task *t) {
    if (t->threaded) pthread_mutex_unlock(&t->lock);
}
static inline bool queue_needs_lock(graph_task *t, ready_queue *q) {
    return t->threaded || q != t->owner_queue || threaded_on_this_thread > 0;
}

/* ---- ready queues ---- */

static bool item_before(const ready_item *a, const ready_item *b) {
    if (a->task->depth != b->task->depth) return a->task->depth > b->task->depth;
    return a->node->sequence_nr > b->node->sequence_nr;
}

static void queue_init(ready_queue *q) {
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    q->heap = NULL;
    q->n = q->cap = 0;
}

/* Pushes with q->lock held. Returns false on out of memory. */
static bool heap_push(ready_queue *q, ready_item it) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        ready_item *h = em_ag_realloc(q->heap, cap * sizeof *h);
        if (!h) return false;
        q->heap = h;
        q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!item_before(&it, &q->heap[p])) break;
        q->heap[i] = q->heap[p];
        i = p;
    }
    q->heap[i] = it;
    return true;
}

static ready_item heap_pop(ready_queue *q) {
    ready_item top = q->heap[0];
    ready_item last = q->heap[--q->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const ready_item *best = &last;
        if (l < q->n && item_before(&q->heap[l], best)) { m = l; best = &q->heap[l]; }
        if (r < q->n && item_before(&q->heap[r], best)) { m = r; }
        if (m == i) break;
        q->heap[i] = q->heap[m];
        i = m;
    }
    if (q->n) q->heap[i] = last;
    return top;
}

/* ---- device workers (one per accelerator device type) ---- */

static _Thread_local ready_queue *local_queue; /* this thread's queue */
static _Thread_local int current_depth;
static ready_queue device_queues[EM_DEVICE_COUNT];
static bool device_started[EM_DEVICE_COUNT];
static pthread_mutex_t device_lock = PTHREAD_MUTEX_INITIALIZER;

static void evaluate(ready_item it);

static void *device_main(void *arg) {
    ready_queue *q = arg;
    local_queue = q;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        while (q->n == 0) pthread_cond_wait(&q->cond, &q->lock);
        ready_item it = heap_pop(q);
        pthread_mutex_unlock(&q->lock);
        evaluate(it);
    }
    return NULL;
}

static ready_queue *device_queue(int type) {
    pthread_mutex_lock(&device_lock);
    if (!device_started[type]) {
        queue_init(&device_queues[type]);
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &attr, device_main, &device_queues[type]) != 0) {
            pthread_attr_destroy(&attr);
            pthread_mutex_unlock(&device_lock);
            return NULL;
        }
        pthread_attr_destroy(&attr);
        device_started[type] = true;
    }
    pthread_mutex_unlock(&device_lock);
    return &device_queues[type];
}

/* The queue a node runs on: see Note [Engine threads]. */
/* The device type whose worker runs n, or EM_CPU for the calling thread. */
static int node_device(const em_node *n) {
    if (n->owner_thread || n->num_inputs == 0) return EM_CPU;
    int type = em_node_input_meta(n)[0].device.type;
    return type < 0 || type >= EM_DEVICE_COUNT ? EM_CPU : type;
}

static ready_queue *queue_for(graph_task *t, em_node *n) {
    int type = node_device(n);
    if (type == EM_CPU) return t->owner_queue;
    ready_queue *q = device_queue(type);
    return q ? q : t->owner_queue;
}

/* ---- per-task node info ---- */

/* Note [Node generations]
 * A GraphTask keeps one node_info per node it reaches (in-degree countdown,
 * exec info, the not-ready InputBuffer) in an arena, t->info[], that it
 * frees at once. A node finds its entry without a hash map: every task gets
 * a 32-bit generation number from a global counter (never 0), and
 * compute_dependencies claims each node it reaches by one compare-and-swap
 * of node->task from 0 to the task's generation (high 32 bits) and the
 * entry's index in t->info (low 32 bits; one word, Note [Node header] in
 * em_autograd.h). While node->task's generation equals t->gen, its slot is
 * t's index; task_free stores 0 back (release) for every node it claimed,
 * after the task's last item finished.
 *
 * Several GraphTasks can run at once and reach the same node: a reentrant
 * backward from inside a node (same thread, outer task still live), or
 * backward calls from several threads or Lua states over a shared graph
 * (retain_graph). The CAS lets only one live task own a node's claim;
 * a task whose CAS fails (another live task holds the node) records the
 * node in its own side table (open addressing, node -> slot) instead, so
 * no task ever writes a field another task reads:
 *  - node->task is written only by the claiming CAS and by the claimer's
 *    task_free, and its slot read only by a task that sees its own
 *    generation there -- i.e. the claimer (its device workers read it
 *    after the item was handed over through a locked queue).
 *  - the release store of 0 in task_free pairs with the next claimer's
 *    acquire CAS, ordering the old owner's reads before the new writes.
 *  - a stale claim cannot be mistaken for a live one: claims are handed
 *    back when their task ends, so only live tasks' generations appear in
 *    nodes, and two live tasks share a generation only if 2^32 - 1 tasks
 *    started while one of them ran; a node freed and reallocated starts at
 *    0 (its header is cleared in em_node_new).
 * A task that finds in node->task neither 0 nor its generation simply
 * uses the side table: correctness never depends on winning the claim, and
 * the common case (one backward at a time) costs one CAS per node and a
 * compare per lookup. Nodes stay alive for the whole task (the graph root
 * holds the graph), so task_free can touch them. */
static atomic_uint_fast64_t next_task_gen = 1;

static size_t hash_ptr(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* n's entry in t's arena, or NULL when t has not reached n. */
static node_info *info_get(graph_task *t, em_node *n) {
    uint_fast64_t claim = atomic_load_explicit(&n->task, memory_order_relaxed);
    if ((uint32_t)(claim >> 32) == t->gen) return &t->info[(uint32_t)claim];
    if (!t->side_n) return NULL;
    size_t j = hash_ptr(n) & (t->side_cap - 1);
    while (t->side[j].key) {
        if (t->side[j].key == n) return &t->info[t->side[j].slot];
        j = (j + 1) & (t->side_cap - 1);
    }
    return NULL;
}

/* Adds n -> slot to t's side table (growing it). false: out of memory. */
static bool side_put(graph_task *t, em_node *n, uint32_t slot) {
    if ((t->side_n + 1) * 2 > t->side_cap) {
        size_t cap = t->side_cap ? t->side_cap * 2 : 64;
        side_entry *ns = em_ag_calloc(cap, sizeof *ns);
        if (!ns) return false;
        for (size_t i = 0; i < t->side_cap; i++) {
            if (!t->side[i].key) continue;
            size_t j = hash_ptr(t->side[i].key) & (cap - 1);
            while (ns[j].key) j = (j + 1) & (cap - 1);
            ns[j] = t->side[i];
        }
        free(t->side);
        t->side = ns;
        t->side_cap = cap;
    }
    size_t j = hash_ptr(n) & (t->side_cap - 1);
    while (t->side[j].key) j = (j + 1) & (t->side_cap - 1);
    t->side[j] = (side_entry){ n, slot };
    t->side_n++;
    return true;
}

/* n's entry in t's arena, made (and n claimed, or put in the side table)
 * when t had not reached n yet; *created says which. Only the task's owner
 * thread calls it, before the task runs. NULL when out of memory. */
static node_info *info_add(graph_task *t, em_node *n, bool *created) {
    *created = false;
    node_info *ni = info_get(t, n);
    if (ni) return ni;
    if (t->info_n == t->info_cap) {
        if (t->info_cap >= UINT32_MAX / 2) return NULL;
        uint32_t cap = t->info_cap ? t->info_cap * 2 : 64;
        node_info *a = em_ag_realloc(t->info, (size_t)cap * sizeof *a);
        if (!a) return NULL;
        t->info = a;
        t->info_cap = cap;
    }
    uint32_t slot = t->info_n;
    ni = &t->info[slot];
    memset(ni, 0, sizeof *ni);
    ni->node = n;
    ni->needed = -1;
    uint_fast64_t expect = 0;
    if (atomic_compare_exchange_strong_explicit(&n->task, &expect, (uint_fast64_t)t->gen << 32 | slot,
                                                memory_order_acquire, memory_order_relaxed)) {
        ni->claimed = true;
    } else if (!side_put(t, n, slot)) {
        return NULL;
    }
    t->info_n++;
    *created = true;
    return ni;
}

static void set_task_error(graph_task *t, em_status st, const char *node_name) {
    pthread_mutex_lock(&t->lock);
    if (!atomic_load(&t->has_error)) {
        t->err = st ? st : EM_EINTERNAL;
        const char *msg = em_error_message();
        if (node_name && !strstr(msg, node_name))
            snprintf(t->errmsg, sizeof t->errmsg, "%s: %s", node_name, msg);
        else
            snprintf(t->errmsg, sizeof t->errmsg, "%s", msg);
        atomic_store(&t->has_error, true);
    }
    pthread_mutex_unlock(&t->lock);
}

/* Releases an InputBuffer's gradients; frees it unless it is inline. */
static void free_buffer(em_tensor **b, int n, bool is_inline) {
    if (!b) return;
    for (int i = 0; i < n; i++) em_tensor_release(b[i]);
    if (!is_inline) free(b);
}

/* Adds d to the task's count of outstanding items. A task no device worker
 * touches is counted by its owner thread alone (Note [Single-threaded
 * tasks]): a relaxed load and store, no locked instruction (two a node);
 * t->threaded is fixed before the task runs (compute_dependencies).
 * Returns the count before. */
static inline long outstanding_add(graph_task *t, long d) {
    if (t->threaded) return atomic_fetch_add(&t->outstanding, d);
    long before = atomic_load_explicit(&t->outstanding, memory_order_relaxed);
    atomic_store_explicit(&t->outstanding, before + d, memory_order_relaxed);
    return before;
}

/* Marks the task item done; wakes the owner when it was the last one. */
static void finish_item(graph_task *t) {
    if (outstanding_add(t, -1) == 1 && t->threaded) {
        pthread_mutex_lock(&t->owner_queue->lock);
        pthread_cond_broadcast(&t->owner_queue->cond);
        pthread_mutex_unlock(&t->owner_queue->lock);
    }
}

/* Queues n with its InputBuffer: buffer (heap, taken over) or, when NULL,
 * the INLINE_INPUTS gradients in inl (taken over). */
static void push_item(graph_task *t, em_node *n, em_tensor **buffer, em_tensor *const *inl) {
    ready_queue *q = queue_for(t, n);
    ready_item it = { n, t, buffer, { NULL, NULL } };
    if (!buffer && inl) memcpy(it.inl, inl, sizeof it.inl);
    outstanding_add(t, 1);
    bool lock = queue_needs_lock(t, q);
    if (lock) pthread_mutex_lock(&q->lock);
    bool ok = heap_push(q, it);
    if (ok && lock) pthread_cond_broadcast(&q->cond);
    if (lock) pthread_mutex_unlock(&q->lock);
    if (!ok) {
        em_set_error(EM_ENOMEM, "backward: out of memory queueing %s", em_node_name(n));
        set_task_error(t, EM_ENOMEM, NULL);
        if (buffer) free_buffer(buffer, n->num_inputs, false);
        else free_buffer(it.inl, INLINE_INPUTS, true);
        finish_item(t);
    }
}

static bool has_nan(const em_tensor *g) {
    if (!g || !em_dtype_is_floating(g->dtype)) return false;
    em_tensor *ne = em_ne((em_tensor *)g, (em_tensor *)g); /* NaN != NaN */
    if (!ne) return false;
    em_tensor *s = em_sum(ne, (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE);
    bool any = s && em_load_as_int64(em_tensor_data(s), s->dtype) != 0;
    em_tensor_release(s);
    em_tensor_release(ne);
    return any;
}

/* ---- running one node: evaluate() and its steps ---- */

/* grad(): records, for every capture on n, the gradient flowing into the
 * captured input slot of n (the first one wins), before the tensor hooks
 * run, as PyTorch 1.13 does. buf is n's InputBuffer; nothing is taken. */
static void capture_grads(graph_task *t, em_node *n, em_tensor **buf) {
    for (int c = 0; c < t->n_captures; c++) {
        if (t->captures[c].node != n) continue;
        uint32_t nr = t->captures[c].input_nr;
        em_tensor *g = (int)nr < n->num_inputs ? buf[nr] : NULL;
        task_lock(t);
        em_tensor *old = t->captured[t->captures[c].out_index];
        if (!old) t->captured[t->captures[c].out_index] = em_tensor_retain(g);
        task_unlock(t);
    }
}

/* Whether n runs in this task: always without exec info (backward() with
 * no inputs), else only when compute_exec_info found it needed. */
static bool node_is_needed(graph_task *t, em_node *n) {
    if (!t->has_exec_info) return true;
    node_info *ni = info_get(t, n); /* the arena and exec info are fixed while running */
    return ni && ni->needed == 1;
}

/* Runs n's tensor pre-hooks (retain_grad's too) on the filled slots of
 * buf; a hook may replace a slot's gradient (buf keeps owning it).
 * Returns EM_OK, or the failing hook's status with the slot set. */
static em_status run_pre_hooks(em_node *n, em_tensor **buf) {
    for (em_hook *h = em_node_pre_hooks(n); h; h = h->next) {
        if (h->slot < 0 || h->slot >= n->num_inputs || !buf[h->slot]) continue;
        em_clear_error();
        em_tensor *r = ((em_grad_hook_fn)h->fn)(h->ud, buf[h->slot]);
        if (r) {
            em_tensor_release(buf[h->slot]);
            buf[h->slot] = r;
        } else if (em_error_kind() != EM_OK) {
            return em_error_kind();
        }
    }
    return EM_OK;
}

/* Calls n's apply and then its node post-hooks, filling out[0..num_next)
 * (new references or NULL). In anomaly mode a NaN in a result becomes an
 * error, and an error names the forward op that made n. Without
 * keep_graph, n's saved variables are released afterwards whether or not
 * apply succeeded (the node's own release_saved callback). Returns EM_OK
 * or the error status with the slot set. */
static em_status apply_node(graph_task *t, em_node *n, em_tensor **buf, em_tensor **out) {
    em_status st = n->vt->apply(n, buf, out);
    if (st == EM_OK) {
        for (em_hook *h = em_node_post_hooks(n); h && st == EM_OK; h = h->next)
            st = ((em_node_hook_fn)h->fn)(h->ud, n, buf, n->num_inputs, out, n->num_next);
    }
    if (st == EM_OK && em_is_anomaly_enabled()) {
        for (int j = 0; j < n->num_next; j++) {
            if (has_nan(out[j])) {
                st = em_set_error(EM_EVALUE, "%s returned nan values in its %d%s output%s%s",
                                  em_node_name(n), j + 1, j == 0 ? "st" : j == 1 ? "nd" : j == 2 ? "rd" : "th",
                                  em_node_anomaly_trace(n) ? "; the node was made by " : "",
                                  em_node_anomaly_trace(n) ? em_node_anomaly_trace(n) : "");
                break;
            }
        }
    } else if (st != EM_OK && em_node_anomaly_trace(n) && !strstr(em_error_message(), em_node_anomaly_trace(n))) {
        char msg[900];
        snprintf(msg, sizeof msg, "%s", em_error_message());
        em_set_error(st, "%s (the failing node was made by %s)", msg, em_node_anomaly_trace(n));
    }
    if (!t->keep_graph && n->vt->release_saved) {
        n->vt->release_saved(n);
        n->saved_released = true;
    }
    return st;
}

/* Delivers n's results along its edges: out[j] goes into (or is summed,
 * under create_graph's grad mode, into) slot next[j].input_nr of the next
 * node's not-ready InputBuffer, and a next node whose last edge has now
 * delivered is queued (the in-degree countdown). Takes the delivered
 * out[j] (sets them NULL); the caller releases what is left. On an error
 * sets the task's error and stops. */
static void deliver_outputs(graph_task *t, em_node *n, em_tensor **out) {
    for (int j = 0; j < n->num_next; j++) {
        em_node *next = n->next[j].fn;
        if (!next) continue;
        uint32_t nr = n->next[j].input_nr;
        em_tensor **ready = NULL;
        task_lock(t);
        node_info *ni = info_get(t, next);
        if (!ni) { /* not reachable from the roots: cannot happen */
            task_unlock(t);
            continue;
        }
        bool small = next->num_inputs <= INLINE_INPUTS;
        if (out[j] && (int)nr < next->num_inputs) {
            if (!small && !ni->buffer) ni->buffer = em_ag_calloc((size_t)next->num_inputs, sizeof(em_tensor *));
            if (!small && !ni->buffer) {
                task_unlock(t);
                em_set_error(EM_ENOMEM, "backward: out of memory");
                set_task_error(t, EM_ENOMEM, NULL);
                return;
            }
            em_tensor **slot = small ? &ni->inl[nr] : &ni->buffer[nr];
            if (!*slot) {
                *slot = out[j];
                out[j] = NULL;
            } else {
                em_grad_guard g = em_grad_guard_begin(t->create_graph);
                em_tensor *sum = em_add(*slot, out[j], em_scalar_int(1));
                em_grad_guard_end(g);
                if (!sum) {
                    task_unlock(t);
                    set_task_error(t, em_error_kind(), em_node_name(next));
                    return;
                }
                em_tensor_release(*slot);
                *slot = sum;
            }
        }
        bool now_ready = --ni->deps == 0;
        em_tensor *inl[INLINE_INPUTS] = { NULL, NULL };
        if (now_ready) {
            if (small) {
                memcpy(inl, ni->inl, sizeof inl);
                memset(ni->inl, 0, sizeof ni->inl);
            } else {
                ready = ni->buffer ? ni->buffer : em_ag_calloc((size_t)next->num_inputs, sizeof(em_tensor *));
                ni->buffer = NULL;
            }
        }
        task_unlock(t);
        if (now_ready && !small && !ready) {
            em_set_error(EM_ENOMEM, "backward: out of memory");
            set_task_error(t, EM_ENOMEM, NULL);
            return;
        }
        if (now_ready) push_item(t, next, ready, inl);
    }
}

/* Runs one ready item: skips it when the task already failed; otherwise,
 * in the task's grad mode (create_graph; Note [Grad mode guard]), captures
 * grad() results, and when the node is needed runs its pre-hooks, apply
 * and post-hooks, then (back in the caller's grad mode) delivers the
 * results. A failing step sets the task's error, naming the node. Always
 * frees the item's InputBuffer and marks the item done (finish_item). */
static void evaluate(ready_item it) {
    graph_task *t = it.task;
    em_node *n = it.node;
    bool buf_inline = it.buffer == NULL;
    em_tensor **buf = buf_inline ? it.inl : it.buffer;
    em_tensor **out = NULL;
    em_tensor *out_small[8];
    if (!atomic_load(&t->has_error)) {
        em_grad_guard g = em_grad_guard_begin(t->create_graph);
        em_clear_error();
        capture_grads(t, n, buf);
        bool run = node_is_needed(t, n);
        /* Note [Interrupts]: a node boundary */
        em_status st = run && em_interrupt_pending() ? em_take_interrupt("backward") : EM_OK;
        if (run && st == EM_OK) st = run_pre_hooks(n, buf);
        if (run && st == EM_OK && n->num_next > 0) {
            out = n->num_next <= 8 ? out_small : em_ag_calloc((size_t)n->num_next, sizeof *out);
            if (out == out_small) memset(out_small, 0, sizeof(em_tensor *) * (size_t)n->num_next);
            if (!out) st = em_set_error(EM_ENOMEM, "backward: out of memory");
        }
        if (run && st == EM_OK) st = apply_node(t, n, buf, out);
        em_grad_guard_end(g);
        if (st != EM_OK) set_task_error(t, st, em_node_name(n));
        else if (run) deliver_outputs(t, n, out);
    }
    if (out) {
        for (int j = 0; j < n->num_next; j++) em_tensor_release(out[j]);
        if (out != out_small) free(out);
    }
    free_buffer(buf, buf_inline ? INLINE_INPUTS : n->num_inputs, buf_inline);
    finish_item(t);
}

/* ---- the graph root ---- */

typedef struct {
    em_node base;
    em_tensor **grads;
    int n;
} graph_root;

static em_status root_apply(em_node *self, em_tensor **grads, em_tensor **out) {
    graph_root *r = (graph_root *)self;
    for (int i = 0; i < r->n; i++) out[i] = em_tensor_retain(r->grads[i]);
    return EM_OK;
}
static void root_destroy(em_node *self) {
    graph_root *r = (graph_root *)self;
    /* grads is NULL when make_root could not allocate it */
    for (int i = 0; r->grads && i < r->n; i++) em_tensor_release(r->grads[i]);
    free(r->grads);
}
static const em_node_vtable root_vt = { "GraphRoot", root_apply, NULL, root_destroy };

/* ---- dependencies and exec info (iterative: no recursion on depth) ---- */

static em_status compute_dependencies(graph_task *t, em_node *root) {
    size_t cap = 256, sp = 0;
    em_node **stack = malloc(cap * sizeof *stack);
    bool created;
    if (!stack || !info_add(t, root, &created)) {
        free(stack);
        return em_set_error(EM_ENOMEM, "backward: out of memory");
    }
    stack[sp++] = root;
    while (sp > 0) {
        em_node *n = stack[--sp];
        for (int j = 0; j < n->num_next; j++) {
            em_node *next = n->next[j].fn;
            if (!next) continue;
            node_info *ni = info_add(t, next, &created);
            bool seen = !created;
            if (!ni) { free(stack); return em_set_error(EM_ENOMEM, "backward: out of memory"); }
            ni->deps++;
            if (!seen) {
                if (node_device(next) != EM_CPU) t->threaded = true; /* Note [Single-threaded tasks] */
                if (sp == cap) {
                    cap *= 2;
                    em_node **s = realloc(stack, cap * sizeof *s);
                    if (!s) { free(stack); return em_set_error(EM_ENOMEM, "backward: out of memory"); }
                    stack = s;
                }
                stack[sp++] = next;
            }
        }
    }
    free(stack);
    return EM_OK;
}

/* needed(n) = n is a target, or some edge of n leads to a needed node.
 * Post-order DFS with an explicit stack of (node, next edge index). */
static em_status compute_exec_info(graph_task *t, em_node *root) {
    typedef struct { em_node *n; int j; } frame;
    size_t cap = 256, sp = 0;
    frame *st = malloc(cap * sizeof *st);
    if (!st) return em_set_error(EM_ENOMEM, "backward: out of memory");
    st[sp++] = (frame){ root, 0 };
    info_get(t, root)->needed = 2; /* 2: on the stack */
    while (sp > 0) {
        frame *f = &st[sp - 1];
        if (f->j < f->n->num_next) {
            em_node *next = f->n->next[f->j++].fn;
            if (!next) continue;
            node_info *ni = info_get(t, next);
            if (!ni || ni->needed != -1) continue;
            ni->needed = 2;
            if (sp == cap) {
                cap *= 2;
                frame *s = realloc(st, cap * sizeof *s);
                if (!s) { free(st); return em_set_error(EM_ENOMEM, "backward: out of memory"); }
                st = s;
            }
            st[sp++] = (frame){ next, 0 };
            continue;
        }
        node_info *me = info_get(t, f->n);
        bool need = me->is_target;
        for (int j = 0; j < f->n->num_next && !need; j++) {
            node_info *ni = f->n->next[j].fn ? info_get(t, f->n->next[j].fn) : NULL;
            if (ni && ni->needed == 1) need = true;
        }
        me->needed = need ? 1 : 0;
        sp--;
    }
    free(st);
    return EM_OK;
}

/* ---- backward: em_backward and its steps ---- */

static bool same_shape(const em_tensor *a, const em_tensor *b) {
    return a->ndim == b->ndim && memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static _Thread_local ready_queue cpu_queue_storage;
static _Thread_local bool cpu_queue_ready;
static pthread_key_t queue_key;
static pthread_once_t queue_key_once = PTHREAD_ONCE_INIT;

/* Frees a thread's CPU ready queue when the thread exits. */
static void free_thread_queue(void *p) {
    ready_queue *q = p;
    free(q->heap);
    q->heap = NULL;
    q->n = q->cap = 0;
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
}
static void make_queue_key(void) { pthread_key_create(&queue_key, free_thread_queue); }

/* Makes the GraphRoot of a backward: one next edge per root (its gradient
 * edge) and one seed gradient per root -- grad_roots[i] (retained; same
 * shape as roots[i]) or, when NULL, ones for a single-element root (made
 * with grad mode off). Every root must require grad and have history.
 * Returns EM_OK with *out (a new node), or the error ("who: ...") with
 * *out NULL. */
static em_status make_root(em_tensor **roots, em_tensor **grad_roots, int n_roots, const char *who,
                           graph_root **out) {
    *out = NULL;
    graph_root *root = (graph_root *)em_node_new(sizeof(graph_root), &root_vt, 0, n_roots);
    if (!root) return em_error_kind();
    root->base.sequence_nr = UINT64_MAX;
    root->grads = em_ag_calloc((size_t)n_roots, sizeof(em_tensor *));
    root->n = n_roots;
    if (!root->grads) {
        em_node_release(&root->base);
        return em_set_error(EM_ENOMEM, "%s: out of memory", who);
    }
    em_status st = EM_OK;
    for (int i = 0; i < n_roots && st == EM_OK; i++) {
        em_tensor *r = roots[i];
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        if (!r || !em_requires_grad(r)) {
            st = em_set_error(EM_EVALUE, "%s: element %d of the outputs does not require grad and has "
                                         "no grad_fn", who, i + 1);
            break;
        }
        em_tensor *g = grad_roots ? grad_roots[i] : NULL;
        if (!g) {
            if (r->numel != 1) {
                st = em_set_error(EM_ESHAPE, "%s: grad can be implicitly created only for single-element "
                                             "outputs (this one has shape %s); pass a gradient",
                                  who, em_shape_str(r->ndim, r->sizes, a, sizeof a));
                break;
            }
            em_grad_guard gg = em_grad_guard_begin(false);
            g = em_ones((em_intlist){ r->sizes, r->ndim }, r->dtype, r->device);
            em_grad_guard_end(gg);
            if (!g) { st = em_error_kind(); break; }
        } else {
            if (!same_shape(g, r)) {
                st = em_set_error(EM_ESHAPE, "%s: the gradient has shape %s but the output has shape %s",
                                  who, em_shape_str(g->ndim, g->sizes, a, sizeof a),
                                  em_shape_str(r->ndim, r->sizes, b, sizeof b));
                break;
            }
            em_tensor_retain(g);
        }
        root->grads[i] = g;
        root->base.next[i] = em_gradient_edge(r);
        if (!root->base.next[i].fn) { /* requires grad through its base, but has no history */
            st = em_set_error(EM_EVALUE, "%s: element %d of the outputs does not require grad and has "
                                         "no grad_fn", who, i + 1);
            break;
        }
    }
    if (st != EM_OK) {
        em_node_release(&root->base);
        return st;
    }
    *out = root;
    return EM_OK;
}

/* A new GraphTask for the options o, one level deeper than the running
 * one, owned by this thread's CPU ready queue (made on first use and freed
 * when the thread exits). NULL when out of memory (slot not set). */
static graph_task *task_new(const em_backward_opts *o) {
    graph_task *t = em_ag_calloc(1, sizeof *t);
    if (!t) return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->keep_graph = o->retain_graph || o->create_graph;
    t->create_graph = o->create_graph;
    t->depth = current_depth + 1;
    do t->gen = (uint32_t)atomic_fetch_add_explicit(&next_task_gen, 1, memory_order_relaxed);
    while (t->gen == 0);
    if (!local_queue) {
        if (!cpu_queue_ready) {
            queue_init(&cpu_queue_storage);
            cpu_queue_ready = true;
            pthread_once(&queue_key_once, make_queue_key);
            pthread_setspecific(queue_key, &cpu_queue_storage);
        }
        local_queue = &cpu_queue_storage;
    }
    t->owner_queue = local_queue;
    return t;
}

/* With inputs given (backward's inputs=, or grad()): collects each input's
 * gradient edge into in_edges[i] (new references), marks what must run --
 * backward() accumulates into the inputs' nodes (targets); grad() captures
 * the gradient flowing into each input's slot instead, and a captured node
 * itself runs only when something needed lies beyond it -- and computes
 * the exec info. Returns EM_OK or the error ("who: input N: ..."). */
static em_status mark_inputs(graph_task *t, graph_root *root, em_tensor **inputs, int n_inputs,
                             em_edge *in_edges, const em_backward_opts *o, const char *who) {
    em_status st = EM_OK;
    t->has_exec_info = true;
    if (!o->accumulate) {
        t->captures = em_ag_calloc((size_t)n_inputs, sizeof *t->captures);
        t->captured = em_ag_calloc((size_t)n_inputs, sizeof *t->captured);
        if (!t->captures || !t->captured) return em_set_error(EM_ENOMEM, "%s: out of memory", who);
    }
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i] || !em_requires_grad(inputs[i]))
            return em_set_error(EM_EVALUE, "%s: input %d does not require grad", who, i + 1);
        if ((st = em_collect_edge(inputs[i], &in_edges[i], NULL)) != EM_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", em_error_message());
            return em_set_error(st, "%s: input %d: %s", who, i + 1, why);
        }
        node_info *ni = in_edges[i].fn ? info_get(t, in_edges[i].fn) : NULL;
        if (o->accumulate) {
            if (ni) ni->is_target = 1;
        } else {
            t->captures[t->n_captures++] = (capture){ in_edges[i].fn, in_edges[i].input_nr, i };
        }
    }
    if (!o->accumulate) {
        /* a node that feeds a captured slot must run up to the capture */
        for (int c = 0; c < t->n_captures; c++) {
            node_info *ni = t->captures[c].node ? info_get(t, t->captures[c].node) : NULL;
            if (ni) ni->is_target = 2; /* captured: do not execute the node itself */
        }
    }
    if ((st = compute_exec_info(t, &root->base)) != EM_OK || o->accumulate) return st;
    /* captured nodes only run when something beyond them is needed
     * (another capture counts: grad() w.r.t. y = f(x) and x runs
     * y's node to reach x). Decide for every capture before
     * changing any flag, so the order of the inputs does not matter. */
    int8_t *beyond = em_ag_calloc((size_t)t->n_captures + 1, 1);
    if (!beyond) return em_set_error(EM_ENOMEM, "%s: out of memory", who);
    for (int c = 0; c < t->n_captures; c++) {
        em_node *cn = t->captures[c].node;
        for (int j = 0; cn && j < cn->num_next && !beyond[c]; j++) {
            node_info *nx = cn->next[j].fn ? info_get(t, cn->next[j].fn) : NULL;
            beyond[c] = nx && nx->needed == 1;
        }
    }
    for (int c = 0; c < t->n_captures; c++) {
        em_node *cn = t->captures[c].node;
        node_info *ni = cn ? info_get(t, cn) : NULL;
        if (ni) ni->needed = beyond[c] ? 1 : 0;
    }
    /* a node captured twice may have been cleared by one entry */
    for (int c = 0; c < t->n_captures; c++) {
        em_node *cn = t->captures[c].node;
        node_info *ni = cn ? info_get(t, cn) : NULL;
        if (ni && beyond[c]) ni->needed = 1;
    }
    free(beyond);
    /* a node upstream of a capture is needed; compute_exec_info marked
     * targets needed, so the roots' paths to captures are kept */
    return EM_OK;
}

/* Queues the root and runs CPU work from this thread's queue until the
 * task has no outstanding items (Note [Engine threads]; device workers run
 * theirs meanwhile). Returns EM_OK or the task's first error. */
static em_status run_task(graph_task *t, graph_root *root) {
    current_depth++;
    push_item(t, &root->base, NULL, NULL);
    ready_queue *q = t->owner_queue;
    if (t->threaded) threaded_on_this_thread++;
    for (;;) {
        bool lock = queue_needs_lock(t, q);
        if (lock) {
            pthread_mutex_lock(&q->lock);
            while (q->n == 0 && atomic_load(&t->outstanding) > 0) pthread_cond_wait(&q->cond, &q->lock);
        }
        if (atomic_load(&t->outstanding) == 0 || q->n == 0) {
            /* q->n == 0 without a lock: nothing else can fill the queue */
            if (lock) pthread_mutex_unlock(&q->lock);
            break;
        }
        ready_item it = heap_pop(q);
        if (lock) pthread_mutex_unlock(&q->lock);
        evaluate(it);
    }
    if (t->threaded) threaded_on_this_thread--;
    current_depth--;
    if (atomic_load(&t->has_error)) return em_set_error(t->err, "%s", t->errmsg);
    return EM_OK;
}

/* grad(): moves the captured gradients into out_grads[i] (new references),
 * each reduced to its input's shape (in create_graph's grad mode). An
 * input nothing flowed into is NULL with allow_unused, else an error that
 * releases what was already handed out. */
static em_status collect_grads(graph_task *t, em_tensor **inputs, int n_inputs, em_tensor **out_grads,
                               const em_backward_opts *o, const char *who) {
    for (int i = 0; i < n_inputs; i++) {
        em_tensor *g = t->captured[i];
        t->captured[i] = NULL;
        if (!g && !o->allow_unused) {
            for (int k = 0; k < i; k++) { em_tensor_release(out_grads[k]); out_grads[k] = NULL; }
            return em_set_error(EM_EVALUE, "%s: input %d was not used in the graph (pass "
                                           "allow_unused=true if that is intended)", who, i + 1);
        }
        if (g) {
            em_input_meta m;
            if (em_input_meta_from(&m, inputs[i]) != EM_OK) {
                em_tensor_release(g);
                for (int k = 0; k < i; k++) { em_tensor_release(out_grads[k]); out_grads[k] = NULL; }
                return EM_ENOMEM;
            }
            em_grad_guard gg = em_grad_guard_begin(o->create_graph);
            g = em_ag_reduce_to(g, &m);
            em_grad_guard_end(gg);
        }
        out_grads[i] = g;
    }
    return EM_OK;
}

/* Frees a finished (or failed) task: the InputBuffers of nodes that never
 * became ready, uncollected captures, the inputs' edges (n_inputs). */
static void task_free(graph_task *t, em_edge *in_edges, int n_inputs) {
    for (uint32_t i = 0; i < t->info_n; i++) {
        node_info *ni = &t->info[i];
        free_buffer(ni->buffer, ni->node->num_inputs, false);
        free_buffer(ni->inl, INLINE_INPUTS, true);
        /* Note [Node generations]: hand the node back */
        if (ni->claimed) atomic_store_explicit(&ni->node->task, 0, memory_order_release);
    }
    if (t->captured)
        for (int i = 0; i < n_inputs; i++) em_tensor_release(t->captured[i]);
    for (int i = 0; i < n_inputs; i++) em_node_release(in_edges[i].fn);
    free(in_edges);
    free(t->captured);
    free(t->captures);
    free(t->info);
    free(t->side);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* The steps: make_root (seed gradients), task_new, compute_dependencies
 * (in-degrees), mark_inputs (exec info, only with inputs), run_task,
 * collect_grads (grad() only), task_free. */
em_status em_backward(em_tensor **roots, em_tensor **grad_roots, int n_roots, em_tensor **inputs,
                      int n_inputs, em_tensor **out_grads, const em_backward_opts *opts) {
    em_backward_opts o = opts ? *opts : (em_backward_opts){ false, false, true, false };
    const char *who = o.accumulate ? "backward" : "autograd.grad";
    if (n_roots <= 0) return em_set_error(EM_EVALUE, "%s: no outputs to differentiate", who);
    if (current_depth >= MAX_REENTRANT_DEPTH)
        return em_set_error(EM_EVALUE, "%s: reentrant backward nested deeper than %d levels",
                            who, MAX_REENTRANT_DEPTH);
    em_autograd_init();

    graph_root *root;
    em_status st = make_root(roots, grad_roots, n_roots, who, &root);
    if (st != EM_OK) return st;
    em_edge *in_edges = n_inputs > 0 ? em_ag_calloc((size_t)n_inputs, sizeof *in_edges) : NULL;
    graph_task *t = n_inputs > 0 && !in_edges ? NULL : task_new(&o);
    if (!t) {
        free(in_edges);
        em_node_release(&root->base);
        return em_set_error(EM_ENOMEM, "%s: out of memory", who);
    }
    st = compute_dependencies(t, &root->base);
    if (st == EM_OK && n_inputs > 0) st = mark_inputs(t, root, inputs, n_inputs, in_edges, &o, who);
    if (st == EM_OK) st = run_task(t, root);
    if (st == EM_OK && !o.accumulate && out_grads) st = collect_grads(t, inputs, n_inputs, out_grads, &o, who);
    task_free(t, in_edges, n_inputs);
    em_node_release(&root->base);
    return st;
}
