/* Portable kernels: plain C11 loops written so that the compiler vectorises them for
 * whatever the target has (SSE2 on baseline x86-64, NEON on aarch64). On x86-64 the same
 * source is compiled a second time with AVX2 enabled (k_portable_avx2.c, names suffixed
 * _avx2), so that the portable path can be compared with compiled code that uses the
 * CPU's vector ISA (numba's kernels do).
 *
 * GEMMs: "packed" layers repack the weights per call into panels of 32 channels x K4
 * (int8, k-major): a tile of up to 4 pixels x 32 channels keeps int32 accumulators the
 * compiler holds in vector registers, each product u * w fits int16 (|u| <= 255,
 * |w| <= 128), which lets it use 16-bit multiplies; the pixels' bytes come straight from
 * the input (1x1 convs, FC), the padded input (implicit im2col: one offset per k) or
 * im2col rows. "Direct" layers (few pixels, long reductions) run dot products along K on
 * the weights as given. Requantization runs over a row of up to 32 channels in int64
 * lanes (TFLM's MultiplyByQuantizedMultiplier, or the merged rounding when every channel
 * shifts right).
 */
#include "engine.h"

#if defined(HB_PORTABLE_AVX2) && HB_PORTABLE_AVX2
#define PFN __attribute__((target("avx2,fma,bmi,bmi2,popcnt")))
#define PNAME(n) n##_avx2
#else
#define PFN
#define PNAME(n) n
#endif

#define PB 32 /* channels per panel */

/* --- requantization of rows of channels ------------------------------------------------ */
/* np rows (pixels) of n accumulators (bias not yet added) of channels o0.., v + i * vs;
 * out + i * os: n bytes u8 each. One loop over the channels per row, vectorised. */
PFN static void PNAME(rq_rows)(const int32_t *restrict v, int64_t vs, int64_t np,
                               const int32_t *restrict beff, int64_t n, const int64_t *f,
                               const int32_t *restrict qp, int64_t o0, uint8_t *restrict out,
                               int64_t os) {
    const int64_t O16 = f[F_O16];
    const int32_t oo = (int32_t)f[F_OO] + 128, lo = (int32_t)f[F_LO] + 128,
                  hi = (int32_t)f[F_HI] + 128;
    const int32_t *restrict m = qp + QP_M * O16 + o0;
    if (f[F_FASTRQ]) {
        /* every channel shifts right by rs >= 1: (p + 2^30 + 2^(30+rs) - [p < 0] 2^31)
         * >> (31 + rs), as (high 32 bits) >> (rs - 1) ([p < 0] for TFLM's [p < -2^30]:
         * the same on [-2^30, 0), where the quotient is 0 either way; see k_avx2.c) */
        const int32_t *restrict rsm1 = qp + QP_RSM1 * O16 + o0;
        const int64_t *restrict add = (const int64_t *)(const void *)(qp + QP_ADDC * O16) + o0;
        for (int64_t i = 0; i < np; i++) {
            const int32_t *restrict vi = v + i * vs;
            uint8_t *restrict oi = out + i * os;
            for (int64_t j = 0; j < n; j++) {
                const int32_t x = (int32_t)((uint32_t)vi[j] + (uint32_t)beff[j]);
                const int64_t p = (int64_t)x * m[j];
                const uint64_t s = (uint64_t)p + (uint64_t)add[j] - (p < 0 ? (uint64_t)1 << 31 : 0);
                /* the high 32 bits (a logical shift: the low 32 bits are the same) */
                int32_t y = ((int32_t)(uint32_t)(s >> 32) >> rsm1[j]) + oo;
                y = y < lo ? lo : y;
                oi[j] = (uint8_t)(y > hi ? hi : y);
            }
        }
        return;
    }
    const int32_t *restrict ls = qp + QP_LS * O16 + o0, *restrict rs = qp + QP_RS * O16 + o0;
    const int32_t *restrict mask = qp + QP_MASK * O16 + o0, *restrict thr = qp + QP_THR * O16 + o0;
    for (int64_t i = 0; i < np; i++) {
        const int32_t *restrict vi = v + i * vs;
        uint8_t *restrict oi = out + i * os;
        for (int64_t j = 0; j < n; j++) {
            const uint32_t x = (uint32_t)vi[j] + (uint32_t)beff[j];
            const int32_t xl = (int32_t)(x << ls[j]);
            const uint64_t p = (uint64_t)((int64_t)xl * m[j]) + ((uint64_t)1 << 30);
            const int32_t h = (int32_t)(uint32_t)(p >> 31); /* |h| < 2^31: m < 2^31 */
            const int32_t t = thr[j] + (h < 0 ? 1 : 0);
            int32_t y = (h >> rs[j]) + ((h & mask[j]) > t ? 1 : 0) + oo;
            y = y < lo ? lo : y;
            oi[j] = (uint8_t)(y > hi ? hi : y);
        }
    }
}

