/* libFuzzer harness: the model-blob parser and the model load (hb_blob_load, hb_model_load),
 * then, for a blob both accept whose working memory fits a 1 MiB arena, the commands' math on
 * it: bind, one forward pass, a PROBE, an APPLY, an EVAL, WEIGHTS_CRC.
 *
 * Oracles: no sanitizer report; a refusal is BAD_MODEL with a message of at most 256 bytes; the
 * plan's and the ZO state's sizes are multiples of 16; the forward pass gives an output; PROBE
 * restores the weights exactly (the weights CRC before and after are equal); a refused load
 * leaves no model (a forward pass gives NULL). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_graph.h"
#include "hb_bytes.h"
#include "hb_model.h"
#include "hb_status.h"
#include "hb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BLOB (256u * 1024u)
#define WORK_BYTES (1u << 20)
#define ITEMS 2
#define REQUIRE(c)                                                                             \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            fprintf(stderr, "fuzz_blob: %s:%d: %s\n", __FILE__, __LINE__, #c);                 \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static _Alignas(16) uint8_t blob[MAX_BLOB];
static _Alignas(16) uint8_t work[WORK_BYTES];
static _Alignas(16) int8_t inputs[ITEMS * 4096];
static uint8_t labels[ITEMS];

/* a forward pass costs about (weights) x (activation elements) at most: keep it cheap */
static int cheap(const hb_graph *g) {
    uint64_t weights = 0;
    for (uint16_t t = 0; t < hb_graph_n_tensors(g); t++) {
        const hb_tensor *x = hb_graph_tensor(g, t);
        if (x && x->role == HB_ROLE_WEIGHT) weights += x->n;
    }
    return weights * hb_graph_act_bytes(g) <= 50u * 1000u * 1000u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_BLOB) return 0;
    memcpy(blob, data, size); /* the model works in place: a copy the harness owns */
    hb_graph *g = hb_graph_instance();
    hb_model *m = hb_model_instance();
    hb_status st;
    hb_status_clear(&st);
    if (hb_blob_load(g, blob, (uint32_t)size, &st) < 0) {
        REQUIRE(st.code == HB_ERR_BAD_MODEL && st.len > 0 && st.len <= HB_MAX_ERROR_MSG);
        REQUIRE(hb_graph_forward(g, inputs) == NULL);
        return 0;
    }
    uint32_t act = hb_graph_act_bytes(g);
    REQUIRE(act % 16 == 0);
    if (hb_model_load(m, g, &st) < 0) {
        REQUIRE(st.code == HB_ERR_BAD_MODEL && st.len > 0 && st.len <= HB_MAX_ERROR_MSG);
        hb_graph_unload(g);
        return 0;
    }
    uint64_t zo = hb_model_work_bytes(m);
    REQUIRE(zo % 16 == 0);
    uint32_t in = hb_graph_input_size(g), out = hb_graph_output_size(g);
    REQUIRE(in >= 1 && out >= 1);
    if ((uint64_t)act + zo > WORK_BYTES || in > sizeof inputs / ITEMS || out > 65535 ||
        !cheap(g)) {
        hb_graph_unload(g);
        return 0;
    }
    hb_graph_bind(g, work);
    hb_model_bind(m, work + act);
    for (uint32_t i = 0; i < ITEMS * in; i++) inputs[i] = (int8_t)(i * 37u + size);
    const int8_t *y = hb_graph_forward(g, inputs);
    REQUIRE(y != NULL);
    volatile int8_t sink = 0;
    for (uint32_t k = 0; k < out; k++) sink ^= y[k]; /* ASan: the output is readable */
    (void)sink;

    for (uint32_t i = 0; i < ITEMS; i++) labels[i] = (uint8_t)(i % out);
    hb_slot s = {inputs, labels, ITEMS, (uint16_t)in, (uint16_t)out, 0};
    uint8_t seeds[8], coeffs[8], lp[8], lm[8]; /* little-endian, as on the wire */
    hb_wr32(seeds, (uint32_t)size);
    hb_wr32(seeds + 4, 0xC0FFEEu);
    hb_wr32(coeffs, 1000u);
    hb_wr32(coeffs + 4, (uint32_t)-70000);
    uint32_t crc = hb_model_weights_crc(m);
    hb_model_probe(m, &s, 2, 7, 3, seeds, 2, lp, lm);
    REQUIRE(hb_model_weights_crc(m) == crc); /* the exact restore */
    uint8_t scratch[HB_MODEL_APPLY_SCRATCH(2, 16)]; /* chunks of 16 elements */
    REQUIRE(hb_model_apply(m, seeds, coeffs, 2, scratch, sizeof scratch) == 0);
    REQUIRE(hb_model_updates_applied(m) == 1);
    uint32_t correct = 0;
    int64_t loss = 0;
    hb_model_eval(m, &s, 0, ITEMS, &correct, &loss);
    REQUIRE(correct <= ITEMS);
    hb_graph_unload(g);
    return 0;
}
