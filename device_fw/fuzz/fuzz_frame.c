/* libFuzzer harness: the frame layer. The input's first byte picks the receiver's max_payload
 * (256..4096); the rest is fed to the receive state machine in pieces whose sizes come from
 * the input too. Every intact frame must re-encode to a frame the receiver gives back
 * unchanged; every COBS encoding of the input must decode to the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hb_frame.h"
#include "hb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t rxbuf[HB_MAX_ENCODED_LEN];
static uint8_t rxbuf2[HB_MAX_ENCODED_LEN];
static uint8_t body[HB_MAX_PAYLOAD + HB_FRAME_OVERHEAD];
static uint8_t wire[HB_MAX_ENCODED_LEN + 2];
static uint8_t enc[2 * 65536];
static uint8_t dec[2 * 65536];

#define REQUIRE(c)                                                                             \
    do {                                                                                       \
        if (!(c)) abort();                                                                     \
    } while (0)

static void reencode(const hb_frame *f, uint16_t max_payload) {
    memcpy(body + HB_HEADER_SIZE, f->payload, f->len);
    size_t n = hb_frame_encode(wire, body, f->version, f->type, f->seq, f->len);
    REQUIRE(n <= hb_frame_max_encoded_len(f->len) + 2);
    hb_rx rx;
    hb_frame_rx_init(&rx, rxbuf2, max_payload);
    hb_rx_event ev;
    hb_frame g;
    hb_problem kind;
    size_t used = hb_frame_rx_feed(&rx, wire, n, &ev, &g, &kind);
    REQUIRE(used == n && ev == HB_RX_FRAME);
    REQUIRE(g.version == f->version && g.type == f->type && g.seq == f->seq);
    REQUIRE(g.len == f->len && g.crc == f->crc);
    REQUIRE(memcmp(g.payload, body + HB_HEADER_SIZE, g.len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    uint16_t max_payload =
        (uint16_t)(HB_MIN_DEVICE_PAYLOAD +
                   (data[0] * (HB_MAX_PAYLOAD - HB_MIN_DEVICE_PAYLOAD)) / 255u);
    uint8_t piece = data[1];
    data += 2;
    size -= 2;

    /* COBS round trip of the raw input */
    if (size <= 65536) {
        size_t e = hb_frame_cobs_encode(data, size, enc);
        REQUIRE(e <= size + size / 254 + 1);
        for (size_t i = 0; i < e; i++) REQUIRE(enc[i] != 0);
        REQUIRE(hb_frame_cobs_decode(enc, e, dec) == (long)size);
        REQUIRE(memcmp(dec, data, size) == 0);
    }

    hb_rx rx;
    hb_frame_rx_init(&rx, rxbuf, max_payload);
    size_t at = 0;
    while (at < size) {
        size_t chunk = piece ? piece : size;
        if (chunk > size - at) chunk = size - at;
        size_t off = 0;
        while (off < chunk) {
            hb_rx_event ev;
            hb_frame f;
            hb_problem kind = 0;
            size_t used = hb_frame_rx_feed(&rx, data + at + off, chunk - off, &ev, &f, &kind);
            REQUIRE(used >= 1 && used <= chunk - off);
            REQUIRE(rx.len <= rx.limit);
            off += used;
            if (ev == HB_RX_FRAME) {
                REQUIRE(f.len <= max_payload);
                reencode(&f, max_payload);
            } else if (ev == HB_RX_PROBLEM) {
                REQUIRE(kind >= 1 && kind <= HB_N_PROBLEMS && hb_frame_problem_name(kind)[0]);
            }
        }
        at += chunk;
    }
    return 0;
}
