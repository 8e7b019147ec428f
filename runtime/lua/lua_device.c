/* lua_device.c -- devices and generators in Lua: ember.device objects,
 * ember.Generator objects, the device/generator argument parsers of the
 * generated bindings, x:to(device)/x:cpu(), and the one host-copy helper
 * through which the Lua layer reads tensor memory (Note [Host copies]).
 */
#include <string.h>

#include "lua/em_lua_int.h"
#include "em_ops.h"

#define DEVICE_MT "ember.device"
#define GENERATOR_MT "ember.Generator"

/* ---- host copies ---- */

/* Note [Host copies]
 * The Lua layer never dereferences the memory of a tensor that is not on
 * the cpu: printing, item, tolist, a tensor given where a number is
 * expected, and anything else here that reads data go through
 * em_lua_host_tensor, which returns the tensor itself for a cpu tensor and
 * otherwise a cpu copy made by the to_device op (whose kernel asks the
 * tensor's backend for copy_, see runtime/kernels/device.c). It runs
 * below the Autograd key: reading a value for display records no graph.
 * Writes through indices (x[i] = v) are ops themselves (copy_, fill_) and
 * reach the tensor's backend through the dispatcher. */
em_tensor *em_lua_host_tensor(em_tensor *t) {
    if (t->device.type == EM_CPU) return em_tensor_retain(t);
    em_keyset ks = (t->keyset | EM_KS(EM_KEY_CPU)) & em_keys_below(EM_KEY_AUTOGRAD);
    return em_redispatch_to_device(ks, t, em_cpu_device());
}

/* ---- device objects ---- */

void em_lua_push_device(lua_State *L, em_device d) {
    em_device *p = (em_device *)lua_newuserdatauv(L, sizeof *p, 0);
    *p = d;
    luaL_setmetatable(L, DEVICE_MT);
}

static em_device *todevice(lua_State *L, int idx) {
    return (em_device *)luaL_testudata(L, idx, DEVICE_MT);
}

em_device em_lua_check_device(lua_State *L, int idx, const char *op, const char *arg) {
    em_device d = em_no_device();
    if (lua_isnoneornil(L, idx)) return d;
    em_device *p = todevice(L, idx);
    if (p) return *p;
    if (lua_type(L, idx) != LUA_TSTRING)
        em_lua_argerror(L, idx, op, "%s: device expected (a string like \"cpu\" or \"cuda:0\", or "
                                    "an ember.device), got %s", arg, luaL_typename(L, idx));
    if (em_device_parse(lua_tostring(L, idx), &d, arg) != EM_OK) { /* "ARG: problem" */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", em_error_message());
        em_clear_error();
        em_lua_argerror(L, idx, op, "%s", msg);
    }
    return d;
}

/* ember.device("cuda:1"), ember.device("cuda", 1), ember.device(dev). */
static int l_device(lua_State *L) {
    em_device d = em_lua_check_device(L, 1, "device", "type");
    if (d.type == EM_DEVICE_NONE)
        return em_lua_argerror(L, 1, "device", "type: device string expected, got nil");
    if (!lua_isnoneornil(L, 2)) {
        int ok = 0;
        lua_Integer i = lua_tointegerx(L, 2, &ok);
        if (!ok)
            return em_lua_argerror(L, 2, "device", "index: integer expected, got %s",
                                   luaL_typename(L, 2));
        if (d.index >= 0)
            return em_lua_argerror(L, 2, "device", "index: the device string '%s' has an index "
                                   "already", lua_tostring(L, 1));
        if (i < 0 || i > 127)
            return em_lua_argerror(L, 2, "device", "index: expected 0..127, got %I", i);
        d.index = (int8_t)i;
    }
    em_lua_push_device(L, d);
    return 1;
}

static int device_tostring(lua_State *L) {
    char b[EM_DEVICE_STR_MAX];
    lua_pushstring(L, em_device_str(*(em_device *)luaL_checkudata(L, 1, DEVICE_MT), b, sizeof b));
    return 1;
}

/* d == e: same type and index ("cuda" and "cuda:0" differ, as in PyTorch). */
static int device_eq(lua_State *L) {
    em_device *a = todevice(L, 1), *b = todevice(L, 2);
    lua_pushboolean(L, a && b && em_device_eq(*a, *b));
    return 1;
}

/* d.type ("cpu", "cuda", "privateuseone") and d.index (0-based, nil when
 * the device has none) */
static int device_index(lua_State *L) {
    em_device d = *(em_device *)luaL_checkudata(L, 1, DEVICE_MT);
    const char *k = lua_tostring(L, 2);
    if (k && strcmp(k, "type") == 0) lua_pushstring(L, em_device_name(d));
    else if (k && strcmp(k, "index") == 0 && d.index >= 0) lua_pushinteger(L, d.index);
    else lua_pushnil(L);
    return 1;
}

/* ---- generators ---- */

static em_generator **togen(lua_State *L, int idx) {
    return (em_generator **)luaL_testudata(L, idx, GENERATOR_MT);
}

