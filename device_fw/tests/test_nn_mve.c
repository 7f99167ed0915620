/* The Helium (MVE) kernels against the scalar ones, on random and edge cases beyond the golden
 * vectors: every geometry the kernels' paths split on (interior and border pixels, strides,
 * dilations, pads, depth multipliers, filters past the depthwise copy buffer, channel counts
 * around the vector width), extreme offsets, multipliers, shifts and biases, both row
 * providers (weights read in place with their stride, and rows produced into one buffer that
 * the next row overwrites), and the order of the row and bias calls. Then the pieces alone:
 * hb_nn_requant_mve against hb_fp_mbqm + clamp, hb_nn_dot_mve against hb_nn_dot_s8.
 *
 * The scalar kernels are the same source files compiled here a second time with HB_NN_MVE 0
 * under ref_* names; the core's objects are the Helium ones. An MVE build only (make
 * an547-test, AN547_NN=mve); the golden vectors (test_nn, test_model) run on both variants. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn/hb_nn.h"

#if !HB_NN_MVE
#error "test_nn_mve compares the Helium kernels with the scalar ones: build it for an MVE target"
#endif

/* ---- the scalar kernels, a second time, as ref_* ---------------------------------------- */
void ref_fully_connected_s8(const hb_nn_fc_params *p, const int8_t *x, uint32_t k,
                            const hb_nn_rows *w, uint32_t m, int8_t *y);
void ref_conv2d_s8(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                   const hb_nn_rows *f, uint32_t kh, uint32_t kw, uint32_t out_c, int8_t *y);
void ref_depthwise_conv2d_s8(const hb_nn_conv_params *p, const hb_nn_dims *in, const int8_t *x,
                             const hb_nn_rows *f, uint32_t kh, uint32_t kw, int8_t *y);
void ref_add_s8(const hb_nn_add_params *p, const int8_t *a, const int8_t *b, uint32_t n,
                int8_t *y);
void ref_mean_s8(const hb_nn_mean_params *p, const hb_nn_dims *in, const int8_t *x, int8_t *y);
#undef HB_NN_MVE
#define HB_NN_MVE 0
#define hb_nn_add_s8 ref_add_s8
#define hb_nn_mean_s8 ref_mean_s8
#include "nn/add.c"
#include "nn/mean.c"
#undef hb_nn_add_s8
#undef hb_nn_mean_s8
#define hb_nn_fully_connected_s8 ref_fully_connected_s8
#define hb_nn_conv2d_s8 ref_conv2d_s8
#define hb_nn_depthwise_conv2d_s8 ref_depthwise_conv2d_s8
#include "nn/conv2d.c"
#include "nn/depthwise_conv2d.c"
#include "nn/fully_connected.c"
#undef hb_nn_fully_connected_s8
#undef hb_nn_conv2d_s8
#undef hb_nn_depthwise_conv2d_s8
#undef HB_NN_MVE
#define HB_NN_MVE 1

/* ---- random numbers (xorshift32) ------------------------------------------------------------ */
static uint32_t rng_state = 0x12345678u;
static uint32_t rnd(void) {
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return rng_state = x;
}
/* uniform in [lo, hi] */
static int32_t rnd_in(int32_t lo, int32_t hi) {
    return (int32_t)((int64_t)lo + (int64_t)(rnd() % (uint32_t)((int64_t)hi - lo + 1)));
}
static int chance(uint32_t percent) { return rnd() % 100u < percent; }

/* int8 data: uniform, or mostly extremes (-128, 127), or sparse */
static void fill(int8_t *v, size_t n) {
    const uint32_t kind = rnd() % 4u;
    for (size_t i = 0; i < n; i++) {
        int32_t b = rnd_in(-128, 127);
        if (kind == 1) b = chance(50) ? -128 : 127;
        if (kind == 2 && chance(80)) b = 0;
        v[i] = (int8_t)b;
    }
}

/* ---- row providers: in place (with a stride) or produced into one buffer ------------------ */
#define MAX_LOG 4096u
typedef struct {
    hb_nn_rows r;       /* first: the kernels see this */
    const int8_t *w;    /* the weights */
    const int32_t *b;   /* biases or NULL */
    uint32_t row_step;  /* row j starts at w + j * row_step */
    uint32_t len;       /* entries per row */
    uint32_t entry;     /* entries `entry` apart in w */
    int8_t *buf;        /* produced rows: one buffer, overwritten by every row call */
    uint32_t log[MAX_LOG], n_log; /* calls: 2j (row j), 2j+1 (bias j) */
} rows_t;

