/* check_codegen.c -- Check suite for the codegen tool: runs the codegen
 * binary (env EM_CODEGEN, default build/codegen) on the fixtures in
 * tests/codegen/ (env EM_CODEGEN_FIXTURES) and checks outputs and errors. */
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- running the tool ---- */

static const char *codegen_bin(void) {
    const char *p = getenv("EM_CODEGEN");
    return p && *p ? p : "build/codegen";
}

static const char *fixtures(void) {
    const char *p = getenv("EM_CODEGEN_FIXTURES");
    return p && *p ? p : "tests/codegen";
}

typedef struct {
    char dir[64];     /* temp dir: gen/ and man/ go under it */
    int status;       /* exit status, or -1 when it did not exit normally */
    char err[8192];   /* its stderr */
} run_result;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

static void cleanup(run_result *r) {
    if (r->dir[0]) nftw(r->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void fixture_path(char *buf, size_t n, const char *file) {
    if (strchr(file, '/')) snprintf(buf, n, "%s", file);
    else snprintf(buf, n, "%s/%s", fixtures(), file);
}

/* Runs codegen --ops OPS [--derivatives DERIVS] --out DIR/gen --man DIR/man.
 * ops and derivs name files (relative to the fixture dir unless they hold a
 * '/'); derivs may be NULL. */
/* ops and derivs name fixture files; several are joined with '+'
 * ("a.yaml+b.yaml": --ops a --ops b, Note [Schema files]). */
static void run_codegen(run_result *r, const char *ops, const char *derivs) {
    char ops_path[4][512], der_path[4][512], gen[128], man[128], errfile[128];
    memset(r, 0, sizeof *r);
    strcpy(r->dir, "/tmp/em_check_codegen_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(r->dir));
    int nops = 0, nder = 0;
    for (const char *p = ops; p; p = strchr(p, '+') ? strchr(p, '+') + 1 : NULL) {
        char one[256];
        snprintf(one, sizeof one, "%.*s", (int)strcspn(p, "+"), p);
        ck_assert_int_lt(nops, 4);
        fixture_path(ops_path[nops++], sizeof ops_path[0], one);
    }
    for (const char *p = derivs; p; p = strchr(p, '+') ? strchr(p, '+') + 1 : NULL) {
        char one[256];
        snprintf(one, sizeof one, "%.*s", (int)strcspn(p, "+"), p);
        ck_assert_int_lt(nder, 4);
        fixture_path(der_path[nder++], sizeof der_path[0], one);
    }
    snprintf(gen, sizeof gen, "%s/gen", r->dir);
    snprintf(man, sizeof man, "%s/man", r->dir);
    snprintf(errfile, sizeof errfile, "%s/stderr.txt", r->dir);

    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(126);
        dup2(fd, 2);
        close(fd);
        const char *argv[24] = { codegen_bin(), "--out", gen, "--man", man };
        int n = 5;
        for (int i = 0; i < nops; i++) {
            argv[n++] = "--ops";
            argv[n++] = ops_path[i];
        }
        for (int i = 0; i < nder; i++) {
            argv[n++] = "--derivatives";
            argv[n++] = der_path[i];
        }
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    ck_assert_msg(r->status != 127, "cannot run %s (set EM_CODEGEN)", codegen_bin());
    FILE *f = fopen(errfile, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(r->err, 1, sizeof r->err - 1, f);
    r->err[n] = '\0';
    fclose(f);
}

/* The whole of DIR/rel, or NULL when it does not exist (caller frees). */
static char *slurp(const run_result *r, const char *rel) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", r->dir, rel);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static bool exists(const run_result *r, const char *rel) {
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", r->dir, rel);
    return stat(path, &st) == 0;
}

static const char *const outputs[] = {
    "gen/em_ops.h", "gen/em_kernels_decl.h", "gen/em_ops.c", "gen/em_autograd_gen.c", "gen/em_lua_ops.c",
    "gen/em_structured.c", "man/ember-ops.7"
};

/* ---- good schemas ---- */

START_TEST(test_codegen_good_min_writes_all_files) {
    run_result r;
    run_codegen(&r, "good_min.yaml", "deriv_empty.yaml");
    ck_assert_msg(r.status == 0, "codegen failed: %s", r.err);
    ck_assert_str_eq(r.err, "");
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        char *s = slurp(&r, outputs[i]);
        ck_assert_msg(s != NULL, "%s not written", outputs[i]);
        const char *first = strstr(outputs[i], ".7") ? ".\\\" @generated from " : "/* @generated from ";
        ck_assert_msg(strncmp(s, first, strlen(first)) == 0, "%s: first line is not @generated",
                      outputs[i]);
        ck_assert_msg(strstr(s, "by codegen -- do not edit") != NULL, "%s: banner", outputs[i]);
        free(s);
    }
    char *h = slurp(&r, "gen/em_ops.h");
    ck_assert_ptr_nonnull(strstr(h, "#include \"dispatch/em_dispatch.h\""));
    ck_assert_ptr_nonnull(strstr(h, "EM_OP_twice_,"));
    ck_assert_ptr_nonnull(strstr(h, "EM_OP_COUNT"));
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_twice_(em_tensor *self, double f, bool flag);"));
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_redispatch_pick(em_keyset ks, em_tensor *self, "
                                    "int64_t dim, const int64_t *d2, em_intlist dims, em_intlist maybe, "
                                    "int64_t idx, const int64_t *i2, const int64_t *e, em_dtype to);"));
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_noargs(void);"));
    free(h);
    char *k = slurp(&r, "gen/em_kernels_decl.h");
    ck_assert_ptr_nonnull(strstr(k, "EM_HIDDEN em_tensor *test_cpu_twice(em_keyset ks, em_tensor *self, "
                                    "em_tensor *weight, em_scalar alpha, const em_scalar *beta);"));
    ck_assert_ptr_nonnull(strstr(k, "test_ag_twice("));
    ck_assert_ptr_null(strstr(strstr(k, "test_pick(") + 1, "test_pick(")); /* once, for 3 keys */
    free(k);
    char *c = slurp(&r, "gen/em_ops.c");
    ck_assert_ptr_nonnull(strstr(c, "[EM_KEY_CPU] = (void *)test_make, [EM_KEY_CUDA] = (void *)test_cuda_make"));
    ck_assert_ptr_nonnull(strstr(c, "ks = EM_KS(EM_KEY_CPU);")); /* make has no tensor args */
    ck_assert_ptr_nonnull(strstr(c, "\"twice: argument 'self' is NULL\""));
    ck_assert_ptr_nonnull(strstr(c, "_Static_assert"));
    free(c);
    char *l = slurp(&r, "gen/em_lua_ops.c");
    ck_assert_ptr_nonnull(strstr(l, "static int l_twice(lua_State *L)"));
    ck_assert_ptr_nonnull(strstr(l, "void em_lua_register_ops(lua_State *L, int module_idx, int methods_idx)"));
    ck_assert_ptr_nonnull(strstr(l, "const char *const em_lua_op_docs[][3] = {"));
    /* a doc with quotes and backslashes is escaped in C strings */
    ck_assert_ptr_nonnull(strstr(l, "with */ and \\\"quotes\\\" and a \\\\ backslash"));
    free(l);
    char *m = slurp(&r, "man/ember-ops.7");
    ck_assert_ptr_nonnull(strstr(m, "ember.make(size, {dtype=\"float32\", n=3})"));
    ck_assert_ptr_nonnull(strstr(m, "x:twice_(f=0.5, flag=true)"));
    ck_assert_ptr_nonnull(strstr(m, ".SS lists, dims, dtypes"));
    free(m);
    cleanup(&r);
}
END_TEST

/* Compiles the generated C files of r at -O2 with every warning an error
 * (maybe-uninitialized only shows with optimisation). */
static void assert_compiles(run_result *r) {
    const char *cc = getenv("EM_CODEGEN_CC");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "for f in %s/gen/em_ops.c %s/gen/em_autograd_gen.c %s/gen/em_lua_ops.c %s/gen/em_structured.c; do %s "
             "-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -I runtime "
             "-I %s/gen $(pkg-config --cflags lua5.4) -c -o /dev/null $f || exit 1; done 2>%s/cc.txt",
             r->dir, r->dir, r->dir, r->dir, cc && *cc ? cc : "cc", r->dir, r->dir);
    int st = system(cmd);
    char *log = slurp(r, "cc.txt");
    ck_assert_msg(st == 0, "generated C does not compile: %s", log ? log : "");
    free(log);
}

