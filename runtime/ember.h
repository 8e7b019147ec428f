/* ember.h -- ember's public C API for host programs: Lua states with the
 * ember library, tensors over host memory, calls in both directions, and
 * DLPack exchange. Installed as <ember.h>; link with
 * `pkg-config --cflags --libs ember`.
 *
 * Stability: the names here keep their meaning within one EMBER_API_VERSION;
 * structs passed by pointer (ember_options) grow only at their end.
 * Threads: each ember_state belongs to one thread at a time; several
 * states in several threads run independently. Tensors (ember_tensor) are
 * reference counted and thread-safe to retain and release; one that a
 * state handed out stays valid after the state is closed.
 * Errors: functions returning int give 0 on success and -1 on error;
 * functions returning pointers give NULL. The message is then in
 * ember_last_error (per state) or, for calls without a state,
 * ember_error_message (per thread).
 *
 * The lower-level headers (core/em_core.h, lua/em_lua.h, em_ops.h) are
 * installed too for code that needs the ops from C; they may change
 * between versions. */
#ifndef EMBER_H
#define EMBER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_API_VERSION 1

#if defined(__GNUC__)
#define EMBER_PUBLIC __attribute__((visibility("default")))
#else
#define EMBER_PUBLIC
#endif

typedef struct ember_state ember_state;
typedef struct em_tensor ember_tensor; /* opaque here */

/* The same values as ember's em_dtype. */
typedef enum {
    EMBER_BOOL = 0,
    EMBER_UINT8,
    EMBER_INT8,
    EMBER_INT32,
    EMBER_INT64,
    EMBER_FLOAT16,
    EMBER_BFLOAT16,
    EMBER_FLOAT32,
    EMBER_FLOAT64
} ember_dtype;

/* ---- states ---- */

typedef struct {
    /* Untrusted scripts: no io, os (but os.clock/time/date/difftime), debug,
     * string.dump, loading of binary chunks, or require of files and C
     * modules (require serves ember's own modules only). It does not
     * protect against a script using all CPU or tensor memory: combine it
     * with the limits below and the process's own limits. */
    int sandbox;
    /* Bytes the Lua heap (tables, strings, functions, tensor handles) may
     * use; 0 = no limit. Past it an allocation fails with Lua's "not
     * enough memory" error, which the script may catch. Tensor data is
     * not counted here. */
    size_t memory_limit;
    /* Lua VM instructions one ember_run_* / ember_call may execute (checked
     * every 1000); 0 = no limit. Past it the call fails with the error
     * "instruction budget exceeded"; a running kernel finishes first. */
    uint64_t instruction_limit;
    /* Wall-clock seconds one ember_run_* / ember_call may take (checked with
     * the instruction count); 0 = no limit; error "time budget exceeded". */
    double time_limit;
} ember_options;

/* A new state with the Lua standard libraries (as the sandbox allows) and
 * the global `ember`; opts may be NULL (no sandbox, no limits). NULL on
 * failure (ember_error_message says why). */
EMBER_PUBLIC ember_state *ember_open(const ember_options *opts);
/* Closes the state; tensors the host holds stay valid. NULL is a no-op. */
EMBER_PUBLIC void ember_close(ember_state *S);
/* The state's lua_State, for the Lua C API (a `struct lua_State *`). */
EMBER_PUBLIC struct lua_State *ember_lua(ember_state *S);

/* Runs Lua source (chunkname as in error messages, NULL = "=(host)") or a
 * file. 0, or -1 with the message and a traceback in ember_last_error. */
EMBER_PUBLIC int ember_run_string(ember_state *S, const char *code, const char *chunkname);
EMBER_PUBLIC int ember_run_file(ember_state *S, const char *path);
/* The last error of the state ("" when none); valid until its next call. */
EMBER_PUBLIC const char *ember_last_error(const ember_state *S);
/* The calling thread's last error of the calls without a state. */
EMBER_PUBLIC const char *ember_error_message(void);

/* ---- tensors ---- */

/* A tensor over host memory, without a copy: sizes[ndim], strides[ndim]
 * in elements (NULL = contiguous, row-major). When the last reference
 * goes, deleter(data, ctx) is called (deleter may be NULL: the host keeps
 * ownership and must keep data alive as long as the tensor). Returns a
 * new reference, or NULL. */
