/* The ZO state of a loaded model and the commands' math on it: hilbench/device/state.py in C
 * (docs/zo-math.md). The trained tensors live in the blob (the graph reads its constants
 * there). A PROBE never writes them: its forward passes run with a row source (hb_graph_rows)
 * that produces each trained filter row as clamp(w + s delta, +-127) into the row buffer, and
 * each trained bias element as sat32(b + s delta), when the kernel asks for it; nothing needs
 * restoring. APPLY updates the masters and the weights together, a chunk of elements at a time
 * in the caller's scratch.
 *
 * Memory: everything sized by the model is in the ZO work area of the arena (docs/firmware.md
 * "ZO state"; hilbench.zo.zocf.zo_work_bytes keeps the twin's books): the masters, the pool,
 * the row buffer, the delta table, the depthwise row cache, the table of trained tensors and
 * their scales. Everything sized by a request is read or written where the request and its
 * answer lie (seeds, coefficients, losses: little-endian, in place) or is the caller's
 * scratch (APPLY's per-sample scales and chunk sums). What is static here is a fixed few
 * hundred bytes: the model's header and one perturbed pass's state. */
#include "hb_model.h"

#include <stddef.h>
#include <string.h>

#include "hb_blob.h"
#include "hb_bytes.h"
#include "hb_crc.h"
#include "hb_wire.h"
#include "zo/head.h"
#include "zo/loss.h"
#include "zo/perturb.h"
#include "zo/philox.h"
#include "zo/update.h"
#include "zo/zocf.h"

_Static_assert(sizeof(hb_zo_tensor) <= HB_ZO_TENSOR_BYTES, "a trained tensor's record as booked");
_Static_assert(_Alignof(hb_zo_tensor) <= 16 && _Alignof(int64_t) <= 16,
               "the work area's parts start at multiples of 16");
_Static_assert(HB_ZO_SCALE_BYTES == sizeof(uint32_t) && HB_ZO_DELTA_BYTES == sizeof(int32_t),
               "the work area's scales and deltas as booked");

/* a slot's part of the prefix cache: made for a slot of n_items (0: none yet), items [0, cap)
 * have an entry, `made` of them are computed; it starts `below` bytes under the region's top */
typedef struct {
    uint32_t n_items, cap, made, below;
} cache_part;

struct hb_model {
    hb_graph *g;
    hb_loss_tables loss;
    hb_zocf z; /* z.trained: the table in the work area, once bound */
    /* the work area's parts (offsets into work; used only once bound: < work_bytes then) */
    uint32_t pool_off, row_off, delta_off, cache_off, table_off, scale_off;
    uint32_t row_bytes; /* the row buffer's bytes (the longest trained weight row, padded) */
    uint8_t has_cache; /* a depthwise filter trains with fresh samples: the row cache exists */
    uint64_t work_bytes;
    uint8_t *work; /* NULL until bound */
    uint32_t updates;
    uint32_t head_grads; /* HEAD_GRAD commands since the bind */
    /* the PROBE's frozen prefix (hb_graph_cut, once bound): ops [0, cut_op) read no trained
     * tensor, only cut_tensor (cut_n elements) crosses the boundary; cut_op 0: none */
    uint16_t cut_op, cut_tensor;
    uint32_t cut_n;
    /* the perturbed copy's bytes: its table of T offsets (pad16(4 T)), then each trained
     * tensor (pad16 parts, ZOCF order) */
    uint32_t copy_bytes;
    /* the buffered stream words of a seed (hb_zo_words_bytes of each trained tensor, ZOCF
     * order; with a pool: its rows' offsets, a half per row) */
    uint32_t words_bytes;
    /* the free arena a PROBE may use (hb_model_set_scratch; NULL/0: none) */
    uint8_t *scratch;
    uint32_t scratch_bytes;
    /* the prefix cache (hb_model_set_free): the free region it lives in, the store's
     * generation it was made in, the bytes its parts take at the region's top, and per slot
     * its part (made: n_items of the slot it was made for, 0: none yet) */
    uint8_t *free_at;
    uint32_t free_bytes, free_gen, cache_bytes;
    cache_part cache[HB_N_SLOTS];
};

static hb_model the_model;
hb_model *hb_model_instance(void) { return &the_model; }

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

/* The filter tensors in op order, each once (the default ZOCF entries), found by a walk of the
 * ops (the graph has at most HB_MAX_TENSORS tensors): entry `want` (its tensor index in *out),
 * or with want >= the count, the count. */
static uint32_t filter_walk(const hb_graph *g, uint32_t want, uint16_t *out) {
    uint8_t seen[(HB_MAX_TENSORS + 7) / 8] = {0};
    uint32_t n = 0;
    for (uint16_t op = 0; op < hb_graph_n_ops(g); op++) {
        int32_t w, b;
        if (hb_graph_op_weights(g, op, &w, &b) < 0 || w < 0 || w >= HB_MAX_TENSORS) continue;
        if (seen[w / 8] & (1u << (w % 8))) continue;
        seen[w / 8] |= (uint8_t)(1u << (w % 8));
        if (n == want) {
            *out = (uint16_t)w;
            return n;
        }
        n++;
    }
    return n;
}

static uint16_t view_weight(const void *ctx, uint32_t i) {
    uint16_t w = 0;
    filter_walk((const hb_graph *)ctx, i, &w);
    return w;
}

static hb_zo_model_view model_view(const hb_graph *g) {
    uint16_t unused;
    hb_zo_model_view mv = {hb_graph_n_tensors(g), view_info, filter_walk(g, UINT32_MAX, &unused),
                           view_weight, g};
    return mv;
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
    const hb_zo_model_view mv = model_view(g);
    if (hb_zocf_load(sec, len, &mv, &m->z, st) < 0) return -1;
    /* the work area (hilbench.zo.zocf.zo_work_bytes), each part pad16: per trained weight
     * tensor its master (q16, int16; the int8 master is the weights themselves); the pool;
     * if weights train, the row buffer (the longest trained weight row) and the delta table;
     * the depthwise row cache if a depthwise filter trains with fresh samples; the table of
     * trained tensors and their scales */
    uint64_t off = 0;
    const uint32_t per = master_bytes(m->z.master);
    uint32_t longest = 0;
    int weights = 0, depthwise = 0;
    hb_zocf_iter it = HB_ZOCF_ITER_START;
    hb_zo_tensor t;
    while (hb_zocf_next(&m->z, &mv, &it, &t)) {
        if (t.kind != HB_ZO_WEIGHT) continue;
        weights = 1;
        depthwise |= t.layout == HB_ROWS_TRAILING;
        off += hb_pad16((uint64_t)t.n * per);
        if (t.len > longest) longest = t.len;
    }
    m->pool_off = (uint32_t)off;
    off += hb_pad16(m->z.pool_size);
    m->row_off = (uint32_t)off;
    m->row_bytes = (uint32_t)hb_pad16(longest);
    off += m->row_bytes;
    m->delta_off = (uint32_t)off;
    if (weights) off += hb_pad16((uint64_t)HB_ZO_DELTA_BYTES * hb_zo_n_values(m->z.dist));
    m->cache_off = (uint32_t)off;
    m->has_cache = depthwise && m->z.pool_size == 0;
    if (m->has_cache) off += hb_pad16((uint64_t)HB_ZO_ROW_CACHE_LINES * HB_ZO_ROW_CACHE_LINE_BYTES);
    m->table_off = (uint32_t)off;
    off += hb_pad16((uint64_t)HB_ZO_TENSOR_BYTES * m->z.n_trained);
    m->scale_off = (uint32_t)off;
    off += hb_pad16((uint64_t)HB_ZO_SCALE_BYTES * m->z.n_trained);
    m->work_bytes = off;
    m->g = g;
    return 0;
}

