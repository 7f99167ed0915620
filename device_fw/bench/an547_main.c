/* hilbench-bench on the an547 under QEMU: the firmware core's benchmarks (bench/bench.c) on
 * the Cortex-M55, with executed instructions as ticks.
 *
 *   qemu-system-arm -M mps3-an547 -icount shift=S -semihosting-config enable=on,target=native,
 *       arg=hilbench-bench,arg=forward,arg=BLOB,arg=INPUT,arg=--runs,arg=N,arg=--icount-shift,arg=S
 *       -kernel build/an547/hilbench-bench-an547.elf
 *
 * The commands and options are the Linux program's (bench_main.c, shared): `forward BLOB INPUT
 * [--runs N]`, `zo BLOB INPUTS LABELS [--q Q] [--batch B] [--eps E] [--runs N] [--item-runs N]
 * [--seed S]`, `info`, and --arena-bytes N; files are read through semihosting (newlib's
 * stdio, librdimon), the report goes to QEMU's stdout.
 *
 * Ticks: with `-icount shift=S` QEMU's virtual clock advances 2^S ns per executed
 * instruction, and SysTick counts the 32 MHz CPU clock (AN547_SYSCLK_HZ) on that clock: one
 * SysTick tick is 31.25 / 2^S instructions. --icount-shift S (default 0) names the S QEMU
 * runs with, and hb_port_ticks returns instructions: SysTick ticks x 31.25 / 2^S (shift 5: a
 * tick per 0.98 instructions, so a count is exact to about one instruction). The unit is
 * reported as instructions, never as time. */
#include <stdint.h>
#include <stdio.h>

#include "an547.h"
#include "bench_main.h"
#include "board.h"
#include "hb_cli.h"
#include "hb_port.h"

_Static_assert(4000000000ull % AN547_SYSCLK_HZ == 0, "ns per SysTick tick in quarters (31.25 ns)");
#define QUARTER_NS_PER_TICK ((uint32_t)(4000000000ull / AN547_SYSCLK_HZ)) /* 125 at 32 MHz */

static unsigned icount_shift; /* QEMU's -icount shift */

/* ---- the HAL the bench uses ---------------------------------------------------------------- */

/* executed instructions: SysTick ticks x (ns per tick) / (ns per instruction) */
uint64_t hb_port_ticks(void) {
    return (hb_an547_ticks() * QUARTER_NS_PER_TICK) >> (2u + icount_shift);
}

/* ---- --icount-shift and the clock's start ------------------------------------------------- */

static void icount_option(const char *value, hb_bench_zo_args *za) {
    (void)za;
    icount_shift = (unsigned)hb_cli_number("--icount-shift", value, 0, 10);
}

static const char *start(void) {
    static char unit[96];
    snprintf(unit, sizeof unit, "instructions (QEMU -icount shift=%u)", icount_shift);
    hb_an547_systick_init();
    cm_irq_enable(); /* the SysTick wrap interrupt extends the 24-bit count */
    return unit;
}

int main(int argc, char **argv) {
    static const hb_bench_main_port port = {
        .runs = 5,
        .item_runs = 5,
        .zo_runs = 1,
        .option = {"icount-shift", required_argument, NULL, 'k'},
        .on_option = icount_option,
        .option_usage = "--icount-shift S (QEMU's -icount shift, default 0)",
        .start = start,
        .open_fix = "name an existing file QEMU can read (an absolute path)",
        .max_file_bytes = INT32_MAX - 32,
        .size_fix = "give a regular file under 2 GiB",
        .memory_fix = "give smaller files (the heap is 64 MiB of DDR)",
    };
    return hb_bench_main(argc, argv, &port);
}
