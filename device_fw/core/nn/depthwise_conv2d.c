/* DEPTHWISE_CONV_2D, int8: TFLM reference_integer_ops::DepthwiseConvPerChannel
 * (docs/model-blob.md, opcode 3). Output channel oc = ic * D + m reads input channel ic.
 * Output channels outermost: each filter row (the channel's kh*kw taps) is asked for once
 * (hb_nn_rows) and used for every output pixel.
 *
 * Helium: channels in the lanes, CMSIS-NN's arm_depthwise_conv_s8_opt layout. A block of up
 * to 16 output channels takes its rows one after another, as the row contract says, copying
 * each row's taps into a tap-major buffer (tap t of block channel l at taps[t][l]; only the
 * taps some output pixel uses); then, pixel by pixel, four channels per vector: for each tap
 * inside the input, the four channels' inputs (contiguous when D = 1, gathered otherwise)
 * times their weights, added to int32 lanes. The input offset: interior pixels (every tap
 * inside) start from bias + input_offset * sum w; the others add sum w over their own taps.
 * Filters of more than HB_NN_DW_MAX_TAPS taps go one channel at a time, read in place. */
#include "hb_nn.h"

#if HB_NN_MVE
#include <string.h>

#define HB_NN_DW_MAX_TAPS 64u /* taps per channel the copy buffer holds (16 x 64 bytes) */
#define HB_NN_DW_BLOCK 16u    /* channels per block: four vectors */

