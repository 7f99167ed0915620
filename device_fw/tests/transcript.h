/* Reader of the protocol transcripts of fixtures/golden/transcripts/NAME.txt (written by
 * fixtures/golden/make_transcripts.py from the twin; the format is described at the top of
 * each file): one line at a time, hex decoded. Used by test_transcripts.c and the fuzz corpus
 * tool. Test support: it allocates. */
#ifndef HB_TRANSCRIPT_H
#define HB_TRANSCRIPT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char kind;       /* '!' config, '>' host bytes, '<' device frame (n = 0: silence), '~' mask */
    int line_no;
    char key[32];    /* '!': the key */
    char value[256]; /* '!': the value (text to the end of the line) */
    uint8_t *bytes;  /* '>' / '<': the bytes; '~': the mask */
    size_t n;
    uint32_t off, len; /* '~': offset and length in the decoded body */
} hb_tline;

typedef struct {
    const char *path;
    char *text;
    size_t size, pos;
    int line_no;
    uint8_t *buf; /* the current line's bytes */
    size_t cap;
} hb_transcript;

/* 0, or -1 (a message on stderr) if the file cannot be read. */
int hb_transcript_open(hb_transcript *t, const char *path);
/* The next non-comment line: 1, 0 at the end, -1 on a malformed line (a message on stderr). */
int hb_transcript_next(hb_transcript *t, hb_tline *l);
void hb_transcript_close(hb_transcript *t);

/* The transcript files of a directory (sorted, *.txt): count, names in names[] (free with
 * hb_transcript_free_list). */
int hb_transcript_list(const char *dir, char ***names);
void hb_transcript_free_list(char **names, int n);

#endif
