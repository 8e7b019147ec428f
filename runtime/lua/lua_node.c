/* lua_node.c -- graph nodes as "ember.Node" userdata (y.grad_fn): name,
 * next_functions, sequence_nr, num_inputs, id (the same light userdata for
 * every handle of one node), register_hook. A userdata
 * holds one node reference, dropped by __gc/__close.
 * (Split from lua_autograd.c; see the list of files in em_lua_int.h.)
 */
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_int.h"

#define NODE_MT "ember.Node"

/* ---- graph nodes as userdata ---- */

void em_lua_push_node(lua_State *L, em_node *n) {
    if (!n) {
        lua_pushnil(L);
        return;
    }
    em_node **slot = lua_newuserdatauv(L, sizeof *slot, 0);
    *slot = NULL;
    luaL_setmetatable(L, NODE_MT);
    em_node_retain(n);
    *slot = n;
}

static em_node *check_node(lua_State *L, int idx) {
    em_node **slot = luaL_checkudata(L, idx, NODE_MT);
    if (!*slot) luaL_error(L, "node used after close");
    return *slot;
}

static int node_gc(lua_State *L) {
    em_node **slot = luaL_checkudata(L, 1, NODE_MT);
    em_node *n = *slot;
    *slot = NULL;
    em_node_release(n);
    return 0;
}

static int node_tostring(lua_State *L) {
    lua_pushfstring(L, "<%s>", em_node_name(check_node(L, 1)));
    return 1;
}

static int node_eq(lua_State *L) {
    em_node **a = luaL_testudata(L, 1, NODE_MT), **b = luaL_testudata(L, 2, NODE_MT);
    lua_pushboolean(L, a && b && *a == *b);
    return 1;
}

static int node_register_hook(lua_State *L) {
    return em_lua_register_hook(L, NULL, check_node(L, 1));
}

static int node_name_method(lua_State *L) {
    lua_pushstring(L, em_node_name(check_node(L, 1)));
    return 1;
}

static int node_index(lua_State *L) {
    em_node *n = check_node(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "name") == 0) {
        lua_pushstring(L, em_node_name(n));
    } else if (strcmp(k, "next_functions") == 0) {
        lua_createtable(L, n->num_next, 0);
        for (int i = 0; i < n->num_next; i++) {
            if (n->next[i].fn) em_lua_push_node(L, n->next[i].fn);
            else lua_pushboolean(L, 0);
            lua_rawseti(L, -2, i + 1);
        }
    } else if (strcmp(k, "register_hook") == 0) {
        lua_pushcfunction(L, node_register_hook);
    } else if (strcmp(k, "getname") == 0) {
        lua_pushcfunction(L, node_name_method);
    } else if (strcmp(k, "sequence_nr") == 0) {
        lua_pushinteger(L, (lua_Integer)n->sequence_nr);
    } else if (strcmp(k, "id") == 0) { /* one value per node: a table key */
        lua_pushlightuserdata(L, n);
    } else if (strcmp(k, "num_inputs") == 0) {
        lua_pushinteger(L, n->num_inputs);
    } else {
        lua_pushnil(L);
    }
    return 1;
}

void em_lua_open_nodes(lua_State *L) {
    static const luaL_Reg node_meta[] = {
        { "__index", node_index }, { "__gc", node_gc }, { "__close", node_gc },
        { "__tostring", node_tostring }, { "__eq", node_eq }, { NULL, NULL }
    };
    if (luaL_newmetatable(L, NODE_MT)) luaL_setfuncs(L, node_meta, 0);
    lua_pop(L, 1);
}
