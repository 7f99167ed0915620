/* hilbench native NPU engine: what the runner (_engine.c) and the kernels of every ISA
 * (k_*.c) share: the op record layout, the per-op context, TFLM's scalar fixed-point math
 * and the kernel table each ISA fills in.
 *
 * Activations live in the arena as u = x + 128 (uint8). With io the TFLM input offset
 * (minus the input zero point) and c the value a kernel multiplies (u, or x = u - 128 on
 * ISAs whose dot products are signed x signed):
 *     sum_k w (x + io) = sum_k w c + (io - 128 + cbias) sum_k w,    cbias = 128 - (u - c)
 * i.e. fold io - 128 for kernels on u and io for kernels on x; the fold goes into the bias
 * with the weights' row sums (computed per call). Padded taps hold u = zp + 128, so
 * x + io = 0: they contribute nothing, as in TFLM. All accumulation is uint32 arithmetic
 * (mod 2^32), which is what TFLM's int32 accumulator computes.
 */
#ifndef HB_NATIVE_ENGINE_H
#define HB_NATIVE_ENGINE_H

#include <stdint.h>
#include <string.h>

#include "fixedpoint.h" /* device_fw/core/nn: an include directory of the build */

#define HB_INLINE static inline __attribute__((always_inline))

#if !defined(HB_NO_SIMD) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HB_X86 1
#else
#define HB_X86 0
#endif
/* compilers that know AVX-VNNI's intrinsics (gcc 11, clang 12) */
#if HB_X86 && ((defined(__clang__) && __clang_major__ >= 12) ||                          \
               (!defined(__clang__) && __GNUC__ >= 11))
#define HB_HAVE_AVXVNNI 1
#else
#define HB_HAVE_AVXVNNI 0
#endif
#if !defined(HB_NO_SIMD) && defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define HB_ARM64 1
#else
#define HB_ARM64 0
#endif
/* compilers that give SDOT's intrinsic to a function with a target attribute (gcc), or
 * whose target has DotProd already (clang's arm_neon.h needs that before version 16;
 * Apple's arm64 target has it) */
#if HB_ARM64 && (!defined(__clang__) || defined(__ARM_FEATURE_DOTPROD))
#define HB_HAVE_NEONDOT 1
#else
#define HB_HAVE_NEONDOT 0
#endif

/* --- op records (mirrored by FIELDS in __init__.py, read from the engine at import) ---- */
#define FIELD_LIST                                                                          \
    X(KIND) X(IN) X(IN2) X(OUT) X(H) X(W) X(C) X(OH) X(OW) X(OC) X(KH) X(KW) X(SH) X(SW)   \
    X(DH) X(DW) X(PT) X(PL) X(K) X(K4) X(O16) X(WSLOT) X(BSLOT) X(PK_OFF) X(PK_SIZE)        \
    X(RS_OFF) X(DIRECT) X(QP_OFF) X(IO) X(OO) X(LO) X(HI) X(DM) X(ANYLS)                   \
    X(IM2COL) X(PAD_OFF) X(HP) X(WP) X(OUT_SIZE) X(M1) X(S1) X(M2) X(S2) X(MO) X(SO)       \
    X(IO2) X(LSH) X(COUNT) X(ZP) X(COLS) X(KEEP) X(FASTRQ) X(BEFF_OFF) X(IMPLICIT) X(WX_OFF)

enum {
#define X(n) F_##n,
    FIELD_LIST
#undef X
        NF
};

enum { OP_NOP = 0, OP_GEMM = 1, OP_DW = 2, OP_ADD = 3, OP_MAXPOOL = 4, OP_AVGPOOL = 5,
       OP_MEAN = 6 };

/* arena-global offsets kept in the prog header (first record) */
enum { G_NOPS = 0, G_IN_OFF, G_IN_SIZE, G_OUT_OFF, G_OUT_SIZE, G_COL_OFF, G_BSCR_OFF, G_FIRST,
       G_ACC_OFF, G_KOFF_OFF, G_WIDE_OFF };

