"""The host's ZO loop: pick seeds and q, PROBE, estimate, APPLY, record, show."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hilbench.console import NullView, Progress, RunView
from hilbench.target.client import CommandTiming, Target
from hilbench.train.estimator import two_point
from hilbench.train.schedule import QSchedule

TRAIN_SLOT = 0
TEST_SLOT = 1


@dataclass(frozen=True)
class TrainSettings:
    budget: int  # forward passes
    lr: float
    eps: int
    batch_size: int
    eval_every: int
    seed: int


@dataclass(frozen=True)
class TrainResult:
    steps: int
    forward_passes: int
    final_accuracy: float
    final_loss: float
    weights_crc: int


class Trainer:
    """Runs one ZO training run on a device whose model and data are loaded."""

    def __init__(
        self,
        target: Target,
        schedule: QSchedule,
        settings: TrainSettings,
        trace,  # hilbench.trace.TraceWriter
        *,
        n_test: int,
        fresh_words_per_seed: int,
        view: RunView | None = None,
    ) -> None:
        self.target = target
        self.schedule = schedule
        self.settings = settings
        self.trace = trace
        self.n_test = n_test
        self.fresh_words_per_seed = fresh_words_per_seed
        self.view = view or NullView()
        self.step = 0
        self._step_device_s = 0.0
        self._device_source: str | None = None
        target.on_command = self._record_timing

    def _record_timing(self, timing: CommandTiming) -> None:
        self.trace.append_timing(self.step, timing.command, timing.host_s, "host")
        if timing.device_s is not None and timing.source:
            self.trace.append_timing(self.step, timing.command, timing.device_s, timing.source)
            if timing.command in ("PROBE", "APPLY"):
                self._step_device_s += timing.device_s
                self._device_source = timing.source

    def _evaluate(self, forward_passes: int, progress: Progress) -> None:
        accuracy, loss = self.target.evaluate(TEST_SLOT, self.n_test)
        self.trace.append_eval(self.step, forward_passes, accuracy, loss, split="test")
        progress.accuracy = accuracy

    def run(self) -> TrainResult:
        s = self.settings
        rng = np.random.default_rng(s.seed)
        progress = Progress(budget=s.budget)
        forward_passes = 0
        next_eval = s.eval_every
        self._evaluate(0, progress)
        while True:
            q = self.schedule.next_q(self.step)
            if forward_passes + 2 * q > s.budget:
                break
            draws = rng.integers(0, 2**32, size=q + 1, dtype=np.uint32)
            batch_seed, seeds = int(draws[0]), draws[1:]
            started = time.perf_counter()
            self._step_device_s = 0.0
            probe = self.target.probe(
                slot=TRAIN_SLOT,
                batch_size=s.batch_size,
                batch_seed=batch_seed,
                eps=s.eps,
                seeds=seeds,
            )
            est = two_point(probe.loss_plus, probe.loss_minus, lr=s.lr, eps=s.eps)
            self.target.apply(seeds, est.coeffs)
            host_s = time.perf_counter() - started
            forward_passes += 2 * q
            self.trace.append_step(
                step=self.step,
                q=q,
                seeds=seeds,
                loss_plus=probe.loss_plus,
                loss_minus=probe.loss_minus,
                grads=est.grads,
                coeffs=est.coeffs,
                lr=s.lr,
                eps=s.eps,
                batch_seed=batch_seed,
                loss=est.loss,
                forward_passes=forward_passes,
                fresh_words=2 * q * self.fresh_words_per_seed,
            )
            self.schedule.observe(self.step, est.loss)
            self.step += 1
            progress.step, progress.q, progress.loss = self.step, q, est.loss
            progress.forward_passes, progress.step_host_s = forward_passes, host_s
            progress.step_device_s, progress.device_source = (
                self._step_device_s,
                self._device_source,
            )
            if forward_passes >= next_eval:
                next_eval += s.eval_every
                self._evaluate(forward_passes, progress)
            self.view.update(progress)
        final_accuracy, final_loss = self.target.evaluate(TEST_SLOT, self.n_test)
        self.trace.append_eval(self.step, forward_passes, final_accuracy, final_loss, split="test")
        crc, _ = self.target.weights_crc()
        progress.accuracy = final_accuracy
        self.view.update(progress)
        return TrainResult(
            steps=self.step,
            forward_passes=forward_passes,
            final_accuracy=final_accuracy,
            final_loss=final_loss,
            weights_crc=crc,
        )
