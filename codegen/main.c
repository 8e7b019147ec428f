/* main.c -- the codegen driver: reads schema/ops.yaml and derivatives.yaml,
 * writes the generated C, Lua bindings and man page (see DESIGN.md).
 *
 *   codegen --ops schema/ops.yaml --derivatives schema/derivatives.yaml \
 *           --out build/gen --man build/man
 *
 * Everything is parsed and validated before any file is written, so a bad
 * schema leaves the previous outputs in place; each file is written to a
 * temporary name and renamed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

static void usage(FILE *f) {
    fputs("usage: codegen --ops OPS.yaml [--ops MORE.yaml ...] [--derivatives DERIVATIVES.yaml ...] "
          "--out GEN_DIR [--man MAN_DIR]\n", f);
}

static char *join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = cg_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static void emit_to(const char *dir, const char *file, void (*emit)(cg_buf *, const cg_schema *),
                    const cg_schema *s) {
    cg_buf b = { 0 };
    emit(&b, s);
    char *path = join(dir, file);
    cg_write_file(path, &b);
    cg_free(path);
    cg_free(b.data);
}

int main(int argc, char **argv) {
    /* --ops and --derivatives may repeat: Note [Schema files] */
    const char *ops[argc], *derivs[argc];
    int nops = 0, nderivs = 0;
    const char *ops1 = NULL, *derivs1 = NULL, *out = NULL, *man = NULL;
    for (int i = 1; i < argc; i++) {
        const char **slot = strcmp(argv[i], "--ops") == 0           ? &ops1
                            : strcmp(argv[i], "--derivatives") == 0 ? &derivs1
                            : strcmp(argv[i], "--out") == 0         ? &out
                            : strcmp(argv[i], "--man") == 0         ? &man
                                                                    : NULL;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (!slot || i + 1 == argc) {
            fprintf(stderr, "codegen: %s '%s'\n", slot ? "missing value for" : "unknown option",
                    argv[i]);
            usage(stderr);
            return 2;
        }
        *slot = argv[++i];
        if (slot == &ops1) ops[nops++] = ops1;
        if (slot == &derivs1) derivs[nderivs++] = derivs1;
    }
    if (!nops || !out) {
        usage(stderr);
        return 2;
    }

    cg_schema s = { 0 };
    for (int i = 0; i < nops; i++) cg_parse_ops(ops[i], &s);
    cg_check_ops(&s);
    for (int i = 0; i < nderivs; i++) cg_parse_derivatives(derivs[i], &s);

    cg_mkdirs(out);
    emit_to(out, "em_ops.h", cg_emit_ops_h, &s);
    emit_to(out, "em_kernels_decl.h", cg_emit_kernels_decl_h, &s);
    emit_to(out, "em_ops.c", cg_emit_ops_c, &s);
    emit_to(out, "em_autograd_gen.c", cg_emit_autograd, &s);
    emit_to(out, "em_lua_ops.c", cg_emit_lua, &s);
    emit_to(out, "em_structured.c", cg_emit_structured, &s);
    emit_to(out, "em_formula_docs.c", cg_emit_formula_docs, &s);
    if (man) {
        cg_mkdirs(man);
        emit_to(man, "ember-ops.7", cg_emit_man, &s);
    }
    return 0;
}
