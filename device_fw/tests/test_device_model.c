/* The device's model commands end to end, through frames: LOAD_MODEL / LOAD_DATA in chunks,
 * then the twin's command sequences of fixtures/golden/model_{mlp,cnn,dw}.hbgv (PROBE loss
 * pairs, weights CRC and updates after each APPLY, EVAL) for every ZOCF configuration, and the
 * same updates again as APPLY_PROBED, APPLY_PROBE (whose probe part must give the next
 * PROBE's losses) and one APPLY_BATCH. Then the state checks of docs/protocol.md with their
 * declared messages: slot/model mismatch, PROBED_NONE / PROBED_Q, EVAL past the end, INFER
 * (item vs inline input, sizes), answers too large for max_payload, a model refused at
 * completion (BAD_MODEL, MODEL_MEMORY) leaving no model while the data slots survive. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "hb_bytes.h"
#include "hb_crc.h"
#include "hb_device.h"
#include "hb_graph.h"
#include "hb_model.h"
#include "hb_msg.h"
#include "hb_status.h"
#include "hbgv.h"
#include "port_capture.h"

static uint8_t payload[HB_MAX_PAYLOAD];
static uint16_t seq;
static cap_answer ans;

static const char *text(const char *fmt, const hb_arg *args, size_t n) {
    static char buf[HB_STATUS_MAX + 1];
    size_t len = hb_format(buf, HB_STATUS_MAX, fmt, args, n);
    buf[len] = 0;
    return buf;
}
#define TEXT(fmt, ...)                                                                         \
    text((fmt), (const hb_arg[]){__VA_ARGS__},                                                  \
         sizeof((const hb_arg[]){__VA_ARGS__}) / sizeof(hb_arg))

/* send one request; 1 if answered with the request's response type */
static int request(uint8_t type, uint16_t len) {
    int n = cap_request(type, ++seq, payload, len, &ans);
    return n == 1 && ans.seq == seq && ans.type == (type | HB_RESPONSE_BIT);
}

static const char *error_text(void) {
    static char buf[HB_STATUS_MAX + 1];
    if (ans.type != HB_TYPE_ERROR) return "(not an ERROR)";
    uint16_t m = hb_msg_u16(ans.payload, HB_F_ERROR_MSG_LEN);
    memcpy(buf, hb_msg_ptr(ans.payload, HB_F_ERROR_MSG), m);
    buf[m] = 0;
    return buf;
}

static void expect_error(const char *what, uint8_t type, uint16_t len, uint16_t code,
                         const char *want) {
    int n = cap_request(type, ++seq, payload, len, &ans);
    CHECK(n == 1 && ans.type == HB_TYPE_ERROR, "%s: no ERROR (type 0x%02x)", what, ans.type);
    if (ans.type != HB_TYPE_ERROR) return;
    const char *got = error_text();
    CHECK(hb_msg_u16(ans.payload, HB_F_ERROR_CODE) == code, "%s: code %u (%s)", what,
          hb_msg_u16(ans.payload, HB_F_ERROR_CODE), got);
    if (want) CHECK(strcmp(got, want) == 0, "%s: '%s', want '%s'", what, got, want);
}

static void hello(void) {
    hb_msg_put(payload, HB_F_HELLO_HOST_PROTOCOL_VERSION, HB_PROTOCOL_VERSION);
    hb_msg_put(payload, HB_F_HELLO_SESSION, 0x600D);
    CHECK(request(HB_TYPE_HELLO, HB_SIZE_HELLO), "HELLO");
}

