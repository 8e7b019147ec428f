/* emit_autograd.c -- writes em_autograd_gen.c: for every op with a Tensor
 * argument (and no hand-written Autograd kernel in ops.yaml) the kernel
 * registered at key Autograd, em_ag_k_NAME, and the Node type of its backward.
 *
 * Three kinds of kernel (see the format header of schema/derivatives.yaml):
 *   formulas / in-place   record a NAMEBackward node whose apply evaluates the
 *                         formulas, redispatch below Autograd, attach history
 *   output not differentiable (output_differentiability: [false], or an entry
 *                         without formulas)  redispatch below; the result has
 *                         no history
 *   no entry              fail when a Tensor argument requires grad, else
 *                         redispatch below
 * An in-place op always records a node when self requires grad (its old
 * history must end even when nothing flows back, as for fill_ and zero_).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

/* ---- helpers ---- */

bool cg_op_gets_autograd(const cg_op *op) {
    if (op->kernel[CG_KEY_AUTOGRAD]) return false;
    for (int i = 0; i < op->nargs; i++)
        if (cg_type_is_tensor(op->args[i].type) || op->args[i].type == CG_TENSORLIST) return true;
    return false;
}

/* The op's Tensor[] argument (then its only tensor argument), or -1. */
static int list_arg(const cg_op *op) {
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i].type == CG_TENSORLIST) return i;
    return -1;
}

/* Whether some formula names results[k] / the gradient of result k. */
static bool formulas_use_results(const cg_op *op, int k) {
    for (int f = 0; op->deriv && f < op->deriv->nformulas; f++)
        if (cg_expr_uses_results(op->deriv->formulas[f].expr, k)) return true;
    return false;
}
static bool formula_uses_grads(const cg_formula *fm, int k) { return cg_expr_uses_grads(fm->expr, k); }

/* Whether e needs grads[k] as a tensor (zeros when it is missing): uses
 * other than as a helper's 'u' parameter, which takes it as it came. */
static bool needs_zero_grads(const cg_expr *e, int k) {
    if (e->kind == CG_EX_CALL && e->op_index < 0) {
        const char *p = cg_helpers[e->helper].params;
        for (int i = 0; i < e->nkids; i++)
            if (p[i] != 'u' && needs_zero_grads(e->kids[i], k)) return true;
        return false;
    }
    if (e->kind == CG_EX_GRADS && (e->arg == k || e->arg < 0)) return true;
    if (e->kind == CG_EX_GRAD && k <= 0) return true;
    for (int i = 0; i < e->nkids; i++)
        if (needs_zero_grads(e->kids[i], k)) return true;
    return false;
}

/* The argument an in-place op writes (Tensor(a!) returned), or -1. */
static int written_arg(const cg_op *op) {
    if (!op->ret_alias_write) return -1;
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i].alias_write && strcmp(op->args[i].alias, op->ret_alias) == 0) return i;
    return -1;
}

static int tensor_count(const cg_op *op) {
    int n = 0;
    for (int i = 0; i < op->nargs; i++)
        if (cg_type_is_tensor(op->args[i].type)) n++;
    return n;
}

static const cg_formula *formula_for(const cg_op *op, int arg) {
    if (!op->deriv) return NULL;
    for (int f = 0; f < op->deriv->nformulas; f++)
        if (op->deriv->formulas[f].arg == arg) return &op->deriv->formulas[f];
    return NULL;
}

/* "add_" -> "AddBackward" (the node's name) and "AddBackward_" (its C type);
 * an in-place overload "div_.Tensor_mode" -> "DivTensorModeBackward_",
 * "round_.decimals" -> "RoundDecimalsBackward" and "RoundDecimalsBackward_". */
