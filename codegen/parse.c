/* parse.c -- reads schema/ops.yaml (libyaml) and the func signatures in it
 * into a cg_schema, validates everything, and checks derivatives.yaml.
 *
 * Every error names the file and the 1-based line of the offending node
 * ("schema/ops.yaml:42: unknown type 'Tensr' ...") and exits with status 1:
 * the codegen is a build tool, and a bad schema must stop the build.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "codegen.h"

/* ---- tables (see Note [Schema types] in codegen.h) ---- */

const cg_type_info cg_types[CG_TYPE_COUNT] = {
    [CG_TENSOR]       = { "Tensor",    "em_tensor *",       false },
    [CG_TENSOR_OPT]   = { "Tensor?",   "em_tensor *",       true },
    [CG_SCALAR]       = { "Scalar",    "em_scalar ",        false },
    [CG_SCALAR_OPT]   = { "Scalar?",   "const em_scalar *", true },
    [CG_INT]          = { "int",       "int64_t ",          false },
    [CG_INTLIST]      = { "int[]",     "em_intlist ",       false },
    [CG_DIM]          = { "dim",       "int64_t ",          false },
    [CG_DIM_OPT]      = { "dim?",      "const int64_t *",   true },
    [CG_DIMLIST]      = { "dim[]",     "em_intlist ",       false },
    [CG_DIMLIST_OPT]  = { "dim[]?",    "em_intlist ",       true },
    [CG_INDEX]        = { "index",     "int64_t ",          false },
    [CG_INDEX_OPT]    = { "index?",    "const int64_t *",   true },
    [CG_ENDINDEX_OPT] = { "endindex?", "const int64_t *",   true },
    [CG_FLOAT]        = { "float",     "double ",           false },
    [CG_BOOL]         = { "bool",      "bool ",             false },
    [CG_DTYPE]        = { "dtype",     "em_dtype ",         false },
    [CG_DTYPE_OPT]    = { "dtype?",    "em_dtype ",         true },
    [CG_INT_OPT]      = { "int?",      "const int64_t *",   true },
    [CG_TENSORLIST]   = { "Tensor[]",  "em_tensorlist ",    false },
    [CG_INTLIST_OPT]  = { "int[]?",    "em_intlist ",       true },
    [CG_STR]          = { "str{...}",  "const char *",      false },
    [CG_FLOATLIST_OPT]= { "float[]?",  "em_floatlist ",     true },
    [CG_DEVICE]       = { "Device",    "em_device ",        false },
    [CG_DEVICE_OPT]   = { "Device?",   "em_device ",        true }, /* EM_DEVICE_NONE: absent */
    [CG_GENERATOR_OPT] = { "Generator?", "em_generator *",  true }, /* NULL: the default */
    [CG_TENSORLIST_OPT] = { "Tensor?[]", "em_tensorlist ",  false }, /* elements may be NULL */
};

const char *const cg_key_names[CG_KEY_COUNT] = { "CPU", "CUDA", "PrivateUse1", "Autograd" };
const char *const cg_key_enums[CG_KEY_COUNT] = {
    "EM_KEY_CPU", "EM_KEY_CUDA", "EM_KEY_PRIVATEUSE1", "EM_KEY_AUTOGRAD"
};

const char *const cg_dtype_names[CG_DTYPE_COUNT] = {
    "bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"
};
const char *const cg_dtype_enums[CG_DTYPE_COUNT] = {
    "EM_BOOL", "EM_UINT8", "EM_INT8", "EM_INT32", "EM_INT64", "EM_FLOAT16", "EM_BFLOAT16",
    "EM_FLOAT32", "EM_FLOAT64"
};

bool cg_type_is_ptr_opt(cg_type t) {
    return t == CG_SCALAR_OPT || t == CG_DIM_OPT || t == CG_INDEX_OPT || t == CG_ENDINDEX_OPT ||
           t == CG_INT_OPT;
}
bool cg_type_is_tensor(cg_type t) { return t == CG_TENSOR || t == CG_TENSOR_OPT; }
bool cg_type_is_list(cg_type t) {
    return t == CG_INTLIST || t == CG_DIMLIST || t == CG_DIMLIST_OPT || t == CG_INTLIST_OPT;
}
bool cg_type_is_tlist(cg_type t) { return t == CG_TENSORLIST || t == CG_TENSORLIST_OPT; }
bool cg_type_is_dims(cg_type t) { return t == CG_DIMLIST || t == CG_DIMLIST_OPT; }
bool cg_op_ret_list(const cg_op *op) { return op->nrets == 1 && op->rets[0].list; }
const char *cg_ret_ctype(const cg_op *op) { return cg_op_ret_list(op) ? "em_tensor **" : "em_tensor *"; }

/* Names the generated C uses for its own locals and parameters; an
 * argument may not take them (nor a C keyword). */
static const char *const reserved_names[] = {
    "ks", "op", "key", "fn", "st", "r", "L", "tmp", "opt", "top", "pos", "names",
    "nresults", "nres", "outs", "i", "rv", "nr",
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double",
    "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
    "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
    "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
    "true", "false", "NULL", NULL
};

/* ---- small helpers ---- */

static int mark_line(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

static bool is_ident_start(int c) { return isalpha(c) || c == '_'; }
static bool is_ident_char(int c) { return isalnum(c) || c == '_'; }

static bool is_ident(const char *s) {
    if (!is_ident_start((unsigned char)*s)) return false;
    for (s++; *s; s++)
        if (!is_ident_char((unsigned char)*s)) return false;
    return true;
}

static char *trim_dup(const char *s, size_t n) {
    while (n && isspace((unsigned char)*s)) { s++; n--; }
    while (n && isspace((unsigned char)s[n - 1])) n--;
    return cg_xstrndup(s, n);
}

static const char *scalar_of(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static const char *node_kind(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_SCALAR_NODE: return "a scalar";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_MAPPING_NODE: return "a mapping";
    default: return "nothing";
    }
}

/* The document being parsed: a copy of the caller's (parsing only reads
 * it), so that cg_parse_release can delete it after an error's longjmp
 * (Note [Codegen arena], util.c). */
static yaml_document_t live_doc;
static bool live_doc_set;

void cg_parse_release(void) {
    if (live_doc_set) yaml_document_delete(&live_doc);
    live_doc_set = false;
}

static void done_yaml(yaml_document_t *doc) {
    live_doc_set = false;
    yaml_document_delete(doc);
}

/* Loads path into doc. Malformed YAML exits with the parser's mark; the
 * file and the parser are released before the exit. */
static void load_yaml(const char *path, yaml_document_t *doc) {
    FILE *f = fopen(path, "rb");
    if (!f) cg_die("cannot open %s: %s", path, strerror(errno));
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        fclose(f);
        cg_die("cannot initialise libyaml");
    }
    yaml_parser_set_input_file(&p, f);
    if (!yaml_parser_load(&p, doc)) {
        const yaml_mark_t *m = p.problem_mark.line || p.problem_mark.column ? &p.problem_mark
                                                                            : &p.context_mark;
        int line = (int)m->line + 1;
        char msg[512];
        if (p.context)
            snprintf(msg, sizeof msg, "malformed YAML: %s %s (started at line %d)",
                     p.problem ? p.problem : "error", p.context, (int)p.context_mark.line + 1);
        else
            snprintf(msg, sizeof msg, "malformed YAML: %s", p.problem ? p.problem : "error");
        yaml_parser_delete(&p);
        fclose(f);
        cg_error_at(path, line, "%s", msg);
    }
    yaml_parser_delete(&p);
    fclose(f);
    live_doc = *doc;
    live_doc_set = true;
}