/* upload a blob; the last answer stays in ans. Returns 1 when every chunk was accepted. */
static int upload(uint8_t type, uint8_t slot, const uint8_t *blob, uint32_t len) {
    uint16_t maxp = hb_device_max_payload();
    int model = type == HB_TYPE_LOAD_MODEL;
    uint32_t chunk = maxp - (model ? HB_MODEL_CHUNK_OVERHEAD : HB_DATA_CHUNK_OVERHEAD);
    uint32_t off = 0;
    do {
        uint32_t k = len - off < chunk ? len - off : chunk;
        uint16_t n;
        if (model) {
            hb_msg_put(payload, HB_F_LOAD_MODEL_TOTAL_LEN, len);
            hb_msg_put(payload, HB_F_LOAD_MODEL_OFFSET, off);
            memcpy(hb_msg_wptr(payload, HB_F_LOAD_MODEL_CHUNK), blob + off, k);
            n = (uint16_t)(HB_MIN_SIZE_LOAD_MODEL + k);
        } else {
            hb_msg_put(payload, HB_F_LOAD_DATA_SLOT, slot);
            hb_msg_put(payload, HB_F_LOAD_DATA_TOTAL_LEN, len);
            hb_msg_put(payload, HB_F_LOAD_DATA_OFFSET, off);
            memcpy(hb_msg_wptr(payload, HB_F_LOAD_DATA_CHUNK), blob + off, k);
            n = (uint16_t)(HB_MIN_SIZE_LOAD_DATA + k);
        }
        if (!request(type, n)) return 0;
        off += k;
    } while (off < len);
    return 1;
}

static int load_model(const hbgv_array *blob) {
    if (!upload(HB_TYPE_LOAD_MODEL, 0, blob->data, blob->nbytes)) return 0;
    CHECK(hb_msg_u8(ans.payload, HB_F_LOAD_MODEL_R_COMPLETE) == 1, "model complete");
    /* decisions.md 4: the CRC of the blob without its trailer, which equals that trailer */
    uint32_t crc = hb_msg_u32(ans.payload, HB_F_LOAD_MODEL_R_MODEL_CRC32);
    uint32_t want = hb_crc32(0, blob->data, blob->nbytes - HB_CRC_SIZE);
    CHECK(crc == want && crc == hb_rd32(blob->data + blob->nbytes - HB_CRC_SIZE),
          "model_crc32 %08x, want %08x", crc, want);
    return 1;
}

static uint32_t weights_crc(uint32_t *updates) {
    if (!request(HB_TYPE_WEIGHTS_CRC, 0)) return 0;
    if (updates) *updates = hb_msg_u32(ans.payload, HB_F_WEIGHTS_CRC_R_UPDATES_APPLIED);
    return hb_msg_u32(ans.payload, HB_F_WEIGHTS_CRC_R_CRC32);
}

static void put_u32s(uint8_t *dst, const hbgv_array *a) {
    for (uint32_t i = 0; i < hbgv_elems(a); i++) hb_wr32(dst + 4 * i, (uint32_t)hbgv_get(a, i));
}

/* a PROBE payload at p from step `step` of config `cfg`; returns its length */
static uint16_t probe_payload(uint8_t *p, const hbgv_file *f, const char *step) {
    char key[96];
    snprintf(key, sizeof key, "%s.args", step);
    const hbgv_array *args = hbgv_need(f, key);
    snprintf(key, sizeof key, "%s.seeds", step);
    const hbgv_array *seeds = hbgv_need(f, key);
    uint16_t q = (uint16_t)hbgv_elems(seeds);
    hb_msg_put(p, HB_F_PROBE_SLOT, 0);
    hb_msg_put(p, HB_F_PROBE_BATCH_SEED, (uint64_t)hbgv_get(args, 0));
    hb_msg_put(p, HB_F_PROBE_BATCH_SIZE, (uint64_t)hbgv_get(args, 1));
    hb_msg_put(p, HB_F_PROBE_EPS, (uint64_t)hbgv_get(args, 2));
    hb_msg_put(p, HB_F_PROBE_Q, q);
    put_u32s(hb_msg_wptr(p, HB_F_PROBE_SEEDS), seeds);
    return (uint16_t)HB_SIZE_PROBE(q);
}

