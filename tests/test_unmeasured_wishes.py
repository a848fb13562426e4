"""A confirmed wish no count settles ("warmer") is listed on every later output as "not
checked" and why, never ✓ and never in a pass rate; a take-back removes it; and a revert that
brings back an instruction brings back its wish's check. Through a lineage on the dev server,
each score previewed and confirmed as the review page does it, and read back from the store:
the stored checks, the card the page serves, `training-camp output`, the versions' pass rates
and the reward rows. And through the cycle step: such a wish stands in the way of no change."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from typing import Any

from activities.reading_preview import preview_reading
from activities.trainer import TrainerActivities
from client import session_versions, start_session
from domain.agent import AgentDefinition, AgentParameters
from domain.cycle_decision import CycleStep
from domain.settings import Settings
from review.app import create_app
from review.server import ReviewServer
from services.training_data import check_rates
from store.eventstore import event_log
from store.eventstore.event_log import NewEvent
from store.exports.exporter import ExportFilters, export
from tests.conftest import awaiting, make_spec, starter_cli, wait_for_state
from tests.test_demo_command import free_port
from trainer import cycle_step
from trainer.backends import RulesTrainer, TrainerBackends
from trainer.cycle_step import LineageMemory
from workflows.lineage import LineageWorkflow

PROMPT = "You are an expert analyst. Provide brief, scannable analysis."
WARMER = "not checked: warmer (tone has no measurable form)"


async def _confirmed(client, store, handle, lineage: str, cycle: int, wished: list[str]) -> None:
    """A score sent as the page sends it once the rater confirmed its chips and plan: the
    reading previewed with the page's function, the step's plan made by the step's own."""
    await wait_for_state(handle, awaiting(cycle), timeout=60)
    backends = TrainerBackends(Settings())
    _, seen = await preview_reading(
        client,
        store,
        backends,
        lineage,
        4,
        None,
        wants=wished,
        planner=TrainerActivities(store, backends).planned,
    )
    assert seen.planned and seen.change_keys, (wished, seen)
    payload = {"score": 4, "wants": seen.plan_wants, "changes": seen.change_keys}
    await handle.execute_update(LineageWorkflow.submit_score, payload)


def _stored_checks(store, lineage: str, cycle: int) -> dict[str, dict[str, Any]]:
    """The checks of the output shown for ``cycle``, as its `output.checked` event stores them
    (the raw payload: what the log holds), by what each says."""
    (shown,) = [
        e.payload
        for e in store.queries.events(lineage, ["output.checked"])
        if e.payload["cycle"] == cycle and e.payload["chosen"]
    ]
    return {c["wish"]: c for c in shown["checks"]}


def _card_checks(origin: str, lineage: str) -> list[tuple[str, str]]:
    """The checklist of the card the review page serves: (class, text) per line."""
    with urllib.request.urlopen(f"{origin}/lineages/{lineage}/card", timeout=10) as response:
        page = response.read().decode()
    listed = re.search(r'<ul class="checks"[^>]*>(.*?)</ul>', page, re.S)
    assert listed is not None, page
    return re.findall(r'<li class="(\w+)">(.*?)</li>', listed.group(1))


async def test_a_confirmed_warmer_is_not_checked_on_every_later_output_and_a_revert_restores_it(
    client, store, settings, run_worker, temporal_address, tmp_path
):
    spec = make_spec(prompt=PROMPT, inputs=["Explain the four-day work week for small teams."])
    lineage = spec.lineage_id("A")
    server = ReviewServer(create_app(client, store), "127.0.0.1", free_port())
    await server.start()
    origin = server.url
    try:
        async with run_worker():
            (handle,) = await start_session(client, spec, settings.task_queue)
            await _confirmed(client, store, handle, lineage, 1, ["warmer", "table"])

            # the next output lists warmer as not checked, beside the table's measured check
            second = await wait_for_state(handle, awaiting(2))
            assert [w.family for w in second.active_wishes] == ["warmer", "table"]
            assert WARMER in (second.latest_checklist or "")
            stored = _stored_checks(store, lineage, 2)
            assert stored["warmer"]["checked"] is False and stored["warmer"]["passed"] is False
            assert stored["warmer"]["measure"] == "tone has no measurable form"
            assert "checked" not in stored["a table"]  # measured: stored as before
            # read back as the card, the inbox and the step read it
            (artifact,) = [a for a in store.queries.artifacts(lineage) if a.cycle == 2]
            shown = store.queries.output_checks_of(lineage, artifact.id)
            assert shown is not None
            by_wish = {c.wish: c for c in shown.checks}
            assert not by_wish["warmer"].measured and by_wish["warmer"].line() == WARMER
            card = await asyncio.to_thread(_card_checks, origin, lineage)
            assert len(card) == 2 and card[0] == ("unchecked", WARMER)
            assert card[1][0] in ("pass", "fail") and card[1][1].endswith(" a table")
            printed = await asyncio.to_thread(
                starter_cli,
                "output",
                lineage,
                temporal_address=temporal_address,
                database_url=settings.database_url,
            )
            assert WARMER in printed and "✓ a table" in printed
            await _confirmed(client, store, handle, lineage, 2, ["remove:warmer", "remove:table"])

            # taken back: no longer listed; the table's absence is checked
            third = await wait_for_state(handle, awaiting(3))
            checked = {c.wish: c for c in third.latest_checks}
            assert "warmer" not in checked and "no table" in checked
            assert "warmer" not in {w.family for w in third.active_wishes}
            v2 = next(r.record for r in session_versions(store, spec.id) if r.record.version == 2)
            # never counted in a pass rate: v2's record counts the table's check alone
            assert (v2.checks, v2.checks_passed) == (1, int(stored["a table"]["passed"]))
            await _confirmed(client, store, handle, lineage, 3, ["revert:v2"])

            # back to v2: its instructions and the checks of its wishes, both
            fourth = await wait_for_state(handle, awaiting(4))
            assert fourth.agent_version == 4
            assert [(w.family, w.action) for w in fourth.active_wishes] == [
                ("warmer", "add"),
                ("table", "add"),
            ]
            stored = _stored_checks(store, lineage, 4)
            assert set(stored) == {"warmer", "a table"}
            assert stored["warmer"]["checked"] is False
            card = await asyncio.to_thread(_card_checks, origin, lineage)
            assert len(card) == 2 and card[0] == ("unchecked", WARMER)
            assert card[1][0] in ("pass", "fail") and card[1][1].endswith(" a table")  # not "no"
    finally:
        await server.stop()
    # no pass rate counts it: the report's rates, and the reward rows' checks (no signal)
    assert {family for rates in check_rates(store, lineage).values() for family in rates} == {
        "table"
    }
    export(store.engine, "reward", tmp_path, ExportFilters(lineage_id=lineage, eval_fraction=0))
    rows = (tmp_path / "reward.train.jsonl").read_text().splitlines()
    checked = [[c["family"] for c in json.loads(row)["checks"]] for row in rows]
    assert checked == [[], ["table"], ["table"]]  # cycles 1 to 3: v2's table, v3's no table


