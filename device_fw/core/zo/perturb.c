/* Raw samples (fresh or from the pool), scales: docs/zo-math.md sections 2 and 3. */
#include "zo/perturb.h"

#include <string.h>

#include "hb_mve.h"
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

#if HB_NN_MVE
/* The delta table hb_zo_delta_table built last, narrowed to int16 and clamped to +-255 for the
 * Helium perturbation: with |w| <= 128 and L = HB_WEIGHT_LIMIT < 255, clamp(w + d, +-L) is
 * clamp(w + clamp(d, +-255), +-L), and w + clamp(d, +-255) fits an int16 lane. `narrow_of`
 * is the table it mirrors (hb_zo_perturb_run falls back to the scalar loop for any other). */
static int16_t narrow[HB_ZO_VALUES_UNIFORM];
static const int32_t *narrow_of;
static uint32_t narrow_n;
/* and, when every delta of that table lies in +-127 (small perturbations: the usual case),
 * the same deltas as int8 (narrow8_ok): clamp(w + d, +-L) is then max(sat8(w + d), -L) on
 * sixteen int8 lanes (w + d lies in -255..254, sat8 clamps it to -128..127) */
static int8_t narrow8[HB_ZO_VALUES_UNIFORM];
static int narrow8_ok;
_Static_assert(HB_WEIGHT_LIMIT == 127, "the int8 lanes' clamp: sat8, then max with -127");

_Static_assert(HB_WEIGHT_LIMIT < 255, "clamp(w + d) = clamp(w + clamp(d, +-255)) for |w| <= 128");
static int16_t narrow_delta(int32_t d) { return (int16_t)(d > 255 ? 255 : d < -255 ? -255 : d); }

/* 16-bit popcount per lane (the Gaussian's table index), SWAR as in Hacker's Delight 5-1 */
static inline uint16x8_t popcount16_mve(uint16x8_t x) {
    x = vsubq_u16(x, vandq_u16(vshrq_n_u16(x, 1), vdupq_n_u16(0x5555)));
    const uint16x8_t m2 = vdupq_n_u16(0x3333);
    x = vaddq_u16(vandq_u16(x, m2), vandq_u16(vshrq_n_u16(x, 2), m2));
    x = vandq_u16(vaddq_u16(x, vshrq_n_u16(x, 4)), vdupq_n_u16(0x0F0F));
    return vandq_u16(vaddq_u16(x, vshrq_n_u16(x, 8)), vdupq_n_u16(0x1F));
}

/* Words wi0 .. wi0 + nw - 1 of a stream into wb (the stream's cached blocks copied four words
 * per vector, a fill of HB_STREAM_BLOCKS blocks at a time). */
static void stream_words(hb_stream *s, uint32_t wi0, uint32_t nw, uint32_t *wb) {
    if (wi0 % 16u == 0) { /* four whole blocks at a time, straight into wb (wb holds
                             nw rounded up to 16 words: RUN_WORDS is a multiple of 16) */
        for (uint32_t i = 0; i < nw; i += 16) hb_philox_blocks4(s, (wi0 + i) / 4u, wb + i);
        return;
    }
    for (uint32_t i = 0; i < nw;) {
        const uint32_t wi = wi0 + i;
        (void)hb_stream_word(s, wi); /* the block of word wi cached */
        const uint32_t at = wi - 4u * s->block, avail = 4u * HB_STREAM_BLOCKS - at;
        const uint32_t m = avail < nw - i ? avail : nw - i;
        for (uint32_t k = 0; k < m; k += 4) {
            const mve_pred16_t live = vctp32q(m - k);
            vstrwq_p_u32(wb + i + k, vldrwq_z_u32(s->w + at + k, live), live);
        }
        i += m;
    }
}

enum { RUN_WORDS = 64 }; /* words per piece: 2048 Rademacher, 128 Gaussian, 256 uniform */
_Static_assert(RUN_WORDS % 16 == 0, "stream_words fills whole groups of four blocks");

/* One piece's n elements from its samples (lane c of element c: bit c of bits / half c of
 * halves / the low 7 bits of byte c of bytes): eight per int16 vector, the last group
 * predicated; the weights widened, the delta added, clamped to +-L, narrowed and stored. */
static inline __attribute__((always_inline)) int16x8_t delta_mve(
    uint8_t dist, const uint8_t *bits, const uint16_t *halves, const uint8_t *bytes, uint32_t c,
    mve_pred16_t live, int16x8_t d0, int16_t diff, uint16x8_t neg_lane) {
    if (dist == HB_DIST_RADEMACHER) { /* d0 + bit * (d1 - d0) */
        const uint16x8_t b =
            vshlq_u16(vdupq_n_u16(bits[c >> 3]), vreinterpretq_s16_u16(neg_lane));
        return vmlaq_n_s16(d0, vreinterpretq_s16_u16(vandq_u16(b, vdupq_n_u16(1))), diff);
    }
    const uint16x8_t idx = dist == HB_DIST_GAUSSIAN
                               ? popcount16_mve(vldrhq_z_u16(halves + c, live))
                               : vandq_u16(vldrbq_z_u16(bytes + c, live), vdupq_n_u16(0x7F));
    return vldrhq_gather_shifted_offset_z_s16(narrow, idx, live);
}

