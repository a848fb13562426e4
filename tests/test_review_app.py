"""The review inbox in a real browser (headless Chromium through Selenium): the inbox, the
rater's name asked once and required, scoring from the keyboard, the question each output
answers, the next output arriving without a reload, the prompt diff (parameters named) and the
chart, the change behind the output kept on the card and the verdict of the last score only,
the lineage's own validation answering inline, what raters wrote shown as text, the trace of
each output (every step's model and tool calls) beside it, collapsed until opened, and the token
required when one is set."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from client import start_session
from domain import wants
from domain.agent import AgentRef
from domain.trainer import EvolutionChange, ScoreAnalysis, change_key
from review.app import create_app
from review.server import ReviewServer
from tests.browser import headless_chromium
from tests.conftest import awaiting, lineage_history, make_spec, wait_for_state
from tests.test_demo_command import free_port
from tests.test_tool_trace import HANDBOOK, research_spec
from workflows.lineage import LineageWorkflow

TOKEN = "a-review-token-of-some-length"


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    chrome = headless_chromium()
    yield chrome
    chrome.quit()


@pytest.fixture
async def inbox_server(client, store) -> AsyncIterator[Callable[..., Any]]:
    """Start the review app on a free port (``token`` turns authentication on)."""
    servers: list[ReviewServer] = []

    async def start(token: str | None = None) -> ReviewServer:
        server = ReviewServer(create_app(client, store, token=token), "127.0.0.1", free_port())
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


async def on(browser: WebDriver, call: Callable[..., Any], *args: Any) -> Any:
    """A Selenium call off the event loop (the app under test serves from it)."""
    return await asyncio.to_thread(call, *args)


async def until(browser: WebDriver, script: str, timeout: float = 30.0) -> Any:
    """Poll a JavaScript expression in the page until it is truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await on(browser, browser.execute_script, f"return {script};")
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never true in the page: {script}")
        await asyncio.sleep(0.1)


async def first_visit(browser: WebDriver, page: str, score: str) -> Any:
    """A session's page opened for the first time: the name typed (ana), Tab, ``score``, Tab;
    the comment field, which has the focus."""
    await on(browser, browser.get, page)
    await until(browser, "document.activeElement.id == 'rater'")
    await on(browser, browser.switch_to.active_element.send_keys, "ana", Keys.TAB)
    await until(browser, "document.activeElement.classList.contains('score-input')")
    await on(browser, browser.switch_to.active_element.send_keys, score, Keys.TAB)
    return await on(browser, lambda: browser.switch_to.active_element)


def card(lineage_id: str) -> str:
    return f"document.getElementById('lineage-{lineage_id}')"


def score_said(card_js: str) -> str:
    """The score form's say-back: "ok" as sent, or "Earlier: …" once the next output is shown
    (which, with one rater, may come first), without that prefix."""
    return (
        "(m => m.classList.contains('ok') || m.textContent.startsWith('Earlier: ')"
        " ? m.textContent.replace(/^Earlier: /, '') : null)"
        f"({card_js}.querySelector('form.score .message'))"
    )


QUESTIONS = [
    "Explain the four-day work week for small software teams.",
    "Explain code review for a team of three.",
    "Explain on-call rotations for a small team.",
]
COMMENT = "Way too long, <b>wanted</b> quick bullets. It wanders off on tangents."


