/* libFuzzer harness: the whole device fed a byte stream.
 *
 * Every input starts from boot, says HELLO and loads a data slot and a small model (the zoo
 * MLP of fixtures/golden/model_mlp.hbgv, or $HB_FIXTURES/model_mlp.hbgv, in one of three ZO
 * configurations), so the deep states (a model, probed seeds, uploads in progress) are reached
 * at once; the input's first byte picks the configuration and max_payload (256, 1024, 4096).
 * Then the input is a sequence of records, each one op byte and its operands:
 *
 *   RAW n bytes          raw bytes on the line (junk, partial frames, anything)
 *   NEW type len bytes   a frame with a correct CRC and the next seq, any payload
 *   RETRY                the last frame again, byte for byte (the response cache)
 *   OLD back type ...    a frame with an older seq (late copies)
 *   SHAPED type bytes    a request laid out by the declared tables (gen/hb_wire.h): counts
 *                        consistent with the payload, values from the input, ranges mostly
 *                        kept; costly counts (q, batch_size, EVAL count) kept small
 *                        unless out of their range
 *   VERSION v ...        a frame of another protocol version
 *
 * Compute is kept small, so that the fuzzer spends its time on the protocol: batch sizes and
 * EVAL's count at most 2, q at most 2 (SHAPED) or 13 (NEW; longer only when the answer cannot
 * fit, so the device refuses it before it computes), and at most COMPUTE_BUDGET requests that
 * compute per input (the later ones are skipped; RETRY still repeats any).
 *
 * Oracles: no sanitizer report; every write of the device is one whole frame (a leading 0x00,
 * COBS, a delimiter) with a good CRC and a payload that is a well-formed instance of the
 * response layout of its type (hb_msg_check_layout: lengths and declared ranges), at most
 * max_payload long unless it is an ERROR (a BAD_FRAME has seq 0). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_device.h"
#include "hb_log.h"
#include "hb_frame.h"
#include "hb_msg.h"
#include "hb_port.h"
#include "port.h"
#include "hb_wire.h"
#include "hbgv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define ARENA_BYTES (1u << 20)
#define REQUIRE(c)                                                                             \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            fprintf(stderr, "fuzz_device: %s:%d: %s\n", __FILE__, __LINE__, #c);              \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static _Alignas(16) uint8_t arena[ARENA_BYTES];
static uint16_t max_payload;

/* ---- the port: writes are checked, ticks count, nothing else ---------------------------- */

static uint8_t rx_buf[HB_MAX_ENCODED_LEN];
static uint64_t ticks;

void hb_port_write(const uint8_t *w, size_t n) {
    REQUIRE(n >= 2 && w[0] == 0 && w[n - 1] == 0);
    hb_rx rx;
    hb_frame_rx_init(&rx, rx_buf, HB_MAX_PAYLOAD);
    hb_rx_event ev;
    hb_frame f;
    hb_problem kind = 0;
    size_t used = hb_frame_rx_feed(&rx, w, n, &ev, &f, &kind);
    REQUIRE(ev == HB_RX_FRAME && used == n); /* exactly one intact frame */
    REQUIRE(f.version == HB_PROTOCOL_VERSION);
    hb_status st;
    if (f.type == HB_TYPE_LOG) { /* the device's own words: seq 0, the layout, never cached */
        REQUIRE(f.seq == 0 && hb_msg_check_layout(HB_L_LOG, f.payload, f.len, &st) == 0);
        return;
    }
    if (f.type == HB_TYPE_ERROR) {
        REQUIRE(hb_msg_check_layout(HB_L_ERROR, f.payload, f.len, &st) == 0);
        if (hb_msg_u16(f.payload, HB_F_ERROR_CODE) == HB_ERR_BAD_FRAME) REQUIRE(f.seq == 0);
        return;
    }
    uint8_t req = (uint8_t)(f.type & ~HB_RESPONSE_BIT);
    REQUIRE((f.type & HB_RESPONSE_BIT) && req >= HB_FIRST_REQUEST && req <= HB_LAST_REQUEST);
    REQUIRE(f.len <= max_payload);
    uint8_t layout = (uint8_t)(HB_L_HELLO_R + (req - HB_FIRST_REQUEST));
    REQUIRE(hb_msg_check_layout(layout, f.payload, f.len, &st) == 0);
}

