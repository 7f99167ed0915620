/* One registration per op kind, TFLM's way (Register_ADD: parse, prepare, eval): each op of
 * the model blob lives in one unit core/ops/<op>.c that decodes its param record, checks the
 * blob's rules for it (docs/model-blob.md, pass 2), prepares its per-op constants once at
 * load (the decoded params and geometry, into the op's slot of the static graph tables) and
 * runs it (the kernel in core/nn/). core/ops/table.c maps an opcode to its registration; the
 * blob parser (core/blob.c) and the interpreter (core/graph.c) only call through that table.
 *
 * A new op: its kernel (core/nn/<op>.c, declared in core/nn/hb_nn.h), its registration
 * (core/ops/<op>.c, declared below) and one line in core/ops/table.c's table. */
#ifndef HB_OPS_H
#define HB_OPS_H

#include <stdint.h>

#include "graph_types.h"
#include "hb_status.h"
#include "hb_wire.h" /* HB_ERR_BAD_MODEL */

/* What an op's check sees: the graph being loaded (pass 1 done: tables filled, data flow of
 * the ops before checked), the op, its index and kind name for the refusal messages. */
typedef struct {
    hb_graph *g;
    hb_status *st;
    uint16_t oi;
    const hb_op *o;
    const char *kind;
} hb_op_check_ctx;

struct hb_op_reg {
    /* the blob's rules for this op (shapes, dtypes, geometry); may mark weight/bias roles.
     * 0, or -1 with st set to the declared BAD_MODEL message. */
    int (*check)(const hb_op_check_ctx *c);
    /* once per load, after every check and the plan passed: fill o->prep */
    void (*prepare)(const hb_graph *g, hb_op *o);
    /* run the op over one sample (the activations bound), rows from src for claimed tensors */
    void (*eval)(const hb_graph *g, const hb_op *o, const hb_graph_rows *src);
};

/* The registration of an opcode pass 1 accepted (HB_OPS in gen/hb_blob.h); NULL for others. */
const hb_op_reg *hb_op_find(uint8_t opcode);

extern const hb_op_reg hb_op_fully_connected, hb_op_conv2d, hb_op_depthwise_conv2d,
    hb_op_average_pool2d, hb_op_max_pool2d, hb_op_mean, hb_op_add, hb_op_reshape;

/* ---- shared by the ops' checks (core/ops/check.c) ------------------------------------------ */

/* st = BAD_MODEL with template fmt; returns -1 */
#define HB_OP_BAD(st, fmt, ...) HB_FAIL((st), HB_ERR_BAD_MODEL, (fmt), __VA_ARGS__)

int hb_op_check_act_in(const hb_op_check_ctx *c, uint16_t t);  /* t an int8 activation */
int hb_op_check_act_out(const hb_op_check_ctx *c);             /* the output one */
int hb_op_check_rank3(const hb_op_check_ctx *c, uint16_t x);   /* x of rank 3 */
/* filter scales, the params' channel count, the optional bias; marks weight and bias roles */
int hb_op_check_filter_and_bias(const hb_op_check_ctx *c, uint32_t n_out, int32_t axis,
                                uint32_t n_channels);
/* out_h/out_w/pads as TFLite computes them from x and the window, and the output's shape */
int hb_op_check_geometry(const hb_op_check_ctx *c, uint16_t x, uint8_t padding, uint32_t kh,
                         uint32_t kw, uint32_t sh, uint32_t sw, uint32_t dh, uint32_t dw,
                         uint32_t out_h, uint32_t out_w, uint32_t pad_top, uint32_t pad_left,
                         uint32_t n_out);

/* ---- shared by the ops with weights (core/ops/rows.c) -------------------------------------- */

/* The rows of one op's filter and bias as its kernel reads them (hb_nn_rows): in place from
 * the blob, or from the pass's row source for a claimed tensor. */
typedef struct {
    hb_nn_rows r; /* first member: the kernel's view */
    const int8_t *w;  /* the filter in the blob */
    uint32_t len;     /* entries of a row (in place: leading rows are len apart) */
    const uint8_t *b; /* the bias in the blob (little-endian i32), NULL if the op has none */
    const hb_graph_rows *src;
    int32_t wc, bc; /* the source's claims on the filter and the bias (-1: the blob) */
} hb_op_rows;

/* the rows of op o (FC, CONV_2D or DEPTHWISE_CONV_2D) for this pass */
void hb_op_rows_of(const hb_graph *g, const hb_op *o, const hb_graph_rows *src, hb_op_rows *out);

/* CONV_2D's and DEPTHWISE_CONV_2D's shared record head (core/ops/conv2d.c) */
void hb_op_conv_decode(const uint8_t *p, int depthwise, hb_nn_conv_params *out);

#endif /* HB_OPS_H */
