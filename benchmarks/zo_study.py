"""The ZO study of issue 4: fixed q against QScheduler, and PeZO's perturbations, on the emulator.

Every run is an ordinary ``hilbench.session.run`` (the exact configuration ``hilbench run``
takes; the table prints each one's command line) on an in-process twin
(``session.direct_target``: the same device code and bytes as the pty emulator, bit-identical,
tested in tests/train/test_direct_target.py). Equal forward-pass budgets, 3 seeds per
configuration; learning rates are tuned on a separate seed by the final *training* loss, never
by test accuracy.

    python benchmarks/zo_study.py                 # everything (resumable), then the report
    python benchmarks/zo_study.py --stage tune    # one stage: tune | main | pezo | report
    python benchmarks/zo_study.py --tasks mlp-ft --workers 2

Traces land in traces/zo_study/ (git-ignored), one JSON summary per run next to them; the
report (docs/results.md) and plots (docs/results/*.png) are rebuilt from those summaries.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from study_noise import binomial_se, gap_text, noise_note, paired_gap, verdict

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("ZO_STUDY_OUT", ROOT / "traces" / "zo_study"))
DOCS = ROOT / "docs"
PLOTS = DOCS / "results"

# --farm BOARD: run on a board farm's boards (docs/farm.md), e.g. labgrid:board=sil; the
# spawned workers read it from the environment
FARM = os.environ.get("ZO_STUDY_FARM", "")
QS = (1, 2, 4, 8, 16, 32)
SEEDS = (0, 1, 2)
TUNE_SEED = 100
EPS = 2
BATCH = 32


@dataclass(frozen=True)
class Task:
    name: str
    model: str
    dataset: str
    init: str
    budget: int
    lr1: float  # prior for the q = 1 learning rate (the tuning grid is centred on lr1 * q^0.9)
    targets: tuple[tuple[int, float], ...]  # (forward passes, test accuracy) the issue asks for


TASKS = {
    t.name: t
    for t in (
        Task(
            "mlp-scratch",
            "mlp",
            "digits",
            "random",
            60_000,
            50.0,
            ((15_000, 0.90), (60_000, 0.93)),
        ),
        Task("cnn-scratch", "cnn", "digits", "random", 30_000, 100.0, ((30_000, 0.91),)),
        Task("mlp-ft", "mlp", "digits-rot20", "pretrained", 20_000, 50.0, ((20_000, 0.90),)),
        Task("cnn-ft", "cnn", "digits-rot20", "pretrained", 12_000, 25.0, ((12_000, 0.90),)),
    )
}


@dataclass(frozen=True)
class Spec:
    """One run: everything ``hilbench run`` needs."""

    task: str
    scheduler: str
    lr: float
    seed: int
    perturbation: str = "rademacher"
    pool: int = 0
    scaling: str = "auto"
    layers: str = "weights"
    lr_schedule: str = "constant"
    tag: str = field(default="", compare=False)  # which part of the study asked for it
    estimator: str = "two-point"
    budget: int = 0  # forward passes; 0: the task's budget
    aggregator: str = "mean"  # or "align" (issue 29)
    hybrid: str = "none"  # "last": the last layer by its exact gradient (issue 29)
    head_lr: float = 0.0  # the exact head's rate (0: the run's lr)

    @property
    def run_budget(self) -> int:
        return self.budget or TASKS[self.task].budget

    @property
    def key(self) -> str:
        parts = [self.task, self.scheduler.replace(":", ""), f"lr{self.lr:g}", f"s{self.seed}"]
        if self.perturbation != "rademacher":
            parts.append(self.perturbation)
        if self.pool:
            parts.append(f"pool{self.pool}")
        if self.scaling != "auto":
            parts.append(self.scaling)
        if self.layers != "weights":
            parts.append(f"layers_{self.layers}")
        if self.lr_schedule != "constant":
            parts.append(f"lrs_{self.lr_schedule}")
        if self.estimator != "two-point":
            parts.append(self.estimator.replace("-", ""))
        if self.aggregator != "mean":
            parts.append(self.aggregator)
        if self.hybrid != "none":
            parts.append(f"hybrid_{self.hybrid}" + (f"_h{self.head_lr:g}" if self.head_lr else ""))
        return "-".join(parts).replace("/", "_") + f"-b{self.run_budget}"

    def config(self):
        from hilbench.config import RunConfig

        t = TASKS[self.task]
        return RunConfig(
            model=t.model,
            dataset=t.dataset,
            init=t.init,
            scheduler=self.scheduler,
            budget=self.run_budget,
            seed=self.seed,
            lr=self.lr,
            eps=EPS,
            batch_size=BATCH,
            eval_every=eval_every(t, self.run_budget),
            trace=OUT / f"{self.key}.h5",
            live=False,
            perturbation=self.perturbation,
            pool=self.pool,
            scaling=self.scaling,
            layers=self.layers,
            lr_schedule=self.lr_schedule,
            estimator=self.estimator,
            aggregator=self.aggregator,
            hybrid=self.hybrid,
            head_lr=self.head_lr,
        )

    def command(self) -> str:
        c = self.config()
        args = [
            "hilbench run --no-live",
            f"--model {c.model}",
            f"--dataset {c.dataset}",
            f"--init {c.init}",
            f"--scheduler {c.scheduler}",
            f"--lr {_exact(c.lr)}",
            f"--budget {c.budget}",
            f"--seed {c.seed}",
        ]
        if self.perturbation != "rademacher":
            args.append(f"--perturbation {self.perturbation}")
        if self.pool:
            args.append(f"--pool {self.pool}")
        if self.scaling != "auto":
            args.append(f"--scaling {self.scaling}")
        if self.layers != "weights":
            args.append(f"--layers {self.layers}")
        if self.lr_schedule != "constant":
            args.append(f"--lr-schedule {self.lr_schedule}")
        if self.estimator != "two-point":
            args.append(f"--estimator {self.estimator}")
        if self.aggregator != "mean":
            args.append(f"--aggregator {self.aggregator}")
        if self.hybrid != "none":
            args.append(f"--hybrid {self.hybrid}")
        if self.head_lr:
            args.append(f"--head-lr {_exact(self.head_lr)}")
        return " ".join(args)


def eval_every(task: Task, budget: int) -> int:
    """Forward passes between test evaluations: a 30th of the budget, refined so that every
    target of the task before the budget's end (which is always evaluated) is an evaluation
    point (the 15,000-pass target of the 60,000-pass MLP runs was read at the 14,000-pass
    evaluation before). Evaluations do not change a run's training (same seeds, weights)."""
    return math.gcd(budget // 30, *(fp for fp, _ in task.targets if fp < budget))


@dataclass
class Outcome:
    spec: Spec
    final_accuracy: float
    curve: list[tuple[int, float]]  # (forward passes, test accuracy)
    final_train_loss: float  # mean step loss over the last 10% of the budget (tuning criterion)
    steps: int
    forward_passes: int
    q_changes: list[tuple[int, int]]  # (forward passes, q) where q changed
    fresh_words_per_step: float
    fresh_numbers_per_step: float
    weights_crc: int
    wall_s: float
    extra: dict = field(default_factory=dict)

    def accuracy_at(self, fp: int) -> float:
        best = math.nan
        for f, a in self.curve:
            if f <= fp:
                best = a
        return best


def _exact(value: float) -> str:
    """``value`` as short as it reads back exactly (a command line must rerun the same run)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _result_path(spec: Spec) -> Path:
    return OUT / f"{spec.key}.json"


def load_outcome(spec: Spec) -> Outcome | None:
    p = _result_path(spec)
    if not p.exists():
        return None
    d = json.loads(p.read_text())
    d["spec"] = Spec(**d["spec"])
    d["curve"] = [tuple(x) for x in d["curve"]]
    d["q_changes"] = [tuple(x) for x in d["q_changes"]]
    return Outcome(**d)


#: a study's extra measurement of a finished run on the twin: (spec, the twin's final model
#: state, the run's config) -> values kept in Outcome.extra (e.g. a held-out test accuracy)
Measure = Callable[[Spec, object, object], dict]


def run_spec(spec: Spec, measure: Measure | None = None) -> Outcome:
    """Run one configuration on an in-process twin and summarise its trace (``measure``: more
    values of the finished run, from the twin's final model state)."""
    from hilbench import session
    from hilbench.device import BANNER_REASONS, DeviceTwin
    from hilbench.trace import Trace
    from hilbench.zo import zocf

    cached = load_outcome(spec)
    if cached is not None:
        return cached
    OUT.mkdir(parents=True, exist_ok=True)
    cfg = spec.config()
    trace_path = Path(cfg.trace)
    trace_path.unlink(missing_ok=True)
    if FARM:  # --farm: each run on a farm board, acquired, loaded and released per run
        result = session.run(cfg.replace(backend="board", port=FARM))
    else:
        twin = DeviceTwin(**BANNER_REASONS)
        result = session.run(cfg, target=session.direct_target(twin))
    tr = Trace.open(result.trace_path, run=result.run_id)
    steps, evals = tr.steps, tr.evals
    test = evals[evals["split"] == b"test"] if evals["split"].dtype.kind == "S" else evals
    curve = [
        (int(f), float(a)) for f, a in zip(test["forward_passes"], test["accuracy"], strict=True)
    ]
    fp = steps["forward_passes"]
    tail = steps["loss"][fp > 0.9 * fp[-1]]
    q = steps["q"]
    changes = [(0, int(q[0]))] + [
        (int(fp[i - 1]), int(q[i])) for i in range(1, len(q)) if q[i] != q[i - 1]
    ]
    data = session.load_data(cfg)
    prepared = session.prepare_model(cfg, data)
    numbers = zocf.fresh_numbers_per_seed(prepared.zo, prepared.trained)
    out = Outcome(
        spec=spec,
        final_accuracy=float(result.final_accuracy),
        curve=curve,
        final_train_loss=float(np.mean(tail)) if len(tail) else math.inf,
        steps=int(result.steps),
        forward_passes=int(result.forward_passes),
        q_changes=changes,
        fresh_words_per_step=float(np.mean(steps["fresh_words"])),
        fresh_numbers_per_step=float(np.mean(2 * q * numbers)),
        weights_crc=int(result.weights_crc),
        wall_s=float(result.wall_s),
        extra={"place": str(tr.attrs.get("place", ""))} if FARM else {},
    )
    if measure is not None and not FARM:
        if twin.model is None or twin.model.weights_crc() != out.weights_crc:
            raise RuntimeError(f"{spec.key}: the twin's final weights are not the run's")
        out.extra.update(measure(spec, twin.model, cfg))
    d = asdict(out)
    _result_path(spec).write_text(json.dumps(d))
    return out


def run_all(
    specs: Iterable[Spec],
    workers: int,
    run: Callable[[Spec], Outcome] | None = None,
    name: str = "zo_study",
) -> list[Outcome]:
    """Every run of ``specs`` not cached yet, each in a fresh process (``run``: a module-level
    function the workers import; run_spec by default), then all their outcomes."""
    run = run or run_spec
    specs = list(dict.fromkeys(specs))
    todo = [s for s in specs if load_outcome(s) is None]
    print(f"[{name}] {len(specs)} runs, {len(todo)} to do, {workers} workers", flush=True)
    started = time.perf_counter()
    if todo:
        # longest first, so the pool does not end on one long run
        todo.sort(key=lambda s: -TASKS[s.task].budget * (3 if TASKS[s.task].model == "cnn" else 1))
        # one fresh process per run, so no run can depend on what its process ran before
        # (the native NPU engine keeps per-process plans)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, max_tasks_per_child=1
        ) as pool:
            futures = {pool.submit(run, s): s for s in todo}
            for i, fut in enumerate(as_completed(futures), 1):
                s = futures[fut]
                o = fut.result()
                held = o.extra.get("heldout_accuracy")
                print(
                    f"[{name}] {i}/{len(todo)} {s.key}: acc {o.final_accuracy:.3f} "
                    + (f"held-out {held:.3f} " if held is not None else "")
                    + f"train loss {o.final_train_loss:.3f} ({o.wall_s:.0f} s, "
                    f"{time.perf_counter() - started:.0f} s elapsed)",
                    flush=True,
                )
    return [load_outcome(s) for s in specs]


# --- stages ------------------------------------------------------------------------------------
def lr_grid(task: Task, q: int) -> list[float]:
    centre = task.lr1 * q**0.9
    return [_round_lr(centre * f) for f in (0.5, 1.0, 2.0)]


def _round_lr(x: float) -> float:
    e = math.floor(math.log10(x))
    return round(x / 10**e, 2) * 10**e


def _grow(grids: dict, loss: Callable[[tuple, float], float]) -> bool:
    """Grow each lr grid by a factor 2 past an edge whose rate has the lowest ``loss(key,
    lr)``; True if any grid grew (its new rate still has to be run)."""
    grown = False
    for key, g in grids.items():
        best = int(np.argmin([loss(key, lr) for lr in g]))
        if best == 0 and g[0] > 1:
            g.insert(0, _round_lr(g[0] / 2))
            grown = True
        elif best == len(g) - 1 and g[-1] < 1e5:
            g.append(_round_lr(g[-1] * 2))
            grown = True
    return grown


def tune(tasks: list[Task], workers: int) -> dict[str, dict[int, float]]:
    """Best lr per (task, q) on TUNE_SEED by final training loss; the grid grows by a factor
    2 past an edge that wins (at most 3 times)."""
    grids = {(t.name, q): lr_grid(t, q) for t in tasks for q in QS}
    for _ in range(4):
        specs = [
            Spec(t, f"fixed:{q}", lr, TUNE_SEED, tag="tune")
            for (t, q), g in grids.items()
            for lr in g
        ]
        outs = {(o.spec.task, o.spec.scheduler, o.spec.lr): o for o in run_all(specs, workers)}
        if not _grow(grids, lambda k, lr, o=outs: o[(k[0], f"fixed:{k[1]}", lr)].final_train_loss):
            break
    best_lr: dict[str, dict[int, float]] = {}
    for (t, q), g in grids.items():
        losses = [outs[(t, f"fixed:{q}", lr)].final_train_loss for lr in g]
        best_lr.setdefault(t, {})[q] = g[int(np.argmin(losses))]
    (OUT / "tuned_lr.json").write_text(json.dumps(best_lr, indent=1))
    return best_lr


def main_specs(tasks: list[Task], best_lr: dict[str, dict[int, float]]) -> list[Spec]:
    specs = []
    for t in tasks:
        lrs = best_lr[t.name]
        lr1 = lrs[1]
        for s in SEEDS:
            for q in QS:
                specs.append(Spec(t.name, f"fixed:{q}", lrs[q], s, tag="tuned"))
                if q > 1:
                    specs.append(Spec(t.name, f"fixed:{q}", lr1, s, tag="one-rate"))
            specs.append(Spec(t.name, "qscheduler", lr1, s, tag="qsched"))
            specs.append(Spec(t.name, "fixed:1", _round_lr(3 * lr1), s, tag="3x"))
            specs.append(Spec(t.name, "qscheduler", _round_lr(3 * lr1), s, tag="qsched-3x"))
    return specs


WARMUP_SCHEDULE = "step:0.333@0,0.667@0.05,1@0.1"  # the QScheduler's warm-up, as an lr schedule
EXTRA_VARIANTS = (
    ("cosine lr", {"lr_schedule": "cosine"}),
    ("cosine lr, weights and biases", {"lr_schedule": "cosine", "layers": "all"}),
    ("lr ×0.5 for the last 25%", {"lr_schedule": "step:0.5@0.75"}),
    ("QScheduler's lr warm-up", {"lr_schedule": WARMUP_SCHEDULE}),
)


def best_tuned_q(task: Task, best_lr, outs: dict | None = None) -> int:
    """The fixed q with the best mean final accuracy over the 3 seeds at its tuned lr."""
    best, best_q = -1.0, 1
    for q in QS:
        g = [load_outcome(Spec(task.name, f"fixed:{q}", best_lr[task.name][q], s)) for s in SEEDS]
        g = [o for o in g if o is not None]
        if len(g) == len(SEEDS):
            m = float(np.mean([o.final_accuracy for o in g]))
            if m > best:
                best, best_q = m, q
    return best_q


def extra_variants(task: Task, best_lr, outs: dict | None = None):
    """(label, spec fields) of the extra configurations: the best tuned fixed q with a cosine
    learning-rate decay (and with biases trained too), with a late step decay, and with the
    QScheduler's learning-rate warm-up (is the warm-up, not q, what helps?)."""
    q = best_tuned_q(task, best_lr, outs)
    lr = best_lr[task.name][q]
    return [
        (f"fixed q={q}, {label}", {"scheduler": f"fixed:{q}", "lr": lr, "kw": kw})
        for label, kw in EXTRA_VARIANTS
    ]


def extra_specs(tasks: list[Task], best_lr) -> list[Spec]:
    return [
        Spec(t.name, v["scheduler"], v["lr"], s, tag="extra", **v["kw"])
        for t in tasks
        for _, v in extra_variants(t, best_lr)
        for s in SEEDS
    ]


# Configurations run at a *shorter* budget, for a target within the task's budget (the 60,000-
# pass runs' rates are tuned for 60,000 passes, and a rate stable that long is slow early). Each
# gets its own rate, tuned on TUNE_SEED for that budget by the same procedure as the fixed q.
# The configuration was chosen on the tuning seeds 100-105 only, by mean final training loss
# (test accuracy agreed): two-point fixed q = 1..32 at their own 15,000-pass rates (constant;
# q = 2 also with the late step decay and with a linear decay) ended at 0.29-0.38 nats and
# 85.3-89.0%; one-sided q = 2, 4, 8, 16, 32 at their own rates at 0.35, 0.26, 0.30, 0.25, 0.24
# nats and 84.1, 89.6, 85.9, 90.0, 90.9% (one-sided q = 4 with the step or a linear decay: 0.25,
# 89.3 and 88.0%). The one-sided estimator spends q + 1 forward passes per step instead of 2q
# (1.94x the steps at q = 32), which is what a short budget is short of.
BUDGET_VARIANTS = {
    "mlp-scratch": (("one-sided", 15_000, 32, {"estimator": "one-sided"}),),
}


def budget_variant_specs(task: Task, q: int, budget: int, kw: dict, lr: float, seed: int):
    return Spec(task.name, f"fixed:{q}", lr, seed, budget=budget, tag="budget", **kw)


def tune_budget_variants(tasks: list[Task], workers: int) -> dict[str, float]:
    """Each budget variant's lr on TUNE_SEED by final training loss, exactly as ``tune``."""
    grids = {
        (t.name, i): lr_grid(t, v[2])
        for t in tasks
        for i, v in enumerate(BUDGET_VARIANTS.get(t.name, ()))
    }

    def spec(name: str, i: int, lr: float) -> Spec:
        _, budget, q, kw = BUDGET_VARIANTS[name][i]
        return budget_variant_specs(TASKS[name], q, budget, kw, lr, TUNE_SEED)

    for _ in range(4):
        outs = run_all([spec(t, i, lr) for (t, i), g in grids.items() for lr in g], workers)
        loss = {o.spec.key: o.final_train_loss for o in outs}
        if not _grow(grids, lambda k, lr, ls=loss: ls[spec(*k, lr).key]):
            break
    best_lr = {}
    for (t, i), g in grids.items():
        losses = [o.final_train_loss for o in run_all([spec(t, i, lr) for lr in g], workers)]
        best_lr[_budget_key(t, i)] = g[int(np.argmin(losses))]
    path = OUT / "tuned_lr_budget.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**old, **best_lr}, indent=1))
    return best_lr


def _budget_key(task: str, i: int) -> str:
    label, budget, q, _ = BUDGET_VARIANTS[task][i]
    return f"{task}/{label}/q{q}/b{budget}"


def budget_variants(task: Task) -> list[tuple[str, Spec]]:
    """(row label, seed-0 spec) of the task's budget variants whose rate is tuned."""
    path = OUT / "tuned_lr_budget.json"
    tuned = json.loads(path.read_text()) if path.exists() else {}
    out = []
    for i, (label, budget, q, kw) in enumerate(BUDGET_VARIANTS.get(task.name, ())):
        lr = tuned.get(_budget_key(task.name, i))
        if lr is not None:
            row = f"fixed q={q}, {label}, {budget:,}-pass budget, lr tuned for it"
            out.append((row, budget_variant_specs(task, q, budget, kw, lr, SEEDS[0])))
    return out


def budget_specs(tasks: list[Task]) -> list[Spec]:
    return [replace(s, seed=seed) for t in tasks for _, s in budget_variants(t) for seed in SEEDS]


PEZO_TASKS = ("mlp-scratch", "cnn-ft")
PEZO_Q = 4
PEZO_VARIANTS = (
    ("rademacher", 0, "auto"),
    ("gaussian", 0, "auto"),
    ("uniform", 0, "auto"),
    ("uniform", 0, "fixed"),
    ("uniform", 256, "auto"),
    ("uniform", 4096, "auto"),
)


def pezo_specs(best_lr: dict[str, dict[int, float]], tasks: list[Task]) -> list[Spec]:
    names = {t.name for t in tasks}
    return [
        Spec(t, f"fixed:{PEZO_Q}", best_lr[t][PEZO_Q], s, dist, pool, scaling, tag="pezo")
        for t in PEZO_TASKS
        if t in names and t in best_lr
        for dist, pool, scaling in PEZO_VARIANTS
        for s in SEEDS
    ]


# --- issue 29: a rate that follows q, and the aligned aggregator ----------------------------------
# The MLP from scratch at 60,000 passes: the defaults (fixed q = 4, mean) against the QScheduler
# with its rate coupled to q (``couple=1``: eta q / (q + d - 1) with d >> q) and against the
# aligned aggregator (least squares over the q directions, hilbench/zo/aggregate.py). Every
# fixed-q rate is tuned on TUNE_SEED by the final training loss, as ``tune`` does; the
# QScheduler rows use the q = 1 rate (and 3x it), as in the main study.
I29_TASK = "mlp-scratch"
# The mean's rates are the main study's (``tune`` on TUNE_SEED, docs/results.md: q = 1 50,
# q = 4 174); the aligned aggregator's are tuned here by the same procedure, on a grid centred
# on the mean's q^0.9 law divided by q (align's rate is per query).
I29_MEAN_LR = {
    "fixed:1/mean": 50.0,
    "fixed:2/mean": 93.3,
    "fixed:4/mean": 174.0,
    "fixed:16/mean": 606.0,
}
# the mean's rows run here (q = 1 and 2 at 30,000 and 15,000 steps are the slowest runs; the
# QScheduler rows at the q = 1 rate stayed at q = 1, so they are q = 1 with the warm-up)
I29_MEAN_ROWS = ("fixed:4/mean", "fixed:16/mean")
I29_TUNED = (  # (scheduler, aggregator, the grid's centre in units of the task's lr1)
    ("fixed:4", "align", 4**-0.1),
    ("fixed:16", "align", 16**-0.1),
)
I29_QSCHED = (  # (label, scheduler, aggregator, multiple of the q = 1 rate)
    ("QScheduler (current rule), lr tuned for q=1", "qscheduler", "mean", 1),
    ("QScheduler, rate follows q (couple=1), lr tuned for q=1", "qscheduler:couple=1", "mean", 1),
    ("QScheduler, rate follows q (couple=1), lr 3× too large", "qscheduler:couple=1", "mean", 3),
    ("QScheduler + align, lr tuned for q=1", "qscheduler", "align", 1),
    ("QScheduler (current rule), lr 3× too large", "qscheduler", "mean", 3),
)
I29_OUT_NAME = "tuned_lr_issue29.json"


def tune_issue29(workers: int) -> dict[str, float]:
    t = TASKS[I29_TASK]
    grids = {
        (sched, agg): [_round_lr(t.lr1 * c * f) for f in (0.5, 1.0, 2.0)]
        for sched, agg, c in I29_TUNED
    }

    def spec(k, lr):
        return Spec(I29_TASK, k[0], lr, TUNE_SEED, aggregator=k[1], tag="tune29")

    for _ in range(4):
        outs = run_all([spec(k, lr) for k, g in grids.items() for lr in g], workers)
        loss = {o.spec.key: o.final_train_loss for o in outs}
        if not _grow(grids, lambda k, lr, ls=loss: ls[spec(k, lr).key]):
            break
    best = dict(I29_MEAN_LR)
    for k, g in grids.items():
        losses = [load_outcome(spec(k, lr)).final_train_loss for lr in g]
        best[f"{k[0]}/{k[1]}"] = g[int(np.argmin(losses))]
    (OUT / I29_OUT_NAME).write_text(json.dumps(best, indent=1))
    return best


def issue29_rows(best: dict[str, float]) -> list[tuple[str, Spec]]:
    """(label, seed-0 spec) of every row of the issue-29 table."""
    rows = []
    for key in [*I29_MEAN_ROWS, *(f"{s}/{a}" for s, a, _ in I29_TUNED)]:
        sched, agg = key.split("/")
        lr = best[key]
        label = f"{sched.replace(':', ' q=')}, {agg}, own tuned lr"
        rows.append((label, Spec(I29_TASK, sched, lr, SEEDS[0], aggregator=agg, tag="i29")))
    lr1 = best["fixed:1/mean"]
    for label, sched, agg, mult in I29_QSCHED:
        lr = lr1 if mult == 1 else _round_lr(mult * lr1)
        rows.append((label, Spec(I29_TASK, sched, lr, SEEDS[0], aggregator=agg, tag="i29")))
    return rows


def issue29_report(best: dict[str, float]) -> str:
    """The issue-29 table: mean ± sd over the seeds, the seeds' values, the test set's binomial
    standard error at the mean accuracy, and the training loss the rates were tuned by."""
    from hilbench import session
    from hilbench.config import RunConfig

    t = TASKS[I29_TASK]
    n_test = len(session.load_data(RunConfig(model=t.model, dataset=t.dataset)).y_test)
    lines = [
        f"| configuration | lr | final test accuracy % (mean ± sd, {len(SEEDS)} seeds) | "
        "seeds 0, 1, 2 | binomial SE of one run | final train loss (nats) | steps | "
        "command (seed 0) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, sp in issue29_rows(best):
        g = [load_outcome(replace(sp, seed=s)) for s in SEEDS]
        if any(o is None for o in g):
            continue
        acc = [o.final_accuracy for o in g]
        m = float(np.mean(acc))
        se = math.sqrt(m * (1 - m) / n_test)
        lines.append(
            f"| {label} | {sp.lr:g} | {_fmt(acc)} | "
            + ", ".join(f"{100 * a:.1f}" for a in acc)
            + f" | ±{100 * se:.1f} | {np.mean([o.final_train_loss for o in g]):.3f} | "
            f"{int(np.mean([o.steps for o in g])):,} | `{sp.command()}` |"
        )
    lines += ["", f"Test set: {n_test} items. Tuned rates (seed {TUNE_SEED}): "]
    lines[-1] += ", ".join(f"{k} {v:g}" for k, v in best.items()) + "."
    for label, sp in issue29_rows(best):
        o = load_outcome(sp)
        if o is not None and sp.scheduler.startswith("qscheduler"):
            path = ", ".join(f"q={q} from {fp:,}" for fp, q in o.q_changes)
            lines.append(f"- {label}, seed 0: {path}.")
    return "\n".join(lines) + "\n"


def run_issue29(workers: int) -> str:
    best = tune_issue29(workers)
    # seed by seed, so that an interrupted run still has whole seeds of every row
    run_all([replace(sp, seed=s) for s in SEEDS for _, sp in issue29_rows(best)], workers)
    text = issue29_report(best)
    (OUT / "issue29.md").write_text(text)
    return text


# --- report -------------------------------------------------------------------------------------
def _mean_std(xs: list[float]) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def _fmt(xs: list[float]) -> str:
    m, s = _mean_std(xs)
    return f"{100 * m:.1f} ± {100 * s:.1f}"


def _off_budget_rate(label: str) -> bool:
    """A row run at a rate not tuned for it (one rate for every q, or 3x too large): shown, but
    no candidate for a task's accuracy target."""
    return "(one rate)" in label or "3× too large" in label


def _final(o: Outcome) -> float:
    return o.final_accuracy


def _accs(g: list[Outcome]) -> list[float]:
    return [o.final_accuracy for o in g]


def _gap_cell(g: list[Outcome], best: list[Outcome], is_best: bool, at: int = 0) -> str:
    """The table's gap column: this row's mean minus the best tuned fixed q's, paired by seed;
    ``at``: a row run at a shorter budget, compared at that many forward passes."""
    if is_best:
        return "— (best)"
    if at:
        gap, se, _ = paired_gap(g, best, lambda o: o.accuracy_at(at))
        return f"{gap_text(gap, se)} (at {at:,})"
    gap, se, _ = paired_gap(g, best, _final)
    return gap_text(gap, se)


@functools.cache
def n_test_items(dataset: str) -> int:
    """How many test items a run on ``dataset`` is scored on (every run scores all of them)."""
    from hilbench.data.registry import load

    return len(load(dataset).y_test)


def report(tasks: list[Task], best_lr: dict[str, dict[int, float]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    PLOTS.mkdir(parents=True, exist_ok=True)
    specs = (
        main_specs(tasks, best_lr)
        + pezo_specs(best_lr, tasks)
        + extra_specs(tasks, best_lr)
        + budget_specs(tasks)
    )
    outs = {o.spec: o for o in (load_outcome(s) for s in specs) if o is not None}
    lines: list[str] = []
    verdicts: list[str] = []

    def group(task: str, scheduler: str, lr: float, **kw) -> list[Outcome]:
        return [
            outs[s] for s in (Spec(task, scheduler, lr, seed, **kw) for seed in SEEDS) if s in outs
        ]

    for t in tasks:
        lrs = best_lr[t.name]
        lr1 = lrs[1]
        lr3 = _round_lr(3 * lr1)
        lines += [
            f"### {t.name}: {t.model}, {t.dataset}, init {t.init}, {t.budget:,} forward passes",
            "",
        ]
        lines += [
            "| configuration | lr | final test accuracy % (mean ± sd, 3 seeds) | gap to the best "
            "tuned fixed q (points ± paired s.e.) | "
            + " | ".join(f"at {fp:,}" for fp, _ in t.targets[:-1])
            + (" | " if len(t.targets) > 1 else "")
            + "steps | command (seed 0) |",
            "| --- | --- | --- | --- | " + "--- | " * (len(t.targets) - 1) + "--- | --- |",
        ]
        rows = []
        for q in QS:
            rows.append((f"fixed q={q}, own tuned lr", f"fixed:{q}", lrs[q], {}))
        rows.append(("QScheduler, lr tuned for q=1", "qscheduler", lr1, {}))
        for q in QS[1:]:
            rows.append((f"fixed q={q}, lr of q=1 (one rate)", f"fixed:{q}", lr1, {}))
        rows.append(("fixed q=1, lr 3× too large", "fixed:1", lr3, {}))
        rows.append(("QScheduler, lr 3× too large", "qscheduler", lr3, {}))
        for label, v in extra_variants(t, best_lr, outs):
            rows.append((label, v["scheduler"], v["lr"], v["kw"]))
        for label, sp in budget_variants(t):
            rows.append(
                (label, sp.scheduler, sp.lr, {"budget": sp.budget, "estimator": sp.estimator})
            )
        summary: dict[str, float] = {}
        runs: dict[str, list[Outcome]] = {}
        for label, sched, lr, kw in rows:
            g = group(t.name, sched, lr, **kw)
            if g:
                runs[label] = g
                summary[label] = _mean_std([o.final_accuracy for o in g])[0]
        own = {f"fixed q={q}, own tuned lr": q for q in QS if f"fixed q={q}, own tuned lr" in runs}
        top = max(own, key=summary.__getitem__) if own else None
        for label, _sched, lr, kw in rows:
            g = runs.get(label)
            if not g:
                continue
            budget = kw.get("budget", t.budget)
            at = budget if budget < t.budget else 0  # a shorter budget: compared at its end
            mid = "".join(f"{_fmt([o.accuracy_at(fp) for o in g])} | " for fp, _ in t.targets[:-1])
            lines.append(
                f"| {label} | {lr:g} | {_fmt([o.final_accuracy for o in g])} | "
                f"{_gap_cell(g, runs[top], label == top, at) if top else ''} | {mid}"
                f"{int(np.mean([o.steps for o in g])):,} | `{g[0].spec.command()}` |"
            )
        lines.append("")
        # QScheduler's q path (seed 0)
        for label, lr in (("lr tuned for q=1", lr1), ("lr 3× too large", lr3)):
            g = group(t.name, "qscheduler", lr)
            if g:
                path = ", ".join(f"q={q} from {fp:,}" for fp, q in g[0].q_changes)
                lines.append(f"QScheduler ({label}), seed 0: {path}.  ")
        lines.append("")
        # verdicts
        items = n_test_items(t.dataset)
        if top is not None:
            best_q, best, best_g = own[top], summary[top], runs[top]
            for fp, target in t.targets:
                cands: list[tuple[float, str, list[float]]] = []
                for label, _sched, _lr, kw in rows:
                    g = runs.get(label)
                    if not g or _off_budget_rate(label) or kw.get("budget", 0) > fp:
                        continue
                    accs = [o.accuracy_at(fp) for o in g]
                    cands.append((float(np.mean(accs)), label, accs))
                top_acc, top_label, accs = max(cands) if cands else (math.nan, "", [math.nan])
                verdicts.append(
                    f"- {t.name}: ≥ {100 * target:.0f}% within {fp:,} forward passes: best "
                    f"configuration {top_label}: {_fmt(accs)}% (mean ± sd of 3 seeds; one run's "
                    f"binomial s.e. on {items:,} test items ≈ {binomial_se(top_acc, items):.1f}) "
                    f"— **{verdict(100 * (top_acc - target), 0.0)}**"
                )
            qs_g = runs.get("QScheduler, lr tuned for q=1")
            if qs_g:
                gap, se, k = paired_gap(qs_g, best_g, _final)
                verdicts.append(
                    f"- {t.name}: QScheduler (lr tuned for q=1) {_fmt(_accs(qs_g))}% vs best tuned "
                    f"fixed q={best_q} {_fmt(_accs(best_g))}%: gap {gap_text(gap, se)} points "
                    f"(target ≥ −1; {noise_note(k, items, best)}) — "
                    f"**{verdict(gap, 1.0)}**"
                )
            qs3_g = runs.get("QScheduler, lr 3× too large")
            f13 = summary.get("fixed q=1, lr 3× too large")
            if qs3_g:
                allowed = 2.0 if t.init == "random" else 3.0
                gap, se, k = paired_gap(qs3_g, best_g, _final)
                verdicts.append(
                    f"- {t.name}: lr 3× too large: QScheduler {_fmt(_accs(qs3_g))}% (gap "
                    f"{gap_text(gap, se)}, target ≥ −{allowed:g}; {noise_note(k, items, best)}), "
                    f"fixed q=1 {100 * (f13 or math.nan):.1f}% — "
                    f"**{verdict(gap, allowed)}**"
                )
        # plot
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
        cmap = plt.get_cmap("viridis")
        for ax, title, regime in (
            (axes[0], "each fixed q at its own tuned lr", "tuned"),
            (axes[1], "one lr (tuned for q=1) and 3× too large", "one"),
        ):
            for i, q in enumerate(QS):
                lr = lrs[q] if regime == "tuned" else lr1
                g = group(t.name, f"fixed:{q}", lr)
                if g:
                    _plot(ax, g, f"fixed q={q}", color=cmap(i / (len(QS) - 1)))
            _plot(ax, group(t.name, "qscheduler", lr1), "QScheduler", color="crimson", lw=2.2)
            if regime == "one":
                _plot(ax, group(t.name, "fixed:1", lr3), "fixed q=1, 3× lr", color="gray", ls="--")
                _plot(
                    ax,
                    group(t.name, "qscheduler", lr3),
                    "QScheduler, 3× lr",
                    color="crimson",
                    ls="--",
                )
            for fp, target in t.targets:
                ax.plot([fp], [100 * target], marker="*", color="black", ms=10, ls="none")
            ax.set_title(f"{t.name}: {title}", fontsize=10)
            ax.set_xlabel("forward passes")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("test accuracy % (mean of 3 seeds)")
        axes[0].legend(fontsize=7, loc="lower right")
        axes[1].legend(fontsize=7, loc="lower right")
        axes[0].set_ylim(bottom=max(0, axes[0].get_ylim()[0]))
        fig.tight_layout()
        fig.savefig(PLOTS / f"{t.name}.png", dpi=110)
        plt.close(fig)
        lines += [f"![{t.name}](results/{t.name}.png)", ""]
    # PeZO
    pezo_lines: list[str] = []
    for tname in PEZO_TASKS:
        if tname not in best_lr or tname not in {t.name for t in tasks}:
            continue
        lr = best_lr[tname][PEZO_Q]
        pezo_lines += [
            f"### PeZO perturbations: {tname}, fixed q={PEZO_Q}, lr {lr:g} (tuned for Rademacher)",
            "",
            "| perturbation | pool P | scaling | final test accuracy % | fresh PRNG words / step | "
            "fresh random numbers / step | vs fresh (numbers) | command (seed 0) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        means = {}
        pezo_runs: dict[tuple, list[Outcome]] = {}
        fresh_numbers = None
        for dist, pool, scaling in PEZO_VARIANTS:
            g = group(tname, f"fixed:{PEZO_Q}", lr, perturbation=dist, pool=pool, scaling=scaling)
            if not g:
                continue
            pezo_runs[(dist, pool, scaling)] = g
            means[(dist, pool, scaling)] = _mean_std([o.final_accuracy for o in g])[0]
            if dist == "uniform" and pool == 0 and scaling == "auto":
                fresh_numbers = g[0].fresh_numbers_per_step
            ratio = (
                f"{100 * g[0].fresh_numbers_per_step / fresh_numbers:.1f}%"
                if fresh_numbers and pool
                else "100%"
                if not pool
                else ""
            )
            eff = (
                "adaptive"
                if scaling == "auto" and dist == "uniform"
                else "fixed"
                if scaling == "auto"
                else scaling
            )
            pezo_lines.append(
                f"| {dist} | {pool or 'fresh'} | {eff} | {_fmt([o.final_accuracy for o in g])} | "
                f"{g[0].fresh_words_per_step:,.0f} | {g[0].fresh_numbers_per_step:,.0f} | "
                f"{ratio} | "
                f"`{g[0].spec.command()}` |"
            )
        pezo_lines.append("")
        rad = pezo_runs.get(("rademacher", 0, "auto"))
        uni = pezo_runs.get(("uniform", 0, "auto"))
        items = n_test_items(TASKS[tname].dataset)
        if rad and uni:
            gap, se, k = paired_gap(uni, rad, _final)
            verdicts.append(
                f"- {tname}: PeZO uniform (adaptive) {_fmt(_accs(uni))}% vs Rademacher "
                f"{_fmt(_accs(rad))}%: gap {gap_text(gap, se)} (target ≥ −1; "
                f"{noise_note(k, items, means[('rademacher', 0, 'auto')])}) — "
                f"**{verdict(gap, 1.0)}**"
            )
        for pool in (256, 4096):
            pm = pezo_runs.get(("uniform", pool, "auto"))
            if pm and uni:
                gap, se, k = paired_gap(pm, uni, _final)
                verdicts.append(
                    f"- {tname}: uniform pool P={pool} {_fmt(_accs(pm))}% vs fresh uniform "
                    f"{_fmt(_accs(uni))}%: gap {gap_text(gap, se)} (target ≥ −1; "
                    f"{noise_note(k, items, means[('uniform', 0, 'auto')])}) — "
                    f"**{verdict(gap, 1.0)}**"
                )
    n_runs, run_s = _run_time(outs)
    text = [
        "# ZO study results (issue 4)",
        "",
        "Generated by `python benchmarks/zo_study.py` "
        + (
            f"(its {n_runs} runs, tuning included, took {run_s / 60:.0f} min of run time in "
            f"all: about {run_s / 120:.0f} min with 2 worker processes on a 2-core machine "
            "shared with other jobs). "
            if run_s
            else ". "
        )
        + "Emulator (bit-exact twin, in-process), batch 32, eps 2 LSB, 3 seeds (0, 1, 2) per "
        "configuration, equal forward-pass budgets; learning rates tuned on seed 100 by the final "
        "training loss. Tuned rates (lr per q): "
        + "; ".join(
            f"{t}: " + ", ".join(f"q{q} {v:g}" for q, v in sorted(d.items()))
            for t, d in best_lr.items()
            if t in {x.name for x in tasks}
        )
        + ".",
        "",
        WIDENED_NOTES.read_text() if WIDENED_NOTES.exists() else "",
        "## Verdicts",
        "",
        *verdicts,
        "",
        SUMMARY.read_text() if SUMMARY.exists() else "",
        "## Fixed q against QScheduler",
        "",
        *lines,
        "## PeZO: uniform perturbations and the reuse pool",
        "",
        *pezo_lines,
        ISSUE29_NOTES.read_text() if ISSUE29_NOTES.exists() else "",
        HYBRID_NOTES.read_text() if HYBRID_NOTES.exists() else "",
        QSCHED_NOTES.read_text() if QSCHED_NOTES.exists() else "",
    ]
    return "\n".join(text) + "\n"


def _run_time(outs: dict) -> tuple[int, float]:
    """(runs, seconds) of the tables' runs and the tuning runs (seed TUNE_SEED) in OUT."""
    tuning = [
        d.get("wall_s", 0.0)
        for d in (json.loads(p.read_text()) for p in OUT.glob("*-s100-*.json"))
        if d.get("spec", {}).get("seed") == TUNE_SEED
    ]
    walls = [o.wall_s for o in outs.values()] + tuning
    return len(walls), float(sum(walls))


QSCHED_NOTES = PLOTS / "qscheduler-rules.md"  # hand-written: the rules tried before the study
SUMMARY = PLOTS / "summary.md"  # hand-written reading of the numbers (update after a re-run)
# issue 29's section: the table of ``--stage issue29`` (traces/zo_study/issue29.md) and its reading
ISSUE29_NOTES = PLOTS / "issue29.md"
# the hybrid's section (hand-written from its traces: the commands are in it)
HYBRID_NOTES = PLOTS / "hybrid.md"
# issue 29's widened study (benchmarks/zo_study_widened.py): its reading, atop both result pages
WIDENED_NOTES = PLOTS / "widened-summary.md"


def _plot(ax, group: list[Outcome], label: str, **kw) -> None:
    if not group:
        return
    fps = [f for f, _ in group[0].curve]
    acc = np.mean([[a for _, a in o.curve][: len(fps)] for o in group], axis=0)
    ax.plot(fps, 100 * acc, label=label, **kw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--stage",
        choices=("all", "tune", "main", "pezo", "extras", "budget", "report", "issue29"),
        default="all",
    )
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--farm",
        metavar="BOARD",
        default="",
        help="run on a board farm: labgrid:tag=VALUE or map:FILE (one board per worker; "
        "give --workers as many as there are boards)",
    )
    args = ap.parse_args(argv)
    if args.farm:
        global FARM
        FARM = os.environ["ZO_STUDY_FARM"] = args.farm
    tasks = [TASKS[n] for n in args.tasks.split(",")]
    started = time.perf_counter()
    if args.stage == "issue29":  # its own table (traces/zo_study/issue29.md), not results.md
        print(run_issue29(args.workers), flush=True)
        return 0
    tuned_file = OUT / "tuned_lr.json"
    if args.stage in ("all", "tune"):
        best_lr = tune(tasks, args.workers)
    else:
        best_lr = {
            t: {int(q): v for q, v in d.items()}
            for t, d in json.loads(tuned_file.read_text()).items()
        }
    if args.stage in ("all", "main"):
        run_all(main_specs(tasks, best_lr), args.workers)
    if args.stage in ("all", "pezo"):
        run_all(pezo_specs(best_lr, tasks), args.workers)
    if args.stage in ("all", "extras"):
        run_all(extra_specs(tasks, best_lr), args.workers)
    if args.stage in ("all", "budget"):
        tune_budget_variants(tasks, args.workers)
        run_all(budget_specs(tasks), args.workers)
    if args.stage in ("all", "report"):
        (DOCS / "results.md").write_text(report(tasks, best_lr))
        print(f"[zo_study] wrote {DOCS / 'results.md'}", flush=True)
    print(f"[zo_study] wall time {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
