/* The request handlers: steps 8-9 of docs/protocol.md "Device processing order" (state checks
 * in the order the protocol lists them, then execution) for requests whose length and ranges
 * device.c already checked with hb_msg_check. Fields are read and written by their generated
 * ids with the hb_msg_* accessors (core/hb_msg.h), never at a hand-computed offset; refusals
 * are the declared templates (HB_MSG_*, gen/hb_wire.h). */
#include <string.h>

#include "hb_bytes.h"
#include "hb_commands.h"
#include "hb_crc.h"
#include "hb_graph.h"
#include "hb_model.h"
#include "hb_msg.h"
#include "hb_payload.h"
#include "hb_port.h"
#include "hb_store.h"
#include "hb_wire.h"
#include "port.h"

#define NAME(layout) hb_msg_name(layout) /* "PROBE request", as messages say it */

static struct {
    uint16_t max_payload;
    uint32_t boot_nonce;
    uint8_t model_ready; /* a model is loaded and bound */
    uint16_t probed_q;   /* q of the last PROBE since the model load, 0 if none */
    uint8_t stage_bits;  /* bit t: target t (a slot, or HB_STAGE_MODEL) staged, not committed */
    /* INFER between its frames (docs/protocol.md, INFER): the input bytes received so far,
     * assembled in the input tensor's buffer, and whether the output buffer holds the output
     * of the last INFER's forward pass, of item held_index of slot held_slot (0, 0 inline) */
    uint32_t staged;
    uint8_t held, held_slot;
    uint32_t held_index;
} cmd;

/* The largest q a request that computes can carry on this build: an APPLY record is at most a
 * whole payload; an APPLY_PROBED or APPLY_PROBE applies the last PROBE's q, and a PROBE whose
 * answer does not fit max_payload is refused before it runs (ANSWER_TOO_LARGE). */
#define Q_BY_SIZE(size_of) ((HB_DEVICE_MAX_PAYLOAD - size_of(0)) / (size_of(1) - size_of(0)))
#define MIN_Q(a, b) ((a) < (b) ? (a) : (b))
#define PROBED_Q_CAP MIN_Q(HB_MAX_Q, Q_BY_SIZE(HB_SIZE_PROBE_R))
#define APPLY_Q_CAP MIN_Q(HB_MAX_Q, Q_BY_SIZE(HB_SIZE_APPLY))

/* The ZO commands hold nothing q-sized but the last PROBE's seeds, which APPLY_PROBED and
 * APPLY_PROBE apply along later (little-endian, as the PROBE carried them). Seeds and
 * coefficients are read where the request lies, losses written where the answer goes, and
 * an APPLY works in the response buffer, empty until its 4-byte answer is written. */
static uint8_t probed_seeds[4u * PROBED_Q_CAP];
_Static_assert(HB_MODEL_APPLY_SCRATCH(APPLY_Q_CAP, 8) <= HB_DEVICE_MAX_PAYLOAD &&
                   HB_MODEL_APPLY_SCRATCH(PROBED_Q_CAP, 8) <= HB_DEVICE_MAX_PAYLOAD,
               "an APPLY's scratch (8 elements at a time at least) fits the response buffer");

void hb_commands_init(uint16_t max_payload, uint32_t boot_nonce) {
    memset(&cmd, 0, sizeof cmd);
    cmd.max_payload = max_payload;
    cmd.boot_nonce = boot_nonce;
}

/* nanoseconds of a tick span, from the port's Q16 ns-per-tick, in 64 bits without overflow of
 * the intermediate product (ticks up to 2^64, ns_q16 up to 2^32) */
static uint64_t duration_ns(uint64_t t0) {
    uint64_t ticks = hb_port_ticks() - t0;
    uint64_t q16 = hb_port_tick_ns_q16();
    return (ticks >> 16) * q16 + (((ticks & 0xFFFFu) * q16) >> 16);
}

/* ---- state checks shared by several requests ------------------------------------------- */

static int need_model(hb_status *st) {
    return cmd.model_ready ? 0 : HB_FAIL0(st, HB_MSG_NO_MODEL_CODE, HB_MSG_NO_MODEL);
}

/* PROBE, EVAL, APPLY_PROBE, INFER on a slot: a model, data in the slot, items of the model's
 * input size, the model's classes (decisions.md 3) */
static int model_and_slot(uint8_t slot, hb_slot *s, hb_status *st) {
    if (need_model(st) < 0) return -1;
    if (hb_store_slot(slot, s) < 0)
        return HB_FAIL(st, HB_MSG_NO_DATA_CODE, HB_MSG_NO_DATA, HB_I(slot));
    const hb_graph *g = hb_graph_instance();
    uint32_t in = hb_graph_input_size(g), out = hb_graph_output_size(g);
    if (s->item_size != in)
        return HB_FAIL(st, HB_MSG_SLOT_ITEM_SIZE_CODE, HB_MSG_SLOT_ITEM_SIZE, HB_I(slot),
                       HB_I(s->item_size), HB_I(in));
    if (s->n_classes != out)
        return HB_FAIL(st, HB_MSG_SLOT_CLASSES_CODE, HB_MSG_SLOT_CLASSES, HB_I(slot),
                       HB_I(s->n_classes), HB_I(out));
    return 0;
}

