"""The C firmware's generated headers (device_fw/core/gen) match their Python declaration."""

from hilbench import cgen


def test_committed_headers_are_current():
    bad = cgen.stale()
    assert not bad, f"stale: {bad}; run `python -m hilbench.cgen` and commit device_fw/core/gen"


def test_every_builder_is_registered():
    names = set(cgen.headers())
    assert names == {
        "hb_wire.h",
        "hb_blob.h",
        "hb_zo.h",
        "hb_an547.h",
        "hb_stm32n6.h",
        "hb_stm32n6_memory.ld",
    }, names


def test_c_string_escapes_quotes_and_utf8():
    assert cgen.c_string('a "b" \\ é') == '"a \\"b\\" \\\\ \\303\\251"'
