"""``hilbench selftest``: first-contact diagnostics, in the order a first contact goes.

1. **connect** -- open the port *before* loading (a board's loader keeps what the UART says
   from then on; QEMU's console keeps the firmware's BOOT line), load, HELLO;
2. **banner** -- what the firmware said at boot (QEMU: the semihosting BOOT line; a board: the
   bytes before HELLO; the SIL says nothing);
3. **device info** -- DEVICE_INFO: clocks, caches, arena, watchdog, bring-up timeouts;
4. **round trips** -- N DEVICE_INFO exchanges timed on the host;
5. **clock** -- the device's tick counter against the host's clock over a few seconds, against
   the clock the firmware believes it set (under QEMU -icount the counter counts instructions:
   not applicable, the rate is QEMU's speed on this host);
6. **arena** -- the whole arena written (through the debugger when there is one, else over the
   link) and read back by the device (LOAD_COMMIT's CRC-32 over every byte, or LOAD_DATA's blob
   checks), then a RESET;
7. **forward pass**, **ZO step** -- one INFER and one PROBE + APPLY of a small model, the
   device's duration against the cost model's (hilbench/npu/cost.py);
8. **UART errors** -- the error counters' change over all of the above (after the traffic).

Each check passes, fails or does not apply, and says what to try when it fails.
"""

from __future__ import annotations

import re
import statistics
import time
import zlib
from collections.abc import Callable

import numpy as np

from hilbench import __version__
from hilbench.backend.base import Backend
from hilbench.board.debug import DebugLinkError
from hilbench.board.procmem import ProcessMemory
from hilbench.board.stage import DebugStager
from hilbench.client import device_info as di
from hilbench.client.device_client import DeviceClient
from hilbench.config import RunConfig
from hilbench.errors import HilbenchError
from hilbench.launch import an547
from hilbench.npu import cost
from hilbench.protocol import data_blob, spec
from hilbench.protocol import messages as m
from hilbench.selftest.report import FAIL, NOT_APPLICABLE, PASS, Check, Report
from hilbench.train.prepare import load_data, prepare_model

ROUND_TRIPS = 50
CLOCK_SECONDS = 3.0
CLOCK_TOLERANCE = 0.01  # the device's clock within 1% of what it believes
ARENA_ITEM = 255  # item bytes of the arena's pattern blob (+1 label byte per item)
ARENA_LINK_LIMIT = 256 * 1024  # over a slow link without a debugger: this much, not the whole
MODEL_RATIO = (0.5, 2.0)  # device / modeled duration that passes (seconds on a board)
QEMU_RATIO = (0.75, 1.33)  # executed / modeled instructions under QEMU (the fit's own error)
ZO_BATCH = 8

UNKNOWN_BITS_FIX = {
    "VOS": "the SMPS/VOS sequence: check the board's power (docs/board.md, bring-up)",
    "PLL": "PLL1 never locked: the board runs on HSI 64 MHz; report it with this JSON",
    "clock switch": "the CPU/bus clock switch did not take: report it with this JSON",
    "UART": "USART1 did not acknowledge TE/RE: check the baud (--baud) and report it",
    "IWDG": "the watchdog did not finish updating: report it with this JSON",
}


def open_backend(kind: str, port: str | None, firmware: str | None) -> Backend:
    """The backend a selftest talks to, with a debugger for the uploads where one exists."""
    from hilbench.backend.registry import make_backend

    upload = "probe" if kind in ("qemu", "board") else "uart"
    config = RunConfig(backend=kind, port=port, firmware=firmware, upload=upload, live=False)
    return make_backend(config)


