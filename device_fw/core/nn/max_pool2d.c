/* MAX_POOL_2D, int8: TFLM reference_integer_ops::MaxPool (docs/model-blob.md, opcode 5): the
 * largest input under the taps inside the input, clamped. */
#include "hb_nn.h"

void hb_nn_max_pool2d_s8(const hb_nn_pool_params *p, const hb_nn_dims *in, const int8_t *x,
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
                int32_t best = INT8_MIN;
                for (int32_t fy = fy0; fy < fy1; fy++) {
                    for (int32_t fx = fx0; fx < fx1; fx++) {
                        const int32_t v = x[((size_t)(y0 + fy) * in->w + (size_t)(x0 + fx)) * in->c + c];
                        if (v > best) best = v;
                    }
                }
                y[((size_t)oy * p->out_w + ox) * in->c + c] = hb_fp_clamp8(best, p->act_min, p->act_max);
            }
        }
    }
}