uint64_t hb_model_work_bytes(const hb_model *m) { return m->work_bytes; }

static uint8_t *tensor_data(const hb_model *m, uint16_t t) {
    return hb_graph_data(m->g, m->z.trained[t].tensor);
}

/* the work area's parts, once bound (void *: each starts at a multiple of 16) */
static void *work_at(const hb_model *m, uint32_t off) { return m->work + off; }

static uint32_t *scales(const hb_model *m) { return work_at(m, m->scale_off); }

/* a trained tensor's bytes in the perturbed copy (int8 weights, int32 biases) */
/* a trained tensor's part of the seed's buffered words (hb_model_words_bytes) */
static uint32_t words_of(const hb_model *m, const hb_zo_tensor *tt) {
    return m->z.pool_size ? 64u * ((tt->rows + 31u) / 32u) : hb_zo_words_bytes(m->z.dist, tt->n);
}

static uint64_t copy_part(const hb_zo_tensor *tt) {
    return (uint64_t)tt->n * (tt->kind == HB_ZO_BIAS ? 4u : 1u);
}

void hb_model_bind(hb_model *m, uint8_t *work) {
    m->work = work;
    m->updates = 0;
    m->head_grads = 0;
    const hb_zo_model_view mv = model_view(m->g);
    hb_zocf_table(&m->z, &mv, work_at(m, m->table_off));
    uint64_t mst_off = 0; /* the masters, in ZOCF order from the start of the work area */
    const uint32_t per = master_bytes(m->z.master);
    for (uint16_t t = 0; t < m->z.n_trained; t++) {
        const hb_zo_tensor *tt = &m->z.trained[t];
        uint8_t *d = tensor_data(m, t);
        if (tt->kind == HB_ZO_BIAS) { /* the load-time clamp (docs/zo-math.md, Biases) */
            for (uint32_t e = 0; e < tt->n; e++) {
                int64_t b = hb_rdi32(d + 4u * e);
                const int64_t lim = HB_BIAS_LIMIT;
                if (b > lim || b < -lim) hb_wr32(d + 4u * e, (uint32_t)(b > 0 ? lim : -lim));
            }
            continue;
        }
        const int8_t *w = (const int8_t *)d;
        void *mst = work_at(m, (uint32_t)mst_off);
        mst_off += hb_pad16((uint64_t)tt->n * per);
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
        hb_zo_pool_draw(m->z.dist, m->z.pool_seed, work_at(m, m->pool_off), m->z.pool_size);
    /* the frozen prefix: the ops before the first one reading a trained tensor */
    uint16_t first = hb_graph_n_ops(m->g);
    for (uint16_t op = 0; op < first && m->z.n_trained; op++) {
        int32_t w, b;
        if (hb_graph_op_weights(m->g, op, &w, &b) < 0) continue;
        for (uint16_t t = 0; t < m->z.n_trained; t++)
            if ((int32_t)m->z.trained[t].tensor == w || (int32_t)m->z.trained[t].tensor == b)
                first = op;
    }
    m->cut_op = m->z.n_trained ? hb_graph_cut(m->g, first, &m->cut_tensor) : 0;
    m->cut_n = m->cut_op ? hb_graph_tensor(m->g, m->cut_tensor)->n : 0;
    uint64_t c = hb_pad16(4u * (uint64_t)m->z.n_trained);
    for (uint16_t t = 0; t < m->z.n_trained; t++)
        c += hb_pad16(copy_part(&m->z.trained[t]));
    m->copy_bytes = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
    uint64_t wb = 0;
    for (uint16_t t = 0; t < m->z.n_trained; t++) /* a pool's: the rows' offsets (halves) */
        wb += m->z.pool_size ? 64u * ((m->z.trained[t].rows + 31u) / 32u)
                             : hb_zo_words_bytes(m->z.dist, m->z.trained[t].n);
    m->words_bytes = wb > UINT32_MAX ? UINT32_MAX : (uint32_t)wb;
    m->scratch = NULL;
    m->scratch_bytes = 0;
    m->free_at = NULL;
    m->free_bytes = m->cache_bytes = 0;
    memset(m->cache, 0, sizeof m->cache);
}

void hb_model_set_scratch(hb_model *m, uint8_t *scratch, uint32_t bytes) {
    m->scratch = bytes ? scratch : NULL;
    m->scratch_bytes = scratch ? bytes : 0;
    m->free_at = NULL; /* a scratch of the caller's: no cache */
    m->free_bytes = m->cache_bytes = 0;
    memset(m->cache, 0, sizeof m->cache);
}

void hb_model_set_free(hb_model *m, uint8_t *at, uint32_t bytes, uint32_t generation) {
    if (!at || !bytes) {
        hb_model_set_scratch(m, NULL, 0);
        return;
    }
    if (at != m->free_at || bytes != m->free_bytes || generation != m->free_gen) {
        hb_model_set_scratch(m, NULL, 0); /* the books changed: forget every part */
        m->free_at = at;
        m->free_bytes = bytes;
        m->free_gen = generation;
    }
    m->scratch = at; /* the PROBE's scratch: what the caches leave at the bottom */
    m->scratch_bytes = bytes - m->cache_bytes;
}

uint32_t hb_model_cache_bytes(const hb_model *m) { return m->cache_bytes; }

void hb_model_cache_slot(const hb_model *m, uint8_t slot, uint32_t *cap, uint32_t *made) {
    *cap = slot < HB_N_SLOTS ? m->cache[slot].cap : 0;
    *made = slot < HB_N_SLOTS ? m->cache[slot].made : 0;
}

/* ---- the prefix cache ------------------------------------------------------------------------ */
/* slot s's part of the prefix cache, made now if the slot has none (NULL: no cache for it: no
 * cut, no free region, a view with no slot, or no room for one entry) */
typedef struct {
    uint8_t *bits;     /* entry i made: bit i % 8 of bits[i / 8] */
    int8_t *entries;   /* entry i at entries + i pad16(cut_n) */
    uint32_t cap;      /* items [0, cap) have an entry */
    uint32_t *made;    /* the count of entries made */
} slot_cache;

static int cache_of(hb_model *m, const hb_slot *s, slot_cache *c) {
    if (!m->cut_op || !m->free_at || !s->cache_id || s->cache_id > HB_N_SLOTS) return 0;
    const uint64_t entry = hb_pad16(m->cut_n);
    cache_part *p = &m->cache[s->cache_id - 1];
    if (p->n_items != s->n_items) { /* none yet (a slot's n_items is never 0) */
        memset(p, 0, sizeof *p);
        p->n_items = s->n_items;
        /* what the caches leave, less the PROBE's scratch: its copy and a batch's prefix */
        const uint64_t left = (uint64_t)m->free_bytes - m->cache_bytes;
        const uint64_t reserve = m->copy_bytes + HB_MODEL_CACHE_RESERVE_ITEMS * entry;
        uint64_t cap = 0;
        if (left > reserve) {
            cap = (left - reserve) / entry; /* then fewer if the bitmap does not fit */
            if (cap > s->n_items) cap = s->n_items;
            while (cap && hb_pad16((cap + 7u) / 8u) + cap * entry > left - reserve) cap--;
        }
        p->cap = (uint32_t)cap;
        const uint64_t bytes = cap ? hb_pad16((cap + 7u) / 8u) + cap * entry : 0;
        m->cache_bytes += (uint32_t)bytes;
        p->below = m->cache_bytes;
        if (cap) memset(m->free_at + m->free_bytes - p->below, 0, hb_pad16((cap + 7u) / 8u));
        m->scratch_bytes = m->free_bytes - m->cache_bytes;
    }
    if (!p->cap) return 0;
    c->bits = m->free_at + m->free_bytes - p->below;
    c->entries = (int8_t *)c->bits + hb_pad16((p->cap + 7u) / 8u);
    c->cap = p->cap;
    c->made = &p->made;
    return 1;
}

/* item's activation at the cut from the cache (item < cap), made first if it is not yet
 * (the ops before the cut, which leave it in the cut's buffer too: *in_place 1) */
static const int8_t *cached_prefix(hb_model *m, const slot_cache *c, const hb_slot *s,
                                   uint32_t item, int *in_place) {
    int8_t *e = c->entries + (size_t)item * hb_pad16(m->cut_n);
    const uint8_t bit = (uint8_t)(1u << (item % 8u));
    *in_place = 0;
    if (!(c->bits[item / 8u] & bit)) {
        (void)hb_graph_forward_range(m->g, s->inputs + (size_t)item * s->item_size, 0,
                                     m->cut_op, NULL);
        memcpy(e, hb_graph_activation(m->g, m->cut_tensor), m->cut_n);
        c->bits[item / 8u] |= bit;
        (*c->made)++;
        *in_place = 1;
    }
    return e;
}

uint16_t hb_model_cut(const hb_model *m, uint16_t *tensor) {
    if (tensor) *tensor = m->cut_tensor;
    return m->cut_op;
}

uint64_t hb_model_prefix_bytes(const hb_model *m, uint16_t batch_size) {
    return m->cut_op ? (uint64_t)batch_size * hb_pad16(m->cut_n) : 0;
}

uint32_t hb_model_copy_bytes(const hb_model *m) { return m->copy_bytes; }

void hb_model_probe_plan(const hb_model *m, uint16_t batch_size, uint32_t scratch_bytes,
                         int *prefix, int *copy) {
    const uint64_t pre = hb_model_prefix_bytes(m, batch_size);
    *prefix = m->cut_op && pre <= scratch_bytes;
    const uint64_t left = scratch_bytes - (*prefix ? pre : 0);
    *copy = m->z.n_trained && m->copy_bytes <= left;
}

uint32_t hb_model_words_bytes(const hb_model *m) { return m->words_bytes; }

int hb_model_probe_words(const hb_model *m, uint16_t batch_size, uint32_t scratch_bytes) {
    int prefix, copy;
    hb_model_probe_plan(m, batch_size, scratch_bytes, &prefix, &copy);
    const uint64_t used = (prefix ? hb_model_prefix_bytes(m, batch_size) : 0) + m->copy_bytes;
    return copy && m->words_bytes && used + m->words_bytes <= scratch_bytes;
}

static hb_zo_source source(const hb_model *m) {
    hb_zo_source src = {m->z.dist,
                        m->z.pool_size ? (const int8_t *)work_at(m, m->pool_off) : NULL,
                        m->z.pool_size};
    return src;
}

/* ---- PROBE ----------------------------------------------------------------------------------- */
/* One perturbed forward pass's row source (hb_graph_rows): the trained tensors at
 * w + sign * delta_k for the perturbation of seed, with the work area's scales holding its
 * scales. The weights in the blob are only read. */
typedef struct {
    const hb_model *m;
    hb_zo_source src;
    uint32_t seed, eps;
    int32_t sign;     /* +1 or -1 */
    int32_t w_tensor; /* the trained index w_stream is keyed to, -1: none yet */
    int32_t b_tensor; /* likewise for b_stream (an op reads a filter and a bias) */
    hb_zo_rowstream w_stream, b_stream;
    int32_t tab_tensor, tab_em; /* the delta table holds this tensor's and em's, -1: none */
    uint8_t *copy; /* the pass's perturbed copy of the trained tensors (NULL: rows on demand) */
    const uint32_t *words; /* the seed's buffered stream words (NULL: none) */
    const uint32_t *copy_off; /* its table: tensor t at copy + copy_off[t] */
} probe_pass;

/* The claims a PROBE asked last (direct-mapped by the blob tensor's low bits): every item of
 * every pass asks the same few, twice per op with weights, so a hit replaces the scan of the
 * trained table. An entry is (t + 1) << 8 | the trained index (0xFF: not trained), 0: empty;
 * claim_memo_clear empties it whenever the trained table may have changed (a new PROBE). */
enum { CLAIM_MEMO = 16 };
static uint32_t claim_memo[CLAIM_MEMO];
_Static_assert(HB_MAX_TRAINED < 255, "a claim memo entry's low byte");

/* where the last miss's scan found its tensor: the next miss starts one on (the ops ask for
 * their tensors in the trained table's order, so a scan from there finds it first) */
static uint16_t claim_next;

static void claim_memo_clear(void) {
    memset(claim_memo, 0, sizeof claim_memo);
    claim_next = 0;
}

/* the trained index of blob tensor t, -1 if it does not train (the table is short: at most
 * HB_MAX_TRAINED entries, asked twice per op with weights and forward pass) */
static int32_t pass_claim(void *ctx, uint16_t t) {
    const uint32_t e = claim_memo[t % CLAIM_MEMO];
    if (e >> 8 == (uint32_t)t + 1u) return (e & 0xFFu) == 0xFFu ? -1 : (int32_t)(e & 0xFFu);
    const hb_zocf *z = &((const probe_pass *)ctx)->m->z;
    int32_t c = -1; /* the table's entries name distinct tensors: any scan order finds the same */
    uint16_t i = claim_next < z->n_trained ? claim_next : 0;
    for (uint16_t k = 0; k < z->n_trained; k++) {
        if (z->trained[i].tensor == t) {
            c = i;
            claim_next = (uint16_t)(i + 1u);
            break;
        }
        if (++i == z->n_trained) i = 0;
    }
    claim_memo[t % CLAIM_MEMO] = (((uint32_t)t + 1u) << 8 | (c < 0 ? 0xFFu : (uint32_t)c));
    return c;
}

/* stream (seed, 1, t) of the pass, its cached blocks kept while the tensor stays the same */
static hb_zo_rowstream *pass_stream(probe_pass *p, int32_t t, int bias) {
    int32_t *key = bias ? &p->b_tensor : &p->w_tensor;
    hb_zo_rowstream *s = bias ? &p->b_stream : &p->w_stream;
    if (*key != t) {
        const hb_model *m = p->m;
        /* only a trailing (depthwise) filter's rows use the block cache */
        const int trailing = !bias && m->z.trained[t].layout == HB_ROWS_TRAILING;
        hb_zo_rowline *lines = trailing && m->has_cache ? work_at(m, m->cache_off) : NULL;
        hb_zo_rowstream_init(s, p->seed, (uint32_t)t, lines);
        *key = t;
    }
    return s;
}

/* row j of trained filter t: clamp(w + sign * delta, +-127), entry by entry, into the row
 * buffer (the blob's row is read in place: contiguous, or strided by R for a depthwise row).
 * A row's deltas depend on its raw samples, the tensor's S and em = sign * eps * M only, so
 * they come from the delta table (the distribution's 2, 17 or 128 values), built once per
 * tensor and pass (with channel multipliers once per row, if the row has at least that many
 * entries; a shorter row computes its deltas directly). A leading row with fresh samples and
 * a table goes word by word from the stream to the weights (hb_zo_perturb_run); otherwise the
 * raw samples of a piece of the row go through the first bytes of the row buffer's own piece,
 * which the piece's results then overwrite. */
/* Depthwise rows in the order the kernel reads them: a trailing filter of fresh samples and
 * one delta table (no pool, no channel multipliers) has row j's entry i at element i R + j, so
 * G consecutive rows are, for each entry i, G consecutive elements: one fused run each
 * (hb_zo_perturb_run, its samples word by word and its weights contiguous in the blob) into
 * the columns of a work-area buffer (dw_buffer), group[i G + g] = row j0 + g's entry i, read by
 * the kernel with step G (hb_graph_rows.row_step). G = the buffer's bytes / L, at most 64, a
 * multiple of 16: the work area is the twin's, no byte more. The group is computed when the
 * kernel asks for its first row and serves the next G - 1; any other row forgets it (a row out
 * of order recomputes it). */
enum { DW_GROUP_MAX = 64 };
static struct {
    const void *pass; /* the pass the row buffer's group is of (NULL: none) */
    int32_t tensor, em;
    uint32_t j0;
} dw_key;

/* The group's buffer: the larger of the row buffer and the depthwise row cache (a grouped
 * filter reads neither: its rows are in the group, its samples word by word; a tensor that
 * uses the cache after it empties it, hb_zo_rowstream_init). */
static int8_t *dw_buffer(const hb_model *m, uint32_t *bytes) {
    const uint32_t cache = HB_ZO_ROW_CACHE_LINES * HB_ZO_ROW_CACHE_LINE_BYTES;
    const int in_cache = m->has_cache && cache > m->row_bytes;
    *bytes = in_cache ? cache : m->row_bytes;
    return work_at(m, in_cache ? m->cache_off : m->row_off);
}

/* the rows per group of trained filter t this pass (a multiple of the Helium depthwise
 * kernel's 16-channel block: a block never spans two groups, whose rows it may read in place),
 * 0: not grouped */
static uint32_t dw_group_rows(const probe_pass *p, const hb_zo_tensor *tt) {
    if (tt->layout != HB_ROWS_TRAILING || p->src.pool || tt->cm ||
        tt->n < hb_zo_n_values(p->src.dist))
        return 0;
    uint32_t bytes;
    (void)dw_buffer(p->m, &bytes);
    uint32_t g = bytes / tt->len;
    if (g > DW_GROUP_MAX) g = DW_GROUP_MAX;
    return g - g % 16;
}

static uint32_t pass_row_step(void *ctx, int32_t t) {
    const probe_pass *p = ctx;
    const uint32_t g = dw_group_rows(p, &p->m->z.trained[t]);
    return g ? g : 1;
}

static const int8_t *dw_row(probe_pass *p, int32_t t, uint32_t j, uint32_t G, const int8_t *w,
                            const int32_t *dtab, int32_t em, hb_zo_rowstream *s, int8_t *group) {
    const hb_zo_tensor *tt = &p->m->z.trained[t];
    const uint32_t j0 = j / G * G, g = j - j0;
    if (dw_key.pass != p || dw_key.tensor != t || dw_key.em != em || dw_key.j0 != j0) {
        const uint32_t n = tt->rows - j0 < G ? tt->rows - j0 : G;
        for (uint32_t i = 0; i < tt->len; i++) {
            const uint32_t e = i * tt->rows + j0;
            hb_zo_perturb_run(p->src.dist, &s->s, e, n, w + e, dtab, group + i * G);
        }
        dw_key.pass = p;
        dw_key.tensor = t;
        dw_key.em = em;
        dw_key.j0 = j0;
    }
    return group + g;
}

/* row j of trained filter t into out (a leading filter's row: out; a depthwise group's row:
 * where the group holds it) */
static const int8_t *weight_row_to(probe_pass *p, int32_t t, uint32_t j, int8_t *out) {
    const hb_model *m = p->m;
    const hb_zo_tensor *tt = &m->z.trained[t];
    const int8_t *w = (const int8_t *)tensor_data(m, (uint16_t)t);
    hb_zo_rowstream *s = pass_stream(p, t, 0);
    /* locals: out is a char pointer, which may alias anything the loop would reload */
    const uint32_t scale = scales(m)[t], len = tt->len, rows = tt->rows;
    const int32_t em = p->sign * (int32_t)(p->eps * hb_zo_row_mult(tt, j));
    const size_t step = tt->layout == HB_ROWS_TRAILING ? rows : 1;
    const int8_t *base = w + (step == 1 ? (size_t)j * len : j);
    int32_t *dtab = work_at(m, m->delta_off);
    int table = p->tab_tensor == t && p->tab_em == em;
    if (!table && (tt->cm ? len : tt->n) >= hb_zo_n_values(p->src.dist)) { /* worth building */
        hb_zo_delta_table(p->src.dist, scale, em, dtab);
        p->tab_tensor = t;
        p->tab_em = em;
        table = 1;
    }
    const uint32_t G = table ? dw_group_rows(p, tt) : 0;
    if (G) {
        uint32_t bytes;
        return dw_row(p, t, j, G, w, dtab, em, s, dw_buffer(m, &bytes));
    }
    dw_key.pass = NULL; /* the row buffer gets another row */
    if (table && step == 1 && !p->src.pool) { /* a leading row of fresh samples: fused */
        hb_zo_perturb_run(p->src.dist, &s->s, j * len, len, base, dtab, out);
        return out;
    }
    for (uint32_t i0 = 0; i0 < len; i0 += HB_ZO_CHUNK) {
        const uint32_t cnt = len - i0 < HB_ZO_CHUNK ? len - i0 : HB_ZO_CHUNK;
        const int8_t *b = base + (size_t)i0 * step;
        int8_t *o = out + i0;
        hb_zo_row_samples(&p->src, tt, s, j, i0, cnt, o); /* the raw samples, in place */
        if (table)
            hb_zo_perturb_samples(p->src.dist, b, (uint32_t)step, cnt, dtab, o);
        else
            for (uint32_t c = 0; c < cnt; c++) {
                const int32_t d = hb_zo_signed_delta(o[c], scale, em);
                o[c] = hb_zo_clamp_weight(b[(size_t)c * step] + d);
            }
    }
    return out;
}

static const int8_t *pass_weight_row(void *ctx, int32_t t, uint32_t j) {
    probe_pass *p = ctx;
    return weight_row_to(p, t, j, work_at(p->m, p->m->row_off));
}

/* element j of trained bias t: sat32(b + sign * delta), which never saturates (|b| <= 2^30,
 * |delta| < 2^30: docs/zo-math.md section 4) */
static int32_t pass_bias(void *ctx, int32_t t, uint32_t j) {
    probe_pass *p = ctx;
    const hb_model *m = p->m;
    const hb_zo_tensor *tt = &m->z.trained[t];
    int8_t r;
    hb_zo_row_samples(&p->src, tt, pass_stream(p, t, 1), j, 0, 1, &r);
    const int32_t d = hb_zo_delta(hb_zo_unit(r, scales(m)[t]), p->eps, hb_zo_row_mult(tt, j),
                                  tt->unit_shift);
    const int64_t b0 = hb_rdi32(tensor_data(m, (uint16_t)t) + 4u * j);
    const int64_t b = b0 + (int64_t)p->sign * d;
    return (int32_t)(b > INT32_MAX ? INT32_MAX : b < INT32_MIN ? INT32_MIN : b);
}

/* ---- the perturbed copy: one pass's trained tensors, made once, read by all B items ------- */
/* Trained tensor t of the pass into dst (its layout in the blob: int8 weights, int32 biases):
 * the numbers the row source gives. A filter of fresh samples with one delta table (no pool,
 * no channel multipliers) is one run over its elements, which are its stream's elements in
 * order (hb_zo_perturb_run); any other goes row by row through pass_weight_row. */
static const int8_t *pass_weight_row(void *ctx, int32_t t, uint32_t j);
static int32_t pass_bias(void *ctx, int32_t t, uint32_t j);
static uint32_t pass_row_step(void *ctx, int32_t t);

/* The delta table of tensor t for the pass's sign and eps (one multiplier for the whole
 * tensor), built in the work area and remembered as the pass's table. */
static int32_t *copy_delta_table(probe_pass *p, int32_t t, const hb_zo_tensor *tt) {
    const hb_model *m = p->m;
    const int32_t em = p->sign * (int32_t)(p->eps * tt->eps_mult);
    int32_t *dtab = work_at(m, m->delta_off);
    hb_zo_delta_table(p->src.dist, scales(m)[t], em, dtab);
    p->tab_tensor = t;
    p->tab_em = em;
    return dtab;
}

static void copy_tensor(probe_pass *p, int32_t t, uint8_t *dst, const uint32_t *words) {
    const hb_model *m = p->m;
    const hb_zo_tensor *tt = &m->z.trained[t];
    if (tt->kind == HB_ZO_BIAS) { /* a chunk of raw samples at a time (hb_zo_samples) */
        int8_t r[HB_ZO_CHUNK];
        uint8_t mult[HB_ZO_CHUNK];
        const uint32_t scale = scales(m)[t];
        const uint8_t *b = tensor_data(m, (uint16_t)t);
        hb_stream st;
        hb_philox_stream_init(&st, p->seed, HB_STREAM_PERTURB, (uint32_t)t);
        const uint32_t P = p->src.pool_size;
        for (uint32_t e0 = 0; e0 < tt->n; e0 += HB_ZO_CHUNK) {
            const uint32_t cnt = tt->n - e0 < HB_ZO_CHUNK ? tt->n - e0 : HB_ZO_CHUNK;
            if (words && !tt->cm && !P) { /* the seed's words: no stream drawn again */
                hb_zo_words_samples(p->src.dist, words, e0, cnt, r);
                memset(mult, tt->eps_mult, cnt);
            } else if (P && !tt->cm && tt->len == 1) { /* a pool: element e is row e's o_e */
                const uint16_t *halves = (const uint16_t *)(const void *)words;
                uint32_t c = 0;
#if HB_NN_MVE
                if (halves && P < 65536u) /* eight offsets (h P) >> 16 = VMULH.U16, gathered */
                    for (; c < cnt; c += 8) {
                        const mve_pred16_t live = vctp16q(cnt - c);
                        const uint16x8_t o = vmulhq_u16(vldrhq_z_u16(halves + e0 + c, live),
                                                        vdupq_n_u16((uint16_t)P));
                        vstrbq_p_s16(r + c, vldrbq_gather_offset_z_s16(p->src.pool, o, live),
                                     live);
                    }
#endif
                for (; c < cnt; c++)
                    r[c] = p->src.pool[((words ? halves[e0 + c] : hb_stream_half(&st, e0 + c)) *
                                        P) >> 16];
                memset(mult, tt->eps_mult, cnt);
            } else {
                hb_zo_samples(&p->src, tt, (uint32_t)t, p->seed, e0, cnt, r, mult);
            }
#if HB_NN_MVE
            /* four lanes: pass_bias's operations lane by lane (b + sign * delta never leaves
             * int32: |b| <= 2^30, |delta| < 2^30; the saturating add is sat32 regardless) */
            const int32x4_t sv = vdupq_n_s32(p->sign), ev = vdupq_n_s32((int32_t)p->eps);
            const int sh = HB_SCALE_FRAC - HB_UNIT_FRAC;
            for (uint32_t c = 0; c < cnt; c += 4) {
                const mve_pred16_t live = vctp32q(cnt - c);
                const int32x4_t x = vmulq_n_s32(vldrbq_z_s32(r + c, live), (int32_t)scale);
                const int32x4_t u = vshrq_n_s32(
                    vsubq_s32(vaddq_n_s32(x, 1 << (sh - 1)),
                              vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(x), 31))),
                    sh);
                const int32x4_t y =
                    vmulq_s32(vmulq_s32(ev, vreinterpretq_s32_u32(vldrbq_z_u32(mult + c, live))), u);
                const int32x4_t d = vshlq_s32(
                    vshrq_n_s32(vsubq_s32(vaddq_n_s32(y, 1 << (HB_DELTA_SHIFT - 1)),
                                          vreinterpretq_s32_u32(
                                              vshrq_n_u32(vreinterpretq_u32_s32(y), 31))),
                                HB_DELTA_SHIFT),
                    vdupq_n_s32((int32_t)tt->unit_shift));
                const int32x4_t bv = vldrwq_z_s32((const int32_t *)(const void *)(b + 4u * (e0 + c)), live);
                vstrwq_p_s32((int32_t *)(void *)(dst + 4u * (e0 + c)), vqaddq_s32(bv, vmulq_s32(sv, d)),
                             live);
            }
            continue;
#endif
            for (uint32_t c = 0; c < cnt; c++) { /* pass_bias's sat32(b + sign * delta) */
                const int32_t d = hb_zo_delta(hb_zo_unit(r[c], scale), p->eps, mult[c],
                                              tt->unit_shift);
                const int64_t v = hb_rdi32(b + 4u * (e0 + c)) + (int64_t)p->sign * d;
                hb_wr32(dst + 4u * (e0 + c),
                        (uint32_t)(int32_t)(v > INT32_MAX   ? INT32_MAX
                                            : v < INT32_MIN ? INT32_MIN
                                                            : v));
            }
        }
        return;
    }
    const int8_t *w = (const int8_t *)tensor_data(m, (uint16_t)t);
    int8_t *out = (int8_t *)dst;
    if (!p->src.pool && !tt->cm && tt->n >= hb_zo_n_values(p->src.dist)) {
        int32_t *dtab = copy_delta_table(p, t, tt);
        if (words) { /* the seed's words, drawn once for its scale and both passes */
            hb_zo_perturb_words(p->src.dist, words, tt->n, w, dtab, out);
            return;
        }
        hb_stream st;
        hb_philox_stream_init(&st, p->seed, HB_STREAM_PERTURB, (uint32_t)t);
        hb_zo_perturb_run(p->src.dist, &st, 0, tt->n, w, dtab, out);
        return;
    }
    const int trailing = tt->layout == HB_ROWS_TRAILING;
    if (!trailing && p->src.pool && !tt->cm && tt->n >= hb_zo_n_values(p->src.dist)) {
        /* a pool's leading rows with one delta table: row j is the pool's run from o_j
         * (wrapping once), perturbed straight from the pool into the copy */
        int32_t *dtab = copy_delta_table(p, t, tt);
        hb_stream st;
        hb_philox_stream_init(&st, p->seed, HB_STREAM_PERTURB, (uint32_t)t);
        const uint32_t P = p->src.pool_size, L = tt->len;
        const uint16_t *halves = (const uint16_t *)(const void *)words; /* words: row offsets */
        if (halves)
            for (uint32_t j = 0; j < tt->rows; j++, w += L, out += L)
                hb_zo_perturb_pool_row(p->src.dist, p->src.pool, P, (halves[j] * P) >> 16, L, w,
                                       dtab, out);
        else
            for (uint32_t j = 0; j < tt->rows; j++, w += L, out += L)
                hb_zo_perturb_pool_row(p->src.dist, p->src.pool, P,
                                       (hb_stream_half(&st, j) * P) >> 16, L, w, dtab, out);
        return;
    }
    if (trailing && p->src.pool && !tt->cm && tt->n >= hb_zo_n_values(p->src.dist)) {
        /* a pool's depthwise filter with one delta table: its columns straight from the pool
         * into the copy, eight channels at a time */
        int32_t *dtab = copy_delta_table(p, t, tt);
        hb_stream st;
        hb_philox_stream_init(&st, p->seed, HB_STREAM_PERTURB, (uint32_t)t);
        hb_zo_perturb_pool_cols(p->src.dist, p->src.pool, p->src.pool_size,
                                (const uint16_t *)(const void *)words, &st, tt->rows, tt->len, w,
                                dtab, out);
        return;
    }
    if (!trailing) { /* a leading row is contiguous in the copy too: produced in place */
        for (uint32_t j = 0; j < tt->rows; j++) (void)weight_row_to(p, t, j, out + (size_t)j * tt->len);
        return;
    }
    for (uint32_t j = 0; j < tt->rows; j++) {
        const int8_t *r = pass_weight_row(p, t, j);
        const uint32_t step = pass_row_step(p, t);
        for (uint32_t i = 0; i < tt->len; i++)
            out[trailing ? (size_t)i * tt->rows + j : (size_t)j * tt->len + i] = r[(size_t)i * step];
    }
}

