/* The ZOCF section: parse and check, in hilbench/zo/zocf.py's order (from_bytes, then
 * resolve), with its messages. */
#include "zo/zocf.h"

#include <stddef.h>

#include "hb_bytes.h"
#include "hb_wire.h"

#define BAD(st, ...) HB_FAIL((st), HB_ERR_BAD_MODEL, __VA_ARGS__)

/* the channel multipliers' bytes after an entry with nch of them (zero-padded) */
static uint64_t cm_bytes(uint32_t nch) {
    return (nch + HB_ZOCF_CHANNEL_ALIGN - 1) / HB_ZOCF_CHANNEL_ALIGN *
           (uint64_t)HB_ZOCF_CHANNEL_ALIGN;
}

/* the section's bytes: header, entries' structure, trailing bytes (nothing is stored but the
 * header's fields) */
static int parse(const uint8_t *p, uint32_t len, hb_zocf *z, uint16_t *n_entries,
                 hb_status *st) {
    if (len < HB_ZOCF_HEADER_SIZE)
        return BAD(st, HB_MSG_ZOCF_SHORT, HB_I(len), HB_I(HB_ZOCF_HEADER_SIZE));
    uint32_t version = p[HB_ZOCF_H_VERSION];
    if (version != HB_ZOCF_VERSION)
        return BAD(st, HB_MSG_ZOCF_VERSION, HB_I(version), HB_I(HB_ZOCF_VERSION));
    uint32_t reserved = hb_rd32(p + HB_ZOCF_H_RESERVED);
    if (reserved != 0) return BAD(st, HB_MSG_ZOCF_RESERVED, HB_I(reserved));
    z->dist = p[HB_ZOCF_H_DISTRIBUTION];
    z->scaling = p[HB_ZOCF_H_SCALING];
    z->estimator = p[HB_ZOCF_H_ESTIMATOR];
    z->rounding = p[HB_ZOCF_H_ROUNDING];
    z->master = p[HB_ZOCF_H_MASTER];
    if (z->dist >= HB_N_DISTRIBUTIONS) return BAD(st, HB_MSG_ZOCF_DISTRIBUTION, HB_I(z->dist));
    if (z->scaling >= HB_N_SCALINGS) return BAD(st, HB_MSG_ZOCF_SCALING, HB_I(z->scaling));
    if (z->estimator >= HB_N_ESTIMATORS)
        return BAD(st, HB_MSG_ZOCF_ESTIMATOR, HB_I(z->estimator));
    if (z->rounding >= HB_N_ROUNDINGS) return BAD(st, HB_MSG_ZOCF_ROUNDING, HB_I(z->rounding));
    if (z->master >= HB_N_MASTERS) return BAD(st, HB_MSG_ZOCF_MASTER, HB_I(z->master));
    z->pool_size = hb_rd32(p + HB_ZOCF_H_POOL_SIZE);
    z->pool_seed = hb_rd32(p + HB_ZOCF_H_POOL_SEED);
    if (z->pool_size > HB_MAX_POOL)
        return BAD(st, HB_MSG_ZOCF_POOL_SIZE, HB_I(z->pool_size), HB_I(HB_MAX_POOL));
    uint16_t n = hb_rd16(p + HB_ZOCF_H_N_ENTRIES);
    if (n > HB_MAX_TRAINED)
        return BAD(st, HB_MSG_ZOCF_N_ENTRIES, HB_I(n), HB_I(HB_MAX_TRAINED));
    uint64_t pos = HB_ZOCF_HEADER_SIZE; /* 64 bits: pos + counts never wraps */
    for (uint16_t i = 0; i < n; i++) {
        if (pos + HB_ZOCF_ENTRY_SIZE > len) return BAD(st, HB_MSG_ZOCF_ENTRY_TRUNCATED, HB_I(i));
        const uint8_t *e = p + pos;
        uint32_t nch = hb_rd16(e + HB_ZOCF_E_N);
        uint32_t res = hb_rd16(e + HB_ZOCF_E_RESERVED);
        pos += HB_ZOCF_ENTRY_SIZE;
        uint64_t padded = cm_bytes(nch);
        if (pos + padded > len) return BAD(st, HB_MSG_ZOCF_CHANNELS_TRUNCATED, HB_I(i));
        int nonzero = res != 0;
        for (uint64_t b = nch; b < padded; b++) nonzero |= p[pos + b] != 0;
        if (nonzero) return BAD(st, HB_MSG_ZOCF_ENTRY_RESERVED, HB_I(i));
        pos += padded;
    }
    if (pos != len) return BAD(st, HB_MSG_ZOCF_TRAILING, HB_I(len - pos));
    *n_entries = n;
    return 0;
}

