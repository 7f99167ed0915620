/* hilbench-bench on the an547 under QEMU: the firmware core's benchmarks (bench/bench.c) on
 * the Cortex-M55, with executed instructions as ticks.
 *
 *   qemu-system-arm -M mps3-an547 -icount shift=S -semihosting-config enable=on,target=native,
 *       arg=hilbench-bench,arg=forward,arg=BLOB,arg=INPUT,arg=--runs,arg=N,arg=--icount-shift,arg=S
 *       -kernel build/an547/hilbench-bench-an547.elf
 *
 * The commands and options are the Linux program's (bench/host_main.c): `forward BLOB INPUT
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
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an547.h"
#include "board.h"
#include "hb_bench.h"
#include "hb_port.h"
#include "hb_wire.h"

_Static_assert(4000000000ull % AN547_SYSCLK_HZ == 0, "ns per SysTick tick in quarters (31.25 ns)");
#define QUARTER_NS_PER_TICK ((uint32_t)(4000000000ull / AN547_SYSCLK_HZ)) /* 125 at 32 MHz */

static unsigned icount_shift; /* QEMU's -icount shift */

/* ---- the HAL the bench uses ---------------------------------------------------------------- */

/* executed instructions: SysTick ticks x (ns per tick) / (ns per instruction) */
uint64_t hb_port_ticks(void) {
    return (hb_an547_ticks() * QUARTER_NS_PER_TICK) >> (2u + icount_shift);
}

void hb_port_write(const uint8_t *data, size_t n) {
    if (fwrite(data, 1, n, stdout) != n) {
        fprintf(stderr, "hilbench-bench: cannot write the report: %s\n", strerror(errno));
        exit(1);
    }
}

/* ---- options and files --------------------------------------------------------------------- */

static void usage_error(const char *cause, const char *fix) {
    fprintf(stderr, "hilbench-bench: %s: %s\n", cause, fix);
    exit(2);
}

static uint64_t parse_number(const char *opt, const char *text, uint64_t lo, uint64_t hi) {
    char cause[256];
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || !end || *end || !*text || text[0] == '-') {
        snprintf(cause, sizeof cause, "%s %.40s is not a number", opt, text);
        usage_error(cause, "give a decimal or 0x-hex integer");
    }
    if (v < lo || v > hi) {
        snprintf(cause, sizeof cause, "%s %.40s is outside %llu..%llu", opt, text,
                 (unsigned long long)lo, (unsigned long long)hi);
        usage_error(cause, "give a value in that range");
    }
    return (uint64_t)v;
}

/* the whole file (semihosting) in a 16-byte aligned buffer (at least 16 bytes) */
static uint8_t *read_file(const char *what, const char *path, uint32_t *len) {
    char cause[512];
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(cause, sizeof cause, "cannot open the %s %.300s (%s)", what, path,
                 strerror(errno));
        usage_error(cause, "name an existing file QEMU can read (an absolute path)");
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0 || size > INT32_MAX - 32) {
        fclose(f);
        snprintf(cause, sizeof cause, "cannot size the %s %.300s", what, path);
        usage_error(cause, "give a regular file under 2 GiB");
    }
    size_t cap = ((size_t)size + 15u) / 16u * 16u + 16u;
    uint8_t *buf = aligned_alloc(16, cap);
    if (!buf) usage_error("out of memory", "give smaller files (the heap is 64 MiB of DDR)");
    memset(buf, 0, cap);
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        snprintf(cause, sizeof cause, "cannot read the %s %.300s", what, path);
        usage_error(cause, "give a readable regular file");
    }
    fclose(f);
    *len = (uint32_t)size;
    return buf;
}

