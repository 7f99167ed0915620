/* The benchmark programs' command line and run, shared by the Linux program (host_main.c) and
 * the an547's (an547_main.c): bench_main.h. A bad option or file is one line on stderr naming
 * the cause and the fix, exit status 2; a refusal of the core is an `error` line, status 1. */
#define _GNU_SOURCE
#include "bench_main.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_bench.h"
#include "hb_cli.h"
#include "hb_port.h"
#include "hb_wire.h"

const char hb_cli_program[] = "hilbench-bench";

void hb_port_write(const uint8_t *data, size_t n) {
    if (fwrite(data, 1, n, stdout) != n) {
        fprintf(stderr, "hilbench-bench: cannot write the report: %s\n", strerror(errno));
        exit(1);
    }
}

/* the whole file in a 16-byte aligned buffer (at least 16 bytes); exits on failure */
static uint8_t *read_file(const hb_bench_main_port *port, const char *what, const char *path,
                          uint32_t *len) {
    char cause[512];
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(cause, sizeof cause, "cannot open the %s %.300s (%s)", what, path,
                 strerror(errno));
        hb_cli_usage_error(cause, port->open_fix);
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0 || size > port->max_file_bytes) {
        fclose(f);
        snprintf(cause, sizeof cause, "cannot size the %s %.300s", what, path);
        hb_cli_usage_error(cause, port->size_fix);
    }
    size_t cap = ((size_t)size + 15u) / 16u * 16u + 16u;
    uint8_t *buf = aligned_alloc(16, cap);
    if (!buf) hb_cli_usage_error("out of memory", port->memory_fix);
    memset(buf, 0, cap);
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        snprintf(cause, sizeof cause, "cannot read the %s %.300s", what, path);
        hb_cli_usage_error(cause, "give a readable regular file");
    }
    fclose(f);
    *len = (uint32_t)size;
    return buf;
}

static const char USAGE[] =
    "usage: hilbench-bench forward BLOB INPUT [--runs N]\n"
    "       hilbench-bench zo BLOB INPUTS LABELS [--q Q] [--batch B] [--eps E] [--runs N]\n"
    "                      [--item-runs N] [--seed S] [--no-scratch]\n"
    "       hilbench-bench kernels [--runs N]\n"
    "       hilbench-bench info\n";

int hb_bench_main(int argc, char **argv, const hb_bench_main_port *port) {
    /* the shared options, the port's, --help */
    const struct option long_opts[] = {
        {"runs", required_argument, NULL, 'r'},      {"q", required_argument, NULL, 'q'},
        {"batch", required_argument, NULL, 'b'},     {"eps", required_argument, NULL, 'e'},
        {"item-runs", required_argument, NULL, 'i'}, {"seed", required_argument, NULL, 's'},
        {"arena-bytes", required_argument, NULL, 'a'}, {"no-scratch", no_argument, NULL, 'n'},
        port->option,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint32_t runs = port->runs, item_runs = port->item_runs, arena_bytes = HB_DEFAULT_ARENA_BYTES;
    hb_bench_zo_args za = {.q = 4, .batch = 32, .eps = 2, .runs = port->zo_runs, .seed = 1,
                           .item_runs = 0, .split_stat = HB_BENCH_STAT_MIN};
    int runs_given = 0;
    int c;
    opterr = 0; /* our own one-line message below, not getopt's */
    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        if (c == port->option.val) {
            port->on_option(optarg, &za);
            continue;
        }
        switch (c) {
        case 'r':
            runs = (uint32_t)hb_cli_number("--runs", optarg, 1, HB_BENCH_MAX_RUNS);
            runs_given = 1;
            break;
        case 'q': za.q = (uint16_t)hb_cli_number("--q", optarg, 1, HB_MAX_Q); break;
        case 'b': za.batch = (uint16_t)hb_cli_number("--batch", optarg, 1, HB_MAX_BATCH); break;
        case 'e': za.eps = (uint16_t)hb_cli_number("--eps", optarg, 1, HB_MAX_EPS); break;
        case 'i':
            item_runs = (uint32_t)hb_cli_number("--item-runs", optarg, 1, HB_BENCH_MAX_RUNS);
            break;
        case 's': za.seed = (uint32_t)hb_cli_number("--seed", optarg, 0, UINT32_MAX); break;
        case 'a':
            arena_bytes = (uint32_t)hb_cli_number("--arena-bytes", optarg, 16, UINT32_MAX - 15);
            if (arena_bytes % 16)
                hb_cli_usage_error("--arena-bytes must be a multiple of 16", "give e.g. 4194304");
            break;
        case 'n': za.no_scratch = 1; break;
        case 'h':
            fputs(USAGE, stdout);
            printf("options of all: --arena-bytes N, %s\n", port->option_usage);
            return 0;
        default: {
            char cause[160];
            snprintf(cause, sizeof cause, "unknown option or missing value: %.100s",
                     argv[optind - 1]);
            hb_cli_usage_error(cause, "see hilbench-bench --help");
        }
        }
    }
    const char *unit = port->start();
    const int n_pos = argc - optind;
    const char *cmd = n_pos > 0 ? argv[optind] : "";
    const int forward = strcmp(cmd, "forward") == 0, zo = strcmp(cmd, "zo") == 0;
    if (strcmp(cmd, "info") == 0 && n_pos == 1) {
        hb_bench_report_build(unit);
        return 0;
    }
    if (strcmp(cmd, "kernels") == 0 && n_pos == 1) {
        hb_status kst;
        hb_bench_report_build(unit);
        if (hb_bench_kernels(runs_given ? runs : 3, &kst) < 0) {
            hb_bench_report_error(&kst);
            return 1;
        }
        return 0;
    }
    if (!forward && !zo)
        hb_cli_usage_error(n_pos ? "unknown command" : "no command",
                           "say `forward BLOB INPUT`, `zo BLOB INPUTS LABELS` or `info` (--help)");
    if ((forward && n_pos != 3) || (zo && n_pos != 4))
        hb_cli_usage_error(forward ? "forward takes BLOB INPUT" : "zo takes BLOB INPUTS LABELS",
                           "give those files, options anywhere (--help)");

    uint8_t *arena = aligned_alloc(16, arena_bytes);
    if (!arena) hb_cli_usage_error("cannot allocate the arena", "give a smaller --arena-bytes");
    uint32_t blob_len, n;
    uint8_t *blob = read_file(port, "model blob", argv[optind + 1], &blob_len);
    hb_status st;
    hb_bench_report_build(unit);
    if (forward) {
        uint8_t *input = read_file(port, "input", argv[optind + 2], &n);
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
    uint8_t *inputs = read_file(port, "inputs", argv[optind + 2], &n);
    uint8_t *labels = read_file(port, "labels", argv[optind + 3], &n_labels);
    if (n_labels == 0 || n % n_labels || n / n_labels > UINT16_MAX)
        hb_cli_usage_error("the inputs are not a whole number of items, one per label",
                           "write n items of the model's input size and n label bytes");
    /* n_classes 0: the model's output size (the file has no data-blob header to say it) */
    hb_slot slot = {(const int8_t *)inputs, labels, n_labels, (uint16_t)(n / n_labels), 0, 0};
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
