/* AVX2 and AVX-VNNI kernels (x86-64): compiled with target attributes, chosen at run time.
 *
 * The GEMMs of both come from one source, k_avxvnni.inc, included twice below: the
 * activations stay bytes (u = x + 128), the weights are repacked per call into panels of
 * 16 channels x 4 bytes, and each multiply-add takes one broadcast 4-byte group of a
 * pixel's row times 8 channels. AVX-VNNI's instruction is VPDPBUSD (u8 x s8, four products
 * summed into each int32 lane). AVX2 has no u8 x s8 multiply-add that cannot saturate
 * (VPMADDUBSW's int16 pair sums of u * w can), so it multiplies as XNNPACK does there, with
 * VPMADDWD on int16: the group's even and odd bytes widened in the register (u: AND and a
 * shift; w: shifts with sign), two VPMADDWD and two adds give exactly VPDPBUSD's sums
 * (dpbusd_emu). So the AVX2 table runs the AVX-VNNI kernels' code with one instruction
 * replaced: every test of the AVX2 table also tests those kernels.
 *
 * This file: the 8-lane requantization (TFLM's steps, and the merged rounding by the
 * product's sign, vmbqm8_sign) with its 16-byte narrowing, the shared depthwise (taps
 * paired, interleaved and widened, one VPMADDWD per 8 channels and tap pair; 3x3 stride 1
 * pairs them vertically), ADD and MAX_POOL_2D kernels, and the peaks.
 */
#include "engine.h"

#if HB_X86
#include <immintrin.h>

#define HB_AVX2 __attribute__((target("avx2,fma,bmi,bmi2")))

/* --- requantization, 8 channels per vector ------------------------------------------- */
typedef struct {
    __m256i m, mo, ls, rs, mask, thr;
} vq8;

/* o: the first of 8 channels (a multiple of 8) */
HB_AVX2 HB_INLINE vq8 vq8_load(const int32_t *qp, int64_t o16, int64_t o) {
    vq8 q;
    q.m = _mm256_loadu_si256((const void *)(qp + QP_M * o16 + o));
    q.mo = _mm256_srli_epi64(q.m, 32);
    q.ls = _mm256_loadu_si256((const void *)(qp + QP_LS * o16 + o));
    q.rs = _mm256_loadu_si256((const void *)(qp + QP_RS * o16 + o));
    q.mask = _mm256_loadu_si256((const void *)(qp + QP_MASK * o16 + o));
    q.thr = _mm256_loadu_si256((const void *)(qp + QP_THR * o16 + o));
    return q;
}

/* MultiplyByQuantizedMultiplier on 8 int32 lanes (multipliers >= 0: no saturation) */
HB_AVX2 HB_INLINE __m256i vmbqm8(__m256i v, const vq8 *q, int anyls) {
    if (anyls) v = _mm256_sllv_epi32(v, q->ls);
    const __m256i nudge = _mm256_set1_epi64x((int64_t)1 << 30);
    __m256i pe = _mm256_mul_epi32(v, q->m);
    __m256i po = _mm256_mul_epi32(_mm256_srli_epi64(v, 32), q->mo);
    pe = _mm256_srli_epi64(_mm256_add_epi64(pe, nudge), 31);
    po = _mm256_slli_epi64(_mm256_add_epi64(po, nudge), 1);
    const __m256i h = _mm256_blend_epi32(pe, po, 0xAA);
    const __m256i rem = _mm256_and_si256(h, q->mask);
    const __m256i thr = _mm256_sub_epi32(q->thr, _mm256_srai_epi32(h, 31));
    const __m256i r = _mm256_srav_epi32(h, q->rs);
    return _mm256_sub_epi32(r, _mm256_cmpgt_epi32(rem, thr));
}

/* The merged rounding (F_FASTRQ: every channel shifts right by rs >= 1, no left shift; see
 * k_avx512.c): (p + 2^30 + 2^(30+rs) - [p < -2^30] 2^31) >> (31 + rs) in 64-bit lanes, the
 * high 32 bits shifted right by rs - 1. Here [p < -2^30] is replaced by [p < 0]: the two
 * differ only for p in [-2^30, 0), where the quotient is 0 either way (the numerator lies
 * in [2^(30+rs) - 2^31, 2^(30+rs) + 2^30) c [0, 2^(31+rs)) for rs >= 1). So VBLENDVPD picks
 * the add constant or the constant less 2^31 by the product's sign bit (no compare), and
 * one VSHUFPS gathers the high halves of the even and the odd lanes' products, which the
 * lane order LPERM puts in channel order: 9 instructions per 8 channels (with the compare
 * and a blend: 14). The GEMM panels are packed in LPERM order (free); other callers
 * permute their accumulators first (one VPERMD). LPERM is its own inverse. */
#define LPERM _mm256_setr_epi32(0, 2, 1, 3, 4, 6, 5, 7)
typedef struct {
    __m256i m, mo, ae, ao, aem, aom, rsm1;
} vqs8;

