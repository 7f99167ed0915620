/* The Cortex-M parts the an547 and stm32n6 ports share (port/cortex_m: caches, fault report
 * then restart, the system-reset path), run on the Cortex-M55 under QEMU (-M mps3-an547).
 * One program, several boots: a block at the top of DTCM (outside the image: QEMU keeps it
 * across a reset) carries the stage and what the previous boot saw.
 *   boot 1: the caches on through cm_caches_enable (invalidate, MSCR, CCR; QEMU models no
 *           cache, so what is checked is that the sequence runs and reports what the
 *           registers say), 64 KiB read back after it; then a fault in Thread mode.
 *   boot 2: reached through the fault report and cm_restart (an exception return into
 *           Reset_Handler): the report's text, Thread mode, the fault status cleared, a
 *           restart and not a reset (an NVIC enable bit set before the fault is still set).
 *           Then a fault inside an interrupt handler.
 *   boot 3: reached through a system reset (the nested fault cannot return to Thread mode):
 *           the NVIC enable bit is gone (only a reset clears it).
 * Exits 0 with the count of checks, 1 on the first failed check. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "an547.h"
#include "board.h"
#include "cortex_m.h"
#include "hb_an547.h"
#include "semihost.h"

extern uint32_t __noinit_start[];
extern const uint32_t hb_an547_vectors[];

#define MAGIC 0x434D5354u /* "CMST" */
#define WITNESS_IRQ 5u    /* an NVIC line enabled before a fault: a reset clears it */
#define TABLE_WORDS (16u + AN547_N_IRQ)

typedef struct {
    uint32_t magic, stage, boots, faults, checks, nested;
    char report[40];
} state;
#define S ((volatile state *)__noinit_start)
_Static_assert(sizeof(state) <= 64, "the kept block is 64 bytes");

const char cm_fault_format[] = HB_AN547_MSG_FAULT;

static void say(const char *text) { sh_line(text, strlen(text)); }

static void check(int ok, const char *what) {
    char line[160];
    S->checks = S->checks + 1u;
    if (ok) return;
    snprintf(line, sizeof line, "cm_selftest: FAIL at boot %lu, stage %lu: %s",
             (unsigned long)S->boots, (unsigned long)S->stage, what);
    say(line);
    sh_exit(1);
}

/* the fault's end: keep the report's start, then restart (or, nested, reset) */
void cm_fault_out(const char *report, size_t report_len, const uint8_t *frame,
                  size_t frame_len) {
    size_t n = report_len < sizeof S->report - 1u ? report_len : sizeof S->report - 1u;
    for (size_t i = 0; i < n; i++) S->report[i] = report[i];
    S->report[n] = 0;
    S->faults = S->faults + 1u;
    S->nested = (SCS_ICSR & (1u << 11)) ? 0u : 1u; /* RETTOBASE clear: another one active */
    (void)frame;
    (void)frame_len;
    say(report);
    cm_restart(Reset_Handler);
}

static uint32_t ipsr(void) {
    uint32_t v;
    __asm volatile("mrs %0, ipsr" : "=r"(v));
    return v;
}

static void bad_load(void) {
    volatile uint32_t *nowhere = (volatile uint32_t *)0xEF000000u; /* nothing decodes it */
    (void)*nowhere;
}

/* a vector table in RAM whose interrupt 1 faults inside its handler */
static uint32_t table[TABLE_WORDS] __attribute__((aligned(1024)));
static void faulting_isr(void) { bad_load(); }

static void stage_caches_then_fault(void) {
    /* QEMU 7.2 models no L1 cache: CCR.IC/DC and MSCR read as zero and ignore writes, and
     * the maintenance registers accept writes. What runs here: the whole enable sequence
     * without a fault, a state that says what the registers say, memory intact after it
     * (the order and values are port/stm32n6/test's) */
    uint32_t state_ = cm_caches_enable();
    uint32_t ccr = SCS_CCR, mscr = CM_REG32(0xE001E000u);
    uint32_t expect = ((ccr & (1u << 17)) && (mscr & (1u << 13)) ? CM_CACHE_I : 0u) |
                      ((ccr & (1u << 16)) && (mscr & (1u << 12)) ? CM_CACHE_D : 0u);
    check(state_ == expect, "cm_caches_enable reports what CCR and MSCR say");
    check(cm_caches_state() == expect, "cm_caches_state agrees");
    {
        char line[120];
        snprintf(line, sizeof line, "cm_selftest: caches enabled: CCR 0x%08lx MSCR 0x%08lx, state %lu",
                 (unsigned long)ccr, (unsigned long)mscr, (unsigned long)state_);
        say(line);
    }
    static uint32_t buf[16384];
    for (uint32_t i = 0; i < 16384u; i++) buf[i] = cm_mix32(i);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < 16384u; i++) bad += buf[i] != cm_mix32(i);
    check(bad == 0, "64 KiB written and read back with the caches on");
    NVIC_ISER(0) = 1u << WITNESS_IRQ;
    S->stage = 1;
    bad_load();
    check(0, "the fault returned");
}

