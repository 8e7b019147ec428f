/* grid_sample3d_tmpl.h -- the per-dtype loops of grid_sampler_3d (forward
 * and backward), included by grid_sample.c after grid_sample_tmpl.h with the
 * same GS_T / GS_(x). See Note [Volumetric grid sampling] in grid_sample.c:
 * these follow PyTorch 1.13's scalar CPU kernel (GridSampler.cpp with
 * GridSampler.h's helpers), whose arithmetic differs from the 2-d vectorised
 * kernel's. */

/* ---- coordinates (GridSampler.h) ---- */

/* grid value -> pixel coordinate; *g (when not NULL): its derivative */
static inline GS_T GS_(unnorm3)(const gs_axis *a, GS_T c, GS_T *g) {
    if (a->ac) {
        if (g) *g = (GS_T)(a->size - 1) / 2;
        return ((c + 1) / 2) * (GS_T)(a->size - 1);
    }
    if (g) *g = (GS_T)a->size / 2;
    return ((c + 1) * (GS_T)a->size - 1) / 2;
}

/* clip_coordinates: min(size - 1, max(x, 0)) with std::min/max's NaN
 * behaviour (a NaN x gives size - 1) */
static inline GS_T GS_(clip3)(const gs_axis *a, GS_T x) {
    GS_T mx = (GS_T)(a->size - 1);
    GS_T lo = x < 0 ? 0 : x;
    return lo < mx ? lo : mx;
}

/* clip_coordinates_set_grad: a NaN x stays NaN with derivative 1 */
static inline GS_T GS_(clip3_grad)(const gs_axis *a, GS_T x, GS_T *g) {
    GS_T mx = (GS_T)(a->size - 1);
    if (x <= 0) {
        *g = 0;
        return 0;
    }
    if (x >= mx) {
        *g = 0;
        return mx;
    }
    *g = 1;
    return x;
}

/* reflect_coordinates(_set_grad) between twice_low/2 and twice_high/2
 * ((0, 2 (size - 1)) with align_corners, else (-1, 2 size - 1)); *g (when
 * not NULL) the derivative's sign. The flip count's parity decides; a
 * NaN or huge count (undefined as an int in PyTorch) counts as even. */
static inline GS_T GS_(reflect3)(const gs_axis *a, GS_T x, GS_T *g) {
    int64_t tl = a->ac ? 0 : -1, th = a->ac ? 2 * (a->size - 1) : 2 * a->size - 1;
    if (tl == th) {
        if (g) *g = 0;
        return 0;
    }
    GS_T mn = (GS_T)tl / 2, span = (GS_T)(th - tl) / 2;
    GS_T in = x - mn, sign = 1;
    if (in < 0) in = -in, sign = -1;
    GS_T extra = GS_(fmod)(in, span);
    GS_T flips = GS_(floor)(in / span);
    bool odd = flips == flips && GS_(fabs)(flips) < (GS_T)2147483647.0 && GS_(fmod)(flips, (GS_T)2) != 0;
    if (g) *g = odd ? -sign : sign;
    return odd ? span - extra + mn : extra + mn;
}

/* grid_sampler_compute_source_index(_set_grad): unnormalise, pad; *g (when
 * not NULL) d(result)/d(grid value) */
static inline GS_T GS_(source3)(const gs_axis *a, GS_T c, GS_T *g) {
    GS_T gu = 1, gr = 1, gc = 1;
    GS_T x = GS_(unnorm3)(a, c, g ? &gu : NULL);
    if (a->pad == GS_BORDER) {
        x = g ? GS_(clip3_grad)(a, x, &gc) : GS_(clip3)(a, x);
    } else if (a->pad == GS_REFLECTION) {
        x = GS_(reflect3)(a, x, g ? &gr : NULL);
        x = g ? GS_(clip3_grad)(a, x, &gc) : GS_(clip3)(a, x);
    }
    if (g) *g = gu * gr * gc;
    return x;
}

/* ---- one output point ---- */

/* the eight corners of the cell around (x, y, z): their plane offsets (-1
 * outside: a corner outside the input, or a non-finite or huge coordinate,
 * which PyTorch's int64 cast sends outside) and the floored coordinates */
