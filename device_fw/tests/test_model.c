/* Whole-model ZO through hb_graph + hb_model on fixtures/golden/model_{mlp,cnn,dw}.hbgv
 * (fixtures/golden/make_model_vectors.py: the twin's ModelState on the same blobs): for each
 * configuration the load (working memory, initial weights CRC), then the sequence of PROBEs
 * (losses; the weights bit-identical after), APPLYs in a row (weights CRC, updates applied,
 * every trained tensor's bytes) and EVALs (hits, loss sum). Also checks the LOSS/ZOCF
 * refusals reach hb_model_load on real blobs with the declared text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hb_blob.h"
#include "hb_bytes.h"
#include "hb_crc.h"
#include "hb_graph.h"
#include "hb_model.h"
#include "hb_wire.h"
#include "hbgv.h"
#include "zo/loss.h"
#include "zo/perturb.h"
#include "zo/philox.h"

static void *aligned(size_t n) {
    size_t r = (n + 15) / 16 * 16;
    void *p = aligned_alloc(16, r ? r : 16);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    memset(p, 0xA5, r ? r : 16); /* never zero by accident */
    return p;
}

static const hbgv_array *get(const hbgv_file *f, const char *fmt, int i, int j, const char *k) {
    char name[128];
    if (j < 0) snprintf(name, sizeof name, fmt, i, k);
    else snprintf(name, sizeof name, fmt, i, j, k);
    return hbgv_find(f, name);
}

static uint32_t crc_of_trained(const hb_model *m, const hb_graph *g) {
    uint32_t crc = 0;
    for (uint16_t t = 0; t < hb_model_n_trained(m); t++) {
        uint16_t ti = hb_model_trained_tensor(m, t);
        const hb_tensor *x = hb_graph_tensor(g, ti);
        crc = hb_crc32(crc, hb_graph_data(g, ti), (size_t)x->n * (x->dtype ? 4u : 1u));
    }
    return crc;
}

/* Move every trained tensor by sign * delta of seed in place, as a device that wrote its
 * weights would: int8 weights clamp(w + sign delta, +-127), int32 biases sat32(b + sign delta).
 * The reference for PROBE, which must compute the same losses without writing anything. */
static void perturb_in_place(const hb_model *m, const hb_graph *g, uint32_t seed, uint32_t eps,
                             int32_t sign) {
    const hb_zocf *z = hb_model_zocf(m);
    const hb_zo_source src = {z->dist, hb_model_pool(m), z->pool_size};
    int8_t r[HB_ZO_CHUNK];
    uint8_t mult[HB_ZO_CHUNK];
    for (uint16_t t = 0; t < z->n_trained; t++) {
        const hb_zo_tensor *tt = &z->trained[t];
        uint8_t *d = hb_graph_data(g, tt->tensor);
        const uint32_t scale = hb_zo_scale(&src, z->scaling, tt, t, seed);
        for (uint32_t e0 = 0; e0 < tt->n; e0 += HB_ZO_CHUNK) {
            const uint32_t cnt = tt->n - e0 < HB_ZO_CHUNK ? tt->n - e0 : HB_ZO_CHUNK;
            hb_zo_samples(&src, tt, t, seed, e0, cnt, r, mult);
            for (uint32_t i = 0; i < cnt; i++) {
                const int32_t u = hb_zo_unit(r[i], scale);
                const int64_t delta = (int64_t)sign * hb_zo_delta(u, eps, mult[i], tt->unit_shift);
                if (tt->kind == HB_ZO_BIAS) {
                    int64_t b = hb_rdi32(d + 4u * (e0 + i)) + delta;
                    b = b > INT32_MAX ? INT32_MAX : b < INT32_MIN ? INT32_MIN : b;
                    hb_wr32(d + 4u * (e0 + i), (uint32_t)(int32_t)b);
                } else {
                    int64_t w = ((int8_t *)d)[e0 + i] + delta;
                    ((int8_t *)d)[e0 + i] = (int8_t)(w > 127 ? 127 : w < -127 ? -127 : w);
                }
            }
        }
    }
}

/* PROBE at eps (1, and 127 where most perturbed weights saturate) against the reference:
 * the weights written in place (perturb_in_place), the batch's loss by EVAL on a slot of the
 * batch's items, the blob restored from a copy. PROBE itself leaves every byte of the blob
 * as it was (it never writes the weights). Returns the number of saturated weights seen. */