/* the answer of `size` bytes must fit the device's max_payload */
static int fits(uint8_t layout, uint32_t size, hb_status *st) {
    if (size > cmd.max_payload)
        return HB_FAIL(st, HB_MSG_ANSWER_TOO_LARGE_CODE, HB_MSG_ANSWER_TOO_LARGE,
                       HB_S(NAME(layout)), HB_I(size), HB_I(cmd.max_payload));
    return 0;
}

/* APPLY_PROBED / APPLY_PROBE: a PROBE since the model load, with this q */
static int check_probed(uint8_t layout, uint16_t q, hb_status *st) {
    if (!cmd.probed_q)
        return HB_FAIL(st, HB_MSG_PROBED_NONE_CODE, HB_MSG_PROBED_NONE, HB_S(NAME(layout)));
    if (q != cmd.probed_q)
        return HB_FAIL(st, HB_MSG_PROBED_Q_CODE, HB_MSG_PROBED_Q, HB_S(NAME(layout)), HB_I(q),
                       HB_I(cmd.probed_q));
    return 0;
}

/* forget the model (an upload at offset 0, a refused blob) before its bytes are reused */
static void drop_model(void) {
    hb_graph_unload(hb_graph_instance());
    hb_store_discard(HB_STORE_MODEL);
    cmd.model_ready = 0;
    cmd.probed_q = 0;
}

/* ---- handlers ---------------------------------------------------------------------------- */

static uint16_t hello(uint8_t *r) {
    const char *id = hb_port_device_id(), *fw = hb_port_firmware();
    size_t id_len = hb_strlen(id), fw_len = hb_strlen(fw);
    if (id_len > HB_MAX_STRING) id_len = HB_MAX_STRING;
    if (fw_len > HB_MAX_STRING) fw_len = HB_MAX_STRING;
    uint32_t caps = HB_CAP_RESET | HB_CAP_APPLY_BATCH | HB_CAP_APPLY_PROBED | HB_CAP_APPLY_PROBE |
                    HB_CAP_INFER | HB_CAP_DEVICE_INFO | HB_CAP_LOAD_STAGE | HB_CAP_HEAD_GRAD;
    uint8_t source = hb_port_timing_source();
    if (source == HB_TIMING_DEVICE) caps |= HB_CAP_CYCLE_COUNTER;
    if (source == HB_TIMING_MODELED) caps |= HB_CAP_MODELED_TIMING;
    hb_msg_put(r, HB_F_HELLO_R_PROTOCOL_VERSION, HB_PROTOCOL_VERSION);
    hb_msg_put(r, HB_F_HELLO_R_MAX_PAYLOAD, cmd.max_payload);
    hb_msg_put(r, HB_F_HELLO_R_BOOT_NONCE, cmd.boot_nonce);
    hb_msg_put(r, HB_F_HELLO_R_CAPABILITIES, caps);
    hb_msg_put(r, HB_F_HELLO_R_DEVICE_ID_LEN, id_len);
    memcpy(hb_msg_wptr(r, HB_F_HELLO_R_DEVICE_ID), id, id_len);
    hb_msg_put(r, HB_F_HELLO_R_FIRMWARE_LEN, fw_len);
    memcpy(hb_msg_wptr(r, HB_F_HELLO_R_FIRMWARE), fw, fw_len);
    return (uint16_t)hb_msg_size(r, HB_L_HELLO_R);
}

/* The bulk rules of docs/protocol.md "Bulk transfer" for one chunk: start or continue the
 * target's upload and append. Returns 0 (received in *received), or -1 with st set. */
static int bulk_chunk(int target, uint8_t layout, uint32_t total, uint32_t offset,
                      const uint8_t *chunk, uint32_t k, uint32_t *received, hb_status *st) {
    if (offset == 0) {
        cmd.stage_bits &= (uint8_t)~(1u << (target == HB_STORE_MODEL ? HB_STAGE_MODEL : target));
        if (target == HB_STORE_MODEL) drop_model();
        if (hb_store_begin(target, NAME(layout), total, st) < 0) return -1;
    } else if (hb_store_continue(target, NAME(layout), total, offset, st) < 0) {
        return -1;
    }
    *received = hb_store_append(target, chunk, k);
    return 0;
}

/* the model's total bytes are in: parse, check, place the working memory (LOAD_MODEL's last
 * chunk, LOAD_COMMIT); *crc is the blob's CRC-32 without its trailer */
