/* Frames: CRC-32, COBS and the receive state machine against known answers (the check value,
 * COBS's run boundaries, the examples of docs/protocol.md byte for byte) and every problem kind
 * of docs/protocol.md "Receiving and resynchronisation". */
#include <stdlib.h>

#include "check.h"
#include "hb_bytes.h"
#include "hb_crc.h"
#include "hb_frame.h"
#include "hb_wire.h"

static uint8_t enc[2 * HB_MAX_ENCODED_LEN];
static uint8_t dec[2 * HB_MAX_ENCODED_LEN];
static uint8_t rxbuf[HB_MAX_ENCODED_LEN];

static void test_crc(void) {
    const uint8_t digits[] = "123456789";
    CHECK(hb_crc32(0, digits, 9) == 0xCBF43926u, "check value %08x", hb_crc32(0, digits, 9));
    CHECK(hb_crc32(0, digits, 0) == 0, "crc of nothing");
    uint32_t chained = hb_crc32(hb_crc32(0, digits, 4), digits + 4, 5);
    CHECK(chained == 0xCBF43926u, "chained %08x", chained);
    /* zlib.crc32(b"\x00" * 32) */
    static const uint8_t zeros[32];
    CHECK(hb_crc32(0, zeros, 32) == 0x190A55ADu, "zeros %08x", hb_crc32(0, zeros, 32));
}

static void cobs_case(const char *what, const uint8_t *in, size_t n, const uint8_t *want,
                      size_t wn) {
    size_t got = hb_frame_cobs_encode(in, n, enc);
    CHECK(got == wn, "%s: encoded %zu bytes, want %zu", what, got, wn);
    if (got == wn) CHECK_BYTES(what, enc, want, wn);
    CHECK(got <= n + n / 254 + 1, "%s: longer than the bound", what);
    long back = hb_frame_cobs_decode(enc, got, dec);
    CHECK(back == (long)n, "%s: decoded %ld bytes, want %zu", what, back, n);
    if (back == (long)n && n) CHECK_BYTES(what, dec, in, n);
}

static void test_cobs(void) {
    uint8_t in[600] = {0}, want[700] = {0};
    cobs_case("empty", in, 0, (const uint8_t[]){0x01}, 1);
    memset(in, 0, 3);
    cobs_case("one zero", in, 1, (const uint8_t[]){0x01, 0x01}, 2);
    cobs_case("three zeros", in, 3, (const uint8_t[]){0x01, 0x01, 0x01, 0x01}, 4);
    cobs_case("11 22 00 33", (const uint8_t[]){0x11, 0x22, 0x00, 0x33}, 4,
              (const uint8_t[]){0x03, 0x11, 0x22, 0x02, 0x33}, 5);
    /* 254 non-zero bytes: one 0xFF block, no empty block after it */
    for (int i = 0; i < 600; i++) in[i] = (uint8_t)(1 + i % 255);
    want[0] = 0xFF;
    memcpy(want + 1, in, 254);
    cobs_case("254-byte run", in, 254, want, 255);
    /* 255: a 0xFF block, then a block of one */
    want[255] = 0x02;
    want[256] = in[254];
    cobs_case("255-byte run", in, 255, want, 257);
    /* 253: one block of code 0xFE */
    want[0] = 0xFE;
    cobs_case("253-byte run", in, 253, want, 254);
    /* 254 non-zero then a zero: 0xFF block, then an empty block before the zero, then the end */
    uint8_t z[255];
    memcpy(z, in, 254);
    z[254] = 0;
    want[0] = 0xFF;
    want[255] = 0x01;
    want[256] = 0x01;
    cobs_case("254-byte run then zero", z, 255, want, 257);
    /* 508 non-zero bytes: two full blocks */
    want[0] = 0xFF;
    memcpy(want + 1, in, 254);
    want[255] = 0xFF;
    memcpy(want + 256, in + 254, 254);
    cobs_case("508-byte run", in, 508, want, 510);

    /* decoding errors: a zero, a code past the end */
    CHECK(hb_frame_cobs_decode((const uint8_t[]){0x05, 0x01}, 2, dec) == -1, "code past the end");
    CHECK(hb_frame_cobs_decode((const uint8_t[]){0x02, 0x00}, 2, dec) == -1, "zero inside");
    CHECK(hb_frame_cobs_decode((const uint8_t[]){0x00}, 1, dec) == -1, "zero code");
    /* in place */
    uint8_t inplace[] = {0x03, 0x11, 0x22, 0x02, 0x33};
    long n = hb_frame_cobs_decode(inplace, 5, inplace);
    CHECK(n == 4 && inplace[0] == 0x11 && inplace[2] == 0 && inplace[3] == 0x33, "in place");

    /* round trips of random bodies, zeros frequent */
    srand(7);
    for (int t = 0; t < 2000; t++) {
        size_t len = (size_t)(rand() % 1100);
        static uint8_t body[1100];
        for (size_t i = 0; i < len; i++) body[i] = (rand() % 4 == 0) ? 0 : (uint8_t)rand();
        size_t e = hb_frame_cobs_encode(body, len, enc);
        int zero = 0;
        for (size_t i = 0; i < e; i++) zero |= enc[i] == 0;
        CHECK(!zero && e <= len + len / 254 + 1, "encoding %d has a zero or is too long", t);
        CHECK(hb_frame_cobs_decode(enc, e, dec) == (long)len && memcmp(dec, body, len) == 0,
              "round trip %d", t);
    }
}

