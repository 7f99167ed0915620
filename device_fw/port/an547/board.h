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

#include "cortex_m.h" /* the core's registers and instructions */

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

/* external interrupts the vector table has room for (AN547: 96 of the SSE-300's 480) */
#define AN547_N_IRQ 96u

#endif /* HB_AN547_BOARD_H */
