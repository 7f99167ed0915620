"""tools/mutation.py's bookkeeping: which survivors are equivalent or message-only, the score."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools" / "mutation.py")
mt = importlib.util.module_from_spec(_spec)
sys.modules["mutation_tool"] = mt  # dataclasses look their module up
_spec.loader.exec_module(mt)


def diff(old: str, new: str) -> str:
    return f"--- a\n+++ b\n@@ -1 +1 @@\n-{old}\n+{new}"


def test_function_names_drop_the_mutant_number() -> None:
    assert mt.function_of("hilbench.x.y.xǁClassǁmethod__mutmut_3") == "xǁClassǁmethod"
    assert mt.function_of("hilbench.zo.rng.x_stream_words__mutmut_12") == "x_stream_words"


@pytest.mark.parametrize(
    ("old", "new", "only"),
    [
        (
            'raise E(f"after {n} updates", "report this")',
            'raise E(f"after {n} updates", None)',
            False,
        ),
        ('fix = "report this with the trace"', 'fix = "XXreport this with the traceXX"', True),
        ('fix = "report this with the trace"', 'fix = "REPORT THIS WITH THE TRACE"', True),
        (
            'self._problem("crc", n, "CRC-32 mismatch")',
            'self._problem("XXcrcXX", n, "CRC-32 mismatch")',
            False,
        ),
        ('x = "a b" if ok else "c"', 'x = "a b" if not ok else "c"', False),
        # the last line of a dict literal: a bracket closed that the line did not open
        (
            '}.get(code, "report it with the trace")',
            '}.get(code, "XXreport it with the traceXX")',
            True,
        ),
        ('}.get(code, "report it with the trace")', "}.get(code, None)", False),
        ('}.get(code, "report it")', '}.get(code, "report it")[1:]', False),
    ],
)
def test_message_only_means_a_sentence_changed_and_nothing_else(old, new, only) -> None:
    assert mt.message_only(diff(old, new)) is only


def test_reviewed_equivalents_match_by_function_and_line_or_pattern() -> None:
    reviewed = [
        {"function": "x_f", "line": "a = b + 2", "why": "."},
        {"function": "*", "pattern": r"reshape\(.*-2[,)]", "why": "."},
    ]
    assert mt.is_equivalent("m.x_f__mutmut_1", diff("a = b + 1", "a = b + 2"), reviewed)
    assert not mt.is_equivalent("m.x_g__mutmut_1", diff("a = b + 1", "a = b + 2"), reviewed)
    assert mt.is_equivalent(
        "m.x_g__mutmut_2", diff("y.reshape(-1, 4)", "y.reshape(-2, 4)"), reviewed
    )
    assert not mt.is_equivalent(
        "m.x_g__mutmut_3", diff("y.reshape(-1)", "y.reshape(None)"), reviewed
    )


def test_the_reviewed_file_loads_and_every_entry_has_a_reason() -> None:
    data = mt.load_equivalents()
    assert data and all(e["why"].strip() for entries in data.values() for e in entries)


def test_scores_leave_out_equivalent_and_message_only_mutants() -> None:
    s = mt.Score("frames", total=100, killed=81, equivalent=5, messages=5)
    assert s.counted == 90 and s.score == pytest.approx(0.9)
    assert "| frames | 100 | 81 | 5 | 5 | 0 | 90.0% | 90% |" in mt.table([s])
    low = mt.Score("limits", total=10, killed=5)
    assert "50.0% (below)" in mt.table([low])


def test_every_module_has_tests_that_exist() -> None:
    for name, target in mt.TARGETS.items():
        assert (ROOT / target.source).is_file(), name
        assert all((ROOT / t).is_dir() for t in target.tests), name
    assert mt.group_of("perturb") == "rng" and mt.group_of("client") == "client"
