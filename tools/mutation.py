"""Mutation scores of the suite, per module: ``python tools/mutation.py [MODULE ...]``.

Each module is mutated by mutmut (pinned in the dev extra) and tested against its own test
folder only, in a scratch directory under ``build/mutation/<module>`` (the checkout is never
written). A mutant is *killed* when a test fails (or times out) with it. Mutants reviewed as
equivalent (``tools/equivalent_mutants.toml``, each with the reason) are left out of the score;
for the modules marked ``messages``, so are mutants that only change the text of a message (a
string literal with a space in it), counted in their own column. docs/testing.md has the scores
and how to read them.

Modules tested by the same folders are mutated in one run (one collection of test coverage).
Heavy: one worker under ``nice -n 19`` by default (``--jobs N`` for more). ``--list`` prints
the modules; ``--show`` prints the diff of every surviving mutant; ``--again`` re-tests only
the last run's survivors (after tests were added); ``--reuse`` only re-reads the last run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "mutation"
EQUIVALENTS = ROOT / "tools" / "equivalent_mutants.toml"
# Repository folders the tests read (fixtures, docs they check) but mutmut does not copy.
SHARED_DIRS = ("fixtures", "docs", "device_fw", "benchmarks", "tools")


@dataclass(frozen=True)
class Target:
    """One module to mutate, the tests that are its own, and its required score."""

    source: str
    tests: tuple[str, ...]
    goal: float
    messages: bool = False  # exclude message-only mutants (counted)


TARGETS: dict[str, Target] = {
    "frames": Target("hilbench/protocol/frames.py", ("tests/protocol",), 0.90),
    "rng": Target("hilbench/zo/rng.py", ("tests/zo",), 0.90),
    "perturb": Target("hilbench/zo/perturb.py", ("tests/zo",), 0.90),
    "update": Target("hilbench/zo/update.py", ("tests/zo",), 0.90),
    "loss": Target("hilbench/zo/loss.py", ("tests/zo",), 0.90),
    "limits": Target("hilbench/trace/limits.py", ("tests/trace",), 0.85),
    "recovery": Target("hilbench/client/recovery.py", ("tests/target",), 0.80, messages=True),
    "client": Target(
        "hilbench/client/device_client.py", ("tests/target", "tests/device"), 0.80, messages=True
    ),
}

KILLED = {1, 3, 24, -24, 36, 152, 255}  # mutmut's exit codes for "killed" and "timeout"


@dataclass
class Score:
    """The outcome of one module's run."""

    name: str
    total: int = 0
    killed: int = 0
    equivalent: int = 0
    messages: int = 0
    survivors: list[tuple[str, str]] = field(default_factory=list)  # (mutant, diff)

    @property
    def counted(self) -> int:
        return self.total - self.equivalent - self.messages

    @property
    def score(self) -> float:
        return self.killed / self.counted if self.counted else 1.0


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, list[dict[str, str]]]:
    """Reviewed equivalent mutants by module: each has ``function``, ``why`` and either
    ``line`` (the mutated line) or ``pattern`` (a regular expression a mutated line matches:
    a reviewed class, e.g. a dtype argument whose default gives the same integers)."""
    data = tomllib.loads(path.read_text("utf-8")) if path.exists() else {}
    for module, entries in data.items():
        for entry in entries:
            missing = {"function", "why"} - set(entry)
            if missing or not ({"line", "pattern"} & set(entry)):
                raise SystemExit(
                    f"{path}: an entry of [{module}] lacks {sorted(missing) or 'line or pattern'}"
                )
            if "pattern" in entry:
                re.compile(entry["pattern"])
    return data


def group_of(name: str) -> str:
    """The run a module belongs to: the first module with the same tests names it."""
    tests = TARGETS[name].tests
    return next(n for n, t in TARGETS.items() if t.tests == tests)


