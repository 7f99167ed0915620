/* hilbench native NPU engine: a whole int8 network per call, bit-exact with TFLM.
 *
 * The Python side (hilbench/npu/native/__init__.py) lowers a Graph once into a flat op
 * list (int64 records, fields F_* below), per-channel requantization tables (int32) and
 * an arena layout; forward() then runs every op for S weight sets x N inputs in one call.
 * Weights and biases are read from the caller's arrays on every call (nothing about them
 * is cached between calls, so writes into them are always seen).
 *
 * Activations live in the arena as u = x + 128 (uint8), so GEMMs can use VPDPBUSD
 * (u8 x s8 -> s32).  With io the TFLM input offset (-zero point):
 *     sum_k w (x + io) = sum_k w u + (io - 128) sum_k w,
 * the second term is folded into the bias (row sums of the weights, computed per call).
 * Padded taps hold u = zp + 128, i.e. x + io = 0: they contribute nothing, as in TFLM.
 * All accumulation is uint32 arithmetic (mod 2^32), which is what TFLM's int32
 * accumulator computes; it never wraps for K * 255 * 128 < 2^31 (K < 65,793; checked on
 * the Python side).  Requantization is TFLM's MultiplyByQuantizedMultiplier (left shift
 * with int32 wrap, SaturatingRoundingDoublingHighMul, RoundingDivideByPOT), per channel.
 *
 * GEMMs run one of two ways, chosen per layer at lowering: "packed" (weights repacked per
 * call into 16-channel x 4-byte VNNI panels, activations broadcast; for layers with many
 * output pixels and small weights) or "direct" (dot products along K on the weights as
 * they are, 4 pixels x 4 channels per tile, horizontal sums at the end; for layers with
 * few pixels, where repacking would cost more than the layer).
 *
 * Two code paths, chosen at run time: AVX-512 VNNI (functions compiled with a target
 * attribute; used when the CPU and OS support it) and portable scalar C.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if !defined(HB_NO_SIMD) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HB_X86 1
#include <immintrin.h>
#define HB_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define HB_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))
#else
#define HB_X86 0
#endif

#define HB_INLINE static inline __attribute__((always_inline))

/* --- op records (mirrored by FIELDS in __init__.py, checked at import) ------------------ */
#define FIELD_LIST                                                                          \
    X(KIND) X(IN) X(IN2) X(OUT) X(H) X(W) X(C) X(OH) X(OW) X(OC) X(KH) X(KW) X(SH) X(SW)   \
    X(DH) X(DW) X(PT) X(PL) X(K) X(K4) X(O16) X(WSLOT) X(BSLOT) X(PK_OFF) X(PK_SIZE)        \
    X(RS_OFF) X(DIRECT) X(QP_OFF) X(IO) X(OO) X(LO) X(HI) X(DM) X(ANYLS)     \
    X(IM2COL) X(PAD_OFF) X(HP) X(WP) X(OUT_SIZE) X(M1) X(S1) X(M2) X(S2) X(MO) X(SO)         \
    X(IO2) X(LSH) X(COUNT) X(ZP) X(COLS) X(KEEP) X(FASTRQ) X(BEFF_OFF) X(IMPLICIT) X(WX_OFF)

enum {
#define X(n) F_##n,
    FIELD_LIST
#undef X
        NF
};

static const char *field_names[] = {
#define X(n) #n,
    FIELD_LIST
#undef X
};

enum { OP_NOP = 0, OP_GEMM = 1, OP_DW = 2, OP_ADD = 3, OP_MAXPOOL = 4, OP_AVGPOOL = 5,
       OP_MEAN = 6 };

/* arena-global offsets kept in the prog header (first record) */
enum { G_NOPS = 0, G_IN_OFF, G_IN_SIZE, G_OUT_OFF, G_OUT_SIZE, G_COL_OFF, G_BSCR_OFF, G_FIRST,
       G_ACC_OFF, G_KOFF_OFF };

/* --- scalar fixed-point (TFLM reference) -------------------------------------------------- */
static inline int32_t rdbp(int32_t x, int32_t rs) {
    const int32_t mask = (int32_t)(((int64_t)1 << rs) - 1);
    const int32_t rem = x & mask;
    const int32_t thr = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> rs) + (rem > thr ? 1 : 0);
}

/* MultiplyByQuantizedMultiplier of an int32 x; shift > 0 is a left shift (int32 wrap). */
static inline int32_t mbqm(int32_t x, int32_t m, int32_t shift) {
    const int32_t ls = shift > 0 ? shift : 0, rs = shift > 0 ? 0 : -shift;
    const int32_t xl = (int32_t)((uint32_t)x << ls);
    int64_t h = ((int64_t)xl * (int64_t)m + ((int64_t)1 << 30)) >> 31;
    if (h > INT32_MAX) h = INT32_MAX;
    return rdbp((int32_t)h, rs);
}

/* The same on an int64 x exactly as hilbench.npu.quant's numpy code does it (used by MEAN,
 * whose sums are int64 there): no wrap unless there is a left shift. */
static inline int32_t mbqm64(int64_t x, int64_t m, int32_t shift) {
    const int32_t ls = shift > 0 ? shift : 0, rs = shift > 0 ? 0 : -shift;
    if (ls) x = (int64_t)(int32_t)(uint32_t)((uint64_t)x << ls);
    int64_t h = (int64_t)((uint64_t)(x * m) + ((uint64_t)1 << 30)) >> 31;
    if (h > INT32_MAX) h = INT32_MAX;
    const int64_t half = ((int64_t)1 << rs) >> 1;
    h += half;
    h -= (h < half) && (rs > 0);
    h >>= rs;
    return (int32_t)h;
}

