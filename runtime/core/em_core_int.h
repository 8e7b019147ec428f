/* em_core_int.h -- private helpers shared by the files of runtime/core.
 * Not installed, not included outside runtime/core. */
#ifndef EM_CORE_INT_H
#define EM_CORE_INT_H

#include "core/em_core.h"

/* Test hook of em_memory_fail_after: true when this allocation must fail.
 * Every allocation core makes asks it first: data blocks from the CPU
 * allocator and the tensor, storage and version headers, so that a test
 * can walk the n-th-allocation failure through every path. */
EM_HIDDEN bool em_core_should_fail(void);

/* Headers (em_tensor, em_storage, em_version) come from small per-thread
 * free lists in front of malloc (see Note [Caching allocator]); both
 * functions are lock-free. em_core_hdr_alloc asks em_core_should_fail
 * first and returns NULL on failure without setting the error. */
enum { EM_HDR_TENSOR, EM_HDR_STORAGE, EM_HDR_VERSION, EM_HDR_KINDS };
EM_HIDDEN void *em_core_hdr_alloc(int kind);
/* A new header with t's storage, version counter, offset, shape and dtype
 * and nothing else (no autograd meta, no view base, the backend key): what
 * em_tensor_new_view makes of t's own geometry, without re-checking it.
 * NULL with EM_ENOMEM set. */
EM_HIDDEN em_tensor *em_core_header_alias(const em_tensor *t);
EM_HIDDEN void em_core_hdr_free(int kind, void *p);
/* Registers the calling thread's exit hook (alloc.c), which drops its
 * caches: the header lists and the wrapped numbers below. */
EM_HIDDEN void em_core_note_thread(void);
/* Releases the calling thread's cached wrapped numbers (Note [Wrapped
 * number cache], tensor.c); em_memory_empty_cache and thread exit call it. */
EM_HIDDEN void em_core_wrapped_cache_drop(void);

/* Counts nbytes of inline storage data (Note [Inline storage]) in the
 * allocator's statistics: allocated (and peak) when made, freed when not. */
EM_HIDDEN void em_core_note_inline(size_t nbytes, bool made);

/* Wrap dim into [0, range) where range is the number of valid positions;
 * ndim is the tensor's dim count quoted in the message. Sets EM_EINDEX and
 * returns -1 when out of range. */
EM_HIDDEN int em_core_wrap_dim_range(int64_t dim, int64_t range, int ndim, const char *op);

/* Shape and strides checks shared by tensor.c and view.c. */
EM_HIDDEN bool em_core_compute_contiguous(int ndim, const int64_t *sizes, const int64_t *strides);

#endif
