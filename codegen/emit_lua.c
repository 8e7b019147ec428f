/* emit_lua.c -- writes em_lua_ops.c: one `static int l_NAME(lua_State *L)` per
 * op, em_lua_register_ops() and em_lua_op_docs, using only the em_lua.h helpers.
 *
 * Note [Lua argument binding]
 * A call is ember.NAME(positional..., {options}) or x:NAME(positional...,
 * {options}) (self is Lua argument 1 either way). Each argument comes from
 * the next positional slot when one is left, else from the options table
 * under its name (keyword-only arguments only from there); giving one both
 * ways is an error. nil or absent means the default, or "absent" for an
 * optional type. An int[]/dim[] argument takes varargs integers
 * (ember.zeros(2, 3), x:sum(1)) when no later positional argument could take
 * an integer; a table works everywhere.
 * Conversions that make temporaries (numbers given for Tensor arguments) run
 * last, after every other argument was checked and after each Tensor
 * argument's Lua type was checked, so a Lua error raised by a conversion
 * cannot leak a temporary; em_lua_argtmp_release runs before the result is
 * pushed (em_lua_push_tensor raises the op's error on NULL).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "codegen.h"

/* An argument's local: a_NAME holds the C value, v_NAME the pointee of the
 * pointer-typed optionals, i_NAME its stack slot. */
static void emit_locals(cg_buf *b, const cg_op *op) {
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        const cg_default *d = &a->def;
        bool has = d->kind != CG_DEF_NONE_GIVEN && d->kind != CG_DEF_NULL;
        switch (a->type) {
        case CG_TENSOR: case CG_TENSOR_OPT:
            cg_printf(b, "    em_tensor *a_%s = NULL;\n", a->name);
            break;
        case CG_SCALAR: case CG_SCALAR_OPT: {
            const char *lhs = a->type == CG_SCALAR ? "em_scalar a_" : "em_scalar v_";
            if (!has) cg_printf(b, "    %s%s = em_scalar_int(0);\n", lhs, a->name);
            else if (d->kind == CG_DEF_BOOL)
                cg_printf(b, "    %s%s = em_scalar_bool(%s);\n", lhs, a->name, d->b ? "true" : "false");
            else if (d->kind == CG_DEF_INT)
                cg_printf(b, "    %s%s = em_scalar_int(%" PRId64 ");\n", lhs, a->name, d->i);
            else
                cg_printf(b, "    %s%s = em_scalar_float(%.17g);\n", lhs, a->name, d->d);
            if (a->type == CG_SCALAR_OPT)
                cg_printf(b, "    const em_scalar *a_%s = NULL;\n", a->name);
            break;
        }
        case CG_INT:
            cg_printf(b, "    int64_t a_%s = %" PRId64 ";\n", a->name, has ? d->i : 0);
            break;
        case CG_DIM: case CG_INDEX:
            cg_printf(b, "    int64_t a_%s = %" PRId64 "; /* 0-based */\n", a->name,
                      has ? (d->i > 0 ? d->i - 1 : d->i) : 0);
            break;
        case CG_DIM_OPT: case CG_INDEX_OPT:
            cg_printf(b, "    int64_t v_%s = %" PRId64 ";\n", a->name,
                      has ? (d->i > 0 ? d->i - 1 : d->i) : 0);
            cg_printf(b, "    const int64_t *a_%s = NULL;\n", a->name);
            break;
        case CG_INT_OPT:
            cg_printf(b, "    int64_t v_%s = %" PRId64 ";\n", a->name, has ? d->i : 0);
            cg_printf(b, "    const int64_t *a_%s = NULL;\n", a->name);
            break;
        case CG_ENDINDEX_OPT:
            if (has && d->i == -1) cg_printf(b, "    int64_t v_%s = INT64_MAX;\n", a->name);
            else
                cg_printf(b, "    int64_t v_%s = %" PRId64 ";\n", a->name,
                          has ? (d->i > 0 ? d->i : d->i + 1) : 0);
            cg_printf(b, "    const int64_t *a_%s = NULL;\n", a->name);
            break;
        case CG_FLOATLIST_OPT:
            cg_printf(b, "    em_floatlist a_%s = { NULL, -1 };\n", a->name);
            break;
        case CG_STR: {
            /* a_NAME always points into ch_NAME (static): the default's entry */
            int def = -1;
            cg_printf(b, "    static const char *const ch_%s[] = { ", a->name);
            for (int c = 0; c < a->nchoices; c++) {
                cg_printf(b, "\"%s\", ", a->choices[c]);
                if (d->kind == CG_DEF_STR && strcmp(d->str, a->choices[c]) == 0) def = c;
            }
            if (!a->nchoices) /* plain str: the default as a literal; ch_NAME stays unused */
                cg_printf(b, "NULL };\n    (void)ch_%s;\n    const char *a_%s = %s;\n", a->name, a->name,
                          d->kind == CG_DEF_STR ? d->text : "NULL");
            else if (def >= 0) cg_printf(b, "NULL };\n    const char *a_%s = ch_%s[%d];\n", a->name, a->name, def);
            else cg_printf(b, "NULL };\n    const char *a_%s = NULL;\n", a->name);
            break;
        }
        case CG_INTLIST: case CG_DIMLIST: case CG_DIMLIST_OPT: case CG_INTLIST_OPT:
            if (d->kind == CG_DEF_LIST && d->nlist > 0) {
                cg_printf(b, "    static const int64_t def_%s[] = {", a->name);
                for (int j = 0; j < d->nlist; j++) {
                    int64_t v = d->list[j];
                    if (cg_type_is_dims(a->type) && v > 0) v--; /* dims: 1-based -> 0-based */
                    cg_printf(b, "%s%" PRId64, j ? ", " : " ", v);
                }
                cg_puts(b, " };\n");
                cg_printf(b, "    em_intlist a_%s = { def_%s, %d };\n", a->name, a->name, d->nlist);
            } else if (d->kind == CG_DEF_LIST) {
                cg_printf(b, "    em_intlist a_%s = { NULL, 0 };\n", a->name);
            } else {
                cg_printf(b, "    em_intlist a_%s = { NULL, -1 };\n", a->name);
            }
            break;
        case CG_FLOAT:
            cg_printf(b, "    double a_%s = %.17g;\n", a->name, has ? d->d : 0.0);
            break;
        case CG_BOOL:
            cg_printf(b, "    bool a_%s = %s;\n", a->name, has && d->b ? "true" : "false");
            break;
        case CG_DTYPE: case CG_DTYPE_OPT:
            cg_printf(b, "    em_dtype a_%s = %s;\n", a->name,
                      has ? cg_dtype_enums[d->dtype] : "EM_DTYPE_NONE");
            break;
        case CG_DEVICE: case CG_DEVICE_OPT:
            cg_printf(b, "    em_device a_%s = em_no_device();\n", a->name);
            break;
        case CG_GENERATOR_OPT:
            cg_printf(b, "    em_generator *a_%s = NULL;\n", a->name);
            break;
        case CG_TENSORLIST: case CG_TENSORLIST_OPT:
            cg_printf(b, "    em_tensorlist a_%s = { NULL, 0 };\n", a->name);
            break;
        default:
            break;
        }
    }
}