static const int8_t *row_in_place(const hb_nn_rows *r, uint32_t j) {
    rows_t *s = (rows_t *)(uintptr_t)r;
    if (s->n_log < MAX_LOG) s->log[s->n_log++] = 2 * j;
    return s->w + (size_t)j * s->row_step;
}
static const int8_t *row_produced(const hb_nn_rows *r, uint32_t j) {
    rows_t *s = (rows_t *)(uintptr_t)r;
    if (s->n_log < MAX_LOG) s->log[s->n_log++] = 2 * j;
    for (uint32_t i = 0; i < s->len; i++) s->buf[i] = s->w[(size_t)j * s->row_step + i * s->entry];
    return s->buf;
}
static int32_t bias_of(const hb_nn_rows *r, uint32_t j) {
    rows_t *s = (rows_t *)(uintptr_t)r;
    if (s->n_log < MAX_LOG) s->log[s->n_log++] = 2 * j + 1;
    return s->b ? s->b[j] : 0;
}

static void rows_init(rows_t *s, int produced, const int8_t *w, const int32_t *b,
                      uint32_t row_step, uint32_t len, uint32_t entry, int8_t *buf) {
    s->r.row = produced ? row_produced : row_in_place;
    s->r.bias = bias_of;
    s->r.step = produced ? 1 : entry;
    s->r.rows = NULL; /* the in-place view: set by in_place_view */
    s->r.biases = NULL;
    s->r.no_bias = 0;
    s->w = w;
    s->b = b;
    s->row_step = row_step;
    s->len = len;
    s->entry = entry;
    s->buf = buf;
    s->n_log = 0;
}

/* hb_nn_rows' optional in-place view of leading rows read in place (row_step = len, entry 1):
 * the rows alone, or the rows and the biases (or none); a kernel may then skip the calls.
 * Returns whether the view is whole (hb_nn_rows_all_in_place). */
static int in_place_view(rows_t *s, int which) {
    if (s->r.row != row_in_place || s->row_step != s->len || s->entry != 1 || which == 0) return 0;
    s->r.rows = s->w;
    if (which == 1) return 0; /* rows only: biases still by call */
    s->r.biases = s->b ? (const uint8_t *)s->b : NULL; /* little-endian i32 on both hosts */
    s->r.no_bias = s->b == NULL;
    return 1;
}

/* ---- random quantization ----------------------------------------------------------------- */
typedef struct {
    uint8_t mult[4 * 1024];
    int8_t shift[1024];
    int32_t bias[1024];
} quant_t;

static void random_quant(quant_t *q, uint32_t n_out, hb_nn_requant *rq, int32_t *bias_spread) {
    rq->n = chance(50) ? n_out : 1;
    rq->mult = q->mult;
    rq->shift = q->shift;
    const int wild = chance(15);
    for (uint32_t i = 0; i < rq->n; i++) {
        uint32_t m = (1u << 30) + (rnd() >> 2); /* [2^30, 2^31) as TFLM makes them */
        if (wild) m = chance(10) ? (chance(50) ? 0u : 0x7FFFFFFFu) : rnd() >> 1;
        hb_wr32(q->mult + 4 * i, m);
        q->shift[i] = (int8_t)(wild ? rnd_in(-31, 30) : rnd_in(-14, 1));
    }
    *bias_spread = chance(20) ? INT32_MAX : rnd_in(0, 1 << 16);
}

static int32_t random_bias(int32_t spread) {
    if (spread == INT32_MAX) return (int32_t)rnd();
    return rnd_in(-spread, spread);
}

static void random_out(int32_t *output_offset, int32_t *act_min, int32_t *act_max) {
    *output_offset = rnd_in(-128, 127);
    *act_min = -128;
    *act_max = 127;
    if (chance(40)) {
        *act_min = rnd_in(-128, 127);
        *act_max = rnd_in(*act_min, 127);
    }
}