/* The requantization table of an op with O16 = O rounded up to 16 channels (int32 each):
 * m[O16], shift[O16], ls[O16], rs[O16], mask[O16], thr[O16], rs-1[O16], then per 16-channel
 * block 2^30 + 2^(30+rs) as int64 for the block's even channels, then its odd ones (the
 * x86 kernels' layout), then the same int64 channel by channel (QP_ADDC, 8-byte aligned:
 * every table's length and offset are multiples of 16 int32). */
enum { QP_M = 0, QP_SHIFT = 1, QP_LS = 2, QP_RS = 3, QP_MASK = 4, QP_THR = 5, QP_RSM1 = 6,
       QP_ADD = 7, QP_ADDC = 9 };

/* --- scalar fixed-point: the firmware's (device_fw/core/nn/fixedpoint.h, TFLM's
 * MultiplyByQuantizedMultiplier with gemmlowp's roundings), one source for both ---------- */
HB_INLINE int32_t mbqm(int32_t x, int32_t m, int32_t shift) {
    return hb_fp_mbqm(x, m, (int)shift);
}

/* The same on an int64 x exactly as hilbench.npu.quant's numpy code does it (used by MEAN,
 * whose sums are int64 there): no wrap unless there is a left shift. */
HB_INLINE int32_t mbqm64(int64_t x, int64_t m, int32_t shift) {
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

HB_INLINE int32_t clampi(int32_t v, int32_t lo, int32_t hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

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

/* --- per-op context ------------------------------------------------------------------ */
typedef struct {
    const int64_t *f;      /* the op record */
    const int32_t *qp;     /* the requantization table (QP_* above) */
    int32_t *beff;         /* effective bias [O16] of this op and weight set */
    int sums;              /* 1: compute row sums and beff (first input of a set), 0: reuse */
    const int8_t *pk;      /* packed weights (packed GEMM) */
    const int8_t *w;       /* the weights as given: [O][K] (GEMM), [T][OC] (depthwise) */
    const int32_t *bias;   /* the bias as given [O], or NULL */
} opctx;

/* effective bias of one channel: bias + fold * rowsum, int32 wrap; fold = io - 128 for
 * kernels that multiply u, io for kernels that multiply x */
HB_INLINE int32_t fold_bias_by(const opctx *c, int64_t o, int32_t rowsum, int32_t fold) {
    const uint32_t b = c->bias ? (uint32_t)c->bias[o] : 0u;
    return (int32_t)(b + (uint32_t)fold * (uint32_t)rowsum);
}

HB_INLINE int32_t fold_bias(const opctx *c, int64_t o, int32_t rowsum) {
    return fold_bias_by(c, o, rowsum, (int32_t)(c->f[F_IO] - 128));
}

/* requantize one int32 accumulator (bias already added) to the stored u8 = int8 + 128 */
HB_INLINE uint8_t rq_scalar(uint32_t v, const int32_t *qp, int64_t o16, int64_t o, int32_t oo,
                            int32_t lo, int32_t hi) {
    const int32_t h = mbqm((int32_t)v, qp[o], qp[o16 + o]);
    return (uint8_t)(clampi(h + oo, lo, hi) + 128);
}

/* --- one GEMM op (CONV_2D or FULLY_CONNECTED) as the runner hands it to a kernel ----- */
typedef struct {
    opctx c;
    const uint8_t *in;     /* the op's input activation */
    uint8_t *out;          /* its output (M x O bytes) */
    uint8_t *cols;         /* im2col rows (M x K4 bytes) */
    int cols_kept;         /* 1: the rows are already there (kept from weight set 0) */
    uint8_t *pad;          /* the padded-input scratch */
    uint8_t *wide;         /* scratch for 16-bit copies of the rows or padded input */
    int32_t *koff;         /* scratch: per-group offsets of implicit im2col */
    const int32_t *rowsum; /* packed GEMMs: the weights' row sums from the repacking */
} hb_gemm;

/* --- the kernels of one ISA ------------------------------------------------------------ */
typedef struct {
    const char *name;
    /* repack one weight set [O][K] (rows padded to K4, zeros) into this ISA's panels, with
     * the row sums; NULL when the ISA has no packed GEMM (every GEMM runs its own way) */
    void (*pack)(const int8_t *w, int64_t O, int64_t K, int64_t K4, int64_t O16, int8_t *dst,
                 int32_t *rowsum);
    void (*gemm)(const hb_gemm *g);
    void (*dw)(const uint8_t *P, const opctx *c, uint32_t *acc, uint8_t *out);
    void (*add)(const uint8_t *a, const uint8_t *b, const int64_t *f, uint8_t *out);
    void (*maxpool)(const uint8_t *x, const int64_t *f, uint8_t *out);
    /* n rounds of the ISA's exact int8 multiply-add instruction on independent
     * accumulators (its throughput peak); returns the multiply-adds done. NULL: portable */
    uint64_t (*peak)(uint64_t n);
} hb_isa;

/* 12 independent accumulators (INIT(k): distinct, so no two chains are the same):
 * enough to hide any multiply-add latency */
#define HB_PEAK_BODY(T, INIT, OP, SUM, KEEP)                                                 \
    T c0 = INIT(1), c1 = INIT(2), c2 = INIT(3), c3 = INIT(4), c4 = INIT(5), c5 = INIT(6),     \
      c6 = INIT(7), c7 = INIT(8), c8 = INIT(9), c9 = INIT(10), c10 = INIT(11), c11 = INIT(12); \
    for (uint64_t i = 0; i < n; i++) {                                                      \
        c0 = OP(c0); c1 = OP(c1); c2 = OP(c2); c3 = OP(c3); c4 = OP(c4); c5 = OP(c5);          \
        c6 = OP(c6); c7 = OP(c7); c8 = OP(c8); c9 = OP(c9); c10 = OP(c10); c11 = OP(c11);      \
        KEEP(a, b); /* the operands change as far as the compiler knows */                 \
    }                                                                                       \
    hb_peak_sink = SUM(c0) + SUM(c1) + SUM(c2) + SUM(c3) + SUM(c4) + SUM(c5) + SUM(c6) +     \
                   SUM(c7) + SUM(c8) + SUM(c9) + SUM(c10) + SUM(c11);
extern volatile int32_t hb_peak_sink;

/* k_portable.c: the portable kernels and the helpers every ISA may use */
extern const hb_isa hb_isa_portable;
void hb_im2col(const uint8_t *x, const int64_t *f, uint8_t pad, uint8_t *cols);
void hb_pad_input(const uint8_t *x, const int64_t *f, uint8_t pad, uint8_t *p);
void hb_pad_weights(const int8_t *w, const int64_t *f, int8_t *wx);
void hb_dw_taps(const uint8_t *P, const opctx *c, uint8_t *out);
void hb_add_portable(const uint8_t *a, const uint8_t *b, const int64_t *f, uint8_t *out);
void hb_maxpool_portable(const uint8_t *x, const int64_t *f, uint8_t *out);
void hb_avgpool(const uint8_t *x, const int64_t *f, uint8_t *out);
void hb_mean(const uint8_t *x, const int64_t *f, uint32_t *acc, uint8_t *out);

/* ISA tables (each defined only where its compiler support exists) and CPU checks */
#if HB_X86
extern const hb_isa hb_isa_avx512vnni_vbmi, hb_isa_avx512vnni, hb_isa_avx2,
    hb_isa_portable_avx2;
/* hb_mean on AVX-512 (the two AVX-512 tables run it): the same bytes */
void hb_mean_avx512(const uint8_t *x, const int64_t *f, uint32_t *acc, uint8_t *out);
#endif
#if HB_HAVE_AVXVNNI
extern const hb_isa hb_isa_avxvnni;
#endif
#if HB_HAVE_NEONDOT
extern const hb_isa hb_isa_neondot;
#endif

#endif
