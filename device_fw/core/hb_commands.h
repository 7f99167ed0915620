/* The request handlers (core/commands.c): steps 8-9 of docs/protocol.md "Device processing
 * order" (state checks, execution) for a request that passed steps 1-7 in core/device.c.
 * Internal to the core. */
#ifndef HB_COMMANDS_H
#define HB_COMMANDS_H

#include <stdint.h>

#include "hb_status.h"

/* A boot: no model, no probed seeds; max_payload and boot_nonce are what HELLO announces. */
void hb_commands_init(uint16_t max_payload, uint32_t boot_nonce);

/* Run request `type` on its checked payload p[0..len): the response payload goes to resp
 * (HB_DEVICE_MAX_PAYLOAD bytes), its length to *resp_len. Returns 0, or -1 with st set. */
int hb_commands_execute(uint8_t type, const uint8_t *p, uint16_t len, uint8_t *resp,
                   uint16_t *resp_len, hb_status *st);

#endif /* HB_COMMANDS_H */
