/* emit_structured.c -- writes em_structured.c: the backend kernels of
 * every structured family (Note [Structured kernels] in
 * runtime/kernels/em_structured.h), and the meta/impl prototypes that
 * em_kernels_decl.h carries.
 *
 * Per backend key k with an impl, for the out= op O of a family with meta
 * M and impl I, and each op X of the family (O itself and its delegates):
 *   functional X  meta -> em_structured_alloc -> I(out)
 *   in-place X    meta -> em_structured_check_inplace -> I(out = self)
 *                 -> bump self's version, return self
 *   O (out=)      meta -> em_structured_check_out -> I(out)
 *                 -> bump out's version, return out
 * The wrapper of X at key k is em_<key>_<X> (em_cpu_add_), registered in
 * the op table like a hand-written kernel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

const cg_op *cg_structured_family(const cg_schema *s, const cg_op *op) {
    if (op->meta) return op;
    if (op->delegate >= 0) return &s->ops[op->delegate];
    return NULL;
}

void cg_emit_structured_params(cg_buf *b, const cg_op *o, bool impl) {
    cg_puts(b, impl ? "em_keyset ks, const em_meta *m" : "em_meta *m");
    for (int i = 0; i < o->nargs; i++)
        if (i != o->out_arg) cg_printf(b, ", %s%s", cg_types[o->args[i].type].ctype, o->args[i].name);
    if (impl) cg_puts(b, ", em_tensor *out");
}

/* The prototypes of every family's meta and impls (em_kernels_decl.h). */
void cg_emit_structured_decls(cg_buf *b, const cg_schema *s) {
    cg_puts(b, "\n/* Structured families: meta functions and backend impls (Note [Structured\n"
               " * kernels] in kernels/em_structured.h). EM_OK, or the error set. */\n");
    for (int i = 0; i < s->nops; i++) {
        const cg_op *o = &s->ops[i];
        if (!o->meta) continue;
        cg_printf(b, "/* %s */\nEM_HIDDEN em_status %s(", o->name, o->meta);
        cg_emit_structured_params(b, o, false);
        cg_puts(b, ");\n");
        for (int k = 0; k < CG_KEY_COUNT; k++) {
            if (!o->impl[k]) continue;
            cg_printf(b, "EM_HIDDEN em_status %s(", o->impl[k]);
            cg_emit_structured_params(b, o, true);
            cg_puts(b, ");\n");
        }
    }
}

/* "self, other, alpha" of the out= op without out (the meta's arguments). */
static void family_args(cg_buf *b, const cg_op *o) {
    for (int i = 0; i < o->nargs; i++)
        if (i != o->out_arg) cg_printf(b, ", %s", o->args[i].name);
}

/* The tensors an output must not overlap partially: every Tensor argument
 * but skip (an in-place self), as a C array initialiser. Returns the count. */
static int inputs(cg_buf *b, const cg_op *o, int skip) {
    int n = 0;
    cg_puts(b, "    em_tensor *in[] = {");
    for (int i = 0; i < o->nargs; i++) {
        if (i == o->out_arg || i == skip || !cg_type_is_tensor(o->args[i].type)) continue;
        cg_printf(b, "%s%s", n++ ? ", " : " ", o->args[i].name);
    }
    if (!n) cg_puts(b, " NULL");
    cg_puts(b, " };\n");
    return n;
}

static void emit_wrapper(cg_buf *b, const cg_op *x, const cg_op *o, int k) {
    bool is_out = x == o, inplace = !is_out && x->ret_alias_write;
    const char *what = is_out ? "out=" : inplace ? "in-place" : "functional";
    cg_printf(b, "/* %s at %s: %s variant of %s's family (meta %s, impl %s). */\n"
                 "em_tensor *%s(", x->name, cg_key_names[k], what, o->base, o->meta, o->impl[k], x->kernel[k]);
    cg_emit_params(b, x, true);
    cg_puts(b, ")\n{\n    em_meta m;\n");
    const char *dst = is_out ? o->args[o->out_arg].name : inplace ? x->args[0].name : "r";
    if (!is_out && !inplace) cg_puts(b, "    em_tensor *r;\n");
    int n = 0;
    if (is_out) n = inputs(b, o, -1);
    else if (inplace) n = inputs(b, o, 0);
    /* messages name the Lua op: add for add and add.out, add_ in place
     * (clamp_ for clamp_.Tensor) */
    cg_printf(b, "\n    m.op = \"%s\";\n    m.out_dtype = EM_META_OUT_CAST;\n    m.out_is_new = %s;\n    if (%s(&m",
              inplace ? x->base : o->base, !is_out && !inplace ? "true" : "false", o->meta);
    family_args(b, o);
    cg_puts(b, ") != EM_OK)\n        return NULL;\n");
    if (is_out)
        cg_printf(b, "    if (em_structured_check_out(&m, %s, in, %d) != EM_OK)\n        return NULL;\n", dst, n);
    else if (inplace)
        cg_printf(b, "    if (em_structured_check_inplace(&m, %s, in, %d) != EM_OK)\n        return NULL;\n", dst,
                  n);
    else
        cg_puts(b, "    r = em_structured_alloc(&m);\n    if (!r)\n        return NULL;\n");
    cg_printf(b, "    if (%s(ks, &m", o->impl[k]);
    family_args(b, o);
    cg_printf(b, ", %s) != EM_OK) {\n", dst);
    if (!is_out && !inplace) cg_puts(b, "        em_tensor_release(r);\n");
    cg_puts(b, "        return NULL;\n    }\n");
    if (!is_out && !inplace) cg_puts(b, "    return r;\n}\n\n");
    else cg_printf(b, "    em_tensor_bump_version(%s);\n    return em_tensor_retain(%s);\n}\n\n", dst, dst);
}

void cg_emit_structured(cg_buf *b, const cg_schema *s) {
    cg_generated_banner(b, s->ops_path);
    cg_puts(b, "/* em_structured.c -- the backend kernels of the structured op families:\n"
               " * meta, then allocation or the in-place/out= checks, then the impl. See\n"
               " * Note [Structured kernels] in kernels/em_structured.h. */\n"
               "#include \"em_ops.h\"\n#include \"em_kernels_decl.h\"\n#include \"kernels/em_structured.h\"\n\n");
    const char *last = NULL;
    int nwritten = 0;
    for (int i = 0; i < s->nops; i++) {
        const cg_op *x = &s->ops[i];
        const cg_op *o = cg_structured_family(s, x);
        if (!o) continue;
        cg_group_banner(b, x, &last);
        for (int k = 0; k < CG_KEY_COUNT; k++)
            if (o->impl[k]) {
                emit_wrapper(b, x, o, k);
                nwritten++;
            }
    }
    if (!nwritten) cg_puts(b, "typedef int em_structured_empty; /* no structured family: ISO C wants a declaration */\n");
}
