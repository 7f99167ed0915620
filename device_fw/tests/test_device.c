/* The dispatcher and the state machine (core/device.c, store.c, the bulk rules of commands.c)
 * against docs/protocol.md "Device processing order" step by step: version, cache, type,
 * HELLO, session, late copies and last_seq, length and ranges, BAD_FRAME, RESET, and the
 * arena's books for data uploads (observed through the free bytes MODEL_TOO_LARGE reports).
 * The model commands are covered with a real model in test_device_model.c. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "hb_bytes.h"
#include "hb_crc.h"
#include "hb_device.h"
#include "hb_msg.h"
#include "hb_status.h"
#include "port_capture.h"

#define NONCE 0x5EED0000u

static uint8_t wire[HB_MAX_ENCODED_LEN + 2];
static uint8_t payload[HB_MAX_PAYLOAD + 64];

/* the expected text of template fmt with args, as the device formats it */
static const char *text(const char *fmt, const hb_arg *args, size_t n) {
    static char buf[HB_STATUS_MAX + 1];
    size_t len = hb_format(buf, HB_STATUS_MAX, fmt, args, n);
    buf[len] = 0;
    return buf;
}
#define TEXT(fmt, ...)                                                                         \
    text((fmt), (const hb_arg[]){__VA_ARGS__},                                                  \
         sizeof((const hb_arg[]){__VA_ARGS__}) / sizeof(hb_arg))

/* the answer must be ERROR code with message want (NULL: any message) for request type rt */
static void expect_error(const char *what, const cap_answer *a, int n, uint16_t seq, uint8_t rt,
                         uint16_t code, const char *want) {
    CHECK(n == 1, "%s: %d answers", what, n);
    if (n != 1) return;
    CHECK(a->type == HB_TYPE_ERROR && a->seq == seq, "%s: type 0x%02x seq %u", what, a->type,
          a->seq);
    if (a->type != HB_TYPE_ERROR) return;
    uint16_t got = hb_msg_u16(a->payload, HB_F_ERROR_CODE);
    uint16_t mlen = hb_msg_u16(a->payload, HB_F_ERROR_MSG_LEN);
    const char *msg = (const char *)hb_msg_ptr(a->payload, HB_F_ERROR_MSG);
    CHECK(got == code, "%s: code %u, want %u (%.*s)", what, got, code, (int)mlen, msg);
    CHECK(hb_msg_u8(a->payload, HB_F_ERROR_REQUEST_TYPE) == rt, "%s: request_type", what);
    CHECK(a->len == HB_SIZE_ERROR(mlen), "%s: payload length", what);
    if (want)
        CHECK(mlen == hb_strlen(want) && memcmp(msg, want, mlen) == 0, "%s: '%.*s', want '%s'",
              what, (int)mlen, msg, want);
}

static void expect_silence(const char *what, int n) {
    CHECK(n == 0 && cap_len == 0, "%s: %d answers (%zu bytes), want none", what, n, cap_len);
}

static uint16_t hello_payload(uint32_t token) {
    hb_msg_put(payload, HB_F_HELLO_HOST_PROTOCOL_VERSION, HB_PROTOCOL_VERSION);
    hb_msg_put(payload, HB_F_HELLO_SESSION, token);
    return HB_SIZE_HELLO;
}

static void hello(uint16_t seq, uint32_t token) {
    cap_answer a;
    int n = cap_request(HB_TYPE_HELLO, seq, payload, hello_payload(token), &a);
    CHECK(n == 1 && a.type == (HB_TYPE_HELLO | HB_RESPONSE_BIT) && a.seq == seq,
          "HELLO seq %u: %d answers, type 0x%02x", seq, n, a.type);
}

