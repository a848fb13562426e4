"""Export pipelines: materialized examples → files trainers read, streamed, checked, recorded.

Formats: TRL SFT (``messages``), TRL DPO conversational (``prompt``/``chosen``/``rejected``),
OpenAI fine-tuning SFT and preference JSONL (``input``/``preferred_output``/
``non_preferred_output``), reward rows, and Parquet (nested messages) for SFT, DPO and reward.
Each output is split into train and eval deterministically by the hash of its input, so the same
prompt never lands on both sides and re-exports agree.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Engine, select
from sqlalchemy.orm import aliased

from store.materializer import Materializer
from store.recorder import now_ms
from store.tables import ExportRow, PayloadBlob, TrainingExampleRow

ROLES = {"system", "user", "assistant"}
Message = dict[str, str]


class FormatError(ValueError):
    """A row that breaks its format's rules; it is never written."""


class ExportFilters(BaseModel):
    min_score: float | None = None
    min_score_delta: float | None = None  # preference pairs; lock pairs (no delta) pass
    session_id: str | None = None
    lineage_id: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    eval_fraction: float = Field(default=0.1, ge=0, le=0.9)


class ExportResult(BaseModel):
    export_id: str
    format: str
    files: dict[str, str]
    counts: dict[str, int]
    skipped_invalid: int
    event_range: tuple[int, int]


# ---- the formats' rules ---------------------------------------------------------------------


def _check_messages(messages: Any, where: str, last: str | None = None) -> None:
    if not isinstance(messages, list) or not messages:
        raise FormatError(f"{where}: must be a non-empty list of messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or set(m) != {"role", "content"}:
            raise FormatError(f"{where}[{i}]: a message has exactly 'role' and 'content'")
        if m["role"] not in ROLES:
            raise FormatError(f"{where}[{i}]: role {m['role']!r} is not one of {sorted(ROLES)}")
        if not isinstance(m["content"], str) or not m["content"].strip():
            raise FormatError(f"{where}[{i}]: content must be a non-empty string")
        if m["role"] == "system" and i != 0:
            raise FormatError(f"{where}[{i}]: a system message may only come first")
    if last and messages[-1]["role"] != last:
        raise FormatError(f"{where}: the last message must be from the {last}")


def _check_one_answer(messages: Any, where: str) -> None:
    _check_messages(messages, where, "assistant")
    if len(messages) != 1:
        raise FormatError(f"{where}: exactly one assistant message")


def check_sft(row: dict[str, Any]) -> None:
    _check_messages(row.get("messages"), "messages", "assistant")
    if not any(m["role"] == "user" for m in row["messages"]):
        raise FormatError("messages: needs a user message")


def check_dpo(row: dict[str, Any]) -> None:
    _check_messages(row.get("prompt"), "prompt", "user")
    _check_one_answer(row.get("chosen"), "chosen")
    _check_one_answer(row.get("rejected"), "rejected")
    if row["chosen"] == row["rejected"]:
        raise FormatError("chosen and rejected are identical")


def check_openai_preference(row: dict[str, Any]) -> None:
    if set(row) != {"input", "preferred_output", "non_preferred_output"}:
        raise FormatError("keys must be input, preferred_output, non_preferred_output")
    _check_messages(row["input"].get("messages"), "input.messages", "user")
    _check_one_answer(row["preferred_output"], "preferred_output")
    _check_one_answer(row["non_preferred_output"], "non_preferred_output")
    if row["preferred_output"] == row["non_preferred_output"]:
        raise FormatError("preferred and non-preferred outputs are identical")


def check_reward(row: dict[str, Any]) -> None:
    _check_messages(row.get("prompt"), "prompt", "user")
    _check_one_answer(row.get("completion"), "completion")
    if not isinstance(row.get("reward"), int | float) or not 0 <= row["reward"] <= 10:
        raise FormatError("reward: a number from 0 to 10")


# ---- rows -----------------------------------------------------------------------------------


def _prompt(system: str | None, user: str) -> list[Message]:
    return ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user}
    ]


def _answer(text: str) -> list[Message]:
    return [{"role": "assistant", "content": text}]


