"""Mutation scores of the C firmware's core, per file: ``python tools/mutation_c.py [FILE ...]``.

universalmutator (pinned in the dev extra; regular-expression rules for C) writes the mutants
of one core file; each is compiled with that file's C unit test (``device_fw/tests``, the same
test ``make -C device_fw test`` runs, with the Makefile's warnings as errors and UBSan, at -O1
and without ASan for speed) and the test is run on the golden vectors. The rules write many
mutants a file (frame.c: ~1,200), so a seeded random sample of them is tested
(``--sample``, default 150) and the score is given with its 95% interval (Wilson).

A mutant is *killed* when the test fails, crashes or runs past its time limit; one that does
not compile is no mutant and is not counted. The firmware is taken from the last commit
(``git archive HEAD``) into ``build/mutation/c``, so edits in progress are not measured.
Reviewed equivalents: the ``[c-NAME]`` tables of ``tools/equivalent_mutants.toml``.

The C firmware's other measures are the differential test against the twin
(tests/sil/test_differential.py) and the libFuzzer harnesses (make -C device_fw fuzz-ci):
docs/testing.md.
"""

from __future__ import annotations

import argparse
import difflib
import io
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation import cpu_name, load_equivalents

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "mutation" / "c"
# The Makefile's warnings (a mutant the firmware's build refuses is no mutant) and UBSan (an
# out-of-range shift is a failure, as in `make test`); -O1 and no ASan, for speed.
CFLAGS = [
    "-std=c11",
    "-O1",
    *[
        "-Wall",
        "-Wextra",
        "-Werror",
        "-Wshadow",
        "-Wstrict-prototypes",
        "-Wmissing-prototypes",
        "-Wvla",
    ],
    *["-Wpointer-arith", "-Wcast-align", "-Wundef"],
    "-fsanitize=undefined",
    "-fno-sanitize-recover=all",
    "-Icore",
    "-Icore/gen",
    "-Itests",
]
ZO_SOURCES = (
    "core/zo/loss.c",
    "core/zo/perturb.c",
    "core/zo/philox.c",
    "core/zo/update.c",
    "core/zo/zocf.c",
    "core/crc32.c",
    "core/hb_status.c",
    "tests/hbgv.c",
)


@dataclass(frozen=True)
class CTarget:
    """A core file, the unit test that is its own, what they link with, the required score."""

    source: str
    test: str
    link: tuple[str, ...]
    goal: float


CTARGETS = {
    "frame": CTarget("core/frame.c", "tests/test_frame.c", ("core/crc32.c", "tests/hbgv.c"), 0.90),
    "philox": CTarget("core/zo/philox.c", "tests/test_zo.c", ZO_SOURCES, 0.90),
    "perturb": CTarget("core/zo/perturb.c", "tests/test_zo.c", ZO_SOURCES, 0.90),
    "update": CTarget("core/zo/update.c", "tests/test_zo.c", ZO_SOURCES, 0.90),
}


@dataclass
class CScore:
    name: str
    total: int = 0
    invalid: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[tuple[str, str]] = field(default_factory=list)

    @property
    def counted(self) -> int:
        return self.total - self.invalid - self.equivalent

    @property
    def score(self) -> float:
        return self.killed / self.counted if self.counted else 1.0

    def interval(self, z: float = 1.96) -> tuple[float, float]:
        """Wilson's 95% interval of the score (the sample's, for the file's mutants)."""
        n = self.counted
        if not n:
            return 1.0, 1.0
        p = self.score
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - half), min(1.0, centre + half)


def checkout() -> Path:
    """device_fw and fixtures as last committed, in a fresh scratch directory."""
    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "HEAD", "device_fw", "fixtures"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(WORK, filter="data")
    return WORK / "device_fw"


def reviewed_equivalent(added: list[str], reviewed: list[dict[str, str]]) -> bool:
    """True when a reviewed entry names the mutated line, or a pattern every added line
    matches."""
    for e in reviewed:
        if "line" in e and e["line"].strip() in added:
            return True
        if "pattern" in e and added and all(re.search(e["pattern"], x) for x in added):
            return True
    return False


