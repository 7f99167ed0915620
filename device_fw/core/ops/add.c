/* ADD of two same-shape tensors (opcode 7): decode, check, prepare, eval. Kernel:
 * core/nn/add.c. */
#include "ops/hb_op.h"

static void decode(const uint8_t *p, hb_nn_add_params *o) {
    o->input1_offset = hb_graph_rec_i32(p, HB_REC_ADD_INPUT1_OFFSET_OFF);
    o->input2_offset = hb_graph_rec_i32(p, HB_REC_ADD_INPUT2_OFFSET_OFF);
    o->output_offset = hb_graph_rec_i32(p, HB_REC_ADD_OUTPUT_OFFSET_OFF);
    o->act_min = hb_graph_rec_i32(p, HB_REC_ADD_ACT_MIN_OFF);
    o->act_max = hb_graph_rec_i32(p, HB_REC_ADD_ACT_MAX_OFF);
    o->left_shift = hb_graph_rec_i32(p, HB_REC_ADD_LEFT_SHIFT_OFF);
    o->input1_multiplier = hb_graph_rec_i32(p, HB_REC_ADD_INPUT1_MULTIPLIER_OFF);
    o->input1_shift = hb_graph_rec_i32(p, HB_REC_ADD_INPUT1_SHIFT_OFF);
    o->input2_multiplier = hb_graph_rec_i32(p, HB_REC_ADD_INPUT2_MULTIPLIER_OFF);
    o->input2_shift = hb_graph_rec_i32(p, HB_REC_ADD_INPUT2_SHIFT_OFF);
    o->output_multiplier = hb_graph_rec_i32(p, HB_REC_ADD_OUTPUT_MULTIPLIER_OFF);
    o->output_shift = hb_graph_rec_i32(p, HB_REC_ADD_OUTPUT_SHIFT_OFF);
}

static int same_shape(const hb_tensor *a, const hb_tensor *b) {
    if (a->rank != b->rank) return 0;
    for (uint8_t j = 0; j < a->rank; j++)
        if (a->dims[j] != b->dims[j]) return 0;
    return 1;
}

static int check(const hb_op_check_ctx *c) {
    const hb_graph *g = c->g;
    const uint16_t ai = c->o->idx[0], bi = c->o->idx[1], yi = c->o->idx[2];
    if (hb_op_check_act_in(c, ai) || hb_op_check_act_in(c, bi) || hb_op_check_act_out(c))
        return -1;
    if (!same_shape(&g->tensors[ai], &g->tensors[bi]) ||
        !same_shape(&g->tensors[bi], &g->tensors[yi]))
        return HB_OP_BAD(c->st, HB_MSG_HBM_ADD_SHAPES, HB_I(c->oi), HB_S(c->kind), HB_I(ai),
                         HB_I(bi), HB_I(yi));
    return 0;
}

static void prepare(const hb_graph *g, hb_op *o) {
    decode(g->blob + o->params, &o->prep.p.add);
    o->prep.n = g->tensors[o->idx[0]].n;
}

static void eval(const hb_graph *g, const hb_op *o, const hb_graph_rows *src) {
    (void)src;
    hb_nn_add_s8(&o->prep.p.add, hb_graph_act_of(g, o->idx[0]), hb_graph_act_of(g, o->idx[1]),
                 o->prep.n, hb_graph_act_of(g, o->idx[o->n_in]));
}

const hb_op_reg hb_op_add = {check, prepare, eval};
