/* Internal to core/blob.c, plan.c, graph.c and the op units core/ops/: the graph tables, each
 * op with its prepared constants. Everything else uses hb_graph.h. */
#ifndef HB_GRAPH_TYPES_H
#define HB_GRAPH_TYPES_H

#include <stdint.h>

#include "hb_blob.h"
#include "hb_graph.h"
#include "nn/hb_nn.h"

/* An op's constants, prepared once at load by its registration (core/ops/): the decoded param
 * record and the geometry its eval would otherwise recompute on every pass. */
typedef struct {
    union {
        hb_nn_fc_params fc;
        hb_nn_conv_params conv; /* CONV_2D, DEPTHWISE_CONV_2D */
        hb_nn_pool_params pool;
        hb_nn_mean_params mean;
        hb_nn_add_params add;
    } p;
    hb_nn_dims in;  /* a rank-3 input's [h][w][c] */
    uint32_t n;     /* the input's elements */
    uint32_t kh, kw; /* CONV/DW: the filter's window */
    uint32_t k, m;   /* FC: inputs, outputs; CONV: m = output channels */
    uint32_t row_len, row_step; /* ops with weights: entries of a row, their step in place */
} hb_op_prep;

typedef struct hb_op_reg hb_op_reg; /* core/ops/hb_op.h */

typedef struct {
    const hb_op_reg *reg; /* the op kind's registration (set at load) */
    uint8_t opcode, n_in, n_out;
    uint16_t idx[HB_OP_MAX_INPUTS + HB_OP_MAX_OUTPUTS]; /* inputs, then outputs */
    uint32_t params;                                   /* blob offset of the param record */
    uint32_t params_len;
    hb_op_prep prep;
} hb_op;

typedef struct {
    uint8_t tag[4];
    uint32_t offset, len; /* the payload in the blob */
} hb_section;

struct hb_graph {
    uint8_t *blob; /* NULL: no model */
    uint32_t len;
    uint16_t n_tensors, n_ops, n_sections, input, output;
    uint32_t act_bytes;
    uint8_t *act; /* the activation region, once bound */
    hb_tensor tensors[HB_MAX_TENSORS];
    uint16_t n_q[HB_MAX_TENSORS]; /* (scale, zero point) pairs; a device reads only the count */
    int8_t axis[HB_MAX_TENSORS];  /* quantized axis, -1 = per tensor */
    hb_op ops[HB_MAX_OPS];
    hb_section sections[HB_MAX_SECTIONS];
};

/* The activation plan (docs/model-blob.md): sets every activation's offset and g->act_bytes
 * from the op tables (blob.c has checked them). Returns the plan's size in 64 bits (the caller
 * compares it with the device's limit). core/plan.c. */
uint64_t hb_plan_activations(hb_graph *g);

static inline int hb_graph_is_const(const hb_graph *g, uint16_t t) {
    return g->tensors[t].role != HB_ROLE_ACTIVATION;
}

/* an int8 activation with one (scale, zero point) */
static inline int hb_graph_is_activation(const hb_graph *g, uint16_t t) {
    return g->tensors[t].dtype == HB_DTYPE_INT8 && !hb_graph_is_const(g, t) && g->n_q[t] == 1;
}

static inline int8_t *hb_graph_act_of(const hb_graph *g, uint16_t t) {
    return (int8_t *)(g->act + g->tensors[t].offset);
}

/* a checked record field: a little-endian i32 at p + off */
static inline int32_t hb_graph_rec_i32(const uint8_t *p, uint32_t off) {
    return hb_fp_wrap32(hb_rd32(p + off));
}

#endif /* HB_GRAPH_TYPES_H */
