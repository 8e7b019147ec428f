/* dtype.c -- dtype names, sizes, categories and promotion; half/bfloat16
 * conversions; loading and storing any dtype as double or int64; devices and keys. */
#include <math.h>
#include <string.h>

#include "core/em_core_int.h"

/* ---- names, sizes, categories ---- */

static const char *const dtype_names[EM_DTYPE_COUNT] = {
    "bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64",
};
static const unsigned char dtype_sizes[EM_DTYPE_COUNT] = { 1, 1, 1, 4, 8, 2, 2, 4, 8 };

static bool valid(em_dtype t) { return (unsigned)t < EM_DTYPE_COUNT; }

const char *em_dtype_name(em_dtype t)
{
    if (t == EM_DTYPE_NONE) return "none";
    return valid(t) ? dtype_names[t] : "unknown";
}

/* Accepts the canonical names and PyTorch's aliases (float, double, half,
 * long, int, byte, char). */
em_dtype em_dtype_from_name(const char *s)
{
    static const struct { const char *name; em_dtype t; } aliases[] = {
        { "float", EM_FLOAT32 }, { "double", EM_FLOAT64 }, { "half", EM_FLOAT16 },
        { "long", EM_INT64 }, { "int", EM_INT32 }, { "byte", EM_UINT8 },
        { "char", EM_INT8 },
    };
    if (!s) return EM_DTYPE_NONE;
    for (int i = 0; i < EM_DTYPE_COUNT; i++)
        if (strcmp(s, dtype_names[i]) == 0) return (em_dtype)i;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(s, aliases[i].name) == 0) return aliases[i].t;
    return EM_DTYPE_NONE;
}

size_t em_dtype_size(em_dtype t) { return valid(t) ? dtype_sizes[t] : 0; }

bool em_dtype_is_floating(em_dtype t)
{
    return t == EM_FLOAT16 || t == EM_BFLOAT16 || t == EM_FLOAT32 || t == EM_FLOAT64;
}

bool em_dtype_is_integral(em_dtype t)
{
    return t == EM_UINT8 || t == EM_INT8 || t == EM_INT32 || t == EM_INT64;
}

/* ---- promotion ---- */

/* PyTorch's promote_types table (c10/core/ScalarType.cpp) restricted to
 * ember's dtypes. One deliberate difference: PyTorch promotes
 * uint8 + int8 to int16; ember has no int16, so the pair gives int32, the
 * next signed type that holds both ranges. Everything else is PyTorch's
 * answer, e.g. float16 + bfloat16 = float32, int64 + float16 = float16. */
#define b1 EM_BOOL
#define u1 EM_UINT8
#define i1 EM_INT8
#define i4 EM_INT32
#define i8 EM_INT64
#define f2 EM_FLOAT16
#define bf EM_BFLOAT16
#define f4 EM_FLOAT32
#define f8 EM_FLOAT64
static const signed char promote_table[EM_DTYPE_COUNT][EM_DTYPE_COUNT] = {
    /*        b1  u1  i1  i4  i8  f2  bf  f4  f8 */
    /* b1 */ { b1, u1, i1, i4, i8, f2, bf, f4, f8 },
    /* u1 */ { u1, u1, i4, i4, i8, f2, bf, f4, f8 },
    /* i1 */ { i1, i4, i1, i4, i8, f2, bf, f4, f8 },
    /* i4 */ { i4, i4, i4, i4, i8, f2, bf, f4, f8 },
    /* i8 */ { i8, i8, i8, i8, i8, f2, bf, f4, f8 },
    /* f2 */ { f2, f2, f2, f2, f2, f2, f4, f4, f8 },
    /* bf */ { bf, bf, bf, bf, bf, f4, bf, f4, f8 },
    /* f4 */ { f4, f4, f4, f4, f4, f4, f4, f4, f8 },
    /* f8 */ { f8, f8, f8, f8, f8, f8, f8, f8, f8 },
};
#undef b1
#undef u1
#undef i1
#undef i4
#undef i8
#undef f2
#undef bf
#undef f4
#undef f8

/* EM_DTYPE_NONE on either side yields the other ("undefined" in PyTorch). */
em_dtype em_promote_types(em_dtype a, em_dtype b)
{
    if (!valid(a)) return valid(b) ? b : EM_DTYPE_NONE;
    if (!valid(b)) return a;
    return (em_dtype)promote_table[a][b];
}