/* outputs with a guard after them: the kernels write out_n bytes and no more */
#define GUARD 64u
static int8_t *y_ref, *y_mve;
static int8_t *x_buf, *w_buf, *row_buf;
static quant_t quant;
static rows_t rows_a, rows_b;

static void compare(const char *what, int i, size_t out_n, const char *desc) {
    char label[300];
    snprintf(label, sizeof label, "%s case %d (%s)", what, i, desc);
    hb_check_bytes(label, y_mve, y_ref, out_n + GUARD, __FILE__, __LINE__);
    /* with every row and bias in place the kernel may skip the calls: none or all of them,
     * in the reference's order */
    const int skipped = hb_nn_rows_all_in_place(&rows_b.r) && rows_b.n_log == 0;
    const int same = rows_a.n_log == rows_b.n_log &&
                     memcmp(rows_a.log, rows_b.log, rows_a.n_log * sizeof(uint32_t)) == 0;
    CHECK(skipped || same, "%s: the row and bias calls differ (%u against %u calls)", label,
          rows_b.n_log, rows_a.n_log);
}

static void prepare_outputs(size_t out_n) {
    memset(y_ref, 0x5A, out_n + GUARD);
    memset(y_mve, 0x5A, out_n + GUARD);
}

/* ---- FULLY_CONNECTED ---------------------------------------------------------------------- */
static int n_fc_views;
static void test_fc(int cases) {
    for (int i = 0; i < cases; i++) {
        const uint32_t k = chance(20) ? (uint32_t)rnd_in(1, 17) : (uint32_t)rnd_in(1, 700);
        const uint32_t m = (uint32_t)rnd_in(1, chance(30) ? 9 : 200);
        hb_nn_fc_params p;
        int32_t spread;
        p.input_offset = rnd_in(-127, 128);
        random_out(&p.output_offset, &p.act_min, &p.act_max);
        random_quant(&quant, m, &p.rq, &spread);
        for (uint32_t o = 0; o < m; o++) quant.bias[o] = random_bias(spread);
        fill(x_buf, k);
        fill(w_buf, (size_t)k * m);
        const int produced = chance(50), with_bias = chance(80);
        const int32_t *b = with_bias ? quant.bias : NULL;
        rows_init(&rows_a, produced, w_buf, b, k, k, 1, row_buf);
        rows_init(&rows_b, produced, w_buf, b, k, k, 1, row_buf);
        const int view = rnd_in(0, 2); /* none, the rows alone, rows and biases */
        in_place_view(&rows_a, view);
        const int whole = in_place_view(&rows_b, view);
        prepare_outputs(m);
        ref_fully_connected_s8(&p, x_buf, k, &rows_a.r, m, y_ref);
        hb_nn_fully_connected_s8(&p, x_buf, k, &rows_b.r, m, y_mve);
        char desc[160];
        snprintf(desc, sizeof desc, "K=%u M=%u rq.n=%u %s%s", k, m, p.rq.n,
                 produced ? "produced rows" : "in place", whole ? ", the view" : "");
        compare("FULLY_CONNECTED", i, m, desc);
        n_fc_views += whole;
        CHECK(!whole || rows_b.n_log == 0, "FULLY_CONNECTED case %d: %u calls with the view", i,
              rows_b.n_log);
    }
}

/* ---- the window of a conv: pads and output size ------------------------------------------- */
typedef struct {
    uint32_t kh, kw;
    hb_nn_dims in;
} window_t;

/* output size along one axis for a total pad; 0 when the window does not fit */
static uint32_t out_size(uint32_t in, uint32_t k, uint32_t dil, uint32_t stride, uint32_t pad) {
    const uint32_t eff = (k - 1) * dil + 1;
    if (in + pad < eff) return 0;
    return (in + pad - eff) / stride + 1;
}

