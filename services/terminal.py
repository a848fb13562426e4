"""Text from outside (outputs, comments, ids, reasons) printed as data, never as commands.

A model's output, a rater's comment or an id someone typed may hold terminal escape sequences
(OSC 52 sets the clipboard, OSC 0 the window title, CSI moves the cursor and erases lines) or
Rich markup (``[/bold]`` crashes the print, ``[link=…]`` plants a link, ``[conceal]`` hides
text). Every command prints such text through one of these helpers: control characters other
than newline and tab are shown escaped (``\\x1b``), and markup is escaped so Rich prints it as
written. Our own markup around the text still styles it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console
from rich.highlighter import JSONHighlighter
from rich.markup import escape
from rich.text import Text

# C0 controls but tab and newline, DEL, C1 controls (U+009B is an 8-bit CSI, U+009D an OSC to
# terminals that take them), and the bidirectional overrides and isolates, which reorder what
# is shown so that text reads other than it is (the plain direction marks stay: right-to-left
# text uses them)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every control character shown as an escape (newline and tab kept): for
    plain output (``print``) and for Rich with markup off."""
    # a Windows line end is a line end; a carriage return alone would rewrite the line
    return _CONTROL.sub(_escaped, str(text).replace("\r\n", "\n"))


def shown(text: object) -> str:
    """``text`` to place inside a Rich markup string: control characters escaped, and markup
    escaped so that Rich prints it as written."""
    return escape(printable(text))


def json_text(value: str | Any) -> Text:
    """A JSON document (a string of JSON, or data) indented and highlighted, with nothing in
    its strings that a terminal would act on (JSON escapes C0 controls; the others are given
    as ``\\u`` escapes too, so the document stays valid JSON)."""
    data = json.loads(value) if isinstance(value, str) else value
    dumped = json.dumps(data, indent=2, ensure_ascii=False)
    safe = _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
    return JSONHighlighter()(Text(safe))


def console(stderr: bool = False) -> Console:
    """The CLI's console: no emoji codes (``:warning:`` in a comment stays text)."""
    return Console(stderr=stderr, emoji=False)
