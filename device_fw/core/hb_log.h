/* The device's own words (docs/protocol.md, "Device log"): a bounded ring of lines (boot
 * banner, fault report, UART error counters, notes) that leave as LOG frames (seq 0) just
 * before the next answer of an open session. Static storage, no heap; not reentrant: call it
 * from the main loop, never from an interrupt or from hb_port_write. */
#ifndef HB_LOG_H
#define HB_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "hb_status.h"
#include "hb_wire.h"

/* Empty the ring (hb_device_init calls it: a boot starts with no lines). */
void hb_log_init(void);

/* Queue one line of kind HB_LOG_*, cut at HB_MAX_LOG_MSG bytes on a UTF-8 character boundary.
 * A full ring drops its oldest line; the next LOG frame sent says how many were dropped. */
void hb_log(uint8_t kind, const char *text, size_t len);

/* Queue hb_format(fmt, args) as one line. */
void hb_log_fmt(uint8_t kind, const char *fmt, const hb_arg *args, size_t n_args);

/* The boot banner: HB_LOG_BANNER with the port's identity and reason (why this boot
 * happened, as the port knows it: "host", "power-on", "software", "watchdog", ...). */
void hb_log_boot(const char *reason);

/* The UART's error counters: one HB_LOG_UART line when any changed since the last call (the
 * first call after boot logs only counters that are not 0). */
void hb_log_uart(uint32_t overrun, uint32_t framing, uint32_t noise, uint32_t dropped);

/* Lines waiting in the ring. */
uint32_t hb_log_pending(void);

/* Send every waiting line as a LOG frame through hb_port_write, oldest first (device.c, just
 * before an answer of an open session). */
void hb_log_flush(void);

#endif /* HB_LOG_H */
