"""The reading previewed before anything changes: what the preview shows is what the cycle step
acts on (the same reader, corrections and backend), every family has its words, the preview
of a `rules+claude` lineage asks Claude only for a comment the rules cannot read (through the
real SDK and a local Messages API) and, with no key where the rater scores, says the step will
read it rather than guess."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path

import pytest
from pydantic import SecretStr

from client import start_session
from domain import reading_preview, want_labels, wants
from domain.agent import AgentConstraints, AgentDefinition, AgentParameters
from domain.corrections import LabelledExample
from domain.settings import Settings
from tests import reading_snapshot, test_review_app
from tests.conftest import awaiting, make_spec, wait_for_state
from tests.fake_messages_api import FakeMessagesAPI, tool_use_message
from tests.test_review_guard import call
from trainer import cycle_step, preview
from trainer.backends import RulesTrainer, TrainerBackends
from trainer.cycle_step import LineageMemory

# the review app's fixture: the app on a free port
inbox_server = test_review_app.inbox_server

AGENT = AgentDefinition(
    name="Writer",
    system_prompt="You are a helpful writer. Use bullet points, not paragraphs.",
    parameters=AgentParameters(model="offline-analyst-1", temperature=0.7, max_tokens=1200),
    constraints=AgentConstraints(max_tokens=4096),
)
# My own wording, in kinds a rater writes: asks, amounts, take-backs, praise, mixed, nothing
COMMENTS = [
    (3, "Far too wordy, about half as long please, and lose the bullets."),
    (4, "Sounds like a robot wrote it. Friendlier, and one worked example."),
    (9, "Lovely, the bullet points are spot on."),
    (5, "Good start but it rambles; stick to the question."),
    (6, "Could you cite where the numbers come from?"),
    (2, "This misses the point entirely."),
    (7, "Put the recommendation up front, then a table comparing the options."),
    (4, "undo that last change, it was better before"),
    (3, "Oh brilliant, so decisive, so bold."),
    (4, "Was all of that really needed?"),
]


def test_every_family_has_its_words_and_a_want_reads_as_a_rater_would_say_it():
    assert [f for f, _ in want_labels.glossary()] == wants.families()
    assert all(words for _, words in want_labels.glossary())
    assert want_labels.label("shorter:half") == "shorter: about half"
    assert want_labels.label("remove:table") == "no table"
    assert want_labels.label("undo", undo_to=1) == "back to v1"
    assert want_labels.label("example:1") == "one example"
    assert want_labels.label("less:formal") == "less: formal tone"
    with pytest.raises(ValueError, match="unknown family 'tabel'"):
        want_labels.label("tabel")


def test_why_a_change_is_made_is_said_in_the_chips_words_not_the_families_names():
    """A plan confirmed as chips: each change's "why" (the page's hover, the CLI's "why:"
    line) names the wish as its chip does, without the internal want the chip sent; the
    rater's own words stay quoted."""
    agent = AgentDefinition(
        name="a",
        system_prompt="You are an analyst.",
        parameters=AgentParameters(model="offline-analyst-1"),
    )
    memory = LineageMemory(session_id="s", lineage_id="L", wants=["conclusion_first", "key_points"])
    step = asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 5, None))
    said = [reading_preview.planned_change(c).why for c in step.plan.changes]
    assert said and all("conclusion_first" not in w and "key_points" not in w for w in said)
    assert "feedback asked for answer first" in said
    assert "feedback asked for key points only" in said
    read = asyncio.run(
        cycle_step.take(
            RulesTrainer(),
            agent,
            memory.model_copy(update={"wants": None}),
            4,
            "Lead with the recommendation.",
        )
    )
    (why,) = [reading_preview.planned_change(c).why for c in read.plan.changes]
    assert why == "feedback asked for answer first ('Lead with the recommendation')"


@pytest.mark.parametrize(("score", "comment"), COMMENTS)
def test_the_preview_is_the_reading_the_step_acts_on(score: float, comment: str):
    corrections = [
        LabelledExample(
            correction_id="c1",
            session_id="s",
            lineage_id="L",
            evaluation_id="e1",
            comment="sounds like a robot wrote it",
            corrected=["warmer"],
        )
    ]
    memory = LineageMemory(session_id="s", lineage_id="L", corrections=corrections)
    seen = asyncio.run(preview.preview(RulesTrainer(), memory, score, comment, undo_to=1))
    step = asyncio.run(cycle_step.take(RulesTrainer(), AGENT, memory, score, comment))
    assert seen.wants == wants.wants_of(step.analysis.aspects)
    assert seen.said_back == cycle_step.said_back(step)
    # sent back as confirmed wants, the step makes the same agent
    confirmed = memory.model_copy(update={"wants": seen.wants})
    again = asyncio.run(cycle_step.take(RulesTrainer(), AGENT, confirmed, score, comment))
    if seen.exact:
        assert again.agent.system_prompt == step.agent.system_prompt


