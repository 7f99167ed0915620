/* STM32N657 register addresses and bits the stm32n6 port writes, Secure aliases (the core runs
 * Secure after a development boot). Plain numbers, no access: the bring-up code reads and
 * writes them through cm_mmio.h, so a host build can record every access. Each value is from
 * ST's device header (STMicroelectronics/cmsis-device-n6 v1.1.0, Include/stm32n657xx.h: base
 * addresses, register offsets, bit positions), which mirrors RM0486; docs/board.md's register
 * table names the source of every value written. */
#ifndef HB_N6_REGS_H
#define HB_N6_REGS_H

/* ---- RCC (RM0486 "Reset and clock control"), base 0x56028000 ---------------------------- */
#define N6_RCC 0x56028000u
#define N6_RCC_CR (N6_RCC + 0x000u)
#define N6_RCC_SR (N6_RCC + 0x004u)       /* HSIRDY [3], PLL1RDY [8] */
#define N6_RCC_CFGR1 (N6_RCC + 0x020u)    /* CPUSW [17:16], CPUSWS [21:20], SYSSW [25:24], SYSSWS [29:28] */
#define N6_RCC_CFGR2 (N6_RCC + 0x024u)    /* PPRE1 [2:0], PPRE2 [6:4], PPRE4 [14:12], PPRE5 [18:16], HPRE [22:20] */
#define N6_RCC_RSR (N6_RCC + 0x034u)      /* reset flags; RMVF [16] clears them */
#define N6_RCC_HSICFGR (N6_RCC + 0x048u)  /* HSIDIV [8:7] */
#define N6_RCC_PLL1CFGR1 (N6_RCC + 0x080u) /* DIVN [19:8], DIVM [25:20], BYP [27], SEL [30:28] */
#define N6_RCC_PLL1CFGR2 (N6_RCC + 0x084u) /* DIVNFRAC [23:0] */
#define N6_RCC_PLL1CFGR3 (N6_RCC + 0x088u) /* MODSSRST [0], MODSSDIS [2], MODDSEN [3], PDIV2 [26:24], PDIV1 [29:27], PDIVEN [30] */
#define N6_RCC_IC1CFGR (N6_RCC + 0x0C4u)  /* ICxINT [23:16] = divider - 1, ICxSEL [29:28] */
#define N6_RCC_IC2CFGR (N6_RCC + 0x0C8u)
#define N6_RCC_IC6CFGR (N6_RCC + 0x0D8u)
#define N6_RCC_IC11CFGR (N6_RCC + 0x0ECu)
#define N6_RCC_CCIPR13 (N6_RCC + 0x174u)  /* USART1SEL [2:0] */
#define N6_RCC_DIVENR (N6_RCC + 0x240u)
#define N6_RCC_BUSENR (N6_RCC + 0x244u)
#define N6_RCC_MISCENR (N6_RCC + 0x248u)
#define N6_RCC_MEMENR (N6_RCC + 0x24Cu)
#define N6_RCC_AHB2ENR (N6_RCC + 0x254u)
#define N6_RCC_AHB4ENR (N6_RCC + 0x25Cu)
#define N6_RCC_APB2ENR (N6_RCC + 0x26Cu)
#define N6_RCC_APB4ENR2 (N6_RCC + 0x278u)
#define N6_RCC_BUSLPENR (N6_RCC + 0x284u)
#define N6_RCC_MISCLPENR (N6_RCC + 0x288u)
#define N6_RCC_MEMLPENR (N6_RCC + 0x28Cu)
#define N6_RCC_AHB2LPENR (N6_RCC + 0x294u)
#define N6_RCC_AHB4LPENR (N6_RCC + 0x29Cu)
#define N6_RCC_APB2LPENR (N6_RCC + 0x2ACu)
#define N6_RCC_APB4LPENR2 (N6_RCC + 0x2B8u)
#define N6_RCC_APB2RSTR (N6_RCC + 0x22Cu)
/* every enable and reset register has a set alias at +0x800 and a clear alias at +0x1000
 * (write 1s: no read-modify-write); CR's are CSR (+0x800) and CCR (+0x1000) */
#define N6_RCC_SET(reg) ((reg) + 0x800u)
#define N6_RCC_CLR(reg) ((reg) + 0x1000u)