/* The generated C for every argument type compiles warning-free. */
START_TEST(test_codegen_good_min_compiles) {
    run_result r;
    run_codegen(&r, "good_min.yaml", NULL);
    ck_assert_msg(r.status == 0, "codegen failed: %s", r.err);
    assert_compiles(&r);
    cleanup(&r);
}
END_TEST

/* Autograd kernels and nodes for every argument type, kind of kernel and
 * formula form (ag_ops.yaml, ag_derivs.yaml) compile, and each op gets the
 * kind of kernel its entry asks for. */
START_TEST(test_codegen_autograd_fixture) {
    run_result r;
    run_codegen(&r, "ag_ops.yaml", "ag_derivs.yaml");
    ck_assert_msg(r.status == 0, "codegen failed: %s", r.err);
    ck_assert_str_eq(r.err, "");
    assert_compiles(&r);
    char *a = slurp(&r, "gen/em_autograd_gen.c");
    ck_assert_ptr_nonnull(a);
    ck_assert_msg(strncmp(a, "/* @generated from ", 19) == 0, "em_autograd_gen.c: banner");
    /* formulas: a node type, apply, and a kernel recording it */
    ck_assert_ptr_nonnull(strstr(a, "} ScaleBackward;"));
    ck_assert_ptr_nonnull(strstr(a, "{ \"ScaleBackward\", apply_scale, release_scale, release_scale }"));
    ck_assert_ptr_nonnull(strstr(a, "/* self: scale(grad, weight, alpha, beta) * -2.5e-1 + zeros_like(result) */"));
    ck_assert_ptr_nonnull(strstr(a, "em_ag_fn_zeros_like(result)"));
    ck_assert_ptr_nonnull(strstr(a, "em_scale(grad, NULL, em_scalar_int(2), NULL)")); /* defaults */
    ck_assert_ptr_nonnull(strstr(a, "(n->has_beta ? &n->beta : NULL)"));
    ck_assert_ptr_nonnull(strstr(a, "em_set_history_take(result, node, 0)")); /* the kernel's reference moves */
    /* in-place: leaf/view check, self cloned before the op, history rebased */
    ck_assert_ptr_nonnull(strstr(a, "} ScaleBackward_;"));
    ck_assert_ptr_nonnull(strstr(a, "if (em_ag_check_inplace(self, \"scale_\") != EM_OK)"));
    ck_assert_ptr_nonnull(strstr(a, "em_tensor *orig = em_clone(self);"));
    ck_assert_ptr_nonnull(strstr(a, "em_rebase_history(self, node)"));
    /* every non-tensor type is saved and read back */
    ck_assert_ptr_nonnull(strstr(a, "em_pick(grad, n->dim, (n->has_d2 ? &n->d2 : NULL), "
                                    "((em_intlist){ n->dims, n->dims_n }), ((em_intlist){ n->maybe, "
                                    "n->maybe_n }), n->idx, (n->has_i2 ? &n->i2 : NULL), "
                                    "(n->has_e ? &n->e : NULL), n->to)"));
    /* an entry without formulas on an in-place op: a node without edges */
    ck_assert_ptr_nonnull(strstr(a, "{ \"FillBackward\", apply_fill_, NULL, NULL }"));
    /* output_differentiability: [false]: redispatch only */
    char *cmp = strstr(a, "em_ag_k_cmp(");
    ck_assert_ptr_nonnull(cmp);
    ck_assert_ptr_nonnull(strstr(cmp, "return em_redispatch_cmp(ks & em_keys_below(EM_KEY_AUTOGRAD), self, other);"));
    ck_assert_ptr_null(strstr(a, "CmpBackward"));
    /* no entry: refuses inputs that require grad */
    ck_assert_ptr_nonnull(strstr(a, "\"nodiff: op nodiff is not differentiable (it has no entry in "));
    ck_assert_ptr_nonnull(strstr(a, "em_requires_grad(self) || em_requires_grad(other)"));
    /* hand-written Autograd kernels and tensor-less ops get none */
    ck_assert_ptr_null(strstr(a, "em_ag_k_own("));
    ck_assert_ptr_null(strstr(a, "em_ag_k_make("));
    free(a);
    char *c = slurp(&r, "gen/em_ops.c");
    ck_assert_ptr_nonnull(strstr(c, "[EM_KEY_CPU] = (void *)test_scale, [EM_KEY_AUTOGRAD] = (void *)em_ag_k_scale }"));
    ck_assert_ptr_nonnull(strstr(c, ".has_kernel = EM_KS(EM_KEY_CPU) | EM_KS(EM_KEY_AUTOGRAD),"));
    ck_assert_ptr_nonnull(strstr(c, "[EM_KEY_AUTOGRAD] = (void *)test_ag_own }"));
    free(c);
    char *k = slurp(&r, "gen/em_kernels_decl.h");
    ck_assert_ptr_nonnull(strstr(k, "EM_HIDDEN em_tensor *em_ag_k_scale_(em_keyset ks, em_tensor *self, double f, "
                                    "bool flag, int64_t count);"));
    free(k);
    char *l = slurp(&r, "gen/em_lua_ops.c");
    char *list = strstr(l, "const char *const em_lua_differentiable_ops[] = {");
    ck_assert_ptr_nonnull(list);
    ck_assert_ptr_nonnull(strstr(list, "\"scale_\","));
    ck_assert_ptr_nonnull(strstr(list, "\"mul\","));
    ck_assert_ptr_null(strstr(list, "\"cmp\""));
    ck_assert_ptr_null(strstr(list, "\"fill_\""));
    ck_assert_ptr_null(strstr(list, "\"nodiff\""));
    free(l);
    cleanup(&r);
}
END_TEST

