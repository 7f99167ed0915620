/* DEPTHWISE_CONV_2D (opcode 3): check, prepare, eval (the record is decoded as CONV_2D's with a
 * depth multiplier, hb_op_conv_decode). Kernel: core/nn/depthwise_conv2d.c. */
#include "ops/hb_op.h"

static int check(const hb_op_check_ctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0], wi = c->o->idx[1];
    if (hb_op_check_act_in(c, xi) || hb_op_check_act_out(c) || hb_op_check_rank3(c, xi)) return -1;
    const uint8_t *pp = g->blob + c->o->params;
    hb_nn_conv_params p;
    hb_op_conv_decode(pp, 1, &p);
    const hb_tensor *x = &g->tensors[xi], *w = &g->tensors[wi];
    const uint64_t n_out = (uint64_t)x->dims[2] * p.depth_multiplier;
    if (!(hb_graph_is_const(g, wi) && w->dtype == HB_DTYPE_INT8 && w->rank == 4 &&
          w->dims[0] == 1 && w->dims[3] == n_out))
        return HB_OP_BAD(c->st, HB_MSG_HBM_DW_FILTER, HB_I(c->oi), HB_S(c->kind), HB_I(wi),
                         HB_I(n_out));
    if (hb_op_check_filter_and_bias(c, (uint32_t)n_out, 3, p.rq.n)) return -1;
    return hb_op_check_geometry(c, xi, pp[HB_REC_CONV_2D_PADDING_OFF], w->dims[1], w->dims[2],
                                p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.out_h,
                                p.out_w, p.pad_top, p.pad_left, (uint32_t)n_out);
}

static void prepare(const hb_graph *g, hb_op *o) {
    const hb_tensor *x = &g->tensors[o->idx[0]], *w = &g->tensors[o->idx[1]];
    hb_op_conv_decode(g->blob + o->params, 1, &o->prep.p.conv);
    o->prep.in = (hb_nn_dims){x->dims[0], x->dims[1], x->dims[2]};
    o->prep.kh = w->dims[1];
    o->prep.kw = w->dims[2];
    o->prep.row_len = w->dims[1] * w->dims[2];
    o->prep.row_step = w->dims[3]; /* in place, a row's taps are the channels apart */
}

static void eval(const hb_graph *g, const hb_op *o, const hb_graph_rows *src) {
    hb_op_rows rows;
    hb_op_rows_of(g, o, src, &rows);
    hb_nn_depthwise_conv2d_s8(&o->prep.p.conv, &o->prep.in, hb_graph_act_of(g, o->idx[0]),
                              &rows.r, o->prep.kh, o->prep.kw, hb_graph_act_of(g, o->idx[o->n_in]));
}

const hb_op_reg hb_op_depthwise_conv2d = {check, prepare, eval};