HB_AVX2 HB_INLINE vqs8 vqs8_load(const int32_t *qp, int64_t o16, int64_t o) {
    vqs8 q;
    const int64_t *add = (const int64_t *)(const void *)(qp + QP_ADDC * o16) + o;
    const __m256i n31 = _mm256_set1_epi64x((int64_t)1 << 31);
    q.m = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const void *)(qp + QP_M * o16 + o)),
                                      LPERM);
    q.mo = _mm256_srli_epi64(q.m, 32);
    /* even lanes (64-bit): channels 0, 1 | 4, 5; odd lanes: 2, 3 | 6, 7 */
    q.ae = _mm256_setr_m128i(_mm_loadu_si128((const void *)add),
                             _mm_loadu_si128((const void *)(add + 4)));
    q.ao = _mm256_setr_m128i(_mm_loadu_si128((const void *)(add + 2)),
                             _mm_loadu_si128((const void *)(add + 6)));
    q.aem = _mm256_sub_epi64(q.ae, n31);
    q.aom = _mm256_sub_epi64(q.ao, n31);
    q.rsm1 = _mm256_loadu_si256((const void *)(qp + QP_RSM1 * o16 + o));
    return q;
}

/* v: lanes in LPERM order; the result in channel order */
HB_AVX2 HB_INLINE __m256i vmbqm8_sign(__m256i v, const vqs8 *q) {
    const __m256i pe = _mm256_mul_epi32(v, q->m);
    const __m256i po = _mm256_mul_epi32(_mm256_srli_epi64(v, 32), q->mo);
    const __m256d ce = _mm256_blendv_pd(_mm256_castsi256_pd(q->ae), _mm256_castsi256_pd(q->aem),
                                        _mm256_castsi256_pd(pe));
    const __m256d co = _mm256_blendv_pd(_mm256_castsi256_pd(q->ao), _mm256_castsi256_pd(q->aom),
                                        _mm256_castsi256_pd(po));
    const __m256i e = _mm256_add_epi64(pe, _mm256_castpd_si256(ce));
    const __m256i od = _mm256_add_epi64(po, _mm256_castpd_si256(co));
    const __m256i h = _mm256_castps_si256(
        _mm256_shuffle_ps(_mm256_castsi256_ps(e), _mm256_castsi256_ps(od), 0xDD));
    return _mm256_srav_epi32(h, q->rsm1);
}

/* accumulators in channel order (perm 0) or LPERM order (perm 1) to the order wanted */
HB_AVX2 HB_INLINE __m256i lanes(__m256i a, int perm, int want_perm) {
    return perm == want_perm ? a : _mm256_permutevar8x32_epi32(a, LPERM);
}

/* the per-op output constants (+ 128: the stored u8) */
typedef struct {
    __m256i oo;     /* output offset + 128, int16 lanes */
    __m128i lo, hi; /* the activation clamp + 128, bytes */
} vo8;

HB_AVX2 HB_INLINE vo8 vo8_make(const int64_t *f) {
    vo8 v;
    v.oo = _mm256_set1_epi16((int16_t)(f[F_OO] + 128));
    v.lo = _mm_set1_epi8((char)(f[F_LO] + 128));
    v.hi = _mm_set1_epi8((char)(f[F_HI] + 128));
    return v;
}

/* 16 requantized results (r0: channels 0-7, r1: 8-15) + the output offset, clamped, as
 * bytes: narrowed to int16 with saturation, + (oo + 128) saturating, to u8 saturating, then
 * the clamp on bytes. Exact: a value saturated to the int16 range is beyond [0, 255] before
 * and after the add (|oo + 128| <= 255), and clamping to [0, 255] and then to [lo, hi]
 * (0 <= lo <= hi <= 255) is clamping to [lo, hi]. */
HB_AVX2 HB_INLINE __m128i vout16(__m256i r0, __m256i r1, const vo8 *v) {
    __m256i p = _mm256_adds_epi16(_mm256_packs_epi32(r0, r1), v->oo);
    p = _mm256_packus_epi16(p, p); /* dwords: r0 0-3, r1 0-3, .. | r0 4-7, r1 4-7, .. */
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    return _mm_min_epu8(_mm_max_epu8(_mm256_castsi256_si128(p), v->lo), v->hi);
}

/* the same for two pixels' 16 channels (r0, r1 of one, r2, r3 of the other): the low 128
 * bits for the first, the high ones for the second (one byte pack, permute and clamp for
 * both) */
HB_AVX2 HB_INLINE __m256i vout16x2(__m256i r0, __m256i r1, __m256i r2, __m256i r3,
                                   const vo8 *v) {
    const __m256i a = _mm256_adds_epi16(_mm256_packs_epi32(r0, r1), v->oo);
    const __m256i b = _mm256_adds_epi16(_mm256_packs_epi32(r2, r3), v->oo);
    /* dwords: a's r0 0-3, r1 0-3, b's r2 0-3, r3 0-3 | the same for lanes 4-7 */
    __m256i p = _mm256_packus_epi16(a, b);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    const __m256i lo = _mm256_broadcastsi128_si256(v->lo), hi = _mm256_broadcastsi128_si256(v->hi);
    return _mm256_min_epu8(_mm256_max_epu8(p, lo), hi);
}

