"""The hybrid (issue 29) on the Cortex-M55 under QEMU: a run whose last layer trains by
HEAD_GRAD and the rest by ZO ends with the twin's loss pairs, weights CRC and head CRC, and
HEAD_GRAD's durations are executed instructions (-icount), their own source."""

from __future__ import annotations

import numpy as np

from tests.qemu.test_qemu_training import _run


def test_a_hybrid_run_is_the_same_on_qemu_and_the_twin(tmp_path, an547_elf):
    settings = {"hybrid": "last", "head_lr": 2800.0, "budget": 360}
    twin_result, twin = _run("emulate", "mlp", settings, tmp_path, an547_elf)
    qemu_result, qemu = _run("qemu", "mlp", settings, tmp_path, an547_elf)
    for field in ("seed", "loss_plus", "loss_minus", "coeff"):
        np.testing.assert_array_equal(qemu.samples[field], twin.samples[field], err_msg=field)
    np.testing.assert_array_equal(qemu.evals["accuracy"], twin.evals["accuracy"])
    assert qemu_result.weights_crc == twin_result.weights_crc
    assert qemu.attrs["head_crc"] == twin.attrs["head_crc"]
    heads = qemu.timing[
        (qemu.timing["command"] == "HEAD_GRAD") & (qemu.timing["source"] == "instr")
    ]
    assert len(heads) == len(qemu.steps) == 40  # 360 passes, 9 a step
    assert heads["duration_s"].min() > 10_000  # a batch of 32 forward passes and the update


def test_head_grad_costs_what_the_model_says_beyond_its_forward_passes(an547_elf):
    """HEAD_GRAD's executed instructions (-icount) less B times an EVAL's per item: the
    gradient and the update, which the twin's modeled time adds by cost.M55_HEAD_* (fitted on
    the MLP's and the CNN's heads); on a 64-256-10 MLP's 10 x 256 head, outside the fit, the
    model is within 5 % at B = 8 and B = 32, and the twin's modeled HEAD_GRAD is its forward
    passes plus exactly that."""
    from hilbench.backend.emulate import EmulatorBackend
    from hilbench.backend.qemu import QemuBackend
    from hilbench.device import DeviceTwin
    from hilbench.npu import cost, zoo
    from hilbench.npu.blob import to_blob
    from hilbench.protocol import messages as m
    from hilbench.zo import zocf
    from hilbench.zo.loss import LossTables

    g = zoo.build_mlp((64, 256, 10), seed=1)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    zo = zocf.build(g, layers="fc0_w,fc0_b")
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": zo.to_bytes()})
    r = np.random.default_rng(0)
    x, y = r.integers(-128, 128, (64, 64)).astype(np.int8), r.integers(0, 10, 64).astype(np.uint8)

    def durations(client) -> list[int]:
        client.load_model(blob)
        client.load_data(0, x, y, 10)
        out = [client._exchange(m.EvalRequest(slot=0, start=0, count=32)).duration_ns]
        for b in (8, 32):
            rates = np.full(10, 3000, np.int32)
            h = client.head_grad(slot=0, batch_size=b, batch_seed=3, round_seed=4, rates=rates,
                                 bias_gain=1)  # fmt: skip
            out.append(h.duration_ns)
        return out

    with QemuBackend(firmware=an547_elf) as qemu:
        ev, h8, h32 = durations(qemu)
    clock = cost.M55_CLOCK_HZ / cost.M55_CPI_SCALAR  # instructions per modeled second
    for b, got in ((8, h8), (32, h32)):
        extra = got - b * ev / 32
        model = cost.m55_head_grad_seconds(10, 256, b) * clock
        assert abs(extra - model) < 0.05 * model, (b, extra, model)
    twin = DeviceTwin()
    with EmulatorBackend(twin) as client:
        ev_t, h8_t, h32_t = durations(client)
    for b, got in ((8, h8_t), (32, h32_t)):
        forward = b * ev_t / 32
        assert abs(got - forward - cost.m55_head_grad_seconds(10, 256, b) * 1e9) < b + 2
