"""What ``--board labgrid:...`` and ``--board map:...`` name, parsed without labgrid.

    labgrid:PLACE                a named place of the labgrid coordinator
    labgrid:tag=VALUE[,k=v...]   any free place whose tags have these values
    map:FILE                     any free board of a board map file (one host, no coordinator)
    map:FILE:NAME                that board of the map
    map:FILE:tag=VALUE[,k=v...]  any free board of the map with these tags

The coordinator is labgrid's own ``LG_COORDINATOR`` (HOST[:PORT], default 127.0.0.1:20408); how
long to wait for a held place is ``HILBENCH_FARM_WAIT`` seconds (default 120).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from hilbench.errors import ConfigError

LABGRID_PREFIX = "labgrid:"
MAP_PREFIX = "map:"
PREFIXES = (LABGRID_PREFIX, MAP_PREFIX)
ENV_COORDINATOR = "LG_COORDINATOR"  # labgrid's own variable, read by labgrid-client too
DEFAULT_COORDINATOR = "127.0.0.1:20408"  # labgrid-coordinator's default listening address
ENV_WAIT = "HILBENCH_FARM_WAIT"
DEFAULT_WAIT_S = 120.0
# labgrid's tag rules (labgrid.remote.common.TAG_KEY): a key is [a-z][a-z0-9_]+
TAG_KEY = re.compile(r"[a-z][a-z0-9_]+")
TAG_VALUE = re.compile(r"[A-Za-z0-9_.:+-]+")
PLACE_NAME = re.compile(r"[A-Za-z0-9_.+-]+")

_USAGE = (
    "write --board labgrid:PLACE, --board labgrid:tag=VALUE (e.g. labgrid:board=stm32n6570_dk), "
    "or --board map:FILE[:NAME | :tag=VALUE]"
)


@dataclass(frozen=True)
class Selector:
    """Which board: one by name, or any free one whose tags match (both empty: any board)."""

    name: str = ""
    tags: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        if self.name:
            return self.name
        if self.tags:
            return "a free place with " + ", ".join(f"{k}={v}" for k, v in self.tags.items())
        return "any free board"

    def matches(self, name: str, tags: dict[str, str]) -> bool:
        if self.name and name != self.name:
            return False
        return all(tags.get(k) == v for k, v in self.tags.items())

    @property
    def filters(self) -> dict[str, str]:
        """The labgrid reservation filter (the scheduler knows a place's name as tag 'name')."""
        return {"name": self.name} if self.name else dict(self.tags)


@dataclass(frozen=True)
class BoardSpec:
    """A parsed farm --board value."""

    kind: str  # "labgrid" or "map"
    selector: Selector
    text: str
    map_file: str = ""


def is_farm_board(port: str | None) -> bool:
    """Whether a --board value names a farm board (labgrid:... or map:...)."""
    return bool(port) and port.strip().startswith(PREFIXES)


def parse_board(text: str) -> BoardSpec:
    """Parse ``labgrid:...`` or ``map:...``; a ConfigError names what is wrong and the fix."""
    text = text.strip()
    if text.startswith(LABGRID_PREFIX):
        rest = text[len(LABGRID_PREFIX) :]
        if not rest.strip():
            raise ConfigError(f"--board {text!r} names no place", _USAGE)
        return BoardSpec("labgrid", parse_selector(rest, text), text)
    if text.startswith(MAP_PREFIX):
        rest = text[len(MAP_PREFIX) :]
        path, sep, which = rest.partition(":")
        # a Windows drive letter (C:\boards.toml) keeps its colon
        if len(path) == 1 and path.isalpha() and sep:
            more, sep, which = which.partition(":")
            path = f"{path}:{more}"
        if not path.strip():
            raise ConfigError(f"--board {text!r} names no board map file", _USAGE)
        selector = parse_selector(which, text) if which.strip() else Selector()
        return BoardSpec("map", selector, text, map_file=path)
    raise ConfigError(f"--board {text!r} is not a farm board", _USAGE)


def parse_selector(rest: str, text: str) -> Selector:
    rest = rest.strip()
    if "=" not in rest:
        if not PLACE_NAME.fullmatch(rest):
            raise ConfigError(f"--board {text!r}: {rest!r} is not a place name", _USAGE)
        return Selector(name=rest)
    tags: dict[str, str] = {}
    for pair in rest.split(","):
        key, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not key or not value:
            raise ConfigError(f"--board {text!r}: {pair.strip()!r} is not TAG=VALUE", _USAGE)
        if not TAG_KEY.fullmatch(key):
            raise ConfigError(
                f"--board {text!r}: {key!r} is not a labgrid tag name",
                "a tag name is a lower-case letter then letters, digits or _ (e.g. board)",
            )
        if not TAG_VALUE.fullmatch(value):
            raise ConfigError(
                f"--board {text!r}: tag value {value!r} has characters labgrid tags cannot hold",
                "use letters, digits and _ . : + -",
            )
        if key in tags:
            raise ConfigError(f"--board {text!r} gives tag {key!r} twice", "give each tag once")
        tags[key] = value
    if "name" in tags:
        raise ConfigError(
            f"--board {text!r}: 'name' is not a tag", "name a place as --board labgrid:PLACE"
        )
    return Selector(tags=tags)


def coordinator_address(environ: dict[str, str] | None = None) -> str:
    """Where the labgrid coordinator listens: $LG_COORDINATOR, else labgrid's default."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_COORDINATOR, "").strip()
    return value or DEFAULT_COORDINATOR


def wait_seconds(environ: dict[str, str] | None = None) -> float:
    """How long to wait for a held board: $HILBENCH_FARM_WAIT seconds, default 120."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_WAIT, "").strip()
    if not raw:
        return DEFAULT_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (0 <= value <= 7 * 24 * 3600):
        raise ConfigError(
            f"{ENV_WAIT}={raw!r} is not a number of seconds",
            f"set it to the seconds to wait for a held board (0 to 604800), or unset it "
            f"for {DEFAULT_WAIT_S:.0f}",
        )
    return value