#define N6_RCC_SR_HSIRDY (1u << 3)
#define N6_RCC_CR_PLL1ON (1u << 8) /* in CSR/CCR: PLL1ONS / PLL1ONC */
#define N6_RCC_SR_PLL1RDY (1u << 8)
#define N6_RCC_CFGR1_CPUSW_SHIFT 16u
#define N6_RCC_CFGR1_CPUSWS_SHIFT 20u
#define N6_RCC_CFGR1_SYSSW_SHIFT 24u
#define N6_RCC_CFGR1_SYSSWS_SHIFT 28u
#define N6_RCC_CFGR1_SW_MASK 3u
#define N6_RCC_CPUSW_HSI 0u  /* CPU clock: HSI */
#define N6_RCC_CPUSW_IC1 3u  /* CPU clock: IC1 */
#define N6_RCC_SYSSW_HSI 0u
#define N6_RCC_SYSSW_IC2 3u  /* system buses: IC2, IC6, IC11 */
#define N6_RCC_CFGR2_HPRE_SHIFT 20u
#define N6_RCC_HSICFGR_HSIDIV_MASK (3u << 7)
#define N6_RCC_PLL1CFGR1_DIVN_SHIFT 8u
#define N6_RCC_PLL1CFGR1_DIVM_SHIFT 20u
#define N6_RCC_PLL1CFGR1_BYP (1u << 27)
#define N6_RCC_PLL1CFGR1_SEL_MASK (7u << 28) /* 0: HSI */
#define N6_RCC_PLL1CFGR3_MODSSRST (1u << 0)
#define N6_RCC_PLL1CFGR3_MODSSDIS (1u << 2)
#define N6_RCC_PLL1CFGR3_MODDSEN (1u << 3)
#define N6_RCC_PLL1CFGR3_PDIV2_SHIFT 24u
#define N6_RCC_PLL1CFGR3_PDIV1_SHIFT 27u
#define N6_RCC_PLL1CFGR3_PDIVEN (1u << 30)
#define N6_RCC_ICCFGR_INT_SHIFT 16u
#define N6_RCC_ICCFGR_SEL_SHIFT 28u /* 0: PLL1 */
#define N6_RCC_DIVENR_IC1 (1u << 0)
#define N6_RCC_DIVENR_IC2 (1u << 1)
#define N6_RCC_DIVENR_IC6 (1u << 5)
#define N6_RCC_DIVENR_IC11 (1u << 10)
#define N6_RCC_CCIPR13_USART1SEL_MASK 7u
#define N6_RCC_USART1SEL_HSI 6u /* hsi_div_ck */
/* BUSENR / BUSLPENR: ACLKN [0], ACLKNC [1], AHBM [2], AHB1..5 [3..7], APB1..5 [8..12] */
#define N6_RCC_BUS_ALL 0x00001FFFu
/* MEMENR / MEMLPENR: AXISRAM3..6 [0..3], AHBSRAM1/2 [4, 5], BKPSRAM [6], AXISRAM1/2 [7, 8],
 * FLEXRAM [9], CACHEAXIRAM [10], VENCRAM [11], BOOTROM [12] */
#define N6_RCC_MEM_AXISRAM3_6 0x0000000Fu
#define N6_RCC_MEM_AXISRAM1_2 ((1u << 7) | (1u << 8))
#define N6_RCC_MEM_FLEXRAM (1u << 9)
#define N6_RCC_MEM_ALL_WE_USE (N6_RCC_MEM_AXISRAM3_6 | N6_RCC_MEM_AXISRAM1_2 | N6_RCC_MEM_FLEXRAM)
#define N6_RCC_MISC_DBG (1u << 0)
#define N6_RCC_AHB2_RAMCFG (1u << 12)
#define N6_RCC_AHB4_GPIOE (1u << 4)
#define N6_RCC_AHB4_GPIOF (1u << 5)
#define N6_RCC_AHB4_PWR (1u << 18)
#define N6_RCC_APB2_USART1 (1u << 4)
#define N6_RCC_APB4_2_SYSCFG (1u << 0)
#define N6_RCC_APB4_2_BSEC (1u << 1)
/* RSR flags */
#define N6_RCC_RSR_RMVF (1u << 16)
#define N6_RCC_RSR_LCKRSTF (1u << 17)
#define N6_RCC_RSR_BORRSTF (1u << 21)
#define N6_RCC_RSR_PINRSTF (1u << 22)
#define N6_RCC_RSR_PORRSTF (1u << 23)
#define N6_RCC_RSR_SFTRSTF (1u << 24)
#define N6_RCC_RSR_IWDGRSTF (1u << 26)
#define N6_RCC_RSR_WWDGRSTF (1u << 28)
#define N6_RCC_RSR_LPWRRSTF (1u << 30)

/* ---- PWR (RM0486 "Power control"), base 0x56024800 -------------------------------------- */
#define N6_PWR 0x56024800u
#define N6_PWR_CR1 (N6_PWR + 0x000u)    /* SDEN [2]: VCORE from the SMPS (1) or external (0) */
#define N6_PWR_CR1_SDEN (1u << 2)
#define N6_PWR_VOSCR (N6_PWR + 0x020u)  /* VOS [0] (1: scale 0), VOSRDY [1], ACTVOS [16], ACTVOSRDY [17] */
#define N6_PWR_SVMCR3 (N6_PWR + 0x03Cu) /* VDDIO2SV [8], VDDIO3SV [9] */
#define N6_PWR_VOSCR_VOS (1u << 0)
#define N6_PWR_VOSCR_VOSRDY (1u << 1)
#define N6_PWR_VOSCR_ACTVOS (1u << 16)
#define N6_PWR_VOSCR_ACTVOSRDY (1u << 17)
#define N6_PWR_SVMCR3_VDDIO2SV (1u << 8)
#define N6_PWR_SVMCR3_VDDIO3SV (1u << 9)

