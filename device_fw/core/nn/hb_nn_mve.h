/* The Helium (MVE) pieces of the int8 kernels: the vector twins of hb_nn.h's scalar
 * hb_nn_dot_s8 and hb_nn_requant_one (CMSIS-NN's scalar/vector pairs, arm_nn_requantize /
 * arm_requantize_mve). Included by hb_nn.h when HB_NN_MVE is 1; nothing here is used by a
 * scalar build. docs/firmware.md "Helium" gives the design and the proof that every piece
 * computes the scalar piece's bytes.
 *
 * Dot products run in tail-predicated low-overhead loops (WLSTP.8 / LETP, written as inline
 * assembly as CMSIS-NN writes its hot loops: GCC 12 does not emit tail-predicated loops from
 * intrinsics). The last iteration's inactive lanes neither load nor add: no byte past a
 * buffer is read, and there is no scalar tail. VMLADAVA/VADDVA accumulate into a 32-bit
 * general register with wrap-around, as the scalar path's uint32_t accumulator does.
 *
 * Everything is static inline: no object file, no link dependency. Names: hb_nn_*_mve. */
#ifndef HB_NN_MVE_H
#define HB_NN_MVE_H

#include <arm_mve.h>
#include <stdint.h>

#include "hb_bytes.h"

/* The kernels' scratch (defined in conv2d.c; static memory, no heap): CONV_2D's padded input
 * or im2col matrix, DEPTHWISE_CONV_2D's padded block of 16 channels. One op runs at a time. */
#define HB_NN_SCRATCH_BYTES 8192u
extern int8_t hb_nn_scratch[HB_NN_SCRATCH_BYTES];

/* *dot += sum of w[i] * x[i], *sumw += sum of w[i], i < n, both modulo 2^32. Then
 * sum w[i] * (x[i] + x_offset) = *dot + x_offset * *sumw (mod 2^32): the scalar dot product. */
static inline void hb_nn_dot_mve(const int8_t *w, const int8_t *x, uint32_t n, int32_t *dot,
                                 int32_t *sumw) {
    int32_t d = *dot, s = *sumw;
    __asm__ volatile("   wlstp.8     lr, %[n], 1f\n"
                     "2: vldrb.8     q0, [%[w]], #16\n"
                     "   vldrb.8     q1, [%[x]], #16\n"
                     "   vmladava.s8 %[d], q0, q1\n"
                     "   vaddva.s8   %[s], q0\n"
                     "   letp        lr, 2b\n"
                     "1:\n"
                     : [d] "+Te"(d), [s] "+Te"(s), [w] "+r"(w), [x] "+r"(x)
                     : [n] "r"(n)
                     : "q0", "q1", "lr", "memory");
    *dot = d;
    *sumw = s;
}

/* The same row w against four inputs at once (four output pixels of one channel: each weight
 * vector is loaded once for the four): acc[p] += sum w[i] * xp[i], *sumw += sum w[i]. */
static inline void hb_nn_dot4_mve(const int8_t *w, const int8_t *x0, const int8_t *x1,
                                  const int8_t *x2, const int8_t *x3, uint32_t n, int32_t acc[4],
                                  int32_t *sumw) {
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3], s = *sumw;
    __asm__ volatile("   wlstp.8     lr, %[n], 1f\n"
                     "2: vldrb.8     q0, [%[w]], #16\n"
                     "   vaddva.s8   %[s], q0\n"
                     "   vldrb.8     q1, [%[x0]], #16\n"
                     "   vmladava.s8 %[a0], q0, q1\n"
                     "   vldrb.8     q2, [%[x1]], #16\n"
                     "   vmladava.s8 %[a1], q0, q2\n"
                     "   vldrb.8     q1, [%[x2]], #16\n"
                     "   vmladava.s8 %[a2], q0, q1\n"
                     "   vldrb.8     q2, [%[x3]], #16\n"
                     "   vmladava.s8 %[a3], q0, q2\n"
                     "   letp        lr, 2b\n"
                     "1:\n"
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [a3] "+Te"(a3),
                       [s] "+Te"(s), [w] "+r"(w), [x0] "+r"(x0), [x1] "+r"(x1), [x2] "+r"(x2),
                       [x3] "+r"(x3)
                     : [n] "r"(n)
                     : "q0", "q1", "q2", "lr", "memory");
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
    *sumw = s;
}

