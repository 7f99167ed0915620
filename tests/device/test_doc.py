"""docs/protocol.md says what the declaration says: its refusal table is the registry."""

import re
from pathlib import Path

from hilbench.protocol import spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_the_refusal_table_is_the_message_registry():
    rows = re.findall(
        r"^\| `(\w+)` \| `(\w+)` \| `(.*)` \| (.*) \|$", _section("Refusal messages"), re.M
    )
    table = {name: (code, template) for name, code, template, _ in rows}
    expected = {
        name: (spec.MESSAGE_CODES.get(name, spec.ErrorCode.BAD_FRAME).name, template)
        for name, template in spec.MESSAGES.items()
    }
    assert table == expected


def test_every_template_the_doc_names_exists():
    names = set(re.findall(r"\(`([A-Z][A-Z0-9_]+)`", DOC.read_text()))
    known = {c.name for c in spec.ErrorCode} | {t.name for t in spec.MessageType}
    unknown = {n for n in names - set(spec.MESSAGES) - known if not hasattr(spec, n)}
    assert not unknown, f"docs/protocol.md names templates that are not declared: {unknown}"


def test_the_processing_order_names_the_request_types_and_version():
    order = _section("Device processing order")
    first, last = int(spec.FIRST_REQUEST), int(spec.LAST_REQUEST)
    assert f"`0x{first:02X}..0x{last:02X}`" in order
    assert "`1` for this document" in DOC.read_text() and spec.PROTOCOL_VERSION == 1
