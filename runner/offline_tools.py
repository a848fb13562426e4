"""How the offline model uses the tools a step offers it: which it calls, in what order, with
what arguments, and what their results put in its answer.

Fixed rules, read from the request as the offline model reads everything else:

- **calculator**, when the question holds arithmetic ("compute 12 * 1200");
- **search_documents**, when the instructions (the system prompt, the step's prompt) or the
  question name the documents ("the handbook", "the docs", the tool itself) or the
  instructions ask for facts, unless they say not to ("answer from memory, not the handbook");
  the query is what the instructions say to search for ("search the handbook for core
  hours"), else the question's key words;
- **read_document** on the document the first passage found cites, right after the search.

A tool's description counts as an instruction about that tool where it says to use it ("Use it
whenever the question touches what it holds…", "Call it first, before answering.": the
sentences a tool wish writes there); "Use only when…" asks for nothing.

The order is the one the instructions give ("search the handbook before computing", "compute
12 * 1200 first", "use the calculator after the search"); the step's prompt counts over the
system prompt, both over a tool's description and all over the question. Without one, facts
come first: search, read, then the calculator. One call per turn, as a careful model makes
them; the answer comes after.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from runner.instruction_words import mentions, negated
from runner.model_backend import ChatMessage, ContentBlock

CALCULATOR, SEARCH, READ = "calculator", "search_documents", "read_document"
EXPRESSION = re.compile(r"\(?\d[\d.\s()]*(?:[-+*/%^]\s*\(?\s*\d[\d.\s()]*)+")
_DOCUMENTS = (
    r"\b(?:handbook|documents?|docs|wiki|knowledge base|policy|policies|guidelines|"
    r"search_documents|read_document)\b"
)
_FACTS = r"\bfacts?\b"
# what each tool is called in an instruction about order
_CALCULATING = r"\b(?:calculator|calculat\w*|comput\w*|arithmetic)\b"
_SEARCHING = r"\b(?:search\w*|look\w* (?:it |them )?up|handbook|documents?|docs|wiki)\b"
_SEARCH_FOR = re.compile(
    r"\bsearch(?:es|ing)?\s+(?:the\s+)?(?:\w+\s+)?(?:for|on|about)\s+([^.;:!?\n]{3,80})", re.I
)
_FIRST = r"\b(?:first|before (?:answering|writing|anything)|start (?:by|with))\b"
_CITED = re.compile(r"^\[([^\]\n]{1,300})\]", re.M)
# a sentence of a tool's description that tells the model to call it ("Use it whenever…",
# "Call it first"), not one that limits when ("Use only when…")
_USE_IT = re.compile(r"^(?:always\s+)?(?:use|call)\s+it\b(?!\s+only)", re.I)
_WORD = re.compile(r"[a-z0-9]+")
QUERY_WORDS = 6


@dataclass(frozen=True)
class Call:
    """A tool call the model asks for, with the sentence it says before it."""

    name: str
    arguments: dict[str, Any]
    said: str

    def block(self) -> ContentBlock:
        digest = hashlib.sha256(f"{self.name}\x00{json.dumps(self.arguments)}".encode())
        return ContentBlock(
            type="tool_use",
            id="toolu_offline_" + digest.hexdigest()[:12],
            name=self.name,
            input=self.arguments,
        )


@dataclass(frozen=True)
class Done:
    """A call made earlier in the step, and what came back."""

    name: str
    arguments: dict[str, Any]
    result: str
    is_error: bool


def calls_made(messages: list[ChatMessage]) -> list[Done]:
    """The step's tool calls so far, in order, each with its result."""
    results = {
        block.tool_use_id: block
        for m in messages
        if m.role == "user" and not isinstance(m.content, str)
        for block in m.content
        if block.type == "tool_result"
    }
    done = []
    for m in messages:
        if m.role != "assistant" or isinstance(m.content, str):
            continue
        for block in m.content:
            if block.type == "tool_use":
                result = results.get(block.id)
                done.append(
                    Done(
                        name=block.name or "",
                        arguments=block.input or {},
                        result=(result.content or "") if result else "",
                        is_error=result.is_error if result else True,
                    )
                )
    return done


def next_call(
    offered: set[str],
    system: str,
    instruction: str,
    question: str,
    keywords: list[str],
    done: list[Done],
    described: dict[str, str] | None = None,
) -> Call | None:
    """The next tool call the step's plan holds, or None: time to answer. ``described``: the
    offered tools' descriptions, by name."""
    made = {d.name for d in done}
    for name in _plan(offered, system, instruction, question, described or {}):
        if name in made:
            continue
        if name == CALCULATOR:
            expr = EXPRESSION.search(question) or EXPRESSION.search(instruction)
            if expr is None:
                continue
            expression = expr.group(0).strip().rstrip(".").strip()
            return Call(
                name,
                {"expression": expression},
                f"I will compute {expression} with the calculator.",
            )
        if name == SEARCH:
            query = _query(instruction, system, keywords)
            return Call(name, {"query": query}, f"I will search the documents for {query!r}.")
        found = next((d for d in done if d.name == SEARCH and not d.is_error), None)
        cited = _CITED.search(found.result) if found else None
        if cited is None:
            continue  # nothing found to read
        document = cited.group(1)
        return Call(name, {"name": document}, f"I will read {document}, which the search cites.")
    return None


