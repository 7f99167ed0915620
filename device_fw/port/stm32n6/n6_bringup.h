/* The stm32n6 port's bring-up steps (bringup.c) and its console's set-up (uart.c), in a header
 * without inline assembly: the host build of port/stm32n6/test/ includes it. */
#ifndef HB_N6_BRINGUP_H
#define HB_N6_BRINGUP_H

#include <stddef.h>
#include <stdint.h>

#define N6_HSI_HZ 64000000u

/* one clock configuration: CPU Hz, VOS scale 0 (needs the SMPS overdrive), PLL1's M and N
 * (HSI / M * N, P1 = P2 = 1), the IC1 / IC2 / IC6 / IC11 dividers, log2 of the AHB divider */
typedef struct {
    uint32_t cpu_hz;
    uint32_t vos0;
    uint32_t m, n;
    uint32_t ic1, ic2, ic6, ic11;
    uint32_t hpre_log2;
} hb_n6_clock_plan;

/* the plan for 600 or 800 MHz; NULL for any other (the reset clock tree: HSI 64 MHz) */
const hb_n6_clock_plan *hb_n6_clock_plan_for(uint32_t mhz);

uint32_t hb_n6_reset_flags(void);           /* RCC_RSR, then cleared */
uint32_t hb_n6_reset_cause(uint32_t flags); /* as HB_RESET_* (port.h) */
uint32_t hb_n6_power_init(void); /* HB_BRINGUP_VOS if the supply never got ready */
void hb_n6_memories_init(void);
void hb_n6_sleep_clocks_init(void);
/* the CPU clock it leaves running; HB_BRINGUP_* bits into *errors on a timeout */
uint32_t hb_n6_clocks_init(const hb_n6_clock_plan *plan, uint32_t *errors);
/* start the IWDG with about timeout_ms (0: leave it off); the timeout it set, in ms */
uint32_t hb_n6_watchdog_init(uint32_t timeout_ms, uint32_t *errors);
void hb_n6_watchdog_kick(void);

/* uart.c: USART1 on PE5 (TX) / PE6 (RX), AF7, 8N1, FIFO on, interrupt-fed receive ring; the
 * kernel clock pinned to HSI (64 MHz) whatever the CPU runs at */
typedef struct {
    uint32_t overrun, framing, noise, dropped;
} hb_n6_uart_errors;
/* 0 when USART1 acknowledged TE and RE; HB_BRINGUP_UART otherwise */
uint32_t hb_n6_uart_init(uint32_t baud);
uint32_t hb_n6_uart_brr(uint32_t kernel_hz, uint32_t baud); /* oversampling by 8 */
uint32_t hb_n6_uart_kernel_hz(void);                        /* HSI / HSIDIV */
void hb_n6_uart_write(const uint8_t *data, size_t n);
void hb_n6_uart_flush(void);
size_t hb_n6_uart_peek(const uint8_t **data);
void hb_n6_uart_consume(size_t n);
size_t hb_n6_uart_pending(void);
void hb_n6_uart_isr(void);
void hb_n6_uart_errors_get(hb_n6_uart_errors *out);

#endif /* HB_N6_BRINGUP_H */