/* docs/protocol.md "Example": body and wire bytes, byte for byte */
static void example(const char *what, uint8_t type, uint16_t seq, const uint8_t *payload,
                    uint16_t n, const uint8_t *want_body, const uint8_t *want_wire, size_t wn) {
    static uint8_t body[HB_MAX_PAYLOAD + HB_FRAME_OVERHEAD];
    if (n) memcpy(body + HB_HEADER_SIZE, payload, n);
    size_t len = hb_frame_encode(enc, body, HB_PROTOCOL_VERSION, type, seq, n);
    CHECK_BYTES(what, body, want_body, (size_t)n + HB_FRAME_OVERHEAD);
    CHECK(len == wn + 1 && enc[0] == 0, "%s: %zu wire bytes, want a 0x00 and %zu", what, len, wn);
    if (len == wn + 1) CHECK_BYTES(what, enc + 1, want_wire, wn);

    /* and the receiver gives the frame back */
    hb_rx rx;
    hb_frame_rx_init(&rx, rxbuf, HB_MAX_PAYLOAD);
    hb_rx_event ev;
    hb_frame f;
    hb_problem kind;
    size_t used = hb_frame_rx_feed(&rx, enc, len, &ev, &f, &kind);
    CHECK(ev == HB_RX_FRAME && used == len, "%s: not received (%d, %zu)", what, ev, used);
    CHECK(f.version == HB_PROTOCOL_VERSION && f.type == type && f.seq == seq && f.len == n,
          "%s: header", what);
    CHECK(f.crc == hb_rd32(want_body + HB_HEADER_SIZE + n), "%s: crc field", what);
    if (n) CHECK_BYTES(what, f.payload, payload, n);
}

static void test_examples(void) {
    example("HELLO", HB_TYPE_HELLO, 1, (const uint8_t[]){0x01, 0x00, 0xfe, 0xca, 0xad, 0x0b}, 6,
            (const uint8_t[]){0x01, 0x01, 0x01, 0x00, 0x06, 0x00, 0x01, 0x00, 0xfe, 0xca, 0xad,
                              0x0b, 0xf2, 0x8d, 0xf5, 0xb5},
            (const uint8_t[]){0x04, 0x01, 0x01, 0x01, 0x02, 0x06, 0x02, 0x01, 0x09, 0xfe, 0xca,
                              0xad, 0x0b, 0xf2, 0x8d, 0xf5, 0xb5, 0x00},
            18);
    example("WEIGHTS_CRC", HB_TYPE_WEIGHTS_CRC, 0x1234, NULL, 0,
            (const uint8_t[]){0x01, 0x07, 0x34, 0x12, 0x00, 0x00, 0xfe, 0xb6, 0x55, 0xa8},
            (const uint8_t[]){0x05, 0x01, 0x07, 0x34, 0x12, 0x01, 0x05, 0xfe, 0xb6, 0x55, 0xa8,
                              0x00},
            12);
    example("PROBE", HB_TYPE_PROBE, 5,
            (const uint8_t[]){0x01, 0x20, 0x00, 0x07, 0x00, 0x00, 0x00, 0x02, 0x00, 0x02, 0x00,
                              0x00, 0x00, 0x00, 0x00, 0xef, 0xbe, 0xad, 0xde},
            19,
            (const uint8_t[]){0x01, 0x04, 0x05, 0x00, 0x13, 0x00, 0x01, 0x20, 0x00, 0x07,
                              0x00, 0x00, 0x00, 0x02, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
                              0x00, 0xef, 0xbe, 0xad, 0xde, 0x2a, 0xea, 0x1a, 0x2a},
            (const uint8_t[]){0x04, 0x01, 0x04, 0x05, 0x02, 0x13, 0x03, 0x01, 0x20, 0x02, 0x07,
                              0x01, 0x01, 0x02, 0x02, 0x02, 0x02, 0x01, 0x01, 0x01, 0x01, 0x09,
                              0xef, 0xbe, 0xad, 0xde, 0x2a, 0xea, 0x1a, 0x2a, 0x00},
            31);
}

