"""A reviewer steering the research agent's tools and flow over eleven cycles, through Temporal,
each score previewed and planned as the review page does it and sent with the plan confirmed
(a change struck where the reviewer strikes one). What the reviewer is told and what the
store keeps:

- each tool or flow change is judged by its own want: a new flow wish never marks an earlier,
  unrelated flow change "not far enough";
- every say-back, plan, verdict, history line and hypothesis is in the chips' words, never a
  family's name; a take-back is read as one ("Read as: take back …"), and a rollback the
  reviewer struck from the plan is neither done nor said to be, its wish still standing;
- one earlier tool description or step sentence can be taken back on its own
  (``remove:describe:tool:NAME``, ``remove:step:prompt:STEP:"…"``);
- ``training-camp status`` is JSON at 80 columns, ``blame`` is readable there, and it credits
  each sentence of a step's prompt to the change that wrote it."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
import urllib.request
from typing import Any

from activities.reading_preview import preview_reading
from activities.trainer import TrainerActivities
from client import await_output, start_session
from domain import wants
from domain.agent import AgentDefinition, AgentRef
from domain.reading_preview import ReadingPreview
from domain.settings import Settings
from review.app import create_app
from review.server import ReviewServer
from tests.conftest import awaiting, run_starter, starter_cli, training_data_cli, wait_for_state
from tests.test_demo_command import free_port
from tests.test_tool_trace import research_spec
from trainer.backends import TrainerBackends
from workflows.lineage import LineageWorkflow

# the family ids a reviewer never reads (docs/scoring.md: "never a family's name")
FAMILY_IDS = ("cite_sources", "check_step", "no_fabrication", "banned", "key_points", "tool_use")
POLISH = "Tighten this answer without losing any number:"
GIVEN = "The output of the research step: {research}"


async def _polish_given_the_findings(client, store, settings, tmp_path) -> tuple[Any, str]:
    """A research lineage started, its first score giving the polish step the findings (as a
    rater does from the picker): its reviewer and its id."""
    spec = research_spec(tmp_path)
    lineage = spec.lineage_id("A")
    (handle,) = await start_session(client, spec, settings.task_queue)
    me = _Reviewer(client, store, handle, lineage)
    await me.score(4, "The polish step should get the findings.", ["step:input:polish+=research"])
    return me, lineage


class _Reviewer:
    """Scores one lineage as the review page does: the reading and the plan previewed by the
    step's own functions, then sent with the changes not struck."""

    def __init__(self, client, store, handle, lineage: str) -> None:
        self.client, self.store, self.handle, self.lineage = client, store, handle, lineage
        self.backends = TrainerBackends(Settings())
        self.planner = TrainerActivities(store, self.backends).planned
        self.cycle = 0

    async def score(
        self,
        score: float,
        comment: str | None,
        wanted: list[str] | None = None,
        strike: str | None = None,
    ) -> tuple[ReadingPreview, Any]:
        self.cycle += 1
        await await_output(self.handle, self.cycle)
        state, seen = await preview_reading(
            self.client,
            self.store,
            self.backends,
            self.lineage,
            score,
            comment,
            wants=wanted,
            planner=self.planner,
        )
        assert seen.planned, seen
        keys = [c.key for c in seen.changes if not (strike and strike in c.label)]
        assert strike is None or len(keys) == len(seen.changes) - 1, seen.changes
        payload: dict[str, Any] = {
            "score": score,
            "comment": comment,
            "changes": keys,
            "rater": "ingrid",
            "output_id": state.output_id,
        }
        if seen.plan_wants is not None:
            payload["wants"] = seen.plan_wants
        await self.handle.execute_update(LineageWorkflow.submit_score, payload)
        return seen, await wait_for_state(self.handle, awaiting(self.cycle + 1))

    def agent(self, version: int) -> AgentDefinition:
        return self.store.queries.agent_definition(AgentRef(agent_id=self.lineage, version=version))