/* the loss pairs of a PROBE response at r against step's lp/lm */
static void check_losses(const char *what, const uint8_t *r, const hbgv_file *f,
                         const char *step) {
    char key[96];
    snprintf(key, sizeof key, "%s.lp", step);
    const hbgv_array *lp = hbgv_need(f, key);
    snprintf(key, sizeof key, "%s.lm", step);
    const hbgv_array *lm = hbgv_need(f, key);
    uint16_t q = hb_msg_u16(r, HB_F_PROBE_R_Q);
    CHECK(q == hbgv_elems(lp), "%s: q %u", what, q);
    if (q != hbgv_elems(lp)) return;
    const uint8_t *gp = hb_msg_ptr(r, HB_F_PROBE_R_LOSS_PLUS);
    const uint8_t *gm = hb_msg_ptr(r, HB_F_PROBE_R_LOSS_MINUS);
    for (uint16_t k = 0; k < q; k++) {
        CHECK(hb_rdi32(gp + 4 * k) == hbgv_get(lp, k), "%s: loss_plus[%u] %d, want %lld", what,
              k, hb_rdi32(gp + 4 * k), (long long)hbgv_get(lp, k));
        CHECK(hb_rdi32(gm + 4 * k) == hbgv_get(lm, k), "%s: loss_minus[%u] %d, want %lld", what,
              k, hb_rdi32(gm + 4 * k), (long long)hbgv_get(lm, k));
    }
    CHECK(hb_msg_u8(r, HB_F_PROBE_R_TIMING_SOURCE) == HB_TIMING_NONE &&
              hb_msg_u64(r, HB_F_PROBE_R_DURATION_NS) == 0,
          "%s: the test port has no timing", what);
}

static int op_of(const hbgv_file *f, const char *step) {
    char key[96];
    snprintf(key, sizeof key, "%s.op", step);
    const hbgv_array *op = hbgv_find(f, key);
    return op ? (int)hbgv_get(op, 0) : 0;
}

static const hbgv_array *field(const hbgv_file *f, const char *step, const char *name) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", step, name);
    return hbgv_need(f, key);
}

static void check_after(const char *what, const hbgv_file *f, const char *step) {
    const hbgv_array *after = field(f, step, "after");
    uint32_t updates = 0, crc = weights_crc(&updates);
    CHECK(crc == (uint32_t)hbgv_get(after, 0), "%s: weights CRC %08x, want %08x", what, crc,
          (uint32_t)hbgv_get(after, 0));
    CHECK(updates == (uint32_t)hbgv_get(after, 1), "%s: updates %u", what, updates);
}

/* the sequence as the twin ran it: PROBE, APPLY, EVAL */
static void run_plain(const hbgv_file *f, const char *cfg) {
    char step[64];
    for (int j = 0; op_of(f, (snprintf(step, sizeof step, "%s.s%d", cfg, j), step)); j++) {
        int op = op_of(f, step);
        if (op == 1) {
            int ok = request(HB_TYPE_PROBE, probe_payload(payload, f, step));
            CHECK(ok, "%s PROBE: %s", step, error_text());
            if (ok) check_losses(step, ans.payload, f, step);
        } else if (op == 2) {
            const hbgv_array *seeds = field(f, step, "seeds"), *coeffs = field(f, step, "coeffs");
            uint16_t q = (uint16_t)hbgv_elems(seeds);
            hb_msg_put(payload, HB_F_APPLY_Q, q);
            put_u32s(hb_msg_wptr(payload, HB_F_APPLY_SEEDS), seeds);
            put_u32s(hb_msg_wptr(payload, HB_F_APPLY_COEFFS), coeffs);
            int ok = request(HB_TYPE_APPLY, (uint16_t)HB_SIZE_APPLY(q));
            CHECK(ok, "%s APPLY: %s", step, error_text());
            const hbgv_array *after = field(f, step, "after");
            if (ok)
                CHECK(hb_msg_u32(ans.payload, HB_F_APPLY_R_UPDATES_APPLIED) ==
                          (uint32_t)hbgv_get(after, 1),
                      "%s: updates", step);
            check_after(step, f, step);
        } else if (op == 3) {
            const hbgv_array *args = field(f, step, "args"), *res = field(f, step, "res");
            hb_msg_put(payload, HB_F_EVAL_SLOT, 0);
            hb_msg_put(payload, HB_F_EVAL_START, (uint64_t)hbgv_get(args, 0));
            hb_msg_put(payload, HB_F_EVAL_COUNT, (uint64_t)hbgv_get(args, 1));
            int ok = request(HB_TYPE_EVAL, HB_SIZE_EVAL);
            CHECK(ok, "%s EVAL: %s", step, error_text());
            if (ok) {
                CHECK(hb_msg_u32(ans.payload, HB_F_EVAL_R_COUNT) == hbgv_get(args, 1), "count");
                CHECK(hb_msg_u32(ans.payload, HB_F_EVAL_R_CORRECT) == hbgv_get(res, 0),
                      "%s: correct %u, want %lld", step,
                      hb_msg_u32(ans.payload, HB_F_EVAL_R_CORRECT), (long long)hbgv_get(res, 0));
                CHECK((int64_t)hb_msg_u64(ans.payload, HB_F_EVAL_R_LOSS_SUM_Q16) ==
                          hbgv_get(res, 1),
                      "%s: loss sum", step);
            }
        }
    }
}