/* the same for 8 results (the low 8 bytes) */
HB_AVX2 HB_INLINE __m128i vout8(__m256i r, const vo8 *v) {
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    w = _mm_adds_epi16(w, _mm256_castsi256_si128(v->oo));
    w = _mm_packus_epi16(w, w);
    return _mm_min_epu8(_mm_max_epu8(w, v->lo), v->hi);
}

/* store n bytes of b (n < 16 through a temporary) */
HB_AVX2 HB_INLINE void store_n(uint8_t *d, __m128i b, int64_t n, int64_t full) {
    if (n >= full) {
        if (full == 16)
            _mm_storeu_si128((__m128i *)(void *)d, b);
        else
            _mm_storel_epi64((__m128i *)(void *)d, b);
    } else {
        uint8_t t[16];
        _mm_storeu_si128((__m128i *)(void *)t, b);
        memcpy(d, t, (size_t)n);
    }
}

HB_AVX2 HB_INLINE void store8(uint8_t *d, __m128i b, int64_t n) { store_n(d, b, n, 8); }

/* requantize one vector of 8 channels (o..o+7) of `rows` rows and store them; perm: the
 * accumulators' lanes in LPERM order */
HB_AVX2 HB_INLINE void rq_store8(const __m256i *acc, int rows, int64_t stride,
                                 const opctx *c, int64_t o, int64_t O, const vo8 *v,
                                 uint8_t *out, const int perm, const vqs8 *pre) {
    const int64_t *f = c->f;
    const int64_t O16 = f[F_O16], n = O - o;
    if (f[F_FASTRQ]) {
        vqs8 loc;
        const vqs8 *q = pre;
        if (!q) {
            loc = vqs8_load(c->qp, O16, o);
            q = &loc;
        }
        for (int i = 0; i < rows; i++)
            store8(out + i * stride, vout8(vmbqm8_sign(lanes(acc[i], perm, 1), q), v), n);
    } else {
        const vq8 q = vq8_load(c->qp, O16, o);
        const int anyls = (int)f[F_ANYLS];
        for (int i = 0; i < rows; i++)
            store8(out + i * stride, vout8(vmbqm8(lanes(acc[i], perm, 0), &q, anyls), v), n);
    }
}

/* the same for two vectors: 16 channels (o..o+15, o a multiple of 16) */
HB_AVX2 HB_INLINE void rq_store16(const __m256i *a0, const __m256i *a1, int rows,
                                  int64_t stride, const opctx *c, int64_t o, int64_t O,
                                  const vo8 *v, uint8_t *out, const int perm,
                                  const vqs8 *pre) {
    const int64_t *f = c->f;
    const int64_t O16 = f[F_O16], n = O - o;
    if (f[F_FASTRQ]) {
        /* pre: the two vectors' constants prepared once per op (else loaded here) */
        vqs8 loc[2];
        const vqs8 *q = pre;
        if (!q) {
            loc[0] = vqs8_load(c->qp, O16, o);
            loc[1] = vqs8_load(c->qp, O16, o + 8);
            q = loc;
        }
        const vqs8 *q0 = q, *q1 = q + 1;
        int i = 0;
        if (n >= 16) /* whole rows of 16: two pixels at a time */
            for (; i + 2 <= rows; i += 2) {
                const __m256i b = vout16x2(vmbqm8_sign(lanes(a0[i], perm, 1), q0),
                                           vmbqm8_sign(lanes(a1[i], perm, 1), q1),
                                           vmbqm8_sign(lanes(a0[i + 1], perm, 1), q0),
                                           vmbqm8_sign(lanes(a1[i + 1], perm, 1), q1), v);
                _mm_storeu_si128((__m128i *)(void *)(out + i * stride), _mm256_castsi256_si128(b));
                _mm_storeu_si128((__m128i *)(void *)(out + (i + 1) * stride),
                                 _mm256_extracti128_si256(b, 1));
            }
        for (; i < rows; i++)
            store_n(out + i * stride,
                    vout16(vmbqm8_sign(lanes(a0[i], perm, 1), q0),
                           vmbqm8_sign(lanes(a1[i], perm, 1), q1), v),
                    n, 16);
    } else {
        const vq8 q0 = vq8_load(c->qp, O16, o), q1 = vq8_load(c->qp, O16, o + 8);
        const int anyls = (int)f[F_ANYLS];
        for (int i = 0; i < rows; i++)
            store_n(out + i * stride,
                    vout16(vmbqm8(lanes(a0[i], perm, 0), &q0, anyls),
                           vmbqm8(lanes(a1[i], perm, 0), &q1, anyls), v),
                    n, 16);
    }
}

/* requantize rows x O int32 sums (bias not yet added, row stride O16) into out */
HB_AVX2 static void rq_rows(const int32_t *sums, int64_t rows, const opctx *c, uint8_t *out) {
    const int64_t O = c->f[F_OC], O16 = c->f[F_O16];
    const vo8 v = vo8_make(c->f);
    for (int64_t o = 0; o < O; o += 8) {
        const __m256i b = _mm256_loadu_si256((const void *)(c->beff + o));
        for (int64_t i = 0; i < rows; i++) {
            const __m256i a = _mm256_add_epi32(
                _mm256_loadu_si256((const void *)(sums + i * O16 + o)), b);
            rq_store8(&a, 1, 0, c, o, O, &v, out + i * O + o, 0, NULL);
        }
    }
}

