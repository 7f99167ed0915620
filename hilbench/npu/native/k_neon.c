/* ARM64 kernels with NEON dot products (SDOT, Armv8.2 DotProd: Apple M1 and later,
 * Graviton2 and later, Cortex-A76/A55 and later), chosen at run time (Linux: HWCAP_ASIMDDP,
 * macOS: hw.optional.arm.FEAT_DotProd); compiled with a target attribute (gcc; clang
 * where its target already has DotProd, as Apple's arm64 does: older clangs' arm_neon.h
 * offers SDOT only then, and their builds go without this table).
 *
 * SDOT multiplies signed bytes by signed bytes (4 products summed into each int32 lane), so
 * the GEMMs multiply x = u ^ 0x80 = u - 128 (the activation itself) and fold the input
 * offset io (not io - 128) into the bias. Packed GEMMs: the weights repacked per call into
 * panels of 16 channels x 4 bytes per group of 4 k (the AVX-512 layout), one group of a
 * pixel's row duplicated into all lanes times 4 channels per SDOT, tiles of up to 6 pixels x
 * 16 channels (24 accumulators of the 32 registers); direct GEMMs: 16 bytes of a row times
 * 16 bytes of a weight row per SDOT, pairwise sums at the end. Requantization is TFLM's
 * MultiplyByQuantizedMultiplier as gemmlowp's NEON code computes it: SQRDMULH is
 * SaturatingRoundingDoublingHighMul, and RoundingDivideByPOT is a rounding shift (SRSHL)
 * after a fix-up that makes it round half away from zero. Depthwise: bytes widened to int16,
 * widening multiply-accumulates (SMLAL) into int32.
 */
#include "engine.h"

#if HB_HAVE_NEONDOT
#include <arm_neon.h>

#if defined(__clang__)
#define HB_DOT __attribute__((target("dotprod")))
#else
#define HB_DOT __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

#define SDOT(acc, a, b) vdotq_s32(acc, a, b)

/* --- requantization, 4 channels per vector -------------------------------------------- */
typedef struct {
    int32x4_t m, ls, nrs;
} nq;

HB_INLINE nq nq_load(const int32_t *qp, int64_t o16, int64_t o) {
    nq q;
    q.m = vld1q_s32(qp + QP_M * o16 + o);
    q.ls = vld1q_s32(qp + QP_LS * o16 + o);
    q.nrs = vnegq_s32(vld1q_s32(qp + QP_RS * o16 + o));
    return q;
}

HB_INLINE nq nq_uniform(int32_t m, int32_t shift) {
    nq q;
    q.m = vdupq_n_s32(m);
    q.ls = vdupq_n_s32(shift > 0 ? shift : 0);
    q.nrs = vdupq_n_s32(shift > 0 ? 0 : shift);
    return q;
}

/* MultiplyByQuantizedMultiplier: the left shift wraps (SSHL by a positive count), SQRDMULH
 * rounds 2 v m / 2^32 half up (saturating only for v = m = -2^31, impossible with m >= 0),
 * and x + ((x & -rs) >> 31, saturating) then SRSHL by -rs rounds half away from zero. */
HB_INLINE int32x4_t nmbqm(int32x4_t v, const nq *q) {
    v = vqrdmulhq_s32(vshlq_s32(v, q->ls), q->m);
    const int32x4_t fix = vshrq_n_s32(vandq_s32(v, q->nrs), 31);
    return vrshlq_s32(vqaddq_s32(v, fix), q->nrs);
}

/* 16 int32 results + the output offset, clamped, as 16 stored bytes: narrowing with
 * saturation to int16, + (oo + 128) saturating, to u8 saturating, then the clamp on bytes
 * (exact: a value saturated to the int16 range stays beyond [0, 255] after the add) */
typedef struct {
    int16x8_t oo;
    uint8x16_t lo, hi;
} no;

HB_INLINE no no_make(const int64_t *f) {
    no v;
    v.oo = vdupq_n_s16((int16_t)(f[F_OO] + 128));
    v.lo = vdupq_n_u8((uint8_t)(f[F_LO] + 128));
    v.hi = vdupq_n_u8((uint8_t)(f[F_HI] + 128));
    return v;
}

