"""``python -m hilbench.cgen [--check]``: write (or check) device_fw/core/gen/*.h."""

from __future__ import annotations

import sys

from hilbench.cgen import GEN_DIR, stale, write


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        bad = stale()
        if bad:
            print(
                f"stale generated headers in {GEN_DIR}: {', '.join(bad)}. "
                "Run `python -m hilbench.cgen` and commit the result.",
                file=sys.stderr,
            )
            return 1
        return 0
    if argv:
        print("usage: python -m hilbench.cgen [--check]", file=sys.stderr)
        return 2
    for path in write():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
