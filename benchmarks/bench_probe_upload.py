"""Upload time of a run's model and data to the firmware under QEMU: over the UART against
through QEMU's GDB stub (staged uploads, docs/protocol.md), and the weights CRC each path leaves.

    python benchmarks/bench_probe_upload.py [--model mobilenet_v2] [--paths uart,probe]

Prints, per path, the seconds of the model upload and of the two data uploads, and the
device's initial weights CRC (the same on both paths, or the benchmark fails).
"""

from __future__ import annotations

import argparse
import time

from hilbench import data as datasets
from hilbench.backend.qemu import QemuBackend
from hilbench.config import RunConfig
from hilbench.train.prepare import load_data, prepare_model
from hilbench.train.trainer import TEST_SLOT, TRAIN_SLOT


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--paths", default="probe,uart")
    args = ap.parse_args()
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
