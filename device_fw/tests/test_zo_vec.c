/* The vector paths of core/zo (Helium on an MVE build: the four-lane Philox, the fused
 * perturbation, the sample-to-weight loop, the delta table) against their scalar definitions,
 * on random cases beyond the golden vectors: every distribution, runs starting at any lane and
 * of any length (tails of every size), weights at -128 and +127, deltas far past +-255, strided
 * (depthwise) rows. On a scalar build the same checks test the scalar code against the same
 * definitions. No fixture files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hb_bytes.h"
#include "zo/loss.h"
#include "zo/perturb.h"
#include "zo/philox.h"

static uint32_t rng_state = 0x9E3779B9u;
static uint32_t rnd(void) {
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return rng_state = x;
}

static const uint8_t DISTS[3] = {HB_DIST_RADEMACHER, HB_DIST_GAUSSIAN, HB_DIST_UNIFORM};

/* every block a fill caches is hb_philox4x32_10 of its counter */
static void test_stream_fill(void) {
    for (int t = 0; t < 200; t++) {
        hb_stream s;
        hb_philox_stream_init(&s, rnd(), 1 + rnd() % 4, rnd() % 300);
        const uint32_t block = t < 4 ? (uint32_t)t : rnd() % (1u << 24);
        hb_philox_stream_fill(&s, block);
        for (uint32_t i = 0; i < HB_STREAM_BLOCKS; i++) {
            const uint32_t ctr[4] = {block + i, s.tensor, 0, 0};
            uint32_t want[4];
            hb_philox4x32_10(ctr, s.seed, s.stream, want);
            CHECK(memcmp(s.w + 4 * i, want, sizeof want) == 0, "block %u + %u", block, i);
        }
        /* and word access through the cache, in order and backwards */
        for (uint32_t k = 0; k < 40; k++) {
            const uint32_t word = t % 2 ? 4 * block + k : 4 * block + 39 - k;
            const uint32_t ctr[4] = {word >> 2, s.tensor, 0, 0};
            uint32_t want[4];
            hb_philox4x32_10(ctr, s.seed, s.stream, want);
            CHECK(hb_stream_word(&s, word) == want[word & 3], "word %u", word);
        }
    }
}

static int8_t weight(void) {
    const uint32_t k = rnd() % 8;
    return k == 0 ? -128 : k == 1 ? 127 : (int8_t)(rnd() & 0xFF);
}

/* at every magnitude: small ones give deltas within +-127 (the int8 lanes), large ones not */
static int32_t random_em(void) {
    static const uint32_t LIMIT[4] = {64u, 1024u, 16384u, 127u * 255u};
    const int32_t em = (int32_t)(rnd() % LIMIT[rnd() % 4]) + 1;
    return rnd() % 2 ? em : -em;
}

static uint32_t random_scale(uint8_t dist) {
    if (dist == HB_DIST_RADEMACHER) return HB_FIXED_SCALE_RADEMACHER;
    return 300 + rnd() % (HB_SCALE_MAX - 299);
}

/* the fused run equals clamp(w + tab[index(fresh sample)]) element by element */
static void test_perturb_run(void) {
    int8_t w[700], out[700], r[700];
    int32_t tab[HB_ZO_VALUES_UNIFORM];
    for (int t = 0; t < 600; t++) {
        const uint8_t dist = DISTS[t % 3];
        const uint32_t seed = rnd(), ti = rnd() % 8;
        const uint32_t e0 = rnd() % 5000, count = t % 50 == 0 ? 0 : rnd() % 700;
        hb_zo_delta_table(dist, random_scale(dist), random_em(), tab);
        for (uint32_t i = 0; i < count; i++) w[i] = weight();
        memset(out, 0x55, sizeof out);
        hb_stream s;
        hb_philox_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
        hb_zo_perturb_run(dist, &s, e0, count, w, tab, out);
        const hb_zo_source src = {dist, NULL, 0};
        const hb_zo_tensor tt = {0};
        if (count) hb_zo_samples(&src, &tt, ti, seed, e0, count, r, NULL);
        int bad = 0;
        for (uint32_t i = 0; i < count && !bad; i++) {
            const int8_t want = hb_zo_clamp_weight(w[i] + tab[hb_zo_value_index(dist, r[i])]);
            bad = out[i] != want;
            CHECK(!bad, "dist %u e0 %u count %u element %u: %d, expected %d", dist, e0, count, i,
                  out[i], want);
        }
        for (uint32_t i = count; i < sizeof out && !bad; i++) {
            bad = out[i] != 0x55;
            CHECK(!bad, "dist %u count %u: byte %u past the run written", dist, count, i);
        }
    }
}

