/* The fuzzers' seed corpus, generated from the protocol transcripts and the golden vectors
 * (nothing binary is committed):
 *
 *   make_corpus FIXTURES OUT    writes OUT/frame, OUT/device, OUT/blob
 *
 * frame:  every `>` line of every transcript, and runs of WINDOW lines back to back (behind
 *         the two bytes fuzz_frame reads first: max_payload 4096, one piece);
 * device: each transcript's requests as fuzz_device records (NEW type len payload for an
 *         intact frame, RETRY when a frame repeats the one before, RAW for anything else),
 *         WINDOW `>` lines per seed (short seeds keep the fuzzer fast; the harness has
 *         already loaded a model);
 * blob:   every model blob a transcript uploads (its LOAD_MODEL chunks put together), and the
 *         blobs of model_*.hbgv, nn_models.hbgv and nn_blobs.hbgv (the malformed cases).
 * Files are named by their CRC-32 and length, so a rerun writes the same set. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hb_bytes.h"
#include "hb_crc.h"
#include "hb_frame.h"
#include "hb_wire.h"
#include "hbgv.h"
#include "transcript.h"

#define WINDOW 6

static const char *out_dir;
static int written[3];

static void put(int which, const uint8_t *p, size_t n) {
    static const char *const sub[] = {"frame", "device", "blob"};
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%08x-%zu", out_dir, sub[which], hb_crc32(0, p, n), n);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "make_corpus: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fclose(f);
    written[which]++;
}

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void add(buf *b, const uint8_t *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 1024;
        b->p = realloc(b->p, b->cap);
        if (!b->p) exit(1);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void add1(buf *b, uint8_t v) { add(b, &v, 1); }

static uint8_t rx_buf[HB_MAX_ENCODED_LEN];

/* one transcript: its frame, device and blob seeds */
static void from_transcript(const char *path) {
    hb_transcript t;
    if (hb_transcript_open(&t, path) < 0) exit(1);
    buf all = {0}, dev = {0}, model = {0};
    add1(&all, 0xFF); /* fuzz_frame: max_payload 4096 */
    add1(&all, 0);    /* one piece */
    add1(&dev, 2);    /* fuzz_device: max_payload 4096, the first configuration */
    static uint8_t last[HB_MAX_ENCODED_LEN + 2];
    size_t last_n = 0;
    uint32_t model_total = 0;
    hb_tline l;
    int lines = 0;
    while (hb_transcript_next(&t, &l) == 1) {
        if (l.kind != '>') continue;
        if (lines++ % WINDOW == 0 && lines > 1) { /* a window is full: write its seeds */
            put(0, all.p, all.n);
            put(1, dev.p, dev.n);
            all.n = 2; /* keep the harnesses' leading bytes */
            dev.n = 1;
        }
        uint8_t head[2] = {0xFF, 0};
        buf one = {0};
        add(&one, head, 2);
        add(&one, l.bytes, l.n);
        put(0, one.p, one.n);
        free(one.p);
        add(&all, l.bytes, l.n);
        /* device records: decode the line's frames */
        hb_rx rx;
        hb_frame_rx_init(&rx, rx_buf, HB_MAX_PAYLOAD);
        size_t at = 0, start = 0;
        while (at < l.n) {
            hb_rx_event ev;
            hb_frame f;
            hb_problem kind = 0;
            at += hb_frame_rx_feed(&rx, l.bytes + at, l.n - at, &ev, &f, &kind);
            if (ev == HB_RX_NONE && at < l.n) continue;
            size_t len = at - start;
            if (ev == HB_RX_FRAME && f.version == HB_PROTOCOL_VERSION) {
                if (len == last_n && memcmp(l.bytes + start, last, len) == 0) {
                    add1(&dev, 2); /* RETRY */
                } else {
                    add1(&dev, 1); /* NEW */
                    add1(&dev, f.type);
                    add1(&dev, (uint8_t)f.len);
                    add1(&dev, (uint8_t)(f.len >> 8));
                    add(&dev, f.payload, f.len);
                }
                memcpy(last, l.bytes + start, len);
                last_n = len;
                if (f.type == HB_TYPE_LOAD_MODEL && f.len >= HB_MIN_SIZE_LOAD_MODEL) {
                    uint32_t total = hb_rd32(f.payload + HB_OFF_LOAD_MODEL_TOTAL_LEN);
                    uint32_t off = hb_rd32(f.payload + HB_OFF_LOAD_MODEL_OFFSET);
                    if (off == 0) {
                        model.n = 0;
                        model_total = total;
                    }
                    if (off == model.n && total == model_total) {
                        add(&model, f.payload + HB_OFF_LOAD_MODEL_CHUNK,
                            f.len - HB_OFF_LOAD_MODEL_CHUNK);
                        if (model.n == model_total && model.n) put(2, model.p, model.n);
                    }
                }
            } else if (len) { /* RAW, in pieces of up to 255 */
                for (size_t k = start; k < at; k += 255) {
                    size_t n = at - k < 255 ? at - k : 255;
                    add1(&dev, 0);
                    add1(&dev, (uint8_t)n);
                    add(&dev, l.bytes + k, n);
                }
            }
            start = at;
        }
    }
    if (all.n > 2) put(0, all.p, all.n);
    if (dev.n > 1) put(1, dev.p, dev.n);
    free(all.p);
    free(dev.p);
    free(model.p);
    hb_transcript_close(&t);
}

/* every array of a golden-vector file whose name ends in ".blob" */
static void from_vectors(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *probe = fopen(path, "rb");
    if (!probe) return; /* a vector file another part has not written */
    fclose(probe);
    hbgv_file f;
    hbgv_load(&f, dir, name);
    for (uint32_t i = 0; i < f.count; i++) {
        size_t n = strlen(f.arrays[i].name);
        if (n > 5 && strcmp(f.arrays[i].name + n - 5, ".blob") == 0)
            put(2, f.arrays[i].data, f.arrays[i].nbytes);
    }
    hbgv_free(&f);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: make_corpus FIXTURES_DIR OUT_DIR\n");
        return 2;
    }
    out_dir = argv[2];
    char path[4096];
    static const char *const sub[] = {"frame", "device", "blob"};
    mkdir(out_dir, 0777);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", out_dir, sub[i]);
        mkdir(path, 0777);
    }
    snprintf(path, sizeof path, "%s/transcripts", argv[1]);
    char **names;
    int n = hb_transcript_list(path, &names);
    if (n <= 0) {
        fprintf(stderr, "make_corpus: no transcripts in %s\n", path);
        return 1;
    }
    for (int i = 0; i < n; i++) from_transcript(names[i]);
    hb_transcript_free_list(names, n);
    static const char *const vectors[] = {"model_mlp.hbgv", "model_cnn.hbgv", "model_dw.hbgv",
                                          "nn_models.hbgv", "nn_blobs.hbgv"};
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++)
        from_vectors(argv[1], vectors[i]);
    printf("make_corpus: %d frame, %d device, %d blob seeds in %s\n", written[0], written[1],
           written[2], out_dir);
    return 0;
}
