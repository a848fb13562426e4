"""search_documents / read_document: read-only access to the documents a session provides."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from domain.built_in_tools import descriptions
from runner.tools.registry import ToolContext, ToolError

READ_LIMIT_CHARS = 8_000
_WORD = re.compile(r"[a-z0-9]+")


class SearchInput(BaseModel):
    query: str = Field(min_length=1, max_length=500, description="Words to look for.")
    max_results: int = Field(default=3, ge=1, le=10)


class ReadInput(BaseModel):
    name: str = Field(min_length=1, max_length=300, description="A document name from search.")


def _passages(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


class SearchDocuments:
    name = "search_documents"
    description = descriptions()["search_documents"]
    Input = SearchInput

    async def run(self, args: SearchInput, ctx: ToolContext) -> str:  # type: ignore[override]
        documents = ctx.documents()
        if not documents:
            raise ToolError("this session provides no documents")
        terms = set(_WORD.findall(args.query.lower()))
        scored = []
        for name, text in sorted(documents.items()):
            for passage in _passages(text):
                overlap = len(terms & set(_WORD.findall(passage.lower())))
                if overlap:
                    scored.append((-overlap, name, passage))
        if not scored:
            return f"no passage matches {args.query!r}"
        scored.sort()
        return "\n\n".join(
            f"[{name}] {passage[:600]}" for _, name, passage in scored[: args.max_results]
        )


class ReadDocument:
    name = "read_document"
    description = descriptions()["read_document"]
    Input = ReadInput

    async def run(self, args: ReadInput, ctx: ToolContext) -> str:  # type: ignore[override]
        documents = ctx.documents()
        if args.name not in documents:
            names = ", ".join(sorted(documents)) or "none"
            raise ToolError(f"no document named {args.name!r}; available: {names}")
        text = documents[args.name]
        if len(text) > READ_LIMIT_CHARS:
            return text[:READ_LIMIT_CHARS] + f"\n… [{len(text) - READ_LIMIT_CHARS} more characters]"
        return text
