/* derivs.c -- the formula language of schema/derivatives.yaml: a small
 * recursive-descent parser that turns a formula into a checked cg_expr tree.
 *
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/') unary)*
 *   unary   := '-' unary | primary
 *   primary := NUMBER | IDENT | IDENT '(' [expr (',' expr)*] ')' | '(' expr ')'
 *
 * Identifiers: grad, result, an argument of the op, X_meta for a Tensor
 * argument X. Calls: an op of ops.yaml (em_NAME, missing trailing arguments
 * take their defaults) or a helper of runtime/autograd/em_formulas.h
 * (em_ag_fn_NAME, listed in cg_helpers below). Every error is reported as
 * "FILE:LINE: formula for 'X' of OP: ..." and exits.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

/* The helpers formulas may call by name; keep in step with em_formulas.h
 * (the C compiler checks the generated calls against it). */
const cg_helper cg_helpers[] = {
    { "sum_backward", "tmvv" },
    { "mean_backward", "tmvv" },
    { "reshape_as", "tm" },
    { "unsqueeze_to", "tm" },
    { "permute_backward", "tv" },
    { "narrow_grad", "tmvvv" },
    { "select_grad", "tmvv" },
    { "slice_grad", "tmvvvv" },
    { "pow_backward_self", "ttt" },
    { "pow_exponent_backward", "tttt" },
    { "matmul_backward_self", "tmt" },
    { "matmul_backward_other", "ttm" },
    { "zeros_like", "t" },
    { "to_device_backward", "tm" },
    { "as_strided_grad", "tgvvv" },
    { "prod_backward", "tttvv" }, { "amax_backward", "tttvv" }, { "max_all_backward", "ttt" }, { "var_backward", "ttvvv" },
    { "std_backward", "tttvvv" }, { "norm_backward", "tttvvv" },
    { "value_selecting_backward", "tvtm" },
    { "value_selecting_reduction_backward", "tvtmv" },
    { "cat_grad", "tmvv" },
    { "split_backward", "lmv" },
    { "stack_grads", "lmv" },
    /* one block per op family (Note [Schema files]) */
    /* ---- family: unary ---- */
    { "clamp_backward", "ttvv" }, { "clamp_grad_self", "tttt" }, { "clamp_grad_min", "tttt" },
    { "clamp_grad_max", "tttt" }, { "polygamma_backward", "ttv" },

    /* ---- family: binary ---- */
    { "fmod_other_backward", "ttt" }, { "div_mode_backward", "ttt" }, { "div_mode_self_backward", "tt" },

    /* ---- family: reduce ---- */
    { "cumsum_backward", "tv" }, { "cumprod_grad", "ttvt" }, { "logcumsumexp_backward", "tttv" },

    /* ---- family: shape ---- */
    { "roll_backward", "tvv" }, { "rot90_backward", "tvv" }, { "repeat_backward", "tvm" },

    /* ---- family: index ---- */
    { "index_select_backward", "tmvt" }, { "index_source_grad", "tvtm" },
    { "masked_select_backward", "tmt" }, { "masked_scatter_source_grad", "ttm" },
    { "scatter_src_grad", "tvtm" }, { "take_backward", "tmt" },
    { "scatter_reduce_self_grad", "ttvttvvt" }, { "scatter_reduce_src_grad", "ttvttvvt" },

    /* ---- family: linalg ---- */
    { "mT", "t" },

    /* ---- family: speed ---- */
    { "mm_mat1_backward", "ttm" }, { "mm_mat2_backward", "ttm" },

    /* ---- family: random ---- */

    /* ---- family: vmath ---- */

    /* ---- family: conv ---- */
    { "conv_grad_input", "tttvvvvvv" }, { "conv_grad_weight", "tttvvvvvv" }, { "conv_grad_bias", "tttvvvvvv" },
    { "conv_dd_grad_output", "uuutttvvvvvv" }, { "conv_dd_input", "tttvvvvvv" },
    { "conv_dd_weight", "tttvvvvvv" }, { "unfold_backward_fold", "tmvvvv" },

    /* ---- family: spatial ---- */
    { "constant_pad_backward", "tv" }, { "pad_circular_grad", "tmv" }, { "zeros_of_meta", "m" },
    { "upsample_nd_grad", "tmvvvvvv" },

    /* ---- family: loss ---- */
    { "softmax_backward", "ttv" }, { "log_softmax_backward", "ttv" }, { "softmax_double_backward", "ttvt" },
    { "log_softmax_double_backward_grad", "ttv" }, { "log_softmax_double_backward_output", "ttvt" },
    { "cross_entropy_grad", "ttttvvv" }, { "cross_entropy_target_grad", "ttttvv" },
    { "pw_loss_double_backward", "ttttvvv" },

    /* ---- family: lapack ---- */
    { "det_backward", "ttt" }, { "slogdet_backward", "tt" }, { "inv_backward", "tt" },
    { "solve_backward_A", "ttmtv" }, { "solve_backward_B", "ttv" }, { "cholesky_backward", "ttv" },
    { "qr_backward", "ttttv" }, { "eigh_backward", "tttt" },
    { "svd_backward", "ttttttv" }, { "pinv_backward", "ttt" },
    { "lstsq_backward_self", "ttt" }, { "lstsq_backward_b", "ttt" }, { "matrix_exp_backward", "tt" },

    /* ---- family: activation ---- */
    { "leaky_relu_grad", "ttvv" }, { "elu_grad", "ttvv" }, { "selu_grad", "ttv" },
    { "elu_double_backward", "ttvvvvt" }, { "gelu_double_backward", "tttv" },
    { "silu_double_backward", "ttt" }, { "mish_double_backward", "ttt" },
    { "softplus_double_backward", "tttvv" }, { "hardswish_double_backward", "ttt" },
    { "log_sigmoid_double_backward", "ttt" }, { "native_dropout_grad", "ttvv" },

    /* ---- family: norm ---- */
    { "layer_norm_grad", "ttvttttv" }, { "layer_norm_double_backward", "tttttvtttv" },
    { "batch_norm_grad", "tttttttvvv" }, { "batch_norm_double_backward", "ttttttttttvvv" },
    { "group_norm_grad", "tttttvv" }, { "group_norm_double_backward", "ttttttttvv" },

    /* ---- family: metric ---- */
    { "euclidean_dist_backward", "ttttv" }, { "cdist_grad", "tttvtv" }, { "pdist_grad", "ttvt" },

    /* ---- family: pool ---- */
    { "max_pool_double_backward", "ttv" }, { "adaptive_avg_pool_double_backward", "tmv" },
    { "max_unpool_backward", "ttv" },

    /* ---- family: embed ---- */
    { "embedding_backward", "tmtvv" }, { "embedding_double_backward", "ttvv" },
    { "embedding_bag_backward", "tmtttvtvvv" },
    /* ---- family: loss2 ---- */
    { "bce_target_grad", "ttttv" }, { "bce_double_backward", "tttttvv" },
    { "bcewl_target_grad", "tttttv" }, { "bcewl_double_backward", "ttttttvv" },
    { "ctc_double_backward", "t" },
    /* ---- family: grid ---- */
    { "grid_sampler_2d_grad", "tttvvvv" }, { "upsample_aa_grad", "tmvvvvv" },
    { "grid_sampler_double_backward", "tt" },
    { "grid_sampler_3d_grad", "tttvvvv" }, { "grid_sampler_3d_double_backward", "tt" },

    { NULL, NULL }
};

