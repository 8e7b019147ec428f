/* em_autograd.h -- the define-by-run graph: autograd meta, nodes and edges,
 * saved variables, AccumulateGrad, the backward engine, grad-mode guards,
 * hooks, anomaly mode. Reaches kernels only by redispatching.
 *
 * Note [Autograd key]
 * A tensor carries EM_KEY_AUTOGRAD in its key set when it takes part in
 * the graph (a leaf with requires_grad, or a result with a grad_fn) and
 * when it is a view (whose base may gain history later; Note [View
 * history]). Ops on other tensors go straight to the backend kernel, so
 * the no-grad path pays nothing. Grad mode off (no_grad, inference_mode) puts
 * the key in the thread-local exclude set; the generated Autograd kernels
 * then never run. Generated kernels (build/gen/em_autograd_gen.c) record a
 * node, redispatch below Autograd and attach history to the result.
 */
#ifndef EM_AUTOGRAD_H
#define EM_AUTOGRAD_H

#include "dispatch/em_dispatch.h"

typedef struct em_node em_node;

/* An edge points at input slot input_nr of node fn (fn == NULL: no grad
 * flows there). The edge owns a reference to fn. */
typedef struct {
    em_node *fn;
    uint32_t input_nr;
} em_edge;

/* What a node knows of each of its inputs (the forward op's outputs): the
 * shape and dtype a gradient for it must have. col_major: the input was a
 * 2-d column-major matrix (a transpose of a contiguous one), so mm's
 * gradient can be produced in that layout (Note [mm gradient layout],
 * formulas_speed.c); it sits in padding and costs no bytes.
 *
 * Note [Interned shapes]
 * sizes points at an interned, immutable copy of the shape (node.c:
 * em_ag_intern_shape), shared by every meta of that shape and never
 * freed, so a meta is 16 bytes instead of 144 (a node holds two or three:
 * its inputs' metas and its arguments' metas), is copied by value freely
 * and needs no clean-up. The table grows by one entry per distinct shape
 * the process ever records (about 50 bytes each); a thread-local cache in
 * front of it makes the common lookup lock-free. Only em_input_meta_from
 * fills a meta (it fails on out of memory, so callers check it); code
 * that wants its own shape uses an int64_t array, not a meta. */
typedef struct {
    const int64_t *sizes;       /* [ndim], interned: read-only, never freed */
    int8_t ndim;                /* <= EM_MAX_DIMS */
    int8_t dtype;               /* an em_dtype, narrowed so that a meta is 16 bytes */
    em_device device;
    uint8_t col_major;
} em_input_meta;
_Static_assert(EM_MAX_DIMS <= INT8_MAX && EM_DTYPE_COUNT <= INT8_MAX, "em_input_meta narrows ndim and dtype");
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(em_input_meta) <= 16, "Note [Interned shapes]: keep the input meta small");
#endif

/* Hooks (tensor hooks run on the gradient before the node uses it). A hook
 * returns a replacement gradient (a new reference), or NULL: with the error
 * slot clear "no change", with it set "fail the backward". */
typedef em_tensor *(*em_grad_hook_fn)(void *ud, em_tensor *grad);
/* Node post-hooks see the node's input grads and output grads. */
typedef em_status (*em_node_hook_fn)(void *ud, em_node *node, em_tensor **grad_inputs, int n_in,
                                     em_tensor **grad_outputs, int n_out);
typedef struct em_hook {
    struct em_hook *next;
    int id;                      /* handle for removal */
    int slot;                    /* input slot for grad hooks */
    void *fn;                    /* em_grad_hook_fn or em_node_hook_fn */
    void *ud;
    void (*free_ud)(void *ud);   /* called when the hook is removed/freed */
    bool retains_grad;           /* the hook behind retain_grad(): it moves with the
                                    tensor's history (in-place ops) */
} em_hook;

