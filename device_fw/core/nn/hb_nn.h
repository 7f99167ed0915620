/* The int8 ops of the model blob (docs/model-blob.md), one per file in core/nn/, each a plain
 * scalar transliteration of TFLM's reference kernel (tensorflow/lite/kernels/internal/
 * reference/integer_ops/<op>.h, MEAN from reference/reduce.h) over one sample (NHWC without the
 * batch axis).
 *
 * The kernels trust their params: core/blob.c and each op's check (core/ops/) checked every
 * count, shape and range when the model was loaded. Per-channel multipliers stay in the blob
 * as unaligned little-endian i32 (read with hb_rdi32).
 *
 * The ops with weights (FC, CONV_2D, DEPTHWISE_CONV_2D) loop over output channels outermost
 * and take each channel's filter row and bias from a row provider (hb_nn_rows) once: read in
 * place from the blob, or produced into a row buffer for a perturbed forward pass
 * (docs/zo-math.md section 3, core/ops/rows.c and core/model.c). Any loop order gives the same
 * bytes: each output element is one accumulator. A provider whose rows and biases are all in
 * place says so (hb_nn_rows' optional view): the Helium FC and few-pixel pointwise CONV_2D
 * then read them there, several channels per pass, without a call per row.
 *
 * Scalar and Helium (MVE) in one function: FC, CONV_2D and DEPTHWISE_CONV_2D open with an
 * `#if HB_NN_MVE` block (tail-predicated vector loops, hb_nn_mve.h) and keep the scalar C in
 * `#else`; both give the same bytes on every input (docs/firmware.md "Helium"). The scalar
 * pieces below (hb_nn_dot_s8, hb_nn_requant_one) are the reference every variant is tested
 * against, and are defined in every build. */
#ifndef HB_NN_H
#define HB_NN_H

#include <stddef.h>
#include <stdint.h>

#include "fixedpoint.h"
#include "hb_bytes.h"

#include "hb_mve.h" /* HB_NN_MVE */

#if HB_NN_MVE
#include "hb_nn_mve.h"
#endif

/* Requantization of an accumulator: multiplier/shift per output channel, or one for all. */
typedef struct {
    const uint8_t *mult; /* i32 little-endian [n] */
    const int8_t *shift; /* [n] */
    uint32_t n;          /* 1 = per tensor, else one per output channel */
} hb_nn_requant;

typedef struct {
    uint32_t h, w, c;
} hb_nn_dims;

/* Where an op with weights gets them: one output channel at a time (docs/zo-math.md "Rows").
 * Row j is output channel j's filter: FULLY_CONNECTED w[j][0..K), CONV_2D filter[j][ky][kx][c]
 * (KH*KW*C entries, contiguous), DEPTHWISE_CONV_2D filter[0][ky][kx][j] (KH*KW entries, ky
 * major). A kernel calls row(r, j) and bias(r, j) once per output channel j, before it
 * computes that channel; row's pointer is valid until the next call of row. */
typedef struct hb_nn_rows hb_nn_rows;
struct hb_nn_rows {
    const int8_t *(*row)(const hb_nn_rows *r, uint32_t j);
    int32_t (*bias)(const hb_nn_rows *r, uint32_t j); /* 0 for an op without a bias */
    /* entries of a row are `step` bytes apart: 1 for FC and CONV_2D (contiguous) and for a
     * produced row; a depthwise row read in place is strided by the filter's C*D channels */
    uint32_t step;
    /* Optional (0 when absent): every row in place, row j at rows + j * (the row's entries,
     * step 1), and the biases in place (little-endian i32, bias j at biases + 4 j) or none
     * (no_bias 1). A kernel may then read them there, in any order and several output channels
     * per pass, without calling row() or bias(); a provider without them is called a row at a
     * time, as above. */
    const int8_t *rows;
    const uint8_t *biases;
    uint32_t no_bias;
};

/* Whether every row of f is in place (f->rows) and so is every bias (or there is none). */
static inline int hb_nn_rows_all_in_place(const hb_nn_rows *f) {
    return f->rows != NULL && (f->biases != NULL || f->no_bias);
}

typedef struct {
    int32_t input_offset, output_offset, act_min, act_max;
    hb_nn_requant rq;
} hb_nn_fc_params;