/* The root sequence's items, or none for an empty document / `[]`. */
static void root_items(const char *path, yaml_document_t *doc, yaml_node_item_t **start,
                       yaml_node_item_t **end) {
    yaml_node_t *root = yaml_document_get_root_node(doc);
    *start = *end = NULL;
    if (!root) return;
    if (root->type == YAML_SCALAR_NODE && scalar_of(root)[0] == '\0') return;
    if (root->type != YAML_SEQUENCE_NODE)
        cg_error_at(path, mark_line(root), "expected a list of entries at the top level, found %s",
                    node_kind(root));
    *start = root->data.sequence.items.start;
    *end = root->data.sequence.items.top;
}

static void expect_scalar(const char *path, const yaml_node_t *n, const char *what) {
    if (n->type != YAML_SCALAR_NODE)
        cg_error_at(path, mark_line(n), "%s must be a scalar, found %s", what, node_kind(n));
}

/* ---- group banners: "# ---- name ----" comments (libyaml drops comments) ---- */

typedef struct { int line; char *name; } banner;

static banner *read_banners(const char *path, int *count) {
    FILE *f = fopen(path, "r");
    if (!f) cg_die("cannot open %s: %s", path, strerror(errno));
    banner *v = NULL;
    int n = 0, cap = 0, line = 0;
    char buf[1024];
    while (fgets(buf, sizeof buf, f)) {
        line++;
        const char *s = buf;
        if (strncmp(s, "# ----", 6) != 0) continue;
        s += 6;
        const char *e = strstr(s, "----");
        if (!e) continue;
        char *name = trim_dup(s, (size_t)(e - s));
        if (!*name) { cg_free(name); continue; }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = cg_xrealloc(v, (size_t)cap * sizeof *v);
            if (!v) cg_die("out of memory");
        }
        v[n].line = line;
        v[n].name = name;
        n++;
    }
    fclose(f);
    *count = n;
    return v;
}

/* ---- func signatures ---- */

typedef struct {
    const char *path;
    int line;
    const char *src; /* the whole signature, for messages */
    const char *p;
} sig_lexer;

static void skip_ws(sig_lexer *x) {
    while (isspace((unsigned char)*x->p)) x->p++;
}

__attribute__((noreturn)) static void sig_error(sig_lexer *x, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cg_error_at(x->path, x->line, "%s in func '%s'", msg, x->src);
}

static char *lex_ident(sig_lexer *x, const char *what) {
    skip_ws(x);
    if (!is_ident_start((unsigned char)*x->p))
        sig_error(x, "expected %s at '%.20s'", what, *x->p ? x->p : "end");
    const char *s = x->p;
    while (is_ident_char((unsigned char)*x->p)) x->p++;
    return cg_xstrndup(s, (size_t)(x->p - s));
}

static bool lex_accept(sig_lexer *x, const char *tok) {
    skip_ws(x);
    size_t n = strlen(tok);
    if (strncmp(x->p, tok, n) != 0) return false;
    x->p += n;
    return true;
}

static void lex_expect(sig_lexer *x, const char *tok) {
    if (!lex_accept(x, tok)) sig_error(x, "expected '%s' at '%.20s'", tok, *x->p ? x->p : "end");
}

static __attribute__((noreturn)) void unknown_type(sig_lexer *x, const char *spelled) {
    char known[512] = "";
    for (int t = 0; t < CG_TYPE_COUNT; t++) {
        if (t) strcat(known, ", ");
        strcat(known, cg_types[t].spelling);
    }
    sig_error(x, "unknown type '%s' (known types: %s)", spelled, known);
}

/* Parses the value set of str{a,b,c} (after "str") into *choices; a plain
 * `str` (no set) takes any string: *choices NULL, *n 0. */
static void lex_choices(sig_lexer *x, char ***choices, int *n) {
    if (*x->p != '{') { /* plain `str`: any string (einsum's equation) */
        *choices = NULL;
        *n = 0;
        return;
    }
    x->p++;
    *choices = cg_xmalloc(sizeof(char *) * 32);
    *n = 0;
    for (;;) {
        if (*n == 32) sig_error(x, "a str type may list at most 32 values");
        char *v = lex_ident(x, "a value of the str type (an identifier)");
        for (int i = 0; i < *n; i++)
            if (strcmp((*choices)[i], v) == 0) sig_error(x, "str value '%s' listed twice", v);
        (*choices)[(*n)++] = v;
        skip_ws(x);
        if (*x->p == '}') { x->p++; break; }
        if (*x->p != ',') sig_error(x, "expected ',' or '}' in the values of a str type at '%.20s'", x->p);
        x->p++;
    }
}

/* Parses "Tensor(a!)?" style types: base, optional [], optional alias
 * annotation (Tensor only), optional ?. `ScalarType` is another spelling of
 * dtype (PyTorch's); `str{a,b}` is a string from a closed set, `str` any string (the caller
 * reads the set with lex_choices). */
static cg_type lex_type(sig_lexer *x, char **alias, bool *alias_write) {
    char *base = lex_ident(x, "a type");
    if (strcmp(base, "str") == 0) {
        cg_free(base);
        *alias = NULL;
        *alias_write = false;
        return CG_STR;
    }
    if (strcmp(base, "ScalarType") == 0) {
        cg_free(base);
        base = cg_xstrdup("dtype");
    }
    char spelled[128];
    bool list = false, opt = false;
    *alias = NULL;
    *alias_write = false;
    if (strncmp(x->p, "[]", 2) == 0) {
        list = true;
        x->p += 2;
    } else if (*x->p == '[') {
        sig_error(x, "fixed-size lists like '%s[N]' are not supported; use '%s[]'", base, base);
    }
    if (*x->p == '(') {
        x->p++;
        *alias = lex_ident(x, "an alias name");
        if (lex_accept(x, "!")) *alias_write = true;
        lex_expect(x, ")");
    }
    if (*x->p == '?') {
        opt = true;
        x->p++;
    }
    if (opt && !list && strncmp(x->p, "[]", 2) == 0) { /* Tensor?[]: a list of optionals */
        x->p += 2;
        snprintf(spelled, sizeof spelled, "%s?[]", base);
    } else {
        snprintf(spelled, sizeof spelled, "%s%s%s", base, list ? "[]" : "", opt ? "?" : "");
    }
    cg_free(base);
    for (int t = 0; t < CG_TYPE_COUNT; t++) {
        if (strcmp(cg_types[t].spelling, spelled) == 0) {
            if (*alias && !cg_type_is_tensor((cg_type)t))
                sig_error(x, "alias annotation on non-Tensor type '%s'", spelled);
            return (cg_type)t;
        }
    }
    unknown_type(x, spelled);
}

static int dtype_index(const char *s) {
    for (int i = 0; i < CG_DTYPE_COUNT; i++)
        if (strcmp(cg_dtype_names[i], s) == 0) return i;
    return -1;
}

