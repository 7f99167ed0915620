/* Raw samples, the pool, scales, unit directions and deltas (docs/zo-math.md sections 2-3).
 *
 * Everything is computed per element from the counter-based streams, a chunk of elements at a
 * time, so nothing per element of a tensor is stored outside the caller's chunk buffers. */
#ifndef HB_ZO_PERTURB_H
#define HB_ZO_PERTURB_H

#include <stdint.h>

#include "zo/philox.h"
#include "zo/zocf.h"

/* Elements the ZO code handles at a time (buffers of this many elements, never a tensor). */
#define HB_ZO_CHUNK 256u

/* What sample generation needs besides the tensor: the distribution and the pool (NULL and 0
 * when the ZOCF has none). */
typedef struct {
    uint8_t dist;
    const int8_t *pool;
    uint32_t pool_size;
} hb_zo_source;

/* The P pool samples from stream (pool_seed, 4), tensor 0, in the layout of fresh samples. */
void hb_zo_pool_draw(uint8_t dist, uint32_t pool_seed, int8_t *pool, uint32_t pool_size);

/* Raw samples r[0..count) of elements e0.. of trained tensor t (PRNG tensor index ti) for
 * seed: fresh from stream (seed, 1), or from the pool with one offset per row. If mult is not
 * NULL it receives each element's Q4 multiplier (its row's). */
void hb_zo_samples(const hb_zo_source *src, const hb_zo_tensor *t, uint32_t ti, uint32_t seed,
                   uint32_t e0, uint32_t count, int8_t *r, uint8_t *mult);

/* The perturbation stream (seed, 1, ti) of one trained tensor as a forward pass reads it, row
 * by row: besides the stream's own block, an optional cache of HB_ZO_ROW_CACHE_LINES blocks of
 * 4 words by block index (direct-mapped). A depthwise (trailing) row's L entries are R
 * elements apart, each in another block; the next row's entries are the next elements, mostly
 * in the same blocks, so with L <= HB_ZO_ROW_CACHE_LINES a block is computed about once per
 * tensor, not once per entry. Without the cache (lines NULL) the numbers are the same, each
 * entry of a trailing row costs a Philox call. Leading rows are runs of consecutive elements:
 * they never use the cache. */
typedef struct {
    uint32_t tag;  /* block index + 1 held by the line, 0: none */
    uint32_t w[4]; /* the block */
} hb_zo_rowline;
_Static_assert(sizeof(hb_zo_rowline) == HB_ZO_ROW_CACHE_LINE_BYTES, "a cache line as declared");
typedef struct {
    hb_stream s;
    hb_zo_rowline *lines; /* HB_ZO_ROW_CACHE_LINES lines, or NULL */
} hb_zo_rowstream;

/* lines: HB_ZO_ROW_CACHE_LINES lines the stream may use as its block cache (emptied here), or
 * NULL. */
void hb_zo_rowstream_init(hb_zo_rowstream *rs, uint32_t seed, uint32_t ti, hb_zo_rowline *lines);

/* Raw samples r[0..count) of entries i0.. of row j of trained tensor t (docs/zo-math.md
 * "Rows"; i0 + count <= t->len): the numbers hb_zo_samples gives those elements. rs is the
 * tensor's stream for the perturbation (hb_zo_rowstream_init(rs, seed, ti)), kept across
 * calls: rows read in order then cost about one Philox call per 4 fresh words. */
void hb_zo_row_samples(const hb_zo_source *src, const hb_zo_tensor *t, hb_zo_rowstream *rs,
                       uint32_t j, uint32_t i0, uint32_t count, int8_t *r);

/* An int8 weight plus a delta, clamped to +-HB_WEIGHT_LIMIT (a perturbed weight's value) */
static inline int8_t hb_zo_clamp_weight(int32_t v) {
    return (int8_t)(v > HB_WEIGHT_LIMIT    ? HB_WEIGHT_LIMIT
                    : v < -HB_WEIGHT_LIMIT ? -HB_WEIGHT_LIMIT
                                           : v);
}