HB_INLINE uint8x16_t nout16(int32x4_t r0, int32x4_t r1, int32x4_t r2, int32x4_t r3,
                            const no *v) {
    const int16x8_t a = vqaddq_s16(vcombine_s16(vqmovn_s32(r0), vqmovn_s32(r1)), v->oo);
    const int16x8_t b = vqaddq_s16(vcombine_s16(vqmovn_s32(r2), vqmovn_s32(r3)), v->oo);
    const uint8x16_t u = vcombine_u8(vqmovun_s16(a), vqmovun_s16(b));
    return vminq_u8(vmaxq_u8(u, v->lo), v->hi);
}

/* store n (<= 16) bytes */
HB_INLINE void store16(uint8_t *d, uint8x16_t b, int64_t n) {
    if (n >= 16) {
        vst1q_u8(d, b);
    } else {
        uint8_t t[16];
        vst1q_u8(t, b);
        memcpy(d, t, (size_t)n);
    }
}

/* requantize 16 channels (o..o+15) of one row held in 4 vectors and store them */
HB_INLINE void rq_store16(const int32x4_t *acc, const opctx *c, int64_t o, int64_t O,
                          const no *v, uint8_t *out) {
    const int64_t O16 = c->f[F_O16];
    int32x4_t r[4];
    for (int j = 0; j < 4; j++) {
        const nq q = nq_load(c->qp, O16, o + 4 * j);
        r[j] = nmbqm(acc[j], &q);
    }
    store16(out, nout16(r[0], r[1], r[2], r[3], v), O - o);
}

/* --- packing ------------------------------------------------------------------------------ */
/* weights [O][K] -> per 16-channel block, per group g < K4/4: 16 channels x w[4g..4g+3]
 * (64 bytes); zeros beyond O and K; row sums */
static void pack_neon(const int8_t *w, int64_t O, int64_t K, int64_t K4, int64_t O16,
                      int8_t *dst, int32_t *rowsum) {
    const int64_t groups = K4 / 4;
    for (int64_t ob = 0; ob < O16 / 16; ob++) {
        int8_t *d0 = dst + ob * groups * 64;
        for (int64_t l = 0; l < 16; l++) {
            const int64_t o = ob * 16 + l;
            const int8_t *src = w + o * K;
            int32_t s = 0;
            for (int64_t g = 0; g < groups; g++)
                for (int64_t j = 0; j < 4; j++) {
                    const int64_t k = 4 * g + j;
                    const int8_t b = (o < O && k < K) ? src[k] : 0;
                    d0[g * 64 + 4 * l + j] = b;
                    s += b;
                }
            rowsum[o] = s;
        }
    }
}

/* --- packed GEMM -------------------------------------------------------------------------- */
#define MRN 6
/* one tile: mr rows (rows[i] + koff[g]: pixel i's group g of u bytes) x 16 channels of
 * block ob */
HB_DOT HB_INLINE void tile_neon(const uint8_t *const *rows, const int32_t *koff, int64_t groups,
                                const int8_t *B, const opctx *c, int64_t ob, const int mr,
                                uint8_t *out, int64_t O, const no *v) {
    int32x4_t acc[MRN][4];
    for (int j = 0; j < 4; j++) {
        const int32x4_t b = vld1q_s32(c->beff + ob * 16 + 4 * j);
        for (int i = 0; i < mr; i++) acc[i][j] = b;
    }
    const uint32x4_t flip = vdupq_n_u32(0x80808080u);
    for (int64_t k = 0; k < groups; k++) {
        const int8_t *bk = B + k * 64;
        const int8x16_t w0 = vld1q_s8(bk), w1 = vld1q_s8(bk + 16), w2 = vld1q_s8(bk + 32),
                        w3 = vld1q_s8(bk + 48);
        const int32_t off = koff[k];
        for (int i = 0; i < mr; i++) {
            uint32_t av;
            memcpy(&av, rows[i] + off, 4);
            const int8x16_t a = vreinterpretq_s8_u32(veorq_u32(vdupq_n_u32(av), flip));
            acc[i][0] = SDOT(acc[i][0], a, w0);
            acc[i][1] = SDOT(acc[i][1], a, w1);
            acc[i][2] = SDOT(acc[i][2], a, w2);
            acc[i][3] = SDOT(acc[i][3], a, w3);
        }
    }
    for (int i = 0; i < mr; i++) rq_store16(acc[i], c, ob * 16, O, v, out + i * O + ob * 16);
}

