/* Benchmarks of the firmware core (hb_bench.h): port-independent, the core's API and two HAL
 * calls (hb_port_ticks, hb_port_write). */
#include "hb_bench.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hb_blob.h"
#include "hb_bytes.h"
#include "hb_device.h"
#include "hb_graph.h"
#include "hb_port.h"
#include "hb_wire.h"
#include "hb_zo.h"
#include "zo/loss.h"
#include "zo/perturb.h"
#include "zo/zocf.h"

#ifndef HB_BENCH_FLAGS
#define HB_BENCH_FLAGS "unknown"
#endif
#if defined(__clang__)
#define HB_BENCH_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define HB_BENCH_COMPILER "gcc " __VERSION__
#else
#define HB_BENCH_COMPILER "unknown compiler"
#endif

static uint64_t samples[HB_BENCH_MAX_RUNS];
static volatile uint32_t sink; /* results the compiler must not drop */

/* The window marker of a per-function profile (bench/qemu/insn_split.c, a QEMU plugin keyed on
 * this function's address): calls alternately open and close a window. Window 0 is the first
 * PROBE, window 1 the first APPLY, each inside its tick bracket. */
__attribute__((noinline)) void hb_bench_mark(void) { __asm__ volatile("" ::: "memory"); }

/* ---- timing ------------------------------------------------------------------------------ */

uint64_t hb_bench_tick_overhead(void) {
    static int measured;
    static uint64_t overhead;
    if (!measured) {
        uint64_t best = UINT64_MAX;
        for (int i = 0; i < 64; i++) {
            uint64_t t0 = hb_port_ticks();
            uint64_t t = hb_port_ticks() - t0;
            if (t < best) best = t;
        }
        overhead = best;
        measured = 1;
    }
    return overhead;
}

