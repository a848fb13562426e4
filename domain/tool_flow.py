"""Typed wishes about an agent's tools and flow: what a rater asks of the trace, not the answer.

A chip, a ``--want`` and a correction say them like any other want:

- ``tool:search_documents`` use the tool (``remove:tool:…``: stop using it);
- ``tool_first:search_documents`` call it first, before answering;
- ``describe:tool:search_documents`` (or with ``:"a sentence"``) what its description says;
  ``remove:describe:tool:search_documents`` its description as it was before the rater's
  additions (with ``:"a sentence"``: that sentence taken out);
- ``step:add:check`` a checking step at the end of the flow, given the findings;
- ``step:remove:polish`` (or ``remove:step:polish``) the polish step taken out of the flow;
- ``step:input:check+=research`` the check step given the research step's output
  (``step:input:polish-=draft``: no longer given it);
- ``step:prompt:research`` the other wishes of the score aimed at that step's prompt rather
  than the system prompt (or with ``:"a sentence"``, that sentence added to it);
  ``remove:step:prompt:research:"a sentence"`` that sentence taken out of it.

Each is a wish of the family its syntax names (``tool``, ``tool_first``, ``describe``,
``step``) whose detail is the want itself, so it crosses every layer (a reading, a chip, a
correction, the store) as the one string those already carry. The trainer's step changes the
tool, the step or the edge it names (``trainer/tool_flow.py``), never a system-prompt line
standing in for it; names are checked against the agent there, where the agent is known. The
words (families, the sentences written into a description or a step, the steps it can add) are
data: ``domain/tool_flow_wishes.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from domain.refusals import excerpt
from domain.trainer import FeedbackAspect

FILE = Path(__file__).with_name("tool_flow_wishes.json")
MAX_TEXT_CHARS = 200  # a sentence for a description or a step's prompt
Kind = Literal[
    "use",
    "drop",
    "first",
    "describe",
    "add_step",
    "remove_step",
    "step_input",
    "drop_input",
    "step_prompt",
    "undescribe",
    "unprompt",
]
# which wants a kind is said as: its family, and whether it is a tool's or a step's
_FAMILY: dict[str, str] = {
    "use": "tool",
    "drop": "tool",
    "first": "tool_first",
    "describe": "describe",
    "add_step": "step",
    "remove_step": "step",
    "step_input": "step",
    "drop_input": "step",
    "step_prompt": "step",
    "undescribe": "describe",
    "unprompt": "step",
}
_NAME = r"[a-z0-9_-]{1,64}"
_WANT = re.compile(
    r"^(?:(?P<action>add|more|less|remove|keep):)?(?P<family>tool_first|tool|describe|step)(?::|$)"
)
_TEXT = r"(?::(?P<text>.+))?"
_TOOL_TEXT = re.compile(rf"^tool:(?P<name>{_NAME}){_TEXT}$", re.S)
_STEP_ADD = re.compile(rf"^add:(?P<name>{_NAME})$")
_STEP_REMOVE = re.compile(rf"^remove:(?P<name>{_NAME})$")
_STEP_INPUT = re.compile(rf"^input:(?P<name>{_NAME})(?P<sign>[+-])=(?P<source>{_NAME})$")
_STEP_PROMPT = re.compile(rf"^prompt:(?P<name>{_NAME}){_TEXT}$", re.S)


@cache
def vocabulary() -> dict[str, Any]:
    """The families, sentences and steps of ``tool_flow_wishes.json``, checked once: a
    family the grammar knows and the file does not is a broken install, said at once."""
    data: dict[str, Any] = json.loads(FILE.read_text(encoding="utf-8"))
    missing = set(_FAMILY.values()) - set(data["families"])
    if missing or "check" not in data["steps"]:
        raise ValueError(f"{FILE.name}: every family needs an entry (missing {sorted(missing)})")
    return data


def families() -> tuple[str, ...]:
    """The want families the grammar reads (``tool``, ``tool_first``, ``describe``, ``step``)."""
    return tuple(vocabulary()["families"])


def sentence(name: str, **fields: str) -> str:
    """A sentence the step writes, from the vocabulary (``use``, ``first_in_step``…)."""
    return vocabulary()["sentences"][name].format(**fields)


def addable_steps() -> list[str]:
    """The steps ``step:add:…`` knows how to write."""
    return sorted(vocabulary()["steps"])


def step_template(kind: str) -> dict[str, str]:
    return vocabulary()["steps"][kind]


@dataclass(frozen=True)
class ToolFlowWish:
    """One typed wish: what it does (``kind``) to which tool or step (``target``), with the
    earlier step it feeds in (``source``) or the sentence it writes (``text``)."""

    kind: Kind
    target: str
    source: str | None = None
    text: str | None = None

    @property
    def family(self) -> str:
        return _FAMILY[self.kind]

    @property
    def about_tool(self) -> bool:
        return self.family != "step"

    @property
    def want(self) -> str:
        """The want it is said as, canonical (``parse``'s inverse)."""
        said = f':"{self.text}"' if self.text else ""
        return {
            "use": f"tool:{self.target}",
            "drop": f"remove:tool:{self.target}",
            "first": f"tool_first:{self.target}",
            "describe": f"describe:tool:{self.target}{said}",
            "add_step": f"step:add:{self.target}",
            "remove_step": f"step:remove:{self.target}",
            "step_input": f"step:input:{self.target}+={self.source}",
            "drop_input": f"step:input:{self.target}-={self.source}",
            "step_prompt": f"step:prompt:{self.target}{said}",
            "undescribe": f"remove:describe:tool:{self.target}{said}",
            "unprompt": f"remove:step:prompt:{self.target}{said}",
        }[self.kind]

    @property
    def key(self) -> str:
        """What two wants must not both move: a tool's use and its removal contradict, a
        step's adding and its removal, an edge given and dropped; two descriptions of one
        tool (the same want twice is one)."""
        if self.kind in ("use", "drop"):
            return f"tool:{self.target}"
        if self.kind in ("add_step", "remove_step"):
            return f"step:{self.target}"
        if self.kind in ("step_input", "drop_input"):
            return f"step:input:{self.target}:{self.source}"
        if self.kind == "undescribe" and not self.text:
            return f"describe:describe:{self.target}"  # no description asked beside it
        if self.kind in ("undescribe", "unprompt"):  # one sentence out, another may go in
            return f"{self.family}:{self.kind}:{self.target}:{(self.text or '').lower()}"
        return f"{self.family}:{self.kind}:{self.target}"

    @property
    def removes(self) -> bool:
        return self.kind in ("drop", "remove_step", "drop_input", "undescribe", "unprompt")

    def undoes(self, made: ToolFlowWish) -> bool:
        """Whether this wish, asked after ``made`` was carried out, asks for its contrary: a
        tool used and dropped, a step added and removed, an input given and taken away, a
        description or a step's sentence added and taken out."""
        if self.target != made.target:
            return False
        if self.kind == "undescribe" and made.kind == "describe":
            return not self.text or _same(self.text, made.text)
        if self.kind == "unprompt" and made.kind == "step_prompt":
            return _same(self.text, made.text)
        return self.key == made.key and self.removes != made.removes

    def aspect(self, quote: str | None = None) -> FeedbackAspect:
        """The wish as a reading holds it: its family, the want as its detail."""
        return FeedbackAspect(
            aspect=vocabulary()["families"][self.family]["aspect"],
            sentiment="negative",
            quote=quote or f"wants {self.want}",
            confidence=1.0,
            want=self.family,
            detail=self.want,
            action="add",  # a removal of a tool is a change of its own, never a take-back
        )

    def words(self) -> str:
        """The wish in the rater's words, as a chip and the say-back put it."""
        said = f" {self.text!r}" if self.text else ""
        described = f":{said}" if said else " says when to use it"
        given = "the question" if self.source == "input" else f"the {self.source} step's output"
        return {
            "use": f"use {self.target}",
            "drop": f"no {self.target}",
            "first": f"{self.target} first, before answering",
            "describe": f"{self.target}'s description{described}",
            "add_step": f"a {self.target} step at the end, given the findings",
            "remove_step": f"no {self.target} step",
            "step_input": f"the {self.target} step given {given}",
            "drop_input": f"the {self.target} step no longer given {given}",
            "step_prompt": f"the {self.target} step's prompt" + (f":{said}" if said else ""),
            "undescribe": f"{self.target}'s description without{said}"
            if said
            else f"{self.target}'s description as it was, before your additions",
            "unprompt": f"the {self.target} step's prompt without{said}",
        }[self.kind]

    def hypothesis(self, **fields: str) -> str:
        """What the next trace shows when the change works."""
        entry = vocabulary()["families"][self.family]
        key = {
            "drop": "hypothesis_removed",
            "step_input": "hypothesis_question" if self.source == "input" else "hypothesis_input",
            "drop_input": "hypothesis_dropped_question"
            if self.source == "input"
            else "hypothesis_dropped_input",
            "add_step": "hypothesis_add",
            "remove_step": "hypothesis_remove",
            "undescribe": "hypothesis_undescribe",
            "unprompt": "hypothesis_unprompt",
        }.get(self.kind, "hypothesis")
        said = {
            "tool": self.target,
            "step": self.target,
            "source": self.source or "",
            "text": self.text or "",
            **fields,
        }
        return (entry.get(key) or entry["hypothesis"]).format(**said)


def is_typed(want: str) -> bool:
    """Whether ``want`` names a tool or flow family (it may still be malformed)."""
    match = _WANT.match(want.strip().lower())
    return match is not None


def parse(want: str) -> ToolFlowWish | None:
    """The typed wish ``want`` says; None when it names no tool or flow family; ValueError
    saying what is wrong with one that does."""
    said = want.strip()
    match = _WANT.match(said.lower())
    if match is None:
        return None
    action, family = match.group("action"), match.group("family")
    rest = said[match.end() :]
    if action == "less" and family == "tool":
        # "use it less": its description says when it is worth a call
        name = rest.lower()
        if not re.fullmatch(_NAME, name):
            raise ValueError(f"{excerpt(want)}: which tool? less:tool:NAME")
        return ToolFlowWish("describe", name, text=sentence("less"))
    if action not in (None, "add", "remove"):
        raise ValueError(
            f"{action}:{family}: a tool or flow wish takes add or remove (and a tool, less)"
        )
    if action == "remove" and family == "step":
        if (found := _STEP_PROMPT.match(lower_head(rest))) is not None:
            return _unprompt(want, found)
        # the picker's "remove" with the flow and a step's name: step:remove:NAME
        name = rest.lower()
        if not re.fullmatch(_NAME, name):
            raise ValueError(
                f"{excerpt(want)}: which step? remove:step:NAME (step:remove:NAME) takes a step "
                'out of the flow; remove:step:prompt:NAME:"a sentence" takes a sentence out of '
                "its prompt"
            )
        return ToolFlowWish("remove_step", name)
    if action == "remove" and family == "describe":
        found = _TOOL_TEXT.match(lower_head(rest))
        if found is None:
            raise ValueError(
                f"{excerpt(want)}: remove:describe:tool:NAME (its description as it was) or "
                'remove:describe:tool:NAME:"a sentence" (that sentence taken out)'
            )
        return ToolFlowWish("undescribe", found.group("name"), text=_text(want, found))
    if action == "remove" and family != "tool":
        raise ValueError(
            f"remove:{family}: taken out this way are a tool (remove:tool:NAME), a step "
            "(step:remove:NAME), what a tool's description was given "
            "(remove:describe:tool:NAME) and a sentence of a step's prompt "
            '(remove:step:prompt:NAME:"a sentence"); undo or revert takes back a change'
        )
    if family in ("tool", "tool_first"):
        name = rest.lower()
        if not re.fullmatch(_NAME, name):
            raise ValueError(f"{excerpt(want)}: which tool? {family}:NAME (e.g. search_documents)")
        kind: Kind = "first" if family == "tool_first" else "drop" if action == "remove" else "use"
        return ToolFlowWish(kind, name)
    if family == "describe":
        found = _TOOL_TEXT.match(lower_head(rest))
        if found is None:
            raise ValueError(f'{excerpt(want)}: describe:tool:NAME or describe:tool:NAME:"…"')
        return ToolFlowWish("describe", found.group("name"), text=_text(want, found))
    return _step(want, lower_head(rest))


def _step(want: str, rest: str) -> ToolFlowWish:
    if found := _STEP_ADD.match(rest):
        kind = found.group("name")
        if kind not in addable_steps():
            raise ValueError(
                f"step:add:{kind}: the step adds only {', '.join(addable_steps())} (step:add:check)"
            )
        return ToolFlowWish("add_step", kind)
    if found := _STEP_REMOVE.match(rest):
        return ToolFlowWish("remove_step", found.group("name"))
    if found := _STEP_INPUT.match(rest):
        target, source = found.group("name"), found.group("source")
        if target == source:
            raise ValueError(f"{excerpt(want)}: a step cannot take its own output")
        edge: Kind = "step_input" if found.group("sign") == "+" else "drop_input"
        return ToolFlowWish(edge, target, source=source)
    if found := _STEP_PROMPT.match(rest):
        return ToolFlowWish("step_prompt", found.group("name"), text=_text(want, found))
    raise ValueError(
        f"{excerpt(want)}: a flow wish is step:add:check, step:remove:STEP, "
        "step:input:STEP+=EARLIER (-= drops it) or step:prompt:STEP"
    )


def _unprompt(want: str, found: re.Match[str]) -> ToolFlowWish:
    """``remove:step:prompt:NAME:"a sentence"``: the sentence taken out of that step's prompt
    (which sentence must be said: a step's prompt is its instructions and its material)."""
    name, text = found.group("name"), _text(want, found)
    if text is None:
        raise ValueError(
            f'{excerpt(want)}: which sentence? remove:step:prompt:{name}:"the sentence" '
            "takes it out of that step's prompt"
        )
    return ToolFlowWish("unprompt", name, text=text)


def _same(said: str | None, other: str | None) -> bool:
    """Two sentences alike but for case, spacing and the closing stop."""

    def norm(text: str | None) -> str:
        return " ".join((text or "").split()).rstrip(".!?").lower()

    return bool(said) and norm(said) == norm(other)


# the names before a want's sentence (describe:tool:NAME:…, step:prompt:NAME:…, or what is
# left of them once the family is read): a sentence the shell or the edit line took the
# quotes off still starts after them
_HEAD = re.compile(
    rf"^(?:(?:add|remove):)?(?:describe:|step:)?(?:tool|prompt):{_NAME}:", re.IGNORECASE
)


def lower_head(rest: str) -> str:
    """The names of ``rest`` in lower case, its sentence (after the names, quoted or not) as
    the rater wrote it."""
    quote = rest.find('"')
    if quote >= 0:
        return rest[:quote].lower() + rest[quote:]
    head = _HEAD.match(rest)
    return rest.lower() if head is None else head.group(0).lower() + rest[head.end() :]


def _text(want: str, found: re.Match[str]) -> str | None:
    raw = found.group("text")
    if raw is None:
        return None
    text = " ".join(raw.split()).strip("\"'\u201c\u201d\u2018\u2019 ")
    if not 2 <= len(text) <= MAX_TEXT_CHARS:
        raise ValueError(f"{excerpt(want)}: the sentence is 2 to {MAX_TEXT_CHARS} characters")
    return text


def of(aspect: FeedbackAspect) -> ToolFlowWish | None:
    """The typed wish a reading's aspect holds (None for any other wish)."""
    if aspect.want not in families() or not aspect.detail:
        return None
    try:
        return parse(aspect.detail)
    except ValueError:
        return None


def from_reading(detail: str | None) -> str | None:
    """The want a tool wish the comment reader found stands for (its detail
    ``name|more|`` asks to use the tool, ``name|more|first`` to call it before answering,
    ``name|less|never`` not to), or None for one no
    want says (used less, or only for some things: "not for arithmetic")."""
    name, direction, context = ((detail or "") + "||").split("|")[:3]
    name = name.strip().lower().replace(" ", "_")
    if not re.fullmatch(_NAME, name):
        return None
    if direction in ("", "more") and not context:
        return f"tool:{name}"
    if direction in ("", "more") and context == "first":
        return f"tool_first:{name}"
    if direction == "less" and context == "never":
        return f"remove:tool:{name}"
    # a call pointed at, and what its place held (domain.trace.pointed), limit nothing
    limited = [c for c in context.split("+") if c and not c.startswith(("call:", "at:"))]
    if direction == "less" and not limited:
        return f"less:tool:{name}"  # used less (a call of the trace named, or none)
    return None