def test_a_plain_language_check_v1_stored_unmeasured_reads_back_as_not_checked(store):
    """v1 of `output.checked` stored no ``checked``: plain language it could not measure read
    back as ✗. Appended as v1 stored it, it reads back as "not checked"; a measured check of
    the same event as it was."""
    checks = [
        {"family": "simpler", "wish": "plain language", "passed": False,
         "measure": "no readability measure for Norwegian", "value": None, "target": None,
         "shortfall": None, "cycle": 1},
        {"family": "table", "wish": "a table", "passed": False, "measure": "none found",
         "value": 0.0, "target": None, "shortfall": "a table: none found", "cycle": 1},
    ]  # fmt: skip
    payload = {"rolloutId": "L:r1", "cycle": 2, "agentVersion": 2, "revision": 0,
               "chosen": True, "checks": checks}  # fmt: skip
    stored = NewEvent(
        id="v1-checked",
        event_type="output.checked",
        payload=payload,
        timestamp=1_700_000_000_000,
        lineage_id="L",
        artifact_id="L:a2",
        schema_version=1,
    )
    with store.engine.begin() as conn:
        assert len(event_log.append(conn, [stored])) == 1
    found = store.queries.output_checks_of("L", "L:a2")
    assert found is not None
    plain, table = found.checks
    assert not plain.measured and plain.line() == (
        "not checked: plain language (no readability measure for Norwegian)"
    )
    assert table.measured and table.line() == "✗ a table (none found)"


# ---- the cycle step ---------------------------------------------------------------------------


def _played(*sent: list[str]) -> list[CycleStep]:
    """Scores sent with these wants (confirmed chips), cycle after cycle, through the step."""
    agent = AgentDefinition(
        name="Analyst",
        system_prompt=PROMPT,
        parameters=AgentParameters(model="offline-analyst-1", max_tokens=2048),
    )
    memory, steps = LineageMemory(session_id="s", lineage_id="L"), []
    for number, given in enumerate(sent, start=1):
        memory = memory.model_copy(update={"wants": given, "cycle": number})
        step = asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 4, None))
        steps.append(step)
        memory = memory.model_copy(
            update={"asked_for": step.asked_for, "wishes": step.wishes, "previous_score": 4}
        )
        agent = step.agent
    return steps


def test_an_unmeasured_wish_stands_in_the_way_of_nothing_a_measured_one_does():
    # a casual tone, listed not checked, does not keep a formal register from being asked
    casual, _, formal = _played(["casual"], ["example:1"], ["formal"])
    assert "casual" in {w.family for w in casual.wishes}
    assert formal.changed and not formal.kept_wishes
    assert [w.family for w in formal.wishes if w.family in ("casual", "formal")] == ["formal"]
    # flagging uncertainty (not checked) gives way to "no hedging"; "no hedging" (measured,
    # standing since cycle 1) keeps flagging uncertainty out, as it did before
    *_, direct = _played(["hedge"], ["example:1"], ["direct"])
    assert direct.changed and not direct.kept_wishes
    *_, hedge = _played(["direct"], ["example:1"], ["hedge"])
    assert hedge.kept_wishes and "asked for in cycle 1" in hedge.kept_wishes[0]