/* ---- RAMCFG (RM0486 "RAMs configuration controller"), base 0x52023000 ------------------ */
#define N6_RAMCFG 0x52023000u
#define N6_RAMCFG_AXISRAM_CR(n) (N6_RAMCFG + 0x80u * ((n)-1u)) /* AXISRAMn, n = 1..6 */
#define N6_RAMCFG_CR_SRAMSD (1u << 20)                        /* shutdown (AXISRAM2..6) */

/* ---- IWDG (RM0486 "Independent watchdog"), base 0x56004800, clocked by LSI (32 kHz) ----- */
#define N6_IWDG 0x56004800u
#define N6_IWDG_KR (N6_IWDG + 0x00u)
#define N6_IWDG_PR (N6_IWDG + 0x04u)  /* PR [3:0]: 4 << PR, at most 1024 */
#define N6_IWDG_RLR (N6_IWDG + 0x08u) /* RL [11:0] */
#define N6_IWDG_SR (N6_IWDG + 0x0Cu)  /* PVU [0], RVU [1], WVU [2], EWU [3] */
#define N6_IWDG_KEY_START 0xCCCCu
#define N6_IWDG_KEY_ACCESS 0x5555u
#define N6_IWDG_KEY_RELOAD 0xAAAAu
#define N6_IWDG_SR_UPDATING 0xFu
#define N6_LSI_HZ 32000u

/* ---- DBGMCU (RM0486 "Debug support"), base 0x54001000 ---------------------------------- */
#define N6_DBGMCU 0x54001000u
#define N6_DBGMCU_APB4FZ1 (N6_DBGMCU + 0x1Cu)
#define N6_DBGMCU_APB4FZ1_IWDG (1u << 18) /* IWDG stops while the core is halted */

/* ---- GPIO (RM0486 "General-purpose I/Os"): E 0x56021000, F 0x56021400 -------------------- */
#define N6_GPIOE 0x56021000u
#define N6_GPIOF 0x56021400u
#define N6_GPIO_MODER(b) ((b) + 0x00u)
#define N6_GPIO_OTYPER(b) ((b) + 0x04u)
#define N6_GPIO_OSPEEDR(b) ((b) + 0x08u)
#define N6_GPIO_PUPDR(b) ((b) + 0x0Cu)
#define N6_GPIO_BSRR(b) ((b) + 0x18u)
#define N6_GPIO_AFRL(b) ((b) + 0x20u)

/* ---- USART1 (RM0486 "USART"), base 0x52001000, IRQ 159 ----------------------------------- */
#define N6_USART1 0x52001000u
#define N6_USART1_IRQ 159u
#define N6_USART_CR1 (N6_USART1 + 0x00u)
#define N6_USART_CR2 (N6_USART1 + 0x04u)
#define N6_USART_CR3 (N6_USART1 + 0x08u)
#define N6_USART_BRR (N6_USART1 + 0x0Cu)
#define N6_USART_ISR (N6_USART1 + 0x1Cu)
#define N6_USART_ICR (N6_USART1 + 0x20u)
#define N6_USART_RDR (N6_USART1 + 0x24u)
#define N6_USART_TDR (N6_USART1 + 0x28u)
#define N6_USART_PRESC (N6_USART1 + 0x2Cu)
#define N6_USART_CR1_UE (1u << 0)
#define N6_USART_CR1_RE (1u << 2)
#define N6_USART_CR1_TE (1u << 3)
#define N6_USART_CR1_RXFNEIE (1u << 5) /* RXNEIE with the FIFO on */
#define N6_USART_CR1_OVER8 (1u << 15)
#define N6_USART_CR1_FIFOEN (1u << 29)
#define N6_USART_CR3_EIE (1u << 0)     /* error interrupt: framing, noise, overrun */
#define N6_USART_ISR_PE (1u << 0)
#define N6_USART_ISR_FE (1u << 1)
#define N6_USART_ISR_NE (1u << 2)
#define N6_USART_ISR_ORE (1u << 3)
#define N6_USART_ISR_RXFNE (1u << 5)
#define N6_USART_ISR_TC (1u << 6)
#define N6_USART_ISR_TXFNF (1u << 7)
#define N6_USART_ISR_TEACK (1u << 21)
#define N6_USART_ISR_REACK (1u << 22)
#define N6_USART_ICR_ALL 0x00123BFFu /* every clearable flag */
#define N6_USART_ICR_ERRORS 0x0000000Fu /* PECF, FECF, NECF, ORECF */

/* ---- NVIC (Armv8-M) ---------------------------------------------------------------------- */
#define N6_NVIC_ISER(n) (0xE000E100u + 4u * (n))

#endif /* HB_N6_REGS_H */