static void node_names(const cg_op *op, char *display, char *ctype, size_t n) {
    size_t k = 0;
    bool up = true;
    for (const char *p = op->name; *p && k + 10 < n; p++) {
        if (*p == '_') { up = true; continue; }
        display[k++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
        up = false;
    }
    display[k] = '\0';
    strcat(display, "Backward");
    /* in-place by its base name: round_.decimals is round__decimals */
    snprintf(ctype, n, "%s%s", display, op->base[strlen(op->base) - 1] == '_' ? "_" : "");
}

void cg_node_names(const cg_op *op, char *display, char *ctype, size_t n) { node_names(op, display, ctype, n); }

/* The condition "some input whose formula uses X needs a gradient":
 * node->next[i].fn || ... over those inputs (uses: arg index, or -1 for
 * result). Empty when no formula uses it. */
static void use_condition(cg_buf *b, const cg_op *op, int uses, const char *node) {
    bool first = true;
    for (int f = 0; f < op->deriv->nformulas; f++) {
        const cg_formula *fm = &op->deriv->formulas[f];
        bool used = uses < 0 ? cg_expr_uses_result(fm->expr) : cg_expr_uses_arg(fm->expr, uses);
        if (!used) continue;
        cg_printf(b, "%s%s->next[%d].fn", first ? "" : " || ", node, cg_tensor_slot(op, fm->arg));
        first = false;
    }
}

static bool formulas_use_arg(const cg_op *op, int arg) {
    for (int f = 0; op->deriv && f < op->deriv->nformulas; f++)
        if (cg_expr_uses_arg(op->deriv->formulas[f].expr, arg)) return true;
    return false;
}

static bool formulas_use_result(const cg_op *op) {
    for (int f = 0; op->deriv && f < op->deriv->nformulas; f++)
        if (cg_expr_uses_result(op->deriv->formulas[f].expr)) return true;
    return false;
}

static bool needs_geometry(const cg_op *op, int arg) {
    for (int f = 0; op->deriv && f < op->deriv->nformulas; f++)
        if (cg_expr_uses_geometry(op->deriv->formulas[f].expr, arg)) return true;
    return false;
}

static bool formulas_use_meta(const cg_op *op, int arg) {
    for (int f = 0; op->deriv && f < op->deriv->nformulas; f++)
        if (cg_expr_uses_meta(op->deriv->formulas[f].expr, arg)) return true;
    return false;
}

static bool needs_meta(const cg_op *op, int arg) {
    return formula_for(op, arg) || formulas_use_meta(op, arg);
}

/* The C value of non-tensor argument a, read back from node n. */
static void arg_cvalue(cg_buf *b, const cg_arg *a) {
    const char *x = a->name;
    switch (a->type) {
    case CG_SCALAR_OPT: case CG_DIM_OPT: case CG_INDEX_OPT: case CG_ENDINDEX_OPT: case CG_INT_OPT:
        cg_printf(b, "(n->has_%s ? &n->%s : NULL)", x, x);
        break;
    case CG_INTLIST: case CG_DIMLIST: case CG_DIMLIST_OPT: case CG_INTLIST_OPT:
        cg_printf(b, "((em_intlist){ n->%s, n->%s_n })", x, x);
        break;
    default:
        cg_printf(b, "n->%s", x);
        break;
    }
}

/* ---- the node type ---- */

static void emit_node_struct(cg_buf *b, const cg_op *op, const char *ctype) {
    int w = written_arg(op);
    cg_puts(b, "typedef struct {\n    em_node base;\n");
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (!cg_type_is_tensor(a->type) || !formulas_use_arg(op, i)) continue;
        cg_printf(b, "    em_saved_var %s_; /* %s */\n", a->name,
                  i == w ? "self before the op (a clone)" : "the input, version-checked");
    }
    if (formulas_use_result(op))
        cg_puts(b, "    em_saved_var result_; /* the output (data only, see Note [Saved variables]) */\n");
    for (int k = 0; k < op->nrets && op->nrets > 1; k++)
        if (formulas_use_results(op, k))
            cg_printf(b, "    em_saved_var result%d_; /* result '%s' */\n", k, op->rets[k].name);
    if (list_arg(op) >= 0)
        cg_printf(b, "    em_input_meta *%s_meta; /* [%s_n]: shape and dtype of each element (owned) */\n"
                     "    int64_t %s_n;\n", op->args[list_arg(op)].name, op->args[list_arg(op)].name,
                  op->args[list_arg(op)].name);
    for (int i = 0; i < op->nargs; i++)
        if (cg_type_is_tensor(op->args[i].type) && needs_meta(op, i))
            cg_printf(b, "    em_input_meta %s_meta; /* shape and dtype of %s */\n", op->args[i].name,
                      op->args[i].name);
    for (int i = 0; i < op->nargs; i++)
        if (cg_type_is_tensor(op->args[i].type) && needs_geometry(op, i))
            cg_printf(b, "    em_geometry %s_geom; /* sizes, strides, offset of %s */\n", op->args[i].name,
                      op->args[i].name);
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (cg_type_is_tensor(a->type) || !formulas_use_arg(op, i)) continue;
        const char *x = a->name;
        switch (a->type) {
        case CG_SCALAR: cg_printf(b, "    em_scalar %s;\n", x); break;
        case CG_SCALAR_OPT: cg_printf(b, "    em_scalar %s;\n    bool has_%s; /* given */\n", x, x); break;
        case CG_INT: case CG_DIM: case CG_INDEX: cg_printf(b, "    int64_t %s;\n", x); break;
        case CG_DIM_OPT: case CG_INDEX_OPT: case CG_ENDINDEX_OPT: case CG_INT_OPT:
            cg_printf(b, "    int64_t %s;\n    bool has_%s; /* given */\n", x, x);
            break;
        case CG_INTLIST: case CG_DIMLIST: case CG_DIMLIST_OPT: case CG_INTLIST_OPT:
            cg_printf(b, "    int64_t %s[EM_MAX_DIMS];\n    int %s_n; /* entries; -1: absent */\n", x, x);
            break;
        case CG_STR: cg_printf(b, "    char %s[64]; /* one of the str type's values */\n", x); break;
        case CG_FLOAT: cg_printf(b, "    double %s;\n", x); break;
        case CG_BOOL: cg_printf(b, "    bool %s;\n", x); break;
        case CG_DTYPE: case CG_DTYPE_OPT: cg_printf(b, "    em_dtype %s;\n", x); break;
        default: break;
        }
    }
    cg_printf(b, "} %s;\n\n", ctype);
}

/* ---- formulas -> C ---- */

typedef struct {
    cg_buf *b;
    const cg_schema *s;
    const cg_op *op;
    int ntmp;
} emitter;

static char *emit_tensor(emitter *m, const cg_expr *e);

/* A new temporary holding call (a new reference or NULL): returns its name. */
static char *tmp_of(emitter *m, const char *call) {
    char name[16];
    snprintf(name, sizeof name, "v%d", ++m->ntmp);
    cg_printf(m->b, "        em_tensor *%s = em_ag_tmp(%s);\n        if (!%s)\n            goto fail;\n",
              name, call, name);
    return cg_xstrdup(name);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap, ap2;
    va_start(ap, f);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    if (n < 0) cg_die("out of memory");
    char *p = cg_xmalloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, f, ap2);
    va_end(ap2);
    return p;
}

static bool is_int_literal(const char *t) { return !strpbrk(t, ".eE"); }

/* A non-tensor C value of e for a parameter of type pt (pt < 0: a helper's
 * 'v' or 'm' parameter, passed as is). */
static char *emit_value(emitter *m, const cg_expr *e, int pt) {
    if (e->kind == CG_EX_META && m->op->args[e->arg].type == CG_TENSORLIST)
        return fmt("n->%s_meta", m->op->args[e->arg].name);
    if (e->kind == CG_EX_META) return fmt("&n->%s_meta", m->op->args[e->arg].name);
    if (e->kind == CG_EX_ELEM) return cg_xstrdup("i");
    if (e->kind == CG_EX_GRADS) return cg_xstrdup("grads, node->num_inputs, em_node_input_meta(node)");
    if (e->kind == CG_EX_GEOM) return fmt("&n->%s_geom", m->op->args[e->arg].name);
    if (e->kind == CG_EX_NUM) {
        if (pt == CG_SCALAR)
            return fmt(is_int_literal(e->text) ? "em_scalar_int(%s)" : "em_scalar_float(%s)", e->text);
        if (pt == CG_FLOAT && is_int_literal(e->text)) return fmt("%s.0", e->text);
        return cg_xstrdup(e->text);
    }
    const cg_arg *a = &m->op->args[e->arg];
    cg_buf v = { 0 };
    arg_cvalue(&v, a);
    if (pt == CG_SCALAR && a->type == CG_INT) {
        char *r = fmt("em_scalar_int(%s)", v.data);
        cg_free(v.data);
        return r;
    }
    if (pt == CG_SCALAR && a->type == CG_FLOAT) {
        char *r = fmt("em_scalar_float(%s)", v.data);
        cg_free(v.data);
        return r;
    }
    bool opt_int_param = pt == CG_DIM_OPT || pt == CG_INDEX_OPT || pt == CG_INT_OPT;
    if (opt_int_param && (a->type == CG_DIM || a->type == CG_INDEX || a->type == CG_INT)) {
        /* a plain value where the callee takes an optional one */
        char *r = fmt("((const int64_t[]){ %s })", v.data);
        cg_free(v.data);
        return r;
    }
    return v.data;
}

