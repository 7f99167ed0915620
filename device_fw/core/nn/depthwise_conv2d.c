/* DEPTHWISE_CONV_2D, int8: TFLM reference_integer_ops::DepthwiseConvPerChannel
 * (docs/model-blob.md, opcode 3). Output channel oc = ic * D + m reads input channel ic. */
#include "hb_nn.h"

/* the accumulator of output channel oc at one output pixel: the taps inside the input */
static uint32_t dw_pixel(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                         const int8_t *f, uint32_t kh, uint32_t kw, int32_t iy0, int32_t ix0,
                         uint32_t ic, uint32_t oc, uint32_t out_c) {
    uint32_t acc = 0;
    for (uint32_t ky = 0; ky < kh; ky++) {
        const int32_t iy = iy0 + (int32_t)(ky * p->dilation_h);
        if (iy < 0 || iy >= (int32_t)in->h) continue;
        for (uint32_t kx = 0; kx < kw; kx++) {
            const int32_t ix = ix0 + (int32_t)(kx * p->dilation_w);
            if (ix < 0 || ix >= (int32_t)in->w) continue;
            const int32_t xv = x[((size_t)iy * in->w + (size_t)ix) * in->c + ic];
            const int32_t wv = f[((size_t)ky * kw + kx) * out_c + oc];
            acc += (uint32_t)(wv * (xv + p->input_offset));
        }
    }
    return acc;
}

void hb_nn_depthwise_conv2d_s8(const hb_nn_conv_params *p, const hb_nn_dims *in,
                               const int8_t *x, const int8_t *filter, uint32_t kh, uint32_t kw,
                               const uint8_t *bias, int8_t *y) {
    const uint32_t d = p->depth_multiplier;
    const uint32_t out_c = in->c * d;
    for (uint32_t oy = 0; oy < p->out_h; oy++) {
        const int32_t iy0 = (int32_t)(oy * p->stride_h) - (int32_t)p->pad_top;
        for (uint32_t ox = 0; ox < p->out_w; ox++) {
            const int32_t ix0 = (int32_t)(ox * p->stride_w) - (int32_t)p->pad_left;
            int8_t *out = y + ((size_t)oy * p->out_w + ox) * out_c;
            for (uint32_t ic = 0; ic < in->c; ic++) {
                for (uint32_t m = 0; m < d; m++) {
                    const uint32_t oc = ic * d + m;
                    const uint32_t acc = dw_pixel(p, in, x, filter, kh, kw, iy0, ix0, ic, oc, out_c);
                    out[oc] = hb_nn_requant_one(acc, bias, oc, &p->rq, p->output_offset,
                                                p->act_min, p->act_max);
                }
            }
        }
    }
}
