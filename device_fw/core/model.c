/* The ZO state of a loaded model and the commands' math on it: hilbench/device/state.py in C
 * (docs/zo-math.md). The trained tensors live in the blob (the graph reads its constants
 * there), so PROBE perturbs them in place and restores them exactly; APPLY updates the masters
 * and the weights together. Per-element work goes a chunk of HB_ZO_CHUNK elements at a time;
 * the only per-element memory is the ZO work area in the arena (masters, the int8 master's
 * scratch copy, the pool). */
#include "hb_model.h"

#include <stddef.h>
#include <string.h>

#include "hb_blob.h"
#include "hb_bytes.h"
#include "hb_crc.h"
#include "hb_wire.h"
#include "zo/loss.h"
#include "zo/perturb.h"
#include "zo/philox.h"
#include "zo/update.h"
#include "zo/zocf.h"

struct hb_model {
    hb_graph *g;
    hb_loss_tables loss;
    hb_zocf z;
    uint32_t work_off[HB_MAX_TRAINED]; /* weights: their master or scratch copy in work */
    uint32_t pool_off;
    uint64_t work_bytes;
    uint8_t *work; /* NULL until bound */
    uint32_t updates;
};

static hb_model the_model;
hb_model *hb_model_instance(void) { return &the_model; }

/* Static scratch, sized by the device limits (never by a tensor). */
static uint32_t t_scale[HB_MAX_TRAINED]; /* PROBE: S of each trained tensor, current seed */
static uint32_t k_scale[HB_MAX_Q];       /* APPLY: S of each sample, current tensor */
static uint32_t batch_idx[HB_MAX_BATCH];
static int64_t acc[HB_ZO_CHUNK];
static int8_t r_buf[HB_ZO_CHUNK];
static int32_t d_buf[HB_ZO_CHUNK];
static uint8_t m_buf[HB_ZO_CHUNK];
static uint16_t default_weights[HB_MAX_TRAINED];

/* ---- the model as the ZOCF check sees it ---------------------------------------------------- */
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

static uint16_t view_weight(const void *ctx, uint32_t i) {
    (void)ctx;
    return default_weights[i];
}

/* the filter tensors in op order, each once (the default ZOCF entries); the count of all */
static uint32_t list_weights(const hb_graph *g) {
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
        if (n < HB_MAX_TRAINED) default_weights[n] = (uint16_t)w;
        n++;
    }
    return n;
}

static uint32_t master_bytes(uint8_t master) {
    return master == HB_MASTER_Q16     ? HB_MASTER_Q16_BYTES
           : master == HB_MASTER_INT16 ? HB_MASTER_INT16_BYTES
                                       : HB_MASTER_INT8_BYTES;
}

int hb_model_load(hb_model *m, hb_graph *g, hb_status *st) {
    memset(m, 0, sizeof *m);
    const uint8_t *sec;
    uint32_t len;
    if (hb_graph_section(g, HB_LOSS_TAG, &sec, &len) < 0) {
        sec = NULL;
        len = 0;
    }
    if (hb_loss_load(sec, len, &m->loss, st) < 0) return -1;
    if (hb_graph_section(g, HB_ZOCF_TAG, &sec, &len) < 0) {
        sec = NULL;
        len = 0;
    }
    hb_zo_model_view mv = {hb_graph_n_tensors(g), view_info, list_weights(g), view_weight, g};
    if (hb_zocf_load(sec, len, &mv, &m->z, st) < 0) return -1;
    /* the work area (hilbench.zo.zocf.zo_work_bytes): per trained weight tensor its master
     * (q16, int16) or scratch copy (int8), each pad16; then the pool, pad16 */
    uint64_t off = 0;
    uint32_t per = master_bytes(m->z.master);
    int scratch = m->z.master == HB_MASTER_INT8;
    for (uint16_t t = 0; t < m->z.n_trained; t++) {
        const hb_zo_tensor *tt = &m->z.trained[t];
        if (tt->kind != HB_ZO_WEIGHT) continue;
        m->work_off[t] = (uint32_t)off; /* used only once bound: off < work_bytes then */
        off += hb_pad16((uint64_t)tt->n * per) + (scratch ? hb_pad16(tt->n) : 0);
    }
    m->pool_off = (uint32_t)off;
    m->work_bytes = off + hb_pad16(m->z.pool_size);
    m->g = g;
    return 0;
}