/* the copy's rows: in the blob's layout, read as the blob is (a depthwise row strided by R) */
static const int8_t *copy_weight_row(void *ctx, int32_t t, uint32_t j) {
    const probe_pass *p = ctx;
    const hb_zo_tensor *tt = &p->m->z.trained[t];
    const int8_t *w = (const int8_t *)(p->copy + p->copy_off[t]);
    return tt->layout == HB_ROWS_TRAILING ? w + j : w + (size_t)j * tt->len;
}

static uint32_t copy_row_step(void *ctx, int32_t t) {
    const probe_pass *p = ctx;
    const hb_zo_tensor *tt = &p->m->z.trained[t];
    return tt->layout == HB_ROWS_TRAILING ? tt->rows : 1;
}

static int32_t copy_bias(void *ctx, int32_t t, uint32_t j) {
    const probe_pass *p = ctx;
    return hb_rdi32(p->copy + p->copy_off[t] + 4u * j);
}

static const uint8_t *copy_data(void *ctx, int32_t t) {
    const probe_pass *p = ctx;
    return p->copy + p->copy_off[t];
}

/* Where a PROBE's items start its passes (docs/firmware.md "The prefix cache"): an item
 * with an entry in the slot's cache (c, NULL: none) reads it; the others (`prefix` not NULL)
 * their activation at the cut in the PROBE's scratch, at prefix + j pad16(cut_n) for the j-th
 * of them in the batch's order; with neither, the whole graph from the input. */
