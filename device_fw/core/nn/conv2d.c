/* CONV_2D, int8: TFLM reference_integer_ops::ConvPerChannel (docs/model-blob.md, opcode 2).
 * Padded taps contribute nothing; per-tensor requantization is the per-channel kernel with
 * one multiplier for every channel. Output channels outermost: each filter row is asked for
 * once (hb_nn_rows) and used for every output pixel.
 *
 * Helium: the accumulator of a pixel is sum w*x + input_offset * sum w (mod 2^32, both sums
 * over the taps inside the input) + bias, the dot products tail-predicated (hb_nn_mve.h), four
 * pixels per weight vector load (hb_nn_dot4_mve), requantized four lanes at a time. Three
 * ways to find a pixel's taps, the first that applies:
 *  - one output pixel: the op is a FULLY_CONNECTED over its taps (a 1x1 output of a window
 *    inside the input: x itself; otherwise gathered as below), four channels per requantization;
 *  - pointwise (1x1 filter, stride 1, no pad): the input is already a matrix of pixels x C
 *    (at most 16 pixels with the rows' in-place view: pixels outermost, every channel per
 *    group of four, conv_matrix_in_place);
 *  - im2col: every pixel's kh*kw*C taps gathered once per op into a static buffer of
 *    HB_NN_COLS_BYTES (a padded tap holds -input_offset: x + input_offset = 0 there, as
 *    TFLM's skipped tap), when they fit and -input_offset is an int8;
 *  - otherwise in place: a pixel's taps inside are a rectangle [ky0, ky1) x [kx0, kx1); with
 *    dilation_w 1 each ky is one run of (kx1 - kx0) * C bytes, pixels whose kx taps are all
 *    inside (the interior columns) four at a time. */
#include "hb_nn.h"

#if HB_NN_MVE
#include <string.h>

/* the output columns [*a, *b) whose kx taps are all inside the input */
static void interior_columns(const hb_nn_conv_params *p, uint32_t in_w, uint32_t kw, uint32_t *a,
                             uint32_t *b) {
    const uint32_t span = (kw - 1) * p->dilation_w; /* the window's width - 1 */
    uint32_t first = (p->pad_left + p->stride_w - 1) / p->stride_w, end = 0;
    if ((uint64_t)span + 1 <= (uint64_t)in_w + p->pad_left) /* last ox: ox*sw <= in_w-1-span+pl */
        end = (in_w - 1 - span + p->pad_left) / p->stride_w + 1;
    if (end > p->out_w) end = p->out_w;
    if (first > end) first = end;
    *a = first;
    *b = end;
}

/* The scratch of the padded input or the im2col matrix (hb_nn_mve.h hb_nn_scratch) */
#define HB_NN_COLS_BYTES HB_NN_SCRATCH_BYTES
#define cols_buf hb_nn_scratch
/* a pointwise conv of at most this many pixels with its rows in place: conv_matrix_in_place */
#ifndef HB_NN_PW_FEW_PIXELS
#define HB_NN_PW_FEW_PIXELS 16u
#endif
_Alignas(16) int8_t hb_nn_scratch[HB_NN_SCRATCH_BYTES];

/* The padded input's extent: rows and columns up to the last tap any output pixel reads, at
 * least the input's own (after the top/left pad). */
static void padded_extent(const hb_nn_conv_params *p, const hb_nn_dims *in, uint32_t kh,
                          uint32_t kw, uint32_t *hp, uint32_t *wp) {
    const uint32_t need_h = (p->out_h - 1) * p->stride_h + (kh - 1) * p->dilation_h + 1;
    const uint32_t need_w = (p->out_w - 1) * p->stride_w + (kw - 1) * p->dilation_w + 1;
    *hp = need_h > in->h + p->pad_top ? need_h : in->h + p->pad_top;
    *wp = need_w > in->w + p->pad_left ? need_w : in->w + p->pad_left;
}

/* x copied into pad [hp][wp][c] at (pad_top, pad_left), every other byte `fill`
 * (-input_offset: x + input_offset = 0 there, as TFLM's skipped tap) */