/* The same updates through APPLY_PROBED (an APPLY whose seeds are the PROBE's before it),
 * APPLY_PROBE (such an APPLY with the next PROBE: its probe part gives that PROBE's losses)
 * and plain APPLY otherwise. Weights after each update are the twin's. */
static void run_fused(const hbgv_file *f, const char *cfg, int fuse_probe) {
    char step[64], next[64];
    const hbgv_array *last_seeds = NULL;
    for (int j = 0; op_of(f, (snprintf(step, sizeof step, "%s.s%d", cfg, j), step)); j++) {
        int op = op_of(f, step);
        if (op == 1) {
            CHECK(request(HB_TYPE_PROBE, probe_payload(payload, f, step)), "%s", step);
            last_seeds = field(f, step, "seeds");
            continue;
        }
        if (op != 2) continue;
        const hbgv_array *seeds = field(f, step, "seeds"), *coeffs = field(f, step, "coeffs");
        uint16_t q = (uint16_t)hbgv_elems(seeds);
        int same = last_seeds && hbgv_elems(last_seeds) == q &&
                   memcmp(last_seeds->data, seeds->data, seeds->nbytes) == 0;
        snprintf(next, sizeof next, "%s.s%d", cfg, j + 1);
        if (same && fuse_probe && op_of(f, next) == 1) {
            hb_msg_put(payload, HB_F_APPLY_PROBE_Q_APPLY, q);
            put_u32s(hb_msg_wptr(payload, HB_F_APPLY_PROBE_COEFFS), coeffs);
            uint8_t *pp = hb_msg_wptr(payload, HB_F_APPLY_PROBE_PROBE);
            uint16_t n = probe_payload(pp, f, next);
            int ok = request(HB_TYPE_APPLY_PROBE, (uint16_t)(pp - payload + n));
            CHECK(ok, "%s APPLY_PROBE: %s", step, error_text());
            if (ok) {
                CHECK(hb_msg_u32(ans.payload, HB_F_APPLY_PROBE_R_UPDATES_APPLIED) ==
                          (uint32_t)hbgv_get(field(f, step, "after"), 1),
                      "%s: updates", step);
                check_losses(next, hb_msg_ptr(ans.payload, HB_F_APPLY_PROBE_R_PROBE), f, next);
            }
            check_after(step, f, step);
            last_seeds = field(f, next, "seeds");
            j++; /* the PROBE ran */
            continue;
        }
        if (same) {
            hb_msg_put(payload, HB_F_APPLY_PROBED_Q, q);
            put_u32s(hb_msg_wptr(payload, HB_F_APPLY_PROBED_COEFFS), coeffs);
            CHECK(request(HB_TYPE_APPLY_PROBED, (uint16_t)HB_SIZE_APPLY_PROBED(q)),
                  "%s APPLY_PROBED: %s", step, error_text());
        } else {
            hb_msg_put(payload, HB_F_APPLY_Q, q);
            put_u32s(hb_msg_wptr(payload, HB_F_APPLY_SEEDS), seeds);
            put_u32s(hb_msg_wptr(payload, HB_F_APPLY_COEFFS), coeffs);
            CHECK(request(HB_TYPE_APPLY, (uint16_t)HB_SIZE_APPLY(q)), "%s APPLY", step);
        }
        check_after(step, f, step);
    }
}

