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

static uint32_t popcount16(uint32_t h) {
    return (uint32_t)POPCOUNT8[h & 0xFFu] + POPCOUNT8[h >> 8];
}

/* fresh samples e0 .. e0+count-1 of a stream: a word is read when its first lane is needed
 * (one loop per distribution, so the lanes per word are constants: shifts, not divisions) */
static void fresh_run(uint8_t dist, hb_stream *s, uint32_t e0, uint32_t count, int8_t *r) {
    const uint32_t end = e0 + count;
    if (dist == HB_DIST_RADEMACHER) {
        uint32_t w = hb_stream_word(s, e0 / HB_PER_WORD_RADEMACHER);
        for (uint32_t e = e0; e < end; e++) {
            const uint32_t lane = e % HB_PER_WORD_RADEMACHER;
            if (lane == 0) w = hb_stream_word(s, e / HB_PER_WORD_RADEMACHER);
            *r++ = (int8_t)((int32_t)((w >> lane) & 1u) * 2 - 1);
        }
    } else if (dist == HB_DIST_GAUSSIAN) {
        uint32_t w = hb_stream_word(s, e0 / HB_PER_WORD_GAUSSIAN);
        for (uint32_t e = e0; e < end; e++) {
            const uint32_t lane = e % HB_PER_WORD_GAUSSIAN;
            if (lane == 0) w = hb_stream_word(s, e / HB_PER_WORD_GAUSSIAN);
            *r++ = (int8_t)((int32_t)popcount16((w >> (16u * lane)) & 0xFFFFu) - 8);
        }
    } else {
        uint32_t w = hb_stream_word(s, e0 / HB_PER_WORD_UNIFORM);
        for (uint32_t e = e0; e < end; e++) {
            const uint32_t lane = e % HB_PER_WORD_UNIFORM;
            if (lane == 0) w = hb_stream_word(s, e / HB_PER_WORD_UNIFORM);
            *r++ = (int8_t)(2 * (int32_t)((w >> (8u * lane)) & 0x7Fu) - 127);
        }
    }
}

void hb_zo_pool_draw(uint8_t dist, uint32_t pool_seed, int8_t *pool, uint32_t pool_size) {
    hb_stream s;
    hb_philox_stream_init(&s, pool_seed, HB_STREAM_POOL, 0);
    fresh_run(dist, &s, 0, pool_size, pool);
}

