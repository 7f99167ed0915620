/* The integer update (docs/zo-math.md section 4): the step of one element from its
 * accumulated sum, the stochastic rounding offsets, the masters and their clamps. */
#ifndef HB_ZO_UPDATE_H
#define HB_ZO_UPDATE_H

#include <stdint.h>

#include "hb_zo.h"
#include "zo/philox.h"

_Static_assert((-(int64_t)1 >> 1) == -1, "the ZO code needs >> of a negative int64 to floor");

/* clamp(c, -(2^24 - 1), 2^24 - 1) */
static inline int32_t hb_zo_coeff(int32_t c) {
    return c > HB_COEFF_LIMIT ? HB_COEFF_LIMIT : c < -HB_COEFF_LIMIT ? -HB_COEFF_LIMIT : c;
}

/* s = 28 - f - U for a master with f fractional bits (biases: f = 0); 12..28 */
static inline uint32_t hb_zo_shift(uint32_t frac, uint32_t unit_shift) {
    return HB_UPDATE_SHIFT - frac - unit_shift;
}

/* Fractional bits f of a weight master (HB_MASTER_*). */
uint32_t hb_zo_master_frac(uint8_t master);

/* Stochastic rounding offset R of element e, in [0, 2^s): half e mod 2 of word e div 2 of
 * stream (seeds[0], 3), tensor t; h >> (16 - s) if s <= 16, else h << (s - 16). */
static inline uint32_t hb_zo_round_offset(hb_stream *rounding, uint32_t e, uint32_t shift) {
    uint32_t h = hb_stream_half(rounding, e);
    return shift <= 16 ? h >> (16 - shift) : h << (shift - 16);
}

/* step = (acc * M + R) >> s: floor (arithmetic shift); |acc M| < 2^56. */
static inline int64_t hb_zo_step(int64_t acc, uint32_t mult, uint32_t shift, uint32_t r) {
    return (acc * (int64_t)mult + (int64_t)r) >> shift;
}

/* clamp(m - step, -limit, limit), in 64 bits */
static inline int64_t hb_zo_sub_clamp(int64_t m, int64_t step, int64_t limit) {
    int64_t v = m - step;
    return v > limit ? limit : v < -limit ? -limit : v;
}

/* The int8 weight of a master with f fractional bits: (m + 2^(f-1)) >> f (m itself if f = 0). */
static inline int8_t hb_zo_weight_of(int32_t m, uint32_t frac) {
    return (int8_t)(frac ? (m + (1 << (frac - 1))) >> frac : m);
}

/* acc[c] += clamp(coeff) * rsym(r[c] * S, 8) for a chunk (int64: |acc| < 2^48 over q <= 510). */
void hb_zo_accumulate(int64_t *acc, const int8_t *r, uint32_t count, uint32_t scale,
                      int32_t coeff);

/* Where one trained tensor's update lands. */
typedef struct {
    uint8_t kind;     /* HB_ZO_WEIGHT / HB_ZO_BIAS (zo/zocf.h) */
    uint8_t master;   /* HB_MASTER_* (weights) */
    uint8_t rounding; /* HB_ROUNDING_* */
    uint32_t shift;   /* s = 28 - f - U */
    void *mst;        /* q16: int32_t[n], int16: int16_t[n]; int8 and biases: NULL */
    uint8_t *data;    /* the tensor in the blob: int8 weights, or little-endian int32 biases */
    hb_stream round;  /* stream (seeds[0], 3), tensor t: stochastic offsets */
} hb_zo_target;

/* The update of elements e0 .. e0+count-1 from their sums acc and Q4 multipliers mult:
 * step = (acc M + R) >> s, m = clamp(m - step, +-LIMIT), then the int8 weight from m
 * (weights; int8 master: the weight is m) or the bias itself (LIMIT 2^30). */
void hb_zo_update_chunk(hb_zo_target *tg, uint32_t e0, uint32_t count, const int64_t *acc,
                        const uint8_t *mult);

#endif /* HB_ZO_UPDATE_H */
