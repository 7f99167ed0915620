"""The board farm's figures: a sweep of short runs over 1, 2 and 4 labgrid places against the
same runs one after another on one place, and the farm's overhead per run.

A real labgrid farm on loopback (hilbench.farm.lab: coordinator, 2 exporters, SIL places whose
firmware is loaded -- the program started -- on acquire). Each sweep run is what
``hilbench run --board labgrid:board=sil`` does: connect to the coordinator, reserve, acquire,
load, connect, train, disconnect, release; k worker processes share the k places. The
baseline holds one place and runs the same configurations one after another on one connection.
Every run's final weights CRC is checked equal to the baseline's.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_farm.py [--runs 8] [--budget 400]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

SPAWN = multiprocessing.get_context("spawn")  # grpc does not survive fork()
PHASES = ("acquire", "load", "connect", "disconnect", "release")


def _warm() -> None:
    import hilbench.backend.labgrid
    import hilbench.session  # noqa: F401


def _config(seed: int, budget: int, trace: Path):
    from hilbench.config import RunConfig

    return RunConfig(
        backend="board", port="labgrid:board=sil", budget=budget, seed=seed, trace=trace, live=False
    )


def farm_run(seed: int, budget: int, out: str) -> dict:
    """One sweep run through the farm: the whole life of a --board labgrid: run."""
    from hilbench import session
    from hilbench.backend.labgrid import LabgridBackend

    started = time.perf_counter()
    backend = LabgridBackend("labgrid:board=sil", wait=600)
    config = _config(seed, budget, Path(out) / f"farm-{seed}.h5")
    result = session.run(config, backend=backend)
    total = time.perf_counter() - started
    return {
        "seed": seed,
        "crc": result.weights_crc,
        "place": backend.place,
        "total": total,
        **backend.timings,
    }


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=8, help="runs per sweep (default 8)")
    ap.add_argument("--budget", type=int, default=400, help="forward passes per run (default 400)")
    args = ap.parse_args(argv)

    from hilbench import session
    from hilbench.backend.labgrid import LabgridBackend
    from hilbench.farm.lab import LocalFarm
    from hilbench.launch.sil import sil_binary

    sil_binary()  # built before anything is timed
    seeds = list(range(args.runs))
    print(f"machine: {_machine()}")
    print(f"{args.runs} runs of {args.budget:,} forward passes (MLP on digits, SIL firmware)\n")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # the baseline: one place held, the runs one after another on one connection
        with LocalFarm.simple(root / "farm1", sil=1, twin=0, exporters=1) as farm:
            os.environ["LG_COORDINATOR"] = farm.address
            backend = LabgridBackend("labgrid:board=sil")
            target = backend.open().client
            crcs, walls = {}, []
            started = time.perf_counter()
            for seed in seeds:
                t = time.perf_counter()
                result = session.run(
                    _config(seed, args.budget, root / f"base-{seed}.h5"), target=target
                )
                walls.append(time.perf_counter() - t)
                crcs[seed] = result.weights_crc
            baseline = time.perf_counter() - started
            backend.close()
        run_s = statistics.median(walls)
        print(
            f"one place, one after another: {baseline:6.2f} s "
            f"({args.runs / baseline:.2f} runs/s; a run {run_s:.2f} s median)"
        )
        print(
            f"{'places':>6} {'workers':>7} {'sweep s':>8} {'runs/s':>7} {'vs one place':>12}"
            f"  places used"
        )
        overhead: list[dict] = []
        for k in (1, 2, 4):
            with LocalFarm.simple(root / f"farm{k}x", sil=k, twin=0, exporters=min(k, 2)) as farm:
                os.environ["LG_COORDINATOR"] = farm.address
                out = root / f"sweep{k}"
                out.mkdir()
                with ProcessPoolExecutor(k, mp_context=SPAWN, initializer=_warm) as pool:
                    list(pool.map(_warm_task, range(k)))  # workers started and imported
                    started = time.perf_counter()
                    rows = list(
                        pool.map(
                            farm_run, seeds, [args.budget] * len(seeds), [str(out)] * len(seeds)
                        )
                    )
                    sweep = time.perf_counter() - started
            bad = [r["seed"] for r in rows if r["crc"] != crcs[r["seed"]]]
            if bad:
                print(f"weights CRC differs from the baseline for seeds {bad}", file=sys.stderr)
                return 1
            used = sorted({r["place"] for r in rows})
            print(
                f"{k:>6} {k:>7} {sweep:8.2f} {args.runs / sweep:7.2f} {baseline / sweep:11.2f}x"
                f"  {', '.join(used)}"
            )
            overhead += rows
        print("\nthe farm's overhead per run (median over the sweeps' runs, ms):")
        total = statistics.median(r["total"] for r in overhead)
        parts = {p: statistics.median(r.get(p, 0.0) for r in overhead) for p in PHASES}
        farm_s = sum(parts.values())
        print(
            "  "
            + ", ".join(f"{p} {1000 * v:.1f}" for p, v in parts.items())
            + f"; sum {1000 * farm_s:.0f}"
        )
        print(
            f"  a sweep run {total:.2f} s in all: the farm's part {farm_s / total:.1%}; "
            f"the run on a held place {run_s:.2f} s"
        )
        print(
            "  (acquire = coordinator connection + reservation + AcquirePlace; load = the SIL "
            "program started; disconnect = hilbench's Target closed; release = place released,"
            " reservation cancelled, guard told)"
        )
    return 0


def _warm_task(_: int) -> None:
    time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