/* The C default of op argument a (missing trailing arguments of a call). */
static char *default_value(const cg_arg *a) {
    const cg_default *d = &a->def;
    cg_type t = a->type;
    if (d->kind == CG_DEF_NULL) {
        if (t == CG_DIMLIST_OPT || t == CG_INTLIST_OPT) return cg_xstrdup("((em_intlist){ NULL, -1 })");
        if (t == CG_DTYPE_OPT) return cg_xstrdup("EM_DTYPE_NONE");
        return cg_xstrdup("NULL");
    }
    if (d->kind == CG_DEF_DTYPE) return cg_xstrdup(cg_dtype_enums[d->dtype]);
    if (d->kind == CG_DEF_STR) return fmt("\"%s\"", d->str);
    if (d->kind == CG_DEF_BOOL) {
        if (t == CG_SCALAR) return fmt("em_scalar_bool(%s)", d->b ? "true" : "false");
        if (t == CG_SCALAR_OPT) return fmt("(const em_scalar[]){ em_scalar_bool(%s) }", d->b ? "true" : "false");
        return cg_xstrdup(d->b ? "true" : "false");
    }
    if (d->kind == CG_DEF_LIST) {
        if (!d->nlist) return cg_xstrdup("((em_intlist){ NULL, 0 })");
        cg_buf v = { 0 };
        cg_puts(&v, "((em_intlist){ (const int64_t[]){ ");
        for (int i = 0; i < d->nlist; i++) {
            int64_t x = d->list[i];
            if (cg_type_is_dims(t) && x > 0) x--; /* dims are 1-based in the schema */
            cg_printf(&v, "%s%lld", i ? ", " : "", (long long)x);
        }
        cg_printf(&v, " }, %d })", d->nlist);
        return v.data;
    }
    /* numbers */
    if (t == CG_SCALAR)
        return d->kind == CG_DEF_INT ? fmt("em_scalar_int(%lld)", (long long)d->i)
                                     : fmt("em_scalar_float(%.17g)", d->d);
    if (t == CG_SCALAR_OPT)
        return d->kind == CG_DEF_INT ? fmt("(const em_scalar[]){ em_scalar_int(%lld) }", (long long)d->i)
                                     : fmt("(const em_scalar[]){ em_scalar_float(%.17g) }", d->d);
    if (t == CG_FLOAT) return fmt("%.17g", d->d);
    if (t == CG_INT) return fmt("%lld", (long long)d->i);
    if (t == CG_INT_OPT) return fmt("(const int64_t[]){ %lld }", (long long)d->i);
    int64_t c = d->i > 0 ? d->i - 1 : d->i; /* 1-based dim/index -> C */
    if (t == CG_DIM || t == CG_INDEX) return fmt("%lld", (long long)c);
    if (t == CG_DIM_OPT || t == CG_INDEX_OPT) return fmt("(const int64_t[]){ %lld }", (long long)c);
    return NULL; /* endindex? with a number: no C spelling, see the caller */
}

/* A call of an op or helper; returns the temporary holding its result. */
static char *emit_call(emitter *m, const cg_expr *e) {
    cg_buf call = { 0 };
    const cg_op *o = e->op_index >= 0 ? &m->s->ops[e->op_index] : NULL;
    cg_printf(&call, "%s%s(", o ? "em_" : "em_ag_fn_", e->text);
    int n = o ? o->nargs : e->nkids;
    for (int i = 0; i < n; i++) {
        char *v;
        bool tensor_param = o ? cg_type_is_tensor(o->args[i].type)
                              : cg_helpers[e->helper].params[i] == 't';
        if (!o && cg_helpers[e->helper].params[i] == 'u') {
            /* grads[k] as it came (NULL: none), not the zeros gk gets */
            v = fmt("grads[%d]", e->kids[i]->arg);
        } else if (i >= e->nkids) {
            v = default_value(&o->args[i]);
            if (!v)
                cg_die("formula calls %s without argument '%s', whose default has no C form; "
                       "give it explicitly", o->name, o->args[i].name);
        } else if (tensor_param) {
            v = emit_tensor(m, e->kids[i]);
        } else {
            v = emit_value(m, e->kids[i], o ? (int)o->args[i].type : -1);
        }
        cg_printf(&call, "%s%s", i ? ", " : "", v);
        cg_free(v);
    }
    cg_puts(&call, ")");
    char *r = tmp_of(m, call.data);
    cg_free(call.data);
    return r;
}

/* Emits the statements computing e as a tensor; returns the C name of it. */
static char *emit_tensor(emitter *m, const cg_expr *e) {
    switch (e->kind) {
    case CG_EX_GRAD: return cg_xstrdup("grad");
    case CG_EX_RESULT: return cg_xstrdup("result");
    case CG_EX_GRADS: return fmt("gk%d", e->arg);
    case CG_EX_RESULTS: return fmt("res%d", e->arg);
    case CG_EX_NUM: {
        char *c = fmt("em_ag_scalar(%s)", e->text);
        char *r = tmp_of(m, c);
        cg_free(c);
        return r;
    }
    case CG_EX_ARG: {
        const cg_arg *a = &m->op->args[e->arg];
        if (cg_type_is_tensor(a->type)) return cg_xstrdup(a->name);
        cg_buf v = { 0 };
        arg_cvalue(&v, a);
        char *c = a->type == CG_SCALAR ? fmt("em_ag_scalar_s(%s)", v.data)
                                       : fmt("em_ag_scalar((double)%s)", v.data);
        cg_free(v.data);
        char *r = tmp_of(m, c);
        cg_free(c);
        return r;
    }
    case CG_EX_NEG: {
        char *k = emit_tensor(m, e->kids[0]);
        char *c = fmt("em_neg(%s)", k);
        char *r = tmp_of(m, c);
        cg_free(k);
        cg_free(c);
        return r;
    }
    case CG_EX_BIN: {
        char *l = emit_tensor(m, e->kids[0]);
        char *rr = emit_tensor(m, e->kids[1]);
        const char *fn = e->text[0] == '+' ? "em_add" : e->text[0] == '-' ? "em_sub"
                         : e->text[0] == '*' ? "em_mul" : "em_div";
        bool alpha = e->text[0] == '+' || e->text[0] == '-';
        char *c = fmt("%s(%s, %s%s)", fn, l, rr, alpha ? ", em_scalar_int(1)" : "");
        char *r = tmp_of(m, c);
        cg_free(l);
        cg_free(rr);
        cg_free(c);
        return r;
    }
    case CG_EX_CALL: return emit_call(m, e);
    default: cg_die("internal: meta used as a tensor");
    }
}