HB_DOT static void gemm_rows_neon(const uint8_t *base, int64_t rstride, int implicit,
                                  const int32_t *koff, const opctx *c, uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], M = f[F_OH] * f[F_OW], groups = f[F_K4] / 4;
    const int64_t nb = f[F_O16] / 16;
    const int64_t C = f[F_C], OW = f[F_OW], SH = f[F_SH], SW = f[F_SW], WP = f[F_WP];
    const no v = no_make(f);
    for (int64_t m0 = 0; m0 < M; m0 += MRN) {
        const int mr = M - m0 < MRN ? (int)(M - m0) : MRN;
        const uint8_t *rows[MRN];
        for (int i = 0; i < mr; i++) {
            const int64_t m = m0 + i;
            rows[i] = implicit ? base + ((m / OW) * SH * WP + (m % OW) * SW) * C
                               : base + m * rstride;
        }
        uint8_t *o = out + m0 * O;
        for (int64_t ob = 0; ob < nb; ob++) {
            const int8_t *B = c->pk + ob * groups * 64;
            switch (mr) {
            case 6: tile_neon(rows, koff, groups, B, c, ob, 6, o, O, &v); break;
            case 5: tile_neon(rows, koff, groups, B, c, ob, 5, o, O, &v); break;
            case 4: tile_neon(rows, koff, groups, B, c, ob, 4, o, O, &v); break;
            case 3: tile_neon(rows, koff, groups, B, c, ob, 3, o, O, &v); break;
            case 2: tile_neon(rows, koff, groups, B, c, ob, 2, o, O, &v); break;
            default: tile_neon(rows, koff, groups, B, c, ob, 1, o, O, &v); break;
            }
        }
    }
}

/* --- direct GEMM: dot products along K, pairwise sums ------------------------------------- */
/* 16 bytes of w (zero beyond n) */
HB_INLINE int8x16_t load16z(const int8_t *w, int64_t n) {
    if (n >= 16) return vld1q_s8(w);
    int8_t t[16] = {0};
    if (n > 0) memcpy(t, w, (size_t)n);
    return vld1q_s8(t);
}

/* the sums of mr (<= 4) rows times 4 weight rows: lane j of result i is row i x channel j */
HB_DOT HB_INLINE void direct_tile_neon(const uint8_t *A, int64_t lda, const int8_t *W, int64_t K,
                                       const int mr, int32x4_t res[4]) {
    int32x4_t acc[4][4];
    const uint8x16_t flip = vdupq_n_u8(0x80);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = vdupq_n_s32(0);
    for (int64_t k = 0; k < K; k += 16) {
        int8x16_t w[4];
        for (int j = 0; j < 4; j++) w[j] = load16z(W + j * K + k, K - k);
        for (int i = 0; i < mr; i++) {
            /* bytes past K (the arena's slack or the next row) meet zero weights */
            const int8x16_t a = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(A + i * lda + k), flip));
            for (int j = 0; j < 4; j++) acc[i][j] = SDOT(acc[i][j], a, w[j]);
        }
    }
    for (int i = 0; i < mr; i++)
        res[i] = vpaddq_s32(vpaddq_s32(acc[i][0], acc[i][1]), vpaddq_s32(acc[i][2], acc[i][3]));
}

