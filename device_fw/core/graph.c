/* The graph interpreter: one sample at a time through the ops, in blob order, each run by its
 * registration's eval (core/ops/), prepared at load; activations in the planned region
 * (core/plan.c), constants read in place from the blob or, for the tensors a row source claims
 * (hb_graph_rows: a PROBE's perturbed weights), produced row by row. hb_blob_load
 * (core/blob.c) has checked everything the kernels rely on and prepared every op. */
#include <stddef.h>
#include <stdint.h>

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

const int8_t *hb_graph_forward_range(hb_graph *g, const int8_t *input, uint16_t from,
                                     uint16_t to, const hb_graph_rows *rows) {
    if (!g->blob || !g->act) return NULL;
    if (from == 0) {
        int8_t *x = hb_graph_act_of(g, g->input);
        const uint32_t n = g->tensors[g->input].n;
        for (uint32_t i = 0; i < n; i++) x[i] = input[i];
    }
    if (to > g->n_ops) to = g->n_ops;
    for (uint16_t j = from; j < to; j++) {
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

const int8_t *hb_graph_forward_rows(hb_graph *g, const int8_t *input, const hb_graph_rows *rows) {
    return hb_graph_forward_range(g, input, 0, g->n_ops, rows);
}

int hb_graph_fc_head(const hb_graph *g, uint16_t *input, int32_t *input_offset) {
    if (!g->blob || g->n_ops == 0) return -1;
    const hb_op *o = &g->ops[g->n_ops - 1];
    if (o->opcode != HB_OP_FULLY_CONNECTED || o->idx[o->n_in] != g->output) return -1;
    *input = o->idx[0];
    *input_offset = o->prep.p.fc.input_offset;
    return 0;
}

int8_t *hb_graph_activation(const hb_graph *g, uint16_t t) {
    if (!g->blob || !g->act || t >= g->n_tensors || hb_graph_is_const(g, t)) return NULL;
    return hb_graph_act_of(g, t);
}

/* for hb_graph_cut: each activation's producing op + 1 (the input: 0) and last reader + 1
 * (the graph output: n_ops + 1); CUT_NONE: neither (n_ops <= HB_MAX_OPS < 254) */
enum { CUT_NONE = 255 };
_Static_assert(HB_MAX_OPS + 1 < CUT_NONE, "op indices + 1 fit a byte below CUT_NONE");
static uint8_t cut_born[HB_MAX_TENSORS], cut_last[HB_MAX_TENSORS];

uint16_t hb_graph_cut(const hb_graph *g, uint16_t first, uint16_t *tensor) {
    if (!g->blob || first == 0) return 0;
    if (first > g->n_ops) first = g->n_ops;
    for (uint16_t t = 0; t < g->n_tensors; t++) cut_born[t] = cut_last[t] = CUT_NONE;
    cut_born[g->input] = 0;
    for (uint16_t j = 0; j < g->n_ops; j++) {
        const hb_op *o = &g->ops[j];
        for (uint8_t k = 0; k < o->n_in; k++) cut_last[o->idx[k]] = (uint8_t)(j + 1);
        for (uint8_t k = 0; k < o->n_out; k++) cut_born[o->idx[o->n_in + k]] = (uint8_t)(j + 1);
    }
    cut_last[g->output] = (uint8_t)(g->n_ops + 1);
    for (uint16_t c = first; c >= 1; c--) { /* the latest boundary crossed by one activation */
        uint32_t crossing = 0;
        uint16_t x = 0;
        for (uint16_t t = 0; t < g->n_tensors; t++) {
            if (cut_born[t] == CUT_NONE || cut_last[t] == CUT_NONE || hb_graph_is_const(g, t))
                continue;
            /* born before op c (born + 1 <= c), read by op c or later (last + 1 > c) */
            if (cut_born[t] <= c && cut_last[t] > c) {
                crossing++;
                x = t;
            }
        }
        if (crossing == 1) {
            if (x == g->input) return 0; /* ops [0, c) feed nothing later: nothing to keep */
            *tensor = x;
            return c;
        }
    }
    return 0;
}

const int8_t *hb_graph_forward(hb_graph *g, const int8_t *input) {
    return hb_graph_forward_rows(g, input, NULL);
}
