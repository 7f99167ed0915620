/* The STM32N657 as the stm32n6 port uses it: register addresses (Secure aliases: the core runs
 * Secure after a development boot), the port's internal interfaces and the build options.
 * Sources: RM0486 (STM32N647/657 reference manual) as mirrored by public board support code,
 * the Armv8.1-M architecture reference (SCS, DWT). Nothing here is checked on silicon in CI:
 * docs/board.md lists what is untested. */
#ifndef HB_STM32N6_PORT_H
#define HB_STM32N6_PORT_H

#include <stddef.h>
#include <stdint.h>

#include "cortex_m.h" /* the core's registers and instructions */
#include "hb_stm32n6.h"

/* ---- build options (make stm32n6 STM32N6_BAUD=115200 ...) ------------------------------ */

#ifndef STM32N6_BAUD
#define STM32N6_BAUD HB_STM32N6_DEFAULT_BAUD
#endif
/* USART1's kernel clock (PCLK2) in Hz; 0: computed from the RCC's prescalers, assuming the
 * reset clock tree (HSI 64 MHz, no PLL) that a development boot leaves */
#ifndef STM32N6_PCLK2_HZ
#define STM32N6_PCLK2_HZ 0u
#endif

/* ---- peripherals (Secure aliases) -------------------------------------------------------- */

#define REG32(addr) (*(volatile uint32_t *)(addr))

#define RCC_BASE 0x56028000u
#define RCC_CFGR2 REG32(RCC_BASE + 0x024u)      /* HPRE [22:20], PPRE2 [6:4] */
#define RCC_BUSENR REG32(RCC_BASE + 0x244u)     /* bus clocks: AHB4 [6], APB2 [9] */
#define RCC_BUSENR_AHB4 (1u << 6)
#define RCC_BUSENR_APB2 (1u << 9)
#define RCC_AHB4ENSR REG32(RCC_BASE + 0xA5Cu)   /* set-only enables */
#define RCC_APB2ENSR REG32(RCC_BASE + 0xA6Cu)
#define RCC_AHB4ENSR_GPIOE (1u << 4)
#define RCC_APB2ENSR_USART1 (1u << 4)
#define HSI_HZ 64000000u

#define GPIOE_BASE 0x56021000u
#define GPIO_MODER(b) REG32((b) + 0x00u)
#define GPIO_OSPEEDR(b) REG32((b) + 0x08u)
#define GPIO_PUPDR(b) REG32((b) + 0x0Cu)
#define GPIO_AFRL(b) REG32((b) + 0x20u)

#define USART1_BASE 0x52001000u
#define USART1_IRQ 159u
#define USART_CR1 REG32(USART1_BASE + 0x00u)
#define USART_CR2 REG32(USART1_BASE + 0x04u)
#define USART_CR3 REG32(USART1_BASE + 0x08u)
#define USART_BRR REG32(USART1_BASE + 0x0Cu)
#define USART_ISR REG32(USART1_BASE + 0x1Cu)
#define USART_ICR REG32(USART1_BASE + 0x20u)
#define USART_RDR REG32(USART1_BASE + 0x24u)
#define USART_TDR REG32(USART1_BASE + 0x28u)
#define USART_CR1_UE (1u << 0)
#define USART_CR1_RE (1u << 2)
#define USART_CR1_TE (1u << 3)
#define USART_CR1_RXNEIE (1u << 5)
#define USART_ISR_ORE (1u << 3)
#define USART_ISR_RXNE (1u << 5)
#define USART_ISR_TC (1u << 6)
#define USART_ISR_TXE (1u << 7)
#define USART_ICR_ALL 0x00123BFFu /* every clearable flag, overrun and framing included */

/* interrupt lines the NVIC may have (the N6 has under 200; the core's maximum is 480) */
#define STM32N6_NVIC_LINES 480u

/* external interrupts in the vector table: USART1 (159) and every line below it; the table
 * (16 + 160 words) stays under the 1 KiB alignment VTOR needs at 0x34000400 */
#define STM32N6_N_IRQ 160u

/* ---- the port's modules -------------------------------------------------------------------- */

/* uart.c: USART1 on PE5 (TX) / PE6 (RX), AF7, 8N1 at STM32N6_BAUD, interrupt-fed receive ring */
void hb_n6_uart_init(void);
void hb_n6_uart_write(const uint8_t *data, size_t n);
void hb_n6_uart_flush(void);
size_t hb_n6_uart_peek(const uint8_t **data);
void hb_n6_uart_consume(size_t n);
size_t hb_n6_uart_pending(void);
void hb_n6_uart_isr(void);

/* cycles.c: the DWT cycle counter extended to 64 bits (SysTick keeps the wraps) */
void hb_n6_cycles_init(void);
uint64_t hb_n6_cycles(void);

/* npu.c: the one place a network compiled for the Neural-ART NPU would plug in */
int hb_n6_npu_available(void);

#endif /* HB_STM32N6_PORT_H */