/* --- packed GEMM ------------------------------------------------------------------------ */
/* Channels go in blocks of 32, the last one of 16 when 16 or fewer remain (O16 - 32 b):
 * block b starts at b * 32 * K4 and holds K4 rows of its width. */
HB_INLINE int64_t block_width(int64_t O16, int64_t b) {
    return O16 - b * PB >= PB ? PB : 16;
}

/* one block of wb channels from channel o0: panel [K4][wb] (zeros beyond O and K) */
HB_INLINE void pack_block(const int8_t *restrict w, int64_t O, int64_t K, int64_t K4,
                          int64_t o0, const int64_t wb, int8_t *restrict d,
                          int32_t *restrict rowsum) {
    for (int64_t j = 0; j < wb; j++) {
        const int64_t o = o0 + j;
        int32_t s = 0;
        if (o < O) {
            const int8_t *restrict src = w + o * K;
            for (int64_t k = 0; k < K; k++) {
                d[k * wb + j] = src[k];
                s += src[k];
            }
        } else {
            for (int64_t k = 0; k < K; k++) d[k * wb + j] = 0;
        }
        for (int64_t k = K; k < K4; k++) d[k * wb + j] = 0;
        rowsum[o] = s;
    }
}

/* weights [O][K] -> panels [block][K4][width], row sums */
PFN static void PNAME(pack)(const int8_t *restrict w, int64_t O, int64_t K, int64_t K4,
                            int64_t O16, int8_t *restrict dst, int32_t *restrict rowsum) {
    for (int64_t b = 0; b * PB < O16; b++) {
        if (block_width(O16, b) == PB)
            pack_block(w, O, K, K4, b * PB, PB, dst + b * PB * K4, rowsum);
        else
            pack_block(w, O, K, K4, b * PB, 16, dst + b * PB * K4, rowsum);
    }
}

/* one tile: MR pixels (rows[i][koff[k]] is pixel i's k-th byte) x NB channels */
HB_INLINE void tile(const uint8_t *const *rows, const int32_t *restrict koff, int64_t K,
                    const int8_t *restrict B, const int mr, const int nb, int32_t acc[][PB]) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nb; j++) acc[i][j] = 0;
    for (int64_t k = 0; k < K; k++) {
        const int8_t *restrict b = B + k * nb;
        const int32_t o = koff[k];
        for (int i = 0; i < mr; i++) {
            const int16_t a = rows[i][o];
            for (int j = 0; j < nb; j++) acc[i][j] += (int16_t)(a * b[j]);
        }
    }
}

#define MR 4
#define TILE_NB(NB)                                                                         \
    switch (mr) {                                                                           \
    case 4: tile(rows, koff, K4, B, 4, NB, acc); break;                                     \
    case 3: tile(rows, koff, K4, B, 3, NB, acc); break;                                     \
    case 2: tile(rows, koff, K4, B, 2, NB, acc); break;                                     \
    default: tile(rows, koff, K4, B, 1, NB, acc); break;                                    \
    }

/* pixel m's bytes: base + m * rstride, or (implicit) the padded input's pixel
 * (oy * SH, ox * SW); koff: K4 offsets */