typedef struct {
    const slot_cache *c;
    int8_t *prefix;
} batch_starts;

/* claimed tensor t's data in the copy (NULL: not claimed), memoised like the claims: the copy
 * and its table stay in place for the whole PROBE */
static struct {
    uint32_t tag[CLAIM_MEMO]; /* t + 1, 0: empty */
    const uint8_t *data[CLAIM_MEMO];
} data_memo;

static const uint8_t *copy_data_of(void *ctx, uint16_t t) {
    const uint32_t slot = t % CLAIM_MEMO;
    if (data_memo.tag[slot] == (uint32_t)t + 1u) return data_memo.data[slot];
    const int32_t c = pass_claim(ctx, t);
    const uint8_t *d = c < 0 ? NULL : copy_data(ctx, c);
    data_memo.tag[slot] = (uint32_t)t + 1u;
    data_memo.data[slot] = d;
    return d;
}

/* the mean Q16 loss of the mini-batch of batch_seed (its items drawn again, in order, as the
 * pass reads them); rows NULL: the weights as they are; starts: where each item starts */
static int32_t batch_loss(hb_model *m, const hb_slot *s, uint16_t batch_size, uint32_t batch_seed,
                          const hb_graph_rows *rows, const batch_starts *at) {
    uint32_t classes = hb_graph_output_size(m->g);
    hb_stream bs;
    hb_philox_stream_init(&bs, batch_seed, HB_STREAM_BATCH, 0);
    int64_t sum = 0;
    int8_t *cut = m->cut_op ? hb_graph_activation(m->g, m->cut_tensor) : NULL;
    const size_t stride = hb_pad16(m->cut_n);
    uint32_t j = 0;
    for (uint16_t i = 0; i < batch_size; i++) {
        uint32_t item = hb_philox_batch_index(&bs, s->n_items, i);
        const int8_t *from = NULL, *out;
        if (at->c && item < at->c->cap) from = at->c->entries + (size_t)item * stride;
        else if (at->prefix) from = at->prefix + (size_t)(j++) * stride;
        if (from) {
            memcpy(cut, from, m->cut_n);
            out = hb_graph_forward_range(m->g, NULL, m->cut_op, hb_graph_n_ops(m->g), rows);
        } else {
            out = hb_graph_forward_rows(m->g, s->inputs + (size_t)item * s->item_size, rows);
        }
        sum += hb_loss_item(&m->loss, out, classes, s->labels[item]);
    }
    return hb_loss_mean(sum, batch_size);
}