HB_DOT static void direct_neon(const uint8_t *A, int64_t lda, int64_t M, const opctx *c,
                               uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], K = f[F_K], O16 = f[F_O16];
    const int32_t io = (int32_t)f[F_IO];
    if (c->sums) {
        const int8x16_t ones = vdupq_n_s8(1);
        for (int64_t o = 0; o < O; o++) {
            int32x4_t s = vdupq_n_s32(0);
            for (int64_t k = 0; k < K; k += 16) s = SDOT(s, load16z(c->w + o * K + k, K - k), ones);
            c->beff[o] = fold_bias_by(c, o, vaddvq_s32(s), io);
        }
    }
    const no v = no_make(f);
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
        const int mr = M - m0 < 4 ? (int)(M - m0) : 4;
        const uint8_t *a = A + m0 * lda;
        for (int64_t o0 = 0; o0 < O; o0 += 4) {
            const int8_t *W = c->w + o0 * K;
            int32x4_t res[4];
            if (O - o0 >= 4) {
                switch (mr) {
                case 4: direct_tile_neon(a, lda, W, K, 4, res); break;
                case 3: direct_tile_neon(a, lda, W, K, 3, res); break;
                case 2: direct_tile_neon(a, lda, W, K, 2, res); break;
                default: direct_tile_neon(a, lda, W, K, 1, res); break;
                }
            } else { /* the last channels one at a time (no weights read past the array) */
                int32_t t[4][4] = {{0}};
                for (int64_t j = 0; j < O - o0; j++) {
                    const int8_t *wj = W + j * K;
                    for (int i = 0; i < mr; i++) {
                        int32x4_t s = vdupq_n_s32(0);
                        for (int64_t k = 0; k < K; k += 16) {
                            const int8x16_t x = vreinterpretq_s8_u8(
                                veorq_u8(vld1q_u8(a + i * lda + k), vdupq_n_u8(0x80)));
                            s = SDOT(s, x, load16z(wj + k, K - k));
                        }
                        t[i][j] = vaddvq_s32(s);
                    }
                }
                for (int i = 0; i < mr; i++) res[i] = vld1q_s32(t[i]);
            }
            /* 4 channels: bias, requantization (channels past O: zero parameters, unused) */
            int32_t bq[4] = {0}, mq[4] = {0}, lq[4] = {0}, rq[4] = {0};
            for (int64_t j = 0; j < 4 && o0 + j < O; j++) {
                bq[j] = c->beff[o0 + j];
                mq[j] = c->qp[QP_M * O16 + o0 + j];
                lq[j] = c->qp[QP_LS * O16 + o0 + j];
                rq[j] = -c->qp[QP_RS * O16 + o0 + j];
            }
            const nq q = {vld1q_s32(mq), vld1q_s32(lq), vld1q_s32(rq)};
            const int32x4_t bias = vld1q_s32(bq);
            for (int i = 0; i < mr; i++) {
                const int32x4_t r = nmbqm(vaddq_s32(res[i], bias), &q);
                uint8_t t[16];
                vst1q_u8(t, nout16(r, r, r, r, &v));
                memcpy(out + (m0 + i) * O + o0, t, (size_t)(O - o0 < 4 ? O - o0 : 4));
            }
        }
    }
}

HB_DOT static void gemm_neon(const hb_gemm *g) {
    const int64_t *f = g->c.f;
    opctx c = g->c;
    const int64_t M = f[F_OH] * f[F_OW], K4 = f[F_K4];
    const int32_t io = (int32_t)f[F_IO];
    if (f[F_DIRECT]) {
        const uint8_t *A = g->in;
        int64_t lda = f[F_K];
        if (f[F_IM2COL]) {
            if (!g->cols_kept) hb_im2col(g->in, f, (uint8_t)(128 - f[F_IO]), g->cols);
            A = g->cols;
            lda = K4;
        }
        direct_neon(A, lda, M, &c, g->out);
        return;
    }
    for (int64_t o = 0; o < f[F_O16] && c.sums; o++)
        c.beff[o] = o < f[F_OC] ? fold_bias_by(&c, o, g->rowsum[o], io) : 0;
    int32_t *koff = g->koff;
    if (f[F_IMPLICIT]) { /* group g of filter row ky at ky * DH * WP * C + 4 g */
        hb_pad_input(g->in, f, (uint8_t)(128 - f[F_IO]), g->pad);
        const int64_t KH = f[F_KH], gk = K4 / KH / 4;
        for (int64_t ky = 0; ky < KH; ky++)
            for (int64_t j = 0; j < gk; j++)
                koff[ky * gk + j] = (int32_t)(ky * f[F_DH] * f[F_WP] * f[F_C] + 4 * j);
        gemm_rows_neon(g->pad, 0, 1, koff, &c, g->out);
        return;
    }
    for (int64_t j = 0; j < K4 / 4; j++) koff[j] = (int32_t)(4 * j);
    if (f[F_IM2COL]) {
        if (!g->cols_kept) hb_im2col(g->in, f, (uint8_t)(128 - f[F_IO]), g->cols);
        gemm_rows_neon(g->cols, K4, 0, koff, &c, g->out);
        return;
    }
    /* rows in place: groups past K read the next pixel's bytes (or the arena's slack),
     * times zero weights */
    gemm_rows_neon(g->in, f[F_K], 0, koff, &c, g->out);
}