/* Overloads, several results, Tensor[] arguments and results (multi_ops.yaml,
 * multi_derivs.yaml): the C shapes of Note [Several results], the Lua
 * overload resolver, and the autograd nodes; the generated C compiles. */
/* A structured family (st_ops.yaml): one wrapper per variant at CPU, each
 * running the meta, then allocation / the in-place checks / the out=
 * checks, then the impl; the out= op's Autograd kernel refuses grad; the
 * Lua binding picks add.out by its out option. */
START_TEST(test_codegen_structured_fixture) {
    run_result r;
    run_codegen(&r, "st_ops.yaml", NULL);
    ck_assert_msg(r.status == 0, "codegen failed: %s", r.err);
    assert_compiles(&r);
    char *d = slurp(&r, "gen/em_kernels_decl.h");
    ck_assert_ptr_nonnull(strstr(d, "EM_HIDDEN em_status em_meta_add(em_meta *m, em_tensor *self, em_tensor *other, "
                                    "em_scalar alpha);"));
    ck_assert_ptr_nonnull(strstr(d, "EM_HIDDEN em_status em_cpu_add_impl(em_keyset ks, const em_meta *m, "
                                    "em_tensor *self, em_tensor *other, em_scalar alpha, em_tensor *out);"));
    ck_assert_ptr_nonnull(strstr(d, "em_tensor *em_cpu_add_out(em_keyset ks, em_tensor *self, em_tensor *other, "
                                    "em_scalar alpha, em_tensor *out);"));
    free(d);
    char *c = slurp(&r, "gen/em_structured.c");
    const char *fn = strstr(c, "em_tensor *em_cpu_add(em_keyset ks");
    const char *ip = strstr(c, "em_tensor *em_cpu_add_(em_keyset ks");
    const char *out = strstr(c, "em_tensor *em_cpu_add_out(em_keyset ks");
    ck_assert_ptr_nonnull(fn);
    ck_assert_ptr_nonnull(ip);
    ck_assert_ptr_nonnull(out);
    /* functional: meta, alloc, impl (in that order, before the next wrapper) */
    const char *m1 = strstr(fn, "em_meta_add(&m, self, other, alpha)");
    const char *a1 = strstr(fn, "em_structured_alloc(&m)");
    const char *i1 = strstr(fn, "em_cpu_add_impl(ks, &m, self, other, alpha, r)");
    ck_assert(m1 && a1 && i1 && m1 < a1 && a1 < i1);
    ck_assert_ptr_nonnull(strstr(ip, "m.op = \"add_\";"));
    const char *c2 = strstr(ip, "em_structured_check_inplace(&m, self, in, 1)");
    const char *i2 = strstr(ip, "em_cpu_add_impl(ks, &m, self, other, alpha, self)");
    ck_assert(c2 && i2 && c2 < i2);
    ck_assert_ptr_nonnull(strstr(ip, "em_tensor_bump_version(self);"));
    const char *c3 = strstr(out, "em_structured_check_out(&m, out, in, 2)");
    const char *i3 = strstr(out, "em_cpu_add_impl(ks, &m, self, other, alpha, out)");
    ck_assert(c3 && i3 && c3 < i3);
    ck_assert_ptr_nonnull(strstr(out, "return em_tensor_retain(out);"));
    free(c);
    char *o = slurp(&r, "gen/em_ops.c");
    ck_assert_ptr_nonnull(strstr(o, "[EM_KEY_CPU] = (void *)em_cpu_add_out"));
    free(o);
    char *g = slurp(&r, "gen/em_autograd_gen.c");
    ck_assert_ptr_nonnull(strstr(g, "add: out= arguments don't support automatic differentiation"));
    free(g);
    char *l = slurp(&r, "gen/em_lua_ops.c");
    ck_assert_ptr_nonnull(strstr(l, "if (match_add_out(L))\n        return l_add_out(L);\n"
                                    "    (void)schemas;\n    return l_add(L);"));
    free(l);
    cleanup(&r);
}
END_TEST

