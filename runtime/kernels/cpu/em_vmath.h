/* em_vmath.h -- float32 elementary functions the compiler can vectorise.
 *
 * Note [Vector math]
 * libm's expf/logf/sinf are calls the vectoriser cannot inline, so a loop
 * over them runs one element at a time. These are branch-free versions
 * (selects instead of branches, no calls) that GCC turns into AVX2/AVX-512
 * code inside the kernels' EM_CPU_CLONES / EM_VM_CLONES loops (the latter
 * add an AVX2+FMA clone and contract into FMAs; unary.c's and
 * unary_math.c's float32 loops use them). Each is within 2 ulp of the
 * correctly rounded result over its whole domain, with and without FMAs
 * (tests/check_vmath.c measures both against double-precision libm;
 * extend it when adding a function), returns NaN for NaN, and
 * gives IEEE's special values (exp(-inf) = 0, log(0) = -inf, log(-1) =
 * NaN, ...). sin/cos reduce the argument with a four-part pi (sin, by
 * half periods) or pi/2 (cos) in float, exact enough up to
 * EM_VM_TRIG_MAX; em_vm_sincosf_n redoes the rare larger arguments with
 * libm. Methods: Cody-Waite range reduction and minimax polynomials (the
 * classic Cephes/fdlibm coefficients, and shorter ones fitted for float
 * where those had more terms than float needs: exp's and sin's); every
 * e^x (exp, sigmoid) shares one polynomial, em_vm_exp_q, and expm1 and
 * tanh a longer one, em_vm_exp_q6.
 * Array forms (em_vm_expf_n, logf_n, sigmoidf_n, sincosf_n) are what a
 * contiguous kernel loop should call: they skip the special-value
 * handling on blocks that need none (Note [Vector math blocks]), with
 * the same bits. Speed notes: in cache the loops are bound by
 * instruction count and latency (ns a float on AMD EPYC Zen 2 at one
 * thread, CPU time: exp 0.36, log 0.50, tanh 0.65, sigmoid 0.44, sin
 * 0.48); at 1e7 floats the memory traffic adds to that rather than
 * hiding it, which the prefetches of Note [Vector math prefetch] partly
 * undo; the block check is fused into the compute pass. Hand-written
 * AVX2 loops (intrinsics, per-vector special checks, the same bits) ran
 * no faster than GCC's vectorisation of these functions, and
 * non-temporal stores were slower, so neither is here.
 */
#ifndef EMBER_KERNELS_CPU_EM_VMATH_H
#define EMBER_KERNELS_CPU_EM_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Always inlined: each ISA clone of a caller (EM_CPU_CLONES) compiles its own
 * copy with that ISA's vectors; an out-of-line copy would get the default. */
#define EM_VM_INLINE static inline __attribute__((always_inline))

/* EM_VM_CLONES: the clone attribute for loops over these functions. Like
 * EM_CPU_CLONES, plus an x86-64-v3 clone (AVX2 with FMA: plain "avx2"
 * does not enable FMA) and contraction of a * b + c into fused
 * multiply-adds (-std=c11 turns contraction off). Every function here is
 * within its bound both with and without contraction (tests/check_vmath.c
 * sweeps both builds).
 * The optimize attribute adds to a file's `#pragma GCC optimize` options,
 * it does not replace them (checked with GCC 12.2: a pragma's O3, or its
 * no-tree-vectorize, reaches these clones under a plain -O1/-O3 command
 * line; the loops here vectorise alike with and without "O3" repeated in
 * the attribute). What it does change: a function with it has other
 * options than its callees, and GCC then inlines only always_inline
 * callees into it -- hence EM_VM_INLINE here and the always_inline
 * element functions of the kernels that use EM_VM_CLONES. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(EM_NO_CLONES)
#define EM_VM_CLONES \
    __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default"), optimize("fp-contract=fast")))
#else
#define EM_VM_CLONES
#endif

EM_VM_INLINE uint32_t em_vm_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
EM_VM_INLINE float em_vm_float(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* The shared part of every e^x here: x = k ln2 + r with |r| <= ln2/2 (k
 * by the round-to-nearest constant 1.5 * 2^23; Cody-Waite ln2 in two
 * parts), and q = e^r - 1 = r + r^2 P(r) with a degree-4 minimax P
 * (relative error 1.7e-8 of q, 6e-9 of 1 + q, with these float
 * coefficients; the Cephes degree 5 was more than float needs: one
 * multiply-add less) evaluated by Estrin's scheme
 * (depth 2 instead of Horner's 4: the loops are limited by this latency
 * as much as by their instruction count). *kb gets
 * k + 0x4b400000 as float bits (k in the low mantissa bits). Valid for
 * |x| < 2^22 (and NaN, which propagates into q). */