/* 8 x 8 transpose of 32-bit elements */
HB_AVX2 HB_INLINE void transpose8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x31);
    }
}

/* lane l of the result: the sum of a[l]'s 8 lanes */
HB_AVX2 HB_INLINE __m256i hsum8x8(const __m256i a[8]) {
    const __m256i h01 = _mm256_hadd_epi32(a[0], a[1]), h23 = _mm256_hadd_epi32(a[2], a[3]);
    const __m256i h45 = _mm256_hadd_epi32(a[4], a[5]), h67 = _mm256_hadd_epi32(a[6], a[7]);
    const __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20),
                            _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* 16 bytes of w (zero beyond n) */
HB_AVX2 HB_INLINE __m128i load16z(const int8_t *w, int64_t n) {
    if (n >= 16) return _mm_loadu_si128((const void *)w);
    int8_t t[16] = {0};
    if (n > 0) memcpy(t, w, (size_t)n);
    return _mm_loadu_si128((const void *)t);
}

/* 32 bytes of w (zero beyond n) */
HB_AVX2 HB_INLINE __m256i load32z(const int8_t *w, int64_t n) {
    if (n >= 32) return _mm256_loadu_si256((const void *)w);
    if (n % 4 == 0) /* whole dwords: a masked load (the rest is neither read nor faults) */
        return _mm256_maskload_epi32(
            (const int *)(const void *)w,
            _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n / 4)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    int8_t t[32] = {0};
    if (n > 0) memcpy(t, w, (size_t)n);
    return _mm256_loadu_si256((const void *)t);
}

/* --- depthwise (AVX2): taps in pairs, interleaved and widened, one VPMADDWD ---------- */
/* requantize 16 channels' accumulators of one pixel with constants loaded once per block:
 * fast (the merged rounding) or TFLM's steps */
typedef struct {
    vqs8 s0, s1;
    vq8 q0, q1;
    int fast, anyls;
} rq16;

HB_AVX2 HB_INLINE void rq16_load(rq16 *r, const opctx *c, int64_t o) {
    const int64_t *f = c->f;
    r->fast = (int)f[F_FASTRQ];
    r->anyls = (int)f[F_ANYLS];
    if (r->fast) {
        r->s0 = vqs8_load(c->qp, f[F_O16], o);
        r->s1 = vqs8_load(c->qp, f[F_O16], o + 8);
    } else {
        r->q0 = vq8_load(c->qp, f[F_O16], o);
        r->q1 = vq8_load(c->qp, f[F_O16], o + 8);
    }
}

/* accumulators in channel order */
HB_AVX2 HB_INLINE __m128i rq16_out(const rq16 *r, const int fast, __m256i a0, __m256i a1,
                                  const vo8 *v) {
    if (fast)
        return vout16(vmbqm8_sign(lanes(a0, 0, 1), &r->s0), vmbqm8_sign(lanes(a1, 0, 1), &r->s1),
                      v);
    return vout16(vmbqm8(a0, &r->q0, r->anyls), vmbqm8(a1, &r->q1, r->anyls), v);
}

/* two pixels' (a, b) 16 channels: the low 128 bits for a, the high ones for b */
HB_AVX2 HB_INLINE __m256i rq16_out2(const rq16 *r, const int fast, __m256i a0, __m256i a1,
                                    __m256i b0, __m256i b1, const vo8 *v) {
    if (fast)
        return vout16x2(vmbqm8_sign(lanes(a0, 0, 1), &r->s0), vmbqm8_sign(lanes(a1, 0, 1), &r->s1),
                        vmbqm8_sign(lanes(b0, 0, 1), &r->s0), vmbqm8_sign(lanes(b1, 0, 1), &r->s1),
                        v);
    return vout16x2(vmbqm8(a0, &r->q0, r->anyls), vmbqm8(a1, &r->q1, r->anyls),
                    vmbqm8(b0, &r->q0, r->anyls), vmbqm8(b1, &r->q1, r->anyls), v);
}

/* 3x3, stride 1, dilation 1: taps paired vertically (rows 0 and 1; row 2 with a zero
 * weight), so the widened pairs of one input column serve the three output pixels that
 * read it: per output pixel and 16 channels, one new column (3 loads, 7 widening ops) and
 * 12 VPMADDWD. bias: the folded biases of the 16 channels (2 x 8) */
