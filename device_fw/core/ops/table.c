/* The op table: opcode -> registration (hb_op.h). One line per op kind in HB_OP_LIST: its
 * opcode (gen/hb_blob.h) and its registration, defined in core/ops/<op>.c. The list both
 * declares the registrations and fills the table, so a new op touches no header here. */
#include "ops/hb_op.h"

#define HB_OP_LIST(X)                                  \
    X(HB_OP_FULLY_CONNECTED, hb_op_fully_connected)    \
    X(HB_OP_CONV_2D, hb_op_conv2d)                     \
    X(HB_OP_DEPTHWISE_CONV_2D, hb_op_depthwise_conv2d) \
    X(HB_OP_AVERAGE_POOL_2D, hb_op_average_pool2d)     \
    X(HB_OP_MAX_POOL_2D, hb_op_max_pool2d)             \
    X(HB_OP_MEAN, hb_op_mean)                          \
    X(HB_OP_ADD, hb_op_add)                            \
    X(HB_OP_RESHAPE, hb_op_reshape)

#define HB_OP_DECLARE(code, reg) extern const hb_op_reg reg;
HB_OP_LIST(HB_OP_DECLARE)
#undef HB_OP_DECLARE

#define HB_OP_ENTRY(code, reg) [code] = &(reg),
static const hb_op_reg *const table[HB_OP_MAX_CODE + 1] = {HB_OP_LIST(HB_OP_ENTRY)};
#undef HB_OP_ENTRY

const hb_op_reg *hb_op_find(uint8_t opcode) {
    return opcode <= HB_OP_MAX_CODE ? table[opcode] : NULL;
}
