"""Session spec files (YAML or JSON): validated completely before anything starts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from domain.agent import AgentDefinition, CamelModel
from domain.panel import Panel

_ID = r"^[a-z0-9][a-z0-9-]{0,62}$"

# The tools the Agent Runner implements (runner/tools/; a test holds the two lists together)
BUILT_IN_TOOLS = ("calculator", "search_documents", "read_document")
MAX_INPUT_CHARS = 20_000
MAX_DOCUMENT_BYTES = 512 * 1024
MAX_DOCUMENTS_BYTES = 1024 * 1024  # they travel in the first run's workflow input
MAX_RATERS = 20
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


class SessionDocument(BaseModel):
    """A file the session provides to its agents' read-only document tools."""

    name: str
    content: str


class LineageOptions(CamelModel):
    """Per-lineage orchestration knobs."""

    max_cycles: int | None = Field(default=None, ge=1)
    continue_as_new_every: int = Field(default=25, ge=1, le=1000)
    max_attempts: int = Field(default=3, ge=1, le=20)
    retry_initial_interval_seconds: float = Field(default=1.0, gt=0, le=600)
    # A dead worker's attempt moves to another worker after this long without a heartbeat.
    heartbeat_timeout_seconds: float = Field(default=60.0, ge=1, le=3600)
    # The Master Trainer's backend, chosen explicitly: the deterministic rules engine, or Claude
    # with structured outputs (needs ANTHROPIC_API_KEY on the worker; never falls back).
    trainer: Literal["rules", "claude", "rules+claude"] = "rules"
    trainer_model: str = Field(default="claude-sonnet-5", min_length=1)
    # Roll a change back automatically when the next score refutes it: only the changes for a
    # refuted aspect, or the whole evolution when the score fell and no aspect says why.
    rollback_refuted: bool = True
    # Who may correct how a score's comment was read: its scorer only (a correction relabels
    # someone's words and re-plans the change they set off), or any rater
    corrections_by: Literal["scorer", "any"] = "scorer"
    # An output that fails a check of the reviewer's active wishes gets this many revisions in
    # the same cycle (0: none); the output shown for scoring passes the most checks
    revision_attempts: int = Field(default=1, ge=0, le=3)
    # Several raters (domain/panel.py): the names expected, or how many of any name; the
    # fewest scores the cycle may go on with (default: all of them); and how long the output
    # waits for every rater (seconds, or "90s", "30m", "2h", "1d") before it goes on with the
    # quorum. None of them: one rater, as a lineage has always had.
    raters: (
        list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]]
        | int
        | None
    ) = None
    quorum: int | None = Field(default=None, ge=1, le=MAX_RATERS)
    score_window: float | None = Field(default=None, gt=0, le=366 * 86_400)

    @field_validator("raters")
    @classmethod
    def _raters_named_once(cls, raters: list[str] | int | None) -> list[str] | int | None:
        if isinstance(raters, int) and not 1 <= raters <= MAX_RATERS:
            raise ValueError(f"a count of raters is 1 to {MAX_RATERS}, got {raters}")
        if isinstance(raters, list):
            if not 1 <= len(raters) <= MAX_RATERS:
                raise ValueError(f"name 1 to {MAX_RATERS} raters, got {len(raters)}")
            folded = [r.casefold() for r in raters]
            repeated = sorted({r for r in raters if folded.count(r.casefold()) > 1})
            if repeated:
                raise ValueError(f"raters named twice: {', '.join(repeated)}")
        return raters

    @field_validator("score_window", mode="before")
    @classmethod
    def _window_seconds(cls, window: object) -> object:
        if isinstance(window, str):
            match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", window)
            if match is None:
                raise ValueError(
                    f"scoreWindow: {window!r} is not a duration; seconds, or 90s, 30m, 2h, 1d"
                )
            return float(match[1]) * _UNITS[match[2] or "s"]
        return window

    @model_validator(mode="after")
    def _quorum_fits(self) -> LineageOptions:
        if self.raters is None:
            if self.quorum is not None or self.score_window is not None:
                raise ValueError("quorum and scoreWindow need raters (names, or a count)")
            return self
        size = self.raters if isinstance(self.raters, int) else len(self.raters)
        if self.quorum is not None and self.quorum > size:
            raise ValueError(f"quorum {self.quorum} is more than the {size} raters")
        return self

    def panel(self) -> Panel | None:
        """The lineage's raters, or None: one rater, as before."""
        if self.raters is None:
            return None
        names = [] if isinstance(self.raters, int) else list(self.raters)
        size = self.raters if isinstance(self.raters, int) else len(names)
        return Panel(
            names=names,
            size=size,
            quorum=self.quorum or size,
            window_seconds=self.score_window,
        )