static bool parse_int(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

static bool parse_float(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* Classifies a default's text, then checks that it fits the type. */
static void parse_default(sig_lexer *x, cg_arg *a, char *text) {
    cg_default *d = &a->def;
    d->text = text;
    if (strcmp(text, "None") == 0) {
        d->kind = CG_DEF_NULL;
    } else if (strcmp(text, "True") == 0 || strcmp(text, "False") == 0) {
        d->kind = CG_DEF_BOOL;
        d->b = text[0] == 'T';
    } else if (parse_int(text, &d->i)) {
        d->kind = CG_DEF_INT;
        d->d = (double)d->i;
    } else if (parse_float(text, &d->d)) {
        d->kind = CG_DEF_FLOAT;
    } else if (text[0] == '[') {
        size_t n = strlen(text);
        if (text[n - 1] != ']') sig_error(x, "bad list default '%s' for argument '%s'", text, a->name);
        d->kind = CG_DEF_LIST;
        d->list = cg_xmalloc(CG_MAX_ARGS * sizeof *d->list);
        char *inner = trim_dup(text + 1, n - 2);
        char *save = NULL;
        for (char *tok = *inner ? strtok_r(inner, ",", &save) : NULL; tok;
             tok = strtok_r(NULL, ",", &save)) {
            char *item = trim_dup(tok, strlen(tok));
            if (d->nlist == CG_MAX_ARGS || !parse_int(item, &d->list[d->nlist]))
                sig_error(x, "bad list default '%s' for argument '%s' (integers expected)", text,
                          a->name);
            d->nlist++;
            cg_free(item);
        }
        cg_free(inner);
    } else if (text[0] == '"') {
        size_t n = strlen(text);
        if (n < 2 || text[n - 1] != '"') sig_error(x, "bad string default %s for argument '%s'", text, a->name);
        d->kind = CG_DEF_STR;
        d->str = cg_xstrndup(text + 1, n - 2);
    } else if (dtype_index(text) >= 0) {
        d->kind = CG_DEF_DTYPE;
        d->dtype = dtype_index(text);
    } else {
        sig_error(x, "cannot read default '%s' of argument '%s'", text, a->name);
    }

    /* does it fit the type? */
    bool ok;
    const char *want;
    switch (a->type) {
    case CG_TENSOR:
        ok = false; want = "no default (a Tensor argument is required; use Tensor? for None)"; break;
    case CG_TENSOR_OPT:
        ok = d->kind == CG_DEF_NULL; want = "None"; break;
    case CG_SCALAR:
        ok = d->kind == CG_DEF_INT || d->kind == CG_DEF_FLOAT || d->kind == CG_DEF_BOOL;
        want = "a number, True or False"; break;
    case CG_SCALAR_OPT:
        ok = d->kind == CG_DEF_NULL || d->kind == CG_DEF_INT || d->kind == CG_DEF_FLOAT ||
             d->kind == CG_DEF_BOOL;
        want = "None, a number, True or False"; break;
    case CG_INT:
        ok = d->kind == CG_DEF_INT; want = "an integer"; break;
    case CG_INTLIST: case CG_DIMLIST:
        ok = d->kind == CG_DEF_LIST; want = "a list of integers like [1, 2]"; break;
    case CG_DIMLIST_OPT: case CG_INTLIST_OPT:
        ok = d->kind == CG_DEF_NULL || d->kind == CG_DEF_LIST;
        want = "None or a list of integers"; break;
    case CG_DIM: case CG_INDEX:
        ok = d->kind == CG_DEF_INT && d->i != 0;
        want = "a non-zero integer (1-based as in Lua, negative from the end)"; break;
    case CG_INT_OPT:
        ok = d->kind == CG_DEF_NULL || d->kind == CG_DEF_INT;
        want = "None or an integer"; break;
    case CG_DIM_OPT: case CG_INDEX_OPT: case CG_ENDINDEX_OPT:
        ok = d->kind == CG_DEF_NULL || (d->kind == CG_DEF_INT && d->i != 0);
        want = "None or a non-zero integer (1-based as in Lua)"; break;
    case CG_FLOAT:
        ok = d->kind == CG_DEF_INT || d->kind == CG_DEF_FLOAT; want = "a number"; break;
    case CG_BOOL:
        ok = d->kind == CG_DEF_BOOL; want = "True or False"; break;
    case CG_DTYPE:
        ok = d->kind == CG_DEF_DTYPE; want = "a dtype name like float32"; break;
    case CG_DTYPE_OPT:
        ok = d->kind == CG_DEF_NULL || d->kind == CG_DEF_DTYPE;
        want = "None or a dtype name like float32"; break;
    case CG_FLOATLIST_OPT:
        ok = d->kind == CG_DEF_NULL; want = "None"; break;
    case CG_STR: {
        ok = false;
        for (int i = 0; d->kind == CG_DEF_STR && i < a->nchoices; i++) ok |= strcmp(d->str, a->choices[i]) == 0;
        if (!a->nchoices) ok = d->kind == CG_DEF_STR; /* plain str: any quoted string */
        want = "one of the str type's values, quoted (\"mean\")";
        break;
    }
    case CG_DEVICE_OPT: case CG_GENERATOR_OPT:
        ok = d->kind == CG_DEF_NULL; want = "None"; break;
    case CG_DEVICE:
        ok = false; want = "no default (a Device argument is required; use Device? for None)"; break;
    default:
        ok = false; want = "?"; break;
    }
    if (!ok)
        sig_error(x, "bad default '%s' for argument '%s' of type %s: expected %s", text, a->name,
                  cg_types[a->type].spelling, want);
    if (d->kind == CG_DEF_LIST && a->type == CG_DIMLIST)
        for (int i = 0; i < d->nlist; i++)
            if (d->list[i] == 0)
                sig_error(x, "bad default '%s' for argument '%s': dims are 1-based, 0 is not a dim",
                          text, a->name);
}

/* The default's text: up to the next ',' or ')' outside brackets. */
static char *lex_default(sig_lexer *x) {
    skip_ws(x);
    const char *s = x->p;
    int depth = 0;
    for (; *x->p; x->p++) {
        char c = *x->p;
        if (c == '[') depth++;
        else if (c == ']') depth--;
        else if ((c == ',' || c == ')') && depth <= 0) break;
    }
    char *t = trim_dup(s, (size_t)(x->p - s));
    if (!*t) sig_error(x, "empty default");
    return t;
}

static bool is_reserved(const char *name) {
    for (int i = 0; reserved_names[i]; i++)
        if (strcmp(reserved_names[i], name) == 0) return true;
    return false;
}

/* Parses the return part after "->": `Tensor`, `Tensor(a!)`, `Tensor[]` or
 * `(Tensor name, Tensor name, ...)` (see Note [Several results]). */
static void parse_returns(sig_lexer *x, cg_op *op) {
    char *alias;
    bool write;
    skip_ws(x);
    if (lex_accept(x, "(")) {
        for (;;) {
            if (op->nrets == CG_MAX_RETS)
                sig_error(x, "more than %d results (the boxed stack's size)", CG_MAX_RETS);
            skip_ws(x);
            const char *at = x->p;
            cg_type t = lex_type(x, &alias, &write);
            if (t != CG_TENSOR || alias)
                sig_error(x, "result %d is '%.*s': each result of a tuple must be a plain Tensor",
                          op->nrets + 1, (int)(x->p - at), at);
            cg_ret *r = &op->rets[op->nrets];
            r->name = lex_ident(x, "a result name");
            if (is_reserved(r->name))
                sig_error(x, "result name '%s' is reserved (a C keyword or a name the generated "
                          "code uses)", r->name);
            for (int i = 0; i < op->nargs; i++)
                if (strcmp(op->args[i].name, r->name) == 0)
                    sig_error(x, "result '%s' has the name of an argument", r->name);
            for (int i = 0; i < op->nrets; i++)
                if (strcmp(op->rets[i].name, r->name) == 0)
                    sig_error(x, "result '%s' given twice", r->name);
            op->nrets++;
            if (lex_accept(x, ")")) break;
            lex_expect(x, ",");
        }
        if (op->nrets < 2)
            sig_error(x, "a tuple of results needs at least two (write '-> Tensor' for one)");
        return;
    }
    const char *ret_at = x->p;
    cg_type rt = lex_type(x, &alias, &write);
    if (rt == CG_TENSORLIST) {
        op->nrets = 1;
        op->rets[0].list = true;
        return;
    }
    if (rt != CG_TENSOR) {
        skip_ws(x);
        sig_error(x, "unsupported return type '%.*s' (Tensor, Tensor[] or a tuple "
                  "(Tensor a, Tensor b) are supported)", (int)(x->p - ret_at), ret_at);
    }
    op->nrets = 1;
    op->ret_alias = alias;
    op->ret_alias_write = write;
}

/* Parses a func string into op (name, overload, args, results). */
static void parse_signature(const char *path, int line, const char *func, cg_op *op) {
    sig_lexer x = { path, line, func, func };
    op->base = lex_ident(&x, "the op name");
    if (is_reserved(op->base)) sig_error(&x, "op name '%s' is reserved", op->base);
    static const char *const runtime_types[] = { "stack", "tensor", "storage", "scalar", "ivalue",
                                                 "intlist", "tensorlist", "device", "dtype", "keyset",
                                                 "status", "version", NULL };
    for (int i = 0; runtime_types[i]; i++)
        if (strcmp(op->base, runtime_types[i]) == 0 && *x.p != '.')
            sig_error(&x, "op name '%s' would make C function em_%s, which is a runtime type; give it "
                      "an overload name ('%s.list') so its C name differs (the Lua name stays '%s')",
                      op->base, op->base, op->base, op->base);
    if (*x.p == '.') {
        x.p++;
        if (!is_ident_start((unsigned char)*x.p))
            sig_error(&x, "expected an overload name after '%s.'", op->base);
        op->overload = lex_ident(&x, "an overload name");
        size_t n = strlen(op->base) + strlen(op->overload) + 2;
        op->name = cg_xmalloc(n);
        snprintf(op->name, n, "%s_%s", op->base, op->overload);
    } else {
        op->name = cg_xstrdup(op->base);
    }
    lex_expect(&x, "(");
    bool kwonly = false, seen_default = false;
    skip_ws(&x);
    if (!lex_accept(&x, ")")) {
        for (;;) {
            if (lex_accept(&x, "*")) {
                if (kwonly) sig_error(&x, "'*' given twice");
                kwonly = true;
                lex_expect(&x, ",");
                continue;
            }
            if (op->nargs == CG_MAX_ARGS)
                sig_error(&x, "more than %d arguments (the boxed stack's size)", CG_MAX_ARGS);
            cg_arg *a = &op->args[op->nargs];
            a->type = lex_type(&x, &a->alias, &a->alias_write);
            if (a->type == CG_STR) lex_choices(&x, &a->choices, &a->nchoices);
            a->name = lex_ident(&x, "an argument name");
            a->kwonly = kwonly;
            if (is_reserved(a->name))
                sig_error(&x, "argument name '%s' is reserved (a C keyword or a name the generated "
                          "code uses)", a->name);
            for (int i = 0; i < op->nargs; i++)
                if (strcmp(op->args[i].name, a->name) == 0)
                    sig_error(&x, "argument '%s' given twice", a->name);
            a->def.kind = CG_DEF_NONE_GIVEN;
            if (lex_accept(&x, "=")) {
                if (cg_type_is_tlist(a->type))
                    sig_error(&x, "argument '%s' of type %s cannot have a default", a->name,
                              cg_types[a->type].spelling);
                parse_default(&x, a, lex_default(&x));
                if (!kwonly) seen_default = true;
            } else if (!kwonly && seen_default) {
                sig_error(&x, "argument '%s' without a default follows one with a default", a->name);
            }
            op->nargs++;
            if (!kwonly) op->npositional++;
            if (lex_accept(&x, ")")) break;
            lex_expect(&x, ",");
        }
    }
    if (kwonly && op->npositional == op->nargs) sig_error(&x, "'*' must be followed by an argument");
    int nlists = 0, ntensors = 0;
    for (int i = 0; i < op->nargs; i++) {
        nlists += op->args[i].type == CG_TENSORLIST;
        ntensors += cg_type_is_tensor(op->args[i].type);
    }
    int noptlists = 0;
    for (int i = 0; i < op->nargs; i++) noptlists += op->args[i].type == CG_TENSORLIST_OPT;
    if (nlists > 1 || (nlists && (ntensors || noptlists)))
        sig_error(&x, "an op with a Tensor[] argument may have no other Tensor or Tensor[] "
                  "argument (its autograd edges are the list's elements)");
    if (noptlists > 1) sig_error(&x, "an op may have at most one Tensor?[] argument");
    /* a Tensor?[] op must be composite: checked once its kernels are read */
    lex_expect(&x, "->");
    parse_returns(&x, op);
    skip_ws(&x);
    if (*x.p) sig_error(&x, "unexpected '%s' after the return type", x.p);
    const char *alias = op->ret_alias;
    bool write = op->ret_alias_write;
    if (alias) {
        bool found = false;
        for (int i = 0; i < op->nargs; i++)
            if (op->args[i].alias && strcmp(op->args[i].alias, alias) == 0) {
                found = true;
                if (op->args[i].alias_write != write)
                    sig_error(&x, "return alias '%s%s' does not match argument '%s'", alias,
                              write ? "!" : "", op->args[i].name);
            }
        if (!found) sig_error(&x, "return alias '%s' names no argument", alias);
    }
}

/* ---- op entries ---- */

static void parse_variants(const char *path, yaml_document_t *doc, yaml_node_t *n, cg_op *op) {
    char *items[8];
    int nitems = 0;
    int line = mark_line(n);
    if (n->type == YAML_SCALAR_NODE) {
        char *s = cg_xstrdup(scalar_of(n)), *save = NULL;
        for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (nitems == 8) cg_error_at(path, line, "too many variants");
            items[nitems++] = trim_dup(tok, strlen(tok));
        }
        cg_free(s);
    } else if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            yaml_node_t *v = yaml_document_get_node(doc, *it);
            expect_scalar(path, v, "a variant");
            if (nitems == 8) cg_error_at(path, line, "too many variants");
            items[nitems++] = cg_xstrdup(scalar_of(v));
        }
    } else {
        cg_error_at(path, line, "variants must be 'function', 'method' or both, found %s",
                    node_kind(n));
    }
    if (!nitems) cg_error_at(path, line, "variants is empty (expected function, method or both)");
    for (int i = 0; i < nitems; i++) {
        if (strcmp(items[i], "function") == 0) op->v_function = true;
        else if (strcmp(items[i], "method") == 0) op->v_method = true;
        else
            cg_error_at(path, line, "unknown variant '%s' (known variants: function, method)",
                        items[i]);
        cg_free(items[i]);
    }
}

