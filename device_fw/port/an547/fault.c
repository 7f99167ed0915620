/* The an547's end of a fault (port/cortex_m/fault.c reports it): the report line
 * (HB_AN547_MSG_FAULT, declared in hilbench/target/an547.py) goes out in its ERROR INTERNAL
 * frame on UART0 and on the semihosting console, then QEMU ends with HB_AN547_EXIT_FAULT. */
#include <stdint.h>

#include "an547.h"
#include "board.h"
#include "hb_an547.h"
#include "semihost.h"

const char cm_fault_format[] = HB_AN547_MSG_FAULT;

void cm_fault_out(const char *report, size_t report_len, const uint8_t *frame,
                  size_t frame_len) {
    hb_an547_uart_write(frame, frame_len);
    hb_an547_uart_flush();
    sh_line(report, report_len);
    sh_exit(HB_AN547_EXIT_FAULT);
}