static void test_hello_and_session(void) {
    cap_answer a;
    int n;
    cap_identity("dev-42", "fw 1.2");
    cap_boot(CAP_ARENA_MAX, HB_MAX_PAYLOAD, NONCE);

    /* no session: every request but HELLO is NO_SESSION, a malformed one too (step 5 < 6) */
    n = cap_request(HB_TYPE_WEIGHTS_CRC, 7, NULL, 0, &a);
    expect_error("no session", &a, n, 7, HB_TYPE_WEIGHTS_CRC, HB_ERR_NO_SESSION,
                 HB_MSG_NO_SESSION);
    n = cap_request(HB_TYPE_PROBE, 8, payload, 3, &a);
    expect_error("malformed, no session", &a, n, 8, HB_TYPE_PROBE, HB_ERR_NO_SESSION, NULL);

    /* HELLO of the wrong length: BAD_LENGTH, and no session opened */
    n = cap_request(HB_TYPE_HELLO, 9, payload, 5, &a);
    expect_error("short HELLO", &a, n, 9, HB_TYPE_HELLO, HB_ERR_BAD_LENGTH, NULL);
    n = cap_request(HB_TYPE_WEIGHTS_CRC, 10, NULL, 0, &a);
    expect_error("still no session", &a, n, 10, HB_TYPE_WEIGHTS_CRC, HB_ERR_NO_SESSION, NULL);

    /* HELLO: identity and limits */
    n = cap_request(HB_TYPE_HELLO, 100, payload, hello_payload(0xABCD1234u), &a);
    CHECK(n == 1 && a.type == (HB_TYPE_HELLO | HB_RESPONSE_BIT) && a.seq == 100, "HELLO");
    if (n == 1 && a.type == (HB_TYPE_HELLO | HB_RESPONSE_BIT)) {
        CHECK(hb_msg_u16(a.payload, HB_F_HELLO_R_PROTOCOL_VERSION) == HB_PROTOCOL_VERSION, "v");
        CHECK(hb_msg_u16(a.payload, HB_F_HELLO_R_MAX_PAYLOAD) == HB_MAX_PAYLOAD, "max_payload");
        CHECK(hb_msg_u32(a.payload, HB_F_HELLO_R_BOOT_NONCE) == NONCE, "nonce %08x",
              hb_msg_u32(a.payload, HB_F_HELLO_R_BOOT_NONCE));
        uint32_t caps = hb_msg_u32(a.payload, HB_F_HELLO_R_CAPABILITIES);
        CHECK(caps == (HB_CAP_RESET | HB_CAP_APPLY_BATCH | HB_CAP_APPLY_PROBED |
                       HB_CAP_APPLY_PROBE | HB_CAP_INFER | HB_CAP_DEVICE_INFO |
                       HB_CAP_LOAD_STAGE | HB_CAP_HEAD_GRAD),
              "capabilities %x", caps);
        CHECK(hb_msg_u8(a.payload, HB_F_HELLO_R_DEVICE_ID_LEN) == 6 &&
                  memcmp(hb_msg_ptr(a.payload, HB_F_HELLO_R_DEVICE_ID), "dev-42", 6) == 0,
              "device_id");
        CHECK(hb_msg_u8(a.payload, HB_F_HELLO_R_FIRMWARE_LEN) == 6 &&
                  memcmp(hb_msg_ptr(a.payload, HB_F_HELLO_R_FIRMWARE), "fw 1.2", 6) == 0,
              "firmware");
        CHECK(a.len == hb_msg_size(a.payload, HB_L_HELLO_R), "HELLO length %u", a.len);
    }

    /* a late copy of this HELLO (same token, seq not newer) is dropped; a HELLO with another
     * token opens a new session whatever its seq */
    n = cap_request(HB_TYPE_HELLO, 99, payload, hello_payload(0xABCD1234u), &a);
    expect_silence("late HELLO", n);
    n = cap_request(HB_TYPE_HELLO, 50, payload, hello_payload(0x77777777u), &a);
    CHECK(n == 1 && a.type == (HB_TYPE_HELLO | HB_RESPONSE_BIT), "new token, old seq");
    /* last_seq is now 50: 51 is heard */
    n = cap_request(HB_TYPE_WEIGHTS_CRC, 51, NULL, 0, &a);
    expect_error("after new session", &a, n, 51, HB_TYPE_WEIGHTS_CRC, HB_ERR_NO_MODEL,
                 HB_MSG_NO_MODEL);
    /* a HELLO of the current token with a newer seq is answered and moves last_seq */
    n = cap_request(HB_TYPE_HELLO, 60, payload, hello_payload(0x77777777u), &a);
    CHECK(n == 1 && a.type == (HB_TYPE_HELLO | HB_RESPONSE_BIT), "same token, newer seq");
    n = cap_request(HB_TYPE_WEIGHTS_CRC, 55, NULL, 0, &a);
    expect_silence("older than that HELLO", n);
}

