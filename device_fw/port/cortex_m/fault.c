/* The fault handler every Cortex-M55 port shares (cortex_m.h): the entry, in assembly, takes
 * the frame from the stack the fault used, lifts the stack limit and moves to a stack of its
 * own (a stack overflow may be what faulted); cm_fault formats the report and the ERROR
 * INTERNAL frame and hands them to the port's cm_fault_out. */
#include <stdint.h>

#include "cortex_m.h"
#include "hb_bytes.h"
#include "hb_frame.h"
#include "hb_status.h"
#include "hb_wire.h"

__attribute__((noreturn, used)) void cm_fault(const uint32_t *frame, uint32_t exc_return);

__attribute__((naked, noreturn)) void cm_fault_entry(void) {
    __asm volatile(
        "cpsid i\n"
        "tst lr, #4\n"
        "ite eq\n"
        "mrseq r0, msp\n"
        "mrsne r0, psp\n"
        "mov r1, lr\n"
        "movs r2, #0\n"
        "msr msplim, r2\n"
        "ldr r2, =__fault_stack_top\n"
        "mov sp, r2\n"
        "b cm_fault\n"
        ".ltorg\n");
}

/* stacked frame: r0 r1 r2 r3 r12 lr pc xpsr; EXC_RETURN bit 4 clear: 18 more FP words */
enum { F_LR = 5, F_PC = 6, F_XPSR = 7, BASIC_WORDS = 8, FP_WORDS = 26 };

static uint8_t body[HB_HEADER_SIZE + HB_MIN_SIZE_ERROR + HB_MAX_ERROR_MSG + HB_CRC_SIZE];
static uint8_t wire[HB_MIN_SIZE_ERROR + HB_MAX_ERROR_MSG + HB_FRAME_OVERHEAD + 8];

void cm_fault(const uint32_t *frame, uint32_t exc_return) {
    uint32_t ipsr;
    __asm volatile("mrs %0, ipsr" : "=r"(ipsr));
    uint32_t xpsr = frame[F_XPSR];
    uint32_t words = (exc_return & (1u << 4)) ? BASIC_WORDS : FP_WORDS;
    uint32_t sp = (uint32_t)(uintptr_t)(frame + words) + ((xpsr & (1u << 9)) ? 4u : 0u);
    const hb_arg args[] = {
        HB_I(ipsr & 0x1FFu), HB_I(frame[F_PC]), HB_I(frame[F_LR]), HB_I(xpsr),   HB_I(sp),
        HB_I(SCS_CFSR),      HB_I(SCS_HFSR),    HB_I(SCS_MMFAR),  HB_I(SCS_BFAR), HB_I(SCS_SFSR),
    };
    char report[HB_STATUS_MAX];
    size_t report_len =
        hb_format(report, sizeof report, cm_fault_format, args, sizeof args / sizeof *args);

    /* ERROR INTERNAL "internal error: <report>" */
    uint8_t *p = body + HB_HEADER_SIZE;
    hb_arg what = HB_SN(report, report_len);
    size_t msg_len = hb_format((char *)p + HB_OFF_ERROR_MSG, HB_MAX_ERROR_MSG, HB_MSG_INTERNAL,
                               &what, 1);
    hb_wr16(p + HB_OFF_ERROR_CODE, HB_MSG_INTERNAL_CODE);
    p[HB_OFF_ERROR_REQUEST_TYPE] = 0;
    hb_wr16(p + HB_OFF_ERROR_MSG_LEN, (uint16_t)msg_len);
    size_t n = hb_frame_encode(wire, body, HB_PROTOCOL_VERSION, HB_TYPE_ERROR, 0,
                               (uint16_t)(HB_MIN_SIZE_ERROR + msg_len));
    cm_fault_out(report, report_len, wire, n);
}
