/* hb_fail / hb_format: the message formatter shared by every core module (see hb_status.h). */
#include "hb_status.h"

size_t hb_strlen(const char *s) {
    size_t n = 0;
    if (s)
        while (s[n]) n++;
    return n;
}

typedef struct {
    char *buf;
    size_t cap, len;
    int full;
} sink;

static void put(sink *o, char c) {
    if (o->len < o->cap) o->buf[o->len++] = c;
    else o->full = 1;
}

static void put_uint(sink *o, uint64_t v, unsigned base, unsigned width) {
    char tmp[24];
    unsigned n = 0;
    do {
        unsigned d = (unsigned)(v % base);
        tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v /= base;
    } while (v);
    while (n < width && n < sizeof tmp) tmp[n++] = '0';
    while (n) put(o, tmp[--n]);
}

static void put_int(sink *o, int64_t v, unsigned base, unsigned width) {
    /* magnitude in unsigned arithmetic: no overflow at INT64_MIN */
    uint64_t mag = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
    if (v < 0) {
        put(o, '-');
        if (width) width--; /* Python counts the sign in the width */
    }
    put_uint(o, mag, base, width);
}

/* cut at a UTF-8 boundary: drop a trailing partial character */
static size_t utf8_cut(const char *buf, size_t len) {
    size_t i = len;
    size_t back = 0;
    while (i > 0 && back < 4 && ((unsigned char)buf[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0) return len;
    unsigned char lead = (unsigned char)buf[i - 1];
    size_t need = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 1;
    if (lead >= 0x80 && back + 1 < need) return i - 1; /* incomplete sequence at the end */
    return len;
}

size_t hb_format(char *buf, size_t cap, const char *fmt, const hb_arg *args, size_t n) {
    sink o = {buf, cap, 0, 0};
    size_t next = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            put(&o, *p);
            continue;
        }
        p++;
        if (*p == '%') {
            put(&o, '%');
            continue;
        }
        unsigned width = 0;
        while (*p >= '0' && *p <= '9') width = width * 10 + (unsigned)(*p++ - '0');
        if (width > 20) width = 20;
        const hb_arg *a = next < n ? &args[next] : NULL;
        next++;
        switch (*p) {
        case 'd': put_int(&o, a ? a->i : 0, 10, width); break;
        case 'x': put_int(&o, a ? a->i : 0, 16, width); break;
        case 's':
            if (a && a->s)
                for (size_t i = 0; i < a->slen; i++) put(&o, a->s[i]);
            break;
        case '\0': p--; break; /* a lone % at the end: nothing */
        default: put(&o, '%'); put(&o, *p); break;
        }
    }
    return o.full ? utf8_cut(buf, o.len) : o.len;
}

int hb_fail(hb_status *st, uint16_t code, const char *fmt, const hb_arg *args, size_t n) {
    st->code = code;
    st->len = (uint16_t)hb_format(st->msg, sizeof st->msg, fmt, args, n);
    return -1;
}
