/* The STM32N6's bring-up, step by step as ST's own code does it (docs/board.md's register
 * table names the source of every value): the reset cause, the power supply and the voltage
 * scale, the I/O supplies of the console's pins, the memories, the clocks kept on in Sleep
 * mode, PLL1 and the CPU and bus clocks, the watchdog. Every register access goes through
 * cm_mmio.h, so port/stm32n6/test/ runs this file on the host against a recording register
 * file. A wait that times out sets a bit in the errors and the step goes on: the board still
 * answers at a lower speed and says why (hb_port_info_t.bringup_errors). */
#include <stdint.h>

#include "cm_mmio.h"
#include "n6_bringup.h"
#include "n6_regs.h"
#include "port.h"

/* a bounded wait: each try is one register read (a few ns to a few hundred ns) */
#define WAIT_TRIES 1000000u

/* ---- reset cause (RM0486 RCC_RSR) ------------------------------------------------------ */

uint32_t hb_n6_reset_flags(void) {
    uint32_t flags = hb_mmio_rd(N6_RCC_RSR);
    hb_mmio_wr(N6_RCC_RSR, flags | N6_RCC_RSR_RMVF); /* clear them for the next boot */
    return flags;
}

uint32_t hb_n6_reset_cause(uint32_t flags) {
    uint32_t cause = 0;
    if (flags & (N6_RCC_RSR_PORRSTF | N6_RCC_RSR_BORRSTF)) cause |= HB_RESET_POWER_ON;
    else if (flags & N6_RCC_RSR_PINRSTF) cause |= HB_RESET_PIN;
    if (flags & N6_RCC_RSR_SFTRSTF) cause |= HB_RESET_SOFTWARE;
    if (flags & (N6_RCC_RSR_IWDGRSTF | N6_RCC_RSR_WWDGRSTF)) cause |= HB_RESET_WATCHDOG;
    if (flags & N6_RCC_RSR_LCKRSTF) cause |= HB_RESET_LOCKUP;
    return cause;
}

/* ---- power: PWR's clock, the supply, the I/O supplies of the pins we drive -------------- */

uint32_t hb_n6_power_init(void) {
    hb_mmio_wr(N6_RCC_SET(N6_RCC_AHB4ENR), N6_RCC_AHB4_PWR);
    hb_mmio_barrier();
    /* the supply: VCORE from the DK's external SMPS (ST's templates:
     * HAL_PWREx_ConfigSupply(PWR_EXTERNAL_SOURCE_SUPPLY), CR1.SDEN = 0, before any VOS change;
     * written once after power-on, so a write the boot ROM made first wins) */
    hb_mmio_modify(N6_PWR_CR1, N6_PWR_CR1_SDEN, 0);
    uint32_t err = hb_mmio_wait(N6_PWR_VOSCR, N6_PWR_VOSCR_ACTVOSRDY, N6_PWR_VOSCR_ACTVOSRDY,
                                WAIT_TRIES)
                       ? 0u
                       : HB_BRINGUP_VOS;
    /* VDDIO2 and VDDIO3 supply valid: the NuttX port marks both for USART1's GPIOE pins
     * (stm32_pwr.c); harmless when the boot ROM did it already */
    hb_mmio_modify(N6_PWR_SVMCR3, 0, N6_PWR_SVMCR3_VDDIO2SV | N6_PWR_SVMCR3_VDDIO3SV);
    hb_mmio_barrier();
    return err;
}

/* ---- memories: clocks, RAMCFG shutdown ------------------------------------------------- */

void hb_n6_memories_init(void) {
    /* FLEXRAM, AXISRAM1..6 clocked (MEMENR); AXISRAM3..6 are off after reset */
    hb_mmio_wr(N6_RCC_SET(N6_RCC_MEMENR), N6_RCC_MEM_ALL_WE_USE);
    hb_mmio_wr(N6_RCC_SET(N6_RCC_AHB2ENR), N6_RCC_AHB2_RAMCFG);
    hb_mmio_barrier();
    /* out of shutdown: RAMCFG CR.SRAMSD exists for AXISRAM2..6 (ST's HAL_RAMCFG_EnableAXISRAM) */
    for (uint32_t n = 2; n <= 6; n++)
        hb_mmio_modify(N6_RAMCFG_AXISRAM_CR(n), N6_RAMCFG_CR_SRAMSD, 0);
    hb_mmio_barrier();
}

/* ---- Sleep mode: what stays clocked while the core waits in WFI ------------------------- */