/* Whether a positional int[]/dim[] argument at index i may take varargs:
 * no later positional argument may take an integer. */
static bool list_varargs(const cg_op *op, int i) {
    for (int j = i + 1; j < op->npositional; j++) {
        cg_type t = op->args[j].type;
        if (t != CG_BOOL && t != CG_DTYPE && t != CG_DTYPE_OPT) return false;
    }
    return true;
}

/* Converts one located non-Tensor argument (slot i_NAME) into a_NAME. */
/* The em_lua_check_* function converting a value of type t in one call, or
 * NULL for the types that need more (lists). */
static const char *simple_checker(cg_type t) {
    switch (t) {
    case CG_SCALAR: case CG_SCALAR_OPT: return "em_lua_check_scalar";
    case CG_INT: case CG_INT_OPT: return "em_lua_check_int";
    case CG_DIM: case CG_INDEX: case CG_DIM_OPT: case CG_INDEX_OPT: return "em_lua_check_dim";
    case CG_ENDINDEX_OPT: return "em_lua_check_endindex";
    case CG_FLOAT: return "em_lua_check_float";
    case CG_BOOL: return "em_lua_check_bool";
    case CG_DTYPE: case CG_DTYPE_OPT: return "em_lua_check_dtype";
    case CG_DEVICE: case CG_DEVICE_OPT: return "em_lua_check_device";
    case CG_GENERATOR_OPT: return "em_lua_check_generator";
    default: return NULL;
    }
}

