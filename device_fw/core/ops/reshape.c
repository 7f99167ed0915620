/* RESHAPE (opcode 8): check, prepare, eval (no params). Kernel: core/nn/reshape.c. */
#include "ops/hb_op.h"

static int check(const hb_op_check_ctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0], yi = c->o->idx[1];
    if (hb_op_check_act_in(c, xi) || hb_op_check_act_out(c)) return -1;
    if (g->tensors[xi].n != g->tensors[yi].n)
        return HB_OP_BAD(c->st, HB_MSG_HBM_RESHAPE, HB_I(c->oi), HB_S(c->kind), HB_I(xi),
                         HB_I(g->tensors[xi].n), HB_I(yi), HB_I(g->tensors[yi].n));
    return 0;
}

static void prepare(const hb_graph *g, hb_op *o) { o->prep.n = g->tensors[o->idx[0]].n; }

static void eval(const hb_graph *g, const hb_op *o, const hb_graph_rows *src) {
    (void)src;
    hb_nn_reshape_s8(hb_graph_act_of(g, o->idx[0]), o->prep.n, hb_graph_act_of(g, o->idx[o->n_in]));
}

const hb_op_reg hb_op_reshape = {check, prepare, eval};
