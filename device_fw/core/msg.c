/* The request checker and the field accessors of hb_msg.h: one walker over the layout tables
 * of gen/hb_wire.h (their format is described there). Mirrors hilbench/protocol/spec.py
 * (_Plan.read / _Plan.check): the same passes, the same order, the same messages.
 * No recursion: nested layouts are flat, so a walk is at most two loops deep. */
#define HB_WIRE_TABLES /* this file holds the one definition of hb_layouts */
#include "hb_wire.h"

#include "hb_bytes.h"
#include "hb_msg.h"

_Static_assert(HB_L_HELLO == 0 && HB_L_LAST_REQUEST == HB_LAST_REQUEST - HB_FIRST_REQUEST,
               "request layouts come first, in type order");
_Static_assert(HB_MAX_FIELDS < HB_NONE, "field indices fit a byte");
_Static_assert(HB_N_LAYOUTS < HB_NONE, "layout ids fit a byte");

static uint32_t wire_size(uint8_t w) {
    switch (w) {
    case HB_W_U8:
    case HB_W_I8: return 1;
    case HB_W_U16: return 2;
    case HB_W_U32:
    case HB_W_I32: return 4;
    case HB_W_U64:
    case HB_W_I64: return 8;
    default: return 0;
    }
}

static int64_t wire_read(const uint8_t *p, uint8_t w) {
    switch (w) {
    case HB_W_U8: return p[0];
    case HB_W_I8: return (int8_t)p[0];
    case HB_W_U16: return hb_rd16(p);
    case HB_W_U32: return hb_rd32(p);
    case HB_W_I32: return (int32_t)hb_rd32(p);
    case HB_W_U64:
    case HB_W_I64: return (int64_t)hb_rd64(p);
    default: return 0;
    }
}

static const hb_layout_desc *layout_of(uint8_t id) {
    return id < HB_N_LAYOUTS ? &hb_layouts[id] : NULL;
}

/* ---- the two passes ----------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    uint32_t len;
    uint32_t pos;      /* where the next field starts; pos <= len in the length pass */
    const char *name;  /* the top-level layout's name: every message starts with it */
    hb_status *st;
    int ranges;        /* 0: the length pass, 1: the range pass (lengths already checked) */
} walk;

typedef struct {
    const hb_layout_desc *L;
    uint32_t off[HB_MAX_FIELDS]; /* offsets of this instance's fields, filled in order */
    int64_t rec;                 /* record index, -1 outside a record */
    const char *outer;           /* the RECORDS field's name when rec >= 0 */
} inst;

/* The field's name as messages give it: "eps", or "steps[3].q" inside a record. */
static hb_arg field_name(const inst *in, unsigned k, char *buf, size_t cap) {
    const char *name = in->L->fields[k].name;
    if (in->rec < 0) return HB_S(name);
    size_t n = hb_format(buf, cap, HB_FIELD_PATH,
                         (const hb_arg[]){HB_S(in->outer), HB_I(in->rec), HB_S(name)}, 3);
    return HB_SN(buf, n);
}

static int refuse_short(const walk *w, const inst *in, unsigned k, uint64_t need) {
    char buf[64];
    return HB_FAIL(w->st, HB_MSG_SHORT_CODE, HB_MSG_SHORT, HB_S(w->name), HB_I(w->len),
                   field_name(in, k, buf, sizeof buf), HB_I(need), HB_I(w->pos));
}

/* A rule's value of field idx: a scalar's value, a REST field's length. */
static int64_t rule_value(const walk *w, const inst *in, uint8_t idx) {
    const hb_field_desc *F = &in->L->fields[idx];
    if (F->kind == HB_FK_REST) return (int64_t)(w->len - in->off[idx]);
    return wire_read(w->p + in->off[idx], F->wire);
}