static int model_complete(uint32_t total, uint32_t *crc, hb_status *st) {
    uint8_t *blob = hb_store_data(HB_STORE_MODEL, NULL);
    /* decisions.md 4: the CRC of the blob without its CRC trailer, taken before anything
     * (binding clamps trained biases in place) */
    *crc = hb_crc32(0, blob, total >= HB_CRC_SIZE ? total - HB_CRC_SIZE : 0);
    hb_graph *g = hb_graph_instance();
    hb_model *m = hb_model_instance();
    if (hb_blob_load(g, blob, total, st) < 0 || hb_model_load(m, g, st) < 0 ||
        hb_store_model_reserve(hb_graph_act_bytes(g), hb_model_work_bytes(m), st) < 0) {
        drop_model(); /* a refused blob leaves no model */
        return -1;
    }
    hb_graph_bind(g, hb_store_model_act());
    hb_model_bind(m, hb_store_model_work());
    hb_store_finish(HB_STORE_MODEL);
    cmd.model_ready = 1;
    cmd.probed_q = 0;
    return 0;
}

/* a data slot's total bytes are in: the data blob's rules (LOAD_DATA's last chunk,
 * LOAD_COMMIT); *items its n_items */
static int data_complete(uint8_t slot, uint32_t total, uint32_t *items, hb_status *st) {
    const uint8_t *b = hb_store_data(slot, NULL);
    if (hb_msg_check_data(b, total, st) < 0) {
        hb_store_discard(slot); /* a refused blob leaves the slot empty */
        return -1;
    }
    *items = hb_msg_u32(b, HB_F_DATA_BLOB_N_ITEMS);
    hb_store_slot_set(slot, *items, hb_msg_u16(b, HB_F_DATA_BLOB_ITEM_SIZE),
                      hb_msg_u16(b, HB_F_DATA_BLOB_N_CLASSES));
    hb_store_finish(slot);
    return 0;
}

static int load_model(const uint8_t *p, uint16_t len, uint8_t *r, uint16_t *rlen, hb_status *st) {
    uint32_t total = hb_msg_u32(p, HB_F_LOAD_MODEL_TOTAL_LEN);
    uint32_t offset = hb_msg_u32(p, HB_F_LOAD_MODEL_OFFSET);
    uint32_t k = hb_msg_rest_len(p, len, HB_F_LOAD_MODEL_CHUNK), received = 0, crc = 0;
    if (bulk_chunk(HB_STORE_MODEL, HB_L_LOAD_MODEL, total, offset,
                   hb_msg_ptr(p, HB_F_LOAD_MODEL_CHUNK), k, &received, st) < 0)
        return -1;
    if (received == total && model_complete(total, &crc, st) < 0) return -1;
    hb_msg_put(r, HB_F_LOAD_MODEL_R_RECEIVED, received);
    hb_msg_put(r, HB_F_LOAD_MODEL_R_COMPLETE, received == total);
    hb_msg_put(r, HB_F_LOAD_MODEL_R_MODEL_CRC32, crc);
    *rlen = (uint16_t)hb_msg_size(r, HB_L_LOAD_MODEL_R);
    return 0;
}

static int load_data(const uint8_t *p, uint16_t len, uint8_t *r, uint16_t *rlen, hb_status *st) {
    uint8_t slot = hb_msg_u8(p, HB_F_LOAD_DATA_SLOT);
    uint32_t total = hb_msg_u32(p, HB_F_LOAD_DATA_TOTAL_LEN);
    uint32_t offset = hb_msg_u32(p, HB_F_LOAD_DATA_OFFSET);
    uint32_t k = hb_msg_rest_len(p, len, HB_F_LOAD_DATA_CHUNK), received = 0, items = 0;
    if (bulk_chunk(slot, HB_L_LOAD_DATA, total, offset, hb_msg_ptr(p, HB_F_LOAD_DATA_CHUNK), k,
                   &received, st) < 0)
        return -1;
    if (received == total && data_complete(slot, total, &items, st) < 0) return -1;
    hb_msg_put(r, HB_F_LOAD_DATA_R_SLOT, slot);
    hb_msg_put(r, HB_F_LOAD_DATA_R_RECEIVED, received);
    hb_msg_put(r, HB_F_LOAD_DATA_R_COMPLETE, received == total);
    hb_msg_put(r, HB_F_LOAD_DATA_R_N_ITEMS, items);
    *rlen = (uint16_t)hb_msg_size(r, HB_L_LOAD_DATA_R);
    return 0;
}

/* PROBE's fields, from a PROBE payload (alone, or embedded in APPLY_PROBE) */
typedef struct {
    uint8_t slot;
    uint16_t batch_size, eps, q;
    uint32_t batch_seed;
    const uint8_t *seeds;
} probe_args;

static probe_args probe_fields(const uint8_t *p) {
    probe_args a;
    a.slot = hb_msg_u8(p, HB_F_PROBE_SLOT);
    a.batch_size = hb_msg_u16(p, HB_F_PROBE_BATCH_SIZE);
    a.batch_seed = hb_msg_u32(p, HB_F_PROBE_BATCH_SEED);
    a.eps = hb_msg_u16(p, HB_F_PROBE_EPS);
    a.q = hb_msg_u16(p, HB_F_PROBE_Q);
    a.seeds = hb_msg_ptr(p, HB_F_PROBE_SEEDS);
    return a;
}