def post(
    origin: str, path: str, form: dict[str, str] | list[tuple[str, str]]
) -> tuple[int, dict[str, str]]:
    """A form posted as the page posts it (from its origin, without a browser), and the JSON
    answer."""
    body = urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(
        f"{origin}{path}", data=body, method="POST", headers={"Origin": origin}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def test_a_rater_scores_from_the_keyboard_and_sees_the_next_output_arrive(
    client, store, settings, run_worker, browser, inbox_server
):
    spec = make_spec(labels=("A", "B"), inputs=QUESTIONS)
    a, b = spec.lineage_id("A"), spec.lineage_id("B")
    async with run_worker():
        handles = await start_session(client, spec, settings.task_queue)
        for handle in handles:
            await wait_for_state(handle, awaiting(1))
        server = await inbox_server()

        # The inbox: both outputs, oldest first, counted under their session, each with the
        # question it answers
        await on(browser, browser.get, f"{server.url}/?session={spec.session_id}")
        rows = await until(browser, "document.querySelectorAll('#inbox-rows tr').length == 2")
        assert rows
        text = await on(browser, lambda: browser.find_element(By.TAG_NAME, "main").text)
        assert f"{spec.session_id} 2" in text and "Explain" not in text.split("output")[0]
        assert text.count(QUESTIONS[0]) == 2

        # The review screen, first visit: the rater's name is asked for first; a score without
        # it is refused (by the page, and by the server: no made-up "reviewer")
        await on(browser, browser.get, f"{server.url}/sessions/{spec.session_id}")
        await until(browser, "document.activeElement.id == 'rater'")
        field = await on(
            browser,
            lambda: browser.execute_script(f"return {card(a)}.querySelector('.score-input');"),
        )
        await on(browser, field.send_keys, "3", Keys.ENTER)
        refused = await until(
            browser, f"{card(a)}.querySelector('form.score .message.error')?.textContent"
        )
        assert "Type your name first" in refused
        assert await on(browser, browser.execute_script, "return document.activeElement.id;") == (
            "rater"
        )
        status, answer = await asyncio.to_thread(
            post, server.url, f"/lineages/{a}/score", {"score": "3", "cycle": "1"}
        )
        assert status == 422 and "Type your name" in answer["error"]
        assert (await handles[0].query("state"))["score_history"] == []  # nothing was sent
        # typed once (Tab goes on to the score field), remembered on the next visit
        await on(browser, browser.switch_to.active_element.send_keys, "ana", Keys.TAB)
        await until(browser, "document.activeElement.classList.contains('score-input')")
        await on(browser, browser.refresh)
        await until(browser, "document.getElementById('rater').value == 'ana'")

        # Type a score, Tab, a comment, Enter; the score field has the focus, and the page is
        # not scrolled past the output it scores, nor past the question it answers
        await on(browser, browser.execute_script, "window.notReloaded = true;")
        await until(browser, "document.activeElement.classList.contains('score-input')")
        question = await on(
            browser,
            browser.execute_script,
            f"return {card(a)}.querySelector('.question').textContent;",
        )
        assert question == f"Question (cycle 1): {QUESTIONS[0]}"
        output_top = await on(
            browser,
            browser.execute_script,
            f"return {card(a)}.querySelector('.output').getBoundingClientRect().top;",
        )
        assert output_top >= 0  # the start of the output is on screen
        focused = await on(browser, lambda: browser.switch_to.active_element)
        await on(browser, focused.send_keys, "3", Keys.TAB)
        comment = await on(browser, lambda: browser.switch_to.active_element)
        await on(browser, comment.send_keys, COMMENT, Keys.ENTER)
        # said back at once: how the comment was read
        message = await until(browser, score_said(card(a)))
        assert message.startswith("score 3 accepted for cycle 1. Read as: shorter ('Way too long'")

        # Cycle 2's output arrives by itself (no reload), with its own question, and what
        # changed and why
        await until(browser, f"{card(a)}.querySelector('header').dataset.cycle == '2'")
        assert await on(browser, browser.execute_script, "return window.notReloaded === true;")
        question = await on(
            browser,
            browser.execute_script,
            f"return {card(a)}.querySelector('.question').textContent;",
        )
        assert question == f"Question (cycle 2): {QUESTIONS[1]}"
        # the form scores cycle 2 now: cycle 1's acceptance stays, said as earlier
        said, said_as = await on(
            browser,
            browser.execute_script,
            f"const m = {card(a)}.querySelector('form.score .message');"
            "return [m.textContent, m.className];",
        )
        assert said.startswith("Earlier: score 3 accepted for cycle 1.") and "ok" not in said_as
        body = await on(browser, browser.execute_script, f"return {card(a)}.innerHTML;")
        assert "v1 → v2" in body
        # a word-level diff: the words that changed, not the whole prompt struck and re-added
        removed, added, same = await on(
            browser,
            browser.execute_script,
            f"const d = {card(a)}.querySelector('pre.diff');"
            "return [Array.from(d.querySelectorAll('del'), e => e.textContent).join(' '),"
            " Array.from(d.querySelectorAll('ins'), e => e.textContent).join(' '),"
            " Array.from(d.querySelectorAll('.same'), e => e.textContent).join('')];",
        )
        assert "comprehensive" in removed and "brief" in added
        assert "You are an expert analyst." in same and "You are" not in removed
        # a parameter's change names the parameter, in the list of changes and in the diff
        changes, parameters = await on(
            browser,
            browser.execute_script,
            f"return [Array.from({card(a)}.querySelectorAll('ul.changes li'), e => e.textContent),"
            f" {card(a)}.querySelector('ul.parameters').textContent];",
        )
        assert "temperature 0.7 → 0.4" in changes and "temperature 0.7 → 0.4" in parameters
        assert not any(c.startswith("modify: ") for c in changes)
        assert await on(
            browser,
            browser.execute_script,
            f"return {card(a)}.querySelectorAll('svg.chart circle').length == 1"
            f" && {card(a)}.querySelector('.legend').textContent.includes('refuted');",
        )
        # what the rater wrote is shown as text, never as markup
        previous = await on(
            browser,
            browser.execute_script,
            f"return [{card(a)}.querySelector('.previous').innerText,"
            f" {card(a)}.querySelectorAll('.previous b').length];",
        )
        assert previous == [f"Last score: 3 — “{COMMENT}”", 0]

        # B: a score out of range is refused by the lineage, inline, and nothing changes
        field = await on(
            browser,
            lambda: browser.execute_script(f"return {card(b)}.querySelector('.score-input');"),
        )
        await on(browser, field.send_keys, "11", Keys.ENTER)
        error = await until(
            browser, f"{card(b)}.querySelector('form.score .message.error')?.textContent"
        )
        assert "less than or equal to 10" in error
        state = await handles[1].query("state")
        assert state["cycle"] == 1 and state["status"] == "awaiting_score"

        async def score_a(value: str, said: str, cycle: int) -> None:
            field = await on(
                browser,
                lambda: browser.execute_script(f"return {card(a)}.querySelector('.score-input');"),
            )
            await on(browser, field.send_keys, value, Keys.TAB)
            comment = await on(browser, lambda: browser.switch_to.active_element)
            await on(browser, comment.send_keys, said, Keys.ENTER)
            await until(browser, f"{card(a)}.querySelector('header').dataset.cycle == '{cycle}'")

        def evolution_and_verdict() -> Any:
            return browser.execute_script(
                f"const e = {card(a)}.querySelector('section.evolution');"
                "return [e && e.querySelector('h3').textContent.replace(/\\s+/g, ' ').trim(),"
                " e && e.querySelector('pre.diff') !== null,"
                f" {card(a)}.querySelector('.last-verdict').textContent];"
            )

        # A again: praise keeps v2; cycle 3's output is v2's too, so the card keeps v2's change
        # and its diff, and the verdict line is this score's
        await score_a("9", "Spot on, thank you.", 3)
        kept = await until(browser, f"{card(a)}.querySelector('.last-step')?.textContent")
        assert "kept v2" in kept
        heading, diff, verdict = await on(browser, evolution_and_verdict)
        assert heading == "v1 → v2 validated by cycle 2's score" and diff
        assert verdict.startswith("Verdict of the last score (cycle 2) on the change before it:")
        assert "validated: shorter" in verdict
        # Praised again: this score had no change to judge, and the card says so rather than
        # show cycle 2's verdict as this one's; v2's change stays, with its own verdict
        await score_a("9", "Spot on again.", 4)
        heading, diff, verdict = await on(browser, evolution_and_verdict)
        assert heading == "v1 → v2 validated by cycle 2's score" and diff
        assert verdict == (
            "Verdict of the last score (cycle 3) on the change before it: none, it had no "
            "change to judge"
        )

    # The score landed in Temporal as one from the CLI would, with the rater's name
    updates = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request
        async for e in lineage_history(client, handles[0])  # across continue-as-new
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]
    sent = json.loads(updates[0].input.args.payloads[0].data)
    assert updates[0].input.name == "submit_score"
    # naming the output on the page (a re-run of its cycle cannot take the score), with the
    # reading the page previewed and its plan, confirmed as they were
    confirmed = sent.pop("changes")
    assert sent == {
        "rater": "ana",
        "score": 3.0,
        "comment": COMMENT,
        "cycle": 1,
        "output_id": f"{a}:c1",
        "wants": ["shorter", "steadier"],
    }
    made = next(r for r in store.queries.evolution_records(a) if r.to_version == 2)
    assert confirmed == [
        change_key(EvolutionChange.model_validate(c)) for c in json.loads(made.changes)
    ]
    first, *_ = store.queries.evaluations(a)
    assert (first.score, first.rater) == (3.0, "ana")


