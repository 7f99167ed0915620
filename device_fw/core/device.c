/* The device: bytes in, frames out. The receive state machine (frame.c) hands intact frames to
 * the dispatcher, which follows docs/protocol.md "Device processing order" step by step:
 *
 *   1 version   2 response cache   3 request type   4 HELLO and its session rule
 *   5 session, late copies, last_seq   6-7 length and ranges (hb_msg_check)
 *   8-9 state checks and execution (commands.c)
 *
 * Every answer but BAD_FRAME replaces the cache, which holds the answer's exact wire bytes and
 * the (seq, type, crc32) of the request. All buffers are static, sized by the wire limits. */
#include <string.h>

#include "hb_bytes.h"
#include "hb_commands.h"
#include "hb_device.h"
#include "hb_frame.h"
#include "hb_log.h"
#include "hb_msg.h"
#include "hb_port.h"
#include "hb_status.h"
#include "hb_store.h"
#include "hb_wire.h"

#define BODY_CAP (HB_DEVICE_MAX_PAYLOAD + HB_FRAME_OVERHEAD)
#define WIRE_CAP (BODY_CAP + BODY_CAP / 254 + 1 + 2) /* COBS bound + both delimiters */
/* a BAD_FRAME answer: the ERROR layout with the longest problem name */
#define BAD_FRAME_BODY_CAP (HB_FRAME_OVERHEAD + HB_MIN_SIZE_ERROR + 16)

_Static_assert(HB_DEVICE_MAX_PAYLOAD >= HB_MIN_DEVICE_PAYLOAD, "payload below the minimum");
_Static_assert(HB_DEVICE_MAX_PAYLOAD >= HB_MIN_SIZE_ERROR + HB_MAX_ERROR_MSG,
               "an ERROR with the longest message must fit the response buffer");
_Static_assert(HB_DEVICE_MAX_PAYLOAD <= HB_MAX_PAYLOAD, "payload above the protocol's limit");

static struct {
    hb_rx rx;
    uint16_t max_payload;
    /* session (decisions.md 1, steps 4-5) */
    uint8_t session_open;
    uint32_t session;
    uint16_t last_seq;
    /* the response cache: the request's key and the answer's wire bytes */
    uint8_t cached;
    uint16_t cache_seq;
    uint8_t cache_type;
    uint32_t cache_crc;
    uint32_t cache_len;
    /* counters a debugger or a test can read */
    uint32_t frames, bad_frames, cache_hits, late_dropped;
} dev;

static uint8_t rx_buf[HB_MAX_ENCODED_LEN];
static uint8_t tx_body[BODY_CAP];       /* the response being built; payload at +HEADER */
static uint8_t cache_wire[WIRE_CAP];    /* the last answer's wire bytes (the cache) */
static uint8_t bad_body[BAD_FRAME_BODY_CAP];
static uint8_t bad_wire[BAD_FRAME_BODY_CAP + BAD_FRAME_BODY_CAP / 254 + 3];
static hb_status status;

void hb_device_init(uint8_t *arena, uint32_t arena_bytes, uint16_t max_payload) {
    if (max_payload < HB_MIN_DEVICE_PAYLOAD) max_payload = HB_MIN_DEVICE_PAYLOAD;
    if (max_payload > HB_DEVICE_MAX_PAYLOAD) max_payload = HB_DEVICE_MAX_PAYLOAD;
    memset(&dev, 0, sizeof dev);
    dev.max_payload = max_payload;
    hb_frame_rx_init(&dev.rx, rx_buf, max_payload);
    hb_store_init(arena, arena_bytes);
    hb_log_init();
    hb_commands_init(max_payload, hb_port_boot_nonce());
}

uint16_t hb_device_max_payload(void) { return dev.max_payload; }

/* seq is newer than last: 1 <= (seq - last) mod 2^16 < HB_SEQ_WINDOW */
static int newer(uint16_t seq, uint16_t last) {
    uint16_t d = (uint16_t)(seq - last);
    return d >= 1u && d < HB_SEQ_WINDOW;
}

/* Encode the response in tx_body (payload n bytes) into the cache and send it. */
static void answer(const hb_frame *req, uint8_t type, uint16_t n) {
    if (dev.session_open) hb_log_flush(); /* the device's own lines go first (hb_log.h) */
    dev.cache_len = (uint32_t)hb_frame_encode(cache_wire, tx_body, HB_PROTOCOL_VERSION, type,
                                              req->seq, n);
    dev.cached = 1;
    dev.cache_seq = req->seq;
    dev.cache_type = req->type;
    dev.cache_crc = req->crc;
    hb_port_write(cache_wire, dev.cache_len);
}