EM_VM_INLINE float em_vm_exp_q(float x, float *kb) {
    float b = x * 1.44269504088896341f + 12582912.0f;
    float k = b - 12582912.0f;
    float r = x - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float r2 = r * r;
    float p01 = 0.1666654348373413f * r + 0.4999999701976776f;
    float p23 = 0.008366547524929047f * r + 0.04166720062494278f;
    float p = (0.0013882516650483012f * r2 + p23) * r2 + p01;
    *kb = b;
    return p * r2 + r;
}

/* em_vm_exp_q with the Cephes degree-5 P (q to 1e-10 relative): for
 * expm1 and tanh, which need q itself (not 1 + q) within an ulp, where
 * the degree-4 P's 1.7e-8 would take tanh to 3 ulp near x = 0.06. */
EM_VM_INLINE float em_vm_exp_q6(float x, float *kb) {
    float b = x * 1.44269504088896341f + 12582912.0f;
    float k = b - 12582912.0f;
    float r = x - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float r2 = r * r;
    float p01 = 1.6666665459E-1f * r + 5.0000001201E-1f;
    float p23 = 8.3334519073E-3f * r + 4.1665795894E-2f;
    float p45 = 1.9875691500E-4f * r + 1.3981999507E-3f;
    float p = (p45 * r2 + p23) * r2 + p01;
    *kb = b;
    return p * r2 + r;
}

/* Note [exp's fast path]
 * e^x = 2^k (1 + q) is computed as s q + s with s = 2^k: one rounding
 * when contracted to one FMA (two without FMAs, the product rounded
 * first where it is subnormal).
 * em_vm_expf_fast is that with one factor s, for |x| <= EM_VM_EXP_FAST
 * (k in [-126, 126]); em_vm_expf covers every x with k split into two
 * factors (s1 q + s1) s2, where s1 = s and s2 = 1 for those x, so an
 * array loop may take either for any element (em_vm_expf_n picks per
 * block) and a result never depends on its neighbours. */
#define EM_VM_EXP_FAST 87.0f

EM_VM_INLINE float em_vm_expf_fast(float x) {
    float kb;
    float q = em_vm_exp_q(x, &kb);
    float s = em_vm_float((em_vm_bits(kb) - 0x4b400000u + 127u) << 23);
    return q * s + s;
}

/* e^x for every x: em_vm_expf_fast with x clamped to [-104, 89] and 2^k
 * applied as two factors 2^k1 2^k2 with k1 = k clamped to [-126, 127],
 * so that k in [-150, 128] stays representable (gradual underflow to 0,
 * overflow to inf) while for a normal 2^k the second factor is 1 and the
 * result em_vm_expf_fast's bits, with or without FMAs (s q is exact
 * then only when s is normal: a split such as k1 = k / 2 would differ
 * from the fast path without FMAs where s q is subnormal). The clamps are written as
 * `x < c ? c : x` so that NaN passes them (and the polynomial carries it
 * to the result: no fix-up). Within 2 ulp with or without fused
 * multiply-adds (EM_VM_CLONES contracts them). */