/* kernels: {KEY: fn, ...}. Default sets every backend key; an explicit
 * backend key overrides Default for that key. */
static void parse_kernels(const char *path, yaml_document_t *doc, yaml_node_t *n, cg_op *op) {
    if (n->type != YAML_MAPPING_NODE)
        cg_error_at(path, mark_line(n), "kernels must be a mapping like {CPU: em_cpu_%s}, found %s",
                    op->name, node_kind(n));
    bool explicit_key[CG_KEY_COUNT] = { false };
    bool seen_default = false;
    int count = 0;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(doc, pr->value);
        expect_scalar(path, k, "a dispatch key");
        expect_scalar(path, v, "a kernel name");
        const char *key = scalar_of(k), *fn = scalar_of(v);
        if (!is_ident(fn))
            cg_error_at(path, mark_line(v), "kernel '%s' for key %s is not a C identifier", fn, key);
        count++;
        if (strcmp(key, "Composite") == 0) { /* Note [Composite ops] */
            if (n->data.mapping.pairs.top - n->data.mapping.pairs.start != 1)
                cg_error_at(path, mark_line(k), "op '%s': a Composite kernel is the op's only "
                            "kernel (it runs at every key)", op->name);
            for (int i = 0; i < CG_KEY_COUNT; i++) op->kernel[i] = cg_xstrdup(fn);
            op->composite = true;
            continue;
        }
        if (strcmp(key, "Default") == 0) {
            if (seen_default) cg_error_at(path, mark_line(k), "dispatch key Default given twice");
            seen_default = true;
            for (int i = 0; i <= CG_KEY_PRIVATEUSE1; i++)
                if (!explicit_key[i]) op->kernel[i] = cg_xstrdup(fn);
            continue;
        }
        int idx = -1;
        for (int i = 0; i < CG_KEY_COUNT; i++)
            if (strcmp(cg_key_names[i], key) == 0) idx = i;
        if (idx < 0)
            cg_error_at(path, mark_line(k),
                        "unknown dispatch key '%s' (known keys: CPU, CUDA, PrivateUse1, Autograd, "
                        "Default, Composite)", key);
        if (explicit_key[idx]) cg_error_at(path, mark_line(k), "dispatch key %s given twice", key);
        explicit_key[idx] = true;
        cg_free(op->kernel[idx]);
        op->kernel[idx] = cg_xstrdup(fn);
    }
    if (!count) cg_error_at(path, mark_line(n), "op '%s': kernels is empty", op->name);
}