static uint32_t probe_is_in_place(const char *file, int c, hb_model *m, hb_graph *g, uint8_t *blob,
                                  uint32_t len, const hb_slot *slot, uint32_t eps) {
    enum { B = 5, Q = 3 };
    const uint32_t seeds[Q] = {0x9E3779B9u, 7u, 0xC0FFEEu + eps};
    const uint32_t batch_seed = 0xBA7C4u + eps;
    uint8_t *keep = malloc(len);
    memcpy(keep, blob, len);
    uint8_t wire_seeds[4 * Q], wire_lp[4 * Q], wire_lm[4 * Q]; /* as a request and its answer */
    for (uint32_t k = 0; k < Q; k++) hb_wr32(wire_seeds + 4 * k, seeds[k]);
    hb_model_probe(m, slot, B, batch_seed, (uint16_t)eps, wire_seeds, Q, wire_lp, wire_lm);
    int32_t lp[Q], lm[Q];
    for (uint32_t k = 0; k < Q; k++) {
        lp[k] = hb_rdi32(wire_lp + 4 * k);
        lm[k] = hb_rdi32(wire_lm + 4 * k);
    }
    CHECK(memcmp(blob, keep, len) == 0, "%s c%d eps %u: PROBE wrote into the blob", file, c, eps);
    /* the batch as a slot of its own, in PROBE's order */
    int8_t *xs = malloc((size_t)B * slot->item_size);
    uint8_t ys[B];
    hb_stream bs;
    hb_philox_stream_init(&bs, batch_seed, HB_STREAM_BATCH, 0);
    for (uint32_t i = 0; i < B; i++) {
        const uint32_t item = hb_philox_batch_index(&bs, slot->n_items, i);
        memcpy(xs + (size_t)i * slot->item_size, slot->inputs + (size_t)item * slot->item_size,
               slot->item_size);
        ys[i] = slot->labels[item];
    }
    const hb_slot batch = {xs, ys, B, slot->item_size, slot->n_classes, 0};
    uint32_t hits, saturated = 0;
    int64_t sum;
    hb_model_eval(m, &batch, 0, B, &hits, &sum);
    const int32_t l0 = hb_loss_mean(sum, B);
    const int one_sided = hb_model_zocf(m)->estimator == HB_ESTIMATOR_ONE_SIDED;
    for (uint32_t k = 0; k < Q; k++) {
        int32_t want[2];
        for (int pm = 0; pm < 2; pm++) {
            if (pm == 1 && one_sided) {
                want[1] = l0;
                break;
            }
            perturb_in_place(m, g, seeds[k], eps, pm ? -1 : 1);
            for (uint16_t t = 0; t < hb_model_n_trained(m); t++) {
                const uint16_t ti = hb_model_trained_tensor(m, t);
                const hb_tensor *x = hb_graph_tensor(g, ti);
                const int8_t *w = (const int8_t *)hb_graph_data(g, ti);
                for (uint32_t e = 0; x->dtype == HB_DTYPE_INT8 && e < x->n; e++)
                    saturated += (w[e] == 127 || w[e] == -127) &&
                                 w[e] != ((const int8_t *)keep)[w - (const int8_t *)blob + e];
            }
            hb_model_eval(m, &batch, 0, B, &hits, &sum);
            want[pm] = hb_loss_mean(sum, B);
            memcpy(blob, keep, len);
        }
        CHECK(lp[k] == want[0] && lm[k] == want[1],
              "%s c%d eps %u seed %u: PROBE %d %d, weights written in place %d %d", file, c, eps,
              k, lp[k], lm[k], want[0], want[1]);
    }
    free(xs);
    free(keep);
    return saturated;
}