static void test_order(void) {
    cap_answer a;
    int n;
    uint32_t frames0, bad0, hits0, late0, frames, bad, hits, late;
    cap_boot(CAP_ARENA_MAX, HB_MAX_PAYLOAD, NONCE);
    hello(1000, 1);

    /* 1. version: BAD_VERSION naming both, cached like any answer */
    size_t len = cap_frame_v(wire, 7, HB_TYPE_WEIGHTS_CRC, 1001, NULL, 0);
    cap_feed(wire, len);
    n = cap_answers(&a, 1);
    expect_error("version", &a, n, 1001, HB_TYPE_WEIGHTS_CRC, HB_ERR_BAD_VERSION,
                 TEXT(HB_MSG_BAD_VERSION, HB_I(HB_PROTOCOL_VERSION), HB_I(7)));
    CHECK(a.version == HB_PROTOCOL_VERSION, "an ERROR carries the device's version");
    uint8_t first[512];
    size_t first_len = cap_len;
    memcpy(first, cap_out, cap_len);
    hb_device_counters(&frames0, &bad0, &hits0, &late0);
    cap_feed(wire, len);
    hb_device_counters(&frames, &bad, &hits, &late);
    /* step 1 comes before the cache: the retry is refused again, with the same bytes */
    CHECK(cap_len == first_len && memcmp(cap_out, first, first_len) == 0 && hits == hits0,
          "a retry of a frame of another version");

    /* 3. unknown types; 0 and 0xFF and a response type */
    uint8_t types[] = {0x00, HB_LAST_REQUEST + 1, 0x81, 0xFF};
    for (size_t i = 0; i < sizeof types; i++) {
        n = cap_request(types[i], (uint16_t)(1002 + i), NULL, 0, &a);
        expect_error("unknown type", &a, n, (uint16_t)(1002 + i), types[i], HB_ERR_UNKNOWN_TYPE,
                     TEXT(HB_MSG_UNKNOWN_TYPE, HB_I(types[i])));
    }

    /* 5. last_seq moves even when the request is then refused (here by its length) */
    n = cap_request(HB_TYPE_PROBE, 1010, payload, 4, &a);
    expect_error("short PROBE", &a, n, 1010, HB_TYPE_PROBE, HB_ERR_BAD_LENGTH, NULL);
    n = cap_request(HB_TYPE_WEIGHTS_CRC, 1010, NULL, 0, &a);
    expect_silence("same seq, other request", n);
    /* a malformed late copy is dropped, not refused */
    n = cap_request(HB_TYPE_PROBE, 1009, payload, 3, &a);
    expect_silence("malformed late copy", n);
    /* the window: 32767 ahead is newer, 32768 ahead is not */
    n = cap_request(HB_TYPE_WEIGHTS_CRC, (uint16_t)(1010 + 32768), NULL, 0, &a);
    expect_silence("half the sequence space ahead", n);
    n = cap_request(HB_TYPE_WEIGHTS_CRC, (uint16_t)(1010 + 32767), NULL, 0, &a);
    expect_error("just inside the window", &a, n, (uint16_t)(1010 + 32767),
                 HB_TYPE_WEIGHTS_CRC, HB_ERR_NO_MODEL, NULL);
    uint16_t seq = (uint16_t)(1010 + 32767);

    /* 6-7. length then ranges: a PROBE with eps 0 and q 0 names eps (table order) */
    seq++;
    memset(payload, 0, HB_MIN_SIZE_PROBE);
    hb_msg_put(payload, HB_F_PROBE_BATCH_SIZE, 1);
    n = cap_request(HB_TYPE_PROBE, seq, payload, HB_MIN_SIZE_PROBE, &a);
    expect_error("ranges in table order", &a, n, seq, HB_TYPE_PROBE, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_RANGE, HB_S("PROBE request"), HB_S("eps"), HB_I(0), HB_I(1),
                      HB_I(HB_MAX_EPS)));

    /* 8. a well-formed request without a model */
    seq++;
    hb_msg_put(payload, HB_F_PROBE_EPS, 1);
    hb_msg_put(payload, HB_F_PROBE_Q, 1);
    n = cap_request(HB_TYPE_PROBE, seq, payload, (uint16_t)HB_SIZE_PROBE(1), &a);
    expect_error("no model", &a, n, seq, HB_TYPE_PROBE, HB_ERR_NO_MODEL, HB_MSG_NO_MODEL);

    /* 2. the cache key is (seq, type, crc): same seq and type, another payload, is not the
     * cached request, and not newer either: dropped */
    hb_msg_put(payload, HB_F_PROBE_BATCH_SEED, 1);
    n = cap_request(HB_TYPE_PROBE, seq, payload, (uint16_t)HB_SIZE_PROBE(1), &a);
    expect_silence("same seq and type, other crc", n);

    /* BAD_FRAME: seq 0, request_type 0, the kind; the cache keeps the last answer */
    len = cap_frame(wire, HB_TYPE_WEIGHTS_CRC, (uint16_t)(seq + 1), NULL, 0);
    wire[3] ^= 0x40; /* a header byte: the CRC fails */
    cap_feed(wire, len);
    n = cap_answers(&a, 1);
    expect_error("crc", &a, n, 0, 0, HB_ERR_BAD_FRAME, HB_PROBLEM_NAME_CRC);
    hb_msg_put(payload, HB_F_PROBE_BATCH_SEED, 0);
    n = cap_request(HB_TYPE_PROBE, seq, payload, (uint16_t)HB_SIZE_PROBE(1), &a);
    expect_error("cache survives BAD_FRAME", &a, n, seq, HB_TYPE_PROBE, HB_ERR_NO_MODEL, NULL);

    /* junk, then a frame in the same read: the junk ends at the frame's leading 0x00 */
    static uint8_t stream[64];
    memset(stream, 0x33, 5);
    len = cap_frame(stream + 5, HB_TYPE_WEIGHTS_CRC, (uint16_t)(seq + 1), NULL, 0);
    cap_feed(stream, len + 5);
    cap_answer two[2];
    n = cap_answers(two, 2);
    CHECK(n == 2, "junk then frame: %d answers", n);
    if (n == 2) {
        expect_error("junk", &two[0], 1, 0, 0, HB_ERR_BAD_FRAME, NULL);
        expect_error("frame after junk", &two[1], 1, (uint16_t)(seq + 1), HB_TYPE_WEIGHTS_CRC,
                     HB_ERR_NO_MODEL, NULL);
    }
    hb_device_counters(&frames, &bad, &hits, &late);
    CHECK(bad == bad0 + 2, "bad frames counted: %u", bad - bad0);
    CHECK(late == late0 + 4, "late copies counted: %u", late - late0);
}