/* Feed a whole stream; record events in order: 'F' + type for frames, problems by kind. */
typedef struct {
    int n;
    hb_rx_event ev[64];
    hb_problem kind[64];
    hb_frame f[64];
} events;

static void feed_all(hb_rx *rx, const uint8_t *data, size_t n, events *out, size_t step) {
    out->n = 0;
    size_t at = 0;
    while (at < n) {
        size_t chunk = step && step < n - at ? step : n - at;
        size_t off = 0;
        while (off < chunk) {
            hb_rx_event ev;
            hb_frame f;
            hb_problem kind = 0;
            off += hb_frame_rx_feed(rx, data + at + off, chunk - off, &ev, &f, &kind);
            if (ev != HB_RX_NONE && out->n < 64) {
                out->ev[out->n] = ev;
                out->kind[out->n] = kind;
                out->f[out->n] = f;
                out->n++;
            }
        }
        at += chunk;
    }
}

static size_t put_frame(uint8_t *w, uint8_t type, uint16_t seq, const uint8_t *p, uint16_t n) {
    static uint8_t body[HB_MAX_PAYLOAD + HB_FRAME_OVERHEAD];
    if (n) memcpy(body + HB_HEADER_SIZE, p, n);
    return hb_frame_encode(w, body, HB_PROTOCOL_VERSION, type, seq, n);
}

