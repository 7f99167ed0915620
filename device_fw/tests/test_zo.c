/* The ZO primitives (core/zo/) on fixtures/golden/zo.hbgv, written by
 * fixtures/golden/make_zo_vectors.py from hilbench.zo: Philox and streams, mini-batch indices,
 * raw samples (fresh and pooled, both row layouts), scales, units, deltas, the pool draw,
 * updates for every master and rounding, the loss, and the LOSS and ZOCF checks with their
 * exact messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hb_bytes.h"
#include "hb_wire.h"
#include "hbgv.h"
#include "zo/loss.h"
#include "zo/perturb.h"
#include "zo/philox.h"
#include "zo/update.h"
#include "zo/zocf.h"

static hbgv_file F;

static const hbgv_array *arr(const char *fmt, int i, const char *field) {
    char name[128];
    snprintf(name, sizeof name, fmt, i, field);
    return hbgv_find(&F, name);
}
static int64_t at(const hbgv_array *a, uint32_t i) { return hbgv_get(a, i); }

static void test_philox(void) {
    const hbgv_array *c = hbgv_need(&F, "philox.ctr"), *k = hbgv_need(&F, "philox.key"),
                     *o = hbgv_need(&F, "philox.out");
    for (uint32_t i = 0; i < c->dims[0]; i++) {
        uint32_t ctr[4], out[4];
        for (int j = 0; j < 4; j++) ctr[j] = (uint32_t)at(c, 4 * i + j);
        hb_philox4x32_10(ctr, (uint32_t)at(k, 2 * i), (uint32_t)at(k, 2 * i + 1), out);
        for (int j = 0; j < 4; j++)
            CHECK(out[j] == (uint32_t)at(o, 4 * i + j), "philox %u lane %d: %08x", i, j, out[j]);
    }
    const hbgv_array *key = hbgv_need(&F, "stream.key"), *w = hbgv_need(&F, "stream.words");
    for (uint32_t i = 0; i < key->dims[0]; i++) {
        hb_stream s;
        hb_philox_stream_init(&s, (uint32_t)at(key, 3 * i), (uint32_t)at(key, 3 * i + 1),
                       (uint32_t)at(key, 3 * i + 2));
        uint32_t nw = w->dims[1];
        /* backwards first: the block cache must not assume order */
        for (uint32_t j = nw; j-- > 0;) {
            uint32_t word = j < 12 ? j : 1000 + (j - 12);
            CHECK(hb_stream_word(&s, word) == (uint32_t)at(w, i * nw + j), "stream %u word %u", i,
                  word);
        }
    }
    for (int b = 0;; b++) {
        const hbgv_array *args = arr("batch%d.%s", b, "args"), *idx = arr("batch%d.%s", b, "idx");
        if (!args) break;
        hb_stream s;
        hb_philox_stream_init(&s, (uint32_t)at(args, 0), HB_STREAM_BATCH, 0);
        for (uint32_t i = 0; i < (uint32_t)at(args, 2); i++)
            CHECK(hb_philox_batch_index(&s, (uint32_t)at(args, 1), i) == (uint32_t)at(idx, i),
                  "batch %d item %u", b, i);
    }
    const hbgv_array *x = hbgv_need(&F, "isqrt.x"), *r = hbgv_need(&F, "isqrt.r");
    for (uint32_t i = 0; i < hbgv_elems(x); i++)
        CHECK(hb_zo_isqrt_u64((uint64_t)at(x, i)) == (uint64_t)at(r, i), "isqrt %u", i);
}

/* a trained tensor from a case's cfg fields */
static hb_zo_tensor tensor_of(uint8_t kind, uint32_t n, uint32_t rows, uint32_t len,
                              uint8_t layout, uint8_t em, uint8_t us, const hbgv_array *cm) {
    hb_zo_tensor t = {0};
    t.kind = kind;
    t.n = n;
    t.rows = rows;
    t.len = len;
    t.layout = layout;
    t.eps_mult = em;
    t.unit_shift = us;
    t.cm = cm ? cm->data : NULL;
    return t;
}

