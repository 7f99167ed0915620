/* The ZOCF model-blob section (docs/zo-math.md section 7): parsed and checked against the
 * model, in the device's order with the declared messages (gen/hb_zo.h HB_MSG_ZOCF_*), into
 * the table of trained tensors the rest of the ZO code uses.
 *
 * The check sees the model through hb_zo_model_view (a few callbacks), so it runs on the
 * graph (core/model.c) and on test tables alike. */
#ifndef HB_ZO_ZOCF_H
#define HB_ZO_ZOCF_H

#include <stdint.h>

#include "hb_status.h"
#include "hb_zo.h"

enum { HB_ZO_NONE = 0, HB_ZO_WEIGHT = 1, HB_ZO_BIAS = 2 };    /* a tensor's role */
enum { HB_ZO_OTHER = 0, HB_ZO_INT8 = 1, HB_ZO_INT32 = 2 };    /* a tensor's element type */

/* A tensor as the ZOCF check sees it. role is that of the first op (in op order) that uses
 * the tensor as its filter (WEIGHT) or bias (BIAS); layout is HB_ROWS_TRAILING for the filter
 * of a DEPTHWISE_CONV_2D op, HB_ROWS_LEADING otherwise (docs/zo-math.md "Rows"). */
typedef struct {
    uint8_t role;     /* HB_ZO_NONE / WEIGHT / BIAS */
    uint8_t elem;     /* HB_ZO_INT8 / INT32 / OTHER */
    uint8_t constant; /* has data in the blob */
    uint8_t layout;   /* HB_ROWS_LEADING / HB_ROWS_TRAILING */
    uint8_t rank;     /* 1..6 */
    uint32_t dims[6];
    uint32_t n; /* elements, >= 1 */
} hb_zo_tinfo;

typedef struct {
    uint16_t n_tensors;
    /* fill *out for tensor t < n_tensors */
    void (*info)(const void *ctx, uint16_t t, hb_zo_tinfo *out);
    /* filter tensors in op order, each once (first use): the default entries */
    uint32_t n_weights;
    uint16_t (*weight)(const void *ctx, uint32_t i); /* i < min(n_weights, HB_MAX_TRAINED) */
    const void *ctx;
} hb_zo_model_view;

/* One trained tensor, entry t of the ZOCF (tensor t of the PRNG streams). */
typedef struct {
    uint16_t tensor;     /* index into the blob's tensor table */
    uint8_t kind;        /* HB_ZO_WEIGHT (int8) / HB_ZO_BIAS (int32) */
    uint8_t layout;      /* HB_ROWS_* */
    uint8_t eps_mult;    /* Q4, 1..255 */
    uint8_t unit_shift;  /* U: 0 for weights, 0..12 for biases */
    uint32_t n;          /* elements */
    uint32_t rows, len;  /* R rows of L elements (R * L = n) */
    const uint8_t *cm;   /* R per-row multipliers (Q4) in the section, or NULL */
} hb_zo_tensor;

/* A ZOCF section as hb_zocf_load checked it: the method (header, or the defaults) and the
 * number of trained tensors. Their table is not part of it: hb_zocf_table decodes the entries
 * into storage the caller sizes by n_trained (the device: its arena's ZO work area). */
typedef struct {
    uint8_t dist, scaling, estimator, rounding, master;
    uint32_t pool_size, pool_seed;
    uint16_t n_trained;
    const uint8_t *sec; /* the section (NULL: none, the default entries) */
    uint32_t sec_len;
    const hb_zo_tensor *trained; /* the table hb_zocf_table filled, NULL until then */
} hb_zocf;

/* Parse and check a ZOCF section (sec NULL: the blob has none, defaults) against the model,
 * every entry in the device's order. Stores no entry: z->trained is NULL afterwards.
 * 0, or -1 with st = (BAD_MODEL, the declared message). */
int hb_zocf_load(const uint8_t *sec, uint32_t len, const hb_zo_model_view *mv, hb_zocf *z,
                 hb_status *st);

/* The entries of a checked ZOCF (hb_zocf_load returned 0 for z and the same mv) one at a
 * time, in order: start with it = HB_ZOCF_ITER_START; each call fills *t (entry it.i) and
 * returns 1, then 0 after the last. Nothing is stored: a caller that needs the figures before
 * it has a table (the arena's books) walks them. */
typedef struct {
    uint16_t i;   /* the next entry */
    uint32_t pos; /* its offset in the section */
} hb_zocf_iter;
#define HB_ZOCF_ITER_START {0, HB_ZOCF_HEADER_SIZE}
int hb_zocf_next(const hb_zocf *z, const hb_zo_model_view *mv, hb_zocf_iter *it, hb_zo_tensor *t);

/* Decode every entry of a checked ZOCF into table[0 .. z->n_trained) and point z->trained at
 * it. */
void hb_zocf_table(hb_zocf *z, const hb_zo_model_view *mv, hb_zo_tensor *table);

/* Q4 multiplier of row j of a trained tensor. */
static inline uint32_t hb_zo_row_mult(const hb_zo_tensor *t, uint32_t j) {
    return t->cm ? t->cm[j] : t->eps_mult;
}

#endif /* HB_ZO_ZOCF_H */