uint64_t hb_model_work_bytes(const hb_model *m) { return m->work_bytes; }

static uint8_t *tensor_data(const hb_model *m, uint16_t t) {
    return hb_graph_data(m->g, m->z.trained[t].tensor);
}

void hb_model_bind(hb_model *m, uint8_t *work) {
    m->work = work;
    m->updates = 0;
    for (uint16_t t = 0; t < m->z.n_trained; t++) {
        const hb_zo_tensor *tt = &m->z.trained[t];
        uint8_t *d = tensor_data(m, t);
        if (tt->kind == HB_ZO_BIAS) { /* the load-time clamp (docs/zo-math.md, Biases) */
            for (uint32_t e = 0; e < tt->n; e++) {
                int64_t b = hb_rdi32(d + 4u * e);
                if (b > HB_BIAS_LIMIT || b < -(int64_t)HB_BIAS_LIMIT)
                    hb_wr32(d + 4u * e, (uint32_t)(b > 0 ? HB_BIAS_LIMIT : -(int64_t)HB_BIAS_LIMIT));
            }
            continue;
        }
        const int8_t *w = (const int8_t *)d;
        void *mst = work + m->work_off[t];
        if (m->z.master == HB_MASTER_Q16) {
            int32_t *q = mst;
            for (uint32_t e = 0; e < tt->n; e++) q[e] = (int32_t)w[e] * (1 << HB_MASTER_Q16_FRAC);
        } else if (m->z.master == HB_MASTER_INT16) {
            int16_t *q = mst;
            for (uint32_t e = 0; e < tt->n; e++)
                q[e] = (int16_t)((int32_t)w[e] * (1 << HB_MASTER_INT16_FRAC));
        } else {
            memcpy(mst, w, tt->n); /* the int8 master's scratch copy */
        }
    }
    if (m->z.pool_size)
        hb_zo_pool_draw(m->z.dist, m->z.pool_seed, (int8_t *)(work + m->pool_off), m->z.pool_size);
}

static hb_zo_source source(const hb_model *m) {
    hb_zo_source src = {m->z.dist, m->z.pool_size ? (const int8_t *)(m->work + m->pool_off) : NULL,
                        m->z.pool_size};
    return src;
}

/* ---- PROBE ------------------------------------------------------------------------------------ */
/* the int8 weights e0 .. e0+count-1 of trained tensor t as the master holds them: round(m),
 * or the int8 master's scratch copy */
static void master_weights(const hb_model *m, uint16_t t, uint32_t e0, uint32_t count, int8_t *w) {
    const uint8_t *mst = m->work + m->work_off[t];
    if (m->z.master == HB_MASTER_Q16) {
        const int32_t *q = (const int32_t *)(const void *)mst + e0;
        for (uint32_t i = 0; i < count; i++) w[i] = hb_zo_weight_of(q[i], HB_MASTER_Q16_FRAC);
    } else if (m->z.master == HB_MASTER_INT16) {
        const int16_t *q = (const int16_t *)(const void *)mst + e0;
        for (uint32_t i = 0; i < count; i++) w[i] = hb_zo_weight_of(q[i], HB_MASTER_INT16_FRAC);
    } else {
        memcpy(w, mst + e0, count);
    }
}

enum { PLUS, MINUS, UNDO_PLUS, UNDO_MINUS };

/* One trained tensor for seed: weights become clamp(w0 +- delta) (PLUS, MINUS) or w0 again
 * (UNDO_*), from the master or scratch copy; a bias moves by +delta (PLUS), -2 delta (MINUS,
 * after PLUS), -delta (UNDO_PLUS) or +delta (UNDO_MINUS): exact, |b| <= 2^30 > |delta|. */