static hb_zo_source source_of(uint8_t dist, const hbgv_array *pool) {
    hb_zo_source src = {dist, pool ? (const int8_t *)pool->data : NULL,
                        pool ? hbgv_elems(pool) : 0};
    return src;
}

static void test_perturb(void) {
    int cases = 0, fused = 0;
    for (int c = 0;; c++, cases++) {
        const hbgv_array *cfg = arr("p%d.%s", c, "cfg");
        if (!cfg) break;
        const hbgv_array *seeds = arr("p%d.%s", c, "seeds"), *r = arr("p%d.%s", c, "r"),
                         *sc = arr("p%d.%s", c, "scale"), *u = arr("p%d.%s", c, "u"),
                         *d = arr("p%d.%s", c, "delta"), *cm = arr("p%d.%s", c, "cm"),
                         *pool = arr("p%d.%s", c, "pool");
        uint8_t dist = (uint8_t)at(cfg, 0), scaling = (uint8_t)at(cfg, 1);
        uint32_t n = (uint32_t)at(cfg, 4), eps = (uint32_t)at(cfg, 9), ti = (uint32_t)at(cfg, 10);
        hb_zo_tensor t = tensor_of((uint8_t)at(cfg, 3), n, (uint32_t)at(cfg, 5),
                                   (uint32_t)at(cfg, 6), (uint8_t)at(cfg, 2), (uint8_t)at(cfg, 7),
                                   (uint8_t)at(cfg, 8), cm);
        hb_zo_source src = source_of(dist, pool);
        for (uint32_t k = 0; k < hbgv_elems(seeds); k++) {
            uint32_t seed = (uint32_t)at(seeds, k);
            uint32_t s = hb_zo_scale(&src, scaling, &t, ti, seed);
            CHECK(s == (uint32_t)at(sc, k), "p%d seed %u: scale %u, expected %lld", c, k, s,
                  (long long)at(sc, k));
            /* uneven chunks: every start position of a row is exercised */
            int8_t rr[HB_ZO_CHUNK];
            uint8_t mm[HB_ZO_CHUNK];
            int bad = 0;
            for (uint32_t e0 = 0, step = 1; e0 < n; e0 += step, step = step % 13 + 2) {
                uint32_t cnt = n - e0 < step ? n - e0 : step;
                hb_zo_samples(&src, &t, ti, seed, e0, cnt, rr, mm);
                for (uint32_t i = 0; i < cnt && !bad; i++) {
                    uint32_t e = e0 + i;
                    uint32_t row = t.layout == HB_ROWS_TRAILING ? e % t.rows : e / t.len;
                    int32_t unit = hb_zo_unit(rr[i], s);
                    int32_t delta = hb_zo_delta(unit, eps, mm[i], t.unit_shift);
                    bad = rr[i] != at(r, k * n + e) || mm[i] != hb_zo_row_mult(&t, row) ||
                          unit != at(u, k * n + e) || delta != at(d, k * n + e);
                    CHECK(!bad,
                          "p%d seed %u element %u: r %d u %d delta %d, expected %lld %lld %lld",
                          c, k, e, rr[i], unit, delta, (long long)at(r, k * n + e),
                          (long long)at(u, k * n + e), (long long)at(d, k * n + e));
                }
            }
            bad = 0;
            /* the same samples row by row (a forward pass's order), in uneven pieces, through
             * one row stream whose cached blocks carry over from row to row */
            hb_zo_rowstream rs;
            hb_zo_rowline lines[HB_ZO_ROW_CACHE_LINES];
            for (int cached = 0; cached < 2 && !bad; cached++) { /* with and without a cache */
                hb_zo_rowstream_init(&rs, seed, ti, cached ? lines : NULL);
                for (uint32_t j = 0; j < t.rows && !bad; j++) {
                    uint32_t step = 1 + j % 5;
                    for (uint32_t i0 = 0; i0 < t.len; i0 += step, step = step % 7 + 1) {
                        uint32_t cnt = t.len - i0 < step ? t.len - i0 : step;
                        hb_zo_row_samples(&src, &t, &rs, j, i0, cnt, rr);
                        for (uint32_t i = 0; i < cnt && !bad; i++) {
                            uint32_t e = t.layout == HB_ROWS_TRAILING ? (i0 + i) * t.rows + j
                                                                      : j * t.len + i0 + i;
                            bad = rr[i] != at(r, k * n + e);
                            CHECK(!bad, "p%d seed %u cache %d row %u entry %u: r %d, expected %lld",
                                  c, k, cached, j, i0 + i, rr[i], (long long)at(r, k * n + e));
                        }
                    }
                }
            }
            /* the signed deltas of a table equal hb_zo_delta's, for both signs */
            int32_t tab[HB_ZO_VALUES_UNIFORM];
            for (int sign = -1; sign <= 1 && t.kind == HB_ZO_WEIGHT; sign += 2) {
                const uint32_t mult = hb_zo_row_mult(&t, 0);
                hb_zo_delta_table(dist, s, sign * (int32_t)(eps * mult), tab);
                for (uint32_t e = 0; e < n && e < 64; e++) {
                    const int8_t v = (int8_t)at(r, k * n + e);
                    const int32_t want = sign * hb_zo_delta(hb_zo_unit(v, s), eps, mult, 0);
                    const uint32_t ix = hb_zo_value_index(dist, v);
                    CHECK(ix < hb_zo_n_values(dist) && tab[ix] == want,
                          "p%d seed %u: table delta of r %d is %d, not %d", c, k, v, tab[ix], want);
                    CHECK(hb_zo_signed_delta(v, s, sign * (int32_t)(eps * mult)) == want,
                          "p%d: signed delta of r %d", c, v);
                }
                /* fused runs (fresh samples): uneven runs of the stream, weights across the
                 * int8 range so that both clamps are hit, equal clamp(w + tab[rank(r)]) */
                if (pool) continue;
                hb_stream st;
                hb_philox_stream_init(&st, seed, HB_STREAM_PERTURB, ti);
                int8_t wv[HB_ZO_CHUNK], out[HB_ZO_CHUNK];
                for (uint32_t e0 = 0, len = 1; e0 < n && !bad; e0 += len, len = len % 41 + 3) {
                    const uint32_t cnt = n - e0 < len ? n - e0 : len;
                    for (uint32_t i = 0; i < cnt; i++)
                        wv[i] = (int8_t)((int32_t)((e0 + i) * 37u % 255u) - 127);
                    hb_zo_perturb_run(dist, &st, e0, cnt, wv, tab, out);
                    for (uint32_t i = 0; i < cnt && !bad; i++) {
                        const int8_t v = (int8_t)at(r, k * n + e0 + i);
                        const int32_t dv = tab[hb_zo_value_index(dist, v)];
                        const int8_t want = hb_zo_clamp_weight(wv[i] + dv);
                        bad = out[i] != want;
                        CHECK(!bad, "p%d seed %u sign %d element %u: fused %d, expected %d", c, k,
                              sign, e0 + i, out[i], want);
                    }
                }
                fused += !bad;
            }
        }
    }
    CHECK(cases >= 16, "only %d perturbation cases", cases);
    CHECK(fused >= 8, "only %d fused runs checked", fused);
    /* every raw sample of each distribution is in its table, at the extremes of S and em */
    const uint8_t dists[3] = {HB_DIST_RADEMACHER, HB_DIST_GAUSSIAN, HB_DIST_UNIFORM};
    for (int di = 0; di < 3; di++) {
        int32_t tab[HB_ZO_VALUES_UNIFORM]; /* the largest table */
        const uint32_t scales[3] = {516, 887, HB_SCALE_MAX};
        const int32_t ems[4] = {1, -1, 127 * 255, -127 * 255};
        for (int si = 0; si < 3; si++) {
            for (int ei = 0; ei < 4; ei++) {
                for (int b = 0; b < HB_ZO_VALUES_UNIFORM; b++) tab[b] = INT32_MIN;
                hb_zo_delta_table(dists[di], scales[si], ems[ei], tab);
                uint32_t filled = 0, first = HB_ZO_VALUES_UNIFORM;
                for (uint32_t b = HB_ZO_VALUES_UNIFORM; b-- > 0;)
                    if (tab[b] != INT32_MIN) filled++, first = b;
                CHECK(filled == hb_zo_n_values(dists[di]) && first == 0 &&
                          tab[filled - 1] != INT32_MIN,
                      "dist %u: %u table entries, not the first %u", dists[di], filled,
                      hb_zo_n_values(dists[di]));
                const int8_t top = dists[di] == HB_DIST_RADEMACHER ? 1
                                   : dists[di] == HB_DIST_GAUSSIAN ? 8
                                                                   : 127;
                const uint32_t e = (uint32_t)(ems[ei] < 0 ? -ems[ei] : ems[ei]);
                const int32_t u = hb_zo_unit(top, scales[si]);
                const int32_t want = (ems[ei] < 0 ? -1 : 1) * hb_zo_delta(u, e, 1, 0);
                const uint32_t hi = hb_zo_value_index(dists[di], top),
                               lo = hb_zo_value_index(dists[di], (int8_t)-top);
                CHECK(lo == 0 && hi == hb_zo_n_values(dists[di]) - 1 && tab[hi] == want &&
                          tab[lo] == -want,
                      "dist %u S %u em %d: delta of %d is %d, not %d", dists[di], scales[si],
                      ems[ei], top, tab[hi], want);
            }
        }
    }
    for (int c = 0;; c++) {
        const hbgv_array *args = arr("pooldraw%d.%s", c, "args");
        if (!args) break;
        const hbgv_array *v = arr("pooldraw%d.%s", c, "values");
        uint32_t size = (uint32_t)at(args, 2);
        int8_t *pool = malloc(size);
        hb_zo_pool_draw((uint8_t)at(args, 0), (uint32_t)at(args, 1), pool, size);
        CHECK_BYTES("pool draw", pool, v->data, size);
        free(pool);
    }
}