uint64_t hb_port_ticks(void) { return ticks += 7; }
uint32_t hb_port_tick_ns_q16(void) { return 1u << 16; }
uint8_t hb_port_timing_source(void) { return HB_TIMING_DEVICE; }
uint32_t hb_port_boot_nonce(void) { return 0x12345678u; }
void hb_port_reset(void) {
    hb_device_init(arena, ARENA_BYTES, max_payload);
    hb_log_boot("fuzz reset");
}
const char *hb_port_device_id(void) { return "fuzz"; }
const char *hb_port_firmware(void) { return "fuzz_device"; }
const hb_port_info_t *hb_port_info(void) {
    static const hb_port_info_t info = {0};
    return &info;
}
void hb_port_stage_sync(const uint8_t *p, uint32_t n) { (void)p, (void)n; }

/* ---- frames the harness sends -------------------------------------------------------- */

static uint8_t body[HB_MAX_PAYLOAD + HB_FRAME_OVERHEAD];
static uint8_t wire[HB_MAX_ENCODED_LEN + 2];
static size_t wire_len;
static uint16_t seq;

static void send(uint8_t version, uint8_t type, uint16_t s, const uint8_t *p, uint16_t n) {
    if (n) memmove(body + HB_HEADER_SIZE, p, n);
    wire_len = hb_frame_encode(wire, body, version, type, s, n);
    hb_device_rx(wire, wire_len);
}

/* the prologue: HELLO, a data slot, the model, for each max_payload the harness uses */
static const uint16_t payloads[] = {HB_MIN_DEVICE_PAYLOAD, 1024, HB_MAX_PAYLOAD};
#define N_PAYLOADS (sizeof payloads / sizeof payloads[0])
/* model_mlp.hbgv configurations: uniform adaptive pool / int16 / stochastic; rademacher /
 * int8 / one-sided on every layer; the last layer, gaussian, int16, a multiplier */
static const char *const configs[] = {"c2.blob", "c3.blob", "c4.blob"};
#define N_CONFIGS (sizeof configs / sizeof configs[0])
static uint8_t *prologue[N_CONFIGS][N_PAYLOADS];
static size_t prologue_len[N_CONFIGS][N_PAYLOADS];
static uint16_t prologue_seq;
static uint32_t model_input; /* bytes of one input item */

static void append(uint8_t **buf, size_t *len, size_t *cap, const uint8_t *w, size_t n) {
    if (*len + n > *cap) {
        *cap = (*len + n) * 2;
        *buf = realloc(*buf, *cap);
        REQUIRE(*buf);
    }
    memcpy(*buf + *len, w, n);
    *len += n;
}