/* a random geometry; 0 when it does not fit (the caller draws again) */
static int random_geometry(hb_nn_conv_params *p, window_t *win, uint32_t k_max, uint32_t hw_max,
                           uint32_t c_max) {
    win->kh = (uint32_t)rnd_in(1, (int32_t)k_max);
    win->kw = chance(70) ? win->kh : (uint32_t)rnd_in(1, (int32_t)k_max);
    win->in.h = (uint32_t)rnd_in(1, (int32_t)hw_max);
    win->in.w = (uint32_t)rnd_in(1, (int32_t)hw_max);
    win->in.c = (uint32_t)rnd_in(1, (int32_t)c_max);
    p->stride_h = (uint32_t)rnd_in(1, 3);
    p->stride_w = chance(70) ? p->stride_h : (uint32_t)rnd_in(1, 3);
    p->dilation_h = chance(75) ? 1u : (uint32_t)rnd_in(2, 3);
    p->dilation_w = chance(75) ? 1u : (uint32_t)rnd_in(2, 3);
    const uint32_t eff_h = (win->kh - 1) * p->dilation_h + 1;
    const uint32_t eff_w = (win->kw - 1) * p->dilation_w + 1;
    /* a total pad in [0, eff - 1] (SAME's and VALID's among them), top/left its floor half or
     * any part of it */
    const uint32_t pad_h = chance(30) ? 0u : (uint32_t)rnd_in(0, (int32_t)eff_h - 1);
    const uint32_t pad_w = chance(30) ? 0u : (uint32_t)rnd_in(0, (int32_t)eff_w - 1);
    p->pad_top = chance(70) ? pad_h / 2 : (uint32_t)rnd_in(0, (int32_t)pad_h);
    p->pad_left = chance(70) ? pad_w / 2 : (uint32_t)rnd_in(0, (int32_t)pad_w);
    p->out_h = out_size(win->in.h, win->kh, p->dilation_h, p->stride_h, pad_h);
    p->out_w = out_size(win->in.w, win->kw, p->dilation_w, p->stride_w, pad_w);
    p->input_offset = rnd_in(-127, 128);
    random_out(&p->output_offset, &p->act_min, &p->act_max);
    return p->out_h > 0 && p->out_w > 0;
}

static void describe(char *desc, size_t n, const hb_nn_conv_params *p, const window_t *w,
                     uint32_t out_c, int produced) {
    snprintf(desc, n,
             "in %ux%ux%u k %ux%u stride %u,%u dilation %u,%u pad %u,%u out %ux%ux%u D=%u "
             "rq.n=%u %s",
             w->in.h, w->in.w, w->in.c, w->kh, w->kw, p->stride_h, p->stride_w, p->dilation_h,
             p->dilation_w, p->pad_top, p->pad_left, p->out_h, p->out_w, out_c,
             p->depth_multiplier, p->rq.n, produced ? "produced rows" : "in place");
}

/* Every eighth case of a kind the kernels single out: the window is the whole input (one
 * output pixel), a 1x1 input and filter, an input offset no int8 can pad (the blob does not
 * bound it). */
static void directed(hb_nn_conv_params *p, window_t *w, int i) {
    if (i % 8 == 0 || i % 8 == 1) {
        if (i % 8 == 1) w->kh = w->kw = 1;
        w->in.h = w->kh;
        w->in.w = w->kw;
        p->dilation_h = p->dilation_w = 1;
        p->pad_top = p->pad_left = 0;
        p->out_h = p->out_w = 1;
    }
    if (i % 8 == 2) p->input_offset = chance(50) ? rnd_in(129, 1000) : rnd_in(-1000, -128);
}

/* Every eighth case (3 and 4 of 8): a pointwise conv (1x1, stride 1, no pad) of 1..30
 * pixels (the few-pixel path and the one past it, whole groups of four and tails), K up to
 * 200 (every tail of a 16-byte vector) */
static void directed_pointwise(hb_nn_conv_params *p, window_t *w, int i) {
    if (i % 8 != 3 && i % 8 != 4) return;
    w->kh = w->kw = 1;
    w->in.h = (uint32_t)rnd_in(1, i % 8 == 3 ? 4 : 6);
    w->in.w = (uint32_t)rnd_in(1, 5);
    w->in.c = (uint32_t)rnd_in(1, 200);
    p->stride_h = p->stride_w = p->dilation_h = p->dilation_w = 1;
    p->pad_top = p->pad_left = 0;
    p->out_h = w->in.h;
    p->out_w = w->in.w;
}

