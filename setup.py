"""Builds hilbench's two C extensions at ``pip install``.

``hilbench.protocol._framing``: the firmware's own framing (device_fw/core/frame.c and
crc32.c) with a small binding, for the host's per-step frames (hilbench/protocol/frames.py
falls back to its Python codec without it).

``hilbench.npu.native._engine``, the native NPU engine: the runner (``_engine.c``) and one file of
kernels per ISA (``k_*.c``, listed in ``hilbench/npu/native/sources.py``). Compiled for the
baseline of the target architecture (no -march): the x86-64 kernels for AVX-512 VNNI,
AVX-VNNI and AVX2 carry ``target`` attributes, the ARM64 dot-product kernels theirs, and the
engine picks per call the best table the CPU runs, so one build runs on any x86-64 or ARM64
CPU (and the portable C path on any other). ``optional``: without a working C compiler the
install still succeeds and the NPU falls back to its jit/numpy backends; on x86-64 Linux
(CI) the test suite then fails (tests/npu/test_native.py), it does not skip.
"""

import runpy

from setuptools import Extension, setup

NATIVE = "hilbench/npu/native/"
SRC = runpy.run_path(NATIVE + "sources.py")

setup(
    ext_modules=[
        Extension(
            "hilbench.protocol._framing",
            sources=[
                "hilbench/protocol/_framing.c",
                "device_fw/core/frame.c",
                "device_fw/core/crc32.c",
            ],
            depends=[
                "device_fw/core/hb_frame.h",
                "device_fw/core/hb_crc.h",
                "device_fw/core/hb_bytes.h",
                "device_fw/core/gen/hb_wire.h",
            ],
            include_dirs=["device_fw/core", "device_fw/core/gen"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"],
            optional=True,
        ),
        Extension(
            "hilbench.npu.native._engine",
            sources=[NATIVE + name for name in SRC["SOURCES"]],
            depends=[NATIVE + name for name in SRC["HEADERS"]]
            + [d + "/fixedpoint.h" for d in SRC["INCLUDE_DIRS"]],
            include_dirs=list(SRC["INCLUDE_DIRS"]),
            extra_compile_args=list(SRC["CFLAGS"]),
            optional=True,
        ),
    ]
)
