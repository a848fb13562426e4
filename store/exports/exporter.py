"""Export pipelines: materialized examples → files trainers read, streamed, checked, recorded.

Formats: TRL SFT (``messages``), TRL DPO conversational (``prompt``/``chosen``/``rejected``),
OpenAI fine-tuning SFT and preference JSONL (``input``/``preferred_output``/
``non_preferred_output``), reward rows, and Parquet (nested messages) for SFT, DPO and reward.
Each output is split into train and eval deterministically by the hash of its input, so the same
prompt never lands on both sides and re-exports agree. ``corrections`` writes the reader's
labelled examples (a comment and the wants a rater corrected its reading to) as one JSONL file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Engine

from domain.events import RatersAgreed
from store.backends.database import write_transaction
from store.backends.dialect import DriverSQL, driver_cursor, stream_rows
from store.eventstore import upcasters
from store.eventstore.event_writer import now_ms
from store.exports.materializer import Materializer
from store.tables import ExportRow, ReadingCorrectionRow

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
    checks = row.get("checks", [])
    if not isinstance(checks, list) or not all(
        isinstance(c, dict) and isinstance(c.get("passed"), bool) and c.get("wish") for c in checks
    ):
        raise FormatError("checks: a list of {family, wish, passed, measure, value, target}")
    _check_messages(row.get("prompt"), "prompt", "user")
    _check_one_answer(row.get("completion"), "completion")
    if not isinstance(row.get("reward"), int | float) or not 0 <= row["reward"] <= 10:
        raise FormatError("reward: a number from 0 to 10")
    ratings = row.get("ratings")
    if ratings is not None and not (
        isinstance(ratings, list)
        and ratings
        and all(
            isinstance(r, dict)
            and isinstance(r.get("rater"), str)
            and isinstance(r.get("score"), int | float)
            and 0 <= r["score"] <= 10
            for r in ratings
        )
    ):
        raise FormatError("ratings: a list of {rater, score} (several raters), scores 0 to 10")


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
    # JSONL: the row's line, ``json.dumps(row(e), ensure_ascii=False)`` byte for byte, built from
    # the texts' stored JSON (encoding every prompt and answer again cost more than the query).
    line: Callable[[dict[str, Any]], str] | None = None


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
    row = {
        "prompt": _prompt(e["system"], e["user"]),
        "completion": _answer(e["completion"]),
        "reward": e["score"],
        "checks": e.get("checks") or [],
    }
    if e.get("ratings"):  # several raters: each one's score (``reward`` is their median)
        row["ratings"] = e["ratings"]
    return row


# The same rows as JSON lines. ``e["json"]`` holds each text as stored: the canonical JSON of a
# string, which is what json.dumps(..., ensure_ascii=False) writes for it.


def _message_json(role: str, text_json: str) -> str:
    return f'{{"role": "{role}", "content": {text_json}}}'


def _prompt_json(e: dict[str, Any], system: bool) -> str:
    messages = [_message_json("user", e["json"]["user"])]
    if system and e["system"]:
        messages.insert(0, _message_json("system", e["json"]["system"]))
    return f"[{', '.join(messages)}]"


def _answer_json(e: dict[str, Any], key: str) -> str:
    return f"[{_message_json('assistant', e['json'][key])}]"


def _sft_line(e: dict[str, Any]) -> str:
    return f'{{"messages": {_prompt_json(e, True)[:-1]}, {_answer_json(e, "completion")[1:]}}}'


def _dpo_line(e: dict[str, Any]) -> str:
    return (
        f'{{"prompt": {_prompt_json(e, False)}, "chosen": {_answer_json(e, "chosen")}, '
        f'"rejected": {_answer_json(e, "rejected")}}}'
    )


def _openai_preference_line(e: dict[str, Any]) -> str:
    return (
        f'{{"input": {{"messages": {_prompt_json(e, False)}}}, '
        f'"preferred_output": {_answer_json(e, "chosen")}, '
        f'"non_preferred_output": {_answer_json(e, "rejected")}}}'
    )


def _number_json(x: Any) -> str:
    # What json.dumps writes for a finite float, without its generic encoder per row.
    return float.__repr__(x) if type(x) is float and math.isfinite(x) else json.dumps(x)


def _reward_line(e: dict[str, Any]) -> str:
    checks = json.dumps(e.get("checks") or [], ensure_ascii=False)
    ratings = ""
    if e.get("ratings"):
        ratings = f', "ratings": {json.dumps(e["ratings"], ensure_ascii=False)}'
    return (
        f'{{"prompt": {_prompt_json(e, True)}, "completion": {_answer_json(e, "completion")}, '
        f'"reward": {_number_json(e["score"])}, "checks": {checks}{ratings}}}'
    )


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        Format("trl-sft", "sft", "jsonl", _sft, check_sft, _sft_line),
        Format("trl-dpo", "preference", "jsonl", _dpo, check_dpo, _dpo_line),
        Format("openai-sft", "sft", "jsonl", _sft, check_sft, _sft_line),
        Format(
            "openai-preference",
            "preference",
            "jsonl",
            _openai_preference,
            check_openai_preference,
            _openai_preference_line,
        ),
        Format("reward", "reward", "jsonl", _reward, check_reward, _reward_line),
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

    def write(self, line: str) -> None:
        self._file.write(line)
        self._file.write("\n")

    def close(self) -> None:
        self._file.close()


def _arrow_fields(pa: Any) -> list[tuple[str, Any]]:
    """A check's fields as Parquet columns."""
    kinds = {str: pa.string(), bool: pa.bool_(), float: pa.float64()}
    return [(name, kinds[kind]) for name, kind in CHECK_FIELDS.items()]