/* ---- small queries ---- */

int cg_tensor_slot(const cg_op *op, int arg) {
    if (arg < 0 || arg >= op->nargs || !cg_type_is_tensor(op->args[arg].type)) return -1;
    int slot = 0;
    for (int i = 0; i < arg; i++)
        if (cg_type_is_tensor(op->args[i].type)) slot++;
    return slot;
}

bool cg_op_has_formulas(const cg_op *op) { return op->deriv && op->deriv->nformulas > 0; }

bool cg_expr_uses_arg(const cg_expr *e, int arg) {
    if (e->kind == CG_EX_ARG && e->arg == arg) return true;
    for (int i = 0; i < e->nkids; i++)
        if (cg_expr_uses_arg(e->kids[i], arg)) return true;
    return false;
}

bool cg_expr_uses_result(const cg_expr *e) {
    if (e->kind == CG_EX_RESULT) return true;
    for (int i = 0; i < e->nkids; i++)
        if (cg_expr_uses_result(e->kids[i])) return true;
    return false;
}

bool cg_expr_uses_results(const cg_expr *e, int k) {
    if (e->kind == CG_EX_RESULTS && e->arg == k) return true;
    for (int i = 0; i < e->nkids; i++)
        if (cg_expr_uses_results(e->kids[i], k)) return true;
    return false;
}