async def test_each_flow_change_is_judged_alone_and_said_back_in_the_chips_words(
    client, store, settings, run_worker, tmp_path
):
    async with run_worker():
        me, lineage = await _polish_given_the_findings(client, store, settings, tmp_path)

        # a new flow wish says nothing of the earlier flow change: judged by its own want
        _, state = await me.score(
            5,
            "Better. The draft step adds nothing, drop it.",
            ["step:remove:draft", "step:input:polish-=draft"],
        )
        assert state.last_verdict == (
            "validated: the polish step given the research step's output: not mentioned; the "
            "score rose by 1"
        )

        await me.score(
            5,
            "That label must go, and cite the handbook.",
            ["cite_sources", 'avoid:"The output of the research step:"',
             'step:prompt:polish:"Give the total in euros."'],
        )  # fmt: skip
        v4 = me.agent(4)
        assert v4.flow[-1].prompt == f"{POLISH}\n{GIVEN}\nGive the total in euros."
        assert "Cite a source" in v4.system_prompt

        # undo, with the rollback of "cite sources" struck: only the polish line goes, said so
        seen, state = await me.score(2, "Worse.", ["undo"], strike="Cite a source")
        assert seen.said_back == "Read as: take back the last change"
        assert [c.label for c in seen.changes] == [
            "in step 'polish', take out 'Give the total in euros.'",
            "take out 'Cite a source for every figure and factual claim.'",
        ]
        assert not any(n.startswith("rolled back") for n in seen.plan_notes), seen.plan_notes
        assert state.last_reading == "Read as: take back the last change"
        assert state.last_evolution.startswith(
            "v4→v5: rolled back the polish step's prompt: 'Give the total in euros.'"
        )
        assert "cite" not in state.last_evolution.split(" (also: ")[0].lower()
        assert "refuted: the polish step's prompt: 'Give the total in euros.': the reviewer " in (
            state.last_verdict
        )
        assert "validated: cite sources: kept: the rater left its rollback out" in (
            state.last_verdict
        )
        assert "cite_sources" in {w.family for w in state.active_wishes}
        v5 = me.agent(5)
        assert "Cite a source" in v5.system_prompt
        assert v5.flow[-1].prompt == f"{POLISH}\n{GIVEN}"

        await me.score(4, "Add a check step.", ["step:add:check"])
        # a take-back read from words is said as one, and its hypothesis is about it
        seen, state = await me.score(3, "The check step does nothing, take it out.")
        assert seen.said_back.startswith("Read as: take back check facts first ('The check")
        assert state.last_reading.startswith("Read as: take back check facts first")
        assert state.last_evolution == "v6→v7: took back check facts first"
        assert [s.name for s in me.agent(7).flow] == ["research", "polish"]

    # every hypothesis says what its change is for; never directives that were not sent
    hypotheses = {r.to_version: r.hypothesis for r in store.queries.evolution_records(lineage)}
    assert hypotheses[5].startswith(
        "With the polish step's prompt: 'Give the total in euros.' rolled back, the agent is as "
        "it was before that change"
    )
    assert hypotheses[7] == "The trace will show no check step, and the next score will rise."
    assert all(h and "added directives" not in h for h in hypotheses.values()), hypotheses

    # the history says standing wishes, verdicts and changes in the chips' words
    history = training_data_cli(
        "history", lineage, url=settings.database_url, env={"COLUMNS": "400"}
    ).stdout
    said = " ".join(history.split())
    assert "v5 checked against: avoid 'the output of the research step:', cite sources" in said
    assert not [f for f in FAMILY_IDS if f in history], history
    assert "not far enough" not in said


async def test_one_earlier_tool_description_or_step_sentence_is_taken_back_alone(
    client, store, settings, run_worker, tmp_path
):
    """``remove:describe:tool:calculator`` (the page's picker and ``--remove
    describe:tool:calculator`` send it alike) gives the tool its description as the lineage's
    first version had it, though the change that added to it is no longer the last;
    ``remove:step:prompt:research:"…"`` takes that sentence out of the step's prompt, whatever
    its case; an undo of it says what it brings back."""
    spec = research_spec(tmp_path)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        me = _Reviewer(client, store, handle, lineage)
        sentence = "Give the result with its unit, in euros."
        await me.score(5, "Say the unit.", [f'describe:tool:calculator:"{sentence}"'])
        assert me.agent(2).tools[0].description.endswith(sentence)
        quote = 'step:prompt:research:"Quote the handbook lines you found, word for word."'
        await me.score(5, "Quote the handbook.", [quote])
        # the picker's remove, a tool's description and the tool, as the page sends it, and
        # `--remove describe:tool:calculator`: the same want
        server = ReviewServer(create_app(client, store), "127.0.0.1", free_port())
        await server.start()
        try:
            picked = await asyncio.to_thread(
                _picked, server, "remove", "describe", "tool:calculator"
            )
            sentence = 'prompt:research:"quote the handbook lines you found, word for word"'
            out = await asyncio.to_thread(_picked, server, "remove", "step", sentence)
        finally:
            await server.stop()
        assert picked == {
            "want": "remove:describe:tool:calculator",
            "label": "calculator's description as it was, before your additions",
        }
        taken = wants.from_options([], ["describe:tool:calculator"], [])
        assert taken == [picked["want"]]
        seen, state = await me.score(5, "The calculator description did nothing.", taken)
        assert seen.said_back == (
            "Read as: calculator's description as it was, before your additions"
        )
        assert me.agent(4).tools == me.agent(1).tools  # as v1 had it
        assert (
            me.agent(4)
            .flow[0]
            .prompt.endswith("\nQuote the handbook lines you found, word for word.")
        )
        assert out["label"] == (
            "the research step's prompt without 'quote the handbook lines you found, word for word'"
        )
        seen, state = await me.score(5, "That quoting line does nothing.", [out["want"]])
        assert [c.label for c in seen.changes] == [
            "in step 'research', take out 'Quote the handbook lines you found, word for word.'"
        ]
        assert me.agent(5) == me.agent(1).model_copy(update={"version": 5})

        _, state = await me.score(1, "Undo that last change.")
        assert state.last_reading == (
            "Read as: take back the last change ('Undo that last change.')"
        )
        assert me.agent(6).flow[0].prompt == me.agent(4).flow[0].prompt
    hypotheses = {r.to_version: r.hypothesis for r in store.queries.evolution_records(lineage)}
    assert hypotheses[6].startswith(
        "With the research step's prompt without 'quote the handbook lines you found, word for "
        "word' rolled back, the agent is as it was before that change"
    )


