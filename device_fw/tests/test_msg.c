/* The request checker and the accessors of core/msg.c against fixtures/golden/msg_cases.hbgv
 * (written by fixtures/golden/make_msg_vectors.py from hilbench.protocol.spec): every case's
 * (code, message) byte for byte, every accepted request's field offsets and values through the
 * accessors, the data-blob checks, and hb_format on every message template. */
#include <stdlib.h>

#include "check.h"
#include "hb_bytes.h"
#include "hb_msg.h"
#include "hbgv.h"

static const hbgv_file *F;

static const uint8_t *bytes_of(const char *name, uint32_t i, uint32_t *n) {
    char off_name[128];
    snprintf(off_name, sizeof off_name, "%s_off", name);
    const hbgv_array *off = hbgv_need(F, off_name);
    const hbgv_array *data = hbgv_need(F, name);
    uint32_t a = (uint32_t)hbgv_get(off, i), b = (uint32_t)hbgv_get(off, i + 1);
    if (a > b || b > data->nbytes) {
        fprintf(stderr, "%s: bad offsets at %u\n", name, i);
        exit(2);
    }
    *n = b - a;
    return data->data + a;
}

static int shown;

static void show(const char *what, uint32_t i, const uint8_t *payload, uint32_t len,
                 const hb_status *st, uint32_t want_code, const uint8_t *want, uint32_t want_len) {
    if (shown++ >= 20) return;
    fprintf(stderr, "%s case %u (%u payload bytes):\n  got  %u \"%.*s\"\n  want %u \"%.*s\"\n  ",
            what, i, len, st->code, st->len, st->msg, want_code, (int)want_len, (const char *)want);
    for (uint32_t k = 0; k < len && k < 32; k++) fprintf(stderr, "%02x", payload[k]);
    fputc('\n', stderr);
}

static void requests(void) {
    const hbgv_array *type = hbgv_need(F, "req_type");
    const hbgv_array *code = hbgv_need(F, "req_code");
    uint32_t n = hbgv_elems(type), accepted = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len, want_len;
        const uint8_t *payload = bytes_of("req_payload", i, &len);
        const uint8_t *want = bytes_of("req_msg", i, &want_len);
        /* a private copy of exactly len bytes: ASan catches any read past the payload */
        uint8_t *copy = malloc(len ? len : 1);
        if (len) memcpy(copy, payload, len);
        hb_status st;
        st.code = 0xFFFF;
        int rc = hb_msg_check((uint8_t)hbgv_get(type, i), len ? copy : NULL, (uint16_t)len, &st);
        uint32_t want_code = (uint32_t)hbgv_get(code, i);
        int ok = want_code == 0
                     ? rc == 0 && st.code == 0 && st.len == 0
                     : rc == -1 && st.code == want_code && st.len == want_len &&
                           memcmp(st.msg, want, want_len) == 0;
        CHECK(ok, "request case %u (type 0x%02x)", i, (unsigned)hbgv_get(type, i));
        if (!ok) show("request", i, payload, len, &st, want_code, want, want_len);
        accepted += want_code == 0;
        free(copy);
    }
    printf("test_msg: %u requests (%u accepted) match spec.check_request\n", n, accepted);
}

