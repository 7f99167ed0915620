/* What every Cortex-M55 port shares (port/an547, port/stm32n6): the Armv8.1-M system control
 * space, SysTick, NVIC and DWT registers, the interrupt-mask and barrier instructions, the
 * common reset steps, the C runtime's start, the fault report and the serving loop over a
 * UART's receive ring. Source: the Armv8.1-M architecture reference manual. A port includes
 * this from its own header and keeps there only what its board has of its own. */
#ifndef HB_CORTEX_M_H
#define HB_CORTEX_M_H

#include <stddef.h>
#include <stdint.h>

#include "cm_cache.h" /* the L1 caches (cache.c) */

/* ---- system control space, SysTick, NVIC, DWT ------------------------------------------ */

#define CM_REG32(addr) (*(volatile uint32_t *)(addr))

#define SCS_ICSR CM_REG32(0xE000ED04u)
#define SCS_VTOR CM_REG32(0xE000ED08u)
#define SCS_AIRCR CM_REG32(0xE000ED0Cu)
#define SCS_SHCSR CM_REG32(0xE000ED24u)
#define SCS_CFSR CM_REG32(0xE000ED28u)
#define SCS_HFSR CM_REG32(0xE000ED2Cu)
#define SCS_MMFAR CM_REG32(0xE000ED34u)
#define SCS_BFAR CM_REG32(0xE000ED38u)
#define SCS_CCR CM_REG32(0xE000ED14u)
#define SCS_CPACR CM_REG32(0xE000ED88u)
#define SCS_SFSR CM_REG32(0xE000EDE4u)
#define SCS_SFAR CM_REG32(0xE000EDE8u)
#define SCS_DEMCR CM_REG32(0xE000EDFCu)
#define SCS_FPCCR CM_REG32(0xE000EF34u)
#define SCS_FPDSCR CM_REG32(0xE000EF3Cu)
#define DEMCR_TRCENA (1u << 24)
#define AIRCR_VECTKEY (0x05FAu << 16)
#define AIRCR_SYSRESETREQ (1u << 2)
#define ICSR_PENDSTCLR (1u << 25)
#define ICSR_PENDSTSET (1u << 26)
#define ICSR_PENDSVCLR (1u << 27)

#define SYST_CSR CM_REG32(0xE000E010u)
#define SYST_RVR CM_REG32(0xE000E014u)
#define SYST_CVR CM_REG32(0xE000E018u)
#define SYST_CSR_ENABLE (1u << 0)
#define SYST_CSR_TICKINT (1u << 1)
#define SYST_CSR_CLKSOURCE (1u << 2)

#define NVIC_ISER(n) CM_REG32(0xE000E100u + 4u * (n))
#define NVIC_ICER(n) CM_REG32(0xE000E180u + 4u * (n))
#define NVIC_ISPR(n) CM_REG32(0xE000E200u + 4u * (n))
#define NVIC_ICPR(n) CM_REG32(0xE000E280u + 4u * (n))

#define DWT_CTRL CM_REG32(0xE0001000u)
#define DWT_CYCCNT CM_REG32(0xE0001004u)
#define DWT_CTRL_CYCCNTENA (1u << 0)

static inline void cm_irq_disable(void) { __asm volatile("cpsid i" ::: "memory"); }
static inline void cm_irq_enable(void) { __asm volatile("cpsie i" ::: "memory"); }
static inline uint32_t cm_irq_save(void) {
    uint32_t primask;
    __asm volatile("mrs %0, primask\n cpsid i" : "=r"(primask)::"memory");
    return primask;
}
static inline void cm_irq_restore(uint32_t primask) {
    __asm volatile("msr primask, %0" ::"r"(primask) : "memory");
}
static inline void cm_dsb(void) { __asm volatile("dsb 0xF" ::: "memory"); }
static inline void cm_isb(void) { __asm volatile("isb 0xF" ::: "memory"); }
static inline void cm_wfi(void) { __asm volatile("wfi" ::: "memory"); }

/* MurmurHash3's finalizer: a bijection that spreads bits (the ports' boot nonces) */
static inline uint32_t cm_mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

/* ---- reset (startup.c) --------------------------------------------------------------------- */

/* The first steps of a port's Reset_Handler, as assembly text for its naked function: before
 * any compiled C (the compiler may use FP and Helium registers anywhere) interrupts off, FPU
 * and MVE on (CPACR CP10/CP11 full access), the main stack and its limit (__stack_top,
 * __stack_limit), FPSCR.LTPSIZE = 4 (no tail predication outside a loop that sets it) for this
 * and every new floating-point context (FPDSCR). The port appends its own steps and the branch
 * to its C start, then ".ltorg". */
