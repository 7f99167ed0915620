/* The stm32n6 port's bring-up (bringup.c, uart.c) and the shared cache code (cortex_m/cache.c)
 * run on the host against the STAND-IN register file of mmio_record.c: every write is checked
 * against the documented sequence and values (docs/board.md's register table), and its order
 * where order matters (voltage before PLL1, the SMPS overdrive before VOS scale 0, PLL1 locked
 * before the switch, caches invalidated before they are enabled, USART1 disabled while it is
 * configured). No silicon: what this cannot show is in docs/board.md. */
#include <stdio.h>
#include <stdlib.h>

#include "cm_cache.h"
#include "cm_mmio.h"
#include "mmio_record.h"
#include "n6_bringup.h"
#include "n6_regs.h"
#include "port.h"

static int checks, failures;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        checks++;                                                     \
        if (!(cond)) {                                                \
            failures++;                                               \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            printf(__VA_ARGS__);                                      \
            printf("\n");                                             \
        }                                                             \
    } while (0)

/* the index of the first (last) write to addr whose value has (value & mask) == want; -1 */
static long first_write(uint32_t addr, uint32_t mask, uint32_t want) {
    const hb_mmio_write *w;
    size_t n = hb_mmio_writes(&w);
    for (size_t i = 0; i < n; i++)
        if (w[i].addr == addr && (w[i].value & mask) == want) return (long)i;
    return -1;
}
static long last_write(uint32_t addr, uint32_t mask, uint32_t want) {
    const hb_mmio_write *w;
    size_t n = hb_mmio_writes(&w);
    for (size_t i = n; i-- > 0;)
        if (w[i].addr == addr && (w[i].value & mask) == want) return (long)i;
    return -1;
}
static long any_write(uint32_t addr) { return first_write(addr, 0, 0); }
static size_t count_writes(uint32_t addr) {
    const hb_mmio_write *w;
    size_t n = hb_mmio_writes(&w), c = 0;
    for (size_t i = 0; i < n; i++) c += w[i].addr == addr;
    return c;
}
#define CPUSW_MASK (3u << N6_RCC_CFGR1_CPUSW_SHIFT)
#define SYSSW_MASK (3u << N6_RCC_CFGR1_SYSSW_SHIFT)
#define PLL_ON N6_RCC_SET(N6_RCC_CR)
#define PLL_OFF N6_RCC_CLR(N6_RCC_CR)

static uint32_t ic(uint32_t divider) { return (divider - 1u) << N6_RCC_ICCFGR_INT_SHIFT; }

