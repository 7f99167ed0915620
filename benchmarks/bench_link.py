"""Link efficiency, side by side in one run (issue 5).

1. Round trips per ZO step, whatever q is.
2. Bytes on the wire per step against the bare payload (seeds, coefficients, loss pairs).
3. Bulk transfer efficiency: payload bytes/s over the raw line rate, over a pty and over TCP
   paced to 921,600 baud (a board's ST-LINK VCP), and unpaced (what Python can push).
4. Host-side overhead per step (protocol + trace + console, and the rest of the host's ZO
   loop) against the twin's compute, with the share of each part.
5. The per-step codecs: the fast paths generated from the spec against the generic codec
   (hilbench.protocol.fast against hilbench.protocol.codec), microseconds per call.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_link.py [wire] [bulk] [host] [codec]

(no argument: all five parts). ``python -m benchmarks.bench_link ...`` from a checkout
measures that checkout's hilbench; as a script, the installed one (part 4 prints which).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import hilbench
from hilbench import data as datasets
from hilbench import session
from hilbench.backend.emulate import EmulatorBackend, single_threaded_blas
from hilbench.client.device_client import Target
from hilbench.config import RunConfig
from hilbench.console import PlainView
from hilbench.device import DeviceTwin, serve_tcp
from hilbench.device import serve as device_server
from hilbench.link.paced import PacedPort
from hilbench.link.serial_port import open_port
from hilbench.link.wrapper import PortWrapper
from hilbench.protocol import data_blob

BAUD = 921_600
PACED_REPEATS = 3  # a paced upload takes about 1 s; other processes' load only slows one down


class CountingPort(PortWrapper):
    """Counts writes (round trips) and bytes in both directions."""

    def __init__(self, port) -> None:
        super().__init__(port)
        self.writes, self.tx, self.rx = 0, 0, 0

    def write(self, data: bytes) -> int:
        self.writes += 1
        self.tx += len(data)
        return self.port.write(data)

    def read(self, size: int = 1) -> bytes:
        data = self.port.read(size)
        self.rx += len(data)
        return data


def prepared():
    config = RunConfig()
    data = datasets.load("digits")
    model = session.prepare_model(config, data)
    x = datasets.quantize_inputs(data.x_train, model.input_scale, model.input_zero_point)
    return model.blob, x, data.y_train


def wire_per_step() -> None:
    """Steps as the trainer sends them: each update rides with the next step's PROBE."""
    blob, x, y = prepared()
    print("1-2. round trips and bytes per ZO step (two-point, batch 32), pty link")
    print(
        f"{'q':>5} {'round trips':>12} {'wire bytes':>11} {'bare payload':>13} {'ratio':>7}"
        f"   {'ratio, APPLY and PROBE apart':>29}"
    )
    with EmulatorBackend() as target:
        counting = CountingPort(target.port)
        target.port = counting
        target.load_model(blob)
        target.load_data(0, x, y, 10)
        rng = np.random.default_rng(0)
        for q in (1, 4, 8, 16, 24, 32, 64, 256):
            bare = 4 * q + 4 * q + 8 * q  # seeds, coefficients, loss pairs
            steps = 20
            probe = {"slot": 0, "batch_size": 32, "eps": 2}
            held = rng.integers(0, 2**32, q, dtype=np.uint32)
            target.probe(batch_seed=0, seeds=held, **probe)
            before = (counting.writes, counting.tx + counting.rx)
            for step in range(steps):
                seeds = rng.integers(0, 2**32, q, dtype=np.uint32)
                zeros = np.zeros(q, np.int32)
                answer = target.apply_probe(held, zeros, batch_seed=step, seeds=seeds, **probe)[1]
                assert len(answer.loss_plus) == q
                held = seeds
            trips = (counting.writes - before[0]) / steps
            wire = (counting.tx + counting.rx - before[1]) / steps
            target.apply(held, np.zeros(q, np.int32))
            before = counting.tx + counting.rx
            for step in range(steps):  # the same steps as two round trips each
                seeds = rng.integers(0, 2**32, q, dtype=np.uint32)
                target.probe(batch_seed=step, seeds=seeds, **probe)
                target.apply(seeds, np.zeros(q, np.int32))
            apart = (counting.tx + counting.rx - before) / steps
            print(
                f"{q:>5} {trips:>12.2f} {wire:>11.0f} {bare:>13} {wire / bare:>7.2f}"
                f"   {apart / bare:>29.2f}"
            )
    print(
        "fixed bytes per step: 2 frames x (2 delimiters, COBS code, 6-byte header, CRC-32) "
        "+ PROBE fields (11) + q_apply (2) + answer fields (15); ratio <= 1.25 needs "
        "16q >= 4 x fixed"
    )


