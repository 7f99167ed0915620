"""Upload time of a run's model and data to the firmware under QEMU: over the UART against
through QEMU's GDB stub (staged uploads, docs/protocol.md), and the weights CRC each path leaves.

    python benchmarks/bench_probe_upload.py [--model mobilenet_v2] [--paths uart,probe]
    python benchmarks/bench_probe_upload.py --run [--model mobilenet_v2] [--budget 80] [--repeat N]

Prints, per path, the seconds of the model upload and of the two data uploads, and the
device's initial weights CRC (the same on both paths, or the benchmark fails).

``--run`` times the whole ``hilbench run --model M --qemu --budget B`` once per path
(``--upload uart``, then ``--upload probe``), one after the other in this invocation: the
run's own wall time (its summary's), the process's, the CPU seconds it and QEMU used, the
device's executed instructions and every EVAL's, and the ratio of the two runs' wall times;
with the host's CPU and load average before and after each; ``--repeat N`` runs N pairs, the
order alternating (uart first, then probe first), and prints every pair's ratio and their
median. The runs must end with the same final weights CRC and the same EVAL results, or the
benchmark fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hilbench import data as datasets
from hilbench.backend.qemu import QemuBackend
from hilbench.config import RunConfig
from hilbench.train.prepare import load_data, prepare_model
from hilbench.train.trainer import TEST_SLOT, TRAIN_SLOT

ROOT = Path(__file__).resolve().parent.parent


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load() -> str:
    try:
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def one_run(path: str, model: str, budget: int, work: Path) -> dict:
    """One whole ``hilbench run`` over ``path``: its figures from its output and trace."""
    import h5py

    trace = work / f"{path}.h5"
    argv = [sys.executable, "-m", "hilbench", "run", "--model", model, "--qemu"]
    argv += ["--budget", str(budget), "--upload", path, "--no-live", "--trace", str(trace)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = load()
    t0 = time.perf_counter()
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    process_s = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"hilbench run --upload {path} failed:\n{out.stdout}{out.stderr}")
    wall = re.search(r"wall time\s*│\s*([0-9.,]+) s", out.stdout)
    with h5py.File(trace, "r") as f:
        run = f["runs"][sorted(f["runs"])[-1]]
        timing = [
            (int(r["step"]), r["command"].decode(), float(r["duration_s"]), r["source"].decode())
            for r in run["timing"][:]
        ]
        evals = [(int(r["step"]), float(r["accuracy"]), float(r["loss"])) for r in run["evals"][:]]
        crc = int(run.attrs["weights_crc"])
    instr = [d for _, c, d, s in timing if s == "instr"]
    return {
        "path": path,
        "run_s": float(wall.group(1).replace(",", "")) if wall else float("nan"),
        "process_s": process_s,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "instructions": int(sum(instr)),
        "eval_instructions": [int(d) for _, c, d, s in timing if c == "EVAL" and s == "instr"],
        "eval_host_s": [round(d, 2) for _, c, d, s in timing if c == "EVAL" and s == "host"],
        "evals": evals,
        "crc": crc,
        "load": (load0, load()),
    }


def whole_runs(args) -> int:
    print(f"host: {cpu_name()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    rows, ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):  # the order alternates, so a load that moves evens out
            pair = {}
            for path in ("uart", "probe") if i % 2 == 0 else ("probe", "uart"):
                r = one_run(path, args.model, args.budget, Path(tmp))
                rows.append(r)
                pair[path] = r
                print(
                    f"{path:5}: run {r['run_s']:.1f} s (process {r['process_s']:.1f} s, CPU "
                    f"{r['cpu_s']:.1f} s), {r['instructions']:,} instructions, EVALs "
                    f"{', '.join(f'{n:,}' for n in r['eval_instructions'])} instructions "
                    f"({', '.join(str(s) for s in r['eval_host_s'])} s), final weights CRC "
                    f"{r['crc']:#010x}; {r['load'][0]} before, {r['load'][1]} after",
                    flush=True,
                )
            uart, probe = pair["uart"], pair["probe"]
            ratios.append(uart["run_s"] / probe["run_s"])
            print(
                f"ratio uart/probe: {ratios[-1]:.2f}x run wall time, "
                f"{uart['process_s'] / probe['process_s']:.2f}x process wall time, "
                f"{uart['cpu_s'] / probe['cpu_s']:.2f}x CPU time",
                flush=True,
            )
    if len(ratios) > 1:
        print(f"run wall time ratios: {', '.join(f'{x:.2f}x' for x in ratios)}; median "
              f"{statistics.median(ratios):.2f}x")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    crcs = {r["crc"] for r in rows}
    evals = {json.dumps(r["evals"]) for r in rows}
    if len(crcs) != 1 or len(evals) != 1:
        print(f"the runs differ: CRCs {sorted(crcs)}, evals {sorted(evals)}")
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--paths", default="probe,uart")
    ap.add_argument("--run", action="store_true", help="time the whole hilbench run per path")
    ap.add_argument("--budget", type=int, default=80, help="with --run: forward passes")
    ap.add_argument("--repeat", type=int, default=1, help="with --run: pairs of runs")
    ap.add_argument("--json", help="with --run: write the figures to this file")
    args = ap.parse_args()
    if args.run:
        return whole_runs(args)
    vision = args.model in ("mobilenet_v2", "resnet18")  # hilbench run's vision defaults
    config = RunConfig(
        backend="qemu",
        model=args.model,
        budget=80,
        live=False,
        dataset="fashion-mnist-shift" if vision else "digits",
        init="pretrained" if vision else "random",
        layers="last:1" if vision else "weights",
    )
    t0 = time.perf_counter()
    data = load_data(config)
    model = prepare_model(config, data)
    print(f"model and data prepared in {time.perf_counter() - t0:.1f} s")
    x_train = datasets.quantize_inputs(data.x_train, model.input_scale, model.input_zero_point)
    x_test = datasets.quantize_inputs(data.x_test, model.input_scale, model.input_zero_point)
    total = len(model.blob) + x_train.nbytes + x_test.nbytes
    crcs = {}
    for path in args.paths.split(","):
        with QemuBackend(upload=path) as client:
            t0 = time.perf_counter()
            client.load_model(model.blob)
            t_model = time.perf_counter() - t0
            client.load_data(TRAIN_SLOT, x_train, data.y_train, data.n_classes)
            client.load_data(TEST_SLOT, x_test, data.y_test, data.n_classes)
            seconds = time.perf_counter() - t0
            crcs[path] = client.weights_crc()
        print(
            f"{path:5}: {total / 1024:.0f} KiB in {seconds:.2f} s (model {t_model:.2f} s), "
            f"{total / seconds / 1024:.0f} KiB/s, initial weights CRC {crcs[path][0]:#010x}"
        )
    if len(set(crcs.values())) != 1:
        print(f"the paths left different weights: {crcs}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