/* ---- apply, release, vtable ---- */

static void emit_apply(cg_buf *b, const cg_schema *s, const cg_op *op, const char *display,
                       const char *ctype) {
    const cg_deriv *d = op->deriv;
    int la = list_arg(op);
    bool multi = op->nrets > 1, rlist = cg_op_ret_list(op);
    cg_printf(b, "/* %s: the gradients of ", display);
    cg_comment_escape(b, op->schema);
    cg_printf(b, ".\n * grads[k] is the gradient of result k (NULL: none flowed); out[i] that of\n"
                 " * tensor input i. */\n"
                 "static em_status apply_%s(em_node *node, em_tensor **grads, em_tensor **out)\n{\n",
              op->name);
    if (!d || !d->nformulas) {
        cg_puts(b, "    /* no formulas: nothing flows back to the inputs */\n"
                   "    (void)node;\n    (void)grads;\n    (void)out;\n    return EM_OK;\n}\n\n");
        return;
    }
    cg_printf(b, "    %s *n = (%s *)node;\n", ctype, ctype);
    if (!multi && !rlist) cg_puts(b, "    em_tensor *grad = grads[0];\n");
    for (int k = 0; multi && k < op->nrets; k++)
        if (!d->ret_nondiff[k]) cg_printf(b, "    em_tensor *gk%d = grads[%d];\n", k, k);
    for (int i = 0; i < op->nargs; i++)
        if (cg_type_is_tensor(op->args[i].type) && formulas_use_arg(op, i))
            cg_printf(b, "    em_tensor *%s = NULL;\n", op->args[i].name);
    if (formulas_use_result(op)) cg_puts(b, "    em_tensor *result = NULL;\n");
    for (int k = 0; multi && k < op->nrets; k++)
        if (formulas_use_results(op, k)) cg_printf(b, "    em_tensor *res%d = NULL;\n", k);
    cg_puts(b, "    int mark;\n\n");
    if (rlist) {
        cg_puts(b, "    bool any = false;\n\n    for (int i = 0; i < node->num_inputs; i++)\n"
                   "        any |= grads[i] != NULL;\n"
                   "    if (!any)\n        return EM_OK; /* no gradient flows */\n");
    } else if (multi) {
        cg_puts(b, "    if (!(");
        bool first = true;
        for (int k = 0; k < op->nrets; k++)
            if (!d->ret_nondiff[k]) {
                cg_printf(b, "%sgk%d", first ? "" : " || ", k);
                first = false;
            }
        cg_puts(b, "))\n        return EM_OK; /* no gradient flows */\n");
    } else {
        cg_puts(b, "    if (!grad)\n        return EM_OK; /* no gradient flows */\n");
    }
    cg_puts(b, "    mark = em_ag_scope_begin();\n");
    /* unpack what the needed formulas use */
    for (int i = 0; i <= op->nargs; i++) {
        bool is_result = i == op->nargs;
        if (is_result ? !formulas_use_result(op)
                      : !cg_type_is_tensor(op->args[i].type) || !formulas_use_arg(op, i))
            continue;
        const char *x = is_result ? "result" : op->args[i].name;
        /* the result is unpacked whenever it was saved (see the kernel) */
        cg_puts(b, "    if (");
        if (is_result) cg_puts(b, "n->result_.was_saved");
        else use_condition(b, op, i, "node");
        cg_printf(b, ") {\n        %s = em_ag_tmp(em_saved_unpack(&n->%s_, node));\n", x, x);
        if (!is_result && op->args[i].type == CG_TENSOR_OPT)
            cg_printf(b, "        if (!%s && n->%s_.was_saved)\n            goto fail;\n    }\n", x, x);
        else
            cg_printf(b, "        if (!%s)\n            goto fail;\n    }\n", x);
    }
    for (int k = 0; multi && k < op->nrets; k++)
        if (formulas_use_results(op, k))
            cg_printf(b, "    if (n->result%d_.was_saved) {\n"
                         "        res%d = em_ag_tmp(em_saved_unpack(&n->result%d_, node));\n"
                         "        if (!res%d)\n            goto fail;\n    }\n", k, k, k, k);
    emitter m = { b, s, op, 0 };
    for (int f = 0; f < d->nformulas; f++) {
        const cg_formula *fm = &d->formulas[f];
        const char *x = op->args[fm->arg].name;
        if (fm->arg == la) {
            /* a Tensor[] argument: the formula gives element i's gradient */
            cg_printf(b, "    for (int64_t i = 0; i < n->%s_n; i++) {\n        /* %s[i]: ", x, x);
            cg_comment_escape(b, fm->text);
            cg_puts(b, " */\n        if (!node->next[i].fn)\n            continue;\n");
            char *r = emit_tensor(&m, fm->expr);
            cg_printf(b, "        out[i] = em_ag_reduce_to(em_ag_tmp_take(%s, mark), &n->%s_meta[i]);\n"
                         "        if (!out[i])\n            goto fail;\n    }\n", r, x);
            cg_free(r);
            continue;
        }
        int slot = cg_tensor_slot(op, fm->arg);
        cg_printf(b, "    if (node->next[%d].fn", slot);
        bool uses_any = false;
        for (int k = 0; multi && k < op->nrets; k++) uses_any |= formula_uses_grads(fm, k);
        if (uses_any) {
            bool first = true;
            cg_puts(b, " && (");
            for (int k = 0; k < op->nrets; k++)
                if (formula_uses_grads(fm, k)) {
                    /* grads[k], not gk%d: an earlier formula may have made gk%d zeros */
                    cg_printf(b, "%sgrads[%d]", first ? "" : " || ", k);
                    first = false;
                }
            cg_puts(b, ")");
        }
        cg_printf(b, ") {\n        /* %s: ", x);
        cg_comment_escape(b, fm->text);
        cg_puts(b, " */\n");
        /* an undefined gradient of a result this formula needs is zeros */
        for (int k = 0; uses_any && k < op->nrets; k++)
            if (needs_zero_grads(fm->expr, k))
                cg_printf(b, "        if (!gk%d && !(gk%d = em_ag_tmp(em_ag_zeros_from_meta(&em_node_input_meta(node)[%d]))))\n"
                             "            goto fail;\n", k, k, k);
        char *r = emit_tensor(&m, fm->expr);
        cg_printf(b, "        out[%d] = em_ag_reduce_to(em_ag_tmp_take(%s, mark), &n->%s_meta);\n"
                     "        if (!out[%d])\n            goto fail;\n    }\n",
                  slot, r, x, slot);
        cg_free(r);
    }
    cg_puts(b, "    em_ag_scope_end(mark);\n    return EM_OK;\n\nfail:\n    em_ag_scope_end(mark);\n");
    if (la >= 0) cg_puts(b, "    for (int i = 0; i < node->num_next; i++) {\n");
    else cg_printf(b, "    for (int i = 0; i < %d; i++) {\n", tensor_count(op));
    cg_printf(b, "        em_tensor_release(out[i]);\n"
                 "        out[i] = NULL;\n    }\n"
                 "    if (em_error_kind() != EM_OK)\n        return em_error_kind();\n"
                 "    return em_set_error(EM_EINTERNAL, \"%s: backward failed without setting an error\");\n"
                 "}\n\n",
              display);
}