static inline __attribute__((always_inline)) void perturb_piece_mve(
    uint8_t dist, const uint32_t *wb, uint32_t lane0, uint32_t n, const int8_t *w, int8_t *out,
    int16x8_t d0, int16_t diff) {
    const int16x8_t lo = vdupq_n_s16(-HB_WEIGHT_LIMIT), hi = vdupq_n_s16(HB_WEIGHT_LIMIT);
    const uint16x8_t neg_lane = vreinterpretq_u16_s16(vnegq_s16(vreinterpretq_s16_u16(
        vidupq_n_u16(0, 1)))); /* lane c: shift right by c */
    const uint8_t *bits = (const uint8_t *)wb; /* Rademacher: lane0 is 0 (shifted out) */
    const uint16_t *halves = (const uint16_t *)(const void *)wb + lane0;
    const uint8_t *bytes = (const uint8_t *)wb + lane0;
    uint32_t c = 0;
    for (; c + 8 <= n; c += 8) {
        const int16x8_t d = delta_mve(dist, bits, halves, bytes, c, 0xFFFF, d0, diff, neg_lane);
        const int16x8_t v = vaddq_s16(vldrbq_s16(w + c), d);
        vstrbq_s16(out + c, vminq_s16(vmaxq_s16(v, lo), hi));
    }
    if (c < n) { /* the tail, predicated: no byte past the run is read or written */
        const mve_pred16_t live = vctp16q(n - c);
        const int16x8_t d = delta_mve(dist, bits, halves, bytes, c, live, d0, diff, neg_lane);
        const int16x8_t v = vaddq_s16(vldrbq_z_s16(w + c, live), d);
        vstrbq_p_s16(out + c, vminq_s16(vmaxq_s16(v, lo), hi), live);
    }
}

/* The same piece on sixteen int8 lanes (Rademacher and uniform, every delta in +-127: d8 the
 * table, d8[0] and d8[1] for Rademacher): a Rademacher lane's bit is selected from the two
 * bytes of its sixteen bits (a gather of byte c / 8, lane & 7's mask), a uniform lane's
 * delta gathered from the int8 table by its low 7 bits. */
static inline __attribute__((always_inline)) void perturb_piece8_mve(
    uint8_t dist, const uint32_t *wb, uint32_t lane0, uint32_t n, const int8_t *w, int8_t *out,
    const int8_t *d8) {
    const int8x16_t lo = vdupq_n_s8(-HB_WEIGHT_LIMIT);
    const uint8x16_t lane = vidupq_n_u8(0, 1);
    const uint8x16_t byte_of = vshrq_n_u8(lane, 3);                    /* 0 x 8, 1 x 8 */
    const uint8x16_t mask = vshlq_u8(vdupq_n_u8(1), vreinterpretq_s8_u8(vandq_u8(lane, vdupq_n_u8(7))));
    const int8x16_t dv0 = vdupq_n_s8(d8[0]), dv1 = vdupq_n_s8(d8[1]);
    const uint8_t *bits = (const uint8_t *)wb;
    const uint8_t *bytes = (const uint8_t *)wb + lane0;
    uint32_t c = 0;
    for (; c + 16 <= n; c += 16) { /* whole vectors, unpredicated */
        int8x16_t d;
        if (dist == HB_DIST_RADEMACHER) {
            const uint8x16_t b = vldrbq_gather_offset_u8(bits + (c >> 3), byte_of);
            d = vpselq_s8(dv1, dv0, vcmpneq_n_u8(vandq_u8(b, mask), 0));
        } else {
            d = vldrbq_gather_offset_s8(d8, vandq_u8(vldrbq_u8(bytes + c), vdupq_n_u8(0x7F)));
        }
        vst1q_s8(out + c, vmaxq_s8(vqaddq_s8(vld1q_s8(w + c), d), lo));
    }
    if (c < n) { /* the tail: no byte past the run read or written */
        const mve_pred16_t live = vctp8q(n - c);
        int8x16_t d;
        if (dist == HB_DIST_RADEMACHER) {
            const uint8x16_t b = vldrbq_gather_offset_z_u8(bits + (c >> 3), byte_of, live);
            d = vpselq_s8(dv1, dv0, vcmpneq_n_u8(vandq_u8(b, mask), 0));
        } else {
            const uint8x16_t idx = vandq_u8(vldrbq_z_u8(bytes + c, live), vdupq_n_u8(0x7F));
            d = vldrbq_gather_offset_z_s8(d8, idx, live);
        }
        const int8x16_t v = vqaddq_s8(vldrbq_z_s8(w + c, live), d);
        vstrbq_p_s8(out + c, vmaxq_s8(v, lo), live);
    }
}

/* Helium: the run in pieces of up to RUN_WORDS stream words, each copied from the stream's
 * blocks (the four-lane Philox fills four at a time) and read by vector lanes. */