/* the clock sequence both plans share, then the plan's own values */
static void check_clock_plan(uint32_t mhz, uint32_t m, uint32_t n, uint32_t d1, uint32_t d2,
                             uint32_t d6, uint32_t d11) {
    hb_mmio_clear();
    uint32_t errors = 0;
    uint32_t hz = hb_n6_clocks_init(hb_n6_clock_plan_for(mhz), &errors);
    CHECK(hz == mhz * 1000000u, "%u MHz plan set %u Hz", mhz, hz);
    CHECK(errors == 0, "errors 0x%x", errors);
    long vos = any_write(N6_PWR_VOSCR), off = any_write(PLL_OFF), on = any_write(PLL_ON);
    long cfg1 = any_write(N6_RCC_PLL1CFGR1), cfg3 = last_write(N6_RCC_PLL1CFGR3, 0, 0);
    CHECK(vos >= 0 && vos < on, "VOS (%ld) before PLL1 on (%ld)", vos, on);
    CHECK(off >= 0 && off < cfg1 && cfg1 < on && cfg3 < on,
          "PLL1 off (%ld), configured (%ld, %ld), on (%ld)", off, cfg1, cfg3, on);
    CHECK((hb_mmio_get(N6_PWR_VOSCR) & N6_PWR_VOSCR_VOS) == (mhz == 800 ? 1u : 0u),
          "VOSCR 0x%x for %u MHz", hb_mmio_get(N6_PWR_VOSCR), mhz);
    uint32_t want1 = (m << N6_RCC_PLL1CFGR1_DIVM_SHIFT) | (n << N6_RCC_PLL1CFGR1_DIVN_SHIFT);
    CHECK(hb_mmio_get(N6_RCC_PLL1CFGR1) == want1, "PLL1CFGR1 0x%x, want 0x%x (HSI, M %u, N %u)",
          hb_mmio_get(N6_RCC_PLL1CFGR1), want1, m, n);
    uint32_t want3 = N6_RCC_PLL1CFGR3_PDIVEN | (1u << N6_RCC_PLL1CFGR3_PDIV1_SHIFT) |
                     (1u << N6_RCC_PLL1CFGR3_PDIV2_SHIFT) | N6_RCC_PLL1CFGR3_MODSSDIS |
                     N6_RCC_PLL1CFGR3_MODSSRST;
    CHECK(hb_mmio_get(N6_RCC_PLL1CFGR3) == want3, "PLL1CFGR3 0x%x, want 0x%x",
          hb_mmio_get(N6_RCC_PLL1CFGR3), want3);
    CHECK(hb_mmio_get(N6_RCC_PLL1CFGR2) == 0, "no fractional part");
    CHECK(hb_mmio_get(N6_RCC_IC1CFGR) == ic(d1), "IC1CFGR 0x%x", hb_mmio_get(N6_RCC_IC1CFGR));
    CHECK(hb_mmio_get(N6_RCC_IC2CFGR) == ic(d2), "IC2CFGR 0x%x", hb_mmio_get(N6_RCC_IC2CFGR));
    CHECK(hb_mmio_get(N6_RCC_IC6CFGR) == ic(d6), "IC6CFGR 0x%x", hb_mmio_get(N6_RCC_IC6CFGR));
    CHECK(hb_mmio_get(N6_RCC_IC11CFGR) == ic(d11), "IC11CFGR 0x%x",
          hb_mmio_get(N6_RCC_IC11CFGR));
    /* (PLL1 x P) / IC dividers: the frequencies ST's examples name */
    uint32_t pll = 64u / m * n;
    CHECK(pll / d1 == mhz && pll / d2 == 400u, "CPU %u MHz, AXI %u MHz", pll / d1, pll / d2);
    long cfgr2 = any_write(N6_RCC_CFGR2);
    long cpu = first_write(N6_RCC_CFGR1, CPUSW_MASK, N6_RCC_CPUSW_IC1 << N6_RCC_CFGR1_CPUSW_SHIFT);
    long sys = first_write(N6_RCC_CFGR1, SYSSW_MASK, N6_RCC_SYSSW_IC2 << N6_RCC_CFGR1_SYSSW_SHIFT);
    CHECK(hb_mmio_get(N6_RCC_CFGR2) == (1u << N6_RCC_CFGR2_HPRE_SHIFT), "CFGR2 0x%x: AHB /2",
          hb_mmio_get(N6_RCC_CFGR2));
    CHECK(on < cfgr2 && cfgr2 < cpu, "PLL1 on (%ld), prescalers (%ld), CPU switch (%ld)", on,
          cfgr2, cpu);
    long ic1 = any_write(N6_RCC_IC1CFGR), en1 = first_write(N6_RCC_SET(N6_RCC_DIVENR),
                                                             N6_RCC_DIVENR_IC1, N6_RCC_DIVENR_IC1);
    CHECK(ic1 >= 0 && ic1 < en1 && en1 < cpu, "IC1 (%ld) enabled (%ld) before the CPU switch",
          ic1, en1);
    long en2 = first_write(N6_RCC_SET(N6_RCC_DIVENR), N6_RCC_DIVENR_IC2 | N6_RCC_DIVENR_IC6 |
                               N6_RCC_DIVENR_IC11,
                           N6_RCC_DIVENR_IC2 | N6_RCC_DIVENR_IC6 | N6_RCC_DIVENR_IC11);
    CHECK(cpu < en2 && en2 < sys, "CPU switch (%ld), IC2/6/11 on (%ld), bus switch (%ld)", cpu,
          en2, sys);
    uint32_t c1 = hb_mmio_get(N6_RCC_CFGR1);
    CHECK(((c1 >> N6_RCC_CFGR1_CPUSWS_SHIFT) & 3u) == 3u &&
              ((c1 >> N6_RCC_CFGR1_SYSSWS_SHIFT) & 3u) == 3u,
          "CFGR1 0x%x: on IC1 and IC2", c1);
    long smps = first_write(N6_GPIO_BSRR(N6_GPIOF), 1u << 4, 1u << 4);
    long smps_out = first_write(N6_GPIO_MODER(N6_GPIOF), 3u << 8, 1u << 8);
    if (mhz == 800) {
        CHECK(smps >= 0 && smps_out >= 0 && smps < vos && smps_out < vos,
              "PF4 high (%ld) and driven (%ld) before VOS scale 0 (%ld)", smps, smps_out, vos);
        CHECK(hb_mmio_reads(N6_RCC_SR) >= 64000u, "the ramp wait: %u reads",
              hb_mmio_reads(N6_RCC_SR));
    } else {
        CHECK(smps < 0 && smps_out < 0, "600 MHz leaves the SMPS pin alone");
    }
}