static void pad_input(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                      uint32_t hp, uint32_t wp, int8_t fill, int8_t *pad) {
    const size_t row = (size_t)wp * in->c, src_row = (size_t)in->w * in->c;
    memset(pad, fill, (size_t)hp * row);
    for (uint32_t iy = 0; iy < in->h; iy++)
        memcpy(pad + (iy + p->pad_top) * row + (size_t)p->pad_left * in->c, x + iy * src_row,
               src_row);
}

/* The conv over the padded input (dilation_w 1): every tap of every pixel is inside, pixel
 * (oy, ox)'s taps of filter row ky are one run of kw*c bytes; so the accumulator is
 * sum w*x + input_offset * (the row's whole weight sum), that sum once per channel. Four
 * pixels of one output row per weight load, the kh runs in one asm block
 * (hb_nn_dot4_runs_mve). */
__attribute__((noinline)) /* its own registers, as conv_matrix_in_place */
static void conv_padded(const hb_nn_conv_params *p, const int8_t *pad, uint32_t wp, uint32_t c,
                        uint32_t kh, uint32_t kw, const hb_nn_rows *f, uint32_t out_c,
                        int8_t *y) {
    const int32_t in_off = p->input_offset, out_off = p->output_offset;
    const int32x4_t lo = vdupq_n_s32(p->act_min), hi = vdupq_n_s32(p->act_max);
    const uint32_t run = kw * c, k = kh * run;
    const size_t row_bytes = (size_t)wp * c, ky_step = row_bytes * p->dilation_h;
    const size_t px_step = (size_t)p->stride_w * c, oy_step = row_bytes * p->stride_h;
    const uint32x4_t out_offsets = vmulq_n_u32(vidupq_n_u32(0, 1), out_c);
    for (uint32_t oc = 0; oc < out_c; oc++) {
        const int8_t *row = f->row(f, oc);
        const uint32_t base =
            (uint32_t)f->bias(f, oc) + (uint32_t)in_off * (uint32_t)hb_nn_sum_mve(row, k);
        const uint32_t q = p->rq.n == 1 ? 0 : oc;
        const int32_t mult = hb_rdi32(p->rq.mult + 4u * q), shift = p->rq.shift[q];
        for (uint32_t oy = 0; oy < p->out_h; oy++) {
            const int8_t *line = pad + oy * oy_step;
            int8_t *out = y + (size_t)oy * p->out_w * out_c + oc;
            for (uint32_t ox = 0; ox < p->out_w; ox += 4) {
                const uint32_t n = p->out_w - ox < 4 ? p->out_w - ox : 4;
                const int8_t *x0 = line + ox * px_step; /* lanes past n repeat pixel ox */
                const int8_t *x1 = n > 1 ? x0 + px_step : x0, *x2 = n > 2 ? x1 + px_step : x0,
                             *x3 = n > 3 ? x2 + px_step : x0;
                int32x4_t a;
                hb_nn_dot4_runs_mve(row, x0, x1, x2, x3, run, kh, (uint32_t)ky_step, &a);
                a = vreinterpretq_s32_u32(vaddq_n_u32(vreinterpretq_u32_s32(a), base));
                const int32x4_t v = hb_nn_requant1_mve(a, mult, shift, out_off, lo, hi);
                vstrbq_scatter_offset_p_s32(out + (size_t)ox * out_c, out_offsets, v,
                                            vctp32q(n));
            }
        }
    }
}

/* Gather every output pixel's taps into cols (pixel-major, K = kh*kw*C each): the input's
 * bytes, pad (-input_offset) where a tap falls outside. */
static void im2col(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                   uint32_t kh, uint32_t kw, int8_t pad, int8_t *cols) {
    const uint32_t c = in->c;
    for (uint32_t oy = 0; oy < p->out_h; oy++)
        for (uint32_t ox = 0; ox < p->out_w; ox++)
            for (uint32_t ky = 0; ky < kh; ky++) {
                const int32_t iy = (int32_t)(oy * p->stride_h + ky * p->dilation_h) -
                                   (int32_t)p->pad_top;
                for (uint32_t kx = 0; kx < kw; kx++, cols += c) {
                    const int32_t ix = (int32_t)(ox * p->stride_w + kx * p->dilation_w) -
                                       (int32_t)p->pad_left;
                    if (iy < 0 || iy >= (int32_t)in->h || ix < 0 || ix >= (int32_t)in->w)
                        memset(cols, pad, c);
                    else
                        memcpy(cols, x + ((size_t)iy * in->w + (size_t)ix) * c, c);
                }
            }
}

