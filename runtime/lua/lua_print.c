/* lua_print.c -- __tostring for tensors, formatted as PyTorch prints them:
 * tensor([[1.5000, 2.0000], ...]) with a common format per tensor.
 *
 * The rules follow torch/_tensor_str.py (precision 4, line width 80,
 * summarised beyond 1000 elements with 3 items at each edge):
 *   - floating tensors whose finite values are all integers print as "1.";
 *   - otherwise fixed "%.4f", or "%.4e" for every value when the nonzero
 *     finite magnitudes span more than 1000x, exceed 1e8 or go below 1e-4;
 *   - integer tensors print plainly, bool as True/False;
 *   - every value is right-aligned to the widest one;
 *   - dtype is shown unless float32, int64 or bool (always for empty
 *     tensors unless float32), like PyTorch's default-dtype rule.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lua/em_lua_int.h"

#define PRINT_PRECISION 4
#define PRINT_LINEWIDTH 80
#define PRINT_THRESHOLD 1000
#define PRINT_EDGEITEMS 3

typedef struct {
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
    if (pr->summarize && n > 2 * PRINT_EDGEITEMS) {
        for (int64_t i = 0; i < PRINT_EDGEITEMS; i++) visit(pr, p + i * step, d + 1, fn);
        for (int64_t i = n - PRINT_EDGEITEMS; i < n; i++) visit(pr, p + i * step, d + 1, fn);
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
    if (pr->sci_mode) return snprintf(buf, n, "%.*e", PRINT_PRECISION, v);
    if (pr->int_mode) return snprintf(buf, n, "%.0f.", v);
    return snprintf(buf, n, "%.*f", PRINT_PRECISION, v);
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

static void setup(printer *pr, const em_tensor *t) {
    memset(pr, 0, sizeof *pr);
    pr->t = t;
    pr->esize = em_dtype_size(t->dtype);
    pr->summarize = t->numel > PRINT_THRESHOLD;
    pr->floating = em_dtype_is_floating(t->dtype);
    pr->int_mode = true;
    pr->width = 1;
    const char *base = (const char *)em_tensor_data(t);
    if (pr->floating) {
        visit(pr, base, 0, stats_fn);
        if (!pr->any_nonzero) return;
        double ratio = pr->nz_max / pr->nz_min;
        if (pr->int_mode)
            pr->sci_mode = ratio > 1000.0 || pr->nz_max > 1.0e8;
        else
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
    int per_line = (PRINT_LINEWIDTH - indent) / (pr->width + 2);
    if (per_line < 1) per_line = 1;
    bool cut = pr->summarize && n > 2 * PRINT_EDGEITEMS;
    int64_t items = cut ? 2 * PRINT_EDGEITEMS + 1 : n;
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
        if (cut && k == PRINT_EDGEITEMS) {
            luaL_addstring(b, " ...");
            continue;
        }
        int64_t i = cut && k > PRINT_EDGEITEMS ? n - (items - k) : k;
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
    bool cut = pr->summarize && n > 2 * PRINT_EDGEITEMS;
    int64_t items = cut ? 2 * PRINT_EDGEITEMS + 1 : n;
    luaL_addchar(b, '[');
    for (int64_t k = 0; k < items; k++) {
        if (k > 0) {
            luaL_addchar(b, ',');
            for (int j = 0; j < rem - 1; j++) luaL_addchar(b, '\n');
            add_spaces(b, indent + 1);
        }
        if (cut && k == PRINT_EDGEITEMS) {
            luaL_addstring(b, "...");
            continue;
        }
        int64_t i = cut && k > PRINT_EDGEITEMS ? n - (items - k) : k;
        add_tensor(b, pr, p + i * step, d + 1, indent + 1);
    }
    luaL_addchar(b, ']');
}

/* ---- the whole string ---- */

void em_lua_push_tensor_string(lua_State *L, const em_tensor *dev_t) {
    static const char prefix[] = "tensor(";
    const int indent = (int)sizeof prefix - 1;
    char suffix[3][EM_SHAPE_STR_MAX + 16];
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
        setup(&pr, t);
        add_tensor(&b, &pr, (const char *)em_tensor_data(t), 0, indent);
    }
    luaL_pushresult(&b);
    /* suffixes go on a new line when the last line would pass the width */
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    const char *nl = strrchr(s, '\n');
    size_t last = nl ? (size_t)(s + len - nl) + 1 : len + 2; /* as PyTorch counts */
    for (int i = 0; i < nsuffix; i++) {
        size_t sl = strlen(suffix[i]);
        if (last + sl + 2 > PRINT_LINEWIDTH) {
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
