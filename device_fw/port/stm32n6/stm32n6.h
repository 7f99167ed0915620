/* The STM32N657 as the stm32n6 port uses it: the build options, the port's internal
 * interfaces. Register addresses and bits are in n6_regs.h (ST's device header's values, the
 * sources in docs/board.md); the bring-up and the console's set-up in n6_bringup.h. Nothing
 * here is checked on silicon in CI: docs/board.md lists what is untested. */
#ifndef HB_STM32N6_PORT_H
#define HB_STM32N6_PORT_H

#include <stddef.h>
#include <stdint.h>

#include "cortex_m.h" /* the core's registers and instructions */
#include "hb_stm32n6.h"
#include "n6_bringup.h"
#include "n6_regs.h"

/* ---- build options (make stm32n6 N6_CLOCK=800 STM32N6_BAUD=115200 ...) ------------------- */

#ifndef STM32N6_BAUD
#define STM32N6_BAUD HB_STM32N6_DEFAULT_BAUD
#endif
/* the CPU clock in MHz: 600 (VOS scale 1, the default), 800 (SMPS overdrive, VOS scale 0), or
 * 64 (the reset clock tree, HSI, nothing changed) */
#ifndef HB_N6_CLOCK_MHZ
#define HB_N6_CLOCK_MHZ 600
#endif
/* the independent watchdog's timeout in ms; 0: off */
#ifndef HB_N6_WATCHDOG_MS
#define HB_N6_WATCHDOG_MS 32768
#endif

#define USART1_IRQ N6_USART1_IRQ

/* interrupt lines the NVIC may have (the N6 has under 200; the core's maximum is 480) */
#define STM32N6_NVIC_LINES 480u

/* external interrupts in the vector table: USART1 (159) and every line below it; the table
 * (16 + 160 words) stays under the 1 KiB alignment VTOR needs at 0x34000400 */
#define STM32N6_N_IRQ 160u

/* ---- the port's modules -------------------------------------------------------------------- */

/* cycles.c: the DWT cycle counter extended to 64 bits (SysTick keeps the wraps) */
void hb_n6_cycles_init(void);
uint64_t hb_n6_cycles(void);

/* npu.c: the one place a network compiled for the Neural-ART NPU would plug in */
int hb_n6_npu_available(void);

/* main.c: the CPU clock the bring-up left running (Hz) */
uint32_t hb_n6_cpu_hz(void);

/* fault.c / main.c: restart the firmware in place (the startup again: a new boot) */
__attribute__((noreturn)) void hb_n6_restart(int after_fault);

#endif /* HB_STM32N6_PORT_H */
