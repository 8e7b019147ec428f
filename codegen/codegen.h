/* codegen.h -- the schema model shared by the codegen's parser and emitters.
 * parse.c fills a cg_schema from ops.yaml (and checks derivatives.yaml);
 * emit_c.c, emit_lua.c and emit_man.c turn it into text (cg_buf).
 *
 * Note [Schema types]
 * Every argument type the schema may use is one row of cg_types (parse.c):
 * its spelling in ops.yaml, its C parameter type, whether it is optional
 * (a trailing `?`), and how it is boxed. Emitters switch on cg_type; adding
 * a type means one row there and one case in each emitter's switch.
 */
#ifndef CODEGEN_H
#define CODEGEN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CG_MAX_ARGS 16 /* EM_STACK_MAX: every argument must fit on a boxed stack */

/* ---- types (see Note [Schema types]) ---- */

typedef enum {
    CG_TENSOR, CG_TENSOR_OPT, CG_SCALAR, CG_SCALAR_OPT, CG_INT, CG_INTLIST,
    CG_DIM, CG_DIM_OPT, CG_DIMLIST, CG_DIMLIST_OPT, CG_INDEX, CG_INDEX_OPT,
    CG_ENDINDEX_OPT, CG_FLOAT, CG_BOOL, CG_DTYPE, CG_DTYPE_OPT,
    CG_TYPE_COUNT
} cg_type;

typedef struct {
    const char *spelling; /* as written in ops.yaml: "dim[]?" */
    const char *ctype;    /* C parameter type: "em_intlist" */
    bool optional;        /* absent is a value (NULL, n == -1, EM_DTYPE_NONE) */
} cg_type_info;

extern const cg_type_info cg_types[CG_TYPE_COUNT];

/* Dispatch keys that ops.yaml may name (Default expands to the backends). */
typedef enum { CG_KEY_CPU, CG_KEY_CUDA, CG_KEY_PRIVATEUSE1, CG_KEY_AUTOGRAD, CG_KEY_COUNT } cg_key;
extern const char *const cg_key_names[CG_KEY_COUNT];  /* "CPU", ... */
extern const char *const cg_key_enums[CG_KEY_COUNT];  /* "EM_KEY_CPU", ... */

/* dtype names accepted in defaults, and their C enumerators. */
#define CG_DTYPE_COUNT 9
extern const char *const cg_dtype_names[CG_DTYPE_COUNT];
extern const char *const cg_dtype_enums[CG_DTYPE_COUNT];

/* ---- the model ---- */

typedef enum {
    CG_DEF_NONE_GIVEN, /* no default: the argument is required */
    CG_DEF_NULL,       /* None */
    CG_DEF_INT, CG_DEF_FLOAT, CG_DEF_BOOL, CG_DEF_LIST, CG_DEF_DTYPE
} cg_default_kind;

typedef struct {
    cg_default_kind kind;
    char *text;       /* as written in the schema: "1", "None", "[1, 2]" */
    int64_t i;        /* CG_DEF_INT */
    double d;         /* CG_DEF_FLOAT */
    bool b;           /* CG_DEF_BOOL */
    int64_t *list;    /* CG_DEF_LIST */
    int nlist;
    int dtype;        /* CG_DEF_DTYPE: index into cg_dtype_names */
} cg_default;

typedef struct {
    char *name;
    cg_type type;
    char *alias;      /* "a" for Tensor(a) / Tensor(a!), else NULL */
    bool alias_write; /* Tensor(a!) */
    bool kwonly;      /* after `*`: only by name (Lua options table) */
    cg_default def;
} cg_arg;

typedef struct {
    char *name;       /* "add_" */
    char *schema;     /* the func string, trimmed */
    cg_arg args[CG_MAX_ARGS];
    int nargs;
    int npositional;  /* arguments before `*` */
    char *ret_alias;  /* return Tensor(a!) -> "a" */
    bool ret_alias_write;
    bool v_function, v_method;
    char *kernel[CG_KEY_COUNT]; /* C function per key, NULL for none */
    char *doc;
    const char *group; /* the "# ---- x ----" banner above it, or NULL */
    int line;          /* 1-based line of the entry in ops.yaml */
} cg_op;

typedef struct {
    const char *ops_path;
    cg_op *ops;
    int nops;
} cg_schema;

/* ---- parse.c ---- */

/* Parses and validates ops.yaml into s. On any error prints
 * "FILE:LINE: message" to stderr and exits with status 1. */
void cg_parse_ops(const char *path, cg_schema *s);
/* Parses derivatives.yaml and checks it against s (names match an op's
 * func exactly, formula keys are Tensor arguments); emits nothing. Exits
 * like cg_parse_ops on error. */
void cg_check_derivatives(const char *path, const cg_schema *s);

/* Whether the C-side of a type is a pointer to a local (Scalar?, dim?, ...). */
bool cg_type_is_ptr_opt(cg_type t);
bool cg_type_is_tensor(cg_type t);
bool cg_type_is_list(cg_type t);

/* ---- util.c ---- */

typedef struct {
    char *data;
    size_t len, cap;
} cg_buf;

void cg_printf(cg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_puts(cg_buf *b, const char *s);
/* Appends s as the body of a C string literal (no quotes). */
void cg_c_escape(cg_buf *b, const char *s);
/* Appends s with "*\/" broken so that it can sit inside a C comment. */
void cg_comment_escape(cg_buf *b, const char *s);
/* Writes b to path (via a temporary file and rename). Exits on failure. */
void cg_write_file(const char *path, const cg_buf *b);
/* mkdir -p. Exits on failure. */
void cg_mkdirs(const char *path);
void *cg_xmalloc(size_t n);
char *cg_xstrdup(const char *s);
char *cg_xstrndup(const char *s, size_t n);
void cg_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* "FILE:LINE: message" and exit(1). */
void cg_error_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* The first line of every generated C file (ops_path names the source). */
void cg_generated_banner(cg_buf *b, const char *ops_path);

/* ---- emitters ---- */

void cg_emit_ops_h(cg_buf *b, const cg_schema *s);
void cg_emit_kernels_decl_h(cg_buf *b, const cg_schema *s);
void cg_emit_ops_c(cg_buf *b, const cg_schema *s);
void cg_emit_lua(cg_buf *b, const cg_schema *s);
void cg_emit_man(cg_buf *b, const cg_schema *s);

/* Appends "(em_tensor *self, em_tensor *other, em_scalar alpha)"'s inside:
 * the op's C parameters; with_ks prefixes "em_keyset ks, ". */
void cg_emit_params(cg_buf *b, const cg_op *op, bool with_ks);
/* Appends the arguments' names separated by ", ". */
void cg_emit_arg_names(cg_buf *b, const cg_op *op);

#endif
