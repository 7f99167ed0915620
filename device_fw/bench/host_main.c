/* hilbench-bench: the firmware core's benchmarks (bench/bench.c) as a Linux program.
 *
 *   hilbench-bench forward BLOB INPUT [--runs N]
 *       load a model blob, time N forward passes on one input item (raw int8 bytes, the
 *       model's input size); print the times and the output
 *   hilbench-bench zo BLOB INPUTS LABELS [--q Q] [--batch B] [--eps E] [--runs N]
 *                  [--item-runs N] [--seed S]
 *       a ZO model blob (LOSS section, ZOCF if any) and a data set (INPUTS: raw int8 items of
 *       the model's input size back to back; LABELS: one byte per item): time the forward
 *       pass, the loss, the PRNG's parts, PROBE and APPLY, and print their split
 *   hilbench-bench info
 *       only the build line (compiler, flags, clock)
 *   common options: --arena-bytes N (default HB_DEFAULT_ARENA_BYTES, the SIL's);
 *   --clock monotonic|thread: ticks are nanoseconds of CLOCK_MONOTONIC (default: elapsed
 *   time), or of CLOCK_THREAD_CPUTIME_ID (the CPU time of this thread only: on a machine
 *   shared with other work, time the process spends descheduled does not count; on a VM it
 *   may also under-count a short run, so the ZO split then uses each part's median run, not
 *   its fastest)
 *
 * Output: the report lines of bench/hb_bench.h on stdout, first `build ...`. A bad option or
 * file is one line on stderr naming the cause and the fix, exit status 2; a refusal of the
 * core is an `error` line, exit status 1. The command line is bench_main.c's; this file holds
 * the clock and --clock. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "bench_main.h"
#include "hb_cli.h"
#include "hb_port.h"

static clockid_t bench_clock = CLOCK_MONOTONIC;
static const char *clock_unit = "ns (CLOCK_MONOTONIC)";

/* ---- the HAL the bench uses ---------------------------------------------------------------- */

uint64_t hb_port_ticks(void) {
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- --clock ------------------------------------------------------------------------------- */

static void clock_option(const char *value, hb_bench_zo_args *za) {
    if (strcmp(value, "thread") == 0) {
        bench_clock = CLOCK_THREAD_CPUTIME_ID;
        clock_unit = "ns (CLOCK_THREAD_CPUTIME_ID)";
        za->split_stat = HB_BENCH_STAT_MEDIAN;
    } else if (strcmp(value, "monotonic") != 0) {
        hb_cli_usage_error("--clock takes monotonic or thread", "say --clock thread");
    }
}

static const char *start(void) { return clock_unit; }

int main(int argc, char **argv) {
    static const hb_bench_main_port port = {
        .runs = 100,
        .item_runs = 200,
        .zo_runs = 5,
        .option = {"clock", required_argument, NULL, 'c'},
        .on_option = clock_option,
        .option_usage = "--clock monotonic|thread",
        .start = start,
        .open_fix = "name an existing, readable file",
        .max_file_bytes = (long)UINT32_MAX - 16,
        .size_fix = "give a regular file under 4 GiB",
        .memory_fix = "give smaller files",
    };
    return hb_bench_main(argc, argv, &port);
}
