"""The host's ZO loop: pick seeds and q, PROBE, estimate, APPLY, record, show.

Each step's update is sent with the next step's PROBE (APPLY_PROBE, one round trip per step)
and on its own before an evaluation and at the end, so the device sees APPLY(n), PROBE(n+1)
in the same order as with separate commands and computes the same numbers."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hilbench.client.device_client import CommandTiming, DeviceClient
from hilbench.config import rate_schedule
from hilbench.console import NullView, Progress, RunView
from hilbench.errors import HilbenchError
from hilbench.train.estimator import ESTIMATORS, ON_LISTS, Estimate, max_q
from hilbench.train.estimator import forward_passes as step_cost
from hilbench.train.hybrid import HeadSpec
from hilbench.train.schedule import Scheduler, StepInfo, overrides
from hilbench.train.stopping import BUDGET, Stopper
from hilbench.zo.aggregate import ALIGN, align_coefficients

STEP_COMMANDS = frozenset(
    {"PROBE", "APPLY", "APPLY_PROBED", "APPLY_PROBE", "HEAD_GRAD"}
)  # device time
_new_info = tuple.__new__  # a StepInfo of the step's fields, without NamedTuple's __new__
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
    estimator: str = "two-point"
    lr_schedule: str = "constant"
    eps_schedule: str = "constant"
    time_limit_s: float = 0.0  # wall clock (0: none); hilbench.train.stopping
    until: str = ""  # stopping rules, e.g. "accuracy>=0.9"
    aggregator: str = "mean"  # or "align" (needs the Trainer's gram)
    timing_model: str = ""  # the cost model's name, for the view's "modeled" times


@dataclass(frozen=True)
class LoggedStep:
    """One step of an interrupted run, as its trace recorded it (for resuming)."""

    q: int
    batch_seed: int
    seeds: np.ndarray
    loss: float
    forward_passes: int
    lr: float = math.nan  # optional: what a scheduler's observe_step sees besides the loss
    eps: int = 0
    grads: np.ndarray | None = None


@dataclass(frozen=True)
class TrainResult:
    steps: int
    forward_passes: int
    final_accuracy: float
    final_loss: float
    weights_crc: int
    stop_reason: str = BUDGET  # why the run ended: the budget spent, or a limit or rule
    head_crc: int | None = None  # the hybrid's head after its last HEAD_GRAD (None: no hybrid)


def eps_of(eps: int, factor: float) -> int:
    """A step's perturbation size: the run's ``eps`` times its schedule's factor, in 1..127."""
    return int(min(127, max(1, round(eps * factor))))


