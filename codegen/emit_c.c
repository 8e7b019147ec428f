/* emit_c.c -- writes the C side of the schema: em_ops.h (op ids, public
 * entry points), em_kernels_decl.h (kernel prototypes) and em_ops.c (the
 * static op table, the dispatching entry points and the boxing adapters).
 *
 * Generated code shape (see Note [How a call is dispatched] in em_dispatch.h):
 *   em_NAME            NULL checks, key set of the tensor args, em_disp_compute
 *   em_redispatch_NAME highest key -> unboxed kernel (fast path, a few
 *                      instructions), else boxed_NAME (cold): em_disp_resolve,
 *                      box the args on an em_stack, call the fallback
 *   unboxed_from_boxed_NAME  the reverse: unbox st->args, call the kernel
 * The table entry of an op with a Tensor argument also names its generated
 * Autograd kernel em_ag_k_NAME (emit_autograd.c), declared in em_kernels_decl.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

/* ---- shared pieces ---- */

/* The out-parameters after the arguments (Note [Several results]). */
static bool has_outs(const cg_op *op) { return op->nrets > 1 || cg_op_ret_list(op); }

void cg_emit_params(cg_buf *b, const cg_op *op, bool with_ks) {
    bool any = op->nargs || has_outs(op);
    if (with_ks) cg_puts(b, any ? "em_keyset ks, " : "em_keyset ks");
    if (!with_ks && !any) cg_puts(b, "void");
    int n = 0;
    for (int i = 0; i < op->nargs; i++)
        cg_printf(b, "%s%s%s", n++ ? ", " : "", cg_types[op->args[i].type].ctype, op->args[i].name);
    for (int r = 1; r < op->nrets; r++)
        cg_printf(b, "%sem_tensor **%s", n++ ? ", " : "", op->rets[r].name);
    if (cg_op_ret_list(op)) cg_printf(b, "%sint *nresults", n++ ? ", " : "");
}

void cg_emit_arg_names(cg_buf *b, const cg_op *op) {
    int n = 0;
    for (int i = 0; i < op->nargs; i++) cg_printf(b, "%s%s", n++ ? ", " : "", op->args[i].name);
    for (int r = 1; r < op->nrets; r++) cg_printf(b, "%s%s", n++ ? ", " : "", op->rets[r].name);
    if (cg_op_ret_list(op)) cg_printf(b, "%snresults", n++ ? ", " : "");
}

/* ", " when the op's C call has arguments after ks. */
static const char *args_sep(const cg_op *op) { return op->nargs || has_outs(op) ? ", " : ""; }

/* Appends text as comment lines " * " + prefix, wrapped at about 90 columns. */
static void wrap_comment(cg_buf *b, const char *indent, const char *text) {
    const int width = 88;
    int col = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ') e++;
        int wl = (int)(e - p);
        if (col == 0) {
            cg_printf(b, "%s", indent);
            col = (int)strlen(indent);
        } else if (col + 1 + wl > width) {
            cg_printf(b, "\n%s", indent);
            col = (int)strlen(indent);
        } else {
            cg_puts(b, " ");
            col++;
        }
        char *w = cg_xstrndup(p, (size_t)wl);
        cg_comment_escape(b, w);
        cg_free(w);
        col += wl;
        p = e;
    }
    cg_puts(b, "\n");
}

static void op_comment(cg_buf *b, const cg_op *op, const char *indent) {
    cg_printf(b, "%s/* ", indent);
    cg_comment_escape(b, op->schema);
    cg_puts(b, "\n");
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s *   ", indent);
    wrap_comment(b, prefix, op->doc);
    cg_printf(b, "%s */\n", indent);
}

/* ---- em_ops.h ---- */

