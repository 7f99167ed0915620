/* FULLY_CONNECTED (opcode 1): decode, check, prepare, eval. Kernel: core/nn/fully_connected.c. */
#include "ops/hb_op.h"

static void decode(const uint8_t *p, hb_nn_fc_params *o) {
    o->input_offset = hb_graph_rec_i32(p, HB_REC_FULLY_CONNECTED_INPUT_OFFSET_OFF);
    o->output_offset = hb_graph_rec_i32(p, HB_REC_FULLY_CONNECTED_OUTPUT_OFFSET_OFF);
    o->act_min = hb_graph_rec_i32(p, HB_REC_FULLY_CONNECTED_ACT_MIN_OFF);
    o->act_max = hb_graph_rec_i32(p, HB_REC_FULLY_CONNECTED_ACT_MAX_OFF);
    const uint32_t n = hb_rd16(p + HB_REC_FULLY_CONNECTED_CHANNEL_COUNT_OFF);
    const uint32_t head = HB_REC_FULLY_CONNECTED_HEAD_SIZE;
    o->rq = (hb_nn_requant){p + head, (const int8_t *)(p + head + 4u * n), n};
}

static int check(const hb_op_check_ctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0], wi = c->o->idx[1], yi = c->o->idx[c->o->n_in];
    if (hb_op_check_act_in(c, xi) || hb_op_check_act_out(c)) return -1;
    const hb_tensor *w = &g->tensors[wi];
    if (!(hb_graph_is_const(g, wi) && w->dtype == HB_DTYPE_INT8 && w->rank == 2))
        return HB_OP_BAD(c->st, HB_MSG_HBM_FC_WEIGHTS, HB_I(c->oi), HB_S(c->kind), HB_I(wi));
    const uint32_t m = w->dims[0], k = w->dims[1];
    if (g->tensors[xi].n != k)
        return HB_OP_BAD(c->st, HB_MSG_HBM_FC_INPUT, HB_I(c->oi), HB_S(c->kind), HB_I(xi),
                         HB_I(g->tensors[xi].n), HB_I(k));
    const hb_tensor *y = &g->tensors[yi];
    if (!(y->rank == 1 && y->dims[0] == m))
        return HB_OP_BAD(c->st, HB_MSG_HBM_SHAPE1, HB_I(c->oi), HB_S(c->kind), HB_I(yi), HB_I(m));
    hb_nn_fc_params p;
    decode(g->blob + c->o->params, &p);
    return hb_op_check_filter_and_bias(c, m, 0, p.rq.n);
}

static void prepare(const hb_graph *g, hb_op *o) {
    const hb_tensor *w = &g->tensors[o->idx[1]];
    decode(g->blob + o->params, &o->prep.p.fc);
    o->prep.m = w->dims[0];
    o->prep.k = w->dims[1];
    o->prep.row_len = w->dims[1];
    o->prep.row_step = 1;
}

static void eval(const hb_graph *g, const hb_op *o, const hb_graph_rows *src) {
    hb_op_rows rows;
    hb_op_rows_of(g, o, src, &rows);
    hb_nn_fully_connected_s8(&o->prep.p.fc, hb_graph_act_of(g, o->idx[0]), o->prep.k, &rows.r,
                             o->prep.m, hb_graph_act_of(g, o->idx[o->n_in]));
}

const hb_op_reg hb_op_fully_connected = {check, prepare, eval};