static bool has_saved(const cg_op *op) {
    if (formulas_use_result(op)) return true;
    for (int k = 0; op->nrets > 1 && k < op->nrets; k++)
        if (formulas_use_results(op, k)) return true;
    for (int i = 0; i < op->nargs; i++)
        if (cg_type_is_tensor(op->args[i].type) && formulas_use_arg(op, i)) return true;
    return false;
}

static void emit_release(cg_buf *b, const cg_op *op, const char *ctype) {
    int la = list_arg(op);
    if (has_saved(op)) {
        cg_printf(b, "/* release_saved: drops the saved tensors (safe twice). */\n"
                     "static void release_%s(em_node *node)\n{\n    %s *n = (%s *)node;\n\n",
                  op->name, ctype, ctype);
        for (int i = 0; i < op->nargs; i++)
            if (cg_type_is_tensor(op->args[i].type) && formulas_use_arg(op, i))
                cg_printf(b, "    em_saved_release(&n->%s_);\n", op->args[i].name);
        if (formulas_use_result(op)) cg_puts(b, "    em_saved_release(&n->result_);\n");
        for (int k = 0; op->nrets > 1 && k < op->nrets; k++)
            if (formulas_use_results(op, k)) cg_printf(b, "    em_saved_release(&n->result%d_);\n", k);
        cg_puts(b, "}\n\n");
    }
    if (la >= 0) {
        cg_printf(b, "/* destroy: the saved state and the element metas of '%s'. */\n"
                     "static void destroy_%s(em_node *node)\n{\n    %s *n = (%s *)node;\n\n",
                  op->args[la].name, op->name, ctype, ctype);
        if (has_saved(op)) cg_printf(b, "    release_%s(node);\n", op->name);
        cg_printf(b, "    free(n->%s_meta);\n    n->%s_meta = NULL;\n}\n\n", op->args[la].name,
                  op->args[la].name);
    }
}

static void emit_vtable(cg_buf *b, const cg_op *op, const char *display) {
    bool saved = has_saved(op);
    cg_printf(b, "static const em_node_vtable vt_%s = { \"%s\", apply_%s, ", op->name, display, op->name);
    if (saved) cg_printf(b, "release_%s, ", op->name);
    else cg_puts(b, "NULL, ");
    if (list_arg(op) >= 0) cg_printf(b, "destroy_%s };\n\n", op->name);
    else if (saved) cg_printf(b, "release_%s };\n\n", op->name);
    else cg_puts(b, "NULL };\n\n");
}

/* ---- kernels ---- */

static void kernel_head(cg_buf *b, const cg_op *op, const char *what) {
    cg_printf(b, "/* Autograd kernel of %s: %s. */\n%sem_ag_k_%s(", op->name, what, cg_ret_ctype(op),
              op->name);
    cg_emit_params(b, op, true);
    cg_puts(b, ")\n{\n");
}

static void redispatch_call(cg_buf *b, const cg_op *op, const char *ks) {
    cg_printf(b, "em_redispatch_%s(%s%s", op->name, ks,
              op->nargs || op->nrets > 1 || cg_op_ret_list(op) ? ", " : "");
    cg_emit_arg_names(b, op);
    cg_puts(b, ")");
}

/* "em_requires_grad(a) || em_requires_grad(b)" over the Tensor arguments
 * that have a formula (all of them when all is set), plus arg extra. */
static void requires_any(cg_buf *b, const cg_op *op, bool all, int extra) {
    bool first = true;
    int la = list_arg(op);
    if (la >= 0 && (all || formula_for(op, la))) {
        cg_printf(b, "em_ag_list_requires_grad(%s)", op->args[la].name);
        first = false;
    }
    for (int i = 0; i < op->nargs; i++) {
        if (!cg_type_is_tensor(op->args[i].type)) continue;
        if (!all && i != extra && !formula_for(op, i)) continue;
        cg_printf(b, "%sem_requires_grad(%s)", first ? "" : " || ", op->args[i].name);
        first = false;
    }
}

static void emit_kernel_nondiff(cg_buf *b, const cg_op *op) {
    kernel_head(b, op, "its output is not differentiable, so it records nothing");
    cg_puts(b, "    return ");
    redispatch_call(b, op, "ks & em_keys_below(EM_KEY_AUTOGRAD)");
    cg_puts(b, ";\n}\n\n");
}

/* Whether the out= op ops[i] heads a family whose functional op has
 * output_differentiability: [false] (logical_and): then its out= variant
 * is not differentiable either and takes inputs that require grad, as in
 * PyTorch. */
static bool family_nondiff(const cg_schema *s, int i) {
    for (int j = 0; j < s->nops; j++) {
        const cg_op *x = &s->ops[j];
        if (x->delegate == i && !x->ret_alias_write)
            return x->deriv && !x->deriv->nformulas && written_arg(x) < 0;
    }
    return false;
}

/* The out= op of a structured family (Note [Structured kernels]): no graph
 * is recorded, so with grad mode on no argument (out included) may require
 * grad -- PyTorch's rule for out= arguments. */
static void emit_kernel_out(cg_buf *b, const cg_op *op) {
    kernel_head(b, op, "an out= variant: it records nothing and refuses arguments that require grad");
    cg_puts(b, "    if (em_is_grad_enabled() && (");
    requires_any(b, op, true, -1);
    cg_printf(b, ")) {\n        em_set_error(EM_ETYPE, \"%s: out= arguments don't support automatic "
                 "differentiation, but one of the arguments requires grad\");\n"
                 "        return NULL;\n    }\n    return ", op->base);
    redispatch_call(b, op, "ks & em_keys_below(EM_KEY_AUTOGRAD)");
    cg_puts(b, ";\n}\n\n");
}