/* the ERROR payload for st into p; returns its length */
static uint16_t error_payload(uint8_t *p, uint16_t code, uint8_t request_type, const char *msg,
                              uint16_t msg_len) {
    hb_wr16(p + HB_OFF_ERROR_CODE, code);
    p[HB_OFF_ERROR_REQUEST_TYPE] = request_type;
    hb_wr16(p + HB_OFF_ERROR_MSG_LEN, msg_len);
    memcpy(p + HB_OFF_ERROR_MSG, msg, msg_len);
    return (uint16_t)(HB_MIN_SIZE_ERROR + msg_len);
}

static void answer_error(const hb_frame *req, const hb_status *st) {
    uint16_t n = error_payload(tx_body + HB_HEADER_SIZE, st->code, req->type, st->msg, st->len);
    answer(req, HB_TYPE_ERROR, n);
}

static void answer_bad_frame(hb_problem kind) {
    char text[16];
    hb_arg name = HB_S(hb_frame_problem_name(kind));
    size_t len = hb_format(text, sizeof text, HB_MSG_BAD_FRAME, &name, 1);
    uint16_t n = error_payload(bad_body + HB_HEADER_SIZE, HB_MSG_BAD_FRAME_CODE, 0, text,
                               (uint16_t)len);
    size_t wire_len = hb_frame_encode(bad_wire, bad_body, HB_PROTOCOL_VERSION, HB_TYPE_ERROR,
                                      0, n);
    dev.bad_frames++;
    hb_port_write(bad_wire, wire_len); /* never cached */
}

static void dispatch(const hb_frame *f) {
    hb_status *st = &status;
    hb_status_clear(st);
    dev.frames++;
    /* 1. version */
    if (f->version != HB_PROTOCOL_VERSION) {
        HB_FAIL(st, HB_MSG_BAD_VERSION_CODE, HB_MSG_BAD_VERSION, HB_I(HB_PROTOCOL_VERSION),
                HB_I(f->version));
        answer_error(f, st);
        return;
    }
    /* 2. the cached request: re-send its answer, execute nothing */
    if (dev.cached && f->seq == dev.cache_seq && f->type == dev.cache_type &&
        f->crc == dev.cache_crc) {
        dev.cache_hits++;
        hb_port_write(cache_wire, dev.cache_len);
        return;
    }
    /* 3. a request type this device knows */
    if (f->type < HB_FIRST_REQUEST || f->type > HB_LAST_REQUEST) {
        HB_FAIL(st, HB_MSG_UNKNOWN_TYPE_CODE, HB_MSG_UNKNOWN_TYPE, HB_I(f->type));
        answer_error(f, st);
        return;
    }
    if (f->type == HB_TYPE_HELLO) {
        /* 4. HELLO: its length, then the late-copy rule; it opens the session */
        if (hb_msg_check(f->type, f->payload, f->len, st) < 0) {
            answer_error(f, st);
            return;
        }
        uint32_t token = hb_rd32(f->payload + HB_OFF_HELLO_SESSION);
        if (dev.session_open && token == dev.session && !newer(f->seq, dev.last_seq)) {
            dev.late_dropped++;
            return;
        }
        dev.session_open = 1;
        dev.session = token;
        dev.last_seq = f->seq;
    } else {
        /* 5. a session, and a seq newer than the last request's (late copies are dropped) */
        if (!dev.session_open) {
            HB_FAIL0(st, HB_MSG_NO_SESSION_CODE, HB_MSG_NO_SESSION);
            answer_error(f, st);
            return;
        }
        if (!newer(f->seq, dev.last_seq)) {
            dev.late_dropped++;
            return;
        }
        dev.last_seq = f->seq; /* it moves even if the request is refused below */
        /* 6-7. length, then each field's range in table order */
        if (hb_msg_check(f->type, f->payload, f->len, st) < 0) {
            answer_error(f, st);
            return;
        }
    }
    /* 8-9. state checks, execution */
    uint16_t n = 0;
    if (hb_commands_execute(f->type, f->payload, f->len, tx_body + HB_HEADER_SIZE, &n, st) < 0) {
        answer_error(f, st);
        return;
    }
    answer(f, (uint8_t)(f->type | HB_RESPONSE_BIT), n);
    if (f->type == HB_TYPE_RESET) hb_port_reset(); /* after the answer went out */
}

void hb_device_rx(const uint8_t *data, size_t n) {
    while (n) {
        hb_rx_event ev;
        hb_frame f;
        hb_problem kind = 0;
        size_t used = hb_frame_rx_feed(&dev.rx, data, n, &ev, &f, &kind);
        data += used;
        n -= used;
        if (ev == HB_RX_PROBLEM) answer_bad_frame(kind);
        else if (ev == HB_RX_FRAME) dispatch(&f);
    }
}

void hb_device_counters(uint32_t *frames, uint32_t *bad_frames, uint32_t *cache_hits,
                        uint32_t *late_dropped) {
    if (frames) *frames = dev.frames;
    if (bad_frames) *bad_frames = dev.bad_frames;
    if (cache_hits) *cache_hits = dev.cache_hits;
    if (late_dropped) *late_dropped = dev.late_dropped;
}