typedef struct {
    int32_t input_offset, output_offset, act_min, act_max;
    uint32_t stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, out_h, out_w;
    uint32_t depth_multiplier; /* DEPTHWISE_CONV_2D only */
    hb_nn_requant rq;
} hb_nn_conv_params;

typedef struct {
    int32_t act_min, act_max;
    uint32_t stride_h, stride_w, filter_h, filter_w, pad_top, pad_left, out_h, out_w;
} hb_nn_pool_params;

typedef struct {
    int32_t input_zero_point, output_offset, multiplier, shift;
    uint32_t count;
} hb_nn_mean_params;

typedef struct {
    int32_t input1_offset, input2_offset, output_offset, act_min, act_max, left_shift;
    int32_t input1_multiplier, input1_shift, input2_multiplier, input2_shift;
    int32_t output_multiplier, output_shift;
} hb_nn_add_params;

/* --- the shared inner pieces ------------------------------------------------------------ */

/* sum over i < n of w[i] * (x[i] + x_offset), wrapping like TFLM's int32 accumulator */
static inline uint32_t hb_nn_dot_s8(const int8_t *w, const int8_t *x, int32_t x_offset,
                                    uint32_t n) {
    uint32_t acc = 0;
    for (uint32_t i = 0; i < n; i++) acc += (uint32_t)((int32_t)w[i] * ((int32_t)x[i] + x_offset));
    return acc;
}

/* acc + bias (wrapping; 0 for an op without a bias) -> MultiplyByQuantizedMultiplier with
 * channel c's (or the one) multiplier -> + output_offset -> clamp to [act_min, act_max]. The
 * offset is added in 64 bits (as hilbench.npu does; TFLM's int32 add could only overflow
 * where the clamp saturates). */
static inline int8_t hb_nn_requant_one(uint32_t acc, int32_t bias, uint32_t c,
                                       const hb_nn_requant *rq, int32_t output_offset,
                                       int32_t act_min, int32_t act_max) {
    acc += (uint32_t)bias;
    const uint32_t q = rq->n == 1 ? 0 : c;
    const int32_t v = hb_fp_mbqm(hb_fp_wrap32(acc), hb_rdi32(rq->mult + 4u * q), rq->shift[q]);
    return hb_fp_clamp8((int64_t)v + output_offset, act_min, act_max);
}

/* --- the ops (one file each) ------------------------------------------------------------ */

/* x[k] -> y[m]; weights [m][k] from w (rows of k entries, step 1) */
void hb_nn_fully_connected_s8(const hb_nn_fc_params *p, const int8_t *x, uint32_t k,
                              const hb_nn_rows *w, uint32_t m, int8_t *y);

/* x [in->h][in->w][in->c] -> y [out_h][out_w][out_c]; filter [out_c][kh][kw][in->c] from f
 * (rows of kh*kw*in->c entries, step 1) */
void hb_nn_conv2d_s8(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                     const hb_nn_rows *f, uint32_t kh, uint32_t kw, uint32_t out_c, int8_t *y);

/* x [h][w][c] -> y [out_h][out_w][c * D]; filter [1][kh][kw][c * D] from f (rows of kh*kw
 * entries, f->step apart) */
void hb_nn_depthwise_conv2d_s8(const hb_nn_conv_params *p, const hb_nn_dims *in,
                               const int8_t *x, const hb_nn_rows *f, uint32_t kh, uint32_t kw,
                               int8_t *y);

/* x [h][w][c] -> y [out_h][out_w][c] */
void hb_nn_average_pool2d_s8(const hb_nn_pool_params *p, const hb_nn_dims *in, const int8_t *x,
                             int8_t *y);
void hb_nn_max_pool2d_s8(const hb_nn_pool_params *p, const hb_nn_dims *in, const int8_t *x,
                         int8_t *y);

/* x [h][w][c] -> y [c] (the mean over h and w) */
void hb_nn_mean_s8(const hb_nn_mean_params *p, const hb_nn_dims *in, const int8_t *x, int8_t *y);

/* y[i] = a[i] (+) b[i], i < n */
void hb_nn_add_s8(const hb_nn_add_params *p, const int8_t *a, const int8_t *b, uint32_t n,
                  int8_t *y);

/* y = x, n bytes (the shape changes, the bytes do not) */
void hb_nn_reshape_s8(const int8_t *x, uint32_t n, int8_t *y);

#endif /* HB_NN_H */
