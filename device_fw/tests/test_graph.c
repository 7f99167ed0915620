/* Whole models through the graph (core/blob.c, plan.c, graph.c) on
 * fixtures/golden/nn_models.hbgv (fixtures/golden/make_nn_vectors.py): the zoo CNN, a
 * MobileNetV2 (alpha 0.35, 32x32) and a thin ResNet18 (32x32) give TFLM's logits byte for
 * byte; act_bytes equals hilbench/device/plan.py's. Then the API the ZO code relies on:
 * tensor roles, constants in place (a changed weight changes the output, restoring it restores
 * the output), sections by tag, and a refused load leaving no model. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hb_blob.h"
#include "hb_graph.h"
#include "hb_wire.h"
#include "hbgv.h"
#include "nn_vectors.h"

static hbgv_file F;

static void check_roles(const hb_graph *g, const char *name) {
    int weights = 0;
    for (uint16_t o = 0; o < hb_graph_n_ops(g); o++) {
        int32_t w, b;
        const uint8_t opc = hb_graph_op_opcode(g, o);
        const int has = opc == HB_OP_FULLY_CONNECTED || opc == HB_OP_CONV_2D ||
                        opc == HB_OP_DEPTHWISE_CONV_2D;
        const int rc = hb_graph_op_weights(g, o, &w, &b);
        CHECK(rc == (has ? 0 : -1), "%s op %u (opcode %u): op_weights returned %d", name, o, opc, rc);
        if (rc) continue;
        weights++;
        const hb_tensor *tw = hb_graph_tensor(g, (uint16_t)w);
        CHECK(tw && tw->role == HB_ROLE_WEIGHT && tw->opcode == opc && tw->dtype == HB_DTYPE_INT8,
              "%s op %u: weight tensor %d role %u", name, o, w, tw ? tw->role : 99);
        CHECK(hb_graph_data(g, (uint16_t)w) != NULL, "%s: weight data", name);
        if (b >= 0) {
            const hb_tensor *tb = hb_graph_tensor(g, (uint16_t)b);
            CHECK(tb && tb->role == HB_ROLE_BIAS && tb->dtype == HB_DTYPE_INT32 && tb->opcode == opc,
                  "%s op %u: bias tensor %d", name, o, b);
            CHECK(((uintptr_t)hb_graph_data(g, (uint16_t)b) & 3u) == 0, "%s: bias data aligned", name);
        }
    }
    CHECK(weights > 0, "%s: no weights", name);
    uint16_t acts = 0;
    for (uint16_t t = 0; t < hb_graph_n_tensors(g); t++) {
        const hb_tensor *x = hb_graph_tensor(g, t);
        if (x->role == HB_ROLE_ACTIVATION) {
            acts++;
            CHECK(hb_graph_data(g, t) == NULL, "%s: activation %u has blob data", name, t);
            CHECK(x->offset % 16 == 0, "%s: activation %u at offset %u", name, t, x->offset);
        }
    }
    CHECK(acts > 1, "%s: %u activations", name, acts);
    CHECK(hb_graph_tensor(g, hb_graph_n_tensors(g)) == NULL, "%s: tensor past the end", name);
}

/* a changed weight changes the logits; restoring it restores them (no cached weights) */
static void check_in_place(hb_graph *g, const hbgv_array *x, const hbgv_array *y, const char *name) {
    int32_t w, b;
    uint16_t o = 0;
    while (hb_graph_op_weights(g, o, &w, &b)) o++;
    int8_t *data = (int8_t *)hb_graph_data(g, (uint16_t)w);
    const uint32_t n = hb_graph_tensor(g, (uint16_t)w)->n, out = y->dims[1];
    int changed = 0;
    for (uint32_t k = 0; k < n && !changed; k += 1 + n / 64) {
        const int8_t keep = data[k];
        data[k] = (int8_t)(keep > 0 ? -127 : 127);
        const int8_t *got = hb_graph_forward(g, (const int8_t *)x->data);
        changed = memcmp(got, y->data, out) != 0;
        data[k] = keep;
    }
    CHECK(changed, "%s: no weight of op %u changes the logits", name, o);
    CHECK_BYTES("logits after the restore", hb_graph_forward(g, (const int8_t *)x->data), y->data, out);
}