/* A run of fresh samples turned into perturbed weights, with no samples in between: out[c] =
 * clamp(w[c] + tab[hb_zo_value_index(dist, r_c)], +-HB_WEIGHT_LIMIT) for c < count, where r_c
 * is the fresh sample of element e0 + c of stream s (hb_zo_row_samples' numbers for a leading
 * row's run) and tab a delta table (hb_zo_delta_table). A PROBE's row of a leading filter with
 * fresh samples: each word's lanes are read as table indices directly (the Rademacher bit,
 * the Gaussian popcount, the uniform 7 bits), a word at a time. */
void hb_zo_perturb_run(uint8_t dist, hb_stream *s, uint32_t e0, uint32_t count, const int8_t *w,
                       const int32_t *tab, int8_t *out);

/* Raw samples turned into perturbed weights in place: o[c] = clamp(b[c step] + tab[
 * hb_zo_value_index(dist, o[c])], +-HB_WEIGHT_LIMIT) for c < n, o holding the raw samples on
 * entry (a row piece of pool samples, or a depthwise row's), b the row's weights `step` apart. */
void hb_zo_perturb_samples(uint8_t dist, const int8_t *b, uint32_t step, uint32_t n,
                           const int32_t *tab, int8_t *o);

/* The number of distinct raw samples of a distribution (HB_DIST_*): 2, 17 or 128
 * (HB_ZO_VALUES_*), the entries of its delta table. */
uint32_t hb_zo_n_values(uint8_t dist);

/* The entry of raw sample r in its distribution's delta table, its rank among the
 * distribution's values (Rademacher -1, 1; Gaussian -8..8; uniform the odd -127..127):
 * (r + offset) >> shift. */
static inline int32_t hb_zo_value_offset(uint8_t dist) {
    return dist == HB_DIST_RADEMACHER ? 1 : dist == HB_DIST_GAUSSIAN ? 8 : 127;
}
static inline uint32_t hb_zo_value_shift(uint8_t dist) { return dist != HB_DIST_GAUSSIAN; }
static inline uint32_t hb_zo_value_index(uint8_t dist, int8_t r) {
    return (uint32_t)(r + hb_zo_value_offset(dist)) >> hb_zo_value_shift(dist);
}

/* tab[hb_zo_value_index(dist, r)] = rsym(rsym(r S, 8) em, 12) for every raw sample r of the
 * distribution (hb_zo_n_values(dist) entries): the signed delta
 * sign * hb_zo_delta(hb_zo_unit(r, S), eps, M, 0) of an int8 weight when em = sign * eps * M
 * (rsym is odd). */
void hb_zo_delta_table(uint8_t dist, uint32_t scale, int32_t em, int32_t *tab);

/* One signed delta as hb_zo_delta_table computes it (|r S| < 2^23, |u em| < 2^30). */
static inline int32_t hb_zo_signed_delta(int8_t r, uint32_t scale, int32_t em);

/* floor(sqrt(x)), bitwise. */
uint32_t hb_zo_isqrt_u64(uint64_t x);

/* A PROBE's buffered stream words (docs/firmware.md, the PROBE's scratch): the words of a
 * tensor of n fresh samples, in stream order, drawn once per seed and read by the scale and
 * both perturbed passes. hb_zo_words_bytes: their bytes, 64 per 16 words (whole groups of
 * four Philox blocks); hb_zo_fill_words: words 0 .. bytes / 4 - 1 of stream (seed, PERTURB,
 * ti) into out (4-byte aligned); hb_zo_sumsq_words: the sum of r^2 over samples 0 .. n - 1
 * (hb_zo_scale's Q for fresh samples); hb_zo_perturb_words: hb_zo_perturb_run over samples
 * 0 .. n - 1 read from the words. */
uint32_t hb_zo_words_bytes(uint8_t dist, uint32_t n);
void hb_zo_fill_words(uint32_t seed, uint32_t ti, uint32_t bytes, uint32_t *out);
uint64_t hb_zo_sumsq_words(uint8_t dist, const uint32_t *words, uint32_t n);
/* raw samples e0 .. e0 + cnt - 1 from the words (hb_zo_samples' fresh samples) */
void hb_zo_words_samples(uint8_t dist, const uint32_t *words, uint32_t e0, uint32_t cnt,
                         int8_t *r);
void hb_zo_perturb_words(uint8_t dist, const uint32_t *words, uint32_t n, const int8_t *w,
                         const int32_t *tab, int8_t *out);