/* raw samples in place -> perturbed weights, contiguous and strided rows */
static void test_perturb_samples(void) {
    static int8_t b[300 * 260];
    int8_t o[260], raw[260];
    int32_t tab[HB_ZO_VALUES_UNIFORM];
    for (int t = 0; t < 400; t++) {
        const uint8_t dist = DISTS[t % 3];
        const uint32_t step = t % 2 ? 1 : 1 + rnd() % 300, n = rnd() % 257;
        hb_zo_delta_table(dist, random_scale(dist), random_em(), tab);
        for (uint32_t i = 0; i < n; i++) {
            const uint32_t v = rnd();
            raw[i] = dist == HB_DIST_RADEMACHER ? (int8_t)(v % 2 ? 1 : -1)
                     : dist == HB_DIST_GAUSSIAN ? (int8_t)((int32_t)(v % 17) - 8)
                                                : (int8_t)(2 * (int32_t)(v % 128) - 127);
            b[(size_t)i * step] = weight();
        }
        memcpy(o, raw, n);
        o[n] = 0x55;
        hb_zo_perturb_samples(dist, b, step, n, tab, o);
        int bad = 0;
        for (uint32_t i = 0; i < n && !bad; i++) {
            const int8_t want =
                hb_zo_clamp_weight(b[(size_t)i * step] + tab[hb_zo_value_index(dist, raw[i])]);
            bad = o[i] != want;
            CHECK(!bad, "dist %u step %u n %u element %u: %d, expected %d", dist, step, n, i,
                  o[i], want);
        }
        CHECK(o[n] == 0x55, "dist %u n %u: the byte past the row written", dist, n);
    }
}

/* hb_loss_item against its definition (the max logit, the u32 sum of EXP[max - l], LIN of
 * the label's, ln of the sum), tables in place at an aligned and a misaligned address (the
 * vector path and the scalar one), n of every size 1..300 */
static void test_loss_item(void) {
    static _Alignas(4) uint8_t sec[4 + 4 * (2 * HB_EXP_SIZE + (1u << HB_LN_BITS) + 1)];
    int8_t logits[300];
    for (int al = 0; al < 2; al++) {
        uint8_t *base = sec + al;
        hb_loss_tables t = {base, base + 4u * HB_EXP_SIZE, base + 8u * HB_EXP_SIZE};
        for (uint32_t k = 0; k < HB_EXP_SIZE; k++) {
            hb_wr32(base + 4u * k, (65536u >> (k / 16u)) - (k % 16u) * 3u); /* falling */
            hb_wr32(base + 4u * (HB_EXP_SIZE + k), rnd());
        }
        for (uint32_t k = 0; k <= (1u << HB_LN_BITS); k++)
            hb_wr32(base + 8u * HB_EXP_SIZE + 4u * k, rnd() % 50000u);
        for (int c = 0; c < 400; c++) {
            const uint32_t n = 1 + (c < 300 ? (uint32_t)c : rnd() % 300), y = rnd() % n;
            for (uint32_t j = 0; j < n; j++) logits[j] = (int8_t)(rnd() & 0xFF);
            int32_t mx = logits[0];
            for (uint32_t j = 1; j < n; j++) mx = logits[j] > mx ? logits[j] : mx;
            uint32_t sum = 0;
            for (uint32_t j = 0; j < n; j++) sum += hb_rd32(t.exp + 4u * (uint32_t)(mx - logits[j]));
            const int64_t want =
                hb_rdi32(t.lin + 4u * (uint32_t)(mx - logits[y])) + hb_loss_ln_q16(&t, sum);
            const int64_t got = hb_loss_item(&t, logits, n, y);
            CHECK(got == want, "aligned %d n %u y %u: %lld, expected %lld", !al, n, y,
                  (long long)got, (long long)want);
        }
    }
}