void cg_emit_ops_h(cg_buf *b, const cg_schema *s) {
    cg_generated_banner(b, s->ops_path);
    cg_puts(b,
            "/* em_ops.h -- op ids, the op table and the public C entry point of every op.\n"
            " * em_NAME(args) enters the dispatcher; em_redispatch_NAME(ks, args) calls the\n"
            " * kernel for an explicit key set (kernels use it to redispatch below their key).\n"
            " * Returned tensors are new references the caller owns; NULL means the thread's\n"
            " * error slot says why (see Note [Error state] in em_core.h). */\n"
            "#ifndef EM_OPS_H\n#define EM_OPS_H\n\n"
            "#include \"dispatch/em_dispatch.h\"\n\n"
            "/* Op ids: the index of each op in em_op_table. */\nenum {\n");
    for (int i = 0; i < s->nops; i++) cg_printf(b, "    EM_OP_%s,\n", s->ops[i].name);
    cg_puts(b, "    EM_OP_COUNT\n};\n\n");
    cg_puts(b, "/* Every op's dispatch entry, indexed by EM_OP_NAME (defined in em_ops.c). */\n"
               "EM_API extern em_op em_op_table[];\n\n");
    cg_puts(b, "/* Kernel types: em_kfn_NAME is the C type of NAME's unboxed kernels, for\n"
               " * em_disp_register_kernel(op, key, (void *)(em_kfn_NAME)my_kernel). */\n");
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        cg_printf(b, "typedef %s(*em_kfn_%s)(", cg_ret_ctype(op), op->name);
        cg_emit_params(b, op, true);
        cg_puts(b, ");\n");
    }
    cg_puts(b, "\n");
    const char *last = NULL;
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        cg_group_banner(b, op, &last);
        op_comment(b, op, "");
        cg_printf(b, "EM_API %sem_%s(", cg_ret_ctype(op), op->name);
        cg_emit_params(b, op, false);
        cg_printf(b, ");\nEM_API %sem_redispatch_%s(", cg_ret_ctype(op), op->name);
        cg_emit_params(b, op, true);
        cg_puts(b, ");\n\n");
    }
    cg_puts(b, "#endif\n");
}

/* ---- em_kernels_decl.h ---- */

void cg_emit_kernels_decl_h(cg_buf *b, const cg_schema *s) {
    cg_generated_banner(b, s->ops_path);
    cg_puts(b,
            "/* em_kernels_decl.h -- the prototype of every kernel named in ops.yaml.\n"
            " * Kernel files include this header so that a kernel whose signature drifts\n"
            " * from its schema fails to compile. Kernels return a new reference (in-place\n"
            " * ops return self retained), or NULL with the thread's error set. */\n"
            "#ifndef EM_KERNELS_DECL_H\n#define EM_KERNELS_DECL_H\n\n"
            "#include \"core/em_core.h\"\n#include \"kernels/em_structured.h\"\n\n");
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        for (int k = 0; k < CG_KEY_COUNT; k++) {
            const char *fn = op->kernel[k];
            if (!fn) continue;
            /* once per kernel name: skip if an earlier key or op declared it */
            bool dup = false;
            for (int j = 0; j <= i && !dup; j++)
                for (int kk = 0; kk < (j == i ? k : CG_KEY_COUNT); kk++)
                    if (s->ops[j].kernel[kk] && strcmp(s->ops[j].kernel[kk], fn) == 0) dup = true;
            if (dup) continue;
            cg_printf(b, "/* %s:", op->name);
            for (int kk = k; kk < CG_KEY_COUNT; kk++)
                if (op->kernel[kk] && strcmp(op->kernel[kk], fn) == 0)
                    cg_printf(b, " %s", cg_key_names[kk]);
            cg_printf(b, " */\nEM_HIDDEN %s", cg_ret_ctype(op));
            cg_printf(b, "%s(", fn);
            cg_emit_params(b, op, true);
            cg_puts(b, ");\n");
        }
    }
    cg_emit_structured_decls(b, s);
    cg_puts(b, "\n/* Autograd kernels generated from derivatives.yaml (em_autograd_gen.c). */\n");
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        if (!cg_op_gets_autograd(op)) continue;
        cg_printf(b, "EM_HIDDEN %sem_ag_k_%s(", cg_ret_ctype(op), op->name);
        cg_emit_params(b, op, true);
        cg_puts(b, ");\n");
    }
    cg_puts(b, "\n#endif\n");
}

/* ---- em_ops.c: fixed helpers ---- */

/* ---- em_ops.c: per op ---- */

