/* The graph interpreter: one sample at a time through the ops, in blob order, activations in
 * the planned region (core/plan.c), constants read in place from the blob or, for the tensors
 * a row source claims (hb_graph_rows: a PROBE's perturbed weights), produced row by row.
 * hb_graph_load (core/blob.c) has checked everything the kernels rely on. */
#include <stddef.h>

#include "graph_types.h"

static hb_graph the_graph;

hb_graph *hb_graph_instance(void) { return &the_graph; }

uint32_t hb_graph_act_bytes(const hb_graph *g) { return g->blob ? g->act_bytes : 0; }

void hb_graph_bind(hb_graph *g, uint8_t *act) { g->act = act; }

void hb_graph_unload(hb_graph *g) {
    g->blob = NULL;
    g->act = NULL;
    g->len = g->act_bytes = 0;
    g->n_tensors = g->n_ops = g->n_sections = 0;
}

uint16_t hb_graph_n_tensors(const hb_graph *g) { return g->blob ? g->n_tensors : 0; }

const hb_tensor *hb_graph_tensor(const hb_graph *g, uint16_t t) {
    return g->blob && t < g->n_tensors ? &g->tensors[t] : NULL;
}

uint8_t *hb_graph_data(const hb_graph *g, uint16_t t) {
    if (!g->blob || t >= g->n_tensors || g->tensors[t].role == HB_ROLE_ACTIVATION) return NULL;
    return g->blob + g->tensors[t].offset;
}

uint16_t hb_graph_n_ops(const hb_graph *g) { return g->blob ? g->n_ops : 0; }

uint8_t hb_graph_op_opcode(const hb_graph *g, uint16_t op) {
    return g->blob && op < g->n_ops ? g->ops[op].opcode : 0;
}

int hb_graph_op_weights(const hb_graph *g, uint16_t op, int32_t *weight, int32_t *bias) {
    if (!g->blob || op >= g->n_ops) return -1;
    const hb_op *o = &g->ops[op];
    if (o->opcode != HB_OP_FULLY_CONNECTED && o->opcode != HB_OP_CONV_2D &&
        o->opcode != HB_OP_DEPTHWISE_CONV_2D)
        return -1;
    *weight = o->idx[1];
    *bias = o->n_in > 2 ? o->idx[2] : -1;
    return 0;
}

int hb_graph_section(const hb_graph *g, const char tag[4], const uint8_t **data, uint32_t *len) {
    if (!g->blob) return -1;
    for (uint16_t i = 0; i < g->n_sections; i++) {
        const hb_section *s = &g->sections[i];
        if (s->tag[0] == (uint8_t)tag[0] && s->tag[1] == (uint8_t)tag[1] &&
            s->tag[2] == (uint8_t)tag[2] && s->tag[3] == (uint8_t)tag[3]) {
            *data = g->blob + s->offset;
            *len = s->len;
            return 0;
        }
    }
    return -1;
}

uint32_t hb_graph_input_size(const hb_graph *g) { return g->blob ? g->tensors[g->input].n : 0; }

uint32_t hb_graph_output_size(const hb_graph *g) { return g->blob ? g->tensors[g->output].n : 0; }

static int8_t *act_of(const hb_graph *g, uint16_t t) {
    return (int8_t *)(g->act + g->tensors[t].offset);
}

/* The rows of one op's filter and bias as its kernel reads them (hb_nn_rows): in place from
 * the blob, or from the pass's row source for a claimed tensor. */
typedef struct {
    hb_nn_rows r; /* first member: the kernel's view, cast back below */
    const int8_t *w; /* the filter in the blob */
    uint32_t len;    /* entries of a row (in place: leading rows are len apart) */
    const uint8_t *b; /* the bias in the blob (little-endian i32), NULL if the op has none */
    const hb_graph_rows *src;
    int32_t wc, bc; /* the source's claims on the filter and the bias (-1: the blob) */
} op_rows;

static const op_rows *op_rows_of(const hb_nn_rows *r) { return (const op_rows *)(const void *)r; }

static const int8_t *row_leading(const hb_nn_rows *r, uint32_t j) {
    const op_rows *o = op_rows_of(r);
    return o->w + (size_t)j * o->len;
}

static const int8_t *row_trailing(const hb_nn_rows *r, uint32_t j) { /* step = the channels */
    return op_rows_of(r)->w + j;
}

static const int8_t *row_claimed(const hb_nn_rows *r, uint32_t j) {
    const op_rows *o = op_rows_of(r);
    return o->src->weight_row(o->src->ctx, o->wc, j);
}

static int32_t bias_none(const hb_nn_rows *r, uint32_t j) {
    (void)r;
    (void)j;
    return 0;
}

static int32_t bias_blob(const hb_nn_rows *r, uint32_t j) {
    return hb_rdi32(op_rows_of(r)->b + 4u * j);
}