EM_VM_INLINE float em_vm_expf(float x) {
    float xc = x < -104.0f ? -104.0f : x; /* NaN stays NaN */
    xc = xc > 89.0f ? 89.0f : xc;
    float kb;
    float q = em_vm_exp_q(xc, &kb);
    int32_t ki = (int32_t)(em_vm_bits(kb) - 0x4b400000u);
    int32_t k1 = ki < -126 ? -126 : ki > 127 ? 127 : ki, k2 = ki - k1; /* k2 = 0 for normal 2^k */
    float s1 = em_vm_float((uint32_t)(k1 + 127) << 23);
    return (q * s1 + s1) * em_vm_float((uint32_t)(k2 + 127) << 23);
}

/* Note [Vector math blocks]
 * The array forms (em_vm_expf_n, ...) run in blocks of EM_VM_BLOCK
 * elements: a first vector pass over the block reduces its largest |x|
 * (as integer bits, so that NaN counts as the largest), and a block
 * without special arguments -- the common case -- runs the lean fast
 * version, free of the clamps and selects the special values need; any
 * other block runs the general one. Both give the same bits wherever the
 * fast one is valid, so the split is invisible. out may be in (each
 * out[i] is written after in[i] is read). */
#define EM_VM_BLOCK 512

/* max over x[0..m) of ((bits of x[i]) & mask) - lo, as unsigned integers:
 * with mask 0x7fffffff and lo 0 the largest |x| as bits (NaN above inf);
 * with mask ~0 and lo = FLT_MIN's bits, above 0x7effffff iff some x[i]
 * is not a positive normal finite float. */
EM_VM_INLINE uint32_t em_vm_maxbits(const float *x, int64_t m, uint32_t mask, uint32_t lo) {
    uint32_t mx = 0;
    for (int64_t i = 0; i < m; i++) {
        uint32_t b = (em_vm_bits(x[i]) & mask) - lo;
        mx = b > mx ? b : mx;
    }
    return mx;
}

/* Note [Vector math prefetch]
 * On long arrays the array forms are neither purely compute- nor
 * memory-bound: at 1e7 floats exp took the time of add (which moves half
 * as many bytes again) because the hardware prefetcher does not keep a loop
 * this slow per byte fed, and the loads stall. So a long array (n >=
 * EM_VM_PREFETCH_MIN) is computed in sub-blocks of EM_VM_SUB elements (8
 * cache lines), each of which first prefetches the 8 lines
 * EM_VM_PF_DIST elements (4 KiB) ahead. Measured on the 1e7 exp loop
 * (AMD EPYC Zen 2, one thread, CPU time, best of 9, interleaved with an
 * add loop): 0.64-0.68 of add's bandwidth without, 0.75-0.78 with. Bursts
 * of 32 prefetches per 512 elements (0.59-0.60), of one per 16 elements
 * (0.59) and non-temporal stores through a staging buffer (0.50-0.56)
 * were slower. The output's lines EM_VM_PF_DIST ahead are prefetched for
 * writing too (when out is not in): measured later, with the cheaper
 * log, sigmoid and sin, in the same setting (medians of 4 interleaved
 * pairs, of add's bandwidth, without -> with): exp 0.79 -> 0.81, log
 * 0.71 -> 0.75, tanh 0.64 -> 0.66, sigmoid 0.76 -> 0.78, sin 0.74 ->
 * 0.79 (an earlier try, 512 elements ahead, was slower); direct
 * non-temporal stores (AVX2 intrinsics, with or without a staging
 * buffer) were slower for all but exp, where they tied. Short arrays are
 * in cache already and skip it. */
#define EM_VM_PREFETCH_MIN ((int64_t)1 << 15)
#define EM_VM_SUB 128
#define EM_VM_PF_DIST 1024
/* prefetches the lines of in[p .. p + EM_VM_SUB) that lie before in[n] */
EM_VM_INLINE void em_vm_prefetch_sub(const float *in, int64_t p, int64_t n) {
    int64_t e = p + EM_VM_SUB < n ? p + EM_VM_SUB : n;
    for (; p < e; p += 16) __builtin_prefetch(in + p, 0, 3);
}
/* the same for out[p .. p + EM_VM_SUB), for writing (out not in) */
EM_VM_INLINE void em_vm_prefetchw_sub(float *out, int64_t p, int64_t n) {
    int64_t e = p + EM_VM_SUB < n ? p + EM_VM_SUB : n;
    for (; p < e; p += 16) __builtin_prefetch(out + p, 1, 3);
}