def _plan(
    offered: set[str], system: str, instruction: str, question: str, described: dict[str, str]
) -> list[str]:
    """The tools the step will call, in order."""
    asked = system + "\n" + instruction
    told = {name: _told(text) for name, text in described.items() if name in offered}
    search = SEARCH in offered and (
        mentions(asked, _DOCUMENTS)
        or mentions(asked, _FACTS)
        or mentions(question, _DOCUMENTS)
        or told.get(SEARCH, (False, False))[0]
    )
    lookup = [SEARCH, READ] if search and READ in offered else [SEARCH] if search else []
    calculate = [CALCULATOR] if CALCULATOR in offered else []
    # the most specific instruction counts: the step's prompt, then the system prompt, then
    # a tool's description, then the question
    firsts = [_first(instruction), _first(system)]
    firsts += [next((n for n in (SEARCH, CALCULATOR) if told.get(n, (False, False))[1]), None)]
    for first in [*firsts, _first(question)]:
        if first is not None:
            return calculate + lookup if first == CALCULATOR else lookup + calculate
    return lookup + calculate


def _told(description: str) -> tuple[bool, bool]:
    """(use it, first) as a tool's description tells the model: a sentence that says to use
    or call it, and whether that sentence says first."""
    use = first = False
    for sentence in re.split(r"(?<=[.;!?])\s+", description.strip()):
        if _USE_IT.search(sentence.strip()):
            use = True
            first = first or bool(re.search(_FIRST, sentence.lower()))
    return use, first


def _first(text: str) -> str | None:
    """Which tool ``text`` says to use first (its last sentence that says so wins), or None."""
    said = None
    for sentence in re.split(r"[.;!?\n]+", text):
        lowered = sentence.lower()
        calc = _first_match(lowered, _CALCULATING)
        look = _first_match(lowered, _SEARCHING)
        if calc is not None and look is not None:
            early, late = (CALCULATOR, SEARCH) if calc < look else (SEARCH, CALCULATOR)
            between = lowered[min(calc, look) : max(calc, look)]
            if re.search(r"\b(?:before|then|first)\b", between):
                said = early
            elif re.search(r"\bafter\b", between):
                said = late
        elif (calc is not None or look is not None) and re.search(_FIRST, lowered):
            said = CALCULATOR if calc is not None else SEARCH
    return said


def _first_match(text: str, pattern: str) -> int | None:
    for match in re.finditer(pattern, text):
        if not negated(text, match.start()):
            return match.start()
    return None


def _query(instruction: str, system: str, keywords: list[str]) -> str:
    for text in (instruction, system):
        wanted = _SEARCH_FOR.search(text)
        if wanted:
            return wanted.group(1).strip()
    return " ".join(keywords[:QUERY_WORDS])


def findings(done: list[Done], keywords: list[str]) -> str:
    """What the calls found, as the answer's opening sentences: each result in the order the
    calls were made; of a document, its sentences on the question."""
    said = []
    for call in done:
        if call.is_error:
            said.append(f"The tool reported an error: {call.result}.")
        elif call.name == CALCULATOR:
            said.append(f"The result is: {call.result}.")
        elif call.name == READ:
            facts = _on_topic(_sentences(call.result), keywords)
            if facts:
                said.append(f"From {call.arguments.get('name')}: {' '.join(facts)}")
        elif call.name == SEARCH and not any(d.name == READ and not d.is_error for d in done):
            passages = [re.sub(r"^\[[^\]]*\]\s*", "", p) for p in call.result.split("\n\n")]
            facts = _on_topic([s for p in passages for s in _sentences(p)], keywords)
            if facts:
                said.append(f"The documents say: {' '.join(facts)}")
    return " ".join(said)


def _sentences(text: str) -> list[str]:
    lines = (line.strip() for line in text.splitlines())
    prose = " ".join(line for line in lines if line and not line.startswith("#"))
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", prose) if s.strip()]


def _on_topic(sentences: list[str], keywords: list[str], most: int = 2) -> list[str]:
    """The sentences that share the most words with the question (at most ``most``, in their
    order): the best one, and any other sharing two words or more."""
    terms = set(keywords)
    overlap = [len(terms & set(_WORD.findall(s.lower()))) for s in sentences]
    if not overlap or max(overlap) == 0:
        return []
    best = max(overlap)
    ranked = sorted(range(len(sentences)), key=lambda i: -overlap[i])
    chosen = [i for i in ranked if overlap[i] == best or overlap[i] >= 2][:most]
    return [sentences[i] for i in sorted(chosen)]
