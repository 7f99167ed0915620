/* The model graph on the device: the HBM0 blob parsed and checked, activations planned,
 * one sample at a time through the int8 ops (core/ops/, kernels in core/nn/). Implemented in
 * core/graph.c (the interpreter), core/blob.c (hb_blob_load, the parser), core/plan.c.
 *
 * The blob stays where it was received (in the arena's model region) and constants are used
 * in place: weights are read from the blob bytes, and APPLY (hb_model.h) updates them there.
 * A perturbed forward pass (PROBE) never writes them: it runs with a row source
 * (hb_graph_rows) that produces the perturbed rows of the trained tensors one output channel
 * at a time (docs/zo-math.md section 3). Tables describing tensors and ops are static, sized
 * by the device limits HB_MAX_TENSORS / HB_MAX_OPS (gen/hb_blob.h), so parsing needs no arena
 * memory; only the activations do (g->act_bytes, placed by hb_graph_bind). */
#ifndef HB_GRAPH_H
#define HB_GRAPH_H

#include <stdint.h>

#include "hb_status.h"

enum { HB_ROLE_ACTIVATION = 0, HB_ROLE_WEIGHT = 1, HB_ROLE_BIAS = 2, HB_ROLE_CONST = 3 };

typedef struct {
    uint8_t dtype;    /* HB_DTYPE_INT8 / HB_DTYPE_INT32 (gen/hb_blob.h) */
    uint8_t rank;     /* 1..6, without the batch axis */
    uint8_t role;     /* HB_ROLE_*: WEIGHT/BIAS = the filter/bias input of a FC, CONV or DW op */
    uint8_t opcode;   /* for WEIGHT/BIAS: the opcode of the op that uses it, else 0 */
    uint32_t dims[6];
    uint32_t n;       /* elements */
    uint32_t offset;  /* constants: byte offset of the data in the blob; activations: in the
                         activation arena */
} hb_tensor;

typedef struct hb_graph hb_graph; /* opaque: the one instance is hb_graph_instance() */

/* Parse and check an HBM0 blob of len bytes (its CRC included): every device-side rule of
 * docs/model-blob.md ("What a device checks"), in its order, each failure BAD_MODEL with the
 * declared message (byte-identical to hilbench.device.blobcheck's). Plans the activations
 * (hb_graph_act_bytes). Returns 0, or -1 with st set and no model (every accessor below then
 * answers 0 / NULL / -1). The blob must stay in place, 4-byte aligned, while the model is
 * used: constants are read (and perturbed by the ZO code) where they are. A successful load
 * unbinds the activations: call hb_graph_bind before hb_graph_forward. */
int hb_blob_load(hb_graph *g, uint8_t *blob, uint32_t len, hb_status *st);

/* Forget the model (e.g. before its blob's bytes are reused); afterwards there is none. */
void hb_graph_unload(hb_graph *g);

/* Bytes of activation memory the plan needs (a multiple of 16). */
uint32_t hb_graph_act_bytes(const hb_graph *g);

/* Place the activations at act (16-byte aligned, hb_graph_act_bytes(g) bytes). */
void hb_graph_bind(hb_graph *g, uint8_t *act);

uint16_t hb_graph_n_tensors(const hb_graph *g);
const hb_tensor *hb_graph_tensor(const hb_graph *g, uint16_t t);
/* A constant tensor's data in the blob (int8 or little-endian int32; 4-byte aligned). */
uint8_t *hb_graph_data(const hb_graph *g, uint16_t t);

uint16_t hb_graph_n_ops(const hb_graph *g);
uint8_t hb_graph_op_opcode(const hb_graph *g, uint16_t op);
/* For ops with weights (FC, CONV, DW): the filter and bias tensor indices (bias -1 if none). */
int hb_graph_op_weights(const hb_graph *g, uint16_t op, int32_t *weight, int32_t *bias);

/* An extra section by tag (e.g. "LOSS", "ZOCF"): 0 and data/len, or -1 if absent. */
int hb_graph_section(const hb_graph *g, const char tag[4], const uint8_t **data, uint32_t *len);

uint32_t hb_graph_input_size(const hb_graph *g);  /* bytes of one input item */
uint32_t hb_graph_output_size(const hb_graph *g); /* elements of the output (classes) */

/* Run one sample: input[hb_graph_input_size] int8 -> the int8 output
 * (hb_graph_output_size elements, in the activation region), valid until the next call. The
 * input is copied into its activation buffer first; the constants are read from the blob as
 * they are now. NULL if no model is loaded or no activation region is bound. */