class LineageSpec(CamelModel):
    label: str = Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")
    agent: AgentDefinition
    options: LineageOptions = Field(default_factory=LineageOptions)


class SessionSpec(CamelModel):
    """A brief (the cycle inputs) plus the competing lineages that answer it."""

    name: str = Field(min_length=1, max_length=200)
    id: str | None = Field(default=None, pattern=_ID)
    description: str = ""
    inputs: list[str] = Field(min_length=1, max_length=1000)
    lineages: list[LineageSpec] = Field(min_length=1, max_length=26)
    # Paths (relative to the spec file) of documents for search_documents / read_document
    documents: list[str] = Field(default_factory=list, max_length=100)
    _loaded_documents: list[SessionDocument] = PrivateAttr(default_factory=list)

    @property
    def loaded_documents(self) -> list[SessionDocument]:
        return self._loaded_documents

    @field_validator("inputs")
    @classmethod
    def _inputs_bounded(cls, inputs: list[str]) -> list[str]:
        for i, text in enumerate(inputs):
            if not text.strip():
                raise ValueError(f"input {i} is empty")
            if len(text) > MAX_INPUT_CHARS:
                raise ValueError(f"input {i} has {len(text)} characters (max {MAX_INPUT_CHARS})")
        return inputs

    @model_validator(mode="after")
    def _tools_exist(self) -> SessionSpec:
        available = BUILT_IN_TOOLS
        for i, lineage in enumerate(self.lineages):
            for j, tool in enumerate(lineage.agent.tools):
                if tool.name not in available:
                    raise ValueError(
                        f"lineages[{i}].agent.tools[{j}]: no implementation for tool "
                        f"{tool.name!r}; available: {', '.join(available)}"
                    )
        return self

    @model_validator(mode="after")
    def _labels_unique(self) -> SessionSpec:
        labels = [lineage.label for lineage in self.lineages]
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"lineage labels must be unique; repeated: {', '.join(duplicates)}")
        return self

    @property
    def session_id(self) -> str:
        return self.id or slugify(self.name)

    def lineage_id(self, label: str) -> str:
        return f"{self.session_id}-{label}"


class SpecError(ValueError):
    """A spec file that cannot start a session; the message names file, field and problem."""


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:63]
    return slug or "session"


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def parse_spec(data: object, source: str = "<spec>") -> SessionSpec:
    if not isinstance(data, dict):
        raise SpecError(f"{source}: the spec must be a mapping, got {type(data).__name__}")
    try:
        return SessionSpec.model_validate(data)
    except ValidationError as exc:
        lines = [f"{source}: invalid session spec ({exc.error_count()} problem(s))"]
        for err in exc.errors():
            lines.append(f"  - {_field_path(err['loc'])}: {err['msg']}")
        raise SpecError("\n".join(lines)) from None


def load_spec(path: str | Path) -> SessionSpec:
    """Read and validate a YAML or JSON spec; raises SpecError naming the file and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read spec file: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SpecError(f"{path}: not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}") from None
    spec = parse_spec(data, str(path))
    spec._loaded_documents = _read_documents(spec, path)
    return spec


def _read_documents(spec: SessionSpec, spec_path: Path) -> list[SessionDocument]:
    documents, total = [], 0
    for i, relative in enumerate(spec.documents):
        doc_path = (spec_path.parent / relative).resolve()
        where = f"{spec_path}: documents[{i}] ({relative})"
        try:
            raw = doc_path.read_bytes()
        except OSError as exc:
            raise SpecError(f"{where}: cannot read: {exc.strerror or exc}") from None
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise SpecError(f"{where}: {len(raw)} bytes is over the {MAX_DOCUMENT_BYTES} limit")
        total += len(raw)
        if total > MAX_DOCUMENTS_BYTES:
            raise SpecError(f"{where}: documents exceed {MAX_DOCUMENTS_BYTES} bytes in total")
        try:
            documents.append(SessionDocument(name=doc_path.name, content=raw.decode("utf-8")))
        except UnicodeDecodeError:
            raise SpecError(f"{where}: not UTF-8 text") from None
    return documents