static void test_receiver(void) {
    static uint8_t stream[20000];
    static uint8_t payload[HB_MAX_PAYLOAD + 16];
    for (int i = 0; i < HB_MAX_PAYLOAD + 16; i++) payload[i] = (uint8_t)(i * 7);
    hb_rx rx;
    events ev;

    CHECK(hb_frame_max_encoded_len(HB_MAX_PAYLOAD) == HB_MAX_ENCODED_LEN, "limit %u",
          hb_frame_max_encoded_len(HB_MAX_PAYLOAD));
    CHECK(hb_frame_max_encoded_len(256) == 266 + 1 + 1, "limit at 256: %u", hb_frame_max_encoded_len(256));
    for (int kind = 1; kind <= HB_N_PROBLEMS; kind++)
        CHECK(hb_frame_problem_name((hb_problem)kind)[0] != 0, "kind %d has no name", kind);
    CHECK(hb_frame_problem_name(0)[0] == 0, "kind 0 has a name");
    CHECK(strcmp(hb_frame_problem_name(HB_PROBLEM_CRC), "crc") == 0, "crc name");
    CHECK(strcmp(hb_frame_problem_name(HB_PROBLEM_OVERSIZE), "oversize") == 0, "oversize name");

    /* two frames, extra delimiters, fed whole, byte by byte and in 7-byte pieces */
    for (size_t step = 0; step < 8; step += (step ? 6 : 1)) {
        size_t n = 0;
        stream[n++] = 0;
        stream[n++] = 0;
        n += put_frame(stream + n, 3, 0xBEEF, payload, 300);
        n += put_frame(stream + n, 9, 2, NULL, 0);
        hb_frame_rx_init(&rx, rxbuf, HB_MAX_PAYLOAD);
        feed_all(&rx, stream, n, &ev, step);
        CHECK(ev.n == 2 && ev.ev[0] == HB_RX_FRAME && ev.ev[1] == HB_RX_FRAME,
              "step %zu: %d events", step, ev.n);
        if (ev.n == 2) {
            CHECK(ev.f[0].type == 3 && ev.f[0].seq == 0xBEEF && ev.f[0].len == 300,
                  "first frame");
            CHECK(ev.f[1].type == 9 && ev.f[1].seq == 2 && ev.f[1].len == 0, "second frame");
        }
    }

    /* each problem kind, each followed by a good frame that must survive */
    struct {
        const char *what;
        hb_problem kind;
    } cases[] = {{"cobs", HB_PROBLEM_COBS},
                 {"short", HB_PROBLEM_SHORT},
                 {"crc", HB_PROBLEM_CRC},
                 {"length", HB_PROBLEM_LENGTH},
                 {"oversize payload", HB_PROBLEM_OVERSIZE},
                 {"oversize run", HB_PROBLEM_OVERSIZE}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint16_t maxp = 256;
        hb_frame_rx_init(&rx, rxbuf, maxp);
        size_t n = 0;
        static uint8_t body[HB_MAX_PAYLOAD + HB_FRAME_OVERHEAD];
        switch (c) {
        case 0: /* code 0x05 with two bytes left */
            stream[n++] = 0x05;
            stream[n++] = 0x11;
            stream[n++] = 0x22;
            stream[n++] = 0;
            break;
        case 1: /* a 9-byte body */
            memset(body, 1, 9);
            n = hb_frame_cobs_encode(body, 9, stream);
            stream[n++] = 0;
            break;
        case 2: /* one payload bit flipped after the CRC was computed */
            n = put_frame(stream, 4, 1, payload, 20);
            stream[10] ^= 0x01;
            break;
        case 3: { /* length field 5, 4 payload bytes, CRC right */
            body[0] = HB_PROTOCOL_VERSION;
            body[1] = 4;
            hb_wr16(body + 2, 1);
            hb_wr16(body + 4, 5);
            memcpy(body + 6, payload + 1, 4);
            hb_wr32(body + 10, hb_crc32(0, body, 10));
            n = hb_frame_cobs_encode(body, 14, stream);
            stream[n++] = 0;
            break;
        }
        case 4: /* payload 257 > max_payload 256, within the raw limit */
            n = put_frame(stream, 4, 1, payload, 257);
            break;
        case 5: /* limit + 1 non-zero bytes, then the delimiter */
            memset(stream, 0x55, hb_frame_max_encoded_len(maxp) + 1);
            n = hb_frame_max_encoded_len(maxp) + 1;
            stream[n++] = 0;
            break;
        }
        n += put_frame(stream + n, 7, 42, NULL, 0);
        feed_all(&rx, stream, n, &ev, 0);
        CHECK(ev.n == 2, "%s: %d events", cases[c].what, ev.n);
        if (ev.n == 2) {
            CHECK(ev.ev[0] == HB_RX_PROBLEM && ev.kind[0] == cases[c].kind, "%s: got %d/%d",
                  cases[c].what, ev.ev[0], ev.kind[0]);
            CHECK(ev.ev[1] == HB_RX_FRAME && ev.f[1].seq == 42, "%s: next frame lost",
                  cases[c].what);
        }
    }

    /* a raw run of exactly the limit is not oversize (it is checked: here a bad CRC), and a
     * run of 3 x the limit is one oversize, reported once */
    hb_frame_rx_init(&rx, rxbuf, 256);
    size_t lim = hb_frame_max_encoded_len(256);
    for (size_t i = 0; i < lim; i++) stream[i] = (i % 2) ? 0x55 : 0x02; /* valid COBS */
    CHECK(lim % 2 == 0, "limit %zu", lim);
    stream[lim] = 0;
    memset(stream + lim + 1, 0x66, 3 * lim);
    stream[4 * lim + 1] = 0;
    feed_all(&rx, stream, 4 * lim + 2, &ev, 100);
    CHECK(ev.n == 2 && ev.kind[0] == HB_PROBLEM_CRC && ev.kind[1] == HB_PROBLEM_OVERSIZE,
          "limit run: %d events, kinds %d %d", ev.n, ev.kind[0], ev.kind[1]);

    /* the largest frame a 4096 device accepts: a payload of all 0xFF is the longest encoding */
    memset(payload, 0xFF, HB_MAX_PAYLOAD);
    hb_frame_rx_init(&rx, rxbuf, HB_MAX_PAYLOAD);
    size_t n = put_frame(stream, 2, 1, payload, HB_MAX_PAYLOAD);
    feed_all(&rx, stream, n, &ev, 0);
    CHECK(ev.n == 1 && ev.ev[0] == HB_RX_FRAME && ev.f[0].len == HB_MAX_PAYLOAD,
          "max frame (%zu wire bytes): %d events", n, ev.n);
}

int main(void) {
    test_crc();
    test_cobs();
    test_examples();
    test_receiver();
    TEST_MAIN_END("test_frame");
}
