/* DEPTHWISE_CONV_2D, int8: TFLM reference_integer_ops::DepthwiseConvPerChannel
 * (docs/model-blob.md, opcode 3). Output channel oc = ic * D + m reads input channel ic.
 * Output channels outermost: each filter row (the channel's kh*kw taps) is asked for once
 * (hb_nn_rows) and used for every output pixel. */
#include "hb_nn.h"

/* the accumulator of one output pixel of input channel ic: the taps inside the input; tap
 * (ky, kx) of the channel's filter is f[(ky * kw + kx) * step] */
static uint32_t dw_pixel(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                         const int8_t *f, uint32_t step, uint32_t kh, uint32_t kw, int32_t iy0,
                         int32_t ix0, uint32_t ic) {
    uint32_t acc = 0;
    for (uint32_t ky = 0; ky < kh; ky++) {
        const int32_t iy = iy0 + (int32_t)(ky * p->dilation_h);
        if (iy < 0 || iy >= (int32_t)in->h) continue;
        for (uint32_t kx = 0; kx < kw; kx++) {
            const int32_t ix = ix0 + (int32_t)(kx * p->dilation_w);
            if (ix < 0 || ix >= (int32_t)in->w) continue;
            const int32_t xv = x[((size_t)iy * in->w + (size_t)ix) * in->c + ic];
            const int32_t wv = f[((size_t)ky * kw + kx) * step];
            acc += (uint32_t)(wv * (xv + p->input_offset));
        }
    }
    return acc;
}

void hb_nn_depthwise_conv2d_s8(const hb_nn_conv_params *p, const hb_nn_dims *in,
                               const int8_t *x, const hb_nn_rows *f, uint32_t kh, uint32_t kw,
                               int8_t *y) {
    const uint32_t d = p->depth_multiplier;
    const uint32_t out_c = in->c * d;
    for (uint32_t oc = 0; oc < out_c; oc++) {
        const uint32_t ic = oc / d;
        const int8_t *row = f->row(f, oc);
        const int32_t bias = f->bias(f, oc);
        for (uint32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t iy0 = (int32_t)(oy * p->stride_h) - (int32_t)p->pad_top;
            int8_t *out = y + (size_t)oy * p->out_w * out_c + oc;
            for (uint32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t ix0 = (int32_t)(ox * p->stride_w) - (int32_t)p->pad_left;
                const uint32_t acc = dw_pixel(p, in, x, row, f->step, kh, kw, iy0, ix0, ic);
                out[(size_t)ox * out_c] = hb_nn_requant_one(acc, bias, oc, &p->rq, p->output_offset,
                                                            p->act_min, p->act_max);
            }
        }
    }
}