/* ticks since t0, less the timer's own cost */
static uint64_t since(uint64_t t0) {
    uint64_t t = hb_port_ticks() - t0, o = hb_bench_tick_overhead();
    return t > o ? t - o : 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* min, median (lower middle), max of samples[0..n) (sorts them) */
static void stats_of(uint32_t n, uint64_t div, hb_bench_stats *s) {
    qsort(samples, n, sizeof samples[0], cmp_u64);
    s->runs = n;
    s->min = samples[0] / div;
    s->median = samples[(n - 1) / 2] / div;
    s->max = samples[n - 1] / div;
}

static int check_runs(uint32_t runs, const char *what, hb_status *st) {
    if (runs >= 1 && runs <= HB_BENCH_MAX_RUNS) return 0;
    return HB_FAIL(st, HB_ERR_BAD_ARGUMENT, "%s %d is out of range: use 1..%d", HB_S(what),
                   HB_I(runs), HB_I(HB_BENCH_MAX_RUNS));
}

static int arena_fits(uint64_t need, uint32_t arena_bytes, hb_status *st) {
    if (need <= arena_bytes) return 0;
    return HB_FAIL(st, HB_ERR_MODEL_TOO_LARGE,
                   "the bench needs %d bytes of arena, it has %d: give it a larger arena",
                   HB_I(need), HB_I(arena_bytes));
}

/* ---- forward passes ---------------------------------------------------------------------- */

int hb_bench_forward(uint8_t *blob, uint32_t len, uint8_t *arena, uint32_t arena_bytes,
                     const int8_t *input, uint32_t input_len, uint32_t runs,
                     hb_bench_forward_result *r, hb_status *st) {
    memset(r, 0, sizeof *r);
    hb_status_clear(st);
    if (check_runs(runs, "runs", st) < 0) return -1;
    hb_graph *g = hb_graph_instance();
    if (hb_blob_load(g, blob, len, st) < 0) return -1;
    r->ops = hb_graph_n_ops(g);
    r->act_bytes = hb_graph_act_bytes(g);
    r->input_size = hb_graph_input_size(g);
    r->output_size = hb_graph_output_size(g);
    if (input_len != r->input_size)
        return HB_FAIL(st, HB_ERR_BAD_ARGUMENT,
                       "the input has %d bytes, the model's input %d: give one input item",
                       HB_I(input_len), HB_I(r->input_size));
    if (arena_fits((uint64_t)r->act_bytes + hb_pad16(r->output_size), arena_bytes, st) < 0)
        return -1;
    hb_graph_bind(g, arena);
    int8_t *first = (int8_t *)(arena + r->act_bytes);
    const int8_t *y = hb_graph_forward(g, input);
    if (!y) return HB_FAIL0(st, HB_ERR_INTERNAL, "the forward pass gave no output");
    memcpy(first, y, r->output_size);
    r->output = first;
    r->stable = 1;
    for (uint32_t i = 0; i < runs; i++) {
        uint64_t t0 = hb_port_ticks();
        y = hb_graph_forward(g, input);
        samples[i] = since(t0);
        if (memcmp(y, first, r->output_size) != 0) r->stable = 0;
    }
    stats_of(runs, 1, &r->forward);
    return 0;
}

/* ---- ZO steps ---------------------------------------------------------------------------- */

/* The ZOCF as the device reads it (core/model.c's view of the graph), so the PRNG's parts can
 * be timed with the same tensors; checked against hb_model's own list after loading. */
static hb_zocf zocf;
static hb_zo_tensor zocf_table[HB_MAX_TRAINED]; /* the device keeps its table in the arena */
static uint16_t filters[HB_MAX_TRAINED];
static int8_t r_buf[HB_ZO_CHUNK];
static uint8_t m_buf[HB_ZO_CHUNK];

static void view_info(const void *ctx, uint16_t t, hb_zo_tinfo *out) {
    const hb_tensor *x = hb_graph_tensor((const hb_graph *)ctx, t);
    out->role = x->role == HB_ROLE_WEIGHT ? HB_ZO_WEIGHT
                : x->role == HB_ROLE_BIAS ? HB_ZO_BIAS
                                          : HB_ZO_NONE;
    out->elem = x->dtype == HB_DTYPE_INT8    ? HB_ZO_INT8
                : x->dtype == HB_DTYPE_INT32 ? HB_ZO_INT32
                                             : HB_ZO_OTHER;
    out->constant = x->role != HB_ROLE_ACTIVATION;
    out->layout = x->role == HB_ROLE_WEIGHT && x->opcode == HB_OP_DEPTHWISE_CONV_2D
                      ? HB_ROWS_TRAILING
                      : HB_ROWS_LEADING;
    out->rank = x->rank;
    for (int i = 0; i < 6; i++) out->dims[i] = i < x->rank ? x->dims[i] : 0;
    out->n = x->n;
}

static uint16_t view_filter(const void *ctx, uint32_t i) {
    (void)ctx;
    return filters[i];
}

/* the filter tensors in op order, each once; the count of all */
static uint32_t list_filters(const hb_graph *g) {
    uint32_t n = 0;
    for (uint16_t op = 0; op < hb_graph_n_ops(g); op++) {
        int32_t w, b;
        if (hb_graph_op_weights(g, op, &w, &b) < 0 || w < 0) continue;
        int seen = 0;
        for (uint16_t k = 0; k < op && !seen; k++) {
            int32_t w2, b2;
            seen = hb_graph_op_weights(g, k, &w2, &b2) == 0 && w2 == w;
        }
        if (seen) continue;
        if (n < HB_MAX_TRAINED) filters[n] = (uint16_t)w;
        n++;
    }
    return n;
}

/* every trained element's raw sample for seed as APPLY draws them: hb_zo_samples, a chunk of
 * elements at a time */
static void draw_chunks(const hb_zo_source *src, uint32_t seed) {
    for (uint16_t t = 0; t < zocf.n_trained; t++) {
        const hb_zo_tensor *tt = &zocf.trained[t];
        for (uint32_t e0 = 0; e0 < tt->n; e0 += HB_ZO_CHUNK) {
            uint32_t cnt = tt->n - e0 < HB_ZO_CHUNK ? tt->n - e0 : HB_ZO_CHUNK;
            hb_zo_samples(src, tt, t, seed, e0, cnt, r_buf, m_buf);
        }
        sink += (uint8_t)r_buf[0];
    }
}

/* the same samples as one perturbed forward pass draws them: row by row, as the kernels ask
 * for rows (hb_zo_row_samples on the tensor's row stream for seed); a bias an element at a
 * time */
static hb_zo_rowstream row_stream;
static hb_zo_rowline row_lines[HB_ZO_ROW_CACHE_LINES];
static void draw_rows(const hb_zo_source *src, uint32_t seed) {
    hb_zo_rowstream *s = &row_stream;
    for (uint16_t t = 0; t < zocf.n_trained; t++) {
        const hb_zo_tensor *tt = &zocf.trained[t];
        /* the block cache as core/model.c uses it: depthwise filters, fresh samples */
        const int cached = tt->kind == HB_ZO_WEIGHT && tt->layout == HB_ROWS_TRAILING && !src->pool;
        hb_zo_rowstream_init(s, seed, t, cached ? row_lines : NULL);
        for (uint32_t j = 0; j < tt->rows; j++) {
            if (tt->kind == HB_ZO_BIAS) {
                hb_zo_row_samples(src, tt, s, j, 0, 1, r_buf);
                sink += (uint8_t)r_buf[0];
                continue;
            }
            for (uint32_t i0 = 0; i0 < tt->len; i0 += HB_ZO_CHUNK) {
                uint32_t cnt = tt->len - i0 < HB_ZO_CHUNK ? tt->len - i0 : HB_ZO_CHUNK;
                hb_zo_row_samples(src, tt, s, j, i0, cnt, r_buf);
            }
            sink += (uint8_t)r_buf[0];
        }
    }
}

static int check_zo_args(const hb_bench_zo_args *a, const hb_slot *s, const hb_graph *g,
                         hb_status *st) {
    if (a->q < 1 || a->q > HB_MAX_Q)
        return HB_FAIL(st, HB_ERR_BAD_ARGUMENT, "q %d is out of range: use 1..%d", HB_I(a->q),
                       HB_I(HB_MAX_Q));
    if (a->batch < 1 || a->batch > HB_MAX_BATCH)
        return HB_FAIL(st, HB_ERR_BAD_ARGUMENT, "batch %d is out of range: use 1..%d",
                       HB_I(a->batch), HB_I(HB_MAX_BATCH));
    if (a->eps < 1 || a->eps > HB_MAX_EPS)
        return HB_FAIL(st, HB_ERR_BAD_ARGUMENT, "eps %d is out of range: use 1..%d", HB_I(a->eps),
                       HB_I(HB_MAX_EPS));
    if (check_runs(a->runs, "runs", st) < 0 || check_runs(a->item_runs, "item runs", st) < 0)
        return -1;
    if (s->n_items < 1 || s->item_size != hb_graph_input_size(g) ||
        s->n_classes != hb_graph_output_size(g))
        return HB_FAIL(st, HB_ERR_BAD_ARGUMENT,
                       "the data has %d items of %d bytes and %d classes, the model takes %d "
                       "bytes and has %d outputs: give data made for this model",
                       HB_I(s->n_items), HB_I(s->item_size), HB_I(s->n_classes),
                       HB_I(hb_graph_input_size(g)), HB_I(hb_graph_output_size(g)));
    for (uint32_t i = 0; i < s->n_items; i++)
        if (s->labels[i] >= s->n_classes)
            return HB_FAIL(st, HB_ERR_BAD_ARGUMENT,
                           "label %d of item %d is not below the %d classes: fix the labels",
                           HB_I(s->labels[i]), HB_I(i), HB_I(s->n_classes));
    return 0;
}

int hb_bench_zo(uint8_t *blob, uint32_t len, uint8_t *arena, uint32_t arena_bytes,
                const hb_slot *data, const hb_bench_zo_args *a, hb_bench_zo_result *r,
                hb_status *st) {
    memset(r, 0, sizeof *r);
    hb_status_clear(st);
    hb_graph *g = hb_graph_instance();
    hb_model *m = hb_model_instance();
    if (hb_blob_load(g, blob, len, st) < 0) return -1;
    hb_slot one = *data;
    const hb_slot *slot = &one;
    if (!one.n_classes && hb_graph_output_size(g) <= UINT16_MAX)
        one.n_classes = (uint16_t)hb_graph_output_size(g);
    if (check_zo_args(a, slot, g, st) < 0) return -1;
    if (hb_model_load(m, g, st) < 0) return -1;

    /* the ZOCF and LOSS as the device read them, for the PRNG's and the loss's parts */
    const uint8_t *sec;
    uint32_t sec_len;
    if (hb_graph_section(g, HB_ZOCF_TAG, &sec, &sec_len) < 0) {
        sec = NULL;
        sec_len = 0;
    }
    hb_zo_model_view mv = {hb_graph_n_tensors(g), view_info, list_filters(g), view_filter, g};
    if (hb_zocf_load(sec, sec_len, &mv, &zocf, st) < 0) return -1;
    hb_zocf_table(&zocf, &mv, zocf_table);
    int same = zocf.n_trained == hb_model_n_trained(m);
    for (uint16_t t = 0; same && t < zocf.n_trained; t++)
        same = zocf.trained[t].tensor == hb_model_trained_tensor(m, t);
    if (!same)
        return HB_FAIL0(st, HB_ERR_INTERNAL,
                        "the bench's reading of the ZOCF differs from hb_model's: update "
                        "bench.c's view to core/model.c's");
    hb_loss_tables loss;
    if (hb_graph_section(g, HB_LOSS_TAG, &sec, &sec_len) < 0 ||
        hb_loss_load(sec, sec_len, &loss, st) < 0)
        return HB_FAIL0(st, HB_ERR_BAD_MODEL,
                        "the model has no usable LOSS section: build the blob with its loss "
                        "tables (hilbench.zo.loss)");

    const uint64_t act = hb_graph_act_bytes(g), work = hb_model_work_bytes(m);
    r->arena_used = act + work + hb_pad16(zocf.pool_size);
    if (arena_fits(r->arena_used, arena_bytes, st) < 0) return -1;
    hb_graph_bind(g, arena);
    hb_model_bind(m, arena + act);
    { /* the PROBE's scratch: the arena after everything the bench placed */
        const uint64_t used = hb_pad16(r->arena_used);
        const uint32_t rest = a->no_scratch ? 0 : (uint32_t)(arena_bytes - used);
        hb_model_set_scratch(m, arena + used, rest);
        int pre, cp;
        hb_model_probe_plan(m, a->batch, rest, &pre, &cp);
        r->cut_op = hb_model_cut(m, NULL);
        r->prefix_bytes = hb_model_prefix_bytes(m, a->batch);
        r->copy_bytes = hb_model_copy_bytes(m);
        r->scratch_bytes = rest;
        r->used_prefix = (uint8_t)pre;
        r->used_copy = (uint8_t)cp;
        r->words_bytes = hb_model_words_bytes(m);
        r->used_words = (uint8_t)hb_model_probe_words(m, a->batch, rest);
    }
    int8_t *pool = zocf.pool_size ? (int8_t *)(arena + act + work) : NULL;
    if (pool) hb_zo_pool_draw(zocf.dist, zocf.pool_seed, pool, zocf.pool_size);
    const hb_zo_source src = {zocf.dist, pool, zocf.pool_size};

    r->n_trained = zocf.n_trained;
    for (uint16_t t = 0; t < zocf.n_trained; t++) {
        if (zocf.trained[t].kind == HB_ZO_WEIGHT) r->weight_elems += zocf.trained[t].n;
        else r->bias_elems += zocf.trained[t].n;
    }
    r->dist = zocf.dist;
    r->scaling = zocf.scaling;
    r->estimator = zocf.estimator;
    r->rounding = zocf.rounding;
    r->master = zocf.master;
    r->pool_size = zocf.pool_size;
    const int one_sided = zocf.estimator == HB_ESTIMATOR_ONE_SIDED;
    r->n_forward = (uint32_t)(one_sided ? a->q + 1u : 2u * a->q) * a->batch;
    r->n_perturbed = (uint32_t)(one_sided ? a->q : 2u * a->q) * a->batch;
    r->crc_initial = hb_model_weights_crc(m);

    /* single forward passes, items in turn; the loss of a batch of logits */
    const uint32_t classes = hb_graph_output_size(g);
    for (uint32_t i = 0; i < a->item_runs; i++) {
        uint32_t item = i % slot->n_items;
        uint64_t t0 = hb_port_ticks();
        const int8_t *y = hb_graph_forward(g, slot->inputs + (size_t)item * slot->item_size);
        samples[i] = since(t0);
        sink += (uint8_t)y[0];
    }
    stats_of(a->item_runs, 1, &r->forward);
    for (uint32_t i = 0; i < a->item_runs; i++) { /* the frozen prefix alone */
        uint32_t item = i % slot->n_items;
        uint64_t t0 = hb_port_ticks();
        if (r->cut_op)
            (void)hb_graph_forward_range(g, slot->inputs + (size_t)item * slot->item_size, 0,
                                         (uint16_t)r->cut_op, NULL);
        samples[i] = r->cut_op ? since(t0) : 0;
    }
    stats_of(a->item_runs, 1, &r->prefix);
    const int8_t *logits = hb_graph_forward(g, slot->inputs);
    for (uint32_t i = 0; i < a->item_runs; i++) {
        int64_t sum = 0;
        uint64_t t0 = hb_port_ticks();
        for (uint16_t b = 0; b < a->batch; b++)
            sum += hb_loss_item(&loss, logits, classes, slot->labels[(i + b) % slot->n_items]);
        samples[i] = since(t0);
        sink += (uint32_t)sum;
    }
    stats_of(a->item_runs, a->batch, &r->loss);

    /* the PRNG's parts, one seed per run */
    for (uint32_t i = 0; i < a->runs; i++) {
        uint32_t seed = a->seed + i, acc = 0;
        uint64_t t0 = hb_port_ticks();
        for (uint16_t t = 0; t < zocf.n_trained; t++)
            acc += hb_zo_scale(&src, zocf.scaling, &zocf.trained[t], t, seed);
        samples[i] = since(t0);
        sink += acc;
    }
    stats_of(a->runs, 1, &r->scale);
    for (uint32_t i = 0; i < a->runs; i++) {
        uint64_t t0 = hb_port_ticks();
        draw_rows(&src, a->seed + i);
        samples[i] = since(t0);
    }
    stats_of(a->runs, 1, &r->draw_rows);
    for (uint32_t i = 0; i < a->runs; i++) {
        uint64_t t0 = hb_port_ticks();
        draw_chunks(&src, a->seed + i);
        samples[i] = since(t0);
    }
    stats_of(a->runs, 1, &r->draw_chunks);

    /* PROBEs (the weights unchanged after each), then APPLYs; seeds, coefficients and losses
     * little-endian as the wire carries them, APPLY's scratch as large as the device's
     * response buffer, which it lends */
    static uint8_t seeds[4 * HB_MAX_Q], lp[4 * HB_MAX_Q], lm[4 * HB_MAX_Q], coeffs[4 * HB_MAX_Q];
    static uint8_t apply_scratch[HB_DEVICE_MAX_PAYLOAD];
    for (uint32_t i = 0; i < a->runs; i++) {
        for (uint16_t k = 0; k < a->q; k++) hb_wr32(seeds + 4 * k, a->seed + i * a->q + k);
        uint64_t t0 = hb_port_ticks();
        if (i == 0) hb_bench_mark();
        hb_model_probe(m, slot, a->batch, a->seed + i, a->eps, seeds, a->q, lp, lm);
        if (i == 0) hb_bench_mark();
        samples[i] = since(t0);
        if (i == 0) {
            r->saved_q = a->q < HB_BENCH_MAX_SAVED_Q ? a->q : (uint16_t)HB_BENCH_MAX_SAVED_Q;
            for (uint16_t k = 0; k < a->q; k++) {
                const int32_t p = hb_rdi32(lp + 4 * k), n = hb_rdi32(lm + 4 * k);
                if (k < r->saved_q) r->lp[k] = p, r->lm[k] = n;
                int64_t c = ((int64_t)p - n) * HB_BENCH_COEFF_GAIN;
                c = c > HB_COEFF_LIMIT ? HB_COEFF_LIMIT : c < -HB_COEFF_LIMIT ? -HB_COEFF_LIMIT : c;
                hb_wr32(coeffs + 4 * k, (uint32_t)(int32_t)c);
            }
        }
    }
    stats_of(a->runs, 1, &r->probe);
    r->crc_probed = hb_model_weights_crc(m);
    for (uint16_t k = 0; k < a->q; k++) hb_wr32(seeds + 4 * k, a->seed + k);
    for (uint32_t i = 0; i < a->runs; i++) {
        uint64_t t0 = hb_port_ticks();
        if (i == 0) hb_bench_mark();
        const int refused =
            hb_model_apply(m, seeds, coeffs, a->q, apply_scratch, sizeof apply_scratch) < 0;
        if (i == 0) hb_bench_mark();
        if (refused) return HB_FAIL0(st, HB_ERR_INTERNAL, "APPLY refused the bench's scratch");
        samples[i] = since(t0);
    }
    stats_of(a->runs, 1, &r->apply);
    r->crc_applied = hb_model_weights_crc(m);

    { /* one EVAL of every item: without the prefix cache, making its entries, reading them */
        hb_slot view = one;
        view.cache_id = 1; /* a view the cache may keep */
        uint32_t c[3];
        int64_t l[3];
        uint64_t *ticks[3] = {&r->eval_plain, &r->eval_making, &r->eval_cached};
        const uint64_t used = hb_pad16(r->arena_used);
        for (int k = 0; k < 3; k++) {
            if (k == 1) /* the bench's scratch as the arena's free region */
                hb_model_set_free(m, arena + used,
                                  a->no_scratch ? 0 : (uint32_t)(arena_bytes - used), 1);
            uint64_t t0 = hb_port_ticks();
            hb_model_eval(m, k ? &view : slot, 0, slot->n_items, &c[k], &l[k]);
            *ticks[k] = since(t0);
        }
        uint32_t made;
        hb_model_cache_slot(m, 0, &r->cache_cap, &made);
        r->cache_bytes = hb_model_cache_bytes(m);
        r->eval_correct = c[0];
        r->n_items = slot->n_items;
        r->eval_same = c[0] == c[1] && c[1] == c[2] && l[0] == l[1] && l[1] == l[2];
        hb_model_set_scratch(m, NULL, 0);
    }

    /* the split, from each part's fastest (or median) run */
    const int med = a->split_stat == HB_BENCH_STAT_MEDIAN;
#define PICK(s) ((int64_t)(med ? (s).median : (s).min))
    const int64_t q = a->q, scale = PICK(r->scale);
    r->probe_total = PICK(r->probe);
    r->probe_forward = (int64_t)r->n_forward * PICK(r->forward);
    r->probe_loss = (int64_t)r->n_forward * PICK(r->loss);
    r->probe_prng = q * scale + (int64_t)r->n_perturbed * PICK(r->draw_rows);
    r->probe_perturb = r->probe_total - r->probe_forward - r->probe_loss - r->probe_prng;
    r->apply_total = PICK(r->apply);
    r->apply_prng = q * (scale + PICK(r->draw_chunks));
    r->apply_update = r->apply_total - r->apply_prng;
#undef PICK
    return 0;
}

/* ---- the report -------------------------------------------------------------------------- */

static char line[512];
static size_t line_len;

static void flush(void) {
    if (line_len) hb_port_write((const uint8_t *)line, line_len);
    line_len = 0;
}

static void put(const char *s, size_t n) {
    while (n) {
        if (line_len == sizeof line) flush();
        size_t k = sizeof line - line_len < n ? sizeof line - line_len : n;
        memcpy(line + line_len, s, k);
        line_len += k;
        s += k;
        n -= k;
    }
}

static void puts_(const char *s) { put(s, hb_strlen(s)); }

/* fmt % args (hb_format: %d %x %s), appended */
static void putf(const char *fmt, const hb_arg *args, size_t n) {
    char buf[256];
    put(buf, hb_format(buf, sizeof buf, fmt, args, n));
}
#define PUTF(fmt, ...)                                                                           \
    putf((fmt), (const hb_arg[]){__VA_ARGS__}, sizeof((const hb_arg[]){__VA_ARGS__}) / sizeof(hb_arg))

/* a string in double quotes, " and \ escaped (POSIX shell quoting: Python's shlex reads it) */
static void put_quoted(const char *s, size_t n) {
    put("\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') put("\\", 1);
        put(s + i, 1);
    }
    put("\"", 1);
}

static void end_line(void) {
    put("\n", 1);
    flush();
}

static void put_stats(const hb_bench_stats *s) {
    PUTF(" runs=%d min=%d median=%d max=%d", HB_I(s->runs), HB_I(s->min), HB_I(s->median),
         HB_I(s->max));
}

void hb_bench_report_build(const char *clock_unit) {
    puts_("build compiler=");
    size_t n = hb_strlen(HB_BENCH_COMPILER);
    while (n && HB_BENCH_COMPILER[n - 1] == ' ') n--; /* __clang_version__ ends in a space */
    put_quoted(HB_BENCH_COMPILER, n);
    puts_(" flags=");
    put_quoted(HB_BENCH_FLAGS, hb_strlen(HB_BENCH_FLAGS));
    puts_(" clock=");
    put_quoted(clock_unit, hb_strlen(clock_unit));
    PUTF(" tick_overhead=%d", HB_I(hb_bench_tick_overhead()));
    end_line();
}

void hb_bench_report_forward(const hb_bench_forward_result *r) {
    PUTF("forward ops=%d act_bytes=%d input=%d output=%d", HB_I(r->ops), HB_I(r->act_bytes),
         HB_I(r->input_size), HB_I(r->output_size));
    put_stats(&r->forward);
    PUTF(" stable=%d", HB_I(r->stable));
    end_line();
    static const char hex[] = "0123456789abcdef";
    puts_("output hex=");
    for (uint32_t i = 0; i < r->output_size; i++) {
        uint8_t v = (uint8_t)r->output[i];
        char two[2] = {hex[v >> 4], hex[v & 15u]};
        put(two, 2);
    }
    end_line();
}

static void put_time(const char *part, const hb_bench_stats *s) {
    PUTF("zo_time part=%s", HB_S(part));
    put_stats(s);
    end_line();
}

static void put_list(const char *key, const int32_t *v, uint16_t n) {
    PUTF(" %s=", HB_S(key));
    for (uint16_t k = 0; k < n; k++) PUTF(k ? ",%d" : "%d", HB_I(v[k]));
}

void hb_bench_report_zo(const hb_bench_zo_args *a, const hb_bench_zo_result *r) {
    PUTF("zo trained=%d weight_elems=%d bias_elems=%d dist=%d scaling=%d estimator=%d",
         HB_I(r->n_trained), HB_I(r->weight_elems), HB_I(r->bias_elems), HB_I(r->dist),
         HB_I(r->scaling), HB_I(r->estimator));
    PUTF(" rounding=%d master=%d pool=%d arena=%d q=%d batch=%d eps=%d n_forward=%d",
         HB_I(r->rounding), HB_I(r->master), HB_I(r->pool_size), HB_I(r->arena_used), HB_I(a->q),
         HB_I(a->batch), HB_I(a->eps), HB_I(r->n_forward));
    PUTF(" n_perturbed=%d", HB_I(r->n_perturbed));
    PUTF(" cut_op=%d prefix_bytes=%d copy_bytes=%d scratch_bytes=%d used_prefix=%d used_copy=%d",
         HB_I(r->cut_op), HB_I(r->prefix_bytes), HB_I(r->copy_bytes), HB_I(r->scratch_bytes),
         HB_I(r->used_prefix), HB_I(r->used_copy));
    PUTF(" words_bytes=%d used_words=%d", HB_I(r->words_bytes), HB_I(r->used_words));
    end_line();
    put_time("forward", &r->forward);
    put_time("prefix", &r->prefix);
    put_time("loss", &r->loss);
    put_time("scale", &r->scale);
    put_time("draw_rows", &r->draw_rows);
    put_time("draw_chunks", &r->draw_chunks);
    put_time("probe", &r->probe);
    put_time("apply", &r->apply);
    PUTF("zo_split step=probe stat=%s total=%d forward=%d loss=%d prng=%d perturb=%d",
         HB_S(a->split_stat == HB_BENCH_STAT_MEDIAN ? "median" : "min"), HB_I(r->probe_total),
         HB_I(r->probe_forward), HB_I(r->probe_loss), HB_I(r->probe_prng),
         HB_I(r->probe_perturb));
    end_line();
    PUTF("zo_split step=apply stat=%s total=%d prng=%d update=%d",
         HB_S(a->split_stat == HB_BENCH_STAT_MEDIAN ? "median" : "min"), HB_I(r->apply_total),
         HB_I(r->apply_prng), HB_I(r->apply_update));
    end_line();
    PUTF("zo_check crc_initial=%08x crc_probed=%08x crc_applied=%08x restored=%d",
         HB_I(r->crc_initial), HB_I(r->crc_probed), HB_I(r->crc_applied),
         HB_I(r->crc_probed == r->crc_initial));
    end_line();
    puts_("zo_losses");
    put_list("lp", r->lp, r->saved_q);
    put_list("lm", r->lm, r->saved_q);
    end_line();
    PUTF("zo_eval items=%d correct=%d plain=%d making=%d cached=%d cache_cap=%d cache_bytes=%d",
         HB_I(r->n_items), HB_I(r->eval_correct), HB_I(r->eval_plain), HB_I(r->eval_making),
         HB_I(r->eval_cached), HB_I(r->cache_cap), HB_I(r->cache_bytes));
    PUTF(" same=%d", HB_I(r->eval_same));
    end_line();
}

void hb_bench_report_error(const hb_status *st) {
    PUTF("error code=%d message=", HB_I(st->code));
    put_quoted(st->msg, st->len);
    end_line();
}

/* ---- the kernels alone, on CMSIS-NN's anchor shapes ------------------------------------------
 * The shapes, quantization and data of /work/shared/anchors/cmsis-nn-icount/main.c (its LCG,
 * its fill order): CONV_2D 3x3 16x16x16 -> 32 same, DEPTHWISE_CONV_2D 3x3 16x16x64 same, FC
 * 256 -> 128 (per-tensor), and a 1x1 CONV_2D 16x16x16 -> 32 (not in the anchor), each kernel
 * called directly with its filter read in place. A
 * checksum of each output lets a scalar and a Helium image be compared byte for byte. */
#include "nn/hb_nn.h"

static uint32_t k_lcg;
static int8_t k_r8(void) {
    k_lcg = k_lcg * 1664525u + 1013904223u;
    return (int8_t)(k_lcg >> 24);
}

typedef struct {
    hb_nn_rows r;
    const int8_t *w;
    uint32_t len; /* leading: rows len apart; 0: trailing (row j at w + j) */
    const int32_t *b;
} k_rows;

static const int8_t *k_row(const hb_nn_rows *r, uint32_t j) {
    const k_rows *k = (const k_rows *)(const void *)r;
    return k->len ? k->w + (size_t)j * k->len : k->w + j;
}
static int32_t k_bias(const hb_nn_rows *r, uint32_t j) {
    return ((const k_rows *)(const void *)r)->b[j];
}

static uint32_t k_checksum(const int8_t *y, uint32_t n) {
    uint32_t s = 0;
    for (uint32_t i = 0; i < n; i++) s = s * 31u + (uint8_t)y[i];
    return s;
}

int hb_bench_kernels(uint32_t runs, hb_status *st) {
    if (check_runs(runs, "--runs", st)) return -1;
    enum { IN = 16 * 16 * 64, WT = 3 * 3 * 16 * 32 + 256 * 128 + 3 * 3 * 64 };
    int8_t *in = malloc(IN), *out = malloc(IN), *wt = malloc(WT);
    int32_t *bias = malloc(256 * sizeof(int32_t));
    uint8_t *mult = malloc(256 * 4);
    int8_t *shift = malloc(256);
    if (!in || !out || !wt || !bias || !mult || !shift)
        return HB_FAIL(st, HB_ERR_BAD_ARGUMENT, "%s", HB_S("out of memory for the kernel bench"));
    k_lcg = 12345;
    for (uint32_t i = 0; i < 256; i++) {
        bias[i] = (int32_t)k_r8() * 64;
        hb_wr32(mult + 4 * i, 1300000000u + i * 1000u);
        shift[i] = -8;
    }
    for (uint32_t i = 0; i < IN; i++) in[i] = k_r8();
    for (uint32_t i = 0; i < WT; i++) wt[i] = k_r8();
    const hb_nn_requant pc = {mult, shift, 256};
    uint8_t pt_mult[4];
    hb_wr32(pt_mult, 1300000000u);
    const hb_nn_requant fc_rq = {pt_mult, shift, 1};
    /* kind 3 (not in the anchor's RESULTS.md): the 1x1 conv of the same input and output
     * shapes, no pad; kinds 4.. the other 1x1 convs of MobileNetV2 a0.35 32x32 (h, w, c -> oc,
     * stride 1, no pad; bench/cmsis_anchor/main.c measures CMSIS-NN on the same) */
    static const struct {
        const char *name;
        uint32_t h, w, c, oc;
    } pw[] = {
        {"pw16x16x16_8", 16, 16, 16, 8},   {"pw16x16x8_48", 16, 16, 8, 48},
        {"pw8x8x48_8", 8, 8, 48, 8},       {"pw8x8x8_48", 8, 8, 8, 48},
        {"pw4x4x48_16", 4, 4, 48, 16},     {"pw4x4x16_96", 4, 4, 16, 96},
        {"pw4x4x96_16", 4, 4, 96, 16},     {"pw2x2x96_24", 2, 2, 96, 24},
        {"pw2x2x24_144", 2, 2, 24, 144},   {"pw2x2x144_24", 2, 2, 144, 24},
        {"pw2x2x32_192", 2, 2, 32, 192},   {"pw2x2x192_32", 2, 2, 192, 32},
    };
    enum { N_PW = sizeof pw / sizeof pw[0] };
    static const char *const names[] = {"conv3x3", "dw3x3", "fc", "conv1x1"};
    static const uint32_t macs_of[] = {16 * 16 * 32 * 9 * 16, 16 * 16 * 64 * 9, 256 * 128,
                                       16 * 16 * 32 * 16};
    static const uint32_t n_out_of[] = {16 * 16 * 32, 16 * 16 * 64, 128, 16 * 16 * 32};
    static const uint32_t len_of[] = {144, 0, 256, 16};
    for (int kind = 0; kind < 4 + N_PW; kind++) {
        const int is_pw = kind >= 4;
        const uint32_t pi = is_pw ? (uint32_t)kind - 4 : 0;
        hb_nn_dims d = {16, 16, 16};
        uint32_t oc = 32;
        if (is_pw) {
            d.h = pw[pi].h;
            d.w = pw[pi].w;
            d.c = pw[pi].c;
            oc = pw[pi].oc;
        }
        const char *name = is_pw ? pw[pi].name : names[kind];
        const uint32_t macs = is_pw ? d.h * d.w * d.c * oc : macs_of[kind];
        const uint32_t n_out = is_pw ? d.h * d.w * oc : n_out_of[kind];
        k_rows rows = {{k_row, k_bias, 1, NULL, NULL, 0}, wt, is_pw ? d.c : len_of[kind], bias};
        if (kind == 1) rows.r.step = 64;
        if (kind != 1) { /* leading rows and the biases in place (hb_nn_rows_all_in_place) */
            rows.r.rows = wt;
            rows.r.biases = (const uint8_t *)bias; /* little-endian i32: the target's own */
        }
        hb_nn_conv_params cp = {3, -2, -128, 127, 1, 1, 1, 1, 1, 1, d.h, d.w, 1, pc};
        if (kind >= 3) cp.pad_top = cp.pad_left = 0;
        const hb_nn_fc_params fp = {3, -2, -128, 127, fc_rq};
        for (uint32_t i = 0; i <= runs; i++) { /* run 0 untimed */
            memset(out, 0, IN);
            const uint64_t t0 = hb_port_ticks();
            if (kind == 0 || kind >= 3) {
                const uint32_t kk = kind == 0 ? 3 : 1;
                hb_nn_conv2d_s8(&cp, &d, in, &rows.r, kk, kk, oc, out);
            } else if (kind == 1) {
                const hb_nn_dims dd = {16, 16, 64};
                hb_nn_depthwise_conv2d_s8(&cp, &dd, in, &rows.r, 3, 3, out);
            } else {
                hb_nn_fully_connected_s8(&fp, in, 256, &rows.r, 128, out);
            }
            const uint64_t t = since(t0);
            if (i) samples[i - 1] = t;
        }
        hb_bench_stats s;
        stats_of(runs, 1, &s);
        PUTF("kernel name=%s macs=%d", HB_S(name), HB_I(macs));
        put_stats(&s);
        PUTF(" checksum=%x", HB_I(k_checksum(out, n_out)));
        end_line();
    }
    free(in);
    free(out);
    free(wt);
    free(bias);
    free(mult);
    free(shift);
    return 0;
}
