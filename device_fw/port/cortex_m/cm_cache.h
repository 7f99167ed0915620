/* The Cortex-M55 L1 caches (cache.c): on, and which are on. No inline assembly here, so the
 * host build of the bring-up test (HB_MMIO_RECORD) includes it too. */
#ifndef HB_CM_CACHE_H
#define HB_CM_CACHE_H

#include <stdint.h>

#define CM_CACHE_I 1u /* instruction cache on (CCR.IC and MSCR.ICACTIVE) */
#define CM_CACHE_D 2u /* data cache on (CCR.DC and MSCR.DCACTIVE) */

/* Invalidate and enable both caches (a cache already on is left as it is); the state after. */
uint32_t cm_caches_enable(void);

/* Clean and invalidate the D-cache lines over [p, p + n) (DCCIMVAC per 32-byte line): what a
 * debugger writes there behind the core's back is what the core reads next, and no dirty line
 * of the core's overwrites it later. Nothing when the D-cache is off. */
void cm_dcache_flush_range(uintptr_t p, uint32_t n);

/* CM_CACHE_I | CM_CACHE_D as far as CCR (and, unless HB_CM_NO_MSCR, MSCR) say. */
uint32_t cm_caches_state(void);

#endif /* HB_CM_CACHE_H */
