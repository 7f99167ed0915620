/* Philox4x32-10 (Salmon et al., SC'11; the Random123 reference) and stream word access. */
#include "zo/philox.h"

#include "hb_zo.h"

void hb_philox4x32_10(const uint32_t ctr[4], uint32_t k0, uint32_t k1, uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    for (int r = 0; r < HB_PHILOX_ROUNDS; r++) {
        if (r > 0) {
            k0 += HB_PHILOX_W0; /* u32: wraps */
            k1 += HB_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)c0 * HB_PHILOX_M0;
        uint64_t p1 = (uint64_t)c2 * HB_PHILOX_M1;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void hb_philox_stream_init(hb_stream *s, uint32_t seed, uint32_t stream, uint32_t tensor) {
    s->seed = seed;
    s->stream = stream;
    s->tensor = tensor;
    s->block = 0;
    s->valid = 0;
}

void hb_philox_stream_fill(hb_stream *s, uint32_t block) {
    const uint32_t ctr[4] = {block, s->tensor, 0, 0};
    hb_philox4x32_10(ctr, s->seed, s->stream, s->w);
    s->block = block;
    s->valid = 1;
}

uint32_t hb_philox_batch_index(hb_stream *batch, uint32_t n_items, uint32_t i) {
    return (uint32_t)(((uint64_t)hb_stream_word(batch, i) * n_items) >> 32);
}