typedef struct {
    GS_T x0, y0, z0;
    int64_t off[8]; /* tnw, tne, tsw, tse, bnw, bne, bsw, bse */
} GS_(cell);

static inline void GS_(cell_of)(const gs_ctx *k, GS_T x, GS_T y, GS_T z, GS_(cell) *c) {
    c->x0 = GS_(floor)(x), c->y0 = GS_(floor)(y), c->z0 = GS_(floor)(z);
    for (int i = 0; i < 8; i++) {
        GS_T cx = c->x0 + (i & 1), cy = c->y0 + ((i >> 1) & 1), cz = c->z0 + ((i >> 2) & 1);
        bool in = GS_(inside)(&k->ax, cx) && GS_(inside)(&k->ay, cy) && GS_(inside)(&k->az, cz);
        c->off[i] = in ? ((int64_t)cz * k->ay.size + (int64_t)cy) * k->ax.size + (int64_t)cx : -1;
    }
}

static void GS_(fwd3_rows)(int64_t begin, int64_t end, void *vctx) {
    const gs_ctx *k = vctx;
    const GS_T *in = k->input, *grid = k->grid;
    GS_T *out = k->out;
    int64_t C = k->C, OD = k->OD, OH = k->OH, OW = k->OW, osp = OD * OH * OW;
    int64_t vol = k->az.size * k->ay.size * k->ax.size;
    for (int64_t row = begin; row < end; row++) { /* row = (n, od, oh) */
        int64_t n = row / (OD * OH), odh = row % (OD * OH);
        const GS_T *g = grid + row * OW * 3;
        const GS_T *inp = in + n * C * vol;
        GS_T *o = out + n * C * osp + odh * OW;
        for (int64_t ow = 0; ow < OW; ow++, g += 3) {
            GS_T x = GS_(source3)(&k->ax, g[0], NULL), y = GS_(source3)(&k->ay, g[1], NULL);
            GS_T z = GS_(source3)(&k->az, g[2], NULL);
            if (k->mode == GS_BILINEAR) {
                GS_(cell) cl;
                GS_(cell_of)(k, x, y, z, &cl);
                GS_T x1 = cl.x0 + 1, y1 = cl.y0 + 1, z1 = cl.z0 + 1;
                GS_T w[8] = { (x1 - x) * (y1 - y) * (z1 - z), (x - cl.x0) * (y1 - y) * (z1 - z),
                              (x1 - x) * (y - cl.y0) * (z1 - z), (x - cl.x0) * (y - cl.y0) * (z1 - z),
                              (x1 - x) * (y1 - y) * (z - cl.z0), (x - cl.x0) * (y1 - y) * (z - cl.z0),
                              (x1 - x) * (y - cl.y0) * (z - cl.z0), (x - cl.x0) * (y - cl.y0) * (z - cl.z0) };
                for (int64_t c = 0; c < C; c++) {
                    const GS_T *p = inp + c * vol;
                    GS_T v = 0;
                    for (int i = 0; i < 8; i++)
                        if (cl.off[i] >= 0) v += p[cl.off[i]] * w[i];
                    o[c * osp + ow] = v;
                }
            } else { /* nearest */
                GS_T rx = GS_(round)(x), ry = GS_(round)(y), rz = GS_(round)(z);
                bool ok = GS_(inside)(&k->ax, rx) && GS_(inside)(&k->ay, ry) && GS_(inside)(&k->az, rz);
                int64_t off = ok ? ((int64_t)rz * k->ay.size + (int64_t)ry) * k->ax.size + (int64_t)rx : 0;
                for (int64_t c = 0; c < C; c++) o[c * osp + ow] = ok ? inp[c * vol + off] : 0;
            }
        }
    }
}

/* The backward at output point (n, pt) (pt the flat (od, oh, ow)): adds
 * into grad_input's batch-n slice, writes grad_grid's 3 values. */
