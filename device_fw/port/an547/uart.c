/* CMSDK APB UART0 (Arm CMSDK technical reference, "APB UART"; the register block as in
 * Zephyr's drivers/serial/uart_cmsdk_apb.c): polled transmit, interrupt-fed receive ring.
 *
 * Every received byte goes into a ring from the RX interrupt, so bytes keep arriving while a
 * command computes (a retry waits there and is answered from the cache afterwards). When the
 * ring is full the interrupt is masked and the byte stays in the UART: the UART then holds
 * off the sender (QEMU stops reading the socket), so nothing is lost. The main loop unmasks
 * it, and pends the interrupt by hand, once it has consumed bytes. */
#include <stdint.h>

#include "an547.h"
#include "board.h"

typedef struct {
    volatile uint32_t data;      /* 0x000 RW: received / to send */
    volatile uint32_t state;     /* 0x004 RW: TXFULL, RXFULL, overrun flags (write 1 clears) */
    volatile uint32_t ctrl;      /* 0x008 RW: enables */
    volatile uint32_t intstatus; /* 0x00C R: interrupt status / W: interrupt clear */
    volatile uint32_t bauddiv;   /* 0x010 RW: >= 16 */
} cmsdk_uart_regs;

#define UART_STATE_TXFULL (1u << 0)
#define UART_STATE_RXFULL (1u << 1)
#define UART_STATE_TXOVR (1u << 2)
#define UART_STATE_RXOVR (1u << 3)
#define UART_CTRL_TX_EN (1u << 0)
#define UART_CTRL_RX_EN (1u << 1)
#define UART_CTRL_RX_INT_EN (1u << 3)
#define UART_INT_RX (1u << 1)

#define UART0 ((cmsdk_uart_regs *)AN547_UART0_BASE)

/* the receive ring: 16 KiB (a power of two), head written by the ISR, tail by the main loop */
#define RING_BYTES 16384u
_Static_assert((RING_BYTES & (RING_BYTES - 1u)) == 0, "the ring's size must be a power of 2");

static uint8_t ring[RING_BYTES];
static volatile uint32_t head, tail; /* free-running counts of bytes put / taken */
static volatile uint8_t rx_masked;   /* the ISR masked the RX interrupt: the ring was full */
static uint32_t high_water;

static void irq_enable(uint32_t irq) { NVIC_ISER(irq / 32u) = 1u << (irq % 32u); }
static void irq_pend(uint32_t irq) { NVIC_ISPR(irq / 32u) = 1u << (irq % 32u); }

void hb_an547_uart_init(void) {
    head = tail = 0;
    rx_masked = 0;
    UART0->bauddiv = AN547_UART_PCLK_HZ / AN547_UART_BAUD;
    UART0->intstatus = 0xFu;
    UART0->state = UART_STATE_TXOVR | UART_STATE_RXOVR;
    UART0->ctrl = UART_CTRL_TX_EN | UART_CTRL_RX_EN | UART_CTRL_RX_INT_EN;
    irq_enable(AN547_UART0_RX_IRQ);
}

void hb_an547_uart_write(const uint8_t *data, size_t n) {
    for (size_t i = 0; i < n; i++) {
        while (UART0->state & UART_STATE_TXFULL) {
        }
        UART0->data = data[i];
    }
}

void hb_an547_uart_flush(void) {
    while (UART0->state & UART_STATE_TXFULL) {
    }
}

void hb_an547_uart_rx_isr(void) {
    /* clear first, then drain: a byte that lands after the last check raises a new interrupt */
    UART0->intstatus = UART_INT_RX;
    while (UART0->state & UART_STATE_RXFULL) {
        uint32_t h = head;
        if (h - tail >= RING_BYTES) { /* full: leave the byte in the UART, hold the sender off */
            UART0->ctrl &= ~UART_CTRL_RX_INT_EN;
            rx_masked = 1;
            break;
        }
        ring[h % RING_BYTES] = (uint8_t)UART0->data;
        head = h + 1u;
        if (h + 1u - tail > high_water) high_water = h + 1u - tail;
    }
}

size_t hb_an547_uart_peek(const uint8_t **data) {
    uint32_t t = tail;
    uint32_t n = head - t;
    uint32_t run = RING_BYTES - t % RING_BYTES;
    *data = ring + t % RING_BYTES;
    return n < run ? n : run;
}

void hb_an547_uart_consume(size_t n) {
    tail = tail + (uint32_t)n;
    if (rx_masked) { /* room again: let the bytes held in the UART in */
        rx_masked = 0;
        UART0->ctrl |= UART_CTRL_RX_INT_EN;
        irq_pend(AN547_UART0_RX_IRQ); /* RX was already full: no edge will raise it */
    }
}

size_t hb_an547_uart_pending(void) { return head - tail; }
size_t hb_an547_uart_high_water(void) { return high_water; }
