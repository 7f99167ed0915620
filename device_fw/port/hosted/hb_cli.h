/* The command line of the programs that have a C library's stdio: the SIL (port/host) and the
 * benchmark programs (bench/). A user's mistake is one line on stderr, "<program>: <cause>:
 * <fix>", and exit status 2. */
#ifndef HB_CLI_H
#define HB_CLI_H

#include <stdint.h>

/* the program's name, the start of each line; each program defines it */
extern const char hb_cli_program[];

/* "<program>: <cause>: <fix>" on stderr, then exit(2) */
__attribute__((noreturn)) void hb_cli_usage_error(const char *cause, const char *fix);

/* The decimal or 0x-hex integer text, the value of option opt, within lo..hi; a usage error
 * naming opt otherwise. */
uint64_t hb_cli_number(const char *opt, const char *text, uint64_t lo, uint64_t hi);

#endif /* HB_CLI_H */