static void perturb_run_mve(uint8_t dist, hb_stream *s, uint32_t e0, uint32_t count,
                            const int8_t *w, const int32_t *tab, int8_t *out) {
    const uint32_t per = dist == HB_DIST_RADEMACHER ? HB_PER_WORD_RADEMACHER
                         : dist == HB_DIST_GAUSSIAN ? HB_PER_WORD_GAUSSIAN
                                                    : HB_PER_WORD_UNIFORM;
    const int16_t n0 = narrow_delta(tab[0]), n1 = narrow_delta(tab[1]);
    const int16x8_t d0 = vdupq_n_s16(n0);
    const int16_t diff = (int16_t)(n1 - n0);
    /* int8 lanes: Rademacher when both deltas fit, uniform when its table's do */
    int8_t r8[2] = {(int8_t)n0, (int8_t)n1};
    const int8_t *d8 = dist == HB_DIST_RADEMACHER
                           ? (n0 >= -127 && n0 <= 127 && n1 >= -127 && n1 <= 127 ? r8 : NULL)
                       : dist == HB_DIST_UNIFORM && narrow8_ok ? narrow8
                                                               : NULL;
    uint32_t wb[RUN_WORDS + 1];
    while (count) {
        const uint32_t wi0 = e0 / per, lane0 = e0 % per;
        const uint32_t n = count < RUN_WORDS * per - lane0 ? count : RUN_WORDS * per - lane0;
        const uint32_t nw = (lane0 + n + per - 1) / per;
        stream_words(s, wi0, nw, wb);
        uint32_t first = lane0;
        if (dist == HB_DIST_RADEMACHER && lane0) { /* bit lane0 to bit 0 */
            wb[nw] = 0;
            for (uint32_t i = 0; i < nw; i++)
                wb[i] = (wb[i] >> lane0) | (wb[i + 1] << (32u - lane0));
            first = 0;
        }
        /* one loop per distribution (the lane's decoding a constant in each) */
        if (d8 && dist == HB_DIST_RADEMACHER)
            perturb_piece8_mve(HB_DIST_RADEMACHER, wb, first, n, w, out, d8);
        else if (d8)
            perturb_piece8_mve(HB_DIST_UNIFORM, wb, first, n, w, out, d8);
        else if (dist == HB_DIST_RADEMACHER)
            perturb_piece_mve(HB_DIST_RADEMACHER, wb, first, n, w, out, d0, diff);
        else if (dist == HB_DIST_GAUSSIAN)
            perturb_piece_mve(HB_DIST_GAUSSIAN, wb, first, n, w, out, d0, diff);
        else
            perturb_piece_mve(HB_DIST_UNIFORM, wb, first, n, w, out, d0, diff);
        e0 += n;
        count -= n;
        w += n;
        out += n;
    }
}

/* sum of r^2 over the first k <= 256 samples of words wb (uniform or Gaussian), sixteen
 * (eight) lanes per vector: at most 256 x 127^2, an int32 */
static uint32_t sumsq_piece_mve(uint8_t dist, const uint32_t *wb, uint32_t k) {
    int32_t acc = 0;
    if (dist == HB_DIST_GAUSSIAN) {
        const uint16_t *halves = (const uint16_t *)(const void *)wb;
        for (uint32_t c = 0; c < k; c += 8) {
            const mve_pred16_t live = vctp16q(k - c);
            const int16x8_t r = vsubq_s16(
                vreinterpretq_s16_u16(popcount16_mve(vldrhq_z_u16(halves + c, live))),
                vdupq_n_s16(8));
            acc = vmladavaq_p_s16(acc, r, r, live);
        }
    } else {
        const uint8_t *bytes = (const uint8_t *)wb;
        uint32_t c = 0;
        for (; c + 16 <= k; c += 16) { /* whole vectors unpredicated */
            const uint8x16_t u = vandq_u8(vldrbq_u8(bytes + c), vdupq_n_u8(0x7F));
            const int8x16_t r = vreinterpretq_s8_u8(vsubq_u8(vshlq_n_u8(u, 1), vdupq_n_u8(127)));
            acc = vmladavaq_s8(acc, r, r);
        }
        if (c < k) {
            const mve_pred16_t live = vctp8q(k - c);
            const uint8x16_t u = vandq_u8(vldrbq_z_u8(bytes + c, live), vdupq_n_u8(0x7F));
            const int8x16_t r = vreinterpretq_s8_u8(vsubq_u8(vshlq_n_u8(u, 1), vdupq_n_u8(127)));
            acc = vmladavaq_p_s8(acc, r, r, live);
        }
    }
    return (uint32_t)acc;
}

/* sum of r^2 over fresh samples 0 .. n - 1 of a stream (uniform or Gaussian: the adaptive
 * scale's Q), a piece of RUN_WORDS words at a time */
static uint64_t sumsq_fresh_mve(uint8_t dist, hb_stream *s, uint32_t n) {
    const uint32_t per = dist == HB_DIST_GAUSSIAN ? HB_PER_WORD_GAUSSIAN : HB_PER_WORD_UNIFORM;
    uint32_t wb[RUN_WORDS];
    uint64_t q = 0;
    for (uint32_t e0 = 0; e0 < n; e0 += RUN_WORDS * per) {
        const uint32_t k = n - e0 < RUN_WORDS * per ? n - e0 : RUN_WORDS * per;
        stream_words(s, e0 / per, (k + per - 1) / per, wb);
        q += sumsq_piece_mve(dist, wb, k);
    }
    return q;
}