void hb_n6_sleep_clocks_init(void) {
    /* BSEC's clock stays on: ES0620 (as the NuttX port cites it, stm32_start.c): without it
     * WFI/Sleep fails; SYSCFG with it */
    hb_mmio_wr(N6_RCC_SET(N6_RCC_APB4ENR2), N6_RCC_APB4_2_BSEC | N6_RCC_APB4_2_SYSCFG);
    /* the Sleep-mode enables (xxLPENR) of everything the serving loop needs awake */
    hb_mmio_wr(N6_RCC_SET(N6_RCC_BUSLPENR), N6_RCC_BUS_ALL);
    hb_mmio_wr(N6_RCC_SET(N6_RCC_MEMLPENR), N6_RCC_MEM_ALL_WE_USE);
    hb_mmio_wr(N6_RCC_SET(N6_RCC_MISCLPENR), N6_RCC_MISC_DBG);
    hb_mmio_wr(N6_RCC_SET(N6_RCC_AHB2LPENR), N6_RCC_AHB2_RAMCFG);
    hb_mmio_wr(N6_RCC_SET(N6_RCC_AHB4LPENR), N6_RCC_AHB4_GPIOE | N6_RCC_AHB4_PWR);
    hb_mmio_wr(N6_RCC_SET(N6_RCC_APB2LPENR), N6_RCC_APB2_USART1);
    hb_mmio_wr(N6_RCC_SET(N6_RCC_APB4LPENR2), N6_RCC_APB4_2_BSEC | N6_RCC_APB4_2_SYSCFG);
    /* WFI enters Sleep, never Deep Sleep (Stop): SCR.SLEEPDEEP = 0 */
    hb_mmio_modify(CM_SCB_SCR, CM_SCR_SLEEPDEEP, 0);
    hb_mmio_barrier();
}

/* ---- clocks: VOS (and SMPS overdrive), PLL1, IC dividers, CPU and bus switch ------------ */

static const hb_n6_clock_plan plans[] = {
    /* ST's NUCLEO-N657X0-Q PWR_SLEEP example (600 MHz, VOS scale 1): PLL1 = 64 / 4 * 75 =
     * 1200 MHz; IC1 /2 = 600 CPU, IC2 /3 = 400 AXI, IC6 /4 = 300 NPU, IC11 /3 = 400 AXISRAM3-6;
     * AHB /2 = 200 MHz, APBs /1 */
    {600000000u, 0, 4, 75, 2, 3, 4, 3, 1},
    /* ST's STM32N6570-DK Template FSBL (800 MHz, VOS scale 0 after the SMPS overdrive): PLL1 =
     * 64 / 8 * 100 = 800 MHz; IC1 /1 = 800, IC2 /2 = 400, IC6 /4 = 200, IC11 /2 = 400; AHB /2 */
    {800000000u, 1, 8, 100, 1, 2, 4, 2, 1},
};

const hb_n6_clock_plan *hb_n6_clock_plan_for(uint32_t mhz) {
    for (uint32_t i = 0; i < sizeof plans / sizeof *plans; i++)
        if (plans[i].cpu_hz == mhz * 1000000u) return &plans[i];
    return 0;
}

static uint32_t ic_cfgr(uint32_t divider) { /* source PLL1 (0), INT = divider - 1 */
    return (0u << N6_RCC_ICCFGR_SEL_SHIFT) | ((divider - 1u) << N6_RCC_ICCFGR_INT_SHIFT);
}

static uint32_t cfgr1_switch(uint32_t cpu, uint32_t sys) {
    uint32_t mask = (N6_RCC_CFGR1_SW_MASK << N6_RCC_CFGR1_CPUSW_SHIFT) |
                    (N6_RCC_CFGR1_SW_MASK << N6_RCC_CFGR1_SYSSW_SHIFT);
    return (hb_mmio_rd(N6_RCC_CFGR1) & ~mask) | (cpu << N6_RCC_CFGR1_CPUSW_SHIFT) |
           (sys << N6_RCC_CFGR1_SYSSW_SHIFT);
}

static int switched(uint32_t shift, uint32_t want) {
    return hb_mmio_wait(N6_RCC_CFGR1, N6_RCC_CFGR1_SW_MASK << shift, want << shift, WAIT_TRIES);
}

/* The SMPS's overdrive on the STM32N6570-DK (rev C01 on): its control pin high before VOS
 * scale 0 (ST's BSP_SMPS_Init(SMPS_VOLTAGE_OVERDRIVE); the pin is PF4 as DK applications
 * that cite the BSP name it: docs/board.md), then a wait for the rail to ramp. */
