/* The ZO state of a loaded model and the commands' math on it: hilbench/device/state.py in C
 * (docs/zo-math.md). The trained tensors live in the blob (the graph reads its constants
 * there). A PROBE never writes them: its forward passes run with a row source (hb_graph_rows)
 * that produces each trained filter row as clamp(w + s delta, +-127) into the row buffer, and
 * each trained bias element as sat32(b + s delta), when the kernel asks for it; nothing needs
 * restoring. APPLY updates the masters and the weights together. Per-element work goes a chunk
 * of HB_ZO_CHUNK elements at a time; the only memory sized by the model is the ZO work area in
 * the arena (masters, the pool, the row buffer). */
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
    uint32_t work_off[HB_MAX_TRAINED]; /* weights: their master (q16, int16) in work */
    uint32_t pool_off, row_off;        /* the pool; the row buffer (the longest trained row) */
    uint64_t work_bytes;
    int16_t claim[HB_MAX_TENSORS]; /* blob tensor -> its trained index, -1 if not trained */
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
     * (q16, int16; the int8 master is the weights themselves), each pad16; then the pool,
     * pad16; then the row buffer, pad16 of the longest trained weight row */
    uint64_t off = 0;
    uint32_t per = master_bytes(m->z.master), longest = 0;
    for (uint16_t t = 0; t < HB_MAX_TENSORS; t++) m->claim[t] = -1;
    for (uint16_t t = 0; t < m->z.n_trained; t++) {
        const hb_zo_tensor *tt = &m->z.trained[t];
        m->claim[tt->tensor] = (int16_t)t;
        if (tt->kind != HB_ZO_WEIGHT) continue;
        m->work_off[t] = (uint32_t)off; /* used only once bound: off < work_bytes then */
        off += hb_pad16((uint64_t)tt->n * per);
        if (tt->len > longest) longest = tt->len;
    }
    m->pool_off = (uint32_t)off;
    off += hb_pad16(m->z.pool_size);
    m->row_off = (uint32_t)off;
    m->work_bytes = off + hb_pad16(longest);
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
        } /* the int8 master is the weights in the blob: nothing to place */
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
/* One perturbed forward pass's row source (hb_graph_rows): the trained tensors at
 * w + sign * delta_k for the perturbation of seed, with t_scale holding its scales. The
 * weights in the blob are only read. */
typedef struct {
    const hb_model *m;
    hb_zo_source src;
    uint32_t seed, eps;
    int32_t sign;     /* +1 or -1 */
    int32_t w_tensor; /* the trained index w_stream is keyed to, -1: none yet */
    int32_t b_tensor; /* likewise for b_stream (an op reads a filter and a bias) */
    hb_zo_rowstream w_stream, b_stream;
    int32_t tab_tensor, tab_em; /* dtab holds the deltas of this tensor and em, -1: none */
    int32_t dtab[256];          /* signed delta by raw sample (hb_zo_delta_table) */
} probe_pass;

static int32_t pass_claim(void *ctx, uint16_t t) {
    return ((const probe_pass *)ctx)->m->claim[t];
}

/* stream (seed, 1, t) of the pass, its cached blocks kept while the tensor stays the same */
static hb_zo_rowstream *pass_stream(probe_pass *p, int32_t t, int bias) {
    int32_t *key = bias ? &p->b_tensor : &p->w_tensor;
    hb_zo_rowstream *s = bias ? &p->b_stream : &p->w_stream;
    if (*key != t) {
        hb_zo_rowstream_init(s, p->seed, (uint32_t)t);
        *key = t;
    }
    return s;
}

static inline int8_t clamp_weight(int32_t v) {
    return (int8_t)(v > HB_WEIGHT_LIMIT    ? HB_WEIGHT_LIMIT
                    : v < -HB_WEIGHT_LIMIT ? -HB_WEIGHT_LIMIT
                                           : v);
}

/* row j of trained filter t: clamp(w + sign * delta, +-127), entry by entry, into the row
 * buffer (the blob's row is read in place: contiguous, or strided by R for a depthwise row).
 * A row's deltas depend on its raw samples, the tensor's S and em = sign * eps * M only, so
 * they come from a table of the distribution's 2, 17 or 128 values, built once per tensor
 * and pass (with channel multipliers once per row, if the row has at least that many
 * entries; a shorter row computes its deltas directly). */