/* the arena's free bytes to the model while a command runs: the prefix cache at their top,
 * kept while the store's books stand, and the PROBE's scratch below it */
static void lend_free(void) {
    uint32_t free_bytes;
    uint8_t *free_at = hb_store_free_region(&free_bytes);
    hb_model_set_free(hb_model_instance(), free_at, free_bytes, hb_store_generation());
}

/* run a checked PROBE; its answer (a PROBE response payload) at r. Its seeds become the ones
 * APPLY_PROBED / APPLY_PROBE apply along (fits() bounded q: 4 q <= sizeof probed_seeds). */
static void run_probe(const probe_args *a, const hb_slot *s, uint8_t *r) {
    hb_msg_put(r, HB_F_PROBE_R_Q, a->q); /* the count first: the arrays' offsets follow from it */
    uint64_t t0 = hb_port_ticks();
    lend_free();
    hb_model_probe(hb_model_instance(), s, a->batch_size, a->batch_seed, a->eps, a->seeds, a->q,
                   hb_msg_wptr(r, HB_F_PROBE_R_LOSS_PLUS), hb_msg_wptr(r, HB_F_PROBE_R_LOSS_MINUS));
    uint64_t ns = duration_ns(t0);
    memcpy(probed_seeds, a->seeds, 4u * a->q);
    cmd.probed_q = a->q;
    hb_msg_put(r, HB_F_PROBE_R_DURATION_NS, ns);
    hb_msg_put(r, HB_F_PROBE_R_TIMING_SOURCE, hb_port_timing_source());
}

static int probe(const uint8_t *p, uint8_t *r, uint16_t *rlen, hb_status *st) {
    probe_args a = probe_fields(p);
    hb_slot s;
    if (model_and_slot(a.slot, &s, st) < 0 || fits(HB_L_PROBE, HB_SIZE_PROBE_R(a.q), st) < 0)
        return -1;
    run_probe(&a, &s, r);
    *rlen = (uint16_t)hb_msg_size(r, HB_L_PROBE_R);
    return 0;
}

/* apply along q seeds with q coefficients (little-endian arrays, in place); the response
 * buffer r is the scratch (its answer is written after) */
static int run_apply(const uint8_t *seeds, const uint8_t *coeffs, uint16_t q, uint8_t *r,
                     hb_status *st) {
    if (hb_model_apply(hb_model_instance(), seeds, coeffs, q, r, HB_DEVICE_MAX_PAYLOAD) < 0)
        return HB_FAIL(st, HB_MSG_INTERNAL_CODE, HB_MSG_INTERNAL,
                       HB_S("APPLY's q outside the response buffer's scratch"));
    return 0;
}

/* one APPLY record (an APPLY payload) */
static int apply_record(const uint8_t *rec, uint8_t *r, hb_status *st) {
    return run_apply(hb_msg_ptr(rec, HB_F_APPLY_SEEDS), hb_msg_ptr(rec, HB_F_APPLY_COEFFS),
                     hb_msg_u16(rec, HB_F_APPLY_Q), r, st);
}

static uint32_t updates(void) { return hb_model_updates_applied(hb_model_instance()); }

static int apply(const uint8_t *p, uint8_t *r, uint16_t *rlen, hb_status *st) {
    if (need_model(st) < 0 || apply_record(p, r, st) < 0) return -1;
    hb_msg_put(r, HB_F_APPLY_R_UPDATES_APPLIED, updates());
    *rlen = (uint16_t)hb_msg_size(r, HB_L_APPLY_R);
    return 0;
}

static int apply_batch(const uint8_t *p, uint8_t *r, uint16_t *rlen, hb_status *st) {
    if (need_model(st) < 0) return -1;
    /* hb_msg_check walked every record (lengths, then ranges) before any is applied */
    uint32_t steps = hb_msg_count(p, HB_F_APPLY_BATCH_STEPS);
    const uint8_t *rec = hb_msg_ptr(p, HB_F_APPLY_BATCH_STEPS);
    for (uint32_t i = 0; i < steps; i++) {
        if (apply_record(rec, r, st) < 0) return -1;
        rec += hb_msg_size(rec, HB_L_APPLY);
    }
    hb_msg_put(r, HB_F_APPLY_BATCH_R_UPDATES_APPLIED, updates());
    *rlen = (uint16_t)hb_msg_size(r, HB_L_APPLY_BATCH_R);
    return 0;
}

static int apply_probed(const uint8_t *p, uint8_t *r, uint16_t *rlen, hb_status *st) {
    uint16_t q = hb_msg_u16(p, HB_F_APPLY_PROBED_Q);
    if (need_model(st) < 0 || check_probed(HB_L_APPLY_PROBED, q, st) < 0 ||
        run_apply(probed_seeds, hb_msg_ptr(p, HB_F_APPLY_PROBED_COEFFS), q, r, st) < 0)
        return -1;
    hb_msg_put(r, HB_F_APPLY_PROBED_R_UPDATES_APPLIED, updates());
    *rlen = (uint16_t)hb_msg_size(r, HB_L_APPLY_PROBED_R);
    return 0;
}

