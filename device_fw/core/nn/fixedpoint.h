/* TFLite / TFLM fixed-point arithmetic, the part of every int8 kernel that decides the bytes.
 *
 * Self-contained (only <stdint.h>) so that the firmware's kernels (core/nn/) and the
 * emulator's native engine (hilbench/npu/native/) compile the same source. Mirrors
 * tensorflow/lite/kernels/internal/common.{h,cc} (default build: double rounding, not
 * TFLITE_SINGLE_ROUNDING) and gemmlowp's fixedpoint.h, written for C11 without signed
 * overflow: whatever may wrap is computed in uint32_t / uint64_t and converted back with
 * hb_fp_wrap32 (two's complement, as TFLM's int32 arithmetic behaves on every target).
 * Right shifts of negative values are arithmetic (gcc and clang; core/hb_bytes.h asserts it).
 *
 * Names: hb_fp_*. Every function is static inline: no object file, no link dependency. */
#ifndef HB_NN_FIXEDPOINT_H
#define HB_NN_FIXEDPOINT_H

#include <stdint.h>

/* The int32 value of the 32-bit pattern u (two's complement), without implementation-defined
 * conversion: the compiler turns this into nothing. */
static inline int32_t hb_fp_wrap32(uint32_t u) {
    return u < 0x80000000u ? (int32_t)u : (int32_t)(u - 0x80000000u) - INT32_MAX - 1;
}

/* a + b with int32 wrap-around (TFLM's accumulators: acc += ...). */
static inline int32_t hb_fp_add_wrap(int32_t a, int32_t b) {
    return hb_fp_wrap32((uint32_t)a + (uint32_t)b);
}

/* gemmlowp SaturatingRoundingDoublingHighMul: the high 32 bits of 2*a*b, rounded to nearest
 * (ties away from zero); INT32_MIN * INT32_MIN saturates to INT32_MAX. */
static inline int32_t hb_fp_srdhm(int32_t a, int32_t b) {
    if (a == b && a == INT32_MIN) return INT32_MAX;
    const int64_t ab = (int64_t)a * (int64_t)b;
    const int64_t nudge = ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
    /* |ab + nudge| < 2^62: no overflow; C's division truncates toward zero, as C++'s does */
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

/* gemmlowp RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from zero;
 * exponent in [0, 31]. */
static inline int32_t hb_fp_rdbpot(int32_t x, int exponent) {
    const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* TFLM MultiplyByQuantizedMultiplier(int32_t x, int32_t multiplier, int shift), double
 * rounding: x * multiplier * 2^(shift - 31). multiplier in [0, 2^31 - 1], shift in [-31, 30];
 * a left shift (shift > 0) wraps like TFLM's `x * (1 << shift)`. */
static inline int32_t hb_fp_mbqm(int32_t x, int32_t multiplier, int shift) {
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    return hb_fp_rdbpot(hb_fp_srdhm(hb_fp_wrap32((uint32_t)x << left), multiplier), right);
}

/* TFLM QuantizedMeanOrSum<int8_t, int32_t>, the 64-bit step: the int32 sum of `count` inputs
 * less input_zero_point * count, formed in int64 and cast to int32 (the value then goes
 * through hb_fp_mbqm with the 1/count-folded multiplier below). */
static inline int32_t hb_fp_mean_shifted_sum(int32_t sum, int32_t input_zero_point,
                                             int64_t count) {
    const int64_t v = (int64_t)sum - (int64_t)input_zero_point * count;
    return hb_fp_wrap32((uint32_t)(uint64_t)v);
}

/* TFLM QuantizedMeanOrSum's 1/count folding (the host precomputes it into the MEAN record):
 * k = min(floor(log2(count)), 32, 31 + shift); multiplier' = (multiplier << k) / count
 * (64-bit, truncating), shift' = shift - k. count >= 1, shift >= -31. */
static inline void hb_fp_mean_multiplier(int32_t multiplier, int shift, int64_t count,
                                         int32_t *multiplier_out, int *shift_out) {
    int k = 0;
    while (k < 62 && ((int64_t)1 << (k + 1)) <= count) k++;
    if (k > 32) k = 32;
    if (k > 31 + shift) k = 31 + shift;
    *multiplier_out = (int32_t)(((int64_t)multiplier << k) / count);
    *shift_out = shift - k;
}

/* clamp v to [lo, hi] (int64 so that `requantized + output_offset` never overflows) */
static inline int8_t hb_fp_clamp8(int64_t v, int32_t lo, int32_t hi) {
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return (int8_t)v;
}

#endif /* HB_NN_FIXEDPOINT_H */
