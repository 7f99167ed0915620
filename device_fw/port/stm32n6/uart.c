/* USART1, the ST-LINK-V3's virtual COM port on the STM32N6570-DK: PE5 TX, PE6 RX (AF7), 8N1.
 * Set up from reset: the peripheral reset pulsed (a core reset keeps the previous program's
 * USART state), the kernel clock pinned to HSI (64 MHz, CCIPR13.USART1SEL) so the divider does
 * not depend on the CPU's clock, oversampling by 8 (921600 baud: 0.06 % off instead of 0.64 %
 * with 16), the 8-byte FIFOs on, the error interrupt on. Polled transmit; every received byte
 * goes into a ring from the interrupt, so bytes keep arriving while a command computes.
 * Overruns, framing and noise errors are counted, and so are bytes that find the ring full
 * (the ST-LINK's bridge has no flow control: the frame fails its CRC and the host resends).
 * Every register access goes through cm_mmio.h (port/stm32n6/test/ records them). */
#include <stdint.h>

#include "cm_mmio.h"
#include "n6_bringup.h"
#include "n6_regs.h"
#include "port.h"

#define RING_BYTES 16384u
_Static_assert((RING_BYTES & (RING_BYTES - 1u)) == 0, "the ring's size must be a power of 2");

static uint8_t ring[RING_BYTES];
static volatile uint32_t head, tail; /* free-running counts of bytes put / taken */
static volatile uint32_t overrun, framing, noise, dropped;

#define WAIT_TRIES 1000000u

/* ST's LL_USART_SetBaudRate with oversampling by 8: USARTDIV = round(2 * f / baud); BRR keeps
 * bits 15:4, BRR[2:0] = USARTDIV[3:0] >> 1, BRR[3] = 0 */
uint32_t hb_n6_uart_brr(uint32_t kernel_hz, uint32_t baud) {
    uint32_t div = (2u * kernel_hz + baud / 2u) / baud;
    return (div & 0xFFF0u) | ((div & 0x000Fu) >> 1);
}

uint32_t hb_n6_uart_init(uint32_t baud) {
    head = tail = 0;
    overrun = framing = noise = dropped = 0;
    /* clocks of GPIOE and USART1 (set aliases: no read-modify-write) */
    hb_mmio_wr(N6_RCC_SET(N6_RCC_AHB4ENR), N6_RCC_AHB4_GPIOE);
    hb_mmio_wr(N6_RCC_SET(N6_RCC_APB2ENR), N6_RCC_APB2_USART1);
    hb_mmio_barrier();
    /* USART1 reset pulse */
    hb_mmio_wr(N6_RCC_SET(N6_RCC_APB2RSTR), N6_RCC_APB2_USART1);
    hb_mmio_barrier();
    hb_mmio_wr(N6_RCC_CLR(N6_RCC_APB2RSTR), N6_RCC_APB2_USART1);
    hb_mmio_barrier();
    /* kernel clock: hsi_div_ck (HSI / HSICFGR.HSIDIV, read back: the divider is whatever the
     * boot ROM left, 1 after reset) */
    hb_mmio_modify(N6_RCC_CCIPR13, N6_RCC_CCIPR13_USART1SEL_MASK, N6_RCC_USART1SEL_HSI);
    uint32_t kernel_hz = hb_n6_uart_kernel_hz();
    /* PE5, PE6: alternate function 7, very high speed, pull-up on RX */
    hb_mmio_modify(N6_GPIO_AFRL(N6_GPIOE), 0xFFu << 20, 0x77u << 20);
    hb_mmio_modify(N6_GPIO_OSPEEDR(N6_GPIOE), 0xFu << 10, 0xFu << 10);
    hb_mmio_modify(N6_GPIO_PUPDR(N6_GPIOE), 0xFu << 10, 0x4u << 10);
    hb_mmio_modify(N6_GPIO_MODER(N6_GPIOE), 0xFu << 10, 0xAu << 10);
    /* disabled while it is configured (CR1.UE = 0: FIFOEN, OVER8 and BRR need it) */
    hb_mmio_wr(N6_USART_CR1, 0);
    hb_mmio_wr(N6_USART_CR2, 0);                /* 1 stop bit */
    hb_mmio_wr(N6_USART_CR3, N6_USART_CR3_EIE); /* errors interrupt; no flow control */
    hb_mmio_wr(N6_USART_PRESC, 0);              /* kernel clock / 1 */
    hb_mmio_wr(N6_USART_BRR, hb_n6_uart_brr(kernel_hz, baud));
    hb_mmio_wr(N6_USART_ICR, N6_USART_ICR_ALL);
    hb_mmio_wr(N6_USART_CR1, N6_USART_CR1_FIFOEN | N6_USART_CR1_OVER8 | N6_USART_CR1_TE |
                                 N6_USART_CR1_RE | N6_USART_CR1_RXFNEIE);
    hb_mmio_wr(N6_USART_CR1, hb_mmio_rd(N6_USART_CR1) | N6_USART_CR1_UE);
    uint32_t ack = N6_USART_ISR_TEACK | N6_USART_ISR_REACK;
    uint32_t err = hb_mmio_wait(N6_USART_ISR, ack, ack, WAIT_TRIES) ? 0u : HB_BRINGUP_UART;
    hb_mmio_wr(N6_NVIC_ISER(N6_USART1_IRQ / 32u), 1u << (N6_USART1_IRQ % 32u));
    hb_mmio_barrier();
    return err;
}

uint32_t hb_n6_uart_kernel_hz(void) {
    uint32_t hsidiv = (hb_mmio_rd(N6_RCC_HSICFGR) & N6_RCC_HSICFGR_HSIDIV_MASK) >> 7;
    return N6_HSI_HZ >> hsidiv;
}

void hb_n6_uart_write(const uint8_t *data, size_t n) {
    for (size_t i = 0; i < n; i++) {
        while (!(hb_mmio_rd(N6_USART_ISR) & N6_USART_ISR_TXFNF)) {
        }
        hb_mmio_wr(N6_USART_TDR, data[i]);
    }
}

void hb_n6_uart_flush(void) {
    while (!(hb_mmio_rd(N6_USART_ISR) & N6_USART_ISR_TC)) {
    }
}

void hb_n6_uart_isr(void) {
    uint32_t isr;
    while ((isr = hb_mmio_rd(N6_USART_ISR)) &
           (N6_USART_ISR_RXFNE | N6_USART_ISR_ORE | N6_USART_ISR_FE | N6_USART_ISR_NE |
            N6_USART_ISR_PE)) {
        uint32_t errors = isr & N6_USART_ICR_ERRORS;
        if (errors) {
            hb_mmio_wr(N6_USART_ICR, errors);
            if (isr & N6_USART_ISR_ORE) overrun = overrun + 1u;
            if (isr & N6_USART_ISR_FE) framing = framing + 1u;
            if (isr & N6_USART_ISR_NE) noise = noise + 1u;
        }
        if (!(isr & N6_USART_ISR_RXFNE)) continue;
        uint8_t byte = (uint8_t)hb_mmio_rd(N6_USART_RDR);
        uint32_t h = head;
        if (h - tail >= RING_BYTES) {
            dropped = dropped + 1u;
            continue;
        }
        ring[h % RING_BYTES] = byte;
        head = h + 1u;
    }
}

void hb_n6_uart_errors_get(hb_n6_uart_errors *out) {
    out->overrun = overrun;
    out->framing = framing;
    out->noise = noise;
    out->dropped = dropped;
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
