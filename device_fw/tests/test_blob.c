/* The model-blob parser (core/blob.c) against the device-side parser in Python
 * (hilbench/device/blobcheck.py) on fixtures/golden/nn_blobs.hbgv
 * (fixtures/golden/make_nn_vectors.py):
 *   - malformed blobs, each breaking one device rule: refused BAD_MODEL with the very bytes
 *     of blobcheck's message (so the C checks the rules in the same order);
 *   - random corruptions of valid blobs: refused with blobcheck's message, or accepted by both
 *     with the same act_bytes (plan.c = plan.py) and the same outputs as the twin's graph. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hb_graph.h"
#include "hb_wire.h"
#include "hbgv.h"
#include "nn_vectors.h"

static hbgv_file F;

static void expect_refusal(const hbgv_array *blob, const hbgv_array *msg, const char *label) {
    hb_graph *g = hb_graph_instance();
    hb_status st;
    uint8_t *b = nnv_copy(0, blob);
    const int rc = hb_blob_load(g, b, blob->nbytes, &st);
    CHECK(rc == -1 && st.code == HB_ERR_BAD_MODEL, "%s: rc %d code %u, expected BAD_MODEL", label,
          rc, st.code);
    CHECK(st.len == msg->nbytes && memcmp(st.msg, msg->data, st.len) == 0,
          "%s:\n   C: %.*s\n  py: %.*s", label, st.len, st.msg, (int)msg->nbytes,
          (const char *)msg->data);
    CHECK(hb_graph_n_tensors(g) == 0 && hb_graph_act_bytes(g) == 0, "%s: model left behind", label);
}

static void test_malformed(void) {
    const int n = (int)hbgv_get(hbgv_need(&F, "n_cases"), 0);
    for (int i = 0; i < n; i++) {
        const hbgv_array *label = nnv_array(&F, "b%d.label", i), *key = nnv_array(&F, "b%d.key", i);
        char text[200];
        snprintf(text, sizeof text, "case %d %.*s (%.*s)", i, (int)key->nbytes,
                 (const char *)key->data, (int)label->nbytes, (const char *)label->data);
        expect_refusal(nnv_array(&F, "b%d.blob", i), nnv_array(&F, "b%d.msg", i), text);
    }
    printf("test_blob: %d malformed blobs refused with blobcheck's messages\n", n);
}

static void test_mutations(void) {
    const int n = (int)hbgv_get(hbgv_need(&F, "n_mutations"), 0);
    int accepted = 0;
    hb_graph *g = hb_graph_instance();
    for (int i = 0; i < n; i++) {
        char text[64];
        snprintf(text, sizeof text, "mutation %d", i);
        const hbgv_array *msg = nnv_array(&F, "r%d.msg", i), *blob = nnv_array(&F, "r%d.blob", i);
        if (msg->nbytes) {
            expect_refusal(blob, msg, text);
            continue;
        }
        accepted++;
        hb_status st;
        if (nnv_load(g, blob, hbgv_get(nnv_array(&F, "r%d.act", i), 0), &st, text)) continue;
        nnv_forward_all(g, nnv_array(&F, "r%d.x", i), nnv_array(&F, "r%d.y", i), text);
    }
    printf("test_blob: %d corrupted blobs, %d accepted by both parsers\n", n, accepted);
}

int main(int argc, char **argv) {
    hbgv_load(&F, argc > 1 ? argv[1] : "../fixtures/golden", "nn_blobs.hbgv");
    test_malformed();
    test_mutations();
    nnv_free();
    hbgv_free(&F);
    TEST_MAIN_END("test_blob");
}