START_TEST(test_codegen_multi_fixture) {
    run_result r;
    run_codegen(&r, "multi_ops.yaml", "multi_derivs.yaml");
    ck_assert_msg(r.status == 0, "codegen failed: %s", r.err);
    ck_assert_str_eq(r.err, "");
    assert_compiles(&r);
    char *h = slurp(&r, "gen/em_ops.h");
    ck_assert_ptr_nonnull(strstr(h, "EM_OP_mx_dim,"));
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_mx_dim(em_tensor *self, int64_t dim, bool keepdim, "
                                    "em_tensor **indices);"));
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor **em_parts(em_tensor *self, int64_t count, int64_t dim, "
                                    "int *nresults);"));
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_join(em_tensorlist tensors, int64_t dim);"));
    ck_assert_ptr_nonnull(strstr(h, "typedef em_tensor **(*em_kfn_parts)("));
    free(h);
    char *c = slurp(&r, "gen/em_ops.c");
    ck_assert_ptr_nonnull(strstr(c, "*indices = take_ret(&st, 1);")); /* boxed: every result */
    ck_assert_ptr_nonnull(strstr(c, "return put_results(op, st, rv, outs, 2);"));
    ck_assert_ptr_nonnull(strstr(c, "return put_list_result(op, st, rv, nres);"));
    ck_assert_ptr_nonnull(strstr(c, "st.args[0] = iv_tensorlist(tensors);"));
    ck_assert_ptr_nonnull(strstr(c, "\"join: argument 'tensors' element %d is NULL\""));
    free(c);
    char *l = slurp(&r, "gen/em_lua_ops.c");
    ck_assert_ptr_nonnull(strstr(l, "static int lo_mx(lua_State *L)"));
    ck_assert_ptr_nonnull(strstr(l, "    if (match_mx(L))\n        return l_mx(L);\n"
                                    "    if (match_mx_dim(L))\n        return l_mx_dim(L);\n"));
    ck_assert_ptr_nonnull(strstr(l, "{ \"mx\", lo_mx },"));
    ck_assert_ptr_null(strstr(l, "{ \"mx_dim\","));
    ck_assert_ptr_nonnull(strstr(l, "em_lua_push_results(L, r, outs, 2, \"mx\");"));
    ck_assert_ptr_nonnull(strstr(l, "em_lua_push_tensor_array(L, r, nresults, \"parts\");"));
    ck_assert_ptr_nonnull(strstr(l, "a_tensors = em_lua_check_tensorlist(L, i_tensors, \"join\", \"tensors\");"));
    free(l);
    char *a = slurp(&r, "gen/em_autograd_gen.c");
    /* two results: two gradient slots; indices not differentiable but saved */
    ck_assert_ptr_nonnull(strstr(a, "em_node_new(sizeof *n, &vt_mx_dim, 2, 1)"));
    ck_assert_ptr_nonnull(strstr(a, "em_saved_save(&n->result1_, *indices, false) != EM_OK"));
    ck_assert_ptr_null(strstr(a, "em_set_history(*indices"));
    /* an undefined gradient the formula needs becomes zeros */
    ck_assert_ptr_nonnull(strstr(a, "if (!gk1 && !(gk1 = em_ag_tmp(em_ag_zeros_from_meta(&em_node_input_meta(node)[1]))))"));
    ck_assert_ptr_nonnull(strstr(a, "em_set_history(*b, node, 1)"));
    /* a Tensor[] argument: one edge per element, a formula per element */
    ck_assert_ptr_nonnull(strstr(a, "em_node_new(sizeof *n, &vt_join, 1, tensors.n)"));
    ck_assert_ptr_nonnull(strstr(a, "for (int64_t i = 0; i < n->tensors_n; i++) {"));
    ck_assert_ptr_nonnull(strstr(a, "em_ag_fn_cat_grad(grad, n->tensors_meta, n->dim, i)"));
    /* a Tensor[] result: one slot per element, the list of gradients */
    ck_assert_ptr_nonnull(strstr(a, "em_node_new(sizeof *n, &vt_parts, nr, 1)"));
    ck_assert_ptr_nonnull(strstr(a, "em_ag_fn_split_backward(grads, node->num_inputs, em_node_input_meta(node), "
                                    "&n->self_meta, n->dim)"));
    free(a);
    cleanup(&r);
}
END_TEST

