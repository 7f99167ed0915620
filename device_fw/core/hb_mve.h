/* HB_NN_MVE: 1 when the core uses Helium (the int8 kernels in core/nn/, the perturbation in
 * core/zo/). Derived here and nowhere else, from the compiler's __ARM_FEATURE_MVE (bit 0:
 * integer MVE, e.g. -mcpu=cortex-m55); building with -DHB_NN_SCALAR keeps the scalar C on an
 * MVE target (make an547 AN547_NN=scalar). The scalar C builds everywhere and is the
 * reference every Helium branch is tested against. */
#ifndef HB_MVE_H
#define HB_MVE_H

#if defined(HB_NN_SCALAR)
#define HB_NN_MVE 0
#elif defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define HB_NN_MVE 1
#else
#define HB_NN_MVE 0
#endif

#if HB_NN_MVE
#include <arm_mve.h>
#endif

#endif /* HB_MVE_H */
