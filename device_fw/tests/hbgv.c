/* HBGV reader and the check harness's helpers (see hbgv.h, check.h). Test support only:
 * uses malloc and stdio, which the core never does. */
#include "hbgv.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>

int hb_check_failures = 0;
int hb_check_count = 0;

int hb_check_bytes(const char *what, const void *got, const void *want, size_t n,
                   const char *file, int line) {
    const uint8_t *g = got, *w = want;
    int shown = 0;
    size_t bad = 0;
    hb_check_count++;
    for (size_t i = 0; i < n; i++) {
        if (g[i] != w[i]) {
            if (shown < 8) {
                fprintf(stderr, "%s:%d: %s: byte %zu is 0x%02x, expected 0x%02x\n", file, line,
                        what, i, g[i], w[i]);
                shown++;
            }
            bad++;
        }
    }
    if (bad) {
        fprintf(stderr, "%s:%d: %s: %zu of %zu bytes differ\n", file, line, what, bad, n);
        hb_check_failures++;
        return 0;
    }
    return 1;
}

static void die(const char *path, const char *what) {
    fprintf(stderr, "golden vectors %s: %s (regenerate with the scripts in fixtures/golden)\n",
            path, what);
    exit(2);
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void hbgv_load(hbgv_file *f, const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "rb");
    if (!fp) die(path, "cannot open");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (size < 12) die(path, "too short");
    f->buf = malloc((size_t)size);
    f->size = (size_t)size;
    if (!f->buf || fread(f->buf, 1, (size_t)size, fp) != (size_t)size) die(path, "read failed");
    fclose(fp);
    if (memcmp(f->buf, "HBGV", 4) != 0 || rd32(f->buf + 4) != 1) die(path, "not HBGV version 1");
    f->count = rd32(f->buf + 8);
    f->arrays = calloc(f->count ? f->count : 1, sizeof(hbgv_array));
    size_t pos = 12;
    for (uint32_t k = 0; k < f->count; k++) {
        hbgv_array *a = &f->arrays[k];
        if (pos + 2 > f->size) die(path, "truncated record");
        unsigned nl = (unsigned)f->buf[pos] | (unsigned)f->buf[pos + 1] << 8;
        pos += 2;
        if (nl >= sizeof a->name || pos + nl + 2 > f->size) die(path, "bad name");
        memcpy(a->name, f->buf + pos, nl);
        a->name[nl] = 0;
        pos += nl;
        a->dtype = f->buf[pos];
        a->rank = f->buf[pos + 1];
        pos += 2;
        if (a->dtype > HBGV_U64 || a->rank > 8 || pos + 4u * a->rank + 4 > f->size)
            die(path, "bad dtype or rank");
        for (unsigned d = 0; d < a->rank; d++) a->dims[d] = rd32(f->buf + pos + 4 * d);
        pos += 4u * a->rank;
        a->nbytes = rd32(f->buf + pos);
        pos += 4;
        pos = (pos + 3) & ~(size_t)3; /* data starts 4-byte aligned */
        if (pos + a->nbytes > f->size) die(path, "data runs past the end");
        a->data = f->buf + pos;
        pos += a->nbytes;
        pos = (pos + 3) & ~(size_t)3;
        static const uint32_t size_of[] = {1, 1, 2, 2, 4, 4, 8, 8};
        if ((uint64_t)hbgv_elems(a) * size_of[a->dtype] != a->nbytes) die(path, a->name);
    }
}

void hbgv_free(hbgv_file *f) {
    free(f->buf);
    free(f->arrays);
    f->buf = NULL;
    f->arrays = NULL;
}

const hbgv_array *hbgv_find(const hbgv_file *f, const char *name) {
    for (uint32_t k = 0; k < f->count; k++)
        if (strcmp(f->arrays[k].name, name) == 0) return &f->arrays[k];
    return NULL;
}

const hbgv_array *hbgv_need(const hbgv_file *f, const char *name) {
    const hbgv_array *a = hbgv_find(f, name);
    if (!a) die(name, "array missing");
    return a;
}

uint32_t hbgv_elems(const hbgv_array *a) {
    uint32_t n = 1;
    for (unsigned d = 0; d < a->rank; d++) n *= a->dims[d];
    return n;
}

int64_t hbgv_get(const hbgv_array *a, uint32_t i) {
    const uint8_t *p = a->data;
    switch (a->dtype) {
    case HBGV_I8: return (int8_t)p[i];
    case HBGV_U8: return p[i];
    case HBGV_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case HBGV_U16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case HBGV_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case HBGV_U32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case HBGV_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    default: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (int64_t)v; }
    }
}
