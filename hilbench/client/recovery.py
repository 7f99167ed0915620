"""Reset recovery: a DeviceClient wrapper that survives device reboots in the middle of a run.

It remembers what it sent that the device keeps (the model blob, each data slot) and every
update the device acknowledged, with the weights CRCs the device reported along the way. When
the device reports a reboot (``DeviceReset``), it says HELLO, reloads model and data, replays
the acknowledged updates (APPLY_BATCH), checks the device's weights CRC against the last one it
reported before the reset, and re-sends the interrupted request. An APPLY in flight at the
reset was never acknowledged, so it is not in the log and is sent again: applied once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from hilbench.client.device_client import DeviceClient, DeviceInfo, DeviceReset
from hilbench.client.events import ClientEvents, Incident
from hilbench.errors import DeviceError, HilbenchError
from hilbench.protocol import data_blob

_U32, _I32 = np.dtype(np.uint32), np.dtype(np.int32)
MAX_RECOVERIES_IN_A_ROW = 20
CRC_EVERY = 100  # updates between weights-CRC checkpoints (one extra round trip each)


class WeightsShadow(Protocol):
    """The host's own copy of the trainable weights: what the device should hold."""

    def apply(self, seeds: np.ndarray, coeffs: np.ndarray) -> None: ...
    def weights_crc(self) -> int: ...


class WeightsDiverged(HilbenchError):
    """The device's weights differ from the host's expectation: the run cannot be trusted."""


@dataclass
class UpdateLog:
    """The acknowledged updates, in order, and (updates applied, CRC) checkpoints."""

    steps: list[tuple[np.ndarray | list[int], np.ndarray | list[int]]] = field(
        default_factory=list
    )  # (seeds, coefficients): arrays, or the lists the trainer sent
    checkpoints: list[tuple[int, int]] = field(default_factory=list)

    def last_checkpoint(self) -> tuple[int, int] | None:
        return self.checkpoints[-1] if self.checkpoints else None


