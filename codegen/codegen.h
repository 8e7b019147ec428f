/* codegen.h -- the schema model shared by the codegen's parser and emitters.
 * parse.c fills a cg_schema from ops.yaml (and checks derivatives.yaml);
 * emit_c.c, emit_lua.c and emit_man.c turn it into text (cg_buf).
 *
 * Note [Schema types]
 * Every argument type the schema may use is one row of cg_types (parse.c):
 * its spelling in ops.yaml, its C parameter type, whether it is optional
 * (a trailing `?`), and how it is boxed. Emitters switch on cg_type; adding
 * a type means one row there and one case in each emitter's switch.
 *
 * Note [Several results]
 * `-> (Tensor values, Tensor indices)`: the C entry em_OP, em_redispatch_OP
 * and every kernel return the first result (an owned reference, NULL on
 * error) and take one trailing out-parameter `em_tensor **NAME` per further
 * result, set to an owned reference on success (left NULL on error). The
 * boxed stack carries every result in rets[0..k-1]; the Lua binding returns
 * k values. `-> Tensor[]`: the C functions return an `em_tensor **` array of
 * owned tensors (NULL on error) and take a trailing `int *nresults` set to
 * its length; the caller frees it with em_tensors_free (core). Boxed, the
 * list is one EM_IV_TENSORLIST in rets[0] (owned there); in Lua an array.
 *
 * Note [Tensor lists]
 * A `Tensor[]` argument is an em_tensorlist {data, n} of borrowed tensors;
 * in Lua an array of tensors (an element that is not a tensor is an error
 * naming the op, the argument and the element's 1-based position).
 * A `Tensor?[]` argument (PyTorch's list of optional tensors, index_put's
 * indices) is the same em_tensorlist whose elements may be NULL (None; in
 * Lua a nil hole in the array, up to its length #t). Its elements are not
 * differentiable inputs, so it may sit beside other Tensor arguments, but
 * only in a composite op (Note [Composite ops]: autograd comes from its
 * parts); a Tensor[] argument stays its op's only tensor argument.
 */
#ifndef CODEGEN_H
#define CODEGEN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Note [Composite ops]
 * An op whose ops.yaml entry says `kernels: {Composite: em_comp_NAME}` has
 * no backend kernel and no formula: em_comp_NAME (runtime/kernels/composite.c)
 * is registered at every dispatch key, Autograd included, and computes the
 * op by calling other ops through the public API (em_ops.h). Autograd,
 * every backend and double backward therefore come from its parts; a
 * derivatives.yaml entry for it is an error. (PyTorch's
 * CompositeImplicitAutograd.) */

#define CG_MAX_NAMESPACES 4
#define CG_MAX_ARGS 32 /* EM_STACK_MAX: every argument must fit on a boxed stack */
#define CG_MAX_RETS 4  /* em_stack.rets: every result must fit on a boxed stack */

/* ---- types (see Note [Schema types]) ---- */

typedef enum {
    CG_TENSOR, CG_TENSOR_OPT, CG_SCALAR, CG_SCALAR_OPT, CG_INT, CG_INTLIST,
    CG_DIM, CG_DIM_OPT, CG_DIMLIST, CG_DIMLIST_OPT, CG_INDEX, CG_INDEX_OPT,
    CG_ENDINDEX_OPT, CG_FLOAT, CG_BOOL, CG_DTYPE, CG_DTYPE_OPT, CG_INT_OPT,
    CG_TENSORLIST, /* Tensor[]: em_tensorlist (borrowed); see Note [Tensor lists] */
    CG_INTLIST_OPT,/* int[]?: em_intlist, n == -1 when absent */
    CG_STR,        /* str{a,b,c}: const char *, one of the values listed in the schema */
    CG_FLOATLIST_OPT, /* float[]?: em_floatlist, n == -1 when absent */
    CG_DEVICE, CG_DEVICE_OPT, CG_GENERATOR_OPT, /* devices: em_device, em_generator * */
    CG_TENSORLIST_OPT, /* Tensor?[]: em_tensorlist whose elements may be NULL; Note [Tensor lists] */
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
    CG_DEF_INT, CG_DEF_FLOAT, CG_DEF_BOOL, CG_DEF_LIST, CG_DEF_DTYPE,
    CG_DEF_STR        /* "mean": str (text keeps the quotes; str is the value) */
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
    char *str;        /* CG_DEF_STR: the value without quotes */
} cg_default;

