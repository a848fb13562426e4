"""`training-camp score` and `read` as a rater runs them, through the dev server: the reading
shown before anything is sent, edited at the prompt on a terminal (a pseudo-terminal here), and
the step acting on exactly the wishes taken; `--yes` or no terminal takes the reading as read;
`read` previews only; cancelling sends nothing."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

from client import start_session
from domain import wants
from domain.agent import AgentRef
from domain.reading_preview import change_words
from domain.trainer import EvolutionChange, ScoreAnalysis
from tests.conftest import (
    awaiting,
    lineage_history,
    make_spec,
    run_starter,
    threaded_starter_cli,
    wait_for_state,
)
from workflows.lineage import LineageWorkflow

ROOT = Path(__file__).parent.parent
QUESTIONS = [
    "Explain how to pick a first programming language.",
    "Explain what a mortgage offset account is.",
    "Explain how to prepare for a job interview.",
]
COMMENT = "Way too long, wanted quick bullets. It wanders off on tangents."
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TAKE = "Take it [t], edit it [e] or cancel [c]? "


def on_a_terminal(
    args: list[str], env: dict[str, str], replies: list[tuple[str, str]], timeout: float = 60
) -> tuple[int, str]:
    """Run ``starter.py`` on a pseudo-terminal: for each (prompt, reply), wait until the
    prompt is printed (after the previous one), then type the reply. The exit code and all it
    printed, escape sequences removed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "starter.py", *args],
        cwd=ROOT,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    printed = b""
    seen = 0

    def read_some(wait: float) -> bool:
        nonlocal printed
        ready, _, _ = select.select([master], [], [], wait)
        if not ready:
            return True
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the command ended: the terminal is closed
            return False
        printed += chunk
        return bool(chunk)

    try:
        for prompt, reply in replies:
            waited = 0.0
            while prompt.encode() not in printed[seen:]:
                if waited > timeout:
                    raise AssertionError(f"never asked {prompt!r}; printed:\n{printed.decode()}")
                if not read_some(0.1) and prompt.encode() not in printed[seen:]:
                    raise AssertionError(f"ended before {prompt!r}:\n{printed.decode()}")
                waited += 0.1
            seen = printed.index(prompt.encode(), seen) + len(prompt)
            os.write(master, reply.encode() + b"\r")
        while read_some(0.2):
            if proc.poll() is not None and not select.select([master], [], [], 0.2)[0]:
                break
        code = proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return code, ESCAPES.sub("", printed.decode(errors="replace")).replace("\r\n", "\n")


async def test_a_rater_edits_the_reading_at_the_prompt_and_the_step_acts_on_it(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    env = {
        "PATH": os.environ["PATH"],
        "COLUMNS": "200",
        "TERM": "dumb",
        "TEMPORAL_ADDRESS": temporal_address,
        "TRAINING_CAMP_DATABASE_URL": settings.database_url,
    }
    cli = threaded_starter_cli(temporal_address, settings.database_url)
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))

        # `read` previews only: the reading in words, nothing sent
        previewed = await cli("read", COMMENT, "--lineage", lineage, "--score", "3")
        assert previewed.startswith("Read as: shorter ('Way too long')")
        assert "[1] shorter (shorter)  [2] bullet points (bullets)  [3] stay on topic" in previewed

        # cancelled at the prompt: nothing is sent
        code, printed = await asyncio.to_thread(
            on_a_terminal, ["score", lineage, "3", COMMENT, "--rater", "ana"], env, [(TAKE, "c")]
        )
        assert code == 1 and "Cancelled: nothing sent." in printed
        assert "Scoring cycle 1's output (" in printed  # which output, before anything is asked
        assert (await handle.query(LineageWorkflow.state)).score_history == []
        # a score pinned to a cycle the rater read is refused when another awaits, not moved
        code, printed = await asyncio.to_thread(
            on_a_terminal, ["score", lineage, "3", "--cycle", "2", "--yes"], env, []
        )
        assert code == 1 and "refused" in printed and "cycle 2" in printed
        assert (await handle.query(LineageWorkflow.state)).score_history == []

        # edited: bullets dropped, a table added as `correct` takes it; the step's plan for
        # them shown, one change of it left out, then taken
        code, printed = await asyncio.to_thread(
            on_a_terminal,
            ["score", lineage, "3", COMMENT, "--rater", "ana"],
            env,
            [
                (TAKE, "e"),
                ("edit> ", "drop bullets"),
                ("edit> ", "--want tabel"),  # a typo: refused with the reason, nothing lost
                ("edit> ", "--want table"),
                ("edit> ", ""),
                (TAKE, "e"),
                ("edit> ", "drop c9"),  # no such change: said, nothing lost
                ("edit> ", "drop c1"),
                ("edit> ", ""),
                (TAKE, "t"),
            ],
        )
        assert code == 0, printed
        assert "unknown family 'tabel'" in printed
        assert "Wishes: [1] shorter  [2] stay on topic  [3] table" in printed
        assert "drop 'c9': no such change (c1 to c5)" in printed
        plans = printed.split("Changes the step makes, and only these:\n")
        # the comment's plan, the plan for the wishes as edited, and that plan less c1
        assert len(plans) == 4, printed
        planned = re.findall(r"^  c(\d+)  (.+)$", plans[2].split(TAKE)[0], re.M)
        left = re.findall(r"^  c(\d+)  (.+)$", plans[3].split(TAKE)[0], re.M)
        assert len(planned) > 1 and left == planned[1:], printed
        # each change says why, as the page's hover does (a rollback, a take-out)
        whys = re.findall(r"^       why: (.+)$", plans[2].split(TAKE)[0], re.M)
        assert len(whys) == len(planned) and all(whys), printed
        left_out = planned[0][1]
        assert "score 3 accepted for cycle 1. Read as: shorter ('Way too long')" in printed
        state = await wait_for_state(handle, awaiting(2))
        assert state.last_wants == ["shorter", "steadier", "table"]

        # no terminal: taken as read
        said = await cli("score", lineage, "4", "Still too long.", "--rater", "ana")
        assert "score 4 accepted for cycle 2. Read as: shorter ('Still too long')" in said
        later = await wait_for_state(handle, awaiting(3))
    assert later.last_wants == ["shorter"]

    # each names the output whose reading was shown
    accepted = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request
        async for e in lineage_history(client, handle)
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]
    sent = [json.loads(u.input.args.payloads[0].data) for u in accepted]
    assert [(s["cycle"], s["output_id"]) for s in sent] == [
        (1, f"{lineage}:c1"),
        (2, f"{lineage}:c2"),
    ]
    (first, second) = store.queries.evaluations(lineage)
    assert (first.score, first.comment, first.rater) == (3.0, COMMENT, "ana")
    assert (second.score, second.rater) == (4.0, "ana")
    # the store: v2 was made from exactly the wishes taken at the prompt
    v1_to_v2 = next(r for r in store.queries.evolution_records(lineage) if r.to_version == 2)
    read = ScoreAnalysis.model_validate_json(v1_to_v2.score_analysis)
    read_as = wants.wants_of(read.aspects)
    assert read_as == ["shorter", "steadier", "table"]
    v2 = store.queries.agent_definition(AgentRef(agent_id=lineage, version=2)).system_prompt
    assert "table" in v2 and "bullet" not in v2.lower()
    # ... and exactly the changes confirmed: the plan shown, less the one left out
    made = [change_words(EvolutionChange.model_validate(c)) for c in json.loads(v1_to_v2.changes)]
    assert made == [label for _, label in left] and left_out not in made
    assert len(sent[0]["changes"]) == len(left) and sent[0]["wants"] == read_as
    # taken as read, the whole plan shown is sent
    assert sent[1]["changes"] and "wants" in sent[1]