class SeedStream:
    """The run's uint32 draws (batch seed, then q perturbation seeds, per step), in blocks.

    numpy's full-range uint32 draws do not depend on how they are split into calls (tested),
    so one call per block yields exactly what one ``rng.integers`` call per step would, at a
    fraction of its per-call cost."""

    BLOCK = 1024

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._block: list[int] = []  # plain ints: a step's seeds are a list slice, no numpy
        self._pos = 0

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` draws (a fresh uint32 array)."""
        pos, block = self._pos, self._block
        if pos + n > len(block):
            block, pos = self._refill(n)
        self._pos = pos + n
        return np.array(block[pos : pos + n], dtype=np.uint32)

    def take_step(self, q: int) -> tuple[int, list[int]]:
        """A step's draws, the ``q + 1`` that ``take(q + 1)`` returns: the batch seed and the
        ``q`` perturbation seeds (a fresh list of ints: what the client packs, the estimator
        and the trace read, without a numpy call on every step)."""
        n = q + 1
        pos, block = self._pos, self._block
        if pos + n > len(block):
            block, pos = self._refill(n)
        self._pos = pos + n
        return block[pos], block[pos + 1 : pos + n]

    def _refill(self, n: int) -> tuple[list[int], int]:
        """The draws left, then a new block of at least ``n``: (block, position 0)."""
        fresh = self.rng.integers(0, 2**32, size=max(n, self.BLOCK), dtype=np.uint32)
        self._block = self._block[self._pos :] + fresh.tolist()
        return self._block, 0


def _estimated(
    estimate: Callable[..., Estimate], plus: list[int], minus: list[int], lr: float, eps: int
) -> tuple[list[float], list[int], float]:
    """An estimator without a plain-list form, on the losses as int32 arrays, its answer as
    lists: (grads, coefficients, loss)."""
    est = estimate(np.array(plus, np.int32), np.array(minus, np.int32), lr=lr, eps=eps)
    return est.grads.tolist(), est.coeffs.tolist(), est.loss


class Trainer:
    """Runs one ZO training run on a device whose model and data are loaded."""

    def __init__(
        self,
        target: DeviceClient,
        schedule: Scheduler,
        settings: TrainSettings,
        trace,  # hilbench.trace.TraceWriter
        *,
        n_test: int,
        fresh_words: Callable[[int], int],
        fresh_numbers: Callable[[int], int],
        view: RunView | None = None,
        gram: Callable[[np.ndarray], np.ndarray] | None = None,
        head: HeadSpec | None = None,
    ) -> None:
        self.target = target
        self.schedule = schedule
        self.settings = settings
        self.trace = trace
        self.n_test = n_test
        self.fresh_words = fresh_words
        self.fresh_numbers = fresh_numbers
        # (fresh words, fresh numbers) are functions of q: ask once per q
        self._fresh_by_q: dict[int, tuple[int, int]] = {}
        self.view = view or NullView()
        # the aligned aggregator: the Gram matrix of a step's directions from its seeds
        if settings.aggregator == ALIGN and gram is None:
            raise HilbenchError(
                "the align aggregator needs the Gram matrix of the directions",
                "pass Trainer(..., gram=hilbench.zo.aggregate.Directions(zo, trained).gram)",
            )
        self.gram = gram
        self.head = head  # the hybrid: the last layer by HEAD_GRAD each step (None: ZO only)
        self._head_crc: int | None = None
        self.step = 0
        self._step_device_s = 0.0
        self._device_source: str | None = None
        self._last_eval: tuple[int, float, float] | None = None  # (passes, accuracy, loss)

    def _fresh(self, q: int) -> tuple[int, int]:
        fresh = self._fresh_by_q.get(q)
        if fresh is None:
            fresh = self._fresh_by_q[q] = (self.fresh_words(q), self.fresh_numbers(q))
        return fresh

    def _record_timing(self, timing: CommandTiming) -> None:
        command, host_s, device_s, source, instructions = timing  # one unpacking: every step
        if instructions is not None:  # QEMU -icount: a count, stored as its own source
            self.trace.append_command(self.step, command, host_s, instructions, source)
        elif device_s is None or not source:
            self.trace.append_timing(self.step, command, host_s, "host")
        else:
            self.trace.append_command(self.step, command, host_s, device_s, source)
            if command in STEP_COMMANDS:
                self._step_device_s += device_s
                self._device_source = source

    def _apply(self, pending: tuple[np.ndarray, np.ndarray] | None) -> None:
        """Send an update still held back for the next PROBE (before the weights are read)."""
        if pending is not None:
            self.target.apply(*pending)

    def _evaluate(self, forward_passes: int, progress: Progress) -> tuple[float, float]:
        accuracy, loss = self.target.evaluate(TEST_SLOT, self.n_test)
        self.trace.append_eval(self.step, forward_passes, accuracy, loss, split="test")
        progress.accuracy, progress.accuracy_forward_passes = accuracy, forward_passes
        self._last_eval = (forward_passes, accuracy, loss)
        return accuracy, loss

    def _fast_forward(self, done: list[LoggedStep], rng: SeedStream) -> int:
        """Replay the host's side of logged steps: RNG draws and scheduler; check each."""
        s = self.settings
        forward_passes_done = 0
        for logged in done:
            fits = max_q(s.estimator, s.budget - forward_passes_done)
            q = min(int(self.schedule.next_q(self.step)), fits)
            draws = rng.take(logged.q + 1)
            if (
                q != logged.q
                or int(draws[0]) != logged.batch_seed
                or not np.array_equal(draws[1:], logged.seeds)
            ):
                raise HilbenchError(
                    f"step {self.step} of the trace does not follow from its seed and scheduler",
                    "resume with the hilbench version that wrote the trace",
                )
            forward_passes_done = logged.forward_passes
            grads = np.zeros(0) if logged.grads is None else logged.grads
            self.schedule.observe_step(
                StepInfo(
                    self.step, q, logged.loss, forward_passes_done, logged.lr, logged.eps, grads
                )
            )
            self.step += 1
        return forward_passes_done

    def run(
        self,
        resume: list[LoggedStep] | None = None,
        last_eval: tuple[int, float, float] | None = None,
    ) -> TrainResult:
        """Train until the budget is spent; after ``resume``'s steps if given (the device
        already holds their updates; ``last_eval``: the trace's last test evaluation as
        (forward passes, accuracy, loss), so the weights it evaluated are not evaluated
        again). The final evaluation is the last one of the loop when that one saw the final
        weights (a budget that is a multiple of ``eval_every``). Every command's timing goes
        into the trace while it runs (a subscriber of the client's ``command`` event)."""
        with self.target.events.command.subscribed(self._record_timing):
            return self._train(resume, last_eval)

    def _train(
        self, resume: list[LoggedStep] | None, last_eval: tuple[int, float, float] | None
    ) -> TrainResult:
        s = self.settings
        rng = SeedStream(np.random.default_rng(s.seed))
        progress = Progress(budget=s.budget, timing_model=s.timing_model)
        forward_passes_done = 0
        next_eval = s.eval_every
        estimate = ESTIMATORS[s.estimator]
        on_lists = ON_LISTS.get(s.estimator)  # its plain-list form, if it has one
        lr_at, eps_at = rate_schedule(s.lr_schedule), rate_schedule(s.eps_schedule)
        self.schedule.start(s.budget)
        self._last_eval = None
        stopper = Stopper(s.time_limit_s, s.until)  # the clock starts with this session
        stop = ""
        if resume:
            forward_passes_done = self._fast_forward(resume, rng)
            while next_eval <= forward_passes_done:
                next_eval += s.eval_every
            if last_eval is not None and last_eval[0] == forward_passes_done:
                self._last_eval = last_eval  # of these very weights: the device holds them
                progress.accuracy, progress.accuracy_forward_passes = last_eval[1], last_eval[0]
        else:
            accuracy, loss = self._evaluate(0, progress)
            stop = stopper.after_eval(forward_passes=0, accuracy=accuracy, loss=loss)
        pending: tuple[np.ndarray, np.ndarray] | None = None  # (seeds, coeffs) not yet sent
        head_pass = 1 if self.head is not None else 0  # HEAD_GRAD's forward pass per step
        append_step, observe_step = self.trace.append_step, self.schedule.observe_step
        watch_steps = stopper.active  # no limit and no rule: nothing to ask after a step
        # a constant schedule's factor is 1.0 whatever the fraction: not asked every step
        lr_constant = s.lr_schedule == "constant"
        eps_fixed = eps_of(s.eps, 1.0) if s.eps_schedule == "constant" else 0
        # what every step reads, looked up once
        schedule, target, head, view_update = (
            self.schedule,
            self.target,
            self.head,
            self.view.update,
        )
        kind, budget, batch_size = s.estimator, s.budget, s.batch_size
        align = s.aggregator == ALIGN
        fresh_by_q = self._fresh_by_q  # what _fresh remembers, read inline
        # the base Scheduler's lr_scale is 1.0 and its observe_step does nothing: not called
        scales_lr = overrides(schedule, "lr_scale")
        observes = overrides(schedule, "observe_step") or overrides(schedule, "observe")
        rates_fixed = lr_constant and not scales_lr and eps_fixed  # nothing to work out a step
        cost_of: dict[int, int] = {}  # q -> its PROBE's forward passes (step_cost), once per q
        clock = time.perf_counter
        while not stop:
            q = schedule.next_q(self.step)
            if type(q) is not int:  # (a scheduler may answer a numpy int)
                q = int(q)
            cost = cost_of.get(q)
            if cost is None:
                cost = cost_of[q] = step_cost(kind, q) if q >= 1 else 0
            left = budget - forward_passes_done - head_pass
            if q < 1 or cost > left:  # only then can max_q cut q: min(q, max_q(kind, left))
                q = min(q, max_q(kind, left))
                if q < 1:
                    break
                cost = step_cost(kind, q)
            if rates_fixed:  # (s.lr times 1.0 is s.lr, bit for bit)
                lr, eps = s.lr, eps_fixed
            else:
                frac = forward_passes_done / budget
                lr = (
                    s.lr
                    * (1.0 if lr_constant else lr_at(frac))
                    * (schedule.lr_scale(q) if scales_lr else 1.0)
                )
                eps = eps_fixed or eps_of(s.eps, eps_at(frac))
            batch_seed, seeds = rng.take_step(q)
            started = clock()
            self._step_device_s = 0.0
            if pending is None:  # the first step: a PROBE alone
                answer = target.probe(
                    slot=TRAIN_SLOT,
                    batch_size=batch_size,
                    batch_seed=batch_seed,
                    eps=eps,
                    seeds=seeds,
                )
                plus, minus = answer.loss_plus.tolist(), answer.loss_minus.tolist()
            else:  # the last step's update travels with this step's PROBE: one round trip
                plus, minus = target.apply_probe_losses(  # (by position: keywords cost a dict)
                    pending[0], pending[1], TRAIN_SLOT, batch_size, batch_seed, eps, seeds
                )
            if head is not None:  # the exact step of the head, on the PROBE's batch
                self._head_step(batch_seed, lr_at(forward_passes_done / budget))
                forward_passes_done += 1
            if on_lists is not None:  # the estimate on plain lists, which the trace keeps
                grads, coeffs, loss = on_lists(plus, minus, lr, eps)
            else:
                grads, coeffs, loss = _estimated(estimate, plus, minus, lr, eps)
            if align and q > 1:  # least squares over the q directions
                coeffs = align_coefficients(grads, self.gram(seeds), lr)
            # applied before anything reads the weights (lists: the client packs them)
            pending = (seeds, coeffs)
            host_s = clock() - started
            forward_passes_done += cost
            fresh_words, fresh_numbers = fresh_by_q.get(q) or self._fresh(q)
            if head is not None:  # HEAD_GRAD's rounding offsets, one per head element
                fresh_words += head.fresh_words
                fresh_numbers += head.elements
            append_step(  # (step, q, seeds, loss_plus, loss_minus, grads, coeffs, lr, eps,
                # batch_seed, loss, forward_passes, fresh_words, fresh_numbers): positional,
                # cheaper than 14 keywords on every step
                self.step,
                q,
                seeds,
                plus,
                minus,
                grads,
                coeffs,
                lr,
                eps,
                batch_seed,
                loss,
                forward_passes_done,
                fresh_words,
                fresh_numbers,
            )
            if observes:
                observe_step(
                    _new_info(
                        StepInfo,
                        (self.step, q, loss, forward_passes_done, lr, eps, np.array(grads)),
                    )
                )
            self.step += 1
            progress.step, progress.q, progress.loss = self.step, q, loss
            progress.forward_passes, progress.step_host_s = forward_passes_done, host_s
            progress.step_device_s, progress.device_source = (
                self._step_device_s,
                self._device_source,
            )
            if watch_steps:
                stop = stopper.after_step(
                    steps=self.step, forward_passes=forward_passes_done, train_loss=loss
                )
            if forward_passes_done >= next_eval:
                next_eval += s.eval_every
                pending = self._apply(pending)
                accuracy, loss = self._evaluate(forward_passes_done, progress)
                stop = stop or stopper.after_eval(
                    forward_passes=forward_passes_done, accuracy=accuracy, loss=loss
                )
            view_update(progress)
        pending = self._apply(pending)
        forward_passes = forward_passes_done
        if self._last_eval is not None and self._last_eval[0] == forward_passes:
            _, final_accuracy, final_loss = self._last_eval  # no update since: same weights
        else:
            final_accuracy, final_loss = self._evaluate(forward_passes, progress)
        crc, _ = self.target.weights_crc()
        self.view.update(progress)
        return TrainResult(
            steps=self.step,
            forward_passes=forward_passes,
            final_accuracy=final_accuracy,
            final_loss=final_loss,
            weights_crc=crc,
            stop_reason=stop or BUDGET,
            head_crc=self._head_crc,
        )

    def _head_step(self, batch_seed: int, factor: float) -> None:
        """HEAD_GRAD on this step's batch; a device that lost earlier head steps (a reset the
        client recovered from by replaying the ZO updates only) stops the run."""
        assert self.head is not None
        s = self.settings
        answer = self.target.head_grad(
            slot=TRAIN_SLOT,
            batch_size=s.batch_size,
            batch_seed=batch_seed,
            round_seed=batch_seed,
            rates=self.head.rates(factor, s.batch_size),
            bias_gain=self.head.bias_gain,
        )
        if answer.grads_applied != self.step + 1:
            raise HilbenchError(
                f"the device has run {answer.grads_applied} HEAD_GRAD steps, the host sent "
                f"{self.step + 1}: it lost the hybrid head's updates (a reset?)",
                "run again; a hybrid run cannot yet recover from a device reset",
            )
        self._head_crc = answer.head_crc