static void build_prologue(unsigned cfg, unsigned k, const uint8_t *model, uint32_t model_len,
                           const uint8_t *dblob, uint32_t data_len) {
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    static uint8_t p[HB_MAX_PAYLOAD];
    uint16_t s = 1;
    hb_msg_put(p, HB_F_HELLO_HOST_PROTOCOL_VERSION, HB_PROTOCOL_VERSION);
    hb_msg_put(p, HB_F_HELLO_SESSION, 0xF022);
    memcpy(body + HB_HEADER_SIZE, p, HB_SIZE_HELLO);
    size_t n = hb_frame_encode(wire, body, HB_PROTOCOL_VERSION, HB_TYPE_HELLO, s, HB_SIZE_HELLO);
    append(&buf, &len, &cap, wire, n);
    uint32_t chunk = payloads[k] - HB_DATA_CHUNK_OVERHEAD;
    for (uint32_t off = 0; off < data_len; off += chunk) {
        uint32_t c = data_len - off < chunk ? data_len - off : chunk;
        hb_msg_put(p, HB_F_LOAD_DATA_SLOT, 0);
        hb_msg_put(p, HB_F_LOAD_DATA_TOTAL_LEN, data_len);
        hb_msg_put(p, HB_F_LOAD_DATA_OFFSET, off);
        memcpy(hb_msg_wptr(p, HB_F_LOAD_DATA_CHUNK), dblob + off, c);
        memcpy(body + HB_HEADER_SIZE, p, HB_MIN_SIZE_LOAD_DATA + c);
        n = hb_frame_encode(wire, body, HB_PROTOCOL_VERSION, HB_TYPE_LOAD_DATA, ++s,
                            (uint16_t)(HB_MIN_SIZE_LOAD_DATA + c));
        append(&buf, &len, &cap, wire, n);
    }
    chunk = payloads[k] - HB_MODEL_CHUNK_OVERHEAD;
    for (uint32_t off = 0; off < model_len; off += chunk) {
        uint32_t c = model_len - off < chunk ? model_len - off : chunk;
        hb_msg_put(p, HB_F_LOAD_MODEL_TOTAL_LEN, model_len);
        hb_msg_put(p, HB_F_LOAD_MODEL_OFFSET, off);
        memcpy(hb_msg_wptr(p, HB_F_LOAD_MODEL_CHUNK), model + off, c);
        memcpy(body + HB_HEADER_SIZE, p, HB_MIN_SIZE_LOAD_MODEL + c);
        n = hb_frame_encode(wire, body, HB_PROTOCOL_VERSION, HB_TYPE_LOAD_MODEL, ++s,
                            (uint16_t)(HB_MIN_SIZE_LOAD_MODEL + c));
        append(&buf, &len, &cap, wire, n);
    }
    prologue[cfg][k] = buf;
    prologue_len[cfg][k] = len;
    prologue_seq = s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("HB_FIXTURES");
    hbgv_file f;
    hbgv_load(&f, dir ? dir : "../fixtures/golden", "model_mlp.hbgv");
    const hbgv_array *dblob = hbgv_need(&f, "data_blob");
    model_input = hbgv_need(&f, "x")->dims[1];
    for (unsigned c = 0; c < N_CONFIGS; c++) {
        const hbgv_array *model = hbgv_need(&f, configs[c]);
        for (unsigned k = 0; k < N_PAYLOADS; k++)
            build_prologue(c, k, model->data, model->nbytes, dblob->data, dblob->nbytes);
    }
    hbgv_free(&f);
    return 0;
}

/* ---- the input ------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t n;
} input;

static uint8_t take(input *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

static uint64_t take_n(input *in, unsigned bytes) {
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++) v |= (uint64_t)take(in) << (8 * i);
    return v;
}

static const unsigned wire_size[] = {0, 1, 1, 2, 4, 4, 8, 8}; /* by HB_W_* */

/* a cap for counts that cost compute: q and batch sizes, EVAL's count, APPLY_BATCH's steps */
static uint64_t cap_count(const char *name, uint64_t v) {
    if (!strcmp(name, "q") || !strcmp(name, "q_apply") || !strcmp(name, "batch_size") ||
        !strcmp(name, "count") || !strcmp(name, "n_steps"))
        return 1 + v % 2;
    return v;
}

/* Lay out an instance of `layout` at out (room: cap bytes) from the input; returns its
 * length. Scalars take their bytes and a mode byte from the input: most values are folded into
 * the declared range, costly counts kept small, the slot mostly the loaded one, a bulk offset
 * mostly 0 (INFER's in_offset and out_offset too); arrays get count x element bytes; a REST
 * gets a length byte (an INFER input is often exactly the model's input size or half of it);
 * records and embedded layouts (flat: one level) are laid out the same way. */
