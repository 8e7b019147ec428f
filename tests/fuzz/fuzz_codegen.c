/* fuzz_codegen.c -- libFuzzer target: codegen's schema and derivatives
 * parsers (malformed YAML, hostile formulas). The input is an ops file,
 * then a line "#8<", then a derivatives file; both are parsed, checked and
 * run through every emitter. An error must be a message (codegen's
 * cg_error_jmp turns its exit into a return here), never a crash.
 * Codegen never frees its schema (a one-shot tool); cg_release_all()
 * frees every block it allocated after each input (Note [Codegen arena]),
 * so LeakSanitizer checks this target too. */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen.h"

static char ops_path[64], der_path[64];

static void write_file(const char *p, const uint8_t *d, size_t n) {
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fwrite(d, 1, n, f);
    fclose(f);
}

static void emit(void (*fn)(cg_buf *, const cg_schema *), const cg_schema *s) {
    cg_buf b = { 0 };
    fn(&b, s);
    cg_free(b.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ops_path[0]) {
        snprintf(ops_path, sizeof ops_path, "/tmp/ember-fuzz-ops-%d.yaml", (int)getpid());
        snprintf(der_path, sizeof der_path, "/tmp/ember-fuzz-der-%d.yaml", (int)getpid());
    }
    const uint8_t *cut = NULL;
    for (size_t i = 0; i + 4 <= size; i++)
        if (memcmp(data + i, "\n#8<", 4) == 0) {
            cut = data + i;
            break;
        }
    size_t n1 = cut ? (size_t)(cut - data) : size;
    write_file(ops_path, data, n1);
    if (cut) write_file(der_path, cut + 4, size - n1 - 4);
    jmp_buf jb;
    cg_error_jmp = &jb;
    if (setjmp(jb) == 0) {
        cg_schema s = { 0 };
        cg_parse_ops(ops_path, &s);
        cg_check_ops(&s);
        if (cut) cg_parse_derivatives(der_path, &s);
        emit(cg_emit_ops_h, &s);
        emit(cg_emit_ops_c, &s);
        emit(cg_emit_autograd, &s);
        emit(cg_emit_lua, &s);
        emit(cg_emit_structured, &s);
        emit(cg_emit_formula_docs, &s);
        emit(cg_emit_man, &s);
    }
    cg_error_jmp = NULL;
    cg_release_all();
    return 0;
}