class _ParquetWriter:
    BATCH = 2000

    def __init__(self, path: Path, example_type: str, ratings: bool = False) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        messages = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
        fields = {
            "sft": [("messages", messages)],
            "preference": [("prompt", messages), ("chosen", messages), ("rejected", messages)],
            "reward": [
                ("prompt", messages),
                ("completion", messages),
                ("reward", pa.float64()),
                ("checks", pa.list_(pa.struct(_arrow_fields(pa)))),
            ],
        }[example_type]
        if ratings:  # the store holds several raters' scores: each one's (null for one rater)
            fields.append(
                ("ratings", pa.list_(pa.struct([("rater", pa.string()), ("score", pa.float64())])))
            )
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


_EXAMPLE_SQL = (
    "SELECT ex.id, ex.user_input_hash, ex.score, ex.score_delta, ex.system_prompt_hash,"
    " c.content, ch.content, r.content"
    " FROM mv_training_examples ex"
    " LEFT JOIN payload_blobs c ON c.hash = ex.completion_hash"
    " LEFT JOIN payload_blobs ch ON ch.hash = ex.chosen_hash"
    " LEFT JOIN payload_blobs r ON r.hash = ex.rejected_hash"
    " WHERE ex.example_type = ?"
)
_FILTERS = (  # ExportFilters field -> condition
    ("min_score", "ex.score >= ?"),
    ("min_score_delta", "(ex.score_delta >= ? OR ex.score_delta IS NULL)"),
    ("session_id", "ex.session_id = ?"),
    ("lineage_id", "ex.lineage_id = ?"),
    ("since_ms", "ex.created_at >= ?"),
    ("until_ms", "ex.created_at <= ?"),
)
_CHUNK = 2000  # examples per round of text look-ups


def _examples(
    engine: Engine, example_type: str, filters: ExportFilters
) -> Iterator[dict[str, Any]]:
    """Matching examples with their texts (decoded, and as stored JSON), streamed from the
    database on the driver's cursor: at hundreds of thousands of rows, SQLAlchemy's per-row
    mapping cost as much as the query.

    Answers are joined in (each is its own); system prompts and inputs recur across cycles and
    lineages, so they are looked up once per export, a chunk of examples at a time."""
    sql, params = _EXAMPLE_SQL, [example_type]
    for field, condition in _FILTERS:
        value = getattr(filters, field)
        if value is not None and value != "":
            sql += f" AND {condition}"
            params.append(value)
    sql += " ORDER BY ex.created_at, ex.id"
    shared = _SharedTexts()
    with engine.connect() as conn:
        checks = _checks_by_evaluation(conn) if example_type == "reward" else {}
        ratings = ratings_by_evaluation(conn) if example_type == "reward" else {}
        rows = stream_rows(conn, DriverSQL(sql), params, _CHUNK)
        while chunk := list(islice(rows, _CHUNK)):
            shared.load(conn, {h for row in chunk for h in (row[1], row[4]) if h})
            for row in chunk:
                user, system = row[1], row[4] if row[4] in shared.json else None
                if user not in shared.json:
                    continue  # its input's text is not in the store: no prompt to export
                example: dict[str, Any] = {
                    "id": row[0],
                    "user_input_hash": user,
                    "score": row[2],
                    "score_delta": row[3],
                    "system": shared.value[system] if system else None,
                    "user": shared.value[user],
                    "json": {"user": shared.json[user]},
                }
                if system:
                    example["json"]["system"] = shared.json[system]
                if checks:
                    example["checks"] = checks.get(row[0].removeprefix("reward:"), [])
                if ratings:
                    example["ratings"] = ratings.get(row[0].removeprefix("reward:"))
                answers = zip(("completion", "chosen", "rejected"), row[5:8], strict=True)
                for key, text_json in answers:
                    example[key] = None
                    if text_json is not None:
                        example[key] = json.loads(text_json)
                        example["json"][key] = text_json
                yield example