static void smps_overdrive(void) {
    hb_mmio_wr(N6_RCC_SET(N6_RCC_AHB4ENR), N6_RCC_AHB4_GPIOF);
    hb_mmio_barrier();
    hb_mmio_wr(N6_GPIO_BSRR(N6_GPIOF), 1u << 4); /* PF4 high before it drives */
    hb_mmio_modify(N6_GPIO_OTYPER(N6_GPIOF), 1u << 4, 0);              /* push-pull */
    hb_mmio_modify(N6_GPIO_PUPDR(N6_GPIOF), 3u << 8, 0);               /* no pull */
    hb_mmio_modify(N6_GPIO_MODER(N6_GPIOF), 3u << 8, 1u << 8);         /* output */
    hb_mmio_barrier();
    /* ST's code waits 1 ms (HAL_Delay(1)); at HSI 64 MHz a read of the RCC is >= 1 cycle:
     * 64000 reads is at least 1 ms */
    for (uint32_t i = 0; i < 64000u; i++) (void)hb_mmio_rd(N6_RCC_SR);
}

uint32_t hb_n6_clocks_init(const hb_n6_clock_plan *plan, uint32_t *errors) {
    if (!plan) return N6_HSI_HZ; /* the build keeps the reset clock tree (N6_CLOCK=64) */
    /* already on IC1 / IC2 (a restart, a previous program): back to HSI first, as ST's
     * templates do, so PLL1 can be reprogrammed */
    uint32_t cfgr1 = hb_mmio_rd(N6_RCC_CFGR1);
    if (((cfgr1 >> N6_RCC_CFGR1_CPUSWS_SHIFT) & 3u) != N6_RCC_CPUSW_HSI ||
        ((cfgr1 >> N6_RCC_CFGR1_SYSSWS_SHIFT) & 3u) != N6_RCC_SYSSW_HSI) {
        hb_mmio_wr(N6_RCC_CFGR1, cfgr1_switch(N6_RCC_CPUSW_HSI, N6_RCC_SYSSW_HSI));
        if (!switched(N6_RCC_CFGR1_CPUSWS_SHIFT, N6_RCC_CPUSW_HSI) ||
            !switched(N6_RCC_CFGR1_SYSSWS_SHIFT, N6_RCC_SYSSW_HSI))
            *errors |= HB_BRINGUP_SWITCH;
    }
    /* voltage first (HAL_PWREx_ControlVoltageScaling: "the voltage scaling must be changed
     * before increasing the system frequency") */
    if (plan->vos0) smps_overdrive();
    hb_mmio_modify(N6_PWR_VOSCR, N6_PWR_VOSCR_VOS, plan->vos0 ? N6_PWR_VOSCR_VOS : 0);
    if (!hb_mmio_wait(N6_PWR_VOSCR, N6_PWR_VOSCR_VOSRDY, N6_PWR_VOSCR_VOSRDY, WAIT_TRIES))
        *errors |= HB_BRINGUP_VOS;
    /* PLL1 off, configured, on (HAL RCC_PLL_Config) */
    if (!hb_mmio_wait(N6_RCC_SR, N6_RCC_SR_HSIRDY, N6_RCC_SR_HSIRDY, WAIT_TRIES))
        *errors |= HB_BRINGUP_PLL;
    hb_mmio_wr(N6_RCC_CLR(N6_RCC_CR), N6_RCC_CR_PLL1ON);
    if (!hb_mmio_wait(N6_RCC_SR, N6_RCC_SR_PLL1RDY, 0, WAIT_TRIES)) *errors |= HB_BRINGUP_PLL;
    hb_mmio_modify(N6_RCC_PLL1CFGR3, 0, N6_RCC_PLL1CFGR3_MODSSDIS);
    hb_mmio_modify(N6_RCC_PLL1CFGR1, N6_RCC_PLL1CFGR1_BYP | N6_RCC_PLL1CFGR1_SEL_MASK |
                                         (0x3Fu << N6_RCC_PLL1CFGR1_DIVM_SHIFT) |
                                         (0xFFFu << N6_RCC_PLL1CFGR1_DIVN_SHIFT),
                   (plan->m << N6_RCC_PLL1CFGR1_DIVM_SHIFT) |
                       (plan->n << N6_RCC_PLL1CFGR1_DIVN_SHIFT));
    hb_mmio_modify(N6_RCC_PLL1CFGR3,
                   (7u << N6_RCC_PLL1CFGR3_PDIV1_SHIFT) | (7u << N6_RCC_PLL1CFGR3_PDIV2_SHIFT),
                   (1u << N6_RCC_PLL1CFGR3_PDIV1_SHIFT) | (1u << N6_RCC_PLL1CFGR3_PDIV2_SHIFT));
    hb_mmio_modify(N6_RCC_PLL1CFGR2, 0x00FFFFFFu, 0); /* integer mode: no fraction */
    hb_mmio_modify(N6_RCC_PLL1CFGR3, N6_RCC_PLL1CFGR3_MODDSEN, 0);
    hb_mmio_modify(N6_RCC_PLL1CFGR3, 0, N6_RCC_PLL1CFGR3_MODSSRST | N6_RCC_PLL1CFGR3_PDIVEN);
    hb_mmio_wr(N6_RCC_SET(N6_RCC_CR), N6_RCC_CR_PLL1ON);
    if (!hb_mmio_wait(N6_RCC_SR, N6_RCC_SR_PLL1RDY, N6_RCC_SR_PLL1RDY, WAIT_TRIES)) {
        *errors |= HB_BRINGUP_PLL;
        return N6_HSI_HZ; /* stay on HSI: never switch to a clock that did not lock */
    }
    /* bus prescalers before the switch (HAL_RCC_ClockConfig's order): AHB /2, APBs /1 */
    hb_mmio_wr(N6_RCC_CFGR2, plan->hpre_log2 << N6_RCC_CFGR2_HPRE_SHIFT);
    /* CPU: IC1, then the switch */
    hb_mmio_wr(N6_RCC_IC1CFGR, ic_cfgr(plan->ic1));
    hb_mmio_wr(N6_RCC_SET(N6_RCC_DIVENR), N6_RCC_DIVENR_IC1);
    hb_mmio_wr(N6_RCC_CFGR1, cfgr1_switch(N6_RCC_CPUSW_IC1, N6_RCC_SYSSW_HSI));
    if (!switched(N6_RCC_CFGR1_CPUSWS_SHIFT, N6_RCC_CPUSW_IC1)) *errors |= HB_BRINGUP_SWITCH;
    /* buses: IC2, IC6, IC11, then the switch */
    hb_mmio_wr(N6_RCC_IC2CFGR, ic_cfgr(plan->ic2));
    hb_mmio_wr(N6_RCC_IC6CFGR, ic_cfgr(plan->ic6));
    hb_mmio_wr(N6_RCC_IC11CFGR, ic_cfgr(plan->ic11));
    hb_mmio_wr(N6_RCC_SET(N6_RCC_DIVENR),
               N6_RCC_DIVENR_IC2 | N6_RCC_DIVENR_IC6 | N6_RCC_DIVENR_IC11);
    hb_mmio_wr(N6_RCC_CFGR1, cfgr1_switch(N6_RCC_CPUSW_IC1, N6_RCC_SYSSW_IC2));
    if (!switched(N6_RCC_CFGR1_SYSSWS_SHIFT, N6_RCC_SYSSW_IC2)) *errors |= HB_BRINGUP_SWITCH;
    /* the NuttX port re-arms the memory clocks after the switch (stm32n6xx_rcc.c: "some SRAM
     * bank clocks drop out across the clock-domain switch"): cheap, so do it too */
    hb_mmio_wr(N6_RCC_SET(N6_RCC_MEMENR), N6_RCC_MEM_ALL_WE_USE);
    hb_mmio_barrier();
    return (*errors & HB_BRINGUP_SWITCH) ? N6_HSI_HZ : plan->cpu_hz;
}

