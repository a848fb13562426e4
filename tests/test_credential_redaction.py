"""Credentials people paste are found by a maintained detector (detect-secrets' plugins, and the
shapes it lacks) in every form they arrive in — as written, broken by a space or a zero-width
character, base64- or percent-encoded — and masked at every door: `training-camp score` sends a
comment and a rater name masked, the lineage records and stores them masked, and no preview
sends a raw comment to a model endpoint. Nothing else is masked: every comment of the public
development sets, hashes and ids come through unchanged."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.api.enums.v1 import EventType

from client import start_session
from domain.redaction import MASK, redact
from domain.settings import Settings
from tests.conftest import (
    awaiting,
    lineage_history,
    make_spec,
    threaded_starter_cli,
    wait_for_state,
)
from tests.fake_messages_api import FakeMessagesAPI, tool_use_message
from trainer import preview
from trainer.backends import TrainerBackends
from trainer.cycle_step import LineageMemory
from workflows.lineage import LineageWorkflow

QUESTIONS = [
    "Explain how to pick a first programming language.",
    "Explain what a mortgage offset account is.",
]


def _b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


JWT = (
    f"{_b64url({'alg': 'HS256', 'typ': 'JWT'})}.{_b64url({'sub': '4711', 'name': 'Ana'})}"
    ".Qx7vR2mN9pL4kT8wZ1yB6cD3fG5hJ0sA-eU_iO7uY2t"
)
PEM_BODY = "MIIEpAIBAAKCAQEAx7vR2mN9pL4kT8wZ1yB6cD3fG5hJ0sAeUiO7uY2tR4eW9qAbCdE"
SPLIT = ("sk-ant-api03-Hn4cV8bX2zL6mQ9w", "Tr1yU5iO3pA7sD0fG-hJ_kK2lZ4xC")
HIDDEN = ("sk-ant-api03-", "Pm3nB7vC1xZ5lK9j", "Hg2fD6sA0qW4eR8tYu")
BASE64_KEY = "sk-ant-api03-Yt6rE2wQ9uI4oP1aS5dF8gH3jK7lZ0xC"
PERCENT_KEY = "sk-ant-api03-Wm5nB9vC2xZ6lK0jHg3fD7sA1qW5eR9t"
PERCENT = "".join(f"%{b:02X}" for b in PERCENT_KEY.encode())

# kind: (the text as pasted, the pieces of it that must be found nowhere)
CREDENTIALS: dict[str, tuple[str, list[str]]] = {
    "AWS access key id": ("AKIA4XQ7PZ2M9K3L8B6N", ["AKIA4XQ7PZ2M9K3L8B6N"]),
    "AWS secret access key": (
        "aws_secret_access_key = Zq3vR8tN1mP6kL0wX5yB9cD2fG7hJ4sA/eU+iO7u",
        ["Zq3vR8tN1mP6kL0wX5yB9cD2fG7hJ4sA/eU+iO7u"],
    ),
    "GitHub token": (
        "ghp_Qx7vR2mN9pL4kT8wZ1yB6cD3fG5hJ0sAeUiO",
        ["ghp_Qx7vR2mN9pL4kT8wZ1yB6cD3fG5hJ0sAeUiO"],
    ),
    "Slack token": (
        "xoxb-2841934020-4851209437-Qx7vR2mN9pL4kT8wZ1yB6cD3",
        ["xoxb-2841934020-4851209437", "Qx7vR2mN9pL4kT8wZ1yB6cD3"],
    ),
    "JSON Web Token": (JWT, [JWT.split(".")[0], JWT.split(".")[1], JWT.split(".")[2]]),
    "PEM private key": (
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        [PEM_BODY, "BEGIN RSA PRIVATE KEY"],
    ),
    "Anthropic key split by a space": (" ".join(SPLIT), list(SPLIT)),
    "Anthropic key split by zero-width characters": ("\u200b".join(HIDDEN), list(HIDDEN[1:])),
    "Anthropic key in base64": (
        base64.b64encode(BASE64_KEY.encode()).decode(),
        [base64.b64encode(BASE64_KEY.encode()).decode()[8:40], BASE64_KEY[13:]],
    ),
    "Anthropic key percent-encoded": (PERCENT, [PERCENT[:60], PERCENT_KEY[13:]]),
}


@pytest.mark.parametrize("kind", list(CREDENTIALS))
def test_each_kind_of_credential_is_masked_and_the_words_around_it_stay(kind: str):
    pasted, pieces = CREDENTIALS[kind]
    said = redact(f"Too long. My key: {pasted} — please forget it.")
    assert said.startswith("Too long. My key: ") and said.endswith(" — please forget it.")
    assert MASK in said
    for piece in pieces:
        assert piece not in said, (kind, said)


DEV_SETS = Path(__file__).resolve().parent.parent.parent / "shared" / "feedback-dev"


def _dev_comments() -> list[str]:
    """Every comment of the public development sets (beside the repository, as
    ``tests/reading_snapshot.py`` finds them)."""
    folder = DEV_SETS
    if not folder.is_dir():
        pytest.skip(f"the development sets are not at {folder}")
    comments = []
    for name in ("cases.jsonl", "contrast.jsonl"):
        for line in (folder / name).read_text(encoding="utf-8").splitlines():
            comments.append(json.loads(line)["comment"])
    for line in (folder / "sequences.jsonl").read_text(encoding="utf-8").splitlines():
        comments += [s["comment"] for s in json.loads(line)["steps"] if s.get("comment")]
    return comments


def test_nothing_else_is_masked_the_development_sets_hashes_and_ids_come_through():
    comments = _dev_comments()
    assert len(comments) > 200
    changed = [c for c in comments if redact(c) != c]
    assert changed == []
    innocent = [
        "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, commit 3273986",
        "run 123e4567-e89b-12d3-a456-426614174000 of lineage-s1-A, output out-7f3c2a9b1d4e",
        "the doc https://docs.example.com/d/1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms/edit",
        "SGVsbG8sIHRoaXMgaXMganVzdCBhIHNlbnRlbmNlIGluIGJhc2U2NA== (a sentence in base64)",
        "a basic introduction; the bearer of bad news; risk-averse skeptics; ask-me-anything",
        "Explain eyJ-style tokens in 200 words, then AKIA as an acronym.",
    ]
    assert [redact(text) for text in innocent] == innocent


def _claude_reads_warmer(api: FakeMessagesAPI) -> None:
    reading = {
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
    }
    message = tool_use_message("claude-sonnet-5", "record_score_analysis", reading, "toolu_1")
    api.script = [(200, message)]


def test_a_preview_sends_no_credential_to_the_model_endpoint_and_says_none_back():
    """`training-camp read`, `score` and the page's /read preview through ``preview``: under
    ``rules+claude`` the clause the rules cannot place goes to Claude, its key masked."""
    pasted = " ".join(text for text, _ in CREDENTIALS.values())
    with FakeMessagesAPI() as api:
        _claude_reads_warmer(api)
        settings = Settings(anthropic_api_key=SecretStr("sk-test"), anthropic_base_url=api.base_url)
        backend = preview.backend_for(TrainerBackends(settings), "rules+claude", "claude-sonnet-5")
        memory = LineageMemory(session_id="s", lineage_id="L")
        seen = asyncio.run(
            preview.preview(backend, memory, 3, f"Nope, not what I had in mind: {pasted}")
        )
    assert len(api.requests) == 1 and "not what I had in mind" in json.dumps(api.requests)
    sent, said = json.dumps(api.requests), seen.model_dump_json()
    for kind, (_, pieces) in CREDENTIALS.items():
        for piece in pieces:
            assert piece not in sent and json.dumps(piece)[1:-1] not in sent, (kind, piece)
            assert piece not in said and json.dumps(piece)[1:-1] not in said, (kind, piece)


async def test_every_kind_scored_through_the_cli_is_masked_in_the_store_file_and_the_history(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    database = Path(store.engine.url.database)
    comment = "Far too long. " + " ; ".join(text for text, _ in CREDENTIALS.values())
    cli = threaded_starter_cli(temporal_address, settings.database_url)
    rater_key = "ghp_Rater2mN9pL4kT8wZ1yB6cD3fG5hJ0sAeUi1"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        printed = await cli("score", lineage, "4", comment, "--rater", f"ana {rater_key}", "--yes")
        await wait_for_state(handle, awaiting(2))
        # straight to Temporal: what the lineage records of them is masked too
        await handle.signal("directive", {"kind": "sticky", "content": f"Never say {comment}"})
        await handle.signal("lock", {"reason": comment})
        state = await handle.query(LineageWorkflow.state)
        events = [event async for event in lineage_history(client, handle)]
        # the reading the command showed was made on the worker: what it sent there is masked
        previews = [
            event
            async for run in client.list_workflows("WorkflowType = 'ReadingPreviewWorkflow'")
            if run.id.startswith(f"reading-preview-{lineage}-")
            async for event in client.get_workflow_handle(run.id).fetch_history_events()
        ]
    assert "score 4 accepted" in printed
    assert previews, "the reading was not asked of the worker"
    (scored,) = store.queries.evaluations(lineage)
    assert scored.rater == f"ana {MASK}" and MASK in (scored.comment or "")
    # a signal's input is kept as sent (docs/reliability.md): every other event is searched
    recorded = b"".join(
        e.SerializeToString()
        for e in [*events, *previews]
        if e.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    )
    assert MASK.encode() in recorded
    store.close()
    files = {path: path.read_bytes() for path in database.parent.glob(database.name + "*")}
    said = printed + state.model_dump_json()
    for kind, (_, pieces) in CREDENTIALS.items():
        for piece in [*pieces, rater_key]:
            assert piece.encode() not in recorded, (kind, piece, "history")
            assert piece not in said, (kind, piece, "said")
            for path, data in files.items():
                assert piece.encode() not in data, (kind, piece, path)