static inline int32_t clampi(int32_t v, int32_t lo, int32_t hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

/* --- per-op context ------------------------------------------------------------------------ */
typedef struct {
    const int64_t *f;      /* the op record */
    const int32_t *qp;     /* m[O16], shift[O16], ls[O16], rs[O16], mask[O16], thr[O16] */
    int32_t *beff;         /* effective bias [O16] of this op and weight set */
    int sums;              /* 1: compute row sums and beff (first input of a set), 0: reuse */
    const int8_t *pk;      /* packed weights (packed GEMM) */
    const int8_t *w;       /* the weights as given: [O][K] (GEMM), [T][OC] (depthwise) */
    const int32_t *bias;   /* the bias as given [O], or NULL */
} opctx;

/* effective bias of one channel: bias + (io - 128) * rowsum, int32 wrap */
static inline int32_t fold_bias(const opctx *c, int64_t o, int32_t rowsum) {
    const uint32_t b = c->bias ? (uint32_t)c->bias[o] : 0u;
    return (int32_t)(b + (uint32_t)(int32_t)(c->f[F_IO] - 128) * (uint32_t)rowsum);
}

/* requantize one int32 accumulator (bias already added) to the stored u8 = int8 + 128 */
static inline uint8_t rq_scalar(uint32_t v, const int32_t *qp, int64_t o16, int64_t o,
                                int32_t oo, int32_t lo, int32_t hi) {
    const int32_t h = mbqm((int32_t)v, qp[o], qp[o16 + o]);
    return (uint8_t)(clampi(h + oo, lo, hi) + 128);
}

/* --- packing ------------------------------------------------------------------------------- */
/* --- im2col and padding ----------------------------------------------------------------- */
/* input (H, W, C) u8 -> rows (OH*OW, K4): taps (ky, kx, c), padded taps = pad, tail 0.
 * One body, two instances: byte copies through COPY/FILL (libc in the portable one,
 * masked AVX-512 moves in the VNNI one: most runs here are a few bytes long). */
#define IM2COL_BODY(COPY, FILL)                                                             \
    const int64_t H = f[F_H], W = f[F_W], C = f[F_C], OH = f[F_OH], OW = f[F_OW];          \
    const int64_t KH = f[F_KH], KW = f[F_KW], SH = f[F_SH], SW = f[F_SW];                  \
    const int64_t DH = f[F_DH], DW = f[F_DW], PT = f[F_PT], PL = f[F_PL];                  \
    const int64_t K = f[F_K], K4 = f[F_K4];                                                \
    uint8_t *d = cols;                                                                      \
    for (int64_t oy = 0; oy < OH; oy++) {                                                   \
        for (int64_t ox = 0; ox < OW; ox++) {                                               \
            for (int64_t ky = 0; ky < KH; ky++) {                                           \
                const int64_t iy = oy * SH - PT + ky * DH;                                  \
                if (iy < 0 || iy >= H) {                                                    \
                    FILL(d, pad, KW * C);                                                   \
                    d += KW * C;                                                            \
                    continue;                                                               \
                }                                                                           \
                const int64_t ix0 = ox * SW - PL;                                           \
                if (DW == 1 && ix0 >= 0 && ix0 + KW <= W) {                                 \
                    COPY(d, x + (iy * W + ix0) * C, KW * C);                                \
                    d += KW * C;                                                            \
                    continue;                                                               \
                }                                                                           \
                for (int64_t kx = 0; kx < KW; kx++) {                                       \
                    const int64_t ix = ix0 + kx * DW;                                       \
                    if (ix < 0 || ix >= W)                                                  \
                        FILL(d, pad, C);                                                    \
                    else                                                                    \
                        COPY(d, x + (iy * W + ix) * C, C);                                  \
                    d += C;                                                                 \
                }                                                                           \
            }                                                                               \
            for (int64_t k = K; k < K4; k++) *d++ = 0;                                      \
        }                                                                                   \
    }

#define COPY_LIBC(d, s, n) memcpy((d), (s), (size_t)(n))
#define FILL_LIBC(d, v, n) memset((d), (v), (size_t)(n))

static void im2col(const uint8_t *x, const int64_t *f, uint8_t pad, uint8_t *cols) {
    IM2COL_BODY(COPY_LIBC, FILL_LIBC)
}

/* input (H, W, C) u8 -> padded (HP, WP, C*DM) with pad = zp + 128, channels repeated DM
 * times (depthwise output channel ic*DM + m reads input channel ic; DM = 1 for convs). */
static void pad_input(const uint8_t *x, const int64_t *f, uint8_t pad, uint8_t *p) {
    const int64_t H = f[F_H], W = f[F_W], C = f[F_C], HP = f[F_HP], WP = f[F_WP],
                  PT = f[F_PT], PL = f[F_PL];
    const int64_t DM = f[F_KIND] == OP_DW ? f[F_DM] : 1, OC = C * DM;
    const int64_t row = WP * OC;
    const int64_t y1 = H + PT < HP ? H + PT : HP;   /* rows [PT, y1) hold input */
    const int64_t wn = W + PL < WP ? W : WP - PL;   /* input pixels per row that fit */
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
                    for (int64_t m = 0; m < DM; m++) d[(PL + xx) * OC + c * DM + m] = sx[xx * C + c];
        }
        memset(d + (PL + wn) * OC, pad, (size_t)((WP - PL - wn) * OC));
    }
    memset(p + y1 * row, pad, (size_t)((HP - y1) * row));
}

/* --- scalar kernels ------------------------------------------------------------------------ */
/* GEMM, portable: every layer direct, on the weights as given ([O][K]); the inner loop is
 * a contiguous dot product the compiler vectorizes for the baseline ISA (SSE2, NEON). */
static void direct_scalar(const uint8_t *A, int64_t lda, int64_t M, const opctx *c,
                          uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], K = f[F_K], O16 = f[F_O16];
    const int32_t oo = (int32_t)f[F_OO], lo = (int32_t)f[F_LO], hi = (int32_t)f[F_HI];
    for (int64_t o = 0; o < O && c->sums; o++) {
        int32_t rs = 0;
        for (int64_t k = 0; k < K; k++) rs += c->w[o * K + k];
        c->beff[o] = fold_bias(c, o, rs);
    }
    for (int64_t i = 0; i < M; i++) {
        const uint8_t *a = A + i * lda;
        for (int64_t o = 0; o < O; o++) {
            const int8_t *w = c->w + o * K;
            uint32_t acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (uint32_t)((int32_t)a[k] * (int32_t)w[k]);
            out[i * O + o] = rq_scalar(acc + (uint32_t)c->beff[o], c->qp, O16, o, oo, lo, hi);
        }
    }
}

