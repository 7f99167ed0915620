/* ADD of two same-shape int8 tensors: TFLM reference_integer_ops::Add (docs/model-blob.md,
 * opcode 7). Shifts are <= 0, so MultiplyByQuantizedMultiplierSmallerThanOneExp is
 * hb_fp_mbqm. Helium: four lanes per step (below). */
#include "hb_nn.h"

#if !HB_NN_MVE
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
#endif

void hb_nn_add_s8(const hb_nn_add_params *p, const int8_t *a, const int8_t *b, uint32_t n,
                  int8_t *y) {
#if HB_NN_MVE
    /* four elements per step, add_one lane by lane: the offsets and the left shift are exact
     * in int32 (as above), hb_nn_mbqm_mve is hb_fp_mbqm, the sum wraps as hb_fp_add_wrap, and
     * hb_nn_requant_mve is the last hb_fp_mbqm with the offset and the clamp */
    const int32x4_t m1 = vdupq_n_s32(p->input1_multiplier), s1 = vdupq_n_s32(p->input1_shift);
    const int32x4_t m2 = vdupq_n_s32(p->input2_multiplier), s2 = vdupq_n_s32(p->input2_shift);
    const int32x4_t mo = vdupq_n_s32(p->output_multiplier), so = vdupq_n_s32(p->output_shift);
    const int32x4_t ls = vdupq_n_s32(p->left_shift);
    for (uint32_t i = 0; i < n; i += 4) {
        const mve_pred16_t pr = vctp32q(n - i);
        const int32x4_t va = vshlq_s32(vaddq_n_s32(vldrbq_z_s32(a + i, pr), p->input1_offset), ls);
        const int32x4_t vb = vshlq_s32(vaddq_n_s32(vldrbq_z_s32(b + i, pr), p->input2_offset), ls);
        const int32x4_t raw = vaddq_s32(hb_nn_mbqm_mve(va, m1, s1), hb_nn_mbqm_mve(vb, m2, s2));
        const int32x4_t v =
            hb_nn_requant_mve(raw, mo, so, p->output_offset, p->act_min, p->act_max);
        vstrbq_p_s32(y + i, v, pr);
    }
#else
    for (uint32_t i = 0; i < n; i++) y[i] = add_one(p, a[i], b[i]);
#endif
}
