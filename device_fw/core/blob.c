/* The model-blob parser: every rule a device checks in an HBM0 blob (docs/model-blob.md,
 * "What a device checks"), in that order, each refusal BAD_MODEL with the declared message
 * (gen/hb_blob.h HB_MSG_HBM_*; hilbench/device/blobcheck.py is the same parser in Python).
 *
 * Three passes: structure (every count, length, offset and index checked against what
 * remains and the tables already read, before use), graph (data flow, dtypes, shapes,
 * geometry), plan (core/plan.c). Nothing from the blob is trusted before it is checked;
 * products of blob values are formed in 64 bits. */
#include <stddef.h>

#include "graph_types.h"
#include "hb_bytes.h"
#include "hb_crc.h"
#include "hb_wire.h"

/* ---- op kinds and param records (generated tables) --------------------------------------- */

typedef struct {
    const char *name;
    uint16_t off;
    uint8_t fmt;
    int64_t lo, hi;
} rec_field;

typedef struct {
    const char *name;
    uint8_t min_in, max_in, n_out;
    const rec_field *fields; /* ends with a NULL name */
    uint16_t head;
    uint8_t per_channel;
    int32_t count_off;
} op_kind;

#define FIELD_ROW(K, F, name, off, fmt, lo, hi) {name, off, fmt, lo, hi},
#define FIELD_TABLE(K, code, name, lo, hi, nout)                                              \
    static const rec_field fields_##K[] = {HB_REC_##K##_FIELDS(FIELD_ROW){NULL, 0, 0, 0, 0}};
HB_OPS(FIELD_TABLE)

