"""Wishes become checks, through the dev server: a reviewer asks for about 100 words, no hedging
and a table; every later output is checked against those wishes, an output that fails a check
is revised once in the same cycle (recorded as an attempt of its own, with its spans), the
checklist shows in `state`, on the review card (headless Chromium), in `training-camp output`
and the inbox, a misread comment whose plan would drop the table is refused and said back, and
the reward export carries the checks."""

from __future__ import annotations

import json
from pathlib import Path

from client import lineage_output, start_session
from domain.agent import AgentRef
from domain.checks import ActiveWish
from review import views
from store.exports.exporter import ExportFilters, export
from tests import test_review_app
from tests.conftest import awaiting, make_spec, wait_for_state
from tests.test_review_app import card, on, until
from trainer.checks import Document

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

        # cycle 2: the output failed the length (and a hedge), was revised once, and the
        # revision passes: it is the one shown, and `state` says so
        second = await wait_for_state(handle, awaiting(2))
        assert [w.family for w in second.active_wishes] == ["shorter", "direct"]
        assert second.latest_revised
        assert second.latest_checklist == (
            f"✓ about 100 words ({second.latest_output_words}) · ✓ no hedging"
        )
        tries = checked(store, lineage, 2)
        original, revision = sorted(tries, key=lambda p: p["revision"])
        length = next(c for c in original["checks"] if c["family"] == "shorter")
        assert (
            not length["passed"] and length["value"] > 115 and "words over" in length["shortfall"]
        )
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
        assert "kept 'put it in a table': you asked for it in cycle 2" in answer["reading"]
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
    latest = store.queries.agent_versions(lineage)[-1]
    agent = store.queries.agent_definition(
        AgentRef(agent_id=latest.agent_id, version=latest.version)
    )
    assert "as a table" in agent.system_prompt  # the table's instruction is still there


def test_a_wish_carried_is_bounded():
    wish = ActiveWish(family="table", quote="x" * 200, cycle=1)
    assert len(wish.model_dump_json()) < 400