def prepare(group: str, names: list[str]) -> Path:
    """A fresh scratch directory whose pyproject.toml tells mutmut what to mutate."""
    work = WORK / group
    if work.exists():
        shutil.rmtree(work)
    (work / "mutants").mkdir(parents=True)
    (work / "hilbench").symlink_to(ROOT / "hilbench")
    (work / "tests").symlink_to(ROOT / "tests")
    shutil.copy2(ROOT / "conftest.py", work / "conftest.py")
    for shared in SHARED_DIRS:
        (work / "mutants" / shared).symlink_to(ROOT / shared)
    config = {
        "source_paths": ["hilbench"],
        "only_mutate": [TARGETS[n].source for n in names],
        "also_copy": ["conftest.py"],
        "pytest_add_cli_args_test_selection": list(TARGETS[group].tests),
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-q"],
        "use_git_change_detection": False,
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in config.items()]
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8")
    (work / "pyproject.toml").write_text(pyproject + "\n".join(lines) + "\n", "utf-8")
    return work


def run_mutmut(work: Path, jobs: int, mutants: list[str] | None = None) -> None:
    """``mutmut run`` in ``work`` (all mutants, or those named): log in ``work/mutmut.log``."""
    cmd = ["nice", "-n", "19", "mutmut", "run", "--max-children", str(jobs), *(mutants or [])]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    with open(work / "mutmut.log", "w") as log:
        done = subprocess.run(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        tail = (work / "mutmut.log").read_text(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"mutmut failed in {work} ({' / '.join(tail)}); see {work}/mutmut.log")


_DIFF_SCRIPT = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path, names = sys.argv[1], json.loads(sys.stdin.read())
print(json.dumps({n: get_diff_for_mutant(n, path=path) for n in names}))
"""


def diffs(work: Path, source: str, names: list[str]) -> dict[str, str]:
    """The unified diff of each named mutant against the original function."""
    if not names:
        return {}
    out = subprocess.run(
        [sys.executable, "-c", _DIFF_SCRIPT, source],
        cwd=work,
        input=json.dumps(names),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def changed_lines(diff: str) -> tuple[list[str], list[str]]:
    """The removed and added lines of a diff, stripped."""
    body = diff.splitlines()[2:]
    old = [line[1:].strip() for line in body if line.startswith("-")]
    new = [line[1:].strip() for line in body if line.startswith("+")]
    return old, new


def function_of(mutant: str) -> str:
    """``hilbench.x.y.xǁClassǁmethod__mutmut_3`` -> ``xǁClassǁmethod``."""
    return mutant.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]


def _tokens(line: str) -> list[tuple[int, str]]:
    """The tokens of one line of code; a line that closes or opens a bracket it does not
    balance (``}.get(code, "...")``) keeps the tokens read before the tokenizer gives up."""
    out: list[tuple[int, str]] = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(line).readline):
            if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
                out.append((t.type, t.string))
    except tokenize.TokenError:  # EOF inside brackets: everything on the line was read
        pass
    except (SyntaxError, IndentationError):
        return [(-1, line)]
    return out


_STRINGISH = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -2)}


def message_only(diff: str) -> bool:
    """True when the mutant changes only the text of a message (a string with a space)."""
    old, new = changed_lines(diff)
    if len(old) != len(new) or not old:
        return False
    for a, b in zip(old, new, strict=True):
        ta, tb = _tokens(a), _tokens(b)
        if len(ta) != len(tb):
            return False
        for (kind_a, sa), (kind_b, sb) in zip(ta, tb, strict=True):
            if (kind_a, sa) == (kind_b, sb):
                continue
            if kind_a != kind_b or kind_a not in _STRINGISH or " " not in sa.strip("\"'"):
                return False
    return True


def is_equivalent(mutant: str, diff: str, reviewed: list[dict[str, str]]) -> bool:
    """True when a reviewed entry names this mutant's function (or ``*``) and its mutated
    line (or a pattern every mutated line matches)."""
    _, new = changed_lines(diff)
    func = function_of(mutant)
    for e in reviewed:
        if e["function"] not in (func, "*") or not new:
            continue
        if "line" in e and e["line"].strip() in new:
            return True
        if "pattern" in e and all(re.search(e["pattern"], line) for line in new):
            return True
    return False


def verdicts_of(work: Path, source: str) -> dict[str, int | None]:
    """mutmut's exit code for each mutant of ``source`` (None: not tested)."""
    meta = work / "mutants" / (source + ".meta")
    if not meta.exists():
        raise SystemExit(f"no mutmut results in {meta}: run without --reuse/--again first")
    return json.loads(meta.read_text())["exit_code_by_key"]