/* entry it->i's own fields (a section entry, or a default one), then it moves to the next;
 * *nch: the entry's count of channel multipliers (0: none) */
static void raw_entry(const hb_zocf *z, const hb_zo_model_view *mv, hb_zocf_iter *it,
                      hb_zo_tensor *t, uint32_t *nch) {
    if (z->sec) { /* parse() walked this structure: every read lies inside the section */
        const uint8_t *e = z->sec + it->pos;
        *nch = hb_rd16(e + HB_ZOCF_E_N);
        t->tensor = hb_rd16(e + HB_ZOCF_E_TENSOR);
        t->eps_mult = e[HB_ZOCF_E_EPS_MULT];
        t->unit_shift = e[HB_ZOCF_E_UNIT_SHIFT];
        t->cm = *nch ? e + HB_ZOCF_ENTRY_SIZE : NULL;
        it->pos += HB_ZOCF_ENTRY_SIZE + (uint32_t)cm_bytes(*nch);
    } else { /* every filter tensor in op order, eps multiplier 1 */
        *nch = 0;
        t->tensor = mv->weight(mv->ctx, it->i);
        t->eps_mult = 1u << HB_MULT_FRAC;
        t->unit_shift = 0;
        t->cm = NULL;
    }
    it->i++;
}

/* what the model says of the entry's tensor: its kind, layout, size and rows */
static void shape(hb_zo_tensor *t, const hb_zo_tinfo *ti) {
    t->kind = ti->role;
    t->layout = ti->role == HB_ZO_WEIGHT ? ti->layout : HB_ROWS_LEADING;
    t->n = ti->n;
    t->rows = t->layout == HB_ROWS_TRAILING ? ti->dims[ti->rank - 1] : ti->dims[0];
    t->len = t->n / t->rows;
}

