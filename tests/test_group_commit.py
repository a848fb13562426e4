"""Group commit (store/group_commit.py): writers queued behind a running commit go into the
next transaction together, and each gets its own outcome."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from store.group_commit import GroupCommit


@dataclass
class Item:
    id: str


def _until(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_writers_queued_meanwhile_commit_together_and_a_bad_one_fails_alone():
    committed: list[list[str]] = []
    first_commit_running, release_first = threading.Event(), threading.Event()

    def commit(items: list[Item]) -> set[str]:
        if not committed:
            first_commit_running.set()
            release_first.wait(10)
        committed.append([i.id for i in items])
        return {i.id for i in items if i.id != "already-there"}

    group: GroupCommit[Item] = GroupCommit(commit)
    outcomes: dict[str, object] = {}

    def write(name: str, items: list[str]) -> None:
        def prepare() -> list[Item]:
            if name == "bad":
                raise ValueError("this writer's spans cannot be encoded")
            return [Item(i) for i in items]

        try:
            outcomes[name] = group.write(prepare)
        except ValueError as exc:
            outcomes[name] = exc

    leader = threading.Thread(target=write, args=("leader", ["l1"]))
    leader.start()
    assert first_commit_running.wait(10)
    others = [
        threading.Thread(target=write, args=(name, items))
        for name, items in [
            ("two", ["a", "b"]),
            ("bad", ["x"]),
            ("repeat", ["already-there"]),
            ("three", ["c"]),
        ]
    ]
    for t in others:
        t.start()
    _until(lambda: len(group._queue) == 4)  # all queued behind the running commit
    release_first.set()
    for t in [leader, *others]:
        t.join(10)

    # One transaction for the leader, one for everything queued while it ran
    assert committed == [["l1"], ["a", "b", "already-there", "c"]]
    assert outcomes["leader"] == 1
    assert outcomes["two"] == 2
    assert outcomes["three"] == 1
    assert outcomes["repeat"] == 0  # the log held it already: nothing new
    assert isinstance(outcomes["bad"], ValueError)


def test_a_failed_transaction_fails_every_writer_in_it_and_the_next_one_still_commits():
    calls: list[list[str]] = []

    def commit(items: list[Item]) -> set[str]:
        calls.append([i.id for i in items])
        if len(calls) == 1:
            raise RuntimeError("database is locked")
        return {i.id for i in items}

    group: GroupCommit[Item] = GroupCommit(commit)
    with pytest.raises(RuntimeError, match="database is locked"):
        group.write(lambda: [Item("a")])
    assert group.write(lambda: [Item("a")]) == 1
    assert calls == [["a"], ["a"]]