/* the buffered words: the stream's words, and the scale's sum and the perturbation from them
 * equal the stream's (hb_zo_samples, hb_zo_perturb_run) */
static void test_words(void) {
    static uint32_t words[1024];
    static int8_t w[3000], a[3000], b[3000], r[3000];
    int32_t tab[HB_ZO_VALUES_UNIFORM];
    for (int c = 0; c < 120; c++) {
        const uint8_t dist = DISTS[c % 3];
        const uint32_t seed = rnd(), ti = rnd() % 8, n = 1 + rnd() % 2000;
        const uint32_t bytes = hb_zo_words_bytes(dist, n);
        CHECK(bytes % 64 == 0 && bytes <= sizeof words && bytes * 8u >= n * (32u / (dist == HB_DIST_RADEMACHER ? 32u : dist == HB_DIST_GAUSSIAN ? 2u : 4u)),
              "dist %u n %u: %u bytes", dist, n, bytes);
        hb_zo_fill_words(seed, ti, bytes, words);
        hb_stream s;
        hb_philox_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
        for (uint32_t i = 0; i < bytes / 4u; i++)
            CHECK(words[i] == hb_stream_word(&s, i), "dist %u word %u", dist, i);
        const hb_zo_source src = {dist, NULL, 0};
        const hb_zo_tensor tt = {0};
        hb_zo_samples(&src, &tt, ti, seed, 0, n, r, NULL);
        uint64_t q = 0;
        for (uint32_t e = 0; e < n; e++) q += (uint64_t)((int32_t)r[e] * r[e]);
        CHECK(hb_zo_sumsq_words(dist, words, n) == q, "dist %u n %u: sum of squares", dist, n);
        /* raw samples from the words, from element 0, a multiple of 16 and any element */
        const uint32_t e0 = c % 3 == 0 ? 0 : c % 3 == 1 ? 16u * (rnd() % (n / 16u + 1u)) : rnd() % n;
        const uint32_t cnt = e0 < n ? rnd() % (n - e0) + 1u : 0;
        memset(a, 0x55, sizeof a);
        hb_zo_words_samples(dist, words, e0, cnt, a);
        CHECK(memcmp(a, r + e0, cnt) == 0 && a[cnt] == 0x55, "dist %u e0 %u cnt %u: samples",
              dist, e0, cnt);
        hb_zo_delta_table(dist, random_scale(dist), random_em(), tab);
        for (uint32_t e = 0; e < n; e++) w[e] = weight();
        hb_philox_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
        hb_zo_perturb_run(dist, &s, 0, n, w, tab, a);
        hb_zo_perturb_words(dist, words, n, w, tab, b);
        CHECK(memcmp(a, b, n) == 0, "dist %u n %u: perturbation from the words", dist, n);
    }
}

/* A pool's depthwise (trailing) filter: hb_zo_perturb_pool_cols against its definition (row
 * j's entry i, element i R + j, from pool[(k_j + i) mod P]), its offsets from the words and
 * from the stream, rows of any count (tails of the eight-row groups) and offsets that wrap;
 * and the sum of squares of a trailing pool tensor (hb_zo_sumsq_pool_rows, hb_zo_scale)
 * against the raw samples hb_zo_samples gives. */