static void test_reset(void) {
    cap_answer a;
    int n;
    cap_boot(CAP_ARENA_MAX, HB_MAX_PAYLOAD, NONCE);
    hello(1, 9);
    uint32_t boots = cap_boots;
    /* RESET with a payload is BAD_LENGTH and resets nothing */
    n = cap_request(HB_TYPE_RESET, 2, payload, 1, &a);
    expect_error("RESET with a payload", &a, n, 2, HB_TYPE_RESET, HB_ERR_BAD_LENGTH, NULL);
    CHECK(cap_boots == boots, "no reset");
    /* RESET: the empty answer goes out, then the device boots again */
    size_t len = cap_frame(wire, HB_TYPE_RESET, 3, NULL, 0);
    size_t len2 = cap_frame(wire + len, HB_TYPE_WEIGHTS_CRC, 4, NULL, 0);
    cap_feed(wire, len + len2); /* the next request in the same read meets the new boot */
    cap_answer two[2];
    n = cap_answers(two, 2);
    CHECK(n == 2 && two[0].type == (HB_TYPE_RESET | HB_RESPONSE_BIT) && two[0].len == 0 &&
              two[0].seq == 3,
          "RESET answer: %d answers", n);
    CHECK(cap_boots == boots + 1, "RESET reboots once");
    if (n == 2)
        expect_error("after RESET", &two[1], 1, 4, HB_TYPE_WEIGHTS_CRC, HB_ERR_NO_SESSION, NULL);
    /* the new boot's nonce, and an empty cache: the RESET's retry is a new request */
    n = cap_request(HB_TYPE_HELLO, 5, payload, hello_payload(9), &a);
    CHECK(n == 1 && hb_msg_u32(a.payload, HB_F_HELLO_R_BOOT_NONCE) == NONCE + 1,
          "nonce after RESET");
    n = cap_request(HB_TYPE_RESET, 3, NULL, 0, &a);
    expect_silence("RESET's late copy after the reboot and a HELLO", n);
}