# family ids and wish syntax a rater never wrote: none belongs in what is said back, outside
# the rater's own words quoted
IDS = re.compile(r"conclusion_first|focus|language|\bon:|\boff:")
QUOTED = re.compile(r"\((['\"]).*?\1\)")


def ids_in(line: str) -> list[str]:
    return IDS.findall(QUOTED.sub("", line))


async def test_the_lineages_worker_reads_the_comment_in_the_raters_words(
    client, settings, run_worker, temporal_address, tmp_path
):
    """`read` and `score` show the reading the lineage's worker makes (its store, its reader,
    its trainer): the command needs no store of its own. The say-back names no family, and
    "nothing changes" is said only when nothing would."""
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    # a store that knows no lineage: the reading is not made here
    elsewhere = f"sqlite:///{tmp_path}/elsewhere.db"
    env = {
        "PATH": os.environ["PATH"],
        "COLUMNS": "200",
        "TERM": "dumb",
        "TEMPORAL_ADDRESS": temporal_address,
        "TRAINING_CAMP_DATABASE_URL": elsewhere,
    }
    cli = threaded_starter_cli(temporal_address, elsewhere)
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))

        mixed = (
            "Put the recommendation first, and focus on phone length rather than history. "
            "Write it in German."
        )
        said = await cli("read", mixed, "--lineage", lineage, "--score", "4")
        first, wishes, *rest = said.splitlines()
        assert first.startswith("Read as: answer first ('Put the recommendation first')")
        assert "more on phone length" in first and "in German" in first
        # a language is a wish like the others; a topic is read, but no wish carries it
        assert wishes.startswith("Wishes: [1] answer first") and "in German" in wishes
        also = next(line for line in rest if "also read" in line)
        assert "more on phone length" in also and "German" not in also
        assert ids_in(first) == [] and ids_in(also) == [], said

        # a wish no chip carries is acted on: not "nothing changes" beside it
        costs = await cli("read", "Focus on the costs.", "--lineage", lineage, "--score", "4")
        assert costs.startswith("Read as: more on the costs")
        assert "nothing changes" not in costs
        assert "Wishes: none to list; the step acts on what is also read (below)" in costs
        nothing = await cli("read", "Fine.", "--lineage", lineage, "--score", "6")
        assert "Wishes: none, nothing changes" in nothing

        # edited at the prompt, the wishes are sent as listed: the topic is said dropped
        code, printed = await asyncio.to_thread(
            on_a_terminal,
            ["score", lineage, "3", "Too long. Focus on the costs.", "--rater", "ana"],
            env,
            [(TAKE, "e"), ("edit> ", "drop 1"), ("edit> ", ""), (TAKE, "c")],
        )
        assert code == 1 and "Cancelled: nothing sent." in printed
        assert "dropped, since you edited the wishes: more on the costs" in printed
        # true now (nothing else is sent), and the plan made again for no wishes says so
        assert "Wishes: none\n" in printed
        assert "edit> \nChanges: none, the agent stays as it is" in printed

        unknown = run_starter(
            "read",
            "Shorter.",
            "--lineage",
            "no-such-lineage",
            temporal_address=temporal_address,
            database_url=elsewhere,
        )
        assert unknown.returncode == 1 and "no lineage 'no-such-lineage'" in unknown.stdout
        assert (await handle.query(LineageWorkflow.state)).score_history == []  # nothing sent
