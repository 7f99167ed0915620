/* The MPS3 AN547 board as QEMU's `-M mps3-an547` models it (qemu-system-arm 7.2): memory map,
 * the CMSDK UART0, interrupt numbers and clocks. Sources: Arm Application Note AN547 (Corstone
 * SSE-300 with Cortex-M55 and Ethos-U55 on MPS3), Zephyr's boards/arm/mps3
 * (mps3_corstone300_an547.dts, mps3_common_soc_peripheral.dtsi), QEMU's hw/arm/mps2-tz.c.
 * The core boots in the Secure state, so peripherals are used at their Secure alias
 * (Non-secure address + 0x10000000); the memories are used at the addresses the linker script
 * names (the boot vectors at ITCM 0x0, where QEMU's model takes the initial SP and PC). */
#ifndef HB_AN547_BOARD_H
#define HB_AN547_BOARD_H

#include <stdint.h>

/* memories (Non-secure view; the linker script, an547_memory.ld, holds the same map) */
#define AN547_ITCM_BASE 0x00000000u  /* 512 KiB: vectors and code */
#define AN547_DTCM_BASE 0x20000000u  /* 512 KiB: data, bss, stack */
#define AN547_SRAM_BASE 0x01000000u  /* 2 MiB */
#define AN547_ISRAM_BASE 0x21000000u /* ISRAM0 + ISRAM1, 4 MiB: the device's arena */
#define AN547_DDR_BASE 0x60000000u   /* DDR4 */

/* CMSDK APB UART0 (Secure alias of 0x49303000); pclk 25 MHz */
#define AN547_UART0_BASE 0x59303000u
#define AN547_UART0_RX_IRQ 33u
#define AN547_UART0_TX_IRQ 34u
#define AN547_UART_PCLK_HZ 25000000u
#define AN547_UART_BAUD 115200u /* any divider >= 16 works: QEMU does not model line rates */

/* The CPU clock that drives SysTick (CLKSOURCE = processor clock): 32 MHz in QEMU's model.
 * With `-icount shift=0` QEMU's virtual clock advances 1 ns per executed instruction, so one
 * SysTick tick is 31.25 executed instructions. */
#define AN547_SYSCLK_HZ 32000000u

/* System control space (ARMv8.1-M) */
#define SCS_ICSR (*(volatile uint32_t *)0xE000ED04u)
#define SCS_VTOR (*(volatile uint32_t *)0xE000ED08u)
#define SCS_AIRCR (*(volatile uint32_t *)0xE000ED0Cu)
#define SCS_SHCSR (*(volatile uint32_t *)0xE000ED24u)
#define SCS_CFSR (*(volatile uint32_t *)0xE000ED28u)
#define SCS_HFSR (*(volatile uint32_t *)0xE000ED2Cu)
#define SCS_MMFAR (*(volatile uint32_t *)0xE000ED34u)
#define SCS_BFAR (*(volatile uint32_t *)0xE000ED38u)
#define SCS_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define SCS_SFSR (*(volatile uint32_t *)0xE000EDE4u)
#define SCS_SFAR (*(volatile uint32_t *)0xE000EDE8u)
#define SCS_FPCCR (*(volatile uint32_t *)0xE000EF34u)
#define SCS_FPDSCR (*(volatile uint32_t *)0xE000EF3Cu)

#define ICSR_PENDSTSET (1u << 26)
#define AIRCR_VECTKEY (0x05FAu << 16)
#define AIRCR_SYSRESETREQ (1u << 2)

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define SYST_CSR_ENABLE (1u << 0)
#define SYST_CSR_TICKINT (1u << 1)
#define SYST_CSR_CLKSOURCE (1u << 2)

#define NVIC_ISER(n) (*(volatile uint32_t *)(0xE000E100u + 4u * (n)))
#define NVIC_ICER(n) (*(volatile uint32_t *)(0xE000E180u + 4u * (n)))
#define NVIC_ISPR(n) (*(volatile uint32_t *)(0xE000E200u + 4u * (n)))

/* external interrupts the vector table has room for (AN547: 96 of the SSE-300's 480) */
#define AN547_N_IRQ 96u

static inline void an547_irq_disable(void) { __asm volatile("cpsid i" ::: "memory"); }
static inline void an547_irq_enable(void) { __asm volatile("cpsie i" ::: "memory"); }
static inline uint32_t an547_irq_save(void) {
    uint32_t primask;
    __asm volatile("mrs %0, primask\n cpsid i" : "=r"(primask)::"memory");
    return primask;
}
static inline void an547_irq_restore(uint32_t primask) {
    __asm volatile("msr primask, %0" ::"r"(primask) : "memory");
}
static inline void an547_dsb(void) { __asm volatile("dsb 0xF" ::: "memory"); }
static inline void an547_isb(void) { __asm volatile("isb 0xF" ::: "memory"); }
static inline void an547_wfi(void) { __asm volatile("wfi" ::: "memory"); }

#endif /* HB_AN547_BOARD_H */