static void accessors(void) {
    const hbgv_array *icase = hbgv_need(F, "inst_case"), *layout = hbgv_need(F, "inst_layout");
    const hbgv_array *base = hbgv_need(F, "inst_base"), *size = hbgv_need(F, "inst_size");
    const hbgv_array *foff = hbgv_need(F, "inst_field_off"), *index = hbgv_need(F, "field_index");
    const hbgv_array *off = hbgv_need(F, "field_off"), *scalar = hbgv_need(F, "field_scalar");
    const hbgv_array *value = hbgv_need(F, "field_value");
    uint32_t n = hbgv_elems(icase), fields = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        const uint8_t *payload = bytes_of("req_payload", (uint32_t)hbgv_get(icase, i), &len);
        const uint8_t *p = payload + hbgv_get(base, i);
        uint8_t L = (uint8_t)hbgv_get(layout, i);
        uint32_t want_size = (uint32_t)hbgv_get(size, i);
        if (want_size != 0xFFFFFFFFu)
            CHECK(hb_msg_size(p, L) == want_size, "instance %u (%s): size %u, expected %u", i,
                  hb_msg_name(L), hb_msg_size(p, L), want_size);
        for (uint32_t r = (uint32_t)hbgv_get(foff, i); r < (uint32_t)hbgv_get(foff, i + 1); r++) {
            hb_field f = HB_FIELD(L, (uint8_t)hbgv_get(index, r));
            uint32_t want = (uint32_t)hbgv_get(off, r);
            CHECK(hb_msg_off(p, f) == want, "instance %u (%s) field %u: offset %u, expected %u", i,
                  hb_msg_name(L), HB_FIELD_INDEX(f), hb_msg_off(p, f), want);
            if (hbgv_get(scalar, r))
                CHECK(hb_msg_get(p, f) == hbgv_get(value, r),
                      "instance %u (%s) field %u: value %lld, expected %lld", i, hb_msg_name(L),
                      HB_FIELD_INDEX(f), (long long)hb_msg_get(p, f),
                      (long long)hbgv_get(value, r));
            fields++;
        }
    }
    printf("test_msg: %u instances, %u fields read through the accessors\n", n, fields);
}

static void data_blobs(void) {
    const hbgv_array *code = hbgv_need(F, "data_code");
    uint32_t n = hbgv_elems(code);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len, want_len;
        const uint8_t *blob = bytes_of("data_payload", i, &len);
        const uint8_t *want = bytes_of("data_msg", i, &want_len);
        uint8_t *copy = malloc(len ? len : 1);
        if (len) memcpy(copy, blob, len);
        hb_status st;
        int rc = hb_msg_check_data(copy, len, &st);
        uint32_t want_code = (uint32_t)hbgv_get(code, i);
        int ok = want_code == 0 ? rc == 0 && st.code == 0
                                : rc == -1 && st.code == want_code && st.len == want_len &&
                                      memcmp(st.msg, want, want_len) == 0;
        CHECK(ok, "data blob case %u", i);
        if (!ok) show("data blob", i, blob, len, &st, want_code, want, want_len);
        free(copy);
    }
    printf("test_msg: %u data blobs match spec.check_data_blob\n", n);
}

static void formats(void) {
    const hbgv_array *arg_off = hbgv_need(F, "fmt_arg_off"), *is_str = hbgv_need(F, "arg_is_str");
    const hbgv_array *ints = hbgv_need(F, "arg_int");
    uint32_t n = hbgv_elems(arg_off) - 1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t tlen, want_len;
        const uint8_t *t = bytes_of("fmt_template", i, &tlen);
        const uint8_t *want = bytes_of("fmt_out", i, &want_len);
        char template[512];
        if (tlen >= sizeof template) exit(2);
        memcpy(template, t, tlen);
        template[tlen] = 0;
        hb_arg args[16];
        uint32_t a0 = (uint32_t)hbgv_get(arg_off, i), a1 = (uint32_t)hbgv_get(arg_off, i + 1);
        if (a1 - a0 > 16) exit(2);
        for (uint32_t k = a0; k < a1; k++) {
            uint32_t slen;
            const uint8_t *s = bytes_of("arg_str", k, &slen);
            args[k - a0] = hbgv_get(is_str, k) ? HB_SN(s, slen) : HB_I(hbgv_get(ints, k));
        }
        hb_status st;
        hb_fail(&st, HB_ERR_INTERNAL, template, args, a1 - a0);
        int ok = st.len == want_len && memcmp(st.msg, want, want_len) == 0;
        CHECK(ok, "format case %u: \"%s\" gave %u bytes, expected %u", i, template, st.len,
              want_len);
    }
    printf("test_msg: %u formats match spec.format_message\n", n);
}

