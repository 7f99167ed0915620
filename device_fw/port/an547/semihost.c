/* Arm semihosting calls (semihost.h). */
#include "semihost.h"

#include <string.h>

enum {
    SYS_CLOCK = 0x10,
    SYS_TIME = 0x11,
    SYS_WRITE0 = 0x04,
    SYS_GET_CMDLINE = 0x15,
    SYS_EXIT = 0x18,
    SYS_EXIT_EXTENDED = 0x20,
    ADP_STOPPED_APPLICATION_EXIT = 0x20026,
};

static uint32_t call(uint32_t op, const void *arg) {
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void sh_write0(const char *text) { call(SYS_WRITE0, text); }

void sh_line(const char *text, size_t n) {
    char line[257];
    if (n > sizeof line - 2) n = sizeof line - 2;
    memcpy(line, text, n);
    line[n] = '\n';
    line[n + 1] = 0;
    call(SYS_WRITE0, line);
}

long sh_cmdline(char *buf, size_t cap) {
    uint32_t block[2] = {(uint32_t)(uintptr_t)buf, (uint32_t)cap};
    if (cap == 0 || call(SYS_GET_CMDLINE, block) != 0) return -1;
    if (block[1] >= cap) return -1;
    buf[block[1]] = 0;
    return (long)block[1];
}

void sh_exit(uint32_t code) {
    uint32_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, code};
    call(SYS_EXIT_EXTENDED, block);
    /* a host without the extension: the plain exit (its status is 0 or 1 only) */
    call(SYS_EXIT, (const void *)(uintptr_t)(code ? 0x20024u : ADP_STOPPED_APPLICATION_EXIT));
    for (;;) __asm__ volatile("wfi");
}

uint32_t sh_time(void) { return call(SYS_TIME, NULL); }
uint32_t sh_clock(void) { return call(SYS_CLOCK, NULL); }