/* The conv over a matrix of n_px pixels of k taps each (pixel i at cols + i * k, every tap
 * counted): four pixels per dot product, their outputs out_c apart. */
static void conv_matrix(const hb_nn_conv_params *p, const int8_t *cols, uint32_t k,
                        uint32_t n_px, const hb_nn_rows *f, uint32_t out_c, int8_t *y) {
    const int32_t in_off = p->input_offset, out_off = p->output_offset;
    const int32x4_t lo = vdupq_n_s32(p->act_min), hi = vdupq_n_s32(p->act_max);
    const uint32x4_t out_offsets = vmulq_n_u32(vidupq_n_u32(0, 1), out_c);
    for (uint32_t oc = 0; oc < out_c; oc++) {
        const int8_t *row = f->row(f, oc);
        /* every tap counts: the weight sum once per channel */
        const uint32_t base =
            (uint32_t)f->bias(f, oc) + (uint32_t)in_off * (uint32_t)hb_nn_sum_mve(row, k);
        const uint32_t q = p->rq.n == 1 ? 0 : oc;
        const int32_t mult = hb_rdi32(p->rq.mult + 4u * q), shift = p->rq.shift[q];
        const int8_t *x0 = cols;
        int8_t *out = y + oc;
        const uint32_t full = n_px & ~3u;
        for (uint32_t i = 0; i < full; i += 4, x0 += 4 * (size_t)k, out += 4 * (size_t)out_c) {
            int32x4_t a = hb_nn_dot4_nosum_mve(row, x0, x0 + k, x0 + 2 * k, x0 + 3 * k, k);
            a = vreinterpretq_s32_u32(vaddq_n_u32(vreinterpretq_u32_s32(a), base));
            const int32x4_t v = hb_nn_requant1_mve(a, mult, shift, out_off, lo, hi);
            vstrbq_scatter_offset_s32(out, out_offsets, v);
        }
        if (full < n_px) { /* the last 1..3 pixels; lanes past them repeat the first */
            const uint32_t n = n_px - full;
            const int8_t *x1 = n > 1 ? x0 + k : x0, *x2 = n > 2 ? x1 + k : x0;
            int32x4_t a = hb_nn_dot4_nosum_mve(row, x0, x1, x2, x0, k);
            a = vreinterpretq_s32_u32(vaddq_n_u32(vreinterpretq_u32_s32(a), base));
            const int32x4_t v = hb_nn_requant1_mve(a, mult, shift, out_off, lo, hi);
            vstrbq_scatter_offset_p_s32(out, out_offsets, v, vctp32q(n));
        }
    }
}

/* conv_matrix when every row and bias is in place (hb_nn_rows_all_in_place): pixels outermost,
 * four at a time, every output channel of them per pass, each row's weight sum in its dot
 * product (hb_nn_dot4_wsum_mve); no call per row. For maps of few pixels, where the per-row
 * cost of conv_matrix outweighs a sum per group. */
static const uint8_t no_bias_bytes[4]; /* the bias of an op without one: 0, step 0 */