static void emit_kernel_undefined(cg_buf *b, const cg_op *op, const char *derivs_path) {
    kernel_head(b, op, "no derivatives entry, so it refuses inputs that require grad");
    cg_puts(b, "    if (");
    requires_any(b, op, true, -1);
    cg_printf(b, ") {\n        em_set_error(EM_ETYPE, \"%s: op %s is not differentiable (it has no "
                 "entry in %s); call it under ember.no_grad() or on detach()ed tensors\");\n"
                 "        return NULL;\n    }\n    return ",
              op->name, op->name, derivs_path ? derivs_path : "schema/derivatives.yaml");
    redispatch_call(b, op, "ks & em_keys_below(EM_KEY_AUTOGRAD)");
    cg_puts(b, ";\n}\n\n");
}

static void emit_kernel_node(cg_buf *b, const cg_op *op, const char *display, const char *ctype) {
    int w = written_arg(op);
    int nt = tensor_count(op);
    char what[320];
    snprintf(what, sizeof what, "records a %s node, then redispatches below Autograd", display);
    kernel_head(b, op, what);
    cg_printf(b, "    em_keyset below = ks & em_keys_below(EM_KEY_AUTOGRAD);\n    %s *n;\n"
                 "    em_node *node;\n    em_tensor *result;\n    bool stale = false;\n\n    if (!(", ctype);
    requires_any(b, op, false, w);
    cg_puts(b, "))\n        return ");
    redispatch_call(b, op, "below");
    cg_puts(b, ";\n");
    if (w >= 0) {
        const char *x = op->args[w].name;
        cg_printf(b, "    if (em_ag_check_inplace(%s, \"%s\") != EM_OK)\n        return NULL;\n", x, op->name);
        /* integer and bool tensors never take part in the graph */
        cg_printf(b, "    if (!em_dtype_is_floating(%s->dtype))\n        return ", x);
        redispatch_call(b, op, "below");
        cg_puts(b, ";\n");
    }
    int la = list_arg(op);
    bool multi = op->nrets > 1;
    if (la >= 0)
        cg_printf(b, "    n = (%s *)em_node_new(sizeof *n, &vt_%s, 1, %s.n);\n", ctype, op->name,
                  op->args[la].name);
    else
        cg_printf(b, "    n = (%s *)em_node_new(sizeof *n, &vt_%s, %d, %d);\n", ctype, op->name,
                  op->nrets, nt);
    cg_puts(b, "    if (!n)\n        return NULL;\n    node = &n->base;\n");
    if (la >= 0) {
        const char *x = op->args[la].name;
        cg_printf(b, "    for (int i = 0; i < %s.n; i++)\n"
                     "        if (em_requires_grad(%s.data[i]) &&\n"
                     "            em_collect_edge(%s.data[i], &node->next[i], &stale) != EM_OK)\n"
                     "            goto fail;\n"
                     "    n->%s_meta = malloc(sizeof(em_input_meta) * (size_t)(%s.n ? %s.n : 1));\n"
                     "    if (!n->%s_meta) {\n"
                     "        em_set_error(EM_ENOMEM, \"%s: out of memory recording the backward\");\n"
                     "        goto fail;\n    }\n"
                     "    n->%s_n = %s.n;\n"
                     "    for (int i = 0; i < %s.n; i++)\n"
                     "        if (em_input_meta_from(&n->%s_meta[i], %s.data[i]) != EM_OK)\n"
                     "            goto fail;\n",
                  x, x, x, x, x, x, x, op->name, x, x, x, x, x);
    }
    /* edges: taken before the kernel runs (an in-place op moves self's history) */
    for (int i = 0; i < op->nargs; i++) {
        if (!cg_type_is_tensor(op->args[i].type) || !formula_for(op, i)) continue;
        const char *x = op->args[i].name;
        int slot = cg_tensor_slot(op, i);
        cg_printf(b, "    if (em_requires_grad(%s) && em_collect_edge(%s, &node->next[%d], &stale) != EM_OK)\n"
                     "        goto fail;\n", x, x, slot);
    }
    /* a stale view made in no_grad mode among the inputs (Note [View
     * history]): an in-place op refuses at once, an out-of-place one when
     * its result is differentiable */
    if (w >= 0)
        cg_printf(b, "    if (stale) {\n        em_ag_stale_view_error(\"%s\");\n        goto fail;\n    }\n", op->name);
    for (int i = 0; i < op->nargs; i++) {
        if (!cg_type_is_tensor(op->args[i].type) || !needs_meta(op, i)) continue;
        const char *x = op->args[i].name;
        /* a meta only x's own gradient reads (to reduce it to x's shape) is
         * read only when x has an edge, which needs x to require grad */
        char gate[160] = "";
        if (!formulas_use_meta(op, i)) snprintf(gate, sizeof gate, "em_requires_grad(%s) && ", x);
        if (op->args[i].type == CG_TENSOR_OPT)
            cg_printf(b, "    if (%s && %sem_input_meta_from(&n->%s_meta, %s) != EM_OK)\n        goto fail;\n", x, gate, x,
                      x);
        else
            cg_printf(b, "    if (%sem_input_meta_from(&n->%s_meta, %s) != EM_OK)\n        goto fail;\n", gate, x, x);
    }
    for (int i = 0; i < op->nargs; i++) {
        if (!cg_type_is_tensor(op->args[i].type) || !needs_geometry(op, i)) continue;
        const char *x = op->args[i].name;
        if (op->args[i].type == CG_TENSOR_OPT) cg_printf(b, "    if (%s)\n    ", x);
        cg_printf(b, "    em_geometry_from(&n->%s_geom, %s);\n", x, x);
    }
    /* non-tensor arguments the formulas use, by value */
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (cg_type_is_tensor(a->type) || !formulas_use_arg(op, i)) continue;
        const char *x = a->name;
        switch (a->type) {
        case CG_SCALAR_OPT: case CG_DIM_OPT: case CG_INDEX_OPT: case CG_ENDINDEX_OPT: case CG_INT_OPT:
            cg_printf(b, "    if (%s) {\n        n->%s = *%s;\n        n->has_%s = true;\n    }\n", x, x, x, x);
            break;
        case CG_STR:
            cg_printf(b, "    snprintf(n->%s, sizeof n->%s, \"%%s\", %s);\n", x, x, x);
            break;
        case CG_INTLIST: case CG_DIMLIST: case CG_DIMLIST_OPT: case CG_INTLIST_OPT:
            cg_printf(b, "    if (%s.n > EM_MAX_DIMS) {\n"
                         "        em_set_error(EM_EVALUE, \"%s: argument '%s' has %%d entries, more than %%d\", "
                         "%s.n, EM_MAX_DIMS);\n        goto fail;\n    }\n"
                         "    n->%s_n = %s.n;\n    if (%s.n > 0)\n"
                         "        memcpy(n->%s, %s.data, sizeof(int64_t) * (size_t)%s.n);\n",
                      x, op->name, x, x, x, x, x, x, x, x);
            break;
        default:
            cg_printf(b, "    n->%s = %s;\n", x, x);
            break;
        }
    }
    /* tensor inputs, only when an input whose formula uses them needs grad */
    for (int i = 0; i < op->nargs; i++) {
        if (!cg_type_is_tensor(op->args[i].type) || !formulas_use_arg(op, i)) continue;
        const char *x = op->args[i].name;
        cg_puts(b, i == w ? "    if (" : "    if ((");
        use_condition(b, op, i, "node");
        if (i == w)
            cg_printf(b, ") {\n        /* the formulas need %s before the op writes it; the clone\n"
                         "         * is recorded so a double backward reaches self's old history */\n"
                         "        em_tensor *orig = em_clone(%s);\n\n"
                         "        if (!orig)\n            goto fail;\n"
                         "        em_status st = em_saved_save(&n->%s_, orig, false);\n\n"
                         "        em_tensor_release(orig);\n        if (st != EM_OK)\n            goto fail;\n    }\n",
                      x, x, x);
        else if (w >= 0)
            /* an input sharing the written tensor's storage is saved as an alias too */
            cg_printf(b, ") && em_saved_save_beside(&n->%s_, %s, %s) != EM_OK)\n        goto fail;\n", x, x,
                      op->args[w].name);
        else
            /* saving a leaf or a view makes an alias (Note [Saved leaves and views]), which can fail */
            cg_printf(b, ") && em_saved_save(&n->%s_, %s, false) != EM_OK)\n        goto fail;\n", x, x);
    }
    cg_puts(b, "    result = ");
    redispatch_call(b, op, "below");
    cg_puts(b, ";\n    if (!result)\n        goto fail;\n");
    if (w >= 0) {
        cg_printf(b, "    if (em_rebase_history(%s, node) != EM_OK) {\n", op->args[w].name);
    } else {
        if (op->deriv->may_return_self && !multi)
            cg_printf(b, "    if (result == %s) {\n        /* nothing to do: the input itself, no new history */\n"
                         "        em_node_release(node);\n        return result;\n    }\n", op->args[0].name);
        /* on a failure after the kernel ran: release every result */
        cg_buf rel = { 0 };
        cg_puts(&rel, "        em_tensor_release(result);\n");
        for (int r = 1; r < op->nrets; r++)
            cg_printf(&rel, "        em_tensor_release(*%s);\n        *%s = NULL;\n", op->rets[r].name,
                      op->rets[r].name);
        if (tensor_count(op)) {
            cg_puts(b, "    if (");
            bool first = true;
            for (int i = 0; i < op->nargs; i++) {
                if (!cg_type_is_tensor(op->args[i].type)) continue;
                cg_printf(b, "%sresult == %s", first ? "" : " || ", op->args[i].name);
                first = false;
            }
            cg_printf(b, ") {\n        em_set_error(EM_EINTERNAL, \"%s: the kernel returned an input "
                         "tensor itself; an out-of-place op must return a new tensor (an alias is "
                         "fine)\");\n%s        goto fail;\n    }\n",
                      op->name, rel.data);
        }
        /* integer and bool results never require grad */
        cg_puts(b, "    if (!em_dtype_is_floating(result->dtype)) {\n        em_node_release(node);\n"
                   "        return result;\n    }\n");
        cg_printf(b, "    if (stale) {\n%s"
                     "        em_ag_stale_view_error(\"%s\");\n        goto fail;\n    }\n", rel.data, op->name);
        if (multi) {
            /* each differentiable result is an output slot of the node */
            cg_puts(b, "    if (");
            bool first = true;
            for (int r = 0; r < op->nrets; r++) {
                if (op->deriv->ret_nondiff[r]) continue;
                cg_printf(b, "%sem_set_history(%s%s, node, %d) != EM_OK", first ? "" : " ||\n        ",
                          r ? "*" : "", r ? op->rets[r].name : "result", r);
                first = false;
            }
            cg_printf(b, ") {\n%s        goto fail;\n    }\n", rel.data);
            /* saved results: differentiable ones as outputs (Note [Saved variables]);
             * saving an output makes a header, which can fail */
            bool any = false;
            for (int r = 0; r < op->nrets; r++)
                if (formulas_use_results(op, r)) {
                    cg_printf(b, "%sem_saved_save(&n->result%d_, %s%s, %s) != EM_OK", any ? " ||\n        " : "    if (",
                              r, r ? "*" : "", r ? op->rets[r].name : "result",
                              op->deriv->ret_nondiff[r] ? "false" : "true");
                    any = true;
                }
            if (any) cg_printf(b, ") {\n%s        goto fail;\n    }\n", rel.data);
            cg_free(rel.data);
            cg_puts(b, "    em_node_release(node);\n    return result;\n\nfail:\n"
                       "    em_node_release(node);\n    return NULL;\n}\n\n");
            return;
        }
        cg_free(rel.data);
        /* the kernel's reference to node becomes result's (two locked
         * instructions fewer a recorded op); a later failure releases
         * result, and with it node */
        cg_puts(b, "    if (em_set_history_take(result, node, 0) != EM_OK) {\n");
    }
    cg_puts(b, "        em_tensor_release(result);\n        goto fail;\n    }\n");
    /* after a failure past this point: with history taken, releasing
     * result releases node; an in-place op's node is still the kernel's */
    const char *after = w >= 0 ? "        goto fail;\n" : "        return NULL;\n";
    /* a view of one of several views returned together is one of them too */
    if (w < 0 && op->ret_alias && tensor_count(op) >= 1 && cg_type_is_tensor(op->args[0].type))
        cg_printf(b, "    em_ag_inherit_multi_view(result, %s);\n", op->args[0].name);
    if (formulas_use_result(op)) {
        /* PyTorch saves an output whatever needs a gradient, so a later
         * in-place write into it makes backward refuse -- except in its
         * Scalar overloads, which have no formula for the scalar: a
         * wrapped number here (x ^ 2) */
        cg_puts(b, "    if (");
        bool first = true;
        for (int f = 0; f < op->deriv->nformulas; f++) {
            const cg_formula *fm = &op->deriv->formulas[f];
            if (!cg_expr_uses_result(fm->expr)) continue;
            const char *x = op->args[fm->arg].name;
            if (op->args[fm->arg].type == CG_TENSOR_OPT)
                cg_printf(b, "%s(%s && !%s->wrapped_number)", first ? "" : " || ", x, x);
            else
                cg_printf(b, "%s!%s->wrapped_number", first ? "" : " || ", x);
            first = false;
        }
        cg_printf(b, ") {\n        if (em_saved_save(&n->result_, result, true) != EM_OK) {\n"
                     "            em_tensor_release(result);\n    %s        }\n    }\n", after);
    }
    cg_printf(b, "%s    return result;\n\nfail:\n"
                 "    em_node_release(node);\n    return NULL;\n}\n\n", w >= 0 ? "    em_node_release(node);\n" : "");
}

