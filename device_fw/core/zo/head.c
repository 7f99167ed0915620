/* The hybrid's exact head: gradient sums and update (hilbench/zo/head.py). */
#include "zo/head.h"

#include "hb_bytes.h"
#include "hb_zo.h"
#include "zo/philox.h"

void hb_head_accumulate(const hb_loss_tables *t, const int8_t *logits, uint32_t m, uint32_t y,
                        const int8_t *x, uint32_t k, int32_t offset, int32_t *g, int32_t *b) {
    int32_t lmax = logits[0];
    for (uint32_t j = 1; j < m; j++)
        if (logits[j] > lmax) lmax = logits[j];
    uint64_t s = 0; /* S < 2^32 (docs/zo-math.md section 5) */
    for (uint32_t j = 0; j < m; j++) s += hb_rd32(t->exp + 4u * (uint32_t)(lmax - logits[j]));
    for (uint32_t j = 0; j < m; j++) {
        uint64_t e = hb_rd32(t->exp + 4u * (uint32_t)(lmax - logits[j]));
        int32_t p = (int32_t)(((e << HB_HEAD_GRAD_FRAC) + s / 2u) / s); /* 0..2^15 */
        if (j == y) p -= 1 << HB_HEAD_GRAD_FRAC;
        b[j] += p;
        int32_t *row = g + (uint64_t)j * k;
        for (uint32_t i = 0; i < k; i++) row[i] += p * ((int32_t)x[i] + offset);
    }
}

/* the offset R in [0, 2^shift) from a 16-bit half h (as APPLY's, docs/zo-math.md section 4) */
static int64_t offset_of(uint32_t h, uint32_t shift) {
    return shift <= 16 ? (int64_t)(h >> (16 - shift)) : (int64_t)h << (shift - 16);
}

static int64_t clamp64(int64_t v, int64_t limit) {
    return v > limit ? limit : v < -limit ? -limit : v;
}

void hb_head_update(int8_t *w, uint8_t *bias, uint32_t m, uint32_t k, const int32_t *g,
                    const int32_t *b, const uint8_t *rates, uint32_t bias_gain,
                    uint32_t round_seed) {
    hb_stream rs;
    hb_philox_stream_init(&rs, round_seed, HB_STREAM_ROUNDING, HB_HEAD_TENSOR);
    uint32_t e = 0;
    for (uint32_t j = 0; j < m; j++) {
        int64_t r = hb_rdi32(rates + 4u * j);
        for (uint32_t i = 0; i < k; i++, e++) {
            uint64_t at = (uint64_t)j * k + i;
            int64_t step = ((int64_t)g[at] * r + offset_of(hb_stream_half(&rs, e), HB_HEAD_SHIFT)) >>
                           HB_HEAD_SHIFT;
            w[at] = (int8_t)clamp64((int64_t)w[at] - step, HB_WEIGHT_LIMIT);
        }
    }
    if (!bias) return;
    const uint32_t s = HB_HEAD_SHIFT - bias_gain;
    for (uint32_t j = 0; j < m; j++, e++) {
        int64_t r = hb_rdi32(rates + 4u * j);
        int64_t step = ((int64_t)b[j] * r + offset_of(hb_stream_half(&rs, e), s)) >> s;
        int64_t v = clamp64((int64_t)hb_rdi32(bias + 4u * j) - step, HB_BIAS_LIMIT);
        hb_wr32(bias + 4u * j, (uint32_t)v); /* |v| <= 2^30 */
    }
}