/* the batch's items without a cache entry (c NULL: all of them) */
static uint32_t batch_uncached(const hb_slot *s, uint16_t batch_size, uint32_t batch_seed,
                               const slot_cache *c) {
    hb_stream bs;
    hb_philox_stream_init(&bs, batch_seed, HB_STREAM_BATCH, 0);
    uint32_t n = 0;
    for (uint16_t i = 0; i < batch_size; i++)
        n += !(c && hb_philox_batch_index(&bs, s->n_items, i) < c->cap);
    return n;
}

/* the mini-batch's activations at the cut (the ops before it, once per item): into the
 * slot's cache for the items it has entries for (made if not yet), into at->prefix for the
 * others (if it is not NULL) */
static void fill_prefix(hb_model *m, const hb_slot *s, uint16_t batch_size, uint32_t batch_seed,
                        const batch_starts *at) {
    hb_stream bs;
    hb_philox_stream_init(&bs, batch_seed, HB_STREAM_BATCH, 0);
    const int8_t *cut = hb_graph_activation(m->g, m->cut_tensor);
    const size_t stride = hb_pad16(m->cut_n);
    uint32_t j = 0;
    for (uint16_t i = 0; i < batch_size; i++) {
        uint32_t item = hb_philox_batch_index(&bs, s->n_items, i);
        int in_place;
        if (at->c && item < at->c->cap) {
            (void)cached_prefix(m, at->c, s, item, &in_place);
        } else if (at->prefix) {
            (void)hb_graph_forward_range(m->g, s->inputs + (size_t)item * s->item_size, 0,
                                         m->cut_op, NULL);
            memcpy(at->prefix + (size_t)(j++) * stride, cut, m->cut_n);
        }
    }
}