__attribute__((noinline)) /* its own registers: inlined, its loop spills */
static void conv_matrix_in_place(const hb_nn_conv_params *p, const int8_t *cols, uint32_t k,
                                 uint32_t n_px, const hb_nn_rows *f, uint32_t out_c, int8_t *y) {
    const int32_t in_off = p->input_offset, out_off = p->output_offset;
    const int32x4_t lo = vdupq_n_s32(p->act_min), hi = vdupq_n_s32(p->act_max);
    const uint32x4_t out_offsets = vmulq_n_u32(vidupq_n_u32(0, 1), out_c);
    const uint32_t q_step = p->rq.n == 1 ? 0u : 1u; /* per-tensor: channel 0's for all */
    const uint8_t *const mult0 = p->rq.mult;
    const int8_t *const shift0 = p->rq.shift;
    const uint8_t *const bias0 = f->biases ? f->biases : no_bias_bytes;
    const uint32_t b_step = f->biases ? 4u : 0u;
    const int8_t *const rows = f->rows;
    for (uint32_t i = 0; i < n_px; i += 4) {
        const uint32_t n = n_px - i < 4 ? n_px - i : 4; /* lanes past n repeat pixel i */
        const int8_t *x0 = cols + (size_t)i * k;
        const int8_t *x1 = n > 1 ? x0 + k : x0, *x2 = n > 2 ? x1 + k : x0,
                     *x3 = n > 3 ? x2 + k : x0;
        const mve_pred16_t pred = vctp32q(n);
        int8_t *out = y + (size_t)i * out_c;
        const int8_t *row = rows;
        const uint8_t *mult = mult0, *bias = bias0;
        const int8_t *shift = shift0;
        for (uint32_t oc = 0; oc < out_c; oc++) {
            int32_t sumw;
            int32x4_t a = hb_nn_dot4_wsum_mve(row, x0, x1, x2, x3, k, &sumw);
            const uint32_t base = (uint32_t)hb_rdi32(bias) + (uint32_t)in_off * (uint32_t)sumw;
            a = vreinterpretq_s32_u32(vaddq_n_u32(vreinterpretq_u32_s32(a), base));
            const int32x4_t v = hb_nn_requant1_mve(a, hb_rdi32(mult), *shift, out_off, lo, hi);
            vstrbq_scatter_offset_p_s32(out, out_offsets, v, pred);
            row += k;
            out++;
            bias += b_step;
            mult += 4u * q_step;
            shift += q_step;
        }
    }
}

/* One output pixel whose taps are k contiguous bytes at x (all inside): a FULLY_CONNECTED. */
static void conv_one_pixel(const hb_nn_conv_params *p, const int8_t *x, uint32_t k,
                           const hb_nn_rows *f, uint32_t out_c, int8_t *y) {
    const hb_nn_fc_params fc = {p->input_offset, p->output_offset, p->act_min, p->act_max, p->rq};
    hb_nn_fully_connected_s8(&fc, x, k, f, out_c, y);
}
#endif

#if !HB_NN_MVE
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
#endif

