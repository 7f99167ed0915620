"""Builds the native NPU engine (hilbench/npu/native/_engine.c) at ``pip install``.

Compiled for the baseline of the target architecture (no -march): the AVX-512 VNNI kernels
carry their own ``target`` attribute and are chosen at run time, so one build runs on any
x86-64 (and the scalar C path on any other CPU). ``optional``: without a working C compiler
the install still succeeds and the NPU falls back to its jit/numpy backends; on x86-64
Linux (CI) the test suite then fails (tests/npu/test_native.py), it does not skip.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hilbench.npu.native._engine",
            sources=["hilbench/npu/native/_engine.c"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wno-unknown-pragmas"],
            optional=True,
        )
    ]
)