bool cg_expr_uses_grads(const cg_expr *e, int k) {
    if (e->kind == CG_EX_GRADS && (e->arg == k || e->arg < 0 || k < 0)) return true;
    if (e->kind == CG_EX_GRAD && k <= 0) return true;
    for (int i = 0; i < e->nkids; i++)
        if (cg_expr_uses_grads(e->kids[i], k)) return true;
    return false;
}

bool cg_expr_uses_geometry(const cg_expr *e, int arg) {
    if (e->kind == CG_EX_GEOM && e->arg == arg) return true;
    for (int i = 0; i < e->nkids; i++)
        if (cg_expr_uses_geometry(e->kids[i], arg)) return true;
    return false;
}

bool cg_expr_uses_meta(const cg_expr *e, int arg) {
    if (e->kind == CG_EX_META && e->arg == arg) return true;
    for (int i = 0; i < e->nkids; i++)
        if (cg_expr_uses_meta(e->kids[i], arg)) return true;
    return false;
}

/* ---- names the generated code takes for itself ---- */

/* Locals of the generated apply functions and kernels, and node fields. */
static const char *const ag_reserved[] = {
    "grad", "result", "node", "n", "out", "grads", "mark", "below", "any", "base", "orig",
    "prev", "results", "rs", NULL
};

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

void cg_check_autograd_names(const char *path, int line, const cg_op *op) {
    for (int i = 0; i < op->nargs; i++) {
        const char *name = op->args[i].name;
        bool bad = strncmp(name, "has_", 4) == 0 || ends_with(name, "_") || ends_with(name, "_meta") ||
                   ends_with(name, "_n");
        /* v1, v2, ... are temporaries; gk0, res0, ... gradients and results */
        static const char *const numbered[] = { "v", "gk", "res", NULL };
        for (int k = 0; numbered[k]; k++) {
            size_t m = strlen(numbered[k]);
            if (strncmp(name, numbered[k], m) != 0 || !name[m]) continue;
            bool digits = true;
            for (const char *p = name + m; *p; p++)
                if (!isdigit((unsigned char)*p)) digits = false;
            bad |= digits;
        }
        for (int r = 0; ag_reserved[r]; r++)
            if (strcmp(ag_reserved[r], name) == 0) bad = true;
        if (bad)
            cg_error_at(path, line, "argument '%s' of %s clashes with a name of the generated "
                        "autograd code (reserved: grad, result, node, n, out, grads, mark, below, "
                        "any, base, orig, prev, results, rs, v<N>, gk<N>, res<N>, has_*, *_, *_meta, *_n); "
                        "rename it in %s",
                        name, op->name, "ops.yaml");
    }
}

/* ---- the parser ---- */

typedef struct {
    const char *path;
    int line;
    const cg_schema *s;
    const cg_op *op;
    const char *key;   /* the argument the formula is for */
    int key_arg;       /* its index */
    const char *src;   /* the whole formula */
    const char *p;
} fparser;

__attribute__((noreturn, format(printf, 2, 3))) static void ferror_at(fparser *x, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cg_error_at(x->path, x->line, "formula for '%s' of %s: %s (in '%s')", x->key, x->op->name, msg,
                x->src);
}

static void skip(fparser *x) {
    while (isspace((unsigned char)*x->p)) x->p++;
}

static const char *here(fparser *x) { return *x->p ? x->p : "the end"; }

static cg_expr *new_expr(cg_ex_kind kind) {
    cg_expr *e = cg_xmalloc(sizeof *e);
    e->kind = kind;
    e->arg = -1;
    e->op_index = -1;
    e->helper = -1;
    return e;
}

static void add_kid(cg_expr *e, cg_expr *k) {
    cg_expr **kids = cg_xrealloc(e->kids, (size_t)(e->nkids + 1) * sizeof *kids);
    if (!kids) cg_die("out of memory");
    e->kids = kids;
    e->kids[e->nkids++] = k;
}

static int find_arg_index(const cg_op *op, const char *name) {
    for (int i = 0; i < op->nargs; i++)
        if (strcmp(op->args[i].name, name) == 0) return i;
    return -1;
}

static cg_expr *parse_expr(fparser *x);