static int run_config(const hbgv_file *f, const char *file, int c, const hb_slot *slot) {
    const hbgv_array *blob_a = get(f, "c%d.%s", c, -1, "blob");
    if (!blob_a) return 0;
    const hbgv_array *name = get(f, "c%d.%s", c, -1, "name"),
                     *info = get(f, "c%d.%s", c, -1, "info");
    printf("  %s config %d: %.*s\n", file, c, (int)hbgv_elems(name), (const char *)name->data);
    uint32_t len = hbgv_elems(blob_a);
    uint8_t *blob = aligned(len);
    memcpy(blob, blob_a->data, len);
    hb_graph *g = hb_graph_instance();
    hb_model *m = hb_model_instance();
    hb_status st;
    hb_status_clear(&st);
    int rc = hb_blob_load(g, blob, len, &st);
    CHECK(rc == 0, "%s c%d: graph refused: %.*s", file, c, st.len, st.msg);
    if (rc) return free(blob), 1;
    rc = hb_model_load(m, g, &st);
    CHECK(rc == 0, "%s c%d: model refused: %.*s", file, c, st.len, st.msg);
    if (rc) return free(blob), 1;
    CHECK(hb_model_n_trained(m) == hbgv_get(info, 0), "%s c%d: %u trained", file, c,
          hb_model_n_trained(m));
    CHECK(hb_model_work_bytes(m) == (uint64_t)hbgv_get(info, 1), "%s c%d: work %llu, want %lld",
          file, c, (unsigned long long)hb_model_work_bytes(m), (long long)hbgv_get(info, 1));
    uint8_t *act = aligned(hb_graph_act_bytes(g));
    uint8_t *work = aligned((size_t)hb_model_work_bytes(m));
    hb_graph_bind(g, act);
    hb_model_bind(m, work);
    CHECK(hb_model_weights_crc(m) == (uint32_t)hbgv_get(info, 2), "%s c%d: initial CRC %08x", file,
          c, hb_model_weights_crc(m));
    CHECK(hb_model_updates_applied(m) == 0, "updates after bind");
    uint16_t cut_t = 0;
    const uint16_t cut = hb_model_cut(m, &cut_t);
    printf("    frozen prefix: %s ops 0..%d, tensor %d\n", cut ? "" : "none;", cut, cut_t);
    /* the prefix cache's free regions (hb_model_set_free): room for an entry per item, and
     * for 3 entries only, each beyond the PROBE's reserve; a view of the slot it may keep */
    const uint64_t entry = hb_model_prefix_bytes(m, 1);
    const uint64_t reserve = hb_model_copy_bytes(m) + HB_MODEL_CACHE_RESERVE_ITEMS * entry;
    const uint32_t frees[2] = {
        (uint32_t)(hb_pad16((slot->n_items + 7u) / 8u) + slot->n_items * entry + reserve),
        (uint32_t)(16 + 3 * entry + reserve)};
    const uint32_t caps[2] = {cut ? slot->n_items : 0,
                              cut ? (slot->n_items < 3 ? slot->n_items : 3) : 0};
    uint8_t *region = aligned(frees[0]);
    hb_slot view = *slot;
    view.cache_id = 1;
    uint32_t gen = 1000; /* a fresh generation: every part forgotten */
    probe_is_in_place(file, c, m, g, blob, len, slot, 1);
    CHECK(probe_is_in_place(file, c, m, g, blob, len, slot, 127) > 0,
          "%s c%d: no weight saturates at eps 127", file, c);
    for (int j = 0;; j++) {
        const hbgv_array *op = get(f, "c%d.s%d.%s", c, j, "op");
        if (!op) break;
        const hbgv_array *args = get(f, "c%d.s%d.%s", c, j, "args");
        if (hbgv_get(op, 0) == 1) { /* PROBE */
            const hbgv_array *seeds = get(f, "c%d.s%d.%s", c, j, "seeds"),
                             *lp = get(f, "c%d.s%d.%s", c, j, "lp"),
                             *lm = get(f, "c%d.s%d.%s", c, j, "lm");
            uint16_t q = (uint16_t)hbgv_elems(seeds);
            uint8_t s[4 * HB_MAX_Q], gp[4 * HB_MAX_Q], gm[4 * HB_MAX_Q]; /* little-endian */
            for (uint16_t k = 0; k < q; k++) hb_wr32(s + 4 * k, (uint32_t)hbgv_get(seeds, k));
            uint32_t before = hb_model_weights_crc(m);
            /* the scratch: none (every pass from the input, rows on demand), the frozen
             * prefix only, then the prefix and the perturbed copy (or the copy alone without
             * a cut): the golden losses every time */
            const uint16_t B = (uint16_t)hbgv_get(args, 1);
            const uint32_t pre = (uint32_t)hb_model_prefix_bytes(m, B);
            const uint32_t sizes[4] = {0, pre, pre + hb_model_copy_bytes(m),
                                       pre + hb_model_copy_bytes(m) + hb_model_words_bytes(m)};
            uint8_t *scratch = aligned(sizes[3] + 16);
            for (int mode = 0; mode < 4; mode++) {
                hb_model_set_scratch(m, scratch, sizes[mode]);
                int used_pre, used_copy;
                hb_model_probe_plan(m, B, sizes[mode], &used_pre, &used_copy);
                CHECK(used_pre == (mode > 0 && hb_model_cut(m, NULL) > 0) &&
                          used_copy == (sizes[mode] >= pre + hb_model_copy_bytes(m) &&
                                        hb_model_n_trained(m) > 0),
                      "%s c%d step %d: scratch %u: prefix %d copy %d", file, c, j, sizes[mode],
                      used_pre, used_copy);
                /* the seed's buffered words: only in the last mode */
                CHECK(hb_model_probe_words(m, B, sizes[mode]) ==
                          (mode == 3 && used_copy && hb_model_words_bytes(m) > 0),
                      "%s c%d step %d: scratch %u: words %d", file, c, j, sizes[mode],
                      hb_model_probe_words(m, B, sizes[mode]));
                hb_model_probe(m, slot, B, (uint32_t)hbgv_get(args, 0),
                               (uint16_t)hbgv_get(args, 2), s, q, gp, gm);
                for (uint16_t k = 0; k < q; k++) {
                    const int32_t p = hb_rdi32(gp + 4 * k), n = hb_rdi32(gm + 4 * k);
                    CHECK(p == hbgv_get(lp, k) && n == hbgv_get(lm, k),
                          "%s c%d step %d seed %u scratch %u: L+ %d L- %d, expected %lld %lld",
                          file, c, j, k, sizes[mode], p, n, (long long)hbgv_get(lp, k),
                          (long long)hbgv_get(lm, k));
                }
            }
            hb_model_set_scratch(m, NULL, 0);
            free(scratch);
            /* with the prefix cache, partial then whole, each made by a first PROBE and read
             * by a second: the golden losses; the whole one is kept (generation 1) for the
             * steps after, APPLYs and EVALs, whose goldens then read its entries */
            for (int fi = 1; fi >= 0; fi--)
                for (int again = 0; again < 2; again++) {
                    hb_model_set_free(m, region, frees[fi], fi ? ++gen : 1);
                    hb_model_probe(m, &view, B, (uint32_t)hbgv_get(args, 0),
                                   (uint16_t)hbgv_get(args, 2), s, q, gp, gm);
                    for (uint16_t k = 0; k < q; k++)
                        CHECK(hb_rdi32(gp + 4 * k) == hbgv_get(lp, k) &&
                                  hb_rdi32(gm + 4 * k) == hbgv_get(lm, k),
                              "%s c%d step %d seed %u, prefix cache %u bytes (pass %d): L+ %d "
                              "L- %d, expected %lld %lld",
                              file, c, j, k, frees[fi], again, hb_rdi32(gp + 4 * k),
                              hb_rdi32(gm + 4 * k), (long long)hbgv_get(lp, k),
                              (long long)hbgv_get(lm, k));
                    uint32_t cap, made;
                    hb_model_cache_slot(m, 0, &cap, &made);
                    CHECK(cap == caps[fi] && made <= cap && (fi || !cut || made >= 1),
                          "%s c%d step %d: prefix cache of %u bytes: cap %u made %u, want cap %u",
                          file, c, j, frees[fi], cap, made, caps[fi]);
                }
            CHECK(hb_model_weights_crc(m) == before, "%s c%d step %d: PROBE changed the weights",
                  file, c, j);
        } else if (hbgv_get(op, 0) == 2) { /* APPLY */
            const hbgv_array *seeds = get(f, "c%d.s%d.%s", c, j, "seeds"),
                             *co = get(f, "c%d.s%d.%s", c, j, "coeffs"),
                             *after = get(f, "c%d.s%d.%s", c, j, "after"),
                             *w = get(f, "c%d.s%d.%s", c, j, "weights");
            uint16_t q = (uint16_t)hbgv_elems(seeds);
            uint8_t s[4 * HB_MAX_Q], cf[4 * HB_MAX_Q]; /* little-endian, as a request has them */
            for (uint16_t k = 0; k < q; k++) {
                hb_wr32(s + 4 * k, (uint32_t)hbgv_get(seeds, k));
                hb_wr32(cf + 4 * k, (uint32_t)hbgv_get(co, k));
            }
            /* the scratch's length and alignment change nothing: chunks of 1, 37 or
             * HB_ZO_CHUNK elements at an odd address, in a block of exactly that size (ASan
             * sees any byte past it); one byte short of a single element is refused first */
            static const uint32_t chunks[3] = {1, 37, HB_ZO_CHUNK};
            const uint32_t need = HB_MODEL_APPLY_SCRATCH(q, chunks[j % 3]), skew = 1 + j % 7;
            uint8_t *scratch = malloc(need + skew);
            const uint32_t crc0 = hb_model_weights_crc(m), n0 = hb_model_updates_applied(m);
            rc = hb_model_apply(m, s, cf, q, scratch + skew, HB_MODEL_APPLY_SCRATCH(q, 1) - 1);
            CHECK(rc == -1 && hb_model_weights_crc(m) == crc0 && hb_model_updates_applied(m) == n0,
                  "%s c%d step %d: a short scratch must change nothing (%d)", file, c, j, rc);
            rc = hb_model_apply(m, s, cf, q, scratch + skew, need);
            CHECK(rc == 0, "%s c%d step %d: APPLY refused a scratch of %u bytes", file, c, j, need);
            free(scratch);
            CHECK(hb_model_weights_crc(m) == (uint32_t)hbgv_get(after, 0) &&
                      hb_model_updates_applied(m) == hbgv_get(after, 1),
                  "%s c%d step %d: CRC %08x updates %u, expected %08llx %lld", file, c, j,
                  hb_model_weights_crc(m), hb_model_updates_applied(m),
                  (unsigned long long)hbgv_get(after, 0), (long long)hbgv_get(after, 1));
            CHECK(crc_of_trained(m, g) == hb_model_weights_crc(m), "CRC over the tensors");
            size_t pos = 0;
            for (uint16_t t = 0; t < hb_model_n_trained(m); t++) {
                uint16_t ti = hb_model_trained_tensor(m, t);
                const hb_tensor *x = hb_graph_tensor(g, ti);
                size_t bytes = (size_t)x->n * (x->dtype ? 4u : 1u);
                if (pos + bytes > hbgv_elems(w)) break;
                char what[96];
                snprintf(what, sizeof what, "%s c%d step %d trained tensor %u", file, c, j, t);
                CHECK_BYTES(what, hb_graph_data(g, ti), w->data + pos, bytes);
                pos += bytes;
            }
            CHECK(pos == hbgv_elems(w), "%s c%d step %d: %zu trained bytes, expected %u", file, c,
                  j, pos, hbgv_elems(w));
        } else { /* EVAL */
            const hbgv_array *res = get(f, "c%d.s%d.%s", c, j, "res");
            uint32_t correct;
            int64_t loss;
            hb_model_eval(m, slot, (uint32_t)hbgv_get(args, 0), (uint32_t)hbgv_get(args, 1),
                          &correct, &loss);
            CHECK(correct == hbgv_get(res, 0) && loss == hbgv_get(res, 1),
                  "%s c%d step %d: EVAL %u %lld, expected %lld %lld", file, c, j, correct,
                  (long long)loss, (long long)hbgv_get(res, 0), (long long)hbgv_get(res, 1));
            /* with the prefix cache: partial (made now, then read), then the whole one kept
             * since the last PROBE (generation 1: entries made before the APPLYs since) */
            for (int fi = 1; fi >= 0; fi--)
                for (int again = 0; again < 2; again++) {
                    hb_model_set_free(m, region, frees[fi], fi ? (again ? gen : ++gen) : 1);
                    hb_model_eval(m, &view, (uint32_t)hbgv_get(args, 0),
                                  (uint32_t)hbgv_get(args, 1), &correct, &loss);
                    CHECK(correct == hbgv_get(res, 0) && loss == hbgv_get(res, 1),
                          "%s c%d step %d, prefix cache %u bytes (pass %d): EVAL %u %lld, "
                          "expected %lld %lld",
                          file, c, j, frees[fi], again, correct, (long long)loss,
                          (long long)hbgv_get(res, 0), (long long)hbgv_get(res, 1));
                }
        }
    }
    if (cut) { /* a slot's new content comes with a new generation: no entry of the old is read */
        const size_t bytes = (size_t)slot->n_items * slot->item_size;
        int8_t *flipped = malloc(bytes);
        for (size_t i = 0; i < bytes; i++) flipped[i] = (int8_t)~slot->inputs[i];
        hb_slot other = *slot;
        other.inputs = flipped;
        uint32_t want_c, got_c, cap, made;
        int64_t want_l, got_l;
        hb_model_set_free(m, region, frees[0], ++gen);
        hb_model_eval(m, &view, 0, slot->n_items, &got_c, &got_l); /* every entry made */
        hb_model_cache_slot(m, 0, &cap, &made);
        CHECK(made == slot->n_items, "%s c%d: %u entries made of %u", file, c, made, slot->n_items);
        hb_model_eval(m, &other, 0, slot->n_items, &want_c, &want_l); /* cache_id 0: none */
        other.cache_id = 1;
        hb_model_set_free(m, region, frees[0], ++gen);
        hb_model_eval(m, &other, 0, slot->n_items, &got_c, &got_l);
        CHECK(got_c == want_c && got_l == want_l,
              "%s c%d: EVAL of new content read the old entries: %u %lld, expected %u %lld", file,
              c, got_c, (long long)got_l, want_c, (long long)want_l);
        hb_model_set_free(m, region, frees[0] - 16, gen); /* the region moved: forgotten */
        hb_model_cache_slot(m, 0, &cap, &made);
        CHECK(made == 0, "%s c%d: a changed free region kept %u entries", file, c, made);
        free(flipped);
    }
    hb_model_set_scratch(m, NULL, 0);
    free(region);
    free(work);
    free(act);
    free(blob);
    return 1;
}