typedef struct em_node_vtable {
    const char *name; /* "MulBackward" */
    /* Computes gradients for the next edges. grads[i] is the (possibly
     * NULL = zero) gradient of input slot i; out[j] receives a new
     * reference for next edge j or NULL (no gradient). Returns EM_OK or an
     * error status with the slot set. Must not keep grads. */
    em_status (*apply)(em_node *self, em_tensor **grads, em_tensor **out);
    /* Frees saved variables (after a backward without retain_graph). */
    void (*release_saved)(em_node *self);
    /* Frees the node's own fields (saved variables, ud); not the node. */
    void (*destroy)(em_node *self);
} em_node_vtable;

/* Note [Node extras]
 * What few nodes have -- hooks and the anomaly-mode trace -- lives in a
 * block of its own that a node points at once it has any (em_node_extras,
 * made on demand; freed with the node), and an AccumulateGrad's weak
 * pointer to its leaf lives in its own larger struct (meta.c): the header
 * every recorded op allocates stays small (Note [Node header]), 16 bytes
 * less per node of a scalar graph once the node's block is rounded. */
typedef struct em_node_extra {
    em_hook *pre_hooks;         /* tensor hooks, by input slot */
    em_hook *post_hooks;        /* node hooks */
    char *anomaly_trace;        /* forward op + traceback (anomaly mode) */
} em_node_extra;

struct em_node {
    atomic_int refcount;        /* 32 bits (Note [Node header]) */
    bool saved_released;        /* release_saved() ran */
    bool owner_thread;          /* must run on the thread that called backward (Lua) */
    bool is_accumulate_grad;
    uint8_t alloc_class;        /* node.c: its free-list class, 0: plain malloc */
    int32_t num_inputs;         /* gradient slots = forward outputs */
    int32_t num_next;           /* edges to the forward inputs */
    const em_node_vtable *vt;
    uint64_t sequence_nr;       /* creation order on its thread: later nodes run first */
    em_edge *next;              /* [num_next], never NULL; the input metas follow it
                                   (em_node_input_meta, Note [Node header]) */
    em_node_extra *extra;       /* hooks and trace, NULL while none (Note [Node extras]) */
    atomic_uint_fast64_t task;  /* engine: the claiming GraphTask's generation (high 32
                                   bits) and info slot (low 32), 0: none; Note [Node
                                   generations] (engine.c) */
};
/* Note [Node header]
 * Every recorded op allocates one node block (em_node_new): the header,
 * the op's own fields, its edges, then its input metas. The header is 56
 * bytes (pinned below): the refcount is 32 bits (a node referenced more
 * than 2^31 times would need that many edges and tensors), the input metas
 * are found after the edges instead of through a pointer of their own, and
 * the engine's claim is one word (generation and slot). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct em_node) <= 56, "Note [Node header]: keep the node header small");
#endif
/* n's input metas: [num_inputs], right after its edges (Note [Node header]). */
static inline em_input_meta *em_node_input_meta(const em_node *n) { return (em_input_meta *)(n->next + n->num_next); }
/* n's hooks and trace (NULL when it has none). */
static inline em_hook *em_node_pre_hooks(const em_node *n) { return n->extra ? n->extra->pre_hooks : NULL; }
static inline em_hook *em_node_post_hooks(const em_node *n) { return n->extra ? n->extra->post_hooks : NULL; }
static inline const char *em_node_anomaly_trace(const em_node *n) { return n->extra ? n->extra->anomaly_trace : NULL; }
/* n's extras, made (zeroed) when it has none; NULL with EM_ENOMEM set. */
EM_API em_node_extra *em_node_extras(em_node *n);

/* The per-tensor autograd state (em_tensor.autograd_meta). */
typedef struct em_ag_meta {
    em_tensor *grad;            /* owned; NULL until a backward writes it */
    em_node *grad_fn;           /* owned; NULL for leaves */
    _Atomic(em_node *) grad_accumulator; /* weak; written under weak_lock, read
                                   without it only by the meta's last owner (Note
                                   [AccumulateGrad is weak]); owned by a saved leaf's
                                   alias (Note [Saved leaves and views]) */
    em_tensor *owner;           /* weak back pointer to the tensor */
    uint32_t output_nr;
    bool requires_grad;         /* leaf flag (results use grad_fn) */
    bool retains_grad;
    uint16_t multi_view_nr;     /* with multi_view_of: which of those outputs (0-based),
                                   saturating at UINT16_MAX -- only the error message
                                   reads it, and it keeps the meta at 64 bytes (one
                                   recorded op allocates one) */
    em_node *retain_fn;         /* owned: the node holding the retain_grad hook (the
                                   grad_fn when retain_grad() ran, or the node of a
                                   later in-place op on the tensor itself) */
    em_hook *hooks;             /* leaf tensor hooks (AccumulateGrad pre-hooks) */
    const char *multi_view_of;  /* the node's name (static) when this view is one of
                                   several returned by one op (split, unbind), or a
                                   view of one: an in-place write into it is refused */
} em_ag_meta;