static void dw_scalar(const uint8_t *P, const opctx *c, uint32_t *acc, uint8_t *out) {
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
        for (int64_t ox = 0; ox < OW; ox++) {
            for (int64_t o = 0; o < OC; o++) acc[o] = (uint32_t)c->beff[o];
            for (int64_t ky = 0; ky < KH; ky++)
                for (int64_t kx = 0; kx < KW; kx++) {
                    const uint8_t *u = P + ((oy * SH + ky * DH) * WP + ox * SW + kx * DW) * OC;
                    const int8_t *wt = w + (ky * KW + kx) * OC;
                    for (int64_t o = 0; o < OC; o++)
                        acc[o] += (uint32_t)((int32_t)u[o] * (int32_t)wt[o]);
                }
            for (int64_t o = 0; o < OC; o++)
                out[(oy * OW + ox) * OC + o] = rq_scalar(acc[o], c->qp, O16, o, oo, lo, hi);
        }
}

static void add_scalar(const uint8_t *a, const uint8_t *b, const int64_t *f, uint8_t *out) {
    const int64_t L = f[F_OUT_SIZE];
    const int32_t io1 = (int32_t)f[F_IO], io2 = (int32_t)f[F_IO2], ls = (int32_t)f[F_LSH];
    const int32_t m1 = (int32_t)f[F_M1], s1 = (int32_t)f[F_S1], m2 = (int32_t)f[F_M2],
                  s2 = (int32_t)f[F_S2], mo = (int32_t)f[F_MO], so = (int32_t)f[F_SO];
    const int32_t oo = (int32_t)f[F_OO], lo = (int32_t)f[F_LO], hi = (int32_t)f[F_HI];
    for (int64_t i = 0; i < L; i++) {
        const int32_t x1 = ((int32_t)a[i] - 128 + io1) * (1 << ls);
        const int32_t x2 = ((int32_t)b[i] - 128 + io2) * (1 << ls);
        const int32_t r = mbqm(mbqm(x1, m1, s1) + mbqm(x2, m2, s2), mo, so);
        out[i] = (uint8_t)(clampi(r + oo, lo, hi) + 128);
    }
}

static void maxpool(const uint8_t *x, const int64_t *f, uint8_t *out) {
    const int64_t H = f[F_H], W = f[F_W], C = f[F_C], OH = f[F_OH], OW = f[F_OW];
    const int64_t KH = f[F_KH], KW = f[F_KW], SH = f[F_SH], SW = f[F_SW], PT = f[F_PT],
                  PL = f[F_PL];
    const int32_t lo = (int32_t)f[F_LO] + 128, hi = (int32_t)f[F_HI] + 128;
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++) {
            uint8_t *d = out + (oy * OW + ox) * C;
            memset(d, 0, (size_t)C);
            for (int64_t ky = 0; ky < KH; ky++) {
                const int64_t iy = oy * SH - PT + ky;
                if (iy < 0 || iy >= H) continue;
                for (int64_t kx = 0; kx < KW; kx++) {
                    const int64_t ix = ox * SW - PL + kx;
                    if (ix < 0 || ix >= W) continue;
                    const uint8_t *s = x + (iy * W + ix) * C;
                    for (int64_t c = 0; c < C; c++) d[c] = s[c] > d[c] ? s[c] : d[c];
                }
            }
            for (int64_t c = 0; c < C; c++) d[c] = (uint8_t)clampi(d[c], lo, hi);
        }
}

static void avgpool(const uint8_t *x, const int64_t *f, uint8_t *out) {
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
static void mean_op(const uint8_t *x, const int64_t *f, uint32_t *acc, uint8_t *out) {
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

/* --- AVX-512 VNNI kernels ---------------------------------------------------------------- */
#if HB_X86
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

#define MR_MAX 16
HB_VNNI HB_INLINE void tile_epilogue(__m512i acc[][4], const opctx *c, int64_t ob, int64_t O,
                                     uint8_t *out, const int mr, const int nr, int anyls) {
    const int64_t *f = c->f;
    const int64_t O16 = f[F_O16];
    const __m512i oo = _mm512_set1_epi32((int32_t)f[F_OO] + 128);
    const __m512i lo = _mm512_set1_epi32((int32_t)f[F_LO] + 128);
    const __m512i hi = _mm512_set1_epi32((int32_t)f[F_HI] + 128);
    for (int j = 0; j < nr; j++) {
        const int64_t o = (ob + j) * 16;
        const int64_t left = O - o;
        const __mmask16 km = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        if (f[F_FASTRQ]) {
            const vqf q = vqf_load(c->qp, O16, o);
            for (int i = 0; i < mr; i++) {
                const __m512i r = vmbqm_fast(acc[i][j], &q);
                _mm_mask_storeu_epi8(out + i * O + o, km, vout(r, oo, lo, hi));
            }
            continue;
        }
        const vq q = vq_load(c->qp, O16, o);
        for (int i = 0; i < mr; i++) {
            const __m512i r = vmbqm(acc[i][j], &q, anyls);
            _mm_mask_storeu_epi8(out + i * O + o, km, vout(r, oo, lo, hi));
        }
    }
}

/* A tile's accumulators start from the effective bias (int32 wrap either way). */
HB_VNNI HB_INLINE void tile_start(__m512i acc[][4], const opctx *c, int64_t ob, const int mr,
                                  const int nr) {
    for (int j = 0; j < nr; j++) {
        const __m512i b = _mm512_loadu_si512(c->beff + (ob + j) * 16);
        for (int i = 0; i < mr; i++) acc[i][j] = b;
    }
}

HB_VNNI HB_INLINE void gemm_tile(const uint8_t *A, int64_t lda, int64_t K4, const int8_t *B,
                                 const opctx *c, int64_t ob, int64_t O, uint8_t *out,
                                 const int mr, const int nr, int anyls) {
    __m512i acc[MR_MAX][4];
    tile_start(acc, c, ob, mr, nr);
    const int8_t *b0 = B + ob * K4 * 16;
    const int64_t bstride = K4 * 16;
    const int64_t steps = K4 / 4;
    for (int64_t k = 0; k < steps; k++) {
        __m512i w[4];
        for (int j = 0; j < nr; j++) w[j] = _mm512_loadu_si512(b0 + j * bstride + k * 64);
        for (int i = 0; i < mr; i++) {
            int32_t av;
            memcpy(&av, A + i * lda + k * 4, 4);
            const __m512i a = _mm512_set1_epi32(av);
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, w[j]);
        }
    }
    tile_epilogue(acc, c, ob, O, out, mr, nr, anyls);
}

/* The same on the padded input itself ("implicit" im2col): pixel i's 4-byte group k is at
 * rows[i] + koff[k]; each filter row's KW*C bytes are padded to a multiple of 4 in the
 * packed weights (zeros), so a group never mixes two filter rows. */
HB_VNNI HB_INLINE void gemm_tile_x(const uint8_t *const *rows, const int32_t *koff, int64_t K4,
                                   const int8_t *B, const opctx *c, int64_t ob, int64_t O,
                                   uint8_t *out, const int mr, const int nr, int anyls) {
    __m512i acc[MR_MAX][4];
    tile_start(acc, c, ob, mr, nr);
    const int8_t *b0 = B + ob * K4 * 16;
    const int64_t bstride = K4 * 16;
    const int64_t steps = K4 / 4;
    for (int64_t k = 0; k < steps; k++) {
        __m512i w[4];
        for (int j = 0; j < nr; j++) w[j] = _mm512_loadu_si512(b0 + j * bstride + k * 64);
        const int32_t off = koff[k];
        for (int i = 0; i < mr; i++) {
            int32_t av;
            memcpy(&av, rows[i] + off, 4);
            const __m512i a = _mm512_set1_epi32(av);
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, w[j]);
        }
    }
    tile_epilogue(acc, c, ob, O, out, mr, nr, anyls);
}