static uint32_t shape(uint8_t layout, uint8_t type, uint8_t *out, uint32_t cap, input *in) {
    const hb_layout_desc *l = &hb_layouts[layout];
    uint64_t values[HB_MAX_FIELDS] = {0};
    uint32_t pos = 0;
    for (uint8_t i = 0; i < l->n_fields && pos < cap; i++) {
        const hb_field_desc *fd = &l->fields[i];
        if (fd->kind == HB_FK_SCALAR) {
            unsigned sz = wire_size[fd->wire];
            uint64_t v = take_n(in, sz);
            uint8_t mode = take(in);
            if (fd->ranged && (mode & 15)) {
                uint64_t span = (uint64_t)(fd->hi - fd->lo) + 1;
                v = (uint64_t)fd->lo + (span ? v % span : v);
            }
            /* a costly count is kept small unless it is out of its range (refused before any
             * compute): an accepted PROBE of batch 221 cost a whole second under the sanitizers */
            if (!(mode & 16) || !fd->ranged || ((int64_t)v >= fd->lo && (int64_t)v <= fd->hi))
                v = cap_count(fd->name, v);
            if (!strcmp(fd->name, "slot") && !(mode & 32)) v = 0;
            if (!strcmp(fd->name, "offset") && !(mode & 64)) v = 0;
            /* INFER's pieces and parts: mostly 0, else mostly inside the input / output */
            if (!strcmp(fd->name, "in_offset") || !strcmp(fd->name, "out_offset"))
                v = !(mode & 64) ? 0 : (mode & 128) ? v : v % (model_input + 1);
            if (pos + sz > cap) return pos;
            for (unsigned b = 0; b < sz; b++) out[pos + b] = (uint8_t)(v >> (8 * b));
            values[i] = v;
            pos += sz;
        } else if (fd->kind == HB_FK_ARRAY) {
            uint64_t bytes = values[fd->count] * wire_size[fd->wire];
            for (uint64_t b = 0; b < bytes && pos < cap; b++) out[pos++] = take(in);
        } else if (fd->kind == HB_FK_REST) {
            uint32_t k = take(in);
            if (type == HB_TYPE_INFER && (k & 1)) k = model_input; /* an inline input */
            if (type == HB_TYPE_INFER && (k & 3) == 2) k = model_input / 2; /* a piece */
            for (uint32_t b = 0; b < k && pos < cap; b++) out[pos++] = take(in);
        } else if (fd->kind == HB_FK_RECORDS) {
            for (uint64_t r = 0; r < values[fd->count] && pos < cap; r++)
                pos += shape(fd->sub, type, out + pos, cap - pos, in);
        } else if (fd->kind == HB_FK_EMBED) {
            pos += shape(fd->sub, type, out + pos, cap - pos, in);
        }
    }
    return pos;
}

static uint8_t payload[HB_MAX_PAYLOAD];
#define RAW_COMPUTE_MAX 64

#define COMPUTE_BUDGET 4 /* requests that compute, per input: the rest are skipped */

static int computes(uint8_t type) {
    return type == HB_TYPE_PROBE || type == HB_TYPE_APPLY || type == HB_TYPE_APPLY_BATCH ||
           type == HB_TYPE_APPLY_PROBED || type == HB_TYPE_APPLY_PROBE || type == HB_TYPE_EVAL ||
           type == HB_TYPE_INFER;
}

static unsigned budget;

/* send unless it is one compute request too many for this input */
static void send_budgeted(uint8_t type, uint16_t s, const uint8_t *p, uint16_t n) {
    if (computes(type) && budget == 0) return;
    if (computes(type)) budget--;
    send(HB_PROTOCOL_VERSION, type, s, p, n);
}

/* In a raw payload, keep the batch sizes and EVAL's count small (their values only: lengths
 * and array counts are left as the input has them), so that a valid PROBE costs at most
 * 2 x 2q forward passes and the fuzzer spends its time on the protocol. (The payloads of the
 * requests that compute are also cut to RAW_COMPUTE_MAX bytes: q <= 13.) */
static void cap_costs(uint8_t type, uint8_t *p, uint32_t n) {
    uint32_t at = UINT32_MAX, size = 2;
    if (type == HB_TYPE_PROBE) at = HB_OFF_PROBE_BATCH_SIZE;
    if (type == HB_TYPE_APPLY_PROBE && n >= HB_OFF_APPLY_PROBE_COEFFS) {
        uint16_t qa = (uint16_t)(p[HB_OFF_APPLY_PROBE_Q_APPLY] |
                                 p[HB_OFF_APPLY_PROBE_Q_APPLY + 1] << 8);
        at = HB_OFF_APPLY_PROBE_PROBE(qa) + HB_OFF_PROBE_BATCH_SIZE;
    }
    if (type == HB_TYPE_EVAL) {
        at = HB_OFF_EVAL_COUNT;
        size = 4;
    }
    if (at >= n || size > n - at) return;
    for (uint32_t b = 1; b < size; b++) p[at + b] = 0;
    p[at] = (uint8_t)(p[at] % 3); /* 0 (refused), 1 or 2 */
}