/* ---- CONV_2D ---------------------------------------------------------------------------- */
static int n_whole_views, n_pw_in_place;
static void test_conv(int cases) {
    for (int i = 0; i < cases; i++) {
        hb_nn_conv_params p;
        window_t w;
        if (!random_geometry(&p, &w, 5, 12, chance(50) ? 40 : 8)) {
            i--;
            continue;
        }
        p.depth_multiplier = 1;
        directed(&p, &w, i);
        directed_pointwise(&p, &w, i);
        const uint32_t out_c = (uint32_t)rnd_in(1, i % 8 == 3 ? 60 : 20);
        const uint32_t row = w.kh * w.kw * w.in.c;
        int32_t spread;
        random_quant(&quant, out_c, &p.rq, &spread);
        for (uint32_t o = 0; o < out_c; o++) quant.bias[o] = random_bias(spread);
        fill(x_buf, (size_t)w.in.h * w.in.w * w.in.c);
        fill(w_buf, (size_t)row * out_c);
        const int produced = chance(50);
        const int32_t *b = chance(80) ? quant.bias : NULL;
        rows_init(&rows_a, produced, w_buf, b, row, row, 1, row_buf);
        rows_init(&rows_b, produced, w_buf, b, row, row, 1, row_buf);
        /* none, the rows alone, rows and biases (always on the few-pixel pointwise cases) */
        const int view = i % 8 == 3 ? 2 : rnd_in(0, 2);
        in_place_view(&rows_a, view);
        const int whole = in_place_view(&rows_b, view);
        n_whole_views += whole;
        const size_t out_n = (size_t)p.out_h * p.out_w * out_c;
        prepare_outputs(out_n);
        ref_conv2d_s8(&p, &w.in, x_buf, &rows_a.r, w.kh, w.kw, out_c, y_ref);
        hb_nn_conv2d_s8(&p, &w.in, x_buf, &rows_b.r, w.kh, w.kw, out_c, y_mve);
        char desc[300];
        describe(desc, sizeof desc, &p, &w, out_c, produced);
        if (whole) strncat(desc, ", rows and biases in place", sizeof desc - strlen(desc) - 1);
        compare("CONV_2D", i, out_n, desc);
        /* the few-pixel pointwise path reads them all in place: no calls at all */
        if (whole && w.kh == 1 && w.kw == 1 && p.stride_h == 1 && p.stride_w == 1 &&
            p.pad_top == 0 && p.pad_left == 0 && p.out_h * p.out_w > 1 &&
            p.out_h * p.out_w <= 16 && p.out_h == w.in.h && p.out_w == w.in.w) {
            n_pw_in_place++;
            CHECK(rows_b.n_log == 0, "CONV_2D case %d: %u row/bias calls on the in-place path",
                  i, rows_b.n_log);
        }
    }
}

/* ---- DEPTHWISE_CONV_2D ---------------------------------------------------------------------- */
static void test_depthwise(int cases) {
    for (int i = 0; i < cases; i++) {
        hb_nn_conv_params p;
        window_t w;
        /* filters up to 9x9: past the copy buffer's 64 taps */
        if (!random_geometry(&p, &w, chance(20) ? 9 : 4, 12, chance(50) ? 40 : 6)) {
            i--;
            continue;
        }
        p.depth_multiplier = chance(60) ? 1u : (uint32_t)rnd_in(2, 3);
        const uint32_t out_c = w.in.c * p.depth_multiplier, taps = w.kh * w.kw;
        int32_t spread;
        random_quant(&quant, out_c, &p.rq, &spread);
        for (uint32_t o = 0; o < out_c; o++) quant.bias[o] = random_bias(spread);
        fill(x_buf, (size_t)w.in.h * w.in.w * w.in.c);
        /* [kh][kw][out_c]: row j = column j; or every other column of a filter twice as wide
         * (rows in place but not consecutive) */
        const uint32_t apart = chance(25) ? 2u : 1u;
        fill(w_buf, (size_t)taps * out_c * apart);
        const int produced = chance(50);
        const int32_t *b = chance(80) ? quant.bias : NULL;
        rows_init(&rows_a, produced, w_buf, b, apart, taps, out_c * apart, row_buf);
        rows_init(&rows_b, produced, w_buf, b, apart, taps, out_c * apart, row_buf);
        const size_t out_n = (size_t)p.out_h * p.out_w * out_c;
        prepare_outputs(out_n);
        ref_depthwise_conv2d_s8(&p, &w.in, x_buf, &rows_a.r, w.kh, w.kw, y_ref);
        hb_nn_depthwise_conv2d_s8(&p, &w.in, x_buf, &rows_b.r, w.kh, w.kw, y_mve);
        char desc[300];
        describe(desc, sizeof desc, &p, &w, out_c, produced);
        compare("DEPTHWISE_CONV_2D", i, out_n, desc);
    }
}

