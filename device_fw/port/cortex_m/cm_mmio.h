/* Every memory-mapped register access of the bring-up code (port/stm32n6 init, port/cortex_m
 * caches) goes through these three: a store, a load, a barrier. On a target they are the
 * volatile access and DSB+ISB; in a host build with -DHB_MMIO_RECORD they are functions of a
 * STAND-IN register file (port/stm32n6/test/mmio_record.c) that records every (address, value)
 * and answers reads from a model of the status bits the code waits on. */
#ifndef HB_CM_MMIO_H
#define HB_CM_MMIO_H

#include <stdint.h>

#ifdef HB_MMIO_RECORD
void hb_mmio_wr(uint32_t addr, uint32_t value);
uint32_t hb_mmio_rd(uint32_t addr);
void hb_mmio_barrier(void);
#else
static inline void hb_mmio_wr(uint32_t addr, uint32_t value) {
    *(volatile uint32_t *)(uintptr_t)addr = value;
}
static inline uint32_t hb_mmio_rd(uint32_t addr) { return *(volatile uint32_t *)(uintptr_t)addr; }
static inline void hb_mmio_barrier(void) { __asm volatile("dsb 0xF\n isb 0xF" ::: "memory"); }
#endif

/* read-modify-write: clear `clear`, then set `set` */
static inline void hb_mmio_modify(uint32_t addr, uint32_t clear, uint32_t set) {
    hb_mmio_wr(addr, (hb_mmio_rd(addr) & ~clear) | set);
}

/* Wait until (reg & mask) == want, at most `tries` reads; 1 when it did, 0 on a timeout. */
static inline int hb_mmio_wait(uint32_t addr, uint32_t mask, uint32_t want, uint32_t tries) {
    for (uint32_t i = 0; i < tries; i++)
        if ((hb_mmio_rd(addr) & mask) == want) return 1;
    return 0;
}

/* ---- Armv8.1-M system registers the bring-up writes (Armv8-M ARM, Cortex-M55 TRM) ------- */
#define CM_SCB_SCR 0xE000ED10u       /* SLEEPDEEP [2] */
#define CM_SCB_CCR 0xE000ED14u       /* DC [16], IC [17], LOB [19] */
#define CM_SCB_CCSIDR 0xE000ED80u    /* the selected cache's sets, ways, line size */
#define CM_SCB_CSSELR 0xE000ED84u    /* 0: level 1 data cache */
#define CM_SCB_ICIALLU 0xE000EF50u   /* invalidate the whole I-cache */
#define CM_SCB_DCISW 0xE000EF60u     /* invalidate a D-cache line by set/way */
#define CM_SCB_DCCIMVAC 0xE000EF70u  /* clean and invalidate a D-cache line by address */
#define CM_MEMSYSCTL_MSCR 0xE001E000u /* Cortex-M55 MSCR: DCACTIVE [12], ICACTIVE [13] */
#define CM_SCR_SLEEPDEEP (1u << 2)
#define CM_CCR_DC (1u << 16)
#define CM_CCR_IC (1u << 17)
#define CM_MSCR_DCACTIVE (1u << 12)
#define CM_MSCR_ICACTIVE (1u << 13)

#endif /* HB_CM_MMIO_H */