static void stage_after_restart(void) {
    check(S->faults == 1u, "one fault reported");
    check(strncmp((const char *)S->report, "fault in exception 3: pc 0x", 27) == 0,
          "the report names the HardFault and its pc");
    check(!S->nested, "the fault was not nested");
    check(ipsr() == 0, "restarted in Thread mode");
    check(SCS_CFSR == 0 && SCS_HFSR == 0, "the fault status was cleared");
    check(NVIC_ISER(0) & (1u << WITNESS_IRQ), "a restart in place, not a reset");
    check(cm_caches_state() == cm_caches_enable(), "enabling again changes nothing");
    /* now a fault inside a handler: a system reset must follow */
    for (uint32_t i = 0; i < TABLE_WORDS; i++) table[i] = hb_an547_vectors[i];
    table[16 + 1] = (uint32_t)(uintptr_t)faulting_isr;
    SCS_VTOR = (uint32_t)(uintptr_t)table;
    cm_dsb();
    cm_isb();
    S->stage = 2;
    NVIC_ISER(0) = (1u << 1) | (1u << WITNESS_IRQ);
    NVIC_ISPR(0) = 1u << 1;
    cm_irq_enable();
    cm_dsb();
    cm_isb();
    check(0, "the interrupt's fault returned");
}

/* the SSE-300's S32K watchdog (a CMSDK APB watchdog at 32 kHz, Secure alias; QEMU models it,
 * hw/arm/armsse.c, and leaves the main watchdog unimplemented): its first
 * timeout raises NMI, its second, with the interrupt not cleared, resets the system */
#ifndef WDOG
#define WDOG 0x5802E000u
#endif
#define WDOG_LOAD CM_REG32(WDOG + 0x000u)
#define WDOG_CONTROL CM_REG32(WDOG + 0x008u)
#define WDOG_LOCK CM_REG32(WDOG + 0xC00u)
#define WDOG_UNLOCK 0x1ACCE551u
#define WDOG_TICKS 100u

static void spin(const char *what) {
    for (volatile uint32_t i = 0; i < 50000000u; i++) {
    }
    check(0, what);
}

static void stage_after_reset(void) {
    check(S->faults == 2u, "two faults reported");
    check(S->nested == 1u, "the second was nested in an interrupt handler");
    check(!(NVIC_ISER(0) & (1u << WITNESS_IRQ)), "a system reset, not a restart");
    NVIC_ISER(0) = 1u << WITNESS_IRQ;
    S->stage = 3;
    WDOG_LOCK = WDOG_UNLOCK;
    WDOG_LOAD = WDOG_TICKS;
    WDOG_CONTROL = 3u; /* INTEN: count, interrupt at 0; RESEN: reset at the next 0 */
    WDOG_LOCK = 0;
    check(WDOG_LOAD == WDOG_TICKS, "the watchdog is there (LOAD reads back)");
    spin("the watchdog's first timeout never came");
}

static void stage_after_watchdog_nmi(void) {
    check(S->faults == 3u, "the watchdog's interrupt went through the fault report");
    check(strncmp((const char *)S->report, "fault in exception 2:", 21) == 0,
          "reported as NMI (exception 2)");
    check(NVIC_ISER(0) & (1u << WITNESS_IRQ), "restarted in place after the NMI");
    S->stage = 4;
    spin("the watchdog's second timeout never reset the system");
}

static void stage_after_watchdog_reset(void) {
    check(!(NVIC_ISER(0) & (1u << WITNESS_IRQ)), "the watchdog reset the system");
    check(S->faults == 3u, "and nothing faulted on the way");
    char line[80];
    snprintf(line, sizeof line, "cm_selftest: %lu checks passed over %lu boots",
             (unsigned long)S->checks, (unsigned long)S->boots);
    say(line);
    sh_exit(0);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    if (S->magic != MAGIC) {
        memset((void *)S, 0, sizeof(state));
        S->magic = MAGIC;
    }
    S->boots = S->boots + 1u;
    switch (S->stage) {
    case 0:
        stage_caches_then_fault();
        break;
    case 1:
        stage_after_restart();
        break;
    case 2:
        stage_after_reset();
        break;
    case 3:
        stage_after_watchdog_nmi();
        break;
    default:
        stage_after_watchdog_reset();
        break;
    }
    return 1;
}