/* sum of r^2 over a chunk of raw samples */
static uint32_t sumsq_chunk_mve(const int8_t *r, uint32_t cnt) {
    int32_t acc = 0; /* <= 256 x 128^2 */
    uint32_t c = 0;
    for (; c + 16 <= cnt; c += 16) {
        const int8x16_t v = vld1q_s8(r + c);
        acc = vmladavaq_s8(acc, v, v);
    }
    if (c < cnt) {
        const mve_pred16_t live = vctp8q(cnt - c);
        const int8x16_t v = vldrbq_z_s8(r + c, live);
        acc = vmladavaq_p_s8(acc, v, v, live);
    }
    return (uint32_t)acc;
}

/* sum of r^2 over the L pool samples from k, wrapping once (k < P, L <= P <= 2^16: each
 * part's sum < 2^30 fits sumsq_chunk_mve's int32) */
static inline uint32_t sumsq_pool_run(const int8_t *pool, uint32_t P, uint32_t k, uint32_t L) {
    const uint32_t first = P - k < L ? P - k : L;
    uint32_t q = sumsq_chunk_mve(pool + k, first);
    if (first < L) q += sumsq_chunk_mve(pool, L - first);
    return q;
}
#endif

void hb_zo_perturb_run(uint8_t dist, hb_stream *s, uint32_t e0, uint32_t count, const int8_t *w,
                       const int32_t *tab, int8_t *out) {
#if HB_NN_MVE
    if (dist == HB_DIST_RADEMACHER || (tab == narrow_of && narrow_n == hb_zo_n_values(dist))) {
        perturb_run_mve(dist, s, e0, count, w, tab, out);
        return;
    }
#endif
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

void hb_zo_perturb_samples(uint8_t dist, const int8_t *b, uint32_t step, uint32_t n,
                           const int32_t *tab, int8_t *o) {
    const int32_t voff = hb_zo_value_offset(dist);
    const uint32_t vshift = hb_zo_value_shift(dist);
    uint32_t c = 0;
#if HB_NN_MVE
    /* eight lanes: the samples widened, their table indices, the narrow deltas gathered, the
     * weights loaded (strided: gathered at lane * step from the group's first) */
    if (tab == narrow_of && narrow_n == hb_zo_n_values(dist) && narrow8_ok && step == 1) {
        /* sixteen int8 lanes: index (r + voff) >> vshift in 0..127, the int8 delta gathered */
        const int8x16_t lo = vdupq_n_s8(-HB_WEIGHT_LIMIT);
        const int8x16_t neg_shift = vdupq_n_s8(-(int8_t)vshift);
        for (; c < n; c += 16) {
            const mve_pred16_t live = vctp8q(n - c);
            const uint8x16_t r = vaddq_n_u8(vreinterpretq_u8_s8(vldrbq_z_s8(o + c, live)),
                                            (uint8_t)voff);
            const uint8x16_t idx = vshlq_u8(r, neg_shift);
            const int8x16_t d = vldrbq_gather_offset_z_s8(narrow8, idx, live);
            const int8x16_t v = vqaddq_s8(vldrbq_z_s8(b + c, live), d);
            vstrbq_p_s8(o + c, vmaxq_s8(v, lo), live);
        }
        return;
    }
    if (tab == narrow_of && narrow_n == hb_zo_n_values(dist) && step < 65536u / 8u) {
        const int16x8_t lo = vdupq_n_s16(-HB_WEIGHT_LIMIT), hi = vdupq_n_s16(HB_WEIGHT_LIMIT);
        const uint16x8_t lanes = vmulq_n_u16(vidupq_n_u16(0, 1), (uint16_t)step);
        const int16x8_t neg_shift = vdupq_n_s16(-(int16_t)vshift);
        for (; c < n; c += 8) {
            const mve_pred16_t live = vctp16q(n - c);
            const int16x8_t r = vaddq_n_s16(vldrbq_z_s16(o + c, live), (int16_t)voff);
            const uint16x8_t idx = vshlq_u16(vreinterpretq_u16_s16(r), neg_shift);
            const int16x8_t d = vldrhq_gather_shifted_offset_z_s16(narrow, idx, live);
            const int16x8_t w = step == 1 ? vldrbq_z_s16(b + c, live)
                                          : vldrbq_gather_offset_z_s16(b + (size_t)c * step,
                                                                       lanes, live);
            const int16x8_t v = vminq_s16(vmaxq_s16(vaddq_s16(w, d), lo), hi);
            vstrbq_p_s16(o + c, v, live);
        }
        return;
    }
#endif
    for (; c < n; c++) {
        const int32_t d = tab[(uint32_t)(o[c] + voff) >> vshift];
        o[c] = hb_zo_clamp_weight(b[(size_t)c * step] + d);
    }
}

static uint32_t per_word(uint8_t dist) {
    return dist == HB_DIST_RADEMACHER ? HB_PER_WORD_RADEMACHER
           : dist == HB_DIST_GAUSSIAN ? HB_PER_WORD_GAUSSIAN
                                      : HB_PER_WORD_UNIFORM;
}

uint32_t hb_zo_words_bytes(uint8_t dist, uint32_t n) {
    const uint32_t per16 = 16u * per_word(dist); /* elements per 16 words (64 bytes) */
    return 64u * ((n + per16 - 1u) / per16);
}

void hb_zo_fill_words(uint32_t seed, uint32_t ti, uint32_t bytes, uint32_t *out) {
    hb_stream s;
    hb_philox_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
    for (uint32_t i = 0; i < bytes / 4u; i += 16) {
#if HB_NN_MVE
        hb_philox_blocks4(&s, i / 4u, out + i);
#else
        for (uint32_t b = 0; b < 4; b++) {
            hb_philox_stream_fill(&s, i / 4u + b);
            memcpy(out + i + 4u * b, s.w, sizeof s.w[0] * 4u);
        }
#endif
    }
}

static int8_t word_sample(uint8_t dist, const uint32_t *words, uint32_t e) {
    const uint32_t w = words[e / per_word(dist)];
    if (dist == HB_DIST_RADEMACHER) return (int8_t)((int32_t)((w >> (e % 32u)) & 1u) * 2 - 1);
    if (dist == HB_DIST_GAUSSIAN)
        return (int8_t)((int32_t)popcount16((w >> (16u * (e % 2u))) & 0xFFFFu) - 8);
    return (int8_t)(2 * (int32_t)((w >> (8u * (e % 4u))) & 0x7Fu) - 127);
}

void hb_zo_words_samples(uint8_t dist, const uint32_t *words, uint32_t e0, uint32_t cnt,
                         int8_t *r) {
#if HB_NN_MVE
    if (e0 % 16u == 0) { /* sixteen (Gaussian: eight) samples per vector */
        const uint8_t *bytes = (const uint8_t *)words;
        const uint16_t *halves = (const uint16_t *)(const void *)words;
        const uint8x16_t lane = vidupq_n_u8(0, 1);
        const uint8x16_t byte_of = vshrq_n_u8(lane, 3);
        const uint8x16_t mask =
            vshlq_u8(vdupq_n_u8(1), vreinterpretq_s8_u8(vandq_u8(lane, vdupq_n_u8(7))));
        for (uint32_t c = 0; c < cnt; c += dist == HB_DIST_GAUSSIAN ? 8u : 16u) {
            const uint32_t e = e0 + c;
            if (dist == HB_DIST_GAUSSIAN) {
                const mve_pred16_t live = vctp16q(cnt - c);
                const int16x8_t v = vsubq_s16(
                    vreinterpretq_s16_u16(popcount16_mve(vldrhq_z_u16(halves + e, live))),
                    vdupq_n_s16(8));
                vstrbq_p_s16(r + c, v, live);
                continue;
            }
            const mve_pred16_t live = vctp8q(cnt - c);
            int8x16_t v;
            if (dist == HB_DIST_RADEMACHER) {
                const uint8x16_t b = vldrbq_gather_offset_z_u8(bytes + e / 8u, byte_of, live);
                v = vpselq_s8(vdupq_n_s8(1), vdupq_n_s8(-1), vcmpneq_n_u8(vandq_u8(b, mask), 0));
            } else {
                const uint8x16_t u = vandq_u8(vldrbq_z_u8(bytes + e, live), vdupq_n_u8(0x7F));
                v = vreinterpretq_s8_u8(vsubq_u8(vshlq_n_u8(u, 1), vdupq_n_u8(127)));
            }
            vstrbq_p_s8(r + c, v, live);
        }
        return;
    }
#endif
    for (uint32_t c = 0; c < cnt; c++) r[c] = word_sample(dist, words, e0 + c);
}

uint64_t hb_zo_sumsq_words(uint8_t dist, const uint32_t *words, uint32_t n) {
    uint64_t q = 0;
#if HB_NN_MVE
    if (dist != HB_DIST_RADEMACHER) {
        const uint32_t per = per_word(dist);
        for (uint32_t e0 = 0; e0 < n; e0 += RUN_WORDS * per)
            q += sumsq_piece_mve(dist, words + e0 / per,
                                 n - e0 < RUN_WORDS * per ? n - e0 : RUN_WORDS * per);
        return q;
    }
#endif
    for (uint32_t e = 0; e < n; e++) {
        const int32_t r = word_sample(dist, words, e);
        q += (uint64_t)(r * r);
    }
    return q;
}

void hb_zo_perturb_words(uint8_t dist, const uint32_t *words, uint32_t n, const int8_t *w,
                         const int32_t *tab, int8_t *out) {
#if HB_NN_MVE
    if (dist == HB_DIST_RADEMACHER || (tab == narrow_of && narrow_n == hb_zo_n_values(dist))) {
        const int16_t n0 = narrow_delta(tab[0]), n1 = narrow_delta(tab[1]);
        const int8_t r8[2] = {(int8_t)n0, (int8_t)n1};
        const int8_t *d8 = dist == HB_DIST_RADEMACHER
                               ? (n0 >= -127 && n0 <= 127 && n1 >= -127 && n1 <= 127 ? r8 : NULL)
                           : dist == HB_DIST_UNIFORM && narrow8_ok ? narrow8
                                                                   : NULL;
        const int16x8_t d0 = vdupq_n_s16(n0);
        const int16_t diff = (int16_t)(n1 - n0);
        if (d8 && dist == HB_DIST_RADEMACHER)
            perturb_piece8_mve(HB_DIST_RADEMACHER, words, 0, n, w, out, d8);
        else if (d8)
            perturb_piece8_mve(HB_DIST_UNIFORM, words, 0, n, w, out, d8);
        else if (dist == HB_DIST_RADEMACHER)
            perturb_piece_mve(HB_DIST_RADEMACHER, words, 0, n, w, out, d0, diff);
        else if (dist == HB_DIST_GAUSSIAN)
            perturb_piece_mve(HB_DIST_GAUSSIAN, words, 0, n, w, out, d0, diff);
        else
            perturb_piece_mve(HB_DIST_UNIFORM, words, 0, n, w, out, d0, diff);
        return;
    }
#endif
    for (uint32_t e = 0; e < n; e++)
        out[e] = hb_zo_clamp_weight(w[e] + tab[hb_zo_value_index(dist, word_sample(dist, words, e))]);
}

static inline __attribute__((always_inline)) void perturb_from(uint8_t dist, const int8_t *raw,
                                                               uint32_t n, const int8_t *w,
                                                               const int32_t *tab, int8_t *out) {
    const int32_t voff = hb_zo_value_offset(dist);
    const uint32_t vshift = hb_zo_value_shift(dist);
    uint32_t c = 0;
#if HB_NN_MVE
    if (tab == narrow_of && narrow_n == hb_zo_n_values(dist) && narrow8_ok) {
        /* sixteen int8 lanes: index (r + voff) >> vshift, the int8 delta gathered */
        const int8x16_t lo = vdupq_n_s8(-HB_WEIGHT_LIMIT);
        const int8x16_t neg_shift = vdupq_n_s8(-(int8_t)vshift);
        for (; c + 16 <= n; c += 16) {
            const uint8x16_t idx = vshlq_u8(
                vaddq_n_u8(vreinterpretq_u8_s8(vld1q_s8(raw + c)), (uint8_t)voff), neg_shift);
            const int8x16_t d = vldrbq_gather_offset_s8(narrow8, idx);
            vst1q_s8(out + c, vmaxq_s8(vqaddq_s8(vld1q_s8(w + c), d), lo));
        }
        if (c < n) {
            const mve_pred16_t live = vctp8q(n - c);
            const uint8x16_t idx = vshlq_u8(
                vaddq_n_u8(vreinterpretq_u8_s8(vldrbq_z_s8(raw + c, live)), (uint8_t)voff),
                neg_shift);
            const int8x16_t d = vldrbq_gather_offset_z_s8(narrow8, idx, live);
            const int8x16_t v = vqaddq_s8(vldrbq_z_s8(w + c, live), d);
            vstrbq_p_s8(out + c, vmaxq_s8(v, lo), live);
        }
        return;
    }
#endif
    for (; c < n; c++) out[c] = hb_zo_clamp_weight(w[c] + tab[(uint32_t)(raw[c] + voff) >> vshift]);
}

void hb_zo_perturb_pool_row(uint8_t dist, const int8_t *pool, uint32_t P, uint32_t k,
                            uint32_t L, const int8_t *w, const int32_t *tab, int8_t *out) {
    const uint32_t first = P - k < L ? P - k : L; /* k < P, L <= P: one wrap at most */
    perturb_from(dist, pool + k, first, w, tab, out);
    if (first < L) perturb_from(dist, pool, L - first, w + first, tab, out + first);
}

void hb_zo_perturb_pool_cols(uint8_t dist, const int8_t *pool, uint32_t P, const uint16_t *halves,
                             hb_stream *s, uint32_t R, uint32_t L, const int8_t *w,
                             const int32_t *tab, int8_t *out) {
    const int32_t voff = hb_zo_value_offset(dist);
    const uint32_t vshift = hb_zo_value_shift(dist);
    uint32_t j0 = 0;
#if HB_NN_MVE
    if (tab == narrow_of && narrow_n == hb_zo_n_values(dist) && P < 65536u) {
        /* eight rows (channels) per group, int16 lanes: per entry i the eight pool offsets
         * k_j + i (mod P) gathered, their table indices, the narrow deltas gathered, the
         * eight weights i R + j0 .. contiguous */
        const int16x8_t lo = vdupq_n_s16(-HB_WEIGHT_LIMIT), hi = vdupq_n_s16(HB_WEIGHT_LIMIT);
        const int16x8_t neg_shift = vdupq_n_s16(-(int16_t)vshift);
        for (; j0 < R; j0 += 8) {
            const uint32_t n = R - j0 < 8 ? R - j0 : 8;
            const mve_pred16_t live = vctp16q(n);
            uint16_t ks[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (uint32_t c = 0; c < n; c++) {
                const uint32_t h = halves ? halves[j0 + c] : hb_stream_half(s, j0 + c);
                ks[c] = (uint16_t)((h * P) >> 16);
            }
            uint16x8_t k = vld1q_u16(ks);
            const int8_t *wi = w + j0;
            int8_t *oi = out + j0;
            for (uint32_t i = 0; i < L; i++, wi += R, oi += R) {
                const int16x8_t r = vaddq_n_s16(vldrbq_gather_offset_z_s16(pool, k, live),
                                                (int16_t)voff);
                const uint16x8_t idx = vshlq_u16(vreinterpretq_u16_s16(r), neg_shift);
                const int16x8_t d = vldrhq_gather_shifted_offset_z_s16(narrow, idx, live);
                const int16x8_t v =
                    vminq_s16(vmaxq_s16(vaddq_s16(vldrbq_z_s16(wi, live), d), lo), hi);
                vstrbq_p_s16(oi, v, live);
                k = vaddq_n_u16(k, 1); /* k_j + i + 1 < 2P <= 2^17 - 2: wrap back once */
                k = vpselq_u16(vsubq_n_u16(k, (uint16_t)P), k, vcmpcsq_n_u16(k, (uint16_t)P));
            }
        }
        return;
    }
#endif
    for (; j0 < R; j0++) {
        uint32_t k = ((halves ? halves[j0] : hb_stream_half(s, j0)) * P) >> 16;
        for (uint32_t i = 0; i < L; i++) {
            const size_t e = (size_t)i * R + j0;
            out[e] = hb_zo_clamp_weight(w[e] + tab[(uint32_t)(pool[k] + voff) >> vshift]);
            if (++k == P) k = 0;
        }
    }
}

void hb_zo_perturb_from(uint8_t dist, const int8_t *raw, uint32_t n, const int8_t *w,
                        const int32_t *tab, int8_t *out) {
    perturb_from(dist, raw, n, w, tab, out);
}

uint64_t hb_zo_sumsq_raw(const int8_t *r, uint32_t n) {
#if HB_NN_MVE
    /* sixteen squares per VMLADAV into an int32, moved to the u64 every 4096 vectors (at
     * most 65536 x 128^2 = 2^30) */
    uint64_t q = 0;
    uint32_t c = 0;
    while (c + 16 <= n) {
        int32_t acc = 0;
        for (uint32_t v = 0; v < 4096 && c + 16 <= n; v++, c += 16)
            acc = vmladavaq_s8(acc, vld1q_s8(r + c), vld1q_s8(r + c));
        q += (uint32_t)acc;
    }
    if (c < n) {
        const int8x16_t v = vldrbq_z_s8(r + c, vctp8q(n - c)); /* zeros past the end */
        q += (uint32_t)vmladavq_s8(v, v);
    }
    const uint64_t acc = q;
    return (uint64_t)acc;
#else
    uint64_t q = 0;
    for (uint32_t c = 0; c < n; c++) q += (uint64_t)((int32_t)r[c] * r[c]);
    return q;
#endif
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
#if HB_NN_MVE
    /* four entries per vector, hb_zo_signed_delta's operations lane by lane (rsym as
     * (x + 2^(s-1) - (x < 0)) >> s, the sign bit as the (x < 0)), and the narrow copy */
    const uint32_t n = hb_zo_n_values(dist);
    const int sh = HB_SCALE_FRAC - HB_UNIT_FRAC;
    int32x4_t r = vaddq_n_s32(vmulq_n_s32(vreinterpretq_s32_u32(vidupq_n_u32(0, 1)), stride), lo);
    const int32x4_t r_step = vdupq_n_s32(4 * stride);
    if (dist == HB_DIST_UNIFORM) {
        /* entries i and n - 1 - i are r and -r, and every step of delta is odd-symmetric
         * (rsym(-x) = -rsym(x)): the first half computed, the second stored negated and
         * reversed (scatter offsets 3, 2, 1, 0) */
        _Static_assert(HB_ZO_VALUES_UNIFORM % 8 == 0, "the uniform table in halves of vectors");
        const uint32x4_t rev = vddupq_n_u32(3, 1);
        int32x4_t mag = vdupq_n_s32(0);
        for (uint32_t i = 0; i < n / 2; i += 4, r = vaddq_s32(r, r_step)) {
            const int32x4_t x = vmulq_n_s32(r, (int32_t)scale);
            const int32x4_t u = vshrq_n_s32(
                vsubq_s32(vaddq_n_s32(x, 1 << (sh - 1)), vreinterpretq_s32_u32(vshrq_n_u32(
                                                              vreinterpretq_u32_s32(x), 31))),
                sh);
            const int32x4_t y = vmulq_n_s32(u, em);
            const int32x4_t d = vshrq_n_s32(
                vsubq_s32(vaddq_n_s32(y, 1 << (HB_DELTA_SHIFT - 1)),
                          vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(y), 31))),
                HB_DELTA_SHIFT);
            const int32x4_t d16 = vminq_s32(vmaxq_s32(d, vdupq_n_s32(-255)), vdupq_n_s32(255));
            const int32x4_t nd = vnegq_s32(d), nd16 = vnegq_s32(d16);
            mag = vmaxq_s32(mag, vabsq_s32(d));
            const uint32_t j = n - 4 - i; /* the mirrored vector's first entry */
            vst1q_s32(tab + i, d);
            vstrwq_scatter_shifted_offset_s32(tab + j, rev, nd);
            vstrhq_s32(narrow + i, d16);
            vstrhq_scatter_shifted_offset_s32(narrow + j, rev, nd16);
            vstrbq_s32(narrow8 + i, d);
            vstrbq_scatter_offset_s32(narrow8 + j, rev, nd);
        }
        narrow_n = n;
        narrow_of = tab;
        narrow8_ok = vmaxvq_s32(0, mag) <= 127;
        return;
    }
    int32x4_t mag = vdupq_n_s32(0); /* the largest |delta| of any lane (tail lanes too: a
                                       conservative narrow8_ok) */
    for (uint32_t i = 0; i < n; i += 4, r = vaddq_s32(r, r_step)) {
        const int32x4_t x = vmulq_n_s32(r, (int32_t)scale);
        const int32x4_t u = vshrq_n_s32(
            vsubq_s32(vaddq_n_s32(x, 1 << (sh - 1)), vreinterpretq_s32_u32(vshrq_n_u32(
                                                          vreinterpretq_u32_s32(x), 31))),
            sh);
        const int32x4_t y = vmulq_n_s32(u, em);
        const int32x4_t d = vshrq_n_s32(
            vsubq_s32(vaddq_n_s32(y, 1 << (HB_DELTA_SHIFT - 1)),
                      vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(y), 31))),
            HB_DELTA_SHIFT);
        const int32x4_t d16 = vminq_s32(vmaxq_s32(d, vdupq_n_s32(-255)), vdupq_n_s32(255));
        mag = vmaxq_s32(mag, vabsq_s32(d));
        if (i + 4 <= n) { /* whole vectors unpredicated */
            vst1q_s32(tab + i, d);
            vstrhq_s32(narrow + i, d16);
            vstrbq_s32(narrow8 + i, d); /* meaningful only if narrow8_ok */
        } else {
            const mve_pred16_t live = vctp32q(n - i);
            vstrwq_p_s32(tab + i, d, live);
            vstrhq_p_s32(narrow + i, d16, live);
            vstrbq_p_s32(narrow8 + i, d, live);
        }
    }
    const int big = vmaxvq_s32(0, mag) > 127;
    narrow_n = n;
    narrow_of = tab;
    narrow8_ok = !big;
