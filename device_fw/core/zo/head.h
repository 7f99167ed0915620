/* The hybrid's exact head (docs/zo-math.md section 11, hilbench/zo/head.py): the integer
 * gradient of the last FULLY_CONNECTED layer under the Q16 cross-entropy, and its update with
 * stochastic rounding. */
#ifndef HB_ZO_HEAD_H
#define HB_ZO_HEAD_H

#include <stdint.h>

#include "zo/loss.h"

#define HB_HEAD_GRAD_FRAC 15u /* softmax probabilities and e_j in Q15 */
#define HB_HEAD_RATE_FRAC 24u /* the per-channel rates in Q24 */
#define HB_HEAD_SHIFT (HB_HEAD_GRAD_FRAC + HB_HEAD_RATE_FRAC) /* 39 */
#define HB_HEAD_TENSOR 255u /* the rounding stream's tensor: no ZOCF entry has it */

/* One item: e_j = p_j - 2^15 [j = y] from its m int8 logits (y < m), then g[j k + i] +=
 * e_j (x_i + offset) and b[j] += e_j over its k int8 head inputs x. int32 sums: |e_j| <=
 * 2^15, |x_i + offset| <= 255, so 256 items sum below 2^31. */
void hb_head_accumulate(const hb_loss_tables *t, const int8_t *logits, uint32_t m, uint32_t y,
                        const int8_t *x, uint32_t k, int32_t offset, int32_t *g, int32_t *b);

/* The update of the m x k int8 weights w and the m little-endian int32 biases (NULL: none)
 * from the sums g, b with the m little-endian Q24 rates, the bias gain (0..24) and the
 * rounding stream (round_seed, 3), tensor HB_HEAD_TENSOR. */
void hb_head_update(int8_t *w, uint8_t *bias, uint32_t m, uint32_t k, const int32_t *g,
                    const int32_t *b, const uint8_t *rates, uint32_t bias_gain,
                    uint32_t round_seed);

#endif /* HB_ZO_HEAD_H */
