/* The rows of an op's filter and bias for one pass (hb_op.h hb_op_rows): read in place from
 * the blob, or from the pass's row source (hb_graph_rows: a PROBE's perturbed weights) for a
 * tensor it claims. Row length and in-place step come from the op's prepared constants. */
#include <stddef.h>

#include "ops/hb_op.h"

static const hb_op_rows *rows_of(const hb_nn_rows *r) {
    return (const hb_op_rows *)(const void *)r;
}

static const int8_t *row_leading(const hb_nn_rows *r, uint32_t j) {
    const hb_op_rows *o = rows_of(r);
    return o->w + (size_t)j * o->len;
}

static const int8_t *row_trailing(const hb_nn_rows *r, uint32_t j) { /* step = the channels */
    return rows_of(r)->w + j;
}

static const int8_t *row_claimed(const hb_nn_rows *r, uint32_t j) {
    const hb_op_rows *o = rows_of(r);
    return o->src->weight_row(o->src->ctx, o->wc, j);
}

static int32_t bias_none(const hb_nn_rows *r, uint32_t j) {
    (void)r;
    (void)j;
    return 0;
}

static int32_t bias_blob(const hb_nn_rows *r, uint32_t j) {
    return hb_rdi32(rows_of(r)->b + 4u * j);
}

static int32_t bias_claimed(const hb_nn_rows *r, uint32_t j) {
    const hb_op_rows *o = rows_of(r);
    return o->src->bias(o->src->ctx, o->bc, j);
}

/* hb_nn_rows' optional in-place view: leading rows read where they are (claimed: NULL),
 * biases likewise */
static void set_in_place(hb_op_rows *out, int trailing, int claimed_w, int claimed_b) {
    out->r.rows = trailing || claimed_w ? NULL : out->w;
    out->r.biases = claimed_b ? NULL : out->b;
    out->r.no_bias = !claimed_b && !out->b;
}

void hb_op_rows_of(const hb_graph *g, const hb_op *o, const hb_graph_rows *src, hb_op_rows *out) {
    const int trailing = o->prep.row_step != 1; /* a depthwise filter read in place */
    out->w = (const int8_t *)(g->blob + g->tensors[o->idx[1]].offset);
    out->len = o->prep.row_len;
    out->b = o->n_in > 2 ? g->blob + g->tensors[o->idx[2]].offset : NULL;
    out->src = src;
    if (src && src->data_of) { /* claimed tensors as whole data, one call each */
        const uint8_t *w = src->data_of(src->ctx, o->idx[1]);
        const uint8_t *b = out->b ? src->data_of(src->ctx, o->idx[2]) : NULL;
        if (w) out->w = (const int8_t *)w;
        if (b) out->b = b;
        out->wc = out->bc = -1;
        out->r.row = trailing ? row_trailing : row_leading;
        out->r.step = o->prep.row_step;
        out->r.bias = out->b ? bias_blob : bias_none;
        set_in_place(out, trailing, 0, 0);
        return;
    }
    out->wc = src ? src->claim(src->ctx, o->idx[1]) : -1;
    out->bc = src && out->b ? src->claim(src->ctx, o->idx[2]) : -1;
    if (src && src->tensor) { /* claimed tensors as whole data: read like the blob's */
        if (out->wc >= 0) out->w = (const int8_t *)src->tensor(src->ctx, out->wc);
        if (out->bc >= 0) out->b = src->tensor(src->ctx, out->bc);
        out->wc = out->bc = -1;
    }
    out->r.row = out->wc >= 0 ? row_claimed : trailing ? row_trailing : row_leading;
    out->r.step = out->wc < 0                      ? o->prep.row_step
                  : src->row_step ? src->row_step(src->ctx, out->wc)
                                  : 1;
    out->r.bias = out->bc >= 0 ? bias_claimed : out->b ? bias_blob : bias_none;
    set_in_place(out, trailing, out->wc >= 0, out->bc >= 0);
}
