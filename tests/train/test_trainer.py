"""The trainer under each setting, on the in-process twin and on the pty emulator."""

import numpy as np
import pytest

from hilbench import session
from hilbench.config import RunConfig
from hilbench.link.pty_pair import PtyPair
from hilbench.trace import Trace
from hilbench.train.schedule import Scheduler


def run(tmp_path, name="t", direct=True, schedule=None, **kw):
    cfg = RunConfig(trace=tmp_path / f"{name}.h5", live=False, eval_every=500, **kw)
    if direct:
        result = session.run(cfg, target=session.direct_target(), schedule=schedule)
    else:
        result = session.run(cfg, schedule=schedule)
    return result, Trace.open(result.trace_path, run=result.run_id)


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {
            "perturbation": "uniform",
            "pool": 128,
            "estimator": "one-sided",
            "layers": "all",
            "rounding": "stochastic",
            "master": "int16",
            "scheduler": "qscheduler:min_window=40",
            "lr_schedule": "cosine",
        },
    ],
)
def test_the_direct_target_is_bit_identical_to_the_pty_emulator(tmp_path, settings):
    a, ta = run(tmp_path, "pty", direct=False, budget=600, **settings)
    b, tb = run(tmp_path, "direct", direct=True, budget=600, **settings)
    assert a.weights_crc == b.weights_crc and a.steps == b.steps
    np.testing.assert_array_equal(ta.steps["loss"], tb.steps["loss"])
    np.testing.assert_array_equal(ta.samples["coeff"], tb.samples["coeff"])
    np.testing.assert_array_equal(ta.evals["accuracy"], tb.evals["accuracy"])


def test_qscheduler_spends_the_budget_exactly(tmp_path):
    result, tr = run(tmp_path, budget=1_001, scheduler="qscheduler:q_min=4,min_window=10")
    assert result.forward_passes == 1_000  # two-point steps cost an even number
    assert tr.steps["forward_passes"][-1] == 1_000


def test_one_sided_steps_cost_q_plus_one_and_record_the_unperturbed_loss(tmp_path):
    result, tr = run(tmp_path, budget=500, scheduler="fixed:4", estimator="one-sided")
    assert result.forward_passes == 500 and result.steps == 100
    s = tr.samples
    start = int(tr.steps["sample_start"][3])
    lm = s["loss_minus"][start : start + 4]
    assert len(set(lm.tolist())) == 1
    assert tr.steps["loss"][3] == pytest.approx(lm[0] / 65536)


def test_lr_and_eps_schedules_land_in_the_trace_and_fresh_words_follow_the_method(tmp_path):
    _, tr = run(
        tmp_path,
        budget=800,
        scheduler="fixed:2",
        lr=800.0,
        eps=4,
        lr_schedule="linear:0.5",
        eps_schedule="step:0.5@0.5",
        perturbation="gaussian",
    )
    st = tr.steps
    assert st["lr"][0] == pytest.approx(800.0) and st["lr"][-1] == pytest.approx(400.0, rel=0.01)
    assert st["eps"][0] == 4 and st["eps"][-1] == 2
    assert set(st["fresh_words"]) == {2 * 2 * (2048 + 320) // 2}


# The MLP's default trained weights: 32 x 64 (2,048 elements) and 10 x 32 (320), 2,368
# elements in 42 rows; a Rademacher word carries 32 samples, a uniform word 4, and a pooled
# perturbation draws one offset (a half-word) per row.
ELEMENTS, ROWS = 2048 + 320, 32 + 10


@pytest.mark.parametrize(
    ("settings", "words_per_seed", "numbers_per_seed"),
    [
        ({}, ELEMENTS // 32, ELEMENTS),
        ({"perturbation": "uniform"}, ELEMENTS // 4, ELEMENTS),
        ({"perturbation": "uniform", "pool": 128}, ROWS // 2, ROWS),
        ({"perturbation": "uniform", "pool": 128, "estimator": "one-sided"}, ROWS // 2, ROWS),
    ],
)
def test_fresh_numbers_are_recorded_per_step_like_fresh_words(
    tmp_path, settings, words_per_seed, numbers_per_seed
):
    class Growing(Scheduler):  # q = 1, 2, 3: the counts follow each step's q
        name = "growing"

        def next_q(self, step):
            return 1 + step // 4

    _, tr = run(tmp_path, budget=60, schedule=Growing(), **settings)
    st = tr.steps
    q = st["q"].astype(np.int64)
    assert set(q.tolist()) >= {1, 2, 3}
    # PROBE and APPLY each regenerate the q directions, whatever the estimator
    assert st["fresh_words"].tolist() == (2 * q * words_per_seed).tolist()
    assert st["fresh_numbers"].tolist() == (2 * q * numbers_per_seed).tolist()
    assert tr.units["steps"]["fresh_numbers"] == "random numbers (this step)"


def test_stochastic_rounding_adds_one_fresh_number_per_trained_element(tmp_path):
    _, tr = run(tmp_path, budget=80, scheduler="fixed:4", rounding="stochastic")
    assert set(tr.steps["fresh_words"]) == {2 * 4 * ELEMENTS // 32 + ELEMENTS // 2}
    assert set(tr.steps["fresh_numbers"]) == {2 * 4 * ELEMENTS + ELEMENTS}


def test_a_custom_scheduler_object_drives_the_run(tmp_path):
    class Growing(Scheduler):
        name = "growing"

        def __init__(self):
            self.seen = []

        def next_q(self, step):
            return 1 + step // 10

        def observe(self, step, loss, forward_passes):
            self.seen.append(forward_passes)

    sched = Growing()
    result, tr = run(tmp_path, budget=300, schedule=sched)
    assert list(tr.steps["q"][:12]) == [1] * 10 + [2, 2]
    assert sched.seen[-1] == result.forward_passes


def test_training_learns_with_every_distribution_and_master(tmp_path):
    for i, kw in enumerate(
        [
            {"perturbation": "gaussian"},
            {"perturbation": "uniform", "pool": 256},
            {"master": "int8", "rounding": "stochastic"},
            {"init": "pretrained", "dataset": "digits-rot20", "layers": "last:1", "lr": 200.0},
        ]
    ):
        _, tr = run(tmp_path, f"r{i}", budget=3_000, scheduler="fixed:4", **kw)
        acc = tr.evals["accuracy"]
        assert acc[-1] > acc[0] + 0.05, (kw, acc[0], acc[-1])


def test_pty_backend_still_works_without_a_target(tmp_path, monkeypatch):
    """Without a target the session opens the emulator behind a real pty (pyserial on the
    slave side) and ends with the weights of the same run on the in-process link."""
    opened: list[PtyPair] = []

    class RecordedPty(PtyPair):
        def __init__(self) -> None:
            super().__init__()
            opened.append(self)

    monkeypatch.setattr("hilbench.backend.emulate.PtyPair", RecordedPty)
    r, tr = run(tmp_path, "be", direct=False, budget=40)
    assert len(opened) == 1 and opened[0].path.startswith("/dev/")
    same, _ = run(tmp_path, "in", direct=True, budget=40)
    assert len(opened) == 1  # the in-process run opens no pty
    assert r.forward_passes == same.forward_passes == 40 and r.steps == same.steps
    assert r.weights_crc == same.weights_crc != tr.attrs["initial_weights_crc"]
    assert tr.attrs["backend"] == "emulate" and tr.attrs["device_id"] == "hilbench-twin"
