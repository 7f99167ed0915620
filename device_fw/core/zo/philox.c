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

#if HB_NN_MVE
/* Four Philox4x32-10 blocks at once, counters (block + lane, tensor, 0, 0), one block per 32-bit
 * lane: word k of the four blocks is one vector (c_k), each round two 32x32 multiplies as
 * VMULH/VMUL pairs, the keys' bumps in scalar registers; VST4 stores the lanes block-major.
 * Every lane computes hb_philox4x32_10's words exactly (the same u32 operations). */
static void philox_x4(uint32_t block, uint32_t tensor, uint32_t k0, uint32_t k1, uint32_t *out) {
    uint32x4_t c0 = vaddq_n_u32(vidupq_n_u32(0, 1), block), c1 = vdupq_n_u32(tensor);
    uint32x4_t c2 = vdupq_n_u32(0), c3 = vdupq_n_u32(0);
    const uint32x4_t m0 = vdupq_n_u32(HB_PHILOX_M0), m1 = vdupq_n_u32(HB_PHILOX_M1);
    for (int r = 0; r < HB_PHILOX_ROUNDS; r++) {
        if (r > 0) {
            k0 += HB_PHILOX_W0; /* u32: wraps */
            k1 += HB_PHILOX_W1;
        }
        const uint32x4_t hi0 = vmulhq_u32(c0, m0), lo0 = vmulq_u32(c0, m0);
        const uint32x4_t hi1 = vmulhq_u32(c2, m1), lo1 = vmulq_u32(c2, m1);
        c0 = veorq_u32(veorq_u32(hi1, c1), vdupq_n_u32(k0));
        c2 = veorq_u32(veorq_u32(hi0, c3), vdupq_n_u32(k1));
        c1 = lo1;
        c3 = lo0;
    }
    const uint32x4x4_t v = {{c0, c1, c2, c3}};
    vst4q_u32(out, v);
}
#endif

void hb_philox_stream_fill(hb_stream *s, uint32_t block) {
#if HB_NN_MVE
    philox_x4(block, s->tensor, s->seed, s->stream, s->w);
#else
    const uint32_t ctr[4] = {block, s->tensor, 0, 0};
    hb_philox4x32_10(ctr, s->seed, s->stream, s->w);
#endif
    s->block = block;
    s->valid = 1;
}

uint32_t hb_philox_batch_index(hb_stream *batch, uint32_t n_items, uint32_t i) {
    return (uint32_t)(((uint64_t)hb_stream_word(batch, i) * n_items) >> 32);
}