/* A PROBE or APPLY_PROBE whose answer cannot fit max_payload: the device refuses it before it
 * computes (ANSWER_TOO_LARGE), so it may keep its whole length. Any other request that
 * computes is cut to RAW_COMPUTE_MAX bytes (an accepted PROBE has q <= 13): on the smallest
 * device an accepted q of up to 30 made one input compute for seconds under the sanitizers. */
static int refused_for_size(uint8_t type, const uint8_t *p, uint16_t n) {
    uint32_t at = UINT32_MAX, extra = 0;
    if (type == HB_TYPE_PROBE) at = HB_OFF_PROBE_Q;
    if (type == HB_TYPE_APPLY_PROBE && n >= HB_OFF_APPLY_PROBE_Q_APPLY + 2u) {
        uint16_t qa = (uint16_t)(p[HB_OFF_APPLY_PROBE_Q_APPLY] |
                                 p[HB_OFF_APPLY_PROBE_Q_APPLY + 1] << 8);
        at = HB_OFF_APPLY_PROBE_PROBE(qa) + HB_OFF_PROBE_Q;
        extra = HB_SIZE_APPLY_PROBE_R(0) - HB_SIZE_PROBE_R(0);
    }
    if (n < 2u || at > n - 2u) return 0;
    const uint32_t q = (uint32_t)(p[at] | p[at + 1] << 8);
    return HB_SIZE_PROBE_R(q) + extra > max_payload;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    input in = {data, size};
    uint8_t first = take(&in);
    unsigned k = first % N_PAYLOADS, c = (first / N_PAYLOADS) % N_CONFIGS;
    max_payload = payloads[k];
    hb_device_init(arena, ARENA_BYTES, max_payload);
    hb_log_boot("fuzz");
    /* a line of the input's bytes (any bytes, not only UTF-8): the ring must cut it safely */
    hb_log(HB_LOG_NOTE, (const char *)in.p, in.n < 200u ? in.n : 200u);
    hb_device_rx(prologue[c][k], prologue_len[c][k]);
    seq = prologue_seq;
    wire_len = 0;
    budget = COMPUTE_BUDGET;
    while (in.n) {
        uint8_t op = take(&in);
        switch (op % 6) {
        case 0: { /* RAW */
            size_t n = take(&in);
            if (n > in.n) n = in.n;
            hb_device_rx(in.p, n);
            in.p += n;
            in.n -= n;
            break;
        }
        case 1:   /* NEW */
        case 3: { /* OLD */
            uint8_t type = take(&in);
            uint16_t s = op % 6 == 1 ? ++seq : (uint16_t)(seq - take(&in));
            uint16_t n = (uint16_t)take_n(&in, 2) % (max_payload + 1u);
            if (n > in.n) n = (uint16_t)in.n;
            if (computes(type) && n > RAW_COMPUTE_MAX && !refused_for_size(type, in.p, n))
                n = RAW_COMPUTE_MAX;
            memcpy(payload, in.p, n);
            in.p += n;
            in.n -= n;
            cap_costs(type, payload, n);
            send_budgeted(type, s, payload, n);
            break;
        }
        case 2: /* RETRY */
            if (wire_len) hb_device_rx(wire, wire_len);
            break;
        case 4: { /* SHAPED */
            uint8_t type = (uint8_t)(HB_FIRST_REQUEST + take(&in) % HB_LAST_REQUEST);
            uint32_t n = shape(hb_msg_request_layout(type), type, payload, max_payload, &in);
            send_budgeted(type, ++seq, payload, (uint16_t)n);
            break;
        }
        case 5: { /* VERSION */
            uint8_t v = take(&in);
            send(v, take(&in), ++seq, NULL, 0);
            break;
        }
        }
    }
    return 0;
}
