/* USART1, the ST-LINK-V3's virtual COM port on the STM32N6570-DK: PE5 TX, PE6 RX (AF7), 8N1 at
 * STM32N6_BAUD. Polled transmit; every received byte goes into a ring from the RXNE interrupt,
 * so bytes keep arriving while a command computes. The ST-LINK's bridge has no flow control:
 * a byte that finds the ring full (or an overrun) is dropped and counted, the frame it belonged
 * to fails its CRC and the host sends it again. */
#include <stdint.h>

#include "stm32n6.h"

#define RING_BYTES 16384u
_Static_assert((RING_BYTES & (RING_BYTES - 1u)) == 0, "the ring's size must be a power of 2");

static uint8_t ring[RING_BYTES];
static volatile uint32_t head, tail; /* free-running counts of bytes put / taken */
static volatile uint32_t dropped;

/* USART1's kernel clock: PCLK2 = HSI / AHB prescaler / APB2 prescaler (2^n encodings) unless
 * the build names it */
static uint32_t pclk2_hz(void) {
    if (STM32N6_PCLK2_HZ != 0u) return STM32N6_PCLK2_HZ;
    uint32_t cfgr2 = RCC_CFGR2;
    uint32_t hpre = (cfgr2 >> 20) & 7u, ppre2 = (cfgr2 >> 4) & 7u;
    return HSI_HZ >> (hpre + ppre2);
}

void hb_n6_uart_init(void) {
    head = tail = dropped = 0;
    RCC_BUSENR |= RCC_BUSENR_AHB4 | RCC_BUSENR_APB2; /* on after a boot ROM, but make sure */
    RCC_AHB4ENSR = RCC_AHB4ENSR_GPIOE;
    RCC_APB2ENSR = RCC_APB2ENSR_USART1;
    cm_dsb();
    /* PE5, PE6: alternate function 7, high speed, pull-up on RX */
    GPIO_MODER(GPIOE_BASE) = (GPIO_MODER(GPIOE_BASE) & ~(0xFu << 10)) | (0xAu << 10);
    GPIO_OSPEEDR(GPIOE_BASE) = (GPIO_OSPEEDR(GPIOE_BASE) & ~(0xFu << 10)) | (0xAu << 10);
    GPIO_PUPDR(GPIOE_BASE) = (GPIO_PUPDR(GPIOE_BASE) & ~(0xFu << 10)) | (0x4u << 10);
    GPIO_AFRL(GPIOE_BASE) = (GPIO_AFRL(GPIOE_BASE) & ~(0xFFu << 20)) | (0x77u << 20);

    USART_CR1 = 0;
    USART_CR2 = 0; /* 1 stop bit */
    USART_CR3 = 0; /* no flow control, no FIFO thresholds */
    uint32_t pclk = pclk2_hz();
    USART_BRR = (pclk + STM32N6_BAUD / 2u) / STM32N6_BAUD; /* oversampling by 16 */
    USART_ICR = USART_ICR_ALL;
    USART_CR1 = USART_CR1_UE | USART_CR1_TE | USART_CR1_RE | USART_CR1_RXNEIE;
    NVIC_ISER(USART1_IRQ / 32u) = 1u << (USART1_IRQ % 32u);
}

void hb_n6_uart_write(const uint8_t *data, size_t n) {
    for (size_t i = 0; i < n; i++) {
        while (!(USART_ISR & USART_ISR_TXE)) {
        }
        USART_TDR = data[i];
    }
}

void hb_n6_uart_flush(void) {
    while (!(USART_ISR & USART_ISR_TC)) {
    }
}

void hb_n6_uart_isr(void) {
    uint32_t isr;
    while ((isr = USART_ISR) & (USART_ISR_RXNE | USART_ISR_ORE)) {
        if (isr & USART_ISR_ORE) { /* a byte was lost in the USART itself */
            USART_ICR = USART_ISR_ORE;
            dropped = dropped + 1u;
        }
        if (!(isr & USART_ISR_RXNE)) continue;
        uint8_t byte = (uint8_t)USART_RDR;
        uint32_t h = head;
        if (h - tail >= RING_BYTES) {
            dropped = dropped + 1u;
            continue;
        }
        ring[h % RING_BYTES] = byte;
        head = h + 1u;
    }
}

size_t hb_n6_uart_peek(const uint8_t **data) {
    uint32_t t = tail;
    uint32_t n = head - t;
    uint32_t run = RING_BYTES - t % RING_BYTES;
    *data = ring + t % RING_BYTES;
    return n < run ? n : run;
}

void hb_n6_uart_consume(size_t n) { tail = tail + (uint32_t)n; }

size_t hb_n6_uart_pending(void) { return head - tail; }