static const op_kind kinds[HB_OP_MAX_CODE + 1] = {
#define KIND_ROW(K, code, name, lo, hi, nout)                                                 \
    [code] = {name,           lo, hi, nout, fields_##K, HB_REC_##K##_HEAD_SIZE,               \
              HB_REC_##K##_PER_CHANNEL, HB_REC_##K##_CHANNEL_COUNT_OFF},
    HB_OPS(KIND_ROW)
#undef KIND_ROW
};

const char *hb_op_name(uint8_t opcode) {
    return opcode <= HB_OP_MAX_CODE && kinds[opcode].name ? kinds[opcode].name : "?";
}

static int streq(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

static int64_t field_value(const uint8_t *p, uint8_t fmt) {
    switch (fmt) {
    case HB_FMT_U8: return p[0];
    case HB_FMT_I8: return (int64_t)p[0] - (p[0] >= 0x80 ? 0x100 : 0);
    case HB_FMT_U16: return hb_rd16(p);
    case HB_FMT_I16: return (int64_t)hb_rd16(p) - (hb_rd16(p) >= 0x8000 ? 0x10000 : 0);
    case HB_FMT_U32: return hb_rd32(p);
    default: return hb_fp_wrap32(hb_rd32(p)); /* HB_FMT_I32 */
    }
}

/* ---- decoding a checked record (also used by graph.c to run the op) ----------------------- */

static int32_t i32_at(const uint8_t *p, uint32_t off) { return hb_fp_wrap32(hb_rd32(p + off)); }

static hb_nn_requant tail(const uint8_t *p, uint32_t head, uint32_t count_off) {
    const uint32_t n = hb_rd16(p + count_off);
    return (hb_nn_requant){p + head, (const int8_t *)(p + head + 4u * n), n};
}

void hb_decode_fc(const uint8_t *p, hb_nn_fc_params *o) {
    o->input_offset = i32_at(p, HB_REC_FULLY_CONNECTED_INPUT_OFFSET_OFF);
    o->output_offset = i32_at(p, HB_REC_FULLY_CONNECTED_OUTPUT_OFFSET_OFF);
    o->act_min = i32_at(p, HB_REC_FULLY_CONNECTED_ACT_MIN_OFF);
    o->act_max = i32_at(p, HB_REC_FULLY_CONNECTED_ACT_MAX_OFF);
    o->rq = tail(p, HB_REC_FULLY_CONNECTED_HEAD_SIZE, HB_REC_FULLY_CONNECTED_CHANNEL_COUNT_OFF);
}

/* CONV_2D and DEPTHWISE_CONV_2D share the head up to the activation field */
_Static_assert(HB_REC_CONV_2D_OUT_W_OFF == HB_REC_DEPTHWISE_CONV_2D_OUT_W_OFF &&
                   HB_REC_CONV_2D_STRIDE_H_OFF == HB_REC_DEPTHWISE_CONV_2D_STRIDE_H_OFF &&
                   HB_REC_CONV_2D_ACT_MAX_OFF == HB_REC_DEPTHWISE_CONV_2D_ACT_MAX_OFF,
               "CONV_2D and DEPTHWISE_CONV_2D records share their head");

void hb_decode_conv(const uint8_t *p, int depthwise, hb_nn_conv_params *o) {
    o->input_offset = i32_at(p, HB_REC_CONV_2D_INPUT_OFFSET_OFF);
    o->output_offset = i32_at(p, HB_REC_CONV_2D_OUTPUT_OFFSET_OFF);
    o->act_min = i32_at(p, HB_REC_CONV_2D_ACT_MIN_OFF);
    o->act_max = i32_at(p, HB_REC_CONV_2D_ACT_MAX_OFF);
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

_Static_assert(HB_REC_AVERAGE_POOL_2D_HEAD_SIZE == HB_REC_MAX_POOL_2D_HEAD_SIZE &&
                   HB_REC_AVERAGE_POOL_2D_OUT_W_OFF == HB_REC_MAX_POOL_2D_OUT_W_OFF,
               "the two pools share one record");

void hb_decode_pool(const uint8_t *p, hb_nn_pool_params *o) {
    o->act_min = i32_at(p, HB_REC_MAX_POOL_2D_ACT_MIN_OFF);
    o->act_max = i32_at(p, HB_REC_MAX_POOL_2D_ACT_MAX_OFF);
    o->stride_h = p[HB_REC_MAX_POOL_2D_STRIDE_H_OFF];
    o->stride_w = p[HB_REC_MAX_POOL_2D_STRIDE_W_OFF];
    o->filter_h = p[HB_REC_MAX_POOL_2D_FILTER_H_OFF];
    o->filter_w = p[HB_REC_MAX_POOL_2D_FILTER_W_OFF];
    o->pad_top = p[HB_REC_MAX_POOL_2D_PAD_TOP_OFF];
    o->pad_left = p[HB_REC_MAX_POOL_2D_PAD_LEFT_OFF];
    o->out_h = hb_rd16(p + HB_REC_MAX_POOL_2D_OUT_H_OFF);
    o->out_w = hb_rd16(p + HB_REC_MAX_POOL_2D_OUT_W_OFF);
}

void hb_decode_mean(const uint8_t *p, hb_nn_mean_params *o, int *keep_dims) {
    o->input_zero_point = i32_at(p, HB_REC_MEAN_INPUT_ZERO_POINT_OFF);
    o->output_offset = i32_at(p, HB_REC_MEAN_OUTPUT_OFFSET_OFF);
    o->multiplier = i32_at(p, HB_REC_MEAN_MULTIPLIER_OFF);
    o->shift = i32_at(p, HB_REC_MEAN_SHIFT_OFF);
    o->count = hb_rd32(p + HB_REC_MEAN_COUNT_OFF);
    *keep_dims = p[HB_REC_MEAN_KEEP_DIMS_OFF];
}

void hb_decode_add(const uint8_t *p, hb_nn_add_params *o) {
    o->input1_offset = i32_at(p, HB_REC_ADD_INPUT1_OFFSET_OFF);
    o->input2_offset = i32_at(p, HB_REC_ADD_INPUT2_OFFSET_OFF);
    o->output_offset = i32_at(p, HB_REC_ADD_OUTPUT_OFFSET_OFF);
    o->act_min = i32_at(p, HB_REC_ADD_ACT_MIN_OFF);
    o->act_max = i32_at(p, HB_REC_ADD_ACT_MAX_OFF);
    o->left_shift = i32_at(p, HB_REC_ADD_LEFT_SHIFT_OFF);
    o->input1_multiplier = i32_at(p, HB_REC_ADD_INPUT1_MULTIPLIER_OFF);
    o->input1_shift = i32_at(p, HB_REC_ADD_INPUT1_SHIFT_OFF);
    o->input2_multiplier = i32_at(p, HB_REC_ADD_INPUT2_MULTIPLIER_OFF);
    o->input2_shift = i32_at(p, HB_REC_ADD_INPUT2_SHIFT_OFF);
    o->output_multiplier = i32_at(p, HB_REC_ADD_OUTPUT_MULTIPLIER_OFF);
    o->output_shift = i32_at(p, HB_REC_ADD_OUTPUT_SHIFT_OFF);
}

/* ---- pass 1: structure -------------------------------------------------------------------- */

typedef struct {
    const uint8_t *d;
    uint32_t pos, end;
    hb_status *st;
} reader;

/* st = BAD_MODEL with template fmt; returns -1 */
#define BAD(st, fmt, ...) HB_FAIL((st), HB_ERR_BAD_MODEL, (fmt), __VA_ARGS__)

/* the part of the blob named by WHAT template `what` (with an index, or -1 for none) */
static size_t what_text(char *buf, size_t cap, const char *what, int64_t index) {
    const hb_arg a = HB_I(index);
    return hb_format(buf, cap, what, &a, index < 0 ? 0 : 1);
}

static int take(reader *r, uint32_t n, const char *what, int64_t index, const uint8_t **out) {
    const uint32_t left = r->end - r->pos;
    if (n > left) {
        char w[64];
        const size_t wl = what_text(w, sizeof w, what, index);
        return BAD(r->st, HB_MSG_HBM_TRUNCATED, HB_SN(w, wl), HB_I(n), HB_I(r->pos), HB_I(left));
    }
    if (out) *out = r->d + r->pos;
    r->pos += n;
    return 0;
}

/* zero padding to the next multiple of 4 (never past the body: it ends at a multiple of 4) */
static int align(reader *r, const char *what, int64_t index) {
    const uint32_t start = r->pos;
    while (r->pos % HB_BLOB_ALIGN) {
        if (r->d[r->pos] != 0) {
            char w[64];
            const size_t wl = what_text(w, sizeof w, what, index);
            return BAD(r->st, HB_MSG_HBM_PADDING, HB_SN(w, wl), HB_I(start));
        }
        r->pos++;
    }
    return 0;
}

static int header(hb_graph *g, const uint8_t *d, uint32_t len, uint16_t *name_len,
                  hb_status *st) {
    if (len < HB_BLOB_HEADER_SIZE + HB_BLOB_CRC_SIZE)
        return BAD(st, HB_MSG_HBM_SHORT, HB_I(len), HB_I(HB_BLOB_HEADER_SIZE),
                   HB_I(HB_BLOB_CRC_SIZE));
    if (d[0] != HB_BLOB_MAGIC_0 || d[1] != HB_BLOB_MAGIC_1 || d[2] != HB_BLOB_MAGIC_2 ||
        d[3] != HB_BLOB_MAGIC_3)
        return BAD(st, HB_MSG_HBM_MAGIC, HB_I(d[0]), HB_I(d[1]), HB_I(d[2]), HB_I(d[3]),
                   HB_I(HB_BLOB_MAGIC_0), HB_I(HB_BLOB_MAGIC_1), HB_I(HB_BLOB_MAGIC_2),
                   HB_I(HB_BLOB_MAGIC_3));
    const uint16_t version = hb_rd16(d + HB_BLOB_HEADER_VERSION_OFF);
    if (version != HB_BLOB_VERSION)
        return BAD(st, HB_MSG_HBM_VERSION, HB_I(version), HB_I(HB_BLOB_VERSION));
    if (len % HB_BLOB_ALIGN) return BAD(st, HB_MSG_HBM_LENGTH, HB_I(len), HB_I(HB_BLOB_ALIGN));
    const uint32_t body = len - HB_BLOB_CRC_SIZE;
    const uint32_t field_crc = hb_rd32(d + body);
    const uint32_t crc = hb_crc32(0, d, body);
    if (field_crc != crc) return BAD(st, HB_MSG_HBM_CRC, HB_I(field_crc), HB_I(crc));
    const uint16_t flags = hb_rd16(d + HB_BLOB_HEADER_FLAGS_OFF);
    if (flags != 0) return BAD(st, HB_MSG_HBM_FLAGS, HB_I(flags));
    g->n_tensors = hb_rd16(d + HB_BLOB_HEADER_N_TENSORS_OFF);
    g->n_ops = hb_rd16(d + HB_BLOB_HEADER_N_OPS_OFF);
    g->n_sections = hb_rd16(d + HB_BLOB_HEADER_N_SECTIONS_OFF);
    g->input = hb_rd16(d + HB_BLOB_HEADER_INPUT_OFF);
    g->output = hb_rd16(d + HB_BLOB_HEADER_OUTPUT_OFF);
    *name_len = hb_rd16(d + HB_BLOB_HEADER_NAME_LEN_OFF);
    if (g->n_tensors == 0) return HB_FAIL0(st, HB_ERR_BAD_MODEL, HB_MSG_HBM_NO_TENSORS);
    if (g->n_tensors > HB_MAX_TENSORS)
        return BAD(st, HB_MSG_HBM_TENSORS, HB_I(g->n_tensors), HB_I(HB_MAX_TENSORS));
    if (g->n_ops > HB_MAX_OPS) return BAD(st, HB_MSG_HBM_OPS, HB_I(g->n_ops), HB_I(HB_MAX_OPS));
    if (g->n_sections > HB_MAX_SECTIONS)
        return BAD(st, HB_MSG_HBM_SECTIONS, HB_I(g->n_sections), HB_I(HB_MAX_SECTIONS));
    if (g->input >= g->n_tensors)
        return BAD(st, HB_MSG_HBM_INPUT_INDEX, HB_I(g->input), HB_I(g->n_tensors));
    if (g->output >= g->n_tensors)
        return BAD(st, HB_MSG_HBM_OUTPUT_INDEX, HB_I(g->output), HB_I(g->n_tensors));
    return 0;
}

static int tensor(hb_graph *g, reader *r, uint16_t ti) {
    hb_status *st = r->st;
    const uint8_t *h;
    if (take(r, HB_BLOB_TENSOR_SIZE, HB_WHAT_HBM_TENSOR, ti, &h)) return -1;
    const uint8_t dtype = h[HB_BLOB_TENSOR_DTYPE_OFF], rank = h[HB_BLOB_TENSOR_RANK_OFF];
    const uint8_t flags = h[HB_BLOB_TENSOR_FLAGS_OFF];
    const int32_t axis = (int32_t)field_value(h + HB_BLOB_TENSOR_AXIS_OFF, HB_FMT_I8);
    const uint16_t name_len = hb_rd16(h + HB_BLOB_TENSOR_NAME_LEN_OFF);
    const uint16_t n_q = hb_rd16(h + HB_BLOB_TENSOR_N_Q_OFF);
    if (dtype != HB_DTYPE_INT8 && dtype != HB_DTYPE_INT32)
        return BAD(st, HB_MSG_HBM_DTYPE, HB_I(ti), HB_I(dtype));
    if (rank < 1 || rank > HB_MAX_RANK)
        return BAD(st, HB_MSG_HBM_RANK, HB_I(ti), HB_I(rank), HB_I(HB_MAX_RANK));
    if (flags & ~HB_TENSOR_FLAG_HAS_DATA) return BAD(st, HB_MSG_HBM_TENSOR_FLAGS, HB_I(ti), HB_I(flags));
    if (axis < -1 || axis >= rank) return BAD(st, HB_MSG_HBM_AXIS, HB_I(ti), HB_I(axis), HB_I(rank - 1));
    const uint8_t *dp;
    if (take(r, 4u * rank, HB_WHAT_HBM_DIMS, ti, &dp)) return -1;
    hb_tensor *t = &g->tensors[ti];
    uint64_t n = 1;
    for (uint8_t j = 0; j < rank; j++) {
        t->dims[j] = hb_rd32(dp + 4u * j);
        if (t->dims[j] == 0) return BAD(st, HB_MSG_HBM_DIM, HB_I(ti), HB_I(j));
        n *= t->dims[j]; /* <= 2^26 * (2^32 - 1) < 2^64 */
        if (n > HB_MAX_ELEMENTS) return BAD(st, HB_MSG_HBM_ELEMENTS, HB_I(ti), HB_I(HB_MAX_ELEMENTS));
    }
    if (n_q == 0 && axis != -1) return BAD(st, HB_MSG_HBM_AXIS_UNQUANTIZED, HB_I(ti), HB_I(axis));
    if (n_q > 1 && axis == -1) return BAD(st, HB_MSG_HBM_SCALES_NO_AXIS, HB_I(ti), HB_I(n_q));
    if (n_q >= 1 && axis != -1 && t->dims[axis] != n_q)
        return BAD(st, HB_MSG_HBM_SCALES_AXIS, HB_I(ti), HB_I(n_q), HB_I(axis), HB_I(t->dims[axis]));
    if (take(r, 4u * n_q, HB_WHAT_HBM_SCALES, ti, NULL)) return -1;
    if (take(r, 4u * n_q, HB_WHAT_HBM_ZERO_POINTS, ti, NULL)) return -1;
    if (take(r, name_len, HB_WHAT_HBM_TENSOR_NAME, ti, NULL)) return -1;
    if (align(r, HB_WHAT_HBM_TENSOR_NAME, ti)) return -1;
    t->dtype = dtype;
    t->rank = rank;
    t->n = (uint32_t)n;
    t->role = HB_ROLE_ACTIVATION;
    t->opcode = 0;
    t->offset = 0;
    g->n_q[ti] = n_q;
    g->axis[ti] = (int8_t)axis;
    if (flags & HB_TENSOR_FLAG_HAS_DATA) {
        const uint8_t *lp;
        if (take(r, 4, HB_WHAT_HBM_DATA_LENGTH, ti, &lp)) return -1;
        const uint32_t nbytes = hb_rd32(lp);
        const uint64_t want = n * (dtype == HB_DTYPE_INT8 ? HB_DTYPE_INT8_SIZE : HB_DTYPE_INT32_SIZE);
        if (nbytes != want) return BAD(st, HB_MSG_HBM_DATA_LENGTH, HB_I(ti), HB_I(nbytes), HB_I(want));
        t->role = HB_ROLE_CONST;
        t->offset = r->pos;
        if (take(r, nbytes, HB_WHAT_HBM_DATA, ti, NULL)) return -1;
        if (align(r, HB_WHAT_HBM_DATA, ti)) return -1;
    }
    return 0;
}

static int params(const reader *r, uint16_t oi, uint8_t opcode, uint32_t base, uint32_t n) {
    hb_status *st = r->st;
    const op_kind *k = &kinds[opcode];
    const uint8_t *p = r->d + base;
    if (n < k->head) return BAD(st, HB_MSG_HBM_PARAMS_SHORT, HB_I(oi), HB_S(k->name), HB_I(n), HB_I(k->head));
    int64_t act_min = 0, act_max = 0;
    int has_min = 0, has_max = 0;
    for (const rec_field *f = k->fields; f->name; f++) {
        const int64_t v = field_value(p + f->off, f->fmt);
        if (v < f->lo || v > f->hi)
            return BAD(st, HB_MSG_HBM_FIELD, HB_I(oi), HB_S(k->name), HB_S(f->name), HB_I(v),
                       HB_I(f->lo), HB_I(f->hi));
        if (streq(f->name, "act_min")) {
            act_min = v;
            has_min = 1;
        } else if (streq(f->name, "act_max")) {
            act_max = v;
            has_max = 1;
        }
    }
    if (has_min && has_max && act_min > act_max)
        return BAD(st, HB_MSG_HBM_ACT_RANGE, HB_I(oi), HB_S(k->name), HB_I(act_min), HB_I(act_max));
    const uint32_t nch = k->per_channel ? hb_rd16(p + k->count_off) : 0;
    const uint32_t used = k->head + 5u * nch;
    const uint32_t need = (uint32_t)hb_pad4(used);
    if (n != need) return BAD(st, HB_MSG_HBM_PARAMS_LENGTH, HB_I(oi), HB_S(k->name), HB_I(n), HB_I(need));
    for (uint32_t c = 0; c < nch; c++) {
        const int32_t m = hb_fp_wrap32(hb_rd32(p + k->head + 4u * c));
        if (m < HB_REC_MULTIPLIER_MIN || m > HB_REC_MULTIPLIER_MAX)
            return BAD(st, HB_MSG_HBM_MULTIPLIER, HB_I(oi), HB_S(k->name), HB_I(c), HB_I(m),
                       HB_I(HB_REC_MULTIPLIER_MIN), HB_I(HB_REC_MULTIPLIER_MAX));
    }
    for (uint32_t c = 0; c < nch; c++) {
        const int64_t s = field_value(p + k->head + 4u * nch + c, HB_FMT_I8);
        if (s < HB_REC_SHIFT_MIN || s > HB_REC_SHIFT_MAX)
            return BAD(st, HB_MSG_HBM_SHIFT, HB_I(oi), HB_S(k->name), HB_I(c), HB_I(s),
                       HB_I(HB_REC_SHIFT_MIN), HB_I(HB_REC_SHIFT_MAX));
    }
    for (uint32_t i = used; i < n; i++) {
        if (p[i] != 0) {
            char w[64];
            const size_t wl = what_text(w, sizeof w, HB_WHAT_HBM_PARAMS, oi);
            return BAD(st, HB_MSG_HBM_PADDING, HB_SN(w, wl), HB_I(base + used));
        }
    }
    return 0;
}

static int op(hb_graph *g, reader *r, uint16_t oi) {
    hb_status *st = r->st;
    const uint8_t *h;
    if (take(r, HB_BLOB_OP_SIZE, HB_WHAT_HBM_OP, oi, &h)) return -1;
    const uint8_t opcode = h[HB_BLOB_OP_OPCODE_OFF], n_in = h[HB_BLOB_OP_N_INPUTS_OFF];
    const uint8_t n_out = h[HB_BLOB_OP_N_OUTPUTS_OFF], res = h[HB_BLOB_OP_RESERVED_OFF];
    if (opcode > HB_OP_MAX_CODE || kinds[opcode].name == NULL)
        return BAD(st, HB_MSG_HBM_OPCODE, HB_I(oi), HB_I(opcode));
    if (res != 0) return BAD(st, HB_MSG_HBM_OP_RESERVED, HB_I(oi), HB_I(res));
    const op_kind *k = &kinds[opcode];
    if (n_in < k->min_in || n_in > k->max_in || n_out != k->n_out)
        return BAD(st, HB_MSG_HBM_ARITY, HB_I(oi), HB_S(k->name), HB_I(n_in), HB_I(n_out),
                   HB_I(k->min_in), HB_I(k->max_in), HB_I(k->n_out));
    const uint8_t *ip;
    const uint32_t n_idx = (uint32_t)n_in + n_out;
    if (take(r, 2u * n_idx, HB_WHAT_HBM_INDICES, oi, &ip)) return -1;
    hb_op *o = &g->ops[oi];
    for (uint32_t j = 0; j < n_idx; j++) {
        const uint16_t t = hb_rd16(ip + 2u * j);
        if (t >= g->n_tensors) return BAD(st, HB_MSG_HBM_INDEX, HB_I(oi), HB_I(t), HB_I(g->n_tensors));
        o->idx[j] = t;
    }
    if (align(r, HB_WHAT_HBM_INDICES, oi)) return -1;
    const uint8_t *lp;
    if (take(r, 4, HB_WHAT_HBM_PARAMS_LEN, oi, &lp)) return -1;
    const uint32_t plen = hb_rd32(lp);
    if (plen % HB_BLOB_ALIGN) return BAD(st, HB_MSG_HBM_PARAMS_ALIGN, HB_I(oi), HB_I(plen));
    const uint32_t base = r->pos;
    if (take(r, plen, HB_WHAT_HBM_PARAMS, oi, NULL)) return -1;
    if (params(r, oi, opcode, base, plen)) return -1;
    o->opcode = opcode;
    o->n_in = n_in;
    o->n_out = n_out;
    o->params = base;
    o->params_len = plen;
    return 0;
}

static int section(hb_graph *g, reader *r, uint16_t si) {
    hb_status *st = r->st;
    const uint8_t *h;
    if (take(r, HB_BLOB_SECTION_SIZE, HB_WHAT_HBM_SECTION, si, &h)) return -1;
    const uint8_t *tag = h + HB_BLOB_SECTION_TAG_OFF;
    for (int i = 0; i < 4; i++)
        if (tag[i] < 0x21 || tag[i] > 0x7E)
            return BAD(st, HB_MSG_HBM_TAG, HB_I(si), HB_I(tag[0]), HB_I(tag[1]), HB_I(tag[2]), HB_I(tag[3]));
    const uint32_t length = hb_rd32(h + HB_BLOB_SECTION_LENGTH_OFF);
    const uint32_t at = r->pos;
    if (take(r, length, HB_WHAT_HBM_PAYLOAD, si, NULL)) return -1;
    if (align(r, HB_WHAT_HBM_PAYLOAD, si)) return -1;
    for (uint16_t j = 0; j < si; j++) {
        const uint8_t *u = g->sections[j].tag;
        if (u[0] == tag[0] && u[1] == tag[1] && u[2] == tag[2] && u[3] == tag[3])
            return BAD(st, HB_MSG_HBM_TAG_TWICE, HB_I(si), HB_SN(tag, 4));
    }
    hb_section *s = &g->sections[si];
    for (int i = 0; i < 4; i++) s->tag[i] = tag[i];
    s->offset = at;
    s->len = length;
    return 0;
}

static int structure(hb_graph *g, const uint8_t *d, uint32_t len, hb_status *st) {
    uint16_t name_len;
    if (header(g, d, len, &name_len, st)) return -1;
    reader r = {d, HB_BLOB_HEADER_SIZE, len - HB_BLOB_CRC_SIZE, st};
    if (take(&r, name_len, HB_WHAT_HBM_NAME, -1, NULL) || align(&r, HB_WHAT_HBM_NAME, -1)) return -1;
    for (uint16_t i = 0; i < g->n_tensors; i++)
        if (tensor(g, &r, i)) return -1;
    for (uint16_t i = 0; i < g->n_ops; i++)
        if (op(g, &r, i)) return -1;
    for (uint16_t i = 0; i < g->n_sections; i++)
        if (section(g, &r, i)) return -1;
    if (r.pos != r.end) return BAD(st, HB_MSG_HBM_TRAILING, HB_I(r.end - r.pos));
    return 0;
}

/* ---- pass 2: the graph -------------------------------------------------------------------- */

enum { NOT_WRITTEN = -2, GRAPH_INPUT = -1 };
static int16_t writer[HB_MAX_TENSORS]; /* activation -> the op that writes it */
static int16_t user[HB_MAX_TENSORS];   /* constant -> the op that reads it, -1 none */

static int is_const(const hb_graph *g, uint16_t t) { return g->tensors[t].role != HB_ROLE_ACTIVATION; }

static int is_activation(const hb_graph *g, uint16_t t) {
    return g->tensors[t].dtype == HB_DTYPE_INT8 && !is_const(g, t) && g->n_q[t] == 1;
}

typedef struct {
    hb_graph *g;
    hb_status *st;
    uint16_t oi;
    const hb_op *o;
    const char *kind;
} opctx;

static int act_in(const opctx *c, uint16_t t) {
    if (!is_activation(c->g, t)) return BAD(c->st, HB_MSG_HBM_ACT_IN, HB_I(c->oi), HB_S(c->kind), HB_I(t));
    return 0;
}

static int act_out(const opctx *c) {
    const uint16_t t = c->o->idx[c->o->n_in];
    if (!is_activation(c->g, t)) return BAD(c->st, HB_MSG_HBM_ACT_OUT, HB_I(c->oi), HB_S(c->kind), HB_I(t));
    return 0;
}

static int rank3(const opctx *c, uint16_t x) {
    const hb_tensor *t = &c->g->tensors[x];
    if (t->rank != 3) return BAD(c->st, HB_MSG_HBM_RANK3, HB_I(c->oi), HB_S(c->kind), HB_I(x), HB_I(t->rank));
    return 0;
}

/* filter scales, the params' channel count, the optional bias; marks weight and bias roles */
static int filter_and_bias(const opctx *c, uint32_t n_out, int32_t axis, uint32_t n_channels) {
    hb_graph *g = c->g;
    const uint16_t wi = c->o->idx[1];
    const uint16_t nq = g->n_q[wi];
    if (nq != 1 && (nq != n_out || g->axis[wi] != axis))
        return BAD(c->st, HB_MSG_HBM_FILTER_SCALES, HB_I(c->oi), HB_S(c->kind), HB_I(wi), HB_I(nq),
                   HB_I(g->axis[wi]), HB_I(n_out), HB_I(axis));
    if (n_channels != nq)
        return BAD(c->st, HB_MSG_HBM_CHANNELS, HB_I(c->oi), HB_S(c->kind), HB_I(n_channels), HB_I(wi), HB_I(nq));
    if (c->o->n_in > 2) {
        const uint16_t bi = c->o->idx[2];
        const hb_tensor *b = &g->tensors[bi];
        if (!(is_const(g, bi) && b->dtype == HB_DTYPE_INT32 && b->rank == 1 && b->dims[0] == n_out &&
              g->n_q[bi] == nq))
            return BAD(c->st, HB_MSG_HBM_BIAS, HB_I(c->oi), HB_S(c->kind), HB_I(bi), HB_I(n_out), HB_I(nq));
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
static void window(uint8_t padding, int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t *out,
                   int64_t *pad) {
    const int64_t eff = (k - 1) * dil + 1;
    *out = padding == HB_PADDING_SAME ? floor_div(in + stride - 1, stride)
                                      : floor_div(in + stride - eff, stride);
    const int64_t total = (*out - 1) * stride + eff - in;
    *pad = (total > 0 ? total : 0) / 2;
}

static int geometry(const opctx *c, uint16_t x, uint8_t padding, uint32_t kh, uint32_t kw,
                    uint32_t sh, uint32_t sw, uint32_t dh, uint32_t dw, uint32_t out_h, uint32_t out_w,
                    uint32_t pad_top, uint32_t pad_left, uint32_t n_out) {
    const hb_tensor *t = &c->g->tensors[x];
    int64_t oh, ow, pt, pl;
    window(padding, t->dims[0], kh, sh, dh, &oh, &pt);
    window(padding, t->dims[1], kw, sw, dw, &ow, &pl);
    if (oh != out_h || ow != out_w || pt != pad_top || pl != pad_left)
        return BAD(c->st, HB_MSG_HBM_GEOMETRY, HB_I(c->oi), HB_S(c->kind), HB_I(out_h), HB_I(out_w),
                   HB_I(pad_top), HB_I(pad_left), HB_I(oh), HB_I(ow), HB_I(pt), HB_I(pl));
    const uint16_t yi = c->o->idx[c->o->n_in];
    const hb_tensor *y = &c->g->tensors[yi];
    if (y->rank != 3 || y->dims[0] != oh || y->dims[1] != ow || y->dims[2] != n_out)
        return BAD(c->st, HB_MSG_HBM_SHAPE3, HB_I(c->oi), HB_S(c->kind), HB_I(yi), HB_I(oh), HB_I(ow),
                   HB_I(n_out));
    return 0;
}

static int check_fc(const opctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0], wi = c->o->idx[1], yi = c->o->idx[c->o->n_in];
    if (act_in(c, xi) || act_out(c)) return -1;
    const hb_tensor *w = &g->tensors[wi];
    if (!(is_const(g, wi) && w->dtype == HB_DTYPE_INT8 && w->rank == 2))
        return BAD(c->st, HB_MSG_HBM_FC_WEIGHTS, HB_I(c->oi), HB_S(c->kind), HB_I(wi));
    const uint32_t m = w->dims[0], k = w->dims[1];
    if (g->tensors[xi].n != k)
        return BAD(c->st, HB_MSG_HBM_FC_INPUT, HB_I(c->oi), HB_S(c->kind), HB_I(xi), HB_I(g->tensors[xi].n), HB_I(k));
    const hb_tensor *y = &g->tensors[yi];
    if (!(y->rank == 1 && y->dims[0] == m))
        return BAD(c->st, HB_MSG_HBM_SHAPE1, HB_I(c->oi), HB_S(c->kind), HB_I(yi), HB_I(m));
    hb_nn_fc_params p;
    hb_decode_fc(g->blob + c->o->params, &p);
    return filter_and_bias(c, m, 0, p.rq.n);
}

static int check_conv(const opctx *c, int depthwise) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0], wi = c->o->idx[1];
    if (act_in(c, xi) || act_out(c) || rank3(c, xi)) return -1;
    const uint8_t *pp = g->blob + c->o->params;
    hb_nn_conv_params p;
    hb_decode_conv(pp, depthwise, &p);
    const hb_tensor *x = &g->tensors[xi], *w = &g->tensors[wi];
    const uint64_t cin = x->dims[2];
    uint64_t n_out;
    if (depthwise) {
        n_out = cin * p.depth_multiplier;
        if (!(is_const(g, wi) && w->dtype == HB_DTYPE_INT8 && w->rank == 4 && w->dims[0] == 1 &&
              w->dims[3] == n_out))
            return BAD(c->st, HB_MSG_HBM_DW_FILTER, HB_I(c->oi), HB_S(c->kind), HB_I(wi), HB_I(n_out));
    } else {
        if (!(is_const(g, wi) && w->dtype == HB_DTYPE_INT8 && w->rank == 4 && w->dims[3] == cin))
            return BAD(c->st, HB_MSG_HBM_CONV_FILTER, HB_I(c->oi), HB_S(c->kind), HB_I(wi), HB_I(cin));
        n_out = w->dims[0];
    }
    if (filter_and_bias(c, (uint32_t)n_out, depthwise ? 3 : 0, p.rq.n)) return -1;
    const uint8_t padding = pp[HB_REC_CONV_2D_PADDING_OFF];
    return geometry(c, xi, padding, w->dims[1], w->dims[2], p.stride_h, p.stride_w, p.dilation_h,
                    p.dilation_w, p.out_h, p.out_w, p.pad_top, p.pad_left, (uint32_t)n_out);
}

static int check_pool(const opctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0];
    if (act_in(c, xi) || act_out(c) || rank3(c, xi)) return -1;
    const uint8_t *pp = g->blob + c->o->params;
    hb_nn_pool_params p;
    hb_decode_pool(pp, &p);
    return geometry(c, xi, pp[HB_REC_MAX_POOL_2D_PADDING_OFF], p.filter_h, p.filter_w, p.stride_h,
                    p.stride_w, 1, 1, p.out_h, p.out_w, p.pad_top, p.pad_left, g->tensors[xi].dims[2]);
}

static int check_mean(const opctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0], yi = c->o->idx[1];
    if (act_in(c, xi) || act_out(c) || rank3(c, xi)) return -1;
    hb_nn_mean_params p;
    int keep;
    hb_decode_mean(g->blob + c->o->params, &p, &keep);
    const hb_tensor *x = &g->tensors[xi], *y = &g->tensors[yi];
    const uint64_t pixels = (uint64_t)x->dims[0] * x->dims[1];
    if (p.count != pixels)
        return BAD(c->st, HB_MSG_HBM_MEAN_COUNT, HB_I(c->oi), HB_S(c->kind), HB_I(p.count), HB_I(pixels));
    const uint32_t ch = x->dims[2];
    if (keep) {
        if (!(y->rank == 3 && y->dims[0] == 1 && y->dims[1] == 1 && y->dims[2] == ch))
            return BAD(c->st, HB_MSG_HBM_SHAPE3, HB_I(c->oi), HB_S(c->kind), HB_I(yi), HB_I(1), HB_I(1), HB_I(ch));
    } else if (!(y->rank == 1 && y->dims[0] == ch)) {
        return BAD(c->st, HB_MSG_HBM_SHAPE1, HB_I(c->oi), HB_S(c->kind), HB_I(yi), HB_I(ch));
    }
    return 0;
}

