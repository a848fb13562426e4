"""A persona plays a lineage cycle after cycle through the review page (headless Chromium) and
`training-camp score` (on a pseudo-terminal), catching each misreading at the preview: the
chips (or the printed wishes) are edited to what the comment means before it is sent, so no
cycle runs on a misread version.

    .venv/bin/python -m bench.persona_walk [--persona bench/data/persona-support-lead.json]

The persona file holds each turn's score, comment, where it is sent (``page`` or ``cli``) and
what it means as wants, written before any reading was seen. Prints, per turn, the reading
previewed, the edits made and the reading the step acted on; then how many chips were edited,
and where, and how many cycles ran on a version made from a reading other than the meant one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from selenium.webdriver.common.keys import Keys

from client import await_output, start_session
from domain import wants
from domain.settings import Settings
from domain.trainer import ScoreAnalysis
from review.app import create_app
from review.server import ReviewServer
from services.dev_server import start_in_memory
from store import Store
from tests.browser import headless_chromium
from tests.conftest import make_spec
from tests.test_demo_command import free_port
from tests.test_score_command import TAKE, on_a_terminal
from worker import build_worker

PERSONA = Path(__file__).parent / "data" / "persona-support-lead.json"


def edits(read: list[str], means: list[str]) -> tuple[list[str], list[str]]:
    """(chips to remove, chips to add) to turn the reading into what the comment means."""
    return [w for w in read if w not in means], [w for w in means if w not in read]


def on_the_page(browser: Any, card: str, score: float, comment: str, means: list[str]) -> list[str]:
    """Type the score and comment, wait for the chips, edit them to ``means`` with the
    picker and the chips' own buttons, press Enter; the chips as first previewed."""
    score_field = browser.execute_script(f"return {card}.querySelector('.score-input');")
    score_field.send_keys(f"{score:g}", Keys.TAB)
    field = browser.switch_to.active_element
    field.send_keys(comment)
    said = f"{card}.querySelector('form.score .reading .said').textContent"
    chips = f"Array.from({card}.querySelectorAll('form.score .chip'), c => c.dataset.want)"
    for _ in range(200):
        if browser.execute_script(f"return {said}.startsWith('Read as');"):
            break
        time.sleep(0.05)
    read = browser.execute_script(f"return {chips};")
    drop, add = edits(read, means)
    form = f"{card}.querySelector('form.score')"
    for want in drop:  # the chip's own button, as Enter or a click on it does
        browser.execute_script(
            f"Array.from({form}.querySelectorAll('.chip'))"
            ".find(c => c.dataset.want === arguments[0]).click();",
            want,
        )
    for want in add:  # the picker: action, family, amount, Add
        browser.execute_script(
            f"const f = {form};"
            "f.querySelector('.pick-action').value = arguments[0];"
            "f.querySelector('.pick-family').value = arguments[1];"
            "f.querySelector('.pick-amount').value = arguments[2];"
            "f.querySelector('.add-want').click();",
            *_parts(want),
        )
        for _ in range(200):
            if want in browser.execute_script(f"return {chips};"):
                break
            time.sleep(0.05)
    assert sorted(browser.execute_script(f"return {chips};")) == sorted(means)
    field.send_keys(Keys.ENTER)
    for _ in range(400):
        if browser.execute_script(
            f"return {card}.querySelector('form.score .message.ok') !== null;"
        ):
            break
        time.sleep(0.05)
    return read


def _parts(want: str) -> tuple[str, str, str]:
    aspect = wants.parse(want)
    amount = want.split(":")[-1] if aspect.amount else ""
    return aspect.action or "add", aspect.want or "", amount