def collect(name: str, target: Target, work: Path, reviewed: list[dict[str, str]]) -> Score:
    """Read mutmut's verdicts and sort the survivors into equivalent, message-only, live."""
    verdicts = verdicts_of(work, target.source)
    score = Score(name, total=len(verdicts))
    alive = [m for m, code in verdicts.items() if code not in KILLED]
    score.killed = score.total - len(alive)
    for mutant, diff in diffs(work, target.source, alive).items():
        if is_equivalent(mutant, diff, reviewed):
            score.equivalent += 1
        elif target.messages and message_only(diff):
            score.messages += 1
        else:
            score.survivors.append((mutant, diff))
    return score


def table(scores: list[Score]) -> str:
    """The score table (Markdown), one row per module."""
    rows = [
        "| module | mutants | killed | equivalent | message-only | survived | score | goal |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in scores:
        goal = TARGETS[s.name].goal
        mark = "" if s.score >= goal else " (below)"
        rows.append(
            f"| {s.name} | {s.total} | {s.killed} | {s.equivalent} | {s.messages} | "
            f"{len(s.survivors)} | {s.score:.1%}{mark} | {goal:.0%} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/mutation.py", description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", help=f"any of {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="mutmut workers (default 1)")
    parser.add_argument("--show", action="store_true", help="print each survivor's diff")
    parser.add_argument("--list", action="store_true", help="list the modules and exit")
    parser.add_argument(
        "--reuse", action="store_true", help="re-read the last run's results, do not run mutmut"
    )
    parser.add_argument("--again", action="store_true", help="re-test the last run's survivors")
    args = parser.parse_args(argv)
    if args.list:
        for name, t in TARGETS.items():
            print(f"{name:9} {t.source:32} {' '.join(t.tests):28} goal {t.goal:.0%}")
        return 0
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        parser.error(f"unknown module {unknown[0]!r}; choose from {', '.join(TARGETS)}")
    if shutil.which("mutmut") is None:
        raise SystemExit("mutmut is not installed: pip install -e '.[dev]'")
    reviewed = load_equivalents()
    chosen = args.modules or list(TARGETS)
    groups: dict[str, list[str]] = {}
    for name in chosen:
        groups.setdefault(group_of(name), []).append(name)
    for group, names in groups.items():
        if args.reuse:
            continue
        sources = " ".join(TARGETS[n].source for n in names)
        print(f"== mutating {sources} against {' '.join(TARGETS[group].tests)}", flush=True)
        if args.again:
            work = WORK / group
            alive = [
                m
                for n in names
                for m, code in verdicts_of(work, TARGETS[n].source).items()
                if code not in KILLED
            ]
            run_mutmut(work, args.jobs, alive)
        else:
            run_mutmut(prepare(group, names), args.jobs)
    scores = []
    for name in chosen:
        target = TARGETS[name]
        score = collect(name, target, WORK / group_of(name), reviewed.get(name, []))
        scores.append(score)
        if args.show:
            for mutant, diff in score.survivors:
                print(f"-- survived: {mutant}\n{diff}\n")
    print(f"CPU: {cpu_name()}; mutmut with {args.jobs} worker(s)")
    print(table(scores))
    return 0 if all(s.score >= TARGETS[s.name].goal for s in scores) else 1


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (or the platform's name)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    found = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return f"{found.group(1).strip() if found else '?'} x{os.cpu_count()}"


if __name__ == "__main__":
    sys.exit(main())
