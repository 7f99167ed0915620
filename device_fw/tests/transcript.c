/* The transcript reader (transcript.h). */
#define _DEFAULT_SOURCE /* scandir, alphasort */
#include "transcript.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hb_transcript_open(hb_transcript *t, const char *path) {
    memset(t, 0, sizeof *t);
    t->path = path;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open (python fixtures/golden/make_transcripts.py writes it)\n",
                path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    t->text = malloc((size_t)n + 1);
    if (!t->text || fread(t->text, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        fprintf(stderr, "%s: cannot read\n", path);
        return -1;
    }
    fclose(f);
    t->text[n] = 0;
    t->size = (size_t)n;
    return 0;
}

void hb_transcript_close(hb_transcript *t) {
    free(t->text);
    free(t->buf);
    memset(t, 0, sizeof *t);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* hex digits of s[0..len) into t->buf; -1 if odd or not hex */
static long unhex(hb_transcript *t, const char *s, size_t len) {
    if (len % 2) return -1;
    if (len / 2 + 1 > t->cap) {
        t->cap = len / 2 + 1024;
        t->buf = realloc(t->buf, t->cap);
        if (!t->buf) return -1;
    }
    for (size_t i = 0; i < len; i += 2) {
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0) return -1;
        t->buf[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    return (long)(len / 2);
}

static int bad(hb_transcript *t, const char *why) {
    fprintf(stderr, "%s:%d: %s\n", t->path, t->line_no, why);
    return -1;
}

int hb_transcript_next(hb_transcript *t, hb_tline *l) {
    while (t->pos < t->size) {
        char *line = t->text + t->pos;
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : t->size - t->pos;
        t->pos += len + (end ? 1 : 0);
        t->line_no++;
        if (len && line[len - 1] == '\r') len--;
        if (len == 0 || line[0] == '#') continue;
        memset(l, 0, sizeof *l);
        l->kind = line[0];
        l->line_no = t->line_no;
        const char *rest = len > 2 ? line + 2 : line + len;
        size_t rlen = len > 2 ? len - 2 : 0;
        if (len >= 2 && line[1] != ' ') return bad(t, "no space after the line's kind");
        switch (l->kind) {
        case '!': {
            const char *sp = memchr(rest, ' ', rlen);
            size_t klen = sp ? (size_t)(sp - rest) : rlen;
            if (klen == 0 || klen >= sizeof l->key) return bad(t, "bad configuration key");
            memcpy(l->key, rest, klen);
            size_t vlen = sp ? rlen - klen - 1 : 0;
            if (vlen >= sizeof l->value) return bad(t, "configuration value too long");
            if (sp) memcpy(l->value, sp + 1, vlen);
            return 1;
        }
        case '>':
        case '<': {
            long n = unhex(t, rest, rlen);
            if (n < 0) return bad(t, "bad hex");
            l->bytes = t->buf;
            l->n = (size_t)n;
            return 1;
        }
        case '~': {
            unsigned off = 0, mlen = 0;
            char hex[600];
            if (sscanf(rest, "%u %u %599s", &off, &mlen, hex) != 3) return bad(t, "bad mask");
            long n = unhex(t, hex, strlen(hex));
            if (n < 0 || (size_t)n != mlen) return bad(t, "mask length");
            l->off = off;
            l->len = mlen;
            l->bytes = t->buf;
            l->n = (size_t)n;
            return 1;
        }
        default: return bad(t, "unknown line kind");
        }
    }
    return 0;
}

static int is_txt(const struct dirent *d) {
    size_t n = strlen(d->d_name);
    return n > 4 && strcmp(d->d_name + n - 4, ".txt") == 0;
}

int hb_transcript_list(const char *dir, char ***names) {
    struct dirent **ents;
    int n = scandir(dir, &ents, is_txt, alphasort);
    if (n < 0) {
        *names = NULL;
        return -1;
    }
    *names = calloc((size_t)n + 1, sizeof **names);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(ents[i]->d_name) + 2;
        (*names)[i] = malloc(len);
        snprintf((*names)[i], len, "%s/%s", dir, ents[i]->d_name);
        free(ents[i]);
    }
    free(ents);
    return n;
}

void hb_transcript_free_list(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}