EMBER_PUBLIC ember_tensor *ember_tensor_wrap(void *data, ember_dtype dtype, int ndim, const int64_t *sizes,
                                             const int64_t *strides, void (*deleter)(void *data, void *ctx),
                                             void *ctx);
/* A new contiguous CPU tensor of zeros. */
EMBER_PUBLIC ember_tensor *ember_tensor_zeros(ember_dtype dtype, int ndim, const int64_t *sizes);
EMBER_PUBLIC ember_tensor *ember_tensor_retain(ember_tensor *t); /* returns t */
EMBER_PUBLIC void ember_tensor_release(ember_tensor *t);         /* NULL is a no-op */
EMBER_PUBLIC ember_dtype ember_tensor_dtype(const ember_tensor *t);
EMBER_PUBLIC int ember_tensor_ndim(const ember_tensor *t);
EMBER_PUBLIC const int64_t *ember_tensor_sizes(const ember_tensor *t);   /* ndim entries */
EMBER_PUBLIC const int64_t *ember_tensor_strides(const ember_tensor *t); /* in elements */
EMBER_PUBLIC int64_t ember_tensor_numel(const ember_tensor *t);
/* The first element's address (CPU tensors; NULL for other devices). */
EMBER_PUBLIC void *ember_tensor_data(const ember_tensor *t);
/* The .grad of a tensor that requires grad (a new reference), or NULL. */
EMBER_PUBLIC ember_tensor *ember_tensor_grad(const ember_tensor *t);
/* y's backward from C, as y:backward(grad) (grad NULL: y has one element),
 * accumulating into the leaves' .grad; retain_graph keeps the graph for
 * another backward. Lua hooks and custom Functions in the graph run in the
 * states that made them, on this thread. 0, or -1 (ember_error_message). */
EMBER_PUBLIC int ember_backward(ember_tensor *y, ember_tensor *grad, int retain_graph);

/* ---- exchanging tensors with Lua ---- */

/* Sets global name (may be dotted, "model.w", into existing tables) to t;
 * Lua takes its own reference. */
EMBER_PUBLIC int ember_set_global(ember_state *S, const char *name, ember_tensor *t);
/* The tensor in global name (dotted allowed), a new reference; NULL when
 * it is missing or not a tensor (ember_last_error says which). */
EMBER_PUBLIC ember_tensor *ember_get_global(ember_state *S, const char *name);
/* Calls the Lua function at global name (dotted allowed) with nin tensors
 * and stores its first nout results in out[] (new references; a nil
 * result stores NULL; a number becomes a 0-dim tensor; other values are
 * an error). Under the state's budgets. */
EMBER_PUBLIC int ember_call(ember_state *S, const char *name, int nin, ember_tensor *const *in, int nout,
                            ember_tensor **out);

/* ---- DLPack ----
 * The published DLPack ABI (dlpack.h): DLPack 0.8's DLManagedTensor and
 * DLPack 1.0's DLManagedTensorVersioned. These definitions are skipped
 * when the host included a dlpack.h that has them. */
#if !defined(DLPACK_VERSION) && !defined(DLPACK_MAJOR_VERSION)
#define DLPACK_VERSION 80
#define DLPACK_ABI_VERSION 1
typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 } DLDeviceType;
typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;
typedef enum { kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLOpaqueHandle = 3U, kDLBfloat = 4U,
               kDLComplex = 5U, kDLBool = 6U } DLDataTypeCode;
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL = compact row-major */
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
#endif
#ifndef DLPACK_MAJOR_VERSION
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif

/* t as a DLManagedTensor sharing its memory (CPU tensors); the consumer
 * calls its deleter once, which releases ember's reference. */
EMBER_PUBLIC DLManagedTensor *ember_to_dlpack(ember_tensor *t);
/* A tensor over a DLManagedTensor's memory (CPU, lanes 1, a dtype ember
 * has); ember calls m->deleter when the tensor's last reference goes. On
 * error m is left to the caller. */
EMBER_PUBLIC ember_tensor *ember_from_dlpack(DLManagedTensor *m);
/* The same with DLPack 1.0's versioned struct (version 1.0 on export;
 * import takes major version 1 and refuses read-only tensors, since ember
 * tensors are writable). */
EMBER_PUBLIC DLManagedTensorVersioned *ember_to_dlpack_versioned(ember_tensor *t);
EMBER_PUBLIC ember_tensor *ember_from_dlpack_versioned(DLManagedTensorVersioned *m);

#ifdef __cplusplus
}
#endif
#endif