typedef struct {
    char *name;
    cg_type type;
    char *alias;      /* "a" for Tensor(a) / Tensor(a!), else NULL */
    bool alias_write; /* Tensor(a!) */
    bool kwonly;      /* after `*`: only by name (Lua options table) */
    char **choices;   /* str{mean,sum,none}: the allowed values */
    int nchoices;
    cg_default def;
} cg_arg;

/* ---- derivatives (see the format header of schema/derivatives.yaml) ---- */

/* A formula's syntax tree (derivs.c parses and checks it). */
typedef enum {
    CG_EX_NUM,    /* a number literal: text */
    CG_EX_GRAD,   /* grad: the incoming gradient */
    CG_EX_RESULT, /* result: the forward output */
    CG_EX_ARG,    /* an argument of the op: arg (Tensor or not) */
    CG_EX_META,   /* X_meta: arg is the Tensor argument X */
    CG_EX_GEOM,   /* X_geometry: sizes, strides and storage offset of X */
    CG_EX_CALL,   /* text(kids...): an op (op_index >= 0) or a helper */
    CG_EX_BIN,    /* kids[0] text[0] kids[1], text is "+", "-", "*" or "/" */
    CG_EX_NEG,    /* -kids[0] */
    CG_EX_GRADS,  /* grads[arg] (0-based result index), or the whole list `grads` (arg -1) */
    CG_EX_RESULTS,/* results[arg] */
    CG_EX_ELEM    /* i: the element index in the formula of a Tensor[] argument */
} cg_ex_kind;

typedef struct cg_expr {
    cg_ex_kind kind;
    char *text;            /* NUM: the literal; CALL: the name; BIN: the operator */
    int arg;               /* ARG, META: index into op->args */
    int op_index;          /* CALL: index into schema ops, -1 for a helper */
    int helper;            /* CALL: index into cg_helpers when op_index < 0 */
    struct cg_expr **kids;
    int nkids;
} cg_expr;

/* A helper of runtime/autograd/em_formulas.h that formulas may call:
 * params spells its parameters, one letter each: t = a tensor (em_tensor *),
 * m = an input meta (X_meta; for a Tensor[] argument the array of its
 * elements' metas), g = a geometry (X_geometry), v = a non-tensor argument's
 * C value (or i), l = the list `grads` of a Tensor[] result, passed as
 * (em_tensor **grads, int n, const em_input_meta *metas) with NULL entries
 * for results that got no gradient, u = grads[k] of a multi-result op as it
 * came: NULL when result k got no gradient, where a 't' parameter gets zeros
 * (a helper that skips the terms of missing gradients, as PyTorch's
 * formulas test .defined(), so that they record no graph). */
typedef struct {
    const char *name;   /* "sum_backward" -> em_ag_fn_sum_backward */
    const char *params; /* "tmvv" */
} cg_helper;
extern const cg_helper cg_helpers[];

typedef struct {
    int arg;          /* the Tensor argument it is the gradient of */
    char *text;       /* as written */
    cg_expr *expr;
    int line;
} cg_formula;

typedef struct {
    int line;                        /* of the entry in its derivatives file */
    const char *path;                /* that file */
    bool output_nondiff;             /* no output is differentiable (all flags false) */
    bool ret_nondiff[CG_MAX_RETS];   /* output_differentiability per result */
    bool may_return_self;            /* may_return_self: true (to, contiguous) */
    cg_formula formulas[CG_MAX_ARGS];
    int nformulas;
} cg_deriv;

/* A result of an op: `Tensor`, `Tensor[]`, or a named member of a tuple
 * `(Tensor values, Tensor indices)`. See Note [Several results]. */
typedef struct {
    char *name;       /* "indices"; NULL for an unnamed single result */
    bool list;        /* Tensor[] */
} cg_ret;