class RecoveringTarget:
    """Same commands as ``DeviceClient``; a device reset costs time, never correctness."""

    def __init__(
        self,
        target: DeviceClient,
        *,
        crc_every: int = CRC_EVERY,
        max_in_a_row: int = MAX_RECOVERIES_IN_A_ROW,
        shadow: Callable[[bytes], WeightsShadow] | None = None,
    ) -> None:
        self.target = target
        self.crc_every = crc_every
        self.make_shadow = shadow
        self._shadow: WeightsShadow | None = None
        self._shadow_steps = 0  # log entries the shadow has applied
        self.max_in_a_row = max_in_a_row
        self.log = UpdateLog()
        self.recoveries = 0
        self._model: bytes | None = None
        self._slots: dict[int, bytes] = {}
        self._restoring = False

    # --- pass-through ---------------------------------------------------------------------
    @property
    def info(self) -> DeviceInfo | None:
        return self.target.info

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def events(self) -> ClientEvents:
        """The inner client's events; a recovery is an ``incident`` on them too."""
        return self.target.events

    def _announce(self, kind: str, detail: str) -> None:
        incident = self.target.events.incident
        if incident:
            incident.emit(Incident(kind, detail))

    def close(self) -> None:
        self.target.close()

    # --- commands -------------------------------------------------------------------------
    def hello(self, timeout: float | None = None) -> DeviceInfo:
        return self.target.hello(timeout=timeout)

    def load_model(self, blob: bytes) -> int:
        self._model = blob
        self._slots.clear()
        self.log = UpdateLog()
        self._shadow = self.make_shadow(blob) if self.make_shadow else None
        self._shadow_steps = 0
        return self._call(self.target.load_model, blob)

    def load_data(self, slot: int, inputs: np.ndarray, labels: np.ndarray, n_classes: int) -> int:
        blob = data_blob.encode(inputs, labels, n_classes)
        self._slots[slot] = blob
        return self._call(self.target.load_data_blob, slot, blob)

    def probe(self, **kwargs: object):
        return self._call(self.target.probe, **kwargs)

    def apply(self, seeds: np.ndarray, coeffs: np.ndarray) -> int:
        applied = self._call(self.target.apply, seeds, coeffs)
        self._logged(seeds, coeffs, applied, "APPLY")
        return applied

    def _logged(
        self,
        seeds: np.ndarray,
        coeffs: np.ndarray,
        applied: int,
        command: str,
        copied: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Log an update the device acknowledged (``copied``: the log's copy made before the
        round trip, else one made now); a CRC checkpoint every ``crc_every``."""
        steps = self.log.steps
        steps.append(copied or (_copy(seeds, _U32), _copy(coeffs, _I32)))
        if applied != len(steps):
            self._expect_applied(applied, command)
        if self.crc_every and applied % self.crc_every == 0:
            self.weights_crc()

    def apply_probe(self, apply_seeds: np.ndarray, coeffs: np.ndarray, **probe: object):
        """``DeviceClient.apply_probe``, logged as ``apply`` is; returns the PROBE's answer."""
        update = _copied(apply_seeds, coeffs)  # before the round trip, not after it
        try:
            applied, response = self.target.apply_probe(apply_seeds, coeffs, **probe)
        except DeviceReset:
            applied, response = self._recovered(
                self.target.apply_probe, (apply_seeds, coeffs), probe, failures=1
            )
        self._logged(apply_seeds, coeffs, applied, "APPLY_PROBE", update)
        return response

    def apply_probe_losses(
        self, apply_seeds: np.ndarray | list[int], coeffs: np.ndarray | list[int], *probe: object
    ) -> tuple[list[int], list[int]]:
        """``DeviceClient.apply_probe_losses`` (the PROBE's slot, batch size, batch seed, eps
        and seeds by position: keywords would cost a dict every step), logged as ``apply`` is:
        the PROBE's (L+, L-)."""
        update = _copied(apply_seeds, coeffs)  # before the round trip, not after it
        try:  # (``_call`` inline: this runs every step)
            applied, plus, minus = self.target.apply_probe_losses(apply_seeds, coeffs, *probe)
        except DeviceReset:
            applied, plus, minus = self._recovered(
                self.target.apply_probe_losses, (apply_seeds, coeffs, *probe), {}, failures=1
            )
        self._logged(apply_seeds, coeffs, applied, "APPLY_PROBE", update)
        return plus, minus

    def head_grad(self, **request: object):
        """``DeviceClient.head_grad``; not logged: a recovery replays the ZO updates only, so
        the answer's ``grads_applied`` tells the trainer the head's steps were lost."""
        return self._call(self.target.head_grad, **request)

    def evaluate(self, slot: int, n_items: int, chunk: int = 512) -> tuple[float, float]:
        return self._call(self.target.evaluate, slot, n_items, chunk)

    def weights_crc(self) -> tuple[int, int]:
        """The device's weights CRC, checked against the host's shadow copy when it has one."""
        crc, applied = self._call(self.target.weights_crc)
        self._expect_applied(applied, "WEIGHTS_CRC")
        self._check_shadow(crc, applied)
        self.log.checkpoints.append((applied, crc))
        return crc, applied

    def _check_shadow(self, crc: int, applied: int) -> None:
        if self._shadow is None:
            return
        for seeds, coeffs in self.log.steps[self._shadow_steps : applied]:
            self._shadow.apply(seeds, coeffs)
        self._shadow_steps = applied
        expected = self._shadow.weights_crc()
        if crc != expected:
            raise WeightsDiverged(
                f"after {applied} updates {self.name} holds weights with CRC {crc:#010x}, "
                f"the host expects {expected:#010x}",
                "the device computes updates differently from the twin (or its memory is "
                "corrupt): rerun with the same seed and compare `hilbench replay` of the trace",
            )

    def restore(self, model: bytes, slots: dict[int, bytes], log: UpdateLog) -> None:
        """Bring a fresh device to a logged state (resuming a run from its trace)."""
        self._model, self._slots, self.log = model, dict(slots), log
        self._restoring = True  # logged as "restored": no reset happened
        try:
            self._recovered(lambda: None, (), {})
        finally:
            self._restoring = False

    # --- recovery -------------------------------------------------------------------------
    def _expect_applied(self, applied: int, command: str) -> None:
        if applied != len(self.log.steps):
            raise DeviceError(
                f"{self.name} reports {applied} updates applied after {command}, "
                f"the host acknowledged {len(self.log.steps)}",
                "the device applied an update twice or lost one: report this with the trace",
            )

    def _call(self, command: Callable[..., object], /, *args: object, **kwargs: object) -> object:
        """``command(*args, **kwargs)``, recovering from device resets on the way."""
        try:  # the common case: no reset (no closure to build, no loop to enter)
            return command(*args, **kwargs)
        except DeviceReset:
            pass
        return self._recovered(command, args, kwargs, failures=1)

    def _recovered(
        self,
        command: Callable[..., object],
        args: tuple[object, ...],
        kwargs: dict[str, object],
        *,
        failures: int = 0,
    ) -> object:
        """``command`` after a recovery (``failures``: resets seen so far in a row)."""
        while True:
            if failures > self.max_in_a_row:
                injected = getattr(self.target, "injected_reset_rate", lambda: 0.0)()
                if injected:
                    raise DeviceError(
                        f"{self.name} reset {failures} times in a row while recovering: the "
                        f"resets were injected by --link-faults reset={injected:g}",
                        "lower reset= in --link-faults (e.g. reset=0.001); the trace is valid "
                        "so far",
                    ) from None
                raise DeviceError(
                    f"{self.name} reset {failures} times in a row while recovering",
                    "check the board's power supply and watchdog; the trace is valid so far",
                ) from None
            try:
                self._recover()
                return command(*args, **kwargs)
            except DeviceReset:
                failures += 1

    def _recover(self) -> None:
        started = time.perf_counter()
        self.target.hello()
        if self._model is None:
            return
        self.target.load_model(self._model)
        for slot, blob in self._slots.items():
            self.target.load_data_blob(slot, blob)
        steps = self.log.steps
        checkpoint = self.log.last_checkpoint()
        done = 0
        if checkpoint is not None and 0 < checkpoint[0] <= len(steps):
            done, expected = checkpoint
            self.target.apply_batch(steps[:done])
            crc, applied = self.target.weights_crc()
            if (crc, applied) != (expected, done):
                raise DeviceError(
                    f"after a reset, replaying {done} updates gave weights CRC {crc:#010x}, "
                    f"the device reported {expected:#010x} before the reset",
                    "the device does not apply updates deterministically: report this",
                )
        if done < len(steps):
            self.target.apply_batch(steps[done:])
        crc, applied = self.target.weights_crc()
        if applied != len(steps):
            raise DeviceError(
                f"after a reset the device holds {applied} updates, the log has {len(steps)}",
                "report this with the trace",
            )
        self.log.checkpoints.append((applied, crc))
        self.recoveries += 1
        self._announce(
            "restored" if self._restoring else "recovered",
            f"reloaded model and {len(self._slots)} data slot(s), replayed {len(steps)} "
            f"updates in {time.perf_counter() - started:.3f} s; weights CRC {crc:#010x}",
        )


def _copied(seeds: object, coeffs: object) -> tuple[np.ndarray, np.ndarray] | None:
    """The log's own copy of an update already in arrays of the wire's dtypes, made before it
    is sent (the caller may reuse its arrays); None for anything else: the client says first
    what is wrong with it, and the log copies it (``_copy``) once acknowledged. Two lists (the
    trainer's, every step) are copied as lists: the log's readers take either."""
    if (
        type(seeds) is np.ndarray
        and type(coeffs) is np.ndarray
        and seeds.dtype == _U32
        and coeffs.dtype == _I32
    ):
        return seeds.copy(), coeffs.copy()
    if type(seeds) is list and type(coeffs) is list:
        return seeds.copy(), coeffs.copy()  # type: ignore[return-value]
    return None


def _copy(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The log's own copy (the caller may reuse its array)."""
    if type(values) is np.ndarray and values.dtype == dtype:
        return values.copy()
    return np.array(values, dtype)