HB_AVX2 HB_INLINE void dw3s1_block(const uint8_t *P, const opctx *c, int64_t o,
                                   const __m256i bias[2], const vo8 *v, const rq16 *rq,
                                   const int fast, uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t OH = f[F_OH], OW = f[F_OW], OC = f[F_OC], WP = f[F_WP];
    const int64_t left = OC - o;
    __m256i w01[3][2], w2[3][2];
    for (int kx = 0; kx < 3; kx++) {
        const __m128i a = load16z(c->w + kx * OC + o, left);
        const __m128i b = load16z(c->w + (3 + kx) * OC + o, left);
        const __m128i d = load16z(c->w + (6 + kx) * OC + o, left);
        w01[kx][0] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b));
        w01[kx][1] = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b));
        w2[kx][0] = _mm256_cvtepi8_epi32(d);
        w2[kx][1] = _mm256_cvtepi8_epi32(_mm_srli_si128(d, 8));
    }
    const int64_t row = WP * OC;
    for (int64_t oy = 0; oy < OH; oy++) {
        const uint8_t *r0 = P + oy * row + o;
        /* the widened columns ox, ox + 1 (and ox + 2, loaded per pixel) */
        __m256i a[3][2], b[3][2];
        for (int64_t cx = 0; cx < 2; cx++) {
            const __m128i u0 = _mm_loadu_si128((const void *)(r0 + cx * OC));
            const __m128i u1 = _mm_loadu_si128((const void *)(r0 + row + cx * OC));
            const __m128i u2 = _mm_loadu_si128((const void *)(r0 + 2 * row + cx * OC));
            a[cx][0] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(u0, u1));
            a[cx][1] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(u0, u1));
            b[cx][0] = _mm256_cvtepu8_epi32(u2);
            b[cx][1] = _mm256_cvtepu8_epi32(_mm_srli_si128(u2, 8));
        }
        /* the accumulators of up to 64 pixels, then their requantization (each loop keeps
         * its constants in registers) */
        for (int64_t x0 = 0; x0 < OW; x0 += 64) {
            const int64_t nx = OW - x0 < 64 ? OW - x0 : 64;
            __m256i accs[64][2];
            for (int64_t ox = x0; ox < x0 + nx; ox++) {
                const int64_t cx = ox + 2;
                const __m128i u0 = _mm_loadu_si128((const void *)(r0 + cx * OC));
                const __m128i u1 = _mm_loadu_si128((const void *)(r0 + row + cx * OC));
                const __m128i u2 = _mm_loadu_si128((const void *)(r0 + 2 * row + cx * OC));
                a[2][0] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(u0, u1));
                a[2][1] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(u0, u1));
                b[2][0] = _mm256_cvtepu8_epi32(u2);
                b[2][1] = _mm256_cvtepu8_epi32(_mm_srli_si128(u2, 8));
                for (int h = 0; h < 2; h++) {
                    const __m256i s0 = _mm256_add_epi32(_mm256_madd_epi16(a[0][h], w01[0][h]),
                                                        _mm256_madd_epi16(b[0][h], w2[0][h]));
                    const __m256i s1 = _mm256_add_epi32(_mm256_madd_epi16(a[1][h], w01[1][h]),
                                                        _mm256_madd_epi16(b[1][h], w2[1][h]));
                    const __m256i s2 = _mm256_add_epi32(_mm256_madd_epi16(a[2][h], w01[2][h]),
                                                        _mm256_madd_epi16(b[2][h], w2[2][h]));
                    accs[ox - x0][h] =
                        _mm256_add_epi32(_mm256_add_epi32(bias[h], s0), _mm256_add_epi32(s1, s2));
                }
                for (int h = 0; h < 2; h++) {
                    a[0][h] = a[1][h];
                    a[1][h] = a[2][h];
                    b[0][h] = b[1][h];
                    b[1][h] = b[2][h];
                }
            }
            uint8_t *d = out + (oy * OW + x0) * OC + o;
            int64_t i = 0;
            if (left >= 16) /* two pixels at a time */
                for (; i + 2 <= nx; i += 2) {
                    const __m256i b = rq16_out2(rq, fast, accs[i][0], accs[i][1], accs[i + 1][0],
                                                accs[i + 1][1], v);
                    _mm_storeu_si128((__m128i *)(void *)(d + i * OC), _mm256_castsi256_si128(b));
                    _mm_storeu_si128((__m128i *)(void *)(d + (i + 1) * OC),
                                     _mm256_extracti128_si256(b, 1));
                }
            for (; i < nx; i++)
                store_n(d + i * OC, rq16_out(rq, fast, accs[i][0], accs[i][1], v), left, 16);
        }
    }
}

HB_AVX2 static void dw3s1_avx2(const uint8_t *P, const opctx *c, int64_t o, const __m256i bias[2],
                               const vo8 *v, uint8_t *out) {
    rq16 rq;
    rq16_load(&rq, c, o);
    if (rq.fast)
        dw3s1_block(P, c, o, bias, v, &rq, 1, out);
    else
        dw3s1_block(P, c, o, bias, v, &rq, 0, out);
}

/* one tap pair p of a 16-channel depthwise pixel at px: the pair's two taps' bytes
 * interleaved, times its weights w (2 x 8 channels), into the pixel's two accumulators */
HB_AVX2 static inline void dw_pair(const uint8_t *px, const int64_t *toff, const __m256i *w,
                                   __m256i *a0, __m256i *a1) {
    const __m128i u0 = _mm_loadu_si128((const void *)(px + toff[0]));
    const __m128i u1 = _mm_loadu_si128((const void *)(px + toff[1]));
    *a0 = _mm256_add_epi32(*a0,
                           _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(u0, u1)), w[0]));
    *a1 = _mm256_add_epi32(*a1,
                           _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(u0, u1)), w[1]));
}