static void test_clocks(void) {
    check_clock_plan(600, 4, 75, 2, 3, 4, 3); /* ST's NUCLEO-N657X0-Q PWR_SLEEP example */
    check_clock_plan(800, 8, 100, 1, 2, 4, 2); /* ST's STM32N6570-DK Template FSBL */
    CHECK(hb_n6_clock_plan_for(64) == NULL && hb_n6_clock_plan_for(700) == NULL,
          "only 600 and 800 have plans");

    /* a restart: the CPU and buses still on IC1 / IC2 -> back to HSI before PLL1 is touched */
    hb_mmio_clear();
    hb_mmio_set(N6_RCC_CFGR1, (3u << N6_RCC_CFGR1_CPUSWS_SHIFT) | (3u << N6_RCC_CFGR1_SYSSWS_SHIFT) |
                                  (3u << N6_RCC_CFGR1_CPUSW_SHIFT) | (3u << N6_RCC_CFGR1_SYSSW_SHIFT));
    hb_mmio_set(N6_RCC_CR, N6_RCC_CR_PLL1ON);
    hb_mmio_set(N6_RCC_SR, N6_RCC_SR_HSIRDY | N6_RCC_SR_PLL1RDY);
    uint32_t errors = 0;
    hb_n6_clocks_init(hb_n6_clock_plan_for(600), &errors);
    long hsi = first_write(N6_RCC_CFGR1, CPUSW_MASK | SYSSW_MASK, 0);
    CHECK(hsi >= 0 && hsi < any_write(PLL_OFF), "to HSI (%ld) before PLL1 off (%ld)", hsi,
          any_write(PLL_OFF));
    CHECK(errors == 0, "errors 0x%x", errors);

    /* PLL1 never locks: the CPU stays on HSI, and says so */
    hb_mmio_clear();
    hb_mmio_knobs.pll_never_locks = 1;
    errors = 0;
    uint32_t hz = hb_n6_clocks_init(hb_n6_clock_plan_for(600), &errors);
    CHECK(hz == N6_HSI_HZ && (errors & HB_BRINGUP_PLL), "%u Hz, errors 0x%x", hz, errors);
    CHECK(first_write(N6_RCC_CFGR1, CPUSW_MASK, 3u << N6_RCC_CFGR1_CPUSW_SHIFT) < 0,
          "no switch to an unlocked PLL");

    /* the reset clock tree (N6_CLOCK=64): nothing written */
    hb_mmio_clear();
    errors = 0;
    hz = hb_n6_clocks_init(NULL, &errors);
    const hb_mmio_write *w;
    CHECK(hz == N6_HSI_HZ && hb_mmio_writes(&w) == 0, "HSI kept, nothing written");
}