def build_and_test(fw: Path, target: CTarget, exe: Path) -> str:
    """'invalid', 'killed' or 'survived' for the firmware as it is now in ``fw``."""
    sources = [target.test, target.source, *[s for s in target.link if s != target.source]]
    built = subprocess.run(
        ["nice", "-n", "19", "gcc", *CFLAGS, "-o", str(exe), *sources],
        cwd=fw,
        capture_output=True,
    )
    if built.returncode != 0:
        return "invalid"
    try:
        ran = subprocess.run(
            ["nice", "-n", "19", str(exe), str(fw.parent / "fixtures" / "golden")],
            cwd=fw,
            capture_output=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return "killed"
    return "survived" if ran.returncode == 0 else "killed"


def run(
    name: str, fw: Path, reviewed: list[dict[str, str]], sample: int, seed: int
) -> tuple[CScore, int]:
    """A sample of one target's mutants, compiled and tested one after another; the score
    and how many mutants the rules wrote."""
    target = CTARGETS[name]
    src = fw / target.source
    original = src.read_text()
    exe = WORK / f"test_{name}"
    if build_and_test(fw, target, exe) != "survived":
        raise SystemExit(f"{target.test} does not pass on the unmutated {target.source}")
    out = WORK / "mutants" / name
    out.mkdir(parents=True)
    subprocess.run(
        ["mutate", str(src), "c", "--noCheck", "--mutantDir", str(out)],
        capture_output=True,
        check=True,
    )
    score = CScore(name)
    every = sorted(out.glob("*.mutant.*.c"), key=lambda p: int(p.stem.split(".")[-1]))
    chosen = every if sample <= 0 else random.Random(seed).sample(every, min(sample, len(every)))
    try:
        for mutant in chosen:
            text = mutant.read_text()
            score.total += 1
            diff = "\n".join(
                difflib.unified_diff(original.splitlines(), text.splitlines(), lineterm="", n=0)
            )
            added = [x[1:].strip() for x in diff.splitlines()[2:] if x.startswith("+")]
            src.write_text(text)
            verdict = build_and_test(fw, target, exe)
            if verdict == "invalid":
                score.invalid += 1
            elif verdict == "killed":
                score.killed += 1
            elif reviewed_equivalent(added, reviewed):  # only a survivor can be equivalent
                score.equivalent += 1
            else:
                score.survivors.append((mutant.name, diff))
    finally:
        src.write_text(original)
    return score, len(every)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/mutation_c.py", description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help=f"any of {', '.join(CTARGETS)} (default: all)")
    parser.add_argument("--show", action="store_true", help="print each survivor's diff")
    parser.add_argument("--sample", type=int, default=150, help="mutants per file (0: all)")
    parser.add_argument("--seed", type=int, default=19, help="seed of the sample")
    args = parser.parse_args(argv)
    unknown = [f for f in args.files if f not in CTARGETS]
    if unknown:
        parser.error(f"unknown file {unknown[0]!r}; choose from {', '.join(CTARGETS)}")
    for tool, install in (("mutate", "pip install -e '.[dev]'"), ("gcc", "apt-get install gcc")):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed: {install}")
    reviewed = load_equivalents()
    fw = checkout()
    scores = []
    for name in args.files or list(CTARGETS):
        print(f"== mutating {CTARGETS[name].source} against {CTARGETS[name].test}", flush=True)
        score, written = run(name, fw, reviewed.get(f"c-{name}", []), args.sample, args.seed)
        scores.append((score, written))
        if args.show:
            for mutant, diff in score.survivors:
                print(f"-- survived: {mutant}\n{diff}\n")
    print(
        f"CPU: {cpu_name()}; one mutant at a time, gcc -O1 -Werror, UBSan; "
        f"sample {args.sample or 'all'}, seed {args.seed}"
    )
    print(
        "| file | written | tested | not compiled | killed | equivalent | survived | score "
        "(95% interval) | goal |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for s, written in scores:
        goal = CTARGETS[s.name].goal
        lo, hi = s.interval()
        mark = "" if s.score >= goal else " (below)"
        print(
            f"| {CTARGETS[s.name].source} | {written} | {s.total} | {s.invalid} | {s.killed} | "
            f"{s.equivalent} | {len(s.survivors)} | {s.score:.1%} ({lo:.0%}-{hi:.0%}){mark} | "
            f"{goal:.0%} |"
        )
    return 0 if all(s.score >= CTARGETS[s.name].goal for s, _ in scores) else 1


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