PFN static void PNAME(gemm_packed)(const hb_gemm *g, const uint8_t *base, int64_t rstride,
                                   int implicit, const int32_t *koff, int64_t K4) {
    const opctx *c = &g->c;
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], M = f[F_OH] * f[F_OW], O16 = f[F_O16];
    const int64_t C = f[F_C], OW = f[F_OW], SH = f[F_SH], SW = f[F_SW], WP = f[F_WP];
    for (int64_t o = 0; o < O16 && c->sums; o++)
        c->beff[o] = o < O ? fold_bias(c, o, g->rowsum[o]) : 0;
    for (int64_t m0 = 0; m0 < M; m0 += MR) {
        const int mr = M - m0 < MR ? (int)(M - m0) : MR;
        const uint8_t *rows[MR];
        for (int i = 0; i < mr; i++) {
            const int64_t m = m0 + i;
            rows[i] = implicit ? base + ((m / OW) * SH * WP + (m % OW) * SW) * C
                               : base + m * rstride;
        }
        for (int64_t b = 0; b * PB < O16; b++) {
            int32_t acc[MR][PB];
            const int8_t *B = c->pk + b * PB * K4;
            if (block_width(O16, b) == PB) {
                TILE_NB(PB)
            } else {
                TILE_NB(16)
            }
            const int64_t o0 = b * PB, n = O - o0 < PB ? O - o0 : PB;
            PNAME(rq_rows)(acc[0], PB, mr, c->beff + o0, n, f, c->qp, o0, g->out + m0 * O + o0, O);
        }
    }
}
#undef TILE_NB

/* --- direct GEMM: dot products along K on the weights as given ------------------------- */
PFN static void PNAME(gemm_direct)(const uint8_t *restrict A, int64_t lda, int64_t M,
                                   const opctx *c, uint8_t *restrict out) {
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], K = f[F_K];
    for (int64_t o = 0; o < O && c->sums; o++) {
        const int8_t *restrict w = c->w + o * K;
        int32_t rs = 0;
        for (int64_t k = 0; k < K; k++) rs += w[k];
        c->beff[o] = fold_bias(c, o, rs);
    }
    int32_t acc[2][PB];
    for (int64_t i = 0; i < M; i += 2) {
        /* two pixels (the second a copy of the first at the end) x two channels per pass:
         * each loaded byte serves two dot products (four reductions in one loop) */
        const uint8_t *restrict a0 = A + i * lda, *restrict a1 = i + 1 < M ? a0 + lda : a0;
        for (int64_t o0 = 0; o0 < O; o0 += PB) {
            const int64_t n = O - o0 < PB ? O - o0 : PB;
            for (int64_t j = 0; j < n; j += 2) {
                const int8_t *restrict w0 = c->w + (o0 + j) * K;
                const int8_t *restrict w1 = j + 1 < n ? w0 + K : w0;
                int32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0;
                for (int64_t k = 0; k < K; k++) {
                    s00 += (int16_t)(a0[k] * w0[k]);
                    s01 += (int16_t)(a0[k] * w1[k]);
                    s10 += (int16_t)(a1[k] * w0[k]);
                    s11 += (int16_t)(a1[k] * w1[k]);
                }
                acc[0][j] = s00;
                acc[0][j + 1] = s01;
                acc[1][j] = s10;
                acc[1][j + 1] = s11;
            }
            PNAME(rq_rows)(acc[0], PB, i + 1 < M ? 2 : 1, c->beff + o0, n, f, c->qp, o0,
                           out + i * O + o0, O);
        }
    }
}

