/* A STAND-IN for the STM32N6's registers, for the host build of the bring-up test (no silicon
 * here): every write the code under test makes through cm_mmio.h is recorded in order, and
 * reads are answered from a model of the status bits the code waits on (PLL1 ready follows
 * PLL1ON, the clock switch status follows the switch, VOSRDY, the USART's TE/RE
 * acknowledgements, RCC's set and clear aliases, received bytes in RDR). Registers the model
 * does not know read back what was last written (0 at first). */
#ifndef HB_N6_MMIO_RECORD_H
#define HB_N6_MMIO_RECORD_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t addr, value;
} hb_mmio_write;

/* the model's knobs */
typedef struct {
    int pll_never_locks; /* PLL1RDY stays 0 */
} hb_mmio_model;

extern hb_mmio_model hb_mmio_knobs;

void hb_mmio_clear(void);                      /* every register 0, the log empty, knobs off */
void hb_mmio_set(uint32_t addr, uint32_t v);   /* preset a register (not logged) */
uint32_t hb_mmio_get(uint32_t addr);           /* the current value (not logged) */
size_t hb_mmio_writes(const hb_mmio_write **log);
uint32_t hb_mmio_reads(uint32_t addr);         /* reads of addr so far */
void hb_mmio_rx(const uint8_t *bytes, size_t n); /* bytes the USART has received */
void hb_mmio_flag(uint32_t addr, uint32_t bits); /* set status bits (USART errors...) */

#endif /* HB_N6_MMIO_RECORD_H */
