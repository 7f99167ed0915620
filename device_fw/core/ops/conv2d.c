/* CONV_2D (opcode 2): decode (its record head is DEPTHWISE_CONV_2D's too), check, prepare,
 * eval. Kernel: core/nn/conv2d.c. */
#include "ops/hb_op.h"

/* CONV_2D and DEPTHWISE_CONV_2D share the head up to the activation field */
_Static_assert(HB_REC_CONV_2D_OUT_W_OFF == HB_REC_DEPTHWISE_CONV_2D_OUT_W_OFF &&
                   HB_REC_CONV_2D_STRIDE_H_OFF == HB_REC_DEPTHWISE_CONV_2D_STRIDE_H_OFF &&
                   HB_REC_CONV_2D_ACT_MAX_OFF == HB_REC_DEPTHWISE_CONV_2D_ACT_MAX_OFF,
               "CONV_2D and DEPTHWISE_CONV_2D records share their head");

static hb_nn_requant tail(const uint8_t *p, uint32_t head, uint32_t count_off) {
    const uint32_t n = hb_rd16(p + count_off);
    return (hb_nn_requant){p + head, (const int8_t *)(p + head + 4u * n), n};
}

void hb_op_conv_decode(const uint8_t *p, int depthwise, hb_nn_conv_params *o) {
    o->input_offset = hb_graph_rec_i32(p, HB_REC_CONV_2D_INPUT_OFFSET_OFF);
    o->output_offset = hb_graph_rec_i32(p, HB_REC_CONV_2D_OUTPUT_OFFSET_OFF);
    o->act_min = hb_graph_rec_i32(p, HB_REC_CONV_2D_ACT_MIN_OFF);
    o->act_max = hb_graph_rec_i32(p, HB_REC_CONV_2D_ACT_MAX_OFF);
    o->stride_h = p[HB_REC_CONV_2D_STRIDE_H_OFF];
    o->stride_w = p[HB_REC_CONV_2D_STRIDE_W_OFF];
    o->dilation_h = p[HB_REC_CONV_2D_DILATION_H_OFF];
    o->dilation_w = p[HB_REC_CONV_2D_DILATION_W_OFF];
    o->pad_top = p[HB_REC_CONV_2D_PAD_TOP_OFF];
    o->pad_left = p[HB_REC_CONV_2D_PAD_LEFT_OFF];
    o->out_h = hb_rd16(p + HB_REC_CONV_2D_OUT_H_OFF);
    o->out_w = hb_rd16(p + HB_REC_CONV_2D_OUT_W_OFF);
    if (depthwise) {
        o->depth_multiplier = hb_rd16(p + HB_REC_DEPTHWISE_CONV_2D_DEPTH_MULTIPLIER_OFF);
        o->rq = tail(p, HB_REC_DEPTHWISE_CONV_2D_HEAD_SIZE,
                     HB_REC_DEPTHWISE_CONV_2D_CHANNEL_COUNT_OFF);
    } else {
        o->depth_multiplier = 1;
        o->rq = tail(p, HB_REC_CONV_2D_HEAD_SIZE, HB_REC_CONV_2D_CHANNEL_COUNT_OFF);
    }
}

static int check(const hb_op_check_ctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0], wi = c->o->idx[1];
    if (hb_op_check_act_in(c, xi) || hb_op_check_act_out(c) || hb_op_check_rank3(c, xi)) return -1;
    const uint8_t *pp = g->blob + c->o->params;
    hb_nn_conv_params p;
    hb_op_conv_decode(pp, 0, &p);
    const hb_tensor *x = &g->tensors[xi], *w = &g->tensors[wi];
    const uint64_t cin = x->dims[2];
    if (!(hb_graph_is_const(g, wi) && w->dtype == HB_DTYPE_INT8 && w->rank == 4 &&
          w->dims[3] == cin))
        return HB_OP_BAD(c->st, HB_MSG_HBM_CONV_FILTER, HB_I(c->oi), HB_S(c->kind), HB_I(wi),
                         HB_I(cin));
    const uint32_t n_out = w->dims[0];
    if (hb_op_check_filter_and_bias(c, n_out, 0, p.rq.n)) return -1;
    return hb_op_check_geometry(c, xi, pp[HB_REC_CONV_2D_PADDING_OFF], w->dims[1], w->dims[2],
                                p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.out_h,
                                p.out_w, p.pad_top, p.pad_left, n_out);
}

static void prepare(const hb_graph *g, hb_op *o) {
    const hb_tensor *x = &g->tensors[o->idx[0]], *w = &g->tensors[o->idx[1]];
    hb_op_conv_decode(g->blob + o->params, 0, &o->prep.p.conv);
    o->prep.in = (hb_nn_dims){x->dims[0], x->dims[1], x->dims[2]};
    o->prep.kh = w->dims[1];
    o->prep.kw = w->dims[2];
    o->prep.m = w->dims[0];
    o->prep.row_len = w->n / w->dims[0];
    o->prep.row_step = 1;
}

static void eval(const hb_graph *g, const hb_op *o, const hb_graph_rows *src) {
    hb_op_rows rows;
    hb_op_rows_of(g, o, src, &rows);
    hb_nn_conv2d_s8(&o->prep.p.conv, &o->prep.in, hb_graph_act_of(g, o->idx[0]), &rows.r,
                    o->prep.kh, o->prep.kw, o->prep.m, hb_graph_act_of(g, o->idx[o->n_in]));
}

const hb_op_reg hb_op_conv2d = {check, prepare, eval};