static void emit_convert(cg_buf *b, const cg_op *op, int i) {
    const cg_arg *a = &op->args[i];
    const char *n = a->name, *o = op->msg_name;
    bool required = a->def.kind == CG_DEF_NONE_GIVEN && !cg_types[a->type].optional;
    if (required) {
        /* nil in a positional slot reaches the check, which says "got nil" */
        cg_printf(b, "    if (!i_%s)\n        return missing(L, \"%s\", \"%s\");\n", n, o, n);
        cg_printf(b, "    {\n");
    } else {
        cg_printf(b, "    if (arg_given(L, i_%s)) {\n", n);
    }
    const char *checker = simple_checker(a->type);
    if (checker) {
        /* optional pointer types convert into v_NAME, pointed to by a_NAME below */
        cg_printf(b, "        %s_%s = %s(L, i_%s, \"%s\", \"%s\");\n",
                  cg_type_is_ptr_opt(a->type) ? "v" : "a", n, checker, n, o, n);
    }
    if (a->type == CG_FLOATLIST_OPT)
        cg_printf(b, "        a_%s = em_lua_check_floatlist(L, i_%s, \"%s\", \"%s\");\n", n, n, o, n);
    if (a->type == CG_STR) /* a plain str (no set): ch_NAME is empty, any string passes */
        cg_printf(b, "        a_%s = em_lua_check_choice(L, i_%s, \"%s\", \"%s\", %s%s);\n", n, n, o, n,
                  a->nchoices ? "ch_" : "NULL", a->nchoices ? n : "");
    if (cg_type_is_list(a->type)) {
        bool is_dim = cg_type_is_dims(a->type);
        cg_printf(b, "        int used = 1;\n");
        const char *dimarg = is_dim ? "true" : "false";
        bool va = !a->kwonly && list_varargs(op, i);
        char varargs[64];
        if (va || a->kwonly) snprintf(varargs, sizeof varargs, "true"); /* kw-only: the pushed top */
        else snprintf(varargs, sizeof varargs, "i_%s > top", n); /* options table: one value */
        cg_printf(b, "        a_%s = em_lua_check_intlist(L, i_%s, \"%s\", \"%s\", %s, %s, "
                     "&used, &tmp);\n", n, n, o, n, varargs, dimarg);
        /* used == 0: varargs found no integer at the slot (x:sum(true)) */
        if (va && !required) {
            char def[128];
            if (a->def.kind == CG_DEF_LIST && a->def.nlist > 0)
                snprintf(def, sizeof def, "(em_intlist){ def_%s, %d }", n, a->def.nlist);
            else
                snprintf(def, sizeof def, "(em_intlist){ NULL, %d }",
                         a->def.kind == CG_DEF_LIST ? 0 : -1);
            cg_printf(b, "        if (used == 0 && i_%s <= top) {\n"
                         "            a_%s = %s; /* not a list: the next argument's value */\n"
                         "            pos = i_%s;\n"
                         "        } else if (used == 0) {\n", n, n, def, n);
        } else {
            cg_puts(b, "        if (used == 0) {\n");
        }
        cg_printf(b, "            (void)em_lua_check_intlist(L, i_%s, \"%s\", \"%s\", false, %s, &used, "
                     "&tmp); /* raises */\n"
                     "        } else if (i_%s <= top) {\n"
                     "            pos = i_%s + used;\n"
                     "        }\n", n, o, n, dimarg, n, n);
    }
    if (a->type == CG_TENSORLIST)
        cg_printf(b, "        a_%s = em_lua_check_tensorlist(L, i_%s, \"%s\", \"%s\");\n", n, n, o, n);
    if (a->type == CG_TENSORLIST_OPT)
        cg_printf(b, "        a_%s = em_lua_check_opt_tensorlist(L, i_%s, \"%s\", \"%s\");\n", n, n, o, n);
    if (cg_type_is_ptr_opt(a->type)) cg_printf(b, "        a_%s = &v_%s;\n", n, n);
    /* a pointer optional with a non-None default points at its default */
    if (cg_type_is_ptr_opt(a->type) && a->def.kind != CG_DEF_NONE_GIVEN && a->def.kind != CG_DEF_NULL)
        cg_printf(b, "    } else {\n        a_%s = &v_%s; /* the default */\n", n, n);
    cg_puts(b, "    }\n");
}