async def test_a_rater_corrects_a_reading_from_the_keyboard_and_sees_the_cycle_run_again(
    client, store, settings, run_worker, browser, inbox_server
):
    spec = make_spec(inputs=QUESTIONS)
    a = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        server = await inbox_server()
        comment = await first_visit(browser, f"{server.url}/sessions/{spec.session_id}", "4")
        await on(browser, comment.send_keys, "This sounds like a legal disclaimer.", Keys.ENTER)
        said = await until(browser, score_said(card(a)))
        assert "Read as: direct" in said  # not what the rater meant: they wanted warmth
        await until(
            browser,
            f"{card(a)}.querySelector('header').dataset.cycle == '2'"
            f" && {card(a)}.querySelector('header').dataset.status == 'awaiting_score'",
        )
        misread_output = await on(
            browser,
            browser.execute_script,
            f"return {card(a)}.querySelector('.output').textContent;",
        )

        # the misread wish is a chip: Enter removes it; the picker adds the one meant
        chips = f"Array.from({card(a)}.querySelectorAll('form.correct .chip'), c => c.dataset.want)"
        assert await until(browser, chips) == ["direct"]
        await on(
            browser,
            browser.execute_script,
            f"{card(a)}.querySelector('form.correct .chip').focus();",
        )
        await on(browser, browser.switch_to.active_element.send_keys, Keys.ENTER)
        assert await until(browser, f"{chips}.length == 0 && document.activeElement.className")
        await on(browser, browser.switch_to.active_element.send_keys, Keys.TAB)  # → family
        await on(browser, browser.switch_to.active_element.send_keys, "warmer", Keys.TAB)
        await on(browser, browser.switch_to.active_element.send_keys, Keys.ENTER)  # amount: add
        assert await until(browser, f"{chips}.join() == 'warmer'")
        for _ in range(2):  # past Add, to "Correct the reading"
            await on(browser, browser.switch_to.active_element.send_keys, Keys.TAB)
        await on(browser, browser.switch_to.active_element.send_keys, Keys.ENTER)

        # the lineage takes it, makes v3 from v1 and runs cycle 2 again: the card shows it live
        await until(
            browser,
            f"{card(a)}.querySelector('header').dataset.cycle == '2'"
            f" && {card(a)}.querySelector('header').textContent.includes('agent v3')"
            f" && {card(a)}.querySelector('header').dataset.status == 'awaiting_score'",
        )
        rerun_output, reading, heading = await on(
            browser,
            browser.execute_script,
            f"return [{card(a)}.querySelector('.output').textContent,"
            f" {card(a)}.querySelector('.last-reading').textContent,"
            f" {card(a)}.querySelector('section.evolution h3').textContent];",
        )
        # corrected again, to wishes that make the same agent (an approval of what it does not
        # carry changes nothing): the card says so at once
        said = f"{card(a)}.querySelector('form.correct .message.ok')?.textContent"
        assert "cycle 2 runs again on v3" in await until(browser, said)
        assert await until(browser, f"{chips}.join() == 'warmer'")
        await on(
            browser,
            browser.execute_script,
            f"{card(a)}.querySelector('form.correct .pick-action').focus();",
        )
        await on(browser, browser.switch_to.active_element.send_keys, "keep", Keys.TAB)
        await on(browser, browser.switch_to.active_element.send_keys, "table", Keys.TAB)
        await on(browser, browser.switch_to.active_element.send_keys, Keys.ENTER)
        assert await until(browser, f"{chips}.join() == 'warmer,keep:table'")
        await on(
            browser,
            browser.execute_script,
            f"{card(a)}.querySelector('form.correct button[type=submit]').focus();",
        )
        await on(browser, browser.switch_to.active_element.send_keys, Keys.ENTER)
        nothing = await until(browser, f"{said}?.includes('nothing changes') && {said}")
        assert nothing.startswith("Read as: warmer")
        assert nothing.endswith(
            "kept: table; corrected by ana; nothing changes: the corrected reading makes v3 again"
        )
        state = await handle.query(LineageWorkflow.state)
    assert rerun_output != misread_output
    assert reading.startswith("Read as: warmer")
    assert "v2 → v3 (correction)" in " ".join(heading.split())
    # the second correction made no new version and ran nothing again
    assert (state.cycle, state.agent_version) == (2, 3)
    assert state.last_wants == ["warmer", "keep:table"]
    assert [a.agent_version for a in store.queries.artifacts(a) if a.cycle == 2] == [2, 3]
    first, second = store.queries.labelled_examples(spec.session_id)
    assert (first.corrected, first.read_as, first.rater) == (["warmer"], ["direct"], "ana")
    assert (second.corrected, second.read_as) == (["warmer", "keep:table"], ["warmer"])