/* int[]?, ScalarType? and str{...} (types_ops.yaml): C types, the binding's
 * set check, the entry's check for C callers, the node keeping a str. */
START_TEST(test_codegen_types_fixture) {
    run_result r;
    run_codegen(&r, "types_ops.yaml", "types_derivs.yaml");
    ck_assert_msg(r.status == 0, "codegen failed: %s", r.err);
    assert_compiles(&r);
    char *h = slurp(&r, "gen/em_ops.h");
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_reduce(em_tensor *self, em_intlist sizes, em_dtype dtype, "
                                    "const char *reduction);"));
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_quant(em_tensor *self, em_floatlist q);"));
    free(h);
    char *c = slurp(&r, "gen/em_ops.c");
    ck_assert_ptr_nonnull(strstr(c, "if (!reduction || !(strcmp(reduction, \"mean\") == 0 || strcmp(reduction, "
                                    "\"sum\") == 0 || strcmp(reduction, \"none\") == 0)) {"));
    ck_assert_ptr_nonnull(strstr(c, "\"reduce: argument 'reduction' must be one of: mean, sum, none (got '%s')\""));
    ck_assert_ptr_nonnull(strstr(c, "st.args[3] = iv_str(reduction);"));
    ck_assert_ptr_nonnull(strstr(c, "un_flist(st, 1, op->name, \"q\", &q)"));
    ck_assert_ptr_nonnull(strstr(c, "un_list(st, 1, op->name, \"sizes\", true, &sizes)"));
    free(c);
    char *l = slurp(&r, "gen/em_lua_ops.c");
    ck_assert_ptr_nonnull(strstr(l, "static const char *const ch_reduction[] = { \"mean\", \"sum\", \"none\", NULL };\n"
                                    "    const char *a_reduction = ch_reduction[0];"));
    ck_assert_ptr_nonnull(strstr(l, "a_reduction = em_lua_check_choice(L, i_reduction, \"reduce\", \"reduction\", "
                                    "ch_reduction);"));
    ck_assert_ptr_nonnull(strstr(l, "em_intlist a_sizes = { NULL, -1 };"));
    ck_assert_ptr_nonnull(strstr(l, "const char *a_which = NULL;"));
    ck_assert_ptr_nonnull(strstr(l, "em_floatlist a_q = { NULL, -1 };"));
    ck_assert_ptr_nonnull(strstr(l, "a_q = em_lua_check_floatlist(L, i_q, \"quant\", \"q\");"));
    free(l);
    char *a = slurp(&r, "gen/em_autograd_gen.c");
    ck_assert_ptr_nonnull(strstr(a, "char reduction[64];"));
    ck_assert_ptr_nonnull(strstr(a, "snprintf(n->reduction, sizeof n->reduction, \"%s\", reduction);"));
    ck_assert_ptr_nonnull(strstr(a, "em_reduce(grad, ((em_intlist){ n->sizes, n->sizes_n }), n->dtype, n->reduction)"));
    free(a);
    cleanup(&r);
}
END_TEST

/* Note [Schema files]: ops, overloads and formulas spread over files; an op
 * defined twice names both files. */
START_TEST(test_codegen_schema_files) {
    run_result r;
    run_codegen(&r, "files_a.yaml+files_b.yaml", "files_derivs_b.yaml");
    ck_assert_msg(r.status == 0, "codegen failed on two files: %s", r.err);
    char *h = slurp(&r, "gen/em_ops.h");
    ck_assert_ptr_nonnull(strstr(h, "em_tensor *em_square(em_tensor *self);"));
    ck_assert_ptr_nonnull(strstr(h, "em_tensor *em_max_other(em_tensor *self, em_tensor *other);"));
    free(h);
    char *a = slurp(&r, "gen/em_autograd_gen.c");
    ck_assert_ptr_nonnull(strstr(a, "} SquareBackward;"));
    free(a);
    char *m = slurp(&r, "man/ember-ops.7");
    ck_assert_ptr_nonnull(strstr(m, "from the second file"));
    free(m);
    cleanup(&r);

    run_codegen(&r, "files_a.yaml+files_dup.yaml", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "files_dup.yaml:1: duplicate op 'mul' (first defined at ") &&
                  strstr(r.err, "files_a.yaml:4)"), "%s", r.err);
    cleanup(&r);
}
END_TEST