def test_what_the_reader_cannot_place_is_said_not_acted_on():
    memory = LineageMemory(session_id="s", lineage_id="L")
    missed = "This misses the point entirely."
    seen = asyncio.run(preview.preview(RulesTrainer(), memory, 2, missed))
    assert seen.chips == [] and seen.said_back.endswith(f"not understood: {missed!r}")
    (unsure,) = seen.unsure
    assert unsure.quote == missed and "found nothing in it to act on" in unsure.why
    # irony under a low score: said back, proposed nothing, acted on nothing
    ironic = asyncio.run(preview.preview(RulesTrainer(), memory, 3, "Oh brilliant, so bold."))
    assert ironic.chips == [] and [u.quote for u in ironic.unsure] == ["Oh brilliant, so bold."]
    assert "meant the other way" in ironic.unsure[0].why
    # a wish no chip can carry is named: sending the chips alone would lose it
    topic = asyncio.run(preview.preview(RulesTrainer(), memory, 4, "Focus on the costs, not X."))
    assert topic.unsaid and "the costs" in topic.unsaid[0] and not topic.exact
    # a language is a chip like the others: editing the chips keeps it
    french = asyncio.run(preview.preview(RulesTrainer(), memory, 4, "Answer in French please."))
    assert [(c.want, c.label) for c in french.chips] == [("language:french", "in French")]
    assert french.exact


def _claude_reads_it(api: FakeMessagesAPI) -> None:
    api.script = [
        (
            200,
            tool_use_message(
                "claude-sonnet-5",
                "record_score_analysis",
                {
                    "sentiment": "negative",
                    "aspects": [
                        {
                            "aspect": "tone",
                            "sentiment": "negative",
                            "quote": "not what I had in mind",
                            "confidence": 0.9,
                            "want": "warmer",
                        }
                    ],
                },
                "toolu_1",
            ),
        )
    ]


def test_rules_plus_claude_previews_with_claude_only_what_the_rules_cannot_read():
    with FakeMessagesAPI() as api:
        _claude_reads_it(api)
        settings = Settings(anthropic_api_key=SecretStr("sk-test"), anthropic_base_url=api.base_url)
        backend = preview.backend_for(TrainerBackends(settings), "rules+claude", "claude-sonnet-5")
        memory = LineageMemory(session_id="s", lineage_id="L")
        read = asyncio.run(preview.preview(backend, memory, 5, "Far too long."))
        assert read.read_by == "rules" and read.wants == ["shorter"] and api.requests == []
        handed = asyncio.run(preview.preview(backend, memory, 3, "Nope, not what I had in mind."))
    assert handed.read_by == "claude" and handed.wants == ["warmer"]
    assert (
        len(api.requests) == 1
        and "not what I had in mind" in api.requests[0]["messages"][0]["content"]
    )
    assert handed.exact


def test_without_a_key_the_preview_says_the_step_will_read_it():
    backend = preview.backend_for(TrainerBackends(Settings()), "rules+claude", "claude-sonnet-5")
    memory = LineageMemory(session_id="s", lineage_id="L")
    readable = asyncio.run(preview.preview(backend, memory, 5, "Far too long."))
    assert readable.exact and readable.wants == ["shorter"]
    unreadable = asyncio.run(preview.preview(backend, memory, 3, "Nope, not what I had in mind."))
    assert not unreadable.exact and unreadable.wants == []
    assert "Claude reads this comment when the step runs" in (unreadable.incomplete or "")
    assert "ANTHROPIC_API_KEY" in (unreadable.incomplete or "")


def test_the_guide_lists_every_family_in_its_words():
    guide = (Path(__file__).parent.parent / "docs" / "scoring.md").read_text(encoding="utf-8")
    missing = [f for f, words in want_labels.glossary() if f"`{f}` {words}" not in guide]
    assert missing == [], "list them as `family` words (domain/want_labels.glossary())"


def test_rules_plus_claude_previews_the_abstained_clause_as_claude_reads_it():
    """What the rules engine could not place goes to Claude, alone, with the session's
    corrections most like it; the preview shows Claude's reading of it beside the rules'."""
    ironic = "Oh marvellous, so confident, so punchy."
    corrections = [
        LabelledExample(
            correction_id="c1",
            session_id="s",
            lineage_id="L",
            evaluation_id="e1",
            comment="So punchy it reads like a telegram.",
            corrected=["hedge"],
        )
    ]
    with FakeMessagesAPI() as api:
        api.script = [
            (
                200,
                tool_use_message(
                    "claude-sonnet-5",
                    "record_clause_readings",
                    {"readings": [{"clause": ironic, "wants": ["hedge"]}]},
                    "toolu_1",
                ),
            )
        ]
        settings = Settings(anthropic_api_key=SecretStr("sk-test"), anthropic_base_url=api.base_url)
        backend = preview.backend_for(TrainerBackends(settings), "rules+claude", "claude-sonnet-5")
        memory = LineageMemory(session_id="s", lineage_id="L", corrections=corrections)
        seen = asyncio.run(preview.preview(backend, memory, 3, f"{ironic} Add a table."))
    (request,) = api.requests
    asked = str(request["messages"])
    assert ironic in asked and "Add a table" not in asked and "telegram" in asked
    assert set(seen.wants) == {"table", "hedge"} and seen.exact
    assert seen.handed_over == [ironic] and seen.unsure == []
    # without a key here, that clause is left to the step: the chips are not the whole reading
    offline = preview.backend_for(TrainerBackends(Settings()), "rules+claude", "claude-sonnet-5")
    alone = asyncio.run(preview.preview(offline, memory, 3, f"{ironic} Add a table."))
    assert alone.wants == ["table"] and not alone.exact
    assert "cannot be previewed here" in (alone.incomplete or "")


