/* The device log ring (hb_log.h). Lines are formatted when they are queued and sent in order;
 * a frame is built in a static buffer sized for the longest line. */
#include <string.h>

#include "hb_bytes.h"
#include "hb_frame.h"
#include "hb_log.h"
#include "hb_port.h"

#define LOG_BODY_CAP (HB_FRAME_OVERHEAD + HB_MIN_SIZE_LOG + HB_MAX_LOG_MSG)

_Static_assert(HB_MIN_SIZE_LOG + HB_MAX_LOG_MSG <= HB_MIN_DEVICE_PAYLOAD,
               "a LOG frame must fit the smallest device payload");

typedef struct {
    uint8_t kind;
    uint8_t len;
    char text[HB_MAX_LOG_MSG];
} log_line;

static struct {
    log_line lines[HB_LOG_RING];
    uint32_t head;    /* index of the oldest line */
    uint32_t count;   /* lines waiting */
    uint32_t dropped; /* lines lost to a full ring since the last flush */
    uint32_t uart[4]; /* the counters of the last hb_log_uart */
} ring;

static uint8_t log_body[LOG_BODY_CAP];
static uint8_t log_wire[LOG_BODY_CAP + LOG_BODY_CAP / 254 + 3];

void hb_log_init(void) { memset(&ring, 0, sizeof ring); }

/* the length of text[0..len) cut at max bytes on a character boundary */
static size_t cut_utf8(const char *text, size_t len, size_t max) {
    if (len <= max) return len;
    size_t n = max;
    /* back over continuation bytes: the character starting at the lead byte must fit */
    while (n > 0 && ((uint8_t)text[n] & 0xC0u) == 0x80u) n--;
    return n;
}

void hb_log(uint8_t kind, const char *text, size_t len) {
    if (!text) len = 0;
    len = cut_utf8(text, len, HB_MAX_LOG_MSG);
    if (ring.count == HB_LOG_RING) { /* full: the oldest line goes */
        ring.head = (ring.head + 1u) % HB_LOG_RING;
        ring.count--;
        ring.dropped++;
    }
    log_line *l = &ring.lines[(ring.head + ring.count) % HB_LOG_RING];
    l->kind = kind;
    l->len = (uint8_t)len;
    if (len) memcpy(l->text, text, len);
    ring.count++;
}

void hb_log_fmt(uint8_t kind, const char *fmt, const hb_arg *args, size_t n_args) {
    char text[HB_STATUS_MAX];
    size_t len = hb_format(text, sizeof text, fmt, args, n_args);
    hb_log(kind, text, len);
}

void hb_log_boot(const char *reason) {
    const hb_arg a[] = {HB_S(hb_port_device_id()), HB_S(hb_port_firmware()),
                        HB_S(reason ? reason : "unknown")};
    hb_log_fmt(HB_LOG_BOOT, HB_LOG_BANNER, a, 3);
}

void hb_log_uart(uint32_t overrun, uint32_t framing, uint32_t noise, uint32_t dropped) {
    uint32_t now[4] = {overrun, framing, noise, dropped};
    if (!memcmp(now, ring.uart, sizeof now)) return;
    memcpy(ring.uart, now, sizeof now);
    const hb_arg a[] = {HB_I(overrun), HB_I(framing), HB_I(noise), HB_I(dropped)};
    hb_log_fmt(HB_LOG_UART, HB_LOG_UART_COUNTERS, a, 4);
}

uint32_t hb_log_pending(void) { return ring.count; }

void hb_log_flush(void) {
    while (ring.count) {
        const log_line *l = &ring.lines[ring.head];
        uint8_t *p = log_body + HB_HEADER_SIZE;
        p[HB_OFF_LOG_KIND] = l->kind;
        uint32_t dropped = ring.dropped > 0xFFFFu ? 0xFFFFu : ring.dropped;
        hb_wr16(p + HB_OFF_LOG_DROPPED, (uint16_t)dropped);
        hb_wr16(p + HB_OFF_LOG_MSG_LEN, l->len);
        memcpy(p + HB_OFF_LOG_MSG, l->text, l->len);
        size_t n = hb_frame_encode(log_wire, log_body, HB_PROTOCOL_VERSION, HB_TYPE_LOG, 0,
                                   (uint16_t)(HB_MIN_SIZE_LOG + l->len));
        ring.head = (ring.head + 1u) % HB_LOG_RING;
        ring.count--;
        ring.dropped = 0;
        hb_port_write(log_wire, n);
    }
}
