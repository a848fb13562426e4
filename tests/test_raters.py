"""Several raters per lineage (issue #63): the default single rater unchanged against a
baseline recorded at commit 3273986, and named raters with a quorum and a score window."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from activities.reading_preview import preview_reading
from client import correction_outcome, preview_on_worker
from domain.settings import Settings
from review import views
from review.app import templates
from services.reading_prompt import print_reading
from store import Store
from store.eventstore import event_log
from tests.conftest import awaiting, make_spec, start_without_search_attributes, wait_for_state
from tests.histories.capture import lineage_scenario, store_story
from trainer.backends import TrainerBackends
from worker import build_worker
from workflows.lineage import LineageWorkflow

DATA = Path(__file__).parent / "data"
BASELINE = DATA / "lineage-single-rater-3273986.store.json"
# Event types added after the baseline by other work (the input set as a lineage registers,
# the wishes a new version stands on): appended alongside, never in place of, the old ones
ADDED_SINCE_BASELINE = {"lineage.inputs_set", "lineage.wishes_standing"}
# Event types whose schema gained a version since the baseline, with payloads written as before
# when the new field is not used (a check "not checked": none in the capture)
BUMPED_SINCE_BASELINE = {"output.checked": (1, 2)}
# Values that differ from run to run: clocks, trace ids, and ids hashed from a random session
VOLATILE = {"startedAt", "durationMs", "traceId", "otelSpanId", "timestamp"}
# Words a verdict's reason named a family by at the baseline, said since in the chips' words
# (docs/scoring.md: never a family's name): the baseline's reason read with the words of today
REWORDED_SINCE_BASELINE = {"evolution.outcome": [("; bullets: ", "; bullet points: ")]}
HASHED_IDS = {"evaluationId", "evaluation_id", "correctionId"}


def _normal(value: Any, session: str) -> Any:
    if isinstance(value, dict):
        return {
            k: ("<hash>" if k in HASHED_IDS else _normal(v, session))
            for k, v in value.items()
            if k not in VOLATILE
        }
    if isinstance(value, list):
        return [_normal(v, session) for v in value]
    if isinstance(value, str):
        return value.replace(session, "<session>")
    return value


def _without_new_optional_fields(old: Any, new: Any) -> Any:
    """``new`` less the fields the baseline has not and that hold no value (new optional
    fields, left at their defaults by a single-rater lineage)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {
            k: _without_new_optional_fields(old.get(k), v)
            for k, v in new.items()
            if k in old or v not in (None, [], {}, "", False)
        }
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [_without_new_optional_fields(o, n) for o, n in zip(old, new, strict=True)]
    return new


def _reworded(event: dict[str, Any]) -> dict[str, Any]:
    """A baseline event whose reason names a family as the chips now do."""
    reason = event.get("payload", {}).get("reason")
    if not isinstance(reason, str):
        return event
    for said, now in REWORDED_SINCE_BASELINE.get(event["type"], []):
        reason = reason.replace(said, now)
    return {**event, "payload": {**event["payload"], "reason": reason}}


