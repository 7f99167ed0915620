/* AVX-512 VNNI kernels (x86-64): compiled with target attributes, chosen at run time when
 * the CPU and the OS support AVX-512 F/BW/VL/VNNI (one depthwise kernel also VBMI).
 *
 * GEMMs run "packed" (weights repacked per call into 16-channel x 4-byte panels, one
 * broadcast 4-byte group of a pixel's row times 16 channels per VPDPBUSD; requantization
 * fused into the tile's store) or "direct" (dot products along K on the weights as given,
 * 4 pixels x 4 channels per tile, horizontal sums at the end), as the plan says per layer.
 * The activations they multiply are u = x + 128 (VPDPBUSD: u8 x s8).
 */
#include "engine.h"

#if HB_X86
#include <immintrin.h>

#define HB_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define HB_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

typedef struct {
    __m512i m, mo, ls, rs, mask, thr;
} vq;

HB_VNNI HB_INLINE vq vq_load(const int32_t *qp, int64_t o16, int64_t o) {
    vq q;
    q.m = _mm512_loadu_si512(qp + o);
    q.mo = _mm512_srli_epi64(q.m, 32);
    q.ls = _mm512_loadu_si512(qp + 2 * o16 + o);
    q.rs = _mm512_loadu_si512(qp + 3 * o16 + o);
    q.mask = _mm512_loadu_si512(qp + 4 * o16 + o);
    q.thr = _mm512_loadu_si512(qp + 5 * o16 + o);
    return q;
}

/* MultiplyByQuantizedMultiplier on 16 int32 lanes (multipliers >= 0, so no saturation). */
HB_VNNI HB_INLINE __m512i vmbqm(__m512i v, const vq *q, int anyls) {
    if (anyls) v = _mm512_sllv_epi32(v, q->ls);
    const __m512i nudge = _mm512_set1_epi64((int64_t)1 << 30);
    __m512i pe = _mm512_mul_epi32(v, q->m);
    __m512i po = _mm512_mul_epi32(_mm512_srli_epi64(v, 32), q->mo);
    pe = _mm512_srli_epi64(_mm512_add_epi64(pe, nudge), 31);
    po = _mm512_slli_epi64(_mm512_add_epi64(po, nudge), 1);
    const __m512i h = _mm512_mask_blend_epi32(0xAAAA, pe, po);
    const __m512i rem = _mm512_and_si512(h, q->mask);
    const __m512i thr = _mm512_sub_epi32(q->thr, _mm512_srai_epi32(h, 31));
    __m512i r = _mm512_srav_epi32(h, q->rs);
    const __mmask16 up = _mm512_cmpgt_epi32_mask(rem, thr);
    return _mm512_mask_sub_epi32(r, up, r, _mm512_set1_epi32(-1));
}

/* The same when every channel has a right shift rs >= 1 and no left shift (F_FASTRQ): the
 * two roundings in one, exactly. With p = v * m and h = floor((p + 2^30) / 2^31), TFLM's
 * RoundingDivideByPOT(h, rs) = floor((h + 2^(rs-1) - [h < 0]) / 2^rs), and h < 0 iff
 * p < -2^30; floor((floor(a) + c) / 2^rs) = floor((a + c) / 2^rs) for integer c, so
 *     result = (p + 2^30 + 2^(30+rs) - [p < -2^30] * 2^31) >> (31 + rs)
 * in 64-bit lanes (|p| < 2^62: no overflow). The high 32 bits of each sum, shifted right
 * by rs - 1, are the result. Tables: rs - 1 per channel, and 2^30 + 2^(30+rs) as int64
 * for the even then the odd channels of each 16-channel block. */
typedef struct {
    __m512i m, mo, ae, ao, rsm1;
} vqf;

HB_VNNI HB_INLINE vqf vqf_load(const int32_t *qp, int64_t o16, int64_t o) {
    vqf q;
    q.m = _mm512_loadu_si512(qp + o);
    q.mo = _mm512_srli_epi64(q.m, 32);
    q.rsm1 = _mm512_loadu_si512(qp + 6 * o16 + o);
    q.ae = _mm512_loadu_si512(qp + 7 * o16 + 2 * o);
    q.ao = _mm512_loadu_si512(qp + 7 * o16 + 2 * o + 16);
    return q;
}

HB_VNNI HB_INLINE __m512i vmbqm_fast(__m512i v, const vqf *q) {
    const __m512i neg = _mm512_set1_epi64(-((int64_t)1 << 30));
    const __m512i n31 = _mm512_set1_epi64((int64_t)1 << 31);
    const __m512i pe = _mm512_mul_epi32(v, q->m);
    const __m512i po = _mm512_mul_epi32(_mm512_srli_epi64(v, 32), q->mo);
    __m512i e = _mm512_add_epi64(pe, q->ae);
    __m512i od = _mm512_add_epi64(po, q->ao);
    e = _mm512_mask_sub_epi64(e, _mm512_cmplt_epi64_mask(pe, neg), e, n31);
    od = _mm512_mask_sub_epi64(od, _mm512_cmplt_epi64_mask(po, neg), od, n31);
    const __m512i h = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(e, 32), od);
    return _mm512_srav_epi32(h, q->rsm1);
}

/* + output offset, clamp, + 128, narrow to 16 bytes */
HB_VNNI HB_INLINE __m128i vout(__m512i r, __m512i oo, __m512i lo, __m512i hi) {
    r = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(r, oo), lo), hi);
    return _mm512_cvtepi32_epi8(r);
}

/* Four requantized vectors (int32 lanes, before the output offset) to 64 stored bytes:
 * the 16 lanes of r0, then r1, r2, r3, each + output offset, clamped, + 128. Saturating
 * packs to int16, the offset added with int16 saturation, packs to int8, clamp in int8:
 * exact, as the clamp bounds lie within int8 (a value saturated at either step is beyond
 * its bound). The packs interleave 4-lane groups; one dword permute puts them back. */
typedef struct {
    __m512i oo16, lo8, hi8, perm;
} vnarrow;

HB_VNNI HB_INLINE vnarrow vnarrow_make(const int64_t *f) {
    vnarrow n;
    n.oo16 = _mm512_set1_epi16((int16_t)f[F_OO]);
    n.lo8 = _mm512_set1_epi8((char)f[F_LO]);
    n.hi8 = _mm512_set1_epi8((char)f[F_HI]);
    n.perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return n;
}

HB_VNNI HB_INLINE __m512i vnarrow4(__m512i r0, __m512i r1, __m512i r2, __m512i r3,
                                   const vnarrow *n) {
    const __m512i a = _mm512_adds_epi16(_mm512_packs_epi32(r0, r1), n->oo16);
    const __m512i b = _mm512_adds_epi16(_mm512_packs_epi32(r2, r3), n->oo16);
    __m512i c = _mm512_packs_epi16(a, b);
    c = _mm512_min_epi8(_mm512_max_epi8(c, n->lo8), n->hi8);
    c = _mm512_xor_si512(c, _mm512_set1_epi8((char)0x80));
    return _mm512_permutexvar_epi32(n->perm, c);
}

/* piece k (of `width` bytes) of v to d, its first n <= width bytes: one masked store at
 * d - k * width whose mask covers only that piece (masked-out bytes are neither read
 * nor written, nor can they fault) */