PFN static void PNAME(gemm)(const hb_gemm *g) {
    const int64_t *f = g->c.f;
    const int64_t K4 = f[F_K4];
    const int64_t M = f[F_OH] * f[F_OW];
    if (f[F_DIRECT]) {
        const uint8_t *A = g->in;
        int64_t lda = f[F_K];
        if (f[F_IM2COL]) {
            if (!g->cols_kept) hb_im2col(g->in, f, (uint8_t)(128 - f[F_IO]), g->cols);
            A = g->cols;
            lda = K4;
        }
        PNAME(gemm_direct)(A, lda, M, &g->c, g->out);
        return;
    }
    int32_t *koff = g->koff;
    if (f[F_IMPLICIT]) { /* from the padded input: filter row ky's bytes at ky*DH*WP*C */
        hb_pad_input(g->in, f, (uint8_t)(128 - f[F_IO]), g->pad);
        const int64_t KH = f[F_KH], run = K4 / KH;
        for (int64_t ky = 0; ky < KH; ky++)
            for (int64_t j = 0; j < run; j++)
                koff[ky * run + j] = (int32_t)(ky * f[F_DH] * f[F_WP] * f[F_C] + j);
        PNAME(gemm_packed)(g, g->pad, 0, 1, koff, K4);
        return;
    }
    for (int64_t k = 0; k < K4; k++) koff[k] = (int32_t)k;
    if (f[F_IM2COL]) {
        if (!g->cols_kept) hb_im2col(g->in, f, (uint8_t)(128 - f[F_IO]), g->cols);
        PNAME(gemm_packed)(g, g->cols, K4, 0, koff, K4);
        return;
    }
    /* rows in place: K bytes per pixel; taps K..K4 have zero weights, read within the
     * arena's slack (every tensor has 64 bytes after it) */
    PNAME(gemm_packed)(g, g->in, f[F_K], 0, koff, K4);
}

/* --- depthwise -------------------------------------------------------------------------- */
/* 16 channels of one output pixel: T taps (px + toff[t]) times the block's weights wt[T][16]
 * (accumulators stay in registers; T a constant where the caller knows it) */
HB_INLINE void dw_pixel(const uint8_t *restrict px, const int64_t *restrict toff,
                        const int8_t *restrict wt, const int64_t T, int32_t *restrict out) {
    int32_t acc[16] = {0};
    for (int64_t t = 0; t < T; t++) {
        const uint8_t *restrict u = px + toff[t];
        const int8_t *restrict w = wt + t * 16;
        /* kept a loop (gcc would unroll it first, then vectorise little of it) */
#pragma GCC unroll 1
        for (int j = 0; j < 16; j++) acc[j] += (int16_t)(u[j] * w[j]);
    }
    for (int j = 0; j < 16; j++) out[j] = acc[j];
}

/* the block's pixels of one output row, then their requantization */
HB_INLINE void dw_row(const uint8_t *P, const opctx *c, int64_t o, int64_t oy,
                      const int64_t *toff, const int8_t *wt, const int64_t T, uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t OW = f[F_OW], OC = f[F_OC], SH = f[F_SH], SW = f[F_SW], WP = f[F_WP];
    const int64_t n = OC - o < 16 ? OC - o : 16;
    for (int64_t x0 = 0; x0 < OW; x0 += 64) {
        const int64_t nx = OW - x0 < 64 ? OW - x0 : 64;
        int32_t acc[64][16];
        for (int64_t i = 0; i < nx; i++)
            dw_pixel(P + ((oy * SH) * WP + (x0 + i) * SW) * OC + o, toff, wt, T, acc[i]);
        PNAME(rq_rows)(acc[0], 16, nx, c->beff + o, n, f, c->qp, o, out + (oy * OW + x0) * OC + o,
                       OC);
    }
}

PFN static void PNAME(dw)(const uint8_t *P, const opctx *c, uint32_t *accu, uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t OH = f[F_OH], OC = f[F_OC], KH = f[F_KH], KW = f[F_KW];
    const int64_t DH = f[F_DH], DW = f[F_DW], WP = f[F_WP], T = KH * KW;
    const int8_t *restrict w = c->w;
    (void)accu;
    if (T > 64) { /* more taps than the tables below hold: one tap at a time */
        hb_dw_taps(P, c, out);
        return;
    }
    for (int64_t o = 0; o < OC; o++) {
        int32_t rs = 0;
        for (int64_t t = 0; t < T; t++) rs += w[t * OC + o];
        c->beff[o] = fold_bias(c, o, rs);
    }
    int64_t toff[64];
    int8_t wt[64 * 16];
    for (int64_t t = 0; t < T; t++) toff[t] = ((t / KW) * DH * WP + (t % KW) * DW) * OC;
    for (int64_t o = 0; o < OC; o += 16) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < 16; j++) wt[t * 16 + j] = o + j < OC ? w[t * OC + o + j] : 0;
        for (int64_t oy = 0; oy < OH; oy++) {
            if (T == 9)
                dw_row(P, c, o, oy, toff, wt, 9, out);
            else
                dw_row(P, c, o, oy, toff, wt, T, out);
        }
    }
}