/* The same row w against four inputs, no weight sum (the caller knows it): lane p = sum
 * w[i] * xp[i], i < n, modulo 2^32. Ten instructions per 16 bytes of four pixels; the four
 * sums go into the vector with two VMOVs (two general registers to two lanes each). */
static inline int32x4_t hb_nn_dot4_nosum_mve(const int8_t *w, const int8_t *x0, const int8_t *x1,
                                             const int8_t *x2, const int8_t *x3, uint32_t n) {
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int32x4_t r;
    __asm__ volatile("   wlstp.8     lr, %[n], 1f\n"
                     "2: vldrb.8     q0, [%[w]], #16\n"
                     "   vldrb.8     q1, [%[x0]], #16\n"
                     "   vmladava.s8 %[a0], q0, q1\n"
                     "   vldrb.8     q2, [%[x1]], #16\n"
                     "   vmladava.s8 %[a1], q0, q2\n"
                     "   vldrb.8     q1, [%[x2]], #16\n"
                     "   vmladava.s8 %[a2], q0, q1\n"
                     "   vldrb.8     q2, [%[x3]], #16\n"
                     "   vmladava.s8 %[a3], q0, q2\n"
                     "   letp        lr, 2b\n"
                     "1: vmov        %q[r][2], %q[r][0], %[a0], %[a2]\n"
                     "   vmov        %q[r][3], %q[r][1], %[a1], %[a3]\n"
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [a3] "+Te"(a3),
                       [w] "+r"(w), [x0] "+r"(x0), [x1] "+r"(x1), [x2] "+r"(x2), [x3] "+r"(x3),
                       [r] "=w"(r)
                     : [n] "r"(n)
                     : "q0", "q1", "q2", "lr", "memory");
    return r;
}

/* hb_nn_dot4_nosum_mve with the row's weight sum as well (*sumw = sum w[i], i < n): eleven
 * instructions per 16 bytes of four pixels, for a row used by one group of four pixels only. */
static inline int32x4_t hb_nn_dot4_wsum_mve(const int8_t *w, const int8_t *x0, const int8_t *x1,
                                            const int8_t *x2, const int8_t *x3, uint32_t n,
                                            int32_t *sumw) {
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, s = 0;
    int32x4_t r;
    __asm__ volatile("   wlstp.8     lr, %[n], 1f\n"
                     "2: vldrb.8     q0, [%[w]], #16\n"
                     "   vldrb.8     q1, [%[x0]], #16\n"
                     "   vaddva.s8   %[s], q0\n"
                     "   vmladava.s8 %[a0], q0, q1\n"
                     "   vldrb.8     q2, [%[x1]], #16\n"
                     "   vmladava.s8 %[a1], q0, q2\n"
                     "   vldrb.8     q1, [%[x2]], #16\n"
                     "   vmladava.s8 %[a2], q0, q1\n"
                     "   vldrb.8     q2, [%[x3]], #16\n"
                     "   vmladava.s8 %[a3], q0, q2\n"
                     "   letp        lr, 2b\n"
                     "1: vmov        %q[r][2], %q[r][0], %[a0], %[a2]\n"
                     "   vmov        %q[r][3], %q[r][1], %[a1], %[a3]\n"
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [a3] "+Te"(a3),
                       [s] "+Te"(s), [w] "+r"(w), [x0] "+r"(x0), [x1] "+r"(x1), [x2] "+r"(x2),
                       [x3] "+r"(x3), [r] "=w"(r)
                     : [n] "r"(n)
                     : "q0", "q1", "q2", "lr", "memory");
    *sumw = s;
    return r;
}

/* hb_nn_dot4_nosum_mve over `runs` runs of n bytes: run r of w at w + r * n (w contiguous),
 * run r of pixel p at xp + r * step. The whole loop nest in one block: twelve instructions
 * per run on top of the ten per 16 bytes. A post-increment in the loop's last (predicated)
 * iteration still adds 16: after a run each pointer is ceil(n / 16) * 16 on, so w goes back
 * by that less n and the inputs on by step less it. Registers are short: the run count and
 * the two adjustments stay in memory, lr carries them between the runs. runs >= 1. */