static void push_generator(lua_State *L, em_generator *g) {
    em_generator **p = (em_generator **)lua_newuserdatauv(L, sizeof *p, 0);
    *p = g;
    luaL_setmetatable(L, GENERATOR_MT);
}

em_generator *em_lua_check_generator(lua_State *L, int idx, const char *op, const char *arg) {
    if (lua_isnoneornil(L, idx)) return NULL;
    em_generator **p = togen(L, idx);
    if (!p)
        em_lua_argerror(L, idx, op, "%s: ember.Generator expected, got %s", arg,
                        luaL_typename(L, idx));
    return *p;
}

static em_generator *check_self_gen(lua_State *L, const char *op) {
    em_generator **p = togen(L, 1);
    if (!p)
        em_lua_argerror(L, 1, op, "self: ember.Generator expected, got %s", luaL_typename(L, 1));
    return *p;
}

static uint64_t check_seed(lua_State *L, int idx, const char *op);

/* ember.Generator([device]) or ember.Generator(seed): a new generator with
 * the default seed, or seeded with the integer given. */
static int l_generator(lua_State *L) {
    bool seeded = lua_type(L, 1) == LUA_TNUMBER;
    uint64_t seed = seeded ? check_seed(L, 1, "Generator") : 0;
    if (!seeded && !lua_isnoneornil(L, 1) &&
        em_lua_check_device(L, 1, "Generator", "device").type != EM_CPU)
        return em_lua_argerror(L, 1, "Generator", "device: only cpu generators exist");
    em_generator *g = em_generator_new();
    if (!g) return em_lua_error(L, "Generator");
    if (seeded) em_generator_manual_seed(g, seed);
    push_generator(L, g);
    return 1;
}

/* A seed: any Lua integer; its 64 bits are the seed (PyTorch takes
 * negative seeds modulo 2^64 the same way). */
static uint64_t check_seed(lua_State *L, int idx, const char *op) {
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok)
        em_lua_argerror(L, idx, op, "seed: integer expected, got %s",
                        lua_type(L, idx) == LUA_TNUMBER ? "non-integral number" : luaL_typename(L, idx));
    return (uint64_t)v;
}

/* g:manual_seed(n) -> g */
static int gen_manual_seed(lua_State *L) {
    em_generator *g = check_self_gen(L, "manual_seed");
    em_generator_manual_seed(g, check_seed(L, 2, "manual_seed"));
    lua_settop(L, 1);
    return 1;
}

/* g:seed() -> the fresh non-deterministic seed it now uses */
static int gen_seed(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)em_generator_seed(check_self_gen(L, "seed")));
    return 1;
}

static int gen_initial_seed(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)em_generator_initial_seed(check_self_gen(L, "initial_seed")));
    return 1;
}

/* g:get_state() -> an int64 tensor {seed, offset} (Note [Random numbers]:
 * the offset counts the 32-bit words drawn); g:set_state(t) -> g puts it
 * back, so the same numbers follow. */
static int gen_get_state(lua_State *L) {
    em_generator *g = check_self_gen(L, "get_state");
    uint64_t seed, offset;
    em_generator_get_state(g, &seed, &offset);
    int64_t n = 2;
    em_tensor *t = em_tensor_new(1, &n, EM_INT64, em_cpu_device());
    if (t) {
        ((int64_t *)em_tensor_data(t))[0] = (int64_t)seed;
        ((int64_t *)em_tensor_data(t))[1] = (int64_t)offset;
    }
    em_lua_push_tensor(L, t, "get_state");
    return 1;
}

static int gen_set_state(lua_State *L) {
    em_generator *g = check_self_gen(L, "set_state");
    em_tensor *t = em_lua_totensor(L, 2);
    if (!t || t->dtype != EM_INT64 || t->ndim != 1 || t->numel != 2 || t->device.type != EM_CPU)
        return em_lua_argerror(L, 2, "set_state", "state: expected the int64 tensor of 2 values "
                               "that get_state returns, got %s", t ? "another tensor" : luaL_typename(L, 2));
    int64_t v[2];
    for (int i = 0; i < 2; i++) {
        const char *p = (const char *)t->storage->data + (t->offset + i * t->strides[0]) * 8;
        memcpy(&v[i], p, sizeof v[i]);
    }
    if (v[1] < 0)
        return em_lua_argerror(L, 2, "set_state", "state: offset must be non-negative, got %I",
                               (lua_Integer)v[1]);
    em_generator_set_state(g, (uint64_t)v[0], (uint64_t)v[1]);
    lua_settop(L, 1);
    return 1;
}

static int gen_gc(lua_State *L) {
    em_generator **p = togen(L, 1);
    if (p && *p) {
        em_generator_release(*p); /* a no-op for the default generator */
        *p = NULL;
    }
    return 0;
}

static int gen_tostring(lua_State *L) {
    lua_pushfstring(L, "ember.Generator(initial_seed=%I)",
                    (lua_Integer)em_generator_initial_seed(check_self_gen(L, "tostring")));
    return 1;
}

/* ember.manual_seed(n): seeds the default generator, returns it. */
static int l_manual_seed(lua_State *L) {
    em_manual_seed(check_seed(L, 1, "manual_seed"));
    lua_getfield(L, lua_upvalueindex(1), "default_generator");
    return 1;
}