static void perturb_tensor(hb_model *m, uint16_t t, uint32_t seed, uint32_t eps, int mode) {
    const hb_zo_tensor *tt = &m->z.trained[t];
    uint8_t *d = tensor_data(m, t);
    if (tt->kind == HB_ZO_WEIGHT && (mode == UNDO_PLUS || mode == UNDO_MINUS)) {
        for (uint32_t e0 = 0; e0 < tt->n; e0 += HB_ZO_CHUNK) {
            uint32_t cnt = tt->n - e0 < HB_ZO_CHUNK ? tt->n - e0 : HB_ZO_CHUNK;
            master_weights(m, t, e0, cnt, (int8_t *)d + e0);
        }
        return;
    }
    const hb_zo_source src = source(m);
    const uint32_t scale = t_scale[t];
    for (uint32_t e0 = 0; e0 < tt->n; e0 += HB_ZO_CHUNK) {
        uint32_t cnt = tt->n - e0 < HB_ZO_CHUNK ? tt->n - e0 : HB_ZO_CHUNK;
        hb_zo_samples(&src, tt, t, seed, e0, cnt, r_buf, m_buf);
        for (uint32_t i = 0; i < cnt; i++)
            d_buf[i] = hb_zo_delta(hb_zo_unit(r_buf[i], scale), eps, m_buf[i], tt->unit_shift);
        if (tt->kind == HB_ZO_WEIGHT) {
            int8_t *w = (int8_t *)d + e0;
            master_weights(m, t, e0, cnt, w);
            const int32_t sign = mode == PLUS ? 1 : -1;
            for (uint32_t i = 0; i < cnt; i++) {
                int32_t v = w[i] + sign * d_buf[i];
                w[i] = (int8_t)(v > HB_WEIGHT_LIMIT ? HB_WEIGHT_LIMIT : v < -HB_WEIGHT_LIMIT ? -HB_WEIGHT_LIMIT : v);
            }
        } else {
            const int64_t times = mode == PLUS || mode == UNDO_MINUS ? 1 : mode == MINUS ? -2 : -1;
            for (uint32_t i = 0; i < cnt; i++) {
                uint8_t *p = d + 4u * (e0 + i);
                int64_t b = (int64_t)hb_rdi32(p) + times * d_buf[i]; /* never saturates */
                hb_wr32(p, (uint32_t)(b > INT32_MAX ? INT32_MAX : b < INT32_MIN ? INT32_MIN : b));
            }
        }
    }
}

static void perturb_all(hb_model *m, uint32_t seed, uint32_t eps, int mode) {
    for (uint16_t t = 0; t < m->z.n_trained; t++) perturb_tensor(m, t, seed, eps, mode);
}

/* the mean Q16 loss of the mini-batch on the current weights */
static int32_t batch_loss(hb_model *m, const hb_slot *s, uint16_t batch_size) {
    uint32_t classes = hb_graph_output_size(m->g);
    int64_t sum = 0;
    for (uint16_t i = 0; i < batch_size; i++) {
        uint32_t item = batch_idx[i];
        const int8_t *out = hb_graph_forward(m->g, s->inputs + (size_t)item * s->item_size);
        sum += hb_loss_item(&m->loss, out, classes, s->labels[item]);
    }
    return hb_loss_mean(sum, batch_size);
}

void hb_model_probe(hb_model *m, const hb_slot *s, uint16_t batch_size, uint32_t batch_seed,
                    uint16_t eps, const uint32_t *seeds, uint16_t q, int32_t *lp, int32_t *lm) {
    if (batch_size == 0 || batch_size > HB_MAX_BATCH || q > HB_MAX_Q || s->n_items == 0)
        return; /* outside the request's checked ranges: nothing to compute */
    hb_stream bs;
    hb_stream_init(&bs, batch_seed, HB_STREAM_BATCH, 0);
    for (uint16_t i = 0; i < batch_size; i++) batch_idx[i] = hb_batch_index(&bs, s->n_items, i);
    const int one_sided = m->z.estimator == HB_ESTIMATOR_ONE_SIDED;
    const int32_t l0 = one_sided ? batch_loss(m, s, batch_size) : 0;
    const hb_zo_source src = source(m);
    for (uint16_t k = 0; k < q; k++) {
        for (uint16_t t = 0; t < m->z.n_trained; t++)
            t_scale[t] = hb_zo_scale(&src, m->z.scaling, &m->z.trained[t], t, seeds[k]);
        perturb_all(m, seeds[k], eps, PLUS);
        lp[k] = batch_loss(m, s, batch_size);
        if (one_sided) {
            lm[k] = l0;
            perturb_all(m, seeds[k], eps, UNDO_PLUS);
        } else {
            perturb_all(m, seeds[k], eps, MINUS);
            lm[k] = batch_loss(m, s, batch_size);
            perturb_all(m, seeds[k], eps, UNDO_MINUS);
        }
    }
}

