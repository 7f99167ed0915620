/* Status of a core call: an ERROR code (gen/hb_wire.h, 0 = ok) and its message.
 *
 * Messages are formatted from templates declared once in Python (the generated HB_MSG_*
 * strings) with the subset of Python's %-formatting both sides implement: %d (decimal),
 * %x (lower-case hex), %s (string), %% ; an optional width with zero padding (%08x). Every
 * integer argument is an int64_t (HB_I), every string a pointer and length (HB_S / HB_SN),
 * so the C text equals Python's `template % args` byte for byte. The text is cut at
 * HB_STATUS_MAX bytes on a UTF-8 character boundary, as hilbench.protocol.spec does. */
#ifndef HB_STATUS_H
#define HB_STATUS_H

#include <stddef.h>
#include <stdint.h>

#define HB_STATUS_MAX 256 /* = the ERROR message limit of docs/protocol.md (MAX_ERROR_MSG) */

typedef struct {
    uint16_t code; /* 0 = ok, else an HB_ERR_* */
    uint16_t len;  /* bytes of msg */
    char msg[HB_STATUS_MAX];
} hb_status;

typedef struct {
    int64_t i;
    const char *s; /* NULL for an integer argument */
    size_t slen;
} hb_arg;

#define HB_I(x) ((hb_arg){(int64_t)(x), NULL, 0})
#define HB_S(str) ((hb_arg){0, (str), hb_strlen(str)})
#define HB_SN(ptr, n) ((hb_arg){0, (const char *)(ptr), (size_t)(n)})

size_t hb_strlen(const char *s);

/* Set st to (code, fmt % args); returns -1 so callers can `return hb_fail(...)`. */
int hb_fail(hb_status *st, uint16_t code, const char *fmt, const hb_arg *args, size_t n);

/* HB_FAIL(st, code, fmt, HB_I(a), HB_S(b), ...) counts its arguments; HB_FAIL0 takes none. */
#define HB_FAIL(st, code, fmt, ...)                                                            \
    hb_fail((st), (code), (fmt), (const hb_arg[]){__VA_ARGS__},                                 \
            sizeof((const hb_arg[]){__VA_ARGS__}) / sizeof(hb_arg))
#define HB_FAIL0(st, code, fmt) hb_fail((st), (code), (fmt), NULL, 0)

/* Format into buf (at most cap bytes, cut on a UTF-8 boundary); returns the length. */
size_t hb_format(char *buf, size_t cap, const char *fmt, const hb_arg *args, size_t n);

static inline void hb_status_clear(hb_status *st) { st->code = 0; st->len = 0; }

#endif /* HB_STATUS_H */
