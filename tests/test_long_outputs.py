"""A long model output is measured in linear time, off the worker's event loop: a megabyte of
punctuation or of mixed text is checked with a true ✓ or ✗ within the measure budget
(trainer/measure_budget.py), the trainer's other measures of output and comment text stay
linear on the runs that made them quadratic, and while one lineage's output is being checked,
another lineage on the same worker answers `state` (through the dev server)."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest
from pydantic import SecretStr

from client import start_session
from domain.checks import NOT_CHECKED, ActiveWish, checklist
from domain.trainer import Amount
from tests.conftest import awaiting, make_spec, wait_for_state
from tests.fake_messages_api import FakeMessagesAPI, text_message
from trainer import checks
from trainer.checks import TIMES, Document
from trainer.claude_trainer import defang
from trainer.credit_assignment import _is_arithmetic
from trainer.measure_budget import MEASURE_BUDGET_SECONDS, measured, within_budget
from workflows.lineage import LineageWorkflow

MODEL = "claude-sonnet-5"
MEGABYTE = 1_000_000
PUNCTUATION = "".join(
    random.Random(61).choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") for _ in range(MEGABYTE)
)
SENTENCE = "The four-day week, perhaps, suits *small* teams: for example, 4 x 10 hours. "
MIXED = (SENTENCE * (MEGABYTE // len(SENTENCE) + 1))[:MEGABYTE]
UNDER_150 = ActiveWish(
    family="shorter", amount=Amount(kind="limit", value=150), quote="under 150 words"
)
NO_HEDGING = ActiveWish(family="direct", quote="no hedging")


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (PUNCTUATION, "✓ at most 150 words (0) · ✓ no hedging"),
        (MIXED, None),  # the words and hedges counted below, without the checks' parse
    ],
    ids=["punctuation", "mixed"],
)
async def test_a_megabyte_output_is_checked_true_within_the_budget(output, expected):
    found = await measured(output, [UNDER_150, NO_HEDGING])
    said = checklist(found.checks)
    assert NOT_CHECKED not in said
    if expected is None:  # every sentence holds 13 words and one "perhaps"
        sentences, rest = divmod(len(output), len(SENTENCE))
        words = sentences * 13 + len(SENTENCE[:rest].split())
        hedges = output.count("perhaps")
        expected = f"✗ at most 150 words ({words}) · ✗ no hedging ('perhaps' {TIMES}{hedges})"
    assert said == expected


async def test_an_output_too_large_to_measure_in_time_is_said_unchecked():
    # a budget no parse of a megabyte meets: said back, not waited out, not a fail
    found = await measured(MIXED, [UNDER_150], budget=0.001)
    assert checklist(found.checks) == NOT_CHECKED
    assert found.words == checks.count_words(MIXED) > 0


def test_word_count_is_unchanged_on_ordinary_text():
    assert checks.count_words("A 4-day week -- not a *5-day* one; _ - | ok.") == 8
    assert Document.of("| a | b |\n|---|---|\n| 1 | -- |").words == 3


@pytest.mark.parametrize(
    ("measure", "text", "expected"),
    [
        # sizes the quadratic patterns took 30 s and more on, beyond the budget:
        # a run of punctuation: the word count retried it from every character
        (lambda t: Document.of(t).words, "-." * 20_000, 0),
        # "<" then a long run of spaces: the framing pattern retried every split of the run
        (defang, "<" + " " * 40_000 + "agent_outpu>", "agent_outpu>"),
        (defang, "<" + " " * 40_000 + "/agent_output>", "</ agent_output>"),
        # a long run of digits: the sum pattern retried it from every digit
        (lambda t: _is_arithmetic({"q": t}), "1" * 40_000 + "a", False),
        (lambda t: _is_arithmetic({"q": t}), "what is 12 x 7?", True),
    ],
    ids=["words", "not-framing", "framing", "digits", "a-sum"],
)
async def test_the_trainers_text_measures_stay_linear_on_long_runs(measure, text, expected):
    found = await within_budget(MEASURE_BUDGET_SECONDS, measure, text)
    assert found == expected or (isinstance(found, str) and found.endswith(expected))


@pytest.mark.parametrize("output", [PUNCTUATION, MIXED], ids=["punctuation", "mixed"])
async def test_another_lineage_answers_state_while_a_megabyte_is_checked(
    client, settings, run_worker, monkeypatch, output
):
    """The check of lineage A's 1 MB output is held at its parse until lineage B, on the same
    worker, has answered `state`: a check on the event loop would hold the query with it."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    parse = Document.of.__func__  # type: ignore[attr-defined]

    def held(cls, text: str) -> Document:
        if len(text) < MEGABYTE:
            return parse(cls, text)
        started.set()
        release.wait(60)  # bounded: the old code holds the loop here, then goes on
        try:
            return parse(cls, text)
        finally:
            finished.set()

    monkeypatch.setattr(Document, "of", classmethod(held))
    other = make_spec()  # the offline model: answers at once
    huge = make_spec(model=MODEL, options={"revisionAttempts": 0})
    with FakeMessagesAPI() as api:
        api.script = [(200, text_message("A short first answer.", MODEL))]
        api.script.append((200, text_message(output, MODEL)))
        claude = settings.model_copy(
            update={"anthropic_api_key": SecretStr("sk-test"), "anthropic_base_url": api.base_url}
        )
        async with run_worker(claude):
            (b,) = await start_session(client, other, settings.task_queue)
            await wait_for_state(b, awaiting(1), timeout=60)
            (a,) = await start_session(client, huge, settings.task_queue)
            await wait_for_state(a, awaiting(1), timeout=60)
            await a.execute_update("submit_score", {"score": 4, "comment": "Under 150 words."})
            assert await asyncio.to_thread(started.wait, 120)
            state = await b.query(LineageWorkflow.state)
            answered_while_checking = not finished.is_set()
            release.set()
            second = await wait_for_state(a, awaiting(2), timeout=120)
    assert state.lineage_id == other.lineage_id("A") and state.cycle == 1
    assert answered_while_checking
    words = checks.count_words(output) if output is MIXED else 0
    mark = "✓" if words <= 150 else "✗"
    assert second.latest_checklist == f"{mark} at most 150 words ({words})"
    assert second.latest_output_words == words