/* --- depthwise: u widened to int16, SMLAL into int32, 16 channels at a time ------------- */
static void dw_neon(const uint8_t *P, const opctx *c, uint32_t *accu, uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t OH = f[F_OH], OW = f[F_OW], OC = f[F_OC], KH = f[F_KH], KW = f[F_KW];
    const int64_t SH = f[F_SH], SW = f[F_SW], DH = f[F_DH], DW = f[F_DW], WP = f[F_WP];
    const int64_t T = KH * KW;
    (void)accu;
    if (T > 64) { /* more taps than the tables below hold */
        hb_dw_taps(P, c, out);
        return;
    }
    const no v = no_make(f);
    int64_t toff[64];
    int16x8_t wl[64], wh[64];
    for (int64_t t = 0; t < T; t++) toff[t] = ((t / KW) * DH * WP + (t % KW) * DW) * OC;
    for (int64_t o = 0; o < OC; o += 16) {
        const int64_t left = OC - o;
        int32_t bb[16];
        int32x4_t tsum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int64_t t = 0; t < T; t++) {
            const int8x16_t w = load16z(c->w + t * OC + o, left);
            wl[t] = vmovl_s8(vget_low_s8(w));
            wh[t] = vmovl_high_s8(w);
            tsum[0] = vaddw_s16(tsum[0], vget_low_s16(wl[t]));
            tsum[1] = vaddw_high_s16(tsum[1], wl[t]);
            tsum[2] = vaddw_s16(tsum[2], vget_low_s16(wh[t]));
            tsum[3] = vaddw_high_s16(tsum[3], wh[t]);
        }
        for (int j = 0; j < 4; j++) vst1q_s32(bb + 4 * j, tsum[j]);
        for (int64_t l = 0; l < 16; l++) bb[l] = l < left ? fold_bias(c, o + l, bb[l]) : 0;
        const int32x4_t b0 = vld1q_s32(bb), b1 = vld1q_s32(bb + 4), b2 = vld1q_s32(bb + 8),
                        b3 = vld1q_s32(bb + 12);
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                const uint8_t *px = P + ((oy * SH) * WP + ox * SW) * OC + o;
                int32x4_t a[4] = {b0, b1, b2, b3};
                for (int64_t t = 0; t < T; t++) {
                    /* past the channels: other pixels' bytes or the slack, never stored */
                    const uint8x16_t u = vld1q_u8(px + toff[t]);
                    const int16x8_t ul = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(u)));
                    const int16x8_t uh = vreinterpretq_s16_u16(vmovl_high_u8(u));
                    a[0] = vmlal_s16(a[0], vget_low_s16(ul), vget_low_s16(wl[t]));
                    a[1] = vmlal_high_s16(a[1], ul, wl[t]);
                    a[2] = vmlal_s16(a[2], vget_low_s16(uh), vget_low_s16(wh[t]));
                    a[3] = vmlal_high_s16(a[3], uh, wh[t]);
                }
                rq_store16(a, c, o, OC, &v, out + (oy * OW + ox) * OC + o);
            }
    }
}

/* --- ADD: 16 elements at a time -------------------------------------------------------- */
HB_INLINE void widen4(uint8x16_t u, int32x4_t off, int32x4_t ls, int32x4_t r[4]) {
    const uint16x8_t l = vmovl_u8(vget_low_u8(u)), h = vmovl_high_u8(u);
    r[0] = vshlq_s32(vaddq_s32(vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(l))), off), ls);
    r[1] = vshlq_s32(vaddq_s32(vreinterpretq_s32_u32(vmovl_high_u16(l)), off), ls);
    r[2] = vshlq_s32(vaddq_s32(vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(h))), off), ls);
    r[3] = vshlq_s32(vaddq_s32(vreinterpretq_s32_u32(vmovl_high_u16(h)), off), ls);
}