/* The loop of every array form: out[i] = FAST(in[i]) over a block whose
 * em_vm_maxbits(MASK, LO) is at most MAX, GENERAL(in[i]) elsewhere. When
 * out and in do not overlap, one pass computes FAST and the reduction
 * together (one load of each x) and a block found special is redone from
 * in; otherwise (in place) the reduction is a pass of its own first. */
#define EM_VM_BLOCKED(out, in, n, FAST, GENERAL, MASK, LO, MAX)                                   \
    do {                                                                                          \
        int apart_ = (uintptr_t)((out) + (n)) <= (uintptr_t)(in) ||                               \
                     (uintptr_t)((in) + (n)) <= (uintptr_t)(out);                                 \
        int64_t sub_ = (n) >= EM_VM_PREFETCH_MIN ? EM_VM_SUB : EM_VM_BLOCK;                       \
        for (int64_t b_ = 0; b_ < (n); b_ += EM_VM_BLOCK) {                                       \
            int64_t m_ = (n) - b_ < EM_VM_BLOCK ? (n) - b_ : EM_VM_BLOCK;                         \
            const float *x_ = (in) + b_;                                                          \
            float *o_ = (out) + b_;                                                               \
            uint32_t mx_ = 0;                                                                     \
            if (apart_) {                                                                         \
                /* Note [Vector math prefetch]: sub-blocks on long arrays */                      \
                for (int64_t s_ = 0; s_ < m_; s_ += sub_) {                                       \
                    int64_t e_ = s_ + sub_ < m_ ? s_ + sub_ : m_;                                 \
                    if (sub_ == EM_VM_SUB) {                                                      \
                        em_vm_prefetch_sub(in, b_ + s_ + EM_VM_PF_DIST, n);                       \
                        em_vm_prefetchw_sub(out, b_ + s_ + EM_VM_PF_DIST, n);                     \
                    }                                                                             \
                    for (int64_t i_ = s_; i_ < e_; i_++) {                                        \
                        float v_ = x_[i_];                                                        \
                        uint32_t u_ = (em_vm_bits(v_) & (MASK)) - (LO);                           \
                        mx_ = u_ > mx_ ? u_ : mx_;                                                \
                        o_[i_] = FAST(v_);                                                        \
                    }                                                                             \
                }                                                                                 \
            } else {                                                                              \
                mx_ = em_vm_maxbits(x_, m_, MASK, LO);                                            \
                if (mx_ <= (MAX))                                                                 \
                    for (int64_t i_ = 0; i_ < m_; i_++) o_[i_] = FAST(x_[i_]);                    \
            }                                                                                     \
            if (mx_ > (MAX))                                                                      \
                for (int64_t i_ = 0; i_ < m_; i_++) o_[i_] = GENERAL(x_[i_]);                     \
        }                                                                                         \
    } while (0)

/* out[i] = e^in[i], i < n (Note [Vector math blocks]) */
#define EM_VM_EXP_FAST_BITS 0x42ae0000u /* EM_VM_EXP_FAST */
EM_VM_INLINE void em_vm_expf_n(float *out, const float *in, int64_t n) {
    EM_VM_BLOCKED(out, in, n, em_vm_expf_fast, em_vm_expf, 0x7fffffffu, 0u, EM_VM_EXP_FAST_BITS);
}