static void emit_binding(cg_buf *b, const cg_op *op) {
    const char *o = op->msg_name; /* the Lua name, in messages */
    cg_puts(b, "/* ");
    cg_comment_escape(b, op->schema);
    cg_printf(b, " */\nstatic int l_%s(lua_State *L)\n{\n    static const char *const names[] = { ", op->name);
    bool factory = true; /* no Tensor argument: accepts requires_grad (a leaf option) */
    for (int i = 0; i < op->nargs; i++) {
        cg_printf(b, "\"%s\", ", op->args[i].name);
        if (cg_type_is_tensor(op->args[i].type) || cg_type_is_tlist(op->args[i].type)) factory = false;
    }
    if (factory) cg_puts(b, "\"requires_grad\", ");
    int nreq = 0; /* required positional arguments */
    for (int i = 0; i < op->nargs; i++)
        if (!op->args[i].kwonly && op->args[i].def.kind == CG_DEF_NONE_GIVEN &&
            !cg_types[op->args[i].type].optional)
            nreq++;
    cg_printf(b, "NULL };\n"
                 "    int opt = em_lua_options_index_req(L, %d);\n", nreq);
    cg_puts(b, "    int top = opt ? opt - 1 : lua_gettop(L);\n"
               "    int pos = 1;\n"
               "    em_lua_argtmp tmp;\n");
    for (int i = 0; i < op->nargs; i++) cg_printf(b, "    int i_%s;\n", op->args[i].name);
    emit_locals(b, op);
    cg_printf(b, "    %sr;\n", cg_ret_ctype(op));
    for (int k = 1; k < op->nrets; k++) cg_printf(b, "    em_tensor *o_%s = NULL;\n", op->rets[k].name);
    if (cg_op_ret_list(op)) cg_puts(b, "    int nresults = 0;\n");
    cg_puts(b, "\n    tmp.n = 0;\n    tmp.nlists = 0;\n");
    cg_printf(b, "    if (opt)\n        em_lua_check_option_names(L, opt, \"%s\", names);\n", o);
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        cg_printf(b, "    i_%s = arg_slot(L, &pos, top, opt, \"%s\", \"%s\", %s);\n", a->name, o,
                  a->name, a->kwonly ? "false" : "true");
        if (!cg_type_is_tensor(a->type)) emit_convert(b, op, i);
    }
    cg_printf(b, "    if (pos <= top)\n        return too_many(L, \"%s\", %d, top);\n", o,
              op->npositional);
    /* tensors last (see Note [Lua argument binding]); the precheck of a
     * sole Tensor argument is its conversion's own check, run with the same
     * temporaries, so it is left out (unary ops: one type test per call) */
    int ntensors = 0;
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i].type == CG_TENSOR || op->args[i].type == CG_TENSOR_OPT) ntensors++;
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (a->type == CG_TENSOR)
            cg_printf(b, "    if (!i_%s)\n        return missing(L, \"%s\", \"%s\");\n", a->name, o, a->name);
        if (a->type == CG_TENSOR && ntensors > 1)
            cg_printf(b, "    precheck_tensor(L, i_%s, \"%s\", \"%s\", false, &tmp);\n", a->name, o, a->name);
        if (a->type == CG_TENSOR && a->kwonly && a->alias_write) /* out=: written, so a real tensor */
            cg_printf(b, "    if (!em_lua_totensor(L, i_%s))\n"
                         "        return luaL_error(L, \"%s: argument '%s' must be a tensor (the op writes into it), "
                         "got %%s\", luaL_typename(L, i_%s));\n", a->name, o, a->name, a->name);
        else if (a->type == CG_TENSOR_OPT)
            cg_printf(b, "    if (i_%s)\n        precheck_tensor(L, i_%s, \"%s\", \"%s\", true, &tmp);\n",
                      a->name, a->name, o, a->name);
    }
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (a->type == CG_TENSOR)
            cg_printf(b, "    a_%s = em_lua_check_tensor_fast(L, i_%s, \"%s\", \"%s\", &tmp);\n", a->name,
                      a->name, o, a->name);
        else if (a->type == CG_TENSOR_OPT)
            cg_printf(b, "    if (i_%s)\n        a_%s = em_lua_opt_tensor_fast(L, i_%s, \"%s\", \"%s\", &tmp);\n",
                      a->name, a->name, a->name, o, a->name);
    }
    cg_printf(b, "    r = em_%s(", op->name);
    int nc = 0;
    for (int i = 0; i < op->nargs; i++) cg_printf(b, "%sa_%s", nc++ ? ", " : "", op->args[i].name);
    for (int k = 1; k < op->nrets; k++) cg_printf(b, "%s&o_%s", nc++ ? ", " : "", op->rets[k].name);
    if (cg_op_ret_list(op)) cg_printf(b, "%s&nresults", nc++ ? ", " : "");
    cg_puts(b, ");\n");
    if (cg_op_ret_list(op)) {
        cg_printf(b, "    em_lua_argtmp_release(&tmp);\n"
                     "    em_lua_push_tensor_array(L, r, nresults, \"%s\");\n    return 1;\n}\n\n", o);
        return;
    }
    if (op->nrets > 1) {
        cg_printf(b, "    em_lua_argtmp_release(&tmp);\n    {\n        em_tensor *outs[] = {");
        for (int k = 1; k < op->nrets; k++) cg_printf(b, "%so_%s", k > 1 ? ", " : " ", op->rets[k].name);
        cg_printf(b, " };\n\n        em_lua_push_results(L, r, outs, %d, \"%s\");\n    }\n"
                     "    return %d;\n}\n\n", op->nrets, o, op->nrets);
        return;
    }
    if (op->lua_bool) { /* Note [Boolean results] */
        cg_printf(b, "    em_lua_argtmp_release(&tmp);\n    em_lua_push_bool_result(L, r, \"%s\");\n"
                     "    return 1;\n}\n\n", o);
        return;
    }
    if (factory)
        cg_printf(b, "    if (r && opt && !set_requires_grad(L, opt, r, \"%s\"))\n        r = NULL;\n", o);
    int same = op->nargs > 0 && op->args[0].type == CG_TENSOR ? 0 : -1;
    for (int i = 0; i < op->nargs && op->ret_alias_write; i++) /* out= returns out */
        if (op->args[i].alias_write && op->args[i].type == CG_TENSOR) same = i;
    if (same >= 0) {
        /* an op that returns its input itself (in-place ops, to() of the
         * same dtype, out=) returns the same Lua value, as PyTorch returns
         * the same Python object */
        const char *x = op->args[same].name;
        cg_printf(b, "    if (r && r == a_%s && lua_type(L, i_%s) == LUA_TUSERDATA) {\n"
                     "        em_lua_argtmp_release(&tmp);\n        em_tensor_release(r);\n"
                     "        lua_pushvalue(L, i_%s);\n        return 1;\n    }\n", x, x, x);
    }
    cg_printf(b, "    em_lua_argtmp_release(&tmp);\n    em_lua_push_tensor_uv(L, r, \"%s\");\n"
                 "    return 1;\n}\n\n", o);
}

/* The 0-based position of the Tensor argument named self among the
 * positional arguments (the receiver of x:NAME), or -1. */
static int method_self_pos(const cg_op *op) {
    for (int i = 0, pos = 0; i < op->nargs; i++) {
        if (op->args[i].kwonly) continue;
        if (strcmp(op->args[i].name, "self") == 0 && cg_type_is_tensor(op->args[i].type)) return pos;
        pos++;
    }
    return -1;
}