typedef struct {
    char *name;       /* the C name: "add_", "max_dim" for max.dim */
    char *base;       /* the name before the overload: "max" (the Lua name) */
    char *overload;   /* "dim" for max.dim, else NULL */
    char *schema;     /* the func string, trimmed */
    cg_arg args[CG_MAX_ARGS];
    int nargs;
    int npositional;  /* arguments before `*` */
    cg_ret rets[CG_MAX_RETS];
    int nrets;        /* 1 for `-> Tensor` and `-> Tensor[]` */
    char *ret_alias;  /* return Tensor(a!) -> "a" */
    bool ret_alias_write;
    bool v_function, v_method;
    char *kernel[CG_KEY_COUNT]; /* C function per key, NULL for none */
    bool composite;    /* kernels: {Composite: fn}: fn at every key (Note [Composite ops]) */
    /* Note [Structured kernels] (runtime/kernels/em_structured.h): the out=
     * op of a family says `structured: em_meta_NAME` (meta) and names its
     * backend impls in kernels: (impl); name and name_ say
     * `structured_delegate: name.out` (delegate) and name no kernels. For
     * both, kernel[k] is the generated wrapper em_<key>_<op> of every key
     * the family has an impl for (emit_structured.c writes them). */
    char *meta;        /* the out= op: its meta function, else NULL */
    char *impl[CG_KEY_COUNT]; /* the out= op: its backend impl per key */
    int out_arg;       /* the out= op: index of its `Tensor(a!) out` argument */
    int delegate;      /* a delegating op: index of its out= op; -1 otherwise */
    char *delegate_name; /* structured_delegate as written ("add.out"), or NULL */
    int structured_line; /* line of the structured / structured_delegate key */
    char *metamethod;  /* "__add": the tensor metamethod entry (Note [Metamethods]), or NULL */
    bool lua_bool;     /* lua_result: boolean -- Lua gets the 0-dim bool result as a boolean
                        * (Note [Boolean results] in emit_lua.c) */
    char *namespaces[CG_MAX_NAMESPACES]; /* where the function variant lives: "" = ember */
    int nnamespaces;   /* 0: just ember */
    /* Note [Namespace prefixes]: the name Lua sees. An op whose only namespace
     * ends in component N and whose name starts with "N_" drops the prefix
     * there, as PyTorch names torch.linalg.norm `linalg_norm`: linalg_norm
     * with namespace linalg is ember.linalg.norm (C em_linalg_norm). Else base. */
    char *lua_name;
    /* Note [Shadowed names]: ns_shadowed[k] -- namespaces[k]'s name is taken by
     * a prefixed op of that namespace (functional_relu in nn.functional takes
     * ember.nn.functional.relu from relu); set by cg_check_ops. */
    bool ns_shadowed[CG_MAX_NAMESPACES];
    char *msg_name;    /* the name in messages: "linalg.norm" for a prefixed op, else base */
    char *doc;
    const char *group; /* the "# ---- x ----" banner above it, or NULL */
    int line;          /* 1-based line of the entry in its file */
    const char *path;  /* the ops file it comes from (schema/ops.yaml, schema/ops/X.yaml) */
    cg_deriv *deriv;   /* its derivatives.yaml entry, NULL when it has none */
} cg_op;

typedef struct {
    const char *ops_path;    /* the ops files, ", "-separated (messages, banners) */
    const char *derivs_path; /* the derivatives files likewise; NULL when none was given */
    cg_op *ops;
    int nops;
} cg_schema;

/* ---- parse.c ---- */

/* Parses one ops file into s, appending its ops to those of earlier files
 * (schema/ops.yaml, then each schema/ops/FAMILY.yaml: Note [Schema files]). On any
 * error prints "FILE:LINE: message" to stderr and exits with status 1. */
void cg_parse_ops(const char *path, cg_schema *s);
/* Checks what spans the files once every ops file is parsed (structured
 * families, kernels shared by several ops); exits like cg_parse_ops. */
void cg_check_ops(cg_schema *s);
/* Parses derivatives.yaml into the ops' deriv entries, checking it against
 * s (names match an op's func exactly, formula keys are Tensor arguments,
 * formulas parse and name known identifiers and functions). Exits like
 * cg_parse_ops on error. */
void cg_parse_derivatives(const char *path, cg_schema *s);

/* ---- derivs.c ---- */

/* Parses formula text (the gradient of Tensor argument key_arg of op) into
 * a checked tree; on error prints "FILE:LINE: ..." and exits. */
cg_expr *cg_parse_formula(const char *path, int line, const cg_schema *s, const cg_op *op,
                          int key_arg, const char *text);
/* Checks the names of an op that gets generated autograd code (they become
 * C locals and node fields); exits with "FILE:LINE: ..." on a clash. */
void cg_check_autograd_names(const char *path, int line, const cg_op *op);
/* Whether e mentions argument arg (as a value, not as X_meta) / result / meta of arg. */
bool cg_expr_uses_arg(const cg_expr *e, int arg);
bool cg_expr_uses_result(const cg_expr *e);
bool cg_expr_uses_meta(const cg_expr *e, int arg);
bool cg_expr_uses_geometry(const cg_expr *e, int arg);
/* Whether e names results[k] / the gradient of result k (grad is grads[0];
 * the list `grads` or k < 0 matches any). */