/* LOAD_DATA of blob b (len bytes) into slot in chunks of `chunk`; returns the last answer's
 * count (1) and the answer in *a */
static int upload(uint8_t slot, uint16_t *seq, const uint8_t *b, uint32_t len, uint32_t chunk,
                  uint32_t total, cap_answer *a) {
    int n = 0;
    uint32_t off = 0;
    do {
        uint32_t k = len - off < chunk ? len - off : chunk;
        hb_msg_put(payload, HB_F_LOAD_DATA_SLOT, slot);
        hb_msg_put(payload, HB_F_LOAD_DATA_TOTAL_LEN, total);
        hb_msg_put(payload, HB_F_LOAD_DATA_OFFSET, off);
        memcpy(hb_msg_wptr(payload, HB_F_LOAD_DATA_CHUNK), b + off, k);
        n = cap_request(HB_TYPE_LOAD_DATA, ++*seq, payload,
                        (uint16_t)(HB_MIN_SIZE_LOAD_DATA + k), a);
        if (n != 1 || a->type != (HB_TYPE_LOAD_DATA | HB_RESPONSE_BIT)) return n;
        off += k;
    } while (off < len);
    return n;
}

static uint32_t make_data(uint8_t *b, uint32_t items, uint16_t item_size, uint16_t classes) {
    hb_wr32(b + HB_OFF_DATA_BLOB_N_ITEMS, items);
    hb_wr16(b + HB_OFF_DATA_BLOB_ITEM_SIZE, item_size);
    hb_wr16(b + HB_OFF_DATA_BLOB_N_CLASSES, classes);
    uint32_t n = HB_DATA_HEADER_BYTES + items * item_size;
    for (uint32_t i = HB_DATA_HEADER_BYTES; i < n; i++) b[i] = (uint8_t)(i * 31);
    for (uint32_t i = 0; i < items; i++) b[n + i] = (uint8_t)(i % classes);
    return n + items;
}

static uint32_t free_bytes_reported(uint16_t *seq, uint8_t slot) {
    /* an upload too large for anything: its message reports the free bytes */
    cap_answer a;
    hb_msg_put(payload, HB_F_LOAD_DATA_SLOT, slot);
    hb_msg_put(payload, HB_F_LOAD_DATA_TOTAL_LEN, 0xFFFFFFF0u);
    hb_msg_put(payload, HB_F_LOAD_DATA_OFFSET, 0);
    int n = cap_request(HB_TYPE_LOAD_DATA, ++*seq, payload, HB_MIN_SIZE_LOAD_DATA, &a);
    if (n != 1 || a.type != HB_TYPE_ERROR) return 0xFFFFFFFFu;
    const char *msg = (const char *)hb_msg_ptr(a.payload, HB_F_ERROR_MSG);
    const char *p = strstr(msg, "bytes, ");
    return p ? (uint32_t)strtoul(p + 7, NULL, 10) : 0xFFFFFFFFu;
}