static int apply_probe(const uint8_t *p, uint8_t *r, uint16_t *rlen, hb_status *st) {
    uint16_t qa = hb_msg_u16(p, HB_F_APPLY_PROBE_Q_APPLY);
    probe_args a = probe_fields(hb_msg_ptr(p, HB_F_APPLY_PROBE_PROBE));
    hb_slot s;
    /* every check of both parts before anything runs */
    if (need_model(st) < 0 || check_probed(HB_L_APPLY_PROBE, qa, st) < 0 ||
        model_and_slot(a.slot, &s, st) < 0 ||
        fits(HB_L_APPLY_PROBE, HB_SIZE_APPLY_PROBE_R(a.q), st) < 0 ||
        run_apply(probed_seeds, hb_msg_ptr(p, HB_F_APPLY_PROBE_COEFFS), qa, r, st) < 0)
        return -1;
    hb_msg_put(r, HB_F_APPLY_PROBE_R_UPDATES_APPLIED, updates());
    run_probe(&a, &s, hb_msg_wptr(r, HB_F_APPLY_PROBE_R_PROBE));
    *rlen = (uint16_t)hb_msg_size(r, HB_L_APPLY_PROBE_R);
    return 0;
}

static int eval(const uint8_t *p, uint8_t *r, uint16_t *rlen, hb_status *st) {
    uint8_t slot = hb_msg_u8(p, HB_F_EVAL_SLOT);
    uint32_t start = hb_msg_u32(p, HB_F_EVAL_START), count = hb_msg_u32(p, HB_F_EVAL_COUNT);
    hb_slot s;
    if (model_and_slot(slot, &s, st) < 0) return -1;
    uint64_t end = (uint64_t)start + count; /* count >= 1: a range check */
    if (end > s.n_items)
        return HB_FAIL(st, HB_MSG_EVAL_PAST_END_CODE, HB_MSG_EVAL_PAST_END,
                       HB_S(NAME(HB_L_EVAL)), HB_I(start), HB_I(end - 1), HB_I(slot),
                       HB_I(s.n_items));
    uint32_t correct = 0;
    int64_t loss_sum = 0;
    uint64_t t0 = hb_port_ticks();
    lend_free();
    hb_model_eval(hb_model_instance(), &s, start, count, &correct, &loss_sum);
    hb_msg_put(r, HB_F_EVAL_R_DURATION_NS, duration_ns(t0));
    hb_msg_put(r, HB_F_EVAL_R_COUNT, count);
    hb_msg_put(r, HB_F_EVAL_R_CORRECT, correct);
    hb_msg_put(r, HB_F_EVAL_R_LOSS_SUM_Q16, (uint64_t)loss_sum);
    hb_msg_put(r, HB_F_EVAL_R_TIMING_SOURCE, hb_port_timing_source());
    *rlen = (uint16_t)hb_msg_size(r, HB_L_EVAL_R);
    return 0;
}

/* HEAD_GRAD (docs/protocol.md): the slot checks, the head, its channels, its accumulators in
 * the arena's free bytes; then the exact step of the last layer */
static int head_grad(const uint8_t *p, uint8_t *r, uint16_t *rlen, hb_status *st) {
    uint8_t slot = hb_msg_u8(p, HB_F_HEAD_GRAD_SLOT);
    uint16_t n = hb_msg_u16(p, HB_F_HEAD_GRAD_N);
    hb_slot s;
    if (model_and_slot(slot, &s, st) < 0) return -1;
    hb_model *m = hb_model_instance();
    hb_model_head_info h;
    int found = hb_model_head(m, &h);
    if (found == HB_HEAD_NONE)
        return HB_FAIL(st, HB_MSG_HEAD_NONE_CODE, HB_MSG_HEAD_NONE, HB_S(NAME(HB_L_HEAD_GRAD)));
    if (found == HB_HEAD_TRAINED)
        return HB_FAIL(st, HB_MSG_HEAD_TRAINED_CODE, HB_MSG_HEAD_TRAINED,
                       HB_S(NAME(HB_L_HEAD_GRAD)), HB_I(h.trained_tensor), HB_I(h.trained_entry));
    if (n != h.m)
        return HB_FAIL(st, HB_MSG_HEAD_CHANNELS_CODE, HB_MSG_HEAD_CHANNELS,
                       HB_S(NAME(HB_L_HEAD_GRAD)), HB_I(n), HB_I(h.m));
    uint32_t free_bytes;
    uint8_t *free_at = hb_store_free_region(&free_bytes);
    uint64_t need = 4u * ((uint64_t)h.m * h.k + h.m);
    if (need > free_bytes)
        return HB_FAIL(st, HB_MSG_HEAD_MEMORY_CODE, HB_MSG_HEAD_MEMORY,
                       HB_S(NAME(HB_L_HEAD_GRAD)), HB_I(need), HB_I(free_bytes));
    /* the accumulators take the free region from its bottom: a prefix cache at its top that
     * they would reach is forgotten first (its entries are made again as commands need them) */
    const uint32_t cached = hb_model_cache_bytes(m);
    if (cached && (cached >= free_bytes || need > free_bytes - cached))
        hb_model_set_scratch(m, NULL, 0);
    uint64_t t0 = hb_port_ticks();
    int32_t loss = hb_model_head_grad(
        m, &h, &s, hb_msg_u16(p, HB_F_HEAD_GRAD_BATCH_SIZE), hb_msg_u32(p, HB_F_HEAD_GRAD_BATCH_SEED),
        hb_msg_u32(p, HB_F_HEAD_GRAD_ROUND_SEED), hb_msg_u8(p, HB_F_HEAD_GRAD_BIAS_GAIN),
        hb_msg_ptr(p, HB_F_HEAD_GRAD_RATES), (int32_t *)(void *)free_at);
    hb_msg_put(r, HB_F_HEAD_GRAD_R_DURATION_NS, duration_ns(t0));
    hb_msg_put(r, HB_F_HEAD_GRAD_R_HEAD_CRC, hb_model_head_crc(m, &h));
    hb_msg_put(r, HB_F_HEAD_GRAD_R_LOSS, (uint32_t)loss);
    hb_msg_put(r, HB_F_HEAD_GRAD_R_GRADS_APPLIED, hb_model_head_grads(m));
    hb_msg_put(r, HB_F_HEAD_GRAD_R_TIMING_SOURCE, hb_port_timing_source());
    *rlen = (uint16_t)hb_msg_size(r, HB_L_HEAD_GRAD_R);
    return 0;
}

