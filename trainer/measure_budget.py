"""Measures of model output and comments, run off the event loop within a time budget.

A worker answers `state` queries and heartbeats on its event loop, and the review app answers
every rater on its own: a measure of one long output or comment (a Markdown parse, a word
count, the cue tables) must not hold either. So a measure runs in a worker thread of a small
pool of its own, and its caller waits at most ``budget`` seconds. An overrun is said back
(``NOT_CHECKED`` for an output's checks), never waited out.

A thread cannot be stopped, so what runs here must end on its own: every measure is linear in
what it reads (no pattern that can backtrack over a run of text; see trainer/checks.py) and
reads a bounded amount (``MAX_MEASURED_CHARS`` of an output, a comment is cut at the door),
so an overrun thread finishes soon after its caller has moved on. Pure Python yields the
interpreter lock between steps; a regular-expression search does not, which is why the
patterns must stay linear even here.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from domain.checks import ActiveWish, not_checked
from trainer import checks

MEASURE_BUDGET_SECONDS = 10.0  # a 1 MB output is measured in about 2 s (docs/benchmarks.md)
MAX_MEASURED_CHARS = 4_000_000  # a longer output is not checked at all (its words still are)
MEASURE_THREADS = 2

P = ParamSpec("P")
T = TypeVar("T")

_pool = ThreadPoolExecutor(max_workers=MEASURE_THREADS, thread_name_prefix="measure")


class OverBudget(Exception):
    """A measure did not finish within its budget."""


async def within_budget(
    budget: float, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``call(*args, **kwargs)`` in a measuring thread; OverBudget after ``budget`` seconds
    (the wait includes any queue for a thread; a queued call that never started is dropped)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    running = loop.run_in_executor(_pool, functools.partial(call, *args, **kwargs))
    try:
        found = await asyncio.wait_for(running, budget)
    except TimeoutError:
        raise OverBudget(f"over its budget of {budget:g} s") from None
    # a call that never let go of the interpreter lock (one long regular-expression search)
    # held the event loop too, so the timeout could not fire: over budget all the same
    if loop.time() - started > budget:
        raise OverBudget(f"over its budget of {budget:g} s, holding the event loop")
    return found


async def warmed(warm: Callable[[], object]) -> None:
    """``warm`` run once per process, in a measuring thread and with no budget: loading the
    tables and models a measure reads (the language detector, the reader's cues: seconds, cold)
    is not measuring, and must not be said to overrun. Later calls return at once."""
    if warm not in _warm:
        await asyncio.get_running_loop().run_in_executor(_pool, warm)
        _warm.add(warm)


_warm: set[Callable[[], object]] = set()


async def measured(
    output: str,
    wishes: list[ActiveWish],
    budget: float = MEASURE_BUDGET_SECONDS,
) -> checks.Measured:
    """``output``'s words and checks (``checks.measure``), within ``budget``. Overrun, or an
    output over ``MAX_MEASURED_CHARS``: the words counted on the raw text (one linear pass, no
    parse; list markers and table rules hold no letter, so they are not counted either) and,
    with wishes to check, one result saying ``NOT_CHECKED`` (and the wishes no count settles,
    listed as ever)."""
    if len(output) <= MAX_MEASURED_CHARS:
        await warmed(checks.warm)
        try:
            return await within_budget(budget, checks.measure, output, wishes)
        except OverBudget:
            pass
    unchecked = [not_checked()] if any(checks.checkable(w) for w in wishes) else []
    # a wish no count settles needs no measuring: listed all the same
    unchecked += [checks.unmeasured(w) for w in wishes if w.family in checks.UNCHECKABLE]
    try:
        words = await within_budget(MEASURE_BUDGET_SECONDS, checks.count_words, output)
    except OverBudget:  # the measuring threads are all taken by overruns: no count to give
        words = 0
    return checks.Measured(words, unchecked)