em_dtype em_scalar_dtype(em_scalar s)
{
    switch (s.kind) {
    case EM_SCALAR_BOOL: return EM_BOOL;
    case EM_SCALAR_INT: return EM_INT64;
    default: return EM_FLOAT32;
    }
}

/* PyTorch's ResultTypeState: three priority classes, each promoted within
 * itself, then combined so that a lower class only matters when it is of
 * a higher category (bool < integral < floating). Wrapped numbers count
 * with the default dtype of their category (float -> float32). */
typedef struct { em_dtype dim, zero, wrapped; } result_state;

static void state_add(result_state *st, em_dtype t, int ndim, bool wrapped)
{
    if (wrapped) {
        if (em_dtype_is_floating(t)) t = EM_FLOAT32;
        st->wrapped = em_promote_types(st->wrapped, t);
    } else if (ndim == 0) {
        st->zero = em_promote_types(st->zero, t);
    } else {
        st->dim = em_promote_types(st->dim, t);
    }
}

static em_dtype combine_categories(em_dtype higher, em_dtype lower)
{
    if (em_dtype_is_floating(higher)) return higher;
    if (higher == EM_BOOL || em_dtype_is_floating(lower)) return em_promote_types(higher, lower);
    if (higher != EM_DTYPE_NONE) return higher;
    return lower;
}

static em_dtype state_result(const result_state *st)
{
    return combine_categories(st->dim, combine_categories(st->zero, st->wrapped));
}

em_dtype em_result_type2(const em_tensor *a, const em_tensor *b)
{
    /* the scalar graph's case (y * 0.999): a floating tensor with a wrapped
     * number keeps its dtype, as the walk below finds (a wrapped number's
     * category is at most floating, and a tensor's category wins a tie) */
    if (a && b && a->wrapped_number != b->wrapped_number) {
        const em_tensor *t = a->wrapped_number ? b : a;
        if (em_dtype_is_floating(t->dtype)) return t->dtype;
    }
    result_state st = { EM_DTYPE_NONE, EM_DTYPE_NONE, EM_DTYPE_NONE };
    if (a) state_add(&st, a->dtype, a->ndim, a->wrapped_number);
    if (b) state_add(&st, b->dtype, b->ndim, b->wrapped_number);
    return state_result(&st);
}

em_dtype em_result_type_n(int n, const em_tensor *const *t)
{
    result_state st = { EM_DTYPE_NONE, EM_DTYPE_NONE, EM_DTYPE_NONE };
    for (int i = 0; i < n; i++)
        if (t[i]) state_add(&st, t[i]->dtype, t[i]->ndim, t[i]->wrapped_number);
    return state_result(&st);
}

em_dtype em_result_type_scalar(const em_tensor *a, em_scalar s)
{
    result_state st = { EM_DTYPE_NONE, EM_DTYPE_NONE, EM_DTYPE_NONE };
    if (a) state_add(&st, a->dtype, a->ndim, a->wrapped_number);
    state_add(&st, em_scalar_dtype(s), 0, true);
    return state_result(&st);
}

/* ---- half <-> float ---- */

static uint32_t f2u(float f) { union { float f; uint32_t u; } v = { .f = f }; return v.u; }
static float u2f(uint32_t u) { union { uint32_t u; float f; } v = { .u = u }; return v.f; }

float em_half_to_float(em_half h)
{
    uint32_t sign = (uint32_t)(h.bits & 0x8000u) << 16;
    uint32_t e = (h.bits >> 10) & 0x1fu, m = h.bits & 0x3ffu;
    if (e == 0x1f) return u2f(sign | 0x7f800000u | (m << 13)); /* inf, nan (payload kept) */
    if (e == 0) {
        if (m == 0) return u2f(sign);
        e = 113; /* subnormal: normalise the mantissa */
        while (!(m & 0x400u)) { m <<= 1; e--; }
        m &= 0x3ffu;
        return u2f(sign | (e << 23) | (m << 13));
    }
    return u2f(sign | ((e + 112) << 23) | (m << 13));
}

/* Round to nearest, ties to even, in integer arithmetic (independent of
 * the FPU rounding mode). Overflow gives inf; NaN stays a quiet NaN;
 * values below half's smallest subnormal round to signed zero. */
