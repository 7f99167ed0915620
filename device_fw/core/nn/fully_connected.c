/* FULLY_CONNECTED, int8: TFLM reference_integer_ops::FullyConnected (per-tensor) and
 * FullyConnectedPerChannel (docs/model-blob.md, opcode 1). */
#include "hb_nn.h"

void hb_nn_fully_connected_s8(const hb_nn_fc_params *p, const int8_t *x, uint32_t k,
                              const hb_nn_rows *w, uint32_t m, int8_t *y) {
    for (uint32_t o = 0; o < m; o++) {
        const int8_t *row = w->row(w, o);
        const uint32_t acc = hb_nn_dot_s8(row, x, p->input_offset, k);
        y[o] = hb_nn_requant_one(acc, w->bias(w, o), o, &p->rq, p->output_offset, p->act_min,
                                 p->act_max);
    }
}