static void test_models(void) {
    const int n = (int)hbgv_get(hbgv_need(&F, "n_models"), 0);
    hb_graph *g = hb_graph_instance();
    for (int j = 0; j < n; j++) {
        const hbgv_array *name = nnv_array(&F, "m%d.name", j);
        char label[64];
        snprintf(label, sizeof label, "%.*s", (int)name->nbytes, (const char *)name->data);
        hb_status st;
        if (nnv_load(g, nnv_array(&F, "m%d.blob", j), hbgv_get(nnv_array(&F, "m%d.act", j), 0),
                     &st, label))
            continue;
        const hbgv_array *x = nnv_array(&F, "m%d.x", j), *y = nnv_array(&F, "m%d.y", j);
        nnv_forward_all(g, x, y, label);
        nnv_forward_all(g, x, y, label); /* again: nothing depends on the previous sample */
        check_roles(g, label);
        check_in_place(g, x, y, label);
        const uint8_t *data;
        uint32_t len;
        CHECK(hb_graph_section(g, "LOSS", &data, &len) == -1, "%s: a LOSS section", label);
        printf("test_graph: %s: %u tensors, %u ops, act_bytes %u, %u inputs\n", label,
               hb_graph_n_tensors(g), hb_graph_n_ops(g), hb_graph_act_bytes(g), x->dims[0]);
    }
}

static void test_sections(void) {
    hb_graph *g = hb_graph_instance();
    hb_status st;
    const hbgv_array *blob = hbgv_need(&F, "sec.blob"), *tags = hbgv_need(&F, "sec.tags");
    uint8_t *b = nnv_copy(0, blob);
    CHECK(hb_blob_load(g, b, blob->nbytes, &st) == 0, "sections blob: %.*s", st.len, st.msg);
    for (uint32_t i = 0; i + 4 <= tags->nbytes; i += 4) {
        char tag[5] = {0};
        memcpy(tag, tags->data + i, 4);
        char name[16];
        snprintf(name, sizeof name, "sec.%s", tag);
        const hbgv_array *want = hbgv_need(&F, name);
        const uint8_t *data = NULL;
        uint32_t len = 0;
        CHECK(hb_graph_section(g, tag, &data, &len) == 0, "section %s missing", tag);
        CHECK(len == want->nbytes && (len == 0 || memcmp(data, want->data, len) == 0),
              "section %s: %u bytes", tag, len);
    }
    const uint8_t *data;
    uint32_t len;
    CHECK(hb_graph_section(g, "NONE", &data, &len) == -1, "section NONE found");
    /* a refused load leaves no model behind */
    b[8] ^= 1; /* n_tensors: the CRC no longer matches */
    CHECK(hb_blob_load(g, b, blob->nbytes, &st) == -1 && st.code == HB_ERR_BAD_MODEL,
          "corrupted blob accepted");
    CHECK(hb_graph_n_tensors(g) == 0 && hb_graph_n_ops(g) == 0 && hb_graph_act_bytes(g) == 0 &&
              hb_graph_input_size(g) == 0 && hb_graph_tensor(g, 0) == NULL &&
              hb_graph_section(g, "LOSS", &data, &len) == -1,
          "a refused blob left a model behind");
    int8_t in[64] = {0};
    CHECK(hb_graph_forward(g, in) == NULL, "forward without a model");
    /* loaded but not bound: no forward; unloaded: no model */
    b[8] ^= 1;
    CHECK(hb_blob_load(g, b, blob->nbytes, &st) == 0, "reload: %.*s", st.len, st.msg);
    CHECK(hb_graph_forward(g, in) == NULL, "forward before hb_graph_bind");
    hb_graph_unload(g);
    CHECK(hb_graph_n_tensors(g) == 0 && hb_graph_output_size(g) == 0 &&
              hb_graph_section(g, "TEST", &data, &len) == -1,
          "hb_graph_unload left a model");
}

int main(int argc, char **argv) {
    hbgv_load(&F, argc > 1 ? argv[1] : "../fixtures/golden", "nn_models.hbgv");
    test_models();
    test_sections();
    nnv_free();
    hbgv_free(&F);
    TEST_MAIN_END("test_graph");
}