static void test_power_memories_sleep(void) {
    hb_mmio_clear();
    hb_mmio_set(N6_PWR_CR1, N6_PWR_CR1_SDEN);
    hb_mmio_set(N6_PWR_VOSCR, N6_PWR_VOSCR_ACTVOSRDY);
    CHECK(hb_n6_power_init() == 0, "the supply reported ready");
    CHECK(!(hb_mmio_get(N6_PWR_CR1) & N6_PWR_CR1_SDEN), "external supply: SDEN 0");
    CHECK(any_write(N6_PWR_CR1) > first_write(N6_RCC_SET(N6_RCC_AHB4ENR), N6_RCC_AHB4_PWR,
                                              N6_RCC_AHB4_PWR) &&
              hb_mmio_reads(N6_PWR_VOSCR) >= 1,
          "supply set after PWR's clock, ACTVOSRDY awaited");
    long pwr = first_write(N6_RCC_SET(N6_RCC_AHB4ENR), N6_RCC_AHB4_PWR, N6_RCC_AHB4_PWR);
    long sv = any_write(N6_PWR_SVMCR3);
    CHECK(pwr >= 0 && pwr < sv, "PWR clocked (%ld) before SVMCR3 (%ld)", pwr, sv);
    CHECK((hb_mmio_get(N6_PWR_SVMCR3) & 0x300u) == 0x300u, "VDDIO2SV, VDDIO3SV: SVMCR3 0x%x",
          hb_mmio_get(N6_PWR_SVMCR3));

    hb_mmio_clear();
    for (uint32_t n = 2; n <= 6; n++) /* after reset: AXISRAM3..6 shut down */
        hb_mmio_set(N6_RAMCFG_AXISRAM_CR(n), n >= 3 ? N6_RAMCFG_CR_SRAMSD : 0u);
    hb_n6_memories_init();
    CHECK((hb_mmio_get(N6_RCC_MEMENR) & 0x38Fu) == 0x38Fu, "MEMENR 0x%x: AXISRAM1..6, FLEXRAM",
          hb_mmio_get(N6_RCC_MEMENR));
    long ramcfg = first_write(N6_RCC_SET(N6_RCC_AHB2ENR), N6_RCC_AHB2_RAMCFG, N6_RCC_AHB2_RAMCFG);
    long mem = any_write(N6_RCC_SET(N6_RCC_MEMENR));
    for (uint32_t n = 3; n <= 6; n++) {
        long sd = any_write(N6_RAMCFG_AXISRAM_CR(n));
        CHECK(!(hb_mmio_get(N6_RAMCFG_AXISRAM_CR(n)) & N6_RAMCFG_CR_SRAMSD) && sd > ramcfg &&
                  sd > mem,
              "AXISRAM%u out of shutdown (%ld) after its clock (%ld) and RAMCFG's (%ld)", n, sd,
              mem, ramcfg);
    }
    CHECK(any_write(N6_RAMCFG_AXISRAM_CR(1)) < 0, "AXISRAM1 has no shutdown bit: not written");

    hb_mmio_clear();
    hb_mmio_set(CM_SCB_SCR, CM_SCR_SLEEPDEEP);
    hb_n6_sleep_clocks_init();
    CHECK(hb_mmio_get(N6_RCC_BUSLPENR) == N6_RCC_BUS_ALL, "BUSLPENR 0x%x",
          hb_mmio_get(N6_RCC_BUSLPENR));
    CHECK((hb_mmio_get(N6_RCC_MEMLPENR) & 0x38Fu) == 0x38Fu, "MEMLPENR 0x%x",
          hb_mmio_get(N6_RCC_MEMLPENR));
    CHECK(hb_mmio_get(N6_RCC_APB2LPENR) & N6_RCC_APB2_USART1, "USART1 clocked in Sleep");
    CHECK((hb_mmio_get(N6_RCC_AHB4LPENR) & (N6_RCC_AHB4_GPIOE | N6_RCC_AHB4_PWR)) ==
              (N6_RCC_AHB4_GPIOE | N6_RCC_AHB4_PWR),
          "GPIOE and PWR clocked in Sleep");
    CHECK(hb_mmio_get(N6_RCC_MISCLPENR) & N6_RCC_MISC_DBG, "debug clocked in Sleep");
    CHECK(hb_mmio_get(N6_RCC_AHB2LPENR) & N6_RCC_AHB2_RAMCFG, "RAMCFG clocked in Sleep");
    CHECK((hb_mmio_get(N6_RCC_APB4ENR2) & N6_RCC_APB4_2_BSEC) &&
              (hb_mmio_get(N6_RCC_APB4LPENR2) & N6_RCC_APB4_2_BSEC),
          "BSEC on, and on in Sleep (ES0620)");
    CHECK(!(hb_mmio_get(CM_SCB_SCR) & CM_SCR_SLEEPDEEP), "SLEEPDEEP cleared");
}