/* The taps [*lo, *hi) that some output position 0..out-1 uses (origin o = pos * s - pad). */
static void taps_used(uint32_t out, uint32_t s, uint32_t pad, uint32_t d, uint32_t k,
                      uint32_t size, uint32_t *lo, uint32_t *hi) {
    uint32_t a = k, b = 0;
    for (uint32_t i = 0; i < out; i++) {
        uint32_t l, h;
        hb_nn_taps_inside((int32_t)(i * s) - (int32_t)pad, d, k, size, &l, &h);
        if (l < h && l < a) a = l;
        if (l < h && h > b) b = h;
    }
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* the taps [y0, y1) x [x0, x1) some output pixel uses */
typedef struct {
    uint32_t y0, y1, x0, x1;
} tap_box;

/* Copy the used taps of block channel l's row r (entries step apart) into buf (tap t at
 * buf[t * HB_NN_DW_BLOCK + l]) and add them to wsum[l]. */
static void copy_taps(const int8_t *r, uint32_t step, uint32_t l, const tap_box *u, uint32_t kw,
                      int8_t *buf, int32_t *wsum) {
    for (uint32_t ky = u->y0; ky < u->y1; ky++)
        for (uint32_t kx = u->x0; kx < u->x1; kx++) {
            const uint32_t t = ky * kw + kx;
            const int8_t v = r[(size_t)t * step];
            buf[t * HB_NN_DW_BLOCK + l] = v;
            wsum[l] += v;
        }
}

/* One output pixel of four channels (the group's lanes under pred): acc + the sum over its
 * taps [ky0,ky1) x [kx0,kx1) of x * w, and *sumw + the sum of their w. xp: the input of tap
 * (ky0, kx0) (lanes contiguous when D = 1, else gathered at xo), the next tap x_col bytes on,
 * the next tap row x_row bytes on; wp: the weights of tap (ky0, kx0), tap (ky, kx) at
 * ((ky - ky0) * kw + kx - kx0) * wts from it. */
static inline int32x4_t dw_taps(const int8_t *xp, uint32x4_t xo, int contiguous,
                                const int8_t *wp, uint32_t wts, uint32_t kw, uint32_t rows,
                                uint32_t cols, size_t x_row, size_t x_col, mve_pred16_t pred,
                                int32x4_t acc, int32x4_t *sumw) {
    int32x4_t s = *sumw;
    for (uint32_t ky = 0; ky < rows; ky++) {
        const int8_t *xs = xp, *ws = wp;
        for (uint32_t kx = 0; kx < cols; kx++) {
            const int32x4_t xv = contiguous ? vldrbq_z_s32(xs, pred)
                                            : vldrbq_gather_offset_z_s32(xs, xo, pred);
            const int32x4_t wv = vldrbq_z_s32(ws, pred);
            acc = vaddq_s32(acc, vmulq_s32(xv, wv));
            s = vaddq_s32(s, wv);
            xs += x_col;
            ws += wts;
        }
        if (ky + 1 < rows) { /* no pointer past the input after the last row */
            xp += x_row;
            wp += (size_t)kw * wts;
        }
    }
    *sumw = s;
    return acc;
}

/* Where block channel l sits in the padded plane's and the taps' 16 bytes: interleaved so
 * that VMULLB / VMULLT on the int16-widened halves give channels 0-3, 4-7 (8-11, 12-15) in
 * order: channel l < 4 at 2l, 4 <= l < 8 at 2(l - 4) + 1, the same again from 8. */
static inline uint32_t dw_pos(uint32_t l) {
    const uint32_t h = l & 8u, i = l & 7u;
    return h + (i < 4 ? 2 * i : 2 * (i - 4) + 1);
}

/* one group's requantization, hoisted: hb_nn_requant_mve with the shift already split */
typedef struct {
    int32x4_t mult, left, right, lo, hi;
    int32_t out_off;
    mve_pred16_t pred;
} dw_group;

static inline void dw_store(int8_t *out, int32x4_t acc, const dw_group *k) {
    int32x4_t v = vqrdmulhq_s32(vshlq_s32(acc, k->left), k->mult);
    v = vrshlq_s32(vqaddq_s32(v, vshrq_n_s32(vandq_s32(v, k->right), 31)), k->right);
    v = vminq_s32(vmaxq_s32(vqaddq_n_s32(v, k->out_off), k->lo), k->hi);
    vstrbq_p_s32(out, v, k->pred);
}

/* The padded path: a block of up to 16 output channels at a time, their inputs copied into a
 * padded plane [hp][wp][16] of hb_nn_scratch (block channel l: input channel (oc0 + l) / D,
 * at byte dw_pos(l); -input_offset outside the input, so every tap of every pixel counts and
 * x + input_offset is 0 there), the block's taps into buf[t][16] in the same order, 8
 * channels per int16 multiply (VMULLB / VMULLT into int32 lanes). Then each pixel is
 * start + sum over its taps of x * w, start = bias + input_offset * (the channel's whole
 * weight sum), four vectors of four channels; lanes past the block are computed and not
 * stored. Not inlined: its registers are its own (inlined, the caller's state spills into its
 * tap loop: 10% more instructions). */
__attribute__((noinline)) static void dw_padded(const hb_nn_conv_params *p, const hb_nn_dims *in,
                                                const int8_t *x, const hb_nn_rows *f, uint32_t kh,
                                                uint32_t kw, uint32_t hp, uint32_t wp, int8_t *y) {
    const uint32_t d = p->depth_multiplier, c = in->c, out_c = c * d, taps = kh * kw;
    const int8_t fill = (int8_t)-p->input_offset;
    int8_t *pad = hb_nn_scratch;
    _Alignas(16) int8_t buf[HB_NN_DW_MAX_TAPS * HB_NN_DW_BLOCK];
    uint32_t toff[HB_NN_DW_MAX_TAPS]; /* tap t's offset from a pixel's first tap */
    for (uint32_t ky = 0; ky < kh; ky++)
        for (uint32_t kx = 0; kx < kw; kx++)
            toff[ky * kw + kx] = (ky * p->dilation_h * wp + kx * p->dilation_w) * HB_NN_DW_BLOCK;
    const tap_box all = {0, kh, 0, kw};
    const size_t px_step = (size_t)p->stride_w * HB_NN_DW_BLOCK;
    const size_t oy_step = (size_t)p->stride_h * wp * HB_NN_DW_BLOCK;
    for (uint32_t oc0 = 0; oc0 < out_c; oc0 += HB_NN_DW_BLOCK) {
        const uint32_t n = out_c - oc0 < HB_NN_DW_BLOCK ? out_c - oc0 : HB_NN_DW_BLOCK;
        _Alignas(16) int32_t bias[HB_NN_DW_BLOCK] = {0}, wsum[HB_NN_DW_BLOCK] = {0};
        int32_t wsum_pos[HB_NN_DW_BLOCK] = {0};
        hb_nn_fill_mve(buf, 0, (size_t)taps * HB_NN_DW_BLOCK);
        for (uint32_t l = 0; l < n; l++) {
            copy_taps(f->row(f, oc0 + l), f->step, dw_pos(l), &all, kw, buf, wsum_pos);
            bias[l] = f->bias(f, oc0 + l);
            wsum[l] = wsum_pos[dw_pos(l)];
        }
        /* the padded plane of the block's inputs */
        hb_nn_fill_mve(pad, fill, (size_t)hp * wp * HB_NN_DW_BLOCK);
        const uint32_t ic0 = oc0 / d;
        uint8_t pos_b[HB_NN_DW_BLOCK];
        for (uint32_t l = 0; l < HB_NN_DW_BLOCK; l++) pos_b[l] = (uint8_t)dw_pos(l);
        const uint8x16_t pos = vldrbq_u8(pos_b);
        for (uint32_t iy = 0; iy < in->h; iy++) {
            const int8_t *src = x + (size_t)iy * in->w * c + ic0;
            int8_t *dst = pad + ((size_t)(iy + p->pad_top) * wp + p->pad_left) * HB_NN_DW_BLOCK;
            for (uint32_t ix = 0; ix < in->w; ix++, src += c, dst += HB_NN_DW_BLOCK) {
                if (d == 1) {
                    vstrbq_scatter_offset_p_s8(dst, pos, vldrbq_z_s8(src, vctp8q(n)), vctp8q(n));
                } else {
                    for (uint32_t l = 0; l < n; l++) dst[dw_pos(l)] = src[(oc0 + l) / d - ic0];
                }
            }
        }
        /* per group: the multipliers, the shifts split into the left and the right part
         * (hb_nn_requant_mve's first steps, done once per block), the start */
        dw_group k[4];
        int32x4_t start[4];
        for (uint32_t g = 0; g < 4; g++) {
            const uint32_t active = n > 4 * g ? (n - 4 * g < 4 ? n - 4 * g : 4) : 0;
            const hb_nn_rq_mve rq = hb_nn_rq_lanes_mve(p->rq.mult, p->rq.shift, p->rq.n,
                                                       active ? oc0 + 4 * g : oc0,
                                                       active ? active : 1);
            k[g].mult = rq.mult;
            k[g].left = vmaxq_s32(rq.shift, vdupq_n_s32(0));
            k[g].right = vminq_s32(rq.shift, vdupq_n_s32(0));
            k[g].lo = vdupq_n_s32(p->act_min);
            k[g].hi = vdupq_n_s32(p->act_max);
            k[g].out_off = p->output_offset;
            k[g].pred = vctp32q(active); /* 0: a group past the block, nothing stored */
            start[g] = vmlaq_n_s32(vld1q_s32(bias + 4 * g), vld1q_s32(wsum + 4 * g),
                                   p->input_offset);
        }
        for (uint32_t oy = 0; oy < p->out_h; oy++) {
            const int8_t *xrow = pad + oy * oy_step;
            int8_t *out = y + (size_t)oy * p->out_w * out_c + oc0;
            for (uint32_t ox = 0; ox < p->out_w; ox++, out += out_c) {
                const int8_t *xp = xrow + ox * px_step;
                int32x4_t a0 = start[0], a1 = start[1], a2 = start[2], a3 = start[3];
                const int8_t *wt = buf;
                for (uint32_t t = 0; t < taps; t++, wt += HB_NN_DW_BLOCK) {
                    /* int16 lanes in the interleaved order: the bottom products are channels
                     * 0-3 (8-11), the top ones 4-7 (12-15) */
                    const int8_t *xt = xp + toff[t];
                    const int16x8_t xl = vldrbq_s16(xt), wl = vldrbq_s16(wt);
                    const int16x8_t xh = vldrbq_s16(xt + 8), wh = vldrbq_s16(wt + 8);
                    a0 = vaddq_s32(a0, vmullbq_int_s16(xl, wl));
                    a1 = vaddq_s32(a1, vmulltq_int_s16(xl, wl));
                    a2 = vaddq_s32(a2, vmullbq_int_s16(xh, wh));
                    a3 = vaddq_s32(a3, vmulltq_int_s16(xh, wh));
                }
                dw_store(out, a0, &k[0]);
                dw_store(out + 4, a1, &k[1]);
                dw_store(out + 8, a2, &k[2]);
                dw_store(out + 12, a3, &k[3]);
            }
        }
    }
}
#endif

#if !HB_NN_MVE
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
#endif

void hb_nn_depthwise_conv2d_s8(const hb_nn_conv_params *p, const hb_nn_dims *in,
                               const int8_t *x, const hb_nn_rows *f, uint32_t kh, uint32_t kw,
                               int8_t *y) {
#if HB_NN_MVE
    {
        const uint32_t need_h = (p->out_h - 1) * p->stride_h + (kh - 1) * p->dilation_h + 1;
        const uint32_t need_w = (p->out_w - 1) * p->stride_w + (kw - 1) * p->dilation_w + 1;
        const uint32_t hp = need_h > in->h + p->pad_top ? need_h : in->h + p->pad_top;
        const uint32_t wp = need_w > in->w + p->pad_left ? need_w : in->w + p->pad_left;
        /* worth its setup (the plane, the taps copied per block) from 8 output pixels on;
         * smaller maps keep the rows where they are */
        if (p->out_h * p->out_w >= 8 && p->input_offset >= -127 && p->input_offset <= 128 &&
            kh * kw <= HB_NN_DW_MAX_TAPS &&
            (uint64_t)hp * wp * HB_NN_DW_BLOCK <= HB_NN_SCRATCH_BYTES) {
            dw_padded(p, in, x, f, kh, kw, hp, wp, y);
            return;
        }
    }
    const uint32_t d = p->depth_multiplier, c = in->c, out_c = c * d, taps = kh * kw;
    const size_t x_col = (size_t)c * p->dilation_w, x_row = (size_t)in->w * c * p->dilation_h;
    /* the taps any output pixel uses: only those are copied */
    uint32_t uy0, uy1, ux0, ux1;
    taps_used(p->out_h, p->stride_h, p->pad_top, p->dilation_h, kh, in->h, &uy0, &uy1);
    taps_used(p->out_w, p->stride_w, p->pad_left, p->dilation_w, kw, in->w, &ux0, &ux1);
    const tap_box used = {uy0, uy1, ux0, ux1};
    const int copy = taps <= HB_NN_DW_MAX_TAPS;
    int8_t buf[HB_NN_DW_MAX_TAPS * HB_NN_DW_BLOCK];
    const uint32x4_t lanes = vidupq_n_u32(0, 1); /* 0, 1, 2, 3 */
    for (uint32_t oc0 = 0; oc0 < out_c;) {
        /* the block: n channels oc0.., in ceil(n / 4) groups of four lanes */
        const uint32_t n = !copy ? 1 : out_c - oc0 < HB_NN_DW_BLOCK ? out_c - oc0 : HB_NN_DW_BLOCK;
        const uint32_t groups = (n + 3) / 4;
        int32_t bias[HB_NN_DW_BLOCK] = {0}, wsum[HB_NN_DW_BLOCK] = {0};
        const int8_t *wb; /* tap t of block channel l at wb[t * wts + l] */
        uint32_t wts;
        int in_place = 0; /* wb is the filter itself: sum w per group below */
        if (copy) {
            /* rows read in place (step > 1) stay valid: when they are the filter's consecutive
             * columns, the block's taps are read where they are; else copied into buf */
            const int8_t *r0 = NULL;
            in_place = f->step > 1;
            for (uint32_t l = 0; l < n; l++) {
                const int8_t *r = f->row(f, oc0 + l);
                if (l == 0) r0 = r;
                if (in_place && r != r0 + l) {
                    in_place = 0;
                    for (uint32_t j = 0; j < l; j++)
                        copy_taps(r0 + j, f->step, j, &used, kw, buf, wsum);
                }
                if (!in_place) copy_taps(r, f->step, l, &used, kw, buf, wsum);
                bias[l] = f->bias(f, oc0 + l);
            }
            wb = in_place ? r0 : buf;
            wts = in_place ? f->step : HB_NN_DW_BLOCK;
        } else {
            wb = f->row(f, oc0);
            wts = f->step;
            bias[0] = f->bias(f, oc0);
            for (uint32_t ky = uy0; ky < uy1; ky++)
                for (uint32_t kx = ux0; kx < ux1; kx++) wsum[0] += wb[(size_t)(ky * kw + kx) * wts];
        }
        /* per group: lanes, requantization, the interior start (bias + offset * sum w), the
         * inputs' lane offsets from input channel ic0 (D = 1: contiguous) */
        const uint32_t ic0 = oc0 / d;
        mve_pred16_t pred[4];
        hb_nn_rq_mve rq[4];
        int32x4_t start[4];
        uint32x4_t xo[4];
        for (uint32_t g = 0; g < groups; g++) {
            const uint32_t first = oc0 + 4 * g, active = n - 4 * g < 4 ? n - 4 * g : 4;
            pred[g] = vctp32q(active);
            rq[g] = hb_nn_rq_lanes_mve(p->rq.mult, p->rq.shift, p->rq.n, first, active);
            const int32x4_t b = vld1q_s32(bias + 4 * g);
            int32x4_t s = vld1q_s32(wsum + 4 * g);
            for (uint32_t ky = uy0; in_place && ky < uy1; ky++)
                for (uint32_t kx = ux0; kx < ux1; kx++)
                    s = vaddq_s32(s, vldrbq_z_s32(wb + (size_t)(ky * kw + kx) * wts + 4 * g,
                                                  pred[g]));
            start[g] = vmlaq_n_s32(b, s, p->input_offset);
            xo[g] = vaddq_n_u32(lanes, 4 * g);
            if (d != 1) {
                uint32_t o[4];
                for (uint32_t l = 0; l < 4; l++) o[l] = l < active ? (first + l) / d - ic0 : 0;
                xo[g] = vld1q_u32(o);
            }
        }
        for (uint32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t iy0 = (int32_t)(oy * p->stride_h) - (int32_t)p->pad_top;
            uint32_t ky0, ky1;
            hb_nn_taps_inside(iy0, p->dilation_h, kh, in->h, &ky0, &ky1);
            int8_t *out = y + (size_t)oy * p->out_w * out_c + oc0;
            for (uint32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t ix0 = (int32_t)(ox * p->stride_w) - (int32_t)p->pad_left;
                uint32_t kx0, kx1;
                hb_nn_taps_inside(ix0, p->dilation_w, kw, in->w, &kx0, &kx1);
                const int interior = ky0 == uy0 && ky1 == uy1 && kx0 == ux0 && kx1 == ux1;
                const uint32_t rows = ky1 - ky0, cols = kx1 - kx0;
                /* tap (ky0, kx0) of the pixel, channel ic0 (no taps inside: no address) */
                const int8_t *xp = x;
                if (rows && cols)
                    xp += ((size_t)(iy0 + (int32_t)(ky0 * p->dilation_h)) * in->w +
                           (size_t)(ix0 + (int32_t)(kx0 * p->dilation_w))) * c + ic0;
                const int8_t *wp = wb + (size_t)(ky0 * kw + kx0) * wts;
                for (uint32_t g = 0; g < groups; g++) {
                    int32x4_t sumw = vdupq_n_s32(0);
                    int32x4_t acc = dw_taps(d == 1 ? xp + 4 * g : xp, xo[g], d == 1, wp + 4 * g,
                                            wts, kw, rows, cols, x_row, x_col, pred[g],
                                            interior ? start[g] : vld1q_s32(bias + 4 * g),
                                            &sumw);
                    if (!interior) acc = vmlaq_n_s32(acc, sumw, p->input_offset);
                    const int32x4_t v = hb_nn_requant_mve(acc, rq[g].mult, rq[g].shift,
                                                          p->output_offset, p->act_min,
                                                          p->act_max);
                    vstrbq_p_s32(out + (size_t)ox * out_c + 4 * g, v, pred[g]);
                }
            }
        }
        oc0 += n;
    }
#else
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
#endif
}