/* the pass of perturbed_loss: static (two row streams and a few words; the delta table and
 * the row cache are in the work area) */
static probe_pass the_pass;

/* the loss of the mini-batch at w + sign * delta for seed (the work area's scales: its) */
static int32_t perturbed_loss(hb_model *m, const hb_slot *s, uint16_t batch_size,
                              uint32_t batch_seed, uint32_t seed, uint32_t eps, int32_t sign,
                              const batch_starts *prefix, uint8_t *copy, const uint32_t *words) {
    probe_pass *p = &the_pass;
    p->m = m;
    p->src = source(m);
    p->seed = seed;
    p->eps = eps;
    p->sign = sign;
    p->w_tensor = p->b_tensor = p->tab_tensor = -1;
    p->tab_em = 0;
    p->copy = NULL;
    dw_key.pass = NULL; /* a new pass: no depthwise group */
    if (copy) { /* the pass's tensors once, then every item reads them as it reads the blob */
        uint32_t *off = (uint32_t *)(void *)copy, at = (uint32_t)hb_pad16(4u * m->z.n_trained);
        const uint32_t *wt = words; /* tensor t's words (weights only, ZOCF order) */
        for (uint16_t t = 0; t < m->z.n_trained; t++) {
            const hb_zo_tensor *tt = &m->z.trained[t];
            off[t] = at;
            copy_tensor(p, t, copy + at, wt);
            at += (uint32_t)hb_pad16(copy_part(tt));
            if (wt) wt += words_of(m, tt) / 4u;
        }
        p->copy = copy;
        p->copy_off = off;
        const hb_graph_rows rows = {pass_claim,    copy_weight_row, copy_bias, p,
                                    copy_row_step, copy_data,       copy_data_of};
        return batch_loss(m, s, batch_size, batch_seed, &rows, prefix);
    }
    const hb_graph_rows rows = {pass_claim, pass_weight_row, pass_bias, p, pass_row_step, NULL,
                                NULL};
    return batch_loss(m, s, batch_size, batch_seed, &rows, prefix);
}