static void test_update(void) {
    int cases = 0;
    for (int c = 0;; c++, cases++) {
        const hbgv_array *cfg = arr("u%d.%s", c, "cfg");
        if (!cfg) break;
        const hbgv_array *seeds = arr("u%d.%s", c, "seeds"), *co = arr("u%d.%s", c, "coeffs"),
                         *data = arr("u%d.%s", c, "data"), *mst = arr("u%d.%s", c, "master"),
                         *acc_w = arr("u%d.%s", c, "acc"), *m1 = arr("u%d.%s", c, "master_after"),
                         *d1 = arr("u%d.%s", c, "data_after"), *cm = arr("u%d.%s", c, "cm"),
                         *pool = arr("u%d.%s", c, "pool");
        uint8_t dist = (uint8_t)at(cfg, 0), scaling = (uint8_t)at(cfg, 1);
        uint8_t master = (uint8_t)at(cfg, 2), rounding = (uint8_t)at(cfg, 3);
        uint8_t kind = (uint8_t)at(cfg, 4);
        uint32_t n = (uint32_t)at(cfg, 5), ti = (uint32_t)at(cfg, 11);
        hb_zo_tensor t = tensor_of(kind, n, (uint32_t)at(cfg, 6), (uint32_t)at(cfg, 7),
                                   (uint8_t)at(cfg, 8), (uint8_t)at(cfg, 9), (uint8_t)at(cfg, 10),
                                   cm);
        hb_zo_source src = source_of(dist, pool);
        uint32_t q = hbgv_elems(seeds);
        /* the tensor's bytes as the blob holds them, and its master */
        uint8_t *blob = calloc(4 * (size_t)n, 1);
        int32_t *m32 = calloc(n, sizeof *m32);
        int16_t *m16 = calloc(n, sizeof *m16);
        for (uint32_t e = 0; e < n; e++) {
            if (kind == HB_ZO_BIAS) hb_wr32(blob + 4 * e, (uint32_t)at(data, e));
            else ((int8_t *)blob)[e] = (int8_t)at(data, e);
            m32[e] = (int32_t)at(mst, e);
            m16[e] = (int16_t)at(mst, e);
        }
        hb_zo_target tg = {0};
        tg.kind = kind;
        tg.master = master;
        tg.rounding = rounding;
        tg.shift = hb_zo_shift(kind == HB_ZO_BIAS ? 0 : hb_zo_master_frac(master), t.unit_shift);
        tg.mst = master == HB_MASTER_Q16     ? (void *)m32
                 : master == HB_MASTER_INT16 ? (void *)m16
                                             : NULL;
        if (kind == HB_ZO_BIAS) tg.mst = NULL;
        tg.data = blob;
        hb_philox_stream_init(&tg.round, (uint32_t)at(seeds, 0), HB_STREAM_ROUNDING, ti);
        uint32_t scales[8];
        for (uint32_t k = 0; k < q; k++)
            scales[k] = hb_zo_scale(&src, scaling, &t, ti, (uint32_t)at(seeds, k));
        int64_t acc[HB_ZO_CHUNK];
        int8_t r[HB_ZO_CHUNK];
        uint8_t mult[HB_ZO_CHUNK];
        for (uint32_t e0 = 0, step = 5; e0 < n; e0 += step, step = step % 11 + 3) {
            uint32_t cnt = n - e0 < step ? n - e0 : step;
            memset(acc, 0, sizeof acc);
            for (uint32_t k = 0; k < q; k++) {
                hb_zo_samples(&src, &t, ti, (uint32_t)at(seeds, k), e0, cnt, r, mult);
                hb_zo_accumulate(acc, r, cnt, scales[k], (int32_t)at(co, k));
            }
            for (uint32_t i = 0; i < cnt; i++)
                CHECK(acc[i] == at(acc_w, e0 + i), "u%d element %u: acc %lld, expected %lld", c,
                      e0 + i, (long long)acc[i], (long long)at(acc_w, e0 + i));
            hb_zo_update_chunk(&tg, e0, cnt, acc, mult);
        }
        for (uint32_t e = 0; e < n; e++) {
            int64_t got_m, got_d;
            if (kind == HB_ZO_BIAS) {
                got_m = got_d = hb_rdi32(blob + 4 * e);
            } else {
                got_d = ((int8_t *)blob)[e];
                got_m = master == HB_MASTER_Q16     ? m32[e]
                        : master == HB_MASTER_INT16 ? m16[e]
                                                    : got_d;
            }
            CHECK(got_m == at(m1, e) && got_d == at(d1, e),
                  "u%d element %u: master %lld data %lld, expected %lld %lld", c, e,
                  (long long)got_m, (long long)got_d, (long long)at(m1, e), (long long)at(d1, e));
        }
        free(blob);
        free(m32);
        free(m16);
    }
    CHECK(cases >= 19, "only %d update cases", cases);
}

