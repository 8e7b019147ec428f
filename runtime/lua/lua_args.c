/* lua_args.c -- Lua values to C arguments for the generated bindings:
 * tensors, wrapped numbers, scalars, dims, int lists, dtypes, options.
 *
 * Note [Pending temporaries]
 * A binding converts its arguments in order; converting a Lua number for a
 * Tensor argument makes a wrapped-number tensor owned by the binding's
 * em_lua_argtmp. When a later conversion fails, the failing check_ function
 * has no access to that argtmp, yet the error must not leak it. So every
 * owned temporary is also recorded in a thread-local pending list: the
 * error paths here release the pending list before raising, and
 * em_lua_argtmp_release (the success path) releases the argtmp's tensors
 * and empties the list. Bindings never run Lua code between their
 * conversions and the release, so the list only ever holds the current
 * binding's temporaries (or orphans of a Lua memory error, which are then
 * freed by the next error instead of leaking).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lua/em_lua_int.h"

/* ---- pending temporaries ---- */

static _Thread_local struct {
    em_tensor *t[EM_STACK_MAX];
    int n;
} pending;

static void pending_release(void) {
    for (int i = 0; i < pending.n; i++) em_tensor_release(pending.t[i]);
    pending.n = 0;
}

void em_lua_argtmp_release(em_lua_argtmp *tmp) {
    for (int i = 0; i < tmp->n; i++) em_tensor_release(tmp->owned[i]);
    tmp->n = 0;
    tmp->nlists = 0;
    pending.n = 0;
}

/* ---- raising errors ---- */

int em_lua_raise(lua_State *L, const char *fmt, ...) {
    pending_release();
    va_list ap;
    luaL_where(L, 1);
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}

int em_lua_argerror(lua_State *L, int idx, const char *op, const char *fmt, ...) {
    pending_release();
    va_list ap;
    luaL_where(L, 1);
    lua_pushfstring(L, "bad argument #%d to '%s' (", idx, op);
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_pushliteral(L, ")");
    lua_concat(L, 4);
    return lua_error(L);
}

int em_lua_error(lua_State *L, const char *op) {
    const char *msg = em_error_message();
    if (!msg || !*msg) msg = "unknown error (no message set)";
    size_t n = strlen(op);
    pending_release();
    luaL_where(L, 1);
    if (strncmp(msg, op, n) == 0 && msg[n] == ':')
        lua_pushstring(L, msg);
    else
        lua_pushfstring(L, "%s: %s", op, msg);
    em_clear_error();
    lua_concat(L, 2);
    return lua_error(L);
}

/* ---- tensors ---- */

const char em_lua_mt_key = 0;

em_tensor *em_lua_totensor(lua_State *L, int idx) {
    em_tensor **slot = em_lua_toslot(L, idx);
    if (!slot) return NULL;
    if (!*slot) em_lua_raise(L, "tensor used after close");
    return *slot;
}

em_tensor *em_lua_checkself(lua_State *L, int idx, const char *op) {
    em_tensor **slot = em_lua_toslot(L, idx);
    if (!slot)
        em_lua_argerror(L, idx, op, "tensor expected, got %s", luaL_typename(L, idx));
    if (!*slot) em_lua_raise(L, "%s: tensor used after close", op);
    return *slot;
}

em_tensor *em_lua_wrap_number(lua_State *L, int idx) {
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        return em_tensor_wrapped_scalar(lua_isinteger(L, idx) ? em_scalar_int((int64_t)lua_tointeger(L, idx))
                                                              : em_scalar_float((double)lua_tonumber(L, idx)));
    case LUA_TBOOLEAN:
        return em_tensor_wrapped_scalar(em_scalar_bool(lua_toboolean(L, idx)));
    default:
        return NULL;
    }
}

em_tensor *em_lua_check_tensor(lua_State *L, int idx, const char *op, const char *arg,
                               em_lua_argtmp *tmp) {
    em_tensor **slot = em_lua_toslot(L, idx);
    if (slot) {
        if (!*slot) em_lua_raise(L, "%s: %s: tensor used after close", op, arg);
        return *slot;
    }
    int tp = lua_type(L, idx);
    if (tp != LUA_TNUMBER && tp != LUA_TBOOLEAN)
        em_lua_argerror(L, idx, op, "%s: tensor expected, got %s", arg, luaL_typename(L, idx));
    if (tmp->n >= EM_STACK_MAX || pending.n >= EM_STACK_MAX)
        em_lua_argerror(L, idx, op, "%s: too many number arguments", arg);
    em_tensor *t = em_lua_wrap_number(L, idx);
    if (!t) em_lua_error(L, op);
    tmp->owned[tmp->n++] = t;
    pending.t[pending.n++] = t;
    return t;
}

