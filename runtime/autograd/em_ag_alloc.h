/* em_ag_alloc.h -- autograd's C-heap allocations under the memory fault
 * hook (internal to runtime/autograd).
 *
 * Note [Autograd allocation faults]: graph nodes (with their saved
 * variables and edges), hooks and the backward engine's buffers are not
 * tensor storage, so core's fail-the-Nth-allocation hook
 * (em_memory_fail_after) would never reach them. These wrappers count each
 * such allocation with em_memory_test_fail() and fail it when the hook
 * fires, so tests/check_faults.c drives every one of their out-of-memory
 * paths. Outside tests they are malloc/calloc/realloc plus one relaxed
 * atomic load. */
#ifndef EM_AG_ALLOC_H
#define EM_AG_ALLOC_H

#include <stdlib.h>

#include "core/em_core.h"

static inline void *em_ag_malloc(size_t n) { return em_memory_test_fail() ? NULL : malloc(n); }
static inline void *em_ag_calloc(size_t n, size_t size) {
    return em_memory_test_fail() ? NULL : calloc(n, size);
}
/* Like realloc: NULL leaves p allocated. */
static inline void *em_ag_realloc(void *p, size_t n) { return em_memory_test_fail() ? NULL : realloc(p, n); }

/* Small blocks (<= 1 KiB) from the thread's node free lists (Note [Node
 * free lists], node.c), under the fault hook: the per-tensor autograd meta
 * uses them. em_ag_small_free must be given the size that was allocated. */
EM_HIDDEN void *em_ag_small_alloc(size_t n);
EM_HIDDEN void em_ag_small_free(void *p, size_t n);

#endif