/* a valid blob whose ZOCF or LOSS section is damaged in place (its CRC fixed up) is refused
 * by hb_model_load with the declared text */
static void refusals(const hbgv_file *f) {
    const hbgv_array *blob_a = get(f, "c%d.%s", 1, -1, "blob"); /* MLP "all": has a ZOCF */
    uint32_t len = hbgv_elems(blob_a);
    uint8_t *blob = aligned(len);
    struct {
        const char tag[5];
        uint32_t at;
        uint8_t value;
        const char *want;
    } cases[] = {
        {"ZOCF", 0, 2, "ZOCF version 2, this device reads 1"},
        {"ZOCF", 5, 3, "ZOCF master code 3 unknown: 0 q16, 1 int16, 2 int8"},
        {"ZOCF", 20, 200, "ZOCF entry 0: tensor index 200 >= 7 tensors"},
        {"LOSS", 0, 1, "LOSS section: EXP[0] is 65537, must be 65536"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(blob, blob_a->data, len);
        hb_graph *g = hb_graph_instance();
        hb_status st;
        int rc = hb_blob_load(g, blob, len, &st);
        const uint8_t *sec;
        uint32_t slen;
        CHECK(rc == 0 && hb_graph_section(g, cases[i].tag, &sec, &slen) == 0, "section %s",
              cases[i].tag);
        if (rc) continue;
        size_t off = (size_t)(sec - blob) + cases[i].at;
        blob[off] = cases[i].value;
        hb_wr32(blob + len - 4, hb_crc32(0, blob, len - 4));
        rc = hb_blob_load(g, blob, len, &st);
        CHECK(rc == 0, "reload: %.*s", st.len, st.msg);
        rc = hb_model_load(hb_model_instance(), g, &st);
        size_t n = strlen(cases[i].want);
        CHECK(rc == -1 && st.code == HB_ERR_BAD_MODEL && st.len == n &&
                  memcmp(st.msg, cases[i].want, n) == 0,
              "got '%.*s', expected '%s'", st.len, st.msg, cases[i].want);
    }
    free(blob);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "../fixtures/golden";
    const char *files[] = {"model_mlp.hbgv", "model_cnn.hbgv", "model_dw.hbgv"};
    int configs = 0;
    for (size_t i = 0; i < 3; i++) {
        hbgv_file f;
        hbgv_load(&f, dir, files[i]);
        const hbgv_array *x = hbgv_need(&f, "x"), *y = hbgv_need(&f, "y"),
                         *nc = hbgv_need(&f, "n_classes");
        hb_slot slot = {(const int8_t *)x->data, y->data, x->dims[0], (uint16_t)x->dims[1],
                        (uint16_t)hbgv_get(nc, 0), 0};
        for (int c = 0; run_config(&f, files[i], c, &slot); c++) configs++;
        if (i == 0) refusals(&f);
        hbgv_free(&f);
    }
    CHECK(configs >= 11, "only %d configurations", configs);
    TEST_MAIN_END("test_model");
}
