/* Reset, the vector table and the C runtime's start on the STM32N6 (development boot: the
 * debugger wrote the image into AXISRAM, pointed VTOR at this table and started the core with
 * a core reset, which loads SP and PC from it; flash boot, make stm32n6-flash: the boot ROM
 * copied the image to AXISRAM2 and jumps to Reset_Handler, which sets the stack itself).
 *
 * The debugger's emulated core reset writes CPACR, FPCCR and CCR to 0 and leaves the NVIC as
 * the previous program left it; the startup puts back what the firmware needs (FPU and MVE
 * access, automatic FP context saving, the loop cache) and quiets every interrupt line.
 *
 * Reset_Handler, in assembly, turns the FPU and MVE on (CPACR CP10/CP11; a debugger's emulated
 * reset writes CPACR = 0) and sets the stack limit before any compiled C runs, since the
 * compiler may use FP and Helium registers anywhere (CM_RESET_COMMON_ASM, then its own FPCCR and
 * CCR). hb_n6_prep_c then quiets the interrupts, and cm_start_c zeroes .bss (the image is
 * loaded where it runs: .data needs no copy), points VTOR here and runs the constructors;
 * then main(). */
#include <stdint.h>

#include "stm32n6.h"

extern uint32_t __stack_top[];

int main(void);
void hb_n6_prep_c(void);

typedef CM_VECTOR_TABLE(STM32N6_N_IRQ) hb_vector_table;

#define FAULT cm_fault_entry
__attribute__((section(".vectors"), used)) const hb_vector_table hb_n6_vectors = {
    .initial_sp = __stack_top, /* 256 bytes in AXISRAM: Reset_Handler moves to DTCM at once */
    .system = CM_SYSTEM_VECTORS,
    .irq =
        {
            [0 ... USART1_IRQ - 1] = FAULT,
            [USART1_IRQ] = hb_n6_uart_isr,
        },
};
_Static_assert(sizeof(hb_vector_table) <= 1024, "VTOR at the load address needs a table <= 1 KiB");

__attribute__((naked, noreturn)) void Reset_Handler(void) {
    __asm volatile(
        /* ITCM and DTCM on before anything uses them (the stacks are in DTCM): Cortex-M55
         * ITCMCR / DTCMCR, EN [0] */
        "ldr r0, =0xE001E010\n"
        "ldr r1, [r0]\n"
        "orr r1, r1, #1\n"
        "str r1, [r0]\n"
        "ldr r0, =0xE001E014\n"
        "ldr r1, [r0]\n"
        "orr r1, r1, #1\n"
        "str r1, [r0]\n"
        "dsb\n"
        "isb\n"
        CM_RESET_COMMON_ASM
        /* the main stack in DTCM (the common steps set the boot stack the table names) */
        "movs r0, #0\n"
        "msr msplim, r0\n"
        "ldr r0, =__main_stack_top\n"
        "msr msp, r0\n"
        "ldr r0, =__main_stack_limit\n"
        "msr msplim, r0\n"
        "ldr r0, =0xE000EF34\n" /* FPCCR: ASPEN, LSPEN (an emulated reset wrote 0) */
        "ldr r1, [r0]\n"
        "orr r1, r1, #0xC0000000\n"
        "str r1, [r0]\n"
        "ldr r0, =0xE000ED14\n" /* CCR: LOB, the loop and branch info cache (written 0) */
        "ldr r1, [r0]\n"
        "orr r1, r1, #0x00080000\n"
        "str r1, [r0]\n"
        "dsb\n"
        "isb\n"
        "b hb_n6_prep_c\n"
        ".ltorg\n");
}

/* A core reset leaves the NVIC and SysTick as the previous program left them (only a system
 * reset clears them, and that would erase the image): disable and unpend every interrupt. */
static void quiet_interrupts(void) {
    SYST_CSR = 0;
    SCS_ICSR = ICSR_PENDSTCLR | ICSR_PENDSVCLR;
    for (uint32_t i = 0; i < (STM32N6_NVIC_LINES + 31u) / 32u; i++) {
        NVIC_ICER(i) = 0xFFFFFFFFu;
        NVIC_ICPR(i) = 0xFFFFFFFFu;
    }
    cm_dsb();
    cm_isb();
}

/* the hot code's copy into ITCM (linked there, loaded after .data) and the DTCM state's zeroes,
 * before anything runs from or reads them */
extern uint32_t __itcm_start[], __itcm_end[], __itcm_load[], __dtcm_bss_start[],
    __dtcm_bss_end[];

static void tcm_sections(void) {
    const volatile uint32_t *from = __itcm_load;
    volatile uint32_t *to = __itcm_start;
    while (to < __itcm_end) *to++ = *from++;
    for (volatile uint32_t *z = __dtcm_bss_start; z < __dtcm_bss_end; z++) *z = 0;
    cm_dsb();
    cm_isb();
}

__attribute__((noreturn, used)) void hb_n6_prep_c(void) {
    tcm_sections();
    quiet_interrupts();
    cm_start_c(&hb_n6_vectors);
    main();
    for (;;) cm_wfi(); /* main() never returns */
}
