"""Fast paths generated from a codec's field table, for the per-step messages.

One ZO step packs a PROBE (or APPLY_PROBE) payload and reads its answer; the generic codec
walks its field table for that, which costs a few microseconds a step. Here the same table is
turned into the straight-line Python a person would write for one layout -- the way
``dataclasses`` writes ``__init__`` -- and compiled once at import:

- :func:`encoder`: ``fn(*attributes) -> bytes | None``, the payload of a message whose
  attributes are already plain ints in range and 1-D arrays of the wire dtype (or lists of
  ints that fit it), without
  building the message; None for anything else (the message then says what is wrong).
- :func:`decoder`: ``fn(payload) -> message | None``, the message of a payload that is exactly
  valid; None for anything else (the generic codec then says what is wrong).

Nothing here restates a layout: sizes, order, ranges and dtypes all come from
:mod:`hilbench.protocol.spec` through :class:`~hilbench.protocol.codec.Codec`. The generated
source is kept on the function (``__source__``); tests hold both to the generic codec's bytes
and refusals.
"""

from __future__ import annotations

import collections
import dataclasses
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from hilbench.protocol import spec
from hilbench.protocol.codec import Codec


class _Source:
    """Lines of generated code and the constants they name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {"ndarray": np.ndarray, "frombuffer": np.frombuffer}

    def const(self, prefix: str, value: object) -> str:
        name = f"{prefix}{len(self.env)}"
        self.env[name] = value
        return name

    def compile(self, name: str, where: str) -> Callable:
        text = "\n".join(self.lines) + "\n"
        exec(compile(text, f"<generated {where}>", "exec"), self.env)
        fn = self.env[name]
        fn.__source__ = text
        return fn


def _groups(codec: Codec) -> dict[str, list[str]]:
    """count field -> the attributes of the arrays it counts (in layout order)."""
    out: dict[str, list[str]] = {}
    for kind, i, attr, _ in codec.entries:
        it = codec.layout.items[i]
        if kind == "array":
            out.setdefault(it.count, []).append(attr)  # type: ignore[union-attr]
    return out


#: (numpy kind, item size) -> the struct character of the same little-endian integer
_STRUCT_CHARS = {
    (kind, size): char
    for kind, chars in (("i", "bhiq"), ("u", "BHIQ"))
    for size, char in zip((1, 2, 4, 8), chars, strict=True)
}


def _list_formats(src: _Source, lay: Any, count: str, dtype: Any) -> tuple[str, str]:
    """An array's struct character and the name of its formats by length (``<{n}{char}``
    for every length the array's count allows): how a list of its ints is packed or read."""
    _, hi = lay.bounds(lay.item(count))
    char = _STRUCT_CHARS[np.dtype(dtype).kind, np.dtype(dtype).itemsize]
    return src.const("F", tuple(f"<{n}{char}" for n in range(hi + 1))), char


def _has_dict(cls: type) -> bool:
    """Whether instances of ``cls`` keep their attributes in a ``__dict__`` (no slots)."""
    return all("__slots__" not in c.__dict__ for c in cls.__mro__[:-1])


def _converted(src: _Source, conv: Callable[[int], Any] | None, v: str) -> str:
    """The expression of a checked int ``v`` as its attribute (codec.converter's result)."""
    if conv is None:
        return v
    members = getattr(conv, "__self__", None)
    if type(members) is tuple and getattr(conv, "__name__", "") == "__getitem__":
        return f"{src.const('T', members)}[{v}]"  # an IntEnum from 0: a subscript, not a call
    return f"{src.const('C', conv)}({v})"


def _unsupported(codec: Codec, kind: str) -> TypeError:
    return TypeError(f"{codec.name}: the fast path has no {kind} fields")


