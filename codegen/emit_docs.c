/* emit_docs.c -- writes em_formula_docs.c: for every node type, the op's
 * Tensor arguments in order (the node's outgoing edges) with the formula
 * derivatives.yaml gives each (NULL: no gradient flows there), so that
 * ember.autograd.formulas(name) and trace can show a learner what a node
 * computes. Rows of one node are adjacent; the table ends with a NULL node. */
#include <string.h>

#include "codegen.h"

void cg_emit_formula_docs(cg_buf *b, const cg_schema *s) {
    cg_generated_banner(b, s->ops_path);
    cg_puts(b, "/* em_formula_docs.c -- {node, input, formula} per Tensor argument of every op\n"
               " * with formulas (see codegen/emit_docs.c); declared in lua/em_lua_int.h. */\n"
               "#include <stddef.h>\n\n"
               "const char *const em_lua_formula_docs[][3] = {\n");
    for (int i = 0; i < s->nops; i++) {
        const cg_op *op = &s->ops[i];
        if (!cg_op_has_formulas(op)) continue;
        char display[256], ctype[256];
        cg_node_names(op, display, ctype, sizeof display);
        bool seen = false; /* add and add_ share AddBackward: the first one */
        for (int j = 0; j < i && !seen; j++) {
            if (!cg_op_has_formulas(&s->ops[j])) continue;
            char d2[256], c2[256];
            cg_node_names(&s->ops[j], d2, c2, sizeof d2);
            seen = strcmp(d2, display) == 0;
        }
        if (seen) continue;
        for (int a = 0; a < op->nargs; a++) {
            if (!cg_type_is_tensor(op->args[a].type) && op->args[a].type != CG_TENSORLIST) continue;
            const char *text = NULL;
            for (int f = 0; f < op->deriv->nformulas; f++)
                if (op->deriv->formulas[f].arg == a) text = op->deriv->formulas[f].text;
            cg_printf(b, "    { \"%s\", \"%s\", ", display, op->args[a].name);
            if (text) {
                cg_puts(b, "\"");
                cg_c_escape(b, text);
                cg_puts(b, "\" },\n");
            } else {
                cg_puts(b, "NULL },\n");
            }
        }
    }
    cg_puts(b, "    { NULL, NULL, NULL }\n};\n");
}