static const char *box_fn(cg_type t) {
    switch (t) {
    case CG_TENSOR: case CG_TENSOR_OPT: return "iv_tensor";
    case CG_SCALAR: return "iv_scalar";
    case CG_SCALAR_OPT: return "iv_opt_scalar";
    case CG_INT: case CG_DIM: case CG_INDEX: return "iv_int";
    case CG_DIM_OPT: case CG_INDEX_OPT: case CG_ENDINDEX_OPT: case CG_INT_OPT: return "iv_opt_int";
    case CG_INTLIST: case CG_DIMLIST: case CG_DIMLIST_OPT: case CG_INTLIST_OPT: return "iv_list";
    case CG_STR: return "iv_str";
    case CG_FLOATLIST_OPT: return "iv_flist";
    case CG_FLOAT: return "iv_double";
    case CG_BOOL: return "iv_bool";
    case CG_DTYPE: case CG_DTYPE_OPT: return "iv_dtype";
    case CG_DEVICE: case CG_DEVICE_OPT: return "em_iv_device";
    case CG_GENERATOR_OPT: return "em_iv_generator";
    case CG_TENSORLIST: case CG_TENSORLIST_OPT: return "iv_tensorlist";
    default: return NULL;
    }
}

/* The public entry: NULL checks, key set, compute, redispatch. */
static void emit_entry(cg_buf *b, const cg_op *op) {
    int ntensor = 0;
    for (int i = 0; i < op->nargs; i++)
        if (cg_type_is_tensor(op->args[i].type) || cg_type_is_tlist(op->args[i].type)) ntensor++;
    op_comment(b, op, "");
    cg_printf(b, "%sem_%s(", cg_ret_ctype(op), op->name);
    cg_emit_params(b, op, false);
    cg_puts(b, ")\n{\n    em_keyset ks = 0;\n\n");
    /* Note [Interrupts] (em_core.h): an op boundary */
    cg_printf(b, "    if (em_interrupt_pending() && em_take_interrupt(\"%s\") != EM_OK)\n        return NULL;\n", op->name);
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (a->type == CG_TENSORLIST_OPT) { /* NULL elements are None (Note [Tensor lists]) */
            cg_printf(b, "    if (%s.n < 0 || (%s.n > 0 && !%s.data)) {\n"
                         "        em_set_error(EM_EVALUE, \"%s: argument '%s' is not a valid tensor list\");\n"
                         "        return NULL;\n    }\n"
                         "    for (int i = 0; i < %s.n; i++)\n"
                         "        if (%s.data[i])\n            ks |= %s.data[i]->keyset;\n",
                      a->name, a->name, a->name, op->name, a->name, a->name, a->name, a->name);
            continue;
        }
        if (a->type == CG_TENSORLIST) {
            cg_printf(b, "    if (%s.n < 0 || (%s.n > 0 && !%s.data)) {\n"
                         "        em_set_error(EM_EVALUE, \"%s: argument '%s' is not a valid tensor list\");\n"
                         "        return NULL;\n    }\n"
                         "    for (int i = 0; i < %s.n; i++) {\n"
                         "        if (!%s.data[i]) {\n"
                         "            if (em_error_kind() != EM_ENOMEM) /* Note [Failed arguments] */\n"
                         "                em_set_error(EM_EVALUE, \"%s: argument '%s' element %%d is NULL\", i + 1);\n"
                         "            return NULL;\n        }\n"
                         "        ks |= %s.data[i]->keyset;\n    }\n",
                      a->name, a->name, a->name, op->name, a->name, a->name, a->name, op->name,
                      a->name, a->name);
            continue;
        }
        if (a->type == CG_STR && !a->nchoices) { /* plain str: any string but NULL */
            cg_printf(b, "    if (!%s) {\n        em_set_error(EM_EVALUE, \"%s: argument '%s' is NULL\");\n"
                         "        return NULL;\n    }\n", a->name, op->name, a->name);
            continue;
        }
        if (a->type == CG_STR) {
            /* C callers may pass any string: it must be one of the set */
            cg_printf(b, "    if (!%s || !(", a->name);
            cg_buf set = { 0 };
            for (int c = 0; c < a->nchoices; c++) {
                cg_printf(b, "%sstrcmp(%s, \"%s\") == 0", c ? " || " : "", a->name, a->choices[c]);
                cg_printf(&set, "%s%s", c ? ", " : "", a->choices[c]);
            }
            cg_printf(b, ")) {\n        em_set_error(EM_EVALUE, \"%s: argument '%s' must be one of: %s "
                         "(got '%%s')\", %s ? %s : \"NULL\");\n        return NULL;\n    }\n",
                      op->name, a->name, set.data, a->name, a->name);
            cg_free(set.data);
            continue;
        }
        if (a->type != CG_TENSOR) continue;
        /* Note [Failed arguments]: a NULL argument is usually the result of
         * a call that failed (em_foo(x, em_bar(y)) in formulas): keep its
         * out-of-memory error instead of hiding it behind this one */
        cg_printf(b, "    if (!%s) {\n"
                     "        if (em_error_kind() != EM_ENOMEM)\n"
                     "            em_set_error(EM_EVALUE, \"%s: argument '%s' is NULL\");\n"
                     "        return NULL;\n    }\n", a->name, op->name, a->name);
    }
    for (int r = 1; r < op->nrets; r++)
        cg_printf(b, "    if (!%s) {\n"
                     "        em_set_error(EM_EVALUE, \"%s: out-parameter '%s' is NULL\");\n"
                     "        return NULL;\n    }\n    *%s = NULL;\n",
                  op->rets[r].name, op->name, op->rets[r].name, op->rets[r].name);
    if (cg_op_ret_list(op))
        cg_printf(b, "    if (!nresults) {\n"
                     "        em_set_error(EM_EVALUE, \"%s: out-parameter 'nresults' is NULL\");\n"
                     "        return NULL;\n    }\n    *nresults = 0;\n", op->name);
    int idev = -1; /* a Device argument: validated, and the key of a factory */
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i].type == CG_DEVICE || op->args[i].type == CG_DEVICE_OPT) idev = i;
    if (idev >= 0)
        cg_printf(b, "    if (!em_device_resolve(%s, &%s, \"%s\"))\n        return NULL;\n",
                  op->args[idev].name, op->args[idev].name, op->name);
    if (ntensor == 0 && idev >= 0) {
        cg_printf(b, "    ks = EM_KS(em_backend_key(%s)); /* a factory: the device's backend */\n",
                  op->args[idev].name);
    } else if (ntensor == 0) {
        cg_puts(b, "    ks = EM_KS(EM_KEY_CPU); /* no tensor arguments: the default backend */\n");
    } else {
        for (int i = 0; i < op->nargs; i++) {
            const cg_arg *a = &op->args[i];
            if (a->type == CG_TENSOR) cg_printf(b, "    ks |= %s->keyset;\n", a->name);
            else if (a->type == CG_TENSOR_OPT)
                cg_printf(b, "    if (%s)\n        ks |= %s->keyset;\n", a->name, a->name);
        }
        /* every tensor absent, or an empty list: the default backend (not
         * emitted when a Tensor argument is required: the hot path) */
        bool maybe_none = true;
        for (int i = 0; i < op->nargs; i++) maybe_none &= op->args[i].type != CG_TENSOR;
        if (maybe_none) cg_puts(b, "    if (!ks)\n        ks = EM_KS(EM_KEY_CPU);\n");
        if (idev >= 0) /* a move between devices: the kernel of the non-CPU side */
            cg_printf(b, "    ks |= EM_KS(em_backend_key(%s));\n", op->args[idev].name);
    }
    cg_printf(b, "    ks = em_disp_compute(&em_op_table[EM_OP_%s], ks);\n", op->name);
    if (op->ret_alias_write) { /* in-place, out=: they finish (Note [Interrupts in kernels]) */
        cg_printf(b, "    return em_redispatch_%s(ks%s", op->name, args_sep(op));
        cg_emit_arg_names(b, op);
        cg_puts(b, ");\n}\n\n");
        return;
    }
    cg_printf(b, "    %sem_res_ = em_redispatch_%s(ks%s", cg_ret_ctype(op), op->name, args_sep(op));
    cg_emit_arg_names(b, op);
    cg_puts(b, ");\n");
    /* Note [Interrupts in kernels] (em_cpu.h): a stoppable loop may have
     * left the result half-written: drop it */
    cg_printf(b, "    if (em_interrupt_pending() && em_res_ && em_take_interrupt(\"%s\") != EM_OK) {\n",
              op->name);
    if (cg_op_ret_list(op)) {
        cg_puts(b, "        em_tensors_free(em_res_, *nresults);\n        *nresults = 0;\n");
    } else {
        cg_puts(b, "        em_tensor_release(em_res_);\n");
        for (int r = 1; r < op->nrets; r++)
            cg_printf(b, "        em_tensor_release(*%s);\n        *%s = NULL;\n", op->rets[r].name,
                      op->rets[r].name);
    }
    cg_puts(b, "        return NULL;\n    }\n    return em_res_;\n}\n\n");
}