@dataclass(frozen=True)
class Format:
    name: str
    example_type: str
    suffix: str
    row: Callable[[dict[str, Any]], dict[str, Any]]
    check: Callable[[dict[str, Any]], None]


def _sft(e: dict[str, Any]) -> dict[str, Any]:
    return {"messages": _prompt(e["system"], e["user"]) + _answer(e["completion"])}


def _dpo(e: dict[str, Any]) -> dict[str, Any]:
    return {
        "prompt": _prompt(None, e["user"]),
        "chosen": _answer(e["chosen"]),
        "rejected": _answer(e["rejected"]),
    }


def _openai_preference(e: dict[str, Any]) -> dict[str, Any]:
    return {
        "input": {"messages": _prompt(None, e["user"])},
        "preferred_output": _answer(e["chosen"]),
        "non_preferred_output": _answer(e["rejected"]),
    }


def _reward(e: dict[str, Any]) -> dict[str, Any]:
    return {
        "prompt": _prompt(e["system"], e["user"]),
        "completion": _answer(e["completion"]),
        "reward": e["score"],
    }


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        Format("trl-sft", "sft", "jsonl", _sft, check_sft),
        Format("trl-dpo", "preference", "jsonl", _dpo, check_dpo),
        Format("openai-sft", "sft", "jsonl", _sft, check_sft),
        Format(
            "openai-preference", "preference", "jsonl", _openai_preference, check_openai_preference
        ),
        Format("reward", "reward", "jsonl", _reward, check_reward),
        Format("parquet-sft", "sft", "parquet", _sft, check_sft),
        Format("parquet-dpo", "preference", "parquet", _dpo, check_dpo),
        Format("parquet-reward", "reward", "parquet", _reward, check_reward),
    ]
}