def test_a_wish_a_standing_one_would_block_is_said_before_sending_with_the_take_back():
    from domain.checks import ActiveWish

    table = ActiveWish(family="table", quote="the options side by side in a table", cycle=2)
    memory = LineageMemory(session_id="s", lineage_id="L", wishes=[table], cycle=5)
    seen = asyncio.run(preview.preview(RulesTrainer(), memory, 5, "Short paragraphs instead."))
    assert seen.wants == ["prose"]
    (blocked,) = seen.unsure
    assert blocked.why.startswith("kept 'the options side by side in a table': asked for in cycle")
    assert [c.want for c in blocked.proposed] == ["remove:table"] and blocked.standing
    # taken back in the same comment, nothing stands in the way
    both = "Forget the table. Short paragraphs instead."
    seen = asyncio.run(preview.preview(RulesTrainer(), memory, 5, both))
    assert seen.wants == ["prose", "remove:table"] and seen.unsure == []


async def test_a_long_preview_is_read_off_the_apps_event_loop(
    client, store, settings, run_worker, inbox_server, monkeypatch
):
    """A 4,000-character comment's preview is held while it is read, until another rater's
    request has been answered: a reading on the app's event loop would hold that request too.
    Then the preview itself answers with what the comment asks."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    read = cycle_step.rules_reading

    def held(*args, **kwargs):  # type: ignore[no-untyped-def]
        started.set()
        release.wait(60)  # bounded: read on the loop, it holds every request here, then goes on
        try:
            return read(*args, **kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(cycle_step, "rules_reading", held)
    spec = make_spec()
    lineage = spec.lineage_id("A")
    comment = ("Far too wordy, about half as long please, and lose the bullets. " * 70)[:4000]
    server = await inbox_server()
    body = urllib.parse.urlencode({"score": "3", "comment": comment}).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": server.url}
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        previewing = asyncio.create_task(
            call(server, "POST", f"/lineages/{lineage}/read", body, headers)
        )
        assert await asyncio.to_thread(started.wait, 60)
        other = await call(server, "GET", "/wants/label?want=table")
        answered_while_reading = not finished.is_set()
        release.set()
        status, _, said = await previewing
    assert other[0] == 200 and json.loads(other[2])["label"]
    assert answered_while_reading
    assert status == 200, said
    seen = json.loads(said)
    assert {"shorter:half", "remove:bullets"} <= {c["want"] for c in seen["chips"]}, seen


def _public_comments() -> list[tuple[float, str]]:
    """Every (score, comment) of the public development sets: the cases, each step of the
    sequences, and the contrast set as its generator writes it."""
    shared = reading_snapshot.SHARED
    found: list[tuple[float, str]] = []
    for line in (shared / "cases.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            case = json.loads(line)
            found.append((case["score"], case["comment"]))
    for line in (shared / "sequences.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            found += [(s["score"], s["comment"]) for s in json.loads(line)["steps"]]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "contrast.jsonl"
        subprocess.run(
            [sys.executable, str(shared / "contrast.py"), "gen", str(out)],
            check=True,
            capture_output=True,
        )
        found += [(c["score"], c["comment"]) for c in map(json.loads, out.open())]
    return found


def test_the_preview_and_the_step_read_every_public_case_alike():
    """One reading path: for every comment of the public sets the preview proposes exactly
    the wants the step reads, and says them back in the same words."""
    memory = LineageMemory(session_id="s", lineage_id="L")
    comments = _public_comments()
    assert len(comments) >= 70 + 120
    differing = []
    for score, comment in comments:
        seen = asyncio.run(preview.preview(RulesTrainer(), memory, score, comment, undo_to=1))
        step = asyncio.run(cycle_step.take(RulesTrainer(), AGENT, memory, score, comment))
        # a revert's words name the version it goes back to, which this memory has none of
        reverting = any(w.startswith("revert") for w in seen.wants)
        if seen.wants != wants.wants_of(step.analysis.aspects) or (
            not reverting and seen.said_back != cycle_step.said_back(step)
        ):
            differing.append(comment)
    assert differing == []


def test_a_comment_not_understood_is_said_with_its_reason_once():
    """A quote holding an apostrophe is written in double quotes: its reason is still the
    reason alone, not the note repeated."""
    from trainer import preview
    from trainer.backends import RulesTrainer
    from trainer.cycle_step import LineageMemory

    memory = LineageMemory(session_id="s", lineage_id="L")
    comment = "Honestly, I can't make head nor tail of what it's on about."
    seen = asyncio.run(preview.preview(RulesTrainer(), memory, 3, comment))
    (unsure,) = seen.unsure
    assert unsure.why.startswith("the rules engine found nothing in it to act on")
    assert "not understood" not in unsure.why