void hb_model_probe(hb_model *m, const hb_slot *s, uint16_t batch_size, uint32_t batch_seed,
                    uint16_t eps, const uint8_t *seeds, uint16_t q, uint8_t *lp, uint8_t *lm) {
    if (batch_size == 0 || batch_size > HB_MAX_BATCH || q > HB_MAX_Q || s->n_items == 0)
        return; /* outside the request's checked ranges: nothing to compute */
    const int one_sided = m->z.estimator == HB_ESTIMATOR_ONE_SIDED;
    /* the slot's part of the prefix cache (made now if it has none), then the scratch the
     * cache leaves: the activations at the cut of the batch's items without an entry first,
     * then the perturbed copy, then the seed's stream words, each only if it fits (the same
     * numbers either way; without a cache entry this is hb_model_probe_plan's and
     * hb_model_probe_words' choice) */
    slot_cache cache;
    batch_starts at = {cache_of(m, s, &cache) ? &cache : NULL, NULL};
    const uint64_t pre = m->cut_op ? (uint64_t)batch_uncached(s, batch_size, batch_seed, at.c) *
                                         hb_pad16(m->cut_n)
                                   : 0;
    const int use_prefix = m->cut_op && pre <= m->scratch_bytes;
    const uint64_t left = m->scratch_bytes - (use_prefix ? pre : 0);
    const int use_copy = m->z.n_trained && m->copy_bytes <= left;
    if (use_prefix && pre) at.prefix = (int8_t *)m->scratch;
    uint8_t *copy = use_copy ? m->scratch + (use_prefix ? pre : 0) : NULL;
    claim_memo_clear();
    memset(&data_memo, 0, sizeof data_memo); /* the copy's place is this PROBE's */
    uint32_t *words = copy && m->words_bytes && (uint64_t)m->copy_bytes + m->words_bytes <= left
                          ? (uint32_t *)(void *)(copy + m->copy_bytes)
                          : NULL;
    if (at.c || at.prefix) fill_prefix(m, s, batch_size, batch_seed, &at);
    const int32_t l0 = one_sided ? batch_loss(m, s, batch_size, batch_seed, NULL, &at) : 0;
    const hb_zo_source src = source(m);
    uint32_t *sc = scales(m);
    for (uint16_t k = 0; k < q; k++) {
        const uint32_t seed = hb_rd32(seeds + 4u * k);
        /* the scales of this perturbation, once, before its forward passes */
        uint32_t *wt = words;
        for (uint16_t t = 0; t < m->z.n_trained; t++) {
            const hb_zo_tensor *tt = &m->z.trained[t];
            if (!wt) {
                sc[t] = hb_zo_scale(&src, m->z.scaling, tt, t, seed);
                continue;
            }
            const uint32_t wbytes = words_of(m, tt);
            hb_zo_fill_words(seed, t, wbytes, wt);
            const int adaptive = m->z.scaling != HB_SCALING_FIXED && m->z.dist != HB_DIST_RADEMACHER;
            if (!adaptive)
                sc[t] = hb_zo_scale(&src, m->z.scaling, tt, t, seed);
            else if (!src.pool_size)
                sc[t] = hb_zo_scale_of_sumsq(hb_zo_sumsq_words(m->z.dist, wt, tt->n), tt->n);
            else /* the rows' offsets from the words (a row's squares: either layout) */
                sc[t] = hb_zo_scale_of_sumsq(hb_zo_sumsq_pool_rows(&src, tt, wt), tt->n);
            wt += wbytes / 4u;
        }
        const int32_t plus =
            perturbed_loss(m, s, batch_size, batch_seed, seed, eps, 1, &at, copy, words);
        const int32_t minus = one_sided ? l0
                                        : perturbed_loss(m, s, batch_size, batch_seed, seed, eps,
                                                         -1, &at, copy, words);
        hb_wr32(lp + 4u * k, (uint32_t)plus);
        hb_wr32(lm + 4u * k, (uint32_t)minus);
    }
}