em_tensor *em_lua_opt_tensor(lua_State *L, int idx, const char *op, const char *arg,
                             em_lua_argtmp *tmp) {
    if (lua_isnoneornil(L, idx)) return NULL;
    return em_lua_check_tensor(L, idx, op, arg, tmp);
}

/* ---- tensor lists (Note [Tensor lists] in codegen/codegen.h) ---- */

/* The array at idx as a borrowed tensor list; with allow_nil, nil entries
 * (up to the array's length) become NULL (PyTorch's None in Tensor?[]). */
static em_tensorlist check_tensorlist(lua_State *L, int idx, const char *op, const char *arg, bool allow_nil) {
    em_tensorlist out = { NULL, 0 };
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE)
        em_lua_argerror(L, idx, op, "%s: table of tensors%s expected, got %s", arg, allow_nil ? " (or nil)" : "",
                        luaL_typename(L, idx));
    lua_Unsigned len = lua_rawlen(L, idx);
    if (len > (lua_Unsigned)INT32_MAX / sizeof(em_tensor *))
        em_lua_argerror(L, idx, op, "%s: too many tensors (%d)", arg, (int)len);
    /* the backing array is a userdata left on the stack: the GC frees it,
     * whatever error is raised later */
    em_tensor **buf = lua_newuserdatauv(L, (len ? len : 1) * sizeof *buf, 0);
    for (lua_Unsigned i = 1; i <= len; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i);
        if (allow_nil && lua_isnil(L, -1)) { /* None: a full slice in index_put */
            buf[i - 1] = NULL;
            lua_pop(L, 1);
            continue;
        }
        em_tensor **slot = em_lua_toslot(L, -1);
        if (!slot)
            em_lua_raise(L, "%s: argument '%s' element %d is not a tensor%s (got %s)", op, arg, (int)i,
                         allow_nil ? " or nil" : "", luaL_typename(L, -1));
        if (!*slot) em_lua_raise(L, "%s: argument '%s' element %d: tensor used after close", op, arg, (int)i);
        buf[i - 1] = *slot; /* the table keeps it alive */
        lua_pop(L, 1);
    }
    out.data = buf;
    out.n = (int)len;
    return out;
}

em_tensorlist em_lua_check_tensorlist(lua_State *L, int idx, const char *op, const char *arg) {
    return check_tensorlist(L, idx, op, arg, false);
}

em_tensorlist em_lua_check_opt_tensorlist(lua_State *L, int idx, const char *op, const char *arg) {
    return check_tensorlist(L, idx, op, arg, true);
}

void em_lua_push_results(lua_State *L, em_tensor *r, em_tensor **outs, int k, const char *op) {
    if (!r) {
        for (int i = 0; i < k - 1; i++) em_tensor_release(outs[i]);
        em_lua_error(L, op);
    }
    if (!lua_checkstack(L, k)) {
        em_tensor_release(r);
        for (int i = 0; i < k - 1; i++) em_tensor_release(outs[i]);
        em_lua_raise(L, "%s: Lua stack overflow", op);
    }
    em_lua_push_tensor(L, r, op);
    for (int i = 0; i < k - 1; i++) { /* NULL: an optional result not asked for (Note [Optional results]) */
        if (outs[i]) em_lua_push_tensor(L, outs[i], op);
        else lua_pushnil(L);
    }
}

void em_lua_push_bool_result(lua_State *L, em_tensor *r, const char *op) {
    if (!r) em_lua_error(L, op);
    em_tensor *h = em_lua_host_tensor(r); /* Note [Host copies] */
    em_tensor_release(r);
    if (!h) em_lua_error(L, op);
    bool v = em_load_as_int64(em_tensor_data(h), h->dtype) != 0;
    em_tensor_release(h);
    lua_pushboolean(L, v);
}

void em_lua_push_tensor_array(lua_State *L, em_tensor **arr, int n, const char *op) {
    if (!arr) em_lua_error(L, op);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        em_tensor *t = arr[i];
        arr[i] = NULL; /* the userdata owns it from here */
        em_lua_push_tensor(L, t, op);
        lua_rawseti(L, -2, i + 1);
    }
    em_tensors_free(arr, n);
}