#define TILE(MR, NR) gemm_tile(A + m0 * lda, lda, K4, c->pk, c, ob, O, out + m0 * O, MR, NR, anyls)
/* rows in tiles of MR (as many accumulators as registers allow: MR * NR <= 16), then 4, 1 */
#define ROWS(MR, NR)                                                                        \
    do {                                                                                    \
        int64_t m0 = 0;                                                                     \
        for (; m0 + (MR) <= M; m0 += (MR)) TILE(MR, NR);                                    \
        for (; m0 + 4 <= M; m0 += 4) TILE(4, NR);                                           \
        for (; m0 < M; m0++) TILE(1, NR);                                                   \
    } while (0)

HB_VNNI static void gemm_vnni(const uint8_t *A, int64_t lda, int64_t M, const opctx *c,
                              uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], K4 = f[F_K4], nb = f[F_O16] / 16;
    const int anyls = (int)f[F_ANYLS];
    for (int64_t ob = 0; ob < nb; ob += 4) {
        const int64_t nr = nb - ob < 4 ? nb - ob : 4;
        switch (nr) {
        case 4: ROWS(4, 4); break;
        case 3: ROWS(5, 3); break;
        case 2: ROWS(8, 2); break;
        default: ROWS(16, 1); break;
        }
    }
}
#undef TILE

#define TILE(MR, NR)                                                                        \
    do {                                                                                    \
        const uint8_t *rows[MR_MAX];                                                        \
        for (int i = 0; i < (MR); i++) {                                                    \
            const int64_t m = m0 + i, oy = m / OW, ox = m % OW;                             \
            rows[i] = P + (oy * SH * WP + ox * SW) * C;                                     \
        }                                                                                   \
        gemm_tile_x(rows, koff, K4, c->pk, c, ob, O, out + m0 * O, MR, NR, anyls);          \
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
    for (int64_t ob = 0; ob < nb; ob += 4) {
        const int64_t nr = nb - ob < 4 ? nb - ob : 4;
        switch (nr) {
        case 4: ROWS(4, 4); break;
        case 3: ROWS(5, 3); break;
        case 2: ROWS(8, 2); break;
        default: ROWS(16, 1); break;
        }
    }
}
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
                                      int64_t K, const int mr, const int nr) {
    __m512i acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_si512();
    int64_t k = 0;
    for (; k + 64 <= K; k += 64) {
        __m512i w[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512()};
        for (int j = 0; j < nr; j++) w[j] = _mm512_loadu_si512(W + j * K + k);
        for (int i = 0; i < mr; i++) {
            const __m512i a = _mm512_loadu_si512(A + i * lda + k);
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, w[j]);
        }
    }
    if (k < K) {
        const __mmask64 m = mask64(K - k);
        __m512i w[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512()};
        for (int j = 0; j < nr; j++) w[j] = _mm512_maskz_loadu_epi8(m, W + j * K + k);
        for (int i = 0; i < mr; i++) {
            const __m512i a = _mm512_maskz_loadu_epi8(m, A + i * lda + k);
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, w[j]);
        }
    }
    __m512i r[16];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) r[4 * j + i] = acc[i][j];
    return hsum16(r);
}