/* A tensor's geometry without its data: what as_strided needs to rebuild a
 * view of a base, and what CopySlices needs to place a view's gradient. */
typedef struct {
    int32_t ndim;
    int64_t offset;              /* storage offset, elements */
    int64_t sizes[EM_MAX_DIMS];
    int64_t strides[EM_MAX_DIMS];
} em_geometry;
EM_API void em_geometry_from(em_geometry *g, const em_tensor *t);

/* ---- initialisation ---- */
/* Registers the meta destructor with core. Idempotent, thread-safe. */
EM_API void em_autograd_init(void);

/* ---- tensor-level API ---- */
EM_API bool em_requires_grad(const em_tensor *t);
EM_API em_status em_set_requires_grad(em_tensor *t, bool on); /* leaves only */
EM_API bool em_is_leaf(const em_tensor *t);
EM_API em_tensor *em_grad(const em_tensor *t);       /* new reference or NULL */
EM_API em_status em_set_grad(em_tensor *t, em_tensor *g); /* g may be NULL */
EM_API em_node *em_grad_fn(const em_tensor *t);      /* borrowed or NULL */
EM_API em_status em_retain_grad(em_tensor *t);
/* A new tensor sharing data (and version counter) without history. */
EM_API em_tensor *em_detach(const em_tensor *t);
/* Tensor hooks: returns a handle id (> 0), or -1 with the error set. */
EM_API int em_register_hook(em_tensor *t, em_grad_hook_fn fn, void *ud, void (*free_ud)(void *));
EM_API em_status em_remove_hook(em_tensor *t, int id);
EM_API int em_node_register_hook(em_node *n, em_node_hook_fn fn, void *ud, void (*free_ud)(void *));
EM_API em_status em_node_remove_hook(em_node *n, int id);

/* Frees a hook list, calling each hook's free_ud. */
EM_HIDDEN void em_ag_free_hooks(em_hook *h);

/* ---- nodes ---- */
/* Allocates a node of `size` bytes (>= sizeof(em_node)) with num_next
 * edges (all NULL) and num_inputs input slots; refcount 1. */
EM_API em_node *em_node_new(size_t size, const em_node_vtable *vt, int num_inputs, int num_next);
EM_API void em_node_retain(em_node *n);
/* Drops a reference; nodes freed by it are destroyed iteratively (never
 * recursing on graph depth). See Note [Iterative node deletion]. */
EM_API void em_node_release(em_node *n);
EM_API const char *em_node_name(const em_node *n);
/* The edge a gradient for t flows into: its grad_fn and output_nr, or its
 * AccumulateGrad (made on demand) for a leaf requiring grad, or {NULL,0}. */
EM_API em_edge em_gradient_edge(em_tensor *t);
/* True when a node that saves t as an input must keep an alias instead of
 * t (Note [Saved leaves and views]): t is a leaf that requires grad, a
 * view, or retains its grad. */
EM_API bool em_ag_save_as_alias(const em_tensor *t);
/* That alias: same storage, geometry and version counter; no base, no
 * .grad; t's grad_fn and output_nr, or for a leaf an owned reference to its
 * AccumulateGrad. NULL with the error set on failure. */
EM_API em_tensor *em_ag_saved_alias(em_tensor *t);
/* em_gradient_edge for recording a node: EM_OK with *out set, or an error
 * (out of memory making the AccumulateGrad node). t may be a view made in
 * no_grad mode whose base was written since (Note [View history]): with
 * stale given, *stale becomes true and the edge is empty (generated
 * kernels then refuse to record a differentiable result, as PyTorch
 * does); without, that is an error. */