#define CM_RESET_COMMON_ASM                                                                    \
    "cpsid i\n"                                                                                \
    "ldr r0, =0xE000ED88\n" /* CPACR */                                                        \
    "ldr r1, [r0]\n"                                                                           \
    "orr r1, r1, #0x00F00000\n" /* CP10, CP11: full access (FPU and MVE) */                    \
    "str r1, [r0]\n"                                                                           \
    "dsb\n"                                                                                    \
    "isb\n"                                                                                    \
    "ldr r0, =__stack_top\n"                                                                   \
    "msr msp, r0\n"                                                                            \
    "ldr r0, =__stack_limit\n"                                                                 \
    "msr msplim, r0\n"                                                                         \
    "ldr r0, =0xE000EF3C\n" /* FPDSCR: LTPSIZE = 4 for every new FP context */                 \
    "ldr r1, [r0]\n"                                                                           \
    "bic r1, r1, #0x00070000\n"                                                                \
    "orr r1, r1, #0x00040000\n"                                                                \
    "str r1, [r0]\n"                                                                           \
    "vmrs r1, fpscr\n" /* and for this one */                                                  \
    "bic r1, r1, #0x00070000\n"                                                                \
    "orr r1, r1, #0x00040000\n"                                                                \
    "vmsr fpscr, r1\n"

typedef void (*cm_vector)(void);

/* A port's vector table: the initial stack pointer, the 15 system exceptions, n_irq
 * interrupts. CM_SYSTEM_VECTORS fills the system part: Reset_Handler, SysTick_Handler (the
 * port's 64-bit tick count) and cm_fault_entry for every other exception (NMI, HardFault,
 * MemManage, BusFault, UsageFault, SecureFault, SVCall, DebugMonitor, PendSV); 0 where the
 * architecture reserves the entry. */
#define CM_VECTOR_TABLE(n_irq)                                         \
    struct {                                                           \
        uint32_t *initial_sp;                                          \
        cm_vector system[15];                                          \
        cm_vector irq[n_irq];                                          \
    }
void Reset_Handler(void);
void SysTick_Handler(void);
#define CM_SYSTEM_VECTORS                                              \
    {                                                                  \
        Reset_Handler,   /* 1 Reset */                                 \
        cm_fault_entry,  /* 2 NMI */                                   \
        cm_fault_entry,  /* 3 HardFault */                             \
        cm_fault_entry,  /* 4 MemManage */                             \
        cm_fault_entry,  /* 5 BusFault */                              \
        cm_fault_entry,  /* 6 UsageFault */                            \
        cm_fault_entry,  /* 7 SecureFault */                           \
        0, 0, 0,         /* 8-10 reserved */                           \
        cm_fault_entry,  /* 11 SVCall */                               \
        cm_fault_entry,  /* 12 DebugMonitor: never enabled */          \
        0,               /* 13 reserved */                             \
        cm_fault_entry,  /* 14 PendSV */                               \
        SysTick_Handler, /* 15 SysTick */                              \
    }

/* The C runtime's common start, once .data is in place: zero .bss, point VTOR at the port's
 * vector table, run the constructors (.init_array). */
void cm_start_c(const void *vectors);

/* ---- faults (fault.c) -------------------------------------------------------------------- */

/* The handler of every fault and unexpected exception (put it in the vector table): reports
 * the exception number, the stacked registers and CFSR, HFSR, MMFAR, BFAR, SFSR as one line in
 * the format cm_fault_format (the port's hb_format text, ten %x-style arguments), builds the
 * ERROR INTERNAL frame that carries it (sequence number 0, request type 0: it answers no
 * request), and hands both to cm_fault_out. It runs on a stack of its own (__fault_stack_top),
 * with the stack limit lifted: a stack overflow may be what faulted. */
void cm_fault_entry(void);

/* the port's: the report's format, and what it does with the report and the frame */
extern const char cm_fault_format[];
__attribute__((noreturn)) void cm_fault_out(const char *report, size_t report_len,
                                            const uint8_t *frame, size_t frame_len);

/* ---- restarts (restart.c) ------------------------------------------------------------- */

/* Start `entry` (the port's Reset_Handler) afresh in Thread mode with interrupts off, the image
 * kept: a branch from Thread mode, an exception return from a handler (the fault status
 * registers cleared first). A handler that interrupted another one cannot return to Thread
 * mode cleanly: that case is a system reset (cm_system_reset). */
__attribute__((noreturn)) void cm_restart(void (*entry)(void));

/* AIRCR.SYSRESETREQ: the whole system resets (on the STM32N6 in development boot that ends in
 * the boot ROM, waiting for the debugger; under QEMU the machine reloads its image). */
__attribute__((noreturn)) void cm_system_reset(void);

/* ---- serving (serve.c) ------------------------------------------------------------------- */

/* A port's UART receive ring and what to do after each batch of received bytes (NULL: none) */
typedef struct {
    size_t (*peek)(const uint8_t **data); /* the waiting bytes as one run; 0 when empty */
    void (*consume)(size_t n);            /* free the first n of them */
    size_t (*pending)(void);              /* bytes the ring holds */
    void (*after_rx)(void);
} cm_serve_ring;

/* Every received byte to hb_device_rx, forever; the core sleeps (WFI) while the ring is empty,
 * or, built with -DHB_SERVE_POLL, polls the ring without sleeping (first contact with a board
 * whose sleep-mode clocks are in doubt). cm_serve_idle() runs once per loop turn and after each
 * wake (weak, empty by default: a port kicks its watchdog there). Interrupts must be on (the
 * ring is interrupt-fed). */
void cm_serve_idle(void);
__attribute__((noreturn)) void cm_serve(const cm_serve_ring *ring);

#endif /* HB_CORTEX_M_H */