static void test_bulk_data(void) {
    cap_answer a;
    int n;
    static uint8_t blob[20000];
    const uint32_t arena = 64 * 1024;
    cap_boot(arena, 256, NONCE);
    uint16_t seq = 0;
    hello(seq, 3);

    /* a blob in chunks of the largest size that fits 256 */
    uint32_t len = make_data(blob, 100, 30, 10); /* 3108 bytes */
    uint32_t chunk = 256 - HB_DATA_CHUNK_OVERHEAD;
    n = upload(0, &seq, blob, len, chunk, len, &a);
    CHECK(n == 1 && a.type == (HB_TYPE_LOAD_DATA | HB_RESPONSE_BIT), "upload: 0x%02x", a.type);
    if (a.type == (HB_TYPE_LOAD_DATA | HB_RESPONSE_BIT)) {
        CHECK(hb_msg_u8(a.payload, HB_F_LOAD_DATA_R_COMPLETE) == 1, "complete");
        CHECK(hb_msg_u32(a.payload, HB_F_LOAD_DATA_R_N_ITEMS) == 100, "n_items");
        CHECK(hb_msg_u32(a.payload, HB_F_LOAD_DATA_R_RECEIVED) == len, "received");
    }
    /* the books: pad16(3108) = 3120 held */
    uint32_t free0 = free_bytes_reported(&seq, 3);
    CHECK(free0 == arena - 3120, "free after one slot: %u", free0);
    /* a too-large upload at offset 0 discards what that slot held */
    n = upload(1, &seq, blob, len, chunk, len, &a);
    CHECK(free_bytes_reported(&seq, 3) == arena - 2 * 3120, "two slots");
    CHECK(free_bytes_reported(&seq, 0) == arena - 3120, "slot 0 dropped by a refused start");
    /* slot 1 survived (its data moved up): a continued upload to it is not in progress, a
     * fresh one replaces it */
    hb_msg_put(payload, HB_F_LOAD_DATA_SLOT, 1);
    hb_msg_put(payload, HB_F_LOAD_DATA_TOTAL_LEN, len);
    hb_msg_put(payload, HB_F_LOAD_DATA_OFFSET, chunk);
    n = cap_request(HB_TYPE_LOAD_DATA, ++seq, payload, HB_MIN_SIZE_LOAD_DATA, &a);
    expect_error("not started", &a, n, seq, HB_TYPE_LOAD_DATA, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_BULK_NOT_STARTED, HB_S("LOAD_DATA request"), HB_I(chunk)));

    /* an upload in progress: wrong offset, changed total_len; the upload is kept */
    n = upload(2, &seq, blob, chunk, chunk, len, &a); /* the first chunk only */
    CHECK(n == 1 && hb_msg_u8(a.payload, HB_F_LOAD_DATA_R_COMPLETE) == 0 &&
              hb_msg_u32(a.payload, HB_F_LOAD_DATA_R_RECEIVED) == chunk,
          "first chunk");
    hb_msg_put(payload, HB_F_LOAD_DATA_SLOT, 2);
    hb_msg_put(payload, HB_F_LOAD_DATA_OFFSET, 2 * chunk);
    n = cap_request(HB_TYPE_LOAD_DATA, ++seq, payload, HB_MIN_SIZE_LOAD_DATA, &a);
    expect_error("wrong offset", &a, n, seq, HB_TYPE_LOAD_DATA, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_BULK_OFFSET, HB_S("LOAD_DATA request"), HB_I(2 * chunk),
                      HB_I(chunk)));
    hb_msg_put(payload, HB_F_LOAD_DATA_TOTAL_LEN, len + 1);
    hb_msg_put(payload, HB_F_LOAD_DATA_OFFSET, chunk);
    n = cap_request(HB_TYPE_LOAD_DATA, ++seq, payload, HB_MIN_SIZE_LOAD_DATA, &a);
    expect_error("changed total", &a, n, seq, HB_TYPE_LOAD_DATA, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_BULK_TOTAL, HB_S("LOAD_DATA request"), HB_I(len + 1), HB_I(len),
                      HB_I(chunk)));
    /* a chunk of 0 bytes at the right offset is fine */
    hb_msg_put(payload, HB_F_LOAD_DATA_TOTAL_LEN, len);
    n = cap_request(HB_TYPE_LOAD_DATA, ++seq, payload, HB_MIN_SIZE_LOAD_DATA, &a);
    CHECK(n == 1 && a.type == (HB_TYPE_LOAD_DATA | HB_RESPONSE_BIT) &&
              hb_msg_u32(a.payload, HB_F_LOAD_DATA_R_RECEIVED) == chunk,
          "empty chunk");
    /* the rest; then it is complete */
    n = 0;
    for (uint32_t off = chunk; off < len; off += chunk) {
        uint32_t k = len - off < chunk ? len - off : chunk;
        hb_msg_put(payload, HB_F_LOAD_DATA_OFFSET, off);
        memcpy(hb_msg_wptr(payload, HB_F_LOAD_DATA_CHUNK), blob + off, k);
        n = cap_request(HB_TYPE_LOAD_DATA, ++seq, payload, (uint16_t)(HB_MIN_SIZE_LOAD_DATA + k),
                        &a);
    }
    CHECK(n == 1 && hb_msg_u8(a.payload, HB_F_LOAD_DATA_R_COMPLETE) == 1, "resumed upload");

    /* a retried chunk is answered from the cache and not appended twice (the next chunk of
     * a new upload still lands at offset `chunk`) */
    n = upload(3, &seq, blob, chunk, chunk, len, &a);
    uint8_t again[64];
    size_t again_len = cap_len;
    memcpy(again, cap_out, cap_len);
    size_t wl = cap_frame(wire, HB_TYPE_LOAD_DATA, seq, payload,
                          (uint16_t)(HB_MIN_SIZE_LOAD_DATA + chunk));
    (void)wl;
    hb_msg_put(payload, HB_F_LOAD_DATA_SLOT, 3);
    hb_msg_put(payload, HB_F_LOAD_DATA_TOTAL_LEN, len);
    hb_msg_put(payload, HB_F_LOAD_DATA_OFFSET, 0);
    memcpy(hb_msg_wptr(payload, HB_F_LOAD_DATA_CHUNK), blob, chunk);
    wl = cap_frame(wire, HB_TYPE_LOAD_DATA, seq, payload,
                   (uint16_t)(HB_MIN_SIZE_LOAD_DATA + chunk));
    cap_feed(wire, wl);
    CHECK(cap_len == again_len && memcmp(cap_out, again, again_len) == 0, "retried chunk");

    /* blobs that break the data rules: refused at completion, the slot left empty */
    struct {
        const char *what;
        uint32_t len;
        const char *msg;
    } bad[4];
    static uint8_t b2[64];
    uint32_t l2 = make_data(b2, 3, 4, 2);
    b2[l2 - 1] = 5; /* the last label */
    bad[0].what = "label";
    bad[0].len = l2;
    char m0[HB_STATUS_MAX + 1];
    snprintf(m0, sizeof m0, "%s", TEXT(HB_MSG_DATA_LABEL, HB_I(5), HB_I(2), HB_I(2)));
    bad[0].msg = m0;
    n = upload(0, &seq, b2, l2, chunk, l2, &a);
    expect_error(bad[0].what, &a, n, seq, HB_TYPE_LOAD_DATA, HB_ERR_BAD_ARGUMENT, bad[0].msg);
    n = upload(0, &seq, b2, 5, chunk, 5, &a);
    expect_error("short blob", &a, n, seq, HB_TYPE_LOAD_DATA, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_DATA_SHORT, HB_I(5), HB_I(HB_DATA_HEADER_BYTES)));
    l2 = make_data(b2, 3, 4, 2);
    n = upload(0, &seq, b2, l2 - 1, chunk, l2 - 1, &a);
    expect_error("length", &a, n, seq, HB_TYPE_LOAD_DATA, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_DATA_LENGTH, HB_I(l2 - 1), HB_I(l2)));
    hb_wr16(b2 + HB_OFF_DATA_BLOB_N_CLASSES, 0);
    n = upload(0, &seq, b2, l2, chunk, l2, &a);
    expect_error("n_classes 0", &a, n, seq, HB_TYPE_LOAD_DATA, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_RANGE, HB_S("data blob"), HB_S("n_classes"), HB_I(0), HB_I(1),
                      HB_I(65535)));
    /* books: slots 1, 2, 3 (3 uploaded a first chunk: its whole region is held) remain */
    CHECK(free_bytes_reported(&seq, 0) == arena - 3 * 3120, "refused blobs hold nothing: %u",
          free_bytes_reported(&seq, 0));

    /* oversize for a 256-byte device */
    memset(payload, 1, 300);
    size_t wl2 = cap_frame(wire, HB_TYPE_LOAD_DATA, ++seq, payload, 257);
    cap_feed(wire, wl2);
    n = cap_answers(&a, 1);
    expect_error("oversize", &a, n, 0, 0, HB_ERR_BAD_FRAME, HB_PROBLEM_NAME_OVERSIZE);
}