/* namespace: nn.functional, or a list [ember, nn.functional]: the module
 * tables the function variant is set in ("ember" is the module itself,
 * stored as ""); without the key the function lives in ember only. */
static void parse_namespaces(const char *path, yaml_document_t *doc, yaml_node_t *n, cg_op *op) {
    yaml_node_t *one[1] = { n };
    yaml_node_t **items = one;
    int count = 1;
    yaml_node_t *buf[CG_MAX_NAMESPACES + 1];
    if (n->type == YAML_SEQUENCE_NODE) {
        count = 0;
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            if (count == CG_MAX_NAMESPACES)
                cg_error_at(path, mark_line(n), "op '%s': more than %d namespaces", op->name,
                            CG_MAX_NAMESPACES);
            buf[count++] = yaml_document_get_node(doc, *it);
        }
        items = buf;
    }
    if (!count) cg_error_at(path, mark_line(n), "op '%s': namespace list is empty", op->name);
    if (!op->v_function)
        cg_error_at(path, mark_line(n), "op '%s': a namespace places the function variant, but the "
                    "op has none", op->name);
    for (int i = 0; i < count; i++) {
        expect_scalar(path, items[i], "a namespace");
        const char *name = scalar_of(items[i]);
        /* dotted Lua identifiers: nn.functional */
        bool ok = *name != 0;
        for (const char *p = name; *p && ok; p++) {
            bool start = p == name || p[-1] == '.';
            ok = *p == '.' ? !start && p[1] != 0
                           : (*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                              (!start && *p >= '0' && *p <= '9'));
        }
        if (!ok)
            cg_error_at(path, mark_line(items[i]), "op '%s': namespace '%s' is not a dotted Lua name "
                        "like nn.functional", op->name, name);
        op->namespaces[op->nnamespaces++] = cg_xstrdup(strcmp(name, "ember") == 0 ? "" : name);
    }
}

/* metamethod: __add. Note [Metamethods]: Lua's arithmetic on tensors calls
 * the op through a generated entry (mm_NAME in em_lua_ops.c). A binary
 * metamethod's op takes two positional Tensors first, a unary one (__unm,
 * __bnot: Lua passes the operand twice) one; every later argument must be a Scalar with a default, and the op
 * returns one Tensor. */
static void parse_metamethod(const char *path, yaml_node_t *n, cg_op *op) {
    static const char *const known[] = { "__add", "__sub", "__mul", "__div", "__mod", "__pow",
                                         "__idiv", "__unm", "__band", "__bor", "__bxor", "__shl",
                                         "__shr", "__bnot", NULL };
    expect_scalar(path, n, "a metamethod name");
    const char *name = scalar_of(n);
    bool ok = false;
    for (int i = 0; known[i]; i++) ok = ok || strcmp(known[i], name) == 0;
    if (!ok)
        cg_error_at(path, mark_line(n), "op '%s': unknown metamethod '%s' (known: __add, __sub, __mul, "
                    "__div, __mod, __pow, __idiv, __unm, __band, __bor, __bxor, __shl, __shr, __bnot)", op->name, name);
    int ntensors = strcmp(name, "__unm") == 0 || strcmp(name, "__bnot") == 0 ? 1 : 2;
    bool fits = op->nargs >= ntensors && op->nrets == 1 && !cg_op_ret_list(op);
    for (int i = 0; fits && i < op->nargs; i++) {
        const cg_arg *a = &op->args[i];
        fits = i < ntensors ? a->type == CG_TENSOR && !a->kwonly && !a->alias
                            : a->type == CG_SCALAR && a->def.kind != CG_DEF_NONE_GIVEN;
    }
    if (!fits)
        cg_error_at(path, mark_line(n), "op '%s' cannot be metamethod %s: it needs %d positional "
                    "Tensor argument%s first, only defaulted Scalars after, and one Tensor result",
                    op->name, name, ntensors, ntensors > 1 ? "s" : "");
    op->metamethod = cg_xstrdup(name);
}

static void parse_op(const char *path, yaml_document_t *doc, yaml_node_t *n, cg_op *op) {
    op->line = mark_line(n);
    if (n->type != YAML_MAPPING_NODE)
        cg_error_at(path, op->line, "an op entry must be a mapping with func, variants, kernels "
                    "and doc, found %s", node_kind(n));
    yaml_node_t *func = NULL, *variants = NULL, *kernels = NULL, *docn = NULL, *ns = NULL, *mm = NULL;
    yaml_node_t *structured = NULL, *delegate = NULL, *lua_result = NULL;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(doc, pr->value);
        expect_scalar(path, k, "a key");
        const char *key = scalar_of(k);
        yaml_node_t **slot = strcmp(key, "func") == 0       ? &func
                             : strcmp(key, "variants") == 0 ? &variants
                             : strcmp(key, "kernels") == 0  ? &kernels
                             : strcmp(key, "doc") == 0      ? &docn
                             : strcmp(key, "namespace") == 0 ? &ns
                             : strcmp(key, "metamethod") == 0 ? &mm
                             : strcmp(key, "structured") == 0 ? &structured
                             : strcmp(key, "structured_delegate") == 0 ? &delegate
                             : strcmp(key, "lua_result") == 0 ? &lua_result
                                                            : NULL;
        if (!slot)
            cg_error_at(path, mark_line(k), "unknown key '%s' (known keys: func, variants, kernels, "
                        "namespace, metamethod, structured, structured_delegate, lua_result, doc)", key);
        if (*slot) cg_error_at(path, mark_line(k), "key '%s' given twice", key);
        *slot = v;
    }
    if (!func) cg_error_at(path, op->line, "op entry without 'func'");
    expect_scalar(path, func, "func");
    op->schema = trim_dup(scalar_of(func), strlen(scalar_of(func)));
    parse_signature(path, mark_line(func), op->schema, op);
    op->delegate = -1;
    if (structured && delegate)
        cg_error_at(path, mark_line(delegate), "op '%s' has both 'structured' and 'structured_delegate'; "
                    "the out= op of a family is structured, the others delegate to it", op->name);
    if (delegate) {
        expect_scalar(path, delegate, "structured_delegate");
        op->delegate_name = cg_xstrdup(scalar_of(delegate));
        op->structured_line = mark_line(delegate);
        if (kernels)
            cg_error_at(path, mark_line(kernels), "op '%s' has 'structured_delegate' and 'kernels'; its "
                        "kernels are generated from %s's meta and impls", op->name, op->delegate_name);
    } else if (!kernels) {
        cg_error_at(path, op->line, "op '%s' has no 'kernels'", op->name);
    }
    if (structured) {
        expect_scalar(path, structured, "structured");
        op->meta = cg_xstrdup(scalar_of(structured));
        op->structured_line = mark_line(structured);
    }
    if (!docn) cg_error_at(path, op->line, "op '%s' has no 'doc'", op->name);
    expect_scalar(path, docn, "doc");
    op->doc = trim_dup(scalar_of(docn), strlen(scalar_of(docn)));
    if (!*op->doc) cg_error_at(path, mark_line(docn), "op '%s' has an empty 'doc'", op->name);
    if (variants) parse_variants(path, doc, variants, op);
    else op->v_function = true;
    if (kernels) parse_kernels(path, doc, kernels, op);
    for (int i = 0; i < op->nargs; i++) /* Note [Tensor lists] */
        if (op->args[i].type == CG_TENSORLIST_OPT && !op->composite)
            cg_error_at(path, mark_line(func), "op '%s': a Tensor?[] argument needs a Composite kernel "
                        "(its elements are no autograd inputs)", op->name);
    if (ns) parse_namespaces(path, doc, ns, op);
    op->lua_name = op->msg_name = op->base; /* Note [Namespace prefixes] (codegen.h) */
    if (op->nnamespaces == 1 && *op->namespaces[0]) {
        const char *last = strrchr(op->namespaces[0], '.');
        last = last ? last + 1 : op->namespaces[0];
        size_t nl = strlen(last);
        if (strncmp(op->base, last, nl) == 0 && op->base[nl] == '_' && op->base[nl + 1]) {
            if (op->v_method)
                cg_error_at(path, mark_line(func), "op '%s': a name with its namespace's prefix "
                            "'%s_' has no method variant", op->name, last);
            op->lua_name = cg_xstrdup(op->base + nl + 1);
            size_t n = strlen(op->namespaces[0]) + strlen(op->lua_name) + 2;
            op->msg_name = cg_xmalloc(n);
            snprintf(op->msg_name, n, "%s.%s", op->namespaces[0], op->lua_name);
        }
    }
    if (mm) parse_metamethod(path, mm, op);
    if (lua_result) { /* Note [Boolean results] */
        expect_scalar(path, lua_result, "lua_result");
        if (strcmp(scalar_of(lua_result), "boolean") != 0)
            cg_error_at(path, mark_line(lua_result), "op '%s': lua_result must be 'boolean'", op->name);
        if (op->nrets != 1 || cg_op_ret_list(op) || op->ret_alias_write)
            cg_error_at(path, mark_line(lua_result), "op '%s': lua_result: boolean needs one Tensor result "
                        "(a 0-dim bool tensor in C)", op->name);
        op->lua_bool = true;
    }
    /* the receiver is the first argument, or a positional Tensor named self
     * (polygamma(int n, Tensor self): x:polygamma(n), as in PyTorch) */
    bool self_arg = false;
    for (int i = 0; i < op->nargs; i++)
        self_arg = self_arg || (!op->args[i].kwonly && op->args[i].type == CG_TENSOR &&
                                strcmp(op->args[i].name, "self") == 0);
    if (op->v_method && !self_arg && (op->nargs == 0 || op->args[0].type != CG_TENSOR || op->args[0].kwonly))
        cg_error_at(path, mark_line(func), "op '%s' has a method variant but its first argument "
                    "is not a positional Tensor (nor has it one named self)", op->name);
}