/* every APPLY of the sequence in one APPLY_BATCH */
static void run_batch(const hbgv_file *f, const char *cfg) {
    char step[64], last[64] = "";
    uint16_t n_steps = 0;
    uint8_t *rec = hb_msg_wptr(payload, HB_F_APPLY_BATCH_STEPS);
    for (int j = 0; op_of(f, (snprintf(step, sizeof step, "%s.s%d", cfg, j), step)); j++) {
        if (op_of(f, step) != 2) continue;
        const hbgv_array *seeds = field(f, step, "seeds"), *coeffs = field(f, step, "coeffs");
        uint16_t q = (uint16_t)hbgv_elems(seeds);
        hb_msg_put(rec, HB_F_APPLY_Q, q);
        put_u32s(hb_msg_wptr(rec, HB_F_APPLY_SEEDS), seeds);
        put_u32s(hb_msg_wptr(rec, HB_F_APPLY_COEFFS), coeffs);
        rec += HB_SIZE_APPLY(q);
        n_steps++;
        snprintf(last, sizeof last, "%s", step);
    }
    hb_msg_put(payload, HB_F_APPLY_BATCH_N_STEPS, n_steps);
    CHECK(request(HB_TYPE_APPLY_BATCH, (uint16_t)(rec - payload)), "%s APPLY_BATCH: %s", cfg,
          error_text());
    CHECK(hb_msg_u32(ans.payload, HB_F_APPLY_BATCH_R_UPDATES_APPLIED) == n_steps, "batch count");
    check_after("APPLY_BATCH", f, last);
}

/* INFER: item i of slot 0 and the same input inline give the same output; EVAL of that one
 * item counts it correct exactly when the output's arg-max (lowest index on ties) is its
 * label */
static void check_infer(const hbgv_file *f) {
    const hbgv_array *x = hbgv_need(f, "x"), *y = hbgv_need(f, "y");
    uint32_t item = x->dims[1];
    for (uint32_t i = 0; i < 4; i++) {
        static uint8_t out1[HB_MAX_PAYLOAD];
        hb_msg_put(payload, HB_F_INFER_SLOT, 0);
        hb_msg_put(payload, HB_F_INFER_INDEX, i);
        hb_msg_put(payload, HB_F_INFER_IN_OFFSET, 0);
        hb_msg_put(payload, HB_F_INFER_OUT_OFFSET, 0);
        int ok = request(HB_TYPE_INFER, HB_MIN_SIZE_INFER);
        CHECK(ok, "INFER item %u: %s", i, error_text());
        if (!ok) return;
        uint16_t n = hb_msg_u16(ans.payload, HB_F_INFER_R_N);
        CHECK(n == hb_graph_output_size(hb_graph_instance()), "INFER n %u", n);
        memcpy(out1, hb_msg_ptr(ans.payload, HB_F_INFER_R_OUTPUT), n);
        hb_msg_put(payload, HB_F_INFER_INDEX, 0);
        memcpy(hb_msg_wptr(payload, HB_F_INFER_INPUT), x->data + (size_t)i * item, item);
        ok = request(HB_TYPE_INFER, (uint16_t)(HB_MIN_SIZE_INFER + item));
        CHECK(ok && memcmp(hb_msg_ptr(ans.payload, HB_F_INFER_R_OUTPUT), out1, n) == 0,
              "INFER inline input %u", i);
        /* the same input in two pieces: the first answers no output, the second all of it */
        uint32_t half = item / 2;
        memcpy(hb_msg_wptr(payload, HB_F_INFER_INPUT), x->data + (size_t)i * item, half);
        ok = request(HB_TYPE_INFER, (uint16_t)(HB_MIN_SIZE_INFER + half));
        CHECK(ok && hb_msg_u16(ans.payload, HB_F_INFER_R_N) == 0 &&
                  hb_msg_u32(ans.payload, HB_F_INFER_R_TOTAL) == n,
              "INFER first piece %u", i);
        hb_msg_put(payload, HB_F_INFER_IN_OFFSET, half);
        memcpy(hb_msg_wptr(payload, HB_F_INFER_INPUT), x->data + (size_t)i * item + half,
               item - half);
        ok = request(HB_TYPE_INFER, (uint16_t)(HB_MIN_SIZE_INFER + item - half));
        CHECK(ok && hb_msg_u16(ans.payload, HB_F_INFER_R_N) == n &&
                  memcmp(hb_msg_ptr(ans.payload, HB_F_INFER_R_OUTPUT), out1, n) == 0,
              "INFER input in two pieces %u", i);
        hb_msg_put(payload, HB_F_INFER_IN_OFFSET, 0);
        int best = 0;
        for (int k = 1; k < n; k++)
            if ((int8_t)out1[k] > (int8_t)out1[best]) best = k;
        hb_msg_put(payload, HB_F_EVAL_SLOT, 0);
        hb_msg_put(payload, HB_F_EVAL_START, i);
        hb_msg_put(payload, HB_F_EVAL_COUNT, 1);
        CHECK(request(HB_TYPE_EVAL, HB_SIZE_EVAL), "EVAL one");
        CHECK(hb_msg_u32(ans.payload, HB_F_EVAL_R_CORRECT) == (best == hbgv_get(y, i)),
              "INFER arg-max %d vs EVAL of item %u", best, i);
    }
}