/* DEVICE_INFO, and a staged upload written where LOAD_STAGE said (as a debugger would),
 * refused with STAGE_CRC while its bytes are not there, then taken as LOAD_DATA's last chunk */
static void test_staged(void) {
    cap_answer a;
    int n;
    static uint8_t blob[4000];
    const uint32_t arena = 64 * 1024;
    cap_boot(arena, 256, NONCE);
    uint16_t seq = 0;
    hello(seq, 5);
    n = cap_request(HB_TYPE_DEVICE_INFO, ++seq, NULL, 0, &a);
    CHECK(n == 1 && a.type == (HB_TYPE_DEVICE_INFO | HB_RESPONSE_BIT), "DEVICE_INFO");
    CHECK(a.len == HB_SIZE_DEVICE_INFO_R, "DEVICE_INFO size %u", a.len);
    CHECK(hb_msg_u32(a.payload, HB_F_DEVICE_INFO_R_ARENA_BYTES) == arena, "arena_bytes");
    CHECK(hb_msg_u8(a.payload, HB_F_DEVICE_INFO_R_TIMING_SOURCE) == HB_TIMING_NONE, "timing");
    uint8_t *base = (uint8_t *)(uintptr_t)hb_msg_u64(a.payload, HB_F_DEVICE_INFO_R_ARENA_BASE);
    CHECK(base != NULL, "arena_base");

    uint32_t len = make_data(blob, 100, 30, 10); /* 3108 bytes */
    hb_msg_put(payload, HB_F_LOAD_STAGE_TARGET, 2);
    hb_msg_put(payload, HB_F_LOAD_STAGE_TOTAL_LEN, len);
    n = cap_request(HB_TYPE_LOAD_STAGE, ++seq, payload, HB_SIZE_LOAD_STAGE, &a);
    CHECK(n == 1 && a.type == (HB_TYPE_LOAD_STAGE | HB_RESPONSE_BIT), "LOAD_STAGE");
    uint32_t off = hb_msg_u32(a.payload, HB_F_LOAD_STAGE_R_OFFSET);
    CHECK(off == arena - 3120, "slot 2 at the top of the arena: offset %u", off);
    memset(base + off, 0xA5, len); /* not the blob: what an earlier test left there */
    uint32_t crc = hb_crc32(0, blob, len), wrong = hb_crc32(0, base + off, len);
    hb_msg_put(payload, HB_F_LOAD_COMMIT_TARGET, 2);
    hb_msg_put(payload, HB_F_LOAD_COMMIT_TOTAL_LEN, len);
    hb_msg_put(payload, HB_F_LOAD_COMMIT_CRC32, crc);
    n = cap_request(HB_TYPE_LOAD_COMMIT, ++seq, payload, HB_SIZE_LOAD_COMMIT, &a);
    expect_error("not written", &a, n, seq, HB_TYPE_LOAD_COMMIT, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_STAGE_CRC, HB_S("LOAD_COMMIT request"), HB_I(len), HB_I(wrong),
                      HB_I(crc)));
    memcpy(base + off, blob, len); /* the debugger's write */
    n = cap_request(HB_TYPE_LOAD_COMMIT, ++seq, payload, HB_SIZE_LOAD_COMMIT, &a);
    CHECK(n == 1 && a.type == (HB_TYPE_LOAD_COMMIT | HB_RESPONSE_BIT), "LOAD_COMMIT 0x%02x",
          a.type);
    CHECK(hb_msg_u32(a.payload, HB_F_LOAD_COMMIT_R_N_ITEMS) == 100, "n_items");
    CHECK(hb_msg_u32(a.payload, HB_F_LOAD_COMMIT_R_RECEIVED) == len, "received");
    CHECK(free_bytes_reported(&seq, 3) == arena - 3120, "the slot holds its region");
    hb_msg_put(payload, HB_F_LOAD_COMMIT_TARGET, 2);
    hb_msg_put(payload, HB_F_LOAD_COMMIT_TOTAL_LEN, len);
    hb_msg_put(payload, HB_F_LOAD_COMMIT_CRC32, crc);
    n = cap_request(HB_TYPE_LOAD_COMMIT, ++seq, payload, HB_SIZE_LOAD_COMMIT, &a);
    expect_error("committed once", &a, n, seq, HB_TYPE_LOAD_COMMIT, HB_ERR_BAD_ARGUMENT,
                 TEXT(HB_MSG_STAGE_NONE, HB_S("LOAD_COMMIT request"), HB_I(2)));
}

int main(void) {
    test_hello_and_session();
    test_order();
    test_reset();
    test_bulk_data();
    test_staged();
    TEST_MAIN_END("test_device");
}