bool cg_expr_uses_results(const cg_expr *e, int k);
bool cg_expr_uses_grads(const cg_expr *e, int k);
/* The op's index among its Tensor arguments (its next-edge slot), or -1. */
int cg_tensor_slot(const cg_op *op, int arg);
/* Whether the op has a formula (a differentiable op: em_lua_differentiable_ops). */
bool cg_op_has_formulas(const cg_op *op);

/* Whether the C-side of a type is a pointer to a local (Scalar?, dim?, ...). */
bool cg_type_is_ptr_opt(cg_type t);
bool cg_type_is_tensor(cg_type t);
bool cg_type_is_list(cg_type t);
/* Whether t is Tensor[] or Tensor?[] (an em_tensorlist). */
bool cg_type_is_tlist(cg_type t);
/* Whether list type t holds dims (1-based in Lua, 0-based in C). */
bool cg_type_is_dims(cg_type t);
/* Whether op returns a Tensor[] (its C entry returns em_tensor ** and a count). */
bool cg_op_ret_list(const cg_op *op);
/* The C return type of op's entry points and kernels: "em_tensor *" or "em_tensor **". */
const char *cg_ret_ctype(const cg_op *op);

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
/* Note [Codegen arena] (util.c): codegen's blocks come from these and go
 * back through cg_free (never free()); cg_release_all() frees every block
 * still allocated and the YAML document an error left behind. */
void *cg_xmalloc(size_t n);
void *cg_xrealloc(void *p, size_t n);
void cg_free(void *p);
void cg_release_all(void);
/* parse.c: deletes the YAML document an error abandoned mid-parse, if any. */
void cg_parse_release(void);
char *cg_xstrdup(const char *s);
char *cg_xstrndup(const char *s, size_t n);
/* When set (the codegen fuzz target, tests/fuzz/fuzz_codegen.c), cg_die and
 * cg_error_at longjmp here instead of printing and exiting. */
extern jmp_buf *cg_error_jmp;
void cg_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* "FILE:LINE: message" and exit(1). */
void cg_error_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* The first line of every generated C file (ops_path names the source). */
void cg_generated_banner(cg_buf *b, const char *ops_path);
/* Writes a section banner comment when op starts a new ops.yaml section
 * (*last is the section seen before; updated). */
void cg_group_banner(cg_buf *b, const cg_op *op, const char **last);

/* ---- emitters ---- */

void cg_emit_ops_h(cg_buf *b, const cg_schema *s);
void cg_emit_kernels_decl_h(cg_buf *b, const cg_schema *s);
void cg_emit_ops_c(cg_buf *b, const cg_schema *s);
void cg_emit_autograd(cg_buf *b, const cg_schema *s);
/* Whether codegen generates op's Autograd kernel (em_ag_k_NAME): the op has
 * a Tensor argument and ops.yaml names no Autograd kernel for it. */
bool cg_op_gets_autograd(const cg_op *op);
void cg_emit_lua(cg_buf *b, const cg_schema *s);
void cg_emit_man(cg_buf *b, const cg_schema *s);
/* emit_structured.c: the generated wrappers of structured families. */
void cg_emit_structured(cg_buf *b, const cg_schema *s);
/* The out= op of op's structured family (op itself, or its delegate), or NULL. */
const cg_op *cg_structured_family(const cg_schema *s, const cg_op *op);
/* Appends the meta/impl parameters: "const em_meta *m, em_tensor *self, ..."
 * (the out= op's arguments without out; with_out appends "em_tensor *out"). */
void cg_emit_structured_params(cg_buf *b, const cg_op *out_op, bool impl);
/* An op's node name ("AddBackward" for add and add_) and C type
 * ("AddBackward_" for add_); n bytes each (emit_autograd.c). */
void cg_node_names(const cg_op *op, char *display, char *ctype, size_t n);
/* em_formula_docs.c: every node's inputs and formulas as written in
 * derivatives.yaml, for ember.autograd.formulas and trace (emit_docs.c). */
void cg_emit_formula_docs(cg_buf *b, const cg_schema *s);

/* The meta and impl prototypes (appended to em_kernels_decl.h). */
void cg_emit_structured_decls(cg_buf *b, const cg_schema *s);

/* Appends "(em_tensor *self, em_tensor *other, em_scalar alpha)"'s inside:
 * the op's C parameters; with_ks prefixes "em_keyset ks, ". The out-parameters
 * of further results follow (em_tensor **indices), or `int *nresults` for a
 * Tensor[] result (see Note [Several results]). */
void cg_emit_params(cg_buf *b, const cg_op *op, bool with_ks);
/* Appends the arguments' names separated by ", " (out-parameters included). */
void cg_emit_arg_names(cg_buf *b, const cg_op *op);

#endif