/* ---- APPLY ------------------------------------------------------------------------------------ */
void hb_model_apply(hb_model *m, const uint32_t *seeds, const int32_t *coeffs, uint16_t q) {
    if (q == 0 || q > HB_MAX_Q) return; /* outside the request's checked range */
    const hb_zo_source src = source(m);
    for (uint16_t t = 0; t < m->z.n_trained; t++) {
        const hb_zo_tensor *tt = &m->z.trained[t];
        for (uint16_t k = 0; k < q; k++) k_scale[k] = hb_zo_scale(&src, m->z.scaling, tt, t, seeds[k]);
        hb_zo_target tg;
        tg.kind = tt->kind;
        tg.master = m->z.master;
        tg.rounding = m->z.rounding;
        uint32_t frac = tt->kind == HB_ZO_WEIGHT ? hb_zo_master_frac(m->z.master) : 0;
        tg.shift = hb_zo_shift(frac, tt->unit_shift);
        tg.mst = tt->kind == HB_ZO_WEIGHT && m->z.master != HB_MASTER_INT8
                     ? (void *)(m->work + m->work_off[t])
                     : NULL;
        tg.data = tensor_data(m, t);
        hb_stream_init(&tg.round, seeds[0], HB_STREAM_ROUNDING, t);
        for (uint32_t e0 = 0; e0 < tt->n; e0 += HB_ZO_CHUNK) {
            uint32_t cnt = tt->n - e0 < HB_ZO_CHUNK ? tt->n - e0 : HB_ZO_CHUNK;
            memset(acc, 0, sizeof acc[0] * cnt);
            for (uint16_t k = 0; k < q; k++) {
                hb_zo_samples(&src, tt, t, seeds[k], e0, cnt, r_buf, m_buf);
                hb_zo_accumulate(acc, r_buf, cnt, k_scale[k], coeffs[k]);
            }
            hb_zo_update_chunk(&tg, e0, cnt, acc, m_buf);
        }
        if (tt->kind == HB_ZO_WEIGHT && m->z.master == HB_MASTER_INT8)
            memcpy(m->work + m->work_off[t], tg.data, tt->n); /* the scratch copy follows */
    }
    m->updates++;
}

/* ---- EVAL, WEIGHTS_CRC ------------------------------------------------------------------------ */
void hb_model_eval(hb_model *m, const hb_slot *s, uint32_t start, uint32_t count,
                   uint32_t *correct, int64_t *loss_sum) {
    uint32_t classes = hb_graph_output_size(m->g);
    *correct = 0;
    *loss_sum = 0;
    if (start > s->n_items || count > s->n_items - start) return; /* outside the checked range */
    for (uint32_t i = start; i < start + count; i++) {
        const int8_t *out = hb_graph_forward(m->g, s->inputs + (size_t)i * s->item_size);
        *correct += hb_argmax(out, classes) == s->labels[i];
        *loss_sum += hb_loss_item(&m->loss, out, classes, s->labels[i]);
    }
}

uint32_t hb_model_weights_crc(const hb_model *m) {
    uint32_t crc = 0;
    for (uint16_t t = 0; t < m->z.n_trained; t++) {
        const hb_zo_tensor *tt = &m->z.trained[t];
        size_t bytes = (size_t)tt->n * (tt->kind == HB_ZO_BIAS ? 4u : 1u);
        crc = hb_crc32(crc, tensor_data(m, t), bytes); /* the blob's little-endian bytes */
    }
    return crc;
}

uint32_t hb_model_updates_applied(const hb_model *m) { return m->updates; }

uint16_t hb_model_n_trained(const hb_model *m) { return m->z.n_trained; }

uint16_t hb_model_trained_tensor(const hb_model *m, uint16_t t) {
    return t < m->z.n_trained ? m->z.trained[t].tensor : 0;
}