/* lPRE_NAME: x:NAME(...) with the receiver moved to position k (0-based)
 * of l_NAME (pre "m") or of the overloads' lo_NAME (pre "mo"). */
static void emit_receiver_move(cg_buf *b, const char *pre, const char *name, int k) {
    cg_printf(b, "/* x:%s(...): the receiver is argument 'self' (position %d), as in PyTorch. */\n"
                 "static int l%s_%s(lua_State *L)\n{\n    int top = lua_gettop(L);\n\n"
                 "    lua_pushvalue(L, 1);\n    lua_remove(L, 1);\n"
                 "    lua_insert(L, top < %d ? top : %d);\n    return l%s_%s(L);\n}\n\n",
              name, k + 1, pre, name, k + 1, k + 1, pre[1] ? "o" : "", name);
}

static bool has_tensor_arg(const cg_op *op) {
    for (int i = 0; i < op->nargs; i++)
        if (cg_type_is_tensor(op->args[i].type)) return true;
    return false;
}

/* No Lua function or method reaches op: its every namespace is shadowed
 * (Note [Shadowed names] in parse.c), so it gets no binding. */
static bool no_lua_name(const cg_op *op) {
    if (op->v_method || !op->v_function || !op->nnamespaces) return false;
    for (int k = 0; k < op->nnamespaces; k++)
        if (!op->ns_shadowed[k]) return false;
    return true;
}

/* ---- overloads ---- */

/* The index of the first op with op i's base name, and how many share it. */
static int first_of_group(const cg_schema *s, int i) {
    for (int j = 0; j < i; j++)
        if (strcmp(s->ops[j].base, s->ops[i].base) == 0) return j;
    return i;
}
static int group_size(const cg_schema *s, int i) {
    int n = 0;
    for (int j = 0; j < s->nops; j++) n += strcmp(s->ops[j].base, s->ops[i].base) == 0;
    return n;
}

/* The C condition "the Lua value at index j can be an argument of type t". */
static const char *lua_type_test(cg_type t) {
    switch (t) {
    case CG_TENSOR: case CG_TENSOR_OPT:
        return "(em_lua_totensor(L, j) || lt == LUA_TNUMBER || lt == LUA_TBOOLEAN)";
    case CG_SCALAR: case CG_SCALAR_OPT:
        return "(lt == LUA_TNUMBER || lt == LUA_TBOOLEAN || em_lua_totensor(L, j))";
    case CG_INT: case CG_INT_OPT: case CG_DIM: case CG_DIM_OPT: case CG_INDEX: case CG_INDEX_OPT:
    case CG_ENDINDEX_OPT: case CG_FLOAT:
        return "(lt == LUA_TNUMBER)";
    case CG_BOOL: return "(lt == LUA_TBOOLEAN)";
    case CG_INTLIST: case CG_DIMLIST: case CG_DIMLIST_OPT: case CG_INTLIST_OPT:
        return "(lt == LUA_TTABLE || lt == LUA_TNUMBER)";
    case CG_STR: return "(lt == LUA_TSTRING)";
    case CG_FLOATLIST_OPT: return "(lt == LUA_TTABLE || lt == LUA_TNUMBER)";
    case CG_DTYPE: case CG_DTYPE_OPT: return "(lt == LUA_TSTRING)";
    case CG_TENSORLIST: case CG_TENSORLIST_OPT: return "(lt == LUA_TTABLE)";
    case CG_DEVICE: case CG_DEVICE_OPT: return "(lt == LUA_TSTRING || lt == LUA_TUSERDATA)";
    case CG_GENERATOR_OPT: return "(lt == LUA_TUSERDATA)";
    default: return "false";
    }
}

/* match_NAME: whether the Lua arguments fit overload op -- the count of
 * positional values, each one's Lua type, and the options table's names. */
/* The type of positional argument pos (0-based) of op, or -1. */
static int positional_type(const cg_op *op, int pos) {
    for (int i = 0, p = 0; i < op->nargs; i++) {
        if (op->args[i].kwonly) continue;
        if (p++ == pos) return (int)op->args[i].type;
    }
    return -1;
}

/* Whether another overload of op's name takes a Tensor at positional pos:
 * then a tensor there picks that overload, not a Scalar of op's (PyTorch
 * tries Tensor overloads before Scalar ones: clamp(x, t) is clamp.Tensor,
 * clamp(x, 0.5) is clamp). */
static bool tensor_overload_at(const cg_schema *s, const cg_op *op, int pos) {
    for (int j = 0; j < s->nops; j++) {
        const cg_op *o = &s->ops[j];
        if (o == op || o->meta || strcmp(o->base, op->base) != 0) continue;
        int t = positional_type(o, pos);
        if (t == CG_TENSOR || t == CG_TENSOR_OPT) return true;
    }
    return false;
}

