"""Circles between device_fw/core's units, found from the objects, not from reading.

A unit is one core/**/*.c file with its header. Unit A depends on unit B when A's object
references a symbol B's object defines (nm), or when A's source includes B's header. Prints
every strongly connected component of more than one unit and exits 1 if there is one.

    python device_fw/tests/unit_cycles.py [--cc cc]
"""

from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORE = ROOT / "core"


def symbols(obj: pathlib.Path) -> tuple[set[str], set[str]]:
    """(defined, undefined) global symbols of an object file."""
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRC":
            defined.add(parts[2])
    return defined, undefined


def includes(src: pathlib.Path) -> set[str]:
    return set(re.findall(r'^\s*#\s*include\s+"([^"]+)"', src.read_text(), re.M))


def sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", default="cc")
    args = ap.parse_args()
    sources = sorted(CORE.rglob("*.c"))
    units = {str(s.relative_to(CORE).with_suffix("")): s for s in sources}
    defined_by: dict[str, str] = {}
    undefined: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in units.items():
            obj = pathlib.Path(tmp) / (name.replace("/", "_") + ".o")
            subprocess.run(
                [
                    args.cc,
                    "-std=c11",
                    "-O2",
                    "-I",
                    str(CORE),
                    "-I",
                    str(CORE / "gen"),
                    "-I",
                    str(CORE.parent / "port"),
                    "-c",
                    str(src),
                    "-o",
                    str(obj),
                ],
                check=True,
            )
            d, u = symbols(obj)
            for s in d:
                defined_by[s] = name
            undefined[name] = u
    headers: dict[str, str] = {}  # header path as included -> unit that implements it
    for name, src in units.items():
        for inc in includes(src):
            if (src.parent / inc).exists() or (CORE / inc).exists():
                stem = pathlib.Path(inc).stem.removeprefix("hb_")
                if pathlib.Path(name).name in (stem, pathlib.Path(inc).stem):
                    headers[inc] = name
    graph: dict[str, set[str]] = {n: set() for n in units}
    why: dict[tuple[str, str], str] = {}
    for name, u in undefined.items():
        for s in u:
            b = defined_by.get(s)
            if b and b != name:
                graph[name].add(b)
                why.setdefault((name, b), f"calls {s}")
    for name, src in units.items():
        for inc in includes(src):
            b = headers.get(inc)
            if b and b != name:
                graph[name].add(b)
                why.setdefault((name, b), f"includes {inc}")
    bad = [c for c in sccs(graph) if len(c) > 1]
    for c in bad:
        print("circle:", " <-> ".join(c))
        for a in c:
            for b in sorted(graph[a] & set(c)):
                print(f"  {a} -> {b}: {why[(a, b)]}")
    print(f"{len(units)} units, {sum(len(v) for v in graph.values())} edges, {len(bad)} circle(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
