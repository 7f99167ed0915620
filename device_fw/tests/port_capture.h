/* A port for tests of the whole device (core/hb_port.h): answers are captured in memory, the
 * arena is a static 4 MiB block, ticks are a counter, the boot nonce is fixed (N, N+1, ... at
 * each boot, as the twin's with a fixed nonce), timing source none (as the SIL). Plus helpers
 * to build request frames and to split the captured bytes into answer frames. */
#ifndef HB_PORT_CAPTURE_H
#define HB_PORT_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "hb_frame.h"
#include "hb_wire.h"

#define CAP_ARENA_MAX HB_DEFAULT_ARENA_BYTES
#define CAP_OUT_MAX (1u << 20)

extern uint8_t cap_out[CAP_OUT_MAX]; /* bytes the device wrote since cap_clear() */
extern size_t cap_len;
extern uint32_t cap_boots;           /* hb_device_init calls through cap_boot / a RESET */

/* Identity strings HELLO reports (default "hilbench-test" / "hilbench-test fw"). */
void cap_identity(const char *device_id, const char *firmware);

/* Boot the device: arena_bytes (<= CAP_ARENA_MAX), max_payload, the first boot's nonce. */
void cap_boot(uint32_t arena_bytes, uint16_t max_payload, uint32_t first_nonce);

void cap_clear(void);

/* Feed bytes to the device after clearing the capture; returns the bytes it answered. */
size_t cap_feed(const uint8_t *data, size_t n);

/* One request frame on the wire: 0x00, COBS(body), 0x00 (version HB_PROTOCOL_VERSION unless
 * cap_frame_v is used). Returns its length; wire must hold hb_frame_max_encoded_len(n) + 2 bytes. */
size_t cap_frame(uint8_t *wire, uint8_t type, uint16_t seq, const uint8_t *payload, uint16_t n);
size_t cap_frame_v(uint8_t *wire, uint8_t version, uint8_t type, uint16_t seq,
                   const uint8_t *payload, uint16_t n);

/* The answers in cap_out, decoded (at most max); payloads are copied and stay valid until
 * the next cap_answers call. Returns how many; problems in the answer bytes count as -1. */
typedef struct {
    uint8_t version, type;
    uint16_t seq, len;
    const uint8_t *payload;
} cap_answer;
int cap_answers(cap_answer *out, int max);

/* Send one request (after clearing) and decode its answers: the count of answers, the first
 * in *a (a->type == 0 when there is none). */
int cap_request(uint8_t type, uint16_t seq, const uint8_t *payload, uint16_t n, cap_answer *a);

#endif