def encoder(codec: Codec, name: str) -> Callable[..., bytes | None]:
    """The generated payload builder of ``codec``'s layout (embedded layouts flattened)."""
    src = _Source()
    params: list[str] = []
    conds: list[str] = []
    pieces: list[str] = []
    run: list[tuple[str, str]] = []  # (struct char, expression)
    # the whole payload as one struct when every array is a list: its format with a {} per
    # array length, its arguments, and the list parameters
    whole: list[str] = ["<"]
    whole_args: list[str] = []
    lists: list[str] = []

    def flush() -> None:
        if run:
            st = src.const("S", struct.Struct("<" + "".join(c for c, _ in run)))
            pieces.append(f"{st}.pack({', '.join(e for _, e in run)})")
            run.clear()

    def walk(c: Codec) -> None:
        groups = _groups(c)
        lay = c.layout
        for kind, i, attr, extra in c.entries:
            it = lay.items[i]
            if kind == "int":
                if extra is not None:
                    raise _unsupported(c, "converted")
                lo, hi = lay.bounds(it)  # type: ignore[arg-type]
                params.append(attr)  # type: ignore[arg-type]
                conds.append(f"type({attr}) is int and {lo} <= {attr} <= {hi}")
                run.append((spec.WIRES[it.wire].fmt, attr))  # type: ignore[union-attr]
                whole.append(spec.WIRES[it.wire].fmt)  # type: ignore[union-attr]
                whole_args.append(attr)  # type: ignore[arg-type]
            elif kind == "count":
                first = groups[it.name][0]
                run.append((spec.WIRES[it.wire].fmt, f"len({first})"))  # type: ignore[union-attr]
                whole.append(spec.WIRES[it.wire].fmt)  # type: ignore[union-attr]
                whole_args.append(f"len({first})")
            elif kind == "array":
                params.append(attr)  # type: ignore[arg-type]
                dt = src.const("DT", extra)
                conds.append(
                    f"(type({attr}) is ndarray and {attr}.dtype == {dt} and {attr}.ndim == 1 "
                    f"or type({attr}) is list)"
                )
                arrays = groups[it.count]  # type: ignore[union-attr]
                if attr == arrays[-1]:
                    lo, hi = lay.bounds(lay.item(it.count))  # type: ignore[arg-type,union-attr]
                    conds.append(f"{lo} <= len({arrays[0]}) <= {hi}")
                    conds.extend(f"len({a}) == len({arrays[0]})" for a in arrays[1:])
                flush()
                # a list of ints goes through struct, which refuses what the dtype cannot
                # hold (struct.error: None, and the message says what is wrong)
                fmts, char = _list_formats(src, lay, it.count, extra)  # type: ignore[union-attr]
                pieces.append(
                    f"({attr}.tobytes() if type({attr}) is ndarray "
                    f"else pack({fmts}[len({attr})], *{attr}))"
                )
                whole.append("{}" + char)
                whole_args.append(f"*{attr}")
                lists.append(attr)  # type: ignore[arg-type]
            elif kind == "embed":
                walk(extra._codec)
            else:
                raise _unsupported(c, kind)

    walk(codec)
    flush()
    flat_fields(codec)  # refuses attribute names that repeat once embeds are flattened
    src.lines.append(f"def {name}({', '.join(params)}):")
    src.lines.append("    if (")
    src.lines += [f"        {c}" if k == 0 else f"        and {c}" for k, c in enumerate(conds)]
    src.lines.append("    ):")
    src.lines.append("        try:")
    if lists:  # all lists (the trainer's every step): one cached struct per array lengths
        cache = src.const("W", {})
        template = src.const("TPL", "".join(whole))
        key = f"({', '.join(f'len({a})' for a in lists)},)"
        src.lines.append(f"            if {' and '.join(f'type({a}) is list' for a in lists)}:")
        src.lines.append(f"                key = {key}")
        src.lines.append(f"                st = {cache}.get(key)")
        src.lines.append("                if st is None:")
        src.lines.append(f"                    st = {cache}[key] = Struct({template}.format(*key))")
        src.lines.append(f"                return st.pack({', '.join(whole_args)})")
    src.lines.append(f"            return {' + '.join(pieces) or repr(b'')}")
    src.lines.append("        except struct_error:")
    src.lines.append("            return None")
    src.lines.append("    return None")
    src.env.update(pack=struct.pack, struct_error=struct.error, Struct=struct.Struct)
    fn = src.compile(name, f"encoder of {codec.name}")
    fn.__doc__ = (
        f"``{codec.cls.__name__}(...).pack()`` for attributes that are already plain ints in "
        "range and 1-D arrays of the wire dtype or lists of ints that fit it, without "
        "building the message; None otherwise "
        f"(build {codec.cls.__name__}, which says what is wrong). Generated from the "
        f"{codec.name} layout by hilbench.protocol.fast."
    )
    return fn


