/* The stm32n6's end of a fault (port/cortex_m/fault.c reports it): the report line
 * (HB_STM32N6_MSG_FAULT, declared in hilbench/board/stm32n6.py) goes out in its ERROR INTERNAL
 * frame on USART1, then the firmware restarts in place (cm_restart: the image is kept), as a
 * RESET does: a new boot, a new boot nonce, which tells the host to replay. A fault inside an
 * interrupt handler ends in a system reset instead (cortex_m.h), which in development boot
 * leaves the board in the boot ROM until `hilbench load` loads it again. */
#include <stdint.h>

#include "hb_stm32n6.h"
#include "stm32n6.h"

const char cm_fault_format[] = HB_STM32N6_MSG_FAULT;

void cm_fault_out(const char *report, size_t report_len, const uint8_t *frame,
                  size_t frame_len) {
    (void)report;
    (void)report_len;
    hb_n6_uart_write(frame, frame_len);
    hb_n6_uart_flush();
    hb_n6_restart(1);
}