HB_VNNI HB_INLINE void store_piece(uint8_t *d, __m512i v, int k, int width, int64_t n) {
    if (n == width) { /* whole: a plain store (masked ones are slow on some CPUs) */
        if (width == 64) {
            _mm512_storeu_si512(d, v);
        } else if (width == 32) {
            _mm256_storeu_si256((__m256i *)d, k ? _mm512_extracti64x4_epi64(v, 1)
                                                 : _mm512_castsi512_si256(v));
        } else {
            __m128i x;
            switch (k) {
            case 0: x = _mm512_castsi512_si128(v); break;
            case 1: x = _mm512_extracti32x4_epi32(v, 1); break;
            case 2: x = _mm512_extracti32x4_epi32(v, 2); break;
            default: x = _mm512_extracti32x4_epi32(v, 3); break;
            }
            _mm_storeu_si128((__m128i *)d, x);
        }
        return;
    }
    const __mmask64 m = (n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1)) << (k * width);
    _mm512_mask_storeu_epi8(d - k * width, m, v);
}

/* 16 bytes to d under km: a plain store when whole (masked stores are slow on AMD's
 * cores), masked for a tail */
HB_VNNI HB_INLINE void store16(uint8_t *d, __mmask16 km, __m128i v) {
    if (km == (__mmask16)0xFFFF)
        _mm_storeu_si128((__m128i *)d, v);
    else
        _mm_mask_storeu_epi8(d, km, v);
}

#define MR_MAX 16
HB_VNNI HB_INLINE void tile_epilogue(__m512i acc[][4], const opctx *c, int64_t ob, int64_t O,
                                     uint8_t *out, const int mr, const int nr, int anyls,
                                     const int fast) {
    const int64_t *f = c->f;
    const int64_t O16 = f[F_O16];
    _Pragma("GCC unroll 16")
    for (int j = 0; j < nr; j++) {
        const int64_t o = (ob + j) * 16;
        if (fast) {
            const vqf q = vqf_load(c->qp, O16, o);
            _Pragma("GCC unroll 16")
            for (int i = 0; i < mr; i++) acc[i][j] = vmbqm_fast(acc[i][j], &q);
        } else {
            const vq q = vq_load(c->qp, O16, o);
            _Pragma("GCC unroll 16")
            for (int i = 0; i < mr; i++) acc[i][j] = vmbqm(acc[i][j], &q, anyls);
        }
    }
    const vnarrow nw = vnarrow_make(f);
    /* a pixel's nr blocks are contiguous: 64 / 48 bytes per store for nr = 4 / 3, two
     * pixels (32 bytes each) per narrowing for nr = 2, four (16 bytes) for nr = 1 */
    const int64_t o0 = ob * 16, rest = O - o0;
    uint8_t *d = out + o0;
    if (nr >= 3) {
        const int64_t n = rest < nr * 16 ? rest : nr * 16;
        _Pragma("GCC unroll 16")
        for (int i = 0; i < mr; i++) {
            const __m512i v = vnarrow4(acc[i][0], acc[i][1], acc[i][2], acc[i][nr - 1], &nw);
            if (n == 48) { /* three whole blocks: 32 + 16 bytes */
                store_piece(d + i * O, v, 0, 32, 32);
                store_piece(d + i * O + 32, v, 2, 16, 16);
            } else {
                store_piece(d + i * O, v, 0, 64, n);
            }
        }
    } else if (nr == 2) {
        const int64_t n = rest < 32 ? rest : 32;
        _Pragma("GCC unroll 16")
        for (int i = 0; i < mr; i += 2) {
            const int i1 = i + 1 < mr ? i + 1 : i;
            const __m512i v = vnarrow4(acc[i][0], acc[i][1], acc[i1][0], acc[i1][1], &nw);
            store_piece(d + i * O, v, 0, 32, n);
            if (i + 1 < mr) store_piece(d + i1 * O, v, 1, 32, n);
        }
    } else {
        const int64_t n = rest < 16 ? rest : 16;
        _Pragma("GCC unroll 16")
        for (int i = 0; i < mr; i += 4) {
            const int i1 = i + 1 < mr ? i + 1 : i, i2 = i + 2 < mr ? i + 2 : i,
                      i3 = i + 3 < mr ? i + 3 : i;
            const __m512i v = vnarrow4(acc[i][0], acc[i1][0], acc[i2][0], acc[i3][0], &nw);
            store_piece(d + i * O, v, 0, 16, n);
            if (i + 1 < mr) store_piece(d + i1 * O, v, 1, 16, n);
            if (i + 2 < mr) store_piece(d + i2 * O, v, 2, 16, n);
            if (i + 3 < mr) store_piece(d + i3 * O, v, 3, 16, n);
        }
    }
}

/* The multiply-adds of one tile, mr pixels x nr 16-channel blocks, into dst[i * nr + j]
 * (from the effective bias): pixel i's 4-byte group k at rows[i] + koff[k] (implicit
 * im2col: each filter row's KW*C bytes padded to a multiple of 4 in the packed weights,
 * zeros, so a group never mixes two filter rows), or at A + i * lda + 4 k. Each shape is a
 * function of its own (below), so that its accumulators get registers of their own:
 * inlined into the tile with its requantization, gcc copied and spilled them in the loop. */
HB_VNNI HB_INLINE void mac_body(const uint8_t *const *rows, const int32_t *koff,
                                const uint8_t *A, int64_t lda, int64_t K4, const int8_t *B,
                                const int32_t *beff, int64_t ob, const int mr, const int nr,
                                __m512i *dst, const int csteps) {
    __m512i acc[MR_MAX][4];
    _Pragma("GCC unroll 16")
    for (int j = 0; j < nr; j++) {
        const __m512i b = _mm512_loadu_si512(beff + (ob + j) * 16);
        _Pragma("GCC unroll 16")
        for (int i = 0; i < mr; i++) acc[i][j] = b;
    }
    const uint8_t *r[MR_MAX];
    _Pragma("GCC unroll 16")
    for (int i = 0; i < mr; i++) r[i] = rows ? rows[i] : A + i * lda;
    const int8_t *b0 = B + ob * K4 * 16;
    const int64_t bstride = K4 * 16;
    const int64_t steps = csteps ? csteps : K4 / 4;
    /* csteps: the step count as a constant (short reductions), the loop unrolled whole:
     * with a back edge gcc copied every accumulator once per step */
    _Pragma("GCC unroll 16")
    for (int64_t k = 0; k < steps; k++) {
        __m512i w[4];
        _Pragma("GCC unroll 16")
        for (int j = 0; j < nr; j++) w[j] = _mm512_loadu_si512(b0 + j * bstride + k * 64);
        const int64_t off = rows ? koff[k] : 4 * k;
        _Pragma("GCC unroll 16")
        for (int i = 0; i < mr; i++) {
            int32_t av;
            memcpy(&av, r[i] + off, 4);
            const __m512i a = _mm512_set1_epi32(av);
            _Pragma("GCC unroll 16")
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, w[j]);
        }
    }
    _Pragma("GCC unroll 16")
    for (int i = 0; i < mr; i++) {
        _Pragma("GCC unroll 16")
        for (int j = 0; j < nr; j++) _mm512_store_si512(dst + i * nr + j, acc[i][j]);
    }
}

#define DEF_MAC(MR, NR)                                                                     \
    HB_VNNI __attribute__((noinline)) static void mac_##MR##_##NR(                          \
        const uint8_t *const *rows, const int32_t *koff, const uint8_t *A, int64_t lda,     \
        int64_t K4, const int8_t *B, const int32_t *beff, int64_t ob, __m512i *dst) {       \
        if (rows)                                                                           \
            mac_body(rows, koff, NULL, 0, K4, B, beff, ob, MR, NR, dst, 0);                 \
        else                                                                                \
            mac_body(NULL, NULL, A, lda, K4, B, beff, ob, MR, NR, dst, 0);                  \
    }