em_floatlist em_lua_check_floatlist(lua_State *L, int idx, const char *op, const char *arg) {
    em_floatlist out = { NULL, 0 };
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TNUMBER) {
        double *one = lua_newuserdatauv(L, sizeof(double), 0);
        *one = (double)lua_tonumber(L, idx);
        out.data = one;
        out.n = 1;
        return out;
    }
    if (lua_type(L, idx) != LUA_TTABLE)
        em_lua_argerror(L, idx, op, "%s: table of numbers expected, got %s", arg, luaL_typename(L, idx));
    lua_Unsigned len = lua_rawlen(L, idx);
    if (len > (lua_Unsigned)INT32_MAX / sizeof(double))
        em_lua_argerror(L, idx, op, "%s: too many numbers (%d)", arg, (int)len);
    double *buf = lua_newuserdatauv(L, (len ? len : 1) * sizeof *buf, 0);
    for (lua_Unsigned i = 1; i <= len; i++) {
        if (lua_rawgeti(L, idx, (lua_Integer)i) != LUA_TNUMBER)
            em_lua_argerror(L, idx, op, "%s: number expected at [%d], got %s", arg, (int)i, luaL_typename(L, -1));
        buf[i - 1] = (double)lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    out.data = buf;
    out.n = (int)len;
    return out;
}

const char *em_lua_check_choice(lua_State *L, int idx, const char *op, const char *arg,
                                const char *const *choices) {
    if (!choices) { /* a plain str argument: any string */
        if (lua_type(L, idx) == LUA_TSTRING) return lua_tostring(L, idx);
        em_lua_argerror(L, idx, op, "%s: expected a string, got %s", arg, luaL_typename(L, idx));
        return NULL;
    }
    if (lua_type(L, idx) == LUA_TSTRING) {
        const char *s = lua_tostring(L, idx);
        for (int i = 0; choices[i]; i++)
            if (strcmp(choices[i], s) == 0) return choices[i];
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; choices[i]; i++) {
        luaL_addstring(&b, i ? ", \"" : "\"");
        luaL_addstring(&b, choices[i]);
        luaL_addchar(&b, '"');
    }
    luaL_pushresult(&b);
    if (lua_type(L, idx) == LUA_TSTRING)
        em_lua_argerror(L, idx, op, "%s: expected one of %s, got \"%s\"", arg, lua_tostring(L, -1),
                        lua_tostring(L, idx));
    em_lua_argerror(L, idx, op, "%s: expected one of %s, got %s", arg, lua_tostring(L, -1),
                    luaL_typename(L, idx));
    return NULL;
}

int em_lua_no_overload(lua_State *L, const char *op, const char *const *schemas) {
    luaL_Buffer b;
    int top = lua_gettop(L);
    luaL_buffinit(L, &b);
    for (int i = 1; i <= top; i++) {
        if (i > 1) luaL_addstring(&b, ", ");
        luaL_addstring(&b, em_lua_toslot(L, i) ? "tensor" : luaL_typename(L, i));
    }
    luaL_addstring(&b, "); expected one of: ");
    for (int i = 0; schemas[i]; i++) {
        if (i) luaL_addstring(&b, " | ");
        luaL_addstring(&b, schemas[i]);
    }
    luaL_pushresult(&b);
    return em_lua_raise(L, "%s: no overload matches the arguments (%s", op, lua_tostring(L, -1));
}

/* ---- numbers ---- */

/* The value of the one element of t as a scalar of t's category, read
 * through the host-copy helper (Note [Host copies] in lua_device.c). */
static em_scalar tensor_scalar(lua_State *L, em_tensor *t, const char *op) {
    em_tensor *h = em_lua_host_tensor(t);
    if (!h) em_lua_error(L, op);
    const void *p = em_tensor_data(h);
    em_scalar s = h->dtype == EM_BOOL ? em_scalar_bool(*(const bool *)p)
                : em_dtype_is_integral(h->dtype) ? em_scalar_int(em_load_as_int64(p, h->dtype))
                : em_scalar_float(em_load_as_double(p, h->dtype));
    em_tensor_release(h);
    return s;
}

