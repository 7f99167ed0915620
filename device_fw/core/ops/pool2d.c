/* AVERAGE_POOL_2D (opcode 4) and MAX_POOL_2D (opcode 5): one record, decode, check, prepare;
 * an eval each. Kernels: core/nn/average_pool2d.c, core/nn/max_pool2d.c. */
#include "ops/hb_op.h"

_Static_assert(HB_REC_AVERAGE_POOL_2D_HEAD_SIZE == HB_REC_MAX_POOL_2D_HEAD_SIZE &&
                   HB_REC_AVERAGE_POOL_2D_OUT_W_OFF == HB_REC_MAX_POOL_2D_OUT_W_OFF,
               "the two pools share one record");

static void decode(const uint8_t *p, hb_nn_pool_params *o) {
    o->act_min = hb_graph_rec_i32(p, HB_REC_MAX_POOL_2D_ACT_MIN_OFF);
    o->act_max = hb_graph_rec_i32(p, HB_REC_MAX_POOL_2D_ACT_MAX_OFF);
    o->stride_h = p[HB_REC_MAX_POOL_2D_STRIDE_H_OFF];
    o->stride_w = p[HB_REC_MAX_POOL_2D_STRIDE_W_OFF];
    o->filter_h = p[HB_REC_MAX_POOL_2D_FILTER_H_OFF];
    o->filter_w = p[HB_REC_MAX_POOL_2D_FILTER_W_OFF];
    o->pad_top = p[HB_REC_MAX_POOL_2D_PAD_TOP_OFF];
    o->pad_left = p[HB_REC_MAX_POOL_2D_PAD_LEFT_OFF];
    o->out_h = hb_rd16(p + HB_REC_MAX_POOL_2D_OUT_H_OFF);
    o->out_w = hb_rd16(p + HB_REC_MAX_POOL_2D_OUT_W_OFF);
}

static int check(const hb_op_check_ctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0];
    if (hb_op_check_act_in(c, xi) || hb_op_check_act_out(c) || hb_op_check_rank3(c, xi)) return -1;
    const uint8_t *pp = g->blob + c->o->params;
    hb_nn_pool_params p;
    decode(pp, &p);
    return hb_op_check_geometry(c, xi, pp[HB_REC_MAX_POOL_2D_PADDING_OFF], p.filter_h, p.filter_w,
                                p.stride_h, p.stride_w, 1, 1, p.out_h, p.out_w, p.pad_top,
                                p.pad_left, g->tensors[xi].dims[2]);
}

static void prepare(const hb_graph *g, hb_op *o) {
    const hb_tensor *x = &g->tensors[o->idx[0]];
    decode(g->blob + o->params, &o->prep.p.pool);
    o->prep.in = (hb_nn_dims){x->dims[0], x->dims[1], x->dims[2]};
}

static void eval_average(const hb_graph *g, const hb_op *o, const hb_graph_rows *src) {
    (void)src;
    hb_nn_average_pool2d_s8(&o->prep.p.pool, &o->prep.in, hb_graph_act_of(g, o->idx[0]),
                            hb_graph_act_of(g, o->idx[o->n_in]));
}

static void eval_max(const hb_graph *g, const hb_op *o, const hb_graph_rows *src) {
    (void)src;
    hb_nn_max_pool2d_s8(&o->prep.p.pool, &o->prep.in, hb_graph_act_of(g, o->idx[0]),
                        hb_graph_act_of(g, o->idx[o->n_in]));
}

const hb_op_reg hb_op_average_pool2d = {check, prepare, eval_average};
const hb_op_reg hb_op_max_pool2d = {check, prepare, eval_max};
