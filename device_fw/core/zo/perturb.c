/* Raw samples (fresh or from the pool), scales: docs/zo-math.md sections 2 and 3. */
#include "zo/perturb.h"

#include "zo/philox.h"

static uint32_t popcount16(uint32_t h) {
    h = h - ((h >> 1) & 0x5555u);
    h = (h & 0x3333u) + ((h >> 2) & 0x3333u);
    h = (h + (h >> 4)) & 0x0F0Fu;
    return (h + (h >> 8)) & 0x1Fu;
}

/* element e of a stream's samples of distribution dist */
static int8_t fresh(uint8_t dist, hb_stream *s, uint32_t e) {
    if (dist == HB_DIST_RADEMACHER) {
        uint32_t w = hb_stream_word(s, e / HB_PER_WORD_RADEMACHER);
        return (w >> (e % HB_PER_WORD_RADEMACHER)) & 1u ? 1 : -1;
    }
    if (dist == HB_DIST_GAUSSIAN) return (int8_t)((int32_t)popcount16(hb_stream_half(s, e)) - 8);
    uint32_t w = hb_stream_word(s, e / HB_PER_WORD_UNIFORM);
    uint32_t b = (w >> (8u * (e % HB_PER_WORD_UNIFORM))) & 0x7Fu;
    return (int8_t)(2 * (int32_t)b - 127);
}

void hb_zo_pool_draw(uint8_t dist, uint32_t pool_seed, int8_t *pool, uint32_t pool_size) {
    hb_stream s;
    hb_stream_init(&s, pool_seed, HB_STREAM_POOL, 0);
    for (uint32_t e = 0; e < pool_size; e++) pool[e] = fresh(dist, &s, e);
}

void hb_zo_samples(const hb_zo_source *src, const hb_zo_tensor *t, uint32_t ti, uint32_t seed,
                   uint32_t e0, uint32_t count, int8_t *r, uint8_t *mult) {
    hb_stream s;
    hb_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
    const int trailing = t->layout == HB_ROWS_TRAILING;
    /* element e is entry i of row j: leading e = j L + i, trailing e = i R + j */
    uint32_t j = trailing ? e0 % t->rows : e0 / t->len;
    uint32_t i = trailing ? e0 / t->rows : e0 % t->len;
    uint32_t row_j = UINT32_MAX, off = 0; /* the pool offset of row row_j */
    for (uint32_t c = 0; c < count; c++) {
        if (src->pool_size) {
            if (row_j != j) {
                off = (hb_stream_half(&s, j) * src->pool_size) >> 16; /* < 2^32: no wrap */
                row_j = j;
            }
            uint32_t k = off + i; /* off < P and i < L <= P (the ZOCF check) */
            r[c] = src->pool[k >= src->pool_size ? k - src->pool_size : k];
        } else {
            r[c] = fresh(src->dist, &s, e0 + c);
        }
        if (mult) mult[c] = (uint8_t)hb_zo_row_mult(t, j);
        if (trailing) {
            if (++j == t->rows) {
                j = 0;
                i++;
            }
        } else if (++i == t->len) {
            i = 0;
            j++;
        }
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