static int same_shape(const hb_tensor *a, const hb_tensor *b) {
    if (a->rank != b->rank) return 0;
    for (uint8_t j = 0; j < a->rank; j++)
        if (a->dims[j] != b->dims[j]) return 0;
    return 1;
}

static int check_add(const opctx *c) {
    const hb_graph *g = c->g;
    const uint16_t ai = c->o->idx[0], bi = c->o->idx[1], yi = c->o->idx[2];
    if (act_in(c, ai) || act_in(c, bi) || act_out(c)) return -1;
    if (!same_shape(&g->tensors[ai], &g->tensors[bi]) || !same_shape(&g->tensors[bi], &g->tensors[yi]))
        return BAD(c->st, HB_MSG_HBM_ADD_SHAPES, HB_I(c->oi), HB_S(c->kind), HB_I(ai), HB_I(bi), HB_I(yi));
    return 0;
}

static int check_reshape(const opctx *c) {
    const hb_graph *g = c->g;
    const uint16_t xi = c->o->idx[0], yi = c->o->idx[1];
    if (act_in(c, xi) || act_out(c)) return -1;
    if (g->tensors[xi].n != g->tensors[yi].n)
        return BAD(c->st, HB_MSG_HBM_RESHAPE, HB_I(c->oi), HB_S(c->kind), HB_I(xi), HB_I(g->tensors[xi].n),
                   HB_I(yi), HB_I(g->tensors[yi].n));
    return 0;
}

