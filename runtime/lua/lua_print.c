/* lua_print.c -- __tostring for tensors, formatted as PyTorch prints them:
 * tensor([[1.5000, 2.0000], ...]) with a common format per tensor.
 *
 * The rules follow torch/_tensor_str.py (by default precision 4, line width
 * 80, summarised beyond 1000 elements with 3 items at each edge; each Lua
 * state keeps its own options, set by ember.set_printoptions):
 *   - floating tensors whose finite values are all integers print as "1.";
 *   - otherwise fixed "%.4f", or "%.4e" for every value when the nonzero
 *     finite magnitudes span more than 1000x, exceed 1e8 or go below 1e-4;
 *   - integer tensors print plainly, bool as True/False;
 *   - every value is right-aligned to the widest one;
 *   - dtype is shown unless float32, int64 or bool (always for empty
 *     tensors unless float32), like PyTorch's default-dtype rule;
 *   - then grad_fn=<MulBackward> for a result with history, or
 *     requires_grad=True for a leaf that requires grad.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_int.h"

/* ---- options (ember.set_printoptions), one set per Lua state ---- */

typedef struct {
    int precision;     /* digits after the point */
    int linewidth;     /* characters per line */
    int64_t threshold; /* more elements than this are summarised */
    int edgeitems;     /* items shown at each edge when summarised */
    int sci_mode;      /* -1: automatic, 0: never, 1: always */
} printopts;

static const printopts default_opts = { 4, 80, 1000, 3, -1 };
static const char OPTS_KEY[] = "ember.printoptions";

/* This state's options (created with the defaults on first use). */
static printopts *get_opts(lua_State *L) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, OPTS_KEY) != LUA_TUSERDATA) {
        lua_pop(L, 1);
        printopts *o = lua_newuserdatauv(L, sizeof *o, 0);
        *o = default_opts;
        lua_setfield(L, LUA_REGISTRYINDEX, OPTS_KEY);
        return o;
    }
    printopts *o = lua_touserdata(L, -1);
    lua_pop(L, 1); /* anchored in the registry */
    return o;
}

/* Reads integer option `key` of the table at 1 into *v (kept when absent),
 * checking lo <= value <= hi. */
static void opt_int(lua_State *L, const char *key, int64_t lo, int64_t hi, int64_t *v) {
    int t = lua_getfield(L, 1, key);
    if (t != LUA_TNIL) {
        if (!lua_isinteger(L, -1))
            em_lua_raise(L, "set_printoptions: %s must be an integer, got %s", key, luaL_typename(L, -1));
        lua_Integer x = lua_tointeger(L, -1);
        if (x < lo || x > hi)
            em_lua_raise(L, "set_printoptions: %s must be in [%I, %I], got %I", key, (lua_Integer)lo,
                         (lua_Integer)hi, (lua_Integer)x);
        *v = x;
    }
    lua_pop(L, 1);
}

/* ember.set_printoptions{precision=, threshold=, edgeitems=, linewidth=,
 * sci_mode=, profile=}: PyTorch's options; profile "default", "short" or
 * "full" first resets them as PyTorch's profiles do; sci_mode = nil (in
 * the table, or the string "auto") is automatic. */
