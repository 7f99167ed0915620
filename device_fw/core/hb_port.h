/* The HAL a port supplies: byte I/O, a tick counter, reset, a boot nonce. Nothing else.
 *
 * The core calls these and includes no port or vendor header. A port also supplies main():
 * it calls hb_device_init() once, then feeds received bytes to hb_device_rx() (core/hb_device.h)
 * and keeps receiving while a command computes (an interrupt-fed ring on a board). */
#ifndef HB_PORT_H
#define HB_PORT_H

#include <stdint.h>
#include <stddef.h>

/* Send n bytes; returns once they are queued or sent (blocking is allowed). */
void hb_port_write(const uint8_t *data, size_t n);

/* Monotonic tick counter extended past 32 bits (never wraps in practice). */
uint64_t hb_port_ticks(void);

/* Nanoseconds per tick times 2^16 (Q16), for duration_ns; 0 if the port has no timing. */
uint32_t hb_port_tick_ns_q16(void);

/* TIMING_SOURCE code (gen/hb_wire.h) of the port's durations: none, device, ... */
uint8_t hb_port_timing_source(void);

/* A value chosen at every boot (random, or a persistent counter). */
uint32_t hb_port_boot_nonce(void);

/* Reboot after the RESET answer was written: flush the output, then reset the core.
 * The host port re-initialises the core in place (hb_device_init) and returns. */
void hb_port_reset(void);

/* Identity for HELLO: device_id and firmware strings (UTF-8, <= 64 bytes each). */
const char *hb_port_device_id(void);
const char *hb_port_firmware(void);

#endif /* HB_PORT_H */
