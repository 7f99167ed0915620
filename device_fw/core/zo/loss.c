/* Q16 cross-entropy of int8 logits from the LOSS tables (hilbench/zo/loss.py). */
#include "zo/loss.h"

#include <stddef.h>

#include "hb_bytes.h"
#include "hb_mve.h"
#include "hb_wire.h"
#include "hb_zo.h"

int hb_loss_load(const uint8_t *sec, uint32_t len, hb_loss_tables *t, hb_status *st) {
    if (!sec) return HB_FAIL0(st, HB_ERR_BAD_MODEL, HB_MSG_LOSS_MISSING);
    if (len != HB_LOSS_SECTION_BYTES)
        return HB_FAIL(st, HB_ERR_BAD_MODEL, HB_MSG_LOSS_SIZE, HB_I(len),
                       HB_I(HB_LOSS_SECTION_BYTES));
    t->exp = sec;
    t->lin = sec + 4u * HB_EXP_SIZE;
    t->ln = sec + 8u * HB_EXP_SIZE;
    uint32_t e0 = hb_rd32(t->exp);
    if (e0 != HB_LOSS_Q16)
        return HB_FAIL(st, HB_ERR_BAD_MODEL, HB_MSG_LOSS_EXP0, HB_I(e0), HB_I(HB_LOSS_Q16));
    for (uint32_t k = 1; k < HB_EXP_SIZE; k++) {
        uint32_t prev = hb_rd32(t->exp + 4u * (k - 1)), cur = hb_rd32(t->exp + 4u * k);
        if (cur > prev)
            return HB_FAIL(st, HB_ERR_BAD_MODEL, HB_MSG_LOSS_EXP_RISING, HB_I(k), HB_I(cur),
                           HB_I(k - 1), HB_I(prev));
    }
    return 0;
}

static inline int64_t ln_q16(const hb_loss_tables *t, uint32_t s) {
    const uint32_t b = 31u - (uint32_t)__builtin_clz(s); /* floor(log2 S), 16..31 (S > 0) */
    uint32_t norm = s << (31 - b);               /* in [2^31, 2^32) */
    uint32_t frac = norm - (1u << 31);
    uint32_t idx = frac >> (31 - HB_LN_BITS);
    uint32_t rem = frac & ((1u << (31 - HB_LN_BITS)) - 1u);
    int64_t lo = hb_rdi32(t->ln + 4u * idx), hi = hb_rdi32(t->ln + 4u * (idx + 1));
    /* (hi - lo) * rem < 2^33 * 2^21: int64; >> floors like Python's */
    const int64_t half = (int64_t)1 << (30 - HB_LN_BITS);
    int64_t interp = ((hi - lo) * (int64_t)rem + half) >> (31 - HB_LN_BITS);
    return ((int64_t)b - 16) * HB_LN2_Q16 + lo + interp;
}

int64_t hb_loss_item(const hb_loss_tables *t, const int8_t *logits, uint32_t n, uint32_t y) {
    if (y >= n) return 0;
#if HB_NN_MVE
    /* sixteen logits per max, four EXP entries per gather (the table in place, if aligned):
     * the same max and the same u32 sum */
    if (((uintptr_t)t->exp & 3u) == 0) {
        int8_t vmax = INT8_MIN;
        for (uint32_t j = 0; j < n; j += 16)
            vmax = vmaxvq_p_s8(vmax, vldrbq_z_s8(logits + j, vctp8q(n - j)), vctp8q(n - j));
        const int32x4_t top = vdupq_n_s32(vmax);
        const uint32_t *exp = (const uint32_t *)(const void *)t->exp;
        uint32_t sv = 0;
        for (uint32_t j = 0; j < n; j += 4) {
            const mve_pred16_t live = vctp32q(n - j);
            const uint32x4_t idx =
                vreinterpretq_u32_s32(vsubq_s32(top, vldrbq_z_s32(logits + j, live)));
            sv = vaddvaq_p_u32(sv, vldrwq_gather_shifted_offset_z_u32(exp, idx, live), live);
        }
        const int64_t lin = hb_rdi32(t->lin + 4u * (uint32_t)(vmax - logits[y]));
        return lin + ln_q16(t, sv);
    }
#endif
    int32_t lmax = logits[0];
    for (uint32_t j = 1; j < n; j++)
        if (logits[j] > lmax) lmax = logits[j];
    uint32_t s = 0; /* each EXP <= EXP[0] = 2^16, n <= 65535: S < 2^32 */
    for (uint32_t j = 0; j < n; j++) s += hb_rd32(t->exp + 4u * (uint32_t)(lmax - logits[j]));
    int64_t lin = hb_rdi32(t->lin + 4u * (uint32_t)(lmax - logits[y]));
    return lin + ln_q16(t, s);
}

int64_t hb_loss_ln_q16(const hb_loss_tables *t, uint32_t s) { return ln_q16(t, s); }

/* floor(a / b) for b > 0 (C's / truncates toward zero) */
static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

int32_t hb_loss_mean(int64_t sum, uint32_t n) {
    int64_t m = floor_div(sum + (int64_t)(n / 2), (int64_t)n);
    uint32_t u = (uint32_t)(uint64_t)m; /* two's complement wrap, no implementation-defined cast */
    return u <= INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}

uint32_t hb_loss_argmax(const int8_t *logits, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t j = 1; j < n; j++)
        if (logits[j] > logits[best]) best = j;
    return best;
}
