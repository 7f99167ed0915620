/* The device: frames in, frames out (docs/protocol.md). Implemented in core/device.c (the
 * dispatcher and state machine), core/frame.c (COBS, the receive state machine), core/crc32.c,
 * core/store.c (the arena's model and data regions, bulk uploads) and core/commands.c (one
 * handler per request). A port calls hb_device_init once per boot and feeds every received
 * byte to hb_device_rx; answers leave through hb_port_write (core/hb_port.h). */
#ifndef HB_DEVICE_H
#define HB_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "hb_wire.h"

#include "hb_payload.h" /* HB_DEVICE_MAX_PAYLOAD */

/* Boot: no session, no model, no data, empty cache, a new boot nonce from the port.
 * arena/arena_bytes: the memory for models and data (16-byte aligned, arena_bytes a multiple
 * of 16), owned by the port. max_payload: what HELLO announces and the receiver accepts,
 * clamped to HB_MIN_DEVICE_PAYLOAD..HB_DEVICE_MAX_PAYLOAD. */
void hb_device_init(uint8_t *arena, uint32_t arena_bytes, uint16_t max_payload);

/* Feed received bytes; answers are written through hb_port_write as frames complete. A RESET
 * request is answered, then hb_port_reset() is called (a board does not return from it; the
 * host port calls hb_device_init again and returns, and the rest of data is handled by the
 * new boot). Not reentrant: a port must not call it from hb_port_write. */
void hb_device_rx(const uint8_t *data, size_t n);

/* The max_payload in force (after clamping). */
uint16_t hb_device_max_payload(void);

/* Counters since boot: intact frames, BAD_FRAME answers, answers re-sent from the cache, late
 * copies dropped. Any pointer may be NULL. */
void hb_device_counters(uint32_t *frames, uint32_t *bad_frames, uint32_t *cache_hits,
                        uint32_t *late_dropped);

#endif /* HB_DEVICE_H */