static void emit_matcher(cg_buf *b, const cg_schema *s, const cg_op *op, bool several_out) {
    if (op->meta && !several_out) {
        /* the out= op of a structured family: chosen by an out option alone,
         * so that its binding (or the functional one) reports what is wrong;
         * among several out= overloads (round.out, round.decimals_out) the
         * full match below picks one */
        int np = 0;
        for (int i = 0; i < op->nargs; i++)
            np += !op->args[i].kwonly && op->args[i].def.kind == CG_DEF_NONE_GIVEN &&
                  !cg_types[op->args[i].type].optional;
        cg_printf(b, "static bool match_%s(lua_State *L)\n{\n", op->name);
        cg_printf(b, "    int opt = em_lua_options_index_req(L, %d);\n    bool has;\n\n"
                     "    if (!opt)\n        return false;\n"
                     "    has = lua_getfield(L, opt, \"%s\") != LUA_TNIL;\n    lua_pop(L, 1);\n",
                  np, op->args[op->out_arg].name);
        cg_puts(b, "    return has;\n}\n\n");
        return;
    }
    int nreq = 0;
    bool varargs = false;
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (a->kwonly) continue;
        if (a->def.kind == CG_DEF_NONE_GIVEN && !cg_types[a->type].optional) nreq++;
        if (cg_type_is_list(a->type) && list_varargs(op, i)) varargs = true;
    }
    cg_printf(b, "static bool match_%s(lua_State *L)\n{\n    static const char *const names[] = { ",
              op->name);
    for (int i = 0; i < op->nargs; i++) cg_printf(b, "\"%s\", ", op->args[i].name);
    cg_printf(b, "NULL };\n    int opt = em_lua_options_index_req(L, %d);\n"
                 "    int top = opt ? opt - 1 : lua_gettop(L);\n\n"
                 "    if (top < %d)\n        return false;\n"
                 "    if (opt && !options_known(L, opt, names))\n        return false;\n",
              nreq, nreq);
    /* a required keyword-only argument (out=) must be in the options table */
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (!a->kwonly || a->def.kind != CG_DEF_NONE_GIVEN || cg_types[a->type].optional) continue;
        cg_printf(b, "    if (!opt || lua_getfield(L, opt, \"%s\") == LUA_TNIL) {\n"
                     "        if (opt)\n            lua_pop(L, 1);\n        return false;\n    }\n"
                     "    lua_pop(L, 1);\n", a->name);
    }
    /* an option that only a string or only a list can be picks the overload
     * by its Lua type (conv2d(x, w, {padding = "same"}) is conv2d.padding) */
    bool overloaded = false;
    for (int j = 0; j < s->nops; j++)
        overloaded |= &s->ops[j] != op && !s->ops[j].meta && strcmp(s->ops[j].base, op->base) == 0;
    for (int i = 0; i < op->nargs && overloaded; i++) {
        const cg_arg *a = &op->args[i];
        if (a->type != CG_STR && a->type != CG_INTLIST && a->type != CG_INTLIST_OPT) continue;
        cg_printf(b, "    if (opt) {\n        int lt = lua_getfield(L, opt, \"%s\");\n\n        lua_pop(L, 1);\n"
                     "        if (lt != LUA_TNIL && !%s)\n            return false;\n    }\n",
                  a->name, lua_type_test(a->type));
    }
    cg_puts(b, "    for (int j = 1; j <= top; j++) {\n        int lt = lua_type(L, j);\n\n"
               "        switch (j) {\n");
    int pos = 0;
    for (int i = 0; i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        if (a->kwonly) continue;
        pos++;
        bool nil_ok = a->def.kind != CG_DEF_NONE_GIVEN || cg_types[a->type].optional;
        bool number_only = (a->type == CG_SCALAR || a->type == CG_SCALAR_OPT) && tensor_overload_at(s, op, pos - 1);
        cg_printf(b, "        case %d:\n            if (!(%s%s))\n                return false;\n"
                     "            break;\n", pos, nil_ok ? "lt == LUA_TNIL || " : "",
                  number_only ? "(lt == LUA_TNUMBER || lt == LUA_TBOOLEAN)" : lua_type_test(a->type));
    }
    cg_printf(b, "        default: /* past the positional arguments */\n"
                 "            if (%s)\n                return false;\n        }\n    }\n"
                 "    return true;\n}\n\n",
              varargs ? "lt != LUA_TNUMBER" : "true");
}

/* Note [Boolean results]
 * PyTorch's allclose and equal return a Python bool. Their ops.yaml entries
 * say `-> Tensor` (the C op returns a 0-dim bool tensor, so every C caller
 * and backend works as for any op) and `lua_result: boolean`: the Lua
 * binding hands back that tensor's value as a Lua boolean
 * (em_lua_push_bool_result), so `if ember.equal(a, b) then` means what it
 * says. Such an op has no gradient to check (it is not listed among the
 * differentiable ops). */

/* Note [Metamethods]
 * `a + b` on tensors runs the op named by ops.yaml `metamethod: __add`
 * through mm_NAME: the same C op (em_add) as ember.add, with the remaining
 * arguments at their defaults, but without the binding's argument slots --
 * Lua always passes exactly the operands. lua_tensor.c registers
 * em_lua_op_metamethods on the tensor metatable with the metatable as
 * upvalue 1, which em_lua_mm_operand and em_lua_push_result use for their
 * fast paths (em_lua_bind.h). */