class Selftest:
    """One selftest of one backend (use :func:`run_selftest`)."""

    def __init__(self, backend: Backend, *, clock_seconds: float = CLOCK_SECONDS) -> None:
        self.backend = backend
        self.kind = backend.kind
        self.clock_seconds = clock_seconds
        self.client: DeviceClient | None = None
        self.report = Report(backend=self.kind, where="", hilbench_version=__version__)
        self.first_info: m.DeviceInfoResponse | None = None
        self.before_reset: m.DeviceInfoResponse | None = None  # the counters the RESET zeroes

    # --- the procedure -------------------------------------------------------------------
    def run(self) -> Report:
        t0 = time.monotonic()
        try:
            if self._connect():
                self._banner()
                steps: list[tuple[str, Callable[[], Check]]] = [
                    ("device info", self._device_info),
                    ("round trips", self._round_trips),
                    ("clock", self._clock),
                    ("arena", self._arena),
                    ("forward pass", self._forward_and_step),
                    ("uart errors", self._uart_errors),
                ]
                for name, step in steps:
                    try:
                        step()
                    except HilbenchError as exc:
                        self.report.add(Check(name, FAIL, exc.cause, exc.fix))
        finally:
            self.backend.close()
            self.report.seconds = time.monotonic() - t0
        return self.report

    def _connect(self) -> bool:
        t0 = time.monotonic()
        try:
            connection = self.backend.open()
        except HilbenchError as exc:
            self.report.add(Check("connect", FAIL, exc.cause, exc.fix))
            return False
        self.client = client = connection.client
        info = client.info
        assert info is not None
        self.report.where = client.name
        self.report.hello = {
            "device_id": info.device_id,
            "firmware": info.firmware,
            "protocol_version": info.protocol_version,
            "max_payload": info.max_payload,
            "boot_nonce": info.boot_nonce,
            "capabilities": info.capabilities,
            "capability_names": [
                n for n, bit in spec.CAPABILITIES.items() if info.capabilities & bit
            ],
        }
        self.report.add(
            Check(
                "connect",
                PASS,
                f"HELLO from {info.device_id} ({info.firmware}), protocol "
                f"{info.protocol_version}, max_payload {info.max_payload}",
                figures={"seconds": round(time.monotonic() - t0, 3), "loaded": connection.loaded},
            )
        )
        return True

    def _banner(self) -> Check:
        process = getattr(self.backend, "process", None)
        if self.kind == "qemu" and process is not None:
            lines = [line for line in process.console() if an547.parse_boot(line)]
            if not lines:
                return self.report.add(
                    Check(
                        "banner",
                        FAIL,
                        "the firmware wrote no BOOT line on QEMU's console",
                        "check that --fw is the hilbench an547 firmware (make -C device_fw an547)",
                    )
                )
            boot, arena, _payload, timing = an547.parse_boot(lines[-1])  # type: ignore[misc]
            return self.report.add(
                Check(
                    "banner",
                    PASS,
                    lines[-1],
                    figures={"boot": boot, "arena_bytes": arena, "timing": timing},
                )
            )
        tail = bytes(getattr(getattr(self.backend, "_port", None), "tail", b"") or b"")
        if self.kind == "board":  # the text among the frames: runs of 8 printable bytes or more
            runs = re.findall(rb"[\x20-\x7e\r\n\t]{8,}", tail)
            text = " | ".join(r.decode().strip() for r in runs if r.strip())
            return self.report.add(
                Check(
                    "banner",
                    NOT_APPLICABLE if not text else PASS,
                    text[-200:]
                    or "the firmware sends no banner on the UART (its boot shows in "
                    "DEVICE_INFO's reset cause)",
                    figures={"bytes_before_hello": len(tail)},
                )
            )
        return self.report.add(
            Check("banner", NOT_APPLICABLE, f"the {self.kind} firmware prints no boot banner")
        )

    def _info(self) -> m.DeviceInfoResponse:
        assert self.client is not None
        return self.client.device_info()

    def _device_info(self) -> Check:
        assert self.client is not None and self.client.info is not None
        if not self.client.info.capabilities & spec.CAP_DEVICE_INFO:
            return self.report.add(
                Check(
                    "device info",
                    FAIL,
                    "the firmware has no DEVICE_INFO (older than this hilbench)",
                    "load the firmware built from this checkout (hilbench load, or --fw)",
                )
            )
        info = self.first_info = self._info()
        self.report.device_info = di.as_dict(info)
        failed = di._names(info.bringup_errors, di.BRINGUP_BITS)
        if failed:
            return self.report.add(
                Check(
                    "device info",
                    FAIL,
                    f"{di.summary(info)}",
                    "; ".join(UNKNOWN_BITS_FIX[n] for n in failed),
                )
            )
        return self.report.add(Check("device info", PASS, di.summary(info)))

    def _round_trips(self) -> Check:
        times = []
        for _ in range(ROUND_TRIPS):
            t0 = time.perf_counter()
            self._info()
            times.append(time.perf_counter() - t0)
        times.sort()
        ms = [t * 1e3 for t in times]
        figures = {
            "n": len(ms),
            "median_ms": round(statistics.median(ms), 3),
            "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3),
            "max_ms": round(ms[-1], 3),
        }
        assert self.client is not None
        retries = self.client.stats.get("retry", 0)
        figures["retries"] = retries
        # a board's retry is a lost or damaged frame; under QEMU or the SIL a late answer (the
        # host busy), never a lost one: they share the host's CPU and lose no byte
        status = PASS if retries == 0 or self.kind != "board" else FAIL
        return self.report.add(
            Check(
                "round trips",
                status,
                f"{len(ms)} DEVICE_INFO round trips: median {figures['median_ms']} ms, "
                f"p95 {figures['p95_ms']} ms, max {figures['max_ms']} ms, {retries} retries"
                + (
                    ""
                    if not retries or self.kind == "board"
                    else " (late answers of a busy host: an emulated link loses nothing)"
                ),
                ""
                if status == PASS
                else "frames were lost or damaged: check the cable and the "
                "baud rate (--baud), and the UART errors check below",
                figures,
            )
        )

    def _clock(self) -> Check:
        a_host0 = time.perf_counter()
        a = self._info()
        a_host1 = time.perf_counter()
        time.sleep(self.clock_seconds)
        b_host0 = time.perf_counter()
        b = self._info()
        b_host1 = time.perf_counter()
        host_s = (b_host0 + b_host1) / 2 - (a_host0 + a_host1) / 2
        uncertainty = ((a_host1 - a_host0) + (b_host1 - b_host0)) / 2 / host_s
        ticks = b.ticks - a.ticks
        rate = ticks / host_s
        figures: dict[str, object] = {
            "host_seconds": round(host_s, 4),
            "ticks": int(ticks),
            "ticks_per_host_second": round(rate, 1),
            "timing_source": int(b.timing_source),
            "believed_hz": int(b.cpu_hz),
            "tick_ns_q16": int(b.tick_ns_q16),
        }
        source = spec.TimingSource(b.timing_source)
        if source is spec.TimingSource.INSTRUCTIONS:
            return self.report.add(
                Check(
                    "clock",
                    NOT_APPLICABLE,
                    f"QEMU -icount shift=0: the tick counter counts executed instructions (1 per "
                    f"virtual ns), not a clock; {rate / 1e6:.1f} M ticks per host second is "
                    "QEMU's pace on this host (virtual time also advances while the core idles "
                    "in WFI)",
                    figures=figures,
                )
            )
        if source is not spec.TimingSource.DEVICE or not b.tick_ns_q16:
            return self.report.add(
                Check(
                    "clock",
                    NOT_APPLICABLE,
                    f"the {self.kind} device reports no clock of its own (timing source "
                    f"{source.name.lower()})",
                    figures=figures,
                )
            )
        tick_hz = 65536e9 / b.tick_ns_q16
        measured_hz = rate * b.cpu_hz / tick_hz if b.cpu_hz else rate
        error = rate / tick_hz - 1
        figures.update(
            measured_tick_hz=round(rate, 1),
            believed_tick_hz=round(tick_hz, 1),
            measured_cpu_hz=round(measured_hz, 1),
            error=round(error, 6),
            uncertainty=round(uncertainty, 6),
        )
        ok = abs(error) <= CLOCK_TOLERANCE + uncertainty
        return self.report.add(
            Check(
                "clock",
                PASS if ok else FAIL,
                f"{rate / 1e6:.3f} M ticks per host second over {host_s:.2f} s, the firmware "
                f"believes {tick_hz / 1e6:.3f} M ({error:+.2%}; the CPU at {b.cpu_hz / 1e6:g} MHz "
                "by its own account)",
                ""
                if ok
                else "the clock tree is not what the firmware set: check the PLL "
                "(DEVICE_INFO bring-up errors), the 800 MHz build option's SMPS overdrive, or the "
                "HSE/HSI the board feeds; durations in traces are off by this much",
                figures,
            )
        )

    def _stager(self) -> DebugStager | None:
        """The client's debugger, or the SIL's /proc/PID/mem, or None."""
        assert self.client is not None
        if self.client.stager is not None:
            return self.client.stager  # type: ignore[return-value]
        process = getattr(self.backend, "process", None)
        pid = getattr(process, "pid", None)
        if self.kind == "sil" and pid is not None:
            try:
                ProcessMemory(pid).close()
            except DebugLinkError:
                return None
            return DebugStager(lambda: ProcessMemory(pid), name=f"/proc/{pid}/mem", halt=False)
        return None

    def _arena(self) -> Check:
        assert self.client is not None
        client = self.client
        info = self.first_info or self._info()
        stager = self._stager()
        n_items = (info.arena_bytes - 16) // (ARENA_ITEM + 1)
        link = stager is None or not client.info.capabilities & spec.CAP_LOAD_STAGE  # type: ignore[union-attr]
        whole = True
        if link and self.kind != "sil" and n_items * (ARENA_ITEM + 1) > ARENA_LINK_LIMIT:
            n_items, whole = ARENA_LINK_LIMIT // (ARENA_ITEM + 1), False
        rng = np.random.default_rng(0x5E1F7E57)
        inputs = rng.integers(-128, 128, (n_items, ARENA_ITEM), dtype=np.int8)
        labels = rng.integers(0, 10, n_items, dtype=np.uint8)
        blob = data_blob.encode(inputs, labels, 10)
        figures: dict[str, object] = {
            "bytes": len(blob),
            "arena_bytes": info.arena_bytes,
            "crc32": zlib.crc32(blob),
        }
        t0 = time.perf_counter()
        client.stager = None if link else stager
        try:
            items = client.load_data_blob(0, blob)
        finally:
            client.stager = stager if self.kind != "sil" else None
        seconds = time.perf_counter() - t0
        figures.update(seconds=round(seconds, 3), via="link" if link else stager.name)  # type: ignore[union-attr]
        figures["bytes_per_second"] = round(len(blob) / seconds) if seconds else 0
        self.before_reset = self._info()
        client.reset()
        client.hello()
        how = (
            f"over the link ({len(blob) / seconds / 1024:.0f} KiB/s)"
            if link
            else f"through {stager.name}, the device's CRC-32 over every byte matched"  # type: ignore[union-attr]
        )
        part = "" if whole else f" (the first {len(blob):,} bytes: no debugger, a slow link)"
        ok = items == n_items
        return self.report.add(
            Check(
                "arena",
                PASS if ok else FAIL,
                f"{len(blob):,} of {info.arena_bytes:,} arena bytes written and read back "
                f"{how}{part}, in {seconds:.2f} s",
                ""
                if ok
                else "the device's memory does not keep what is written: a RAM bank "
                "left off or in shutdown (docs/board.md, memories)",
                figures,
            )
        )

    def _forward_and_step(self) -> Check:
        assert self.client is not None
        client = self.client
        config = RunConfig(backend="emulate", model="mlp", dataset="digits", batch_size=ZO_BATCH)
        data = load_data(config)
        model = prepare_model(config, data)
        from hilbench import data as datasets

        x = datasets.quantize_inputs(
            data.x_test[:ZO_BATCH], model.input_scale, model.input_zero_point
        )
        client.load_model(model.blob)
        client.load_data(0, x, data.y_test[:ZO_BATCH], data.n_classes)
        costs = cost.layer_costs(model.graph)
        t0 = time.perf_counter()
        inf = client.infer(slot=0, index=0)
        host_infer = time.perf_counter() - t0
        t0 = time.perf_counter()
        seeds = np.array([1], dtype=np.uint32)
        probe = client.probe(slot=0, batch_size=ZO_BATCH, batch_seed=7, eps=2, seeds=seeds)
        client.apply(seeds, np.array([1], dtype=np.int32))
        host_step = time.perf_counter() - t0
        self.report.add(self._timing_check("forward pass", inf, costs, 1, 1, host_infer))
        return self.report.add(self._step_check(probe, inf, costs, host_step))

    def _step_check(self, probe, inf, costs, host_s: float) -> Check:
        """A ZO step's PROBE holds 2 forward passes per item (q 1) and the perturbations it
        draws, which the cost model does not cover: its duration must be at least those passes
        at the device's own forward-pass time, and what is left is the perturbation's share."""
        passes = 2 * ZO_BATCH  # q = 1, two-point: the +eps and -eps pass of each item
        source = spec.TimingSource(probe.timing_source)
        modeled = cost.latency_of(costs, "m55", inputs=ZO_BATCH, passes=2)
        figures: dict[str, object] = {
            "host_seconds": round(host_s, 6),
            "device_duration": int(probe.duration_ns),
            "timing_source": source.name.lower(),
            "forward_passes": passes,
            "modeled_forward_seconds": modeled.seconds,
            "timing_model": modeled.model,
        }
        what = f"one PROBE (q 1, batch {ZO_BATCH})"
        if source not in (spec.TimingSource.INSTRUCTIONS, spec.TimingSource.DEVICE):
            return Check(
                "zo step",
                NOT_APPLICABLE,
                f"{what} took {host_s * 1e3:.2f} ms on the host; the {self.kind} device measures "
                f"no duration (its forward passes, modeled: {modeled.seconds * 1e3:.3f} ms)",
                figures=figures,
            )
        unit = "instructions" if source is spec.TimingSource.INSTRUCTIONS else "ns"
        forward = passes * inf.duration_ns
        share = 1 - forward / probe.duration_ns if probe.duration_ns else 0.0
        figures.update(forward_part=int(forward), perturbation_share=round(share, 4))
        ok = probe.duration_ns >= 0.9 * forward
        return Check(
            "zo step",
            PASS if ok else FAIL,
            f"{what}: {probe.duration_ns:,} {unit}, of which {passes} forward passes at the "
            f"forward pass's {inf.duration_ns:,} make {forward:,} ({1 - share:.0%}); the rest "
            "draws the perturbations (the cost model covers the forward passes only)",
            ""
            if ok
            else "a step shorter than its own forward passes: the device's timer or "
            "its PROBE is wrong; send the report",
            figures,
        )

    def _timing_check(self, name, resp, costs, inputs: int, passes: int, host_s: float) -> Check:
        source = spec.TimingSource(resp.timing_source)
        modeled = cost.latency_of(costs, "m55", inputs=inputs, passes=passes)
        instr = inputs * passes * sum(cost.m55_layer_instructions(c) for c in costs)
        figures: dict[str, object] = {
            "host_seconds": round(host_s, 6),
            "device_duration": int(resp.duration_ns),
            "timing_source": source.name.lower(),
            "modeled_seconds": modeled.seconds,
            "modeled_instructions": round(instr),
            "timing_model": modeled.model,
        }
        what = "one INFER"
        if source is spec.TimingSource.INSTRUCTIONS:
            ratio = resp.duration_ns / instr if instr else 0.0
            figures["ratio"] = round(ratio, 4)
            ok = QEMU_RATIO[0] <= ratio <= QEMU_RATIO[1]
            return Check(
                name,
                PASS if ok else FAIL,
                f"{what}: {resp.duration_ns:,} instructions executed, the M55 model says "
                f"{instr:,.0f} ({ratio:.2f}x)",
                ""
                if ok
                else "the firmware's kernels and the cost model disagree: rerun "
                "benchmarks/calibrate_m55.py, or the firmware was built without -O2",
                figures,
            )
        if source is spec.TimingSource.DEVICE:
            seconds = resp.duration_ns * 1e-9
            ratio = seconds / modeled.seconds if modeled.seconds else 0.0
            figures["ratio"] = round(ratio, 4)
            ok = MODEL_RATIO[0] <= ratio <= MODEL_RATIO[1]
            return Check(
                name,
                PASS if ok else FAIL,
                f"{what}: {seconds * 1e3:.3f} ms on the device, {modeled.seconds * 1e3:.3f} ms "
                f"modeled ({modeled.model}; {ratio:.2f}x)",
                ""
                if ok
                else "slower than modeled: check DEVICE_INFO's caches (I+D) and clock; "
                "faster: the cost model needs a calibration on this board",
                figures,
            )
        return Check(
            name,
            NOT_APPLICABLE,
            f"{what} took {host_s * 1e3:.2f} ms on the host; the {self.kind} device measures no "
            f"duration (the M55 model says {modeled.seconds * 1e3:.3f} ms)",
            figures=figures,
        )

    def _uart_errors(self) -> Check:
        last = self._info()
        first = self.first_info or last
        pre = self.before_reset

        def change(c: str) -> int:  # across the arena check's RESET, which zeroes the counters
            if pre is None:
                return int(getattr(last, c)) - int(getattr(first, c))
            return int(getattr(pre, c)) - int(getattr(first, c)) + int(getattr(last, c))

        delta = {c: change(c) for c in di.UART_COUNTERS}
        figures: dict[str, object] = {**delta, "baud": int(last.uart_baud)}
        figures["totals"] = {c: int(getattr(last, c)) for c in di.UART_COUNTERS}
        if not last.uart_baud:
            return self.report.add(
                Check(
                    "uart errors",
                    NOT_APPLICABLE,
                    f"the {self.kind} device has no UART of its own (a socket carries the bytes)",
                    figures=figures,
                )
            )
        fixes = {
            "uart_overrun": "bytes arrived faster than the firmware took them: lower --baud, "
            "check the FIFO is on (docs/board.md)",
            "uart_framing": "the baud rates differ: check --baud against the firmware's "
            "STM32N6_BAUD and the USART kernel clock in DEVICE_INFO",
            "uart_noise": "line noise: another USB cable or port",
            "uart_dropped": "the receive ring was full: the firmware fell behind",
        }
        bad = [c for c, v in delta.items() if v]
        line = ", ".join(f"{c.removeprefix('uart_')} {v}" for c, v in delta.items())
        note = " (QEMU models no line errors)" if self.kind == "qemu" else ""
        return self.report.add(
            Check(
                "uart errors",
                FAIL if bad else PASS,
                f"during the selftest at {last.uart_baud} baud: {line}{note}",
                "; ".join(fixes[c] for c in bad),
                figures,
            )
        )


def run_selftest(backend: Backend, *, clock_seconds: float = CLOCK_SECONDS) -> Report:
    """Run every check on ``backend`` (opened here, closed at the end)."""
    return Selftest(backend, clock_seconds=clock_seconds).run()