/* log(x) for positive normal finite x: x = 2^k m with m in [sqrt(2)/2,
 * sqrt(2)), f = m - 1, log(1+f) = f + f^2 Q(f) with a degree-7 minimax Q
 * (relative error 3.2e-8 with these float coefficients; at most 1 ulp
 * over every positive float, with and without FMAs) by Estrin's scheme,
 * result k ln2 + log(1+f) with ln2 in two parts. No division: fdlibm's
 * s = f/(2+f), with its shorter polynomial in s^2, puts a divide on the
 * critical path (0.61 -> 0.50 ns a float in cache, Zen 2). */
EM_VM_INLINE float em_vm_logf_fast(float x) {
    uint32_t ix = em_vm_bits(x) + (0x3f800000u - 0x3f3504f3u);
    int32_t k = (int32_t)(ix >> 23) - 0x7f;
    float m = em_vm_float((ix & 0x007fffffu) + 0x3f3504f3u);
    float f = m - 1.0f;
    float f2 = f * f, f4 = f2 * f2;
    float q01 = 0.33333951234817505f * f + -0.49999991059303284f;
    float q23 = 0.19962021708488464f * f + -0.25001761317253113f;
    float q45 = 0.149183452129364f * f + -0.16570304334163666f;
    float q67 = 0.08736047148704529f * f + -0.14309315383434296f;
    float q = (q67 * f2 + q45) * f4 + (q23 * f2 + q01);
    float dk = (float)k;
    return f2 * q + f + dk * 9.0580006145e-06f + dk * 6.9313812256e-01f;
}

/* log(x): em_vm_logf_fast, the same bits for positive normal x (the
 * array form relies on it: Note [exp's fast path]), which is why the
 * subnormals, scaled by 2^25 first, get their -25 ln2 added after it (in
 * two parts) rather than inside. x < 0 and NaN give NaN, 0 gives -inf,
 * inf gives inf. */
EM_VM_INLINE float em_vm_logf(float x) {
    int sub = x < 1.17549435e-38f;
    float r = em_vm_logf_fast(sub ? x * 33554432.0f : x); /* 2^25 */
    r = sub ? (r - 17.333984375f) + 5.30486100e-3f : r; /* 25 ln2 = 17.333984375 - 5.304861e-3 */
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    r = x == INFINITY ? x : r;
    return x != x ? x : r;
}

/* out[i] = log(in[i]), i < n (Note [Vector math blocks]) */
EM_VM_INLINE void em_vm_logf_n(float *out, const float *in, int64_t n) {
    EM_VM_BLOCKED(out, in, n, em_vm_logf_fast, em_vm_logf, 0xffffffffu, 0x00800000u, 0x7effffffu);
}

/* e^x - 1 without cancellation: with x = k ln2 + r and q = e^r - 1 as in
 * em_vm_exp_q, e^x - 1 = 2^k (e^r - 1) +
 * (2^k - 1). x below -88 gives -1, above 89 inf. */
EM_VM_INLINE float em_vm_expm1f(float x) {
    float xc = x >= -88.0f ? x : -88.0f; /* NaN -> -88; fixed up below */
    xc = xc <= 89.0f ? xc : 89.0f;
    float kb;
    float p = em_vm_exp_q6(xc, &kb); /* e^r - 1 */
    int32_t ki = (int32_t)(em_vm_bits(kb) - 0x4b400000u), k1 = ki >> 1, k2 = ki - k1;
    float s1 = em_vm_float((uint32_t)(k1 + 127) << 23), s2 = em_vm_float((uint32_t)(k2 + 127) << 23);
    float s = s1 * s2; /* inf for k = 128: then the product form below */
    float res = ki == 0 ? p : s * p + (s - 1.0f);
    res = ki > 24 ? (p + 1.0f) * s1 * s2 : res; /* the -1 is below an ulp */
    return x != x || x == 0.0f ? x : res; /* NaN; -0 stays -0 (expm1(-0) = -0) */
}

/* tanh(x) = sign(x) m / (m + 2) with m = e^(2|x|) - 1 = 2^k q + (2^k - 1)
 * (em_vm_exp_q; no cancellation: for k = 0 it is q itself, so tiny x
 * give x), |x| clamped to 10 (tanh(10) rounds to 1, tanh(9) does not).
 * One path for every x, one division; the sign goes back on as x's sign
 * bit, and NaN propagates through the clamp and the polynomial. */