em_half em_float_to_half(float f)
{
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    em_half r;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) {
        r.bits = (uint16_t)(sign | (x > 0x7f800000u ? 0x7e00u | ((x >> 13) & 0x3ffu) : 0x7c00u));
        return r;
    }
    if (x >= 0x477ff000u) { r.bits = sign | 0x7c00u; return r; } /* >= 65520: inf */
    if (x < 0x38800000u) {                                       /* below 2^-14 */
        if (x < 0x33000000u) { r.bits = sign; return r; }        /* <= 2^-25: zero */
        uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;                                /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        r.bits = (uint16_t)(sign | q);
        return r;
    }
    uint32_t q = (x - 0x38000000u) >> 13, rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    r.bits = (uint16_t)(sign | q);
    return r;
}

/* ---- loading and storing any dtype ---- */

/* double -> int64 without undefined behaviour: NaN gives 0, values
 * beyond the range saturate; in range it truncates like a C cast. */
static int64_t double_to_i64(double v)
{
    if (v != v) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

double em_load_as_double(const void *p, em_dtype t)
{
    switch (t) {
    case EM_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    case EM_UINT8: return *(const uint8_t *)p;
    case EM_INT8: return *(const int8_t *)p;
    case EM_INT32: return *(const int32_t *)p;
    case EM_INT64: return (double)*(const int64_t *)p;
    case EM_FLOAT16: return em_half_to_float(*(const em_half *)p);
    case EM_BFLOAT16: return em_bf16_to_float(*(const em_bfloat16 *)p);
    case EM_FLOAT32: return *(const float *)p;
    case EM_FLOAT64: return *(const double *)p;
    default: return 0.0;
    }
}

/* Integers take the truncated value modulo their width (as a C cast
 * through int64 does: -1.0 -> uint8 255); bool is v != 0 (NaN is true). */
void em_store_from_double(void *p, em_dtype t, double v)
{
    switch (t) {
    case EM_BOOL: *(uint8_t *)p = v != 0; break;
    case EM_UINT8: *(uint8_t *)p = (uint8_t)double_to_i64(v); break;
    case EM_INT8: *(int8_t *)p = (int8_t)double_to_i64(v); break;
    case EM_INT32: *(int32_t *)p = (int32_t)double_to_i64(v); break;
    case EM_INT64: *(int64_t *)p = double_to_i64(v); break;
    case EM_FLOAT16: *(em_half *)p = em_float_to_half((float)v); break;
    case EM_BFLOAT16: *(em_bfloat16 *)p = em_float_to_bf16((float)v); break;
    case EM_FLOAT32: *(float *)p = (float)v; break;
    case EM_FLOAT64: *(double *)p = v; break;
    default: break;
    }
}

int64_t em_load_as_int64(const void *p, em_dtype t)
{
    switch (t) {
    case EM_BOOL: return *(const uint8_t *)p != 0;
    case EM_UINT8: return *(const uint8_t *)p;
    case EM_INT8: return *(const int8_t *)p;
    case EM_INT32: return *(const int32_t *)p;
    case EM_INT64: return *(const int64_t *)p;
    default: return double_to_i64(em_load_as_double(p, t));
    }
}

void em_store_from_int64(void *p, em_dtype t, int64_t v)
{
    switch (t) {
    case EM_BOOL: *(uint8_t *)p = v != 0; break;
    case EM_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case EM_INT8: *(int8_t *)p = (int8_t)v; break;
    case EM_INT32: *(int32_t *)p = (int32_t)v; break;
    case EM_INT64: *(int64_t *)p = v; break;
    case EM_FLOAT16: *(em_half *)p = em_float_to_half((float)v); break;
    case EM_BFLOAT16: *(em_bfloat16 *)p = em_float_to_bf16((float)v); break;
    case EM_FLOAT32: *(float *)p = (float)v; break;
    case EM_FLOAT64: *(double *)p = (double)v; break;
    default: break;
    }
}

/* ---- dispatch keys (devices: context.c) ---- */

const char *em_key_name(em_dispatch_key k)
{
    static const char *const names[EM_KEY_COUNT] = {
        [EM_KEY_CPU] = "CPU", [EM_KEY_CUDA] = "CUDA", [EM_KEY_PRIVATEUSE1] = "PrivateUse1",
        [EM_KEY_AUTOGRAD] = "Autograd", [EM_KEY_TRACE] = "Trace",
    };
    return (unsigned)k < EM_KEY_COUNT ? names[k] : "Unknown";
}

_Static_assert(EM_DTYPE_COUNT == 9, "update dtype_names, dtype_sizes and promote_table");