#else
    for (int32_t r = lo; r <= -lo; r += stride)
        tab[hb_zo_value_index(dist, (int8_t)r)] = hb_zo_signed_delta((int8_t)r, scale, em);
#endif
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
#if HB_NN_MVE
    if (!src->pool_size) { /* fresh samples: their squares straight from the stream's words */
        hb_stream s;
        hb_philox_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
        q = sumsq_fresh_mve(src->dist, &s, t->n);
    } else { /* row j: the pool from o_j, wrapping once (either layout: the sum of a row's
              * squares does not depend on where its entries lie) */
        hb_stream s;
        hb_philox_stream_init(&s, seed, HB_STREAM_PERTURB, ti);
        const uint32_t P = src->pool_size, L = t->len;
        for (uint32_t j = 0; j < t->rows; j++) {
            const uint32_t k = (hb_stream_half(&s, j) * P) >> 16;
            q += sumsq_pool_run(src->pool, P, k, L);
        }
    }
    (void)r;
#else
    for (uint32_t e0 = 0; e0 < t->n; e0 += HB_ZO_CHUNK) {
        uint32_t cnt = t->n - e0 < HB_ZO_CHUNK ? t->n - e0 : HB_ZO_CHUNK;
        hb_zo_samples(src, t, ti, seed, e0, cnt, r, NULL);
        for (uint32_t c = 0; c < cnt; c++) q += (uint64_t)((int32_t)r[c] * r[c]);
    }