DEF_MAC(4, 4)
DEF_MAC(1, 4)
DEF_MAC(5, 3)
DEF_MAC(4, 3)
DEF_MAC(1, 3)
DEF_MAC(8, 2)
DEF_MAC(4, 2)
DEF_MAC(1, 2)
DEF_MAC(16, 1)
DEF_MAC(4, 1)
DEF_MAC(1, 1)
#undef DEF_MAC

/* one tile: its multiply-adds (the shape's function), then the requantization and stores */
HB_VNNI HB_INLINE void gemm_tile_any(const uint8_t *const *rows, const int32_t *koff,
                                     const uint8_t *A, int64_t lda, int64_t K4,
                                     const int8_t *B, const opctx *c, int64_t ob, int64_t O,
                                     uint8_t *out, const int mr, const int nr, int anyls,
                                     const int fast) {
    __m512i buf[MR_MAX * 4] __attribute__((aligned(64)));
    if (K4 < 64) { /* short: inlined (the call and the accumulators' trip through memory
                    * would cost more than the copies) */
        switch (K4 / 4) { /* the usual short reductions with their step count constant */
#define MAC_STEPS(S)                                                                        \
    case S: mac_body(rows, koff, A, lda, K4, B, c->beff, ob, mr, nr, buf, S); break;
        MAC_STEPS(2)
        MAC_STEPS(3)
        MAC_STEPS(4)
        MAC_STEPS(6)
        MAC_STEPS(8)
        MAC_STEPS(9)
        MAC_STEPS(12)
#undef MAC_STEPS
        default: mac_body(rows, koff, A, lda, K4, B, c->beff, ob, mr, nr, buf, 0); break;
        }
    } else {
#define MAC_CASE(MR, NR)                                                                    \
    if (mr == (MR) && nr == (NR)) mac_##MR##_##NR(rows, koff, A, lda, K4, B, c->beff, ob, buf);
    MAC_CASE(4, 4)
    MAC_CASE(1, 4)
    MAC_CASE(5, 3)
    MAC_CASE(4, 3)
    MAC_CASE(1, 3)
    MAC_CASE(8, 2)
    MAC_CASE(4, 2)
    MAC_CASE(1, 2)
    MAC_CASE(16, 1)
    MAC_CASE(4, 1)
    MAC_CASE(1, 1)
#undef MAC_CASE
    }
    __m512i acc[MR_MAX][4];
    _Pragma("GCC unroll 16")
    for (int i = 0; i < mr; i++) {
        _Pragma("GCC unroll 16")
        for (int j = 0; j < nr; j++) acc[i][j] = _mm512_load_si512(buf + i * nr + j);
    }
    tile_epilogue(acc, c, ob, O, out, mr, nr, anyls, fast);
}

HB_VNNI HB_INLINE void gemm_tile(const uint8_t *A, int64_t lda, int64_t K4, const int8_t *B,
                                 const opctx *c, int64_t ob, int64_t O, uint8_t *out,
                                 const int mr, const int nr, int anyls, const int fast) {
    gemm_tile_any(NULL, NULL, A, lda, K4, B, c, ob, O, out, mr, nr, anyls, fast);
}

HB_VNNI HB_INLINE void gemm_tile_x(const uint8_t *const *rows, const int32_t *koff, int64_t K4,
                                   const int8_t *B, const opctx *c, int64_t ob, int64_t O,
                                   uint8_t *out, const int mr, const int nr, int anyls,
                                   const int fast) {
    gemm_tile_any(rows, koff, NULL, 0, K4, B, c, ob, O, out, mr, nr, anyls, fast);
}

/* One function per tile shape and requantization kind (not inlined into the loops over
 * tiles: compiled on its own, a tile's accumulators get registers of their own; inlined,
 * gcc copied and spilled them in the multiply-add loop) */
#define HB_TILE_FN HB_VNNI __attribute__((noinline)) static void
#define DEF_TILES(MR, NR, FZ)                                                               \
    HB_TILE_FN tile_##MR##_##NR##_##FZ(const uint8_t *A, int64_t lda, int64_t K4,           \
                                       const int8_t *B, const opctx *c, int64_t ob,         \
                                       int64_t O, uint8_t *out, int anyls) {                \
        gemm_tile(A, lda, K4, B, c, ob, O, out, MR, NR, anyls, FZ);                         \
    }                                                                                       \
    HB_TILE_FN tilex_##MR##_##NR##_##FZ(const uint8_t *const *rows, const int32_t *koff,    \
                                        int64_t K4, const int8_t *B, const opctx *c,        \
                                        int64_t ob, int64_t O, uint8_t *out, int anyls) {   \
        gemm_tile_x(rows, koff, K4, B, c, ob, O, out, MR, NR, anyls, FZ);                   \
    }
#define DEF_TILES2(MR, NR) DEF_TILES(MR, NR, 0) DEF_TILES(MR, NR, 1)
DEF_TILES2(4, 4)
DEF_TILES2(1, 4)
DEF_TILES2(5, 3)
DEF_TILES2(4, 3)
DEF_TILES2(1, 3)
DEF_TILES2(8, 2)
DEF_TILES2(4, 2)
DEF_TILES2(1, 2)
DEF_TILES2(16, 1)
DEF_TILES2(4, 1)
DEF_TILES2(1, 1)
#undef DEF_TILES2
#undef DEF_TILES

#define TILE(MR, NR, FZ)                                                                    \
    tile_##MR##_##NR##_##FZ(A + m0 * lda, lda, K4, c->pk, c, ob, O, out + m0 * O, anyls)
/* rows in tiles of MR (as many accumulators as registers allow: MR * NR <= 16), then 4, 1 */
#define ROWS(MR, NR, FZ)                                                                    \
    do {                                                                                    \
        int64_t m0 = 0;                                                                     \
        for (; m0 + (MR) <= M; m0 += (MR)) TILE(MR, NR, FZ);                                \
        for (; m0 + 4 <= M; m0 += 4) TILE(4, NR, FZ);                                       \
        for (; m0 < M; m0++) TILE(1, NR, FZ);                                               \
    } while (0)
/* every 16-channel block group: the tile shape for its width, the requantization kind a
 * constant of each instance */
#define BLOCKS(FZ)                                                                          \
    for (int64_t ob = 0; ob < nb; ob += 4) {                                                \
        const int64_t nr = nb - ob < 4 ? nb - ob : 4;                                       \
        switch (nr) {                                                                       \
        case 4: ROWS(4, 4, FZ); break;                                                      \
        case 3: ROWS(5, 3, FZ); break;                                                      \
        case 2: ROWS(8, 2, FZ); break;                                                      \
        default: ROWS(16, 1, FZ); break;                                                    \
        }                                                                                   \
    }

/* Exactly 8 channels: two pixels per vector (lanes 0-7 pixel i, 8-15 pixel i + 1; the
 * panel's, the bias's and the requantization's 8 channels repeated in the upper half), so
 * the multiply-adds and the requantization fill all 16 lanes; 8 pixels x 8 channels are 64
 * contiguous output bytes. 32 pixels per tile (16 accumulators); returns the pixels done. */