em_scalar em_lua_check_scalar(lua_State *L, int idx, const char *op, const char *arg) {
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) return em_scalar_int((int64_t)lua_tointeger(L, idx));
        return em_scalar_float((double)lua_tonumber(L, idx));
    case LUA_TBOOLEAN:
        return em_scalar_bool(lua_toboolean(L, idx));
    default: {
        em_tensor **slot = em_lua_toslot(L, idx);
        if (slot) {
            if (!*slot) em_lua_raise(L, "%s: %s: tensor used after close", op, arg);
            if ((*slot)->numel != 1)
                em_lua_argerror(L, idx, op, "%s: number expected, got a tensor with %d elements",
                                arg, (int)(*slot)->numel);
            return tensor_scalar(L, *slot, op);
        }
        em_lua_argerror(L, idx, op, "%s: number expected, got %s", arg, luaL_typename(L, idx));
        return em_scalar_int(0);
    }
    }
}

/* An integer from a Lua number with an integral value (2 and 2.0). */
static int64_t check_integer(lua_State *L, int idx, const char *op, const char *arg,
                             const char *what) {
    int ok = 0;
    lua_Integer v = 0;
    if (lua_type(L, idx) == LUA_TNUMBER) v = lua_tointegerx(L, idx, &ok);
    if (!ok) {
        if (lua_type(L, idx) == LUA_TNUMBER)
            em_lua_argerror(L, idx, op, "%s: %s expected, got non-integral number %s", arg, what,
                            lua_tostring(L, idx));
        em_lua_argerror(L, idx, op, "%s: %s expected, got %s", arg, what, luaL_typename(L, idx));
    }
    return (int64_t)v;
}

int64_t em_lua_check_int(lua_State *L, int idx, const char *op, const char *arg) {
    return check_integer(L, idx, op, arg, "integer");
}

double em_lua_check_float(lua_State *L, int idx, const char *op, const char *arg) {
    if (lua_type(L, idx) != LUA_TNUMBER)
        em_lua_argerror(L, idx, op, "%s: number expected, got %s", arg, luaL_typename(L, idx));
    return (double)lua_tonumber(L, idx);
}

bool em_lua_check_bool(lua_State *L, int idx, const char *op, const char *arg) {
    if (lua_type(L, idx) != LUA_TBOOLEAN)
        em_lua_argerror(L, idx, op, "%s: boolean expected, got %s", arg, luaL_typename(L, idx));
    return lua_toboolean(L, idx);
}

int64_t em_lua_check_dim(lua_State *L, int idx, const char *op, const char *arg) {
    int64_t d = check_integer(L, idx, op, arg, "integer");
    if (d == 0)
        em_lua_argerror(L, idx, op, "%s: 0 is not valid (1-based, negative counts from the end)",
                        arg);
    return d > 0 ? d - 1 : d;
}

int64_t em_lua_check_endindex(lua_State *L, int idx, const char *op, const char *arg) {
    int64_t e = check_integer(L, idx, op, arg, "integer");
    if (e == 0)
        em_lua_argerror(L, idx, op, "%s: 0 is not valid (1-based, negative counts from the end)",
                        arg);
    if (e == -1) return INT64_MAX;
    return e > 0 ? e : e + 1;
}

em_dtype em_lua_check_dtype(lua_State *L, int idx, const char *op, const char *arg) {
    if (lua_type(L, idx) != LUA_TSTRING)
        em_lua_argerror(L, idx, op, "%s: dtype name expected, got %s", arg, luaL_typename(L, idx));
    const char *s = lua_tostring(L, idx);
    em_dtype t = em_dtype_from_name(s);
    if (t == EM_DTYPE_NONE) {
        char names[256];
        size_t off = 0;
        names[0] = '\0';
        for (int i = 0; i < EM_DTYPE_COUNT && off < sizeof names; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "",
                                    em_dtype_name((em_dtype)i));
        em_lua_argerror(L, idx, op, "%s: unknown dtype '%s' (expected one of: %s)", arg, s, names);
    }
    return t;
}

/* ---- int lists ---- */

