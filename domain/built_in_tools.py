"""The tools the runner implements, by name, with the description the model is shown when an
agent declares one without a description of its own (``built_in_tools.json``): what a tool's
description reads as, for the plan, the card and the runner alike."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

FILE = Path(__file__).with_name("built_in_tools.json")


@cache
def descriptions() -> dict[str, str]:
    """Tool name → its built-in description."""
    return dict(json.loads(FILE.read_text(encoding="utf-8"))["descriptions"])


def shown(tool: str, declared: str | None) -> str:
    """The description the model is shown for ``tool``: the declared one, else the built-in."""
    return declared or descriptions().get(tool, "")
