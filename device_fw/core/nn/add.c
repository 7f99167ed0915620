/* ADD of two same-shape int8 tensors: TFLM reference_integer_ops::Add (docs/model-blob.md,
 * opcode 7). Shifts are <= 0, so MultiplyByQuantizedMultiplierSmallerThanOneExp is
 * hb_fp_mbqm. */
#include "hb_nn.h"

static int8_t add_one(const hb_nn_add_params *p, int32_t a, int32_t b) {
    /* |x + offset| <= 255 and left_shift <= 20: the shifted values fit in int32 */
    const int32_t sa = (a + p->input1_offset) * (1 << p->left_shift);
    const int32_t sb = (b + p->input2_offset) * (1 << p->left_shift);
    const int32_t qa = hb_fp_mbqm(sa, p->input1_multiplier, p->input1_shift);
    const int32_t qb = hb_fp_mbqm(sb, p->input2_multiplier, p->input2_shift);
    const int32_t raw = hb_fp_add_wrap(qa, qb);
    const int32_t v = hb_fp_mbqm(raw, p->output_multiplier, p->output_shift);
    return hb_fp_clamp8((int64_t)v + p->output_offset, p->act_min, p->act_max);
}

void hb_nn_add_s8(const hb_nn_add_params *p, const int8_t *a, const int8_t *b, uint32_t n,
                  int8_t *y) {
    for (uint32_t i = 0; i < n; i++) y[i] = add_one(p, a[i], b[i]);
}