async def test_the_reading_is_previewed_as_chips_edited_and_acted_on_exactly(
    client, store, settings, run_worker, browser, inbox_server
):
    spec = make_spec(inputs=QUESTIONS)
    a = spec.lineage_id("A")
    chips = f"Array.from({card(a)}.querySelectorAll('form.score .chip'), c => c.dataset.want)"
    words = (
        f"Array.from({card(a)}.querySelectorAll('form.score .chip'),"
        " c => c.getAttribute('aria-label'))"
    )
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        server = await inbox_server()
        comment = await first_visit(browser, f"{server.url}/sessions/{spec.session_id}", "3")
        await on(browser, comment.send_keys, "Way too long, wanted quick bullets. It wanders off")

        # as the rater types, the reading appears under the comment, in human words
        assert await until(browser, f"{chips}.join() == 'shorter,bullets,steadier' && {words}")
        assert await on(browser, browser.execute_script, f"return {words};") == [
            "remove shorter",
            "remove bullet points",
            "remove stay on topic",
        ]
        said = await on(
            browser,
            browser.execute_script,
            f"return {card(a)}.querySelector('form.score .reading .said').textContent;",
        )
        assert said.startswith("Read as: shorter ('Way too long')")
        assert (await handle.query(LineageWorkflow.state)).score_history == []  # nothing sent

        # Enter on a chip removes it; the picker adds one, from the keyboard
        await on(
            browser,
            browser.execute_script,
            f"{card(a)}.querySelector('form.score .chip[data-want=bullets]').focus();",
        )
        await on(browser, browser.switch_to.active_element.send_keys, Keys.ENTER)
        assert await until(browser, f"{chips}.join() == 'shorter,steadier'")
        await on(
            browser,
            browser.execute_script,
            f"{card(a)}.querySelector('form.score .pick-family').focus();",
        )
        await on(browser, browser.switch_to.active_element.send_keys, "table", Keys.TAB)
        await on(browser, browser.switch_to.active_element.send_keys, Keys.ENTER)  # amount: add
        assert await until(browser, f"{chips}.join() == 'shorter,steadier,table'")
        # typing on keeps the edits: a fresh reading, the rater's removal and addition over it
        await on(browser, comment.send_keys, " on tangents.")
        await asyncio.sleep(0.6)
        assert await until(browser, f"{chips}.join() == 'shorter,steadier,table'")
        # under the chips, the step's plan for them: every change it would make; a click
        # leaves one out
        lead = f"{card(a)}.querySelector('form.score .plan-lead').textContent"
        plan = (
            f"Array.from({card(a)}.querySelectorAll('form.score .plan .change'),"
            " c => [c.dataset.key, c.textContent, c.classList.contains('dropped')])"
        )
        assert await until(browser, f"{lead}.startsWith('Changes the step makes') && {lead}")
        planned = await on(browser, browser.execute_script, f"return {plan};")
        assert len(planned) > 1 and any("table" in label for _, label, _ in planned)
        await on(
            browser,
            browser.execute_script,
            f"{card(a)}.querySelector('form.score .plan .change').click();",
        )
        assert await until(browser, f"{plan}[0][2]")

        # Enter sends the score, the comment and exactly these wishes
        await on(browser, comment.send_keys, Keys.ENTER)
        message = await until(browser, score_said(card(a)))
        assert message.startswith("score 3 accepted for cycle 1. Read as: shorter ('Way too long')")
        state = await wait_for_state(handle, awaiting(2))

        # a language is a chip like the others; a wish no chip can carry (a topic): while the
        # chips are left as read, Enter sends the comment for the step to read as shown, and
        # the wish is not lost
        await until(browser, f"{card(a)}.querySelector('header').dataset.cycle == '2'")
        field = await on(
            browser,
            lambda: browser.execute_script(f"return {card(a)}.querySelector('.score-input');"),
        )
        await on(browser, field.send_keys, "5", Keys.TAB)
        await on(
            browser,
            comment.send_keys,
            "Answer in French please and focus on the costs. Drop the table.",
        )
        lead = f"{card(a)}.querySelector('form.score .reading .lead').textContent"
        assert (
            await until(browser, f"{chips}.join() == 'language:french,remove:table' && {lead}")
        ).startswith("Read so far")
        note = await on(
            browser,
            browser.execute_script,
            f"return {card(a)}.querySelector('form.score .reading .note').textContent;",
        )
        assert "no chip can carry: more on the costs" in note  # words, not the family "focus"
        await on(browser, comment.send_keys, Keys.ENTER)
        await wait_for_state(handle, awaiting(3))
    assert state.last_wants == ["shorter", "steadier", "table"]
    v3 = store.queries.agent_definition(AgentRef(agent_id=a, version=3)).system_prompt
    assert "in French" in v3 and "costs" in v3 and "table" not in v3
    updates = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request
        async for e in lineage_history(client, handle)
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]
    sent, french = (json.loads(u.input.args.payloads[0].data) for u in updates)
    assert sent["wants"] == ["shorter", "steadier", "table"]
    # the plan shown, less the change left out, and the step made exactly those
    assert sent["changes"] == [key for key, _, _ in planned[1:]]
    assert sent["comment"] == "Way too long, wanted quick bullets. It wanders off on tangents."
    assert "wants" not in french and french["comment"].startswith("Answer in French")
    # the store: the step read exactly the confirmed wishes, and v2 carries them, not bullets
    evolution, _ = store.queries.evolution_records(a)
    made = [change_key(EvolutionChange.model_validate(c)) for c in json.loads(evolution.changes)]
    assert made == sent["changes"]
    read = ScoreAnalysis.model_validate_json(evolution.score_analysis)
    assert wants.wants_of(read.aspects) == ["shorter", "steadier", "table"]
    v2 = store.queries.agent_definition(AgentRef(agent_id=a, version=2)).system_prompt
    assert "table" in v2 and "bullet" not in v2.lower()
    evaluation, _ = store.queries.evaluations(a)
    assert (evaluation.score, evaluation.rater) == (3.0, "ana")