HB_VNNI static void direct_vnni(const uint8_t *A, int64_t lda, int64_t M, const opctx *c,
                                uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t O = f[F_OC], K = f[F_K], O16 = f[F_O16];
    const int anyls = (int)f[F_ANYLS];
    const __m512i oo = _mm512_set1_epi32((int32_t)f[F_OO] + 128);
    const __m512i lo = _mm512_set1_epi32((int32_t)f[F_LO] + 128);
    const __m512i hi = _mm512_set1_epi32((int32_t)f[F_HI] + 128);
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t o0 = 0; o0 < O; o0 += 4) {
        const int nr = O - o0 < 4 ? (int)(O - o0) : 4;
        const int8_t *W = c->w + o0 * K;
        for (int j = 0; j < nr && c->sums; j++) {
            __m512i rs = _mm512_setzero_si512();
            int64_t k = 0;
            for (; k + 64 <= K; k += 64)
                rs = _mm512_dpbusd_epi32(rs, ones, _mm512_loadu_si512(W + j * K + k));
            if (k < K)
                rs = _mm512_dpbusd_epi32(rs, ones,
                                         _mm512_maskz_loadu_epi8(mask64(K - k), W + j * K + k));
            c->beff[o0 + j] = fold_bias(c, o0 + j, _mm512_reduce_add_epi32(rs));
        }
        /* per-lane (channel o0 + lane % 4) requantization constants and bias */
        vq q;
        q.m = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + o0)));
        q.mo = _mm512_srli_epi64(q.m, 32);
        q.ls = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + 2 * O16 + o0)));
        q.rs = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + 3 * O16 + o0)));
        q.mask = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + 4 * O16 + o0)));
        q.thr = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->qp + 5 * O16 + o0)));
        const __m512i bias = _mm512_broadcast_i32x4(_mm_loadu_si128((const void *)(c->beff + o0)));
        for (int64_t m0 = 0; m0 < M; m0 += 4) {
            const int mr = M - m0 < 4 ? (int)(M - m0) : 4;
            __m512i r;
            const uint8_t *a = A + m0 * lda;
            if (mr == 4 && nr == 4)
                r = direct_tile(a, lda, W, K, 4, 4);
            else if (nr == 4)
                r = direct_tile(a, lda, W, K, mr, 4);
            else
                r = direct_tile(a, lda, W, K, mr, nr);
            r = vmbqm(_mm512_add_epi32(r, bias), &q, anyls);
            uint8_t tmp[16];
            _mm_storeu_si128((__m128i *)tmp, vout(r, oo, lo, hi));
            for (int i = 0; i < mr; i++) memcpy(out + (m0 + i) * O + o0, tmp + 4 * i, (size_t)nr);
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
                    _mm_mask_storeu_epi8(out + (oy * OW + ox) * OC + o, km,
                                         vout(r, oo, lo, hi));
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
                _mm_mask_storeu_epi8(out + (oy * OW + ox) * OC + o, km, vout(r, oo, lo, hi));
            }
    }
}

/* 3x3 depthwise, dilation 1, at most 56 channels (after the depth multiplier), with VBMI:
 * one VPERMT2B gathers a row's three taps of 16 channels into 4-byte groups
 * [u(kx=0), u(kx=1), u(kx=2), (any)], so one VPDPBUSD does a whole filter row against
 * weights [w0, w1, w2, 0] per channel: 3 instead of 9 multiply-adds per 16 outputs. */
HB_VBMI static void dw3_vbmi(const uint8_t *P, const opctx *c, uint8_t *out) {
    const int64_t *f = c->f;
    const int64_t OH = f[F_OH], OW = f[F_OW], OC = f[F_OC], SH = f[F_SH], SW = f[F_SW];
    const int64_t WP = f[F_WP], O16 = f[F_O16];
    const int anyls = (int)f[F_ANYLS], fast = (int)f[F_FASTRQ];
    const __m512i oo = _mm512_set1_epi32((int32_t)f[F_OO] + 128);
    const __m512i lo = _mm512_set1_epi32((int32_t)f[F_LO] + 128);
    const __m512i hi = _mm512_set1_epi32((int32_t)f[F_HI] + 128);
    uint8_t idxb[64];
    for (int b = 0; b < 64; b++) {
        const int ch = b / 4, j = b % 4;
        idxb[b] = (uint8_t)(j < 3 ? j * OC + ch : 0);
    }
    const __m512i idx = _mm512_loadu_si512(idxb);
    for (int64_t o = 0; o < OC; o += 16) {
        const vq q = vq_load(c->qp, O16, o);
        const vqf qf = vqf_load(c->qp, O16, o);
        const int64_t left = OC - o;
        const __mmask16 km = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        int8_t wb[3][64];
        int32_t bb[16];
        memset(wb, 0, sizeof wb);
        for (int ch = 0; ch < 16; ch++) {
            int32_t ts = 0;
            for (int t = 0; t < 9 && ch < left; t++) {
                const int8_t w = c->w[t * OC + o + ch];
                wb[t / 3][4 * ch + t % 3] = w;
                ts += w;
            }
            bb[ch] = ch < left ? fold_bias(c, o + ch, ts) : 0;
        }
        const __m512i w0 = _mm512_loadu_si512(wb[0]), w1 = _mm512_loadu_si512(wb[1]),
                      w2 = _mm512_loadu_si512(wb[2]);
        const __m512i bias = _mm512_loadu_si512(bb);
        for (int64_t oy = 0; oy < OH; oy++) {
            const uint8_t *r0 = P + (oy * SH * WP) * OC + o;
            for (int64_t ox = 0; ox < OW; ox++) {
                const uint8_t *p = r0 + ox * SW * OC;
                const uint8_t *p1 = p + WP * OC, *p2 = p + 2 * WP * OC;
                __m512i acc = _mm512_dpbusd_epi32(
                    bias, _mm512_permutex2var_epi8(_mm512_loadu_si512(p), idx,
                                                   _mm512_loadu_si512(p + 64)), w0);
                acc = _mm512_dpbusd_epi32(
                    acc, _mm512_permutex2var_epi8(_mm512_loadu_si512(p1), idx,
                                                  _mm512_loadu_si512(p1 + 64)), w1);
                acc = _mm512_dpbusd_epi32(
                    acc, _mm512_permutex2var_epi8(_mm512_loadu_si512(p2), idx,
                                                  _mm512_loadu_si512(p2 + 64)), w2);
                const __m512i r = fast ? vmbqm_fast(acc, &qf) : vmbqm(acc, &q, anyls);
                _mm_mask_storeu_epi8(out + (oy * OW + ox) * OC + o, km, vout(r, oo, lo, hi));
            }
        }
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
        _mm_mask_storeu_epi8(out + i, km, vout(addq_apply(r, &q3), oo, lo, hi));
    }
}
#endif

/* --- optional per-op timing (off unless enabled with profile(True)) ------------------- */
#include <time.h>
#define PROF_MAX 4096
static int prof_on = 0;
static double prof_ns[PROF_MAX];
static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* --- ISA selection ----------------------------------------------------------------------- */
static int cpu_has_vbmi(void) {
#if HB_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vbmi");
#else
    return 0;
#endif
}

