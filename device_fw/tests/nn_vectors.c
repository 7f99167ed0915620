/* See nn_vectors.h. Test support: uses malloc and stdio. */
#include "nn_vectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint8_t *slots[2];

const hbgv_array *nnv_array(const hbgv_file *f, const char *fmt, int i) {
    char name[128];
    snprintf(name, sizeof name, fmt, i);
    return hbgv_find(f, name);
}

static uint8_t *alloc16(int slot, size_t n) {
    free(slots[slot]);
    slots[slot] = aligned_alloc(16, (n + 15) / 16 * 16 + 16);
    if (!slots[slot]) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return slots[slot];
}

uint8_t *nnv_copy(int slot, const hbgv_array *a) {
    uint8_t *p = alloc16(slot, a->nbytes);
    memcpy(p, a->data, a->nbytes);
    return p;
}

uint8_t *nnv_act(int slot, uint32_t n) {
    uint8_t *p = alloc16(slot, n);
    memset(p, 0xA5, n);
    return p;
}

int nnv_load(hb_graph *g, const hbgv_array *blob, int64_t want_act, hb_status *st,
             const char *what) {
    uint8_t *b = nnv_copy(0, blob);
    if (hb_blob_load(g, b, blob->nbytes, st)) {
        CHECK(0, "%s: refused: %.*s", what, st->len, st->msg);
        return -1;
    }
    CHECK(st->code == 0 && st->len == 0, "%s: loaded but the status is set", what);
    const uint32_t act = hb_graph_act_bytes(g);
    CHECK(act == want_act, "%s: act_bytes %u, plan.py says %lld", what, act, (long long)want_act);
    CHECK(act % 16 == 0, "%s: act_bytes %u not a multiple of 16", what, act);
    hb_graph_bind(g, nnv_act(1, act));
    return 0;
}

void nnv_forward_all(hb_graph *g, const hbgv_array *x, const hbgv_array *y, const char *what) {
    const uint32_t n = x->dims[0], in = x->dims[1], out = y->dims[1];
    CHECK(hb_graph_input_size(g) == in, "%s: input size %u, vector has %u", what,
          hb_graph_input_size(g), in);
    CHECK(hb_graph_output_size(g) == out, "%s: output size %u, vector has %u", what,
          hb_graph_output_size(g), out);
    if (hb_graph_input_size(g) != in || hb_graph_output_size(g) != out) return;
    for (uint32_t s = 0; s < n; s++) {
        const int8_t *got = hb_graph_forward(g, (const int8_t *)x->data + (size_t)s * in);
        CHECK(got != NULL, "%s: forward returned NULL", what);
        if (!got) return;
        char label[160];
        snprintf(label, sizeof label, "%s, sample %u", what, s);
        CHECK_BYTES(label, got, y->data + (size_t)s * out, out);
    }
}

void nnv_free(void) {
    for (int i = 0; i < 2; i++) {
        free(slots[i]);
        slots[i] = NULL;
    }
}
