"""The review inbox in headless Chromium: how fast the inbox renders with many outputs waiting,
and how soon a score's next output shows on the review screen.

    .venv/bin/python -m bench.review_inbox [--lineages 500] [--scores 20] [--screenshots DIR]

Starts a dev server, a worker (offline model) and the review app; starts ``--lineages``
lineages (sessions of 25) and waits until each awaits its first score. Then: the inbox page
opened until all its rows are drawn (median of 5 loads), and ``--scores`` lineages of one
session scored one after another on the review screen (typed, Enter) until the card shows the
next cycle's output — without a reload. ``--screenshots`` saves the inbox and the review screen
as PNGs. Targets: inbox < 1 s; score -> next output visible p95 <= 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.common.keys import Keys

from client import await_output, start_session
from domain.settings import Settings
from review.app import create_app
from review.server import ReviewServer
from services.dev_server import start_in_memory
from store import Store
from tests.browser import headless_chromium
from tests.conftest import make_spec
from tests.test_demo_command import free_port
from worker import build_worker


async def review_screenshot(
    client: Any, server: ReviewServer, browser: webdriver.Chrome, queue: str, out: Path
) -> None:
    """Two lineages: A evolved by a comment, its reading said back with the chips to correct
    it; B's comment misread and corrected, its cycle run again. The review screen."""
    spec = make_spec(labels=("A", "B"))
    a, b = await start_session(client, spec, queue)
    await asyncio.gather(await_output(a, 1), await_output(b, 1))
    await a.signal("score", {"score": 3, "comment": "Way too long, wanted quick bullets"})
    misread = {"score": 4, "comment": "This sounds like a legal disclaimer.", "rater": "ana"}
    await b.signal("score", misread)
    await asyncio.gather(await_output(a, 2), await_output(b, 2))
    # ana corrects her own score (cycle 1's); the output re-runs
    await b.execute_update("correct_reading", {"wants": ["warmer"], "rater": "ana", "cycle": 1})
    await await_output(b, 2)
    await asyncio.to_thread(browser.set_window_size, 1400, 1500)
    await asyncio.to_thread(browser.get, f"{server.url}/sessions/{spec.session_id}")
    # A's next comment being typed: its reading previewed as chips, one removed by the rater
    card = f"document.getElementById('lineage-{spec.lineage_id('A')}')"
    await asyncio.to_thread(
        browser.execute_script,
        f"const f = {card}.querySelector('form.score');"
        "f.querySelector('[name=score]').value = '6';"
        "const c = f.querySelector('[name=comment]');"
        "c.value = 'Better, but drop the headings, cite your sources, and about half as long.';"
        "c.dispatchEvent(new Event('input'));",
    )
    for _ in range(100):
        chips = await asyncio.to_thread(
            browser.execute_script, f"return {card}.querySelectorAll('form.score .chip').length;"
        )
        if chips:
            break
        await asyncio.sleep(0.1)
    # the bottom of the cards: the scores, and the comment with its reading as chips
    await asyncio.to_thread(
        browser.execute_script,
        f"document.activeElement.blur(); {card}.querySelector('form.score')"
        ".scrollIntoView({block: 'end'}); scrollBy(0, 40);",
    )
    await asyncio.to_thread(browser.save_screenshot, str(out / "review.png"))


async def main(lineages: int, scores: int, screenshots: Path | None) -> None:
    env = await start_in_memory()
    browser = await asyncio.to_thread(headless_chromium, 1400, 1000)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{tmp}/bench.db")
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        settings = Settings(
            task_queue=queue, database_url=str(store.engine.url), max_concurrent_activities=100
        )
        async with build_worker(env.client, store, settings):
            handles, first_session = [], None
            for first in range(0, lineages, 25):
                labels = tuple(f"L{i}" for i in range(first, min(first + 25, lineages)))
                spec = make_spec(labels=labels)
                first_session = first_session or spec
                handles += await start_session(env.client, spec, queue)
            await asyncio.gather(*(await_output(h, 1) for h in handles))
            assert first_session is not None
            server = ReviewServer(create_app(env.client, store), "127.0.0.1", free_port())
            await server.start()

            def load_inbox() -> float:
                started = time.perf_counter()
                browser.get(f"{server.url}/")
                rows = browser.execute_script(
                    "return document.querySelectorAll('#inbox-rows tr').length;"
                )
                assert rows == lineages, rows
                return time.perf_counter() - started

            loads = [await asyncio.to_thread(load_inbox) for _ in range(5)]
            if screenshots:
                screenshots.mkdir(parents=True, exist_ok=True)
                await asyncio.to_thread(
                    browser.get, f"{server.url}/?session={first_session.session_id}"
                )
                await asyncio.to_thread(browser.save_screenshot, str(screenshots / "inbox.png"))
            session_url = f"{server.url}/sessions/{first_session.session_id}"
            await asyncio.to_thread(browser.get, session_url)
            # a returning rater: the name is remembered, the score field has the focus
            await asyncio.to_thread(browser.execute_script, "localStorage.setItem('rater', 'ana');")
            await asyncio.to_thread(browser.get, session_url)
            latencies = []
            for label in first_session.lineages[:scores]:
                lineage = first_session.lineage_id(label.label)
                card = f"document.getElementById('lineage-{lineage}')"
                field = await asyncio.to_thread(
                    browser.execute_script, f"return {card}.querySelector('.score-input');"
                )
                started = time.perf_counter()
                await asyncio.to_thread(field.send_keys, "8", Keys.ENTER)
                while not await asyncio.to_thread(
                    browser.execute_script,
                    f"return {card}.querySelector('header').dataset.cycle == '2';",
                ):
                    await asyncio.sleep(0.01)
                latencies.append(time.perf_counter() - started)
            if screenshots:
                await review_screenshot(env.client, server, browser, queue, screenshots)
            await server.stop()
        store.close()
    await asyncio.to_thread(browser.quit)
    await env.shutdown()
    q = statistics.quantiles(latencies, n=20) if len(latencies) >= 2 else latencies * 19
    print(
        f"inbox with {lineages} outputs waiting: {statistics.median(loads) * 1000:.0f} ms "
        f"to draw (median of 5; target < 1000 ms)"
    )
    print(
        f"score -> next output on the review screen ({len(latencies)} scores): p50 "
        f"{statistics.median(latencies) * 1000:.0f} ms, p95 {q[18] * 1000:.0f} ms "
        f"(target <= 1000 ms)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lineages", type=int, default=500)
    parser.add_argument("--scores", type=int, default=20)
    parser.add_argument("--screenshots", type=Path)
    args = parser.parse_args()
    asyncio.run(main(args.lineages, args.scores, args.screenshots))