const int8_t *hb_graph_forward(hb_graph *g, const int8_t *input);

/* The input tensor's activation buffer (hb_graph_input_size bytes; a forward pass copies its
 * input there first, so an input may be assembled in place and passed as is) and the output
 * tensor's, where the last forward pass left its output. NULL with no model or activations. */
int8_t *hb_graph_input_buffer(hb_graph *g);
const int8_t *hb_graph_output_buffer(const hb_graph *g);

/* A source of rows for some constant tensors of a forward pass (the perturbed weights of a
 * PROBE, core/model.c). For each op with weights (FC, CONV_2D, DEPTHWISE_CONV_2D) the pass
 * asks claim(ctx, t) once for its filter and once for its bias tensor t: -1 leaves the tensor
 * to the blob; a value c >= 0 claims it, and then each of its rows comes from
 * weight_row(ctx, c, j) (a filter: row j's L int8 entries, contiguous, valid until the next
 * call; rows as in docs/zo-math.md "Rows") or bias(ctx, c, j) (bias element j). The kernels
 * ask for each row once per forward pass, output channel by output channel. */
typedef struct {
    int32_t (*claim)(void *ctx, uint16_t t);
    const int8_t *(*weight_row)(void *ctx, int32_t c, uint32_t j);
    int32_t (*bias)(void *ctx, int32_t c, uint32_t j);
    void *ctx; /* the source's state (a row buffer, cached PRNG blocks) */
    /* the distance of the entries of claimed filter c's rows (the same for every row of the
     * pass; NULL: 1, contiguous). A source may produce several depthwise rows at once as the
     * columns of one buffer (hb_nn_rows' step) */
    uint32_t (*row_step)(void *ctx, int32_t c);
    /* NULL, or claimed tensor c's whole data in the blob's own layout (a PROBE's perturbed
     * copy, 4-byte aligned): the kernels then read it as they read the blob, row by row in
     * place, and weight_row, bias and row_step are not asked */
    const uint8_t *(*tensor)(void *ctx, int32_t c);
    /* NULL, or claim and tensor in one call: blob tensor t's whole data if the source claims
     * it, else NULL (the blob's); then neither claim nor tensor is asked */
    const uint8_t *(*data_of)(void *ctx, uint16_t t);
} hb_graph_rows;

/* hb_graph_forward with the claimed tensors' rows from rows (NULL: none claimed). */
const int8_t *hb_graph_forward_rows(hb_graph *g, const int8_t *input, const hb_graph_rows *rows);

/* The frozen prefix of a forward pass (a PROBE whose trained tensors all lie in later ops):
 * the last op boundary c in 1..first (first: the first op reading a trained tensor) across
 * which exactly one activation lives (produced by an op before c, or the graph input, and read
 * by an op from c on); 0 if there is none (first is 0, or every boundary up to first is
 * crossed by several activations, e.g. inside a residual block). *tensor: that activation.
 * Ops [0, c) then compute the same for every weight set, and ops [c, n_ops) read only it, the
 * constants and their own outputs (hilbench.npu.ir.GraphIR.cut is the same rule). */
uint16_t hb_graph_cut(const hb_graph *g, uint16_t first, uint16_t *tensor);

/* Ops [from, to) of one forward pass (from 0: input copied into its buffer first; else the
 * activations ops from `from` read must be in place, e.g. the cut's, hb_graph_activation).
 * Returns the graph output's buffer (meaningful when to is hb_graph_n_ops). */
const int8_t *hb_graph_forward_range(hb_graph *g, const int8_t *input, uint16_t from,
                                     uint16_t to, const hb_graph_rows *rows);

/* The hybrid's head (HEAD_GRAD): 0 when the last op is a FULLY_CONNECTED whose output is the
 * graph's output, with its input activation and the op's input offset; -1 otherwise. Its
 * filter and bias: hb_graph_op_weights(g, n_ops - 1). */
int hb_graph_fc_head(const hb_graph *g, uint16_t *input, int32_t *input_offset);

/* The buffer of activation t in the bound activation region (NULL: none, or a constant). */
int8_t *hb_graph_activation(const hb_graph *g, uint16_t t);

/* Static storage for the one graph a device holds (the struct is in core/graph_types.h). */
hb_graph *hb_graph_instance(void);

#endif /* HB_GRAPH_H */