static void emit_metamethod(cg_buf *b, const cg_op *op) {
    int n = strcmp(op->metamethod, "__unm") == 0 || strcmp(op->metamethod, "__bnot") == 0 ? 1 : 2;
    cg_printf(b, "/* %s: the metamethod entry of %s (Note [Metamethods]). */\n"
                 "static int mm_%s(lua_State *L)\n{\n    em_lua_argtmp tmp;\n", op->metamethod, op->name,
              op->name);
    emit_locals(b, op);
    cg_puts(b, "\n    tmp.n = 0;\n    tmp.nlists = 0;\n");
    for (int i = 0; i < n; i++)
        cg_printf(b, "    a_%s = em_lua_mm_operand(L, %d, \"%s\", \"%s\", &tmp);\n", op->args[i].name, i + 1,
                  op->name, op->args[i].name);
    cg_printf(b, "    em_tensor *r = em_%s(", op->name);
    for (int i = 0; i < op->nargs; i++) cg_printf(b, "%sa_%s", i ? ", " : "", op->args[i].name);
    cg_printf(b, ");\n\n    if (tmp.n)\n        em_lua_argtmp_release(&tmp);\n"
                 "    em_lua_push_result(L, r, \"%s\");\n    return 1;\n}\n\n", op->name);
}