HB_AVX2 static void dw_avx2(const uint8_t *P, const opctx *c, uint32_t *accu, uint8_t *out) {
    (void)accu;
    const int64_t *f = c->f;
    const int64_t OH = f[F_OH], OW = f[F_OW], OC = f[F_OC], KH = f[F_KH], KW = f[F_KW];
    const int64_t SH = f[F_SH], SW = f[F_SW], DH = f[F_DH], DW = f[F_DW], WP = f[F_WP];
    const int64_t T = KH * KW, NP = (T + 1) / 2;
    if (T > 62) { /* more taps than the tables below hold */
        hb_dw_taps(P, c, out);
        return;
    }
    const vo8 v = vo8_make(f);
    const __m256i ones = _mm256_set1_epi16(1);
    /* per tap pair p: offset of each tap in the padded input, and the weights interleaved
     * (the odd last tap paired with itself and zero weights) */
    int64_t toff[64];
    __m256i wts[32][2]; /* 2 x 8 channels per pair, T <= 63 taps */
    for (int64_t t = 0; t < T; t++) toff[t] = ((t / KW) * DH * WP + (t % KW) * DW) * OC;
    if (T % 2) toff[T] = toff[T - 1];
    for (int64_t o = 0; o < OC; o += 16) {
        const int64_t left = OC - o;
        __m256i bias[2];
        __m256i tsum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int64_t p = 0; p < NP; p++) {
            const __m128i w0 = load16z(c->w + (2 * p) * OC + o, left);
            const __m128i w1 =
                2 * p + 1 < T ? load16z(c->w + (2 * p + 1) * OC + o, left) : _mm_setzero_si128();
            wts[p][0] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(w0, w1));
            wts[p][1] = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(w0, w1));
            tsum[0] = _mm256_add_epi32(tsum[0], _mm256_madd_epi16(wts[p][0], ones));
            tsum[1] = _mm256_add_epi32(tsum[1], _mm256_madd_epi16(wts[p][1], ones));
        }
        for (int h = 0; h < 2; h++) {
            int32_t tb[8], bb[8];
            _mm256_storeu_si256((void *)tb, tsum[h]);
            for (int l = 0; l < 8; l++) {
                const int64_t ch = o + h * 8 + l;
                bb[l] = ch < OC ? fold_bias(c, ch, tb[l]) : 0;
            }
            bias[h] = _mm256_loadu_si256((const void *)bb);
        }
        if (KH == 3 && KW == 3 && SH == 1 && SW == 1 && DH == 1 && DW == 1) {
            dw3s1_avx2(P, c, o, bias, &v, out);
            continue;
        }
        rq16 rq;
        rq16_load(&rq, c, o);
        for (int64_t oy = 0; oy < OH; oy++) {
            int64_t ox = 0;
            if (left >= 16) /* two pixels at a time */
                for (; ox + 2 <= OW; ox += 2) {
                    const uint8_t *px = P + ((oy * SH) * WP + ox * SW) * OC + o;
                    const uint8_t *py = px + SW * OC;
                    __m256i a0 = bias[0], a1 = bias[1], b0 = bias[0], b1 = bias[1];
                    for (int64_t p = 0; p < NP; p++) {
                        dw_pair(px, toff + 2 * p, wts[p], &a0, &a1);
                        dw_pair(py, toff + 2 * p, wts[p], &b0, &b1);
                    }
                    const __m256i b = rq16_out2(&rq, rq.fast, a0, a1, b0, b1, &v);
                    uint8_t *d = out + (oy * OW + ox) * OC + o;
                    _mm_storeu_si128((__m128i *)(void *)d, _mm256_castsi256_si128(b));
                    _mm_storeu_si128((__m128i *)(void *)(d + OC), _mm256_extracti128_si256(b, 1));
                }
            for (; ox < OW; ox++) {
                const uint8_t *px = P + ((oy * SH) * WP + ox * SW) * OC + o;
                __m256i a0 = bias[0], a1 = bias[1];
                for (int64_t p = 0; p < NP; p++) dw_pair(px, toff + 2 * p, wts[p], &a0, &a1);
                store_n(out + (oy * OW + ox) * OC + o, rq16_out(&rq, rq.fast, a0, a1, &v), left,
                        16);
            }
        }
    }
}

/* --- ADD (AVX2) ------------------------------------------------------------------------ */
/* one of ADD's three MultiplyByQuantizedMultiplier, uniform over lanes, by the cheapest
 * exact route (as k_avx512.c): (2^30, 0) is (x + 1) >> 1; right shifts merged; else TFLM */
typedef struct {
    int mode, anyls;
    vq8 q;
    vqs8 qs;
} addq8;

