"""The native engine's C sources and compiler flags, read by setup.py (which cannot import
the package at build time) and by the ARM64 cross build (qemu_arm64.py). No imports."""

# the runner, then one file of kernels per ISA (each compiles to nothing on another
# architecture); k_avxvnni.inc is included by k_avx2.c, k_portable.c by k_portable_avx2.c
SOURCES = (
    "_engine.c",
    "k_portable.c",
    "k_portable_avx2.c",
    "k_avx2.c",
    "k_avx512.c",
    "k_neon.c",
)
HEADERS = ("engine.h", "k_avxvnni.inc")
# include directories, from the repository's root: the firmware's fixed-point header
# (device_fw/core/nn/fixedpoint.h, TFLM's MultiplyByQuantizedMultiplier), one source for the
# scalar requantization of both
INCLUDE_DIRS = ("device_fw/core/nn",)
# the target's baseline ISA (no -march): the kernels for more carry target attributes
CFLAGS = ("-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unknown-pragmas")
