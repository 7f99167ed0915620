/* What a board port set up at boot, for the host to see: the DEVICE_INFO answer carries it
 * (docs/protocol.md "DEVICE_INFO"). A port that has nothing to report for a field leaves it 0.
 *
 * Declared here, outside core/, because it is the ports' side: port/stm32n6 fills every field;
 * port/an547 and port/host fill what they know (the arena, and nothing of a UART they do not
 * have). */
#ifndef HB_PORT_INFO_H
#define HB_PORT_INFO_H

#include <stdint.h>

/* hb_port_info.reset_cause: why this boot happened (bits; 0: not known) */
#define HB_RESET_POWER_ON 0x01u /* power-on or brown-out */
#define HB_RESET_PIN 0x02u      /* the reset pin (the board's button, a debugger's reset) */
#define HB_RESET_SOFTWARE 0x04u /* AIRCR.SYSRESETREQ */
#define HB_RESET_WATCHDOG 0x08u /* IWDG or WWDG */
#define HB_RESET_LOCKUP 0x10u   /* the core locked up */
#define HB_RESET_RESTART 0x20u  /* a restart in place (RESET command or a fault): no reset flag */
#define HB_RESET_FAULT 0x40u    /* the restart followed a fault report */

/* The boot banner's reason for reset_cause (core/hb_log.h): the most telling bit's name. */
static inline const char *hb_reset_reason(uint32_t cause) {
    if (cause & HB_RESET_FAULT) return "restart after a fault";
    if (cause & HB_RESET_WATCHDOG) return "watchdog";
    if (cause & HB_RESET_LOCKUP) return "lockup";
    if (cause & HB_RESET_RESTART) return "restart";
    if (cause & HB_RESET_SOFTWARE) return "software";
    if (cause & HB_RESET_PIN) return "pin";
    if (cause & HB_RESET_POWER_ON) return "power-on";
    return "unknown";
}

/* hb_port_info.caches */
#define HB_CACHE_I 1u
#define HB_CACHE_D 2u

typedef struct {
    uint32_t cpu_hz;         /* the CPU clock the firmware set (and counts cycles at) */
    uint32_t caches;         /* HB_CACHE_I | HB_CACHE_D: on as the core's registers say */
    uint32_t arena_bytes;    /* the arena handed to hb_device_init */
    uint32_t uart_baud;      /* the console's baud rate */
    uint32_t uart_kernel_hz; /* the UART's kernel clock its divider was computed from */
    uint32_t uart_overrun;   /* receive overruns (a byte lost in the UART) */
    uint32_t uart_framing;   /* framing errors (wrong baud rate, line noise) */
    uint32_t uart_noise;     /* noise errors */
    uint32_t uart_dropped;   /* bytes dropped because the receive ring was full */
    uint32_t watchdog_ms;    /* the watchdog's timeout; 0: off */
    uint32_t reset_cause;    /* HB_RESET_* */
    uint32_t reset_flags;    /* the chip's raw reset flags (STM32N6: RCC_RSR), 0 if none */
    uint32_t bringup_errors; /* HB_BRINGUP_* bits: a step that timed out (the port went on) */
} hb_port_info_t;

/* hb_port_info_t.bringup_errors: a wait that timed out (the step went on without it) */
#define HB_BRINGUP_VOS 0x01u     /* the voltage scale never reported ready */
#define HB_BRINGUP_PLL 0x02u     /* PLL1 never locked: the CPU stayed on HSI */
#define HB_BRINGUP_SWITCH 0x04u  /* the CPU or bus clock switch never took effect */
#define HB_BRINGUP_UART 0x08u    /* USART1 never acknowledged TE/RE */
#define HB_BRINGUP_IWDG 0x10u    /* the watchdog's registers never finished updating */

/* The port's current figures (the UART counters move while it runs); DEVICE_INFO answers
 * them (core/commands.c). */
const hb_port_info_t *hb_port_info(void);

/* LOAD_STAGE (before the host writes) and LOAD_COMMIT (before the CRC): a debugger writes the
 * n bytes at p behind the core's back (SWD's AHB-AP, QEMU's GDB stub): clean and invalidate
 * the D-cache lines over them, so no dirty line overwrites them and the core reads what was
 * written (nothing to do without a data cache). */
void hb_port_stage_sync(const uint8_t *p, uint32_t n);

#endif /* HB_PORT_INFO_H */