async def test_the_read_as_line_follows_the_chips_as_they_are_edited(
    client, settings, run_worker, browser, inbox_server
):
    """The line above the chips says the wishes in the chips' words, and says what the chips
    hold once the rater edits them: on the score form and on the correction form."""
    spec = make_spec(inputs=QUESTIONS)
    a = spec.lineage_id("A")
    form = f"{card(a)}.querySelector('form.score')"
    said = f"{form}.querySelector('.reading .said').textContent"
    chips = f"Array.from({form}.querySelectorAll('.chip'), c => c.dataset.want).join()"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        server = await inbox_server()
        comment = await first_visit(browser, f"{server.url}/sessions/{spec.session_id}", "3")
        await on(
            browser,
            comment.send_keys,
            "Way too long, wanted quick bullets. Put the recommendation first.",
        )
        await until(browser, f"{chips} == 'shorter,bullets,conclusion_first'")
        read = await on(browser, browser.execute_script, f"return {said};")
        assert read.startswith("Read as: shorter ('Way too long'), bullet points ('wanted quick")
        assert "answer first ('Put the recommendation first')" in read
        assert "conclusion_first" not in read and "bullets" not in read.split("'")[0::2]

        # a chip dropped: the line drops it
        await on(
            browser,
            browser.execute_script,
            f"{form}.querySelector('.chip[data-want=bullets]').click();",
        )
        await until(browser, f"{chips} == 'shorter,conclusion_first'")
        assert await until(browser, said) == "Read as (edited): shorter, answer first"
        # one added with the picker: the line says it
        await on(
            browser,
            browser.execute_script,
            f"const f = {form}; f.querySelector('.pick-action').value = 'add';"
            "f.querySelector('.pick-family').value = 'table';"
            "f.querySelector('.add-want').click();",
        )
        await until(browser, f"{chips} == 'shorter,conclusion_first,table'")
        assert await on(browser, browser.execute_script, f"return {said};") == (
            "Read as (edited): shorter, answer first, table"
        )
        await on(browser, comment.send_keys, Keys.ENTER)
        await wait_for_state(handle, awaiting(2))

        # the correction form: the card's reading line follows its chips too
        reading = f"{card(a)}.querySelector('.last-reading').textContent"
        fixes = f"Array.from({card(a)}.querySelectorAll('form.correct .chip'), c => c.dataset.want)"
        await until(browser, f"{fixes}.join() == 'shorter,conclusion_first,table'")
        assert (await until(browser, reading)).startswith(
            "Read as: shorter ('Way too long'), answer first ('Put the recommendation first')"
        )
        await on(
            browser,
            browser.execute_script,
            f"{card(a)}.querySelector('form.correct .chip[data-want=shorter]').click();",
        )
        await until(browser, f"{fixes}.join() == 'conclusion_first,table'")
        assert await until(browser, reading) == "Read as (edited): answer first, table"