void cg_emit_lua(cg_buf *b, const cg_schema *s) {
    cg_generated_banner(b, s->ops_path);
    cg_puts(b, "/* em_lua_ops.c -- the Lua bindings of every op: ember.NAME and x:NAME.\n"
               " * See Note [Lua argument binding] in codegen/emit_lua.c. */\n"
               "#include <stdint.h>\n#include <string.h>\n\n"
               "#include \"em_ops.h\"\n#include \"autograd/em_autograd.h\"\n#include \"lua/em_lua.h\"\n\n");
    cg_puts(b, "#include \"lua/em_lua_bind.h\"\n\n"); /* binding helpers: a real header under runtime/ */
    /* luaconf.h's l_floor macro would rename the binding of op floor */
    cg_puts(b, "#undef l_floor\n\n");
    const char *last = NULL;
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        cg_group_banner(b, op, &last);
        if (group_size(s, i) == 1 && no_lua_name(op)) continue; /* Note [Shadowed names] */
        emit_binding(b, op);
        int k = method_self_pos(op);
        if (op->v_method && k > 0 && group_size(s, i) == 1) emit_receiver_move(b, "m", op->name, k);
    }
    /* Note [Overloads]: one binding per name picks the first overload whose
     * arguments match the Lua values by count and type */
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        if (first_of_group(s, i) != i) continue;
        if (group_size(s, i) < 2) continue;
        int nplain = 0, nout = 0; /* overloads that are not out= ops, out= ops */
        for (int j = i; j < s->nops; j++) {
            nplain += strcmp(s->ops[j].base, op->base) == 0 && !s->ops[j].meta;
            nout += strcmp(s->ops[j].base, op->base) == 0 && s->ops[j].meta;
        }
        for (int j = i; j < s->nops; j++)
            if (strcmp(s->ops[j].base, op->base) == 0 && (s->ops[j].meta || nplain > 1))
                emit_matcher(b, s, &s->ops[j], nout > 1);
        cg_printf(b, "/* ember.%s / x:%s: the overloads of '%s', tried in schema order. */\n"
                     "static int lo_%s(lua_State *L)\n{\n    static const char *const schemas[] = {\n",
                  op->base, op->base, op->base, op->base);
        for (int j = i; j < s->nops; j++) {
            if (strcmp(s->ops[j].base, op->base) != 0) continue;
            cg_puts(b, "        \"");
            cg_c_escape(b, s->ops[j].schema);
            cg_puts(b, "\",\n");
        }
        cg_puts(b, "        NULL\n    };\n\n");
        /* out= ops first (an out option picks them); when one other
         * overload is left it is called without matching, so that its own
         * binding reports bad arguments */
        int nother = 0, other = -1;
        for (int j = i; j < s->nops; j++) {
            if (strcmp(s->ops[j].base, op->base) != 0) continue;
            if (s->ops[j].meta)
                cg_printf(b, "    if (match_%s(L))\n        return l_%s(L);\n", s->ops[j].name,
                          s->ops[j].name);
            else
                nother++, other = j;
        }
        if (nother == 1) {
            cg_printf(b, "    (void)schemas;\n    return l_%s(L);\n}\n\n", s->ops[other].name);
            continue;
        }
        for (int j = i; j < s->nops; j++)
            if (strcmp(s->ops[j].base, op->base) == 0 && !s->ops[j].meta)
                cg_printf(b, "    if (match_%s(L))\n        return l_%s(L);\n", s->ops[j].name,
                          s->ops[j].name);
        cg_printf(b, "    return em_lua_no_overload(L, \"%s\", schemas);\n}\n\n", op->base);
    }
    /* an overloaded method whose receiver is not the first argument
     * (polygamma, polygamma.out): moved, then the overloads are tried */
    for (int i = 0; i < s->nops; i++)
        if (first_of_group(s, i) == i && group_size(s, i) > 1 && s->ops[i].v_method &&
            method_self_pos(&s->ops[i]) > 0)
            emit_receiver_move(b, "mo", s->ops[i].base, method_self_pos(&s->ops[i]));
    cg_puts(b, "/* ---- metamethods ---- */\n\n");
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].metamethod) emit_metamethod(b, &s->ops[i]);
    cg_puts(b, "/* The tensor metamethods of ops.yaml; declared in em_lua.h. */\n"
               "const luaL_Reg em_lua_op_metamethods[] = {\n");
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].metamethod) cg_printf(b, "    { \"%s\", mm_%s },\n", s->ops[i].metamethod, s->ops[i].name);
    cg_puts(b, "    { NULL, NULL }\n};\n\n");
    cg_puts(b, "/* ---- registration ---- */\n\n"
               "/* Function variants: {namespace (\"\" = ember), name, binding}. */\n"
               "static const struct { const char *ns, *name; lua_CFunction func; } functions[] = {\n");
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        if (!op->v_function || first_of_group(s, i) != i) continue;
        /* an overloaded name's binding is lo_BASE; the group shares the first's namespaces */
        const char *pre = group_size(s, i) > 1 ? "o" : "";
        const char *fn = group_size(s, i) > 1 ? op->base : op->name;
        if (!op->nnamespaces) cg_printf(b, "    { \"\", \"%s\", l%s_%s },\n", op->base, pre, fn);
        for (int k = 0; k < op->nnamespaces; k++) /* Note [Namespace prefixes] */
            if (!op->ns_shadowed[k]) /* Note [Shadowed names] (parse.c) */
                cg_printf(b, "    { \"%s\", \"%s\", l%s_%s },\n", op->namespaces[k], op->lua_name, pre, fn);
    }
    cg_puts(b, "    { NULL, NULL, NULL }\n};\n\nstatic const luaL_Reg methods[] = {\n");
    for (int i = 0; i < s->nops; i++) {
        if (!s->ops[i].v_method || first_of_group(s, i) != i) continue;
        if (group_size(s, i) > 1)
            cg_printf(b, "    { \"%s\", l%s_%s },\n", s->ops[i].base,
                      method_self_pos(&s->ops[i]) > 0 ? "mo" : "o", s->ops[i].base);
        else
            cg_printf(b, "    { \"%s\", l%s_%s },\n", s->ops[i].base, /* a lone overload: its Lua name */
                      method_self_pos(&s->ops[i]) > 0 ? "m" : "", s->ops[i].name);
    }
    cg_puts(b, "    { NULL, NULL }\n};\n\n"
               "/* Sets module[NAME] (or module.NS[NAME] for an op with a namespace) for\n"
               " * function variants and methods[NAME] for method variants (the same C\n"
               " * function when self is the first argument, else lm_NAME, which moves\n"
               " * the receiver to self's place). */\n"
               "void em_lua_register_ops(lua_State *L, int module_idx, int methods_idx)\n{\n"
               "    module_idx = lua_absindex(L, module_idx);\n"
               "    methods_idx = lua_absindex(L, methods_idx);\n"
               "    em_lua_bindings_begin(L); /* Note [Binding upvalue] */\n"
               "    int base = lua_gettop(L) - 1;\n"
               "    for (int i = 0; functions[i].name; i++) {\n"
               "        em_lua_push_namespace(L, module_idx, functions[i].ns);\n"
               "        em_lua_push_binding(L, base, functions[i].func);\n"
               "        lua_setfield(L, -2, functions[i].name);\n"
               "        lua_pop(L, 1);\n"
               "    }\n"
               "    for (const luaL_Reg *f = methods; f->name; f++) {\n"
               "        em_lua_push_binding(L, base, f->func);\n"
               "        lua_setfield(L, methods_idx, f->name);\n"
               "    }\n"
               "    lua_pop(L, 2);\n}\n\n"
               "/* {name, schema, doc} for help(), NULL-terminated. */\n"
               "const char *const em_lua_op_docs[][3] = {\n");
    for (int i = 0; i < s->nops; i++) {
        cg_printf(b, "    { \"%s\", \"", s->ops[i].msg_name); /* help("linalg.norm") */
        cg_c_escape(b, s->ops[i].schema);
        cg_puts(b, "\",\n      \"");
        cg_c_escape(b, s->ops[i].doc);
        cg_puts(b, "\" },\n");
    }
    cg_puts(b, "    { NULL, NULL, NULL }\n};\n\n"
               "/* Ops with backward formulas in derivatives.yaml, and composite ops with a\n"
               " * Tensor argument (their parts differentiate them): gradcheck needs samples\n"
               " * for each. NULL-terminated; declared in em_lua.h. */\n"
               "const char *const em_lua_differentiable_ops[] = {\n");
    for (int i = 0; i < s->nops; i++)
        if (cg_op_has_formulas(&s->ops[i]) ||
            (s->ops[i].composite && has_tensor_arg(&s->ops[i]) && !s->ops[i].lua_bool))
            cg_printf(b, "    \"%s\",\n", s->ops[i].name);
    cg_puts(b, "    NULL\n};\n");
}