/* One list element at stack idx (or table element pos when pos > 0). */
static int64_t list_item(lua_State *L, int idx, int pos, const char *op, const char *arg,
                         bool is_dim) {
    int ok = 0;
    lua_Integer v = 0;
    if (lua_type(L, -1) == LUA_TNUMBER) v = lua_tointegerx(L, -1, &ok);
    if (!ok) {
        const char *got = lua_type(L, -1) == LUA_TNUMBER ? "non-integral number"
                                                         : luaL_typename(L, -1);
        if (pos > 0)
            em_lua_argerror(L, idx, op, "%s: integer expected at [%d], got %s", arg, pos, got);
        em_lua_argerror(L, idx, op, "%s: integer expected, got %s", arg, got);
    }
    if (is_dim) {
        if (v == 0) {
            if (pos > 0)
                em_lua_argerror(L, idx, op,
                                "%s: dim 0 at [%d] is not valid (1-based, negative from the end)",
                                arg, pos);
            em_lua_argerror(L, idx, op, "%s: 0 is not valid (1-based, negative from the end)", arg);
        }
        if (v > 0) v -= 1;
    }
    return (int64_t)v;
}

em_intlist em_lua_check_intlist(lua_State *L, int idx, const char *op, const char *arg,
                                bool varargs, bool is_dim, int *consumed, em_lua_argtmp *tmp) {
    em_intlist out = { NULL, 0 };
    if (tmp->nlists >= EM_STACK_MAX)
        em_lua_argerror(L, idx, op, "%s: too many list arguments", arg);
    int64_t *buf = tmp->lists[tmp->nlists];
    int n = 0;
    if (lua_type(L, idx) == LUA_TTABLE) {
        lua_Unsigned len = lua_rawlen(L, idx);
        if (len > EM_MAX_DIMS)
            em_lua_argerror(L, idx, op, "%s: at most %d values allowed, got %d", arg, EM_MAX_DIMS,
                            (int)len);
        for (int i = 1; i <= (int)len; i++) {
            lua_rawgeti(L, idx, i);
            buf[n++] = list_item(L, idx, i, op, arg, is_dim);
            lua_pop(L, 1);
        }
        *consumed = 1;
    } else if (varargs) {
        int top = lua_gettop(L);
        int i = idx;
        for (; i <= top && lua_type(L, i) == LUA_TNUMBER; i++) {
            if (n >= EM_MAX_DIMS)
                em_lua_argerror(L, i, op, "%s: at most %d values allowed", arg, EM_MAX_DIMS);
            lua_pushvalue(L, i);
            buf[n++] = list_item(L, i, 0, op, arg, is_dim);
            lua_pop(L, 1);
        }
        *consumed = i - idx;
    } else if (lua_type(L, idx) == LUA_TNUMBER) {
        lua_pushvalue(L, idx);
        buf[n++] = list_item(L, idx, 0, op, arg, is_dim);
        lua_pop(L, 1);
        *consumed = 1;
    } else {
        em_lua_argerror(L, idx, op, "%s: table of integers expected, got %s", arg,
                        luaL_typename(L, idx));
    }
    tmp->nlists++;
    out.data = buf;
    out.n = n;
    return out;
}

/* ---- options tables ---- */

int em_lua_options_index(lua_State *L) {
    int top = lua_gettop(L);
    if (top == 0 || lua_type(L, top) != LUA_TTABLE) return 0;
    int t = lua_rawgeti(L, top, 1);
    lua_pop(L, 1);
    return t == LUA_TNIL ? top : 0;
}

int em_lua_options_index_req(lua_State *L, int nreq) {
    em_lua_gc_entry(L); /* every generated binding starts here (Note [GC pressure]) */
    int opt = em_lua_options_index(L);
    if (opt && opt <= nreq) {
        lua_pushnil(L);
        if (!lua_next(L, opt)) return 0; /* empty: a positional argument */
        lua_pop(L, 2);
    }
    return opt;
}

void em_lua_check_option_names(lua_State *L, int opt, const char *op, const char *const *names) {
    if (opt <= 0) return;
    lua_pushnil(L);
    while (lua_next(L, opt)) {
        lua_pop(L, 1); /* value */
        const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        bool known = false;
        for (int i = 0; key && names && names[i]; i++)
            if (strcmp(names[i], key) == 0) { known = true; break; }
        if (known) continue;
        luaL_Buffer b;
        const char *shown = key ? key : luaL_typename(L, -1);
        lua_pushstring(L, shown); /* keep it alive while building */
        luaL_buffinit(L, &b);
        for (int i = 0; names && names[i]; i++) {
            if (i) luaL_addstring(&b, ", ");
            luaL_addstring(&b, names[i]);
        }
        luaL_pushresult(&b);
        em_lua_raise(L, "bad option '%s' to '%s' (expected one of: %s)", lua_tostring(L, -2), op,
                     (names && names[0]) ? lua_tostring(L, -1) : "none");
    }
}
