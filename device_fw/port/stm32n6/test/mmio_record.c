/* The STAND-IN register file of mmio_record.h. */
#include "mmio_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_mmio.h"
#include "n6_regs.h"

#define SLOTS 4096u
#define MAX_WRITES 65536u

typedef struct {
    uint32_t addr, value, reads, used;
} slot;

static slot regs[SLOTS];
static hb_mmio_write log_[MAX_WRITES];
static size_t n_log;
static uint8_t rx[4096];
static size_t rx_head, rx_tail;
hb_mmio_model hb_mmio_knobs;

static slot *find(uint32_t addr) {
    uint32_t h = (addr * 2654435761u) % SLOTS;
    for (uint32_t i = 0; i < SLOTS; i++) {
        slot *s = &regs[(h + i) % SLOTS];
        if (!s->used) {
            s->used = 1;
            s->addr = addr;
            return s;
        }
        if (s->addr == addr) return s;
    }
    fprintf(stderr, "mmio_record: more than %u registers\n", SLOTS);
    abort();
}

void hb_mmio_clear(void) {
    memset(regs, 0, sizeof regs);
    n_log = 0;
    rx_head = rx_tail = 0;
    memset(&hb_mmio_knobs, 0, sizeof hb_mmio_knobs);
    find(N6_RCC_SR)->value = N6_RCC_SR_HSIRDY; /* HSI runs after reset */
    find(N6_USART_ISR)->value = N6_USART_ISR_TXFNF | N6_USART_ISR_TC;
    /* the Cortex-M55's 32 KiB 4-way D-cache, 32-byte lines: 256 sets */
    find(CM_SCB_CCSIDR)->value = (255u << 13) | (3u << 3) | 1u;
}

void hb_mmio_set(uint32_t addr, uint32_t v) { find(addr)->value = v; }
uint32_t hb_mmio_get(uint32_t addr) { return find(addr)->value; }
uint32_t hb_mmio_reads(uint32_t addr) { return find(addr)->reads; }

size_t hb_mmio_writes(const hb_mmio_write **out) {
    *out = log_;
    return n_log;
}

void hb_mmio_rx(const uint8_t *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) rx[rx_head++ % sizeof rx] = bytes[i];
    find(N6_USART_ISR)->value |= N6_USART_ISR_RXFNE;
}

void hb_mmio_flag(uint32_t addr, uint32_t bits) { find(addr)->value |= bits; }

static void model_write(uint32_t addr, uint32_t v) {
    if (addr >= N6_RCC + 0x800u && addr < N6_RCC + 0x1000u) { /* set alias */
        find(addr - 0x800u)->value |= v;
        addr -= 0x800u;
    } else if (addr >= N6_RCC + 0x1000u && addr < N6_RCC + 0x1800u) { /* clear alias */
        find(addr - 0x1000u)->value &= ~v;
        addr -= 0x1000u;
    } else if (addr == N6_USART_ICR) {
        find(N6_USART_ISR)->value &= ~(v & N6_USART_ICR_ERRORS);
        return;
    } else if (addr == N6_RCC_RSR) {
        find(addr)->value = (v & N6_RCC_RSR_RMVF) ? 0u : v;
        return;
    } else {
        find(addr)->value = v;
    }
    if (addr == N6_RCC_CR) {
        uint32_t on = find(N6_RCC_CR)->value & N6_RCC_CR_PLL1ON;
        slot *sr = find(N6_RCC_SR);
        sr->value = (sr->value & ~N6_RCC_SR_PLL1RDY) |
                    (on && !hb_mmio_knobs.pll_never_locks ? N6_RCC_SR_PLL1RDY : 0u);
    } else if (addr == N6_RCC_CFGR1) {
        slot *c = find(N6_RCC_CFGR1);
        uint32_t cpu = (v >> N6_RCC_CFGR1_CPUSW_SHIFT) & 3u, sys = (v >> N6_RCC_CFGR1_SYSSW_SHIFT) & 3u;
        c->value = (v & ~((3u << N6_RCC_CFGR1_CPUSWS_SHIFT) | (3u << N6_RCC_CFGR1_SYSSWS_SHIFT))) |
                   (cpu << N6_RCC_CFGR1_CPUSWS_SHIFT) | (sys << N6_RCC_CFGR1_SYSSWS_SHIFT);
    } else if (addr == N6_PWR_VOSCR) {
        slot *p = find(N6_PWR_VOSCR);
        p->value = (v & N6_PWR_VOSCR_VOS) | N6_PWR_VOSCR_VOSRDY | N6_PWR_VOSCR_ACTVOSRDY |
                   ((v & N6_PWR_VOSCR_VOS) ? N6_PWR_VOSCR_ACTVOS : 0u);
    } else if (addr == N6_USART_CR1) {
        slot *isr = find(N6_USART_ISR);
        uint32_t ack = 0;
        if ((v & N6_USART_CR1_UE) && (v & N6_USART_CR1_TE)) ack |= N6_USART_ISR_TEACK;
        if ((v & N6_USART_CR1_UE) && (v & N6_USART_CR1_RE)) ack |= N6_USART_ISR_REACK;
        isr->value = (isr->value & ~(N6_USART_ISR_TEACK | N6_USART_ISR_REACK)) | ack;
    }
}

void hb_mmio_wr(uint32_t addr, uint32_t value) {
    if (n_log == MAX_WRITES) {
        fprintf(stderr, "mmio_record: more than %u writes\n", MAX_WRITES);
        abort();
    }
    log_[n_log].addr = addr;
    log_[n_log].value = value;
    n_log++;
    model_write(addr, value);
}

uint32_t hb_mmio_rd(uint32_t addr) {
    slot *s = find(addr);
    s->reads++;
    if (addr == N6_USART_RDR) {
        uint32_t byte = rx_tail != rx_head ? rx[rx_tail++ % sizeof rx] : 0u;
        if (rx_tail == rx_head) find(N6_USART_ISR)->value &= ~N6_USART_ISR_RXFNE;
        return byte;
    }
    return s->value;
}

void hb_mmio_barrier(void) {}
