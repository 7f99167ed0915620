/* A reset that keeps the image (cortex_m.h): from Thread mode, a branch to the port's reset
 * entry with interrupts off; from a handler (a fault), an exception return into the entry, so it
 * starts in Thread mode with no active exception -- the same state a core reset leaves. When
 * another exception is still active under the current one (ICSR.RETTOBASE clear: a fault
 * inside an interrupt handler), an exception return cannot end it: a system reset
 * (AIRCR.SYSRESETREQ) then. Armv8-M ARM: EXC_RETURN, ICSR, AIRCR. */
#include <stdint.h>

#include "cortex_m.h"

#define ICSR_RETTOBASE (1u << 11)
#define ICSR_VECTACTIVE 0x1FFu
#define XPSR_T (1u << 24)
/* Thread mode, main stack, no FP context, Secure state and stack, default stacking rules */
#define EXC_RETURN_THREAD_MSP_SECURE 0xFFFFFFF9u

void cm_system_reset(void) {
    cm_dsb();
    SCS_AIRCR = AIRCR_VECTKEY | AIRCR_SYSRESETREQ;
    cm_dsb();
    for (;;) {
    }
}

void cm_restart(void (*entry)(void)) {
    cm_irq_disable();
    uint32_t icsr = SCS_ICSR;
    if ((icsr & ICSR_VECTACTIVE) == 0) { /* Thread mode: the entry sets its own stack */
        __asm volatile("bx %0" ::"r"(entry));
        for (;;) {
        }
    }
    if (!(icsr & ICSR_RETTOBASE)) cm_system_reset();
    /* the fault status registers are write-one-to-clear: the next report starts clean */
    SCS_CFSR = SCS_CFSR;
    SCS_HFSR = SCS_HFSR;
    /* a basic exception frame for the return to pop: r0-r3, r12, lr, pc, xpsr (the entry
     * sets the stack pointer it needs at once) */
    static uint32_t frame[8] __attribute__((aligned(8)));
    for (int i = 0; i < 5; i++) frame[i] = 0;
    frame[5] = 0xFFFFFFFFu;
    frame[6] = (uint32_t)(uintptr_t)entry & ~1u;
    frame[7] = XPSR_T;
    cm_dsb();
    __asm volatile(
        "msr msplim, %1\n"
        "msr msp, %0\n"
        "bx %2\n" ::"r"(frame),
        "r"(0u), "r"(EXC_RETURN_THREAD_MSP_SECURE)
        : "memory");
    for (;;) {
    }
}
