/* MEAN over H and W, int8: TFLM reference_ops::QuantizedMeanOrSum<int8_t, int32_t> with the
 * 1/count folding precomputed on the host (docs/model-blob.md, opcode 6). */
#include "hb_nn.h"

void hb_nn_mean_s8(const hb_nn_mean_params *p, const hb_nn_dims *in, const int8_t *x, int8_t *y) {
    const size_t pixels = (size_t)in->h * in->w;
    for (uint32_t c = 0; c < in->c; c++) {
        uint32_t sum = 0; /* TFLM's int32 temp_sum */
        for (size_t i = 0; i < pixels; i++) sum += (uint32_t)(int32_t)x[i * in->c + c];
        const int32_t shifted = hb_fp_mean_shifted_sum(hb_fp_wrap32(sum), p->input_zero_point,
                                                       (int64_t)p->count);
        const int32_t v = hb_fp_mbqm(shifted, p->multiplier, p->shift);
        y[c] = hb_fp_clamp8((int64_t)v + p->output_offset, INT8_MIN, INT8_MAX);
    }
}