START_TEST(test_codegen_real_schema) {
    run_result r;
    run_codegen(&r, "schema/ops.yaml", "schema/derivatives.yaml");
    ck_assert_msg(r.status == 0, "codegen failed on the real schema: %s", r.err);
    char *h = slurp(&r, "gen/em_ops.h");
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_add(em_tensor *self, em_tensor *other, em_scalar alpha);"));
    ck_assert_ptr_nonnull(strstr(h, "em_redispatch_add_("));
    free(h);
    char *m = slurp(&r, "man/ember-ops.7");
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(strstr(m, "x:permute(dims)"));
    free(m);
    char *a = slurp(&r, "gen/em_autograd_gen.c");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(strstr(a, "} MulBackward;"));
    ck_assert_ptr_nonnull(strstr(a, "em_tensor *em_ag_k_mul(em_keyset ks, em_tensor *self, em_tensor *other)"));
    ck_assert_ptr_nonnull(strstr(a, "/* other: grad * self */"));
    free(a);
    char *c = slurp(&r, "gen/em_ops.c");
    ck_assert_ptr_nonnull(strstr(c, "[EM_KEY_AUTOGRAD] = (void *)em_ag_k_mul }"));
    free(c);
    char *l = slurp(&r, "gen/em_lua_ops.c");
    char *list = strstr(l, "em_lua_differentiable_ops[] = {");
    ck_assert_ptr_nonnull(list);
    ck_assert_ptr_nonnull(strstr(list, "\"matmul\","));
    ck_assert_ptr_null(strstr(list, "\"eq\""));
    /* metamethods run the ops' C entry; composites sit at every key; namespaces */
    ck_assert_ptr_nonnull(strstr(l, "{ \"__add\", mm_add },"));
    ck_assert_ptr_nonnull(strstr(l, "{ \"__unm\", mm_neg },"));
    ck_assert_ptr_nonnull(strstr(l, "em_tensor *r = em_add(a_self, a_other, a_alpha);"));
    ck_assert_ptr_nonnull(strstr(l, "{ \"nn.functional\", \"linear\", l_linear },"));
    free(l);
    c = slurp(&r, "gen/em_ops.c");
    ck_assert_ptr_nonnull(strstr(c, "[EM_KEY_AUTOGRAD] = (void *)em_comp_linear"));
    free(c);
    cleanup(&r);
}
END_TEST

START_TEST(test_codegen_derivatives_good) {
    run_result r;
    run_codegen(&r, "deriv_ops.yaml", "deriv_good.yaml");
    ck_assert_msg(r.status == 0, "codegen failed: %s", r.err);
    cleanup(&r);
}
END_TEST

/* Device, Device? and Generator?: C types, validation and the factory's
 * key in the entry, boxing, and the Lua parsers. */
START_TEST(test_codegen_device_types) {
    run_result r;
    run_codegen(&r, "schema/ops.yaml", "schema/derivatives.yaml");
    ck_assert_msg(r.status == 0, "codegen failed on the real schema: %s", r.err);
    char *h = slurp(&r, "gen/em_ops.h");
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_zeros(em_intlist size, em_dtype dtype, em_device device);"));
    ck_assert_ptr_nonnull(strstr(h, "EM_API em_tensor *em_rand(em_intlist size, em_generator *generator, "
                                    "em_dtype dtype, em_device device);"));
    free(h);
    char *c = slurp(&r, "gen/em_ops.c");
    ck_assert_ptr_nonnull(strstr(c, "    if (!em_device_resolve(device, &device, \"zeros\"))\n        return NULL;\n"
                                    "    ks = EM_KS(em_backend_key(device)); /* a factory: the device's backend */"));
    ck_assert_ptr_nonnull(strstr(c, "    ks |= EM_KS(em_backend_key(device));\n"
                                    "    ks = em_disp_compute(&em_op_table[EM_OP_to_device], ks);"));
    ck_assert_ptr_nonnull(strstr(c, "em_iv_device(device)"));
    ck_assert_ptr_nonnull(strstr(c, "em_iv_generator(generator)"));
    ck_assert_ptr_nonnull(strstr(c, "em_un_generator(st, 1, &generator)"));
    free(c);
    char *l = slurp(&r, "gen/em_lua_ops.c");
    ck_assert_ptr_nonnull(strstr(l, "a_device = em_lua_check_device(L, i_device, \"zeros\", \"device\");"));
    ck_assert_ptr_nonnull(strstr(l, "a_generator = em_lua_check_generator(L, i_generator, \"randn\", \"generator\");"));
    free(l);
    cleanup(&r);
}
END_TEST

/* ---- errors: FILE:LINE: message, non-zero exit, nothing written ---- */

typedef struct {
    const char *ops, *derivs; /* fixture files */
    const char *where;        /* "FILE:LINE:" expected in stderr */
    const char *message;      /* expected in stderr */
} bad_case;

