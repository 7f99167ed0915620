"""The backends: how the host reaches a device.

``base`` (the ``Backend`` class and the ``Connection`` that ``open()`` returns) is below every
backend module (``emulate``, ``sil``, ``qemu``, ``serial``, ``board``, ``labgrid``, ``map``);
``registry`` (``make_backend``) is above them all. A new backend is one module here and one
name in ``hilbench.config.BACKENDS`` with its factory in ``registry``.
"""