/* --- ADD ------------------------------------------------------------------------------- */
/* MultiplyByQuantizedMultiplier written for vectorising (the compiler turns the ADD loop's
 * three into vector code; fixedpoint.h's hb_fp_mbqm, the scalar reference, does not
 * vectorise as well: 1.5x the loop's time): m >= 0, so the product cannot saturate and its
 * rounding is floor((v m + 2^30) / 2^31); then TFLM's RoundingDivideByPOT */
HB_INLINE int32_t mbqm_v(int32_t x, int32_t m, int32_t shift) {
    const int32_t ls = shift > 0 ? shift : 0, rs = shift > 0 ? 0 : -shift;
    const int32_t xl = (int32_t)((uint32_t)x << ls);
    const int32_t h = (int32_t)(((int64_t)xl * (int64_t)m + ((int64_t)1 << 30)) >> 31);
    const int32_t mask = (int32_t)(((int64_t)1 << rs) - 1);
    const int32_t thr = (mask >> 1) + (h < 0 ? 1 : 0);
    return (h >> rs) + ((h & mask) > thr ? 1 : 0);
}

PFN static void PNAME(add)(const uint8_t *restrict a, const uint8_t *restrict b,
                           const int64_t *f, uint8_t *restrict out) {
    const int64_t L = f[F_OUT_SIZE];
    const int32_t io1 = (int32_t)f[F_IO] - 128, io2 = (int32_t)f[F_IO2] - 128;
    const int32_t ls = (int32_t)f[F_LSH];
    const int32_t m1 = (int32_t)f[F_M1], s1 = (int32_t)f[F_S1], m2 = (int32_t)f[F_M2],
                  s2 = (int32_t)f[F_S2], mo = (int32_t)f[F_MO], so = (int32_t)f[F_SO];
    const int32_t oo = (int32_t)f[F_OO] + 128, lo = (int32_t)f[F_LO] + 128,
                  hi = (int32_t)f[F_HI] + 128;
    for (int64_t i = 0; i < L; i++) {
        const int32_t x1 = (int32_t)((uint32_t)((int32_t)a[i] + io1) << ls);
        const int32_t x2 = (int32_t)((uint32_t)((int32_t)b[i] + io2) << ls);
        int32_t r = mbqm_v(mbqm_v(x1, m1, s1) + mbqm_v(x2, m2, s2), mo, so) + oo;
        r = r < lo ? lo : r;
        r = r > hi ? hi : r;
        out[i] = (uint8_t)r;
    }
}

/* --- MAX_POOL_2D on bytes ----------------------------------------------------------------- */
PFN static void PNAME(maxpool)(const uint8_t *restrict x, const int64_t *f,
                               uint8_t *restrict out) {
    const int64_t H = f[F_H], W = f[F_W], C = f[F_C], OH = f[F_OH], OW = f[F_OW];
    const int64_t KH = f[F_KH], KW = f[F_KW], SH = f[F_SH], SW = f[F_SW], PT = f[F_PT],
                  PL = f[F_PL];
    const uint8_t lo = (uint8_t)(f[F_LO] + 128), hi = (uint8_t)(f[F_HI] + 128);
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++) {
            uint8_t *restrict d = out + (oy * OW + ox) * C;
            for (int64_t c = 0; c < C; c++) d[c] = 0;
            for (int64_t ky = 0; ky < KH; ky++) {
                const int64_t iy = oy * SH - PT + ky;
                if (iy < 0 || iy >= H) continue;
                for (int64_t kx = 0; kx < KW; kx++) {
                    const int64_t ix = ox * SW - PL + kx;
                    if (ix < 0 || ix >= W) continue;
                    const uint8_t *restrict s = x + (iy * W + ix) * C;
                    for (int64_t c = 0; c < C; c++) d[c] = s[c] > d[c] ? s[c] : d[c];
                }
            }
            for (int64_t c = 0; c < C; c++) {
                const uint8_t v = d[c] < lo ? lo : d[c];
                d[c] = v > hi ? hi : v;
            }
        }
}

