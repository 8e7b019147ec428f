/* error.c -- the thread-local error slot (see Note [Error state]).
 * One slot per thread: a kind and a message of up to EM_ERROR_MAX bytes. */
#include <stdio.h>
#include <string.h>

#include "core/em_core_int.h"

#define EM_ERROR_MAX 1024

typedef struct {
    em_status kind;
    char msg[EM_ERROR_MAX];
} error_slot;

static _Thread_local error_slot slot; /* zero: kind EM_OK, message "" */

static const char *const status_names[EM_STATUS_COUNT] = {
    [EM_OK] = "ok",
    [EM_ESHAPE] = "shape error",
    [EM_ETYPE] = "type error",
    [EM_EDEVICE] = "device error",
    [EM_EINDEX] = "index error",
    [EM_EVALUE] = "value error",
    [EM_ENOMEM] = "out of memory",
    [EM_EINTERNAL] = "internal error",
    [EM_EINTERRUPT] = "interrupted",
};

/* ---- interrupts (Note [Interrupts] in em_core.h) ---- */

atomic_int em_interrupt_flag;

void em_interrupt(void) { atomic_store(&em_interrupt_flag, 1); }

void em_interrupt_clear(void) { atomic_store(&em_interrupt_flag, 0); }

em_status em_take_interrupt(const char *op)
{
    if (!atomic_exchange(&em_interrupt_flag, 0)) return EM_OK;
    return em_set_error(EM_EINTERRUPT, "%s: interrupted", op);
}

/* Formats into a scratch buffer first, so that arguments may point into
 * the slot itself (em_set_error(k, "add: %s", em_error_message())).
 * Messages longer than the slot are truncated. Returns kind. */
em_status em_set_errorv(em_status kind, const char *fmt, va_list ap)
{
    char buf[EM_ERROR_MAX];
    int n = vsnprintf(buf, sizeof buf, fmt ? fmt : "", ap);
    if (n < 0) {
        buf[0] = '\0';
        n = 0;
    }
    if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1;
    memcpy(slot.msg, buf, (size_t)n + 1);
    slot.kind = kind;
    return kind;
}

em_status em_set_error(em_status kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    em_set_errorv(kind, fmt, ap);
    va_end(ap);
    return kind;
}

em_status em_error_kind(void) { return slot.kind; }

const char *em_error_message(void) { return slot.msg; }

void em_clear_error(void)
{
    slot.kind = EM_OK;
    slot.msg[0] = '\0';
}

const char *em_status_name(em_status s)
{
    if ((unsigned)s >= EM_STATUS_COUNT) return "unknown error";
    return status_names[s];
}
