/* The command line's errors and numbers for the programs with stdio (hb_cli.h). */
#include "hb_cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void hb_cli_usage_error(const char *cause, const char *fix) {
    fprintf(stderr, "%s: %s: %s\n", hb_cli_program, cause, fix);
    exit(2);
}

uint64_t hb_cli_number(const char *opt, const char *text, uint64_t lo, uint64_t hi) {
    char cause[256];
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || !end || *end || !*text || text[0] == '-') {
        snprintf(cause, sizeof cause, "%s %.40s is not a number", opt, text);
        hb_cli_usage_error(cause, "give a decimal or 0x-hex integer");
    }
    if (v < lo || v > hi) {
        snprintf(cause, sizeof cause, "%s %.40s is outside %llu..%llu", opt, text,
                 (unsigned long long)lo, (unsigned long long)hi);
        hb_cli_usage_error(cause, "give a value in that range");
    }
    return (uint64_t)v;
}