/* The slow path: resolve, box, call. */
static void emit_boxed(cg_buf *b, const cg_op *op) {
    const char *rt = cg_ret_ctype(op);
    cg_printf(b, "/* Slow path of em_redispatch_%s: no unboxed kernel at the highest key. */\n"
                 "static __attribute__((noinline, cold)) %sboxed_%s(", op->name, rt, op->name);
    cg_emit_params(b, op, true);
    cg_printf(b, ")\n{\n"
                 "    const em_op *op = &em_op_table[EM_OP_%s];\n"
                 "    em_boxed_fn boxed;\n"
                 "    void *ud;\n"
                 "    void *fn = em_disp_resolve(op, ks, NULL, &boxed, &ud);\n"
                 "    em_stack st;\n\n"
                 "    if (!fn && !boxed)\n"
                 "        return NULL; /* em_disp_resolve set the error */\n",
              op->name);
    for (int i = 0; i < op->nargs; i++)
        cg_printf(b, "    st.args[%d] = %s(%s);\n", i, box_fn(op->args[i].type), op->args[i].name);
    cg_printf(b, "    st.nargs = %d;\n", op->nargs);
    bool list = cg_op_ret_list(op);
    cg_printf(b, "    if (run_boxed(op, ks, &st, fn, boxed, ud, %d, %s) != EM_OK)\n        return NULL;\n",
              op->nrets, list ? "true" : "false");
    if (list) {
        cg_puts(b, "    *nresults = st.rets[0].v.tl.n;\n"
                   "    st.rets[0].tag = EM_IV_NONE;\n"
                   "    return (em_tensor **)st.rets[0].v.tl.data;\n}\n\n");
        return;
    }
    for (int r = 1; r < op->nrets; r++) cg_printf(b, "    *%s = take_ret(&st, %d);\n", op->rets[r].name, r);
    cg_puts(b, "    return take_ret(&st, 0);\n}\n\n");
}

