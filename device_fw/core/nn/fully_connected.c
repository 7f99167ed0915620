/* FULLY_CONNECTED, int8: TFLM reference_integer_ops::FullyConnected (per-tensor) and
 * FullyConnectedPerChannel (docs/model-blob.md, opcode 1).
 *
 * Helium: each row's dot product 16 weights at a time (hb_nn_dot_mve: sum w*x and sum w, the
 * input offset folded in once per row); the rows are asked for one at a time, as the row
 * contract says (or, all in place, read where they are), and requantized four outputs at a
 * time (hb_nn_requant_mve), the last group predicated to the rows that remain. */
#include "hb_nn.h"

void hb_nn_fully_connected_s8(const hb_nn_fc_params *p, const int8_t *x, uint32_t k,
                              const hb_nn_rows *w, uint32_t m, int8_t *y) {
#if HB_NN_MVE
    /* every row and bias in place (hb_nn_rows_all_in_place): read there, no call per row */
    const int8_t *const rows = hb_nn_rows_all_in_place(w) ? w->rows : NULL;
    const uint8_t *const biases = w->biases;
    for (uint32_t o = 0; o < m; o += 4) {
        const uint32_t n = m - o < 4 ? m - o : 4;
        uint32_t acc[4] = {0, 0, 0, 0};
        for (uint32_t l = 0; l < n; l++) {
            int32_t dot = 0, sumw = 0;
            const uint32_t j = o + l;
            hb_nn_dot_mve(rows ? rows + (size_t)j * k : w->row(w, j), x, k, &dot, &sumw);
            const uint32_t bias = !rows    ? (uint32_t)w->bias(w, j)
                                  : biases ? (uint32_t)hb_rdi32(biases + 4u * j)
                                           : 0u;
            acc[l] = (uint32_t)dot + (uint32_t)p->input_offset * (uint32_t)sumw + bias;
        }
        const hb_nn_rq_mve rq = hb_nn_rq_lanes_mve(p->rq.mult, p->rq.shift, p->rq.n, o, n);
        const int32x4_t v = hb_nn_requant_mve(vreinterpretq_s32_u32(vld1q_u32(acc)), rq.mult,
                                              rq.shift, p->output_offset, p->act_min,
                                              p->act_max);
        vstrbq_p_s32(y + o, v, vctp32q(n));
    }
#else
    for (uint32_t o = 0; o < m; o++) {
        const int8_t *row = w->row(w, o);
        const uint32_t acc = hb_nn_dot_s8(row, x, p->input_offset, k);
        y[o] = hb_nn_requant_one(acc, w->bias(w, o), o, &p->rq, p->output_offset, p->act_min,
                                 p->act_max);
    }
#endif
}
