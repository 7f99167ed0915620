/* AVERAGE_POOL_2D, int8: TFLM reference_integer_ops::AveragePool (docs/model-blob.md,
 * opcode 4): the sum of the taps inside the input over their count, rounded half away from
 * zero with C's truncating division, clamped. The blob check guarantees count >= 1. */
#include "hb_nn.h"

void hb_nn_average_pool2d_s8(const hb_nn_pool_params *p, const hb_nn_dims *in, const int8_t *x,
                             int8_t *y) {
    for (uint32_t oy = 0; oy < p->out_h; oy++) {
        const int32_t y0 = (int32_t)(oy * p->stride_h) - (int32_t)p->pad_top;
        const int32_t fy0 = y0 < 0 ? -y0 : 0;
        const int32_t fy1 = (int32_t)in->h - y0 < (int32_t)p->filter_h ? (int32_t)in->h - y0
                                                                         : (int32_t)p->filter_h;
        for (uint32_t ox = 0; ox < p->out_w; ox++) {
            const int32_t x0 = (int32_t)(ox * p->stride_w) - (int32_t)p->pad_left;
            const int32_t fx0 = x0 < 0 ? -x0 : 0;
            const int32_t fx1 = (int32_t)in->w - x0 < (int32_t)p->filter_w
                                    ? (int32_t)in->w - x0
                                    : (int32_t)p->filter_w;
            for (uint32_t c = 0; c < in->c; c++) {
                int32_t acc = 0, count = 0;
                for (int32_t fy = fy0; fy < fy1; fy++) {
                    for (int32_t fx = fx0; fx < fx1; fx++) {
                        acc += x[((size_t)(y0 + fy) * in->w + (size_t)(x0 + fx)) * in->c + c];
                        count++;
                    }
                }
                acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
                y[((size_t)oy * p->out_w + ox) * in->c + c] = hb_fp_clamp8(acc, p->act_min, p->act_max);
            }
        }
    }
}
