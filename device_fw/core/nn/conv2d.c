/* CONV_2D, int8: TFLM reference_integer_ops::ConvPerChannel (docs/model-blob.md, opcode 2).
 * Padded taps contribute nothing; per-tensor requantization is the per-channel kernel with
 * one multiplier for every channel. Output channels outermost: each filter row is asked for
 * once (hb_nn_rows) and used for every output pixel. */
#include "hb_nn.h"

/* the accumulator of one output pixel and channel: the taps inside the input; f is the
 * channel's filter [kh][kw][in->c] */
static uint32_t conv_pixel(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                           const int8_t *f, uint32_t kh, uint32_t kw, int32_t iy0, int32_t ix0) {
    uint32_t acc = 0;
    for (uint32_t ky = 0; ky < kh; ky++) {
        const int32_t iy = iy0 + (int32_t)(ky * p->dilation_h);
        if (iy < 0 || iy >= (int32_t)in->h) continue;
        for (uint32_t kx = 0; kx < kw; kx++) {
            const int32_t ix = ix0 + (int32_t)(kx * p->dilation_w);
            if (ix < 0 || ix >= (int32_t)in->w) continue;
            const int8_t *xs = x + ((size_t)iy * in->w + (size_t)ix) * in->c;
            const int8_t *fs = f + ((size_t)ky * kw + kx) * in->c;
            acc += hb_nn_dot_s8(fs, xs, p->input_offset, in->c);
        }
    }
    return acc;
}

void hb_nn_conv2d_s8(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                     const hb_nn_rows *f, uint32_t kh, uint32_t kw, uint32_t out_c, int8_t *y) {
    for (uint32_t oc = 0; oc < out_c; oc++) {
        const int8_t *row = f->row(f, oc);
        const int32_t bias = f->bias(f, oc);
        for (uint32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t iy0 = (int32_t)(oy * p->stride_h) - (int32_t)p->pad_top;
            int8_t *out = y + (size_t)oy * p->out_w * out_c + oc;
            for (uint32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t ix0 = (int32_t)(ox * p->stride_w) - (int32_t)p->pad_left;
                const uint32_t acc = conv_pixel(p, in, x, row, kh, kw, iy0, ix0);
                out[(size_t)ox * out_c] = hb_nn_requant_one(acc, bias, oc, &p->rq, p->output_offset,
                                                            p->act_min, p->act_max);
            }
        }
    }
}
