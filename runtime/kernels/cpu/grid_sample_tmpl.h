/* grid_sample_tmpl.h -- the per-dtype loops of grid_sampler_2d (forward and
 * backward), included by grid_sample.c once per float dtype with
 *   GS_T      the element and compute type (float or double)
 *   GS_(x)    the name of x for that type (x_f32, x_f64)
 * See Note [Grid sampling] in grid_sample.c for the coordinate rules. */

/* ---- coordinates (PyTorch 1.13's ComputeLocationBase, GridSamplerKernel.cpp) ---- */

/* grid value in [-1, 1] -> pixel coordinate */
static inline GS_T GS_(unnorm)(const gs_axis *a, GS_T c) {
    GS_T s = (GS_T)a->scale;
    return a->ac ? (c + 1) * s : (c + 1) * s - (GS_T)0.5;
}

/* clamp to [0, size - 1]; NaN becomes 0. *g: 1 strictly inside, else 0. */
static inline GS_T GS_(clip)(const gs_axis *a, GS_T x, GS_T *g) {
    GS_T mx = (GS_T)(a->size - 1);
    bool lo = x > 0, hi = x < mx;
    if (g) *g = lo && hi ? 1 : 0;
    return !lo ? 0 : hi ? x : mx;
}

/* reflect into [0, size - 1] (align_corners) or [-0.5, size - 0.5];
 * *g: the derivative's sign (+1 or -1; 0 for a 1-pixel align_corners axis). */
static inline GS_T GS_(reflect)(const gs_axis *a, GS_T x, GS_T *g) {
    GS_T span2 = a->ac ? (GS_T)(a->size - 1) * 2 : (GS_T)a->size * 2;
    if (span2 == 0) {
        if (g) *g = 0;
        return 0;
    }
    GS_T in = a->ac ? x : x + (GS_T)0.5;
    bool neg = in < 0;
    GS_T ab = in < 0 ? -in : in;
    GS_T flips = GS_(trunc)(ab / span2);
    GS_T extra = ab - flips * span2, other = span2 - extra;
    bool more = extra > other;
    if (g) *g = more != neg ? -1 : 1;
    GS_T r = more ? other : extra;
    return a->ac ? r : r - (GS_T)0.5;
}

/* the padding mode's map of a pixel coordinate (compute_coordinates) */
static inline GS_T GS_(pad)(const gs_axis *a, GS_T x) {
    if (a->pad == GS_BORDER) return GS_(clip)(a, x, NULL);
    if (a->pad == GS_REFLECTION) return GS_(clip)(a, GS_(reflect)(a, x, NULL), NULL);
    return x;
}

/* unnormalise then pad (the source coordinate of bilinear and nearest);
 * *g (when not NULL): d(result)/d(grid value) */
static inline GS_T GS_(source)(const gs_axis *a, GS_T c, GS_T *g) {
    GS_T x = GS_(unnorm)(a, c), gc = 1, gr = 1;
    if (a->pad == GS_BORDER) {
        x = GS_(clip)(a, x, g ? &gc : NULL);
    } else if (a->pad == GS_REFLECTION) {
        x = GS_(reflect)(a, x, g ? &gr : NULL);
        x = GS_(clip)(a, x, g ? &gc : NULL);
    }
    if (g) *g = gc * gr * (GS_T)a->scale;
    return x;
}

/* a (floored or rounded) pixel coordinate inside [0, size)? (false for NaN) */
static inline bool GS_(inside)(const gs_axis *a, GS_T x) { return x >= 0 && x < (GS_T)a->size; }

static inline void GS_(cubic_coeffs)(GS_T c[4], GS_T t) {
    const GS_T A = (GS_T)-0.75;
    GS_T x = t + 1;
    c[0] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    x = t;
    c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
    x = 1 - t;
    c[2] = ((A + 2) * x - (A + 3)) * x * x + 1;
    x = 2 - t;
    c[3] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}

/* minus the derivatives of cubic_coeffs w.r.t. t (PyTorch's sign) */
static inline void GS_(cubic_coeffs_grad)(GS_T c[4], GS_T t) {
    const GS_T A = (GS_T)-0.75;
    GS_T x = -1 - t;
    c[0] = (-3 * A * x - 10 * A) * x - 8 * A;
    x = -t;
    c[1] = (-3 * (A + 2) * x - 2 * (A + 3)) * x;
    x = 1 - t;
    c[2] = (3 * (A + 2) * x - 2 * (A + 3)) * x;
    x = 2 - t;
    c[3] = (3 * A * x - 10 * A) * x + 8 * A;
}

/* the plane offset of bicubic tap (x, y) after padding, or -1 outside */
static inline int64_t GS_(tap)(const gs_ctx *k, GS_T x, GS_T y) {
    x = GS_(pad)(&k->ax, x);
    y = GS_(pad)(&k->ay, y);
    if (!GS_(inside)(&k->ax, x) || !GS_(inside)(&k->ay, y)) return -1;
    return (int64_t)y * k->ax.size + (int64_t)x;
}