static int same_text(const hb_status *st, const hbgv_array *msg) {
    return st->len == hbgv_elems(msg) && memcmp(st->msg, msg->data, st->len) == 0;
}

static void test_loss(void) {
    int cases = 0;
    for (int c = 0;; c++, cases++) {
        const hbgv_array *sec = arr("loss%d.%s", c, "section");
        if (!sec) break;
        const hbgv_array *lg = arr("loss%d.%s", c, "logits"), *lb = arr("loss%d.%s", c, "labels"),
                         *per = arr("loss%d.%s", c, "per_item"),
                         *mean = arr("loss%d.%s", c, "mean"),
                         *am = arr("loss%d.%s", c, "argmax"), *ls = arr("loss%d.%s", c, "ln_s"),
                         *ln = arr("loss%d.%s", c, "ln");
        hb_loss_tables tb;
        hb_status st;
        CHECK(hb_loss_load(sec->data, hbgv_elems(sec), &tb, &st) == 0, "loss%d refused: %.*s",
              c, st.len, st.msg);
        uint32_t items = lg->dims[0], classes = lg->dims[1];
        int64_t sum = 0;
        for (uint32_t i = 0; i < items; i++) {
            const int8_t *l = (const int8_t *)lg->data + (size_t)i * classes;
            int64_t v = hb_loss_item(&tb, l, classes, (uint32_t)at(lb, i));
            CHECK(v == at(per, i), "loss%d item %u: %lld, expected %lld", c, i, (long long)v,
                  (long long)at(per, i));
            CHECK(hb_loss_argmax(l, classes) == (uint32_t)at(am, i), "loss%d argmax %u", c, i);
            sum += v;
        }
        CHECK(hb_loss_mean(sum, items) == at(mean, 0), "loss%d mean %d, expected %lld", c,
              hb_loss_mean(sum, items), (long long)at(mean, 0));
        for (uint32_t i = 0; i < hbgv_elems(ls); i++)
            CHECK(hb_loss_ln_q16(&tb, (uint32_t)at(ls, i)) == at(ln, i), "loss%d ln %u", c, i);
    }
    CHECK(cases >= 4, "only %d loss cases", cases);
    /* the floor division of the mean and its int32 wrap */
    CHECK(hb_loss_mean(-7, 2) == -3 && hb_loss_mean(-8, 3) == -3 && hb_loss_mean(7, 2) == 4,
          "mean rounding");
    CHECK(hb_loss_mean(((int64_t)1 << 32) + 5, 1) == 5 &&
              hb_loss_mean(INT32_MAX + (int64_t)1, 1) == INT32_MIN,
          "mean wrap");
    for (int c = 0;; c++) {
        const hbgv_array *msg = arr("lossbad%d.%s", c, "msg");
        if (!msg) break;
        const hbgv_array *sec = arr("lossbad%d.%s", c, "section");
        hb_loss_tables tb;
        hb_status st;
        int rc = hb_loss_load(sec ? sec->data : NULL, sec ? hbgv_elems(sec) : 0, &tb, &st);
        CHECK(rc == -1 && st.code == HB_ERR_BAD_MODEL && same_text(&st, msg),
              "lossbad%d: got %.*s, expected %.*s", c, st.len, st.msg, (int)hbgv_elems(msg),
              (const char *)msg->data);
    }
}