/* ---- the independent watchdog (HAL_IWDG_Init's sequence) -------------------------------- */

uint32_t hb_n6_watchdog_init(uint32_t timeout_ms, uint32_t *errors) {
    if (timeout_ms == 0) return 0;
    /* the smallest prescaler 4 << pr whose 12-bit reload reaches the timeout */
    uint32_t pr = 0, reload = 0;
    for (; pr <= 8u; pr++) {
        uint64_t ticks = ((uint64_t)timeout_ms * N6_LSI_HZ) / (1000u * (4u << pr));
        if (ticks <= 4096u) {
            reload = ticks ? (uint32_t)ticks - 1u : 0u;
            break;
        }
    }
    if (pr > 8u) {
        pr = 8u;
        reload = 0xFFFu;
    }
    /* a halted core stops the watchdog (the debugger may sit at a breakpoint) */
    hb_mmio_wr(N6_RCC_SET(N6_RCC_MISCENR), N6_RCC_MISC_DBG);
    hb_mmio_barrier();
    hb_mmio_modify(N6_DBGMCU_APB4FZ1, 0, N6_DBGMCU_APB4FZ1_IWDG);
    hb_mmio_wr(N6_IWDG_KR, N6_IWDG_KEY_START);
    hb_mmio_wr(N6_IWDG_KR, N6_IWDG_KEY_ACCESS);
    hb_mmio_wr(N6_IWDG_PR, pr);
    hb_mmio_wr(N6_IWDG_RLR, reload);
    if (!hb_mmio_wait(N6_IWDG_SR, N6_IWDG_SR_UPDATING, 0, WAIT_TRIES)) *errors |= HB_BRINGUP_IWDG;
    hb_mmio_wr(N6_IWDG_KR, N6_IWDG_KEY_RELOAD);
    return (uint32_t)(((uint64_t)(reload + 1u) * (4u << pr) * 1000u) / N6_LSI_HZ);
}

void hb_n6_watchdog_kick(void) { hb_mmio_wr(N6_IWDG_KR, N6_IWDG_KEY_RELOAD); }
