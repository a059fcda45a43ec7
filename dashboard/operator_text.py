"""Text people typed, on its way to the operator: one CSV writer for every operator export and
one filter for every command that prints to a terminal.

Key names, access-request reasons, audit details and email addresses are chosen by whoever
signs in. In a CSV a cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return is a
formula to a spreadsheet (OWASP's CSV-injection guidance: prefix a single quote, which
spreadsheets show as text and scripts can strip; numbers keep their sign). In a terminal an
escape sequence can erase lines, forge others or hide a link, so control and format characters
(Unicode categories Cc and Cf: ESC, CR, BEL, C1 controls, bidirectional overrides) are printed
as visible `\\x..` / `\\u....` escapes instead.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Cc and Cf, as one character class (unicodedata per character would be a Python loop per character)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
                     "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
                     "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
                     "\U000e0001\U000e0020-\U000e007f]")


def csv_cell(value: Any) -> Any:
    """A text cell a spreadsheet will show as text; None is an empty cell; numbers as they are."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]], line_end: str = "\n") -> str:
    """A whole CSV document, every text cell through `csv_cell`."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator=line_end)
    w.writerow(header)
    for row in rows:
        w.writerow([csv_cell(v) for v in row])
    return out.getvalue()


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def terminal_safe(text: Any) -> str:
    """`text` with every control and format character shown as an escape, never obeyed."""
    return _UNSAFE.sub(_escape, "" if text is None else str(text))


def terminal_line(fields: Iterable[Any]) -> str:
    """One tab-separated line of fields, each through `terminal_safe` (a tab in a field is escaped
    too, so the columns stay the columns)."""
    return "\t".join(terminal_safe(f) for f in fields)