/* The known identifiers, for "unknown identifier" messages. */
static void known_idents(const cg_op *op, char *buf, size_t n) {
    snprintf(buf, n, "grad, result");
    for (int i = 0; i < op->nargs; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, ", %s", op->args[i].name);
    }
    for (int i = 0; i < op->nargs; i++) {
        if (!cg_type_is_tensor(op->args[i].type)) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, ", %s_meta, %s_geometry", op->args[i].name, op->args[i].name);
    }
}

static cg_expr *parse_ident(fparser *x) {
    const char *start = x->p;
    while (isalnum((unsigned char)*x->p) || *x->p == '_') x->p++;
    char *name = cg_xstrndup(start, (size_t)(x->p - start));
    skip(x);
    if (*x->p == '(') { /* a call */
        x->p++;
        cg_expr *e = new_expr(CG_EX_CALL);
        e->text = name;
        for (int i = 0; i < x->s->nops; i++)
            if (strcmp(x->s->ops[i].name, name) == 0) e->op_index = i;
        if (e->op_index < 0)
            for (int h = 0; cg_helpers[h].name; h++)
                if (strcmp(cg_helpers[h].name, name) == 0) e->helper = h;
        if (e->op_index < 0 && e->helper < 0) {
            char known[2048] = "";
            for (int h = 0; cg_helpers[h].name; h++) {
                size_t len = strlen(known);
                snprintf(known + len, sizeof known - len, "%s%s", h ? ", " : "", cg_helpers[h].name);
            }
            ferror_at(x, "unknown function '%s' (not an op of %s nor a helper of "
                      "runtime/autograd/em_formulas.h: %s)", name, x->s->ops_path, known);
        }
        skip(x);
        if (*x->p == ')') {
            x->p++;
        } else {
            for (;;) {
                add_kid(e, parse_expr(x));
                skip(x);
                if (*x->p == ',') { x->p++; continue; }
                if (*x->p == ')') { x->p++; break; }
                ferror_at(x, "expected ',' or ')' in the arguments of %s at '%s'", name, here(x));
            }
        }
        return e;
    }
    const cg_op *op = x->op;
    bool multi = op->nrets > 1, rlist = cg_op_ret_list(op);
    if (strcmp(name, "grad") == 0 || strcmp(name, "result") == 0) {
        if (multi)
            ferror_at(x, "%s has %d results: name grads[k] and results[k] (0-based), not '%s'",
                      op->name, op->nrets, name);
        if (rlist && name[0] == 'r')
            ferror_at(x, "%s returns a Tensor[]: its formulas cannot name 'result'", op->name);
        if (rlist)
            ferror_at(x, "%s returns a Tensor[]: pass the list 'grads' to a helper, not 'grad'",
                      op->name);
        cg_expr *e = new_expr(name[0] == 'g' ? CG_EX_GRAD : CG_EX_RESULT);
        cg_free(name);
        return e;
    }
    if (strcmp(name, "grads") == 0 || strcmp(name, "results") == 0) {
        bool g = name[0] == 'g';
        cg_expr *e = new_expr(g ? CG_EX_GRADS : CG_EX_RESULTS);
        e->text = name;
        if (rlist && g && *x->p != '[') return e; /* the whole list, for a helper */
        if (!multi)
            ferror_at(x, "'%s' names the results of an op with several results; %s has one (use "
                      "%s)", name, op->name, rlist ? "the list 'grads' in a helper" : g ? "grad" : "result");
        if (*x->p != '[') ferror_at(x, "expected '[' after '%s'", name);
        x->p++;
        char *end;
        long k = strtol(x->p, &end, 10);
        if (end == x->p || *end != ']')
            ferror_at(x, "expected %s[K] with K a result index (0-based) at '%s'", name, here(x));
        if (k < 0 || k >= op->nrets)
            ferror_at(x, "%s[%ld] is out of range: %s has %d results, %s[0] .. %s[%d]", name, k,
                      op->name, op->nrets, name, name, op->nrets - 1);
        x->p = end + 1;
        e->arg = (int)k;
        return e;
    }
    if (strcmp(name, "i") == 0) {
        if (x->op->args[x->key_arg].type != CG_TENSORLIST)
            ferror_at(x, "'i' (the element index) is only known in the formula of a Tensor[] "
                      "argument");
        cg_expr *e = new_expr(CG_EX_ELEM);
        e->text = name;
        return e;
    }
    int a = find_arg_index(x->op, name);
    if (a >= 0 && x->op->args[a].type == CG_FLOATLIST_OPT)
        ferror_at(x, "'%s' is a float[]? argument, which formulas cannot use", name);
    if (a >= 0 && x->op->args[a].type == CG_TENSORLIST)
        ferror_at(x, "'%s' is a Tensor[] argument: name its element i's meta %s_meta, not the list", name, name);
    if (a >= 0) {
        cg_expr *e = new_expr(CG_EX_ARG);
        e->arg = a;
        e->text = name;
        return e;
    }
    /* X_meta and X_geometry of a Tensor argument X */
    static const struct { const char *suffix; cg_ex_kind kind; } kinds[] = {
        { "_geometry", CG_EX_GEOM }, { "_meta", CG_EX_META },
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (!ends_with(name, kinds[k].suffix)) continue;
        char *base = cg_xstrndup(name, strlen(name) - strlen(kinds[k].suffix));
        a = find_arg_index(x->op, base);
        cg_free(base);
        bool list_meta = a >= 0 && x->op->args[a].type == CG_TENSORLIST && kinds[k].kind == CG_EX_META;
        if (a >= 0 && (cg_type_is_tensor(x->op->args[a].type) || list_meta)) {
            cg_expr *e = new_expr(kinds[k].kind);
            e->arg = a;
            e->text = name;
            return e;
        }
    }
    char known[2048];
    known_idents(x->op, known, sizeof known);
    ferror_at(x, "unknown identifier '%s' (known: %s)", name, known);
}