async def test_a_confirmed_reading_of_ten_wishes_is_taken_whole(
    client, store, settings, run_worker, inbox_server
):
    spec = make_spec(inputs=QUESTIONS)
    a = spec.lineage_id("A")
    meant = [
        "shorter:half", "table", "warmer", "example:1", "cite_sources",
        "conclusion_first", "summary_at_end", "simpler", "proofread", "steadier",
    ]  # fmt: skip
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        server = await inbox_server()
        fields = [("rater", "ana"), ("score", "3"), ("comment", "see the chips"), ("cycle", "1")]
        fields += [("confirmed", "1"), *(("want", w) for w in meant)]
        status, answer = await asyncio.to_thread(post, server.url, f"/lineages/{a}/score", fields)
        assert status == 200, answer
        state = await wait_for_state(handle, awaiting(2))
    assert state.last_wants == meant


async def test_the_card_shows_the_trace_beside_the_output_collapsed_until_opened(
    client, store, settings, run_worker, browser, inbox_server, tmp_path
):
    # a document with a terminal escape and markup in it: what a tool read is shown as text
    spec = research_spec(
        tmp_path, handbook=HANDBOOK.replace("(excerpt)", "(excerpt)\x1b[2J<b>bold</b>")
    )
    a = spec.lineage_id("A")
    trace = f"{card(a)}.querySelector('details.trace')"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        server = await inbox_server()
        comment = await first_visit(browser, f"{server.url}/sessions/{spec.session_id}", "8")
        summary = await until(browser, f"{trace}?.querySelector('summary').textContent")
        assert summary == "Trace: 3 steps · 6 model calls · 3 tool calls"
        calls = await on(
            browser,
            browser.execute_script,
            f"return Array.from({trace}.querySelectorAll('li.call'));",
        )
        assert len(calls) == 9
        # collapsed: listed, not shown, until the rater opens it
        assert not await on(browser, calls[1].is_displayed)
        await on(
            browser,
            lambda: browser.execute_script(f"return {trace}.querySelector('summary')").click(),
        )
        await until(browser, f"{trace}.open")
        assert await on(browser, calls[1].is_displayed)
        texts = [await on(browser, lambda c=c: c.text) for c in calls]
        assert texts[0].startswith("model offline-researcher-1")
        assert texts[1].startswith('tool calculator {"expression": "12 * 1200"}')
        assert texts[1].endswith("→ 14400")
        tools = await on(
            browser,
            browser.execute_script,
            f"return Array.from({trace}.querySelectorAll('li.call.tool strong'),"
            " e => e.textContent);",
        )
        assert tools == ["calculator", "search_documents", "read_document"]
        steps = await on(
            browser,
            browser.execute_script,
            f"return Array.from({trace}.querySelectorAll('.step-name'), e => e.textContent);",
        )
        assert steps == ["step research", "step draft", "step polish"]
        assert "(excerpt)\\x1b[2J<b>bold</b> Core hours" in texts[5]
        assert (
            await on(browser, browser.execute_script, f"return {trace}.querySelector('b');") is None
        )
        # beside the output, not under it
        left, right = await on(
            browser,
            browser.execute_script,
            f"return [{trace}.getBoundingClientRect().left,"
            f" {card(a)}.querySelector('.output').getBoundingClientRect().right];",
        )
        assert left >= right
        # the next output arrives: its trace (no sum to compute in cycle 2's question), still open
        await on(browser, comment.send_keys, "Good.", Keys.ENTER)
        await until(browser, f"{card(a)}.querySelector('header').dataset.cycle == '2'")
        summary = await until(
            browser,
            f"{trace}?.querySelector('summary').textContent.includes('5 model calls')"
            f" && {trace}.querySelector('summary').textContent",
        )
        assert summary == "Trace: 3 steps · 5 model calls · 2 tool calls"
        assert await on(browser, browser.execute_script, f"return {trace}.open;")


