/* HB_DEVICE_MAX_PAYLOAD, apart from hb_device.h so that the request handlers (core/commands.c)
 * size their answers without including the dispatcher that calls them. */
#ifndef HB_PAYLOAD_H
#define HB_PAYLOAD_H

#include "hb_wire.h"

/* The largest payload the device's static buffers hold (receive, response, cache). A port
 * short of RAM may build with a smaller one (-DHB_DEVICE_MAX_PAYLOAD=...; at least
 * HB_MIN_DEVICE_PAYLOAD and the longest ERROR); hb_device_init clamps max_payload to it.
 * Static RAM of the protocol: about 4 x this (receive, response body, cache, scratch). */
#ifndef HB_DEVICE_MAX_PAYLOAD
#define HB_DEVICE_MAX_PAYLOAD HB_MAX_PAYLOAD
#endif

#endif /* HB_PAYLOAD_H */
