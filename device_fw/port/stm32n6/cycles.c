/* The DWT cycle counter (CYCCNT, 32 bits at the CPU clock) extended to 64 bits: SysTick, also
 * at the CPU clock, interrupts every 2^24 cycles -- far more often than CYCCNT wraps (67 s at
 * 64 MHz, 5.4 s at 800 MHz) -- and each read folds a wrap it sees into the high word. So a
 * command that computes for minutes without reading the counter still gets its wraps counted.
 * The timing source is `device` (cycles of the CPU that ran the command). */
#include <stdint.h>

#include "stm32n6.h"

static volatile uint32_t high, last;

static uint64_t fold(void) { /* interrupts off */
    uint32_t now = DWT_CYCCNT;
    if (now < last) high = high + 1u;
    last = now;
    return ((uint64_t)high << 32) | now;
}

void SysTick_Handler(void);
void SysTick_Handler(void) { (void)fold(); }

void hb_n6_cycles_init(void) {
    SCS_DEMCR |= DEMCR_TRCENA;
    DWT_CYCCNT = 0;
    DWT_CTRL |= DWT_CTRL_CYCCNTENA;
    high = last = 0;
    SYST_CSR = 0;
    SYST_RVR = 0x00FFFFFFu;
    SYST_CVR = 0;
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
}

uint64_t hb_n6_cycles(void) {
    uint32_t primask = cm_irq_save();
    uint64_t t = fold();
    cm_irq_restore(primask);
    return t;
}
