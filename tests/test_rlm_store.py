"""One behavioural suite for the findings stores — in memory, SQLite and PostgreSQL alike."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rlm.commit import Commit, parse_commit
from rlm.query import QueryError
from rlm.shared_store import InMemorySharedStore, WorkerStoreProxy
from rlm.store import InMemoryFindingsStore
from store import Store
from store.rlm_findings.findings import DatabaseFindingsStore
from store.rlm_findings.shared_findings import DatabaseSharedStore
from tests.store_backends import database_url
from tests.store_processes import create_findings, run_together

ROOT = Path(__file__).parent.parent


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def backend(request, tmp_path):
    if request.param == "memory":
        yield request.param, None
        return
    with database_url(request.param, tmp_path, migrated=True) as url:
        store = Store.open(url)
        yield request.param, store
        store.close()


@pytest.fixture
def findings(backend):
    _kind, store = backend
    return (
        InMemoryFindingsStore()
        if store is None
        else DatabaseFindingsStore(store.engine, "s1", store.read_engine)
    )


@pytest.fixture
def shared(backend):
    _kind, store = backend
    return (
        InMemorySharedStore()
        if store is None
        else DatabaseSharedStore(store.engine, "team", store.read_engine)
    )


def worker_commit(**overrides) -> Commit:
    data = {
        "commit_id": "worker_doc_42",
        "creates": [
            {
                "type": "evidence",
                "id": "e1",
                "description": "Remote work saves office rent",
                "content": {"quote": "saves rent", "page": 15},
                "backrefs": [{"source_id": "doc_42", "start": 100, "end": 200, "unit": "chars"}],
                "parents": ["BATCH:parent"],
                "tags": ["evidence", "doc:42"],
            },
            {
                "type": "summary",
                "id": "s1",
                "description": "Doc 42 favours remote work",
                "parents": ["e1"],
                "tags": ["summary"],
            },
        ],
        "links": [{"type": "supports", "src": "e1", "dst": "h1"}],
        "proposes_updates": [
            {
                "target_id": "h1",
                "patch": {"evidence_count": 5},
                "description_update": "Remote work cuts costs (5 sources)",
            }
        ],
    }
    data.update(overrides)
    return Commit.model_validate(data)


def test_objects_queries_cards_summary(findings):
    h1 = findings.create("hypothesis", "Remote work cuts costs", tags=["h"], id="h1")
    findings.create("note", "Check the 2019 numbers " + "x" * 300, parents=[h1], tags=["todo"])
    assert [o.id for o in findings.view("type=hypothesis")] == [h1]
    assert [o.type for o in findings.view(f"parent={h1}")] == ["note"]
    assert [o.id for o in findings.view('desc~"CUTS costs" tag=h')] == [h1]
    assert findings.view("type=note tag=h") == []
    cards = findings.card_view("type=note")
    assert len(cards[0].description) == 160 and cards[0].description.endswith("…")
    assert findings.summary()["by_type"] == {"hypothesis": 1, "note": 1}
    assert findings.get(h1).children == [findings.view("type=note")[0].id]
    for bad, message in [
        ("kind=note", "unknown key 'kind'"),
        ("desc=x", "desc takes ~"),
        ("type~note", "type takes ="),
        ("justtext", "not key=value"),
    ]:
        with pytest.raises(QueryError, match=message):
            findings.view(bad)


def test_apply_commit_namespaces_resolves_and_is_idempotent(findings):
    h1 = findings.create("hypothesis", "Remote work cuts costs", id="h1")
    doc = findings.create("note", "doc 42", id="doc42")
    commit = worker_commit(
        links=[{"type": "supports", "src": "e1", "dst": h1}],
        proposes_updates=[{"target_id": h1, "patch": {"evidence_count": 5}}],
    )
    result = findings.apply_commit(commit, batch_prefix="doc_0", batch_parent=doc, worker="A")
    assert result.applied and not result.errors
    assert result.created == [
        "doc_0/worker_doc_42/e1",
        "doc_0/worker_doc_42/s1",
        "doc_0/worker_doc_42/link0",
    ]
    e1 = findings.get("doc_0/worker_doc_42/e1")
    assert e1.parents == [doc] and e1.backrefs[0].source_id == "doc_42"
    assert e1.worker == "A" and e1.children == [
        "doc_0/worker_doc_42/s1",
        "doc_0/worker_doc_42/link0",
    ]
    link = findings.get("doc_0/worker_doc_42/link0")
    assert link.content == {"type": "supports", "src": e1.id, "dst": h1}
    assert doc in [o.id for o in findings.view()] and findings.get(doc).children == [e1.id]
    before = findings.objects()
    again = findings.apply_commit(commit, batch_prefix="doc_0", batch_parent=doc, worker="A")
    assert again.already_applied and not again.applied
    assert findings.objects() == before
    changed = findings.apply_commit(worker_commit(creates=[]), batch_prefix="doc_0")
    assert "already applied with different content" in changed.errors[0]


def test_apply_commit_is_strict_and_atomic(findings):
    findings.create("hypothesis", "h", id="h1")
    count = len(findings.objects())
    result = findings.apply_commit(worker_commit(), batch_prefix="doc_1")  # no batch parent
    assert not result.applied
    assert any("BATCH:parent used but this batch has no parent" in e for e in result.errors)
    result = findings.apply_commit(
        worker_commit(links=[{"type": "refines", "src": "e1", "dst": "nope"}]),
        batch_prefix="doc_1",
        batch_parent="h1",
    )
    assert result.errors == ["links[0].dst: unknown reference 'nope'"]
    assert len(findings.objects()) == count  # nothing of the commit was applied
    broken = parse_commit("I could not finish.", "w9")
    result = findings.apply_commit(broken, batch_prefix="doc_9")
    assert not result.applied and "unparseable reply" in result.errors[0]


def test_proposals_wait_for_a_decision(findings):
    h1 = findings.create(
        "hypothesis", "Remote work cuts costs", content={"evidence_count": 1}, id="h1"
    )
    commit = worker_commit(
        creates=[],
        links=[],
        proposes_updates=[
            {"target_id": h1, "patch": {"evidence_count": 5}, "description_update": "5 sources"},
            {"target_id": h1, "patch": {"evidence_count": 0}},
        ],
    )
    result = findings.apply_commit(commit, batch_prefix="b")
    assert findings.get(h1).content == {"evidence_count": 1}  # never applied directly
    accepted, rejected = result.proposals
    updated = findings.accept_proposal(accepted)
    assert updated.content == {"evidence_count": 5} and updated.description == "5 sources"
    assert findings.get(h1).description == "5 sources"
    findings.reject_proposal(rejected, "contradicts the audit")
    states = {p.id: (p.status, p.reason) for p in findings.proposals()}
    assert states == {accepted: ("accepted", None), rejected: ("rejected", "contradicts the audit")}
    with pytest.raises(ValueError, match="already accepted"):
        findings.accept_proposal(accepted)


@pytest.mark.parametrize(
    ("reply", "ok"),
    [
        ('```json\n{"creates": [{"type": "note", "id": "n1", "description": "x"}]}\n```', True),
        ('Here you go: {"creates": [{"type": "note", "id": "n1", "description": "x",},],}', True),
        ("{'creates': [{'type': 'note', 'id': 'n1', 'description': 'x'}], 'error': None}", True),
        ('{"creates": [{"type": "note"}]}', False),
        ("no json at all", False),
    ],
)
def test_parse_commit_tolerates_fences_and_small_mistakes(reply, ok):
    commit = parse_commit(reply, "w1")
    assert commit.commit_id == "w1"
    assert (commit.error is None) is ok
    if ok:
        assert commit.creates[0].id == "n1"


def test_shared_store(shared):
    a, b = WorkerStoreProxy(shared, "worker_A"), WorkerStoreProxy(shared, "worker_B")
    first = a.create("evidence", "Found X", tags=["x"])
    b.create("note", "Analyzing…")
    third = a.create("evidence", "Found Y")
    assert (first, third) == ("worker_A_000000", "worker_A_000001")
    assert {o.id for o in b.view_others("type=evidence")} == {first, third}
    assert [o.id for o in a.view_others()] == ["worker_B_000000"]
    b.invalidate(first, "duplicate of Y")
    assert [o.id for o in a.view("type=evidence")] == [third]
    events = shared.events_since(0)
    assert [(e.kind, e.object_id) for e in events][-1] == ("invalidate", first)
    assert len(shared.events_since(events[2].seq)) == 2
    assert shared.rebuilt_view() == shared.live_view()
    assert shared.live_view()[first].invalidated == "duplicate of Y"
    with pytest.raises(KeyError):
        a.invalidate("worker_Z_000000", "no such")


def test_concurrent_workers_lose_and_duplicate_no_create(backend):
    """Workers creating at the same moment: ten threads of a hundred creates each on the
    in-memory store; on a database, four processes (as on four machines) of 25 each."""
    _kind, store = backend
    count = 100 if store is None else 25
    workers = [f"w{i}" for i in range(10 if store is None else 4)]
    if store is None:
        shared = InMemorySharedStore()
        barrier = threading.Barrier(len(workers))

        def create(worker: str) -> None:
            barrier.wait(timeout=60)
            for n in range(count):
                shared.create(worker, "evidence", f"finding {n}")

        threads = [threading.Thread(target=create, args=(w,)) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        shared = DatabaseSharedStore(store.engine, "team", store.read_engine)
        url = store.engine.url.render_as_string(hide_password=False)
        run_together(create_findings, url, workers, count)
    events = shared.events_since(0)
    total = len(workers) * count
    assert len(events) == total  # no lost event
    assert len({e.seq for e in events}) == total
    ids = [e.object_id for e in events]
    assert len(set(ids)) == total  # no id collision
    assert {i for i in ids if i.startswith("w3_")} == {f"w3_{n:06d}" for n in range(count)}
    assert shared.rebuilt_view() == shared.live_view()