async def test_the_card_says_a_flow_change_in_words_and_keeps_a_step_prompts_line_breaks(
    client, store, settings, run_worker, browser, inbox_server, tmp_path
):
    """A's check step added and given the question: the card's changes say what each does, in
    words (no JSON, no "\\n"), and the diff shows the step's prompt with its line breaks as
    line breaks, its text escaped. B's output over the word limit asked for, revised inside
    the cycle: the trace's summary counts both attempts it lists."""
    spec = research_spec(
        tmp_path,
        inputs=["Explain how core hours help a distributed team."],
        research_prompts={"A": None, "B": None},
    )
    a, b = spec.lineage_id("A"), spec.lineage_id("B")
    evolution = f"{card(a)}.querySelector('section.evolution')"
    trace = f"{card(b)}.querySelector('details.trace')"
    async with run_worker():
        first, second = await start_session(client, spec, settings.task_queue)
        for handle in (first, second):
            await wait_for_state(handle, awaiting(1))
        flow = ["step:add:check", "step:input:check+=input"]
        await first.execute_update("submit_score", {"score": 4, "wants": flow, "rater": "ana"})
        await second.execute_update(
            "submit_score", {"score": 4, "wants": ["shorter:20"], "rater": "ana"}
        )
        await wait_for_state(first, awaiting(2), timeout=60)
        revised = await wait_for_state(second, awaiting(2), timeout=60)
        assert revised.latest_revised
        server = await inbox_server()
        await first_visit(browser, f"{server.url}/sessions/{spec.session_id}", "8")
        changes = await until(
            browser,
            f"{evolution} && Array.from({evolution}.querySelectorAll('ul.changes li'),"
            " e => e.textContent)",
        )
        assert changes == [
            "add step 'check', given the output of 'polish' and of 'research'",
            "give step 'check' the question",
        ]
        parts = await on(
            browser,
            browser.execute_script,
            f"return Array.from({evolution}.querySelectorAll('p.diff-part'),"
            " p => [p.textContent, p.nextElementSibling.textContent,"
            " p.nextElementSibling.innerText]);",
        )
        assert [p[0] for p in parts] == ["step check (added)"]
        (_, text, drawn) = parts[0]
        assert "\\n" not in text
        lines = drawn.splitlines()  # as drawn: each line of the prompt a line of its own
        assert lines[0].startswith("Check every number and fact in this answer")
        assert lines[1:] == [
            "The findings of the research step: {research}",
            "The question: {input}",
        ]
        summary = await on(
            browser, browser.execute_script, f"return {trace}.querySelector('summary').textContent"
        )
        listed = await on(
            browser,
            browser.execute_script,
            f"return [{trace}.querySelectorAll('li.call').length,"
            f" {trace}.querySelectorAll('li.call.tool').length,"
            f" {trace}.querySelectorAll('.step-name').length];",
        )
    calls, tools, steps = listed
    assert summary == (
        f"Trace: 2 attempts · {steps} steps · {calls - tools} model calls · {tools} tool calls"
    )


async def test_a_sentence_added_with_the_picker_reaches_the_step_as_the_rater_wrote_it(
    client, store, settings, run_worker, browser, inbox_server, tmp_path
):
    """The picker's step wish with a sentence in the amount field: the chip keeps the
    sentence's case (only the names go to lower case), the score carries it, and the research
    step's prompt gets it after its own instruction, as written."""
    spec = research_spec(tmp_path, inputs=["Explain how core hours help a distributed team."])
    a = spec.lineage_id("A")
    form = f"{card(a)}.querySelector('form.score')"
    chips = f"Array.from({form}.querySelectorAll('.chip'), c => c.dataset.want)"
    sentence = "Quote the handbook lines you found, word for word."
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        server = await inbox_server()
        comment = await first_visit(browser, f"{server.url}/sessions/{spec.session_id}", "5")
        await on(browser, comment.send_keys, "See the chip.")
        await on(
            browser,
            browser.execute_script,
            f"const f = {form}; f.querySelector('.pick-action').value = 'add';"
            "f.querySelector('.pick-family').value = 'step';"
            f"f.querySelector('.pick-amount').value = {json.dumps('prompt:Research:' + sentence)};"
            "f.querySelector('.add-want').click();",
        )
        want = f"step:prompt:research:{sentence}"
        assert await until(browser, f"{chips}.includes({json.dumps(want)}) && {chips}")
        await on(browser, comment.send_keys, Keys.ENTER)
        await wait_for_state(handle, awaiting(2), timeout=60)
    v2 = store.queries.agent_definition(AgentRef(agent_id=a, version=2))
    assert v2.flow[0].prompt == f"Gather the facts and numbers needed for: {{input}}\n{sentence}"


