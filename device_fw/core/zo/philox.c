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
 * lane: word k of the four blocks is one vector (q0..q3 = c0..c3), each round's two 32x32
 * products as VMULH (high half) and VMUL (low half), the keys bumped in general registers;
 * VST40..43 store the lanes block-major. Every lane computes hb_philox4x32_10's words (the same
 * u32 operations). Inline assembly: GCC 12 spills the intrinsics' version (eight Q registers,
 * nine values live), 66 instructions per block against 33 here. */
_Static_assert(HB_PHILOX_ROUNDS == 10, "philox_x4 writes its rounds out (.rept 10)");
static void philox_x4(uint32_t block, uint32_t tensor, uint32_t k0, uint32_t k1, uint32_t *out) {
    const uint32_t first[4] = {block, block + 1u, block + 2u, block + 3u}; /* c0 per lane */
    __asm__ volatile("   vldrw.u32   q0, [%[first]]\n"
                     "   vdup.32     q1, %[tensor]\n"
                     "   vmov.i32    q2, #0\n"
                     "   vmov.i32    q3, #0\n"
                     "   vdup.32     q4, %[m0]\n"
                     "   vdup.32     q5, %[m1]\n"
                     "   .rept 10\n"
                     "   vmulh.u32   q6, q2, q5\n" /* hi(c2 M1) ^ c1 */
                     "   veor        q6, q6, q1\n"
                     "   vmul.i32    q1, q2, %[m1]\n" /* c1' = lo(c2 M1) */
                     "   vmulh.u32   q2, q0, q4\n" /* hi(c0 M0) ^ c3 */
                     "   veor        q2, q2, q3\n"
                     "   vmul.i32    q3, q0, %[m0]\n" /* c3' = lo(c0 M0) */
                     "   vdup.32     q0, %[k0]\n"
                     "   veor        q0, q0, q6\n" /* c0' = hi(c2 M1) ^ c1 ^ k0 */
                     "   vdup.32     q7, %[k1]\n"
                     "   veor        q2, q2, q7\n" /* c2' = hi(c0 M0) ^ c3 ^ k1 */
                     "   add         %[k0], %[k0], %[w0]\n"
                     "   add         %[k1], %[k1], %[w1]\n"
                     "   .endr\n"
                     "   vst40.32    {q0, q1, q2, q3}, [%[out]]\n"
                     "   vst41.32    {q0, q1, q2, q3}, [%[out]]\n"
                     "   vst42.32    {q0, q1, q2, q3}, [%[out]]\n"
                     "   vst43.32    {q0, q1, q2, q3}, [%[out]]\n"
                     : [k0] "+r"(k0), [k1] "+r"(k1)
                     : [first] "r"(first), [tensor] "r"(tensor), [m0] "r"(HB_PHILOX_M0),
                       [m1] "r"(HB_PHILOX_M1), [w0] "r"(HB_PHILOX_W0), [w1] "r"(HB_PHILOX_W1),
                       [out] "r"(out)
                     : "q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "memory");
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

#if HB_NN_MVE
void hb_philox_blocks4(const hb_stream *s, uint32_t block, uint32_t *out) {
    philox_x4(block, s->tensor, s->seed, s->stream, out);
}
#endif