/* out[c] = clamp(w[c] + tab[hb_zo_value_index(dist, raw[c])], +-HB_WEIGHT_LIMIT) for c < n
 * (hb_zo_perturb_samples with the raw samples read from raw, e.g. a pool's run) */
void hb_zo_perturb_from(uint8_t dist, const int8_t *raw, uint32_t n, const int8_t *w,
                        const int32_t *tab, int8_t *out);
/* a pool row: hb_zo_perturb_from over the L samples pool[(k + i) mod P] (k < P, L <= P) */
void hb_zo_perturb_pool_row(uint8_t dist, const int8_t *pool, uint32_t P, uint32_t k,
                            uint32_t L, const int8_t *w, const int32_t *tab, int8_t *out);
/* a pool's trailing (depthwise) filter, R rows of L entries, entry i of row j at element
 * i R + j: out[i R + j] = clamp(w[i R + j] + tab[hb_zo_value_index(dist, pool[(k_j + i) mod P])],
 * +-HB_WEIGHT_LIMIT), k_j = (h_j P) >> 16 with h_j = halves[j], or hb_stream_half(s, j) when
 * halves is NULL (L <= P) */
void hb_zo_perturb_pool_cols(uint8_t dist, const int8_t *pool, uint32_t P, const uint16_t *halves,
                             hb_stream *s, uint32_t R, uint32_t L, const int8_t *w,
                             const int32_t *tab, int8_t *out);
/* sum of r^2 over n raw samples */
uint64_t hb_zo_sumsq_raw(const int8_t *r, uint32_t n);
/* with a pool, a tensor's sum of r^2 (either layout) with its rows' offsets o_j from the seed's
 * words (half j: word j / 2's half j mod 2, the stream's halves as hb_stream_half reads them) */
uint64_t hb_zo_sumsq_pool_rows(const hb_zo_source *src, const hb_zo_tensor *t,
                               const uint32_t *words);
/* the adaptive scale of n samples whose squares sum to q (the end of hb_zo_scale) */
uint32_t hb_zo_scale_of_sumsq(uint64_t q, uint32_t n);

/* The scale S (Q16) of trained tensor t for seed: fixed per distribution, or adaptive
 * min(2^16, isqrt(floor(2^32 n / Q))), Q = sum r^2 (2^16 if Q = 0). */
uint32_t hb_zo_scale(const hb_zo_source *src, uint8_t scaling, const hb_zo_tensor *t,
                     uint32_t ti, uint32_t seed);

/* rsym(x, s) = sign(x) ((|x| + 2^(s-1)) >> s), s >= 1, |x| < 2^62, without a branch: for
 * x < 0 it is -floor((-x + 2^(s-1)) / 2^s) = floor((x + 2^(s-1) - 1) / 2^s), an arithmetic
 * shift. */
static inline int64_t hb_rsym(int64_t x, unsigned s) {
    return (x + ((int64_t)1 << (s - 1)) - (int64_t)(x < 0)) >> s;
}

/* u = rsym(r * S, 8): Q8, |u| <= 32512 (|r S| < 2^23: int32) */
static inline int32_t hb_zo_unit(int8_t r, uint32_t scale) {
    int32_t x = (int32_t)r * (int32_t)scale;
    const int sh = HB_SCALE_FRAC - HB_UNIT_FRAC;
    return (x + (1 << (sh - 1)) - (x < 0)) >> sh;
}

/* delta = rsym(eps * M * u, 12) << U, written as a product (<< of a negative is undefined
 * in C): |eps M u| <= 127 * 255 * 32512 < 2^30, |delta| < 2^30. */
static inline int32_t hb_zo_delta(int32_t u, uint32_t eps, uint32_t mult, uint32_t unit_shift) {
    int32_t x = (int32_t)eps * (int32_t)mult * u;
    int32_t d = (x + (1 << (HB_DELTA_SHIFT - 1)) - (x < 0)) >> HB_DELTA_SHIFT; /* rsym(x, 12) */
    return d * (1 << unit_shift);
}

static inline int32_t hb_zo_signed_delta(int8_t r, uint32_t scale, int32_t em) {
    const int32_t x = hb_zo_unit(r, scale) * em;
    return (x + (1 << (HB_DELTA_SHIFT - 1)) - (x < 0)) >> HB_DELTA_SHIFT; /* rsym(x, 12) */
}

#endif /* HB_ZO_PERTURB_H */