static int check_rule(const walk *w, const inst *in, const hb_field_desc *F) {
    int64_t a = rule_value(w, in, F->args[0]);
    int64_t b = rule_value(w, in, F->args[1]);
    switch (F->rule) {
    case HB_RULE_CHUNK_END: { /* a = total_len, b = offset, c = chunk length */
        int64_t c = rule_value(w, in, F->args[2]);
        if (b + c > a)
            return HB_FAIL(w->st, HB_MSG_CHUNK_END_CODE, HB_MSG_CHUNK_END, HB_S(w->name), HB_I(b),
                           HB_I(c), HB_I(b + c), HB_I(a));
        return 0;
    }
    case HB_RULE_SPAN_2_32: /* a = start, b = count: both u32, the sum fits int64 */
        if (a + b > (int64_t)1 << 32)
            return HB_FAIL(w->st, HB_MSG_SPAN_2_32_CODE, HB_MSG_SPAN_2_32, HB_S(w->name),
                           HB_S(in->L->fields[F->args[0]].name),
                           HB_S(in->L->fields[F->args[1]].name), HB_I(a + b));
        return 0;
    case HB_RULE_INLINE_INPUT: { /* a = input length, b = slot, c = index */
        int64_t c = rule_value(w, in, F->args[2]);
        if (a > 0 && (b != 0 || c != 0))
            return HB_FAIL(w->st, HB_MSG_INLINE_INPUT_CODE, HB_MSG_INLINE_INPUT, HB_S(w->name),
                           HB_I(b), HB_I(c));
        return 0;
    }
    default:
        return HB_FAIL(w->st, HB_MSG_INTERNAL_CODE, HB_MSG_INTERNAL, HB_S("unknown wire rule"));
    }
}

/* One SCALAR, ARRAY, REST or RULE field of an instance, in the current pass. */
static int walk_field(walk *w, inst *in, unsigned k) {
    const hb_field_desc *F = &in->L->fields[k];
    uint64_t need;
    switch (F->kind) {
    case HB_FK_SCALAR:
        need = wire_size(F->wire);
        break;
    case HB_FK_ARRAY: /* the count as read, whatever its value (64 bits: no wrap) */
        need = (uint64_t)wire_read(w->p + in->off[F->count], in->L->fields[F->count].wire) *
               wire_size(F->wire);
        break;
    case HB_FK_REST:
        in->off[k] = w->pos;
        w->pos = w->len;
        return 0;
    case HB_FK_RULE:
        return w->ranges ? check_rule(w, in, F) : 0;
    default:
        return HB_FAIL(w->st, HB_MSG_INTERNAL_CODE, HB_MSG_INTERNAL, HB_S("bad wire table"));
    }
    if (!w->ranges && need > w->len - w->pos) return refuse_short(w, in, k, need);
    in->off[k] = w->pos;
    w->pos += (uint32_t)need;
    if (w->ranges && F->kind == HB_FK_SCALAR && F->ranged) {
        int64_t v = wire_read(w->p + in->off[k], F->wire);
        if (v < F->lo || v > F->hi) {
            char buf[64];
            return HB_FAIL(w->st, HB_MSG_RANGE_CODE, HB_MSG_RANGE, HB_S(w->name),
                           field_name(in, k, buf, sizeof buf), HB_I(v), HB_I(F->lo), HB_I(F->hi));
        }
    }
    return 0;
}