/* The kernel of an op with a Tensor[] result (split, unbind): the kernel
 * runs first (the count of results is known only then; the op is not
 * in-place, so nothing moves), then one node takes every element as an
 * output slot. The elements are views of one base made together: see
 * em_ag_mark_multi_view (an in-place write into one is refused). */
static void emit_kernel_list_result(cg_buf *b, const cg_op *op, const char *display, const char *ctype) {
    char what[320];
    snprintf(what, sizeof what, "records one %s node for every element", display);
    kernel_head(b, op, what);
    cg_printf(b, "    em_keyset below = ks & em_keys_below(EM_KEY_AUTOGRAD);\n    %s *n = NULL;\n"
                 "    em_node *node = NULL;\n    em_tensor **rs;\n    int nr;\n    bool stale = false;\n\n"
                 "    if (!(", ctype);
    requires_any(b, op, false, -1);
    cg_puts(b, "))\n        return ");
    redispatch_call(b, op, "below");
    cg_puts(b, ";\n    rs = ");
    redispatch_call(b, op, "below");
    cg_puts(b, ";\n    if (!rs)\n        return NULL;\n    nr = *nresults;\n"
               "    if (nr == 0 || !em_dtype_is_floating(rs[0]->dtype))\n        return rs;\n");
    cg_printf(b, "    n = (%s *)em_node_new(sizeof *n, &vt_%s, nr, %d);\n    if (!n)\n        goto fail;\n"
                 "    node = &n->base;\n", ctype, op->name, tensor_count(op));
    for (int i = 0; i < op->nargs; i++) {
        if (!cg_type_is_tensor(op->args[i].type) || !formula_for(op, i)) continue;
        const char *x = op->args[i].name;
        cg_printf(b, "    if (em_requires_grad(%s) && em_collect_edge(%s, &node->next[%d], &stale) != EM_OK)\n"
                     "        goto fail;\n", x, x, cg_tensor_slot(op, i));
        if (needs_meta(op, i))
            cg_printf(b, "    if (em_input_meta_from(&n->%s_meta, %s) != EM_OK)\n        goto fail;\n", x, x);
    }
    cg_printf(b, "    if (stale) {\n        em_ag_stale_view_error(\"%s\");\n        goto fail;\n    }\n",
              op->name);
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (cg_type_is_tensor(a->type) || !formulas_use_arg(op, i)) continue;
        if (cg_type_is_ptr_opt(a->type) || cg_type_is_list(a->type))
            cg_die("%s: a Tensor[]-result formula may use only plain non-tensor arguments ('%s')",
                   op->name, a->name);
        cg_printf(b, "    n->%s = %s;\n", a->name, a->name);
    }
    for (int i = 0; i < op->nargs; i++)
        if (cg_type_is_tensor(op->args[i].type) && formulas_use_arg(op, i))
            cg_die("%s: a Tensor[]-result formula may not save tensors (use X_meta)", op->name);
    cg_printf(b, "    for (int i = 0; i < nr; i++)\n"
                 "        if (em_set_history(rs[i], node, (uint32_t)i) != EM_OK ||\n"
                 "            em_ag_mark_multi_view(rs[i], \"%s\") != EM_OK)\n"
                 "            goto fail;\n"
                 "    em_node_release(node);\n    return rs;\n\nfail:\n"
                 "    em_node_release(node);\n    em_tensors_free(rs, nr);\n    *nresults = 0;\n"
                 "    return NULL;\n}\n\n", display);
}

