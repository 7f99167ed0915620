/* The an547 port's internal interfaces: the UART0 driver with its receive ring (uart.c), the
 * 64-bit SysTick counter (systick.c), the hooks startup.c calls. The fault handler and what
 * the Cortex-M55 ports share are port/cortex_m's (cortex_m.h). */
#ifndef HB_AN547_H
#define HB_AN547_H

#include <stddef.h>
#include <stdint.h>

/* ---- UART0 (CMSDK APB UART), interrupt-fed receive ring ------------------------------- */

/* Enable TX and RX, the RX interrupt and its NVIC line. */
void hb_an547_uart_init(void);

/* Send n bytes, waiting while the transmitter is full (polled; safe with interrupts off). */
void hb_an547_uart_write(const uint8_t *data, size_t n);

/* Wait until the transmitter has taken every byte. */
void hb_an547_uart_flush(void);

/* The received bytes waiting in the ring, as one contiguous run: *data and the run's length
 * (0 when the ring is empty). hb_an547_uart_consume(n) frees the first n of them. */
size_t hb_an547_uart_peek(const uint8_t **data);
void hb_an547_uart_consume(size_t n);

/* Bytes the ring holds, and the largest count it ever held (its high-water mark). */
size_t hb_an547_uart_pending(void);
size_t hb_an547_uart_high_water(void);

/* The UART0 RX interrupt (vector AN547_UART0_RX_IRQ). */
void hb_an547_uart_rx_isr(void);

/* ---- SysTick: a 64-bit count of CPU-clock ticks ----------------------------------------- */

void hb_an547_systick_init(void);
uint64_t hb_an547_ticks(void);

/* ---- startup hooks (startup.c: weak defaults) ---------------------------------------------- */

/* Called after .data/.bss are set up, before the command line is read and main() runs. */
void hb_an547_pre_main(void);

/* Called with main()'s return value: ends QEMU with that exit code. */
__attribute__((noreturn)) void hb_an547_exit(int code);

#endif /* HB_AN547_H */