#if defined(HB_PORTABLE_AVX2) && HB_PORTABLE_AVX2
const hb_isa hb_isa_portable_avx2 = {"portable-avx2", pack_avx2,    gemm_avx2, dw_avx2,
                                     add_avx2,        maxpool_avx2, NULL};
#else
const hb_isa hb_isa_portable = {"portable", pack, gemm, dw, add, maxpool, NULL};

volatile int32_t hb_peak_sink;

/* --- helpers every ISA may use (compiled once) ----------------------------------------- */
#define COPY_LIBC(d, s, n) memcpy((d), (s), (size_t)(n))
#define FILL_LIBC(d, v, n) memset((d), (v), (size_t)(n))

/* input (H, W, C) u8 -> rows (OH*OW, K4): taps (ky, kx, c), padded taps = pad, tail 0 */
void hb_im2col(const uint8_t *x, const int64_t *f, uint8_t pad, uint8_t *cols) {
    IM2COL_BODY(COPY_LIBC, FILL_LIBC)
}

/* input (H, W, C) u8 -> padded (HP, WP, C*DM) with pad = zp + 128, channels repeated DM
 * times (depthwise output channel ic*DM + m reads input channel ic; DM = 1 for convs). */
void hb_pad_input(const uint8_t *x, const int64_t *f, uint8_t pad, uint8_t *p) {
    const int64_t H = f[F_H], W = f[F_W], C = f[F_C], HP = f[F_HP], WP = f[F_WP],
                  PT = f[F_PT], PL = f[F_PL];
    const int64_t DM = f[F_KIND] == OP_DW ? f[F_DM] : 1, OC = C * DM;
    const int64_t row = WP * OC;
    const int64_t y1 = H + PT < HP ? H + PT : HP; /* rows [PT, y1) hold input */
    const int64_t wn = W + PL < WP ? W : WP - PL; /* input pixels per row that fit */
    memset(p, pad, (size_t)(PT * row));
    for (int64_t py = PT; py < y1; py++) {
        uint8_t *d = p + py * row;
        const uint8_t *sx = x + (py - PT) * W * C;
        memset(d, pad, (size_t)(PL * OC));
        if (DM == 1) {
            memcpy(d + PL * OC, sx, (size_t)(wn * C));
        } else {
            for (int64_t xx = 0; xx < wn; xx++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t m = 0; m < DM; m++)
                        d[(PL + xx) * OC + c * DM + m] = sx[xx * C + c];
        }
        memset(d + (PL + wn) * OC, pad, (size_t)((WP - PL - wn) * OC));
    }
    memset(p + y1 * row, pad, (size_t)((HP - y1) * row));
}

/* the weights [O][KH][KW*C] of an implicit-im2col conv with each filter row padded with
 * zeros to K4 / KH bytes (a multiple of 4) */
void hb_pad_weights(const int8_t *w, const int64_t *f, int8_t *wx) {
    const int64_t run = f[F_KW] * f[F_C], runp = f[F_K4] / f[F_KH];
    for (int64_t o = 0; o < f[F_OC]; o++)
        for (int64_t ky = 0; ky < f[F_KH]; ky++) {
            int8_t *d = wx + o * f[F_K4] + ky * runp;
            memcpy(d, w + o * f[F_K] + ky * run, (size_t)run);
            memset(d + run, 0, (size_t)(runp - run));
        }
}

/* depthwise for any number of taps: each output pixel's channels accumulated tap by tap
 * (the channels of a tap are contiguous: the inner loop vectorises), then requantized */
