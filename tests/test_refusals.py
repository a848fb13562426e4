"""Validation is whole, and its answers are short (issue 61): wants naming a family and its
registered opposite are refused with the pair named, and every refusal of a score, correction,
directive or lock keeps to the bounds docs/reliability.md promises — under 400 characters,
quoting at most 80 characters of the bad input, once. Through the validators themselves here;
through the dev server in tests/test_feedback_guards.py."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain import wants
from domain.change_families import opposite_of
from domain.feedback import parse_correction, parse_directive, parse_lock, parse_score
from domain.refusals import EXCERPT_CHARS, MAX_REASON_CHARS, excerpt
from services.reading_prompt import edited

# families a want may name, each with its registered opposite (read from the registry)
OPPOSED = sorted(
    (family, opposite)
    for family in wants.families()
    if (opposite := opposite_of(family)) is not None and opposite in wants.families()
)


def refusal(check: Callable[..., Any], *args: Any) -> str:
    with pytest.raises(ValueError) as refused:
        check(*args)
    return str(refused.value)


def test_the_registry_has_the_opposites_the_issue_names() -> None:
    pairs = {frozenset(p) for p in OPPOSED}
    for pair in [("shorter", "longer"), ("casual", "formal"), ("prose", "bullets")]:
        assert frozenset(pair) in pairs
    assert {frozenset(("simpler", "technical")), frozenset(("direct", "hedge"))} <= pairs
    assert len(OPPOSED) >= 10  # both ways of each, and the list forms with prose


@pytest.mark.parametrize(("family", "opposite"), OPPOSED)
def test_a_family_and_its_opposite_are_refused_with_the_pair_named(
    family: str, opposite: str
) -> None:
    for asked in ([family, opposite], [f"more:{family}", opposite], [f"keep:{family}", opposite]):
        why = refusal(wants.validated, asked)
        assert f"{asked[0]} and {asked[1]} contradict each other" in why, why
        assert "opposite" in why
    why = refusal(parse_score, {"score": 3, "wants": [family, opposite]})
    assert why.startswith(f"wants: {family} and {opposite} contradict each other"), why
    why = refusal(parse_correction, {"wants": [opposite, family], "rater": "ana", "cycle": 1})
    assert f"{opposite} and {family} contradict each other" in why
    # less of both asks for two opposite things too
    assert "contradict" in refusal(wants.validated, [f"less:{family}", f"less:{opposite}"])


def test_wants_that_agree_across_opposites_are_taken() -> None:
    # less of one is more of the other; a take-back of each asks for neither; a form that
    # is no opposite of prose goes with it
    for agreeing in (
        ["shorter", "less:longer"],
        ["remove:shorter", "remove:longer"],
        ["remove:bullets", "prose"],
        ["casual", "remove:formal"],
        ["prose", "headings"],
        ["shorter:half", "warmer"],
    ):
        assert wants.validated(agreeing) == agreeing
        assert parse_score({"score": 5, "wants": agreeing}).wants == agreeing


def test_the_issue_s_long_refusals_are_short_and_quote_once() -> None:
    # an unknown want of 25 characters was refused in 407 characters, quoting it three times
    # and listing all 27 families; one of 60 in 512, quoting 180 characters of it
    for want in ("x" * 25, "y" * 60, "more:" + "z" * 55):
        why = refusal(parse_score, {"score": 3, "wants": [want]})
        assert len(why) < MAX_REASON_CHARS, why
        family = want.removeprefix("more:")
        assert why.count(family) == 1 and "unknown family" in why, why
        assert "conclusion_first" not in why  # the families are not all listed
    assert "did you mean shorter" in refusal(parse_score, {"score": 3, "wants": ["shortr"]})


def test_an_escaped_quotation_is_bounded_like_plain_text() -> None:
    quoted = excerpt("\x01" * 200)
    assert quoted.endswith("… (200 characters)")
    assert len(quoted.split("…")[0]) <= EXCERPT_CHARS + 1
    assert excerpt("short") == "'short'" and excerpt(7) == "7"


# ---- every refusal, generated -------------------------------------------------------------

# Input text is tagged so that the test can find where a reason quotes it: each string starts
# with its own tag (Q0Q, Q1Q, …; no reason's own words hold a Q next to a digit), followed by
# text of any kind, or of the characters wants are made of.
_filler = st.one_of(
    st.text(max_size=300),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz:_-0123456789 ", max_size=120),
    st.sampled_from([*wants.families(), "more:shorter", "shorter:half", "remove:bullets"]),
)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**12), 10**12), st.floats(allow_nan=False), _filler
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=12), st.dictionaries(_filler, inner, max_size=4)
    ),
    max_leaves=14,
)
_wants = st.lists(
    st.one_of(st.sampled_from([w for pair in OPPOSED for w in pair]), _filler), max_size=12
)
_fields = {
    "score": st.one_of(st.floats(-5, 15), _values),
    "comment": _values,
    "rater": _values,
    "cycle": _values,
    "output_id": _values,
    "wants": st.one_of(_wants, _values),
    "evaluation_id": _values,
    "kind": st.one_of(st.sampled_from(["sticky", "oneshot"]), _values),
    "content": _values,
    "reason": _values,
}
payloads = st.one_of(
    _values,
    st.fixed_dictionaries(
        {},
        optional={**_fields, "extra": _values, "k" * 90: _values},
    ),
)
CHECKS = [parse_score, parse_correction, parse_directive, parse_lock]


def _tagged(value: Any, tags: Iterator[int]) -> Any:
    """``value`` with every string in it (keys too) prefixed by a tag of its own."""
    if isinstance(value, str):
        return f"Q{next(tags)}Q{value}"
    if isinstance(value, list):
        return [_tagged(v, tags) for v in value]
    if isinstance(value, dict):
        return {
            (k if k in _fields else _tagged(k, tags)): _tagged(v, tags) for k, v in value.items()
        }
    return value


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)


def assert_within_bounds(reason: str, sent: Any) -> None:
    assert len(reason) < MAX_REASON_CHARS, (len(reason), reason)
    said = reason.casefold()  # a want is quoted as read: lower case
    for text in _strings(sent):
        tag = re.match(r"Q\d+Q", text)
        if tag is None:
            continue  # a field name the payload model knows
        assert said.count(tag.group().casefold()) <= 1, (tag.group(), reason)  # once at most
        body = text[tag.end() :].casefold()
        for start in range(len(body) - EXCERPT_CHARS):  # never more than 80 in a row
            window = body[start : start + EXCERPT_CHARS + 1]
            assert window not in said, (window, reason)


@settings(
    max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(payload=payloads, check=st.sampled_from(CHECKS))
def test_every_refusal_is_short_and_quotes_its_input_once(payload: Any, check: Any) -> None:
    sent = _tagged(payload, iter(range(10**6)))
    try:
        check(sent)
    except ValueError as refused:
        assert_within_bounds(str(refused), sent)


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(asked=_wants, line=_filler)
def test_every_refusal_of_wants_is_short_and_quotes_them_once(asked: list[str], line: str) -> None:
    # wants as a score carries them, and as `training-camp score` / `correct` edit them
    for check, sent in (
        (wants.validated, asked),
        (wants.from_options, ([f"Q1Q{line}"], [], [f"length=Q2Q{line}"])),
        (lambda text: edited([], text), f"--want Q3Q{line.replace(chr(39), '')}"),
    ):
        try:
            check(*sent) if isinstance(sent, tuple) else check(sent)
        except ValueError as refused:
            assert_within_bounds(str(refused), sent)