/* ---- APPLY ----------------------------------------------------------------------------------- */
int hb_model_apply(hb_model *m, const uint8_t *seeds, const uint8_t *coeffs, uint16_t q,
                   void *scratch, uint32_t scratch_bytes) {
    if (q == 0 || q > HB_MAX_Q) return -1; /* outside the request's checked range */
    /* the scratch: the chunk's int64 sums (8-byte aligned), the q scales, the chunk's raw
     * samples and multipliers; the chunk as long as fits, up to HB_ZO_CHUNK elements */
    const uintptr_t at = (uintptr_t)scratch, aligned = (at + 7u) & ~(uintptr_t)7u;
    const uint32_t lead = (uint32_t)(aligned - at), fixed = lead + 4u * q;
    if (scratch_bytes < HB_MODEL_APPLY_SCRATCH(q, 1)) return -1;
    uint32_t chunk = (scratch_bytes - fixed) / (uint32_t)(sizeof(int64_t) + 2u);
    if (chunk > HB_ZO_CHUNK) chunk = HB_ZO_CHUNK;
    uint8_t *b = (uint8_t *)scratch + lead;
    int64_t *acc = (void *)b;
    uint32_t *k_scale = (void *)(b + sizeof(int64_t) * chunk);
    int8_t *r_buf = (int8_t *)(k_scale + q);
    uint8_t *m_buf = (uint8_t *)r_buf + chunk;
    const hb_zo_source src = source(m);
    const uint32_t per = master_bytes(m->z.master);
    uint64_t mst_off = 0; /* the masters, in ZOCF order from the start of the work area */
    for (uint16_t t = 0; t < m->z.n_trained; t++) {
        const hb_zo_tensor *tt = &m->z.trained[t];
        for (uint16_t k = 0; k < q; k++)
            k_scale[k] = hb_zo_scale(&src, m->z.scaling, tt, t, hb_rd32(seeds + 4u * k));
        hb_zo_target tg;
        tg.kind = tt->kind;
        tg.master = m->z.master;
        tg.rounding = m->z.rounding;
        uint32_t frac = tt->kind == HB_ZO_WEIGHT ? hb_zo_master_frac(m->z.master) : 0;
        tg.shift = hb_zo_shift(frac, tt->unit_shift);
        tg.mst = NULL;
        if (tt->kind == HB_ZO_WEIGHT) {
            if (m->z.master != HB_MASTER_INT8) tg.mst = work_at(m, (uint32_t)mst_off);
            mst_off += hb_pad16((uint64_t)tt->n * per);
        }
        tg.data = tensor_data(m, t);
        hb_philox_stream_init(&tg.round, hb_rd32(seeds), HB_STREAM_ROUNDING, t);
        for (uint32_t e0 = 0; e0 < tt->n; e0 += chunk) {
            uint32_t cnt = tt->n - e0 < chunk ? tt->n - e0 : chunk;
            memset(acc, 0, sizeof acc[0] * cnt);
            for (uint16_t k = 0; k < q; k++) {
                hb_zo_samples(&src, tt, t, hb_rd32(seeds + 4u * k), e0, cnt, r_buf, m_buf);
                hb_zo_accumulate(acc, r_buf, cnt, k_scale[k], hb_rdi32(coeffs + 4u * k));
            }
            hb_zo_update_chunk(&tg, e0, cnt, acc, m_buf);
        }
    }
    m->updates++;
    return 0;
}

/* ---- EVAL, WEIGHTS_CRC ----------------------------------------------------------------------- */
void hb_model_eval(hb_model *m, const hb_slot *s, uint32_t start, uint32_t count,
                   uint32_t *correct, int64_t *loss_sum) {
    uint32_t classes = hb_graph_output_size(m->g);
    *correct = 0;
    *loss_sum = 0;
    if (start > s->n_items || count > s->n_items - start) return; /* outside the checked range */
    slot_cache c; /* the slot's part of the prefix cache: items below its cap start at the cut */
    const int cached = cache_of(m, s, &c);
    int8_t *cut = cached ? hb_graph_activation(m->g, m->cut_tensor) : NULL;
    for (uint32_t i = start; i < start + count; i++) {
        const int8_t *out;
        if (cached && i < c.cap) {
            int in_place;
            const int8_t *e = cached_prefix(m, &c, s, i, &in_place);
            if (!in_place) memcpy(cut, e, m->cut_n);
            out = hb_graph_forward_range(m->g, NULL, m->cut_op, hb_graph_n_ops(m->g), NULL);
        } else {
            out = hb_graph_forward(m->g, s->inputs + (size_t)i * s->item_size);
        }
        *correct += hb_loss_argmax(out, classes) == s->labels[i];
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

/* ---- the hybrid's exact head (HEAD_GRAD; zo/head.c) ------------------------------------ */

int hb_model_head(const hb_model *m, hb_model_head_info *h) {
    int32_t w, b;
    if (hb_graph_fc_head(m->g, &h->input, &h->offset) < 0 ||
        hb_graph_op_weights(m->g, (uint16_t)(hb_graph_n_ops(m->g) - 1), &w, &b) < 0)
        return HB_HEAD_NONE;
    h->weight = (uint16_t)w;
    h->bias = b;
    const hb_tensor *wt = hb_graph_tensor(m->g, h->weight);
    h->m = wt->dims[0];
    h->k = wt->dims[1];
    for (uint16_t t = 0; t < m->z.n_trained; t++) {
        uint16_t x = hb_model_trained_tensor(m, t);
        if (x == h->weight || (int32_t)x == b) {
            h->trained_tensor = x;
            h->trained_entry = t;
            return HB_HEAD_TRAINED;
        }
    }
    return HB_HEAD_OK;
}

int32_t hb_model_head_grad(hb_model *m, const hb_model_head_info *h, const hb_slot *s,
                           uint16_t batch_size, uint32_t batch_seed, uint32_t round_seed,
                           uint8_t bias_gain, const uint8_t *rates, int32_t *acc) {
    const uint32_t n = h->m * h->k;
    int32_t *g = acc, *b = acc + n;
    memset(acc, 0, 4u * (n + h->m));
    hb_stream bs;
    hb_philox_stream_init(&bs, batch_seed, HB_STREAM_BATCH, 0);
    const int8_t *x = hb_graph_activation(m->g, h->input);
    int64_t sum = 0;
    for (uint16_t i = 0; i < batch_size; i++) {
        uint32_t item = hb_philox_batch_index(&bs, s->n_items, i);
        const int8_t *out = hb_graph_forward(m->g, s->inputs + (size_t)item * s->item_size);
        sum += hb_loss_item(&m->loss, out, h->m, s->labels[item]);
        hb_head_accumulate(&m->loss, out, h->m, s->labels[item], x, h->k, h->offset, g, b);
    }
    uint8_t *bias = h->bias >= 0 ? hb_graph_data(m->g, (uint16_t)h->bias) : NULL;
    hb_head_update((int8_t *)hb_graph_data(m->g, h->weight), bias, h->m, h->k, g, b, rates,
                   bias_gain, round_seed);
    m->head_grads++;
    return hb_loss_mean(sum, batch_size);
}

uint32_t hb_model_head_crc(const hb_model *m, const hb_model_head_info *h) {
    uint32_t crc = hb_crc32(0, hb_graph_data(m->g, h->weight), (size_t)h->m * h->k);
    if (h->bias >= 0) crc = hb_crc32(crc, hb_graph_data(m->g, (uint16_t)h->bias), 4u * h->m);
    return crc;
}

uint32_t hb_model_head_grads(const hb_model *m) { return m->head_grads; }

uint16_t hb_model_n_trained(const hb_model *m) { return m->z.n_trained; }

uint16_t hb_model_trained_tensor(const hb_model *m, uint16_t t) {
    if (t >= m->z.n_trained) return 0;
    if (m->z.trained) return m->z.trained[t].tensor;
    /* loaded, not yet bound: the entry from the section */
    const hb_zo_model_view mv = model_view(m->g);
    hb_zocf_iter it = HB_ZOCF_ITER_START;
    hb_zo_tensor e = {0};
    while (it.i <= t && hb_zocf_next(&m->z, &mv, &it, &e)) continue;
    return e.tensor;
}

const hb_zocf *hb_model_zocf(const hb_model *m) { return &m->z; }

const int8_t *hb_model_pool(const hb_model *m) {
    return m->work && m->z.pool_size ? (const int8_t *)(m->work + m->pool_off) : NULL;
}