static inline void hb_nn_dot4_runs_mve(const int8_t *w, const int8_t *x0, const int8_t *x1,
                                       const int8_t *x2, const int8_t *x3, uint32_t n,
                                       uint32_t runs, uint32_t step, int32x4_t *acc) {
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int32x4_t r;
    const uint32_t done = (n + 15u) & ~15u; /* what a run's loop adds to each pointer */
    const uint32_t back = done - n, skip = step - done;
    __asm__ volatile("3:  wlstp.8     lr, %[n], 1f\n"
                     "2:  vldrb.8     q0, [%[w]], #16\n"
                     "    vldrb.8     q1, [%[x0]], #16\n"
                     "    vmladava.s8 %[a0], q0, q1\n"
                     "    vldrb.8     q2, [%[x1]], #16\n"
                     "    vmladava.s8 %[a1], q0, q2\n"
                     "    vldrb.8     q1, [%[x2]], #16\n"
                     "    vmladava.s8 %[a2], q0, q1\n"
                     "    vldrb.8     q2, [%[x3]], #16\n"
                     "    vmladava.s8 %[a3], q0, q2\n"
                     "    letp        lr, 2b\n"
                     "1:  ldr         lr, %[back]\n"
                     "    sub         %[w], %[w], lr\n"
                     "    ldr         lr, %[skip]\n"
                     "    add         %[x0], %[x0], lr\n"
                     "    add         %[x1], %[x1], lr\n"
                     "    add         %[x2], %[x2], lr\n"
                     "    add         %[x3], %[x3], lr\n"
                     "    ldr         lr, %[runs]\n"
                     "    subs        lr, lr, #1\n"
                     "    str         lr, %[runs]\n"
                     "    bne         3b\n"
                     "    vmov        %q[r][2], %q[r][0], %[a0], %[a2]\n"
                     "    vmov        %q[r][3], %q[r][1], %[a1], %[a3]\n"
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [a3] "+Te"(a3),
                       [w] "+r"(w), [x0] "+r"(x0), [x1] "+r"(x1), [x2] "+r"(x2), [x3] "+r"(x3),
                       [runs] "+m"(runs), [r] "=w"(r)
                     : [n] "r"(n), [skip] "m"(skip), [back] "m"(back)
                     : "q0", "q1", "q2", "lr", "memory", "cc");
    *acc = r;
}

/* sum of w[i], i < n, modulo 2^32 */
static inline int32_t hb_nn_sum_mve(const int8_t *w, uint32_t n) {
    int32_t s = 0;
    __asm__ volatile("   wlstp.8     lr, %[n], 1f\n"
                     "2: vldrb.8     q0, [%[w]], #16\n"
                     "   vaddva.s8   %[s], q0\n"
                     "   letp        lr, 2b\n"
                     "1:\n"
                     : [s] "+Te"(s), [w] "+r"(w)
                     : [n] "r"(n)
                     : "q0", "lr", "memory");
    return s;
}

/* TFLM MultiplyByQuantizedMultiplier (double rounding) on four lanes, then + output_offset and
 * the clamp: hb_fp_mbqm and hb_fp_clamp8 lane by lane (acc already holds the bias).
 *  - x * 2^left with wrap-around: VSHL by a register shifts bits out, as (uint32_t)x << left.
 *  - SaturatingRoundingDoublingHighMul = VQRDMULH: both are floor((2ab + 2^31) / 2^32), and
 *    both saturate only INT32_MIN * INT32_MIN, to INT32_MAX.
 *  - RoundingDivideByPOT (ties away from zero) = VRSHL (ties up) after subtracting 1 from a
 *    negative dividend when the exponent is not 0 (saturating: INT32_MIN stays), CMSIS-NN's
 *    arm_divide_by_power_of_two_mve.
 *  - + output_offset saturating, then the clamp: the same as the scalar int64 add and clamp,
 *    since [act_min, act_max] lies inside int32.
 * shift lanes in [-31, 30], mult lanes in [0, 2^31 - 1] (the blob's checked ranges). */