async def main(persona_path: Path) -> None:
    persona = json.loads(persona_path.read_text())
    env = await start_in_memory()
    browser = await asyncio.to_thread(headless_chromium, 1400, 1000)
    rows, edited_chips, misread_cycles = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{tmp}/walk.db")
        settings = Settings(
            task_queue=f"walk-{uuid.uuid4().hex[:8]}", database_url=str(store.engine.url)
        )
        spec = make_spec(inputs=[f"Question {n}: how should a support team handle "
                                 f"{topic}?" for n, topic in enumerate(
                                     ["a refund backlog", "angry escalations", "tier-2 handoffs",
                                      "weekend coverage", "a product outage", "SLA breaches",
                                      "macro sprawl", "onboarding new agents", "churn signals"],
                                     1)])  # fmt: skip
        lineage = spec.lineage_id("A")
        card = f"document.getElementById('lineage-{lineage}')"
        cli_env = {
            "PATH": os.environ["PATH"],
            "COLUMNS": "200",
            "TERM": "dumb",
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "TRAINING_CAMP_DATABASE_URL": settings.database_url,
        }
        async with build_worker(env.client, store, settings):
            (handle,) = await start_session(env.client, spec, settings.task_queue)
            server = ReviewServer(
                create_app(env.client, store, settings=settings), "127.0.0.1", free_port()
            )
            await server.start()
            page = f"{server.url}/sessions/{spec.session_id}"
            await asyncio.to_thread(browser.get, page)
            await asyncio.to_thread(
                browser.execute_script, "localStorage.setItem('rater', 'priya');"
            )
            for cycle, turn in enumerate(persona["turns"], 1):
                await await_output(handle, cycle)
                means = turn["means"]
                if turn["via"] == "page":
                    await asyncio.to_thread(browser.get, page)
                    read = await asyncio.to_thread(
                        on_the_page, browser, card, turn["score"], turn["comment"], means
                    )
                else:
                    read = await _read_by_cli(cli_env, lineage, turn)
                drop, add = edits(read, means)
                edited_chips += [(cycle, turn["via"], f"-{w}") for w in drop]
                edited_chips += [(cycle, turn["via"], f"+{w}") for w in add]
                state = await await_output(handle, cycle + 1)
                acted = state.last_wants
                misread_cycles += sorted(acted) != sorted(means)
                rows.append((cycle, turn["via"], turn["comment"], read, means, acted))
            await server.stop()
        made = [
            sorted(wants.wants_of(ScoreAnalysis.model_validate_json(r.score_analysis).aspects))
            for r in store.queries.evolution_records(lineage)
        ]
    await asyncio.to_thread(browser.quit)
    await env.shutdown()
    print(f"persona: {persona['persona']}")
    for cycle, via, comment, read, means, acted in rows:
        print(f"cycle {cycle} ({via}): {comment!r}")
        print(f"  previewed {read}  meant {means}  acted on {acted}")
    wrong = [m for m in made if m not in [sorted(r[4]) for r in rows]]
    print(
        f"{len(rows)} cycles; {len(edited_chips)} chips edited at the preview, in "
        f"{len({c for c, _, _ in edited_chips})} cycles: "
        + ", ".join(f"cycle {c} ({via}) {e}" for c, via, e in edited_chips)
    )
    print(
        f"cycles acted on a reading other than the meant one: {misread_cycles}; versions "
        f"made from such a reading: {len(wrong)} of {len(made)}"
    )


async def _read_by_cli(env: dict[str, str], lineage: str, turn: dict[str, Any]) -> list[str]:
    """`training-camp score` on a pseudo-terminal, edited to what the comment means; the
    reading it printed first."""
    args = ["score", lineage, f"{turn['score']:g}", turn["comment"], "--rater", "priya"]
    # first look (cancelled), then the edit: the printed wishes say what to drop and add
    _, printed = await asyncio.to_thread(on_a_terminal, args, env, [(TAKE, "c")])
    line = next(line for line in printed.splitlines() if line.startswith("Wishes: "))
    read = [w.rsplit(" (", 1)[1].rstrip(")") for w in line.split("  ") if " (" in w]
    drop, add = edits(read, turn["means"])
    replies = [(TAKE, "e" if drop or add else "t")]
    if drop or add:
        replies += [("edit> ", f"drop {w}") for w in drop]
        replies += [("edit> ", f"--want {w}") for w in add]
        replies += [("edit> ", ""), (TAKE, "t")]
    code, printed = await asyncio.to_thread(on_a_terminal, args, env, replies)
    assert code == 0, printed
    return read


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persona", type=Path, default=PERSONA)
    asyncio.run(main(parser.parse_args().persona))
