"""One module per op kind, each a plain mirror of a TFLM reference kernel that ends with its
``REGISTRATION`` (:class:`hilbench.npu.ops.registration.OpRegistration`); the registry of
all of them is :mod:`hilbench.npu.registry`. Shared helpers: :mod:`~hilbench.npu.ops.common`
(arithmetic, geometry, checks), :mod:`~hilbench.npu.ops.record` (blob param records),
:mod:`~hilbench.npu.ops.backend` (which kernels run), :mod:`~hilbench.npu.ops.jit`."""
