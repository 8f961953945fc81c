"""The action cleaner the adapters share: every string becomes encodable text without control characters."""

from __future__ import annotations

import pytest

from trl_env.adapters.actions import clean_text, cut_utf8, valid_unicode


def test_every_control_character_but_whitespace_is_removed():
    controls = [chr(code) for code in [*range(0x20), *range(0x7F, 0xA0)]]
    kept = "".join(c for c in controls if c.isspace())
    assert clean_text("".join(controls)) == kept == "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85"
    assert clean_text("take\x00 the\x1b[1m key") == "take the[1m key"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("\ud800", "\ufffd"), ("a\udfffb", "a\ufffdb"), ("\ud83d\ude00", "😀"), ("\ude00\ud83d", "\ufffd\ufffd")],
)
def test_surrogates_are_joined_or_replaced(text, expected):
    assert valid_unicode(text) == clean_text(text) == expected
    expected.encode("utf-8")  # what a tokenizer, a C interpreter or an HTTP client needs


def test_clean_text_leaves_ordinary_text_alone():
    text = "Go north, then take the 🔑 (clé) — twice.\nDone."
    assert clean_text(text) == text and valid_unicode(text) is text


def test_cut_utf8_cuts_at_a_character_boundary():
    assert cut_utf8("é" * 10, 5) == "éé" and cut_utf8("abc", 3) == "abc" and cut_utf8("😀x", 3) == ""
    assert len(cut_utf8("x" * 1_000_000, 190).encode()) == 190
