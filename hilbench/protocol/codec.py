"""The generic message codec: a field table derived from a declared layout, one encode/decode.

The nanopb model: :mod:`hilbench.protocol.spec` declares each payload layout once; a message
class names only its Python attributes (their types and defaults, its public API), and
:class:`Codec` derives from the layout and those attributes a field table -- one entry per
layout item -- that packs, unpacks and checks every message the same way:

- a scalar is an ``int`` attribute of the same name (a ``bool``, an ``IntEnum`` or an
  ``IntEnum | int`` by its type hint), checked against its declared range;
- an array is a read-only little-endian numpy array, or a ``str`` (UTF-8 text of a ``u8``
  array) when the attribute's type hint is ``str``; the scalar that counts it is the array's
  length, an attribute only when the class declares it (``q: int = field(default=None,
  kw_only=True)``), checked against its range;
- the rest of a payload is ``bytes``; an embedded layout is a message of the class bound to
  it, records a tuple of them; a rule is checked as the device checks it.

An attribute named differently from its wire field says so in its metadata
(``field(metadata={WIRE: "msg"})``). Requests are unpacked as a device reads them
(:func:`spec.read_payload`, then :func:`spec.check_values`: the declared ranges and rules in
table order); responses are read by length and then built through their class's checks, which
also run on every message a caller builds. :mod:`hilbench.protocol.fast` generates the
per-step fast paths from the same table.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import types
import typing
from collections.abc import Callable
from typing import Any

import numpy as np

from hilbench.protocol import spec
from hilbench.protocol.spec import MAX_PAYLOAD, ErrorCode, MessageError, refusal

WIRE = "wire"  # dataclass field metadata key: the layout's name of the attribute

# ---- checks of one attribute --------------------------------------------------------------------


def in_range(name: str, field: str, value: int, lo: int, hi: int) -> None:
    """The range check of one value (RANGE, BAD_ARGUMENT)."""
    if not lo <= value <= hi:
        raise refusal("RANGE", name, field, value, lo, hi)


def check_int(msg: Any, field: str, lo: int, hi: int) -> int:
    """Validate ``msg.field`` as an integer in lo..hi and store it as a plain int."""
    value = getattr(msg, field)
    if type(value) is int and lo <= value <= hi:  # the common case, already a plain int
        return value
    try:
        v = int(value.__index__())
    except (AttributeError, TypeError):
        raise MessageError(
            f"{msg.NAME}: field '{field}' must be an integer, got {value!r}"
        ) from None
    in_range(msg.NAME, field, v, lo, hi)
    object.__setattr__(msg, field, v)
    return v


_IINFO: dict[np.dtype, np.iinfo] = {}


def int_array(value: object, dtype: str | type, where: str) -> np.ndarray:
    """``value`` as a 1-D integer array of ``dtype``: refused (MessageError naming ``where``)
    when it is not 1-D integers or a value is outside the dtype's range, never wrapped. An
    array that already is one is returned as it is."""
    dt = np.dtype(dtype)
    if isinstance(value, np.ndarray) and value.dtype == dt and value.ndim == 1:
        return value
    a = np.asarray(value)
    if a.ndim != 1:
        raise MessageError(f"{where} must be 1-D, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iub":
        raise MessageError(f"{where} must hold integers, got {a.dtype}")
    if a.size:
        info = _IINFO.get(dt) or _IINFO.setdefault(dt, np.iinfo(dt))
        lo, hi = int(a.min()), int(a.max())
        if lo < info.min or hi > info.max:
            raise MessageError(
                f"{where} has values in {lo}..{hi}, outside {dt.name} range {info.min}..{info.max}"
            )
    return a.astype(dt)


def check_array(msg: Any, field: str, dtype: np.dtype) -> np.ndarray:
    """Validate ``msg.field`` as a 1-D integer array fitting ``dtype``; store it read-only."""
    given = getattr(msg, field)
    value = int_array(given, dtype, f"{msg.NAME}: field '{field}'")
    if value.flags.writeable:
        if value is given:  # the caller's own array: frozen as a copy
            value = value.copy()
        value.flags.writeable = False
    object.__setattr__(msg, field, value)
    return value


def check_bytes(msg: Any, field: str, max_len: int) -> bytes:
    """Validate ``msg.field`` as bytes (or a 1-byte integer array) of at most ``max_len``."""
    value = getattr(msg, field)
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.itemsize == 1:
        value = value.tobytes()  # an int8 / uint8 tensor, e.g. an INFER input
    if not isinstance(value, bytes | bytearray | memoryview):
        raise MessageError(f"{msg.NAME}: field '{field}' must be bytes, got {type(value).__name__}")
    b = bytes(value)
    if len(b) > max_len:
        raise MessageError(
            f"{msg.NAME}: field '{field}' is {len(b)} bytes, the limit is {max_len}",
            ErrorCode.BAD_LENGTH,
        )
    object.__setattr__(msg, field, b)
    return b


def check_text(msg: Any, field: str, max_len: int) -> bytes:
    """Validate ``msg.field`` as a str of at most ``max_len`` UTF-8 bytes; return the bytes."""
    value = getattr(msg, field)
    if not isinstance(value, str):
        raise MessageError(f"{msg.NAME}: field '{field}' must be str, got {type(value).__name__}")
    b = value.encode("utf-8")
    if len(b) > max_len:
        raise MessageError(
            f"{msg.NAME}: field '{field}' is {len(b)} UTF-8 bytes, the limit is {max_len}"
        )
    return b


def utf8(name: str, field: str, b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageError(f"{name}: field '{field}' is not valid UTF-8 ({exc.reason})") from None


def converter(hint: object) -> Callable[[int], Any] | None:
    """What a scalar attribute's type hint makes of a checked int: None (an int), ``bool``, an
    IntEnum member, or (``E | int``) a member when the value is known and the int otherwise."""
    if hint is int:
        return None
    if hint is bool:
        return bool
    if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        members = tuple(hint)
        if [int(e) for e in members] == list(range(len(members))):
            return members.__getitem__  # contiguous from 0: an index, cheaper than hint(v)
        return hint
    if isinstance(hint, types.UnionType) and int in hint.__args__:
        (e,) = (a for a in hint.__args__ if a is not int)
        known = e._value2member_map_
        return lambda v: known.get(v, v)
    raise TypeError(f"a scalar attribute cannot be a {hint!r}")


# ---- the field table ----------------------------------------------------------------------------


class Codec:
    """One layout bound to one message class: its field table, the generic pack / unpack,
    and the checks that run when a message is built."""

    def __init__(self, cls: type, layout: spec.Layout, classes: dict[str, type]) -> None:
        self.cls, self.layout, self.name = cls, layout, layout.name
        self.request = layout.type is not None and layout.type < spec.RESPONSE_BIT
        self.fast_unpack: Callable[[bytes], Any] | None = None  # see hilbench.protocol.fast
        self.fast_pack: Callable[[Any], bytes] | None = None
        self._classes = classes
        self._hints = typing.get_type_hints(cls)
        fields = {f.metadata.get(WIRE, f.name): f for f in dataclasses.fields(cls)}
        self._attr_of = {wire: f.name for wire, f in fields.items()}
        self._counted: dict[str, list] = {}  # count field -> the arrays or records it counts
        for it in layout.items:
            if isinstance(it, spec.Array | spec.Records):
                self._counted.setdefault(it.count, []).append(it)
        self.entries: list[tuple] = []  # (kind, layout index, attribute or None, details)
        checks: list[Callable[[Any], None]] = []
        for i, it in enumerate(layout.items):
            f = fields.pop(it.name, None)
            if f is None and not isinstance(it, spec.Rule) and it.name not in self._counted:
                raise TypeError(f"{cls.__name__} has no attribute for {layout.name}.{it.name}")
            count = isinstance(it, spec.Scalar) and it.name in self._counted
            if count and f is not None and (not f.kw_only or f.default is not None):
                raise TypeError(f"{cls.__name__}.{f.name}: a count is kw_only, default None")
            checks += self._entry(i, it, None if f is None else f.name)
        for f in fields.values():
            raise TypeError(f"{cls.__name__}.{f.name} is not a field of {layout.name}")
        self.checks = tuple(checks)
        self.getters = tuple(
            self._getter(kind, attr, extra) for kind, _, attr, extra in self.entries
        )

    def _entry(self, i: int, it: spec.Item, attr: str | None) -> list[Callable[[Any], None]]:
        """Append the field table's entry of layout item ``it``; return its checks."""
        layout, counted = self.layout, self._counted
        if isinstance(it, spec.Scalar) and it.name in counted:
            first = counted[it.name][0]
            text = isinstance(first, spec.Array) and self._hints[self._attr_of[first.name]] is str
            self.entries.append(("count", i, attr, (self._attr_of[first.name], text)))
            return []  # checked with the last array it counts
        if isinstance(it, spec.Scalar):
            lo, hi = layout.bounds(it)
            conv = converter(self._hints[attr])
            self.entries.append(("int", i, attr, conv))
            return [self._int_check(attr, lo, hi, conv)]  # type: ignore[arg-type]
        if isinstance(it, spec.Array):
            text = self._hints[attr] is str
            dtype = np.dtype(spec.WIRES[it.elem].dtype)
            self.entries.append(("text" if text else "array", i, attr, dtype))
            if text:
                if len(counted[it.count]) > 1 or it.elem != "u8":
                    raise TypeError(f"{self.cls.__name__}.{attr}: text is a u8 array of its own")
                hi = layout.bounds(layout.item(it.count))[1]  # type: ignore[arg-type]
                return [lambda msg: check_text(msg, attr, hi)]  # type: ignore[arg-type]
            checks = [lambda msg: check_array(msg, attr, dtype)]  # type: ignore[arg-type]
            if counted[it.count][-1] is it:
                arrays = [self._attr_of[a.name] for a in counted[it.count]]
                checks.append(self._count_check(layout.item(it.count), arrays))  # type: ignore[arg-type]
            return checks
        if isinstance(it, spec.Rest):
            limit = MAX_PAYLOAD - layout.min_size
            self.entries.append(("rest", i, attr, None))
            return [lambda msg: check_bytes(msg, attr, limit)]  # type: ignore[arg-type]
        if isinstance(it, spec.Embed):
            sub = self._classes[it.layout]
            self.entries.append(("embed", i, attr, sub))
            return [self._embed_check(attr, sub)]  # type: ignore[arg-type]
        if isinstance(it, spec.Records):
            sub = self._classes[it.layout]
            self.entries.append(("records", i, attr, sub))
            return [self._records_check(attr, sub, layout.item(it.count))]  # type: ignore[arg-type]
        self.entries.append(("rule", i, None, None))
        return [self._rule_check(it, [layout.item(a) for a in it.args])]  # type: ignore[union-attr]

    # -- checks (run in layout order; a count's after the last array it counts)

    def _int_check(self, attr: str, lo: int, hi: int, conv: Callable | None) -> Callable:
        if conv is None:
            return lambda msg: check_int(msg, attr, lo, hi)  # type: ignore[return-value]

        def check(msg: Any) -> None:
            object.__setattr__(msg, attr, conv(check_int(msg, attr, lo, hi)))

        return check

    def _count_check(self, count: spec.Scalar, arrays: list[str]) -> Callable[[Any], None]:
        """The arrays ``count`` counts agree in length; a count the caller gave matches; the
        length is in the count's range."""
        lo, hi = self.layout.bounds(count)
        c = self._attr_of.get(count.name, count.name)
        exposed, first = count.name in self._attr_of, arrays[0]

        def check(msg: Any) -> None:
            n = len(getattr(msg, first))
            for other in arrays[1:]:
                if len(getattr(msg, other)) != n:
                    raise MessageError(
                        f"{msg.NAME}: fields '{first}' ({n}) and '{other}' "
                        f"({len(getattr(msg, other))}) differ in length"
                    )
            if exposed:
                given = getattr(msg, c)
                if given is not None and given != n:
                    raise MessageError(
                        f"{msg.NAME}: field '{c}' = {given} but '{first}' has {n} values"
                    )
            in_range(msg.NAME, count.name, n, lo, hi)
            if exposed:
                object.__setattr__(msg, c, n)

        return check

    def _embed_check(self, attr: str, sub: type) -> Callable[[Any], None]:
        def check(msg: Any) -> None:
            if not isinstance(getattr(msg, attr), sub):
                raise MessageError(f"{msg.NAME}: '{attr}' must be a {sub.NAME}")

        return check

    def _records_check(self, attr: str, sub: type, count: spec.Scalar) -> Callable[[Any], None]:
        lo, hi = self.layout.bounds(count)

        def check(msg: Any) -> None:
            records = tuple(getattr(msg, attr))
            in_range(msg.NAME, count.name, len(records), lo, hi)
            for r in records:
                if not isinstance(r, sub):
                    raise MessageError(f"{msg.NAME}: {attr} must be {sub.NAME}s, got {r!r}")
            object.__setattr__(msg, attr, records)

        return check

    def _rule_check(self, rule: spec.Rule, args: list) -> Callable[[Any], None]:
        declared = spec.RULES[rule.rule]
        lengths = [isinstance(a, spec.Rest) for a in args]
        names = [a.name for a in args]

        def check(msg: Any) -> None:
            v = [
                len(getattr(msg, a)) if k else getattr(msg, a)
                for a, k in zip(names, lengths, strict=True)
            ]
            if declared.broken(*v):
                raise refusal(declared.template, *declared.args(msg.NAME, rule.args, *v))

        return check

    # -- the generic encode / decode

    def validate(self, msg: Any) -> None:
        """Every check of a message being built, in layout order, then its class's own."""
        for check in self.checks:
            check(msg)
        msg._check()

    def values(self, msg: Any) -> list[Any]:
        """The layout's values of ``msg`` (as :func:`spec.read_payload` gives them)."""
        return [get(msg) for get in self.getters]

    def _getter(self, kind: str, attr: str | None, extra: Any) -> Callable[[Any], Any]:
        if kind == "count":
            first, text = extra
            if text:
                return lambda msg: len(getattr(msg, first).encode("utf-8"))
            return lambda msg: len(getattr(msg, first))
        if kind == "text":
            return lambda msg: getattr(msg, attr).encode("utf-8")
        if kind == "embed":
            sub = extra._codec
            return lambda msg: sub.values(getattr(msg, attr))
        if kind == "records":
            sub = extra._codec
            return lambda msg: [sub.values(r) for r in getattr(msg, attr)]
        if kind == "rule":
            return lambda msg: None
        return operator.attrgetter(attr)  # type: ignore[arg-type]

    def pack(self, msg: Any) -> bytes:
        if self.fast_pack is not None:
            return self.fast_pack(msg)
        return self.generic_pack(msg)

    def generic_pack(self, msg: Any) -> bytes:
        """:meth:`pack` without the fast path (what the fast path is tested against)."""
        return spec.pack_payload(self.layout, self.values(msg))

    def build(self, values: list[Any], trusted: bool) -> Any:
        """A message of the values read from the wire: ``trusted`` after the declared checks
        (no class checks run), else through the class's checks."""
        attrs: dict[str, Any] = {}
        for kind, i, attr, extra in self.entries:
            if attr is None:
                continue
            v = values[i]
            if kind == "text":
                v = utf8(self.name, self.layout.items[i].name, bytes(v))
            elif kind == "embed":
                v = extra._codec.build(v, trusted)
            elif kind == "records":
                v = tuple(extra._codec.build(r, trusted) for r in v)
            elif kind == "int" and trusted and extra is not None:
                v = extra(v)
            attrs[attr] = v
        if not trusted:
            return self.cls(**attrs)
        msg = object.__new__(self.cls)
        for attr, v in attrs.items():
            object.__setattr__(msg, attr, v)
        return msg

    def unpack(self, payload: bytes) -> Any:
        """The message in ``payload``, strictly: MessageError with the declared text otherwise."""
        fast = self.fast_unpack
        if fast is not None:
            msg = fast(payload)
            if msg is not None:
                return msg
        return self.generic_unpack(payload)

    def generic_unpack(self, payload: bytes) -> Any:
        """:meth:`unpack` without the fast path (what the fast path is tested against)."""
        values = spec.read_payload(self.layout, payload)
        if self.request:  # as a device reads it: the declared ranges and rules, in table order
            spec.check_values(self.layout, values)
            return self.build(values, trusted=True)
        return self.build(values, trusted=False)


def render(layout: spec.Layout) -> str:
    """The layout in one line, e.g. ``u16 q, u32 seeds[q], i32 coeffs[q]`` (for docstrings)."""
    parts = []
    for it in layout.items:
        if isinstance(it, spec.Scalar):
            parts.append(f"{it.wire} {it.name}")
        elif isinstance(it, spec.Array):
            parts.append(f"{it.elem} {it.name}[{it.count}]")
        elif isinstance(it, spec.Rest):
            parts.append(f"u8 {it.name}[rest]")
        elif isinstance(it, spec.Records):
            parts.append(f"{it.layout} {it.name}[{it.count}]")
        elif isinstance(it, spec.Embed):
            parts.append(f"{it.layout} {it.name}")
    return ", ".join(parts) or "empty"