@functools.lru_cache(maxsize=65_536)  # inputs recur across lineages and sessions
def split_of(input_hash: str, eval_fraction: float) -> str:
    """'eval' for a stable ``eval_fraction`` of inputs, by their content hash."""
    bucket = int(hashlib.sha256(input_hash.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "eval" if bucket < eval_fraction else "train"


# ---- writing --------------------------------------------------------------------------------


class _JsonlWriter:
    def __init__(self, path: Path) -> None:
        self._file = path.open("w", encoding="utf-8")

    def write(self, row: dict[str, Any]) -> None:
        self._file.write(json.dumps(row, ensure_ascii=False) + "\n")

    def close(self) -> None:
        self._file.close()


class _ParquetWriter:
    BATCH = 2000

    def __init__(self, path: Path, example_type: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        messages = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
        fields = {
            "sft": [("messages", messages)],
            "preference": [("prompt", messages), ("chosen", messages), ("rejected", messages)],
            "reward": [("prompt", messages), ("completion", messages), ("reward", pa.float64())],
        }[example_type]
        self._pa = pa
        self._schema = pa.schema(fields)
        self._writer = pq.ParquetWriter(str(path), self._schema)
        self._rows: list[dict[str, Any]] = []

    def write(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        if len(self._rows) >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._writer.write_table(self._pa.Table.from_pylist(self._rows, schema=self._schema))
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()


def _examples(
    engine: Engine, example_type: str, filters: ExportFilters
) -> Iterator[dict[str, Any]]:
    """Matching examples with their texts, streamed from the database."""
    ex = TrainingExampleRow.__table__  # type: ignore[attr-defined]
    blob = PayloadBlob.__table__  # type: ignore[attr-defined]
    system, user, completion, chosen, rejected = (aliased(blob) for _ in range(5))
    query = (
        select(
            ex.c.id,
            ex.c.user_input_hash,
            ex.c.score,
            ex.c.score_delta,
            ex.c.system_prompt_hash,
            ex.c.completion_hash,
            ex.c.chosen_hash,
            ex.c.rejected_hash,
            system.c.content.label("system"),
            user.c.content.label("user"),
            completion.c.content.label("completion"),
            chosen.c.content.label("chosen"),
            rejected.c.content.label("rejected"),
        )
        .join(user, user.c.hash == ex.c.user_input_hash)
        .outerjoin(system, system.c.hash == ex.c.system_prompt_hash)
        .outerjoin(completion, completion.c.hash == ex.c.completion_hash)
        .outerjoin(chosen, chosen.c.hash == ex.c.chosen_hash)
        .outerjoin(rejected, rejected.c.hash == ex.c.rejected_hash)
        .where(ex.c.example_type == example_type)
        .order_by(ex.c.created_at, ex.c.id)
    )
    f = filters
    if f.min_score is not None:
        query = query.where(ex.c.score >= f.min_score)
    if f.min_score_delta is not None:
        query = query.where((ex.c.score_delta >= f.min_score_delta) | ex.c.score_delta.is_(None))
    if f.session_id:
        query = query.where(ex.c.session_id == f.session_id)
    if f.lineage_id:
        query = query.where(ex.c.lineage_id == f.lineage_id)
    if f.since_ms is not None:
        query = query.where(ex.c.created_at >= f.since_ms)
    if f.until_ms is not None:
        query = query.where(ex.c.created_at <= f.until_ms)
    # Prompts and inputs recur in many examples: each stored text is decoded once per export.
    decoded: dict[str, Any] = {}
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=2000).execute(query)
        for row in result.mappings():
            out = dict(row)
            for key, digest in _TEXT_HASHES:
                content = out[key]
                if content is not None:
                    value = decoded.get(out[digest], _MISSING)
                    if value is _MISSING:
                        value = json.loads(content)
                        if len(decoded) >= 50_000:
                            decoded.clear()
                        decoded[out[digest]] = value
                    out[key] = value
            yield out


_MISSING = object()
_TEXT_HASHES = (
    ("system", "system_prompt_hash"),
    ("user", "user_input_hash"),
    ("completion", "completion_hash"),
    ("chosen", "chosen_hash"),
    ("rejected", "rejected_hash"),
)


def export(
    engine: Engine,
    format_name: str,
    out_dir: Path,
    filters: ExportFilters | None = None,
    strict: bool = True,
    progress: Callable[[int], None] | None = None,
) -> ExportResult:
    """Materialize what is new, then write ``<out_dir>/<format>.{train,eval}.<suffix>``.

    A row that breaks the format's rules stops the export with FormatError naming the example
    (``strict``), or is skipped and counted."""
    if format_name not in FORMATS:
        raise ValueError(f"unknown format {format_name!r}; choose from {', '.join(FORMATS)}")
    fmt, filters = FORMATS[format_name], filters or ExportFilters()
    result = Materializer(engine).run()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {split: out_dir / f"{fmt.name}.{split}.{fmt.suffix}" for split in ("train", "eval")}
    writers = {
        split: _JsonlWriter(path)
        if fmt.suffix == "jsonl"
        else _ParquetWriter(path, fmt.example_type)
        for split, path in paths.items()
    }
    counts, skipped = {"train": 0, "eval": 0}, 0
    try:
        for example in _examples(engine, fmt.example_type, filters):
            row = fmt.row(example)
            try:
                fmt.check(row)
            except FormatError as exc:
                if strict:
                    raise FormatError(f"example {example['id']}: {exc}") from None
                skipped += 1
                continue
            split = split_of(example["user_input_hash"], filters.eval_fraction)
            writers[split].write(row)
            counts[split] += 1
            if progress and (counts["train"] + counts["eval"]) % 1000 == 0:
                progress(counts["train"] + counts["eval"])
    finally:
        for writer in writers.values():
            writer.close()
    export_id = uuid.uuid4().hex
    with engine.begin() as conn:
        conn.execute(
            ExportRow.__table__.insert().values(  # type: ignore[attr-defined]
                id=export_id,
                export_type=fmt.name,
                query_params=filters.model_dump_json(),
                event_range_start=0,
                event_range_end=result.to_position,
                example_count=counts["train"] + counts["eval"],
                file_path=str(out_dir),
                created_at=now_ms(),
            )
        )
    return ExportResult(
        export_id=export_id,
        format=fmt.name,
        files={split: str(path) for split, path in paths.items()},
        counts=counts,
        skipped_invalid=skipped,
        event_range=(0, result.to_position),
    )