static const bad_case bad_cases[] = {
    { "bad_yaml.yaml", NULL, "bad_yaml.yaml:4:", "malformed YAML" },
    { "unknown_type.yaml", NULL, "unknown_type.yaml:2:",
      "unknown type 'Tensr' (known types: Tensor, Tensor?, Scalar" },
    { "missing_doc.yaml", NULL, "missing_doc.yaml:7:", "op 'abs' has no 'doc'" },
    { "bad_default.yaml", NULL, "bad_default.yaml:2:",
      "bad default '3' for argument 'keepdim' of type bool" },
    { "bad_device_default.yaml", NULL, "bad_device_default.yaml:2:",
      "bad default 'None' for argument 'device' of type Device: expected no default" },
    { "dup_op.yaml", NULL, "dup_op.yaml:6:", "duplicate op 'neg'" },
    { "unknown_key.yaml", NULL, "unknown_key.yaml:3:", "unknown key 'kernal'" },
    { "unknown_dispatch_key.yaml", NULL, "unknown_dispatch_key.yaml:3:", "unknown dispatch key 'CPUU'" },
    { "missing_func.yaml", NULL, "missing_func.yaml:2:", "without 'func'" },
    { "missing_kernels.yaml", NULL, "missing_kernels.yaml:2:", "op 'neg' has no 'kernels'" },
    { "bad_signature.yaml", NULL, "bad_signature.yaml:2:", "expected ','" },
    { "deriv_ops.yaml", "deriv_bad_name.yaml", "deriv_bad_name.yaml:2:", "does not match ops.yaml exactly" },
    { "deriv_ops.yaml", "deriv_bad_arg.yaml", "deriv_bad_arg.yaml:4:", "'othr' is not an argument of mul" },
    { "deriv_ops.yaml", "deriv_not_tensor.yaml", "deriv_not_tensor.yaml:4:", "not a Tensor" },
    { "deriv_ops.yaml", "deriv_unknown_ident.yaml", "deriv_unknown_ident.yaml:4:",
      "formula for 'other' of mul: unknown identifier 'othr' (known: grad, result, self, other" },
    { "deriv_ops.yaml", "deriv_bad_syntax.yaml", "deriv_bad_syntax.yaml:3:",
      "formula for 'self' of mul: expected a number, a name or '(' at 'the end'" },
    { "deriv_ops.yaml", "deriv_unknown_fn.yaml", "deriv_unknown_fn.yaml:4:",
      "unknown function 'frobnicate' (not an op of" },
    { "deriv_ops.yaml", "deriv_bad_call.yaml", "deriv_bad_call.yaml:3:",
      "argument 2 of pow ('exponent', a Scalar) cannot take a tensor expression" },
    { "deriv_ops.yaml", "deriv_bad_save.yaml", "deriv_bad_save.yaml:5:",
      "save: the formulas of mul use 'other' but save does not list it" },
    { "deriv_ops.yaml", "deriv_no_op.yaml", "deriv_no_op.yaml:3:",
      "the formula needs op 'sub' (for its arithmetic)" },
    { "bad_metamethod.yaml", NULL, "bad_metamethod.yaml:4:", "op 'neg': unknown metamethod '__plus'" },
    { "bad_lua_result.yaml", NULL, "bad_lua_result.yaml:4:", "op 'same': lua_result must be 'boolean'" },
    { "lua_result_inplace.yaml", NULL, "lua_result_inplace.yaml:4:",
      "op 'same_': lua_result: boolean needs one Tensor result" },
    { "metamethod_signature.yaml", NULL, "metamethod_signature.yaml:4:",
      "op 'neg' cannot be metamethod __add: it needs 2 positional Tensor arguments first" },
    { "metamethod_twice.yaml", NULL, "metamethod_twice.yaml:7:", "metamethod __unm given to 'neg' and 'neg2'" },
    { "composite_mixed.yaml", NULL, "composite_mixed.yaml:3:",
      "op 'neg': a Composite kernel is the op's only kernel" },
    { "bad_namespace.yaml", NULL, "bad_namespace.yaml:4:",
      "op 'neg': namespace 'nn..functional' is not a dotted Lua name" },
    { "namespace_method_only.yaml", NULL, "namespace_method_only.yaml:5:",
      "op 'neg': a namespace places the function variant, but the op has none" },
    { "composite_ops.yaml", "deriv_composite.yaml", "deriv_composite.yaml:2:",
      "'square' is a composite op" },
    /* structured families */
    { "st_no_target.yaml", NULL, "st_no_target.yaml:5:", "op 'add': structured_delegate 'add.outt' names no op" },
    { "st_not_structured.yaml", NULL, "st_not_structured.yaml:9:",
      "structured_delegate 'add.out' is not structured (it has no 'structured: em_meta_...' key)" },
    { "st_bad_meta.yaml", NULL, "st_bad_meta.yaml:4:", "structured names its meta function, a C name" },
    { "st_not_out.yaml", NULL, "st_not_out.yaml:4:", "structured op 'add' must be an out= overload" },
    { "st_delegate_kernels.yaml", NULL, "st_delegate_kernels.yaml:10:",
      "op 'add' has 'structured_delegate' and 'kernels'" },
    { "st_args.yaml", NULL, "st_args.yaml:9:", "op 'add' must take the arguments of 'add.out' without out" },
    { "st_impl_name.yaml", NULL, "st_impl_name.yaml:4:", "impl 'em_cpu_add_out' has the name of the generated CPU kernel" },
    { "st_ops.yaml", "deriv_st_out.yaml", "deriv_st_out.yaml:2:",
      "'add_out' is the out= op of a structured family: out= variants record nothing" },
    /* str{...} */
    { "bad_str_default.yaml", NULL, "bad_str_default.yaml:2:",
      "bad default '\"avg\"' for argument 'reduction' of type str{...}: expected one of the str type's values" },
    { "bad_str_set.yaml", NULL, "bad_str_set.yaml:3:", "expected a value of the str type (an identifier)" },
    { "bad_str_twice.yaml", NULL, "bad_str_twice.yaml:2:", "str value 'mean' listed twice" },
    { "types_ops.yaml", "deriv_floatlist.yaml", "deriv_floatlist.yaml:3:",
      "'q' is a float[]? argument, which formulas cannot use" },
    /* overloads, several results, lists */
    { "bad_overload.yaml", NULL, "bad_overload.yaml:2:", "expected an overload name after 'neg.'" },
    { "bad_ret_one.yaml", NULL, "bad_ret_one.yaml:2:", "a tuple of results needs at least two" },
    { "bad_ret_type.yaml", NULL, "bad_ret_type.yaml:2:",
      "result 2 is 'int': each result of a tuple must be a plain Tensor" },
    { "bad_overload_variants.yaml", NULL, "bad_overload_variants.yaml:6:",
      "overload 'neg_dim' of 'neg' has other variants than the one at line 2" },
    { "bad_list_and_tensor.yaml", NULL, "bad_list_and_tensor.yaml:2:",
      "an op with a Tensor[] argument may have no other Tensor" },
    { "bad_list_default.yaml", NULL, "bad_list_default.yaml:2:",
      "argument 'tensors' of type Tensor[] cannot have a default" },
    { "bad_optlist_not_composite.yaml", NULL, "bad_optlist_not_composite.yaml:2:",
      "op 'put': a Tensor?[] argument needs a Composite kernel" },
    { "bad_optlist_and_list.yaml", NULL, "bad_optlist_and_list.yaml:2:",
      "an op with a Tensor[] argument may have no other Tensor" },
    { "bad_type_name.yaml", NULL, "bad_type_name.yaml:2:", "would make C function em_stack, which is a runtime type" },
    { "multi_ops.yaml", "deriv_multi_grad.yaml", "deriv_multi_grad.yaml:3:",
      "two has 2 results: name grads[k] and results[k] (0-based), not 'grad'" },
    { "multi_ops.yaml", "deriv_multi_range.yaml", "deriv_multi_range.yaml:3:",
      "grads[2] is out of range: two has 2 results, grads[0] .. grads[1]" },
    { "multi_ops.yaml", "deriv_multi_nondiff.yaml", "deriv_multi_nondiff.yaml:3:",
      "grads[1] is the gradient of result 'indices', which output_differentiability marks not differentiable" },
    { "multi_ops.yaml", "deriv_multi_outdiff.yaml", "deriv_multi_outdiff.yaml:3:",
      "output_differentiability of mx_dim must be a list with one flag per result (2)" },
    { "multi_ops.yaml", "deriv_elem_index.yaml", "deriv_elem_index.yaml:3:",
      "'i' (the element index) is only known in the formula of a Tensor[] argument" },
    { "multi_ops.yaml", "deriv_list_grads.yaml", "deriv_list_grads.yaml:3:",
      "parts returns a Tensor[]: pass the list 'grads' to a helper, not 'grad'" },
};