static int cpu_has_vnni(void) {
#if HB_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}

/* --- the forward pass ---------------------------------------------------------------------- */
static void release_views(Py_buffer *v, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (v[i].obj) PyBuffer_Release(&v[i]);
}

/* --- ViewCache: the constants' buffers kept between calls -------------------------------
 * Acquiring a numpy array's buffer costs ~0.1 us, ~100 constants per forward. A plan keeps
 * one ViewCache; slot i holds a reference to the last array passed there and its buffer
 * (exported, so numpy will not resize or free it meanwhile), reused while the same array
 * object comes again. Its contents are read afresh on every call either way. */
typedef struct {
    PyObject_HEAD Py_ssize_t n;
    PyObject **objs;
    Py_buffer *views;
} ViewCache;

static void vc_clear_slot(ViewCache *vc, Py_ssize_t i) {
    if (vc->objs[i]) {
        PyBuffer_Release(&vc->views[i]);
        Py_CLEAR(vc->objs[i]);
    }
}

static void vc_dealloc(ViewCache *vc) {
    for (Py_ssize_t i = 0; i < vc->n; i++) vc_clear_slot(vc, i);
    free(vc->objs);
    free(vc->views);
    Py_TYPE(vc)->tp_free((PyObject *)vc);
}

static PyObject *vc_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    Py_ssize_t n;
    (void)kw;
    if (!PyArg_ParseTuple(args, "n", &n)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "ViewCache size must be >= 0");
        return NULL;
    }
    ViewCache *vc = (ViewCache *)type->tp_alloc(type, 0);
    if (!vc) return NULL;
    vc->n = n;
    vc->objs = (PyObject **)calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    vc->views = (Py_buffer *)calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    if (!vc->objs || !vc->views) {
        Py_DECREF(vc);
        return PyErr_NoMemory();
    }
    return (PyObject *)vc;
}

static PyTypeObject ViewCacheType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hilbench.npu.native._engine.ViewCache",
    .tp_basicsize = sizeof(ViewCache),
    .tp_dealloc = (destructor)vc_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Buffers of a plan's constants, kept between calls (see _engine.c).",
    .tp_new = vc_new,
};