async def test_the_card_diffs_by_word_says_a_new_versions_standing_checks_and_a_row_click_drops(
    client, store, settings, run_worker, browser, inbox_server, tmp_path
):
    """polish given the research findings: the card's diff marks the added line alone, the
    unchanged "{draft}" before it plain (not struck and added again); the versions table
    says what v2, not scored yet, is checked against, as the history does; and a click
    anywhere on a plan line's row, not only on its words, leaves that change out."""
    spec = research_spec(tmp_path, inputs=["Explain how core hours help a distributed team."])
    a = spec.lineage_id("A")
    evolution = f"{card(a)}.querySelector('section.evolution')"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        fed = ["shorter", "step:input:polish+=research"]
        await handle.execute_update("submit_score", {"score": 4, "wants": fed, "rater": "ana"})
        await wait_for_state(handle, awaiting(2), timeout=60)
        server = await inbox_server()
        comment = await first_visit(browser, f"{server.url}/sessions/{spec.session_id}", "3")
        parts = await until(
            browser,
            f"{evolution} && Array.from({evolution}.querySelectorAll('p.diff-part'),"
            " p => [p.textContent, Array.from(p.nextElementSibling.children,"
            " e => [e.className, e.textContent])])",
        )
        (_, diff) = next(p for p in parts if p[0] == "step polish (its prompt)")
        assert diff == [
            ["same", "Tighten this answer without losing any number: {draft}\n"],
            ["added", "The output of the research step: {research}"],
        ]
        checks = await on(
            browser,
            browser.execute_script,
            f"return Array.from({card(a)}.querySelectorAll('table.versions tr.version'),"
            " r => [r.dataset.version, r.querySelector('td.checks').textContent]);",
        )
        assert checks == [
            ["1", "none standing"],
            ["2", "no output scored yet; standing: shorter"],
        ]

        await on(browser, comment.send_keys, "Way too long, cut it down.")
        plan = f"{card(a)}.querySelector('form.score .plan')"
        await until(browser, f"{plan} && {plan}.querySelector('li .change')")
        row = await on(
            browser, lambda: browser.execute_script(f"return {plan}.querySelector('li');")
        )
        width = await on(browser, lambda: row.size["width"])
        # the row's right end, past the change's words
        await on(
            browser,
            lambda: (
                ActionChains(browser)
                .move_to_element_with_offset(row, width // 2 - 4, 0)
                .click()
                .perform()
            ),
        )
        assert await until(
            browser, f"{plan}.querySelector('li .change').classList.contains('dropped')"
        )


async def test_the_version_history_branches_a_new_lineage_from_a_version(
    client, store, settings, run_worker, browser, inbox_server
):
    spec = make_spec(labels=("A", "B"), inputs=QUESTIONS)
    a, c = spec.lineage_id("A"), spec.lineage_id("C")
    async with run_worker():
        handle, _ = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.execute_update(
            LineageWorkflow.submit_score, {"score": 3, "cycle": 1, "wants": ["shorter:half"]}
        )
        await wait_for_state(handle, awaiting(2))
        server = await inbox_server()
        # like every action, only from the page's own origin
        request = urllib.request.Request(
            f"{server.url}/lineages/{a}/branch",
            data=b"version=1&rater=ana",
            method="POST",
            headers={"Origin": "http://127.0.0.1:1"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            await asyncio.to_thread(urllib.request.urlopen, request, timeout=10)
        assert refused.value.code == 403

        await on(browser, browser.get, f"{server.url}/sessions/{spec.session_id}")
        await until(browser, "document.activeElement.id == 'rater'")
        await on(browser, browser.switch_to.active_element.send_keys, "ana")
        versions = f"{card(a)}.querySelector('details.versions')"
        rows = await on(
            browser,
            browser.execute_script,
            f"return Array.from({versions}.querySelectorAll('tr.version'),"
            " r => r.textContent.replace(/\\s+/g, ' ').trim());",
        )
        # each version's record: v1 scored once (untested), v2 not yet
        assert rows == [
            "v1untested initial 3.00 none standing 1 Branch",
            # not scored yet: what it is checked against, as the history says
            "v2untested after a score of 3 — no output scored yet; standing: shorter 0 Branch",
        ]
        await on(
            browser,
            lambda: browser.execute_script(f"return {versions}.querySelector('summary')").click(),
        )
        await on(
            browser,
            lambda: browser.execute_script(
                f"return {versions}.querySelector('tr[data-version=\"1\"] button')"
            ).click(),
        )
        # answered inline, then the page shows the new lineage's card beside the others
        await until(browser, f"document.getElementById('lineage-{c}') !== null")
        await wait_for_state(client.get_workflow_handle(f"lineage-{c}"), awaiting(1))
    origin = store.queries.branch_origin(c)
    assert origin is not None
    assert (origin.parent_lineage_id, origin.parent_version, origin.rater) == (a, 1, "ana")


async def test_with_a_token_the_inbox_refuses_strangers(client, store, browser, inbox_server):
    server = await inbox_server(token=TOKEN)

    def fetch(path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        request = urllib.request.Request(f"{server.url}{path}", headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    assert (await asyncio.to_thread(fetch, "/inbox/rows"))[0] == 401
    assert (await asyncio.to_thread(fetch, "/events"))[0] == 401
    status, _ = await asyncio.to_thread(fetch, "/inbox/rows", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200

    await on(browser, browser.get, f"{server.url}/")
    await until(browser, "document.querySelector('form.login') !== null")  # sent to sign in

    def sign_in(token: str) -> None:
        form = browser.find_element(By.CSS_SELECTOR, "form.login")
        form.find_element(By.NAME, "rater").send_keys("ana")
        form.find_element(By.NAME, "token").send_keys(token, Keys.ENTER)

    await on(browser, sign_in, "wrong")
    await until(browser, "document.querySelector('p.error')?.textContent.includes('not right')")
    await on(browser, sign_in, TOKEN)
    await until(browser, "document.querySelector('table.inbox') !== null")


def test_a_sentence_rewritten_reads_apart_from_the_one_it_replaces():
    """The card's diff as text (a screen reader, a copy): the struck words and the added ones
    never run together as one word ("analysis.Keep")."""
    from review.render import prompt_diff

    diff = prompt_diff("Be precise. Provide detailed analysis.", "Be precise. Keep answers short.")
    assert "analysis. Keep" in re.sub(r"<[^>]+>", "", str(diff))
    assert '<del class="removed">Provide detailed analysis.</del>' in str(diff)