#define HI8(v) _mm512_shuffle_i64x2((v), (v), 0x44)
HB_VNNI static int64_t gemm_vnni_o8(const uint8_t *A, int64_t lda, int64_t M, const opctx *c,
                                    uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t K4 = f[F_K4], O16 = f[F_O16], steps = K4 / 4;
    const int anyls = (int)f[F_ANYLS], fast = (int)f[F_FASTRQ];
    vq q = vq_load(c->qp, O16, 0);
    q.m = HI8(q.m);
    q.mo = _mm512_srli_epi64(q.m, 32);
    q.ls = HI8(q.ls);
    q.rs = HI8(q.rs);
    q.mask = HI8(q.mask);
    q.thr = HI8(q.thr);
    vqf qf = vqf_load(c->qp, O16, 0);
    qf.m = q.m;
    qf.mo = q.mo;
    qf.rsm1 = HI8(qf.rsm1);
    qf.ae = HI8(qf.ae);
    qf.ao = HI8(qf.ao);
    const vnarrow nw = vnarrow_make(f);
    const __m512i bias = HI8(_mm512_loadu_si512(c->beff));
    int64_t m0 = 0;
    for (; m0 + 32 <= M; m0 += 32) {
        __m512i acc[16];
        for (int i = 0; i < 16; i++) acc[i] = bias;
        const uint8_t *a0 = A + m0 * lda;
        for (int64_t k = 0; k < steps; k++) {
            const __m512i w = HI8(_mm512_loadu_si512(c->pk + k * 64));
            for (int i = 0; i < 16; i++) {
                int32_t lo, hi;
                memcpy(&lo, a0 + (2 * i) * lda + k * 4, 4);
                memcpy(&hi, a0 + (2 * i + 1) * lda + k * 4, 4);
                const __m512i a = _mm512_mask_set1_epi32(_mm512_set1_epi32(lo), 0xFF00, hi);
                acc[i] = _mm512_dpbusd_epi32(acc[i], a, w);
            }
        }
        for (int i = 0; i < 16; i++)
            acc[i] = fast ? vmbqm_fast(acc[i], &qf) : vmbqm(acc[i], &q, anyls);
        for (int i = 0; i < 16; i += 4)
            _mm512_storeu_si512(out + (m0 + 2 * i) * 8,
                                vnarrow4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3], &nw));
    }
    return m0;
}
#undef HI8

HB_VNNI static void gemm_vnni(const uint8_t *A, int64_t lda, int64_t M, const opctx *c,
                              uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], K4 = f[F_K4], nb = f[F_O16] / 16;
    const int anyls = (int)f[F_ANYLS];
    if (O == 8) { /* pairs of pixels, then the rest as below */
        const int64_t done = gemm_vnni_o8(A, lda, M, c, out);
        A += done * lda;
        out += done * O;
        M -= done;
    }
    if (f[F_FASTRQ])
        BLOCKS(1)
    else
        BLOCKS(0)
}
#undef TILE

#define TILE(MR, NR, FZ)                                                                    \
    do {                                                                                    \
        const uint8_t *rows[MR_MAX];                                                        \
        int64_t oy = m0 / OW, ox = m0 - oy * OW; /* one division per tile */                \
        for (int i = 0; i < (MR); i++) {                                                    \
            rows[i] = P + (oy * SH * WP + ox * SW) * C;                                     \
            if (++ox == OW) {                                                               \
                ox = 0;                                                                     \
                oy++;                                                                       \
            }                                                                               \
        }                                                                                   \
        tilex_##MR##_##NR##_##FZ(rows, koff, K4, c->pk, c, ob, O, out + m0 * O, anyls);     \
    } while (0)

HB_VNNI static void gemm_vnni_x(const uint8_t *P, int64_t M, const opctx *c, int32_t *koff,
                                uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], K4 = f[F_K4], nb = f[F_O16] / 16;
    const int64_t C = f[F_C], OW = f[F_OW], SH = f[F_SH], SW = f[F_SW], WP = f[F_WP];
    const int64_t KH = f[F_KH], DH = f[F_DH], gk = (K4 / KH) / 4; /* groups per filter row */
    const int anyls = (int)f[F_ANYLS];
    for (int64_t ky = 0; ky < KH; ky++)
        for (int64_t g = 0; g < gk; g++) koff[ky * gk + g] = (int32_t)(ky * DH * WP * C + 4 * g);
    if (f[F_FASTRQ])
        BLOCKS(1)
    else
        BLOCKS(0)
}
#undef BLOCKS
#undef ROWS
#undef TILE

HB_VNNI HB_INLINE __mmask64 mask64(int64_t n) {
    return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
}

HB_VNNI HB_INLINE void copy_v(uint8_t *d, const uint8_t *s, int64_t n) {
    for (; n >= 64; n -= 64, d += 64, s += 64) _mm512_storeu_si512(d, _mm512_loadu_si512(s));
    if (n) {
        const __mmask64 m = mask64(n);
        _mm512_mask_storeu_epi8(d, m, _mm512_maskz_loadu_epi8(m, s));
    }
}

HB_VNNI HB_INLINE void fill_v(uint8_t *d, uint8_t v, int64_t n) {
    const __m512i b = _mm512_set1_epi8((char)v);
    for (; n >= 64; n -= 64, d += 64) _mm512_storeu_si512(d, b);
    if (n) _mm512_mask_storeu_epi8(d, mask64(n), b);
}

HB_VNNI static void im2col_vnni(const uint8_t *x, const int64_t *f, uint8_t pad,
                                uint8_t *cols) {
    IM2COL_BODY(copy_v, fill_v)
}

/* im2col from the padded input (HP, WP, C), dilation 1 along W: every (pixel, ky) is one
 * run of KW*C contiguous bytes, copied with whole 64-byte moves (a run's overhang is
 * overwritten by the next run; the arena has 64 bytes of slack after each region). */
HB_VNNI static void im2col_padded_vnni(const uint8_t *P, const int64_t *f, uint8_t *cols) {
    const int64_t C = f[F_C], OH = f[F_OH], OW = f[F_OW], KH = f[F_KH], KW = f[F_KW];
    const int64_t SH = f[F_SH], SW = f[F_SW], DH = f[F_DH], WP = f[F_WP];
    const int64_t K = f[F_K], K4 = f[F_K4], run = KW * C;
    uint8_t *d = cols;
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++) {
            uint8_t *row = d;
            for (int64_t ky = 0; ky < KH; ky++) {
                const uint8_t *src = P + ((oy * SH + ky * DH) * WP + ox * SW) * C;
                if (run <= 64) {
                    _mm512_storeu_si512(d, _mm512_loadu_si512(src));
                } else {
                    int64_t j = 0;
                    for (; j + 64 < run; j += 64)
                        _mm512_storeu_si512(d + j, _mm512_loadu_si512(src + j));
                    _mm512_storeu_si512(d + run - 64, _mm512_loadu_si512(src + run - 64));
                }
                d += run;
            }
            for (int64_t k = K; k < K4; k++) row[k] = 0;
            d = row + K4;
        }
}

/* pack_gemm with AVX-512: 16 rows x 64 bytes at a time, a 16 x 16 dword transpose turns
 * them into 16 panels of [16 channels][4 bytes]; row sums with VPDPBUSD against ones. */
