/* RESHAPE: the same int8 bytes under another shape (docs/model-blob.md, opcode 8). */
#include "hb_nn.h"

void hb_nn_reshape_s8(const int8_t *x, uint32_t n, int8_t *y) {
    for (uint32_t i = 0; i < n; i++) y[i] = x[i];
}