EM_VM_INLINE float em_vm_tanhf(float x) {
    float ax = __builtin_fabsf(x);
    float a10 = ax > 10.0f ? 10.0f : ax; /* NaN stays */
    float kb;
    float q = em_vm_exp_q6(2.0f * a10, &kb);
    float s = em_vm_float((em_vm_bits(kb) - 0x4b400000u + 127u) << 23);
    float m = s * q + (s - 1.0f);
    float t = m / (m + 2.0f);
    return em_vm_float(em_vm_bits(t) | (em_vm_bits(x) & 0x80000000u));
}

/* out[i] = tanh(in[i]), i < n: tanh has one path for every x, so this is
 * a plain loop, in sub-blocks on long arrays (Note [Vector math
 * prefetch]). out may be in. */
EM_VM_INLINE void em_vm_tanhf_n(float *out, const float *in, int64_t n) {
    int64_t sub = n >= EM_VM_PREFETCH_MIN ? EM_VM_SUB : n;
    for (int64_t s = 0; s < n; s += sub) {
        int64_t e = s + sub < n ? s + sub : n;
        if (sub == EM_VM_SUB) {
            em_vm_prefetch_sub(in, s + EM_VM_PF_DIST, n);
            if (out != in) em_vm_prefetchw_sub(out, s + EM_VM_PF_DIST, n);
        }
        for (int64_t i = s; i < e; i++) out[i] = em_vm_tanhf(in[i]);
    }
}

/* 1 / (1 + e^-x) for x >= -EM_VM_EXP_FAST, where e^-x stays finite;
 * e^x / (1 + e^x) below, so tiny results stay (subnormal) rather than 0.
 * One exp (of a selected argument) and one division (the numerator is
 * selected, not the quotient). The fast version, for |x| <=
 * EM_VM_EXP_FAST, is the first form with em_vm_expf_fast (the same bits:
 * Note [exp's fast path]) -- no select at all. */
EM_VM_INLINE float em_vm_sigmoidf(float x) {
    int low = x < -EM_VM_EXP_FAST;
    float e = em_vm_expf(low ? x : -x);
    float num = low ? e : 1.0f;
    return num / (1.0f + e);
}
EM_VM_INLINE float em_vm_sigmoidf_fast(float x) {
    return 1.0f / (1.0f + em_vm_expf_fast(-x));
}

/* out[i] = sigmoid(in[i]), i < n (Note [Vector math blocks]) */
EM_VM_INLINE void em_vm_sigmoidf_n(float *out, const float *in, int64_t n) {
    EM_VM_BLOCKED(out, in, n, em_vm_sigmoidf_fast, em_vm_sigmoidf, 0x7fffffffu, 0u, EM_VM_EXP_FAST_BITS);
}

/* Arguments up to this size reduce exactly enough in float (Note [Vector math]). */
#define EM_VM_TRIG_MAX 8192.0f

/* sin(x) (want_cos = 0) or cos(x) (1) for |x| <= EM_VM_TRIG_MAX: j = the
 * even octant nearest |x| / (pi/4), r = |x| - j pi/4 in three parts, then
 * the sine or cosine polynomial on r by the quadrant. */