/* a model view over a test table: (role, elem, constant, layout, rank, dims[6]) per tensor */
typedef struct {
    const hbgv_array *info, *weights;
} table_view;

static void view_info(const void *ctx, uint16_t t, hb_zo_tinfo *out) {
    const table_view *v = ctx;
    const hbgv_array *a = v->info;
    uint32_t w = a->dims[1];
    out->role = (uint8_t)at(a, t * w + 0);
    out->elem = (uint8_t)at(a, t * w + 1);
    out->constant = (uint8_t)at(a, t * w + 2);
    out->layout = (uint8_t)at(a, t * w + 3);
    out->rank = (uint8_t)at(a, t * w + 4);
    out->n = 1;
    for (int i = 0; i < 6; i++) {
        out->dims[i] = (uint32_t)at(a, t * w + 5 + i);
        if (i < out->rank) out->n *= out->dims[i];
    }
}

static uint16_t view_weight(const void *ctx, uint32_t i) {
    const table_view *v = ctx;
    return (uint16_t)at(v->weights, i);
}

static hb_zocf Z;
static hb_zo_tensor Z_table[HB_MAX_TRAINED]; /* the device keeps it in its arena */

static void test_zocf(void) {
    const hbgv_array *names = hbgv_need(&F, "view.names");
    char list[256] = {0}, *model[8];
    memcpy(list, names->data, hbgv_elems(names) < 255 ? hbgv_elems(names) : 255);
    int n_models = 0;
    for (char *p = strtok(list, ","); p && n_models < 8; p = strtok(NULL, ","))
        model[n_models++] = p;
    int cases = 0, refused = 0;
    for (int c = 0;; c++, cases++) {
        const hbgv_array *mi = arr("z%d.%s", c, "model");
        if (!mi) break;
        char name[128];
        snprintf(name, sizeof name, "view.%s.info", model[at(mi, 0)]);
        table_view tv = {hbgv_need(&F, name), NULL};
        snprintf(name, sizeof name, "view.%s.weights", model[at(mi, 0)]);
        tv.weights = hbgv_need(&F, name);
        hb_zo_model_view mv = {(uint16_t)tv.info->dims[0], view_info, hbgv_elems(tv.weights),
                               view_weight, &tv};
        const hbgv_array *sec = arr("z%d.%s", c, "section"), *msg = arr("z%d.%s", c, "msg");
        hb_status st;
        hb_status_clear(&st);
        int rc = hb_zocf_load(sec ? sec->data : NULL, sec ? hbgv_elems(sec) : 0, &mv, &Z, &st);
        if (msg) {
            refused++;
            CHECK(rc == -1 && st.code == HB_ERR_BAD_MODEL && same_text(&st, msg),
                  "z%d: got %d '%.*s', expected '%.*s'", c, rc, st.len, st.msg,
                  (int)hbgv_elems(msg), (const char *)msg->data);
            continue;
        }
        CHECK(rc == 0, "z%d refused: %.*s", c, st.len, st.msg);
        if (rc) continue;
        hb_zocf_table(&Z, &mv, Z_table);
        const hbgv_array *h = arr("z%d.%s", c, "header"), *tr = arr("z%d.%s", c, "trained"),
                         *cm = arr("z%d.%s", c, "cm");
        CHECK(Z.dist == at(h, 0) && Z.scaling == at(h, 1) && Z.estimator == at(h, 2) &&
                  Z.rounding == at(h, 3) && Z.master == at(h, 4) && Z.pool_size == at(h, 5) &&
                  Z.pool_seed == (uint32_t)at(h, 6),
              "z%d header", c);
        CHECK(Z.n_trained == tr->dims[0], "z%d: %u trained, expected %u", c, Z.n_trained,
              tr->dims[0]);
        uint32_t cm_pos = 0;
        for (uint32_t i = 0; i < Z.n_trained && i < tr->dims[0]; i++) {
            const hb_zo_tensor *t = &Z.trained[i];
            const uint32_t w = tr->dims[1];
            int64_t want[9], got[9] = {t->tensor, t->kind, t->layout, t->eps_mult, t->unit_shift,
                                       t->n, t->rows, t->len, t->cm ? t->rows : 0};
            for (int j = 0; j < 9; j++) want[j] = at(tr, i * w + j);
            CHECK(memcmp(got, want, sizeof got) == 0, "z%d entry %u", c, i);
            if (t->cm && cm) {
                CHECK_BYTES("channel multipliers", t->cm, cm->data + cm_pos, t->rows);
                cm_pos += t->rows;
            }
        }
    }
    CHECK(cases >= 40 && refused >= 25, "%d ZOCF cases, %d refused", cases, refused);
}

int main(int argc, char **argv) {
    hbgv_load(&F, argc > 1 ? argv[1] : "../fixtures/golden", "zo.hbgv");
    test_philox();
    test_perturb();
    test_update();
    test_loss();
    test_zocf();
    hbgv_free(&F);
    TEST_MAIN_END("test_zo");
}