static int32_t bias_claimed(const hb_nn_rows *r, uint32_t j) {
    const op_rows *o = op_rows_of(r);
    return o->src->bias(o->src->ctx, o->bc, j);
}

/* the rows of op o (FC, CONV_2D or DEPTHWISE_CONV_2D) for this pass */
static void rows_of(const hb_graph *g, const hb_op *o, const hb_graph_rows *src, op_rows *out) {
    const hb_tensor *w = &g->tensors[o->idx[1]];
    const int dw = o->opcode == HB_OP_DEPTHWISE_CONV_2D;
    out->w = (const int8_t *)(g->blob + w->offset);
    out->len = dw ? w->dims[1] * w->dims[2] : w->n / w->dims[0];
    out->b = o->n_in > 2 ? g->blob + g->tensors[o->idx[2]].offset : NULL;
    out->src = src;
    out->wc = src ? src->claim(src->ctx, o->idx[1]) : -1;
    out->bc = src && out->b ? src->claim(src->ctx, o->idx[2]) : -1;
    out->r.row = out->wc >= 0 ? row_claimed : dw ? row_trailing : row_leading;
    out->r.step = dw && out->wc < 0 ? w->dims[3] : 1;
    out->r.bias = out->bc >= 0 ? bias_claimed : out->b ? bias_blob : bias_none;
}

static hb_nn_dims dims3(const hb_tensor *t) { return (hb_nn_dims){t->dims[0], t->dims[1], t->dims[2]}; }

static void run_op(const hb_graph *g, const hb_op *o, const hb_graph_rows *src) {
    const uint8_t *pp = g->blob + o->params;
    const hb_tensor *x = &g->tensors[o->idx[0]];
    const int8_t *in = act_of(g, o->idx[0]);
    int8_t *out = act_of(g, o->idx[o->n_in]);
    op_rows rows;
    switch (o->opcode) {
    case HB_OP_FULLY_CONNECTED: {
        hb_nn_fc_params p;
        hb_decode_fc(pp, &p);
        const hb_tensor *w = &g->tensors[o->idx[1]];
        rows_of(g, o, src, &rows);
        hb_nn_fully_connected_s8(&p, in, w->dims[1], &rows.r, w->dims[0], out);
        break;
    }
    case HB_OP_CONV_2D:
    case HB_OP_DEPTHWISE_CONV_2D: {
        const int dw = o->opcode == HB_OP_DEPTHWISE_CONV_2D;
        hb_nn_conv_params p;
        hb_decode_conv(pp, dw, &p);
        const hb_tensor *w = &g->tensors[o->idx[1]];
        const hb_nn_dims d = dims3(x);
        rows_of(g, o, src, &rows);
        if (dw)
            hb_nn_depthwise_conv2d_s8(&p, &d, in, &rows.r, w->dims[1], w->dims[2], out);
        else
            hb_nn_conv2d_s8(&p, &d, in, &rows.r, w->dims[1], w->dims[2], w->dims[0], out);
        break;
    }
    case HB_OP_AVERAGE_POOL_2D:
    case HB_OP_MAX_POOL_2D: {
        hb_nn_pool_params p;
        hb_decode_pool(pp, &p);
        const hb_nn_dims d = dims3(x);
        if (o->opcode == HB_OP_MAX_POOL_2D)
            hb_nn_max_pool2d_s8(&p, &d, in, out);
        else
            hb_nn_average_pool2d_s8(&p, &d, in, out);
        break;
    }
    case HB_OP_MEAN: {
        hb_nn_mean_params p;
        int keep_dims;
        hb_decode_mean(pp, &p, &keep_dims);
        const hb_nn_dims d = dims3(x);
        hb_nn_mean_s8(&p, &d, in, out);
        break;
    }
    case HB_OP_ADD: {
        hb_nn_add_params p;
        hb_decode_add(pp, &p);
        hb_nn_add_s8(&p, in, act_of(g, o->idx[1]), x->n, out);
        break;
    }
    default: /* HB_OP_RESHAPE */
        hb_nn_reshape_s8(in, x->n, out);
        break;
    }
}

const int8_t *hb_graph_forward_rows(hb_graph *g, const int8_t *input, const hb_graph_rows *rows) {
    if (!g->blob || !g->act) return NULL;
    int8_t *x = act_of(g, g->input);
    const uint32_t n = g->tensors[g->input].n;
    for (uint32_t i = 0; i < n; i++) x[i] = input[i];
    for (uint16_t j = 0; j < g->n_ops; j++) run_op(g, &g->ops[j], rows);
    return act_of(g, g->output);
}

const int8_t *hb_graph_forward(hb_graph *g, const int8_t *input) {
    return hb_graph_forward_rows(g, input, NULL);
}