/* Writing a response through the accessors gives the sizes the macros promise. */
static void writing(void) {
    uint8_t out[HB_MAX_PAYLOAD];
    memset(out, 0xAA, sizeof out);
    uint16_t q = 3;
    hb_msg_put(out, HB_F_PROBE_R_Q, q);
    for (uint16_t k = 0; k < q; k++) {
        hb_wr32(hb_msg_wptr(out, HB_F_PROBE_R_LOSS_PLUS) + 4u * k, (uint32_t)(-1 - k));
        hb_wr32(hb_msg_wptr(out, HB_F_PROBE_R_LOSS_MINUS) + 4u * k, 100u + k);
    }
    hb_msg_put(out, HB_F_PROBE_R_DURATION_NS, 0x0102030405060708ull);
    hb_msg_put(out, HB_F_PROBE_R_TIMING_SOURCE, HB_TIMING_NONE);
    CHECK(hb_msg_size(out, HB_L_PROBE_R) == HB_SIZE_PROBE_R(q), "PROBE response size");
    CHECK(hb_msg_off(out, HB_F_PROBE_R_DURATION_NS) == HB_OFF_PROBE_R_DURATION_NS(q), "offset");
    CHECK(hb_msg_u64(out, HB_F_PROBE_R_DURATION_NS) == 0x0102030405060708ull, "u64 round trip");
    CHECK(hb_msg_i32(out + HB_OFF_PROBE_R_LOSS_PLUS, HB_F_APPLY_R_UPDATES_APPLIED) == -1, "i32");
    hb_status st;
    CHECK(hb_msg_check_layout(HB_L_PROBE_R, out, HB_SIZE_PROBE_R(q), &st) == 0, "%.*s", st.len,
          st.msg);
    hb_msg_put(out, HB_F_PROBE_R_TIMING_SOURCE, HB_LAST_TIMING_SOURCE + 1);
    CHECK(hb_msg_check_layout(HB_L_PROBE_R, out, HB_SIZE_PROBE_R(q), &st) == -1 &&
              st.code == HB_ERR_BAD_ARGUMENT,
          "a bad timing source is refused");
    /* an APPLY_PROBE response embeds a PROBE response after updates_applied */
    hb_msg_put(out, HB_F_APPLY_PROBE_R_UPDATES_APPLIED, 7);
    uint8_t *probe = hb_msg_wptr(out, HB_F_APPLY_PROBE_R_PROBE);
    CHECK(probe == out + HB_OFF_APPLY_PROBE_R_PROBE, "embedded PROBE response");
    hb_msg_put(probe, HB_F_PROBE_R_Q, q);
    CHECK(hb_msg_size(out, HB_L_APPLY_PROBE_R) == HB_SIZE_APPLY_PROBE_R(q), "APPLY_PROBE size");
    /* an ERROR payload */
    hb_msg_put(out, HB_F_ERROR_CODE, HB_ERR_NO_MODEL);
    hb_msg_put(out, HB_F_ERROR_REQUEST_TYPE, HB_TYPE_PROBE);
    hb_msg_put(out, HB_F_ERROR_MSG_LEN, 2);
    memcpy(hb_msg_wptr(out, HB_F_ERROR_MSG), "ok", 2);
    CHECK(hb_msg_size(out, HB_L_ERROR) == HB_SIZE_ERROR(2) && out[HB_OFF_ERROR_MSG] == 'o',
          "ERROR layout");
    CHECK(hb_msg_is_request(HB_TYPE_INFER) && !hb_msg_is_request(HB_LAST_REQUEST + 1) &&
              !hb_msg_is_request(0) && hb_msg_request_layout(HB_TYPE_PROBE) == HB_L_PROBE,
          "request types");
    CHECK(hb_msg_count((const uint8_t *)"\x02\x00", HB_F_APPLY_BATCH_STEPS) == 2, "count");
    CHECK(hb_msg_rest_len((const uint8_t *)"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
                                           "\x00\x07\x08",
                          15, HB_F_INFER_INPUT) == 2,
          "rest length");
}

int main(int argc, char **argv) {
    static hbgv_file file;
    hbgv_load(&file, argc > 1 ? argv[1] : "../fixtures/golden", "msg_cases.hbgv");
    F = &file;
    requests();
    accessors();
    data_blobs();
    formats();
    writing();
    hbgv_free(&file);
    TEST_MAIN_END("test_msg");
}