static int weights_crc(uint8_t *r, uint16_t *rlen, hb_status *st) {
    if (need_model(st) < 0) return -1;
    hb_msg_put(r, HB_F_WEIGHTS_CRC_R_CRC32, hb_model_weights_crc(hb_model_instance()));
    hb_msg_put(r, HB_F_WEIGHTS_CRC_R_UPDATES_APPLIED, updates());
    *rlen = (uint16_t)hb_msg_size(r, HB_L_WEIGHTS_CRC_R);
    return 0;
}

/* the answer of an INFER: elements from `offset` of `y` (total `out`), as many as fit */
static int infer_part(const int8_t *y, uint32_t out, uint32_t offset, uint64_t ns, uint8_t source,
                      uint8_t *r, uint16_t *rlen) {
    uint32_t room = cmd.max_payload - HB_SIZE_INFER_R(0), n = 0;
    if (y) n = out - offset < room ? out - offset : room;
    hb_msg_put(r, HB_F_INFER_R_TOTAL, out);
    hb_msg_put(r, HB_F_INFER_R_N, n);
    if (n) memcpy(hb_msg_wptr(r, HB_F_INFER_R_OUTPUT), y + offset, n);
    hb_msg_put(r, HB_F_INFER_R_DURATION_NS, ns);
    hb_msg_put(r, HB_F_INFER_R_TIMING_SOURCE, source);
    *rlen = (uint16_t)hb_msg_size(r, HB_L_INFER_R);
    return 0;
}