/* ---- forward: rows (n, oh) in [begin, end) ---- */

static void GS_(fwd_rows)(int64_t begin, int64_t end, void *vctx) {
    const gs_ctx *k = vctx;
    const GS_T *in = k->input, *grid = k->grid;
    GS_T *out = k->out;
    int64_t C = k->C, OH = k->OH, OW = k->OW, plane = k->ay.size * k->ax.size, W = k->ax.size;
    for (int64_t row = begin; row < end; row++) {
        int64_t n = row / OH, oh = row % OH;
        const GS_T *g = grid + row * OW * 2;
        const GS_T *inp = in + n * C * plane;
        GS_T *o = out + (n * C * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ow++, g += 2) {
            if (k->mode == GS_BILINEAR) {
                GS_T x = GS_(source)(&k->ax, g[0], NULL), y = GS_(source)(&k->ay, g[1], NULL);
                GS_T xw = GS_(floor)(x), yn = GS_(floor)(y);
                GS_T w = x - xw, e = 1 - w, nn = y - yn, s = 1 - nn;
                GS_T wnw = s * e, wne = s * w, wsw = nn * e, wse = nn * w;
                bool iw = GS_(inside)(&k->ax, xw), ie = GS_(inside)(&k->ax, xw + 1);
                bool in_n = GS_(inside)(&k->ay, yn), is = GS_(inside)(&k->ay, yn + 1);
                int64_t ix = iw ? (int64_t)xw : ie ? -1 : 0, iy = in_n ? (int64_t)yn : is ? -1 : 0;
                int64_t onw = iy * W + ix;
                for (int64_t c = 0; c < C; c++) {
                    const GS_T *p = inp + c * plane;
                    GS_T vnw = iw && in_n ? p[onw] : 0, vne = ie && in_n ? p[onw + 1] : 0;
                    GS_T vsw = iw && is ? p[onw + W] : 0, vse = ie && is ? p[onw + W + 1] : 0;
                    o[c * OH * OW + ow] = vnw * wnw + vne * wne + vsw * wsw + vse * wse;
                }
            } else if (k->mode == GS_NEAREST) {
                GS_T x = GS_(nearbyint)(GS_(source)(&k->ax, g[0], NULL));
                GS_T y = GS_(nearbyint)(GS_(source)(&k->ay, g[1], NULL));
                bool ok = GS_(inside)(&k->ax, x) && GS_(inside)(&k->ay, y);
                int64_t off = ok ? (int64_t)y * W + (int64_t)x : 0;
                for (int64_t c = 0; c < C; c++) o[c * OH * OW + ow] = ok ? inp[c * plane + off] : 0;
            } else {
                GS_T x = GS_(unnorm)(&k->ax, g[0]), y = GS_(unnorm)(&k->ay, g[1]);
                GS_T ix = GS_(floor)(x), iy = GS_(floor)(y);
                GS_T cx[4], cy[4];
                GS_(cubic_coeffs)(cx, x - ix);
                GS_(cubic_coeffs)(cy, y - iy);
                int64_t off[4][4];
                for (int j = 0; j < 4; j++)
                    for (int i = 0; i < 4; i++) off[j][i] = GS_(tap)(k, ix - 1 + i, iy - 1 + j);
                for (int64_t c = 0; c < C; c++) {
                    const GS_T *p = inp + c * plane;
                    GS_T r[4];
                    for (int j = 0; j < 4; j++) {
                        GS_T v[4];
                        for (int i = 0; i < 4; i++) v[i] = off[j][i] >= 0 ? p[off[j][i]] : 0;
                        r[j] = cx[0] * v[0] + cx[1] * v[1] + cx[2] * v[2] + cx[3] * v[3];
                    }
                    o[c * OH * OW + ow] = cy[0] * r[0] + cy[1] * r[1] + cy[2] * r[2] + cy[3] * r[3];
                }
            }
        }
    }
}

/* ---- backward: batch elements [begin, end) (each owns its grad_input
 * slice, so the sums need no atomics), or rows (n, oh) when only grad_grid
 * is computed (k->ginp NULL) ---- */

