/* Little-endian loads and stores of wire and blob bytes (no casts of byte pointers), and the
 * few facts about the C implementation the core relies on. */
#ifndef HB_BYTES_H
#define HB_BYTES_H

#include <stdint.h>

_Static_assert((-1 >> 1) == -1, "the core needs >> of a negative int to be arithmetic");
_Static_assert(sizeof(int) >= 4, "the core needs int of at least 32 bits");

static inline uint16_t hb_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t hb_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t hb_rd64(const uint8_t *p) {
    return (uint64_t)hb_rd32(p) | (uint64_t)hb_rd32(p + 4) << 32;
}
static inline int32_t hb_rdi32(const uint8_t *p) { return (int32_t)hb_rd32(p); }
static inline void hb_wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void hb_wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void hb_wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
/* round up to a multiple of 16 (arena regions) / 4 (blob records); in 64 bits: no wrap */
static inline uint64_t hb_pad16(uint64_t n) { return (n + 15u) & ~(uint64_t)15u; }
static inline uint64_t hb_pad4(uint64_t n) { return (n + 3u) & ~(uint64_t)3u; }

#endif /* HB_BYTES_H */