EM_API em_status em_collect_edge(em_tensor *t, em_edge *out, bool *stale);
/* The error for such a view ("op: a view was created in no_grad mode
 * ..."; op may be NULL). */
EM_API em_status em_ag_stale_view_error(const char *op);
/* Makes t a result of node at output slot nr: creates its meta, sets
 * grad_fn (retained), the Autograd key, and node's input meta nr. */
EM_API em_status em_set_history(em_tensor *t, em_node *node, uint32_t nr);
/* em_set_history taking over the caller's reference to node instead of
 * retaining one (on failure the caller still owns it): a generated
 * kernel's last use of its node, two locked instructions fewer. */
EM_API em_status em_set_history_take(em_tensor *t, em_node *node, uint32_t nr);
/* For in-place ops: self becomes output 0 of node (its old history is
 * already the node's edge). Fails on a leaf requiring grad. When self is
 * a view, its base's history becomes a CopySlices around node instead
 * (Note [View history]). */
EM_API em_status em_rebase_history(em_tensor *t, em_node *node);

/* Marks the writes of x[...] = v (Lua assignment): PyTorch's setitem
 * leaves retain_grad's hook on the node it was on, where a direct in-place
 * op moves it to its own node. Returns the previous setting. */
EM_API bool em_ag_set_setitem(bool on);

/* Note [View history]
 * Every view knows its root base (Note [View base] in core) and the version
 * at which its history was made (t->view_version). Views and their base
 * share one version counter, so an in-place write into any of them moves
 * it. The history of a view follows PyTorch's rules:
 *   - An in-place op on a view whose base takes part in the graph, or with
 *     an input that requires grad, records its node as usual and then
 *     gives the BASE a CopySlices node wrapping it (em_rebase_history):
 *     CopySlices passes the base's gradient through, except in the view's
 *     region, where it runs the in-place node on that slice. The view's
 *     history is then regenerated from the base's new history.
 *   - A view whose version moved since its history was made, and that has
 *     a grad_fn or whose base requires grad, regenerates its history on the
 *     next query (requires_grad, is_leaf, grad_fn, gradient edge): its
 *     grad_fn becomes the AsStridedBackward of as_strided(base, its sizes,
 *     strides, offset), so gradients reach the base's CURRENT history.
 *   - An in-place op on a view of a leaf that requires grad is refused, and
 *     so is a recorded in-place op on a view made in no_grad mode (it
 *     would be ambiguous which history the write belongs to). PyTorch also
 *     refuses to regenerate such a view after its base was written with
 *     grad mode on: ember leaves such a view stale (no gradient flows
 *     through it) and refuses it as an input of autograd.grad or of an op
 *     with a differentiable result.
 * Views carry the Autograd key, so ops on a view whose base gains history
 * later (b:mul_(w)) still reach the Autograd kernel, which asks
 * em_requires_grad and so regenerates. */
/* The checks an in-place op makes before it writes self: not a leaf that
 * requires grad, not a view of a leaf that requires grad. */
EM_API em_status em_ag_check_inplace(em_tensor *self, const char *op);
/* Marks t, a result of an op returning several views recorded by node
 * `name` (a static string), so that em_ag_check_inplace refuses in-place
 * writes into it, as PyTorch does. A no-op for a t that is not a view. */
EM_API em_status em_ag_mark_multi_view(em_tensor *t, const char *name);
/* A view made from such a view is one too (PyTorch propagates the
 * creation meta): called by the generated kernels of view ops. */
EM_API void em_ag_inherit_multi_view(em_tensor *view, const em_tensor *src);
/* Regenerates a stale view's history now (see the Note); a no-op for
 * tensors that are not views or are in step. Called by the queries. */
EM_API void em_ag_sync_view(em_tensor *t);
static inline void em_ag_maybe_sync(const em_tensor *t) {
    if (t && t->view_base && t->view_version != em_tensor_version(t)) em_ag_sync_view((em_tensor *)t);
}