static void emit_redispatch(cg_buf *b, const cg_op *op) {
    cg_printf(b, "%sem_redispatch_%s(", cg_ret_ctype(op), op->name);
    cg_emit_params(b, op, true);
    cg_printf(b, ")\n{\n"
                 "    int key = em_keyset_highest(ks);\n"
                 "    void *fn = (unsigned)key < EM_KEY_COUNT ? em_op_table[EM_OP_%s].kernel[key] : NULL;\n\n"
                 "    if (fn)\n"
                 "        return ((em_kfn_%s)fn)(ks%s",
              op->name, op->name, args_sep(op));
    cg_emit_arg_names(b, op);
    cg_printf(b, ");\n    return boxed_%s(ks%s", op->name, args_sep(op));
    cg_emit_arg_names(b, op);
    cg_puts(b, ");\n}\n\n");
}

/* A C initialiser for a local of type t (the adapters initialise every
 * local so that -O2's maybe-uninitialized analysis stays quiet). */
static const char *zero_value(cg_type t) {
    switch (t) {
    case CG_TENSOR: case CG_TENSOR_OPT: case CG_SCALAR_OPT: case CG_DIM_OPT: case CG_INDEX_OPT:
    case CG_ENDINDEX_OPT: case CG_INT_OPT: return "NULL";
    case CG_SCALAR: return "em_scalar_int(0)";
    case CG_INTLIST: case CG_DIMLIST: case CG_DIMLIST_OPT: case CG_INTLIST_OPT: return "{ NULL, -1 }";
    case CG_STR: return "NULL";
    case CG_FLOATLIST_OPT: return "{ NULL, -1 }";
    case CG_FLOAT: return "0.0";
    case CG_BOOL: return "false";
    case CG_DTYPE: case CG_DTYPE_OPT: return "EM_DTYPE_NONE";
    case CG_DEVICE: case CG_DEVICE_OPT: return "em_no_device()";
    case CG_GENERATOR_OPT: return "NULL";
    case CG_TENSORLIST: case CG_TENSORLIST_OPT: return "{ NULL, 0 }";
    default: return "0";
    }
}

