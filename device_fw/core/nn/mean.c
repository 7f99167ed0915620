/* MEAN over H and W, int8: TFLM reference_ops::QuantizedMeanOrSum<int8_t, int32_t> with the
 * 1/count folding precomputed on the host (docs/model-blob.md, opcode 6). Helium: 16
 * channels per pass over the pixels (below). */
#include "hb_nn.h"

void hb_nn_mean_s8(const hb_nn_mean_params *p, const hb_nn_dims *in, const int8_t *x, int8_t *y) {
    const size_t pixels = (size_t)in->h * in->w;
#if HB_NN_MVE
    /* channels in the lanes, 16 per pass (four int32 sums, wrapping as temp_sum does); the
     * int64 step `sum - zp * count` cast to int32 is the wrapping int32 difference; then
     * hb_nn_requant_mve is hb_fp_mbqm, + output_offset and the int8 clamp */
    const int32x4_t mult = vdupq_n_s32(p->multiplier), shift = vdupq_n_s32(p->shift);
    const uint32_t zc = (uint32_t)(uint64_t)((int64_t)p->input_zero_point * (int64_t)p->count);
    for (uint32_t c0 = 0; c0 < in->c; c0 += 16) {
        const uint32_t n = in->c - c0;
        int32x4_t s[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
        mve_pred16_t pr[4];
        for (uint32_t g = 0; g < 4; g++) pr[g] = vctp32q(n > 4 * g ? n - 4 * g : 0);
        const int8_t *xp = x + c0;
        for (size_t i = 0; i < pixels; i++, xp += in->c)
            for (uint32_t g = 0; g < 4; g++)
                s[g] = vaddq_s32(s[g], vldrbq_z_s32(xp + 4 * g, pr[g]));
        for (uint32_t g = 0; g < 4 && 4 * g < n; g++) {
            const int32x4_t d = vreinterpretq_s32_u32(vsubq_n_u32(vreinterpretq_u32_s32(s[g]), zc));
            const int32x4_t v = hb_nn_requant_mve(d, mult, shift, p->output_offset, INT8_MIN,
                                                  INT8_MAX);
            vstrbq_p_s32(y + c0 + 4 * g, v, pr[g]);
        }
    }
#else
    for (uint32_t c = 0; c < in->c; c++) {
        uint32_t sum = 0; /* TFLM's int32 temp_sum */
        for (size_t i = 0; i < pixels; i++) sum += (uint32_t)(int32_t)x[i * in->c + c];
        const int32_t shifted = hb_fp_mean_shifted_sum(hb_fp_wrap32(sum), p->input_zero_point,
                                                       (int64_t)p->count);
        const int32_t v = hb_fp_mbqm(shifted, p->multiplier, p->shift);
        y[c] = hb_fp_clamp8((int64_t)v + p->output_offset, INT8_MIN, INT8_MAX);
    }
#endif
}