int em_lua_set_printoptions(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    printopts *o = get_opts(L), n = *o;
    if (lua_getfield(L, 1, "profile") != LUA_TNIL) {
        const char *p = lua_tostring(L, -1);
        if (p && strcmp(p, "default") == 0) n = default_opts;
        else if (p && strcmp(p, "short") == 0) n = (printopts){ 2, 80, 1000, 2, -1 };
        else if (p && strcmp(p, "full") == 0) n = (printopts){ 4, 80, INT64_MAX, 3, -1 };
        else
            return em_lua_raise(L, "set_printoptions: profile must be \"default\", \"short\" or \"full\", got %s",
                                p ? p : luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    int64_t v;
    v = n.precision; opt_int(L, "precision", 0, 30, &v); n.precision = (int)v;
    v = n.linewidth; opt_int(L, "linewidth", 1, 100000, &v); n.linewidth = (int)v;
    v = n.threshold; opt_int(L, "threshold", 0, INT64_MAX, &v); n.threshold = v;
    v = n.edgeitems; opt_int(L, "edgeitems", 1, 1000, &v); n.edgeitems = (int)v;
    int t = lua_getfield(L, 1, "sci_mode");
    if (t == LUA_TBOOLEAN) n.sci_mode = lua_toboolean(L, -1);
    else if (t == LUA_TSTRING && strcmp(lua_tostring(L, -1), "auto") == 0) n.sci_mode = -1;
    else if (t != LUA_TNIL)
        return em_lua_raise(L, "set_printoptions: sci_mode must be true, false or \"auto\", got %s",
                            luaL_typename(L, -1));
    lua_pop(L, 1);
    lua_pushnil(L); /* unknown keys are errors, as PyTorch's keyword arguments */
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        static const char *const known[] = { "precision", "threshold", "edgeitems", "linewidth", "sci_mode",
                                              "profile", NULL };
        bool ok = false;
        for (int i = 0; known[i] && !ok; i++) ok = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), known[i]) == 0;
        if (!ok)
            return em_lua_raise(L, "set_printoptions: unknown option '%s' (precision, threshold, edgeitems, "
                                   "linewidth, sci_mode, profile)", luaL_tolstring(L, -1, NULL));
    }
    *o = n;
    return 0;
}

/* ember.get_printoptions(): the current options as a table. */
int em_lua_get_printoptions(lua_State *L) {
    const printopts *o = get_opts(L);
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, o->precision);
    lua_setfield(L, -2, "precision");
    lua_pushinteger(L, o->threshold);
    lua_setfield(L, -2, "threshold");
    lua_pushinteger(L, o->edgeitems);
    lua_setfield(L, -2, "edgeitems");
    lua_pushinteger(L, o->linewidth);
    lua_setfield(L, -2, "linewidth");
    if (o->sci_mode < 0) lua_pushliteral(L, "auto");
    else lua_pushboolean(L, o->sci_mode);
    lua_setfield(L, -2, "sci_mode");
    return 1;
}

typedef struct {
    printopts o;
    const em_tensor *t;
    size_t esize;
    bool summarize;
    bool floating, int_mode, sci_mode;
    int width;
    /* formatter statistics */
    bool any_nonzero;
    double nz_min, nz_max;
} printer;

/* ---- visiting the printed elements ---- */

typedef void (*visit_fn)(printer *pr, const char *p);

static void visit(printer *pr, const char *p, int d, visit_fn fn) {
    const em_tensor *t = pr->t;
    if (d == t->ndim) {
        fn(pr, p);
        return;
    }
    int64_t n = t->sizes[d], step = t->strides[d] * (int64_t)pr->esize;
    if (pr->summarize && n > 2 * pr->o.edgeitems) {
        for (int64_t i = 0; i < pr->o.edgeitems; i++) visit(pr, p + i * step, d + 1, fn);
        for (int64_t i = n - pr->o.edgeitems; i < n; i++) visit(pr, p + i * step, d + 1, fn);
    } else {
        for (int64_t i = 0; i < n; i++) visit(pr, p + i * step, d + 1, fn);
    }
}

/* ---- formatting one value ---- */

/* Writes the value at p, unpadded, into buf (at least 64 bytes). */
static int format_raw(const printer *pr, const char *p, char *buf, size_t n) {
    em_dtype dt = pr->t->dtype;
    if (dt == EM_BOOL) return snprintf(buf, n, "%s", *(const bool *)p ? "True" : "False");
    if (!pr->floating) return snprintf(buf, n, "%lld", (long long)em_load_as_int64(p, dt));
    double v = em_load_as_double(p, dt);
    if (isnan(v)) return snprintf(buf, n, "nan");
    if (isinf(v)) return snprintf(buf, n, "%s", v > 0 ? "inf" : "-inf");
    if (pr->sci_mode) return snprintf(buf, n, "%.*e", pr->o.precision, v);
    if (pr->int_mode) return snprintf(buf, n, "%.0f.", v);
    return snprintf(buf, n, "%.*f", pr->o.precision, v);
}