/* ---- saved variables ---- */
/* Note [Saved variables]
 * Saving an op's input keeps a reference to the tensor and its version.
 * Saving an op's own output would make a cycle (node -> output -> node),
 * so only the data is kept (an alias without history) and unpacking
 * rebuilds a tensor whose grad_fn is the node. Leaves that require grad,
 * views and tensors that retain their grad are saved as aliases that keep
 * their history but not the tensor (Note [Saved leaves and views], meta.c).
 * Unpacking checks the version and refuses a tensor modified in place
 * since it was saved. */
/* Note [Saved outputs]
 * An op's own output is saved without its history (Note [Saved variables]).
 * When it is the plain fresh tensor an op makes -- contiguous, at offset 0,
 * no view, its version counter its storage's (Note [Version counter
 * sharing]) -- and its node's input meta for it (input meta output_nr of
 * its grad_fn) gives its shape and dtype, the saved variable keeps only a
 * reference to the storage, not an alias header (~190 bytes less per such
 * node: tanh's, exp's, sigmoid's results). Unpacking, which is given that
 * node as its owner, rebuilds the header from the meta; a version check
 * reads the storage's counter. Other outputs keep an alias. */
/* Note [Saved numbers]
 * An input that is a wrapped number (a Lua number passed as a Tensor
 * argument: `y * 0.999`) is saved as its value, not as the tensor: no
 * tensor and storage header kept per node (about 100 bytes a node of a
 * scalar chain). Unpacking makes the wrapped number again, through the
 * cache of Note [Wrapped number cache] (tensor.c), which usually hands back
 * the very tensor the forward made. A wrapped number is nobody's to write
 * in place, so there is no version to check. */
typedef struct {
    union {
        em_tensor *data;    /* owned: an alias (outputs, em_ag_save_as_alias) or the tensor;
                               NULL for a saved number */
        em_storage *storage; /* is_storage: the output's storage, owned (Note [Saved outputs]) */
    };
    union {
        struct {
            uint32_t version;
            uint32_t output_nr;
        };
        uint64_t number;    /* is_number: the wrapped number's data bits (Note [Saved numbers]) */
    };
    bool is_output;
    bool was_saved;         /* false: nothing saved (optional tensor absent) */
    bool is_number;         /* a wrapped number kept as number/number_dtype (until released) */
    uint8_t number_dtype;   /* its dtype: float64, int64 or bool */
    bool is_storage;        /* an output kept as its storage (Note [Saved outputs]) */
} em_saved_var;
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(em_saved_var) <= 24, "Note [Saved numbers]: keep the saved variable small");
#endif
/* Saves t for backward: an input as a reference, an output as an alias
 * without its history (Note [Saved variables]). Fails only for an output,
 * when its alias cannot be made: EM_ENOMEM with the slot set, nothing saved. */
EM_API em_status em_saved_save(em_saved_var *sv, em_tensor *t, bool is_output);
/* em_saved_save for an input t of an in-place op that writes `written`
 * (generated in-place kernels): a t sharing written's storage is saved as
 * an alias too (Note [Saved leaves and views]), since the op moves
 * written's history onto the saving node itself. */
EM_API em_status em_saved_save_beside(em_saved_var *sv, em_tensor *t, const em_tensor *written);
/* Returns a new reference, or NULL with the error set (stale or released). */
EM_API em_tensor *em_saved_unpack(em_saved_var *sv, em_node *owner);
EM_API void em_saved_release(em_saved_var *sv);

/* ---- grad mode (thread-local) ---- */
EM_API bool em_is_grad_enabled(void);
/* Set grad mode; returns the previous value. */
EM_API bool em_set_grad_enabled(bool on);
/* Note [Grad mode guard]
 * Code that runs ops in a chosen grad mode (the engine under create_graph,
 * a custom Function's forward under no_grad, ...) saves and restores the
 * caller's mode through this pair, never with em_set_grad_enabled by hand:
 *     em_grad_guard g = em_grad_guard_begin(false);
 *     ... ops ...
 *     em_grad_guard_end(g);
 * Every path out of the region passes em_grad_guard_end exactly once, so
 * keep the region free of early returns. (The Lua guards no_grad,
 * enable_grad and set_grad_enabled in lua/stdlib/autograd.lua do the same
 * through autograd._set_grad_enabled, which returns the previous mode.) */