static void GS_(bwd3_point)(const gs_ctx *k, int64_t n, int64_t pt) {
    int64_t C = k->C, osp = k->OD * k->OH * k->OW, vol = k->az.size * k->ay.size * k->ax.size;
    const GS_T *inp = (const GS_T *)k->input + n * C * vol;
    GS_T *gi = k->ginp ? (GS_T *)k->ginp + n * C * vol : NULL;
    const GS_T *go = (const GS_T *)k->gout + n * C * osp + pt;
    const GS_T *g = (const GS_T *)k->grid + (n * osp + pt) * 3;
    GS_T *gg = k->ggrid ? (GS_T *)k->ggrid + (n * osp + pt) * 3 : NULL;
    GS_T mx, my, mz;
    GS_T x = GS_(source3)(&k->ax, g[0], &mx), y = GS_(source3)(&k->ay, g[1], &my);
    GS_T z = GS_(source3)(&k->az, g[2], &mz);
    if (k->mode == GS_NEAREST) {
        if (gi) {
            GS_T rx = GS_(round)(x), ry = GS_(round)(y), rz = GS_(round)(z);
            if (GS_(inside)(&k->ax, rx) && GS_(inside)(&k->ay, ry) && GS_(inside)(&k->az, rz)) {
                int64_t off = ((int64_t)rz * k->ay.size + (int64_t)ry) * k->ax.size + (int64_t)rx;
                for (int64_t c = 0; c < C; c++) gi[c * vol + off] += go[c * osp];
            }
        }
        if (gg) gg[0] = 0, gg[1] = 0, gg[2] = 0;
        return;
    }
    GS_(cell) cl;
    GS_(cell_of)(k, x, y, z, &cl);
    /* distances to the far (1) and near (0) faces, as PyTorch names them */
    GS_T x1 = cl.x0 + 1 - x, y1 = cl.y0 + 1 - y, z1 = cl.z0 + 1 - z;
    GS_T x0 = x - cl.x0, y0 = y - cl.y0, z0 = z - cl.z0;
    GS_T w[8] = { x1 * y1 * z1, x0 * y1 * z1, x1 * y0 * z1, x0 * y0 * z1,
                  x1 * y1 * z0, x0 * y1 * z0, x1 * y0 * z0, x0 * y0 * z0 };
    GS_T gx = 0, gy = 0, gz = 0;
    for (int64_t c = 0; c < C; c++) {
        GS_T d = go[c * osp];
        if (gi) {
            GS_T *q = gi + c * vol;
            for (int i = 0; i < 8; i++)
                if (cl.off[i] >= 0) q[cl.off[i]] += w[i] * d;
        }
        if (!gg) continue;
        const GS_T *p = inp + c * vol;
        for (int i = 0; i < 8; i++) {
            if (cl.off[i] < 0) continue;
            GS_T v = p[cl.off[i]];
            bool bx = i & 1, by = (i >> 1) & 1, bz = (i >> 2) & 1;
            GS_T fx = bx ? x0 : x1, fy = by ? y0 : y1, fz = bz ? z0 : z1;
            /* d(weight)/dx = +-fy fz etc.: PyTorch's order of products */
            GS_T tx = v * fy * fz * d, ty = v * fx * fz * d, tz = v * fx * fy * d;
            gx = bx ? gx + tx : gx - tx;
            gy = by ? gy + ty : gy - ty;
            gz = bz ? gz + tz : gz - tz;
        }
    }
    if (gg) gg[0] = mx * gx, gg[1] = my * gy, gg[2] = mz * gz;
}

static void GS_(bwd3_batches)(int64_t begin, int64_t end, void *vctx) {
    const gs_ctx *k = vctx;
    int64_t osp = k->OD * k->OH * k->OW;
    for (int64_t n = begin; n < end; n++)
        for (int64_t pt = 0; pt < osp; pt++) GS_(bwd3_point)(k, n, pt);
}

static void GS_(bwd3_rows)(int64_t begin, int64_t end, void *vctx) {
    const gs_ctx *k = vctx;
    int64_t DH = k->OD * k->OH;
    for (int64_t row = begin; row < end; row++) /* row = (n, od, oh) */
        for (int64_t ow = 0; ow < k->OW; ow++) GS_(bwd3_point)(k, row / DH, (row % DH) * k->OW + ow);
}