static cg_expr *parse_primary(fparser *x) {
    skip(x);
    char c = *x->p;
    if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)x->p[1]))) {
        char *end;
        strtod(x->p, &end);
        if (isalpha((unsigned char)*end) || *end == '_')
            ferror_at(x, "bad number at '%s'", x->p);
        cg_expr *e = new_expr(CG_EX_NUM);
        e->text = cg_xstrndup(x->p, (size_t)(end - x->p));
        x->p = end;
        return e;
    }
    if (isalpha((unsigned char)c) || c == '_') return parse_ident(x);
    if (c == '(') {
        x->p++;
        cg_expr *e = parse_expr(x);
        skip(x);
        if (*x->p != ')') ferror_at(x, "expected ')' at '%s'", here(x));
        x->p++;
        return e;
    }
    ferror_at(x, "expected a number, a name or '(' at '%s'", here(x));
}

static cg_expr *parse_unary(fparser *x) {
    skip(x);
    if (*x->p == '-') {
        x->p++;
        cg_expr *k = parse_unary(x);
        if (k->kind == CG_EX_NUM) { /* fold -NUMBER into the literal */
            size_t n = strlen(k->text);
            char *t = cg_xmalloc(n + 2);
            if (k->text[0] == '-') memcpy(t, k->text + 1, n);
            else { t[0] = '-'; memcpy(t + 1, k->text, n + 1); }
            cg_free(k->text);
            k->text = t;
            return k;
        }
        cg_expr *e = new_expr(CG_EX_NEG);
        add_kid(e, k);
        return e;
    }
    return parse_primary(x);
}

static cg_expr *binary(const char *opch, cg_expr *l, cg_expr *r) {
    cg_expr *e = new_expr(CG_EX_BIN);
    e->text = cg_xstrdup(opch);
    add_kid(e, l);
    add_kid(e, r);
    return e;
}

static cg_expr *parse_term(fparser *x) {
    cg_expr *e = parse_unary(x);
    for (;;) {
        skip(x);
        if (*x->p != '*' && *x->p != '/') return e;
        char opch[2] = { *x->p++, 0 };
        e = binary(opch, e, parse_unary(x));
    }
}

static cg_expr *parse_expr(fparser *x) {
    cg_expr *e = parse_term(x);
    for (;;) {
        skip(x);
        if (*x->p != '+' && *x->p != '-') return e;
        char opch[2] = { *x->p++, 0 };
        e = binary(opch, e, parse_term(x));
    }
}

/* ---- checking ---- */

/* What a subexpression stands for in C. */
typedef enum { V_TENSOR, V_NUMBER, V_WRAPPABLE, V_VALUE, V_META, V_GEOM, V_GLIST } vkind;

