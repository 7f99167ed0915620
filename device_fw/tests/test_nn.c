/* Every int8 op (core/nn/) through single-op model blobs (core/blob.c + graph.c) on
 * fixtures/golden/nn_ops.hbgv, written by fixtures/golden/make_nn_vectors.py: random and edge
 * cases whose expected outputs the tflite-micro interpreter computed; act_bytes must equal
 * hilbench/device/plan.py's. Then nn/fixedpoint.h on its own vectors. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hb_graph.h"
#include "hbgv.h"
#include "nn/fixedpoint.h"
#include "nn_vectors.h"

static hbgv_file F;

static void test_ops(void) {
    const int n = (int)hbgv_get(hbgv_need(&F, "n_cases"), 0);
    hb_graph *g = hb_graph_instance();
    int per_op[16] = {0};
    for (int i = 0; i < n; i++) {
        const hbgv_array *what = nnv_array(&F, "c%d.what", i);
        char label[200];
        snprintf(label, sizeof label, "case %d (%.*s)", i, (int)what->nbytes,
                 (const char *)what->data);
        hb_status st;
        if (nnv_load(g, nnv_array(&F, "c%d.blob", i), hbgv_get(nnv_array(&F, "c%d.act", i), 0),
                     &st, label))
            continue;
        for (uint16_t o = 0; o < hb_graph_n_ops(g); o++) per_op[hb_graph_op_opcode(g, o) & 15]++;
        nnv_forward_all(g, nnv_array(&F, "c%d.x", i), nnv_array(&F, "c%d.y", i), label);
    }
    for (int op = 1; op <= 8; op++) CHECK(per_op[op] > 0, "no vector runs opcode %d", op);
    printf("test_nn: %d op vectors (per opcode 1..8:", n);
    for (int op = 1; op <= 8; op++) printf(" %d", per_op[op]);
    printf(")\n");
}

static void test_fixedpoint(void) {
    const hbgv_array *x = hbgv_need(&F, "fp.x"), *m = hbgv_need(&F, "fp.m"),
                     *s = hbgv_need(&F, "fp.s"), *w = hbgv_need(&F, "fp.want");
    for (uint32_t i = 0; i < x->dims[0]; i++) {
        const int32_t got = hb_fp_mbqm((int32_t)hbgv_get(x, i), (int32_t)hbgv_get(m, i),
                                       (int)hbgv_get(s, i));
        CHECK(got == hbgv_get(w, i), "mbqm(%lld, %lld, %lld) = %d, want %lld",
              (long long)hbgv_get(x, i), (long long)hbgv_get(m, i), (long long)hbgv_get(s, i),
              got, (long long)hbgv_get(w, i));
    }
    const hbgv_array *sum = hbgv_need(&F, "fp.mean_sum"), *zp = hbgv_need(&F, "fp.mean_zp"),
                     *cnt = hbgv_need(&F, "fp.mean_count"), *sh = hbgv_need(&F, "fp.mean_shifted"),
                     *mm = hbgv_need(&F, "fp.mean_m"), *ms = hbgv_need(&F, "fp.mean_s"),
                     *mo = hbgv_need(&F, "fp.mean_m_out"), *so = hbgv_need(&F, "fp.mean_s_out");
    for (uint32_t i = 0; i < sum->dims[0]; i++) {
        const int32_t got = hb_fp_mean_shifted_sum((int32_t)hbgv_get(sum, i),
                                                   (int32_t)hbgv_get(zp, i), hbgv_get(cnt, i));
        CHECK(got == hbgv_get(sh, i), "mean shifted sum %u: %d, want %lld", i, got,
              (long long)hbgv_get(sh, i));
        int32_t m_out;
        int s_out;
        hb_fp_mean_multiplier((int32_t)hbgv_get(mm, i), (int)hbgv_get(ms, i), hbgv_get(cnt, i),
                              &m_out, &s_out);
        CHECK(m_out == hbgv_get(mo, i) && s_out == hbgv_get(so, i),
              "mean multiplier %u: (%d, %d), want (%lld, %lld)", i, m_out, s_out,
              (long long)hbgv_get(mo, i), (long long)hbgv_get(so, i));
    }
    /* the wrap helpers at their edges */
    CHECK(hb_fp_wrap32(0x80000000u) == INT32_MIN && hb_fp_wrap32(0xFFFFFFFFu) == -1 &&
              hb_fp_wrap32(0x7FFFFFFFu) == INT32_MAX,
          "wrap32");
    CHECK(hb_fp_add_wrap(INT32_MAX, 1) == INT32_MIN && hb_fp_add_wrap(INT32_MIN, -1) == INT32_MAX,
          "add_wrap");
    CHECK(hb_fp_srdhm(INT32_MIN, INT32_MIN) == INT32_MAX, "srdhm saturates");
    CHECK(hb_fp_rdbpot(-5, 1) == -3 && hb_fp_rdbpot(5, 1) == 3 && hb_fp_rdbpot(-4, 1) == -2 &&
              hb_fp_rdbpot(INT32_MIN, 31) == -1 && hb_fp_rdbpot(INT32_MAX, 31) == 1,
          "rdbpot rounds half away from zero");
}

int main(int argc, char **argv) {
    hbgv_load(&F, argc > 1 ? argv[1] : "../fixtures/golden", "nn_ops.hbgv");
    test_ops();
    test_fixedpoint();
    nnv_free();
    hbgv_free(&F);
    TEST_MAIN_END("test_nn");
}
