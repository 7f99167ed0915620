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
static inline int32x4_t hb_nn_requant_mve(int32x4_t acc, int32x4_t mult, int32x4_t shift,
                                          int32_t output_offset, int32_t act_min,
                                          int32_t act_max) {
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t right = vminq_s32(shift, zero); /* -exponent, <= 0 */
    int32x4_t v = vshlq_s32(acc, vmaxq_s32(shift, zero));
    v = vqrdmulhq_s32(v, mult);
    const int32x4_t fixup = vshrq_n_s32(vandq_s32(v, right), 31);
    v = vrshlq_s32(vqaddq_s32(v, fixup), right);
    v = vqaddq_n_s32(v, output_offset);
    v = vmaxq_s32(v, vdupq_n_s32(act_min));
    return vminq_s32(v, vdupq_n_s32(act_max));
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
