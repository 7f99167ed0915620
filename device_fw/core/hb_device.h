/* The device: frames in, frames out (docs/protocol.md). Implemented in core/device.c (the
 * dispatcher and state machine), core/frame.c (COBS, CRC-32), core/store.c (the arena's
 * model and data regions, bulk uploads) and core/commands.c (one handler per request). */
#ifndef HB_DEVICE_H
#define HB_DEVICE_H

#include <stddef.h>
#include <stdint.h>

/* Boot: no session, no model, no data, empty cache, a new boot nonce from the port.
 * arena/arena_bytes: the memory for models and data (8-byte aligned), owned by the port. */
void hb_device_init(uint8_t *arena, uint32_t arena_bytes, uint16_t max_payload);

/* Feed received bytes; answers are written through hb_port_write as frames complete. */
void hb_device_rx(const uint8_t *data, size_t n);

#endif /* HB_DEVICE_H */
