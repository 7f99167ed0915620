/* MEAN over H and W (opcode 6): decode, check, prepare, eval. Kernel: core/nn/mean.c. */
#include "ops/hb_op.h"

static void decode(const uint8_t *p, hb_nn_mean_params *o) {
    o->input_zero_point = hb_graph_rec_i32(p, HB_REC_MEAN_INPUT_ZERO_POINT_OFF);
    o->output_offset = hb_graph_rec_i32(p, HB_REC_MEAN_OUTPUT_OFFSET_OFF);
    o->multiplier = hb_graph_rec_i32(p, HB_REC_MEAN_MULTIPLIER_OFF);
    o->shift = hb_graph_rec_i32(p, HB_REC_MEAN_SHIFT_OFF);
    o->count = hb_rd32(p + HB_REC_MEAN_COUNT_OFF);
}

static int check(const hb_op_check_ctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0], yi = c->o->idx[1];
    if (hb_op_check_act_in(c, xi) || hb_op_check_act_out(c) || hb_op_check_rank3(c, xi)) return -1;
    const uint8_t *pp = g->blob + c->o->params;
    hb_nn_mean_params p;
    decode(pp, &p);
    const int keep = pp[HB_REC_MEAN_KEEP_DIMS_OFF];
    const hb_tensor *x = &g->tensors[xi], *y = &g->tensors[yi];
    const uint64_t pixels = (uint64_t)x->dims[0] * x->dims[1];
    if (p.count != pixels)
        return HB_OP_BAD(c->st, HB_MSG_HBM_MEAN_COUNT, HB_I(c->oi), HB_S(c->kind), HB_I(p.count),
                         HB_I(pixels));
    const uint32_t ch = x->dims[2];
    if (keep) {
        if (!(y->rank == 3 && y->dims[0] == 1 && y->dims[1] == 1 && y->dims[2] == ch))
            return HB_OP_BAD(c->st, HB_MSG_HBM_SHAPE3, HB_I(c->oi), HB_S(c->kind), HB_I(yi),
                             HB_I(1), HB_I(1), HB_I(ch));
    } else if (!(y->rank == 1 && y->dims[0] == ch)) {
        return HB_OP_BAD(c->st, HB_MSG_HBM_SHAPE1, HB_I(c->oi), HB_S(c->kind), HB_I(yi), HB_I(ch));
    }
    return 0;
}

static void prepare(const hb_graph *g, hb_op *o) {
    const hb_tensor *x = &g->tensors[o->idx[0]];
    decode(g->blob + o->params, &o->prep.p.mean);
    o->prep.in = (hb_nn_dims){x->dims[0], x->dims[1], x->dims[2]};
}

static void eval(const hb_graph *g, const hb_op *o, const hb_graph_rows *src) {
    (void)src;
    hb_nn_mean_s8(&o->prep.p.mean, &o->prep.in, hb_graph_act_of(g, o->idx[0]),
                  hb_graph_act_of(g, o->idx[o->n_in]));
}

const hb_op_reg hb_op_mean = {check, prepare, eval};
