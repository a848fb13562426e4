"""Group commit (store/eventstore/group_commit.py): writers queued behind a running commit go
into the next transaction together, and each gets its own outcome."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from store.eventstore.group_commit import GroupCommit


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


class _Recording:
    """A group whose first transaction holds until released, recording what each commits."""

    def __init__(self, delay: float) -> None:
        self.committed: list[list[str]] = []
        self.first_running, self.release_first = threading.Event(), threading.Event()
        self.group: GroupCommit[Item] = GroupCommit(self._commit, delay=delay)

    def _commit(self, items: list[Item]) -> set[str]:
        if not self.committed:
            self.first_running.set()
            self.release_first.wait(10)
        self.committed.append(sorted(i.id for i in items))
        return {i.id for i in items}

    def three_writers_committed_together(self, second_write_after: float) -> None:
        """Writers a, b and c queue behind the first commit (one transaction for the three),
        then each writes again: a at once, b and c after ``second_write_after`` seconds."""

        def write(name: str) -> None:
            self.group.write(lambda: [Item(f"{name}1")])
            if name != "a":
                time.sleep(second_write_after)
            self.group.write(lambda: [Item(f"{name}2")])

        opener = threading.Thread(target=lambda: self.group.write(lambda: [Item("opener")]))
        opener.start()
        assert self.first_running.wait(10)
        writers = [threading.Thread(target=write, args=(n,)) for n in "abc"]
        for t in writers:
            t.start()
        _until(lambda: len(self.group._queue) == 3)
        self.release_first.set()
        for t in [opener, *writers]:
            t.join(10)


def test_a_leader_waits_for_the_writers_of_the_last_transaction_to_write_again():
    run = _Recording(delay=10.0)
    run.three_writers_committed_together(second_write_after=0.05)
    # a came back first and led; it waited for b and c instead of committing alone
    assert run.committed == [["opener"], ["a1", "b1", "c1"], ["a2", "b2", "c2"]]


def test_the_wait_ends_after_the_delay_when_writers_do_not_come_back():
    run = _Recording(delay=0.05)
    started = time.monotonic()
    run.three_writers_committed_together(second_write_after=1.0)
    assert run.committed[:3] == [["opener"], ["a1", "b1", "c1"], ["a2"]]
    assert sorted(i for batch in run.committed[3:] for i in batch) == ["b2", "c2"]
    assert time.monotonic() - started < 5  # a2 did not wait for b and c's second writes


def test_a_lone_writer_does_not_wait():
    calls: list[float] = []
    group: GroupCommit[Item] = GroupCommit(
        lambda items: calls.append(time.monotonic()) or {i.id for i in items}, delay=10.0
    )
    for n in range(3):
        assert group.write(lambda n=n: [Item(f"s{n}")]) == 1
    assert calls[-1] - calls[0] < 5  # 10 s each if it waited for writers that are not there