static void stats_fn(printer *pr, const char *p) {
    if (!pr->floating) return;
    double v = em_load_as_double(p, pr->t->dtype);
    if (!isfinite(v) || v == 0) return;
    double a = fabs(v);
    if (!pr->any_nonzero) {
        pr->nz_min = pr->nz_max = a;
        pr->any_nonzero = true;
    } else {
        if (a < pr->nz_min) pr->nz_min = a;
        if (a > pr->nz_max) pr->nz_max = a;
    }
    if (v != ceil(v)) pr->int_mode = false;
}

static void width_fn(printer *pr, const char *p) {
    char buf[64];
    if (pr->floating) {
        double v = em_load_as_double(p, pr->t->dtype);
        if (!isfinite(v) || v == 0) return; /* PyTorch sizes by nonzero finite values */
    }
    int w = format_raw(pr, p, buf, sizeof buf);
    if (w > pr->width) pr->width = w;
}

static void setup(printer *pr, const em_tensor *t, const printopts *o) {
    memset(pr, 0, sizeof *pr);
    pr->o = *o;
    pr->t = t;
    pr->esize = em_dtype_size(t->dtype);
    pr->summarize = t->numel > o->threshold;
    pr->floating = em_dtype_is_floating(t->dtype);
    pr->int_mode = true;
    pr->width = 1;
    const char *base = (const char *)em_tensor_data(t);
    if (pr->floating) {
        visit(pr, base, 0, stats_fn);
        double ratio = pr->any_nonzero ? pr->nz_max / pr->nz_min : 1.0;
        if (o->sci_mode >= 0)
            pr->sci_mode = o->sci_mode;
        else if (pr->any_nonzero && pr->int_mode)
            pr->sci_mode = ratio > 1000.0 || pr->nz_max > 1.0e8;
        else if (pr->any_nonzero)
            pr->sci_mode = ratio > 1000.0 || pr->nz_max > 1.0e8 || pr->nz_min < 1.0e-4;
    }
    visit(pr, base, 0, width_fn);
}

static void add_value(luaL_Buffer *b, const printer *pr, const char *p) {
    char buf[64];
    int w = format_raw(pr, p, buf, sizeof buf);
    for (int i = w; i < pr->width; i++) luaL_addchar(b, ' ');
    luaL_addstring(b, buf);
}

static void add_spaces(luaL_Buffer *b, int n) {
    for (int i = 0; i < n; i++) luaL_addchar(b, ' ');
}

/* ---- nested brackets ---- */

static void add_vector(luaL_Buffer *b, const printer *pr, const char *p, int d, int indent) {
    const em_tensor *t = pr->t;
    int64_t n = t->sizes[d], step = t->strides[d] * (int64_t)pr->esize;
    int per_line = (pr->o.linewidth - indent) / (pr->width + 2);
    if (per_line < 1) per_line = 1;
    bool cut = pr->summarize && n > 2 * pr->o.edgeitems;
    int64_t items = cut ? 2 * pr->o.edgeitems + 1 : n;
    luaL_addchar(b, '[');
    for (int64_t k = 0; k < items; k++) {
        if (k > 0) {
            if (k % per_line == 0) {
                luaL_addstring(b, ",\n");
                add_spaces(b, indent + 1);
            } else {
                luaL_addstring(b, ", ");
            }
        }
        if (cut && k == pr->o.edgeitems) {
            luaL_addstring(b, " ...");
            continue;
        }
        int64_t i = cut && k > pr->o.edgeitems ? n - (items - k) : k;
        add_value(b, pr, p + i * step);
    }
    luaL_addchar(b, ']');
}