void hb_nn_conv2d_s8(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                     const hb_nn_rows *f, uint32_t kh, uint32_t kw, uint32_t out_c, int8_t *y) {
#if HB_NN_MVE
    const uint32_t c = in->c, n_px = p->out_h * p->out_w, k = kh * kw * c;
    const int pointwise = kh == 1 && kw == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                          p->pad_top == 0 && p->pad_left == 0 && p->out_h == in->h &&
                          p->out_w == in->w;
    const int whole = kh == in->h && kw == in->w && p->pad_top == 0 && p->pad_left == 0 &&
                      p->dilation_h == 1 && p->dilation_w == 1; /* the window is the input */
    const int pad_ok = p->input_offset >= -127 && p->input_offset <= 128;
    if (n_px == 1 && whole) {
        conv_one_pixel(p, x, k, f, out_c, y);
        return;
    }
    if (pointwise) {
        if (n_px == 1)
            conv_one_pixel(p, x, k, f, out_c, y);
        else if (n_px <= HB_NN_PW_FEW_PIXELS && hb_nn_rows_all_in_place(f))
            conv_matrix_in_place(p, x, c, n_px, f, out_c, y);
        else
            conv_matrix(p, x, c, n_px, f, out_c, y);
        return;
    }
    uint32_t hp, wp;
    padded_extent(p, in, kh, kw, &hp, &wp);
    if (pad_ok && n_px > 1 && p->dilation_w == 1 && (uint64_t)hp * wp * c <= HB_NN_COLS_BYTES) {
        pad_input(p, in, x, hp, wp, (int8_t)-p->input_offset, cols_buf);
        conv_padded(p, cols_buf, wp, c, kh, kw, f, out_c, y);
        return;
    }
    if (pad_ok && (uint64_t)n_px * k <= HB_NN_COLS_BYTES) {
        im2col(p, in, x, kh, kw, (int8_t)-p->input_offset, cols_buf);
        if (n_px == 1)
            conv_one_pixel(p, cols_buf, k, f, out_c, y);
        else
            conv_matrix(p, cols_buf, k, n_px, f, out_c, y);
        return;
    }
    const uint32_t dw = p->dilation_w;
    const size_t row_bytes = (size_t)in->w * c; /* one input row */
    uint32_t int_a, int_b;
    interior_columns(p, in->w, kw, &int_a, &int_b);
    const uint32x4_t lanes = vidupq_n_u32(0, 1);                /* 0, 1, 2, 3 */
    const uint32x4_t out_offsets = vmulq_n_u32(lanes, out_c);   /* the pixels' outputs */
    for (uint32_t oc = 0; oc < out_c; oc++) {
        const int8_t *row = f->row(f, oc);
        const uint32_t bias = (uint32_t)f->bias(f, oc);
        const uint32_t q = p->rq.n == 1 ? 0 : oc;
        const int32x4_t mult = vdupq_n_s32(hb_rdi32(p->rq.mult + 4u * q));
        const int32x4_t shift = vdupq_n_s32(p->rq.shift[q]);
        for (uint32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t iy0 = (int32_t)(oy * p->stride_h) - (int32_t)p->pad_top;
            uint32_t ky0, ky1;
            hb_nn_taps_inside(iy0, p->dilation_h, kh, in->h, &ky0, &ky1);
            int8_t *out = y + (size_t)oy * p->out_w * out_c + oc;
            for (uint32_t ox = 0; ox < p->out_w;) {
                /* n pixels ox.. that share their kx taps [kx0, kx1) */
                const int32_t ix0 = (int32_t)(ox * p->stride_w) - (int32_t)p->pad_left;
                uint32_t n = 1, kx0 = 0, kx1 = kw;
                if (ox >= int_a && ox < int_b)
                    n = int_b - ox < 4 ? int_b - ox : 4;
                else
                    hb_nn_taps_inside(ix0, dw, kw, in->w, &kx0, &kx1);
                /* pixel q's taps start at x + ix0 + q * stride_w; lanes past n repeat pixel 0 */
                const size_t step = n > 1 ? (size_t)p->stride_w * c : 0;
                int32_t acc[4] = {0, 0, 0, 0}, sumw = 0;
                for (uint32_t ky = ky0; ky < ky1; ky++) {
                    const int8_t *xr = x + (size_t)(iy0 + (int32_t)(ky * p->dilation_h)) *
                                               row_bytes;
                    /* dilation_w 1: taps kx0..kx1 of this row are one run of (kx1-kx0)*c */
                    const uint32_t runs = dw == 1 ? 1 : kx1 - kx0;
                    const uint32_t len = dw == 1 ? (kx1 - kx0) * c : c;
                    for (uint32_t r = 0; r < runs; r++) {
                        const uint32_t kx = kx0 + r;
                        const int8_t *ws = row + ((size_t)ky * kw + kx) * c;
                        const int32_t ix = ix0 + (int32_t)(kx * dw);
                        const int8_t *x0 = xr + (ptrdiff_t)ix * (ptrdiff_t)c;
                        if (n == 1) {
                            hb_nn_dot_mve(ws, x0, len, &acc[0], &sumw);
                        } else {
                            const int8_t *x1 = x0 + step, *x2 = n > 2 ? x1 + step : x0,
                                         *x3 = n > 3 ? x2 + step : x0;
                            hb_nn_dot4_mve(ws, x0, x1, x2, x3, len, acc, &sumw);
                        }
                    }
                }
                const uint32_t base = (uint32_t)p->input_offset * (uint32_t)sumw + bias;
                const int32x4_t a = vreinterpretq_s32_u32(
                    vaddq_n_u32(vreinterpretq_u32_s32(vld1q_s32(acc)), base));
                const int32x4_t v =
                    hb_nn_requant_mve(a, mult, shift, p->output_offset, p->act_min, p->act_max);
                vstrbq_scatter_offset_p_s32(out + (size_t)ox * out_c, out_offsets, v, vctp32q(n));
                ox += n;
            }
        }
    }
#else
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
#endif
}