static vkind kind_of(const cg_op *op, const cg_expr *e) {
    switch (e->kind) {
    case CG_EX_NUM: return V_NUMBER;
    case CG_EX_META: return V_META;
    case CG_EX_GEOM: return V_GEOM;
    case CG_EX_ELEM: return V_VALUE;
    case CG_EX_GRADS: return e->arg < 0 ? V_GLIST : V_TENSOR;
    case CG_EX_ARG: {
        cg_type t = op->args[e->arg].type;
        if (cg_type_is_tensor(t)) return V_TENSOR;
        if (t == CG_TENSORLIST) return V_META; /* only its X_meta / i may be used */
        if (t == CG_SCALAR || t == CG_INT || t == CG_FLOAT) return V_WRAPPABLE;
        return V_VALUE;
    }
    default: return V_TENSOR;
    }
}

static const char *const arith_ops[4][2] = {
    { "+", "add" }, { "-", "sub" }, { "*", "mul" }, { "/", "div" }
};

/* The op implementing an operator must exist with (Tensor, Tensor[, *, Scalar alpha]). */
static void need_arith_op(fparser *x, const char *opname, bool with_alpha) {
    for (int i = 0; i < x->s->nops; i++) {
        const cg_op *o = &x->s->ops[i];
        if (strcmp(o->name, opname) != 0) continue;
        bool ok = o->nargs == (with_alpha ? 3 : 2) && o->args[0].type == CG_TENSOR &&
                  (with_alpha || o->nargs < 2 || o->args[1].type == CG_TENSOR) &&
                  (!with_alpha || (o->args[1].type == CG_TENSOR && o->args[2].type == CG_SCALAR));
        if (strcmp(opname, "neg") == 0) ok = o->nargs == 1 && o->args[0].type == CG_TENSOR;
        if (!ok)
            ferror_at(x, "the formula needs op %s with signature %s, but %s has '%s'", opname,
                      strcmp(opname, "neg") == 0 ? "(Tensor self)"
                      : with_alpha               ? "(Tensor self, Tensor other, *, Scalar alpha)"
                                                 : "(Tensor self, Tensor other)",
                      x->s->ops_path, o->schema);
        return;
    }
    ferror_at(x, "the formula needs op '%s' (for its arithmetic), which %s does not define", opname,
              x->s->ops_path);
}

static void check_operand(fparser *x, const cg_expr *e, const char *what) {
    vkind k = kind_of(x->op, e);
    if (k == V_META || k == V_GEOM)
        ferror_at(x, "%s: '%s' is an input %s (pass it to a helper), not a value", what, e->text,
                  k == V_META ? "meta" : "geometry");
    if (k == V_GLIST)
        ferror_at(x, "%s: 'grads' is a list (pass it to a helper), not a value", what);
    if (k == V_VALUE && e->kind == CG_EX_ELEM)
        ferror_at(x, "%s: 'i' is an element index and cannot be used in arithmetic", what);
    if (k == V_VALUE)
        ferror_at(x, "%s: '%s' is a %s and cannot be used in arithmetic", what, e->text,
                  cg_types[x->op->args[e->arg].type].spelling);
}

static void check_expr(fparser *x, const cg_expr *e);