static int infer(const uint8_t *p, uint16_t len, uint8_t *r, uint16_t *rlen, hb_status *st) {
    uint8_t slot = hb_msg_u8(p, HB_F_INFER_SLOT);
    uint32_t index = hb_msg_u32(p, HB_F_INFER_INDEX);
    uint32_t in_offset = hb_msg_u32(p, HB_F_INFER_IN_OFFSET);
    uint32_t out_offset = hb_msg_u32(p, HB_F_INFER_OUT_OFFSET);
    uint32_t k = hb_msg_rest_len(p, len, HB_F_INFER_INPUT);
    if (need_model(st) < 0) return -1;
    hb_graph *g = hb_graph_instance();
    uint32_t in = hb_graph_input_size(g), out = hb_graph_output_size(g);
    if (out_offset >= out)
        return HB_FAIL(st, HB_MSG_INFER_OUT_OFFSET_CODE, HB_MSG_INFER_OUT_OFFSET,
                       HB_S(NAME(HB_L_INFER)), HB_I(out_offset), HB_I(out));
    int8_t *x = hb_graph_input_buffer(g);
    if (!x) return HB_FAIL(st, HB_MSG_INTERNAL_CODE, HB_MSG_INTERNAL, HB_S("no activations"));
    if (k == 0 && out_offset > 0) { /* read the held output on */
        if (!cmd.held || cmd.held_slot != slot || cmd.held_index != index)
            return HB_FAIL(st, HB_MSG_INFER_NOT_HELD_CODE, HB_MSG_INFER_NOT_HELD,
                           HB_S(NAME(HB_L_INFER)), HB_I(slot), HB_I(index), HB_I(out_offset));
        return infer_part(hb_graph_output_buffer(g), out, out_offset, 0, HB_TIMING_NONE, r, rlen);
    }
    if (k == 0) { /* item `index` of `slot`, copied into the input buffer by the pass */
        hb_slot s;
        if (model_and_slot(slot, &s, st) < 0) return -1;
        if (index >= s.n_items)
            return HB_FAIL(st, HB_MSG_INFER_INDEX_CODE, HB_MSG_INFER_INDEX,
                           HB_S(NAME(HB_L_INFER)), HB_I(index), HB_I(slot), HB_I(s.n_items));
        uint64_t t0 = hb_port_ticks();
        const int8_t *y = hb_graph_forward(g, s.inputs + (uint64_t)index * s.item_size);
        uint64_t ns = duration_ns(t0);
        cmd.staged = 0;
        cmd.held = 1;
        cmd.held_slot = slot;
        cmd.held_index = index;
        return infer_part(y, out, 0, ns, hb_port_timing_source(), r, rlen);
    }
    /* a piece of the input in the request (slot and index are 0: a range rule); in_offset and
     * k are u32, so their sum fits 64 bits */
    uint64_t end = (uint64_t)in_offset + k;
    if (end > in)
        return HB_FAIL(st, HB_MSG_INFER_INPUT_SIZE_CODE, HB_MSG_INFER_INPUT_SIZE,
                       HB_S(NAME(HB_L_INFER)), HB_I(end), HB_I(in));
    if (in_offset != 0 && in_offset != cmd.staged)
        return HB_FAIL(st, HB_MSG_INFER_INPUT_OFFSET_CODE, HB_MSG_INFER_INPUT_OFFSET,
                       HB_S(NAME(HB_L_INFER)), HB_I(in_offset), HB_I(cmd.staged));
    memcpy(x + in_offset, hb_msg_ptr(p, HB_F_INFER_INPUT), k);
    cmd.staged = (uint32_t)end;
    cmd.held = 0;
    if (end < in) return infer_part(NULL, out, 0, 0, HB_TIMING_NONE, r, rlen); /* more to come */
    uint64_t t0 = hb_port_ticks();
    const int8_t *y = hb_graph_forward(g, x); /* the input assembled in place */
    uint64_t ns = duration_ns(t0);
    cmd.staged = 0;
    cmd.held = 1;
    cmd.held_slot = 0;
    cmd.held_index = 0;
    return infer_part(y, out, out_offset, ns, hb_port_timing_source(), r, rlen);
}

/* ---- DEVICE_INFO, LOAD_STAGE, LOAD_COMMIT (docs/protocol.md) ---------------------------- */

static uint16_t device_info(uint8_t *r) {
    const hb_port_info_t *pi = hb_port_info();
    hb_msg_put(r, HB_F_DEVICE_INFO_R_CPU_HZ, pi->cpu_hz);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_CACHES, pi->caches);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_ARENA_BYTES, hb_store_arena_bytes());
    hb_msg_put(r, HB_F_DEVICE_INFO_R_ARENA_BASE,
               (uint64_t)(uintptr_t)hb_store_data(HB_STORE_MODEL, NULL));
    hb_msg_put(r, HB_F_DEVICE_INFO_R_UART_BAUD, pi->uart_baud);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_UART_KERNEL_HZ, pi->uart_kernel_hz);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_UART_OVERRUN, pi->uart_overrun);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_UART_FRAMING, pi->uart_framing);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_UART_NOISE, pi->uart_noise);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_UART_DROPPED, pi->uart_dropped);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_WATCHDOG_MS, pi->watchdog_ms);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_RESET_CAUSE, pi->reset_cause);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_RESET_FLAGS, pi->reset_flags);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_BRINGUP_ERRORS, pi->bringup_errors);
    hb_msg_put(r, HB_F_DEVICE_INFO_R_TICKS, hb_port_ticks());
    hb_msg_put(r, HB_F_DEVICE_INFO_R_TICK_NS_Q16, hb_port_tick_ns_q16());
    hb_msg_put(r, HB_F_DEVICE_INFO_R_TIMING_SOURCE, hb_port_timing_source());
    return (uint16_t)hb_msg_size(r, HB_L_DEVICE_INFO_R);
}

static int store_target(uint8_t t) { return t == HB_STAGE_MODEL ? HB_STORE_MODEL : t; }

/* reserve the target's region as an upload at offset 0 does; answer where it starts */
static int load_stage(const uint8_t *p, uint8_t *r, uint16_t *rlen, hb_status *st) {
    uint8_t t = hb_msg_u8(p, HB_F_LOAD_STAGE_TARGET);
    uint32_t total = hb_msg_u32(p, HB_F_LOAD_STAGE_TOTAL_LEN);
    int target = store_target(t);
    cmd.stage_bits &= (uint8_t)~(1u << t);
    if (target == HB_STORE_MODEL) drop_model();
    if (hb_store_begin(target, NAME(HB_L_LOAD_STAGE), total, st) < 0) return -1;
    cmd.stage_bits |= (uint8_t)(1u << t);
    uint8_t *at = hb_store_data(target, NULL), *base = hb_store_data(HB_STORE_MODEL, NULL);
    hb_port_stage_sync(at, total);
    hb_msg_put(r, HB_F_LOAD_STAGE_R_TARGET, t);
    hb_msg_put(r, HB_F_LOAD_STAGE_R_OFFSET, (uint32_t)(at - base));
    hb_msg_put(r, HB_F_LOAD_STAGE_R_TOTAL_LEN, total);
    *rlen = (uint16_t)hb_msg_size(r, HB_L_LOAD_STAGE_R);
    return 0;
}

