/* FULLY_CONNECTED, int8: TFLM reference_integer_ops::FullyConnected (per-tensor) and
 * FullyConnectedPerChannel (docs/model-blob.md, opcode 1). */
#include "hb_nn.h"

/* one output row: y[o] for o < m (the unit a Helium variant replaces) */
static void fc_rows(const hb_nn_fc_params *p, const int8_t *x, uint32_t k, const int8_t *w,
                    uint32_t m, const uint8_t *bias, int8_t *y) {
    for (uint32_t o = 0; o < m; o++) {
        const uint32_t acc = hb_nn_dot_s8(w + (size_t)o * k, x, p->input_offset, k);
        y[o] = hb_nn_requant_one(acc, bias, o, &p->rq, p->output_offset, p->act_min, p->act_max);
    }
}

void hb_nn_fully_connected_s8(const hb_nn_fc_params *p, const int8_t *x, uint32_t k,
                              const int8_t *w, uint32_t m, const uint8_t *bias, int8_t *y) {
    fc_rows(p, x, k, w, m, bias, y);
}