static void test_uart(void) {
    CHECK(hb_n6_uart_brr(64000000u, 921600u) == 0x85u, "BRR 0x%x at 921600",
          hb_n6_uart_brr(64000000u, 921600u));
    CHECK(hb_n6_uart_brr(64000000u, 115200u) == 0x453u, "BRR 0x%x at 115200",
          hb_n6_uart_brr(64000000u, 115200u));
    /* the rate the divider gives: within 0.1 % of 921600 (by 16 it was +0.64 %) */
    double div = 139.0, rate = 2.0 * 64e6 / div, err = (rate - 921600.0) / 921600.0;
    CHECK(err < 0.001 && err > -0.001, "921600 baud is off by %.3f %%", 100.0 * err);

    hb_mmio_clear();
    uint32_t err_bits = hb_n6_uart_init(921600u);
    CHECK(err_bits == 0, "USART1 acknowledged TE/RE: 0x%x", err_bits);
    long rst = first_write(N6_RCC_SET(N6_RCC_APB2RSTR), N6_RCC_APB2_USART1, N6_RCC_APB2_USART1);
    long rel = first_write(N6_RCC_CLR(N6_RCC_APB2RSTR), N6_RCC_APB2_USART1, N6_RCC_APB2_USART1);
    long clk = first_write(N6_RCC_SET(N6_RCC_APB2ENR), N6_RCC_APB2_USART1, N6_RCC_APB2_USART1);
    long first_usart = -1;
    {
        const hb_mmio_write *w;
        size_t n = hb_mmio_writes(&w);
        for (size_t i = 0; i < n && first_usart < 0; i++)
            if (w[i].addr >= N6_USART1 && w[i].addr < N6_USART1 + 0x400u) first_usart = (long)i;
    }
    CHECK(clk >= 0 && clk < rst && rst < rel && rel < first_usart,
          "clock (%ld), reset (%ld), release (%ld), then USART1 (%ld)", clk, rst, rel,
          first_usart);
    CHECK((hb_mmio_get(N6_RCC_CCIPR13) & 7u) == N6_RCC_USART1SEL_HSI, "kernel clock HSI");
    CHECK(any_write(N6_RCC_CCIPR13) < any_write(N6_USART_BRR), "kernel clock before BRR");
    long off = first_write(N6_USART_CR1, 0xFFFFFFFFu, 0);
    long ue = first_write(N6_USART_CR1, N6_USART_CR1_UE, N6_USART_CR1_UE);
    long brr = any_write(N6_USART_BRR), cr3 = any_write(N6_USART_CR3);
    long presc = any_write(N6_USART_PRESC), fifo = first_write(N6_USART_CR1, N6_USART_CR1_FIFOEN,
                                                               N6_USART_CR1_FIFOEN);
    CHECK(off >= 0 && off < brr && off < cr3 && off < presc && off < fifo,
          "disabled (%ld) before BRR (%ld), CR3 (%ld), PRESC (%ld), FIFOEN (%ld)", off, brr, cr3,
          presc, fifo);
    CHECK(brr < ue && cr3 < ue && presc < ue && fifo < ue, "UE (%ld) set last", ue);
    CHECK(count_writes(N6_USART_BRR) == 1 && hb_mmio_get(N6_USART_BRR) == 0x85u, "BRR 0x%x",
          hb_mmio_get(N6_USART_BRR));
    uint32_t cr1 = hb_mmio_get(N6_USART_CR1);
    uint32_t want = N6_USART_CR1_UE | N6_USART_CR1_TE | N6_USART_CR1_RE | N6_USART_CR1_RXFNEIE |
                    N6_USART_CR1_OVER8 | N6_USART_CR1_FIFOEN;
    CHECK(cr1 == want, "CR1 0x%x, want 0x%x", cr1, want);
    CHECK(hb_mmio_get(N6_USART_CR3) == N6_USART_CR3_EIE, "CR3 0x%x: the error interrupt",
          hb_mmio_get(N6_USART_CR3));
    CHECK(((hb_mmio_get(N6_GPIO_AFRL(N6_GPIOE)) >> 20) & 0xFFu) == 0x77u, "PE5/PE6 AF7");
    CHECK(((hb_mmio_get(N6_GPIO_MODER(N6_GPIOE)) >> 10) & 0xFu) == 0xAu, "PE5/PE6 alternate");
    CHECK(any_write(N6_GPIO_AFRL(N6_GPIOE)) < any_write(N6_GPIO_MODER(N6_GPIOE)),
          "AF chosen before the pins switch to it");
    CHECK(hb_mmio_get(N6_NVIC_ISER(4)) == (1u << 31), "IRQ 159 enabled");

    /* the interrupt: bytes into the ring, errors counted and cleared */
    static const uint8_t bytes[] = {0x00, 0x11, 0x7E, 0xFF};
    hb_mmio_rx(bytes, sizeof bytes);
    hb_mmio_flag(N6_USART_ISR, N6_USART_ISR_ORE | N6_USART_ISR_FE);
    hb_n6_uart_isr();
    hb_mmio_flag(N6_USART_ISR, N6_USART_ISR_NE);
    hb_n6_uart_isr();
    hb_n6_uart_errors e;
    hb_n6_uart_errors_get(&e);
    CHECK(e.overrun == 1 && e.framing == 1 && e.noise == 1 && e.dropped == 0,
          "overrun %u framing %u noise %u dropped %u", e.overrun, e.framing, e.noise, e.dropped);
    CHECK(!(hb_mmio_get(N6_USART_ISR) & N6_USART_ICR_ERRORS), "error flags cleared: ISR 0x%x",
          hb_mmio_get(N6_USART_ISR));
    const uint8_t *got;
    size_t n = hb_n6_uart_peek(&got);
    CHECK(n == sizeof bytes && got[0] == 0x00 && got[2] == 0x7E && got[3] == 0xFF,
          "%zu bytes in the ring", n);
    hb_n6_uart_consume(n);
    CHECK(hb_n6_uart_pending() == 0, "consumed");
}

