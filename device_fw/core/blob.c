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
#include "ops/hb_op.h"
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
    if (opcode > HB_OP_MAX_CODE || kinds[opcode].name == NULL || hb_op_find(opcode) == NULL)
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
    o->reg = hb_op_find(opcode);
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

static int check_op(hb_graph *g, uint16_t oi, hb_status *st) {
    const hb_op *o = &g->ops[oi];
    const hb_op_check_ctx c = {g, st, oi, o, kinds[o->opcode].name};
    for (uint8_t k = 0; k < o->n_in; k++) {
        const uint16_t t = o->idx[k];
        if (!hb_graph_is_const(g, t) && writer[t] == NOT_WRITTEN)
            return BAD(st, HB_MSG_HBM_NOT_READY, HB_I(oi), HB_S(c.kind), HB_I(t));
    }
    for (uint8_t k = 0; k < o->n_out; k++) {
        const uint16_t t = o->idx[o->n_in + k];
        if (hb_graph_is_const(g, t)) return BAD(st, HB_MSG_HBM_OUT_CONST, HB_I(oi), HB_S(c.kind), HB_I(t));
        if (writer[t] == GRAPH_INPUT) return BAD(st, HB_MSG_HBM_OUT_INPUT, HB_I(oi), HB_S(c.kind), HB_I(t));
        if (writer[t] != NOT_WRITTEN)
            return BAD(st, HB_MSG_HBM_OUT_TWICE, HB_I(oi), HB_S(c.kind), HB_I(t), HB_I(writer[t]));
    }
    for (uint8_t k = 0; k < o->n_in; k++) {
        const uint16_t t = o->idx[k];
        if (!hb_graph_is_const(g, t)) continue;
        if (user[t] >= 0) return BAD(st, HB_MSG_HBM_SHARED, HB_I(oi), HB_S(c.kind), HB_I(t), HB_I(user[t]));
        user[t] = (int16_t)oi;
    }
    if (o->reg->check(&c)) return -1;
    for (uint8_t k = 0; k < o->n_out; k++) writer[o->idx[o->n_in + k]] = (int16_t)oi;
    return 0;
}

static int graph(hb_graph *g, hb_status *st) {
    for (uint16_t t = 0; t < g->n_tensors; t++) {
        writer[t] = NOT_WRITTEN;
        user[t] = -1;
    }
    if (!hb_graph_is_activation(g, g->input)) return BAD(st, HB_MSG_HBM_GRAPH_INPUT, HB_I(g->input));
    writer[g->input] = GRAPH_INPUT;
    for (uint16_t oi = 0; oi < g->n_ops; oi++)
        if (check_op(g, oi, st)) return -1;
    if (writer[g->output] == NOT_WRITTEN) return BAD(st, HB_MSG_HBM_OUTPUT, HB_I(g->output));
    return 0;
}

/* ---- the entry point ------------------------------------------------------------------------ */

int hb_blob_load(hb_graph *g, uint8_t *blob, uint32_t len, hb_status *st) {
    hb_status_clear(st);
    g->blob = NULL;
    g->act = NULL;
    g->act_bytes = 0;
    g->len = len;
    /* pass 2 and the decoders read the record bytes through g->blob */
    if (structure(g, blob, len, st)) goto refused;
    g->blob = blob;
    if (graph(g, st)) goto refused;
    const uint64_t act = hb_plan_activations(g);
    if (act > HB_MAX_ACT_BYTES) {
        BAD(st, HB_MSG_HBM_ACT_BYTES, HB_I(act), HB_I(HB_MAX_ACT_BYTES));
        goto refused;
    }
    g->act_bytes = (uint32_t)act;
    for (uint16_t oi = 0; oi < g->n_ops; oi++) g->ops[oi].reg->prepare(g, &g->ops[oi]);
    return 0;
refused:
    hb_graph_unload(g);
    return -1;
}