START_TEST(test_codegen_errors) {
    const bad_case *c = &bad_cases[_i];
    run_result r;
    run_codegen(&r, c->ops, c->derivs);
    ck_assert_msg(r.status == 1, "%s: exit status %d, expected 1", c->ops, r.status);
    ck_assert_msg(strstr(r.err, c->where) != NULL, "%s: stderr lacks '%s': %s", c->ops, c->where, r.err);
    ck_assert_msg(strstr(r.err, c->message) != NULL, "%s: stderr lacks '%s': %s", c->ops, c->message,
                  r.err);
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++)
        ck_assert_msg(!exists(&r, outputs[i]), "%s written despite the error", outputs[i]);
    cleanup(&r);
}
END_TEST

Suite *make_codegen_suite(void) {
    Suite *s = suite_create("codegen");
    TCase *core = tcase_create("core");
    tcase_set_timeout(core, 60); /* one test runs the C compiler */
    tcase_add_test(core, test_codegen_good_min_writes_all_files);
    tcase_add_test(core, test_codegen_good_min_compiles);
    tcase_add_test(core, test_codegen_real_schema);
    tcase_add_test(core, test_codegen_device_types);
    tcase_add_test(core, test_codegen_derivatives_good);
    tcase_add_test(core, test_codegen_autograd_fixture);
    tcase_add_test(core, test_codegen_multi_fixture);
    tcase_add_test(core, test_codegen_structured_fixture);
    tcase_add_test(core, test_codegen_types_fixture);
    tcase_add_test(core, test_codegen_schema_files);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("errors");
    tcase_add_loop_test(errors, test_codegen_errors, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    suite_add_tcase(s, errors);
    return s;
}