HB_AVX2 HB_INLINE addq8 addq8_make(int32_t m, int32_t sh) {
    addq8 a;
    const int32_t l = sh > 0 ? sh : 0, r = sh > 0 ? 0 : -sh;
    const int32_t mask = (int32_t)(((int64_t)1 << r) - 1);
    a.anyls = l > 0;
    a.mode = (m == (1 << 30) && sh == 0) ? 2 : (sh <= -1 ? 1 : 0);
    a.q.m = _mm256_set1_epi32(m);
    a.q.mo = _mm256_srli_epi64(a.q.m, 32);
    a.q.ls = _mm256_set1_epi32(l);
    a.q.rs = _mm256_set1_epi32(r);
    a.q.mask = _mm256_set1_epi32(mask);
    a.q.thr = _mm256_set1_epi32(mask >> 1);
    /* the merged rounding's constants, the same in every lane (so in LPERM order too) */
    a.qs.m = a.q.m;
    a.qs.mo = a.q.mo;
    a.qs.rsm1 = _mm256_set1_epi32(r > 0 ? r - 1 : 0);
    a.qs.ae = _mm256_set1_epi64x(((int64_t)1 << 30) + ((int64_t)1 << (30 + (r > 0 ? r : 1))));
    a.qs.ao = a.qs.ae;
    a.qs.aem = _mm256_sub_epi64(a.qs.ae, _mm256_set1_epi64x((int64_t)1 << 31));
    a.qs.aom = a.qs.aem;
    return a;
}

HB_AVX2 HB_INLINE __m256i addq8_apply(__m256i x, const addq8 *a) {
    if (a->mode == 2) return _mm256_srai_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(1)), 1);
    if (a->mode == 1) return vmbqm8_sign(lanes(x, 0, 1), &a->qs);
    return vmbqm8(x, &a->q, a->anyls);
}

HB_AVX2 static void add_avx2(const uint8_t *a, const uint8_t *b, const int64_t *f,
                             uint8_t *out) {
    const int64_t L = f[F_OUT_SIZE];
    const addq8 q1 = addq8_make((int32_t)f[F_M1], (int32_t)f[F_S1]);
    const addq8 q2 = addq8_make((int32_t)f[F_M2], (int32_t)f[F_S2]);
    const addq8 q3 = addq8_make((int32_t)f[F_MO], (int32_t)f[F_SO]);
    const __m256i off1 = _mm256_set1_epi32((int32_t)f[F_IO] - 128);
    const __m256i off2 = _mm256_set1_epi32((int32_t)f[F_IO2] - 128);
    const __m128i lsv = _mm_cvtsi32_si128((int32_t)f[F_LSH]);
    const vo8 v = vo8_make(f);
    for (int64_t i = 0; i < L; i += 8) {
        const int64_t left = L - i;
        __m128i ba, bb;
        if (left >= 8) {
            ba = _mm_loadl_epi64((const void *)(a + i));
            bb = _mm_loadl_epi64((const void *)(b + i));
        } else {
            uint8_t ta[16] = {0}, tb[16] = {0};
            memcpy(ta, a + i, (size_t)left);
            memcpy(tb, b + i, (size_t)left);
            ba = _mm_loadu_si128((const void *)ta);
            bb = _mm_loadu_si128((const void *)tb);
        }
        __m256i x1 = _mm256_cvtepu8_epi32(ba), x2 = _mm256_cvtepu8_epi32(bb);
        x1 = _mm256_sll_epi32(_mm256_add_epi32(x1, off1), lsv);
        x2 = _mm256_sll_epi32(_mm256_add_epi32(x2, off2), lsv);
        const __m256i r = _mm256_add_epi32(addq8_apply(x1, &q1), addq8_apply(x2, &q2));
        store8(out + i, vout8(addq8_apply(r, &q3), &v), left);
    }
}

/* --- MAX_POOL_2D (AVX2) on bytes --------------------------------------------------------- */
HB_AVX2 static void maxpool_avx2(const uint8_t *x, const int64_t *f, uint8_t *out) {
    const int64_t H = f[F_H], W = f[F_W], C = f[F_C], OH = f[F_OH], OW = f[F_OW];
    const int64_t KH = f[F_KH], KW = f[F_KW], SH = f[F_SH], SW = f[F_SW], PT = f[F_PT],
                  PL = f[F_PL];
    const __m256i lo = _mm256_set1_epi8((char)(f[F_LO] + 128));
    const __m256i hi = _mm256_set1_epi8((char)(f[F_HI] + 128));
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++)
            for (int64_t c = 0; c < C; c += 32) {
                const int64_t left = C - c;
                __m256i best = _mm256_setzero_si256();
                for (int64_t ky = 0; ky < KH; ky++) {
                    const int64_t iy = oy * SH - PT + ky;
                    if (iy < 0 || iy >= H) continue;
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const int64_t ix = ox * SW - PL + kx;
                        if (ix < 0 || ix >= W) continue;
                        /* past the channels: other pixels' bytes or the arena's slack,
                         * never stored */
                        best = _mm256_max_epu8(
                            best, _mm256_loadu_si256((const void *)(x + (iy * W + ix) * C + c)));
                    }
                }
                best = _mm256_min_epu8(_mm256_max_epu8(best, lo), hi);
                uint8_t *d = out + (oy * OW + ox) * C + c;
                if (left >= 32) {
                    _mm256_storeu_si256((void *)d, best);
                } else {
                    uint8_t t[32];
                    _mm256_storeu_si256((void *)t, best);
                    memcpy(d, t, (size_t)left);
                }
            }
}