def _as_baseline(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` with the schema version the baseline wrote for its type, where it was bumped
    since (its payload is compared as it is)."""
    before, now = BUMPED_SINCE_BASELINE.get(event["type"], (None, None))
    if now is not None and event.get("schema_version") == now:
        return {**event, "schema_version": before}
    return event


def _session(story: dict[str, Any]) -> str:
    created = (e for e in story["events"] if e["type"] == "session.created")
    return next(created)["payload"]["sessionId"]


async def test_a_single_rater_lineage_writes_what_it_wrote_at_3273986(
    client, store, settings, run_worker
):
    """The capture's story (rejections, a directive, a correction that runs cycle 2 again, a
    lock, a score through the update) on today's code: the same training events in the same
    order, the same payloads (ids and clocks aside, new optional fields aside) and the same
    agent versions, content hash for content hash, as recorded at commit 3273986."""
    baseline = json.loads(BASELINE.read_text())
    async with run_worker():
        await lineage_scenario(client, store, settings.task_queue)
    now = store_story(store)
    old_session, new_session = _session(baseline), _session(now)
    old = [_reworded(_normal(e, old_session)) for e in baseline["events"]]
    new = [
        _as_baseline(_normal(e, new_session))
        for e in now["events"]
        if e["type"] not in ADDED_SINCE_BASELINE
    ]
    assert [e["type"] for e in new] == [e["type"] for e in old]
    for before, after in zip(old, new, strict=True):
        assert _without_new_optional_fields(before, after) == before, before["type"]
    assert now["versions"] == baseline["versions"]
    assert re.fullmatch(r"s-[0-9a-f]{10}", new_session)


# ---- several raters, through Temporal (the window on the time-skipping server) -------------

RATERS = {"raters": ["ana", "bo", "cy"], "quorum": 2, "scoreWindow": "2h"}


@contextlib.asynccontextmanager
async def panel_lineage(
    env: WorkflowEnvironment, store: Store, settings: Settings, options: dict[str, Any]
) -> AsyncIterator[WorkflowHandle[Any, Any]]:
    """A lineage with ``options`` started on ``env`` (without search attributes: the
    time-skipping server has none), its worker running."""
    spec = make_spec(options=options)
    async with build_worker(env.client, store, settings):
        handle = await start_without_search_attributes(
            env.client, spec, spec.lineages[0].label, settings.task_queue
        )
        yield handle
        await handle.signal("stop")
        await handle.result()


async def card_html(
    env: WorkflowEnvironment, store: Store, lineage_id: str, rater: str | None = None
) -> str:
    """The lineage's card, rendered as the review page's card fragment renders it (for the
    rater signed in as ``rater``)."""
    card = await views.lineage_card(env.client, store, lineage_id)
    assert card is not None
    return templates.get_template("_card_body.html").render(card=card, rater=rater)


def _logged(store: Store, event_type: str) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        return [e.payload for e in event_log.read(conn, event_types=[event_type])]


async def test_three_raters_change_only_what_a_majority_asks_and_none_opposes(
    time_skipping_env, store, settings
):
    """ana and bo ask for shorter, cy for longer: length is in dispute and nothing changes
    for it, said back with who said what; ana and bo ask for a table and cy says nothing of
    it: the table is added. Every score is in the store; the cycle's score is the median."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 3, "rater": "ana", "wants": ["shorter", "table"]})
        accepted = await handle.execute_update(
            LineageWorkflow.submit_score,
            {"score": 5, "rater": "bo", "comment": "too long", "wants": ["shorter", "table"]},
        )
        assert accepted.scores_progress == "2 of 3 scored (cy still to score)"
        waiting = await handle.query(LineageWorkflow.state)
        assert (waiting.status, waiting.scored_by, waiting.still_to_score) == (
            "awaiting_score",
            ["ana", "bo"],
            ["cy"],
        )
        card = await card_html(time_skipping_env, store, waiting.lineage_id)
        assert "2 of 3 scored (cy still to score). So far: ana 3 (shorter, table)" in card
        await handle.signal("score", {"score": 8, "rater": "cy", "wants": ["longer"]})
        state = await wait_for_state(handle, awaiting(2))
        card = await card_html(time_skipping_env, store, state.lineage_id)
        assert "0 of 3 scored (ana, bo, cy still to score)" in card
        said = "(ana: shorter; bo: shorter; cy: longer, more depth)"
        assert f"disagreement on longer, more depth / shorter {said}" in card
        assert "After “bo: too long” (5). Hypothesis:" in card  # the raters' comments
    assert state.agent_version == 2
    assert state.disputes == [
        "disagreement on longer, more depth / shorter (ana: shorter; bo: shorter; cy: longer, "
        "more depth): nothing changed for it"
    ]
    # the say-back reads what they agreed on, and says what they did not
    assert state.last_reading == (
        "Read as: table; not agreed: shorter (ana, bo) against longer, more depth (cy)"
    )
    assert state.score_history[-1].score == 5.0  # the median of 3, 5 and 8
    (evolved,) = _logged(store, "agent.evolved")
    families = {c["want"] for c in evolved["plan"]["changes"]}
    assert "table" in families and not families & {"shorter", "longer"}
    assert [(s["rater"], s["score"]) for s in _logged(store, "rater.scored")] == [
        ("ana", 3.0),
        ("bo", 5.0),
        ("cy", 8.0),
    ]
    (agreed,) = _logged(store, "raters.agreed")
    assert agreed["agreed"] == ["table"] and agreed["score"] == 5.0
    assert agreed["disputes"][0]["families"] == ["longer", "shorter"]


async def test_changes_asked_and_not_agreed_are_said_back_as_such_not_as_none_asked(
    time_skipping_env, store, settings
):
    """ana asks for shorter, bo for longer, cy for a table: nothing is agreed, and the
    say-back (state, card) says so in the chips' words, with who asked what, rather than
    "no change asked for"; a panel where no one asks for anything still says that."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        for rater, want in (("ana", "shorter"), ("bo", "longer"), ("cy", "table")):
            await handle.signal("score", {"score": 5, "rater": rater, "wants": [want]})
        state = await wait_for_state(handle, awaiting(2))
        said = (
            "Read as: no change agreed — shorter (ana) against longer, more depth (bo); "
            "table asked by 1 of 3 (cy), no majority"
        )
        assert state.last_reading == said
        assert said in await card_html(time_skipping_env, store, state.lineage_id)
        for rater in ("ana", "bo", "cy"):
            await handle.signal("score", {"score": 6, "rater": rater, "wants": []})
        quiet = await wait_for_state(handle, awaiting(3))
    assert state.agent_version == 1 and _logged(store, "agent.evolved") == []
    assert quiet.last_reading == "Read as: no change asked for"


def test_what_is_not_agreed_is_worded_as_the_chips_say_it():
    """A dispute with each side and who took it; a wish too few asked for with how many of
    how many (a rater counted once); nothing when every wish was agreed."""
    from domain import panel

    agreement = panel.agree(
        [
            panel.RaterReading(rater="nadia", score=3, wants=["shorter", "remove:table"]),
            panel.RaterReading(rater="oscar", score=5, wants=["longer", "example"]),
            panel.RaterReading(rater="pia", score=4, wants=["shorter:half", "example"]),
            panel.RaterReading(rater="quinn", score=4, wants=["table"]),
        ]
    )
    assert agreement.agreed == []  # example: 2 of 4 is no majority
    assert agreement.not_agreed() == [
        "shorter (nadia) and shorter: about half (pia) against longer, more depth (oscar)",
        "no table (nadia) against table (quinn)",
        "examples asked by 2 of 4 (oscar, pia), no majority",
    ]
    both = panel.agree(
        [
            panel.RaterReading(rater="ana", score=3, wants=["table"]),
            panel.RaterReading(rater="bo", score=4, wants=["table"]),
        ]
    )
    assert both.not_agreed() == []


async def test_a_raters_second_score_supersedes_the_first(time_skipping_env, store, settings):
    """bo scores twice while the cycle waits: both are kept, the second names the first, and
    the second is the one that counts."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 2, "rater": "bo", "wants": ["longer"]})
        await handle.signal("score", {"score": 6, "rater": "bo", "wants": ["table"]})
        await wait_for_state(handle, lambda s: s.rater_scores and s.rater_scores[0].score == 6)
        await handle.signal("score", {"score": 4, "rater": "ana", "wants": ["table"]})
        await handle.signal("score", {"score": 9, "rater": "cy"})
        state = await wait_for_state(handle, awaiting(2))
        late = await handle.signal("score", {"score": 1, "rater": "ana", "cycle": 1})
        assert late is None
        refused = await wait_for_state(handle, lambda s: s.rejected_feedback == 1)
    first, second = _logged(store, "rater.scored")[:2]
    assert (first["score"], second["score"], second["supersedes"]) == (
        2.0,
        6.0,
        first["evaluationId"],
    )
    (agreed,) = _logged(store, "raters.agreed")
    assert {v["rater"]: v["score"] for v in agreed["voices"]} == {"bo": 6.0, "ana": 4.0, "cy": 9.0}
    assert agreed["agreed"] == ["table"] and agreed["disputes"] == []
    assert state.score_history[-1].score == 6.0
    assert "cycle 1 has gone on" in (refused.last_rejection or "")


async def test_at_the_windows_end_two_scores_go_on_and_one_keeps_waiting(
    time_skipping_env, store, settings
):
    """Quorum 2 of 3: with one score the window's end leaves the cycle waiting, and `state`
    says so; a second score then lets it go on at once."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 4, "rater": "ana", "wants": ["table"]})
        await wait_for_state(handle, lambda s: s.scored_by == ["ana"])
        await time_skipping_env.sleep(3 * 3600)
        waiting = await wait_for_state(
            handle, lambda s: "window has ended" in (s.scores_progress or "")
        )
        assert waiting.status == "awaiting_score" and waiting.cycle == 1
        assert waiting.scores_progress.startswith("1 of 3 scored (bo, cy still to score)")
        await handle.signal("score", {"score": 6, "rater": "bo"})
        state = await wait_for_state(handle, awaiting(2))
    assert state.score_history[-1].score == 5.0
    assert len(_logged(store, "rater.scored")) == 2


async def test_two_scores_go_on_when_the_window_ends(time_skipping_env, store, settings):
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 4, "rater": "ana", "wants": ["table"]})
        await handle.signal("score", {"score": 8, "rater": "cy", "wants": ["table"]})
        await wait_for_state(handle, lambda s: len(s.scored_by) == 2)
        assert (await handle.query(LineageWorkflow.state)).cycle == 1  # bo may still score
        await time_skipping_env.sleep(3 * 3600)
        state = await wait_for_state(handle, awaiting(2))
    assert state.score_history[-1].score == 6.0 and state.agent_version == 2


async def test_a_rater_not_on_the_lineage_is_refused(time_skipping_env, store, settings):
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        with pytest.raises(WorkflowUpdateFailedError) as err:
            await handle.execute_update(LineageWorkflow.submit_score, {"score": 5, "rater": "dan"})
        assert "dan is not one of this lineage's raters (ana, bo, cy)" in str(err.value.cause)
        with pytest.raises(WorkflowUpdateFailedError) as err:
            await handle.execute_update(LineageWorkflow.submit_score, {"score": 5})
        assert "name yourself" in str(err.value.cause)


def test_agreement_acts_on_a_majority_none_opposed():
    """The rules the step acts on, without Temporal: a refusal (remove:) and an opposite
    (longer) each put a wish in dispute; a wish one of three asked for is not a majority."""
    from domain.panel import RaterReading, agree

    agreement = agree(
        [
            RaterReading(rater="ana", score=2, wants=["shorter", "table", "warmer"]),
            RaterReading(rater="bo", score=4, wants=["shorter:half", "table", "remove:example"]),
            RaterReading(rater="cy", score=9, wants=["longer", "example"]),
        ]
    )
    assert agreement.score == 4.0
    assert agreement.agreed == ["table"]
    assert [d.families for d in agreement.disputes] == [["longer", "shorter"], ["example"]]
    assert [(s.rater, s.want) for s in agreement.disputes[1].said] == [
        ("bo", "remove:example"),
        ("cy", "example"),
    ]
    assert [(s.rater, s.want) for s in agreement.minority] == [("ana", "warmer")]


def test_an_agreed_length_takes_the_kind_of_amount_most_raters_gave():
    """One word limit against two shares: the shares' kind is acted on (the milder share),
    whoever scored first; with one of each, the first given."""
    from domain.panel import RaterReading, agree

    def agreed(*wants: str) -> list[str]:
        raters = "abc"[: len(wants)]
        readings = [
            RaterReading(rater=r, score=3, wants=[w]) for r, w in zip(raters, wants, strict=True)
        ]
        return agree(readings).agreed

    assert agreed("shorter:150", "shorter:half", "shorter:third") == ["shorter:half"]
    assert agreed("shorter:third", "shorter:120", "shorter:90") == ["shorter:120"]
    assert agreed("shorter:200", "shorter:half") == ["shorter:200"]


def test_a_phrase_a_language_or_a_tool_is_its_own_wish_not_its_familys():
    """Two raters avoiding one phrase agree on it; the third's other phrase is said back as
    hers, not folded into theirs; German and French are not a majority for 'a language'."""
    from domain.panel import RaterReading, agree

    agreement = agree(
        [
            RaterReading(
                rater="ana", score=6, wants=['avoid:"this report examines"', "language:german"]
            ),
            RaterReading(
                rater="bo", score=4, wants=['avoid:"merits careful thought"', "language:french"]
            ),
            RaterReading(
                rater="cy", score=4, wants=['avoid:"Merits careful thought"', "tool:calculator"]
            ),
        ]
    )
    assert agreement.agreed == ['avoid:"merits careful thought"']
    assert agreement.not_agreed() == [
        "avoid 'this report examines' asked by 1 of 3 (ana), no majority",
        "in German asked by 1 of 3 (ana), no majority",
        "in French asked by 1 of 3 (bo), no majority",
        "use calculator asked by 1 of 3 (cy), no majority",
    ]


# what a rater says of an output, with the reading they confirmed (a verdict rests on words:
# a score with no comment judges nothing)
SAID = {
    "shorter": ("way too long", ["shorter"]),
    "longer": ("too short now", ["longer"]),
    "sources": ("no sources anywhere", ["cite_sources"]),
    "": (None, []),
}


async def _score_all(handle: WorkflowHandle[Any, Any], said: dict[str, tuple[float, str]]) -> None:
    for rater, (score, wish) in said.items():
        comment, wants = SAID[wish]
        sent: dict[str, Any] = {"score": score, "rater": rater}
        if comment:
            sent |= {"comment": comment, "wants": wants}
        await handle.signal("score", sent)


async def test_a_change_is_rolled_back_when_most_raters_who_judged_it_refute_it(
    time_skipping_env, store, settings
):
    """All three ask for shorter: v2 is shorter. On its output ana and bo ask for longer (each
    refutes the change), cy for shorter still (not far enough): 2 of the 3 who judged it
    refute it, so it is rolled back. Each rater's verdict is in the store."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        await _score_all(handle, {r: (4, "shorter") for r in ("ana", "bo", "cy")})
        await wait_for_state(handle, awaiting(2))
        await _score_all(handle, {"ana": (3, "longer"), "bo": (3, "longer"), "cy": (5, "shorter")})
        state = await wait_for_state(handle, awaiting(3))
    first, second = _logged(store, "agent.evolved")
    assert any(c["want"] == "shorter" for c in first["plan"]["changes"])
    (undone,) = [c for c in second["plan"]["changes"] if c["reason"].startswith("rollback")]
    assert undone["aspect"] == "length" and "against the wish for shorter" in undone["reason"]
    assert state.agent_version == 3
    assert state.last_verdict is not None and state.last_verdict.startswith("refuted")
    (judged,) = _logged(store, "evolution.outcome")
    (shorter,) = [a for a in judged["aspects"] if a["family"] == "shorter"]
    assert shorter["verdict"] == "refuted"
    assert shorter["reason"].startswith("2 of the 3 raters who judged it refute it (ana: refuted")
    (per_rater,) = _logged(store, "raters.judged")
    assert [(v["rater"], v["family"], v["verdict"]) for v in per_rater["verdicts"]] == [
        ("ana", "shorter", "refuted"),
        ("bo", "shorter", "refuted"),
        ("cy", "shorter", "not_far_enough"),
    ]
    assert per_rater["evolutionId"] == judged["evolutionId"] and per_rater["cycle"] == 2


async def test_a_change_one_rater_refutes_stands(time_skipping_env, store, settings):
    """On v2's output only ana refutes the shorter change; cy asks for shorter still; bo's
    score rose with nothing said (a score alone judges nothing): 1 of the 2 raters who judged
    it is not a majority, nothing is rolled back, and the verdict says who said what."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        await _score_all(handle, {r: (4, "shorter") for r in ("ana", "bo", "cy")})
        await wait_for_state(handle, awaiting(2))
        await _score_all(handle, {"ana": (3, "longer"), "bo": (6, ""), "cy": (5, "shorter")})
        state = await wait_for_state(handle, awaiting(3))
    assert all(
        not c["reason"].startswith("rollback")
        for evolved in _logged(store, "agent.evolved")
        for c in evolved["plan"]["changes"]
    )
    (judged,) = _logged(store, "evolution.outcome")
    (shorter,) = [a for a in judged["aspects"] if a["family"] == "shorter"]
    assert shorter["verdict"] != "refuted"
    assert shorter["reason"].startswith(
        "1 of the 2 raters who judged it refute it, not a majority (ana: refuted"
    )
    assert shorter["reason"].endswith("not judged by bo)")
    (per_rater,) = _logged(store, "raters.judged")
    assert {v["rater"]: v["verdict"] for v in per_rater["verdicts"]} == {
        "ana": "refuted",
        "bo": "untested",
        "cy": "not_far_enough",
    }
    assert state.agent_version >= 2


async def test_each_raters_verdict_judges_their_own_rise_or_fall(
    time_skipping_env, store, settings
):
    """ana and cy (3) ask for shorter, bo scored 9 asking for sources: the median is 3.
    On v2's output all three score 6 and say nothing of length: the median rose by 3, but
    bo's own score fell by 3, so the change is validated by ana and cy only; bo's verdict
    says his score fell."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        said = {"ana": (3, "shorter"), "bo": (9, "sources"), "cy": (3, "shorter")}
        await _score_all(handle, said)
        await wait_for_state(handle, awaiting(2))
        await _score_all(handle, {r: (6, "sources") for r in ("ana", "bo", "cy")})
        await wait_for_state(handle, awaiting(3))
    (per_rater,) = _logged(store, "raters.judged")
    by_rater = {v["rater"]: v for v in per_rater["verdicts"] if v["family"] == "shorter"}
    assert by_rater["ana"]["verdict"] == by_rater["cy"]["verdict"] == "validated"
    assert "rose by 3" in by_rater["ana"]["reason"]
    assert by_rater["bo"]["verdict"] != "validated"
    assert "rose" not in by_rater["bo"]["reason"]


async def test_a_rater_corrects_only_their_own_reading(time_skipping_env, store, settings):
    """bo's 'put it in a table' was read as table; bo meant shorter. bo's correction replaces
    bo's reading only: shorter is now what a majority (ana and bo) asks for and the table
    one rater's wish, so the step made again from v1 makes it shorter and adds no table. The
    labelled example is bo's comment and bo's readings. dan, who gave no score, may correct
    nothing."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        for rater, comment, wants in (
            ("ana", "way too long", ["shorter"]),
            ("bo", "put it in a table", ["table"]),
            ("cy", "a table please", ["table"]),
        ):
            await handle.signal(
                "score", {"score": 4, "rater": rater, "comment": comment, "wants": wants}
            )
        before = await wait_for_state(handle, awaiting(2))
        # the page's correction starts from bo's own reading, not the step's
        card = await card_html(time_skipping_env, store, before.lineage_id, rater="BO")
        correcting = card.split('class="correct"')[1].split("</form>")[0]
        assert "your reading, BO" in correcting
        assert 'data-want="table"' in correcting and 'data-want="shorter"' not in correcting
        # no name known, or the name of one who gave no score: no one else's reading to
        # correct, never the step's or another rater's
        for nobody, said in (
            (None, "Type your name (“Your name”, at the top) to correct how your own comment"),
            ("dan", "Nothing of yours to correct, dan: you gave no score on cycle 1"),
        ):
            card = await card_html(time_skipping_env, store, before.lineage_id, rater=nobody)
            assert 'class="correct"' not in card and said in card
        with pytest.raises(WorkflowUpdateFailedError) as err:
            await handle.execute_update(
                LineageWorkflow.correct_reading, {"wants": ["longer"], "rater": "dan", "cycle": 1}
            )
        assert "each rater corrects only their own reading, and dan gave none" in str(
            err.value.cause
        )
        accepted = await handle.execute_update(
            LineageWorkflow.correct_reading, {"wants": ["shorter"], "rater": "bo", "cycle": 1}
        )
        done = await correction_outcome(handle, accepted)
        assert done.error is None
        state = await wait_for_state(handle, awaiting(2))
    assert [(r.rater, r.wants) for r in before.rater_readings] == [
        ("ana", ["shorter"]),
        ("bo", ["table"]),
        ("cy", ["table"]),
    ]
    assert [(r.rater, r.wants) for r in state.rater_readings] == [
        ("ana", ["shorter"]),
        ("bo", ["shorter"]),
        ("cy", ["table"]),
    ]
    first, corrected = _logged(store, "agent.evolved")
    assert "table" in {c["want"] for c in first["plan"]["changes"]}
    made = {c["want"] for c in corrected["plan"]["changes"]}
    assert "shorter" in made and "table" not in made
    (correction,) = _logged(store, "reading.corrected")
    assert (correction["rater"], correction["comment"]) == ("bo", "put it in a table")
    assert (correction["readAs"], correction["corrected"]) == (["table"], ["shorter"])
    assert state.agent_version == 3 and done.rerun_cycle == 2


async def test_the_preview_shows_what_the_other_raters_asked_so_far(
    time_skipping_env, store, settings
):
    """ana confirmed shorter and a table, bo sent a comment alone: cy's preview, on the page
    (read in the app's process) and for `training-camp score` (read by the lineage's worker),
    shows both, and ana's shows bo's only."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        state = await wait_for_state(handle, awaiting(1))
        await handle.signal(
            "score", {"score": 3, "rater": "ana", "comment": "x", "wants": ["shorter", "table"]}
        )
        await handle.signal("score", {"score": 5, "rater": "bo", "comment": "far  too long"})
        await wait_for_state(handle, lambda s: len(s.scored_by) == 2)
        backends = TrainerBackends(settings)
        _, seen = await preview_reading(
            time_skipping_env.client, store, backends, state.lineage_id, 6, "add an example",
            rater="cy",
        )  # fmt: skip
        assert seen.others == ["ana 3: shorter, table", "bo 5: 'far too long'"]
        _, seen = await preview_reading(
            time_skipping_env.client, store, backends, state.lineage_id, 6, None, rater="Ana"
        )
        assert seen.others == ["bo 5: 'far too long'"]
        previewed = await preview_on_worker(
            time_skipping_env.client, state.lineage_id, 6, "add an example", rater="cy"
        )
        console = Console(record=True, width=200)
        print_reading(console, previewed.reading)
        printed = console.export_text()
        assert "Other raters so far: ana 3: shorter, table; bo 5: 'far too long'" in printed


async def test_a_change_no_rater_confirmed_is_not_made(time_skipping_env, store, settings):
    """ana and bo agree on a table, and each struck every change of the plan they were shown
    (they confirmed none of its keys): the step makes nothing and says why; cy sent no plan."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        for rater in ("ana", "bo"):
            await handle.signal(
                "score", {"score": 4, "rater": rater, "wants": ["table"], "changes": []}
            )
        await handle.signal("score", {"score": 5, "rater": "cy", "comment": "fine"})
        state = await wait_for_state(handle, awaiting(2))
    assert state.agent_version == 1
    assert "not in the plan any rater confirmed" in (state.last_evolution or "")
    assert _logged(store, "agent.evolved") == []
    (agreed,) = _logged(store, "raters.agreed")
    assert agreed["agreed"] == ["table"]