static PyObject *forward(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer prog = {0}, qpb = {0}, slotb = {0}, packed = {0}, rsb = {0}, arena = {0},
              xb = {0}, outb = {0};
    PyObject *consts, *dumps, *cache;
    Py_ssize_t S, N;
    int isa;
    if (!PyArg_ParseTuple(args, "y*y*y*O!w*w*w*y*w*nniOO", &prog, &qpb, &slotb, &PyTuple_Type,
                          &consts, &packed, &rsb, &arena, &xb, &outb, &S, &N, &isa, &dumps,
                          &cache))
        return NULL;
    PyObject *ret = NULL;
    const Py_ssize_t nslots = PyTuple_GET_SIZE(consts);
    ViewCache *vc = NULL;
    if (cache != Py_None) {
        if (!PyObject_TypeCheck(cache, &ViewCacheType) ||
            ((ViewCache *)cache)->n != nslots) {
            PyErr_SetString(PyExc_TypeError, "native engine: cache must be a ViewCache(nslots)");
            PyBuffer_Release(&prog);
            PyBuffer_Release(&qpb);
            PyBuffer_Release(&slotb);
            PyBuffer_Release(&packed);
            PyBuffer_Release(&rsb);
            PyBuffer_Release(&arena);
            PyBuffer_Release(&xb);
            PyBuffer_Release(&outb);
            return NULL;
        }
        vc = (ViewCache *)cache;
    }
    /* cv: buffers acquired for this call only (without a cache); cb: every slot's data */
    Py_buffer *cv = (Py_buffer *)calloc((size_t)(nslots ? nslots : 1), sizeof(Py_buffer));
    const char **cb = (const char **)calloc((size_t)(nslots ? nslots : 1), sizeof(char *));
    const int64_t *hdr = (const int64_t *)prog.buf;
    const int64_t nops = hdr[G_NOPS];
    const int64_t *slots = (const int64_t *)slotb.buf; /* per slot: bytes per set, nsets */
    Py_buffer *dv = NULL;
    Py_ssize_t ndumps = 0;
    if (!cv || !cb) {
        PyErr_NoMemory();
        goto done;
    }
    if (prog.len < (Py_ssize_t)((1 + nops) * NF * 8) ||
        slotb.len < (Py_ssize_t)(nslots * 2 * 8)) {
        PyErr_SetString(PyExc_ValueError, "native engine: program too short");
        goto done;
    }
    for (Py_ssize_t i = 0; i < nslots; i++) {
        PyObject *obj = PyTuple_GET_ITEM(consts, i);
        const Py_buffer *view;
        if (vc) {
            if (vc->objs[i] != obj) {
                vc_clear_slot(vc, i);
                if (PyObject_GetBuffer(obj, &vc->views[i], PyBUF_C_CONTIGUOUS) < 0) goto done;
                Py_INCREF(obj);
                vc->objs[i] = obj;
            }
            view = &vc->views[i];
        } else {
            if (PyObject_GetBuffer(obj, &cv[i], PyBUF_C_CONTIGUOUS) < 0) goto done;
            view = &cv[i];
        }
        if (view->len != slots[2 * i] * slots[2 * i + 1]) {
            PyErr_Format(PyExc_ValueError, "native engine: constant %zd has %zd bytes, want %lld",
                         i, view->len, (long long)(slots[2 * i] * slots[2 * i + 1]));
            goto done;
        }
        cb[i] = (const char *)view->buf;
    }
    if (dumps != Py_None) {
        if (!PyTuple_Check(dumps) || PyTuple_GET_SIZE(dumps) != nops) {
            PyErr_SetString(PyExc_ValueError, "native engine: dumps must be a tuple per op");
            goto done;
        }
        ndumps = nops;
        dv = (Py_buffer *)calloc((size_t)(nops ? nops : 1), sizeof(Py_buffer));
        if (!dv) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < nops; i++) {
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(dumps, i), &dv[i], PyBUF_WRITABLE) < 0)
                goto done;
            if (dv[i].len != S * N * hdr[(1 + i) * NF + F_OUT_SIZE]) {
                PyErr_SetString(PyExc_ValueError, "native engine: dump buffer size");
                goto done;
            }
        }
    }
    const int64_t in_size = hdr[G_IN_SIZE], out_size = hdr[G_OUT_SIZE];
    if (xb.len != N * in_size || outb.len != S * N * out_size) {
        PyErr_SetString(PyExc_ValueError, "native engine: input/output sizes");
        goto done;
    }
    /* isa: 0 = best available, 1 = scalar C, 2 = VNNI without the VBMI kernels */
    const int vnni = (isa == 0 || isa == 2) && cpu_has_vnni();
    const int vbmi = vnni && isa == 0 && cpu_has_vbmi();
    (void)vbmi;
    (void)vnni;
    uint8_t *ar = (uint8_t *)arena.buf;
    const int32_t *qp = (const int32_t *)qpb.buf;
    int32_t *rowsum = (int32_t *)rsb.buf;
    int32_t *beff = (int32_t *)(ar + hdr[G_BSCR_OFF]);

    /* No Python API below until the loops end: other threads run meanwhile (the caller
     * serializes calls on one plan, whose arena this uses). */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < S; s++) {
        /* 1. repack the packed GEMMs' weights of this set (shared ones once) */
        const double tp = prof_on ? now_ns() : 0.0;
        for (int64_t i = 0; i < nops; i++) {
            const int64_t *f = hdr + (1 + i) * NF;
            if (!vnni || f[F_KIND] != OP_GEMM || f[F_DIRECT]) continue;
            const int64_t ws = f[F_WSLOT];
            if (s > 0 && slots[2 * ws + 1] == 1) continue;
            const int8_t *src =
                (const int8_t *)cb[ws] + (slots[2 * ws + 1] > 1 ? s : 0) * slots[2 * ws];
#if HB_X86
            if (vnni) {
                int64_t K = f[F_K];
                if (f[F_IMPLICIT] && f[F_K] != f[F_K4]) {
                    /* filter rows of KW*C bytes padded to a multiple of 4 with zeros */
                    const int64_t run = f[F_KW] * f[F_C], runp = f[F_K4] / f[F_KH];
                    int8_t *wx = (int8_t *)packed.buf + f[F_WX_OFF];
                    for (int64_t o = 0; o < f[F_OC]; o++)
                        for (int64_t ky = 0; ky < f[F_KH]; ky++) {
                            int8_t *d = wx + o * f[F_K4] + ky * runp;
                            memcpy(d, src + o * f[F_K] + ky * run, (size_t)run);
                            memset(d + run, 0, (size_t)(runp - run));
                        }
                    src = wx;
                    K = f[F_K4];
                }
                pack_gemm_vnni(src, f[F_OC], K, f[F_K4], f[F_O16],
                               (int8_t *)packed.buf + f[F_PK_OFF], rowsum + f[F_RS_OFF]);
            }
#endif
            (void)src;
        }
        if (prof_on) { /* the last slot: the repacking of one set */
            const double dt = now_ns() - tp;
            if (dt < prof_ns[PROF_MAX - 1]) prof_ns[PROF_MAX - 1] = dt;
        }
        /* 2. run the network on every input */
        /* One input: ops before G_FIRST (the first op reading a batched constant) give every
         * set the same result, and their outputs still needed are kept (never freed in the
         * arena layout), as are that op's im2col rows (F_KEEP): run them for set 0 only. */
        const int share = N == 1 && s > 0;
        const int64_t first = share ? hdr[G_FIRST] : 0;
        for (Py_ssize_t n = 0; n < N; n++) {
            if (!share) {
                const uint8_t *xs = (const uint8_t *)xb.buf + n * in_size;
                uint8_t *xin = ar + hdr[G_IN_OFF];
                for (int64_t j = 0; j < in_size; j++) xin[j] = xs[j] ^ 0x80;
            }
            for (int64_t i = 0; i < first && ndumps; i++) {
                const int64_t sz = hdr[(1 + i) * NF + F_OUT_SIZE];
                memcpy((int8_t *)dv[i].buf + (s * N + n) * sz, (int8_t *)dv[i].buf + n * sz,
                       (size_t)sz);
            }
            for (int64_t i = first; i < nops; i++) {
                const int64_t *f = hdr + (1 + i) * NF;
                const double t0 = prof_on ? now_ns() : 0.0;
                const uint8_t *in = ar + f[F_IN];
                uint8_t *out = ar + f[F_OUT];
                opctx c = {f, qp + f[F_QP_OFF], beff, n == 0, NULL, NULL, NULL};
                if (f[F_KIND] == OP_GEMM) c.beff = rowsum + f[F_BEFF_OFF];
                if (f[F_KIND] == OP_GEMM || f[F_KIND] == OP_DW) {
                    const int64_t ws = f[F_WSLOT];
                    c.w = (const int8_t *)cb[ws] +
                          (slots[2 * ws + 1] > 1 ? s : 0) * slots[2 * ws];
                    if (f[F_BSLOT] >= 0) {
                        const int64_t bs = f[F_BSLOT];
                        c.bias = (const int32_t *)((const uint8_t *)cb[bs] +
                                                   (slots[2 * bs + 1] > 1 ? s : 0) * slots[2 * bs]);
                    }
                }
                switch (f[F_KIND]) {
                case OP_GEMM: {
                    const uint8_t *A = in;
                    int64_t lda = f[F_K];
#if HB_X86
                    if (vnni && f[F_IMPLICIT]) { /* packed, straight from the padded input */
                        pad_input(in, f, (uint8_t)(128 - f[F_IO]), ar + f[F_PAD_OFF]);
                        c.pk = (const int8_t *)packed.buf + f[F_PK_OFF];
                        const int32_t *rs = rowsum + f[F_RS_OFF];
                        for (int64_t o = 0; o < f[F_O16] && c.sums; o++)
                            c.beff[o] = o < f[F_OC] ? fold_bias(&c, o, rs[o]) : 0;
                        gemm_vnni_x(ar + f[F_PAD_OFF], f[F_OH] * f[F_OW], &c,
                                    (int32_t *)(ar + hdr[G_KOFF_OFF]), out);
                        break;
                    }
#endif
                    if (f[F_IM2COL]) {
                        uint8_t *cols = ar + f[F_COLS];
                        if (share && f[F_KEEP]) {
                            /* rows kept from set 0 */
                        }
#if HB_X86
                        else if (vnni && f[F_IM2COL] == 2) {
                            pad_input(in, f, (uint8_t)(128 - f[F_IO]), ar + f[F_PAD_OFF]);
                            im2col_padded_vnni(ar + f[F_PAD_OFF], f, cols);
                        } else if (vnni)
                            im2col_vnni(in, f, (uint8_t)(128 - f[F_IO]), cols);
#endif
                        else
                            im2col(in, f, (uint8_t)(128 - f[F_IO]), cols);
                        A = cols;
                        lda = f[F_K4];
                    }
                    const int64_t M = f[F_OH] * f[F_OW];
                    if (!vnni) { /* the portable path runs every GEMM direct */
                        direct_scalar(A, lda, M, &c, out);
                        break;
                    }
#if HB_X86
                    if (f[F_DIRECT]) {
                        direct_vnni(A, lda, M, &c, out);
                        break;
                    }
#endif
                    c.pk = (const int8_t *)packed.buf + f[F_PK_OFF];
                    const int32_t *rs = rowsum + f[F_RS_OFF];
                    for (int64_t o = 0; o < f[F_O16] && c.sums; o++)
                        c.beff[o] = o < f[F_OC] ? fold_bias(&c, o, rs[o]) : 0;
#if HB_X86
                    gemm_vnni(A, lda, M, &c, out);
#endif
                    break;
                }
                case OP_DW: {
                    uint8_t *P = ar + f[F_PAD_OFF];
                    pad_input(in, f, (uint8_t)(128 - f[F_IO]), P);
#if HB_X86
                    if (vbmi && f[F_KH] == 3 && f[F_KW] == 3 && f[F_DH] == 1 && f[F_DW] == 1 &&
                        f[F_OC] <= 56) {
                        dw3_vbmi(P, &c, out);
                        break;
                    }
                    if (vnni) {
                        dw_vnni(P, &c, out);
                        break;
                    }
#endif
                    dw_scalar(P, &c, (uint32_t *)(ar + hdr[G_ACC_OFF]), out);
                    break;
                }
                case OP_ADD:
#if HB_X86
                    if (vnni) {
                        add_vnni(in, ar + f[F_IN2], f, out);
                        break;
                    }
#endif
                    add_scalar(in, ar + f[F_IN2], f, out);
                    break;
                case OP_MAXPOOL:
#if HB_X86
                    if (vnni) {
                        maxpool_vnni(in, f, out);
                        break;
                    }
#endif
                    maxpool(in, f, out);
                    break;
                case OP_AVGPOOL: avgpool(in, f, out); break;
                case OP_MEAN: mean_op(in, f, (uint32_t *)(ar + hdr[G_ACC_OFF]), out); break;
                default: break;
                }
                if (prof_on && i < PROF_MAX) {
                    const double dt = now_ns() - t0;
                    if (dt < prof_ns[i]) prof_ns[i] = dt;
                }
                if (ndumps) {
                    int8_t *d = (int8_t *)dv[i].buf + (s * N + n) * f[F_OUT_SIZE];
                    for (int64_t j = 0; j < f[F_OUT_SIZE]; j++) d[j] = (int8_t)(out[j] ^ 0x80);
                }
            }
            int8_t *y = (int8_t *)outb.buf + (s * N + n) * out_size;
            const uint8_t *yo = ar + hdr[G_OUT_OFF];
            for (int64_t j = 0; j < out_size; j++) y[j] = (int8_t)(yo[j] ^ 0x80);
        }
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    ret = Py_None;
done:
    if (cv) {
        release_views(cv, nslots);
        free(cv);
    }
    free(cb);
    if (dv) {
        release_views(dv, ndumps);
        free(dv);
    }
    PyBuffer_Release(&prog);
    PyBuffer_Release(&qpb);
    PyBuffer_Release(&slotb);
    PyBuffer_Release(&packed);
    PyBuffer_Release(&rsb);
    PyBuffer_Release(&arena);
    PyBuffer_Release(&xb);
    PyBuffer_Release(&outb);
    return ret;
}