void hb_dw_taps(const uint8_t *P, const opctx *c, uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t OH = f[F_OH], OW = f[F_OW], OC = f[F_OC], KH = f[F_KH], KW = f[F_KW];
    const int64_t SH = f[F_SH], SW = f[F_SW], DH = f[F_DH], DW = f[F_DW], WP = f[F_WP];
    const int64_t O16 = f[F_O16];
    const int32_t oo = (int32_t)f[F_OO], lo = (int32_t)f[F_LO], hi = (int32_t)f[F_HI];
    const int8_t *w = c->w;
    for (int64_t o = 0; o < OC; o++) {
        int32_t rs = 0;
        for (int64_t t = 0; t < KH * KW; t++) rs += w[t * OC + o];
        c->beff[o] = fold_bias(c, o, rs);
    }
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++)
            for (int64_t o0 = 0; o0 < OC; o0 += 64) {
                const int64_t n = OC - o0 < 64 ? OC - o0 : 64;
                uint32_t acc[64];
                for (int64_t j = 0; j < n; j++) acc[j] = (uint32_t)c->beff[o0 + j];
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const uint8_t *u =
                            P + ((oy * SH + ky * DH) * WP + ox * SW + kx * DW) * OC + o0;
                        const int8_t *wt = w + (ky * KW + kx) * OC + o0;
                        for (int64_t j = 0; j < n; j++)
                            acc[j] += (uint32_t)((int32_t)u[j] * (int32_t)wt[j]);
                    }
                for (int64_t j = 0; j < n; j++)
                    out[(oy * OW + ox) * OC + o0 + j] =
                        rq_scalar(acc[j], c->qp, O16, o0 + j, oo, lo, hi);
            }
}

void hb_add_portable(const uint8_t *a, const uint8_t *b, const int64_t *f, uint8_t *out) {
    add(a, b, f, out);
}

void hb_maxpool_portable(const uint8_t *x, const int64_t *f, uint8_t *out) {
    maxpool(x, f, out);
}

void hb_avgpool(const uint8_t *x, const int64_t *f, uint8_t *out) {
    const int64_t H = f[F_H], W = f[F_W], C = f[F_C], OH = f[F_OH], OW = f[F_OW];
    const int64_t KH = f[F_KH], KW = f[F_KW], SH = f[F_SH], SW = f[F_SW], PT = f[F_PT],
                  PL = f[F_PL];
    const int32_t lo = (int32_t)f[F_LO], hi = (int32_t)f[F_HI];
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++)
            for (int64_t c = 0; c < C; c++) {
                int64_t sum = 0, count = 0;
                for (int64_t ky = 0; ky < KH; ky++) {
                    const int64_t iy = oy * SH - PT + ky;
                    if (iy < 0 || iy >= H) continue;
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const int64_t ix = ox * SW - PL + kx;
                        if (ix < 0 || ix >= W) continue;
                        sum += (int64_t)x[(iy * W + ix) * C + c] - 128;
                        count++;
                    }
                }
                int64_t q = 0;
                if (count) q = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                if (q < lo) q = lo;
                if (q > hi) q = hi;
                out[(oy * OW + ox) * C + c] = (uint8_t)(q + 128);
            }
}

/* sums per channel accumulated pixel by pixel (channels contiguous: the compiler vectorizes
 * it) in uint32, exact while HW * 255 < 2^32 (checked when lowering); then as numpy's
 * int64 code */
void hb_mean(const uint8_t *x, const int64_t *f, uint32_t *acc, uint8_t *out) {
    const int64_t HW = f[F_H] * f[F_W], C = f[F_C];
    const int64_t zp = f[F_ZP], count = f[F_COUNT], oo = f[F_OO];
    for (int64_t c = 0; c < C; c++) acc[c] = 0;
    for (int64_t i = 0; i < HW; i++)
        for (int64_t c = 0; c < C; c++) acc[c] += x[i * C + c];
    for (int64_t c = 0; c < C; c++) {
        int64_t sum = (int64_t)acc[c];
        sum -= 128 * HW;
        sum -= zp * count;
        int64_t r = (int64_t)mbqm64(sum, f[F_M1], (int32_t)f[F_S1]) + oo;
        if (r < -128) r = -128;
        if (r > 127) r = 127;
        out[c] = (uint8_t)(r + 128);
    }
}
#endif
