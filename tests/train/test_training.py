"""The sample HIL test: train on whichever device the command line chose, assert on the trace."""

import numpy as np


def test_zo_training_learns_digits(zo_session):
    outcome = zo_session(budget=12_000, scheduler="fixed:4", seed=1)
    trace = outcome.trace

    forward_passes, loss = trace.loss_curve()
    assert forward_passes[-1] == 12_000
    first, last = np.mean(loss[:100]), np.mean(loss[-100:])
    assert last < 0.7 * first, f"loss fell only from {first:.3f} to {last:.3f} nats"

    chance = 1 / 10
    assert trace.final_accuracy > 6 * chance, f"test accuracy {trace.final_accuracy:.1%}"
    accuracy = trace.evals["accuracy"]
    assert accuracy[-1] > accuracy[0] + 0.3

    assert trace.summary()["weights_crc"] == outcome.result.weights_crc
    sources = set(trace.timing["source"])
    assert "host" in sources and sources <= {"host", "modeled", "device", "instr"}