def packer(codec: Codec) -> Callable[[Any], bytes]:
    """The generated ``pack`` of a built (so checked) message of ``codec``'s layout."""
    src = _Source()
    pieces: list[str] = []
    run: list[tuple[str, str]] = []

    def flush() -> None:
        if run:
            st = src.const("S", struct.Struct("<" + "".join(c for c, _ in run)))
            pieces.append(f"{st}.pack({', '.join(e for _, e in run)})")
            run.clear()

    def walk(c: Codec, obj: str) -> None:
        groups = _groups(c)
        for kind, i, attr, extra in c.entries:
            it = c.layout.items[i]
            if kind == "int":
                run.append((spec.WIRES[it.wire].fmt, f"{obj}.{attr}"))  # type: ignore[union-attr]
            elif kind == "count":
                first = groups[it.name][0]
                run.append((spec.WIRES[it.wire].fmt, f"len({obj}.{first})"))  # type: ignore[union-attr]
            elif kind == "array":
                flush()
                pieces.append(f"{obj}.{attr}.tobytes()")
            elif kind == "embed":
                walk(extra._codec, f"{obj}.{attr}")
            else:
                raise _unsupported(c, kind)

    walk(codec, "msg")
    flush()
    src.lines.append("def pack(msg):")
    src.lines.append(f"    return {' + '.join(pieces) or repr(b'')}")
    fn = src.compile("pack", f"packer of {codec.name}")
    fn.__doc__ = f"The payload of a built {codec.name} (generated by hilbench.protocol.fast)."
    return fn