async def test_status_is_json_and_blame_readable_at_80_columns_each_sentence_credited(
    client, store, settings, run_worker, temporal_address, tmp_path
):
    """The polish step's prompt after two flow changes: its line giving it the findings came
    from the first, its instruction (without ``{draft}``) from the second; ``blame`` says so,
    in a block a part at 80 columns, and ``status`` prints JSON a program reads there."""
    async with run_worker():
        me, lineage = await _polish_given_the_findings(client, store, settings, tmp_path)
        dropped = ["step:remove:draft", "step:input:polish-=draft"]
        await me.score(5, "The draft step adds nothing, drop it.", dropped)

        def cli(*args: str) -> str:
            return starter_cli(
                *args,
                temporal_address=temporal_address,
                database_url=settings.database_url,
                columns=80,
            )

        status, blamed, unknown = await asyncio.gather(
            asyncio.to_thread(cli, "status", lineage),  # a lineage named by its id
            asyncio.to_thread(cli, "blame", lineage),
            asyncio.to_thread(
                run_starter,
                *("status", f"{lineage}-typo"),
                temporal_address=temporal_address,
                database_url=settings.database_url,
            ),
        )
    assert unknown.returncode == 1
    assert f"no lineage {lineage}-typo on this Temporal server" in unknown.stdout

    state = json.loads(status)  # no line break inside a string
    assert state["lineage_id"] == lineage and state["agent_version"] == 3
    assert state["last_reading"].startswith("Read as: no draft step")

    rows = [r for r in store.queries.agent_provenance(lineage) if r.part == "step"]
    assert [(r.name, r.segment, r.version) for r in rows if r.name == "polish"] == [
        ("polish", POLISH, 3),
        ("polish", GIVEN, 2),
    ]
    assert max(len(x) for x in blamed.splitlines()) <= 80
    polish = {b["text"]: b for b in _blocks(blamed) if b["head"].startswith("step polish ·")}
    assert polish[POLISH]["head"].startswith("step polish · v3 ·")
    assert polish[POLISH]["wish"] == "step:input:polish-=draft"
    assert polish[POLISH]["feedback"] == "5: The draft step adds nothing, drop it."
    assert polish[GIVEN]["head"].startswith("step polish · v2 ·")
    assert polish[GIVEN]["wish"] == "step:input:polish+=research"
    assert polish[GIVEN]["feedback"] == "4: The polish step should get the findings."


def _picked(server: ReviewServer, action: str, family: str, amount: str) -> dict[str, str]:
    """The review page's picker: the want its action, family and amount name, as the app
    checks it (``GET /wants/label``)."""
    want = f"{action}:{family}:{amount}"
    url = f"http://127.0.0.1:{server.port}/wants/label?want={urllib.parse.quote(want)}"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _blocks(blamed: str) -> list[dict[str, str]]:
    """`blame`'s blocks as printed at 80 columns: a head line, then indented lines (the part's
    text, feedback, wish, reason), each joined back into one string."""
    blocks: list[dict[str, str]] = []
    for chunk in re.split(r"\n\s*\n", blamed.strip()):
        head, *rest = chunk.splitlines()
        body = " ".join(" ".join(line.split()) for line in rest)
        fields = re.split(r" (feedback|wish|reason): ", f" {body}")
        block = {"head": head, "text": fields[0].strip()}
        block.update(dict(zip(fields[1::2], (f.strip() for f in fields[2::2]), strict=True)))
        blocks.append(block)
    return blocks
