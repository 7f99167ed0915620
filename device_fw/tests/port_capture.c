/* The capturing test port (port_capture.h). */
#include "port_capture.h"

#include <string.h>

#include "hb_device.h"
#include "hb_port.h"
#include "port.h"

uint8_t cap_out[CAP_OUT_MAX];
size_t cap_len;
uint32_t cap_boots;

static _Alignas(16) uint8_t arena[CAP_ARENA_MAX];
static uint32_t arena_bytes = CAP_ARENA_MAX;
static uint16_t max_payload = HB_MAX_PAYLOAD;
static uint32_t next_nonce;
static uint64_t ticks;
static const char *device_id = "hilbench-test";
static const char *firmware = "hilbench-test fw";

void hb_port_write(const uint8_t *data, size_t n) {
    if (n > CAP_OUT_MAX - cap_len) n = CAP_OUT_MAX - cap_len;
    memcpy(cap_out + cap_len, data, n);
    cap_len += n;
}

uint64_t hb_port_ticks(void) { return ticks += 1000; }
uint32_t hb_port_tick_ns_q16(void) { return 0; }
uint8_t hb_port_timing_source(void) { return HB_TIMING_NONE; }
uint32_t hb_port_boot_nonce(void) { return next_nonce++; }
const char *hb_port_device_id(void) { return device_id; }
const char *hb_port_firmware(void) { return firmware; }
const hb_port_info_t *hb_port_info(void) {
    static const hb_port_info_t info = {0};
    return &info;
}
void hb_port_stage_sync(const uint8_t *p, uint32_t n) { (void)p, (void)n; }

void hb_port_reset(void) {
    cap_boots++;
    hb_device_init(arena, arena_bytes, max_payload);
}

void cap_identity(const char *id, const char *fw) {
    device_id = id;
    firmware = fw;
}

void cap_boot(uint32_t bytes, uint16_t maxp, uint32_t first_nonce) {
    arena_bytes = bytes <= CAP_ARENA_MAX ? bytes : CAP_ARENA_MAX;
    max_payload = maxp;
    next_nonce = first_nonce;
    cap_boots++;
    hb_device_init(arena, arena_bytes, max_payload);
}

void cap_clear(void) { cap_len = 0; }

size_t cap_feed(const uint8_t *data, size_t n) {
    cap_clear();
    hb_device_rx(data, n);
    return cap_len;
}

static uint8_t body[HB_MAX_PAYLOAD + HB_FRAME_OVERHEAD];

size_t cap_frame_v(uint8_t *wire, uint8_t version, uint8_t type, uint16_t seq,
                   const uint8_t *payload, uint16_t n) {
    if (n) memcpy(body + HB_HEADER_SIZE, payload, n);
    return hb_frame_encode(wire, body, version, type, seq, n);
}

size_t cap_frame(uint8_t *wire, uint8_t type, uint16_t seq, const uint8_t *payload, uint16_t n) {
    return cap_frame_v(wire, HB_PROTOCOL_VERSION, type, seq, payload, n);
}

static uint8_t rx_buf[HB_MAX_ENCODED_LEN];
static uint8_t store[CAP_OUT_MAX];

int cap_answers(cap_answer *out, int max) {
    hb_rx rx;
    hb_frame_rx_init(&rx, rx_buf, HB_MAX_PAYLOAD);
    size_t at = 0, used_store = 0;
    int count = 0;
    while (at < cap_len) {
        hb_rx_event ev;
        hb_frame f;
        hb_problem kind = 0;
        at += hb_frame_rx_feed(&rx, cap_out + at, cap_len - at, &ev, &f, &kind);
        if (ev == HB_RX_PROBLEM) return -1;
        if (ev == HB_RX_FRAME && count < max) {
            memcpy(store + used_store, f.payload, f.len);
            out[count] = (cap_answer){f.version, f.type, f.seq, f.len, store + used_store};
            used_store += f.len;
            count++;
        }
    }
    return count;
}

int cap_request(uint8_t type, uint16_t seq, const uint8_t *payload, uint16_t n, cap_answer *a) {
    static uint8_t wire[HB_MAX_ENCODED_LEN + 2];
    size_t len = cap_frame(wire, type, seq, payload, n);
    cap_feed(wire, len);
    static cap_answer all[8];
    int k = cap_answers(all, 8);
    if (k >= 1) *a = all[0];
    else memset(a, 0, sizeof *a);
    return k;
}
