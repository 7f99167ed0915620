/* hb_format equals Python's %-formatting on the subset the templates use, and cuts long
 * messages on a UTF-8 boundary (the expected texts are what Python prints). */
#include "check.h"
#include "hb_status.h"

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    hb_status st;
    HB_FAIL(&st, 5, "%s: field '%s' = %d out of range %d..%d", HB_S("PROBE request"),
            HB_S("eps"), HB_I(200), HB_I(1), HB_I(127));
    const char *want = "PROBE request: field 'eps' = 200 out of range 1..127";
    CHECK(st.code == 5 && st.len == hb_strlen(want) && memcmp(st.msg, want, st.len) == 0,
          "got %.*s", st.len, st.msg);
    char buf[64];
    size_t n = hb_format(buf, sizeof buf, "%x %08x %d %d 100%%",
                         (const hb_arg[]){HB_I(255), HB_I(-5), HB_I(INT64_MIN), HB_I(-7)}, 4);
    want = "ff -0000005 -9223372036854775808 -7 100%"; /* Python: '%x %08x %d %d 100%%' % (...) */
    CHECK(n == hb_strlen(want) && memcmp(buf, want, n) == 0, "got %.*s", (int)n, buf);
    /* 300 bytes of 3-byte characters cut at 256: 85 whole characters (255 bytes) */
    char big[301];
    for (int i = 0; i < 100; i++) memcpy(big + 3 * i, "\xe2\x82\xac", 3);
    big[300] = 0;
    HB_FAIL(&st, 10, "%s", HB_S(big));
    CHECK(st.len == 255, "cut at %u bytes, expected 255", st.len);
    HB_FAIL0(&st, 6, "no model");
    CHECK(st.len == 8 && st.code == 6, "HB_FAIL0");
    TEST_MAIN_END("test_status");
}