HB_VNNI static void pack_gemm_vnni(const int8_t *w, int64_t O, int64_t K, int64_t K4,
                                   int64_t O16, int8_t *dst, int32_t *rowsum) {
    const __m512i ones = _mm512_set1_epi8(1);
    const int64_t steps = K4 / 4;
    for (int64_t ob = 0; ob < O16 / 16; ob++) {
        __m512i rs = _mm512_setzero_si512();
        int8_t *d0 = dst + ob * K4 * 16;
        for (int64_t k = 0; k < K; k += 64) {
            const __mmask64 km = mask64(K - k);
            __m512i r[16], t[16], u[16];
            for (int l = 0; l < 16; l++) {
                const int64_t o = ob * 16 + l;
                r[l] = o < O ? _mm512_maskz_loadu_epi8(km, w + o * K + k) : _mm512_setzero_si512();
            }
            for (int i = 0; i < 8; i++) {
                t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
            }
            for (int i = 0; i < 4; i++) {
                u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
                u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
                u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
                u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
            }
            const int64_t j0 = k / 4;
            const int64_t nj = steps - j0 < 16 ? steps - j0 : 16;
            for (int c = 0; c < 4; c++) {
                const __m512i x01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
                const __m512i y01 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
                const __m512i x23 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
                const __m512i y23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
                const __m512i p[4] = {_mm512_shuffle_i32x4(x01, y01, 0x88),
                                      _mm512_shuffle_i32x4(x01, y01, 0xDD),
                                      _mm512_shuffle_i32x4(x23, y23, 0x88),
                                      _mm512_shuffle_i32x4(x23, y23, 0xDD)};
                for (int L = 0; L < 4; L++) {
                    const int64_t j = 4 * L + c;
                    if (j < nj) {
                        _mm512_storeu_si512(d0 + (j0 + j) * 64, p[L]);
                        rs = _mm512_dpbusd_epi32(rs, ones, p[L]);
                    }
                }
            }
        }
        _mm512_storeu_si512(rowsum + ob * 16, rs);
    }
}

HB_VNNI static void maxpool_vnni(const uint8_t *x, const int64_t *f, uint8_t *out) {
    const int64_t H = f[F_H], W = f[F_W], C = f[F_C], OH = f[F_OH], OW = f[F_OW];
    const int64_t KH = f[F_KH], KW = f[F_KW], SH = f[F_SH], SW = f[F_SW], PT = f[F_PT],
                  PL = f[F_PL];
    const __m512i lo = _mm512_set1_epi8((char)(f[F_LO] + 128));
    const __m512i hi = _mm512_set1_epi8((char)(f[F_HI] + 128));
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++)
            for (int64_t c = 0; c < C; c += 64) {
                const __mmask64 m = mask64(C - c);
                __m512i best = _mm512_setzero_si512();
                for (int64_t ky = 0; ky < KH; ky++) {
                    const int64_t iy = oy * SH - PT + ky;
                    if (iy < 0 || iy >= H) continue;
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const int64_t ix = ox * SW - PL + kx;
                        if (ix < 0 || ix >= W) continue;
                        best = _mm512_max_epu8(
                            best, _mm512_maskz_loadu_epi8(m, x + (iy * W + ix) * C + c));
                    }
                }
                best = _mm512_min_epu8(_mm512_max_epu8(best, lo), hi);
                if (C - c >= 64)
                    _mm512_storeu_si512(out + (oy * OW + ox) * C + c, best);
                else
                    _mm512_mask_storeu_epi8(out + (oy * OW + ox) * C + c, m, best);
            }
}

/* Sums of 16 vectors: lane 4c + k of the result is the sum of r[4k + c]'s lanes. */
HB_VNNI HB_INLINE __m512i hsum16(const __m512i r[16]) {
    __m512i x[8], y[4];
    for (int i = 0; i < 8; i++)
        x[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(r[2 * i], r[2 * i + 1], 0x44),
                                _mm512_shuffle_i64x2(r[2 * i], r[2 * i + 1], 0xEE));
    for (int j = 0; j < 4; j++)
        y[j] = _mm512_add_epi32(_mm512_shuffle_i64x2(x[2 * j], x[2 * j + 1], 0x88),
                                _mm512_shuffle_i64x2(x[2 * j], x[2 * j + 1], 0xDD));
    const __m512i z0 = _mm512_add_epi32(_mm512_unpacklo_epi32(y[0], y[1]),
                                        _mm512_unpackhi_epi32(y[0], y[1]));
    const __m512i z1 = _mm512_add_epi32(_mm512_unpacklo_epi32(y[2], y[3]),
                                        _mm512_unpackhi_epi32(y[2], y[3]));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(z0, z1), _mm512_unpackhi_epi64(z0, z1));
}

/* One direct tile: mr (<= 4) pixels x nr (<= 4) channels, dot products along K on the
 * weights as given; lanes of the result: 4 * pixel + channel. */
HB_VNNI HB_INLINE __m512i direct_tile(const uint8_t *A, int64_t lda, const int8_t *W,
                                      int64_t K, const int mr, const int nr, const int sums,
                                      int32_t *rsum) {
    __m512i acc[4][4], rs[4];
    const __m512i ones = _mm512_set1_epi8(1);
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++) {
        rs[i] = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_si512();
    }
    int64_t k = 0;
    for (; k + 64 <= K; k += 64) {
        __m512i w[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512()};
        _Pragma("GCC unroll 4")
        for (int j = 0; j < nr; j++) w[j] = _mm512_loadu_si512(W + j * K + k);
        if (sums) { /* the row sums on the way (the weights' one pass from memory) */
            _Pragma("GCC unroll 4")
            for (int j = 0; j < nr; j++) rs[j] = _mm512_dpbusd_epi32(rs[j], ones, w[j]);
        }
        _Pragma("GCC unroll 4")
        for (int i = 0; i < mr; i++) {
            const __m512i a = _mm512_loadu_si512(A + i * lda + k);
            _Pragma("GCC unroll 4")
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, w[j]);
        }
    }
    if (k < K) {
        const __mmask64 m = mask64(K - k);
        __m512i w[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512()};
        _Pragma("GCC unroll 4")
        for (int j = 0; j < nr; j++) w[j] = _mm512_maskz_loadu_epi8(m, W + j * K + k);
        if (sums) {
            _Pragma("GCC unroll 4")
            for (int j = 0; j < nr; j++) rs[j] = _mm512_dpbusd_epi32(rs[j], ones, w[j]);
        }
        _Pragma("GCC unroll 4")
        for (int i = 0; i < mr; i++) {
            const __m512i a = _mm512_maskz_loadu_epi8(m, A + i * lda + k);
            _Pragma("GCC unroll 4")
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, w[j]);
        }
    }
    if (sums) {
        _Pragma("GCC unroll 4")
        for (int j = 0; j < nr; j++) rsum[j] = _mm512_reduce_add_epi32(rs[j]);
    }
    __m512i r[16];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) r[4 * j + i] = acc[i][j];
    return hsum16(r);
}

/* A direct tile's 4 x 4 results (lane 4 * pixel + channel): + bias, requantized, stored */
HB_VNNI HB_INLINE void direct_store(const opctx *c, __m512i r, int64_t o0, int nr, int64_t m0,
                                    int mr, uint8_t *out, __m512i oo, __m512i lo, __m512i hi,
                                    int anyls) {
    const int64_t O = c->f[F_OC], O16 = c->f[F_O16];
    /* per-lane (channel o0 + lane % 4) requantization constants and bias */
    vq q;
    q.m = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + o0)));
    q.mo = _mm512_srli_epi64(q.m, 32);
    q.ls = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + 2 * O16 + o0)));
    q.rs = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + 3 * O16 + o0)));
    q.mask = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + 4 * O16 + o0)));
    q.thr = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + 5 * O16 + o0)));
    const __m512i bias = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->beff + o0)));
    r = vmbqm(_mm512_add_epi32(r, bias), &q, anyls);
    uint8_t tmp[16];
    _mm_storeu_si128((__m128i *)tmp, vout(r, oo, lo, hi));
    for (int i = 0; i < mr; i++) memcpy(out + (m0 + i) * O + o0, tmp + 4 * i, (size_t)nr);
}

