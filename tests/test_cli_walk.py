"""A reviewer's walk from the command line, through the dev server and the real commands: the
question each output answers (it changes every cycle) in `training-camp inbox` and `output`,
parameter changes named in `training-camp-data history`, and `history` giving a verdict in
the words the `state` query uses."""

from __future__ import annotations

import asyncio

from client import start_session
from tests.conftest import (
    awaiting,
    make_spec,
    starter_cli,
    threaded_starter_cli,
    training_data_cli,
    wait_for_state,
)

QUESTIONS = [
    "Explain the four-day work week for small software teams.",
    "Explain code review for a team of three.",
]


async def test_the_cli_shows_each_cycles_question_names_parameters_and_agrees_with_state(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    cli = threaded_starter_cli(temporal_address, settings.database_url)

    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        inbox, output, narrow = await asyncio.gather(
            cli("inbox", "--session", spec.session_id),
            cli("output", lineage),
            asyncio.to_thread(
                starter_cli,
                "inbox",
                "--session",
                spec.session_id,
                temporal_address=temporal_address,
                database_url=settings.database_url,
                columns=80,
            ),
        )
        # the inbox row names the question its output answers
        (row,) = [line for line in inbox.splitlines() if line.startswith("│ 1 │ A ")]
        assert QUESTIONS[0] in row
        # at 80 columns the lineage's id is whole, beneath the table
        assert (
            f"#1 {lineage} (workflow lineage-{lineage}, output {lineage}:c1)" in narrow.splitlines()
        )
        table = [line for line in narrow.splitlines() if line[:1] in "┏┃┡│└"]
        assert table and max(map(len, table)) <= 80
        assert output.startswith(f"Question (cycle 1):\n{QUESTIONS[0]}\n")

        await handle.signal(
            "score", {"score": 5, "comment": "Too long, and it wanders off on tangents."}
        )
        await wait_for_state(handle, awaiting(2))
        # asked again, with a lower score: the change went the right way, not far enough
        await handle.signal("score", {"score": 3, "comment": "Still too long."})
        state = await wait_for_state(handle, awaiting(3))

    assert state.last_verdict.startswith("not far enough: shorter")
    output, history = await asyncio.gather(
        cli("output", lineage, "--cycle", "2"),
        asyncio.to_thread(
            training_data_cli,
            "history",
            lineage,
            url=settings.database_url,
            env={"COLUMNS": "1000"},  # a row per line
        ),
    )
    assert output.startswith(f"Question (cycle 2):\n{QUESTIONS[1]}\n")  # the cycle's own
    assert QUESTIONS[0] not in output
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    (judged,) = [line for line in lines if "evolution.outcome" in line]
    assert "not far enough: shorter" in judged and "(score -2)" in judged
    assert "validated (" not in judged  # what it said before: a flag, not the verdict
    # the evolution's line names the parameter it changed, as the trainer's summary does
    (evolved,) = [line for line in lines if "agent.evolved" in line and "v1 → v2" in line]
    assert "temperature 0.7 → 0.4" in evolved
