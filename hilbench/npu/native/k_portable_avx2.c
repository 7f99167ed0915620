/* The portable kernels (k_portable.c) compiled a second time with AVX2 enabled (x86-64
 * only; chosen at run time like the hand-written kernels): the same C, vectorised by the
 * compiler for 256-bit registers. */
#include "engine.h"

#if HB_X86
#define HB_PORTABLE_AVX2 1
#include "k_portable.c"
#else
typedef int hb_no_portable_avx2; /* not an x86-64 build: nothing here */
#endif
