/* The serving loop every Cortex-M55 port shares (cortex_m.h): received bytes to the device,
 * sleep (or, with HB_SERVE_POLL, spin) while the receive ring is empty. */
#include <stdint.h>

#include "cortex_m.h"
#include "hb_device.h"

__attribute__((weak)) void cm_serve_idle(void) {}

void cm_serve(const cm_serve_ring *ring) {
    for (;;) {
        cm_serve_idle();
        const uint8_t *data;
        size_t n = ring->peek(&data);
        if (n) {
            hb_device_rx(data, n);
            ring->consume(n);
            if (ring->after_rx) ring->after_rx();
            continue;
        }
#ifndef HB_SERVE_POLL
        cm_irq_disable();
        if (ring->pending() == 0) cm_wfi(); /* an interrupt still wakes it */
        cm_irq_enable();
#endif
    }
}