static int check_op(hb_graph *g, uint16_t oi, hb_status *st) {
    const hb_op *o = &g->ops[oi];
    const opctx c = {g, st, oi, o, kinds[o->opcode].name};
    for (uint8_t k = 0; k < o->n_in; k++) {
        const uint16_t t = o->idx[k];
        if (!is_const(g, t) && writer[t] == NOT_WRITTEN)
            return BAD(st, HB_MSG_HBM_NOT_READY, HB_I(oi), HB_S(c.kind), HB_I(t));
    }
    for (uint8_t k = 0; k < o->n_out; k++) {
        const uint16_t t = o->idx[o->n_in + k];
        if (is_const(g, t)) return BAD(st, HB_MSG_HBM_OUT_CONST, HB_I(oi), HB_S(c.kind), HB_I(t));
        if (writer[t] == GRAPH_INPUT) return BAD(st, HB_MSG_HBM_OUT_INPUT, HB_I(oi), HB_S(c.kind), HB_I(t));
        if (writer[t] != NOT_WRITTEN)
            return BAD(st, HB_MSG_HBM_OUT_TWICE, HB_I(oi), HB_S(c.kind), HB_I(t), HB_I(writer[t]));
    }
    for (uint8_t k = 0; k < o->n_in; k++) {
        const uint16_t t = o->idx[k];
        if (!is_const(g, t)) continue;
        if (user[t] >= 0) return BAD(st, HB_MSG_HBM_SHARED, HB_I(oi), HB_S(c.kind), HB_I(t), HB_I(user[t]));
        user[t] = (int16_t)oi;
    }
    int bad;
    switch (o->opcode) {
    case HB_OP_FULLY_CONNECTED: bad = check_fc(&c); break;
    case HB_OP_CONV_2D: bad = check_conv(&c, 0); break;
    case HB_OP_DEPTHWISE_CONV_2D: bad = check_conv(&c, 1); break;
    case HB_OP_AVERAGE_POOL_2D:
    case HB_OP_MAX_POOL_2D: bad = check_pool(&c); break;
    case HB_OP_MEAN: bad = check_mean(&c); break;
    case HB_OP_ADD: bad = check_add(&c); break;
    default: bad = check_reshape(&c); break; /* HB_OP_RESHAPE: pass 1 allows no other opcode */
    }
    if (bad) return -1;
    for (uint8_t k = 0; k < o->n_out; k++) writer[o->idx[o->n_in + k]] = (int16_t)oi;
    return 0;
}

