"""Model text made safe to hand to a game, a scorer or a server: valid Unicode, no control characters.

A sampling model can write any token, and byte-level vocabularies have one for each control byte:
``tokenizer.decode`` then gives text with a NUL (``"\\x00"``) or an escape character in it. Text
parsed from the model's JSON (tool arguments) can also hold lone surrogates (``"\\ud800"`` written
as an escape), which no UTF-8 encoder, tokenizer or HTTP client accepts. Interpreters written in C
read a NUL as the end of the command: TextWorld's (Jericho's frotz) then never sees the command's
newline, waits on memory it does not own and crashes the process.

* :func:`valid_unicode`: surrogate pairs joined, lone surrogates replaced by U+FFFD.
* :func:`clean_text`: :func:`valid_unicode`, and control characters removed (whitespace kept).
* :func:`cut_utf8`: at most ``max_bytes`` bytes of UTF-8, cut at a character boundary.

Example:
    >>> clean_text("take\\x00 key\\x1b[0m \\ud800") == "take key[0m \\N{REPLACEMENT CHARACTER}"
    True
    >>> cut_utf8("été", 2)
    'é'
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls, DEL and C1 controls, except the ones str.split() treats as whitespace
# (\t \n \v \f \r, \x1c-\x1f, \x85): those separate words and every text parser reads them so.
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")


def valid_unicode(text: str) -> str:
    """``text`` with surrogate pairs joined into their character and lone surrogates replaced by U+FFFD.

    Args:
        text: any Python string.

    Returns:
        A string that encodes to UTF-8 (the same object when it already did).

    Example:
        >>> valid_unicode("\\ud83d\\ude00 \\udfff") == "\\N{GRINNING FACE} \\N{REPLACEMENT CHARACTER}"
        True
    """
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_text(text: str) -> str:
    """``text`` as valid Unicode (:func:`valid_unicode`) without control characters.

    Removed: C0 controls, DEL and C1 controls, except whitespace (tab, newline, carriage return,
    vertical tab, form feed, ``\\x1c``-``\\x1f``, ``\\x85``), which stays as it is.

    Args:
        text: text a model wrote.

    Returns:
        The cleaned text.

    Example:
        >>> clean_text("a\\x00b\\tc\\x7f")
        'ab\\tc'
    """
    return _CONTROL.sub("", valid_unicode(text))


def cut_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` (valid Unicode) whose UTF-8 is at most ``max_bytes`` bytes.

    Args:
        text: valid Unicode (see :func:`valid_unicode`).
        max_bytes: the byte budget (>= 0).

    Returns:
        ``text`` itself when it fits, else its prefix ending at a character boundary.

    Example:
        >>> cut_utf8("abc", 2), cut_utf8("😀", 3)
        ('ab', '')
    """
    if len(text) * 4 <= max_bytes:  # a character is at most 4 bytes of UTF-8: fits without encoding
        return text
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
