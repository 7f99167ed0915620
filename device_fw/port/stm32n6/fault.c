/* The stm32n6's end of a fault (port/cortex_m/fault.c reports it): the report line
 * (HB_STM32N6_MSG_FAULT, declared in hilbench/board/stm32n6.py) goes out in its ERROR INTERNAL
 * frame on USART1, and again about every second, so a host that connects late still reads
 * why, until the debugger resets the core. */
#include <stdint.h>

#include "hb_stm32n6.h"
#include "stm32n6.h"

const char cm_fault_format[] = HB_STM32N6_MSG_FAULT;

void cm_fault_out(const char *report, size_t report_len, const uint8_t *frame,
                  size_t frame_len) {
    (void)report;
    (void)report_len;
    SYST_CSR = 0; /* no more ticks: count cycles by hand below */
    for (;;) {
        hb_n6_uart_write(frame, frame_len);
        hb_n6_uart_flush();
        uint32_t start = DWT_CYCCNT;
        while (DWT_CYCCNT - start < HB_STM32N6_CPU_HZ) {
        }
    }
}