/* The unboxing adapter: op->call_unboxed_from_boxed. */
static void emit_adapter(cg_buf *b, const cg_op *op) {
    cg_printf(b, "/* call_unboxed_from_boxed of %s: unboxes st->args, calls the kernel at the\n"
                 " * highest key in ks, stores the owned result in st->rets[0]. */\n"
                 "static em_status unboxed_from_boxed_%s(const em_op *op, em_keyset ks, em_stack *st)\n"
                 "{\n    void *fn = adapter_kernel(op, ks, st, %d);\n",
              op->name, op->name, op->nargs);
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        cg_printf(b, "    %s%s = %s;\n", cg_types[a->type].ctype, a->name, zero_value(a->type));
        if (a->type == CG_SCALAR_OPT) cg_printf(b, "    em_scalar buf_%d = em_scalar_int(0);\n", i);
        else if (cg_type_is_ptr_opt(a->type)) cg_printf(b, "    int64_t buf_%d = 0;\n", i);
    }
    cg_puts(b, "\n    if (!fn)\n        return em_error_kind();\n");
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        const char *opt = cg_types[a->type].optional ? "true" : "false";
        cg_printf(b, "    %s", i == 0 ? "if (" : "    ");
        switch (a->type) {
        case CG_TENSOR: case CG_TENSOR_OPT:
            cg_printf(b, "un_tensor(st, %d, op->name, \"%s\", %s, &%s)", i, a->name, opt, a->name);
            break;
        case CG_SCALAR:
            cg_printf(b, "un_scalar(st, %d, op->name, \"%s\", &%s)", i, a->name, a->name);
            break;
        case CG_SCALAR_OPT:
            cg_printf(b, "un_opt_scalar(st, %d, op->name, \"%s\", &buf_%d, &%s)", i, a->name, i,
                      a->name);
            break;
        case CG_INT: case CG_DIM: case CG_INDEX:
            cg_printf(b, "un_int(st, %d, op->name, \"%s\", &%s)", i, a->name, a->name);
            break;
        case CG_DIM_OPT: case CG_INDEX_OPT: case CG_ENDINDEX_OPT: case CG_INT_OPT:
            cg_printf(b, "un_opt_int(st, %d, op->name, \"%s\", &buf_%d, &%s)", i, a->name, i,
                      a->name);
            break;
        case CG_FLOATLIST_OPT:
            cg_printf(b, "un_flist(st, %d, op->name, \"%s\", &%s)", i, a->name, a->name);
            break;
        case CG_STR:
            cg_printf(b, "un_str(st, %d, op->name, \"%s\", &%s)", i, a->name, a->name);
            break;
        case CG_INTLIST: case CG_DIMLIST: case CG_DIMLIST_OPT: case CG_INTLIST_OPT:
            cg_printf(b, "un_list(st, %d, op->name, \"%s\", %s, &%s)", i, a->name, opt, a->name);
            break;
        case CG_FLOAT:
            cg_printf(b, "un_double(st, %d, op->name, \"%s\", &%s)", i, a->name, a->name);
            break;
        case CG_BOOL:
            cg_printf(b, "un_bool(st, %d, op->name, \"%s\", &%s)", i, a->name, a->name);
            break;
        case CG_DTYPE: case CG_DTYPE_OPT:
            cg_printf(b, "un_dtype(st, %d, op->name, \"%s\", %s, &%s)", i, a->name, opt, a->name);
            break;
        case CG_DEVICE: case CG_DEVICE_OPT:
            cg_printf(b, "(em_un_device(st, %d, %s, &%s) ? EM_OK : bad_arg(st, %d, op->name, \"%s\"))",
                      i, opt, a->name, i, a->name);
            break;
        case CG_GENERATOR_OPT:
            cg_printf(b, "(em_un_generator(st, %d, &%s) ? EM_OK : bad_arg(st, %d, op->name, \"%s\"))",
                      i, a->name, i, a->name);
            break;
        case CG_TENSORLIST: case CG_TENSORLIST_OPT:
            cg_printf(b, "un_tensorlist(st, %d, op->name, \"%s\", &%s)", i, a->name, a->name);
            break;
        default:
            break;
        }
        cg_puts(b, i == op->nargs - 1 ? " != EM_OK)\n        return EM_EINTERNAL;\n"
                                      : " != EM_OK ||\n");
    }
    if (cg_op_ret_list(op)) {
        cg_printf(b, "    {\n        int nres = 0;\n        int *nresults = &nres;\n"
                     "        em_tensor **rv = ((em_kfn_%s)fn)(ks%s", op->name, args_sep(op));
        cg_emit_arg_names(b, op);
        cg_puts(b, ");\n\n        return put_list_result(op, st, rv, nres);\n    }\n}\n\n");
        return;
    }
    if (op->nrets > 1) {
        cg_puts(b, "    {\n        em_tensor *outs[] = {");
        for (int r = 1; r < op->nrets; r++) cg_printf(b, "%sNULL", r > 1 ? ", " : " ");
        cg_puts(b, " };\n");
        for (int r = 1; r < op->nrets; r++)
            cg_printf(b, "        em_tensor **%s = &outs[%d];\n", op->rets[r].name, r - 1);
        cg_printf(b, "        em_tensor *rv = ((em_kfn_%s)fn)(ks%s", op->name, args_sep(op));
        cg_emit_arg_names(b, op);
        cg_printf(b, ");\n\n        return put_results(op, st, rv, outs, %d);\n    }\n}\n\n", op->nrets);
        return;
    }
    cg_printf(b, "    return put_result(op, st, ((em_kfn_%s)fn)(ks%s", op->name,
              args_sep(op));
    cg_emit_arg_names(b, op);
    cg_puts(b, "));\n}\n\n");
}