/* ---- ADD and MEAN ------------------------------------------------------------------------ */
static int32_t random_multiplier(void) {
    return chance(5) ? (chance(50) ? 0 : INT32_MAX) : rnd_in(1 << 30, INT32_MAX);
}

static void test_add(int cases) {
    for (int i = 0; i < cases; i++) {
        hb_nn_add_params p;
        p.input1_offset = rnd_in(-127, 128);
        p.input2_offset = rnd_in(-127, 128);
        random_out(&p.output_offset, &p.act_min, &p.act_max);
        p.left_shift = chance(70) ? 20 : rnd_in(0, 20);
        p.input1_multiplier = random_multiplier();
        p.input2_multiplier = random_multiplier();
        p.output_multiplier = random_multiplier();
        p.input1_shift = rnd_in(-31, 0);
        p.input2_shift = rnd_in(-31, 0);
        p.output_shift = rnd_in(-31, chance(20) ? 30 : 0);
        const uint32_t n = (uint32_t)rnd_in(1, 300);
        fill(x_buf, n);
        fill(w_buf, n);
        prepare_outputs(n);
        ref_add_s8(&p, x_buf, (const int8_t *)w_buf, n, y_ref);
        hb_nn_add_s8(&p, x_buf, (const int8_t *)w_buf, n, y_mve);
        char desc[160];
        snprintf(desc, sizeof desc, "n %u left_shift %d shifts %d,%d,%d", n, p.left_shift,
                 p.input1_shift, p.input2_shift, p.output_shift);
        rows_a.n_log = rows_b.n_log = 0; /* no rows */
        compare("ADD", i, n, desc);
    }
}

static void test_mean(int cases) {
    for (int i = 0; i < cases; i++) {
        hb_nn_mean_params p;
        const hb_nn_dims in = {(uint32_t)rnd_in(1, 12), (uint32_t)rnd_in(1, 12),
                               (uint32_t)rnd_in(1, 70)};
        p.count = in.h * in.w;
        p.input_zero_point = rnd_in(-128, 127);
        p.output_offset = rnd_in(-128, 127);
        p.multiplier = random_multiplier();
        p.shift = rnd_in(-31, chance(20) ? 30 : 0);
        fill(x_buf, (size_t)in.h * in.w * in.c);
        prepare_outputs(in.c);
        ref_mean_s8(&p, &in, x_buf, y_ref);
        hb_nn_mean_s8(&p, &in, x_buf, y_mve);
        char desc[160];
        snprintf(desc, sizeof desc, "in %ux%ux%u zp %d shift %d", in.h, in.w, in.c,
                 p.input_zero_point, p.shift);
        rows_a.n_log = rows_b.n_log = 0;
        compare("MEAN", i, in.c, desc);
    }
}

/* ---- the pieces ------------------------------------------------------------------------- */
static int32_t pick_acc(void) {
    static const int32_t edge[] = {0, 1, -1, INT32_MAX, INT32_MIN, INT32_MIN + 1, 1 << 30,
                                   -(1 << 30), 12345, -12345};
    return chance(25) ? edge[rnd() % (sizeof edge / sizeof edge[0])] : (int32_t)rnd();
}

static void test_requant(int cases) {
    int bad = 0;
    for (int i = 0; i < cases; i++) {
        int32_t acc[4], mult[4], shift[4], want[4], got[4];
        int32_t output_offset, act_min, act_max;
        random_out(&output_offset, &act_min, &act_max);
        for (int l = 0; l < 4; l++) {
            acc[l] = pick_acc();
            mult[l] = chance(10) ? (chance(50) ? 0 : INT32_MAX) : (int32_t)(rnd() >> 1);
            shift[l] = rnd_in(-31, 30);
            want[l] = hb_fp_clamp8((int64_t)hb_fp_mbqm(acc[l], mult[l], shift[l]) + output_offset,
                                   act_min, act_max);
        }
        vst1q_s32(got, hb_nn_requant_mve(vld1q_s32(acc), vld1q_s32(mult), vld1q_s32(shift),
                                         output_offset, act_min, act_max));
        for (int l = 0; l < 4; l++) {
            CHECK(got[l] == want[l], "requant lane %d: acc %ld mult %ld shift %ld offset %ld "
                  "[%ld, %ld]: %ld, want %ld", l, (long)acc[l], (long)mult[l], (long)shift[l],
                  (long)output_offset, (long)act_min, (long)act_max, (long)got[l],
                  (long)want[l]);
            if (got[l] != want[l] && ++bad > 20) return;
        }
    }
}

