/* CMSIS-NN's executed instructions on the shapes of hilbench-bench kernels (bench/bench.c),
 * under QEMU mps3-an547 -icount: hilbench's copy of the shared CMSIS-NN anchor harness
 * (/work/shared/anchors/cmsis-nn-icount, its LCG and fill order), with MobileNetV2 a0.35
 * 32x32's 1x1 (pointwise) convs added. SysTick follows the virtual clock, calibrated against
 * a loop of known length; each op's figure is the fewest of RUNS calls. Every op prints the
 * checksum of its output (s = s * 31 + byte, hex), as hilbench-bench kernels prints it: equal
 * checksums mean bit-identical outputs. run.sh builds and runs it. */
#include <stdint.h>
#include <string.h>
#include "arm_nnfunctions.h"

void sh_puts(const char *s);
#define SYST_CSR (*(volatile uint32_t *)0xE000E010)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018)
#define RUNS 3

static uint32_t now(void) { return SYST_CVR; }
static uint32_t ticks(uint32_t a, uint32_t b) { return (a - b) & 0xFFFFFFu; }

static void put_kv(const char *label, uint64_t v, int last) {
    char buf[80], num[24];
    int n = 0, i = 0;
    do {
        num[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    while (*label) buf[i++] = *label++;
    while (n) buf[i++] = num[--n];
    buf[i++] = last ? '\n' : ' ';
    buf[i] = 0;
    sh_puts(buf);
}

static uint32_t lcg = 12345;
static int8_t r8(void) {
    lcg = lcg * 1664525u + 1013904223u;
    return (int8_t)(lcg >> 24);
}
static void fill(int8_t *p, int n) {
    for (int i = 0; i < n; i++) p[i] = r8();
}

__attribute__((section(".big"))) static int8_t in[16 * 16 * 64];
__attribute__((section(".big"))) static int8_t out[16 * 16 * 64];
__attribute__((section(".big"))) static int8_t wt[3 * 3 * 16 * 32 + 256 * 128 + 3 * 3 * 64];
__attribute__((section(".big"))) static int32_t bias[256];
__attribute__((section(".big"))) static int32_t mult[256], shift[256];
__attribute__((section(".big"))) static uint8_t scratch[64 * 1024];

static uint32_t checksum(uint32_t n) {
    uint32_t s = 0;
    for (uint32_t i = 0; i < n; i++) s = s * 31u + (uint8_t)out[i];
    return s;
}

/* one line per op: name, MACs, the fewest ticks of RUNS calls, the output's checksum */
static void report(const char *name, uint64_t macs, uint32_t best, uint32_t n_out) {
    sh_puts("op name=");
    sh_puts(name);
    put_kv(" macs=", macs, 0);
    put_kv("ticks=", best, 0);
    char hex[20] = "checksum=", *h = hex + 9;
    const uint32_t c = checksum(n_out);
    int started = 0;
    for (int sh = 28; sh >= 0; sh -= 4) {
        const uint32_t d = (c >> sh) & 15u;
        if (d || started || sh == 0) {
            *h++ = (char)(d < 10 ? '0' + d : 'a' + d - 10);
            started = 1;
        }
    }
    *h++ = '\n';
    *h = 0;
    sh_puts(hex);
}

/* The 1x1 convs (stride 1, no pad) of MobileNetV2 a0.35 32x32 (hilbench.npu.zoo), and the
 * 16x16x16 -> 32 one of hilbench-bench kernels: h, w, c_in, c_out. */
static const struct {
    const char *name;
    int32_t h, w, c, oc;
} pw[] = {
    {"conv1x1", 16, 16, 16, 32},       {"pw16x16x16_8", 16, 16, 16, 8},
    {"pw16x16x8_48", 16, 16, 8, 48},   {"pw8x8x48_8", 8, 8, 48, 8},
    {"pw8x8x8_48", 8, 8, 8, 48},       {"pw4x4x48_16", 4, 4, 48, 16},
    {"pw4x4x16_96", 4, 4, 16, 96},     {"pw4x4x96_16", 4, 4, 96, 16},
    {"pw2x2x96_24", 2, 2, 96, 24},     {"pw2x2x24_144", 2, 2, 24, 144},
    {"pw2x2x144_24", 2, 2, 144, 24},   {"pw2x2x32_192", 2, 2, 32, 192},
    {"pw2x2x192_32", 2, 2, 192, 32},
};

/* The fewest ticks of RUNS calls of the conv wrapper on in, wt, bias into out. */
static uint32_t fewest_conv_ticks(const cmsis_nn_conv_params *p,
                                  const cmsis_nn_per_channel_quant_params *q,
                                  const cmsis_nn_dims *id, const cmsis_nn_dims *fd,
                                  const cmsis_nn_dims *bd, const cmsis_nn_dims *od) {
    cmsis_nn_context ctx = {scratch, arm_convolve_wrapper_s8_get_buffer_size(p, id, fd, od)};
    uint32_t best = 0xFFFFFFu;
    for (int r = 0; r < RUNS; r++) {
        uint32_t a = now();
        arm_convolve_wrapper_s8(&ctx, p, q, id, in, fd, wt, bd, bias, od, out);
        uint32_t t = ticks(a, now());
        if (t < best) best = t;
    }
    return best;
}

int main(void) {
    SYST_RVR = 0xFFFFFF;
    SYST_CVR = 0;
    SYST_CSR = 5;
    /* calibration: 2 instructions per iteration (subs, bne) */
    uint32_t t0 = now();
    __asm__ volatile("mov r4, %0\n1: subs r4, r4, #1\n bne 1b" ::"r"(1000000) : "r4", "cc");
    put_kv("calib_ticks_for_2M_instr=", ticks(t0, now()), 1);

    for (int i = 0; i < 256; i++) {
        bias[i] = (int32_t)r8() * 64;
        mult[i] = 1300000000 + i * 1000;
        shift[i] = -8;
    }
    fill(in, sizeof in);
    fill(wt, sizeof wt);

    cmsis_nn_per_channel_quant_params q = {mult, shift};
    /* conv 3x3, 16x16x16 -> 16x16x32, same padding */
    {
        cmsis_nn_conv_params p = {.input_offset = 3, .output_offset = -2, .stride = {1, 1},
                                  .padding = {1, 1}, .dilation = {1, 1}, .activation = {-128, 127}};
        cmsis_nn_dims id = {1, 16, 16, 16}, fd = {32, 3, 3, 16}, bd = {1, 1, 1, 32},
                      od = {1, 16, 16, 32};
        const uint32_t best = fewest_conv_ticks(&p, &q, &id, &fd, &bd, &od);
        report("conv3x3", 16ull * 16 * 32 * 3 * 3 * 16, best, 16 * 16 * 32);
    }
    /* the pointwise convs through the wrapper (it picks arm_convolve_1x1_s8_fast) */
    for (unsigned k = 0; k < sizeof pw / sizeof pw[0]; k++) {
        cmsis_nn_conv_params p = {.input_offset = 3, .output_offset = -2, .stride = {1, 1},
                                  .padding = {0, 0}, .dilation = {1, 1}, .activation = {-128, 127}};
        cmsis_nn_dims id = {1, pw[k].h, pw[k].w, pw[k].c}, fd = {pw[k].oc, 1, 1, pw[k].c},
                      bd = {1, 1, 1, pw[k].oc}, od = {1, pw[k].h, pw[k].w, pw[k].oc};
        const uint32_t best = fewest_conv_ticks(&p, &q, &id, &fd, &bd, &od);
        const uint32_t n_px = (uint32_t)(pw[k].h * pw[k].w);
        report(pw[k].name, (uint64_t)n_px * (uint32_t)(pw[k].c * pw[k].oc), best,
               n_px * (uint32_t)pw[k].oc);
    }
    return 0;
}
