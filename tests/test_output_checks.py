"""Wishes become checks, through the dev server: a reviewer asks for about 100 words, no hedging
and a table; every later output is checked against those wishes, an output that fails a check
is revised once in the same cycle (recorded as an attempt of its own, with its spans), the
checklist shows in `state`, on the review card (headless Chromium), in `training-camp output`
and the inbox, a misread comment whose plan would drop the table is refused and said back, and
the reward export carries the checks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from client import lineage_output, start_session
from domain.agent import AgentRef
from domain.checks import ActiveWish, checklist
from review import views
from services.training_data import check_rates
from store.exports.exporter import ExportFilters, export
from tests import test_review_app
from tests.conftest import (
    awaiting,
    make_spec,
    starter_cli,
    training_data_cli,
    wait_for_state,
)
from tests.test_review_app import card, on, until
from trainer.checks import Document, check_all, checkable
from trainer.credit_assignment import families_of
from trainer.prompt_segments import segments

# the review app's fixtures: headless Chromium, and the app on a free port
browser = test_review_app.browser
inbox_server = test_review_app.inbox_server


async def score(handle, cycle: int, value: float, comment: str):
    await wait_for_state(handle, awaiting(cycle), timeout=60)
    return await handle.execute_update("submit_score", {"score": value, "comment": comment})


def checked(store, lineage: str, cycle: int) -> list[dict]:
    """The output.checked events of one cycle's tries, from the store's log."""
    return [
        e.payload
        for e in store.queries.events(lineage, ["output.checked"])
        if e.payload["cycle"] == cycle
    ]


async def test_wishes_are_checked_revised_once_and_guarded(
    client,
    store,
    settings,
    run_worker,
    temporal_address,
    browser,
    inbox_server,
    tmp_path: Path,
):
    spec = make_spec()  # the analyst: "comprehensive, detailed" (about 500 words)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        first = await wait_for_state(handle, awaiting(1))
        assert first.latest_checklist is None and first.latest_checks == []  # nothing asked yet
        await score(handle, 1, 4, "About 100 words please, and no hedging.")

        # cycle 2: the output failed a check (the hedge), was revised once, and the revision
        # passes: it is the one shown, and `state` says so
        second = await wait_for_state(handle, awaiting(2))
        assert [w.family for w in second.active_wishes] == ["shorter", "direct"]
        assert second.latest_revised
        assert second.latest_checklist == (
            f"✓ about 100 words ({second.latest_output_words}) · ✓ no hedging"
        )
        tries = checked(store, lineage, 2)
        original, revision = sorted(tries, key=lambda p: p["revision"])
        missed = [c for c in original["checks"] if not c["passed"]]
        assert missed and all(c["shortfall"] for c in missed)  # what the model was told
        assert all(c["passed"] for c in revision["checks"])
        assert (original["chosen"], revision["chosen"]) == (False, True)
        attempts = {a.id: a for a in store.queries.attempts(f"{lineage}:c2")}
        assert set(attempts) == {f"{lineage}:c2:a1", f"{lineage}:c2:a1:r1"}
        assert all(a.status == "succeeded" for a in attempts.values())
        # the revision has its own spans: the model was told what failed and by how much
        spans = store.queries.span_records(f"{lineage}:c2:a1:r1")
        call = next(s for s in spans if s.span_type == "llm_call")
        assert call.input is not None and call.input.startswith("Revise this answer: ")
        # the artifact scored is the revision's output
        artifact = store.queries.artifact(f"{lineage}:c2:artifact")
        assert artifact.attempt_id == f"{lineage}:c2:a1:r1"
        shown = store.queries.artifact_text(artifact.id)
        assert Document.of(shown).words == second.latest_output_words
        assert 85 <= second.latest_output_words <= 115
        # the checklist on the card, in the inbox and with the whole output, and the card
        # says a revision happened
        server = await inbox_server()
        await on(browser, browser.get, f"{server.url}/sessions/{spec.session_id}")
        shown_checks = await until(
            browser, f"{card(lineage)}.querySelector('ul.checks')?.innerText"
        )
        assert shown_checks.split("\n") == second.latest_checklist.split(" · ")
        passed = await on(
            browser,
            browser.execute_script,
            f"return [...{card(lineage)}.querySelectorAll('ul.checks li')].map(i => i.className);",
        )
        assert passed == ["pass", "pass"]
        note = await until(browser, f"{card(lineage)}.querySelector('p.revised')?.textContent")
        assert note.startswith("Revised once in the cycle")
        _, found = lineage_output(store, lineage)
        assert found is not None and found.checks is not None
        assert found.checks.line() == f"{second.latest_checklist} · revised once in the cycle"
        inbox = await views.inbox(client, store, spec.session_id)
        assert [i.checks.line() if i.checks else None for i in inbox.items] == [found.checks.line()]
        printed = await asyncio.to_thread(
            starter_cli,
            "output",
            lineage,
            temporal_address=temporal_address,
            database_url=settings.database_url,
        )
        assert f"Checks: {found.checks.line()}" in printed

        await score(handle, 2, 6, "Better. Now put it in a table.")
        third = await wait_for_state(handle, awaiting(3))
        assert "✓ a table" in (third.latest_checklist or "")
        # the verdict on the change that asked for the length cites what the output measured
        words = second.latest_output_words
        assert f"validated by the output: {words} words for about 100" in third.last_verdict
        await score(handle, 3, 8, "Good, the table works.")

        # cycle 4: a comment misread as a wish for prose would drop the table: refused, and
        # said back in the reading
        await wait_for_state(handle, awaiting(4))
        answer = await score(handle, 4, 5, "The table is hard to read on my phone.")
        assert "kept 'put it in a table': asked for in cycle 2" in answer["reading"]
        fifth = await wait_for_state(handle, awaiting(5))
        assert "table" in fifth.asked_for
        assert "kept 'put it in a table'" in (fifth.last_evolution or "")
        assert any(w.family == "table" and w.cycle == 2 for w in fifth.active_wishes)
        assert "✓ a table" in (fifth.latest_checklist or "")
    # the reward rows carry the checks of the output each score judged (none before a wish)
    out = export(
        store.engine, "reward", tmp_path, ExportFilters(lineage_id=lineage, eval_fraction=0)
    )
    rows = [json.loads(line) for line in (tmp_path / "reward.train.jsonl").read_text().splitlines()]
    assert [len(r["checks"]) for r in rows] == [0, 2, 3, 3] and out.counts["train"] == 4
    assert rows[1]["checks"][0] == {
        "family": "shorter",
        "wish": "about 100 words",
        "passed": True,
        "measure": str(second.latest_output_words),
        "value": float(second.latest_output_words),
        "target": 100.0,
    }
    assert rows[1]["completion"][0]["content"] == shown
    # the report: per version, how often each check passed, as a chart and a table
    made = training_data_cli(
        "report", spec.session_id, "--out", str(tmp_path / "report"), url=settings.database_url
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert (tmp_path / "report" / "checks-A.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "report" / "index.html").read_text()
    assert '<tr class="check"><td>A</td><td>v2</td><td>about 100 words</td><td>1/1</td>' in page
    rates = check_rates(store, lineage)
    assert rates[2] == {"shorter": ("about 100 words", 1, 1), "direct": ("no hedging", 1, 1)}
    latest = store.queries.agent_versions(lineage)[-1]
    agent = store.queries.agent_definition(
        AgentRef(agent_id=latest.agent_id, version=latest.version)
    )
    assert "as a table" in agent.system_prompt  # the table's instruction is still there


def test_a_wish_carried_is_bounded():
    wish = ActiveWish(family="table", quote="x" * 200, cycle=1)
    assert len(wish.model_dump_json()) < 400


# A startup CTO who wants short, direct comparisons, in her own words, cycle after cycle
PERSONA = [
    (4, "This is far too long for me. About 90 words, and no hedging please."),
    (5, "Better. Compare the options side by side in a table."),
    (6, "Lead with the recommendation, I decide fast."),
    (6, "Oh wonderful, another table. Riveting."),
    (7, "Good. Close with a one-line summary."),
    (7, "Fine."),
    (5, "Still longer than I like."),
    (8, "Good."),
]


async def test_persona_walk(client, store, settings, run_worker):
    """Eight cycles of a persona: no output is shown that fails an active checkable wish
    without its ✗ (the checks recorded are what the output measures), the length is within
    ±15 % of the amount by the second cycle after the wish and stays there (a misread "longer"
    cannot undo it), and no instruction is in the final prompt twice."""
    spec = make_spec(
        inputs=[
            "Should a ten-person startup pick PostgreSQL or MongoDB for its first product?",
            "Should we build our own auth or buy a hosted service?",
            "Should a seed-stage team adopt Kubernetes now or later?",
        ]
    )
    lineage = spec.lineage_id("A")
    states = {}
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        for cycle, (value, comment) in enumerate(PERSONA, start=1):
            states[cycle] = await wait_for_state(handle, awaiting(cycle), timeout=60)
            answer = await score(handle, cycle, value, comment)
            if cycle == 7:  # a complaint of length, read as one; the amount named stays (below)
                assert answer["reading"].startswith("Read as: shorter"), answer["reading"]
        states[9] = await wait_for_state(handle, awaiting(9), timeout=60)
    checks = store.queries.output_checks(lineage)
    for cycle in range(2, 10):
        state = states[cycle]
        artifact = store.queries.artifact(f"{lineage}:c{cycle}:artifact")
        # every checkable active wish was checked on the output shown, and the checks recorded
        # are what that output measures: a failure shows as ✗ wherever the output is shown
        wanted = [w for w in state.active_wishes if checkable(w)]
        assert [c.family for c in checks[artifact.id].checks] == [w.family for w in wanted]
        measured = check_all(store.queries.artifact_text(artifact.id), wanted)
        assert measured == checks[artifact.id].checks == state.latest_checks
        assert state.latest_checklist == checklist(measured)
        assert all(f"✗ {c.wish}" in state.latest_checklist for c in measured if not c.passed)
        if cycle >= 3:  # the second cycle after "about 90 words"
            assert 77 <= state.latest_output_words <= 103, (cycle, state.latest_output_words)
    assert [w.family for w in states[9].active_wishes] == [
        "shorter",
        "direct",
        "table",
        "conclusion_first",
        "summary_at_end",
    ]
    latest = store.queries.agent_versions(lineage)[-1]
    agent = store.queries.agent_definition(
        AgentRef(agent_id=latest.agent_id, version=latest.version)
    )
    instructions = segments(agent.system_prompt)
    assert len(instructions) == len(set(instructions)), instructions
    # one instruction per wish (a one-line example of its form beside it is not a copy)
    carried = [
        f for s in instructions[1:] if not s.startswith("Like this:") for f in families_of(s)
    ]
    assert len(carried) == len(set(carried)), instructions