/* ---- structured families (Note [Structured kernels]) ---- */

static bool is_c_ident(const char *p) {
    if (!*p || (*p >= '0' && *p <= '9')) return false;
    for (; *p; p++)
        if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            return false;
    return true;
}

/* The generated wrapper of op at backend key k: em_cpu_add_out. */
static char *wrapper_name(const cg_op *op, int k) {
    cg_buf b = { 0 };
    cg_puts(&b, "em_");
    for (const char *p = cg_key_names[k]; *p; p++)
        cg_printf(&b, "%c", *p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    cg_printf(&b, "_%s", op->name);
    return b.data;
}

/* The out= op: `name.out(..., *, Tensor(a!) out) -> Tensor(a!)`, with impls
 * at backend keys only. Its kernel slots become the generated wrappers. */
static void check_structured_out(const char *path, cg_op *op) {
    int line = op->structured_line;
    if (!is_c_ident(op->meta))
        cg_error_at(path, line, "op '%s': structured names its meta function, a C name like em_meta_%s; "
                    "got '%s'", op->name, op->base, op->meta);
    const cg_arg *last = op->nargs ? &op->args[op->nargs - 1] : NULL;
    if (!last || last->type != CG_TENSOR || !last->kwonly || !last->alias_write || op->nrets != 1 ||
        cg_op_ret_list(op) || !op->ret_alias_write || strcmp(op->ret_alias, last->alias) != 0)
        cg_error_at(path, line, "structured op '%s' must be an out= overload: its last argument a keyword-only "
                    "Tensor(a!) out, returning Tensor(a!)", op->name);
    for (int i = 0; i < op->nargs - 1; i++)
        if (op->args[i].alias_write)
            cg_error_at(path, line, "structured op '%s' writes argument '%s'; only its out argument may be "
                        "written", op->name, op->args[i].name);
    if (op->composite || op->kernel[CG_KEY_AUTOGRAD])
        cg_error_at(path, line, "structured op '%s' names backend impls only (no Composite or Autograd "
                    "kernel)", op->name);
    op->out_arg = op->nargs - 1;
    bool any = false;
    for (int k = 0; k < CG_KEY_COUNT; k++) {
        if (!op->kernel[k]) continue;
        char *w = wrapper_name(op, k);
        if (strcmp(w, op->kernel[k]) == 0)
            cg_error_at(path, line, "structured op '%s': impl '%s' has the name of the generated %s kernel; "
                        "name the impl differently (em_%s_impl)", op->name, w, cg_key_names[k], op->base);
        op->impl[k] = op->kernel[k];
        op->kernel[k] = w;
        any = true;
    }
    if (!any) cg_error_at(path, line, "structured op '%s' names no backend impl in kernels", op->name);
}

/* A delegating op: its arguments are the out= op's without out (same
 * names, types, defaults and keyword-only split); in-place (name_) writes
 * self and returns it, the functional form writes nothing. */
static void check_delegate(const char *path, cg_schema *s, cg_op *op) {
    int line = op->structured_line, target = -1;
    for (int j = 0; j < s->nops; j++) {
        const cg_op *t = &s->ops[j];
        size_t nb = strlen(t->base);
        if (strncmp(op->delegate_name, t->base, nb) == 0 &&
            ((t->overload && op->delegate_name[nb] == '.' && strcmp(op->delegate_name + nb + 1, t->overload) == 0) ||
             (!t->overload && op->delegate_name[nb] == 0)))
            target = j;
    }
    if (target < 0)
        cg_error_at(path, line, "op '%s': structured_delegate '%s' names no op", op->name, op->delegate_name);
    const cg_op *t = &s->ops[target];
    if (!t->meta)
        cg_error_at(path, line, "op '%s': structured_delegate '%s' is not structured (it has no "
                    "'structured: em_meta_...' key)", op->name, op->delegate_name);
    bool same = op->nargs == t->nargs - 1;
    for (int i = 0; same && i < op->nargs; i++) {
        const cg_arg *a = &op->args[i], *b = &t->args[i];
        same = strcmp(a->name, b->name) == 0 && a->type == b->type && a->kwonly == b->kwonly &&
               a->def.kind == b->def.kind &&
               (!a->def.text || !b->def.text || strcmp(a->def.text, b->def.text) == 0);
    }
    if (!same)
        cg_error_at(path, line, "op '%s' must take the arguments of '%s' without out (same names, types and "
                    "defaults)", op->name, op->delegate_name);
    bool inplace = op->ret_alias_write;
    if (inplace && (!op->nargs || !op->args[0].alias_write || op->nrets != 1))
        cg_error_at(path, line, "in-place op '%s' must write its first argument and return it", op->name);
    for (int i = inplace ? 1 : 0; i < op->nargs; i++)
        if (op->args[i].alias_write)
            cg_error_at(path, line, "op '%s' writes argument '%s'; a delegate writes only self (in-place)",
                        op->name, op->args[i].name);
    if (op->nrets != 1 || cg_op_ret_list(op))
        cg_error_at(path, line, "op '%s' must return one Tensor like '%s'", op->name, op->delegate_name);
    op->delegate = target;
    for (int k = 0; k < CG_KEY_COUNT; k++)
        if (t->impl[k]) op->kernel[k] = wrapper_name(op, k);
}

static void check_structured(cg_schema *s) {
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].meta) check_structured_out(s->ops[i].path, &s->ops[i]);
        else s->ops[i].out_arg = -1;
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].delegate_name) check_delegate(s->ops[i].path, s, &s->ops[i]);
}