/* hb_fp_mbqm on four lanes (the first half of hb_nn_requant_mve below) */
static inline int32x4_t hb_nn_mbqm_mve(int32x4_t x, int32x4_t mult, int32x4_t shift) {
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t right = vminq_s32(shift, zero); /* -exponent, <= 0 */
    int32x4_t v = vshlq_s32(x, vmaxq_s32(shift, zero));
    v = vqrdmulhq_s32(v, mult);
    const int32x4_t fixup = vshrq_n_s32(vandq_s32(v, right), 31);
    return vrshlq_s32(vqaddq_s32(v, fixup), right);
}

static inline int32x4_t hb_nn_requant_mve(int32x4_t acc, int32x4_t mult, int32x4_t shift,
                                          int32_t output_offset, int32_t act_min,
                                          int32_t act_max) {
    int32x4_t v = hb_nn_mbqm_mve(acc, mult, shift);
    v = vqaddq_n_s32(v, output_offset);
    v = vmaxq_s32(v, vdupq_n_s32(act_min));
    return vminq_s32(v, vdupq_n_s32(act_max));
}

/* hb_nn_requant_mve with one multiplier and shift for the four lanes (one output channel,
 * four pixels), as scalars: the shifts and the multiply by a general register (VSHL, VQRDMULH
 * and VRSHL take one), the sign fixup only when there is a right shift. Same bytes. */
static inline int32x4_t hb_nn_requant1_mve(int32x4_t acc, int32_t mult, int32_t shift,
                                           int32_t output_offset, int32x4_t act_min,
                                           int32x4_t act_max) {
    int32x4_t v = vqrdmulhq_n_s32(vshlq_r_s32(acc, shift > 0 ? shift : 0), mult);
    if (shift < 0) v = vrshlq_n_s32(vqaddq_s32(v, vshrq_n_s32(v, 31)), shift);
    v = vqaddq_n_s32(v, output_offset);
    return vminq_s32(vmaxq_s32(v, act_min), act_max);
}

/* The requantization of output channels c .. c+3 (lanes past n_active are don't-care): their
 * multipliers (unaligned little-endian i32 in the blob: loaded as 16 bytes, lane l = bytes
 * 4l..4l+3) and shifts, or the one of a per-tensor requantization in every lane. */
typedef struct {
    int32x4_t mult, shift;
} hb_nn_rq_mve;

static inline hb_nn_rq_mve hb_nn_rq_lanes_mve(const uint8_t *mult, const int8_t *shift,
                                              uint32_t n, uint32_t c, uint32_t n_active) {
    hb_nn_rq_mve r;
    if (n == 1) {
        r.mult = vdupq_n_s32(hb_rdi32(mult));
        r.shift = vdupq_n_s32(shift[0]);
    } else {
        r.mult = vreinterpretq_s32_u8(vldrbq_z_u8(mult + 4u * c, vctp8q(4u * n_active)));
        r.shift = vldrbq_z_s32(shift + c, vctp32q(n_active));
    }
    return r;
}

/* memset and memcpy, 16 bytes per store (newlib-nano's are byte loops) */
static inline void hb_nn_fill_mve(int8_t *p, int8_t v, size_t n) {
    const int8x16_t f = vdupq_n_s8(v);
    for (size_t i = 0; i < n; i += 16) vstrbq_p_s8(p + i, f, vctp8q((uint32_t)(n - i)));
}

static inline void hb_nn_copy_mve(int8_t *d, const int8_t *s, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        const mve_pred16_t pr = vctp8q((uint32_t)(n - i));
        vstrbq_p_s8(d + i, vldrbq_z_s8(s + i, pr), pr);
    }
}

/* The taps t < k at o + t * d (dilation d >= 1) that fall inside [0, size): [*lo, *hi). */
static inline void hb_nn_taps_inside(int32_t o, uint32_t d, uint32_t k, uint32_t size,
                                     uint32_t *lo, uint32_t *hi) {
    uint32_t a = 0, b = 0;
    if (o < (int32_t)size) {
        const uint32_t room = (uint32_t)((int32_t)size - 1 - o); /* >= 0: taps up to room / d */
        b = d == 1 ? room + 1 : room / d + 1;
        if (b > k) b = k;
        if (o < 0) a = d == 1 ? (uint32_t)-o : ((uint32_t)-o + d - 1) / d;
        if (a > b) a = b;
    }
    *lo = a;
    *hi = b;
}

#endif /* HB_NN_MVE_H */
