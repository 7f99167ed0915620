/* SysTick as a 64-bit tick counter: the 24-bit down-counter runs from the CPU clock
 * (AN547_SYSCLK_HZ) and its wrap interrupt adds 2^24 to a 64-bit count. Under QEMU with
 * `-icount shift=0` the clock follows executed instructions (31.25 per tick). */
#include <stdint.h>

#include "an547.h"
#include "board.h"

#define RELOAD 0x00FFFFFFu

static volatile uint64_t wraps; /* ticks counted by wrap interrupts */

void SysTick_Handler(void);
void SysTick_Handler(void) { wraps += RELOAD + 1u; }

void hb_an547_systick_init(void) {
    wraps = 0;
    SYST_CSR = 0;
    SYST_RVR = RELOAD;
    SYST_CVR = 0; /* any write clears it: the count starts at the reload value */
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
}

uint64_t hb_an547_ticks(void) {
    uint32_t primask = cm_irq_save();
    uint64_t base = wraps;
    uint32_t now = SYST_CVR;
    if (SCS_ICSR & ICSR_PENDSTSET) { /* wrapped, interrupt not yet taken: count that wrap */
        now = SYST_CVR;
        base += RELOAD + 1u;
    }
    cm_irq_restore(primask);
    return base + (RELOAD - now);
}
