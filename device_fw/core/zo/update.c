/* The integer update: accumulation, rounding, the three masters and the biases
 * (docs/zo-math.md section 4). */
#include "zo/update.h"

#include "hb_bytes.h"
#include "zo/perturb.h"
#include "zo/zocf.h"

uint32_t hb_zo_master_frac(uint8_t master) {
    return master == HB_MASTER_Q16     ? HB_MASTER_Q16_FRAC
           : master == HB_MASTER_INT16 ? HB_MASTER_INT16_FRAC
                                       : HB_MASTER_INT8_FRAC;
}

void hb_zo_accumulate(int64_t *acc, const int8_t *r, uint32_t count, uint32_t scale,
                      int32_t coeff) {
    int64_t c = hb_zo_coeff(coeff);
    for (uint32_t i = 0; i < count; i++) acc[i] += c * hb_zo_unit(r[i], scale);
}

void hb_zo_update_chunk(hb_zo_target *tg, uint32_t e0, uint32_t count, const int64_t *acc,
                        const uint8_t *mult) {
    const uint32_t s = tg->shift;
    int8_t *w = (int8_t *)tg->data;
    const uint32_t half = 1u << (s - 1);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t e = e0 + i;
        uint32_t r = tg->rounding == HB_ROUNDING_STOCHASTIC ? hb_zo_round_offset(&tg->round, e, s)
                                                            : half;
        int64_t step = hb_zo_step(acc[i], mult[i], s, r);
        if (tg->kind == HB_ZO_BIAS) {
            int64_t b = hb_zo_sub_clamp(hb_rdi32(tg->data + 4u * e), step, HB_BIAS_LIMIT);
            hb_wr32(tg->data + 4u * e, (uint32_t)b); /* |b| <= 2^30: the value itself */
        } else if (tg->master == HB_MASTER_Q16) {
            int32_t *m = (int32_t *)tg->mst;
            const int64_t lim = (int64_t)HB_WEIGHT_LIMIT << HB_MASTER_Q16_FRAC;
            m[e] = (int32_t)hb_zo_sub_clamp(m[e], step, lim);
            w[e] = hb_zo_weight_of(m[e], HB_MASTER_Q16_FRAC);
        } else if (tg->master == HB_MASTER_INT16) {
            int16_t *m = (int16_t *)tg->mst;
            const int64_t lim = (int64_t)HB_WEIGHT_LIMIT << HB_MASTER_INT16_FRAC;
            m[e] = (int16_t)hb_zo_sub_clamp(m[e], step, lim);
            w[e] = hb_zo_weight_of(m[e], HB_MASTER_INT16_FRAC);
        } else {
            w[e] = (int8_t)hb_zo_sub_clamp(w[e], step, HB_WEIGHT_LIMIT);
        }
    }
}