static int l_seed(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)em_generator_seed(em_default_generator()));
    return 1;
}

static int l_initial_seed(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)em_generator_initial_seed(em_default_generator()));
    return 1;
}

/* ---- moving tensors ---- */

/* Pushes the result r of converting the tensor at index 1: the same Lua
 * value when r is that tensor (x:to(x.device) is x, as in PyTorch). */
static void push_same_or_new(lua_State *L, em_tensor *self, em_tensor *r, const char *op) {
    if (r && r == self) {
        em_tensor_release(r);
        lua_pushvalue(L, 1);
        return;
    }
    em_lua_push_tensor(L, r, op);
}

/* A device given at idx: an ember.device, or a string that starts with a
 * device type ("cuda:x" is a bad device, not a bad dtype). */
static bool is_device_arg(lua_State *L, int idx) {
    if (todevice(L, idx)) return true;
    if (lua_type(L, idx) != LUA_TSTRING) return false;
    const char *s = lua_tostring(L, idx);
    size_t n = strcspn(s, ":");
    for (int t = 0; t < EM_DEVICE_COUNT; t++) {
        const char *name = em_device_name((em_device){ (int8_t)t, -1 });
        if (strlen(name) == n && strncmp(name, s, n) == 0) return true;
    }
    return false;
}

/* x:to(device), x:to(dtype), x:to(device, dtype), x:to(other): PyTorch's
 * Tensor.to with a device, a dtype, both, or another tensor (its device and
 * dtype). The dtype conversion is the generated `to` op, upvalue 1.
 * Returns x itself when nothing changes. */
static int m_to(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "to");
    int n = lua_gettop(L);
    em_tensor *other = n >= 2 ? em_lua_totensor(L, 2) : NULL;
    if (other) {
        if (n > 2) return em_lua_argerror(L, 3, "to", "expected nothing after the tensor");
        em_tensor *r = em_to_device(t, other->device);
        if (r) {
            em_tensor *c = em_to(r, other->dtype);
            em_tensor_release(r);
            r = c;
        }
        push_same_or_new(L, t, r, "to");
        return 1;
    }
    if (n < 2 || !is_device_arg(L, 2)) { /* to(dtype): the generated binding */
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_insert(L, 1);
        lua_call(L, n, 1);
        return 1;
    }
    em_device d = em_lua_check_device(L, 2, "to", "device");
    em_dtype dt = n >= 3 && !lua_isnil(L, 3) ? em_lua_check_dtype(L, 3, "to", "dtype") : EM_DTYPE_NONE;
    if (n > 3) return em_lua_argerror(L, 4, "to", "expected at most a device and a dtype");
    em_tensor *r = em_to_device(t, d);
    if (r && dt != EM_DTYPE_NONE) {
        em_tensor *c = em_to(r, dt);
        em_tensor_release(r);
        r = c;
    }
    push_same_or_new(L, t, r, "to");
    return 1;
}

static int m_cpu(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "cpu");
    push_same_or_new(L, t, em_to_device(t, em_cpu_device()), "cpu");
    return 1;
}

/* ---- registration ---- */

static void make_metatables(lua_State *L) {
    static const luaL_Reg device_meta[] = {
        { "__tostring", device_tostring }, { "__eq", device_eq }, { "__index", device_index },
        { NULL, NULL }
    };
    static const luaL_Reg gen_methods[] = {
        { "manual_seed", gen_manual_seed }, { "seed", gen_seed },
        { "initial_seed", gen_initial_seed }, { "get_state", gen_get_state },
        { "set_state", gen_set_state }, { NULL, NULL }
    };
    if (luaL_newmetatable(L, DEVICE_MT)) luaL_setfuncs(L, device_meta, 0);
    lua_pop(L, 1);
    if (luaL_newmetatable(L, GENERATOR_MT)) {
        lua_pushcfunction(L, gen_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, gen_tostring);
        lua_setfield(L, -2, "__tostring");
        luaL_newlib(L, gen_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}

void em_lua_register_devices(lua_State *L, int module_idx, int methods_idx) {
    make_metatables(L);
    lua_pushcfunction(L, l_device);
    lua_setfield(L, module_idx, "device");
    lua_pushcfunction(L, l_generator);
    lua_setfield(L, module_idx, "Generator");
    push_generator(L, em_default_generator());
    lua_setfield(L, module_idx, "default_generator");
    lua_pushvalue(L, module_idx);
    lua_pushcclosure(L, l_manual_seed, 1);
    lua_setfield(L, module_idx, "manual_seed");
    lua_pushcfunction(L, l_seed);
    lua_setfield(L, module_idx, "seed");
    lua_pushcfunction(L, l_initial_seed);
    lua_setfield(L, module_idx, "initial_seed");
    /* x:to wraps the generated dtype conversion */
    lua_getfield(L, methods_idx, "to");
    lua_pushcclosure(L, m_to, 1);
    lua_setfield(L, methods_idx, "to");
    lua_pushcfunction(L, m_cpu);
    lua_setfield(L, methods_idx, "cpu");
}