static void add_tensor(luaL_Buffer *b, const printer *pr, const char *p, int d, int indent) {
    const em_tensor *t = pr->t;
    int rem = t->ndim - d;
    if (rem == 0) {
        add_value(b, pr, p);
        return;
    }
    if (rem == 1) {
        add_vector(b, pr, p, d, indent);
        return;
    }
    int64_t n = t->sizes[d], step = t->strides[d] * (int64_t)pr->esize;
    bool cut = pr->summarize && n > 2 * pr->o.edgeitems;
    int64_t items = cut ? 2 * pr->o.edgeitems + 1 : n;
    luaL_addchar(b, '[');
    for (int64_t k = 0; k < items; k++) {
        if (k > 0) {
            luaL_addchar(b, ',');
            for (int j = 0; j < rem - 1; j++) luaL_addchar(b, '\n');
            add_spaces(b, indent + 1);
        }
        if (cut && k == pr->o.edgeitems) {
            luaL_addstring(b, "...");
            continue;
        }
        int64_t i = cut && k > pr->o.edgeitems ? n - (items - k) : k;
        add_tensor(b, pr, p + i * step, d + 1, indent + 1);
    }
    luaL_addchar(b, ']');
}

/* ---- the whole string ---- */

void em_lua_push_tensor_string(lua_State *L, const em_tensor *dev_t) {
    static const char prefix[] = "tensor(";
    const int indent = (int)sizeof prefix - 1;
    char suffix[4][EM_SHAPE_STR_MAX + 80];
    const printopts *opts = get_opts(L);
    int nsuffix = 0;
    /* the values come from a host copy (Note [Host copies] in lua_device.c),
     * held by Lua below the result so that an error cannot leak it */
    em_tensor *t = em_lua_host_tensor((em_tensor *)dev_t);
    em_lua_push_tensor(L, t, "tostring");
    int held = lua_gettop(L);
    if (dev_t->device.type != EM_CPU) { /* PyTorch: device='cuda:0' first */
        char d[EM_DEVICE_STR_MAX];
        snprintf(suffix[nsuffix++], sizeof suffix[0], "device='%s'",
                 em_device_str(dev_t->device, d, sizeof d));
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, prefix);
    if (t->numel == 0) {
        if (t->ndim != 1) {
            char shape[EM_SHAPE_STR_MAX];
            snprintf(suffix[nsuffix++], sizeof suffix[0], "size=%s",
                     em_shape_str(t->ndim, t->sizes, shape, sizeof shape));
        }
        if (t->dtype != EM_FLOAT32)
            snprintf(suffix[nsuffix++], sizeof suffix[0], "dtype=%s", em_dtype_name(t->dtype));
        luaL_addstring(&b, "[]");
    } else {
        if (t->dtype != EM_FLOAT32 && t->dtype != EM_INT64 && t->dtype != EM_BOOL)
            snprintf(suffix[nsuffix++], sizeof suffix[0], "dtype=%s", em_dtype_name(t->dtype));
        printer pr;
        setup(&pr, t, opts);
        add_tensor(&b, &pr, (const char *)em_tensor_data(t), 0, indent);
    }
    luaL_pushresult(&b);
    em_node *fn = em_grad_fn(dev_t);
    if (fn)
        snprintf(suffix[nsuffix++], sizeof suffix[0], "grad_fn=<%s>", em_node_name(fn));
    else if (em_requires_grad(dev_t))
        snprintf(suffix[nsuffix++], sizeof suffix[0], "requires_grad=True");
    /* suffixes go on a new line when the last line would pass the width */
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    const char *nl = strrchr(s, '\n');
    size_t last = nl ? (size_t)(s + len - nl) + 1 : len + 2; /* as PyTorch counts */
    for (int i = 0; i < nsuffix; i++) {
        size_t sl = strlen(suffix[i]);
        if (last + sl + 2 > (size_t)opts->linewidth) {
            luaL_Buffer nb;
            luaL_buffinit(L, &nb);
            luaL_addstring(&nb, ",\n");
            for (int j = 0; j < indent; j++) luaL_addchar(&nb, ' ');
            luaL_addstring(&nb, suffix[i]);
            luaL_pushresult(&nb);
            last = (size_t)indent + sl;
        } else {
            lua_pushfstring(L, ", %s", suffix[i]);
            last += sl + 2;
        }
        lua_concat(L, 2);
    }
    lua_pushliteral(L, ")");
    lua_concat(L, 2);
    lua_remove(L, held);
}