static void test_sequences(const char *dir, const char *file) {
    hbgv_file f;
    hbgv_load(&f, dir, file);
    cap_boot(CAP_ARENA_MAX, HB_MAX_PAYLOAD, 1);
    seq = 100;
    hello();
    const hbgv_array *data = hbgv_need(&f, "data_blob");
    CHECK(upload(HB_TYPE_LOAD_DATA, 0, data->data, data->nbytes), "%s: data: %s", file,
          error_text());
    char cfg[16], key[32];
    for (int i = 0; snprintf(key, sizeof key, "c%d.blob", i), hbgv_find(&f, key); i++) {
        snprintf(cfg, sizeof cfg, "c%d", i);
        const hbgv_array *blob = hbgv_need(&f, key);
        snprintf(key, sizeof key, "c%d.info", i);
        uint32_t crc0 = (uint32_t)hbgv_get(hbgv_need(&f, key), 2);
        for (int variant = 0; variant < 4; variant++) {
            if (!load_model(blob)) {
                CHECK(0, "%s %s: model refused: %s", file, cfg, error_text());
                break;
            }
            uint32_t updates = 1;
            CHECK(weights_crc(&updates) == crc0 && updates == 0, "%s %s: initial CRC", file, cfg);
            if (variant == 0) run_plain(&f, cfg);
            if (variant == 1) run_fused(&f, cfg, 0);
            if (variant == 2) run_fused(&f, cfg, 1);
            if (variant == 3) run_batch(&f, cfg);
        }
        if (i == 0) check_infer(&f);
    }
    hbgv_free(&f);
}