HB_VNNI static void direct_vnni(const uint8_t *A, int64_t lda, int64_t M, const opctx *c,
                                uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], K = f[F_K];
    const int anyls = (int)f[F_ANYLS];
    const __m512i oo = _mm512_set1_epi32((int32_t)f[F_OO] + 128);
    const __m512i lo = _mm512_set1_epi32((int32_t)f[F_LO] + 128);
    const __m512i hi = _mm512_set1_epi32((int32_t)f[F_HI] + 128);
    for (int64_t o0 = 0; o0 < O; o0 += 4) {
        const int nr = O - o0 < 4 ? (int)(O - o0) : 4;
        const int8_t *W = c->w + o0 * K;
        /* the first pixel tile of a set's first input also sums the weights' rows (the bias
         * fold), in the same pass over them */
        {
            const int mr = M < 4 ? (int)M : 4;
            int32_t rsum[4];
            __m512i r;
            if (c->sums) {
                if (mr == 4 && nr == 4)
                    r = direct_tile(A, lda, W, K, 4, 4, 1, rsum);
                else if (nr == 4)
                    r = direct_tile(A, lda, W, K, mr, 4, 1, rsum);
                else
                    r = direct_tile(A, lda, W, K, mr, nr, 1, rsum);
                for (int j = 0; j < nr; j++) c->beff[o0 + j] = fold_bias(c, o0 + j, rsum[j]);
            } else {
                if (mr == 4 && nr == 4)
                    r = direct_tile(A, lda, W, K, 4, 4, 0, rsum);
                else if (nr == 4)
                    r = direct_tile(A, lda, W, K, mr, 4, 0, rsum);
                else
                    r = direct_tile(A, lda, W, K, mr, nr, 0, rsum);
            }
            direct_store(c, r, o0, nr, 0, mr, out, oo, lo, hi, anyls);
        }
        for (int64_t m0 = 4; m0 < M; m0 += 4) {
            const int mr = M - m0 < 4 ? (int)(M - m0) : 4;
            __m512i r;
            const uint8_t *a = A + m0 * lda;
            if (mr == 4 && nr == 4)
                r = direct_tile(a, lda, W, K, 4, 4, 0, NULL);
            else if (nr == 4)
                r = direct_tile(a, lda, W, K, mr, 4, 0, NULL);
            else
                r = direct_tile(a, lda, W, K, mr, nr, 0, NULL);
            direct_store(c, r, o0, nr, m0, mr, out, oo, lo, hi, anyls);
        }
    }
}
HB_VNNI static void dw_vnni(const uint8_t *P, const opctx *c, uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t OH = f[F_OH], OW = f[F_OW], OC = f[F_OC], KH = f[F_KH], KW = f[F_KW];
    const int64_t SH = f[F_SH], SW = f[F_SW], DH = f[F_DH], DW = f[F_DW], WP = f[F_WP];
    const int64_t O16 = f[F_O16], T = KH * KW;
    const int anyls = (int)f[F_ANYLS];
    const __m512i oo = _mm512_set1_epi32((int32_t)f[F_OO] + 128);
    const __m512i lo = _mm512_set1_epi32((int32_t)f[F_LO] + 128);
    const __m512i hi = _mm512_set1_epi32((int32_t)f[F_HI] + 128);
    const __m512i fold = _mm512_set1_epi32((int32_t)(f[F_IO] - 128));
    __m512i wt[T];
    const int fast = (int)f[F_FASTRQ];
    for (int64_t o = 0; o < OC; o += 16) {
        const vq q = vq_load(c->qp, O16, o);
        const vqf qf = vqf_load(c->qp, O16, o);
        const int64_t left = OC - o;
        const __mmask16 km = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        /* the taps' weights (as given, [T][OC]), their sums and the folded bias */
        __m512i tsum = _mm512_setzero_si512();
        for (int64_t t = 0; t < T; t++) {
            wt[t] = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(km, c->w + t * OC + o));
            tsum = _mm512_add_epi32(tsum, wt[t]);
        }
        __m512i bias = _mm512_mullo_epi32(tsum, fold);
        if (c->bias) bias = _mm512_add_epi32(bias, _mm512_maskz_loadu_epi32(km, c->bias + o));
        if (KH == 3 && KW == 3 && DH == 1 && DW == 1) {
            for (int64_t oy = 0; oy < OH; oy++) {
                const uint8_t *r0 = P + (oy * SH * WP) * OC + o;
                for (int64_t ox = 0; ox < OW; ox++) {
                    const uint8_t *p = r0 + ox * SW * OC;
                    __m512i acc = bias;
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            const __m512i u = _mm512_cvtepu8_epi32(
                                _mm_loadu_si128((const void *)(p + (ky * WP + kx) * OC)));
                            acc = _mm512_dpbusd_epi32(acc, u, wt[ky * 3 + kx]);
                        }
                    const __m512i r = fast ? vmbqm_fast(acc, &qf) : vmbqm(acc, &q, anyls);
                    store16(out + (oy * OW + ox) * OC + o, km, vout(r, oo, lo, hi));
                }
            }
            continue;
        }
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                __m512i acc = bias;
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const uint8_t *p =
                            P + ((oy * SH + ky * DH) * WP + ox * SW + kx * DW) * OC + o;
                        const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128((const void *)p));
                        acc = _mm512_dpbusd_epi32(acc, u, wt[ky * KW + kx]);
                    }
                const __m512i r = fast ? vmbqm_fast(acc, &qf) : vmbqm(acc, &q, anyls);
                store16(out + (oy * OW + ox) * OC + o, km, vout(r, oo, lo, hi));
            }
    }
}

/* 3x3 depthwise, dilation 1, with VBMI: one byte permute gathers a filter row's three taps
 * of 16 channels into 4-byte groups [u(kx=0), u(kx=1), u(kx=2), (any)], so one VPDPBUSD
 * does a whole filter row against weights [w0, w1, w2, 0] per channel: 3 instead of 9
 * multiply-adds per 16 outputs. Up to 56 channels the three taps lie within 128 bytes (one
 * VPERMT2B of two loads); beyond, three 16-byte loads fill one register for a VPERMB.
 * Four pixels at a time share the narrowing to bytes. */
