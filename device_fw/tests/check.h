/* A minimal test harness: CHECK(cond, fmt, ...) counts failures and prints each one;
 * CHECK_BYTES compares buffers and prints the first mismatches; TEST_MAIN_END returns
 * non-zero when anything failed. One test program per tests/test_<module>.c. */
#ifndef HB_CHECK_H
#define HB_CHECK_H

#include <stdio.h>
#include <stdint.h>
#include <string.h>

extern int hb_check_failures;
extern int hb_check_count;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        hb_check_count++;                                                                      \
        if (!(cond)) {                                                                         \
            hb_check_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

/* exact comparison of n bytes; prints up to 8 mismatching offsets */
int hb_check_bytes(const char *what, const void *got, const void *want, size_t n,
                   const char *file, int line);
#define CHECK_BYTES(what, got, want, n) hb_check_bytes((what), (got), (want), (n), __FILE__, __LINE__)

#define TEST_MAIN_END(name)                                                                    \
    do {                                                                                       \
        printf("%s: %d checks, %d failed\n", (name), hb_check_count, hb_check_failures);      \
        return hb_check_failures ? 1 : 0;                                                      \
    } while (0)

#endif
