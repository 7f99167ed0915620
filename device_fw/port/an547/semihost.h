/* Arm semihosting (the "Semihosting for AArch32 and AArch64" specification, v2) as QEMU
 * implements it with -semihosting-config enable=on,target=native: BKPT 0xAB with the operation
 * in r0 and its argument block in r1. The firmware uses it for its settings (the command
 * line), its console (QEMU's stderr) and to end QEMU with an exit code. Without semihosting
 * enabled, a BKPT escalates to a HardFault: the an547 firmware needs it. */
#ifndef HB_AN547_SEMIHOST_H
#define HB_AN547_SEMIHOST_H

#include <stddef.h>
#include <stdint.h>

/* Write a NUL-terminated string to the console (SYS_WRITE0). */
void sh_write0(const char *text);

/* Write text and a newline to the console (one SYS_WRITE0 call; text is cut at 255 bytes). */
void sh_line(const char *text, size_t n);

/* The command line (SYS_GET_CMDLINE) into buf (cap bytes incl. the NUL); returns its length,
 * or -1 if the host gives none or it does not fit. */
long sh_cmdline(char *buf, size_t cap);

/* End QEMU with this exit code (SYS_EXIT_EXTENDED, ADP_Stopped_ApplicationExit). */
__attribute__((noreturn)) void sh_exit(uint32_t code);

/* Seconds since the Unix epoch (SYS_TIME) and centiseconds since QEMU started (SYS_CLOCK). */
uint32_t sh_time(void);
uint32_t sh_clock(void);

#endif /* HB_AN547_SEMIHOST_H */