static PyObject *profile(PyObject *self, PyObject *arg) {
    (void)self;
    /* profile(True): reset and start timing each op; profile(False): stop; both return the
     * shortest time (ns) each op index took so far (robust on a shared machine); the last
     * entry is the repacking of one weight set's packed-GEMM weights */
    PyObject *res = PyList_New(PROF_MAX);
    if (!res) return NULL;
    for (int i = 0; i < PROF_MAX; i++) PyList_SET_ITEM(res, i, PyFloat_FromDouble(prof_ns[i]));
    const int on = PyObject_IsTrue(arg);
    if (on < 0) {
        Py_DECREF(res);
        return NULL;
    }
    if (on)
        for (int i = 0; i < PROF_MAX; i++) prof_ns[i] = 1e300;
    prof_on = on;
    return res;
}

static PyObject *fields(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    PyObject *t = PyTuple_New(NF);
    if (!t) return NULL;
    for (int i = 0; i < NF; i++) {
        PyObject *s = PyUnicode_FromString(field_names[i]);
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static PyObject *best_isa(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(cpu_has_vnni() ? (cpu_has_vbmi() ? "avx512vnni+vbmi" : "avx512vnni")
                                               : "scalar");
}

static PyMethodDef methods[] = {
    {"forward", forward, METH_VARARGS, "Run a lowered network (see hilbench.npu.native)."},
    {"profile", profile, METH_O, "Per-op timing: profile(True) resets and starts, "
                                 "profile(False) stops; both return each op's shortest time (ns) so far."},
    {"fields", fields, METH_NOARGS, "Names of the op record fields, in order."},
    {"best_isa", best_isa, METH_NOARGS, "Kernels this CPU runs: 'avx512vnni+vbmi', 'avx512vnni' or 'scalar'."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_engine",
                                    "hilbench native NPU engine", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__engine(void) {
    if (PyType_Ready(&ViewCacheType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ViewCacheType);
    if (PyModule_AddObject(m, "ViewCache", (PyObject *)&ViewCacheType) < 0) {
        Py_DECREF(&ViewCacheType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
