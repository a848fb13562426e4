"""The event log is tamper-evident: `verify` finds an edited row, a deleted row, a removed tail
and an edited payload — on SQLite and PostgreSQL. With a chain key, so does a forger who
recomputes the chain or moves the head back; and `verify` checks the projections against a
replay of the log. The commands run in-process (as a process: tests/test_cli_errors.py)."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest
from sqlalchemy import delete, select, update

from domain.agent import AgentDefinition, AgentParameters
from store import Store
from store.eventstore import event_log
from store.eventstore.chain_keys import ChainKeyError, ChainKeys, key_id
from store.tables import EventChainHeadRow, LineageRow, PayloadBlob, TrainingEvent
from tests.conftest import training_data_app

EVENTS = TrainingEvent.__table__


KEY = os.urandom(32)
NEXT_KEY = os.urandom(32)


def register(s: Store, lineages: range) -> None:
    agent = AgentDefinition(
        name="a", system_prompt="Be brief.", parameters=AgentParameters(model="offline-1")
    )
    for i in lineages:
        s.recorder.register_lineage(
            session_id="s",
            session_name="S",
            lineage_id=f"s-{i}",
            label=str(i),
            workflow_id=f"w{i}",
            agent=agent,
            inputs=["q"],
        )


pytestmark = pytest.mark.every_backend


@pytest.fixture
def store(backend_url):
    s = Store.open(backend_url, keys=ChainKeys())
    register(s, range(3))
    yield s
    s.close()


@pytest.fixture
def keyed(backend_url):
    s = Store.open(backend_url, keys=ChainKeys(current=KEY))
    register(s, range(3))
    yield s
    s.close()


def check(store: Store, keys: ChainKeys | None = None) -> event_log.VerifyReport:
    with store.engine.connect() as conn:
        return event_log.verify(conn, store.keys if keys is None else keys)


def positions(store: Store) -> list[int]:
    return [e.position for e in store.queries.events()]


def test_an_intact_log_verifies(store):
    report = check(store)
    assert report.ok and report.events == 1 + 3 * 2


def test_an_edited_row_is_found(store):
    target = positions(store)[3]
    with store.engine.begin() as conn:
        conn.execute(
            update(EVENTS).where(EVENTS.c.position == target).values(lineage_id="someone-else")
        )
    (problem,) = check(store).problems
    assert problem.startswith(f"event {target} ") and "chain broken" in problem


def test_a_deleted_row_is_found(store):
    target = positions(store)[2]
    with store.engine.begin() as conn:
        conn.execute(delete(EVENTS).where(EVENTS.c.position == target))
    problems = check(store).problems
    assert "chain broken" in problems[0]
    assert f"event {positions(store)[2]} " in problems[0]  # the one after the gap


def test_a_removed_tail_and_an_edited_payload_are_found(store):
    last = positions(store)[-1]
    first = store.queries.events()[0]
    with store.engine.begin() as conn:
        conn.execute(delete(EVENTS).where(EVENTS.c.position == last))
        conn.execute(
            update(PayloadBlob.__table__)
            .where(PayloadBlob.__table__.c.hash == first.payload_hash)
            .values(content='{"name":"forged","sessionId":"s"}')
        )
    problems = check(store).problems
    assert any("payload content was edited" in p for p in problems)
    assert any("the chain head says the log ends at event" in p for p in problems)


def test_the_verify_command(store, backend_url):
    url = backend_url
    ok = training_data_app("verify", url=url)
    assert ok.returncode == 0 and "event log intact" in ok.stdout
    target = positions(store)[1]  # read before the write transaction takes the lock
    with store.engine.begin() as conn:
        conn.execute(
            update(EVENTS).where(EVENTS.c.position == target).values(event_type="artifact.scored")
        )
    bad = training_data_app("verify", url=url)
    assert bad.returncode == 1 and "chain broken" in bad.stdout
    # the edited row does not replay as the type it now claims: said, never a traceback
    assert "projections not checked: the log does not replay" in bad.stdout
    assert "Traceback" not in bad.stderr
    assert EventChainHeadRow  # the head row is what makes a removed tail visible


def forge_first_payload(store: Store) -> None:
    """What someone with write access to the database does: rewrite an event's payload, store
    it under its new hash, recompute the whole chain with the project's own code, move the head.
    Without the key the recomputed links are unkeyed (or under a key of their own)."""
    first = store.queries.events()[0]
    forged = '{"name":"forged","sessionId":"s"}'
    digest = hashlib.sha256(forged.encode()).hexdigest()
    blobs = PayloadBlob.__table__
    with store.engine.begin() as conn:
        conn.execute(
            blobs.insert().values(hash=digest, content=forged, size=len(forged), created_at=0)
        )
        conn.execute(update(EVENTS).where(EVENTS.c.id == first.id).values(payload_hash=digest))
        event_log.resign(conn, ChainKeys(current=os.urandom(32)))


def test_a_keyed_chain_finds_a_forger_who_recomputes_it(keyed):
    assert check(keyed).ok
    with keyed.engine.connect() as conn:
        links = conn.execute(select(EVENTS.c.chain_hash)).scalars().all()
    assert len(links) == 7 and all(link.startswith(f"{key_id(KEY)}:") for link in links)
    forge_first_payload(keyed)
    problems = check(keyed).problems
    assert any("not among the keys given" in p for p in problems), problems


def test_a_keyed_head_finds_a_removed_tail_with_the_head_moved_back(keyed):
    *_, before_last, last = keyed.queries.events()
    with keyed.engine.begin() as conn:
        conn.execute(delete(EVENTS).where(EVENTS.c.position == last.position))
        previous = conn.execute(
            select(EVENTS.c.chain_hash).where(EVENTS.c.position == before_last.position)
        ).scalar()
        conn.execute(
            update(EventChainHeadRow.__table__).values(
                position=before_last.position, chain_hash=previous
            )
        )
    (problem,) = check(keyed).problems
    assert "seal does not match a log ending at event" in problem


def test_keys_rotate_and_the_log_is_re_signed(keyed, backend_url):
    rotated = Store.open(backend_url, keys=ChainKeys(current=NEXT_KEY, old=(KEY,)))
    register(rotated, range(3, 5))
    assert check(rotated).ok  # both keys given: each event checks under the key that signed it
    only_new = ChainKeys(current=NEXT_KEY)
    assert any("not among the keys given" in p for p in check(rotated, only_new).problems)

    env = {"TRAINING_CAMP_CHAIN_KEY": base64.b64encode(NEXT_KEY).decode()}
    refused = training_data_app(
        "rekey", url=backend_url, env=env
    )  # the old key is needed to verify first
    assert refused.returncode == 1 and "does not verify" in refused.stdout
    env["TRAINING_CAMP_CHAIN_OLD_KEYS"] = base64.b64encode(KEY).decode()
    signed = training_data_app("rekey", url=backend_url, env=env)
    assert signed.returncode == 0, signed.stdout + signed.stderr
    assert check(rotated, only_new).ok
    rotated.close()


def test_a_store_given_a_key_needs_every_event_signed(store, backend_url):
    keys = ChainKeys(current=KEY)
    problems = check(store, keys).problems
    assert sum("not signed, though a chain key is set" in p for p in problems) == 7
    assert problems[-1].startswith("the chain head is not sealed")
    env = {"TRAINING_CAMP_CHAIN_KEY": base64.b64encode(KEY).decode()}
    assert training_data_app("rekey", url=backend_url, env=env).returncode == 0
    assert check(store, keys).ok
    verified = training_data_app("verify", url=backend_url, env=env)
    assert verified.returncode == 0 and "signed, 7 events" in verified.stdout


def test_a_bad_key_is_refused_with_its_reason():
    with pytest.raises(ChainKeyError, match="not base64"):
        ChainKeys.from_env({"TRAINING_CAMP_CHAIN_KEY": "not a key!"})
    with pytest.raises(ChainKeyError, match="16 bytes; a chain key needs at least 32"):
        ChainKeys.from_env({"TRAINING_CAMP_CHAIN_KEY": base64.b64encode(b"x" * 16).decode()})


def test_verify_checks_the_projections_against_a_replay(store, backend_url):
    lineages = LineageRow.__table__
    with store.engine.begin() as conn:
        conn.execute(update(lineages).where(lineages.c.id == "s-1").values(label="edited"))
    bad = training_data_app("verify", url=backend_url)
    assert bad.returncode == 1, bad.stdout
    assert "event log intact" in bad.stdout  # the log itself is fine
    assert "lineages: its rows differ from a replay of the event log" in bad.stdout
    with store.engine.connect() as conn:  # verify reports; it does not repair
        label = conn.execute(select(lineages.c.label).where(lineages.c.id == "s-1")).scalar()
    assert label == "edited"
    rebuilt = training_data_app("rebuild", url=backend_url)
    assert (
        rebuilt.returncode == 1 and "NO" in rebuilt.stdout and "nothing was kept" in rebuilt.stdout
    )
    with store.engine.connect() as conn:  # an exit 1 changed nothing
        label = conn.execute(select(lineages.c.label).where(lineages.c.id == "s-1")).scalar()
    assert label == "edited"
    assert training_data_app("rebuild", "--force", url=backend_url).returncode == 0
    assert training_data_app("verify", url=backend_url).returncode == 0


def test_a_tail_removed_with_the_chain_head_is_found(store):
    tail = positions(store)[-2:]
    with store.engine.begin() as conn:
        conn.execute(delete(EVENTS).where(EVENTS.c.position.in_(tail)))
        conn.execute(delete(EventChainHeadRow.__table__))
    problems = check(store).problems
    assert any("the chain head is gone" in p for p in problems), problems


def test_a_wiped_log_is_found(store, backend_url):
    recorded = check(store).head_position
    with store.engine.begin() as conn:
        conn.execute(delete(EVENTS))
    problems = check(store).problems
    assert any("ends at nothing" in p for p in problems), problems
    # wiped with its head, the log looks new: the head recorded earlier tells
    with store.engine.begin() as conn:
        conn.execute(delete(EventChainHeadRow.__table__))
    assert check(store).ok
    bad = training_data_app("verify", "--expect-at-least", str(recorded), url=backend_url)
    assert bad.returncode == 1 and "cut back or wiped" in bad.stdout


def test_an_edited_output_is_found(store, backend_url):
    referenced = {e.payload_hash for e in store.queries.events()}
    blobs = PayloadBlob.__table__
    with store.engine.connect() as conn:
        digest = next(
            h for (h,) in conn.execute(select(blobs.c.hash)) if h not in referenced
        )  # a blob an event points to by hash (an agent definition), not an event payload
    with store.engine.begin() as conn:
        conn.execute(update(blobs).where(blobs.c.hash == digest).values(content='"edited"'))
    problems = check(store).problems
    assert any(f"payload {digest} was edited" in p for p in problems), problems
    refused = training_data_app("rebuild", url=backend_url)
    assert refused.returncode == 1 and "nothing was rebuilt" in refused.stdout