/* One pass over an instance of a top-level layout; RECORDS and EMBED walk their flat layout. */
static int walk_layout(walk *w, const hb_layout_desc *L) {
    inst top = {L, {0}, -1, NULL};
    w->pos = 0;
    for (unsigned k = 0; k < L->n_fields; k++) {
        const hb_field_desc *F = &L->fields[k];
        if (F->kind != HB_FK_RECORDS && F->kind != HB_FK_EMBED) {
            if (walk_field(w, &top, k) < 0) return -1;
            continue;
        }
        const hb_layout_desc *S = layout_of(F->sub);
        if (!S || !S->flat)
            return HB_FAIL(w->st, HB_MSG_INTERNAL_CODE, HB_MSG_INTERNAL, HB_S("bad wire table"));
        top.off[k] = w->pos;
        uint32_t n = 1;
        if (F->kind == HB_FK_RECORDS)
            n = (uint32_t)wire_read(w->p + top.off[F->count], L->fields[F->count].wire);
        for (uint32_t r = 0; r < n; r++) {
            inst in = {S, {0}, F->kind == HB_FK_RECORDS ? (int64_t)r : -1, F->name};
            for (unsigned j = 0; j < S->n_fields; j++)
                if (walk_field(w, &in, j) < 0) return -1;
        }
    }
    if (!w->ranges && w->pos != w->len)
        return HB_FAIL(w->st, HB_MSG_TRAILING_CODE, HB_MSG_TRAILING, HB_S(w->name),
                       HB_I(w->len - w->pos), HB_I(w->len), HB_I(w->pos));
    return 0;
}

int hb_msg_check_layout(uint8_t layout, const uint8_t *p, uint32_t len, hb_status *st) {
    const hb_layout_desc *L = layout_of(layout);
    if (!L) return HB_FAIL(st, HB_MSG_INTERNAL_CODE, HB_MSG_INTERNAL, HB_S("bad layout id"));
    walk w = {p, len, 0, L->name, st, 0};
    if (walk_layout(&w, L) < 0) return -1; /* step 6: the whole length first */
    w.ranges = 1;
    if (walk_layout(&w, L) < 0) return -1; /* step 7: then the ranges, in table order */
    hb_status_clear(st);
    return 0;
}

int hb_msg_is_request(uint8_t type) { return type >= HB_FIRST_REQUEST && type <= HB_LAST_REQUEST; }

uint8_t hb_msg_request_layout(uint8_t type) {
    return hb_msg_is_request(type) ? (uint8_t)(type - HB_FIRST_REQUEST) : (uint8_t)HB_NONE;
}

int hb_msg_check(uint8_t type, const uint8_t *payload, uint16_t len, hb_status *st) {
    if (!hb_msg_is_request(type))
        return HB_FAIL(st, HB_MSG_UNKNOWN_TYPE_CODE, HB_MSG_UNKNOWN_TYPE, HB_I(type));
    return hb_msg_check_layout(hb_msg_request_layout(type), payload, len, st);
}

int hb_msg_check_data(const uint8_t *blob, uint32_t len, hb_status *st) {
    if (len < HB_DATA_HEADER_BYTES)
        return HB_FAIL(st, HB_MSG_DATA_SHORT_CODE, HB_MSG_DATA_SHORT, HB_I(len),
                       HB_I(HB_DATA_HEADER_BYTES));
    if (hb_msg_check_layout(HB_L_DATA_BLOB, blob, HB_DATA_HEADER_BYTES, st) < 0) return -1;
    uint64_t n_items = hb_msg_u32(blob, HB_F_DATA_BLOB_N_ITEMS);
    uint64_t item_size = hb_msg_u16(blob, HB_F_DATA_BLOB_ITEM_SIZE);
    uint32_t n_classes = hb_msg_u16(blob, HB_F_DATA_BLOB_N_CLASSES);
    uint64_t expected = HB_DATA_HEADER_BYTES + n_items * item_size + n_items; /* < 2^49 */
    if (expected != len)
        return HB_FAIL(st, HB_MSG_DATA_LENGTH_CODE, HB_MSG_DATA_LENGTH, HB_I(len), HB_I(expected));
    const uint8_t *labels = blob + HB_DATA_HEADER_BYTES + n_items * item_size;
    for (uint64_t i = 0; i < n_items; i++)
        if (labels[i] >= n_classes)
            return HB_FAIL(st, HB_MSG_DATA_LABEL_CODE, HB_MSG_DATA_LABEL, HB_I(labels[i]), HB_I(i),
                           HB_I(n_classes));
    hb_status_clear(st);
    return 0;
}

/* ---- accessors (on checked payloads) ------------------------------------------------------ */

