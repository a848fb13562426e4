"""What people send cannot hijack, reorder or block scoring (issue #53), through Temporal as
raters send it: a correction names the score it corrects and only that score's rater may send
it; a score names the output it judges and is refused once a correction's re-run replaced it;
corrections hold no update slot, so a score always gets through; a key pasted into a comment
is masked before it is stored, carried in the workflow or exported; a rater's name is plain
text; contradictory wants are refused."""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from client import correct_reading, correction_outcome, start_session
from domain.lineage import MAX_QUEUED_CORRECTIONS
from store.tables import RejectedFeedbackRow
from tests.conftest import (
    awaiting,
    exported_corrections,
    make_spec,
    run_starter,
    temporal_cli,
    wait_for_state,
)
from tests.fake_messages_api import FakeMessagesAPI, text_message
from tests.test_faults import claude_settings
from tests.test_review_app import inbox_server
from tests.test_review_guard import call
from workflows.lineage import LineageWorkflow

serve = inbox_server  # the review app on a free port (tests/test_review_app.py)

QUESTIONS = [
    "Explain how to pick a first programming language.",
    "Explain what a mortgage offset account is.",
    "Explain how to prepare for a job interview.",
    "Explain how compound interest works.",
]
MODEL = "claude-sonnet-5"
# Read by the cue tables as a wish about hedging; its rater meant warmth
MISREAD = "This sounds like a legal disclaimer."
KEY = "sk-ant-api03-Qx7vR2mN9pL4kT8wZ1yB6cD3fG5hJ0sA-eU_iO7uY2tR4eW9qA"
# the same key percent-encoded, as a form or a URL would carry it
ENCODED_KEY = "".join(f"%{b:02X}" for b in KEY.encode())


def rejections(store: Any, lineage_id: str) -> list[RejectedFeedbackRow]:
    """What the lineage recorded as refused, in the order refused."""
    with Session(store.engine) as session:
        rows = session.exec(
            select(RejectedFeedbackRow).where(RejectedFeedbackRow.lineage_id == lineage_id)
        ).all()
    return sorted(rows, key=lambda r: r.created_at)


async def training_camp(temporal_address: str, database_url: str, *args: str) -> Any:
    """The `training-camp` command as a user runs it, whether it succeeds or not."""
    return await asyncio.to_thread(
        run_starter, *args, temporal_address=temporal_address, database_url=database_url
    )


async def misread_on_cycle_one(client: Any, spec: Any, settings: Any) -> Any:
    """A lineage whose cycle 1 ana scored with a comment the trainer misreads (as hedging),
    its cycle 2 output (the misread version's) awaiting a score; its handle."""
    (handle,) = await start_session(client, spec, settings.task_queue)
    await wait_for_state(handle, awaiting(1))
    await handle.signal("score", {"score": 4, "comment": MISREAD, "rater": "ana"})
    await wait_for_state(handle, awaiting(2))
    return handle


