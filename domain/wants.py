"""Structured wishes sent with a score: ``"warmer"``, ``"remove:example"``, ``"shorter:half"``,
``"example:1"``, ``"shorter:150"``, ``"keep:bullets"``, ``"undo"``, ``"revert:v1"``,
``"revert:start"``, ``"language:german"``, ``"language:german@summary"``,
``'avoid:"the evidence is mixed"'``.

A language is asked of the whole answer, or of a part after ``@`` (``@summary``: the closing
summary); several stand side by side, one per part. ``avoid:"…"`` names a phrase (or a
sentence of the output) that must not appear: checked on every later output.

Tool and flow wishes have a target of their own (``tool:search_documents``,
``remove:tool:calculator``, ``tool_first:search_documents``, ``describe:tool:…``,
``step:add:check``, ``step:input:check+=research``, ``step:prompt:research``): their grammar is
``domain/tool_flow.py``.

A want is ``[action:]family[:amount]``: the action one of add (the default), more, less,
remove, keep; the family one of the trainer's change families; the amount a share of the last
output (half, third, quarter, two-thirds), or a number — a word limit for ``shorter``, a count
for anything else. They are taken as given: the trainer reads no comment for a score that
carries them (the comment is still stored). Validated at the door like the rest of a score:
an unknown family, action or amount is refused with the reason, and nothing changes.
"""

from __future__ import annotations

import difflib

from domain import tool_flow
from domain.answer_parts import LANGUAGES, PARTS, SCOPE_MARK, scoped, unscoped
from domain.change_families import FAMILIES, aspect_of, opposite_of
from domain.refusals import excerpt
from domain.trainer import WISH_ACTIONS, Amount, FeedbackAspect

MAX_WANTS = 10
MAX_WANT_CHARS = 60  # a family, an action and an amount
# a want that carries a sentence (avoid:"…", describe:tool:NAME:"…", step:prompt:STEP:"…"):
# its sentence (at most 200 characters) with the syntax around it
MAX_SENT_WANT_CHARS = 300
SHARES = {"half": 0.5, "third": 0.33, "quarter": 0.25, "two-thirds": 0.67, "three-quarters": 0.75}
# families a want may name beyond the registry: a take-back of the last change, and a return
# to an earlier version ("revert:v2", "revert:start": the prompt and parameters it had)
EXTRA = ("undo", "revert", "avoid")
AVOID = "avoid"  # a want's word for a phrase to avoid; the wish's family is ``banned``
MAX_AVOID_CHARS = 200  # a sentence quoted from the output fits
TAKES_BACK = ("undo", "revert")  # what they take back is changes, not a family's instruction
# the counted unit of a family's count
UNITS = {"example": "examples", "bullets": "bullets", "key_points": "points"}
UNITS_DEFAULT = "lines"


def families() -> list[str]:
    """Every family a want may name."""
    return sorted(
        {*FAMILIES, *EXTRA, *tool_flow.families()} - {"custom", "focus", "tool_use", "preserve"}
    )


def parse(want: str) -> FeedbackAspect:
    """The wish a want stands for, or ValueError saying what is wrong with it."""
    if want.strip().lower().startswith((f"{AVOID}:", f"remove:{AVOID}:")):
        return _avoid(want)
    typed = tool_flow.parse(want)  # a tool or flow wish: its target is its own grammar
    if typed is not None:
        return typed.aspect()
    text = want.strip().lower()
    if not text or len(text) > MAX_WANT_CHARS:
        raise ValueError(f"a want is 1 to {MAX_WANT_CHARS} characters, got {len(text)}")
    parts = text.split(":")
    if len(parts) > 3:
        raise ValueError(f"{excerpt(want)}: a want is [action:]family[:amount]")
    action = "add"
    if parts[0] in WISH_ACTIONS:
        action = parts.pop(0)
    if not parts:
        raise ValueError(f"{excerpt(want)}: names no family")
    family, *rest = parts
    if family not in families():
        raise ValueError(unknown_family(family))
    if family in TAKES_BACK and action not in ("add", "remove"):
        raise ValueError(f"{action}:{family}: {family} takes no action")
    if family == "revert":
        return _revert(want, rest[0] if rest else "")
    if family == "language":
        return _language(want, action, rest[0] if rest else "")
    if family == AVOID:
        raise ValueError('avoid what? avoid:"a phrase"')
    amount = _amount(family, rest[0]) if rest else None
    return FeedbackAspect(
        aspect="overall" if family == "undo" else aspect_of(family),
        sentiment="positive" if action == "keep" else "negative",
        quote=f"wants {text}",
        confidence=1.0,
        want=family,
        detail=str(int(amount.value)) if amount and amount.kind == "limit" else None,
        action="remove" if family == "undo" else action,  # type: ignore[arg-type]
        amount=amount,
    )


def unknown_family(family: str) -> str:
    """Why a family is refused: quoted once, with the known ones it is closest to (the list of
    every family is long, and in ``training-camp score --help`` and domain/want_labels.json)."""
    close = difflib.get_close_matches(family, families(), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}?" if close else "see `training-camp score --help`"
    return f"unknown family {excerpt(family)}; {hint}"