static const struct option LONG_OPTS[] = {
    {"runs", required_argument, NULL, 'r'},      {"q", required_argument, NULL, 'q'},
    {"batch", required_argument, NULL, 'b'},     {"eps", required_argument, NULL, 'e'},
    {"item-runs", required_argument, NULL, 'i'}, {"seed", required_argument, NULL, 's'},
    {"arena-bytes", required_argument, NULL, 'a'}, {"icount-shift", required_argument, NULL, 'k'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char USAGE[] =
    "usage: hilbench-bench forward BLOB INPUT [--runs N]\n"
    "       hilbench-bench zo BLOB INPUTS LABELS [--q Q] [--batch B] [--eps E] [--runs N]\n"
    "                      [--item-runs N] [--seed S]\n"
    "       hilbench-bench info\n"
    "options of all: --arena-bytes N, --icount-shift S (QEMU's -icount shift, default 0)\n";

int main(int argc, char **argv) {
    uint32_t runs = 5, item_runs = 5, arena_bytes = HB_DEFAULT_ARENA_BYTES;
    hb_bench_zo_args za = {.q = 4, .batch = 32, .eps = 2, .runs = 1, .seed = 1, .item_runs = 0,
                           .split_stat = HB_BENCH_STAT_MIN};
    int runs_given = 0;
    int c;
    opterr = 0; /* our own one-line message below, not getopt's */
    while ((c = getopt_long(argc, argv, "h", LONG_OPTS, NULL)) != -1) {
        switch (c) {
        case 'r':
            runs = (uint32_t)parse_number("--runs", optarg, 1, HB_BENCH_MAX_RUNS);
            runs_given = 1;
            break;
        case 'q': za.q = (uint16_t)parse_number("--q", optarg, 1, HB_MAX_Q); break;
        case 'b': za.batch = (uint16_t)parse_number("--batch", optarg, 1, HB_MAX_BATCH); break;
        case 'e': za.eps = (uint16_t)parse_number("--eps", optarg, 1, HB_MAX_EPS); break;
        case 'i':
            item_runs = (uint32_t)parse_number("--item-runs", optarg, 1, HB_BENCH_MAX_RUNS);
            break;
        case 's': za.seed = (uint32_t)parse_number("--seed", optarg, 0, UINT32_MAX); break;
        case 'a':
            arena_bytes = (uint32_t)parse_number("--arena-bytes", optarg, 16, UINT32_MAX - 15);
            if (arena_bytes % 16)
                usage_error("--arena-bytes must be a multiple of 16", "give e.g. 4194304");
            break;
        case 'k': icount_shift = (unsigned)parse_number("--icount-shift", optarg, 0, 10); break;
        case 'h': fputs(USAGE, stdout); return 0;
        default: {
            char cause[160];
            snprintf(cause, sizeof cause, "unknown option or missing value: %.100s",
                     argv[optind - 1]);
            usage_error(cause, "see hilbench-bench --help");
        }
        }
    }
    char unit[96];
    snprintf(unit, sizeof unit, "instructions (QEMU -icount shift=%u)", icount_shift);
    hb_an547_systick_init();
    an547_irq_enable(); /* the SysTick wrap interrupt extends the 24-bit count */
    const int n_pos = argc - optind;
    const char *cmd = n_pos > 0 ? argv[optind] : "";
    const int forward = strcmp(cmd, "forward") == 0, zo = strcmp(cmd, "zo") == 0;
    if (strcmp(cmd, "info") == 0 && n_pos == 1) {
        hb_bench_report_build(unit);
        return 0;
    }
    if (!forward && !zo)
        usage_error(n_pos ? "unknown command" : "no command",
                    "say `forward BLOB INPUT`, `zo BLOB INPUTS LABELS` or `info` (--help)");
    if ((forward && n_pos != 3) || (zo && n_pos != 4))
        usage_error(forward ? "forward takes BLOB INPUT" : "zo takes BLOB INPUTS LABELS",
                    "give those files, options anywhere (--help)");

    uint8_t *arena = aligned_alloc(16, arena_bytes);
    if (!arena) usage_error("cannot allocate the arena", "give a smaller --arena-bytes");
    uint32_t blob_len, n;
    uint8_t *blob = read_file("model blob", argv[optind + 1], &blob_len);
    hb_status st;
    hb_bench_report_build(unit);
    if (forward) {
        uint8_t *input = read_file("input", argv[optind + 2], &n);
        hb_bench_forward_result r;
        if (hb_bench_forward(blob, blob_len, arena, arena_bytes, (const int8_t *)input, n, runs,
                             &r, &st) < 0) {
            hb_bench_report_error(&st);
            return 1;
        }
        hb_bench_report_forward(&r);
        return 0;
    }
    uint32_t n_labels;
    uint8_t *inputs = read_file("inputs", argv[optind + 2], &n);
    uint8_t *labels = read_file("labels", argv[optind + 3], &n_labels);
    if (n_labels == 0 || n % n_labels || n / n_labels > UINT16_MAX)
        usage_error("the inputs are not a whole number of items, one per label",
                    "write n items of the model's input size and n label bytes");
    hb_slot slot = {(const int8_t *)inputs, labels, n_labels, (uint16_t)(n / n_labels), 0};
    za.runs = runs_given ? runs : za.runs;
    za.item_runs = item_runs;
    hb_bench_zo_result r;
    if (hb_bench_zo(blob, blob_len, arena, arena_bytes, &slot, &za, &r, &st) < 0) {
        hb_bench_report_error(&st);
        return 1;
    }
    hb_bench_report_zo(&za, &r);
    return 0;
}