static const int8_t *pass_weight_row(void *ctx, int32_t t, uint32_t j) {
    probe_pass *p = ctx;
    const hb_model *m = p->m;
    const hb_zo_tensor *tt = &m->z.trained[t];
    const int8_t *w = (const int8_t *)tensor_data(m, (uint16_t)t);
    int8_t *out = (int8_t *)(m->work + m->row_off);
    hb_zo_rowstream *s = pass_stream(p, t, 0);
    /* locals: out is a char pointer, which may alias anything the loop would reload */
    const uint32_t scale = t_scale[t], len = tt->len, rows = tt->rows;
    const int32_t em = p->sign * (int32_t)(p->eps * hb_zo_row_mult(tt, j));
    const size_t step = tt->layout == HB_ROWS_TRAILING ? rows : 1;
    const int8_t *base = w + (step == 1 ? (size_t)j * len : j);
    int table = p->tab_tensor == t && p->tab_em == em;
    if (!table && (tt->cm ? len : tt->n) >= hb_zo_n_values(p->src.dist)) { /* worth building */
        hb_zo_delta_table(p->src.dist, scale, em, p->dtab);
        p->tab_tensor = t;
        p->tab_em = em;
        table = 1;
    }
    const int32_t *dtab = p->dtab;
    for (uint32_t i0 = 0; i0 < len; i0 += HB_ZO_CHUNK) {
        const uint32_t cnt = len - i0 < HB_ZO_CHUNK ? len - i0 : HB_ZO_CHUNK;
        const int8_t *b = base + (size_t)i0 * step;
        int8_t *o = out + i0;
        hb_zo_row_samples(&p->src, tt, s, j, i0, cnt, r_buf);
        if (table)
            for (uint32_t c = 0; c < cnt; c++)
                o[c] = clamp_weight(b[(size_t)c * step] + dtab[(uint8_t)r_buf[c]]);
        else
            for (uint32_t c = 0; c < cnt; c++)
                o[c] = clamp_weight(b[(size_t)c * step] + hb_zo_signed_delta(r_buf[c], scale, em));
    }
    return out;
}

/* element j of trained bias t: sat32(b + sign * delta), which never saturates (|b| <= 2^30,
 * |delta| < 2^30: docs/zo-math.md section 4) */
static int32_t pass_bias(void *ctx, int32_t t, uint32_t j) {
    probe_pass *p = ctx;
    const hb_model *m = p->m;
    const hb_zo_tensor *tt = &m->z.trained[t];
    int8_t r;
    hb_zo_row_samples(&p->src, tt, pass_stream(p, t, 1), j, 0, 1, &r);
    const int32_t d = hb_zo_delta(hb_zo_unit(r, t_scale[t]), p->eps, hb_zo_row_mult(tt, j),
                                  tt->unit_shift);
    const int64_t b0 = hb_rdi32(tensor_data(m, (uint16_t)t) + 4u * j);
    const int64_t b = b0 + (int64_t)p->sign * d;
    return (int32_t)(b > INT32_MAX ? INT32_MAX : b < INT32_MIN ? INT32_MIN : b);
}

/* the mean Q16 loss of the mini-batch; rows NULL: the weights as they are */
static int32_t batch_loss(hb_model *m, const hb_slot *s, uint16_t batch_size,
                          const hb_graph_rows *rows) {
    uint32_t classes = hb_graph_output_size(m->g);
    int64_t sum = 0;
    for (uint16_t i = 0; i < batch_size; i++) {
        uint32_t item = batch_idx[i];
        const int8_t *out =
            hb_graph_forward_rows(m->g, s->inputs + (size_t)item * s->item_size, rows);
        sum += hb_loss_item(&m->loss, out, classes, s->labels[item]);
    }
    return hb_loss_mean(sum, batch_size);
}

/* the pass of perturbed_loss: static, like the other scratch (about 2.4 KB: two row streams
 * with their cached blocks and the delta table) */
static probe_pass the_pass;

/* the loss of the mini-batch at w + sign * delta for seed (t_scale: its scales) */
static int32_t perturbed_loss(hb_model *m, const hb_slot *s, uint16_t batch_size, uint32_t seed,
                              uint32_t eps, int32_t sign) {
    probe_pass *p = &the_pass;
    p->m = m;
    p->src = source(m);
    p->seed = seed;
    p->eps = eps;
    p->sign = sign;
    p->w_tensor = p->b_tensor = p->tab_tensor = -1;
    p->tab_em = 0;
    const hb_graph_rows rows = {pass_claim, pass_weight_row, pass_bias, p};
    return batch_loss(m, s, batch_size, &rows);
}

void hb_model_probe(hb_model *m, const hb_slot *s, uint16_t batch_size, uint32_t batch_seed,
                    uint16_t eps, const uint32_t *seeds, uint16_t q, int32_t *lp, int32_t *lm) {
    if (batch_size == 0 || batch_size > HB_MAX_BATCH || q > HB_MAX_Q || s->n_items == 0)
        return; /* outside the request's checked ranges: nothing to compute */
    hb_stream bs;
    hb_stream_init(&bs, batch_seed, HB_STREAM_BATCH, 0);
    for (uint16_t i = 0; i < batch_size; i++) batch_idx[i] = hb_batch_index(&bs, s->n_items, i);
    const int one_sided = m->z.estimator == HB_ESTIMATOR_ONE_SIDED;
    const int32_t l0 = one_sided ? batch_loss(m, s, batch_size, NULL) : 0;
    const hb_zo_source src = source(m);
    for (uint16_t k = 0; k < q; k++) {
        /* the scales of this perturbation, once, before its forward passes */
        for (uint16_t t = 0; t < m->z.n_trained; t++)
            t_scale[t] = hb_zo_scale(&src, m->z.scaling, &m->z.trained[t], t, seeds[k]);
        lp[k] = perturbed_loss(m, s, batch_size, seeds[k], eps, 1);
        lm[k] = one_sided ? l0 : perturbed_loss(m, s, batch_size, seeds[k], eps, -1);
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

const hb_zocf *hb_model_zocf(const hb_model *m) { return &m->z; }

const int8_t *hb_model_pool(const hb_model *m) {
    return m->work && m->z.pool_size ? (const int8_t *)(m->work + m->pool_off) : NULL;
}
