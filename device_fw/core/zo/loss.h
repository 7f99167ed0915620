/* The Q16 cross-entropy (docs/zo-math.md section 5) with the LOSS section's three tables. */
#ifndef HB_ZO_LOSS_H
#define HB_ZO_LOSS_H

#include <stdint.h>

#include "hb_status.h"

/* The tables, read in place from the section (little-endian): EXP u32[256], LIN i32[256],
 * LN i32[1025]. */
typedef struct {
    const uint8_t *exp, *lin, *ln;
} hb_loss_tables;

/* Check a LOSS section (sec NULL: the blob has none): 0, or -1 with st = (BAD_MODEL, the
 * declared message). */
int hb_loss_load(const uint8_t *sec, uint32_t len, hb_loss_tables *t, hb_status *st);

/* ln_q16(S) for 2^16 <= S < 2^32. */
int64_t hb_loss_ln_q16(const hb_loss_tables *t, uint32_t s);

/* The Q16 loss of n int8 logits for label y (y < n, 1 <= n <= 65535: the caller's contract;
 * a y >= n returns 0 without reading past the logits). */
int64_t hb_loss_item(const hb_loss_tables *t, const int8_t *logits, uint32_t n, uint32_t y);

/* The batch mean (sum + N div 2) div N, floor division, wrapped to int32 like numpy's astype. */
int32_t hb_loss_mean(int64_t sum, uint32_t n);

/* The arg-max logit, the lowest index among ties. */
uint32_t hb_loss_argmax(const int8_t *logits, uint32_t n);

#endif /* HB_ZO_LOSS_H */
