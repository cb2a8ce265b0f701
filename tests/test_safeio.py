"""doctor.safeio: the reader, the JSON loader and the display escapes, as properties over any input."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.commands.fix import _unpin_field, pin_field
from doctor.render.fixscript import q
from doctor.safeio import (
    InputError,
    display,
    load_json,
    megabytes,
    read_file,
    read_input,
    small_int,
    visible,
    xml_text,
)

ANY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=60)
UNSAFE = {chr(c) for c in [*range(0, 9), *range(11, 32), *range(0x7F, 0xA0)]} | {"\u202e", "\u2028"}


@settings(max_examples=150, deadline=None)
@given(ANY_TEXT)
def test_display_leaves_nothing_a_terminal_would_obey(text: str) -> None:
    shown = display(text)
    assert not (set(shown) & UNSAFE) and not any(0xD800 <= ord(c) <= 0xDFFF for c in shown)
    shown.encode("utf-8")  # always encodable
    assert "\n" not in display(text, line=True) and "\t" not in display(text, line=True)


@settings(max_examples=150, deadline=None)
@given(ANY_TEXT)
def test_visible_keeps_the_length_for_styled_spans(text: str) -> None:
    shown = visible(text)
    assert len(shown) == len(text) and not (set(shown) & UNSAFE)


@settings(max_examples=150, deadline=None)
@given(ANY_TEXT)
def test_xml_text_is_always_well_formed(text: str) -> None:
    el = ET.Element("t", a=xml_text(text))
    el.text = xml_text(text)
    ET.fromstring(ET.tostring(el, encoding="unicode"))


@settings(max_examples=150, deadline=None)
@given(ANY_TEXT)
def test_pin_fields_round_trip_exactly_and_hold_no_space(text: str) -> None:
    field = pin_field(text)
    assert " " not in field and "\n" not in field and _unpin_field(field) == text


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x10FFFF, exclude_categories=["Cs"]),
               max_size=40))
def test_shell_words_are_exact_and_one_line(text: str) -> None:
    word = q(text)
    assert "\n" not in word
    out = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True).stdout
    assert out == text.encode()


@pytest.mark.parametrize(("text", "value"), [("12", 12), ("²", None), ("١٢", None), ("9" * 19, None), ("", None),
                                             ("-1", None), ("0012", 12)])
def test_small_int_reads_ascii_digits_only(text: str, value: int | None) -> None:
    assert small_int(text) == value


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
                    max_leaves=10))
def test_load_json_reads_json_or_says_why_not(value: object) -> None:
    text = json.dumps(value)
    try:
        assert load_json(text) == json.loads(text)
    except InputError as exc:  # the only way it fails, and only for what cannot be printed or compared
        assert "NaN" in text or "Infinity" in text or re.search(r"[0-9]{41}", text), exc


def test_read_input_caps_and_refuses_special_files(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 101)
    with pytest.raises(InputError, match="larger than"):
        read_input(str(big), "--facts", cap=100)
    assert read_input("-", "--facts", stdin=io.BytesIO(b"\xff{}")) == "\ufffd{}"
    os.mkfifo(tmp_path / "fifo")
    for special in (str(tmp_path / "fifo"), "/dev/zero", str(tmp_path)):
        with pytest.raises(OSError, match="not a regular file"):
            read_file(special, 10)


@pytest.mark.parametrize(("n", "text"), [(4096, "4 KiB"), (512, "0.5 KiB"), (64 * 1024 * 1024, "64 MB"),
                                         (1536 * 1024, "1.5 MB")])
def test_size_limits_read_as_a_person_reads_them(n: int, text: str) -> None:
    # a 4 KiB read limit was shown as "0.00390625 MB" on a real machine
    assert megabytes(n) == text