static int graph(hb_graph *g, hb_status *st) {
    for (uint16_t t = 0; t < g->n_tensors; t++) {
        writer[t] = NOT_WRITTEN;
        user[t] = -1;
    }
    if (!is_activation(g, g->input)) return BAD(st, HB_MSG_HBM_GRAPH_INPUT, HB_I(g->input));
    writer[g->input] = GRAPH_INPUT;
    for (uint16_t oi = 0; oi < g->n_ops; oi++)
        if (check_op(g, oi, st)) return -1;
    if (writer[g->output] == NOT_WRITTEN) return BAD(st, HB_MSG_HBM_OUTPUT, HB_I(g->output));
    return 0;
}

/* ---- the entry point ------------------------------------------------------------------------ */

int hb_graph_load(hb_graph *g, uint8_t *blob, uint32_t len, hb_status *st) {
    hb_status_clear(st);
    g->blob = NULL;
    g->act = NULL;
    g->act_bytes = 0;
    g->len = len;
    /* pass 2 and the decoders read the record bytes through g->blob */
    if (structure(g, blob, len, st)) goto refused;
    g->blob = blob;
    if (graph(g, st)) goto refused;
    const uint64_t act = hb_plan(g);
    if (act > HB_MAX_ACT_BYTES) {
        BAD(st, HB_MSG_HBM_ACT_BYTES, HB_I(act), HB_I(HB_MAX_ACT_BYTES));
        goto refused;
    }
    g->act_bytes = (uint32_t)act;
    return 0;
refused:
    hb_graph_unload(g);
    return -1;
}
