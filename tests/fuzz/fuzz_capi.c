/* fuzz_capi.c -- libFuzzer target: the C API (ember.h) running untrusted
 * code: the bytes are a chunk run by ember_run_string in a sandboxed state
 * with an instruction budget (binary chunks refused, no io/os/files).
 * Errors and budget stops are fine outcomes; a crash is a bug. The state is
 * remade every 256 inputs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/em_core.h"
#include "ember.h"

static ember_state *S;
static unsigned long runs;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!S || runs++ % 256 == 0) {
        if (S) ember_close(S);
        ember_options o = { .sandbox = 1, .instruction_limit = 200000, .memory_limit = 64 << 20 };
        S = ember_open(&o);
        if (!S) return 0;
        em_memory_set_limit((size_t)256 << 20);
    }
    char *code = malloc(size + 1);
    if (!code) return 0;
    memcpy(code, data, size);
    code[size] = 0;
    ember_run_string(S, code, "=fuzz");
    free(code);
    return 0;
}
