/* The op table: opcode -> registration (hb_op.h). One line per op kind. */
#include "ops/hb_op.h"

static const hb_op_reg *const table[HB_OP_MAX_CODE + 1] = {
    [HB_OP_FULLY_CONNECTED] = &hb_op_fully_connected,
    [HB_OP_CONV_2D] = &hb_op_conv2d,
    [HB_OP_DEPTHWISE_CONV_2D] = &hb_op_depthwise_conv2d,
    [HB_OP_AVERAGE_POOL_2D] = &hb_op_average_pool2d,
    [HB_OP_MAX_POOL_2D] = &hb_op_max_pool2d,
    [HB_OP_MEAN] = &hb_op_mean,
    [HB_OP_ADD] = &hb_op_add,
    [HB_OP_RESHAPE] = &hb_op_reshape,
};

const hb_op_reg *hb_op_find(uint8_t opcode) {
    return opcode <= HB_OP_MAX_CODE ? table[opcode] : NULL;
}
