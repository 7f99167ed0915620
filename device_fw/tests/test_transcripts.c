/* Replays every fixtures/golden/transcripts/NAME.txt (the twin's wire transcripts, written by
 * fixtures/golden/make_transcripts.py) through hb_device_rx with the capturing port: each `>`
 * line is fed in one piece, and what the device writes must be the `<` frames that follow, byte
 * for byte; where `~` lines mark timing bits, the decoded bodies are compared with those bits
 * cleared (and without the CRC-32, which covers them; the device's own CRC is checked). The
 * device is configured by the `!` lines (boot nonce, identity, arena, max_payload). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hb_crc.h"
#include "hb_frame.h"
#include "port_capture.h"
#include "transcript.h"

typedef struct {
    uint8_t *bytes;
    size_t n;
    int line_no;
    int n_masks;
    uint32_t off[8], len[8];
    uint8_t *mask[8];
} expect_frame;

static void hexdump(const char *what, const uint8_t *p, size_t n) {
    fprintf(stderr, "    %s (%zu bytes): ", what, n);
    for (size_t i = 0; i < n && i < 160; i++) fprintf(stderr, "%02x", p[i]);
    fprintf(stderr, n > 160 ? "...\n" : "\n");
}

/* the ERROR message of a decoded body, for the failure report */
static void explain(const char *what, const uint8_t *body, long n) {
    if (n >= HB_FRAME_OVERHEAD + HB_MIN_SIZE_ERROR && body[1] == HB_TYPE_ERROR) {
        const uint8_t *p = body + HB_HEADER_SIZE;
        uint16_t m = (uint16_t)(p[HB_OFF_ERROR_MSG_LEN] | p[HB_OFF_ERROR_MSG_LEN + 1] << 8);
        if (HB_OFF_ERROR_MSG + m <= n - HB_FRAME_OVERHEAD)
            fprintf(stderr, "    %s: ERROR %u '%.*s'\n", what, p[0] | p[1] << 8, (int)m,
                    (const char *)p + HB_OFF_ERROR_MSG);
    }
}

static uint8_t got_body[HB_MAX_ENCODED_LEN], want_body[HB_MAX_ENCODED_LEN];