static void add_neon(const uint8_t *a, const uint8_t *b, const int64_t *f, uint8_t *out) {
    const int64_t L = f[F_OUT_SIZE];
    const nq q1 = nq_uniform((int32_t)f[F_M1], (int32_t)f[F_S1]);
    const nq q2 = nq_uniform((int32_t)f[F_M2], (int32_t)f[F_S2]);
    const nq q3 = nq_uniform((int32_t)f[F_MO], (int32_t)f[F_SO]);
    const int32x4_t off1 = vdupq_n_s32((int32_t)f[F_IO] - 128);
    const int32x4_t off2 = vdupq_n_s32((int32_t)f[F_IO2] - 128);
    const int32x4_t ls = vdupq_n_s32((int32_t)f[F_LSH]);
    const no v = no_make(f);
    for (int64_t i = 0; i < L; i += 16) {
        const int64_t left = L - i;
        uint8x16_t ua, ub;
        if (left >= 16) {
            ua = vld1q_u8(a + i);
            ub = vld1q_u8(b + i);
        } else {
            uint8_t ta[16] = {0}, tb[16] = {0};
            memcpy(ta, a + i, (size_t)left);
            memcpy(tb, b + i, (size_t)left);
            ua = vld1q_u8(ta);
            ub = vld1q_u8(tb);
        }
        int32x4_t x1[4], x2[4], r[4];
        widen4(ua, off1, ls, x1);
        widen4(ub, off2, ls, x2);
        for (int j = 0; j < 4; j++)
            r[j] = nmbqm(vaddq_s32(nmbqm(x1[j], &q1), nmbqm(x2[j], &q2)), &q3);
        store16(out + i, nout16(r[0], r[1], r[2], r[3], &v), left);
    }
}

/* --- MAX_POOL_2D on bytes --------------------------------------------------------------- */
static void maxpool_neon(const uint8_t *x, const int64_t *f, uint8_t *out) {
    const int64_t H = f[F_H], W = f[F_W], C = f[F_C], OH = f[F_OH], OW = f[F_OW];
    const int64_t KH = f[F_KH], KW = f[F_KW], SH = f[F_SH], SW = f[F_SW], PT = f[F_PT],
                  PL = f[F_PL];
    const uint8x16_t lo = vdupq_n_u8((uint8_t)(f[F_LO] + 128));
    const uint8x16_t hi = vdupq_n_u8((uint8_t)(f[F_HI] + 128));
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++)
            for (int64_t c = 0; c < C; c += 16) {
                uint8x16_t best = vdupq_n_u8(0);
                for (int64_t ky = 0; ky < KH; ky++) {
                    const int64_t iy = oy * SH - PT + ky;
                    if (iy < 0 || iy >= H) continue;
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const int64_t ix = ox * SW - PL + kx;
                        if (ix < 0 || ix >= W) continue;
                        /* past the channels: other pixels' bytes or the slack, never stored */
                        best = vmaxq_u8(best, vld1q_u8(x + (iy * W + ix) * C + c));
                    }
                }
                store16(out + (oy * OW + ox) * C + c, vminq_u8(vmaxq_u8(best, lo), hi), C - c);
            }
}

/* SDOT (16 products of s8 x s8): the peak */
#define KEEP_Q(a, b) __asm__ volatile("" : "+w"(a), "+w"(b))
#define SDOT_OP(c) SDOT(c, a, b)
HB_DOT static uint64_t peak_neon(uint64_t n) {
    int8x16_t a = vdupq_n_s8(3), b = vdupq_n_s8(5);
    HB_PEAK_BODY(int32x4_t, vdupq_n_s32, SDOT_OP, vaddvq_s32, KEEP_Q)
    return n * 12 * 16;
}

const hb_isa hb_isa_neondot = {"neondot", pack_neon,    gemm_neon, dw_neon,
                               add_neon,  maxpool_neon, peak_neon};
#else
typedef int hb_no_neon; /* not an ARM64 build (or no DotProd in this compiler): nothing here */
#endif