HB_VBMI HB_INLINE __m512i dw3_row(const uint8_t *p, int64_t OC, __m512i idx, int small) {
    if (small)
        return _mm512_permutex2var_epi8(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
    __m512i a = _mm512_castsi128_si512(_mm_loadu_si128((const void *)p));
    a = _mm512_inserti32x4(a, _mm_loadu_si128((const void *)(p + OC)), 1);
    a = _mm512_inserti32x4(a, _mm_loadu_si128((const void *)(p + 2 * OC)), 2);
    return _mm512_permutexvar_epi8(idx, a);
}

/* the gather of three 16-byte pieces into 4-byte groups (byte 3 of a group: any) */
static const uint8_t dw3_widx[64] = {
    0,  16, 32, 0, 1,  17, 33, 0, 2,  18, 34, 0, 3,  19, 35, 0, 4,  20, 36, 0, 5,  21,
    37, 0,  6,  22, 38, 0, 7,  23, 39, 0, 8,  24, 40, 0, 9,  25, 41, 0, 10, 26, 42, 0,
    11, 27, 43, 0, 12, 28, 44, 0, 13, 29, 45, 0, 14, 30, 46, 0, 15, 31, 47, 0};

HB_VBMI HB_INLINE void dw3_block(const uint8_t *P, const opctx *c, uint8_t *out, int64_t o,
                                 __m512i idx, const int small) {
    const int64_t *f = c->f;
    const int64_t OH = f[F_OH], OW = f[F_OW], OC = f[F_OC], SH = f[F_SH], SW = f[F_SW];
    const int64_t WP = f[F_WP], O16 = f[F_O16];
    const int anyls = (int)f[F_ANYLS], fast = (int)f[F_FASTRQ];
    const vq q = vq_load(c->qp, O16, o);
    const vqf qf = vqf_load(c->qp, O16, o);
    const vnarrow nw = vnarrow_make(f);
    const int64_t left = OC - o;
    /* the weights in the same groups ([T][OC] as given: a row's three taps through the
     * 16-stride gather, byte 3 of each group zero), their sums and the folded bias */
    const __mmask16 km = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
    const __m512i widx = _mm512_loadu_si512(dw3_widx);
    __m512i wr[3];
    for (int ky = 0; ky < 3; ky++) {
        const int8_t *w = c->w + 3 * ky * OC + o;
        __m512i a = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(km, w));
        a = _mm512_inserti32x4(a, _mm_maskz_loadu_epi8(km, w + OC), 1);
        a = _mm512_inserti32x4(a, _mm_maskz_loadu_epi8(km, w + 2 * OC), 2);
        wr[ky] = _mm512_maskz_permutexvar_epi8(0x7777777777777777ull, widx, a);
    }
    const __m512i w0 = wr[0], w1 = wr[1], w2 = wr[2];
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i ts = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, w0);
    ts = _mm512_dpbusd_epi32(ts, ones, w1);
    ts = _mm512_dpbusd_epi32(ts, ones, w2);
    __m512i bias = _mm512_mullo_epi32(ts, _mm512_set1_epi32((int32_t)(f[F_IO] - 128)));
    if (c->bias) bias = _mm512_add_epi32(bias, _mm512_maskz_loadu_epi32(km, c->bias + o));
    const int64_t rstep = WP * OC, xstep = SW * OC, M = OH * OW;
    /* pixels in groups of four along the whole output (rows need not be multiples of 4) */
    int64_t oy = 0, ox = 0;
    for (int64_t m = 0; m < M; m += 4) {
        const int np = M - m < 4 ? (int)(M - m) : 4;
        __m512i r[4];
        for (int k = 0; k < 4; k++) {
            const uint8_t *p = P + (oy * SH * WP) * OC + o + ox * xstep;
            __m512i acc = _mm512_dpbusd_epi32(bias, dw3_row(p, OC, idx, small), w0);
            acc = _mm512_dpbusd_epi32(acc, dw3_row(p + rstep, OC, idx, small), w1);
            acc = _mm512_dpbusd_epi32(acc, dw3_row(p + 2 * rstep, OC, idx, small), w2);
            r[k] = fast ? vmbqm_fast(acc, &qf) : vmbqm(acc, &q, anyls);
            if (k + 1 < np && ++ox == OW) {
                ox = 0;
                oy++;
            }
        }
        if (np == 4 && ++ox == OW) {
            ox = 0;
            oy++;
        }
        const __m512i v = vnarrow4(r[0], r[1], r[2], r[3], &nw);
        const int64_t n16 = left < 16 ? left : 16; /* this block's bytes of a pixel */
        for (int k = 0; k < np; k++) store_piece(out + (m + k) * OC + o, v, k, 16, n16);
    }
}

HB_VBMI static void dw3_vbmi(const uint8_t *P, const opctx *c, uint8_t *out) {
    const int64_t OC = c->f[F_OC];
    const int small = OC <= 56;
    uint8_t idxb[64];
    for (int b = 0; b < 64; b++) {
        const int ch = b / 4, j = b % 4;
        idxb[b] = (uint8_t)(j < 3 ? j * (small ? OC : 16) + ch : 0);
    }
    const __m512i idx = _mm512_loadu_si512(idxb);
    for (int64_t o = 0; o < OC; o += 16) {
        if (small)
            dw3_block(P, c, out, o, idx, 1);
        else
            dw3_block(P, c, out, o, idx, 0);
    }
}

/* One of ADD's three MultiplyByQuantizedMultiplier, uniform over lanes, by the cheapest
 * exact route: mode 2 for (2^30, shift 0) — the larger input's multiplier, 1/2 exactly —
 * where SaturatingRoundingDoublingHighMul(x, 2^30) = floor((x + 1) / 2); mode 1 (merged
 * rounding) for right shifts; mode 0 TFLM's steps. */
typedef struct {
    int mode, anyls;
    vq q;
    vqf qf;
} addq;

HB_VNNI HB_INLINE addq addq_make(int32_t m, int32_t sh) {
    addq a;
    const int32_t l = sh > 0 ? sh : 0, r = sh > 0 ? 0 : -sh;
    const int32_t mask = (int32_t)(((int64_t)1 << r) - 1);
    a.anyls = l > 0;
    a.mode = (m == (1 << 30) && sh == 0) ? 2 : (sh <= -1 ? 1 : 0);
    a.q.m = _mm512_set1_epi32(m);
    a.q.mo = _mm512_srli_epi64(a.q.m, 32);
    a.q.ls = _mm512_set1_epi32(l);
    a.q.rs = _mm512_set1_epi32(r);
    a.q.mask = _mm512_set1_epi32(mask);
    a.q.thr = _mm512_set1_epi32(mask >> 1);
    a.qf.m = a.q.m;
    a.qf.mo = a.q.mo;
    a.qf.rsm1 = _mm512_set1_epi32(r > 0 ? r - 1 : 0);
    a.qf.ae = _mm512_set1_epi64(((int64_t)1 << 30) + ((int64_t)1 << (30 + (r > 0 ? r : 1))));
    a.qf.ao = a.qf.ae;
    return a;
}

HB_VNNI HB_INLINE __m512i addq_apply(__m512i x, const addq *a) {
    if (a->mode == 2) return _mm512_srai_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(1)), 1);
    if (a->mode == 1) return vmbqm_fast(x, &a->qf);
    return vmbqm(x, &a->q, a->anyls);
}

HB_VNNI static void add_vnni(const uint8_t *a, const uint8_t *b, const int64_t *f,
                             uint8_t *out) {
    const int64_t L = f[F_OUT_SIZE];
    const int32_t ls = (int32_t)f[F_LSH];
    const addq q1 = addq_make((int32_t)f[F_M1], (int32_t)f[F_S1]);
    const addq q2 = addq_make((int32_t)f[F_M2], (int32_t)f[F_S2]);
    const addq q3 = addq_make((int32_t)f[F_MO], (int32_t)f[F_SO]);
    const __m512i off1 = _mm512_set1_epi32((int32_t)f[F_IO] - 128);
    const __m512i off2 = _mm512_set1_epi32((int32_t)f[F_IO2] - 128);
    const __m512i oo = _mm512_set1_epi32((int32_t)f[F_OO] + 128);
    const __m512i lo = _mm512_set1_epi32((int32_t)f[F_LO] + 128);
    const __m512i hi = _mm512_set1_epi32((int32_t)f[F_HI] + 128);
    const __m128i lsv = _mm_cvtsi32_si128(ls);
    for (int64_t i = 0; i < L; i += 16) {
        const int64_t left = L - i;
        const __mmask16 km = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        __m512i x1 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(km, a + i));
        __m512i x2 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(km, b + i));
        x1 = _mm512_sll_epi32(_mm512_add_epi32(x1, off1), lsv);
        x2 = _mm512_sll_epi32(_mm512_add_epi32(x2, off2), lsv);
        const __m512i r = _mm512_add_epi32(addq_apply(x1, &q1), addq_apply(x2, &q2));
        store16(out + i, km, vout(addq_apply(r, &q3), oo, lo, hi));
    }
}