# A reward row's checks: the scored output's checks against its lineage's active wishes
# (``output.checked``), each as these fields (docs/training-data.md); a wish the output gave no
# measure of ("not checked") is no reward signal, and is left out
CHECK_FIELDS: dict[str, type] = {
    "family": str,
    "wish": str,
    "passed": bool,
    "measure": str,
    "value": float,
    "target": float,
}
_CHECKED_SQL = (
    "SELECT ev.id, p.content, e.schema_version FROM training_events e"
    " JOIN payload_blobs p ON p.hash = e.payload_hash"
    " JOIN evaluations ev ON ev.artifact_id = e.artifact_id"
    " WHERE e.event_type = 'output.checked'"
)


def _checks_by_evaluation(conn: Any) -> dict[str, list[dict[str, Any]]]:
    """evaluation id → the checks of the output it scored (the output shown: ``chosen``). One
    query by event type, per export; outputs never checked (no wish yet) have none."""
    cur, dialect = driver_cursor(conn)
    cur.execute(DriverSQL(_CHECKED_SQL).text(dialect))
    found: dict[str, list[dict[str, Any]]] = {}
    for evaluation_id, content, version in cur.fetchall():
        payload, _ = upcasters.upcast("output.checked", version or 1, json.loads(content), {})
        if payload.get("chosen", True):
            found[evaluation_id] = [
                {key: check.get(key) for key in CHECK_FIELDS}
                for check in payload["checks"]
                if check.get("checked", True)
            ]
    return found


_AGREED_SQL = (
    "SELECT p.content FROM training_events e JOIN payload_blobs p ON p.hash = e.payload_hash"
    f" WHERE e.event_type = '{RatersAgreed.event_type}'"
)


def ratings_by_evaluation(conn: Any) -> dict[str, list[dict[str, Any]]]:
    """evaluation id → each rater's score on the output it scored, for the outputs several
    raters scored (``raters.agreed``: the latest score of each, in the order they first
    scored). One query by event type, per export."""
    cur, dialect = driver_cursor(conn)
    cur.execute(DriverSQL(_AGREED_SQL).text(dialect))
    found: dict[str, list[dict[str, Any]]] = {}
    for (content,) in cur.fetchall():
        agreed = RatersAgreed.read(json.loads(content))
        found[agreed.evaluation_id] = [{"rater": v.rater, "score": v.score} for v in agreed.voices]
    return found


class _SharedTexts:
    """System prompts and inputs of an export, by hash: stored JSON and decoded value, each
    fetched and decoded once (bounded: a data set of unique inputs does not pile up)."""

    LIMIT = 50_000

    def __init__(self) -> None:
        self.json: dict[str, str] = {}
        self.value: dict[str, Any] = {}

    def load(self, conn: Any, hashes: set[str]) -> None:
        missing = [h for h in hashes if h not in self.json]
        if not missing:
            return
        if len(self.json) + len(missing) > self.LIMIT:
            self.json.clear()
            self.value.clear()
            missing = list(hashes)
        sql = DriverSQL(
            "SELECT hash, content FROM payload_blobs"
            f" WHERE hash IN ({', '.join('?' * len(missing))})"
        )
        cur, dialect = driver_cursor(conn)  # at most two texts per example: one fetch
        cur.execute(sql.text(dialect), missing)
        for digest, content in cur.fetchall():
            self.json[digest] = content
            self.value[digest] = json.loads(content)