static void test_pool_cols(void) {
    static int8_t pool[2000], w[40 * 130], out[40 * 130 + 16], raw[40 * 130];
    static uint32_t words[64];
    int32_t tab[HB_ZO_VALUES_UNIFORM];
    for (int c = 0; c < 150; c++) {
        const uint8_t dist = DISTS[c % 3];
        const uint32_t L = 1 + rnd() % 40, R = 1 + rnd() % 120;
        const uint32_t P = c % 5 == 0 ? L : L + rnd() % (sizeof pool - L + 1);
        for (uint32_t i = 0; i < P; i++) {
            const uint32_t v = rnd();
            pool[i] = dist == HB_DIST_RADEMACHER ? (int8_t)(v % 2 ? 1 : -1)
                      : dist == HB_DIST_GAUSSIAN ? (int8_t)((int32_t)(v % 17) - 8)
                                                 : (int8_t)(2 * (int32_t)(v % 128) - 127);
        }
        const uint32_t seed = rnd(), ti = rnd() % 8;
        hb_zo_fill_words(seed, ti, sizeof words, words);
        const uint16_t *halves = (const uint16_t *)(const void *)words;
        for (uint32_t e = 0; e < R * L; e++) w[e] = weight();
        hb_zo_delta_table(dist, random_scale(dist), random_em(), tab);
        hb_stream s;
        hb_philox_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
        const int from_words = c % 2;
        memset(out, 0x55, sizeof out);
        hb_zo_perturb_pool_cols(dist, pool, P, from_words ? halves : NULL, &s, R, L, w, tab, out);
        int bad = 0;
        for (uint32_t j = 0; j < R && !bad; j++) {
            const uint32_t k = (halves[j] * P) >> 16; /* the words are the stream's */
            for (uint32_t i = 0; i < L && !bad; i++) {
                const size_t e = (size_t)i * R + j;
                const int8_t r = pool[(k + i) % P];
                const int8_t want = hb_zo_clamp_weight(w[e] + tab[hb_zo_value_index(dist, r)]);
                bad = out[e] != want;
                CHECK(!bad, "dist %u P %u R %u L %u words %d: row %u entry %u %d, expected %d",
                      dist, P, R, L, from_words, j, i, out[e], want);
            }
        }
        CHECK(out[R * L] == 0x55, "dist %u R %u L %u: the byte past the filter written", dist, R,
              L);
        /* the tensor's sum of squares, trailing, with this pool */
        const hb_zo_source src = {dist, pool, P};
        const hb_zo_tensor tt = {0, HB_ZO_WEIGHT, HB_ROWS_TRAILING, 16, 0, R * L, R, L, NULL};
        hb_zo_samples(&src, &tt, ti, seed, 0, R * L, raw, NULL);
        uint64_t q = 0;
        for (uint32_t e = 0; e < R * L; e++) q += (uint64_t)((int32_t)raw[e] * raw[e]);
        CHECK(hb_zo_sumsq_pool_rows(&src, &tt, words) == q,
              "dist %u P %u R %u L %u: sum of squares", dist, P, R, L);
        CHECK(hb_zo_scale(&src, HB_SCALING_ADAPTIVE, &tt, ti, seed) ==
                  hb_zo_scale_of_sumsq(q, R * L),
              "dist %u P %u R %u L %u: the adaptive scale", dist, P, R, L);
    }
}

/* the table is hb_zo_signed_delta of each raw sample, at random and extreme S and em */
static void test_delta_table(void) {
    int32_t tab[HB_ZO_VALUES_UNIFORM + 4];
    for (int t = 0; t < 300; t++) {
        const uint8_t dist = DISTS[t % 3];
        const uint32_t scale = t < 30 ? HB_SCALE_MAX : random_scale(dist);
        const int32_t em = t < 15 ? 127 * 255 : t < 30 ? -127 * 255 : random_em();
        for (uint32_t i = 0; i < HB_ZO_VALUES_UNIFORM + 4; i++) tab[i] = 0x5A5A5A5A;
        hb_zo_delta_table(dist, scale, em, tab);
        const uint32_t n = hb_zo_n_values(dist);
        const int32_t lo = -hb_zo_value_offset(dist), stride = 1 << hb_zo_value_shift(dist);
        for (uint32_t i = 0; i < n; i++) {
            const int8_t r = (int8_t)(lo + (int32_t)i * stride);
            CHECK(tab[i] == hb_zo_signed_delta(r, scale, em), "dist %u entry %u", dist, i);
        }
        CHECK(tab[n] == 0x5A5A5A5A, "dist %u: entry past the table written", dist);
    }
}

int main(void) {
    test_stream_fill();
    test_perturb_run();
    test_perturb_samples();
    test_delta_table();
    test_loss_item();
    test_words();
    test_pool_cols();
    TEST_MAIN_END("test_zo_vec");
}
