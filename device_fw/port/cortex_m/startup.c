/* The C runtime's start that every Cortex-M55 port shares (cortex_m.h): after the port's
 * Reset_Handler (CM_RESET_COMMON_ASM and its own steps) and its .data, zero .bss, point VTOR at
 * the port's vector table and run the constructors. */
#include <stdint.h>
#include <string.h>

#include "cortex_m.h"

extern uint32_t __bss_start[], __bss_end[];
extern void (*const __init_array_start[])(void), (*const __init_array_end[])(void);

void cm_start_c(const void *vectors) {
    memset(__bss_start, 0, (size_t)((uint8_t *)__bss_end - (uint8_t *)__bss_start));
    SCS_VTOR = (uint32_t)(uintptr_t)vectors;
    cm_dsb();
    cm_isb();
    for (void (*const *ctor)(void) = __init_array_start; ctor < __init_array_end; ctor++) (*ctor)();
}