void hb_zo_samples(const hb_zo_source *src, const hb_zo_tensor *t, uint32_t ti, uint32_t seed,
                   uint32_t e0, uint32_t count, int8_t *r, uint8_t *mult) {
    hb_stream s;
    hb_philox_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
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

void hb_zo_rowstream_init(hb_zo_rowstream *rs, uint32_t seed, uint32_t ti, hb_zo_rowline *lines) {
    hb_philox_stream_init(&rs->s, seed, HB_STREAM_PERTURB, ti);
    rs->lines = lines;
    if (lines)
        for (uint32_t l = 0; l < HB_ZO_ROW_CACHE_LINES; l++) lines[l].tag = 0;
}

/* word `word` of the stream through the block cache (without one: the stream's own block) */
static uint32_t row_word(hb_zo_rowstream *rs, uint32_t word) {
    if (!rs->lines) return hb_stream_word(&rs->s, word);
    const uint32_t block = word >> 2;
    hb_zo_rowline *line = &rs->lines[block % HB_ZO_ROW_CACHE_LINES];
    if (line->tag != block + 1) {
        hb_philox_stream_fill(&rs->s, block);
        memcpy(line->w, rs->s.w, sizeof line->w);
        line->tag = block + 1; /* block < 2^24 (n <= 2^26): no wrap */
    }
    return line->w[word & 3u];
}

/* the fresh sample of element e (a lane of a word) */
static int8_t fresh_one(uint8_t dist, hb_zo_rowstream *rs, uint32_t e) {
    if (dist == HB_DIST_RADEMACHER) {
        const uint32_t w = row_word(rs, e / HB_PER_WORD_RADEMACHER);
        return (int8_t)((int32_t)((w >> (e % HB_PER_WORD_RADEMACHER)) & 1u) * 2 - 1);
    }
    if (dist == HB_DIST_GAUSSIAN) {
        const uint32_t w = row_word(rs, e / HB_PER_WORD_GAUSSIAN);
        return (int8_t)((int32_t)popcount16((w >> (16u * (e % 2u))) & 0xFFFFu) - 8);
    }
    const uint32_t w = row_word(rs, e / HB_PER_WORD_UNIFORM);
    return (int8_t)(2 * (int32_t)((w >> (8u * (e % HB_PER_WORD_UNIFORM))) & 0x7Fu) - 127);
}

void hb_zo_row_samples(const hb_zo_source *src, const hb_zo_tensor *t, hb_zo_rowstream *rs,
                       uint32_t j, uint32_t i0, uint32_t count, int8_t *r) {
    const uint32_t P = src->pool_size;
    if (P) { /* entry i of row j: pool[(o_j + i) mod P], o_j < P, i < L <= P */
        uint32_t k = ((hb_stream_half(&rs->s, j) * P) >> 16) + i0;
        if (k >= P) k -= P;
        const uint32_t first = P - k < count ? P - k : count; /* count <= L <= P: one wrap */
        memcpy(r, src->pool + k, first);
        memcpy(r + first, src->pool, count - first);
    } else if (t->layout == HB_ROWS_TRAILING) { /* element i R + j */
        for (uint32_t c = 0; c < count; c++)
            r[c] = fresh_one(src->dist, rs, (i0 + c) * t->rows + j);
    } else { /* element j L + i: a run of consecutive elements */
        fresh_run(src->dist, &rs->s, j * t->len + i0, count, r);
    }
}

void hb_zo_perturb_run(uint8_t dist, hb_stream *s, uint32_t e0, uint32_t count, const int8_t *w,
                       const int32_t *tab, int8_t *out) {
    /* per word: its lanes from the run's first to the word's last (or the run's end) */
    const uint32_t per = dist == HB_DIST_RADEMACHER ? HB_PER_WORD_RADEMACHER
                         : dist == HB_DIST_GAUSSIAN ? HB_PER_WORD_GAUSSIAN
                                                    : HB_PER_WORD_UNIFORM;
    const uint32_t bits = 32u / per;
    for (uint32_t e = e0, end = e0 + count; e < end;) {
        const uint32_t lane = e % per, n = per - lane < end - e ? per - lane : end - e;
        uint32_t word = hb_stream_word(s, e / per) >> (bits * lane);
        if (dist == HB_DIST_RADEMACHER) /* rank: the bit (r = 2 bit - 1) */
            for (uint32_t c = 0; c < n; c++, word >>= 1)
                out[c] = hb_zo_clamp_weight(w[c] + tab[word & 1u]);
        else if (dist == HB_DIST_GAUSSIAN) /* rank: the popcount (r = popcount - 8) */
            for (uint32_t c = 0; c < n; c++, word >>= 16)
                out[c] = hb_zo_clamp_weight(w[c] + tab[popcount16(word & 0xFFFFu)]);
        else /* rank: the low 7 bits (r = 2 u - 127) */
            for (uint32_t c = 0; c < n; c++, word >>= 8)
                out[c] = hb_zo_clamp_weight(w[c] + tab[word & 0x7Fu]);
        w += n;
        out += n;
        e += n;
    }
}

uint32_t hb_zo_n_values(uint8_t dist) {
    return dist == HB_DIST_RADEMACHER ? HB_ZO_VALUES_RADEMACHER
           : dist == HB_DIST_GAUSSIAN ? HB_ZO_VALUES_GAUSSIAN
                                      : HB_ZO_VALUES_UNIFORM;
}

void hb_zo_delta_table(uint8_t dist, uint32_t scale, int32_t em, int32_t *tab) {
    /* the raw samples: Rademacher -1, 1; Gaussian -8..8; uniform the odd -127..127 */
    const int32_t lo = -hb_zo_value_offset(dist);
    const int32_t stride = 1 << hb_zo_value_shift(dist);
    for (int32_t r = lo; r <= -lo; r += stride)
        tab[hb_zo_value_index(dist, (int8_t)r)] = hb_zo_signed_delta((int8_t)r, scale, em);
}

uint32_t hb_zo_isqrt_u64(uint64_t x) {
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
    uint32_t s = hb_zo_isqrt_u64(((uint64_t)t->n << 32) / q); /* n < 2^26: no wrap */
    return s < HB_SCALE_MAX ? s : HB_SCALE_MAX;
}