static void GS_(bwd_point)(const gs_ctx *k, int64_t n, int64_t oh, int64_t ow) {
    int64_t C = k->C, OH = k->OH, OW = k->OW, plane = k->ay.size * k->ax.size, W = k->ax.size;
    const GS_T *inp = (const GS_T *)k->input + n * C * plane;
    GS_T *gi = k->ginp ? (GS_T *)k->ginp + n * C * plane : NULL;
    const GS_T *go = (const GS_T *)k->gout + n * C * OH * OW + oh * OW + ow;
    int64_t pt = (n * OH + oh) * OW + ow;
    const GS_T *g = (const GS_T *)k->grid + pt * 2;
    GS_T *gg = k->ggrid ? (GS_T *)k->ggrid + pt * 2 : NULL;
    if (k->mode == GS_BILINEAR) {
        GS_T mx, my;
        GS_T x = GS_(source)(&k->ax, g[0], &mx), y = GS_(source)(&k->ay, g[1], &my);
        GS_T xw = GS_(floor)(x), yn = GS_(floor)(y);
        GS_T w = x - xw, e = 1 - w, nn = y - yn, s = 1 - nn;
        GS_T wnw = s * e, wne = s * w, wsw = nn * e, wse = nn * w;
        bool iw = GS_(inside)(&k->ax, xw), ie = GS_(inside)(&k->ax, xw + 1);
        bool in_n = GS_(inside)(&k->ay, yn), is = GS_(inside)(&k->ay, yn + 1);
        int64_t ix = iw ? (int64_t)xw : ie ? -1 : 0, iy = in_n ? (int64_t)yn : is ? -1 : 0;
        int64_t onw = iy * W + ix;
        GS_T gx = 0, gy = 0;
        for (int64_t c = 0; c < C; c++) {
            GS_T d = go[c * OH * OW];
            if (gi) {
                GS_T *q = gi + c * plane;
                if (iw && in_n) q[onw] += wnw * d;
                if (ie && in_n) q[onw + 1] += wne * d;
                if (iw && is) q[onw + W] += wsw * d;
                if (ie && is) q[onw + W + 1] += wse * d;
            }
            if (gg) {
                const GS_T *p = inp + c * plane;
                GS_T vnw = iw && in_n ? p[onw] : 0, vne = ie && in_n ? p[onw + 1] : 0;
                GS_T vsw = iw && is ? p[onw + W] : 0, vse = ie && is ? p[onw + W + 1] : 0;
                gx = gx + ((vne - vnw) * s + (vse - vsw) * nn) * d;
                gy = gy + ((vsw - vnw) * e + (vse - vne) * w) * d;
            }
        }
        if (gg) gg[0] = gx * mx, gg[1] = gy * my;
    } else if (k->mode == GS_NEAREST) {
        if (gi) {
            GS_T x = GS_(nearbyint)(GS_(source)(&k->ax, g[0], NULL));
            GS_T y = GS_(nearbyint)(GS_(source)(&k->ay, g[1], NULL));
            if (GS_(inside)(&k->ax, x) && GS_(inside)(&k->ay, y)) {
                int64_t off = (int64_t)y * W + (int64_t)x;
                for (int64_t c = 0; c < C; c++) gi[c * plane + off] += go[c * OH * OW];
            }
        }
        if (gg) gg[0] = 0, gg[1] = 0;
    } else {
        GS_T x = GS_(unnorm)(&k->ax, g[0]), y = GS_(unnorm)(&k->ay, g[1]);
        GS_T ix = GS_(floor)(x), iy = GS_(floor)(y), tx = x - ix, ty = y - iy;
        GS_T cx[4], cy[4], dx[4], dy[4];
        GS_(cubic_coeffs)(cx, tx);
        GS_(cubic_coeffs)(cy, ty);
        GS_(cubic_coeffs_grad)(dx, tx);
        GS_(cubic_coeffs_grad)(dy, ty);
        int64_t off[4][4]; /* [i (x)][j (y)] */
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) off[i][j] = GS_(tap)(k, ix - 1 + i, iy - 1 + j);
        GS_T gx = 0, gy = 0;
        for (int64_t c = 0; c < C; c++) {
            GS_T d = go[c * OH * OW];
            const GS_T *p = inp + c * plane;
            GS_T *q = gi ? gi + c * plane : NULL;
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) {
                    if (q && off[i][j] >= 0) q[off[i][j]] += d * cx[i] * cy[j];
                    if (gg) { /* a tap outside reads 0, still times its (maybe NaN) weight */
                        GS_T v = off[i][j] >= 0 ? p[off[i][j]] : 0;
                        gx = gx - v * d * dx[i] * cy[j];
                        gy = gy - v * d * dy[j] * cx[i];
                    }
                }
        }
        if (gg) gg[0] = gx * (GS_T)k->ax.scale, gg[1] = gy * (GS_T)k->ay.scale;
    }
}

static void GS_(bwd_batches)(int64_t begin, int64_t end, void *vctx) {
    const gs_ctx *k = vctx;
    for (int64_t n = begin; n < end; n++)
        for (int64_t oh = 0; oh < k->OH; oh++)
            for (int64_t ow = 0; ow < k->OW; ow++) GS_(bwd_point)(k, n, oh, ow);
}

static void GS_(bwd_rows)(int64_t begin, int64_t end, void *vctx) {
    const gs_ctx *k = vctx;
    for (int64_t row = begin; row < end; row++)
        for (int64_t ow = 0; ow < k->OW; ow++) GS_(bwd_point)(k, row / k->OH, row % k->OH, ow);
}