def bulk(target: Target, blob: bytes, repeats: int = 1) -> float:
    """Payload bytes per second of the best of ``repeats`` uploads (load only slows one)."""
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        target.load_data_blob(0, blob)
        best = max(best, len(blob) / (time.perf_counter() - started))
    return best


def tcp_twin() -> tuple[str, threading.Event]:
    stop = threading.Event()
    ready: list[tuple[str, int]] = []
    thread = threading.Thread(
        target=serve_tcp,
        args=("127.0.0.1", 0, DeviceTwin()),
        kwargs={"on_listening": lambda h, p: ready.append((h, p)), "stop": stop},
        daemon=True,
    )
    thread.start()
    while not ready:
        time.sleep(0.01)
    return f"socket://{ready[0][0]}:{ready[0][1]}", stop


def raw_tcp_rate(n_bytes: int = 32 << 20) -> float:
    a, b = socket.socketpair()
    chunk = b"\x55" * 65536

    def drain() -> None:
        left = n_bytes
        while left > 0:
            left -= len(b.recv(1 << 20))

    reader = threading.Thread(target=drain)
    started = time.perf_counter()
    reader.start()
    for _ in range(n_bytes // len(chunk)):
        a.sendall(chunk)
    reader.join()
    return n_bytes / (time.perf_counter() - started)


def bulk_efficiency() -> None:
    _, x, y = prepared()
    blob = data_blob.encode(x, y, 10)  # the digits training set, 93 KB
    line = BAUD / 10
    print(
        f"\n3. bulk transfer of {len(blob):,} bytes (LOAD_DATA, 4 KB chunks, one in flight; "
        f"paced links: best of {PACED_REPEATS} uploads)"
    )
    print(f"{'link':<34} {'payload B/s':>12} {'raw line B/s':>13} {'efficiency':>11}")
    with EmulatorBackend() as target:
        target.port = PacedPort(target.port, BAUD)
        rate = bulk(target, blob, PACED_REPEATS)
        name = "pty paced to 921600 baud"
        print(f"{name:<34} {rate:>12,.0f} {line:>13,.0f} {rate / line:>10.1%}")
    url, stop = tcp_twin()
    target = Target(PacedPort(open_port(url), BAUD), name="tcp")
    target.hello()
    rate = bulk(target, blob, PACED_REPEATS)
    print(f"{'TCP paced to 921600 baud':<34} {rate:>12,.0f} {line:>13,.0f} {rate / line:>10.1%}")
    target.close()
    target = Target(open_port(url), name="tcp")
    target.hello()
    rate, raw = bulk(target, blob), raw_tcp_rate()
    print(f"{'TCP loopback, unpaced':<34} {rate:>12,.0f} {raw:>13,.0f} {rate / raw:>10.1%}")
    target.close()
    stop.set()
    with EmulatorBackend() as target:
        rate = bulk(target, blob)
        print(f"{'pty, unpaced (no line rate)':<34} {rate:>12,.0f} {'-':>13} {'-':>11}")


class _SelfTimes:
    """Thread CPU time spent in wrapped functions, minus that of wrapped functions they call."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._stack: list[float] = []
        self._undo: list[tuple[object, str, object]] = []

    def wrap(self, owner: object, name: str, part: str) -> None:
        original = getattr(owner, name)
        clock, stack, spent = time.thread_time, self._stack, self.spent

        def timed(*args, **kwargs):
            started = clock()
            stack.append(0.0)
            try:
                return original(*args, **kwargs)
            finally:
                inner = stack.pop()
                took = clock() - started
                spent[part] = spent.get(part, 0.0) + took - inner
                if stack:
                    stack[-1] += took

        self._undo.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()


#: the run issue 25's host-overhead target is measured on: the MLP at fixed q = 4, lr 175 (the
#: defaults until the widened study; `hilbench run`'s default is now q = 1, printed beside it)
ISSUE_RUN = {"scheduler": "fixed:4", "lr": 175.0}


def _default_run(budget: int, **kw):
    with tempfile.TemporaryDirectory() as tmp:
        config = RunConfig(budget=budget, trace=Path(tmp) / "t.h5", eval_every=budget, **kw)
        view = PlainView(write=lambda line: None)
        return session.run(config, view=view, backend=EmulatorBackend(link="memory"))


def host_overhead(budget: int = 16_000, repeats: int = 5) -> None:
    """Host CPU per step inside the training loop against the twin's CPU, both as thread CPU
    time: the in-memory link runs the twin inside the host's write call, so one thread does
    both and other processes' load does not count. Then the same run with each part of the
    host's work timed on its own (the extra clock reads inflate the parts a little)."""
    from hilbench import console
    from hilbench.client import device_client as client
    from hilbench.client import recovery
    from hilbench.trace.writer import TraceWriter
    from hilbench.train import estimator, trainer

    runs = {
        f"{ISSUE_RUN['scheduler']} (the issue's run)": ISSUE_RUN,
        f"{RunConfig().scheduler} (the default run)": {},
    }
    print(
        f"\n4. host overhead per step against the twin's compute, MLP, batch 32, "
        f"{budget:,} forward passes, in-memory link, thread CPU time; on {_cpu()}"
    )
    # run as a script, this file imports the installed hilbench (an editable install may be
    # another checkout); `python -m benchmarks.bench_link` imports the working directory's
    print(f"hilbench measured: {Path(hilbench.__file__).parent}")
    print(
        f"{'run':>4} {'schedule':<28} {'host ms/step':>13} {'twin ms/step':>13} {'host / twin':>12}"
    )
    ratios: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(repeats):
        for name, kw in runs.items():  # side by side, interleaved
            timer = _SelfTimes()
            timer.wrap(device_server.FrameEndpoint, "feed", "twin")
            timer.wrap(trainer.Trainer, "run", "loop")
            try:
                result = _default_run(budget, **kw)
            finally:
                timer.restore()
            host = (timer.spent["loop"]) / result.steps
            twin = timer.spent["twin"] / result.steps
            ratios[name].append(host / twin)
            print(
                f"{i + 1:>4} {name:<28} {host * 1e3:>13.3f} {twin * 1e3:>13.3f} "
                f"{host / twin:>11.1%}"
            )
    for name, r in ratios.items():
        target = " (target < 5%: issue 25)" if name.endswith("(the issue's run)") else ""
        print(f"median host / twin, {name} = {sorted(r)[len(r) // 2]:.1%}{target}")
    print(f"the parts of the host's work, {next(iter(runs))}:")

    timer = _SelfTimes()
    timer.wrap(device_server.FrameEndpoint, "feed", "twin")
    timer.wrap(trainer.Trainer, "run", "training loop (seeds, scheduler, bookkeeping)")
    # apply_probe_losses: the trainer's per-step call (the client's, nested, is the same part)
    for name in ("probe", "apply", "apply_probe", "apply_probe_losses", "weights_crc", "evaluate"):
        timer.wrap(recovery.RecoveringTarget, name, "protocol (client, frames, link)")
    timer.wrap(client.Target, "_exchange_payload", "protocol (client, frames, link)")
    timer.wrap(estimator, "two_point", "estimator (coefficients)")
    timer.wrap(estimator, "two_point_lists", "estimator (coefficients)")
    estimator.ESTIMATORS["two-point"] = estimator.two_point
    estimator.ON_LISTS["two-point"] = estimator.two_point_lists
    for name in ("append_step", "append_timing", "append_command", "append_eval", "append_event"):
        timer.wrap(TraceWriter, name, "trace")
    timer.wrap(console.PlainView, "update", "console")
    try:
        result = _default_run(budget, **ISSUE_RUN)
    finally:
        timer.restore()
        estimator.ESTIMATORS["two-point"] = estimator.two_point
        estimator.ON_LISTS["two-point"] = estimator.two_point_lists
    twin = timer.spent.pop("twin")
    print(f"{'part of the host work':<48} {'us/step':>8} {'/ twin':>7}")
    for part, spent in sorted(timer.spent.items(), key=lambda kv: -kv[1]):
        print(f"{part:<48} {spent / result.steps * 1e6:>8.1f} {spent / twin:>7.1%}")
    print(f"{'twin (PROBE + APPLY on the device side)':<48} {twin / result.steps * 1e6:>8.1f}")


def _per_call_us(fn, number: int = 5000, repeat: int = 7) -> float:
    """Best of ``repeat`` timings of ``number`` calls (other processes' load only slows one)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / number * 1e6


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def codec_costs(q: int = 4) -> None:
    """The per-step messages through their generated fast paths and through the generic codec
    (the same bytes and messages: tests/protocol/test_codec.py), side by side."""
    from hilbench.protocol import messages as m
    from hilbench.protocol import spec
    from hilbench.protocol.frames import Frame

    seeds, coeffs = np.arange(q, dtype=np.uint32), np.arange(q, dtype=np.int32)
    probe = m.ProbeRequest(0, 32, 7, 2, seeds)
    apply_probe = m.ApplyProbeRequest(coeffs, probe)
    answer = m.ProbeResponse(coeffs, coeffs, 5, m.TimingSource.MODELED)
    both = m.ApplyProbeResponse(3, answer)

    answer_p, both_p = answer.pack(), both.pack()
    frame = Frame(1, apply_probe.TYPE, 1, apply_probe.pack())

    def generic_probe() -> bytes:
        msg = m.ProbeRequest(0, 32, 7, 2, seeds)
        return msg._codec.generic_pack(msg)

    def generic_apply_probe() -> bytes:
        msg = m.ApplyProbeRequest(coeffs, m.ProbeRequest(0, 32, 7, 2, seeds))
        return msg._codec.generic_pack(msg)

    rows = [
        (
            "host: PROBE payload from plain args",
            lambda: m.probe_payload(0, 32, 7, 2, seeds),
            generic_probe,
        ),
        (
            "host: APPLY_PROBE payload from plain args",
            lambda: m.apply_probe_payload(coeffs, 0, 32, 7, 2, seeds),
            generic_apply_probe,
        ),
        (
            "host: PROBE answer unpacked",
            lambda: m.ProbeResponse.unpack(answer_p),
            lambda: answer._codec.generic_unpack(answer_p),
        ),
        (
            "host: APPLY_PROBE answer unpacked",
            lambda: m.ApplyProbeResponse.unpack(both_p),
            lambda: both._codec.generic_unpack(both_p),
        ),
        (
            "host: APPLY_PROBE answer read to lists",
            lambda: m.apply_probe_values(both_p),
            lambda: both._codec.generic_unpack(both_p),
        ),
        (
            "device: APPLY_PROBE request decoded",
            lambda: m.decode_request(frame),
            lambda: apply_probe._codec.build(spec.check_request(frame.type, frame.payload), True),
        ),
        ("device: APPLY_PROBE answer packed", both.pack, lambda: both._codec.generic_pack(both)),
    ]
    print(f"\n5. per-step codecs at q = {q}, us per call (best of 7 x 5,000), {_cpu()}")
    print(f"{'':<44} {'fast path':>10} {'generic':>9} {'generic / fast':>15}")
    for name, fast, generic in rows:
        a, b = _per_call_us(fast), _per_call_us(generic)
        print(f"{name:<44} {a:>10.2f} {b:>9.2f} {b / a:>14.1f}x")


PARTS = {
    "wire": wire_per_step,
    "bulk": bulk_efficiency,
    "host": host_overhead,
    "codec": codec_costs,
}

if __name__ == "__main__":
    unknown = [a for a in sys.argv[1:] if a not in PARTS]
    if unknown:
        print(
            f"bench_link: unknown part {unknown[0]!r}: choose from {', '.join(PARTS)}",
            file=sys.stderr,
        )
        sys.exit(2)
    single_threaded_blas()
    for part in sys.argv[1:] or list(PARTS):
        PARTS[part]()