/* one answer frame (0x00 .. 0x00) against its expectation; 1 if equal */
static int same_frame(const char *path, const uint8_t *got, size_t gn, const expect_frame *e) {
    long g = gn >= 2 ? hb_frame_cobs_decode(got + 1, gn - 2, got_body) : -1;
    long w = e->n >= 2 ? hb_frame_cobs_decode(e->bytes + 1, e->n - 2, want_body) : -1;
    int ok;
    if (!e->n_masks) {
        ok = gn == e->n && memcmp(got, e->bytes, gn) == 0;
    } else {
        ok = g >= HB_FRAME_OVERHEAD && g == w;
        if (ok) { /* the device's CRC over its own bytes, then the bodies without the CRC */
            uint32_t crc = hb_crc32(0, got_body, (size_t)g - HB_CRC_SIZE);
            const uint8_t *c = got_body + g - HB_CRC_SIZE;
            ok = crc == ((uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 |
                         (uint32_t)c[3] << 24);
            for (int m = 0; ok && m < e->n_masks; m++) {
                if (e->off[m] + e->len[m] > (uint32_t)g - HB_CRC_SIZE) ok = 0;
                for (uint32_t k = 0; ok && k < e->len[m]; k++) {
                    got_body[e->off[m] + k] &= (uint8_t)~e->mask[m][k];
                    want_body[e->off[m] + k] &= (uint8_t)~e->mask[m][k];
                }
            }
            ok = ok && memcmp(got_body, want_body, (size_t)g - HB_CRC_SIZE) == 0;
        }
    }
    if (!ok) {
        fprintf(stderr, "%s:%d: the device's answer differs%s\n", path, e->line_no,
                e->n_masks ? " (timing bits masked)" : "");
        hexdump("want", e->bytes, e->n);
        hexdump("got ", got, gn);
        if (w > 0) explain("want", want_body, w);
        if (g > 0) explain("got ", got_body, g);
    }
    return ok;
}

static int replay(const char *path, int *exchanges, int *frames) {
    hb_transcript t;
    if (hb_transcript_open(&t, path) < 0) return 0;
    static char device_id[256], firmware[256];
    strcpy(device_id, "hilbench-twin");
    firmware[0] = 0;
    uint32_t nonce = 0, arena = CAP_ARENA_MAX;
    uint16_t max_payload = HB_MAX_PAYLOAD;
    int booted = 0, failures = 0;
    /* the exchange being read: the host's bytes, then the expected frames */
    static uint8_t host[1 << 20];
    size_t host_n = 0;
    int have_host = 0, host_line = 0;
    expect_frame want[16];
    int n_want = 0;
    hb_tline l;
    int rc;
    for (;;) {
        rc = hb_transcript_next(&t, &l);
        if (rc < 0) {
            failures++;
            break;
        }
        if (have_host && (rc == 0 || l.kind == '>' || l.kind == '!')) {
            /* run the exchange */
            (*exchanges)++;
            cap_feed(host, host_n);
            size_t at = 0;
            int k = 0;
            while (at < cap_len) {
                if (cap_out[at] != 0) break;
                size_t end = at + 1;
                while (end < cap_len && cap_out[end] != 0) end++;
                if (end >= cap_len) break;
                if (k < n_want) failures += !same_frame(path, cap_out + at, end + 1 - at, &want[k]);
                k++;
                at = end + 1;
            }
            *frames += k;
            if (k != n_want || at != cap_len) {
                failures++;
                fprintf(stderr, "%s:%d: the device answered %d frame(s)%s, the transcript %d\n",
                        path, host_line, k, at != cap_len ? " and stray bytes" : "", n_want);
                if (cap_len) hexdump("got", cap_out, cap_len);
            }
            for (int i = 0; i < n_want; i++) {
                free(want[i].bytes);
                for (int m = 0; m < want[i].n_masks; m++) free(want[i].mask[m]);
            }
            have_host = 0;
            n_want = 0;
        }
        if (rc == 0) break;
        switch (l.kind) {
        case '!':
            if (booted) {
                fprintf(stderr, "%s:%d: configuration after the first frame\n", path, l.line_no);
                failures++;
            }
            if (!strcmp(l.key, "boot_nonce"))
                nonce = (uint32_t)strtoul(l.value, NULL, 16);
            else if (!strcmp(l.key, "device_id"))
                snprintf(device_id, sizeof device_id, "%s", l.value);
            else if (!strcmp(l.key, "firmware"))
                snprintf(firmware, sizeof firmware, "%s", l.value);
            else if (!strcmp(l.key, "arena_bytes"))
                arena = (uint32_t)strtoul(l.value, NULL, 10);
            else if (!strcmp(l.key, "max_payload"))
                max_payload = (uint16_t)strtoul(l.value, NULL, 10);
            else {
                fprintf(stderr, "%s:%d: unknown key %s\n", path, l.line_no, l.key);
                failures++;
            }
            break;
        case '>':
            if (!booted) {
                if (arena > CAP_ARENA_MAX) {
                    fprintf(stderr, "%s: arena_bytes %u > the test port's %u\n", path, arena,
                            (unsigned)CAP_ARENA_MAX);
                    failures++;
                    goto done;
                }
                cap_identity(device_id, firmware);
                cap_boot(arena, max_payload, nonce);
                booted = 1;
            }
            if (l.n > sizeof host) {
                fprintf(stderr, "%s:%d: too many bytes\n", path, l.line_no);
                failures++;
                goto done;
            }
            memcpy(host, l.bytes, l.n);
            host_n = l.n;
            have_host = 1;
            host_line = l.line_no;
            break;
        case '<':
            if (!have_host) {
                fprintf(stderr, "%s:%d: an answer without a request\n", path, l.line_no);
                failures++;
                break;
            }
            if (l.n == 0) break; /* silence */
            if (n_want == 16) {
                fprintf(stderr, "%s:%d: more than 16 answers\n", path, l.line_no);
                failures++;
                break;
            }
            want[n_want] = (expect_frame){malloc(l.n), l.n, l.line_no, 0, {0}, {0}, {0}};
            memcpy(want[n_want].bytes, l.bytes, l.n);
            n_want++;
            break;
        case '~': {
            expect_frame *e = n_want ? &want[n_want - 1] : NULL;
            if (!e || e->n_masks == 8) {
                fprintf(stderr, "%s:%d: a mask without an answer\n", path, l.line_no);
                failures++;
                break;
            }
            e->off[e->n_masks] = l.off;
            e->len[e->n_masks] = l.len;
            e->mask[e->n_masks] = malloc(l.n);
            memcpy(e->mask[e->n_masks], l.bytes, l.n);
            e->n_masks++;
            break;
        }
        }
    }
done:
    hb_transcript_close(&t);
    return failures;
}

int main(int argc, char **argv) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/transcripts", argc > 1 ? argv[1] : "../fixtures/golden");
    char **names;
    int n = hb_transcript_list(dir, &names);
    CHECK(n > 0, "no transcripts in %s (python fixtures/golden/make_transcripts.py writes them)",
          dir);
    for (int i = 0; i < n; i++) {
        int exchanges = 0, frames = 0;
        int failures = replay(names[i], &exchanges, &frames);
        CHECK(failures == 0, "%s: %d mismatches", names[i], failures);
        CHECK(exchanges > 0, "%s: no exchanges", names[i]);
        printf("  %s: %d exchanges, %d answer frames, %s\n", names[i], exchanges, frames,
               failures ? "DIFFERENT" : "identical");
    }
    hb_transcript_free_list(names, n > 0 ? n : 0);
    TEST_MAIN_END("test_transcripts");
}