def _revert(want: str, version: str) -> FeedbackAspect:
    """``revert:start`` or ``revert:vN``: back to the lineage's first version, or to version N."""
    number = version.removeprefix("v")
    if version != "start" and not (number.isdigit() and 0 < int(number) <= 100_000):
        raise ValueError(f"{excerpt(want)}: revert to what? revert:start or revert:vN (a version)")
    return FeedbackAspect(
        aspect="overall",
        sentiment="negative",
        quote=f"wants revert:{version}",
        confidence=1.0,
        want="revert",
        detail="start" if version == "start" else number,
        action="remove",
    )


def _language(want: str, action: str, said: str) -> FeedbackAspect:
    """``language:german`` (the whole answer) or ``language:german@summary`` (one part)."""
    name, _, part = said.partition(SCOPE_MARK)
    language = next((lang for lang in LANGUAGES if lang.lower() == name.strip()), None)
    if language is None:
        close = difflib.get_close_matches(name.strip().capitalize(), LANGUAGES, n=2, cutoff=0.6)
        hint = f"did you mean {' or '.join(c.lower() for c in close)}?" if close else ""
        raise ValueError(f"{excerpt(want)}: which language? {hint}".strip())
    if part and part not in PARTS:
        raise ValueError(f"{excerpt(want)}: a part is {', '.join('@' + p for p in PARTS)}")
    if action not in ("add", "remove", "keep"):
        raise ValueError(f"{action}:language: a language takes add, remove or keep")
    return FeedbackAspect(
        aspect=aspect_of("language"),
        sentiment="positive" if action == "keep" else "negative",
        quote=f"wants {want.strip().lower()}",
        confidence=1.0,
        want="language",
        detail=scoped(language, part or None),
        action=action,  # type: ignore[arg-type]
    )


def _avoid(want: str) -> FeedbackAspect:
    """``avoid:"a phrase"``: the phrase (quotes optional) must not appear in the output;
    ``remove:avoid:"a phrase"`` takes that back (the phrase is no longer checked)."""
    said = want.strip()
    taken_back = said.lower().startswith("remove:")
    said = said[len("remove:") :] if taken_back else said
    phrase = " ".join(said[len(AVOID) + 1 :].split()).strip("\"'\u201c\u201d\u2018\u2019 ")
    if len(phrase) < 2 or len(phrase) > MAX_AVOID_CHARS:
        raise ValueError(f'avoid:"…" names a phrase of 2 to {MAX_AVOID_CHARS} characters')
    return FeedbackAspect(
        aspect="overall",
        sentiment="negative",
        quote=f'wants {"remove:" if taken_back else ""}avoid:"{phrase}"',
        confidence=1.0,
        want="banned",
        detail=phrase.lower(),
        action="remove" if taken_back else "add",
    )


def version_of(detail: str | None) -> int | None:
    """The version a revert's detail names (``start`` is version 1)."""
    if detail == "start":
        return 1
    return int(detail) if detail and detail.isdigit() else None


def _amount(family: str, text: str) -> Amount:
    if text in SHARES:
        if family != "shorter":
            raise ValueError(f"{family}:{text}: a share of the length is for shorter only")
        return Amount(kind="share", value=SHARES[text])
    if not text.isdigit() or not 0 < int(text) <= 10_000:
        raise ValueError(
            f"{family}: amount {excerpt(text)}: an amount is {', '.join(SHARES)} or a number "
            "from 1 to 10000"
        )
    if family == "shorter":
        return Amount(kind="limit", value=int(text), unit="words")
    return Amount(kind="count", value=int(text), unit=UNITS.get(family, UNITS_DEFAULT))


# Which way a want moves its family: wants of one family that move it different ways (or by
# different amounts) contradict each other. Adding and keeping agree: "keep:bullets" and
# "more:bullets" keep the bullets there are and add some.
_DIRECTION = {"add": "up", "more": "up", "keep": "up", "less": "down", "remove": "out"}


def validated(wants: list[str]) -> list[str]:
    """``wants`` if every one of them parses (at most ``MAX_WANTS``) and none contradicts
    another: one family moved two ways or by two amounts ("bullets" and "remove:bullets"), or
    a family and its registered opposite moved the same way ("shorter" and "longer",
    "keep:prose" and "bullets"; ``domain/change_families.py``), else ValueError."""
    if len(wants) > MAX_WANTS:
        raise ValueError(f"at most {MAX_WANTS} wants, got {len(wants)}")
    seen: dict[str, tuple[str, str, str | None]] = {}  # family → (want, direction, amount)
    for want in wants:
        wish = parse(want)
        family = _kind(wish)
        typed = tool_flow.of(wish)
        direction = "out" if typed and typed.removes else _DIRECTION[wish.action or "add"]
        # how much, or which version a revert goes back to
        amount = wish.amount.model_dump_json() if wish.amount else wish.detail
        if family in seen:
            first, first_direction, first_amount = seen[family]
            amounts_differ = None not in (amount, first_amount) and amount != first_amount
            if direction != first_direction or amounts_differ:
                raise _contradiction(first, want)
        for other in opposites(family):
            # "shorter" and "longer", "less:formal" and "less:casual"; a take-back of each
            # ("remove:shorter", "remove:longer") asks for neither, and "shorter" with
            # "less:longer" for the same thing
            if other in seen and seen[other][1] == direction != "out":
                raise _contradiction(seen[other][0], want, "opposite families")
        if family not in seen or amount is not None:
            seen[family] = (want, direction, amount)
    return wants