/* Two ops naming one kernel must give it the same C signature. */
static void check_kernel_signatures(const cg_schema *s) {
    for (int a = 0; a < s->nops; a++)
        for (int ka = 0; ka < CG_KEY_COUNT; ka++) {
            const char *fn = s->ops[a].kernel[ka];
            if (!fn) continue;
            for (int b = 0; b < a; b++)
                for (int kb = 0; kb < CG_KEY_COUNT; kb++) {
                    if (!s->ops[b].kernel[kb] || strcmp(s->ops[b].kernel[kb], fn) != 0) continue;
                    cg_buf pa = { 0 }, pb = { 0 };
                    cg_emit_params(&pa, &s->ops[a], true);
                    cg_emit_params(&pb, &s->ops[b], true);
                    if (strcmp(pa.data, pb.data) != 0)
                        cg_error_at(s->ops[a].path, s->ops[a].line,
                                    "kernel '%s' is used by ops '%s' and '%s' with different "
                                    "signatures", fn, s->ops[b].name, s->ops[a].name);
                    cg_free(pa.data);
                    cg_free(pb.data);
                }
        }
}

/* "a" then "a, b": the list of schema files for messages and banners. */
static const char *append_path(const char *list, const char *path) {
    if (!list) return path;
    size_t n = strlen(list) + strlen(path) + 3;
    char *p = cg_xmalloc(n);
    snprintf(p, n, "%s, %s", list, path);
    return p;
}

void cg_parse_ops(const char *path, cg_schema *s) {
    yaml_document_t doc;
    yaml_node_item_t *it, *end;
    load_yaml(path, &doc);
    root_items(path, &doc, &it, &end);
    s->ops_path = append_path(s->ops_path, path);
    int first = s->nops, nnew = (int)(end - it);
    if (!nnew) cg_error_at(path, 1, "no ops defined");
    s->nops += nnew;
    s->ops = cg_xrealloc(s->ops, (size_t)s->nops * sizeof *s->ops);
    if (!s->ops) cg_die("out of memory");
    memset(s->ops + first, 0, (size_t)nnew * sizeof *s->ops);
    int nb;
    banner *banners = read_banners(path, &nb);
    for (int i = first; it < end; it++, i++) {
        cg_op *op = &s->ops[i];
        parse_op(path, &doc, yaml_document_get_node(&doc, *it), op);
        op->path = path;
        for (int j = 0; j < i; j++) {
            if (strcmp(s->ops[j].name, op->name) == 0)
                cg_error_at(path, op->line, "duplicate op '%s' (first defined at %s:%d)", op->name,
                            s->ops[j].path, s->ops[j].line);
            if (op->metamethod && s->ops[j].metamethod && strcmp(s->ops[j].metamethod, op->metamethod) == 0)
                cg_error_at(path, op->line, "metamethod %s given to '%s' and '%s'", op->metamethod,
                            s->ops[j].name, op->name);
            /* Note [Overloads]: one Lua binding per name, so the variants agree */
            if (strcmp(s->ops[j].base, op->base) == 0 &&
                (s->ops[j].v_function != op->v_function || s->ops[j].v_method != op->v_method))
                cg_error_at(path, op->line, "overload '%s' of '%s' has other variants than the one "
                            "at line %d (all overloads of a name share one binding)", op->name,
                            op->base, s->ops[j].line);
        }
        for (int b = 0; b < nb; b++)
            if (banners[b].line < op->line) op->group = banners[b].name;
    }
    done_yaml(&doc);
}

/* Note [Shadowed names]
 * A prefixed op (Note [Namespace prefixes]) may take a name that an op
 * without the prefix also has in the same namespace: functional_relu(Tensor
 * input, bool inplace=False) in nn.functional is ember.nn.functional.relu,
 * PyTorch's F.relu signature, while relu (namespaces [ember, nn.functional])
 * keeps ember.relu's one-argument signature and is not set in
 * nn.functional. The shadowed op keeps its C function, autograd and help()
 * entry; only its Lua function variant in that namespace is left out (and
 * from the man page). */
static void mark_shadowed(cg_schema *s) {
    for (int i = 0; i < s->nops; i++) {
        const cg_op *p = &s->ops[i];
        if (p->lua_name == p->base) continue; /* not prefixed */
        for (int j = 0; j < s->nops; j++) {
            cg_op *op = &s->ops[j];
            if (strcmp(op->base, p->base) == 0 || !op->v_function || strcmp(op->lua_name, p->lua_name) != 0)
                continue; /* p itself, its overloads, other names */
            for (int k = 0; k < op->nnamespaces; k++)
                if (strcmp(op->namespaces[k], p->namespaces[0]) == 0) {
                    if (op->lua_name != op->base)
                        cg_error_at(p->path, p->line, "ops '%s' and '%s' both take %s.%s", p->name,
                                    op->name, p->namespaces[0], p->lua_name);
                    op->ns_shadowed[k] = true;
                }
        }
    }
}

void cg_check_ops(cg_schema *s) {
    if (!s->nops) cg_die("no ops file given");
    mark_shadowed(s);
    check_structured(s);
    check_kernel_signatures(s);
}

/* ---- derivatives.yaml ---- */

static const cg_arg *find_arg(const cg_op *op, const char *name) {
    for (int i = 0; i < op->nargs; i++)
        if (strcmp(op->args[i].name, name) == 0) return &op->args[i];
    return NULL;
}

/* output_differentiability: [flag, ...], one true/false per result (a
 * Tensor[] result is one result); fills d->ret_nondiff and returns whether
 * some result is differentiable. */
static bool parse_output_diff(const char *path, yaml_document_t *doc, yaml_node_t *v,
                              const cg_op *op, cg_deriv *d) {
    if (v->type != YAML_SEQUENCE_NODE ||
        v->data.sequence.items.top - v->data.sequence.items.start != op->nrets)
        cg_error_at(path, mark_line(v), "output_differentiability of %s must be a list with one "
                    "flag per result (%d), like [%s]", op->name, op->nrets,
                    op->nrets == 1 ? "false" : op->nrets == 2 ? "true, false" : "true, false, ...");
    bool any = false;
    int i = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++, i++) {
        yaml_node_t *f = yaml_document_get_node(doc, *it);
        expect_scalar(path, f, "an output_differentiability flag");
        const char *t = scalar_of(f);
        if (strcmp(t, "false") == 0 || strcmp(t, "False") == 0) d->ret_nondiff[i] = true;
        else if (strcmp(t, "true") == 0 || strcmp(t, "True") == 0) any = true;
        else
            cg_error_at(path, mark_line(f), "output_differentiability flag '%s' of %s must be true "
                        "or false", t, op->name);
    }
    return any;
}

/* save: [names] documents what the node keeps; it must list exactly the
 * tensors (arguments and result) that the formulas use. */
static void check_save_list(const char *path, yaml_document_t *doc, yaml_node_t *v, const cg_op *op) {
    const cg_deriv *d = op->deriv;
    bool listed[CG_MAX_ARGS + 1] = { false }; /* [nargs] = result */
    for (yaml_node_item_t *si = v->data.sequence.items.start; si < v->data.sequence.items.top; si++) {
        yaml_node_t *sv = yaml_document_get_node(doc, *si);
        const char *name = scalar_of(sv);
        bool used = false;
        if (strcmp(name, "result") == 0) {
            listed[op->nargs] = true;
            for (int f = 0; f < d->nformulas; f++) used |= cg_expr_uses_result(d->formulas[f].expr);
        } else {
            const cg_arg *a = find_arg(op, name);
            int ai = (int)(a - op->args);
            if (!cg_type_is_tensor(a->type))
                cg_error_at(path, mark_line(sv), "save: '%s' of %s is a %s, not a Tensor (non-tensor "
                            "arguments the formulas use are kept by value)", name, op->name,
                            cg_types[a->type].spelling);
            listed[ai] = true;
            for (int f = 0; f < d->nformulas; f++) used |= cg_expr_uses_arg(d->formulas[f].expr, ai);
        }
        if (!used)
            cg_error_at(path, mark_line(sv), "save: '%s' is not used by any formula of %s", name,
                        op->name);
    }
    for (int i = 0; i <= op->nargs; i++) {
        if (listed[i]) continue;
        bool used = false;
        for (int f = 0; f < d->nformulas; f++)
            used |= i == op->nargs ? cg_expr_uses_result(d->formulas[f].expr)
                                   : cg_type_is_tensor(op->args[i].type) &&
                                         cg_expr_uses_arg(d->formulas[f].expr, i);
        if (used)
            cg_error_at(path, mark_line(v), "save: the formulas of %s use '%s' but save does not "
                        "list it (leave save out to infer it)", op->name,
                        i == op->nargs ? "result" : op->args[i].name);
    }
}

