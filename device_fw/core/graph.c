/* The graph interpreter: one sample at a time through the ops, in blob order, each run by its
 * registration's eval (core/ops/), prepared at load; activations in the planned region
 * (core/plan.c), constants read in place from the blob or, for the tensors a row source claims
 * (hb_graph_rows: a PROBE's perturbed weights), produced row by row. hb_blob_load
 * (core/blob.c) has checked everything the kernels rely on and prepared every op. */
#include <stddef.h>

#include "graph_types.h"
#include "ops/hb_op.h"

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

const int8_t *hb_graph_forward_rows(hb_graph *g, const int8_t *input, const hb_graph_rows *rows) {
    if (!g->blob || !g->act) return NULL;
    int8_t *x = hb_graph_act_of(g, g->input);
    const uint32_t n = g->tensors[g->input].n;
    for (uint32_t i = 0; i < n; i++) x[i] = input[i];
    for (uint16_t j = 0; j < g->n_ops; j++) {
        const hb_op *o = &g->ops[j];
        o->reg->eval(g, o, rows);
    }
    return hb_graph_act_of(g, g->output);
}

int8_t *hb_graph_input_buffer(hb_graph *g) {
    return g->blob && g->act ? hb_graph_act_of(g, g->input) : NULL;
}

const int8_t *hb_graph_output_buffer(const hb_graph *g) {
    return g->blob && g->act ? hb_graph_act_of(g, g->output) : NULL;
}

const int8_t *hb_graph_forward(hb_graph *g, const int8_t *input) {
    return hb_graph_forward_rows(g, input, NULL);
}
