/* em_comp_error.h -- renaming a part's error to the op a composite
 * implements, shared by the composite_*.c files that need it. */
#ifndef EM_COMP_ERROR_H
#define EM_COMP_ERROR_H

#include <stdlib.h>
#include <string.h>

#include "core/em_core.h"

/* r, or with r NULL the error of the op `part` (its message starts
 * "part: ") renamed to the user's op: "op: ...". Returns r. */
static inline em_tensor *em_comp_as_op_error(em_tensor *r, const char *part, const char *op) {
    if (r) return r;
    const char *msg = em_error_message();
    size_t n = strlen(part);
    if (strncmp(msg, part, n) == 0 && strncmp(msg + n, ": ", 2) == 0) {
        char *copy = strdup(msg + n + 2);
        em_status kind = em_error_kind();
        if (copy) em_set_error(kind, "%s: %s", op, copy);
        free(copy);
    }
    return NULL;
}

#endif