/* Bytes of field k of an instance whose earlier offsets are in off[] (no nested layouts). */
static uint32_t flat_field_size(const hb_layout_desc *L, const uint8_t *p, const uint32_t *off,
                                unsigned k) {
    const hb_field_desc *F = &L->fields[k];
    if (F->kind == HB_FK_SCALAR) return wire_size(F->wire);
    if (F->kind == HB_FK_ARRAY)
        return (uint32_t)wire_read(p + off[F->count], L->fields[F->count].wire) *
               wire_size(F->wire);
    return 0; /* RULE; a REST is last and has no size here */
}

/* Bytes of an instance of a flat layout at p. */
static uint32_t flat_size(const hb_layout_desc *L, const uint8_t *p) {
    uint32_t off[HB_MAX_FIELDS], pos = 0;
    for (unsigned k = 0; k < L->n_fields; k++) {
        off[k] = pos;
        pos += flat_field_size(L, p, off, k);
    }
    return pos;
}

/* Offset of field `upto` (n_fields: the end) of an instance of L at p. */
static uint32_t walk_offset(const hb_layout_desc *L, const uint8_t *p, unsigned upto) {
    uint32_t off[HB_MAX_FIELDS], pos = 0;
    for (unsigned k = 0; k < upto && k < L->n_fields; k++) {
        const hb_field_desc *F = &L->fields[k];
        off[k] = pos;
        if (F->kind == HB_FK_RECORDS || F->kind == HB_FK_EMBED) {
            const hb_layout_desc *S = layout_of(F->sub);
            if (!S) return pos;
            uint32_t n = 1;
            if (F->kind == HB_FK_RECORDS)
                n = (uint32_t)wire_read(p + off[F->count], L->fields[F->count].wire);
            for (uint32_t r = 0; r < n; r++) pos += flat_size(S, p + pos);
        } else {
            pos += flat_field_size(L, p, off, k);
        }
    }
    return pos;
}

static const hb_field_desc *field_of(hb_field f) {
    const hb_layout_desc *L = layout_of(HB_FIELD_LAYOUT(f));
    return L && HB_FIELD_INDEX(f) < L->n_fields ? &L->fields[HB_FIELD_INDEX(f)] : NULL;
}

uint32_t hb_msg_off(const uint8_t *p, hb_field f) {
    const hb_layout_desc *L = layout_of(HB_FIELD_LAYOUT(f));
    return L ? walk_offset(L, p, HB_FIELD_INDEX(f)) : 0;
}

int64_t hb_msg_get(const uint8_t *p, hb_field f) {
    const hb_field_desc *F = field_of(f);
    if (!F || F->kind != HB_FK_SCALAR) return 0;
    return wire_read(p + hb_msg_off(p, f), F->wire);
}

void hb_msg_put(uint8_t *p, hb_field f, uint64_t v) {
    const hb_field_desc *F = field_of(f);
    if (!F || F->kind != HB_FK_SCALAR) return;
    uint8_t *q = p + hb_msg_off(p, f);
    for (uint32_t i = 0; i < wire_size(F->wire); i++) q[i] = (uint8_t)(v >> (8 * i));
}

uint32_t hb_msg_count(const uint8_t *p, hb_field f) {
    const hb_field_desc *F = field_of(f);
    if (!F || (F->kind != HB_FK_ARRAY && F->kind != HB_FK_RECORDS)) return 0;
    return (uint32_t)hb_msg_get(p, HB_FIELD(HB_FIELD_LAYOUT(f), F->count));
}

uint32_t hb_msg_rest_len(const uint8_t *p, uint32_t len, hb_field f) {
    uint32_t off = hb_msg_off(p, f);
    return off <= len ? len - off : 0;
}

uint32_t hb_msg_size(const uint8_t *p, uint8_t layout) {
    const hb_layout_desc *L = layout_of(layout);
    return L ? walk_offset(L, p, L->n_fields) : 0;
}

const char *hb_msg_name(uint8_t layout) {
    const hb_layout_desc *L = layout_of(layout);
    return L ? L->name : "";
}