def decoder(codec: Codec, *, lists: bool = False) -> Callable[[bytes], Any]:
    """The generated reader of a payload of ``codec``'s layout that is exactly valid.

    ``lists``: its values flat instead, as one named tuple (:func:`flat_fields` names them,
    embedded layouts flattened) with the arrays as lists of ints -- what a
    caller that reads every value as plain ints wants (the trainer, every step), without an
    array made and turned back into a list."""
    if any("_check" in c.__dict__ for c in codec.cls.__mro__[:-2]):
        raise _unsupported(codec, "class-checked")
    src = _Source()
    body: list[str] = []
    ranges: list[str] = []
    run: list[tuple[str, str, int]] = []  # (struct char, variable, size)
    state = {"exact": False, "counts": [], "fixed": codec.layout.min_size}
    n_counts = [0]

    def count_all(c: Codec) -> int:
        total = 0
        for kind, _, _, extra in c.entries:
            total += kind == "count"
            if kind == "embed":
                total += count_all(extra._codec)
        return total

    n_counts[0] = count_all(codec)

    def flush() -> None:
        if not run:
            return
        st = struct.Struct("<" + "".join(ch for ch, _, _ in run))
        if not state["exact"]:
            body.append(f"if o + {st.size} > n: return None")
        names = ", ".join(v for _, v, _ in run)
        body.append(f"{names}, = {src.const('S', st)}.unpack_from(payload, o)")
        body.append(f"o += {st.size}")
        run.clear()
        if not state["exact"] and len(state["counts"]) == n_counts[0]:
            total = " + ".join([str(state["fixed"]), *state["counts"]])
            body.append(f"if n != {total}: return None")
            state["exact"] = True

    def walk(c: Codec, level: int) -> str:
        """Reads of one level; returns the variable of its message."""
        lay = c.layout
        sets: list[tuple[str, str]] = []
        for kind, i, attr, extra in c.entries:
            it = lay.items[i]
            v = f"v{level}_{it.name}"
            if kind in ("int", "count"):
                w = spec.WIRES[it.wire]  # type: ignore[union-attr]
                lo, hi = lay.bounds(it)  # type: ignore[arg-type]
                run.append((w.fmt, v, w.size))
                if lo > w.lo:
                    ranges.append(f"{lo} <= {v}")
                if hi < w.hi:
                    ranges.append(f"{v} <= {hi}")
                if kind == "count":
                    per = lay.per(it.name)
                    state["counts"].append(f"{per} * {v}")  # type: ignore[attr-defined]
                if attr is not None:
                    sets.append((attr, v if kind == "count" else _converted(src, extra, v)))
            elif kind == "array":
                flush()
                dt = src.const("DT", extra)
                count = f"v{level}_{it.count}"  # type: ignore[union-attr]
                if not state["exact"]:
                    body.append(f"if o + {extra.itemsize} * {count} > n: return None")
                if lists:
                    fmts, _ = _list_formats(src, lay, it.count, extra)  # type: ignore[union-attr]
                    body.append(f"{v} = list(unpack_from({fmts}[{count}], payload, o))")
                else:
                    body.append(f"{v} = frombuffer(payload, {dt}, {count}, o)")
                body.append(f"o += {extra.itemsize} * {count}")
                sets.append((attr, v))  # type: ignore[arg-type]
            elif kind == "embed":
                sets.append((attr, walk(extra._codec, level + 1)))  # type: ignore[arg-type]
            else:
                raise _unsupported(c, kind)
        if lists:  # the values themselves, in order (an embed's: its own, joined)
            return ", ".join(value for _, value in sets)
        msg = f"m{level}"
        builds.append(f"{msg} = new({src.const('K', c.cls)})")
        fields = [f.name for f in dataclasses.fields(c.cls)]
        values = dict(sets)
        if _has_dict(c.cls) and sorted(fields) == sorted(values):  # every field: one store
            items = ", ".join(f"{a!r}: {values[a]}" for a in fields)
            builds.append(f"set({msg}, '__dict__', {{{items}}})")
        else:
            builds.extend(f"set({msg}, {a!r}, {value})" for a, value in sets)
        return msg

    builds: list[str] = []
    top = walk(codec, 0)
    flush()
    if lists:  # top: the value expressions of flat_fields(codec), in order
        top = f"new_tuple({src.const('K', flat_type(codec))}, ({top},))"
    if not state["exact"]:
        body.append("if o != n: return None")
    src.env.update(
        new=object.__new__,
        set=object.__setattr__,
        new_tuple=tuple.__new__,
        unpack_from=struct.unpack_from,
    )
    src.lines.append("def decode(payload):")
    src.lines.append("    if type(payload) is not bytes: return None")
    src.lines.append("    n = len(payload)")
    src.lines.append("    o = 0")
    src.lines += [f"    {line}" for line in body]
    if ranges:
        src.lines.append(f"    if not ({' and '.join(ranges)}): return None")
    src.lines += [f"    {line}" for line in builds]
    src.lines.append(f"    return {top}")
    fn = src.compile("decode", f"{'flat ' if lists else ''}decoder of {codec.name}")
    what = f"its values flat ({flat_type(codec).__name__})" if lists else f"the {codec.name}"
    fn.__doc__ = (
        f"{what} of an exactly valid payload (as ``{codec.cls.__name__}.unpack``), None "
        f"otherwise. Generated from the {codec.name} layout by hilbench.protocol.fast."
    )
    return fn


def flat_fields(codec: Codec) -> tuple[str, ...]:
    """A message's attributes with every embedded message's put in its place: the fields of
    a flat decoder's tuple."""
    out: list[str] = []
    for kind, _, attr, extra in codec.entries:
        if kind == "embed":
            out.extend(flat_fields(extra._codec))
        elif attr is not None:
            out.append(attr)
    if len(set(out)) != len(out):
        raise TypeError(f"{codec.name}: attribute names repeat once embeds are flattened")
    return tuple(out)


_FLAT_TYPES: dict[str, type] = {}


def flat_type(codec: Codec) -> type:
    """The named tuple of a flat decoder of ``codec`` (one per layout)."""
    kind = _FLAT_TYPES.get(codec.name)
    if kind is None:
        name = f"{codec.cls.__name__}Values"
        kind = _FLAT_TYPES[codec.name] = collections.namedtuple(name, flat_fields(codec))
        kind.__doc__ = (
            f"A {codec.cls.__name__}'s values, flat, arrays as lists of ints "
            "(hilbench.protocol.fast's flat decoder)."
        )
    return kind
