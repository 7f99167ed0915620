/* Frames on the wire (docs/protocol.md "Framing"): COBS, the 0x00 delimiter, the 10-byte body
 * overhead (6-byte header, CRC-32 trailer), the receive state machine with its problem kinds,
 * and the encoder. No heap: the caller owns every buffer. */
#ifndef HB_FRAME_H
#define HB_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "hb_wire.h"

/* The longest COBS encoding of a body carrying up to max_payload bytes (delimiter excluded):
 * B + floor(B / 254) + 1 with B = max_payload + HB_FRAME_OVERHEAD. */
uint32_t hb_frame_max_encoded_len(uint32_t max_payload);

/* COBS-encode n bytes of in into out (at most n + n/254 + 1 bytes, no 0x00 among them);
 * returns the encoded length. in and out must not overlap. */
size_t hb_frame_cobs_encode(const uint8_t *in, size_t n, uint8_t *out);

/* COBS-decode the m bytes between two delimiters into out (out may equal in: decoding never
 * writes ahead of what it reads). Returns the decoded length, or -1 if in holds a 0x00 or a
 * code points past the end (problem kind "cobs"). */
long hb_frame_cobs_decode(const uint8_t *in, size_t m, uint8_t *out);

/* The kind of a discarded raw frame: HB_PROBLEM_COBS, _SHORT, _CRC, _LENGTH, _OVERSIZE
 * (gen/hb_wire.h, from hilbench.protocol.frames); its name, the BAD_FRAME message, is
 * hb_frame_problem_name(kind). The checks run in the order of docs/protocol.md: cobs, short, crc,
 * length, oversize. */
typedef uint8_t hb_problem;

const char *hb_frame_problem_name(hb_problem kind);

/* One intact frame, as received. payload points into the receiver's buffer and is valid until
 * the next hb_frame_rx_feed. crc is the frame's stored CRC-32 field (the response cache's key). */
typedef struct {
    uint8_t version;
    uint8_t type;
    uint16_t seq;
    uint16_t len;
    uint32_t crc;
    const uint8_t *payload;
} hb_frame;

typedef enum { HB_RX_NONE = 0, HB_RX_FRAME, HB_RX_PROBLEM } hb_rx_event;

/* The receive state machine: bytes are collected until a 0x00, then the raw frame is checked
 * (empty: ignored; cobs, short, crc, length, oversize: discarded with that problem). A run of
 * more than `limit` bytes without a 0x00 is dropped as it arrives and reported once, as
 * "oversize", when its 0x00 arrives. The byte after a 0x00 always starts a new frame. */
typedef struct {
    uint8_t *buf;          /* limit bytes, owned by the caller */
    uint32_t limit;        /* hb_frame_max_encoded_len(max_payload) */
    uint32_t len;          /* bytes collected of the current raw frame */
    uint32_t discarded;    /* > 0 inside an oversize run */
    uint16_t max_payload;  /* a longer payload is "oversize" */
} hb_rx;

/* buf must hold hb_frame_max_encoded_len(max_payload) bytes. */
void hb_frame_rx_init(hb_rx *r, uint8_t *buf, uint16_t max_payload);

/* Consume bytes of data[0..n) up to and including the first 0x00 that completes a frame or a
 * problem; returns how many were consumed (n if none did). *ev says what happened: a frame in
 * *f, or a problem in *kind. Call again with the rest. */
size_t hb_frame_rx_feed(hb_rx *r, const uint8_t *data, size_t n, hb_rx_event *ev, hb_frame *f,
                  hb_problem *kind);

/* Finish and encode one frame. body holds HB_HEADER_SIZE + n + HB_CRC_SIZE bytes with the
 * payload already at body + HB_HEADER_SIZE; the header and CRC are filled in here. wire gets
 * 0x00 (the leading delimiter every device frame starts with), COBS(body), 0x00: at most
 * hb_frame_max_encoded_len(n) + 2 bytes. Returns the wire length. */
size_t hb_frame_encode(uint8_t *wire, uint8_t *body, uint8_t version, uint8_t type,
                       uint16_t seq, uint16_t n);

#endif /* HB_FRAME_H */
