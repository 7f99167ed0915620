/* The Cortex-M55's L1 caches on, as CMSIS's SCB_EnableICache / SCB_EnableDCache do it (the
 * Armv8-M ARM's cache maintenance registers), plus the M55's own MSCR: invalidate the I-cache
 * (ICIALLU) and every D-cache line by set and way (CCSIDR's geometry), then mark both caches
 * active in MSCR (a boot ROM may have cleared ICACTIVE/DCACTIVE, and CCR.IC/DC alone then
 * leave them off: Cortex-M55 TRM, MSCR), then CCR.IC and CCR.DC. A cache already on is left
 * alone (invalidating an enabled D-cache would drop dirty lines). */
#include <stdint.h>

#include "cm_mmio.h"
#include "cm_cache.h"

static void invalidate_dcache(void) {
    hb_mmio_wr(CM_SCB_CSSELR, 0); /* level 1, data */
    hb_mmio_barrier();
    uint32_t ccsidr = hb_mmio_rd(CM_SCB_CCSIDR);
    uint32_t sets = ((ccsidr >> 13) & 0x7FFFu) + 1u;
    uint32_t ways = ((ccsidr >> 3) & 0x3FFu) + 1u;
    /* DCISW: way in the top bits (32 - log2(ways)), set from bit log2(line bytes) */
    uint32_t line_shift = (ccsidr & 7u) + 4u;
    uint32_t way_shift = 32u;
    for (uint32_t w = ways - 1u; w; w >>= 1) way_shift--;
    for (uint32_t s = 0; s < sets; s++)
        for (uint32_t w = 0; w < ways; w++)
            hb_mmio_wr(CM_SCB_DCISW,
                       (way_shift < 32u ? w << way_shift : 0u) | (s << line_shift));
    hb_mmio_barrier();
}

uint32_t cm_caches_enable(void) {
    uint32_t ccr = hb_mmio_rd(CM_SCB_CCR);
    if (!(ccr & CM_CCR_IC)) {
        hb_mmio_barrier();
        hb_mmio_wr(CM_SCB_ICIALLU, 0);
        hb_mmio_barrier();
    }
    if (!(ccr & CM_CCR_DC)) invalidate_dcache();
#ifndef HB_CM_NO_MSCR
    hb_mmio_modify(CM_MEMSYSCTL_MSCR, 0, CM_MSCR_ICACTIVE | CM_MSCR_DCACTIVE);
    hb_mmio_barrier();
#endif
    hb_mmio_wr(CM_SCB_CCR, hb_mmio_rd(CM_SCB_CCR) | CM_CCR_IC | CM_CCR_DC);
    hb_mmio_barrier();
    return cm_caches_state();
}

uint32_t cm_caches_state(void) {
    uint32_t ccr = hb_mmio_rd(CM_SCB_CCR);
    uint32_t state = 0;
    if (ccr & CM_CCR_IC) state |= CM_CACHE_I;
    if (ccr & CM_CCR_DC) state |= CM_CACHE_D;
#ifndef HB_CM_NO_MSCR
    uint32_t mscr = hb_mmio_rd(CM_MEMSYSCTL_MSCR);
    if (!(mscr & CM_MSCR_ICACTIVE)) state &= ~CM_CACHE_I;
    if (!(mscr & CM_MSCR_DCACTIVE)) state &= ~CM_CACHE_D;
#endif
    return state;
}

#define CM_DCACHE_LINE 32u /* the Cortex-M55's L1 D-cache line (TRM) */

void cm_dcache_flush_range(uintptr_t p, uint32_t n) {
    if (!n || !(hb_mmio_rd(CM_SCB_CCR) & CM_CCR_DC)) return;
    uintptr_t end = p + n;
    hb_mmio_barrier();
    for (uintptr_t a = p & ~(uintptr_t)(CM_DCACHE_LINE - 1u); a < end; a += CM_DCACHE_LINE)
        hb_mmio_wr(CM_SCB_DCCIMVAC, (uint32_t)a);
    hb_mmio_barrier();
}
