"""``hilbench analyze``: MACs, memory as the firmware books it, fit and labelled latencies."""

from __future__ import annotations

import json

import pytest

from hilbench import analysis
from hilbench.cli.analyze import main
from hilbench.device import plan
from hilbench.npu import cost, zoo
from hilbench.npu.blob import to_blob
from hilbench.npu.tflite import export_tflite
from hilbench.zo import zocf


def _json(capsys, argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_tflite_file_is_analyzed_like_the_graph_it_holds(tmp_path, capsys):
    g = zoo.build("cnn", seed=0)
    path = tmp_path / "cnn.tflite"
    path.write_bytes(export_tflite(g))
    a = _json(capsys, [str(path)])
    assert a["macs"] == 4608 + 18432 + 2560
    assert [layer["kind"] for layer in a["layers"]] == [op.kind for op in g.ops]
    assert sum(layer["macs"] for layer in a["layers"]) == a["macs"]
    assert a["params"] == sum(t.data.size for t in g.tensors.values() if t.data is not None)
    assert a["ram"]["inference"] == zocf.pad16(len(to_blob(g))) + plan.act_bytes(g)
    assert a["ram"]["step/q16/fresh"] > a["ram"]["step/int16/fresh"] > a["ram"]["step/int8/fresh"]
    assert set(a["fits"].values()) == {"sram"}
    lat = a["latency"]
    assert lat["m55"]["model"] == "m55@600MHz" and lat["npu"]["model"] == "npu@800MHz"
    assert lat["m55"]["seconds"] == pytest.approx(cost.m55_latency(g).seconds)
    assert lat["npu"]["seconds"] == pytest.approx(cost.npu_latency(g).seconds)
    assert _json(capsys, ["--model", "cnn"])["macs"] == a["macs"]


def test_text_report_names_models_and_fit(capsys):
    assert main(["--model", "mobilenet_v2", "--width", "0.35", "--resolution", "32"]) == 0
    out = capsys.readouterr().out
    assert "m55@600MHz" in out and "npu@800MHz" in out and "fits on-chip SRAM" in out
    assert "ZO step, master q16, pool perturbation" in out


def test_fit_boundaries():
    assert analysis.fit(cost.N6_ARENA_BYTES) == "sram"
    assert analysis.fit(cost.N6_ARENA_BYTES + 1) == "psram"
    assert analysis.fit(cost.N6_ARENA_BYTES + cost.PSRAM_BYTES + 1) == "none"


def test_a_large_model_needs_the_psram_to_train(capsys):
    a = _json(capsys, ["--model", "mobilenet_v2", "--width", "1.0", "--resolution", "96"])
    assert a["fits"]["inference"] == "sram"
    assert a["fits"]["step/q16/fresh"] == "psram"  # 4 B of master per weight


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "analyze needs one model"),
        (["--model", "mlp", "--classes", "3"], "size a vision model; mlp has none"),
        (["missing.tflite"], "missing.tflite"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_model_without_weights_is_inference_only(tmp_path, capsys):
    from tests.cli.test_validate import _pools_model

    _, path = _pools_model(tmp_path)
    a = _json(capsys, [str(path)])
    assert a["params"] == 0 and a["flash"] == 0 and list(a["ram"]) == ["inference"]
    assert "inference only" in a["notes"][0]


def test_fit_line_of_a_blob_uses_its_own_zo_method():
    g = zoo.build("mlp", seed=0)
    plain = analysis.fit_line_of_blob(to_blob(g, {"ZOCF": zocf.build(g, master="int8").to_bytes()}))
    pooled = zocf.build(g, master="int8", pool_size=1024).to_bytes()
    line = analysis.fit_line_of_blob(to_blob(g, {"ZOCF": pooled}))
    assert plain.startswith("ZO step (int8 master)") and "fits on-chip SRAM" in plain
    kib = lambda s: float(s.split(" KiB")[0].split()[-1])  # noqa: E731
    assert kib(line) == pytest.approx(kib(plain) + 1.0, abs=0.1)  # the pool's 1,024 B