def _kind(wish: FeedbackAspect) -> str:
    """What two wants must not both move: a family; a language per part (several languages
    for several parts stand side by side); each phrase to avoid."""
    family = wish.want or ""
    if (typed := tool_flow.of(wish)) is not None:
        return typed.key
    if family == "language":
        return f"language{SCOPE_MARK}{unscoped(wish.detail)[1] or ''}"
    if family == "banned":
        return f"banned:{wish.detail}"
    return family


def opposites(family: str) -> set[str]:
    """The families registered as ``family``'s opposite, or as having it for theirs."""
    return {f for f in FAMILIES if opposite_of(f) == family} | (
        {opposite} if (opposite := opposite_of(family)) else set()
    )


def _contradiction(first: str, second: str, why: str | None = None) -> ValueError:
    """Two wants that cannot both be acted on, named (each parsed, so short and plain)."""
    because = f" ({why})" if why else ""
    return ValueError(
        f"{first.strip().lower()} and {second.strip().lower()} contradict each other{because}; "
        "say which you meant"
    )


def render(aspect: FeedbackAspect) -> str | None:
    """The want an aspect of a reading stands for (``parse``'s inverse), or None for one no
    want can say: criticism or praise without a wish, a family wants do not name. An amount
    wants cannot say (a count on ``shorter``, an odd share) is left off: the wish stays."""
    family = aspect.want
    if (typed := tool_flow.of(aspect)) is not None:
        return typed.want
    if family == "tool_use":  # a tool the comment reader found: used, or never used
        return tool_flow.from_reading(aspect.detail)
    if family == "banned" and aspect.detail:
        return f'{AVOID}:"{aspect.detail}"'
    if family == "language":
        return _language_text(aspect)
    if not family or family not in families():
        return None
    if family == "undo":
        return "undo"
    if family == "revert":
        return f"revert:{'start' if aspect.detail == 'start' else f'v{aspect.detail}'}"
    action = aspect.action or ("keep" if aspect.sentiment == "positive" else "add")
    text = family if action == "add" else f"{action}:{family}"
    amount = _amount_text(family, aspect.amount)
    return f"{text}:{amount}" if amount else text


def _language_text(aspect: FeedbackAspect) -> str | None:
    language, part = unscoped(aspect.detail)
    if language not in LANGUAGES:
        return None  # a language the checks cannot tell: the step reads it from the comment
    action = aspect.action or ("keep" if aspect.sentiment == "positive" else "add")
    said = f"language:{language.lower()}" + (f"{SCOPE_MARK}{part}" if part in PARTS else "")
    return said if action == "add" else f"{action}:{said}"


def _amount_text(family: str, amount: Amount | None) -> str | None:
    if amount is None:
        return None
    if amount.kind == "share":
        if family != "shorter":
            return None
        return min(SHARES, key=lambda name: abs(SHARES[name] - amount.value))
    if (amount.kind == "limit") != (family == "shorter") or not 0 < amount.value <= 10_000:
        return None
    return str(int(amount.value))


def wants_of(aspects: list[FeedbackAspect]) -> list[str]:
    """A reading as wants, in its order, each once (what a correction says it superseded)."""
    return list(dict.fromkeys(w for w in map(render, aspects) if w))[:MAX_WANTS]


def from_options(wanted: list[str], removed: list[str], amounts: list[str]) -> list[str]:
    """The wants a command line names (``--want warmer --remove example --amount length=half``):
    each ``--remove F`` is ``remove:F``, each ``--amount F=A`` is ``F:A`` (``length`` stands for
    ``shorter``). ValueError says which one is wrong."""
    found = [*wanted, *(f"remove:{family}" for family in removed)]
    measured: list[str] = []
    for given in amounts:
        family, sep, amount = given.partition("=")
        if not sep or not family.strip() or not amount.strip():
            raise ValueError(f"--amount {excerpt(given)}: expected FAMILY=AMOUNT, e.g. length=half")
        family = family.strip().lower()
        measured.append(f"{'shorter' if family == 'length' else family}:{amount.strip().lower()}")
    # "--want shorter --amount length=half" is one wish, with its amount
    sized = {m.split(":")[0] for m in measured}
    found = [w for w in found if w.strip().lower() not in sized]
    # names in lower case; a quoted sentence (avoid:"…", describe:…:"…") as the rater wrote it
    return validated([tool_flow.lower_head(w.strip()) for w in [*found, *measured]])