static void test_dot(void) {
    /* every length to 140 at every start offset mod 16, then one of 2^17 + 7 elements whose
     * sums wrap (-128 * -128 * 2^17 = 2^31) */
    for (uint32_t n = 0; n <= 140; n++)
        for (uint32_t a = 0; a < 16; a += (n < 40 ? 1 : 5)) {
            fill(x_buf + a, n);
            fill(w_buf + 3 * a, n);
            const int32_t off = rnd_in(-127, 128);
            int32_t dot = (int32_t)rnd(), sumw = (int32_t)rnd();
            const uint32_t dot0 = (uint32_t)dot, sumw0 = (uint32_t)sumw;
            hb_nn_dot_mve(w_buf + 3 * a, x_buf + a, n, &dot, &sumw);
            const uint32_t got = ((uint32_t)dot - dot0) + (uint32_t)off * ((uint32_t)sumw - sumw0);
            const uint32_t want = hb_nn_dot_s8(w_buf + 3 * a, x_buf + a, off, n);
            CHECK(got == want, "dot n=%lu at +%lu: %lu, want %lu", (unsigned long)n,
                  (unsigned long)a, (unsigned long)got, (unsigned long)want);
        }
    const uint32_t n = (1u << 17) + 7;
    int8_t *w = malloc(n), *x = malloc(n);
    CHECK(w && x, "no memory for the long dot product");
    if (!w || !x) return;
    memset(w, -128, n);
    memset(x, -128, n);
    int32_t dot = 0, sumw = 0;
    hb_nn_dot_mve(w, x, n, &dot, &sumw);
    const uint32_t got = (uint32_t)dot + 127u * (uint32_t)sumw;
    CHECK(got == hb_nn_dot_s8(w, x, 127, n), "the long dot product: %lu, want %lu",
          (unsigned long)got, (unsigned long)hb_nn_dot_s8(w, x, 127, n));
    free(w);
    free(x);
}

int main(int argc, char **argv) {
    (void)argv;
    const int scale = argc > 2 ? 4 : 1; /* any extra argument: four times the cases */
    y_ref = malloc(1u << 16);
    y_mve = malloc(1u << 16);
    x_buf = malloc(1u << 16);
    w_buf = malloc(1u << 18);
    row_buf = malloc(1u << 12);
    if (!y_ref || !y_mve || !x_buf || !w_buf || !row_buf) {
        fprintf(stderr, "test_nn_mve: no memory for the buffers\n");
        return 1;
    }
    test_dot();
    test_requant(20000 * scale);
    test_fc(400 * scale);
    CHECK(n_fc_views >= 40 * scale, "only %d FULLY_CONNECTED cases with the in-place view",
          n_fc_views);
    test_conv(400 * scale);
    /* the directed pointwise cases reach the in-place path (about 1 in 16 of all, drawn) */
    CHECK(n_pw_in_place >= 10 * scale,
          "only %d CONV_2D cases took the few-pixel in-place path (%d whole views)",
          n_pw_in_place, n_whole_views);
    test_depthwise(400 * scale);
    test_add(400 * scale);
    test_mean(400 * scale);
    printf("test_nn_mve: Helium against scalar: %d FC, %d CONV_2D, %d DEPTHWISE_CONV_2D, %d ADD, "
           "%d MEAN cases (%d pointwise ones read in place), %d requantizations of 4 lanes, every "
           "dot product length 0..140\n",
           400 * scale, 400 * scale, 400 * scale, 400 * scale, 400 * scale, n_pw_in_place,
           20000 * scale);
    TEST_MAIN_END("test_nn_mve");
}
