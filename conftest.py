"""Repo-wide pytest setup. The hilbench plugin itself loads through its pytest11 entry point."""

from threadpoolctl import threadpool_limits

# One BLAS thread: speed is measured in benchmarks/, and BLAS threads only add noise (and
# contention with the device thread) on the 2-core CI machines.
threadpool_limits(1)

# tests.needs: no silent skips (a missing tool fails naming its install; see the module)
pytest_plugins = ["pytester", "tests.needs"]
