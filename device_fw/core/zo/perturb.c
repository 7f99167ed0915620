/* Raw samples (fresh or from the pool), scales: docs/zo-math.md sections 2 and 3. */
#include "zo/perturb.h"

#include <string.h>

#include "zo/philox.h"

/* bits set in a byte: the Gaussian's popcount of a 16-bit half is two lookups */
static const uint8_t POPCOUNT8[256] = {
#define B2(n) n, n + 1, n + 1, n + 2
#define B4(n) B2(n), B2(n + 1), B2(n + 1), B2(n + 2)
#define B6(n) B4(n), B4(n + 1), B4(n + 1), B4(n + 2)
    B6(0), B6(1), B6(1), B6(2)
#undef B2
#undef B4
#undef B6
};

static uint32_t popcount16(uint32_t h) { return (uint32_t)POPCOUNT8[h & 0xFFu] + POPCOUNT8[h >> 8]; }

/* fresh samples e0 .. e0+count-1 of a stream, a word at a time */
static void fresh_run(uint8_t dist, hb_stream *s, uint32_t e0, uint32_t count, int8_t *r) {
    const uint32_t per = dist == HB_DIST_RADEMACHER ? HB_PER_WORD_RADEMACHER
                         : dist == HB_DIST_GAUSSIAN ? HB_PER_WORD_GAUSSIAN
                                                    : HB_PER_WORD_UNIFORM;
    uint32_t e = e0, end = e0 + count;
    while (e < end) {
        uint32_t w = hb_stream_word(s, e / per);
        uint32_t lane = e % per, stop = end - e < per - lane ? lane + (end - e) : per;
        if (dist == HB_DIST_RADEMACHER) {
            for (uint32_t l = lane; l < stop; l++) *r++ = (int8_t)((int32_t)((w >> l) & 1u) * 2 - 1);
        } else if (dist == HB_DIST_GAUSSIAN) {
            for (uint32_t l = lane; l < stop; l++)
                *r++ = (int8_t)((int32_t)popcount16((w >> (16u * l)) & 0xFFFFu) - 8);
        } else {
            for (uint32_t l = lane; l < stop; l++)
                *r++ = (int8_t)(2 * (int32_t)((w >> (8u * l)) & 0x7Fu) - 127);
        }
        e += stop - lane;
    }
}

void hb_zo_pool_draw(uint8_t dist, uint32_t pool_seed, int8_t *pool, uint32_t pool_size) {
    hb_stream s;
    hb_stream_init(&s, pool_seed, HB_STREAM_POOL, 0);
    fresh_run(dist, &s, 0, pool_size, pool);
}

void hb_zo_samples(const hb_zo_source *src, const hb_zo_tensor *t, uint32_t ti, uint32_t seed,
                   uint32_t e0, uint32_t count, int8_t *r, uint8_t *mult) {
    hb_stream s;
    hb_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
    const uint32_t P = src->pool_size;
    if (!P) {
        fresh_run(src->dist, &s, e0, count, r);
        if (!mult) return;
        if (!t->cm) {
            memset(mult, t->eps_mult, count);
            return;
        }
    }
    /* with a pool: entry i of row j is pool[(o_j + i) mod P], o_j = (h_j P) >> 16 (< 2^32);
     * o_j < P and i < L <= P (the ZOCF check), so one subtraction replaces the mod */
    if (t->layout == HB_ROWS_TRAILING) { /* element e = i R + j: rows interleave */
        uint32_t j = e0 % t->rows, i = e0 / t->rows;
        for (uint32_t c = 0; c < count; c++) {
            if (P) {
                uint32_t k = ((hb_stream_half(&s, j) * P) >> 16) + i;
                r[c] = src->pool[k >= P ? k - P : k];
            }
            if (mult) mult[c] = (uint8_t)hb_zo_row_mult(t, j);
            if (++j == t->rows) {
                j = 0;
                i++;
            }
        }
        return;
    }
    /* element e = j L + i: a chunk is runs of consecutive entries of a row */
    uint32_t j = e0 / t->len, i = e0 % t->len;
    for (uint32_t c = 0; c < count; j++, i = 0) {
        uint32_t run = t->len - i < count - c ? t->len - i : count - c;
        if (P) {
            uint32_t k = ((hb_stream_half(&s, j) * P) >> 16) + i;
            if (k >= P) k -= P;
            uint32_t first = P - k < run ? P - k : run; /* run <= P: at most one wrap */
            memcpy(r + c, src->pool + k, first);
            memcpy(r + c + first, src->pool, run - first);
        }
        if (mult) memset(mult + c, (int)hb_zo_row_mult(t, j), run);
        c += run;
    }
}

uint32_t hb_isqrt_u64(uint64_t x) {
    uint64_t r = 0, bit = (uint64_t)1 << 62;
    while (bit > x) bit >>= 2;
    while (bit) {
        if (x >= r + bit) {
            x -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
        bit >>= 2;
    }
    return (uint32_t)r;
}

uint32_t hb_zo_scale(const hb_zo_source *src, uint8_t scaling, const hb_zo_tensor *t,
                     uint32_t ti, uint32_t seed) {
    if (scaling == HB_SCALING_FIXED || src->dist == HB_DIST_RADEMACHER) {
        /* adaptive Rademacher: Q = n, so S = isqrt(2^32) = 2^16 = its fixed scale */
        return src->dist == HB_DIST_RADEMACHER ? HB_FIXED_SCALE_RADEMACHER
               : src->dist == HB_DIST_GAUSSIAN ? HB_FIXED_SCALE_GAUSSIAN
                                               : HB_FIXED_SCALE_UNIFORM;
    }
    int8_t r[HB_ZO_CHUNK];
    uint64_t q = 0; /* <= 127^2 n < 2^40 */
    for (uint32_t e0 = 0; e0 < t->n; e0 += HB_ZO_CHUNK) {
        uint32_t cnt = t->n - e0 < HB_ZO_CHUNK ? t->n - e0 : HB_ZO_CHUNK;
        hb_zo_samples(src, t, ti, seed, e0, cnt, r, NULL);
        for (uint32_t c = 0; c < cnt; c++) q += (uint64_t)((int32_t)r[c] * r[c]);
    }
    if (q == 0) return HB_SCALE_MAX;
    uint32_t s = hb_isqrt_u64(((uint64_t)t->n << 32) / q); /* n < 2^26: no wrap */
    return s < HB_SCALE_MAX ? s : HB_SCALE_MAX;
}