typedef struct { bool prev; } em_grad_guard;
static inline em_grad_guard em_grad_guard_begin(bool on) { return (em_grad_guard){ em_set_grad_enabled(on) }; }
static inline void em_grad_guard_end(em_grad_guard g) { em_set_grad_enabled(g.prev); }
EM_API bool em_is_inference_mode(void);
EM_API bool em_set_inference_mode(bool on);
EM_API bool em_is_anomaly_enabled(void);
EM_API bool em_set_anomaly_enabled(bool on);
/* The Lua layer installs a provider of a traceback for anomaly mode. */
EM_API void em_ag_set_trace_provider(char *(*fn)(void *ud), void *ud);

/* ---- the engine ---- */
typedef struct {
    bool retain_graph;
    bool create_graph;
    bool accumulate;        /* backward(): write .grad of leaves; grad(): false */
    bool allow_unused;
} em_backward_opts;

/* Runs backward from roots (n_roots tensors) seeded with grad_roots (NULL
 * entries: ones for single-element roots, else an error). With inputs
 * (n_inputs > 0) only paths to them run; when out_grads is given it
 * receives a new reference per input (NULL where unused and allowed).
 * Returns EM_OK or the first error (naming the failing node). */
EM_API em_status em_backward(em_tensor **roots, em_tensor **grad_roots, int n_roots,
                             em_tensor **inputs, int n_inputs, em_tensor **out_grads,
                             const em_backward_opts *opts);

/* Nodes for the Lua layer (custom functions), in runtime/autograd/node.c.
 * They run on the thread that called backward (owner_thread). */
typedef em_status (*em_custom_apply_fn)(void *ud, em_node *node, em_tensor **grads, em_tensor **out);
EM_API em_node *em_custom_node_new(const char *name, int num_inputs, int num_next,
                                   em_custom_apply_fn apply, void *ud, void (*free_ud)(void *));
/* Gives a custom node (from em_custom_node_new) a release_saved callback:
 * the engine calls release_saved(ud) after running the node in a backward
 * without retain_graph (as for every node's saved variables), so the ud
 * frees what it saved for backward; NULL removes it. Returns EM_OK, or
 * EM_EVALUE for a node that is not a custom one. */
EM_API em_status em_custom_node_set_release(em_node *node, void (*release_saved)(void *ud));

/* Graphviz DOT text of the graph behind the roots (malloc'd; caller frees). */
EM_API char *em_autograd_dot(em_tensor **roots, int n_roots);

/* ---- helpers for generated and hand-written backward code ---- */

/* Note [Formula scopes]
 * Backward formulas create temporaries. Between em_ag_scope_begin() and
 * em_ag_scope_end() every tensor passed to em_ag_tmp() is released at the
 * end, except one that em_ag_tmp_take() moved out. Scopes nest. */
EM_API int em_ag_scope_begin(void);
EM_API em_tensor *em_ag_tmp(em_tensor *t); /* registers t; returns it (NULL passes through) */
EM_API void em_ag_scope_end(int mark);
/* A new reference to t, a formula's value, for an output slot: when t is
 * the newest temporary of the scope opened at mark (nearly always: the
 * formula's last op made it), the scope's reference moves to the caller
 * instead (no retain now, no release at the scope's end: two atomic
 * updates fewer a gradient); otherwise em_tensor_retain(t). */
EM_API em_tensor *em_ag_tmp_take(em_tensor *t, int mark);

/* Sums grad down to the shape in meta (undoing broadcasting) and casts it
 * to meta's dtype. Takes over grad's reference; returns a new one or NULL. */
EM_API em_tensor *em_ag_reduce_to(em_tensor *grad, const em_input_meta *meta);
/* Fills m from t (shape interned, Note [Interned shapes]). EM_ENOMEM with
 * the slot set (m unchanged) when the shape cannot be interned. */
EM_API em_status em_input_meta_from(em_input_meta *m, const em_tensor *t);
/* The interned copy of a shape (Note [Interned shapes]): equal shapes give
 * the same pointer; never freed. NULL with EM_ENOMEM set when out of
 * memory. */
EM_API const int64_t *em_ag_intern_shape(int ndim, const int64_t *sizes);

#endif