#endif
    return hb_zo_scale_of_sumsq(q, t->n);
}

uint64_t hb_zo_sumsq_pool_rows(const hb_zo_source *src, const hb_zo_tensor *t,
                               const uint32_t *words) {
    const uint16_t *halves = (const uint16_t *)(const void *)words; /* half j: row j's */
    const uint32_t P = src->pool_size, L = t->len;
    uint64_t q = 0;
    if (L == 1) { /* a bias: one sample per row */
        for (uint32_t j = 0; j < t->rows; j++) {
            const int32_t r = src->pool[(halves[j] * P) >> 16];
            q += (uint32_t)(r * r);
        }
        return q;
    }
    for (uint32_t j = 0; j < t->rows; j++) {
#if HB_NN_MVE
        q += sumsq_pool_run(src->pool, P, (halves[j] * P) >> 16, L);
#else
        const uint32_t k = (halves[j] * P) >> 16, first = P - k < L ? P - k : L;
        q += hb_zo_sumsq_raw(src->pool + k, first);
        if (first < L) q += hb_zo_sumsq_raw(src->pool, L - first);
#endif
    }
    return q;
}

uint32_t hb_zo_scale_of_sumsq(uint64_t q, uint32_t n) {
    if (q == 0) return HB_SCALE_MAX;
    uint32_t s = hb_zo_isqrt_u64(((uint64_t)n << 32) / q); /* n < 2^26: no wrap */
    return s < HB_SCALE_MAX ? s : HB_SCALE_MAX;
}
