/* The benchmark programs' shared command line and run (bench_main.c): options, files,
 * commands. A port's bench main (host_main.c, an547_main.c) gives its clock, its one option of
 * its own and its defaults, and calls hb_bench_main. */
#ifndef HB_BENCH_MAIN_H
#define HB_BENCH_MAIN_H

#include <getopt.h>
#include <stdint.h>

#include "hb_bench.h"

typedef struct {
    uint32_t runs;      /* --runs default (forward) */
    uint32_t item_runs; /* --item-runs default (zo) */
    uint32_t zo_runs;   /* --runs default (zo) */
    /* the port's own option (its val not one of "rqbeisah") and what it does with the value */
    struct option option;
    void (*on_option)(const char *value, hb_bench_zo_args *za);
    const char *option_usage; /* its text in the usage's "options of all" line */
    /* after the options: start the port's clock; the ticks' unit for the build line */
    const char *(*start)(void);
    /* reading a file: the fix for one that does not open, the largest size and the fix for a
     * larger one, the fix when the memory runs out */
    const char *open_fix;
    long max_file_bytes;
    const char *size_fix;
    const char *memory_fix;
} hb_bench_main_port;

/* The program: `forward BLOB INPUT`, `zo BLOB INPUTS LABELS` or `info` with the options; the
 * report on stdout (hb_bench.h); returns main()'s exit status (a usage error exits with 2). */
int hb_bench_main(int argc, char **argv, const hb_bench_main_port *port);

#endif /* HB_BENCH_MAIN_H */