void cg_parse_derivatives(const char *path, cg_schema *s) {
    yaml_document_t doc;
    yaml_node_item_t *it, *end;
    load_yaml(path, &doc);
    root_items(path, &doc, &it, &end);
    s->derivs_path = append_path(s->derivs_path, path);
    for (; it < end; it++) {
        yaml_node_t *n = yaml_document_get_node(&doc, *it);
        if (n->type != YAML_MAPPING_NODE)
            cg_error_at(path, mark_line(n), "a derivatives entry must be a mapping with 'name' and "
                        "formulas, found %s", node_kind(n));
        /* find name first: formula keys are checked against its op */
        cg_op *op = NULL;
        for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
             pr++) {
            yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
            yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
            expect_scalar(path, k, "a key");
            if (strcmp(scalar_of(k), "name") != 0) continue;
            if (op) cg_error_at(path, mark_line(k), "key 'name' given twice");
            expect_scalar(path, v, "name");
            char *name = trim_dup(scalar_of(v), strlen(scalar_of(v)));
            const cg_op *same_name = NULL;
            for (int i = 0; i < s->nops; i++) {
                if (strcmp(s->ops[i].schema, name) == 0) op = &s->ops[i];
                size_t ln = strlen(s->ops[i].name);
                if (strncmp(s->ops[i].name, name, ln) == 0 && name[ln] == '(')
                    same_name = &s->ops[i];
            }
            if (!op && same_name)
                cg_error_at(path, mark_line(v), "name '%s' does not match ops.yaml exactly: the op "
                            "is '%s'", name, same_name->schema);
            if (!op)
                cg_error_at(path, mark_line(v), "name '%s' matches no op in %s", name, s->ops_path);
            cg_free(name);
        }
        if (!op) cg_error_at(path, mark_line(n), "derivatives entry without 'name'");
        if (op->composite)
            cg_error_at(path, mark_line(n), "'%s' is a composite op (kernels: {Composite: ...} in "
                        "%s): its gradient comes from the ops it calls, so it takes no derivatives "
                        "entry", op->name, op->path);
        if (op->meta)
            cg_error_at(path, mark_line(n), "'%s' is the out= op of a structured family: out= variants "
                        "record nothing, so it takes no derivatives entry (give one to its functional "
                        "and in-place ops)", op->name);
        if (op->deriv)
            cg_error_at(path, mark_line(n), "duplicate derivatives entry for '%s' (first at %s:%d)",
                        op->name, op->deriv->path, op->deriv->line);
        cg_deriv *d = cg_xmalloc(sizeof *d);
        d->line = mark_line(n);
        d->path = path;
        op->deriv = d;
        yaml_node_t *save = NULL;
        bool have_outdiff = false;
        for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
             pr++) {
            yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
            yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
            const char *key = scalar_of(k);
            if (strcmp(key, "name") == 0) continue;
            if (strcmp(key, "save") == 0) {
                if (save) cg_error_at(path, mark_line(k), "key 'save' given twice");
                if (v->type != YAML_SEQUENCE_NODE)
                    cg_error_at(path, mark_line(v), "save must be a list of names, found %s",
                                node_kind(v));
                for (yaml_node_item_t *si = v->data.sequence.items.start;
                     si < v->data.sequence.items.top; si++) {
                    yaml_node_t *sv = yaml_document_get_node(&doc, *si);
                    expect_scalar(path, sv, "a saved name");
                    if (strcmp(scalar_of(sv), "result") != 0 && !find_arg(op, scalar_of(sv)))
                        cg_error_at(path, mark_line(sv), "save: '%s' is not an argument of %s "
                                    "(nor 'result')", scalar_of(sv), op->name);
                }
                save = v;
                continue;
            }
            if (strcmp(key, "may_return_self") == 0) {
                expect_scalar(path, v, "true or false");
                const char *t = scalar_of(v);
                if (strcmp(t, "true") != 0 && strcmp(t, "false") != 0)
                    cg_error_at(path, mark_line(v), "may_return_self of %s must be true or false", op->name);
                d->may_return_self = strcmp(t, "true") == 0;
                continue;
            }
            if (strcmp(key, "output_differentiability") == 0) {
                if (have_outdiff) cg_error_at(path, mark_line(k), "key '%s' given twice", key);
                have_outdiff = true;
                d->output_nondiff = !parse_output_diff(path, &doc, v, op, d);
                continue;
            }
            const cg_arg *a = find_arg(op, key);
            if (!a)
                cg_error_at(path, mark_line(k), "'%s' is not an argument of %s (formula keys are "
                            "argument names; other keys: name, save, output_differentiability, "
                            "may_return_self)",
                            key, op->schema);
            if (!cg_type_is_tensor(a->type) && a->type != CG_TENSORLIST)
                cg_error_at(path, mark_line(k), "'%s' of %s is a %s, not a Tensor: only Tensor "
                            "and Tensor[] arguments are differentiable", key, op->name,
                            cg_types[a->type].spelling);
            expect_scalar(path, v, "a formula");
            if (!*scalar_of(v))
                cg_error_at(path, mark_line(v), "empty formula for '%s' of %s", key, op->name);
            for (int f = 0; f < d->nformulas; f++)
                if (d->formulas[f].arg == (int)(a - op->args))
                    cg_error_at(path, mark_line(k), "formula for '%s' of %s given twice", key,
                                op->name);
            cg_formula *f = &d->formulas[d->nformulas++];
            f->arg = (int)(a - op->args);
            f->text = trim_dup(scalar_of(v), strlen(scalar_of(v)));
            f->line = mark_line(v);
        }
        if (d->output_nondiff && d->nformulas)
            cg_error_at(path, d->line, "%s has output_differentiability: [false] and formulas; "
                        "a non-differentiable output takes no formulas", op->name);
        if (op->kernel[CG_KEY_AUTOGRAD] && (d->nformulas || d->output_nondiff))
            cg_error_at(path, d->line, "%s has an Autograd kernel in %s (%s) and an entry with "
                        "formulas here; keep one", op->name, s->ops_path,
                        op->kernel[CG_KEY_AUTOGRAD]);
        if (d->nformulas || (cg_op_gets_autograd(op) && op->ret_alias_write))
            cg_check_autograd_names(path, d->line, op);
        /* formulas are parsed after every key was read, in schema order */
        for (int f = 0; f < d->nformulas; f++)
            d->formulas[f].expr = cg_parse_formula(path, d->formulas[f].line, s, op,
                                                   d->formulas[f].arg, d->formulas[f].text);
        if (save) check_save_list(path, &doc, save, op);
        /* an in-place op whose formulas read self needs clone() to keep its old value */
        for (int i = 0; i < op->nargs && op->ret_alias_write; i++) {
            if (!op->args[i].alias_write) continue;
            bool used = false;
            for (int f = 0; f < d->nformulas; f++) used |= cg_expr_uses_arg(d->formulas[f].expr, i);
            bool have_clone = false;
            for (int k = 0; k < s->nops; k++)
                have_clone |= strcmp(s->ops[k].name, "clone") == 0 && s->ops[k].nargs == 1 &&
                              s->ops[k].args[0].type == CG_TENSOR;
            if (used && !have_clone)
                cg_error_at(path, d->line, "the formulas of in-place %s read '%s' (its value before "
                            "the op), which needs op clone(Tensor self) in %s", op->name,
                            op->args[i].name, s->ops_path);
        }
    }
    done_yaml(&doc);
}
