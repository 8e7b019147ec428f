/* emit_man.c -- writes ember-ops.7, the op reference man page (roff, man(7)
 * macros): every op's Lua call forms, schema signature and doc line. */
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

/* Appends s escaped for roff text: backslashes, hyphens, and a leading
 * dot or quote that would read as a request. */
static void roff_escape(cg_buf *b, const char *s) {
    if (*s == '.' || *s == '\'') cg_puts(b, "\\&");
    for (; *s; s++) {
        if (*s == '\\') cg_puts(b, "\\e");
        else if (*s == '-') cg_puts(b, "\\-");
        else if (*s == '\n') cg_puts(b, " ");
        else cg_printf(b, "%c", *s);
    }
}

/* A default as a Lua user writes it. */
static const char *lua_default(const cg_default *d) {
    switch (d->kind) {
    case CG_DEF_NULL: return "nil";
    case CG_DEF_BOOL: return d->b ? "true" : "false";
    case CG_DEF_LIST: return NULL; /* the caller prints {a, b} */
    default: return d->text;
    }
}

static void lua_arg(cg_buf *b, const cg_arg *a) {
    cg_puts(b, a->name);
    if (a->def.kind == CG_DEF_NONE_GIVEN) return;
    cg_puts(b, "=");
    if (a->def.kind == CG_DEF_LIST) {
        cg_puts(b, "{");
        for (int i = 0; i < a->def.nlist; i++) cg_printf(b, "%s%lld", i ? ", " : "", (long long)a->def.list[i]);
        cg_puts(b, "}");
    } else if (a->def.kind == CG_DEF_DTYPE) {
        cg_printf(b, "\"%s\"", lua_default(&a->def));
    } else {
        cg_puts(b, lua_default(&a->def));
    }
}

/* "ember.sum(self, dim=nil, keepdim=false, {dtype=nil})" or, for the method,
 * "x:sum(dim=nil, keepdim=false, {dtype=nil})". */
static void call_form(cg_buf *b, const cg_op *op, bool method, const char *ns) {
    cg_buf t = { 0 };
    cg_printf(&t, "%s%s%s%s(", method ? "x:" : "ember.", method ? "" : ns, !method && *ns ? "." : "",
              method ? op->base : op->lua_name);
    bool first = true;
    for (int i = method ? 1 : 0; i < op->npositional; i++) {
        if (!first) cg_puts(&t, ", ");
        lua_arg(&t, &op->args[i]);
        first = false;
    }
    if (op->npositional < op->nargs) {
        cg_puts(&t, first ? "{" : ", {");
        for (int i = op->npositional; i < op->nargs; i++) {
            if (i > op->npositional) cg_puts(&t, ", ");
            lua_arg(&t, &op->args[i]);
        }
        cg_puts(&t, "}");
    }
    cg_puts(&t, ")");
    roff_escape(b, t.data);
    cg_puts(b, "\n");
    cg_free(t.data);
}

void cg_emit_man(cg_buf *b, const cg_schema *s) {
    cg_puts(b, ".\\\" @generated from ");
    cg_puts(b, s->ops_path);
    cg_puts(b, " by codegen -- do not edit\n");
    cg_puts(b,
            ".TH EMBER\\-OPS 7 \"\" \"ember " "\" \"ember op reference\"\n"
            ".SH NAME\nember\\-ops \\- the tensor operations of ember\n"
            ".SH SYNOPSIS\n.nf\n"
            "ember.NAME(args..., {options})\n"
            "x:NAME(args..., {options})\n"
            ".fi\n"
            ".SH DESCRIPTION\n"
            "Every op below is generated from its entry in\n.IR schema/ops.yaml .\n"
            "An op with a function variant is\n.BR ember.NAME ;\n"
            "one with a method variant is called on a tensor as\n.BR x:NAME ,\n"
            "with\n.I x\nas the first argument\n.RI ( self ).\n"
            "Arguments are given by position or by name in a trailing options table;\n"
            "those shown inside braces are keyword\\-only and only given by name:\n"
            ".BR \"x:sum(2, {keepdim=true})\" .\n"
            "Arguments with a default may be left out or given as nil.\n"
            ".PP\n"
            "Dims and indices are 1\\-based; negative values count from the end\n"
            "(\\-1 is the last). Sizes and dim lists are tables or, as the last\n"
            "positional argument, plain integers:\n"
            ".B ember.zeros(2, 3)\nis\n.BR \"ember.zeros({2, 3})\" .\n"
            "A number given for a Tensor argument becomes a 0\\-dim tensor.\n"
            "dtypes are names such as \"float64\" or constants such as\n.BR ember.float64 .\n"
            ".PP\n"
            "Tensor[] arguments are Lua arrays of tensors (Tensor?[]: nil entries\n"
            "allowed, as PyTorch's None); str{a,b} arguments are\n"
            "strings from the listed set. An op returning (Tensor values, Tensor\n"
            "indices) returns several Lua values:\n"
            ".BR \"local v, i = x:sort()\" ;\n"
            "one returning Tensor[] returns a Lua array. Names written\n"
            ".I name.overload\n"
            "in a signature are overloads of\n"
            ".IR name :\n"
            "the call picks the first whose arguments match the values given.\n"
            ".PP\n"
            "Each entry shows the Lua call forms, the schema signature (with the\n"
            "argument types: Tensor, Tensor[], Tensor?[], Scalar, int, int[], dim, dim[], index,\n"
            "endindex, float, float[], bool, dtype, str{...}; a trailing ? marks an\n"
            "optional argument; Tensor(a!) marks an argument written in place and\n"
            "returned) and what the op does.\n"
            ".SH OPERATIONS\n");
    const char *last = NULL;
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        if (op->group && op->group != last) {
            cg_puts(b, ".SS ");
            roff_escape(b, op->group);
            cg_puts(b, "\n");
        }
        last = op->group;
        cg_puts(b, ".TP\n.B ");
        roff_escape(b, op->name);
        cg_puts(b, "\n.nf\n");
        if (op->v_function && !op->nnamespaces) call_form(b, op, false, "");
        for (int k = 0; op->v_function && k < op->nnamespaces; k++)
            if (!op->ns_shadowed[k]) call_form(b, op, false, op->namespaces[k]); /* Note [Shadowed names] */
        if (op->v_method) call_form(b, op, true, "");
        if (op->metamethod) { /* Note [Metamethods] */
            static const char *const forms[][2] = { { "__add", "a + b" }, { "__sub", "a - b" },
                                                    { "__mul", "a * b" }, { "__div", "a / b" },
                                                    { "__mod", "a % b" }, { "__pow", "a ^ b" },
                                                    { "__idiv", "a // b" }, { "__unm", "-a" },
                                                    { "__band", "a & b" }, { "__bor", "a | b" },
                                                    { "__bxor", "a ~ b" }, { "__shl", "a << b" },
                                                    { "__shr", "a >> b" }, { "__bnot", "~a" } };
            for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++)
                if (strcmp(forms[k][0], op->metamethod) == 0) {
                    roff_escape(b, forms[k][1]);
                    cg_puts(b, "\n");
                }
        }
        cg_puts(b, ".fi\n\\fI");
        roff_escape(b, op->schema);
        cg_puts(b, "\\fR\n.br\n");
        roff_escape(b, op->doc);
        if (op->composite) cg_puts(b, " (Composite: computed with other ops, which give its gradient.)");
        cg_puts(b, "\n");
    }
    cg_puts(b, ".SH SEE ALSO\n.BR ember (1)\n");
}
