"""``hilbench cache info [--json]`` and ``hilbench cache clear``: the on-disk cache of derived
arrays (resized data sets, pre-trained weights; hilbench.data.cache) under $HILBENCH_CACHE,
default ~/.cache/hilbench. Clearing it only costs the time to make the entries again."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from pathlib import Path

from hilbench.errors import HilbenchError

#: The files the cache writes (entries, and the temporary file of an interrupted write).
CACHE_SUFFIXES = (".npz", ".tmp")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the cache of resized data sets and pre-trained weights")
    what = p.add_subparsers(dest="cache_command", metavar="{info,clear}", required=True)
    info = what.add_parser("info", help="where the cache is, what it holds, whether writable")
    info.add_argument("--json", action="store_true", help="one JSON object")
    info.set_defaults(handler=handle_info)
    clear = what.add_parser("clear", help="delete the cache's entries (they are made again)")
    clear.set_defaults(handler=handle_clear)


def _entries(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in CACHE_SUFFIXES)


def info(root: Path) -> dict:
    entries = _entries(root)
    kinds: dict[str, dict[str, int]] = {}
    for p in entries:
        kind = p.parent.name if p.parent != root else "."
        k = kinds.setdefault(kind, {"files": 0, "bytes": 0})
        k["files"] += 1
        k["bytes"] += p.stat().st_size
    here = root
    while not here.exists() and here != here.parent:
        here = here.parent
    return {
        "path": str(root),
        "exists": root.is_dir(),
        "writable": os.access(here, os.W_OK | os.X_OK),
        "files": len(entries),
        "bytes": sum(k["bytes"] for k in kinds.values()),
        "kinds": kinds,
    }


def handle_info(args: argparse.Namespace) -> int:
    from hilbench.data import cache

    data = info(cache.root())
    if args.json:
        print(json.dumps(data))
        return 0
    where = "" if data["exists"] else " (not created yet)"
    print(f"cache: {data['path']}{where}")
    print(f"  {data['files']} entries, {data['bytes'] / 2**20:,.1f} MiB")
    for kind, k in sorted(data["kinds"].items()):
        print(f"  {kind}: {k['files']} entries, {k['bytes'] / 2**20:,.1f} MiB")
    print(f"  {'writable' if data['writable'] else 'NOT writable: set HILBENCH_CACHE'}")
    return 0


def handle_clear(args: argparse.Namespace) -> int:
    from hilbench.data import cache

    root = cache.root()
    entries = _entries(root)
    freed = 0
    for p in entries:
        try:
            size = p.stat().st_size
            p.unlink()
        except OSError as exc:
            raise HilbenchError(
                f"cannot delete {p} ({exc.strerror or exc})", "check the cache's permissions"
            ) from None
        freed += size
    for folder in sorted((d for d in root.rglob("*") if d.is_dir()), reverse=True):
        with contextlib.suppress(OSError):  # only the folders left empty go
            folder.rmdir()
    print(f"cleared {root}: {len(entries)} entries, {freed / 2**20:,.1f} MiB freed", flush=True)
    return 0