/* ---- the file ---- */

void cg_emit_autograd(cg_buf *b, const cg_schema *s) {
    cg_puts(b, "/* @generated from ");
    cg_comment_escape(b, s->ops_path);
    if (s->derivs_path) {
        cg_puts(b, " and ");
        cg_comment_escape(b, s->derivs_path);
    }
    cg_puts(b, " by codegen -- do not edit */\n"
               "/* em_autograd_gen.c -- the Autograd kernel of every op with a Tensor argument\n"
               " * (em_ag_k_NAME, in em_op_table at EM_KEY_AUTOGRAD) and the backward node\n"
               " * types whose apply evaluates the formulas of schema/derivatives.yaml. See\n"
               " * Note [Autograd key] and Note [Formula scopes] in autograd/em_autograd.h. */\n"
               "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
               "#include \"autograd/em_autograd.h\"\n#include \"autograd/em_formulas.h\"\n"
               "#include \"em_ops.h\"\n#include \"em_kernels_decl.h\"\n\n");
    const char *last = NULL;
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        if (!cg_op_gets_autograd(op)) continue;
        cg_group_banner(b, op, &last);
        const cg_deriv *d = op->deriv;
        if (op->meta) {
            if (family_nondiff(s, i))
                emit_kernel_nondiff(b, op);
            else
                emit_kernel_out(b, op);
            continue;
        }
        if (!d) {
            emit_kernel_undefined(b, op, s->derivs_path);
            continue;
        }
        /* an in-place op whose output is not differentiable (logical_and_)
         * leaves self's autograd state as it is, as PyTorch does; fill_ and
         * zero_ (no formulas, differentiable) get a node without edges */
        if (!d->nformulas && (written_arg(op) < 0 || d->output_nondiff)) {
            emit_kernel_nondiff(b, op);
            continue;
        }
        char display[160], ctype[160];
        node_names(op, display, ctype, sizeof display);
        emit_node_struct(b, op, ctype);
        emit_apply(b, s, op, display, ctype);
        emit_release(b, op, ctype);
        emit_vtable(b, op, display);
        if (cg_op_ret_list(op)) emit_kernel_list_result(b, op, display, ctype);
        else emit_kernel_node(b, op, display, ctype);
    }
}