/* --- GEMMs: AVX-VNNI, and AVX2 with VPDPBUSD done by two VPMADDWD ----------------------------------------------------------- */
#define MR2 6 /* pixels per GEMM tile */

/* --- peaks: the exact int8 multiply-add instruction's throughput ---------------------- */
/* 8 independent chains per round, in assembly (compilers spill some of 8 identical
 * intrinsic chains to memory, which then bounds the loop by a store-to-load latency) */
static volatile int16_t hb_peak_operand = 5;
#define PEAK_ASM(INSN, ...)                                                                 \
    __asm__ volatile(INSN(0) INSN(1) INSN(2) INSN(3) INSN(4) INSN(5) INSN(6) INSN(7)        \
                     : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3),           \
                       [c4] "+x"(c4), [c5] "+x"(c5), [c6] "+x"(c6), [c7] "+x"(c7)            \
                     : __VA_ARGS__)
#define PEAK_INIT                                                                           \
    __m256i c0 = _mm256_set1_epi32(1), c1 = _mm256_set1_epi32(2), c2 = _mm256_set1_epi32(3), \
            c3 = _mm256_set1_epi32(4), c4 = _mm256_set1_epi32(5), c5 = _mm256_set1_epi32(6), \
            c6 = _mm256_set1_epi32(7), c7 = _mm256_set1_epi32(8)
#define PEAK_SINK                                                                           \
    hb_peak_sink = _mm256_extract_epi32(c0, 0) + _mm256_extract_epi32(c1, 0) +               \
                   _mm256_extract_epi32(c2, 0) + _mm256_extract_epi32(c3, 0) +               \
                   _mm256_extract_epi32(c4, 0) + _mm256_extract_epi32(c5, 0) +               \
                   _mm256_extract_epi32(c6, 0) + _mm256_extract_epi32(c7, 0)

/* AVX2: VPMADDWD (16 products of int16, pairs summed; the accumulating VPADDD runs on other
 * ports), chained through its first operand */
#define MADDWD(i) "vpmaddwd %[b], %[c" #i "], %[c" #i "]\n\t"
HB_AVX2 static uint64_t peak_avx2(uint64_t n) {
    const __m256i b = _mm256_set1_epi16(hb_peak_operand);
    PEAK_INIT;
    for (uint64_t i = 0; i < n; i++) PEAK_ASM(MADDWD, [b] "x"(b));
    PEAK_SINK;
    return n * 8 * 16;
}

/* VPDPBUSD by AVX2, exactly: the even and the odd bytes of each 16-bit lane widened (u8
 * zero-, s8 sign-extended), two VPMADDWD, summed into the accumulator (mod 2^32) */
HB_AVX2 HB_INLINE __m256i dpbusd_emu(__m256i acc, __m256i a, __m256i b) {
    const __m256i lo8 = _mm256_set1_epi16(0x00FF);
    const __m256i ae = _mm256_and_si256(a, lo8), ao = _mm256_srli_epi16(a, 8);
    const __m256i be = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), bo = _mm256_srai_epi16(b, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(ae, be),
                                                  _mm256_madd_epi16(ao, bo)));
}

#if HB_HAVE_AVXVNNI
#define HB_AVXVNNI __attribute__((target("avx2,fma,bmi,bmi2,avxvnni")))
/* AVX-VNNI: VPDPBUSD on 256 bits (32 products of u8 x s8), VEX-encoded */
#define DPBUSD_VEX(i) "%{vex%} vpdpbusd %[b], %[a], %[c" #i "]\n\t"
HB_AVXVNNI static uint64_t peak_avxvnni(uint64_t n) {
    const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8((char)hb_peak_operand);
    PEAK_INIT;
    for (uint64_t i = 0; i < n; i++) PEAK_ASM(DPBUSD_VEX, [a] "x"(a), [b] "x"(b));
    PEAK_SINK;
    return n * 8 * 32;
}
#define VN_FN HB_AVXVNNI
#define VN(n) n##_avxvnni
#define VN_NAME "avxvnni"
#define VN_DPBUSD(acc, a, b) _mm256_dpbusd_avx_epi32(acc, a, b)
#define VN_PEAK peak_avxvnni
#include "k_avxvnni.inc"
#undef VN_FN
#undef VN
#undef VN_NAME
#undef VN_DPBUSD
#undef VN_PEAK
#endif

#define VN_FN HB_AVX2
#define VN(n) n##_avx2
#define VN_NAME "avx2"
#define VN_DPBUSD(acc, a, b) dpbusd_emu(acc, a, b)
#define VN_PEAK peak_avx2
#include "k_avxvnni.inc"
#undef VN_FN
#undef VN
#undef VN_NAME
#undef VN_DPBUSD
#undef VN_PEAK
#else
typedef int hb_no_avx2; /* not an x86-64 build: nothing here */
#endif
