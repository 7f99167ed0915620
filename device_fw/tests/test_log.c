/* The device log (core/log.c, hb_log.h): lines wait in the ring until a session is open, go
 * out as LOG frames (seq 0) just before the next answer, the ring drops its oldest lines and
 * the next frame says how many, text is cut at HB_MAX_LOG_MSG on a character boundary, and the
 * UART counters are logged only when they move. The twin's ring (hilbench/device/device_log.py)
 * sends the same bytes: tests/sil/test_differential.py. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hb_device.h"
#include "hb_log.h"
#include "hb_msg.h"
#include "port_capture.h"

static uint8_t payload[64];

static uint16_t hello(uint32_t token) {
    hb_msg_put(payload, HB_F_HELLO_HOST_PROTOCOL_VERSION, HB_PROTOCOL_VERSION);
    hb_msg_put(payload, HB_F_HELLO_SESSION, token);
    return HB_SIZE_HELLO;
}

static void expect_log(const char *what, const cap_answer *a, uint8_t kind, uint16_t dropped,
                       const char *text) {
    CHECK(a->type == HB_TYPE_LOG && a->seq == 0, "%s: type 0x%02x seq %u", what, a->type, a->seq);
    if (a->type != HB_TYPE_LOG) return;
    uint16_t n = hb_msg_u16(a->payload, HB_F_LOG_MSG_LEN);
    const char *msg = (const char *)hb_msg_ptr(a->payload, HB_F_LOG_MSG);
    CHECK(hb_msg_u8(a->payload, HB_F_LOG_KIND) == kind, "%s: kind", what);
    CHECK(hb_msg_u16(a->payload, HB_F_LOG_DROPPED) == dropped, "%s: dropped %u, want %u", what,
          hb_msg_u16(a->payload, HB_F_LOG_DROPPED), dropped);
    CHECK(a->len == HB_SIZE_LOG(n), "%s: payload length", what);
    if (text)
        CHECK(n == strlen(text) && memcmp(msg, text, n) == 0, "%s: '%.*s', want '%s'", what,
              (int)n, msg, text);
}

static void banner_waits_for_a_session(void) {
    cap_answer a[HB_LOG_RING + 2];
    cap_boot(64 * 1024, HB_MAX_PAYLOAD, 1);
    hb_log_boot("host");
    CHECK(hb_log_pending() == 1, "banner queued");
    int n = cap_request(HB_TYPE_WEIGHTS_CRC, 3, NULL, 0, a); /* NO_SESSION: alone */
    CHECK(n == 1 && a[0].type == HB_TYPE_ERROR, "no session: %d answers", n);
    cap_request(HB_TYPE_HELLO, 4, payload, hello(9), a);
    n = cap_answers(a, HB_LOG_RING + 2);
    CHECK(n == 2, "HELLO: %d answers", n);
    expect_log("banner", &a[0], HB_LOG_BOOT, 0, "boot: hilbench-test, firmware hilbench-test fw, "
                                                 "reset host");
    CHECK(a[1].type == (HB_TYPE_HELLO | HB_RESPONSE_BIT) && a[1].seq == 4, "then HELLO's answer");
    n = cap_request(HB_TYPE_HELLO, 4, payload, hello(9), a); /* a retry: the cache, alone */
    CHECK(n == 1 && a[0].type == (HB_TYPE_HELLO | HB_RESPONSE_BIT), "retry: %d answers", n);
}

static void full_ring_drops_oldest(void) {
    cap_answer a[HB_LOG_RING + 2];
    cap_boot(64 * 1024, HB_MAX_PAYLOAD, 1);
    char line[200];
    for (int i = 0; i < HB_LOG_RING + 3; i++) {
        int k = snprintf(line, sizeof line, "note %d ", i);
        for (int j = 0; j < 80; j++) memcpy(line + k + 2 * j, "\xc3\xa9", 2); /* e-acute */
        hb_log(HB_LOG_NOTE, line, (size_t)k + 160);
    }
    CHECK(hb_log_pending() == HB_LOG_RING, "ring holds %u", hb_log_pending());
    cap_request(HB_TYPE_HELLO, 1, payload, hello(9), a);
    int n = cap_answers(a, HB_LOG_RING + 2);
    CHECK(n == HB_LOG_RING + 1, "%d answers", n);
    for (int i = 0; i < HB_LOG_RING && i < n; i++) {
        expect_log("ring", &a[i], HB_LOG_NOTE, i == 0 ? 3 : 0, NULL);
        uint16_t len = hb_msg_u16(a[i].payload, HB_F_LOG_MSG_LEN);
        /* "note 3 " + 56 e-acute = 119 bytes (the 57th would split at 120); "note 10 " = 120 */
        CHECK(len == (i + 3 < 10 ? 119 : 120), "line %d: %u bytes", i, len);
    }
    CHECK(hb_log_pending() == 0, "flushed");
}

static void uart_counters_only_when_they_move(void) {
    cap_boot(64 * 1024, HB_MAX_PAYLOAD, 1);
    hb_log_uart(0, 0, 0, 0);
    CHECK(hb_log_pending() == 0, "zero counters after boot: no line");
    hb_log_uart(2, 0, 1, 0);
    hb_log_uart(2, 0, 1, 0);
    CHECK(hb_log_pending() == 1, "one line per change, got %u", hb_log_pending());
    cap_answer a[4];
    cap_request(HB_TYPE_HELLO, 1, payload, hello(9), a);
    CHECK(cap_answers(a, 4) == 2, "line and answer");
    expect_log("uart", &a[0], HB_LOG_UART, 0,
               "uart errors: overrun 2, framing 0, noise 1, dropped 0");
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    banner_waits_for_a_session();
    full_ring_drops_oldest();
    uart_counters_only_when_they_move();
    TEST_MAIN_END("test_log");
}
