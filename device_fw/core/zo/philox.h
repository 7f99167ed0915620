/* Philox4x32-10 and the PRNG streams of the ZO math (docs/zo-math.md section 1).
 *
 * Counter-based: word w of the stream keyed (seed, stream) for tensor t is lane w mod 4 of
 * philox4x32_10(w div 4, t, 0, 0; seed, stream), so any word is computed from its coordinates
 * and nothing per element is stored. hb_stream caches the last block (4 words): reading words
 * in order costs one Philox call per 4 words. */
#ifndef HB_ZO_PHILOX_H
#define HB_ZO_PHILOX_H

#include <stdint.h>

#include "hb_mve.h"

void hb_philox4x32_10(const uint32_t ctr[4], uint32_t k0, uint32_t k1, uint32_t out[4]);

/* Blocks a stream caches: with Helium 4 consecutive blocks, computed together (one per
 * 32-bit lane, hb_philox_stream_fill), else 1. */
#define HB_STREAM_BLOCKS (HB_NN_MVE ? 4u : 1u)

typedef struct {
    uint32_t seed, stream, tensor;
    uint32_t block; /* counter word 0 of the first cached block */
    int valid;      /* the cache holds blocks block .. block + HB_STREAM_BLOCKS - 1 */
    uint32_t w[4 * HB_STREAM_BLOCKS]; /* block-major: w[4 i + k] is word k of block + i */
} hb_stream;

void hb_philox_stream_init(hb_stream *s, uint32_t seed, uint32_t stream, uint32_t tensor);
/* Fill s->w with blocks `block` .. block + HB_STREAM_BLOCKS - 1 of the stream (s->w[0..3]:
 * block `block`). */
void hb_philox_stream_fill(hb_stream *s, uint32_t block);

#if HB_NN_MVE
/* Blocks block .. block + 3 of the stream into out[0..15] (block-major), the cache untouched. */
void hb_philox_blocks4(const hb_stream *s, uint32_t block, uint32_t *out);
#endif

/* Word `word` of the stream (inline: the common case is a hit in the cached blocks). */
static inline uint32_t hb_stream_word(hb_stream *s, uint32_t word) {
    uint32_t block = word >> 2;
    if (!s->valid || block - s->block >= HB_STREAM_BLOCKS) hb_philox_stream_fill(s, block);
    return s->w[word - 4u * s->block];
}
/* Half i mod 2 of word i div 2 (half 0: bits 0..15, half 1: bits 16..31). */
static inline uint32_t hb_stream_half(hb_stream *s, uint32_t i) {
    return (hb_stream_word(s, i >> 1) >> (16u * (i & 1u))) & 0xFFFFu;
}

/* Item i of PROBE's mini-batch: (u64) word_i * n_items >> 32, stream (batch_seed, 2), tensor 0. */
static inline uint32_t hb_philox_batch_index(hb_stream *batch, uint32_t n_items, uint32_t i) {
    return (uint32_t)(((uint64_t)hb_stream_word(batch, i) * n_items) >> 32);
}

#endif /* HB_ZO_PHILOX_H */
