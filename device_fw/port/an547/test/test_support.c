/* Support for the C unit tests (device_fw/tests/test_*.c) on the an547 under QEMU: newlib's
 * stdio and files through semihosting (librdimon), malloc's heap in DDR (the linker script's
 * .heap), exit codes through SYS_EXIT_EXTENDED, and scandir() over the names make listed. */
#define _DEFAULT_SOURCE /* scandir, alphasort */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an547.h"
#include "semihost.h"

#ifndef HB_AN547_DIR_NAMES
#define HB_AN547_DIR_NAMES ""
#endif

void initialise_monitor_handles(void);
void *_sbrk(ptrdiff_t incr);
void _fini(void);
int posix_memalign(void **out, size_t align, size_t size);
void *memalign(size_t align, size_t size);

extern uint8_t __heap_start[], __heap_end[];

void hb_an547_pre_main(void) { initialise_monitor_handles(); }

void hb_an547_exit(int code) {
    fflush(stdout);
    fflush(stderr);
    sh_exit((uint32_t)code);
}

/* newlib's malloc grows the heap here: [__heap_start, __heap_end) in DDR */
void *_sbrk(ptrdiff_t incr) {
    static uint8_t *brk = __heap_start;
    if (incr < 0 || (size_t)incr > (size_t)(__heap_end - brk)) {
        errno = ENOMEM;
        return (void *)-1;
    }
    uint8_t *old = brk;
    brk += incr;
    return old;
}

/* newlib's exit() calls it (crti.o's, which -nostartfiles leaves out): no .fini code here */
void _fini(void) {}

/* aligned_alloc() calls it and newlib has none: its memalign() does the work */
int posix_memalign(void **out, size_t align, size_t size) {
    void *p = memalign(align, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

int alphasort(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int sort_entries(const void *a, const void *b) {
    return alphasort((const struct dirent **)a, (const struct dirent **)b);
}

int scandir(const char *dir, struct dirent ***namelist, int (*filter)(const struct dirent *),
            int (*compar)(const struct dirent **, const struct dirent **)) {
    (void)compar; /* alphasort: the only order the tests ask for */
    const char *names = HB_AN547_DIR_NAMES;
    size_t cap = 1;
    for (const char *p = names; *p; p++) cap += *p == ':';
    struct dirent **out = calloc(cap, sizeof *out);
    int n = 0;
    for (const char *p = names; out && *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        struct dirent *e = calloc(1, sizeof *e);
        if (e && len && len < sizeof e->d_name) {
            memcpy(e->d_name, p, len);
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            FILE *f = fopen(path, "rb");
            if (f) fclose(f);
            if (f && (!filter || filter(e))) {
                out[n++] = e;
                e = NULL;
            }
        }
        free(e);
        p += len + (end ? 1 : 0);
    }
    if (!out) return -1;
    qsort(out, (size_t)n, sizeof *out, sort_entries);
    *namelist = out;
    return n;
}