static void check_call(fparser *x, const cg_expr *e) {
    for (int i = 0; i < e->nkids; i++) check_expr(x, e->kids[i]);
    if (e->op_index >= 0) {
        const cg_op *o = &x->s->ops[e->op_index];
        if (o->nrets != 1 || cg_op_ret_list(o))
            ferror_at(x, "%s has %s; a formula can call only ops with one Tensor result", o->name,
                      o->nrets > 1 ? "several results" : "a Tensor[] result");
        if (e->nkids > o->nargs)
            ferror_at(x, "%s takes %d argument%s, %d given", o->name, o->nargs, o->nargs == 1 ? "" : "s",
                      e->nkids);
        for (int i = e->nkids; i < o->nargs; i++)
            if (o->args[i].def.kind == CG_DEF_NONE_GIVEN)
                ferror_at(x, "%s: missing argument '%s' (it has no default)", o->name, o->args[i].name);
            else if (o->args[i].type == CG_ENDINDEX_OPT && o->args[i].def.kind != CG_DEF_NULL)
                ferror_at(x, "%s: give argument '%s' explicitly (its default %s has no C spelling)",
                          o->name, o->args[i].name, o->args[i].def.text);
        for (int i = 0; i < e->nkids; i++) {
            const cg_expr *k = e->kids[i];
            vkind vk = kind_of(x->op, k);
            cg_type pt = o->args[i].type;
            bool ok;
            if (cg_type_is_tensor(pt)) ok = vk == V_TENSOR || vk == V_NUMBER || vk == V_WRAPPABLE;
            else if (vk == V_NUMBER) ok = pt == CG_SCALAR || pt == CG_INT || pt == CG_FLOAT;
            else ok = vk == V_VALUE || vk == V_WRAPPABLE;
            if (!ok)
                ferror_at(x, "argument %d of %s ('%s', a %s) cannot take %s", i + 1, o->name,
                          o->args[i].name, cg_types[pt].spelling,
                          vk == V_TENSOR   ? "a tensor expression"
                          : vk == V_META   ? "an input meta"
                          : vk == V_GEOM   ? "an input geometry"
                          : vk == V_NUMBER ? "a number (numbers are allowed for Tensor, Scalar, int "
                                             "and float arguments)"
                                           : "that argument");
        }
        return;
    }
    const cg_helper *h = &cg_helpers[e->helper];
    int np = (int)strlen(h->params);
    if (e->nkids != np)
        ferror_at(x, "helper %s takes %d argument%s, %d given", h->name, np, np == 1 ? "" : "s",
                  e->nkids);
    for (int i = 0; i < np; i++) {
        vkind vk = kind_of(x->op, e->kids[i]);
        bool ok = h->params[i] == 't'   ? vk == V_TENSOR || vk == V_NUMBER || vk == V_WRAPPABLE
                  : h->params[i] == 'u' ? e->kids[i]->kind == CG_EX_GRADS && e->kids[i]->arg >= 0
                  : h->params[i] == 'm' ? vk == V_META
                  : h->params[i] == 'g' ? vk == V_GEOM
                  : h->params[i] == 'l' ? vk == V_GLIST
                                        : vk == V_VALUE || vk == V_WRAPPABLE || vk == V_NUMBER;
        if (!ok)
            ferror_at(x, "argument %d of %s must be %s", i + 1, h->name,
                      h->params[i] == 't'   ? "a tensor"
                      : h->params[i] == 'u' ? "grads[k] (a gradient that may be missing)"
                      : h->params[i] == 'm' ? "an input meta X_meta"
                      : h->params[i] == 'g' ? "an input geometry X_geometry"
                      : h->params[i] == 'l' ? "the list of gradients 'grads' (of a Tensor[] result)"
                                            : "a non-tensor argument of the op");
    }
}

static void check_expr(fparser *x, const cg_expr *e) {
    switch (e->kind) {
    case CG_EX_BIN:
        check_expr(x, e->kids[0]);
        check_expr(x, e->kids[1]);
        check_operand(x, e->kids[0], e->text);
        check_operand(x, e->kids[1], e->text);
        for (int i = 0; i < 4; i++)
            if (strcmp(arith_ops[i][0], e->text) == 0)
                need_arith_op(x, arith_ops[i][1], i < 2);
        break;
    case CG_EX_NEG:
        check_expr(x, e->kids[0]);
        check_operand(x, e->kids[0], "unary -");
        need_arith_op(x, "neg", false);
        break;
    case CG_EX_CALL:
        check_call(x, e);
        break;
    case CG_EX_GRADS:
        if (e->arg >= 0 && x->op->deriv && x->op->deriv->ret_nondiff[e->arg])
            ferror_at(x, "grads[%d] is the gradient of result '%s', which output_differentiability "
                      "marks not differentiable", e->arg, x->op->rets[e->arg].name);
        break;
    default:
        break;
    }
}

cg_expr *cg_parse_formula(const char *path, int line, const cg_schema *s, const cg_op *op,
                          int key_arg, const char *text) {
    fparser x = { path, line, s, op, op->args[key_arg].name, key_arg, text, text };
    cg_expr *e = parse_expr(&x);
    skip(&x);
    if (*x.p) ferror_at(&x, "unexpected '%s' after the expression", x.p);
    check_expr(&x, e);
    vkind k = kind_of(op, e);
    if (k == V_META || k == V_GEOM || k == V_VALUE || k == V_GLIST)
        ferror_at(&x, "a formula must compute a tensor, not '%s'", e->text);
    return e;
}