/* the staged bytes' CRC must be the host's; then they complete as a last chunk does */
static int load_commit(const uint8_t *p, uint8_t *r, uint16_t *rlen, hb_status *st) {
    uint8_t t = hb_msg_u8(p, HB_F_LOAD_COMMIT_TARGET);
    uint32_t total = hb_msg_u32(p, HB_F_LOAD_COMMIT_TOTAL_LEN);
    uint32_t want = hb_msg_u32(p, HB_F_LOAD_COMMIT_CRC32), staged_len = 0, crc = 0, items = 0;
    int target = store_target(t);
    const char *what = NAME(HB_L_LOAD_COMMIT);
    if (!(cmd.stage_bits & (1u << t)))
        return HB_FAIL(st, HB_MSG_STAGE_NONE_CODE, HB_MSG_STAGE_NONE, HB_S(what), HB_I(t));
    uint8_t *at = hb_store_data(target, &staged_len);
    if (total != staged_len)
        return HB_FAIL(st, HB_MSG_STAGE_TOTAL_CODE, HB_MSG_STAGE_TOTAL, HB_S(what), HB_I(total),
                       HB_I(t), HB_I(staged_len));
    hb_port_stage_sync(at, total);
    uint32_t got = hb_crc32(0, at, total);
    if (got != want) /* the upload stays staged: the host may write again and commit */
        return HB_FAIL(st, HB_MSG_STAGE_CRC_CODE, HB_MSG_STAGE_CRC, HB_S(what), HB_I(total),
                       HB_I(got), HB_I(want));
    cmd.stage_bits &= (uint8_t)~(1u << t);
    hb_store_stage_done(target);
    if (target == HB_STORE_MODEL ? model_complete(total, &crc, st) < 0
                                 : data_complete(t, total, &items, st) < 0)
        return -1;
    hb_msg_put(r, HB_F_LOAD_COMMIT_R_TARGET, t);
    hb_msg_put(r, HB_F_LOAD_COMMIT_R_RECEIVED, total);
    hb_msg_put(r, HB_F_LOAD_COMMIT_R_MODEL_CRC32, crc);
    hb_msg_put(r, HB_F_LOAD_COMMIT_R_N_ITEMS, items);
    *rlen = (uint16_t)hb_msg_size(r, HB_L_LOAD_COMMIT_R);
    return 0;
}

int hb_commands_execute(uint8_t type, const uint8_t *p, uint16_t len, uint8_t *resp,
                   uint16_t *resp_len, hb_status *st) {
    /* every answer fits HB_DEVICE_MAX_PAYLOAD: a fixed layout, or checked by fits() against
     * max_payload (which hb_device_init keeps <= HB_DEVICE_MAX_PAYLOAD) */
    *resp_len = 0;
    if (type != HB_TYPE_INFER && type != HB_TYPE_HELLO) { /* it may overwrite activations */
        cmd.staged = 0;
        cmd.held = 0;
    }
    switch (type) {
    case HB_TYPE_HELLO: *resp_len = hello(resp); return 0;
    case HB_TYPE_LOAD_MODEL: return load_model(p, len, resp, resp_len, st);
    case HB_TYPE_LOAD_DATA: return load_data(p, len, resp, resp_len, st);
    case HB_TYPE_PROBE: return probe(p, resp, resp_len, st);
    case HB_TYPE_APPLY: return apply(p, resp, resp_len, st);
    case HB_TYPE_EVAL: return eval(p, resp, resp_len, st);
    case HB_TYPE_WEIGHTS_CRC: return weights_crc(resp, resp_len, st);
    case HB_TYPE_RESET: return 0; /* an empty answer; device.c resets once it is sent */
    case HB_TYPE_APPLY_BATCH: return apply_batch(p, resp, resp_len, st);
    case HB_TYPE_APPLY_PROBED: return apply_probed(p, resp, resp_len, st);
    case HB_TYPE_APPLY_PROBE: return apply_probe(p, resp, resp_len, st);
    case HB_TYPE_INFER: return infer(p, len, resp, resp_len, st);
    case HB_TYPE_DEVICE_INFO: *resp_len = device_info(resp); return 0;
    case HB_TYPE_LOAD_STAGE: return load_stage(p, resp, resp_len, st);
    case HB_TYPE_LOAD_COMMIT: return load_commit(p, resp, resp_len, st);
    case HB_TYPE_HEAD_GRAD: return head_grad(p, resp, resp_len, st);
    default: /* device.c passes request types only */
        return HB_FAIL(st, HB_MSG_INTERNAL_CODE, HB_MSG_INTERNAL, HB_S("no handler for the type"));
    }
}
