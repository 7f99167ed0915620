/* Reset, the vector table and the C runtime's start on the AN547 (Zephyr's reset.S / prep_c.c
 * split): Reset_Handler, in assembly, enables the FPU and MVE (CP10/CP11) and sets the stack
 * limit before any compiled C runs, since the compiler may use FP and Helium registers
 * anywhere (CM_RESET_COMMON_ASM); hb_an547_prep_c then copies .data, and cm_start_c zeroes
 * .bss, points VTOR at the table and runs the constructors (.init_array); then it reads the
 * command line and runs main(argc, argv). Faults and unexpected interrupts go to the fault
 * handler (port/cortex_m/fault.c, port/an547/fault.c). */
#include <stdint.h>
#include <string.h>

#include "an547.h"
#include "board.h"
#include "semihost.h"

extern uint32_t __stack_top[], __data_start[], __data_end[], __data_load[];

int main(int argc, char **argv);
void hb_an547_prep_c(void);

/* the table: initial stack pointer, 15 system exceptions, AN547_N_IRQ interrupts */
typedef CM_VECTOR_TABLE(AN547_N_IRQ) hb_vector_table;

#define FAULT cm_fault_entry
__attribute__((section(".vectors"), used)) const hb_vector_table hb_an547_vectors = {
    .initial_sp = __stack_top,
    .system = CM_SYSTEM_VECTORS,
    .irq =
        {
            [0 ... AN547_UART0_RX_IRQ - 1] = FAULT,
            [AN547_UART0_RX_IRQ] = hb_an547_uart_rx_isr,
            [AN547_UART0_RX_IRQ + 1 ... AN547_N_IRQ - 1] = FAULT,
        },
};

/* Runs before any compiled C: the common steps (cortex_m.h), then C. */
__attribute__((naked, noreturn)) void Reset_Handler(void) {
    __asm volatile(CM_RESET_COMMON_ASM "b hb_an547_prep_c\n"
                                       ".ltorg\n");
}

/* the command line as argv (semihost.h; %XX escapes decoded in place) */
#define CMDLINE_BYTES 1024
#define MAX_ARGS 32
static char cmdline[CMDLINE_BYTES];
static char *args[MAX_ARGS + 1];

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void unescape(char *s) {
    char *out = s;
    for (; *s; s++) {
        int hi, lo;
        if (s[0] == '%' && (hi = hexval(s[1])) >= 0 && (lo = hexval(s[2])) >= 0) {
            *out++ = (char)(hi * 16 + lo);
            s += 2;
        } else {
            *out++ = *s;
        }
    }
    *out = 0;
}

static int split_args(void) {
    static char name[] = "hilbench-an547";
    int argc = 0;
    if (sh_cmdline(cmdline, sizeof cmdline) >= 0) {
        for (char *p = cmdline; *p && argc < MAX_ARGS;) {
            while (*p == ' ') *p++ = 0;
            if (!*p) break;
            args[argc++] = p;
            while (*p && *p != ' ') p++;
        }
    }
    for (int i = 0; i < argc; i++) unescape(args[i]);
    if (argc == 0) args[argc++] = name;
    args[argc] = 0;
    return argc;
}

__attribute__((weak)) void hb_an547_pre_main(void) {}
__attribute__((weak, noreturn)) void hb_an547_exit(int code) { sh_exit((uint32_t)code); }

__attribute__((noreturn, used)) void hb_an547_prep_c(void) {
    memcpy(__data_start, __data_load, (size_t)((uint8_t *)__data_end - (uint8_t *)__data_start));
    cm_start_c(&hb_an547_vectors);
    hb_an547_pre_main();
    int argc = split_args();
    hb_an547_exit(main(argc, args));
}