static void test_caches(void) {
    hb_mmio_clear(); /* MSCR's ICACTIVE/DCACTIVE 0, as the boot ROM leaves them */
    uint32_t state = cm_caches_enable();
    long iciallu = any_write(CM_SCB_ICIALLU), mscr = any_write(CM_MEMSYSCTL_MSCR);
    long ccr = first_write(CM_SCB_CCR, CM_CCR_IC | CM_CCR_DC, CM_CCR_IC | CM_CCR_DC);
    long last_dcisw = last_write(CM_SCB_DCISW, 0, 0);
    CHECK(count_writes(CM_SCB_DCISW) == 256u * 4u, "%zu D-cache lines invalidated, want 1024",
          count_writes(CM_SCB_DCISW));
    CHECK(first_write(CM_SCB_DCISW, 0xFFFFFFFFu, (3u << 30) | (255u << 5)) >= 0,
          "the last way and set reached (way << 30 | set << 5)");
    CHECK(iciallu >= 0 && iciallu < mscr && last_dcisw < mscr && mscr < ccr,
          "invalidated (%ld, %ld), MSCR (%ld), CCR (%ld)", iciallu, last_dcisw, mscr, ccr);
    CHECK((hb_mmio_get(CM_MEMSYSCTL_MSCR) & 0x3000u) == 0x3000u, "MSCR ICACTIVE, DCACTIVE");
    CHECK(state == (CM_CACHE_I | CM_CACHE_D), "state %u", state);

    /* already on: no invalidation of a live D-cache */
    hb_mmio_clear();
    hb_mmio_set(CM_SCB_CCR, CM_CCR_IC | CM_CCR_DC);
    hb_mmio_set(CM_MEMSYSCTL_MSCR, 0x3000u);
    cm_caches_enable();
    CHECK(count_writes(CM_SCB_DCISW) == 0 && count_writes(CM_SCB_ICIALLU) == 0,
          "caches already on: not invalidated");
    /* CCR on but MSCR off (what the boot ROM does): reported off */
    hb_mmio_clear();
    hb_mmio_set(CM_SCB_CCR, CM_CCR_IC | CM_CCR_DC);
    CHECK(cm_caches_state() == 0, "CCR alone is not on");
}