EM_VM_INLINE float em_vm_sincosf(float x, int want_cos) {
    float ax = __builtin_fabsf(x);
    /* k = round(|x| / (pi/2)) in a float's low mantissa bits (no int
     * conversion: ax < 2^22 here), y = k as a float */
    float kb = ax * 0.636619772367581343f + 12582912.0f;
    float y = kb - 12582912.0f;
    /* pi/2 in four parts, the first three of 10 bits: y < 2^13, so their
     * products with y are exact */
    float r = ((ax - y * 0x1.92p0f) - y * 0x1.fbp-12f) - y * 0x1.51p-22f;
    r = r - y * 0x1.0b4612p-34f;
    uint32_t q = em_vm_bits(kb) + (uint32_t)want_cos; /* quadrant; cos(x) = sin(|x| + pi/2) */
    float z = r * r;
    float ps = r + r * z * (-1.6666654611E-1f + z * (8.3321608736E-3f + z * -1.9515295891E-4f));
    float pc = 1.0f - 0.5f * z + z * z * (4.166664568298827E-2f + z * (-1.388731625493765E-3f + z * 2.443315711809948E-5f));
    float v = (q & 1) ? pc : ps;
    /* the sign as one xor: quadrants 2 and 3 negate, and sin is odd (x's
     * sign bit; sin(-0) = -0); NaN and inf give NaN through r */
    uint32_t sgn = (q << 30) & 0x80000000u;
    if (!want_cos) sgn ^= em_vm_bits(x) & 0x80000000u;
    return em_vm_float(em_vm_bits(v) ^ sgn);
}
EM_VM_INLINE float em_vm_cosf(float x) { return em_vm_sincosf(x, 1); }

/* sin(x) for |x| <= EM_VM_TRIG_MAX, by half periods: j = the integer
 * nearest |x| / pi, r = |x| - j pi in [-pi/2, pi/2] (pi in the four
 * parts of em_vm_sincosf, doubled: the products with j < 2^12 stay
 * exact), then sin(r) = r + r^3 P(r^2) with one degree-3 minimax P
 * (relative error 1.4e-8 with these float coefficients) -- one
 * polynomial where quarter periods need a sine and a cosine polynomial
 * and a select. The sign: (-1)^j, and sin is odd (sin(-0) = -0). NaN and
 * inf give NaN through r. */
EM_VM_INLINE float em_vm_sinf(float x) {
    float ax = __builtin_fabsf(x);
    float kb = ax * 0.318309886183790672f + 12582912.0f; /* j in the low mantissa bits */
    float y = kb - 12582912.0f;
    float r = ((ax - y * 0x1.92p1f) - y * 0x1.fbp-11f) - y * 0x1.51p-21f;
    r = r - y * 0x1.0b4612p-33f;
    float z = r * r;
    float p = ((2.605481540740584e-06f * z + -1.9809475634247065e-04f) * z + 8.333064615726471e-03f) * z +
              -1.6666659712791443e-01f;
    float v = r + r * z * p;
    uint32_t sgn = (em_vm_bits(kb) << 31) ^ (em_vm_bits(x) & 0x80000000u);
    return em_vm_float(em_vm_bits(v) ^ sgn);
}

/* sin and cos of any float: em_vm_sincosf up to EM_VM_TRIG_MAX, libm
 * beyond (and for inf and NaN) */
EM_VM_INLINE float em_vm_sinf_any(float x) { return __builtin_fabsf(x) <= EM_VM_TRIG_MAX ? em_vm_sinf(x) : sinf(x); }
EM_VM_INLINE float em_vm_cosf_any(float x) { return __builtin_fabsf(x) <= EM_VM_TRIG_MAX ? em_vm_sincosf(x, 1) : cosf(x); }
#define EM_VM_TRIG_MAX_BITS 0x46000000u /* EM_VM_TRIG_MAX */

/* out[i] = sin(in[i]) (cos with want_cos) for n contiguous floats (Note
 * [Vector math blocks]): a block without |x| > EM_VM_TRIG_MAX, infinities
 * or NaN (the common case) is one vector loop, a rare other block goes
 * element by element, those arguments to libm. */
EM_VM_INLINE void em_vm_sincosf_n(float *out, const float *in, int64_t n, int want_cos) {
    if (want_cos)
        EM_VM_BLOCKED(out, in, n, em_vm_cosf, em_vm_cosf_any, 0x7fffffffu, 0u, EM_VM_TRIG_MAX_BITS);
    else
        EM_VM_BLOCKED(out, in, n, em_vm_sinf, em_vm_sinf_any, 0x7fffffffu, 0u, EM_VM_TRIG_MAX_BITS);
}

#endif