HB_VNNI static void hb_mean_vnni(const uint8_t *x, const int64_t *f, uint32_t *acc,
                                 uint8_t *out) {
    const int64_t HW = f[F_H] * f[F_W], C = f[F_C];
    const int64_t zp = f[F_ZP], count = f[F_COUNT], oo = f[F_OO];
    const int64_t off = 128 * HW + zp * count; /* sum - off: hb_mean's int64 sum */
    const int32_t shift = (int32_t)f[F_S1];
    const int64_t bound = 255 * HW + (off < 0 ? -off : off);
    if (shift > 0 || HW > ((int64_t)1 << 23) || bound >= ((int64_t)1 << 31)) {
        hb_mean(x, f, acc, out);
        return;
    }
    const int rs = -shift;
    const __m512i m = _mm512_set1_epi64(f[F_M1]);
    const __m512i offv = _mm512_set1_epi64(off);
    const __m512i nudge = _mm512_set1_epi64((int64_t)1 << 30);
    const __m512i imax = _mm512_set1_epi64(INT32_MAX);
    const __m512i half = _mm512_set1_epi64(((int64_t)1 << rs) >> 1);
    const __m512i one = _mm512_set1_epi64(rs > 0 ? 1 : 0);
    const __m512i oov = _mm512_set1_epi64(oo);
    const __m512i lo = _mm512_set1_epi64(-128), hi = _mm512_set1_epi64(127);
    const __m512i b128 = _mm512_set1_epi64(128);
    for (int64_t c = 0; c < C; c += 16) {
        const __mmask16 km = (__mmask16)(C - c >= 16 ? 0xFFFF : (1u << (C - c)) - 1);
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        int64_t i = 0;
        for (; i + 2 <= HW; i += 2) {
            s0 = _mm512_add_epi32(s0,
                                  _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(km, x + i * C + c)));
            s1 = _mm512_add_epi32(
                s1, _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(km, x + (i + 1) * C + c)));
        }
        if (i < HW)
            s0 = _mm512_add_epi32(s0,
                                  _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(km, x + i * C + c)));
        const __m512i s = _mm512_add_epi32(s0, s1);
        __m128i res[2];
        for (int half8 = 0; half8 < 2; half8++) {
            const __m256i s8 = half8 ? _mm512_extracti64x4_epi64(s, 1) : _mm512_castsi512_si256(s);
            const __m512i v = _mm512_sub_epi64(_mm512_cvtepu32_epi64(s8), offv);
            __m512i h = _mm512_srai_epi64(_mm512_add_epi64(_mm512_mul_epi32(v, m), nudge), 31);
            h = _mm512_min_epi64(h, imax);
            h = _mm512_add_epi64(h, half);
            h = _mm512_mask_sub_epi64(h, _mm512_cmplt_epi64_mask(h, half), h, one);
            h = _mm512_sra_epi64(h, _mm_cvtsi32_si128(rs));
            h = _mm512_min_epi64(_mm512_max_epi64(_mm512_add_epi64(h, oov), lo), hi);
            res[half8] = _mm512_cvtepi64_epi8(_mm512_add_epi64(h, b128));
        }
        const __m128i r = _mm_unpacklo_epi64(res[0], res[1]);
        _mm_mask_storeu_epi8(out + c, km, r);
    }
}

/* MEAN over H x W, channel-contiguous (hb_mean's bytes): 16 channels of uint32 sums at a
 * time, then mbqm64 on 8 int64 lanes when every value it sees fits int32 (no left shift;
 * |sum| < 2^31, so x * m cannot wrap int64); otherwise the scalar code. */
void hb_mean_avx512(const uint8_t *x, const int64_t *f, uint32_t *acc, uint8_t *out) {
    hb_mean_vnni(x, f, acc, out);
}

/* --- entry points ------------------------------------------------------------------------ */
HB_VNNI static void gemm_avx512(const hb_gemm *g) {
    const int64_t *f = g->c.f;
    opctx c = g->c;
    const int64_t M = f[F_OH] * f[F_OW];
    if (f[F_IMPLICIT]) { /* packed, straight from the padded input */
        hb_pad_input(g->in, f, (uint8_t)(128 - f[F_IO]), g->pad);
        for (int64_t o = 0; o < f[F_O16] && c.sums; o++)
            c.beff[o] = o < f[F_OC] ? fold_bias(&c, o, g->rowsum[o]) : 0;
        gemm_vnni_x(g->pad, M, &c, g->koff, g->out);
        return;
    }
    const uint8_t *A = g->in;
    int64_t lda = f[F_K];
    if (f[F_IM2COL]) {
        if (g->cols_kept) {
            /* rows kept from set 0 */
        } else if (f[F_IM2COL] == 2) {
            hb_pad_input(g->in, f, (uint8_t)(128 - f[F_IO]), g->pad);
            im2col_padded_vnni(g->pad, f, g->cols);
        } else {
            im2col_vnni(g->in, f, (uint8_t)(128 - f[F_IO]), g->cols);
        }
        A = g->cols;
        lda = f[F_K4];
    }
    if (f[F_DIRECT]) {
        direct_vnni(A, lda, M, &c, g->out);
        return;
    }
    for (int64_t o = 0; o < f[F_O16] && c.sums; o++)
        c.beff[o] = o < f[F_OC] ? fold_bias(&c, o, g->rowsum[o]) : 0;
    gemm_vnni(A, lda, M, &c, g->out);
}

static void dw_avx512(const uint8_t *P, const opctx *c, uint32_t *acc, uint8_t *out) {
    (void)acc;
    dw_vnni(P, c, out);
}

static void dw_avx512_vbmi(const uint8_t *P, const opctx *c, uint32_t *acc, uint8_t *out) {
    const int64_t *f = c->f;
    (void)acc;
    if (f[F_KH] == 3 && f[F_KW] == 3 && f[F_DH] == 1 && f[F_DW] == 1)
        dw3_vbmi(P, c, out);
    else
        dw_vnni(P, c, out);
}

/* VPDPBUSD on 512 bits (64 products of u8 x s8): the peak */
#define KEEP_ZMM(a, b) __asm__ volatile("" : "+v"(a), "+v"(b))
#define SUM16(c) _mm512_reduce_add_epi32(c)
#define DPBUSD512_OP(c) _mm512_dpbusd_epi32(c, a, b)
HB_VNNI static uint64_t peak_avx512(uint64_t n) {
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
    HB_PEAK_BODY(__m512i, _mm512_set1_epi32, DPBUSD512_OP, SUM16, KEEP_ZMM)
    return n * 12 * 64;
}

const hb_isa hb_isa_avx512vnni = {"avx512vnni", pack_gemm_vnni, gemm_avx512, dw_avx512,
                                  add_vnni,     maxpool_vnni,   peak_avx512};
const hb_isa hb_isa_avx512vnni_vbmi = {"avx512vnni+vbmi", pack_gemm_vnni, gemm_avx512,
                                       dw_avx512_vbmi,    add_vnni,       maxpool_vnni,
                                       peak_avx512};
#else
typedef int hb_no_avx512; /* not an x86-64 build: nothing here */
#endif