static void emit_table_entry(cg_buf *b, const cg_op *op) {
    cg_printf(b, "    [EM_OP_%s] = {\n        .name = \"%s\",\n        .schema = \"", op->name,
              op->name);
    cg_c_escape(b, op->schema);
    cg_printf(b, "\",\n        .id = EM_OP_%s,\n        .kernel = {", op->name);
    bool any = false;
    cg_buf mask = { 0 };
    for (int k = 0; k < CG_KEY_COUNT; k++) {
        bool gen = k == CG_KEY_AUTOGRAD && cg_op_gets_autograd(op);
        if (!op->kernel[k] && !gen) continue;
        if (gen) cg_printf(b, "%s[%s] = (void *)em_ag_k_%s", any ? ", " : " ", cg_key_enums[k], op->name);
        else cg_printf(b, "%s[%s] = (void *)%s", any ? ", " : " ", cg_key_enums[k], op->kernel[k]);
        cg_printf(&mask, "%sEM_KS(%s)", any ? " | " : "", cg_key_enums[k]);
        any = true;
    }
    cg_printf(b, " },\n        .has_kernel = %s,\n        .fallthrough = 0,\n"
                 "        .active = %s,\n        .call_unboxed_from_boxed = unboxed_from_boxed_%s,\n"
                 "    },\n",
              mask.data, mask.data, op->name);
    cg_free(mask.data);
}

void cg_emit_ops_c(cg_buf *b, const cg_schema *s) {
    cg_generated_banner(b, s->ops_path);
    cg_puts(b, "/* em_ops.c -- the op table and every op's dispatching entry points and boxing\n"
               " * adapters. See Note [How a call is dispatched] in em_dispatch.h. */\n"
               "#include <string.h>\n\n#include \"em_ops.h\"\n#include \"em_kernels_decl.h\"\n\n");
    cg_puts(b, "#include \"dispatch/em_boxing.h\"\n\n"); /* boxing helpers: a real header under runtime/ */
    const char *last = NULL;
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        cg_group_banner(b, op, &last);
        emit_entry(b, op);
        emit_boxed(b, op);
        emit_redispatch(b, op);
        emit_adapter(b, op);
    }
    cg_puts(b, "/* ---- the op table ---- */\n\n"
               "/* Kernels from ops.yaml; active starts as has_kernel and is kept up to date by\n"
               " * runtime/dispatch as kernels, fallbacks and fallthroughs are registered. */\n"
               "em_op em_op_table[] = {\n");
    for (int i = 0; i < s->nops; i++) emit_table_entry(b, &s->ops[i]);
    cg_puts(b, "};\n\n_Static_assert(sizeof em_op_table / sizeof em_op_table[0] == EM_OP_COUNT,\n"
               "               \"em_op_table must have one entry per op id\");\n");
}