def event_text(event: Any) -> str:
    """An event of `temporal workflow show --output json` as text, its payloads decoded (the
    command gives them in base64, replayable)."""
    found = [json.dumps(event)]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("data"), str) and "metadata" in node:
                found.append(base64.b64decode(node["data"]).decode("utf-8", "replace"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(event)
    return "\n".join(found)


async def refused(handle: Any, update: Any, payload: Any) -> str:
    """The reason the lineage gives for refusing an update."""
    with pytest.raises(WorkflowUpdateFailedError) as error:
        await handle.execute_update(update, payload)
    cause = error.value.cause
    return cause.message if isinstance(cause, ApplicationError) else str(cause)


class SlowModel:
    """The agent's model (the local Messages API): its answers take ``seconds`` while set, so
    that a test acts while a correction's re-run is in flight."""

    def __init__(self, api: FakeMessagesAPI) -> None:
        self.seconds = 0.0
        self.calls = 0
        api.respond = self._answer

    def _answer(self, body: dict[str, Any]) -> tuple[Any, ...]:
        self.calls += 1
        text = f"- point one of answer {self.calls}\n- point two"
        return (200, text_message(text, body["model"]), {}, self.seconds)


async def test_a_late_correction_cannot_rewrite_another_raters_reading(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(inputs=QUESTIONS)
    open_spec = make_spec(inputs=QUESTIONS, options={"correctionsBy": "any"})
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        (open_handle,) = await start_session(client, open_spec, settings.task_queue)
        for h in (handle, open_handle):
            await wait_for_state(h, awaiting(1))
            await h.signal("score", {"score": 4, "comment": "Too long.", "rater": "ana"})
            await wait_for_state(h, awaiting(2))
            await h.signal("score", {"score": 5, "comment": MISREAD, "rater": "bob"})
        late = await wait_for_state(handle, awaiting(3))
        anas, bobs = late.score_history
        assert late.last_wants == ["direct"]

        # ana corrects her own score, but bob has scored since: not the latest
        why = await refused(
            handle,
            LineageWorkflow.correct_reading,
            {"wants": ["warmer"], "rater": "ana", "evaluation_id": anas.evaluation_id},
        )
        assert f"score '{anas.evaluation_id}' is not this lineage's latest score" in why
        assert f"cycle 2's is, {bobs.evaluation_id}" in why
        # ana names bob's score: his words are his to relabel
        why = await refused(
            handle,
            LineageWorkflow.correct_reading,
            {"wants": ["warmer"], "rater": "ana", "cycle": 2},
        )
        assert why == (
            "cycle 2's score was given by bob; only its scorer may correct its reading "
            "(options.correctionsBy: any lets every rater)"
        )
        # naming no score is refused too
        why = await refused(
            handle, LineageWorkflow.correct_reading, {"wants": ["warmer"], "rater": "ana"}
        )
        assert "name the score you correct" in why
        untouched = await handle.query(LineageWorkflow.state)
        assert (untouched.agent_version, untouched.last_reading) == (
            late.agent_version,
            late.last_reading,
        )
        assert untouched.corrections == [] and untouched.output_id == late.output_id
        assert store.queries.labelled_examples(spec.session_id) == []

        # bob corrects his own reading: taken, under his name
        here = settings.model_copy(update={"temporal_address": temporal_address})
        done = await correct_reading(here, lineage, ["warmer"], "bob", bobs.evaluation_id)
        assert done.reading.endswith("; corrected by bob") and done.rerun_cycle == 3

        # a lineage that lets any rater correct takes ana's correction of bob's score
        await wait_for_state(open_handle, awaiting(3))
        accepted = await open_handle.execute_update(
            LineageWorkflow.correct_reading, {"wants": ["warmer"], "rater": "ana", "cycle": 2}
        )
        by_ana = await correction_outcome(open_handle, accepted)
        assert by_ana.rater == "ana" and by_ana.reading.endswith("; corrected by ana")
    ((example,),) = [store.queries.labelled_examples(s.session_id) for s in (spec,)]
    assert (example.comment, example.corrected, example.rater) == (MISREAD, ["warmer"], "bob")
    (example,) = store.queries.labelled_examples(open_spec.session_id)
    assert (example.comment, example.corrected, example.rater) == (MISREAD, ["warmer"], "ana")


async def test_a_score_for_an_output_a_correction_replaced_is_refused_not_misapplied(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(model=MODEL, inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    with FakeMessagesAPI() as api:
        model = SlowModel(api)
        async with run_worker(claude_settings(settings, api)):
            handle = await misread_on_cycle_one(client, spec, settings)
            read = await handle.query(LineageWorkflow.state)
            # bob reads cycle 2's output, the misread version's
            assert read.output_id == f"{lineage}:c2"

            model.seconds = 5.0  # the re-run takes a while
            accepted = await handle.execute_update(
                LineageWorkflow.correct_reading, {"wants": ["warmer"], "rater": "ana", "cycle": 1}
            )
            assert accepted.queued_position == 1 and accepted.done is None
            rerunning = await wait_for_state(
                handle, lambda s: s.status == "running" and bool(s.corrections)
            )
            assert rerunning.output_id is None and rerunning.cycle == 2
            bobs = {"score": 8, "comment": "Good.", "rater": "bob", "cycle": 2}
            named = {**bobs, "output_id": read.output_id}
            why = await refused(handle, LineageWorkflow.submit_score, named)
            assert why == (
                f"output_id: score is for output '{read.output_id}', which is no longer "
                "awaiting a score (replaced by a re-run, or scored); cycle 2's output is being "
                "produced or scored; score it once it shows"
            )
            await handle.signal("score", named)  # the same as a signal: recorded as refused
            model.seconds = 0.0
            rerun = await wait_for_state(handle, lambda s: awaiting(2)(s) and s.agent_version == 3)
            assert rerun.output_id == f"{lineage}:c2-v3"
            # `training-camp output` shows the output and its id, which a score names
            shown = await training_camp(temporal_address, settings.database_url, "output", lineage)
            assert f"output id: {rerun.output_id}" in shown.stdout, shown.stdout + shown.stderr
            # sent again now, the refusal names the output that is current
            why = await refused(handle, LineageWorkflow.submit_score, named)
            assert f"output {rerun.output_id} (cycle 2) is awaiting its score" in why
            assert rerun.rejected_feedback == 1
            assert "is no longer awaiting a score" in rerun.last_rejection
            assert store.queries.evaluations(lineage)[-1].rater == "ana"  # nothing of bob's

            # naming the current output, the score is taken, and says which score it is
            taken = await handle.execute_update(
                LineageWorkflow.submit_score, {**bobs, "output_id": rerun.output_id}
            )
            assert taken.reading is not None and taken.evaluation_id is not None
    last = store.queries.evaluations(lineage)[-1]
    assert (last.rater, last.artifact_id, last.id) == (
        "bob",
        f"{rerun.output_id}:artifact",
        taken.evaluation_id,
    )


async def test_ten_waiting_corrections_do_not_block_a_score(client, store, settings, run_worker):
    spec = make_spec(model=MODEL, inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    with FakeMessagesAPI() as api:
        model = SlowModel(api)
        async with run_worker(claude_settings(settings, api)):
            handle = await misread_on_cycle_one(client, spec, settings)

            # ten corrections at once (a rater clicking again and again) while the first one's
            # re-run is slow: each is answered at once, queued or refused, and none waits
            model.seconds = 6.0
            meant = [["warmer"], ["warmer", "bullets"], ["simpler"], ["table"], ["warmer"]] * 2
            answers = await asyncio.wait_for(
                asyncio.gather(
                    *(
                        handle.execute_update(
                            LineageWorkflow.correct_reading,
                            {"wants": wants, "rater": "ana", "cycle": 1},
                        )
                        for wants in meant
                    ),
                    return_exceptions=True,
                ),
                timeout=4.0,  # inside the first re-run: nothing waited for it
            )
            queued = {a.correction_id for a in answers if not isinstance(a, Exception)}
            full = [str(a.cause) for a in answers if isinstance(a, WorkflowUpdateFailedError)]
            # the first is taken at once, at most MAX_QUEUED_CORRECTIONS wait behind it
            assert 1 < len(queued) <= MAX_QUEUED_CORRECTIONS + 1
            assert all("corrections already wait" in reason for reason in full)
            assert len(full) + sum(not isinstance(a, Exception) for a in answers) == 10

            # then a score: accepted at once, and taken once the corrections are done
            score = await asyncio.wait_for(
                handle.execute_update(
                    LineageWorkflow.submit_score, {"score": 7, "comment": "Fine.", "rater": "bob"}
                ),
                timeout=5.0,
            )
            assert score.queued_position == 1
            # a correction after it is refused: a later score exists
            why = await refused(
                handle,
                LineageWorkflow.correct_reading,
                {"wants": ["shorter"], "rater": "ana", "cycle": 1},
            )
            assert "a later score than cycle 1's score has arrived" in why
            model.seconds = 0.0
            done = await wait_for_state(handle, awaiting(3), timeout=60)
    assert [p.cycle for p in done.score_history] == [1, 2]
    bobs = store.queries.evaluations(lineage)[-1]
    assert (bobs.rater, bobs.score, bobs.cycle) == ("bob", 7, 2)
    # every correction queued was taken (the ten arrive in any order), each recorded once
    examples = store.queries.labelled_examples(spec.session_id)
    assert sorted(e.correction_id for e in examples) == sorted(queued)
    assert {c.correction_id for c in done.corrections} == queued


async def test_a_pasted_key_is_redacted_before_it_is_stored_carried_or_exported(
    client, store, settings, run_worker, serve, temporal_address, tmp_path: Path
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    database = Path(store.engine.url.database)
    pasted = f"{MISREAD} (my key is {KEY}, sorry)"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        first = await wait_for_state(handle, awaiting(1))
        server = await serve()

        # through the review page: masked before it leaves for Temporal
        fields = {
            "score": "4",
            "comment": pasted,
            "rater": "ana",
            "cycle": "1",
            "output_id": first.output_id,
        }
        body = urllib.parse.urlencode(fields).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": server.url}
        status, _, answer = await call(server, "POST", f"/lineages/{lineage}/score", body, headers)
        assert status == 200, answer
        said = json.loads(answer)["ok"]
        assert KEY not in said and "looked like a credential: kept as [redacted]" in said
        read = await wait_for_state(handle, awaiting(2))

        # straight to Temporal, as from its CLI: masked at the lineage's door
        await handle.signal("directive", {"kind": "sticky", "content": f"Never say {KEY}."})
        await handle.signal("lock", {"reason": f"key {ENCODED_KEY} leaked"})
        await handle.signal("unlock", {})
        await handle.signal("score", {"score": 99, "comment": f"oops {KEY}"})  # refused
        here = settings.model_copy(update={"temporal_address": temporal_address})
        accepted = await correct_reading(here, lineage, ["warmer"], "ana")
        said = await handle.query(LineageWorkflow.state)
    assert KEY not in accepted.reading and accepted.rater == "ana"
    assert said.sticky_directives == ["Never say [redacted]."]
    assert KEY not in said.model_dump_json() and KEY not in read.model_dump_json()
    (score_refused,) = rejections(store, lineage)
    assert "[redacted]" in score_refused.payload_preview and KEY not in score_refused.reason

    # the store file (and its write-ahead log) holds no trace of it, encoded or not
    store.close()
    for path in database.parent.glob(database.name + "*"):
        raw = path.read_bytes()
        assert KEY.encode() not in raw and ENCODED_KEY.encode() not in raw, path
    with sqlite3.connect(database) as db:
        (comment,) = db.execute("SELECT comment FROM evaluations").fetchone()
    assert comment == f"{MISREAD} (my key is [redacted], sorry)"

    # the export of corrections quotes the masked comment
    (row,) = await asyncio.to_thread(exported_corrections, settings.database_url, tmp_path)
    assert row["comment"] == f"{MISREAD} (my key is [redacted], sorry)"

    # the workflow's history: the key is only in the signals sent straight to Temporal (it
    # records an input as sent); nothing the lineage carried, recorded or said holds it
    shown = await temporal_cli(
        temporal_address, "workflow", "show", "--workflow-id", handle.id, "--output", "json"
    )
    assert shown.returncode == 0, shown.stderr
    events = json.loads(shown.stdout)["events"]
    texts = [(e["eventType"], event_text(e)) for e in events]
    holding = {kind for kind, text in texts if KEY in text or ENCODED_KEY in text}
    assert holding == {"EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED"}
    masked = {kind for kind, text in texts if "[redacted]" in text}
    assert "EVENT_TYPE_MARKER_RECORDED" in masked  # the store steps' inputs and results
    assert "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED" in masked  # the page's score


async def test_a_rater_name_with_control_characters_is_refused_at_the_door(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    hostile = "ana\x1b]0;owned\x07\u202e"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        why = await refused(
            handle, LineageWorkflow.submit_score, {"score": 4, "comment": MISREAD, "rater": hostile}
        )
        assert "rater: a name may not contain control or bidi characters" in why
        assert "U+001B at position 3" in why
        assert "\x1b" not in why and "\u202e" not in why  # quoted as escapes
        why = await refused(handle, LineageWorkflow.submit_score, {"score": 4, "rater": "a" * 101})
        assert "rater: String should have at most 100 characters" in why
        await handle.signal("score", {"score": 4, "comment": MISREAD, "rater": hostile})
        await handle.signal(
            "directive", {"kind": "sticky", "content": "Be kind.", "rater": hostile}
        )
        await handle.signal("score", {"score": 4, "comment": MISREAD, "rater": "  ana  "})
        scored = await wait_for_state(handle, awaiting(2))
        assert scored.rejected_feedback == 2 and scored.sticky_directives == []
        why = await refused(
            handle,
            LineageWorkflow.correct_reading,
            {"wants": ["warmer"], "rater": hostile, "cycle": 1},
        )
        assert "a name may not contain control or bidi characters" in why
        state = await handle.query(LineageWorkflow.state)
    assert state.corrections == [] and "\x1b" not in state.model_dump_json()
    (evaluation,) = store.queries.evaluations(lineage)
    assert evaluation.rater == "ana"  # the name as given, trimmed
    refusals = rejections(store, lineage)
    assert [r.kind for r in refusals] == ["score", "directive"]
    assert all("control or bidi characters" in r.reason for r in refusals)
    assert not any("\x1b" in r.reason + r.payload_preview for r in refusals)


async def test_contradictory_wants_are_refused_with_the_reason(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    contradiction = "bullets and remove:bullets contradict each other"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        why = await refused(
            handle,
            LineageWorkflow.submit_score,
            {"score": 4, "wants": ["bullets", "remove:bullets"], "rater": "ana"},
        )
        assert contradiction in why
        await handle.signal("score", {"score": 4, "wants": ["shorter:half", "shorter:100"]})
        await handle.signal("score", {"score": 4, "comment": "Too long.", "rater": "ana"})
        state = await wait_for_state(handle, awaiting(2))
        assert "shorter:half and shorter:100 contradict each other" in state.last_rejection
        why = await refused(
            handle,
            LineageWorkflow.correct_reading,
            {"wants": ["bullets", "remove:bullets"], "rater": "ana", "cycle": 1},
        )
        assert contradiction in why
        said = await training_camp(
            temporal_address,
            settings.database_url,
            *("correct", lineage, "--rater", "ana", "--want", "bullets", "--remove", "bullets"),
        )
        assert said.returncode == 1 and contradiction in " ".join(said.stdout.split())
        after = await handle.query(LineageWorkflow.state)
    assert after.corrections == [] and after.agent_version == state.agent_version
    assert store.queries.labelled_examples(spec.session_id) == []


async def concurrent_scores(handle: Any, payloads: list[dict[str, Any]]) -> list[asyncio.Task[Any]]:
    """Each payload's answer (the accepted score, or the refusal's reason), sent as
    ``submit_score`` updates at once: the worker is down as they arrive (``run_worker`` is
    entered after), so that the lineage reads them in one workflow task, as a double click or
    two raters' scores arriving together are read."""
    sent = [asyncio.create_task(refused_or_accepted(handle, p)) for p in payloads]
    await asyncio.sleep(1.0)  # the requests reach the server before a worker polls for them
    return sent


async def refused_or_accepted(handle: Any, payload: dict[str, Any]) -> Any:
    try:
        return await handle.execute_update(LineageWorkflow.submit_score, payload)
    except WorkflowUpdateFailedError as error:
        cause = error.cause
        return cause.message if isinstance(cause, ApplicationError) else str(cause)


async def test_two_scores_for_one_output_one_is_taken_and_the_other_refused_at_once(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        first = await wait_for_state(handle, awaiting(1))
    # two raters score the output on the page (which names it) at the same moment
    sent = await concurrent_scores(
        handle,
        [
            {"score": 4, "comment": "Too long.", "rater": "ana", "output_id": first.output_id},
            {"score": 8, "comment": "Good.", "rater": "bob", "output_id": first.output_id},
        ],
    )
    async with run_worker():
        answers = await asyncio.gather(*sent)
        taken = [a for a in answers if not isinstance(a, str)]
        reasons = [a for a in answers if isinstance(a, str)]
        assert len(taken) == 1 and len(reasons) == 1, answers
        assert taken[0].cycle == 1 and taken[0].evaluation_id is not None
        assert "already has a score" in reasons[0] and len(reasons[0]) < 400, reasons[0]
        second = await wait_for_state(handle, awaiting(2))
    # a double click on a score naming its cycle (`training-camp score`, the preview)
    sent = await concurrent_scores(
        handle, [{"score": 6, "rater": "ana", "cycle": 2}, {"score": 6, "rater": "ana", "cycle": 2}]
    )
    async with run_worker():
        answers = await asyncio.gather(*sent)
        taken += [a for a in answers if not isinstance(a, str)]
        reasons = [a for a in answers if isinstance(a, str)]
        assert len(taken) == 2 and len(reasons) == 1, answers
        assert "cycle 2's output already has a score" in reasons[0], reasons[0]
        third = await wait_for_state(handle, awaiting(3))
    assert second.rejected_feedback == third.rejected_feedback == 0
    # the store holds exactly what the answers said: the two scores taken, nothing refused later
    evaluations = store.queries.evaluations(lineage)
    assert [(e.id, e.score) for e in evaluations] == [(t.evaluation_id, t.score) for t in taken]
    assert store.queries.rejected_feedback(lineage) == []
    assert [p.evaluation_id for p in third.score_history] == [t.evaluation_id for t in taken]


async def test_opposite_wants_and_a_correction_naming_two_scores_are_refused(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        # a family and its registered opposite: the checklist could never pass
        why = await refused(
            handle,
            LineageWorkflow.submit_score,
            {"score": 4, "wants": ["shorter", "longer"], "rater": "ana"},
        )
        assert "shorter and longer contradict each other (opposite families)" in why
        await handle.signal("score", {"score": 4, "wants": ["prose", "keep:bullets"]})
        await handle.signal("score", {"score": 4, "comment": "Too long.", "rater": "ana"})
        scored = await wait_for_state(handle, awaiting(2))
        assert "prose and keep:bullets contradict each other" in scored.last_rejection
        why = await refused(
            handle,
            LineageWorkflow.correct_reading,
            {"wants": ["casual", "formal"], "rater": "ana", "cycle": 1},
        )
        assert "casual and formal contradict each other" in why
        said = await training_camp(
            temporal_address,
            settings.database_url,
            *("correct", lineage, "--rater", "ana", "--want", "simpler", "--want", "technical"),
        )
        assert said.returncode == 1
        assert "simpler and technical contradict each other" in " ".join(said.stdout.split())

        # a correction naming its score twice, by evaluation_id and by cycle, that disagree
        (first,) = scored.score_history
        for named in ({"evaluation_id": first.evaluation_id, "cycle": 999}, {"cycle": 1}):
            why = await refused(
                handle,
                LineageWorkflow.correct_reading,
                {"wants": ["warmer"], "rater": "ana", "evaluation_id": "no-such-score", **named},
            )
            assert "name different scores" in why and len(why) < 400, why
        after = await handle.query(LineageWorkflow.state)
        assert after.corrections == [] and after.agent_version == scored.agent_version
        # both, agreeing: taken
        accepted = await handle.execute_update(
            LineageWorkflow.correct_reading,
            {"wants": ["warmer"], "rater": "ana", "evaluation_id": first.evaluation_id, "cycle": 1},
        )
        assert accepted.evaluation_id == first.evaluation_id
    assert [e.score for e in store.queries.evaluations(lineage)] == [4]


async def test_refusals_of_bad_wants_are_short_and_quote_the_want_once(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    bad = ["x" * 25, "y" * 60]
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        for want in bad:
            why = await refused(
                handle, LineageWorkflow.submit_score, {"score": 4, "wants": [want], "rater": "ana"}
            )
            assert len(why) < 400 and why.count(want) == 1 and "unknown family" in why, why
            await handle.signal("score", {"score": 4, "wants": [want]})
        state = await wait_for_state(handle, lambda s: s.rejected_feedback == 2)
        assert all(len(r) < 400 for r in state.recent_rejections)
    for want, record in zip(bad, rejections(store, lineage), strict=True):
        assert len(record.reason) < 400 and record.reason.count(want) == 1, record.reason