CORRECTIONS = "corrections"  # the reader's labelled examples, not a trainer's format
_CORRECTION_FILTERS = (  # ExportFilters field -> condition (scores do not apply)
    ("session_id", "session_id = ?"),
    ("lineage_id", "lineage_id = ?"),
    ("since_ms", "created_at >= ?"),
    ("until_ms", "created_at <= ?"),
)


def correction_rows(engine: Engine, filters: ExportFilters) -> Iterator[dict[str, Any]]:
    """Every matching correction as its JSONL row, in the order they were made (streamed)."""
    table = ReadingCorrectionRow.__table__.name  # type: ignore[attr-defined]
    sql = (
        "SELECT id, session_id, lineage_id, evaluation_id, cycle, comment, read_as, corrected,"
        f" rater, created_at FROM {table} WHERE 1 = 1"
    )
    params: list[Any] = []
    for field, condition in _CORRECTION_FILTERS:
        value = getattr(filters, field)
        if value is not None and value != "":
            sql += f" AND {condition}"
            params.append(value)
    sql += " ORDER BY created_at, id"
    with engine.connect() as conn:
        for row in stream_rows(conn, DriverSQL(sql), params, _CHUNK):
            yield {
                "comment": row[5],
                "read_as": json.loads(row[6]),
                "corrected": json.loads(row[7]),
                "rater": row[8],
                "session": row[1],
                "lineage": row[2],
                "evaluation": row[3],
                "cycle": row[4],
                "correction": row[0],
                "created_at": row[9],
            }


def _export_corrections(engine: Engine, out_dir: Path, filters: ExportFilters) -> ExportResult:
    """``<out_dir>/corrections.jsonl``: no train/eval split (each row stands alone, and a
    reader evaluated on them plays them in order: ``trainer.evaluate --corrections``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{CORRECTIONS}.jsonl"
    writer, count = _JsonlWriter(path), 0
    try:
        for row in correction_rows(engine, filters):
            writer.write(json.dumps(row, ensure_ascii=False))
            count += 1
    finally:
        writer.close()
    return _recorded(
        engine, CORRECTIONS, filters, out_dir, {CORRECTIONS: path}, {CORRECTIONS: count}, 0
    )


def _recorded(
    engine: Engine,
    name: str,
    filters: ExportFilters,
    out_dir: Path,
    paths: dict[str, Path],
    counts: dict[str, int],
    to_position: int,
) -> ExportResult:
    """Record the export in the ``exports`` table."""
    export_id = uuid.uuid4().hex
    with write_transaction(engine) as conn:
        conn.execute(
            ExportRow.__table__.insert().values(  # type: ignore[attr-defined]
                id=export_id,
                export_type=name,
                query_params=filters.model_dump_json(),
                event_range_start=0,
                event_range_end=to_position,
                example_count=sum(counts.values()),
                file_path=str(out_dir),
                created_at=now_ms(),
            )
        )
    return ExportResult(
        export_id=export_id,
        format=name,
        files={key: str(path) for key, path in paths.items()},
        counts=counts,
        skipped_invalid=0,
        event_range=(0, to_position),
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
    if format_name == CORRECTIONS:
        return _export_corrections(engine, out_dir, filters or ExportFilters())
    if format_name not in FORMATS:
        raise ValueError(
            f"unknown format {format_name!r}; choose from {', '.join([*FORMATS, CORRECTIONS])}"
        )
    fmt, filters = FORMATS[format_name], filters or ExportFilters()
    result = Materializer(engine).run()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {split: out_dir / f"{fmt.name}.{split}.{fmt.suffix}" for split in ("train", "eval")}
    ratings = False  # a Parquet reward file has a ratings column when any output has ratings
    if fmt.suffix == "parquet" and fmt.example_type == "reward":
        with engine.connect() as conn:
            ratings = bool(ratings_by_evaluation(conn))
    writers = {
        split: _JsonlWriter(path)
        if fmt.suffix == "jsonl"
        else _ParquetWriter(path, fmt.example_type, ratings)
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
            writers[split].write(fmt.line(example) if fmt.line else row)
            counts[split] += 1
            if progress and (counts["train"] + counts["eval"]) % 1000 == 0:
                progress(counts["train"] + counts["eval"])
    finally:
        for writer in writers.values():
            writer.close()
    recorded = _recorded(engine, fmt.name, filters, out_dir, paths, counts, result.to_position)
    return recorded.model_copy(update={"skipped_invalid": skipped})
