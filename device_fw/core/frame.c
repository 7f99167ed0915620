/* COBS, the receive state machine and the frame encoder (docs/protocol.md "Framing"). */
#include "hb_frame.h"

#include "hb_bytes.h"
#include "hb_crc.h"
#include "hb_wire.h"

#define COBS_MAX_CODE 0xFFu /* a block of 254 non-zero bytes, no zero after it */

uint32_t hb_frame_max_encoded_len(uint32_t max_payload) {
    uint32_t body = max_payload + HB_FRAME_OVERHEAD;
    return body + body / (COBS_MAX_CODE - 1u) + 1u;
}

size_t hb_frame_cobs_encode(const uint8_t *in, size_t n, uint8_t *out) {
    size_t code_at = 0, o = 1;
    uint8_t code = 1;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == 0) {
            out[code_at] = code;
            code_at = o++;
            code = 1;
            continue;
        }
        out[o++] = in[i];
        if (++code == COBS_MAX_CODE) {
            out[code_at] = code;
            code = 1;
            if (i + 1 < n) code_at = o++; /* no empty block after a final 0xFF block */
            else return o;
        }
    }
    out[code_at] = code;
    return o;
}

long hb_frame_cobs_decode(const uint8_t *in, size_t m, uint8_t *out) {
    size_t i = 0, o = 0;
    while (i < m) {
        size_t c = in[i];
        if (c == 0 || c > m - i) return -1; /* a zero, or a code past the end */
        for (size_t k = 1; k < c; k++) {
            if (in[i + k] == 0) return -1;
            out[o++] = in[i + k];
        }
        i += c;
        if (c < COBS_MAX_CODE && i < m) out[o++] = 0;
    }
    return (long)o;
}

const char *hb_frame_problem_name(hb_problem kind) {
    switch (kind) {
    case HB_PROBLEM_COBS: return HB_PROBLEM_NAME_COBS;
    case HB_PROBLEM_SHORT: return HB_PROBLEM_NAME_SHORT;
    case HB_PROBLEM_CRC: return HB_PROBLEM_NAME_CRC;
    case HB_PROBLEM_LENGTH: return HB_PROBLEM_NAME_LENGTH;
    case HB_PROBLEM_OVERSIZE: return HB_PROBLEM_NAME_OVERSIZE;
    default: return "";
    }
}

void hb_frame_rx_init(hb_rx *r, uint8_t *buf, uint16_t max_payload) {
    r->buf = buf;
    r->limit = hb_frame_max_encoded_len(max_payload);
    r->len = 0;
    r->discarded = 0;
    r->max_payload = max_payload;
}

/* check a complete raw frame of r->len bytes (decoded in place) */
static hb_rx_event rx_check(hb_rx *r, hb_frame *f, hb_problem *kind) {
    uint32_t raw = r->len;
    r->len = 0;
    if (raw == 0) return HB_RX_NONE; /* two delimiters in a row: ignored */
    long dec = hb_frame_cobs_decode(r->buf, raw, r->buf);
    if (dec < 0) {
        *kind = HB_PROBLEM_COBS;
        return HB_RX_PROBLEM;
    }
    uint32_t n = (uint32_t)dec;
    if (n < HB_FRAME_OVERHEAD) {
        *kind = HB_PROBLEM_SHORT;
        return HB_RX_PROBLEM;
    }
    const uint8_t *b = r->buf;
    uint32_t stored = hb_rd32(b + n - HB_CRC_SIZE);
    if (hb_crc32(0, b, n - HB_CRC_SIZE) != stored) {
        *kind = HB_PROBLEM_CRC;
        return HB_RX_PROBLEM;
    }
    uint16_t length = hb_rd16(b + 4);
    if (length != n - HB_FRAME_OVERHEAD) {
        *kind = HB_PROBLEM_LENGTH;
        return HB_RX_PROBLEM;
    }
    if (length > r->max_payload) {
        *kind = HB_PROBLEM_OVERSIZE;
        return HB_RX_PROBLEM;
    }
    f->version = b[0];
    f->type = b[1];
    f->seq = hb_rd16(b + 2);
    f->len = length;
    f->crc = stored;
    f->payload = b + HB_HEADER_SIZE;
    return HB_RX_FRAME;
}

size_t hb_frame_rx_feed(hb_rx *r, const uint8_t *data, size_t n, hb_rx_event *ev, hb_frame *f,
                  hb_problem *kind) {
    for (size_t i = 0; i < n; i++) {
        uint8_t b = data[i];
        if (b != 0) {
            if (r->discarded) {
                if (r->discarded < UINT32_MAX) r->discarded++;
            } else if (r->len < r->limit) {
                r->buf[r->len++] = b;
            } else { /* one byte past the limit without a delimiter: drop the run */
                r->discarded = r->len + 1;
                r->len = 0;
            }
            continue;
        }
        if (r->discarded) { /* the delimiter ends an oversize run: report it once */
            r->discarded = 0;
            *kind = HB_PROBLEM_OVERSIZE;
            *ev = HB_RX_PROBLEM;
            return i + 1;
        }
        hb_rx_event e = rx_check(r, f, kind);
        if (e != HB_RX_NONE) {
            *ev = e;
            return i + 1;
        }
    }
    *ev = HB_RX_NONE;
    return n;
}

size_t hb_frame_encode(uint8_t *wire, uint8_t *body, uint8_t version, uint8_t type,
                       uint16_t seq, uint16_t n) {
    body[0] = version;
    body[1] = type;
    hb_wr16(body + 2, seq);
    hb_wr16(body + 4, n);
    size_t crc_at = (size_t)HB_HEADER_SIZE + n;
    hb_wr32(body + crc_at, hb_crc32(0, body, crc_at));
    wire[0] = 0;
    size_t len = hb_frame_cobs_encode(body, crc_at + HB_CRC_SIZE, wire + 1);
    wire[1 + len] = 0;
    return len + 2;
}
