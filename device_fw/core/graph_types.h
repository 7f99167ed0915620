/* Internal to core/blob.c, plan.c and graph.c: the graph tables and the decoded op params.
 * Everything else uses hb_graph.h. */
#ifndef HB_GRAPH_TYPES_H
#define HB_GRAPH_TYPES_H

#include <stdint.h>

#include "hb_blob.h"
#include "hb_graph.h"
#include "nn/hb_nn.h"

typedef struct {
    uint8_t opcode, n_in, n_out;
    uint16_t idx[HB_OP_MAX_INPUTS + HB_OP_MAX_OUTPUTS]; /* inputs, then outputs */
    uint32_t params;                                   /* blob offset of the param record */
    uint32_t params_len;
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

/* the op kind's name ("CONV_2D") for messages; opcode checked by the caller */
const char *hb_op_name(uint8_t opcode);

/* Decode op params from the (checked) record at p. */
void hb_decode_fc(const uint8_t *p, hb_nn_fc_params *out);
void hb_decode_conv(const uint8_t *p, int depthwise, hb_nn_conv_params *out);
void hb_decode_pool(const uint8_t *p, hb_nn_pool_params *out);
void hb_decode_mean(const uint8_t *p, hb_nn_mean_params *out, int *keep_dims);
void hb_decode_add(const uint8_t *p, hb_nn_add_params *out);

/* The activation plan (docs/model-blob.md): sets every activation's offset and g->act_bytes
 * from the op tables (blob.c has checked them). Returns the plan's size before rounding to
 * 32 bits is a concern: 64-bit bytes. */
uint64_t hb_plan(hb_graph *g);

#endif /* HB_GRAPH_TYPES_H */
