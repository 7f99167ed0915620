/* The Neural-ART NPU: the one bounded place where a network compiled for it would plug in.
 *
 * What runs today is the core's CPU kernels (Helium), the same code the an547 port runs under
 * QEMU; hb_n6_npu_available() says 0 and nothing calls the NPU. A network compiled by ST's
 * toolchain (ST Edge AI: `stedgeai generate --target stm32n6` gives network.c, its weights and
 * the LL_ATON runtime) would plug in here, behind the same forward pass the core's graph
 * interpreter gives. What that needs, none of which is in this repository (docs/board.md):
 *   - the NPU's clocks and resets (RCC AHB5 NPU enable) and its RAMs (AXISRAM3..6, which
 *     bringup.c now powers up and the arena spans: a compiled network's buffers would be
 *     carved out of the arena);
 *   - ST's LL_ATON runtime and the generated network sources (their licence, not ours);
 *   - the weights where ZO training can rewrite them: the compiled network reads its
 *     parameters from the buffers the generator laid out, so PROBE and APPLY would write
 *     those buffers (the same int8 values, the NPU's layout) and clean the data cache before
 *     each inference;
 *   - a bit-exactness check against the twin (invariant 1): the NPU rounds as TFLite does, but
 *     that is to be measured on a board, not assumed. */
#include "stm32n6.h"

int hb_n6_npu_available(void) { return 0; }