/* the state checks, on the MLP's first configuration */
static void test_state_checks(const char *dir) {
    hbgv_file f;
    hbgv_load(&f, dir, "model_mlp.hbgv");
    const hbgv_array *blob = hbgv_need(&f, "c0.blob"), *data = hbgv_need(&f, "data_blob");
    const hbgv_array *x = hbgv_need(&f, "x");
    uint32_t item = x->dims[1];
    cap_boot(CAP_ARENA_MAX, 256, 1);
    seq = 7;
    hello();

    /* a refused blob leaves no model; the data slot survives model uploads */
    CHECK(upload(HB_TYPE_LOAD_DATA, 0, data->data, data->nbytes), "data");
    static uint8_t bad[1 << 16];
    CHECK(blob->nbytes <= sizeof bad, "blob size");
    memcpy(bad, blob->data, blob->nbytes);
    bad[blob->nbytes - 1] ^= 0xFF; /* the blob's CRC trailer */
    CHECK(!upload(HB_TYPE_LOAD_MODEL, 0, bad, blob->nbytes) && ans.type == HB_TYPE_ERROR &&
              hb_msg_u16(ans.payload, HB_F_ERROR_CODE) == HB_ERR_BAD_MODEL,
          "corrupt blob: %s", error_text());
    expect_error("no model after BAD_MODEL", HB_TYPE_WEIGHTS_CRC, 0, HB_ERR_NO_MODEL,
                 HB_MSG_NO_MODEL);
    CHECK(load_model(blob), "model");

    /* PROBE before any: APPLY_PROBED has no seeds */
    hb_msg_put(payload, HB_F_APPLY_PROBED_Q, 1);
    hb_wr32(hb_msg_wptr(payload, HB_F_APPLY_PROBED_COEFFS), 1);
    expect_error("no PROBE yet", HB_TYPE_APPLY_PROBED, (uint16_t)HB_SIZE_APPLY_PROBED(1),
                 HB_ERR_BAD_ARGUMENT, TEXT(HB_MSG_PROBED_NONE, HB_S("APPLY_PROBED request")));

    /* PROBE with q 31 would answer 259 bytes on a 256-byte device */
    uint16_t q = 31;
    hb_msg_put(payload, HB_F_PROBE_SLOT, 0);
    hb_msg_put(payload, HB_F_PROBE_BATCH_SIZE, 4);
    hb_msg_put(payload, HB_F_PROBE_BATCH_SEED, 9);
    hb_msg_put(payload, HB_F_PROBE_EPS, 2);
    hb_msg_put(payload, HB_F_PROBE_Q, q);
    memset(hb_msg_wptr(payload, HB_F_PROBE_SEEDS), 3, 4u * q);
    expect_error("answer too large", HB_TYPE_PROBE, (uint16_t)HB_SIZE_PROBE(q),
                 HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_ANSWER_TOO_LARGE, HB_S("PROBE request"),
                      HB_I(HB_SIZE_PROBE_R(q)), HB_I(256)));
    hb_msg_put(payload, HB_F_PROBE_Q, 2);
    CHECK(request(HB_TYPE_PROBE, (uint16_t)HB_SIZE_PROBE(2)), "PROBE q 2: %s", error_text());
    hb_msg_put(payload, HB_F_APPLY_PROBED_Q, 1);
    expect_error("q mismatch", HB_TYPE_APPLY_PROBED, (uint16_t)HB_SIZE_APPLY_PROBED(1),
                 HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_PROBED_Q, HB_S("APPLY_PROBED request"), HB_I(1), HB_I(2)));

    /* slot checks: empty, item size, classes */
    hb_msg_put(payload, HB_F_EVAL_SLOT, 2);
    hb_msg_put(payload, HB_F_EVAL_START, 0);
    hb_msg_put(payload, HB_F_EVAL_COUNT, 1);
    expect_error("empty slot", HB_TYPE_EVAL, HB_SIZE_EVAL, HB_ERR_NO_DATA,
                 TEXT(HB_MSG_NO_DATA, HB_I(2)));
    static uint8_t other[4096];
    hb_wr32(other + HB_OFF_DATA_BLOB_N_ITEMS, 2);
    hb_wr16(other + HB_OFF_DATA_BLOB_ITEM_SIZE, 3);
    hb_wr16(other + HB_OFF_DATA_BLOB_N_CLASSES, 10);
    memset(other + HB_DATA_HEADER_BYTES, 0, 8);
    CHECK(upload(HB_TYPE_LOAD_DATA, 2, other, HB_DATA_HEADER_BYTES + 2 * 3 + 2), "slot 2");
    hb_msg_put(payload, HB_F_EVAL_SLOT, 2);
    hb_msg_put(payload, HB_F_EVAL_START, 0);
    hb_msg_put(payload, HB_F_EVAL_COUNT, 1);
    expect_error("item size", HB_TYPE_EVAL, HB_SIZE_EVAL, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_SLOT_ITEM_SIZE, HB_I(2), HB_I(3), HB_I(item)));
    uint32_t l3 = HB_DATA_HEADER_BYTES + 2 * item + 2;
    hb_wr16(other + HB_OFF_DATA_BLOB_ITEM_SIZE, (uint16_t)item);
    hb_wr16(other + HB_OFF_DATA_BLOB_N_CLASSES, 11);
    memset(other + HB_DATA_HEADER_BYTES, 0, l3 - HB_DATA_HEADER_BYTES);
    CHECK(upload(HB_TYPE_LOAD_DATA, 2, other, l3), "slot 2 again");
    hb_msg_put(payload, HB_F_EVAL_SLOT, 2);
    hb_msg_put(payload, HB_F_EVAL_START, 0);
    hb_msg_put(payload, HB_F_EVAL_COUNT, 1);
    expect_error("classes", HB_TYPE_EVAL, HB_SIZE_EVAL, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_SLOT_CLASSES, HB_I(2), HB_I(11), HB_I(10)));
    /* EVAL past the end of slot 0 (40 items) */
    hb_msg_put(payload, HB_F_EVAL_SLOT, 0);
    hb_msg_put(payload, HB_F_EVAL_START, 39);
    hb_msg_put(payload, HB_F_EVAL_COUNT, 2);
    expect_error("past the end", HB_TYPE_EVAL, HB_SIZE_EVAL, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_EVAL_PAST_END, HB_S("EVAL request"), HB_I(39), HB_I(40), HB_I(0),
                      HB_I(40)));
    /* INFER: index past the end, an input of the wrong size, inline input with a slot */
    hb_msg_put(payload, HB_F_INFER_SLOT, 0);
    hb_msg_put(payload, HB_F_INFER_INDEX, 40);
    hb_msg_put(payload, HB_F_INFER_IN_OFFSET, 0);
    hb_msg_put(payload, HB_F_INFER_OUT_OFFSET, 0);
    expect_error("INFER index", HB_TYPE_INFER, HB_MIN_SIZE_INFER, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_INFER_INDEX, HB_S("INFER request"), HB_I(40), HB_I(0), HB_I(40)));
    hb_msg_put(payload, HB_F_INFER_INDEX, 0);
    expect_error("INFER input size", HB_TYPE_INFER, (uint16_t)(HB_MIN_SIZE_INFER + item + 1),
                 HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_INFER_INPUT_SIZE, HB_S("INFER request"), HB_I(item + 1),
                      HB_I(item)));
    hb_msg_put(payload, HB_F_INFER_SLOT, 1);
    expect_error("INFER inline with a slot", HB_TYPE_INFER, (uint16_t)(HB_MIN_SIZE_INFER + 5),
                 HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_INLINE_INPUT, HB_S("INFER request"), HB_I(1), HB_I(0)));
    /* a new upload at offset 0 drops the model at once; the slot survives */
    hb_msg_put(payload, HB_F_LOAD_MODEL_TOTAL_LEN, blob->nbytes);
    hb_msg_put(payload, HB_F_LOAD_MODEL_OFFSET, 0);
    CHECK(request(HB_TYPE_LOAD_MODEL, HB_MIN_SIZE_LOAD_MODEL), "restart");
    expect_error("model dropped by a restart", HB_TYPE_WEIGHTS_CRC, 0, HB_ERR_NO_MODEL, NULL);
    CHECK(load_model(blob), "model again");
    hb_msg_put(payload, HB_F_EVAL_SLOT, 0);
    hb_msg_put(payload, HB_F_EVAL_START, 0);
    hb_msg_put(payload, HB_F_EVAL_COUNT, 40);
    CHECK(request(HB_TYPE_EVAL, HB_SIZE_EVAL), "slot 0 survived: %s", error_text());
    /* the model's load forgot the PROBE's seeds */
    hb_msg_put(payload, HB_F_APPLY_PROBED_Q, 2);
    expect_error("seeds forgotten", HB_TYPE_APPLY_PROBED, (uint16_t)HB_SIZE_APPLY_PROBED(2),
                 HB_ERR_BAD_ARGUMENT, NULL);

    /* working memory that does not fit: an arena holding the blob and the data, not more */
    uint64_t act = hb_graph_act_bytes(hb_graph_instance());
    uint64_t zo = hb_model_work_bytes(hb_model_instance());
    uint32_t arena = (uint32_t)(hb_pad16(blob->nbytes) + hb_pad16(data->nbytes) + act + zo - 16);
    cap_boot(arena, HB_MAX_PAYLOAD, 1);
    hello();
    CHECK(upload(HB_TYPE_LOAD_DATA, 0, data->data, data->nbytes), "data");
    CHECK(!upload(HB_TYPE_LOAD_MODEL, 0, blob->data, blob->nbytes), "too large");
    CHECK(strcmp(error_text(), TEXT(HB_MSG_MODEL_MEMORY, HB_I(act + zo), HB_I(act), HB_I(zo),
                                    HB_I(act + zo - 16), HB_I(arena))) == 0,
          "MODEL_MEMORY: %s", error_text());
    expect_error("no model after MODEL_TOO_LARGE", HB_TYPE_WEIGHTS_CRC, 0, HB_ERR_NO_MODEL, NULL);
    /* 16 bytes more and it fits */
    cap_boot(arena + 16, HB_MAX_PAYLOAD, 1);
    hello();
    CHECK(upload(HB_TYPE_LOAD_DATA, 0, data->data, data->nbytes), "data");
    CHECK(load_model(blob), "fits exactly: %s", error_text());
    hbgv_free(&f);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "../fixtures/golden";
    test_sequences(dir, "model_mlp.hbgv");
    test_sequences(dir, "model_cnn.hbgv");
    test_sequences(dir, "model_dw.hbgv");
    test_state_checks(dir);
    TEST_MAIN_END("test_device_model");
}