static void test_watchdog_reset_cause(void) {
    hb_mmio_clear();
    uint32_t errors = 0;
    uint32_t ms = hb_n6_watchdog_init(32768u, &errors);
    CHECK(ms == 32768u && errors == 0, "timeout %u ms, errors 0x%x", ms, errors);
    CHECK(hb_mmio_get(N6_IWDG_PR) == 6u && hb_mmio_get(N6_IWDG_RLR) == 4095u,
          "PR %u (/256), RLR %u", hb_mmio_get(N6_IWDG_PR), hb_mmio_get(N6_IWDG_RLR));
    long frz = first_write(N6_DBGMCU_APB4FZ1, N6_DBGMCU_APB4FZ1_IWDG, N6_DBGMCU_APB4FZ1_IWDG);
    long start = first_write(N6_IWDG_KR, 0xFFFFu, N6_IWDG_KEY_START);
    long access = first_write(N6_IWDG_KR, 0xFFFFu, N6_IWDG_KEY_ACCESS);
    long pr = any_write(N6_IWDG_PR), rlr = any_write(N6_IWDG_RLR);
    long reload = first_write(N6_IWDG_KR, 0xFFFFu, N6_IWDG_KEY_RELOAD);
    CHECK(frz >= 0 && frz < start && start < access && access < pr && pr < rlr && rlr < reload,
          "freeze %ld, start %ld, access %ld, PR %ld, RLR %ld, reload %ld", frz, start, access, pr,
          rlr, reload);
    CHECK(hb_mmio_reads(N6_IWDG_SR) >= 1, "waited for the update flags");
    hb_mmio_clear();
    ms = hb_n6_watchdog_init(1000u, &errors);
    CHECK(ms >= 990u && ms <= 1000u, "1 s asked, %u ms set", ms);
    hb_mmio_clear();
    const hb_mmio_write *w;
    CHECK(hb_n6_watchdog_init(0, &errors) == 0 && hb_mmio_writes(&w) == 0, "0: off");

    hb_mmio_clear();
    hb_mmio_set(N6_RCC_RSR, N6_RCC_RSR_IWDGRSTF | N6_RCC_RSR_PINRSTF);
    uint32_t flags = hb_n6_reset_flags();
    uint32_t cause = hb_n6_reset_cause(flags);
    CHECK(cause == (HB_RESET_WATCHDOG | HB_RESET_PIN), "cause 0x%x", cause);
    CHECK(hb_mmio_get(N6_RCC_RSR) == 0, "flags cleared (RMVF)");
    CHECK(hb_n6_reset_cause(N6_RCC_RSR_PORRSTF | N6_RCC_RSR_PINRSTF) == HB_RESET_POWER_ON,
          "power-on, not the pin");
}

int main(void) {
    test_clocks();
    test_power_memories_sleep();
    test_uart();
    test_caches();
    test_watchdog_reset_cause();
    printf("test_n6_bringup: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