/* entry i (its own fields in t, nch multipliers) against the model; completes t */
static int check(const hb_zocf *z, const hb_zo_model_view *mv, uint16_t i, hb_zo_tensor *t,
                 uint32_t nch, hb_status *st) {
    if (t->tensor >= mv->n_tensors)
        return BAD(st, HB_MSG_ZOCF_INDEX, HB_I(i), HB_I(t->tensor), HB_I(mv->n_tensors));
    if (z->sec) { /* the default entries are distinct by construction */
        hb_zocf_iter it = HB_ZOCF_ITER_START;
        for (uint16_t k = 0; k < i; k++) {
            hb_zo_tensor prev;
            uint32_t prev_nch;
            raw_entry(z, mv, &it, &prev, &prev_nch);
            if (prev.tensor == t->tensor)
                return BAD(st, HB_MSG_ZOCF_TWICE, HB_I(i), HB_I(t->tensor));
        }
    }
    hb_zo_tinfo ti;
    mv->info(mv->ctx, t->tensor, &ti);
    if (ti.role == HB_ZO_NONE || !ti.constant)
        return BAD(st, HB_MSG_ZOCF_NOT_TRAINABLE, HB_I(i), HB_I(t->tensor));
    if (ti.role == HB_ZO_WEIGHT && ti.elem != HB_ZO_INT8)
        return BAD(st, HB_MSG_ZOCF_WEIGHT_DTYPE, HB_I(i), HB_I(t->tensor));
    if (ti.role == HB_ZO_BIAS && ti.elem != HB_ZO_INT32)
        return BAD(st, HB_MSG_ZOCF_BIAS_DTYPE, HB_I(i), HB_I(t->tensor));
    if (t->eps_mult < HB_MIN_MULT) return BAD(st, HB_MSG_ZOCF_EPS_MULT, HB_I(i), HB_I(t->eps_mult));
    if (t->unit_shift > HB_MAX_UNIT_SHIFT)
        return BAD(st, HB_MSG_ZOCF_UNIT_SHIFT, HB_I(i), HB_I(t->unit_shift),
                   HB_I(HB_MAX_UNIT_SHIFT));
    if (ti.role == HB_ZO_WEIGHT && t->unit_shift != 0)
        return BAD(st, HB_MSG_ZOCF_WEIGHT_SHIFT, HB_I(i), HB_I(t->tensor), HB_I(t->unit_shift));
    shape(t, &ti);
    if (t->cm) {
        if (nch != t->rows)
            return BAD(st, HB_MSG_ZOCF_CHANNELS, HB_I(i), HB_I(nch), HB_I(t->tensor),
                       HB_I(t->rows));
        for (uint32_t j = 0; j < nch; j++)
            if (t->cm[j] < HB_MIN_MULT) return BAD(st, HB_MSG_ZOCF_CHANNEL_ZERO, HB_I(i), HB_I(j));
    }
    if (z->pool_size && t->len > z->pool_size)
        return BAD(st, HB_MSG_ZOCF_POOL_ROW, HB_I(z->pool_size), HB_I(t->tensor), HB_I(t->len));
    return 0;
}

int hb_zocf_load(const uint8_t *sec, uint32_t len, const hb_zo_model_view *mv, hb_zocf *z,
                 hb_status *st) {
    uint16_t n = 0;
    z->dist = HB_DIST_RADEMACHER;
    z->scaling = HB_SCALING_FIXED;
    z->estimator = HB_ESTIMATOR_TWO_POINT;
    z->rounding = HB_ROUNDING_NEAREST;
    z->master = HB_MASTER_Q16;
    z->pool_size = 0;
    z->pool_seed = 0;
    z->n_trained = 0;
    z->sec = NULL;
    z->sec_len = 0;
    z->trained = NULL;
    if (sec && parse(sec, len, z, &n, st)) return -1;
    if (n) { /* the section's entries */
        z->sec = sec;
        z->sec_len = len;
    } else { /* every filter tensor, in op order; none in a model without weights, which
              * the device runs (INFER, EVAL) and a PROBE leaves as it is */
        if (mv->n_weights > HB_MAX_TRAINED)
            return BAD(st, HB_MSG_ZOCF_TOO_MANY, HB_I(mv->n_weights), HB_I(HB_MAX_TRAINED));
        n = (uint16_t)mv->n_weights;
    }
    z->n_trained = n;
    hb_zocf_iter it = HB_ZOCF_ITER_START;
    for (uint16_t i = 0; i < n; i++) {
        hb_zo_tensor t;
        uint32_t nch;
        raw_entry(z, mv, &it, &t, &nch);
        if (check(z, mv, i, &t, nch, st)) {
            z->n_trained = 0;
            z->sec = NULL;
            return -1;
        }
    }
    return 0;
}

int hb_zocf_next(const hb_zocf *z, const hb_zo_model_view *mv, hb_zocf_iter *it, hb_zo_tensor *t) {
    if (it->i >= z->n_trained) return 0;
    uint32_t nch;
    raw_entry(z, mv, it, t, &nch);
    hb_zo_tinfo ti;
    mv->info(mv->ctx, t->tensor, &ti);
    shape(t, &ti);
    return 1;
}

void hb_zocf_table(hb_zocf *z, const hb_zo_model_view *mv, hb_zo_tensor *table) {
    hb_zocf_iter it = HB_ZOCF_ITER_START;
    while (hb_zocf_next(z, mv, &it, &table[it.i])) continue;
    z->trained = table;
}
