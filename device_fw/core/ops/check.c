/* What the ops' checks share (hb_op.h): the blob's rules for activations, filters, biases and
 * window geometry, each refusal the declared BAD_MODEL message (gen/hb_blob.h HB_MSG_HBM_*,
 * byte-identical to hilbench's blob checker). Moved here from core/blob.c unchanged. */
#include "ops/hb_op.h"

int hb_op_check_act_in(const hb_op_check_ctx *c, uint16_t t) {
    if (!hb_graph_is_activation(c->g, t))
        return HB_OP_BAD(c->st, HB_MSG_HBM_ACT_IN, HB_I(c->oi), HB_S(c->kind), HB_I(t));
    return 0;
}

int hb_op_check_act_out(const hb_op_check_ctx *c) {
    const uint16_t t = c->o->idx[c->o->n_in];
    if (!hb_graph_is_activation(c->g, t))
        return HB_OP_BAD(c->st, HB_MSG_HBM_ACT_OUT, HB_I(c->oi), HB_S(c->kind), HB_I(t));
    return 0;
}

int hb_op_check_rank3(const hb_op_check_ctx *c, uint16_t x) {
    const hb_tensor *t = &c->g->tensors[x];
    if (t->rank != 3)
        return HB_OP_BAD(c->st, HB_MSG_HBM_RANK3, HB_I(c->oi), HB_S(c->kind), HB_I(x),
                         HB_I(t->rank));
    return 0;
}

int hb_op_check_filter_and_bias(const hb_op_check_ctx *c, uint32_t n_out, int32_t axis,
                                uint32_t n_channels) {
    hb_graph *g = c->g;
    const uint16_t wi = c->o->idx[1];
    const uint16_t nq = g->n_q[wi];
    if (nq != 1 && (nq != n_out || g->axis[wi] != axis))
        return HB_OP_BAD(c->st, HB_MSG_HBM_FILTER_SCALES, HB_I(c->oi), HB_S(c->kind), HB_I(wi),
                         HB_I(nq), HB_I(g->axis[wi]), HB_I(n_out), HB_I(axis));
    if (n_channels != nq)
        return HB_OP_BAD(c->st, HB_MSG_HBM_CHANNELS, HB_I(c->oi), HB_S(c->kind), HB_I(n_channels),
                         HB_I(wi), HB_I(nq));
    if (c->o->n_in > 2) {
        const uint16_t bi = c->o->idx[2];
        const hb_tensor *b = &g->tensors[bi];
        if (!(hb_graph_is_const(g, bi) && b->dtype == HB_DTYPE_INT32 && b->rank == 1 &&
              b->dims[0] == n_out && g->n_q[bi] == nq))
            return HB_OP_BAD(c->st, HB_MSG_HBM_BIAS, HB_I(c->oi), HB_S(c->kind), HB_I(bi),
                             HB_I(n_out), HB_I(nq));
        g->tensors[bi].role = HB_ROLE_BIAS;
        g->tensors[bi].opcode = c->o->opcode;
    }
    g->tensors[wi].role = HB_ROLE_WEIGHT;
    g->tensors[wi].opcode = c->o->opcode;
    return 0;
}

static int64_t floor_div(int64_t a, int64_t b) { /* b > 0 */
    const int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* TFLite's ComputeOutSize and ComputePaddingWithOffset (docs/model-blob.md) */
static void window(uint8_t padding, int64_t in, int64_t k, int64_t stride, int64_t dil,
                   int64_t *out, int64_t *pad) {
    const int64_t eff = (k - 1) * dil + 1;
    *out = padding == HB_PADDING_SAME ? floor_div(in + stride - 1, stride)
                                      : floor_div(in + stride - eff, stride);
    const int64_t total = (*out - 1) * stride + eff - in;
    *pad = (total > 0 ? total : 0) / 2;
}

int hb_op_check_geometry(const hb_op_check_ctx *c, uint16_t x, uint8_t padding, uint32_t kh,
                         uint32_t kw, uint32_t sh, uint32_t sw, uint32_t dh, uint32_t dw,
                         uint32_t out_h, uint32_t out_w, uint32_t pad_top, uint32_t pad_left,
                         uint32_t n_out) {
    const hb_tensor *t = &c->g->tensors[x];
    int64_t oh, ow, pt, pl;
    window(padding, t->dims[0], kh, sh, dh, &oh, &pt);
    window(padding, t->dims[1], kw, sw, dw, &ow, &pl);
    if (oh != out_h || ow != out_w || pt != pad_top || pl != pad_left)
        return HB_OP_BAD(c->st, HB_MSG_HBM_GEOMETRY, HB_I(c->oi), HB_S(c->kind), HB_I(out_h),
                         HB_I(out_w), HB_I(pad_top), HB_I(pad_left), HB_I(oh), HB_I(ow), HB_I(pt),
                         HB_I(pl));
    const uint16_t yi = c->o->idx[c->o->n_in];
    const hb_tensor *y = &c->g->tensors[yi];
    if (y->rank != 3 || y->dims[0] != oh || y->dims[1] != ow || y->dims[2] != n_out)
        return HB_OP_BAD(c->st, HB_MSG_HBM_SHAPE3, HB_I(c->oi), HB_S(c->kind), HB_I(yi), HB_I(oh),
                         HB_I(ow), HB_I(n_out));
    return 0;
}
