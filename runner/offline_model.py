"""The built-in offline model: deterministic text so demos and tests run without an API key.

It is not a language model and never claims to be one (replies report model ``offline-…``). It
reads the instruction families a trainer writes — length, format, tone — from the system prompt,
honours ``max_tokens``, and builds an answer about the input's topic from fixed sentence
templates, so the demo loop visibly responds to evolution. It uses the tools a step offers as
``runner/offline_tools.py`` says (the calculator, the document search, the document the search
cites, in the order its instructions give) and opens its answer with what they found.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from typing import NamedTuple

from domain import tool_flow
from domain.change_families import FAMILIES
from runner.instruction_words import last_mentioned, mentions
from runner.model_backend import ChatMessage, ContentBlock, ModelReply, ModelRequest
from runner.offline_tools import Call, calls_made, findings, next_call

_STOPWORD_TEXT = """
a an the and or of for to in on at by with about from into over under why how what when which
who is are be should could would will can do does did explain describe discuss write give list
summarize tell me us our your their its this that these those it as than then so if vs versus
between more most less least some any each every all whether
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# What an answer says, once the opener has named the topic: it is referred to as "it" or by its
# short name ({short}: "the four-day work week" of "... for small software teams"), as a person
# writing a short answer would, not repeated whole in every sentence.
_POINTS = [
    "It works best when the goal is stated up front and measured.",
    "Teams that try {short} usually start small and expand what works.",
    "The main benefit is focus: fewer handoffs and clearer ownership.",
    "A common risk is hidden cost, so track it from day one.",
    "People and habits matter more than tools here.",
    "Clear communication keeps it from drifting off course.",
    "Measure the results before and after, so the effect is visible.",
    "Good documentation makes it repeatable instead of heroic.",
    "Start with the simplest version that could possibly work.",
    "Revisit the approach every quarter; what fit last year may not fit now.",
    "People adopt {short} faster when they see an early, concrete win.",
    "Budget time for follow-through, since that is where efforts like this most often stall.",
]

_ELABORATIONS = [
    "In practice, this means agreeing on a small number of signals and reviewing them together.",
    "Experience across many organisations suggests that consistency matters more than intensity.",
    "It is worth noting that the costs appear early while the benefits compound over time.",
    "This is rarely a one-off decision; it is a habit that needs periodic attention.",
    "Where this goes wrong, the cause is usually unclear expectations rather than effort.",
    "Leaders can help by modelling the behaviour they want and removing small obstacles.",
    "The evidence is mixed in places, so it pays to run a short, honest trial first.",
    "A written summary of decisions keeps everyone aligned as circumstances change.",
]

_FORMAL_OPENERS = [
    "This analysis examines {topic} and its principal implications.",
    "The following discussion considers {topic} in a structured manner.",
]
_CASUAL_OPENERS = [
    "Here's the quick take on {topic}!",
    "So, {topic} — let's dig in.",
]
_NEUTRAL_OPENERS = ["Here is an overview of {topic}.", "Some thoughts on {topic}."]
_FORMAL_CLOSERS = [
    "In conclusion, {short} merits careful and deliberate consideration.",
    "Overall, the considerations above should inform any decision on {short}.",
]
_CASUAL_CLOSERS = ["Hope that helps — give it a go!", "That's the gist. Try it and see!"]


def approx_tokens(text: str) -> int:
    """A stable token estimate (about four characters per token)."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


class Style:
    def __init__(self, instructions: str) -> None:
        text = instructions.lower()
        words = re.search(
            r"(?:under|at most|no more than|fewer than|max(?:imum)?)\s+(\d+)\s+words", text
        )
        self.word_limit = int(words.group(1)) if words else None
        about = re.search(r"\babout (\d+) words", text)
        self.word_target = int(about.group(1)) if about else None
        # Each change family's record says which words set which attribute: the first family
        # (in the registry's order) whose words appear wins, except for the answer's format,
        # where the latest instruction wins (the trainer appends newer ones after older ones)
        self.length, self.tone = "medium", "neutral"
        self.headings = self.conclusion_first = self.summary_at_end = False
        self.example = self.warm = False
        formats: dict[str, str] = {}
        seen: set[str] = set()
        for family in FAMILIES.values():
            effect = family.offline
            if effect is None:
                continue
            if effect.attribute == "format":
                formats[str(effect.value)] = effect.pattern
            elif effect.attribute not in seen and mentions(text, effect.pattern):
                setattr(self, effect.attribute, effect.value)
                seen.add(effect.attribute)
        self.format = last_mentioned(text, formats, "paragraphs")
        points = re.search(
            r"\bonly the (one|two|three|four|five|six|seven|\d) key points\b"
            r"|\bat most (one|two|three|four|five|six|seven|\d) (?:of them|items)\b",
            text,
        )
        self.max_points = _NUMBERS.get(points.group(1) or points.group(2)) if points else None
        language = re.search(
            r"\b(?:[Aa]nswer|[Rr]eply|[Rr]espond|[Ww]rite)\w*(?: (?P<part>the closing summary))?"
            r"[^.]{0,20}\bin (?P<language>[A-Z]\w+)",
            instructions,
        )
        # Phrases it is told never to write (a revision after a failed check): it drops the
        # sentences that hold them
        never = re.search(r"never write these phrases: (.+)", instructions, re.I)
        self.avoid = [p.lower() for p in re.findall(r"'([^']+)'", never.group(1))] if never else []
        # A template model cannot write another language: it says so instead of pretending
        self.language = (
            language.group("language")
            if language and language.group("language") not in ("English", "Markdown", "A", "The")
            else None
        )
        self.language_part = language.group("part") if language and self.language else None

    @property
    def target_words(self) -> int:
        base = self.word_target or {"short": 80, "medium": 180, "long": 480}[self.length]
        return min(base, self.word_limit) if self.word_limit else base


def _short(topic: str) -> str:
    """The topic's head: "the four-day work week" of "the four-day work week for small
    software teams" (a topic with no such tail is its own head)."""
    head = re.split(r"\s+(?:for|of|in|on|at|with|that|which|when|among|across|between)\s+", topic)[
        0
    ]
    return head if len(head.split()) >= 2 else topic


def _topic(prompt: str) -> tuple[str, list[str]]:
    text = prompt.strip().splitlines()[0] if prompt.strip() else "the question"
    text = re.split(r"[:;]\s", text, maxsplit=1)[0]  # the subject, not the instructions after it
    text = re.sub(
        r"^(please\s+)?(explain|describe|discuss|estimate|calculate|write( about)?|summari[sz]e|"
        r"tell me about|"
        r"give (me )?(an? )?(overview|summary) of|outline)\s+",
        "",
        text,
        flags=re.IGNORECASE,
    )
    topic = text.strip().rstrip(".?!").strip() or "the question"
    if len(topic) > 80:
        topic = topic[:80].rsplit(" ", 1)[0]
    keywords = [
        w for w in re.findall(r"[a-zA-Z][a-zA-Z-]{3,}", topic.lower()) if w not in _STOPWORDS
    ]
    return topic[0].lower() + topic[1:], keywords or ["planning", "execution"]


class OfflineModel:
    """Deterministic stand-in for an LLM; same request, same reply."""

    name = "offline"

    async def complete(self, request: ModelRequest) -> ModelReply:
        return self.reply(request)

    def reply(self, request: ModelRequest) -> ModelReply:
        user = _first_user_text(request.messages)
        read = _read(user, request.given)
        material = read.material
        topic, keywords = _topic(read.question or material or user)
        done = calls_made(request.messages)
        call = next_call(
            {t.name for t in request.tools},
            request.system,
            read.instruction,
            read.question or material or user,
            keywords,
            done,
            {t.name: t.description for t in request.tools},
        )
        if call is not None:
            # Like a real model with tools: ask for the calculation, the passage, the document
            # instead of guessing them
            return self._call(request, call)
        seed_src = f"{request.system}\x00{user}\x00{request.temperature}"
        rng = random.Random(int(hashlib.sha256(seed_src.encode()).hexdigest()[:16], 16))
        style = Style(request.system + "\n" + read.style)
        found = findings(done, keywords)
        prefix = f"{found} " if found else ""
        budget = max(1, request.max_tokens - approx_tokens(prefix))
        if len(material) >= REWRITE_MIN_CHARS:
            # A flow step over earlier output: rework that material instead of starting afresh.
            text, stop = self._rewrite(style, material, budget)
            return self._reply(request, *self._capped(prefix + text, stop, request.max_tokens))
        fields = {
            "topic": topic,
            "Topic": topic[0].upper() + topic[1:],
            "short": _short(topic),
            "kw1": keywords[0],
            "Kw1": keywords[0].capitalize(),
            "kw2": keywords[-1] if len(keywords) > 1 else "follow-through",
        }
        text, stop = self._compose(style, rng, fields, budget)
        return self._reply(request, *self._capped(prefix + text, stop, request.max_tokens))

    def _call(self, request: ModelRequest, call: Call) -> ModelReply:
        """A tool call, said first; a call that does not fit the token limit is not made: the
        reply stops there, saying so (stop reason ``max_tokens``)."""
        tokens = approx_tokens(call.said) + approx_tokens(json.dumps(call.arguments)) + 8
        if tokens > request.max_tokens:
            return self._reply(request, *self._fit(call.said, request.max_tokens))
        return ModelReply(
            content=[ContentBlock(type="text", text=call.said), call.block()],
            model=request.model,
            prompt_tokens=_prompt_tokens(request),
            completion_tokens=tokens,
            stop_reason="tool_use",
        )

    def _capped(self, text: str, stop: str, max_tokens: int) -> tuple[str, str]:
        """What the tools found and the answer, within the token limit."""
        if approx_tokens(text) <= max_tokens:
            return text, stop
        return self._fit(text, max_tokens)

    @staticmethod
    def _reply(request: ModelRequest, text: str, stop: str) -> ModelReply:
        return ModelReply(
            content=[ContentBlock(type="text", text=text)],
            model=request.model,
            prompt_tokens=_prompt_tokens(request),
            completion_tokens=approx_tokens(text),
            stop_reason=stop,
        )

    def _compose(
        self, style: Style, rng: random.Random, fields: dict[str, str], max_tokens: int
    ) -> tuple[str, str]:
        points = rng.sample(_POINTS, k=len(_POINTS))
        elaborations = rng.sample(_ELABORATIONS, k=len(_ELABORATIONS))
        budget = style.target_words
        text, stop = self._body(style, rng, fields, max_tokens, points, elaborations, budget)
        return self._frame(style, fields, text, stop, max_tokens)

    def _frame(
        self, style: Style, fields: dict[str, str], text: str, stop: str, max_tokens: int
    ) -> tuple[str, str]:
        """What a trainer's instructions add around the body: the recommendation first, an
        example, a closing summary, and a plain note when another language was asked for."""
        before, after = [], []
        if style.language:
            what = f"write {style.language_part}" if style.language_part else "answer"
            before.append(f"{_NOTE}; a language model would {what} in {style.language}.)")
        if style.conclusion_first:
            before.append(
                f"Recommendation: start small with {fields['topic']}, and measure the result."
            )
        if style.example:
            after.append(
                f"For example, a team of five could try {fields['topic']} for one quarter and "
                f"compare {fields['kw1']} before and after."
            )
        if style.summary_at_end:
            after.append(
                f"Summary: {fields['Topic']} pays off when it is measured; next step, pick one "
                f"team and try it."
            )
        if not before and not after:
            return text, stop
        return self._fit("\n\n".join([*before, text, *after]), max_tokens)

    def _body(
        self,
        style: Style,
        rng: random.Random,
        fields: dict[str, str],
        max_tokens: int,
        points: list[str],
        elaborations: list[str],
        budget: int,
    ) -> tuple[str, str]:
        if style.format == "table":
            return self._fit(_table(fields, points, budget), max_tokens)
        if style.format in ("bullets", "numbered"):
            listed = _listed(style, rng, fields, points, elaborations, budget)
            return self._fit(listed, max_tokens)
        opener = {
            "formal": _FORMAL_OPENERS,
            "casual": _CASUAL_OPENERS,
            "neutral": _NEUTRAL_OPENERS,
        }[style.tone]
        sentences = [rng.choice(opener).format(**fields)]
        if style.warm:
            sentences.insert(0, _WARM_OPENER)
        words = len(sentences[0].split())
        i = 0
        while words < budget and i < len(points) * 2:
            added = [points[i % len(points)].format(**fields)]
            if style.length != "short":
                added.append(elaborations[i % len(elaborations)])
            sentences += added
            words += sum(len(s.split()) for s in added)
            i += 1
        closer = {"formal": _FORMAL_CLOSERS, "casual": _CASUAL_CLOSERS}.get(style.tone)
        if closer:
            sentences.append(rng.choice(closer).format(**fields))
        per_paragraph = 2 if style.length == "short" else 4
        paragraphs = [
            " ".join(sentences[j : j + per_paragraph])
            for j in range(0, len(sentences), per_paragraph)
        ]
        if style.headings:
            paragraphs = [f"## Part {n + 1}\n{p}" for n, p in enumerate(paragraphs)]
        return self._fit("\n\n".join(paragraphs), max_tokens)

    def _rewrite(self, style: Style, material: str, max_tokens: int) -> tuple[str, str]:
        """Condense or reformat earlier output: sentences with numbers first, then the rest."""
        sentences = []
        # a list's markers come off each line before it is split into sentences: "1. Start
        # small." must not leave "1." as a sentence of its own
        lines = [
            re.sub(r"^\s*(?:[-*]|\d+[.)])\s+", "", line)
            for line in re.split(r"\n+", _without_table_markup(material))
        ]
        for raw in (part for line in lines for part in re.split(r"(?<=[.!?])\s+", line)):
            sentence = _avoiding(raw.strip(), style.avoid)
            if sentence and sentence not in sentences and not sentence.startswith("##"):
                sentences.append(sentence)
        # what the instructions put around the body stays around it: the recommendation first,
        # the summary last
        lead = [s for s in sentences if style.conclusion_first and s.startswith(_LEAD)][:1]
        # its note on a language it cannot write is said apart, first, never made a point
        notes = [s for s in sentences if s.startswith(_NOTE)]
        lead = notes[:1] + lead if style.language else lead
        sentences = [s for s in sentences if s not in notes]
        close = [s for s in sentences if style.summary_at_end and s.startswith(_CLOSE)][-1:]
        sentences = [s for s in sentences if s not in lead + close]
        # what the answer rests on (a figure, what a document or a tool said) is kept first
        ranked = [s for s in sentences if _FACT.search(s)]
        ranked += [s for s in sentences if s not in ranked]
        chosen, words = [], sum(len(s.split()) for s in lead + close)
        for sentence in ranked:  # as many as fit the length, a shorter one after a long one
            if words + len(sentence.split()) > style.target_words and chosen:
                continue
            chosen.append(sentence)
            words += len(sentence.split())
        chosen.sort(key=sentences.index)  # keep the material's order
        text, stop = self._reformat(style, chosen, max_tokens)
        if not lead and not close:
            return text, stop
        return self._fit("\n\n".join([*lead, text, *close]), max_tokens)

    def _reformat(self, style: Style, chosen: list[str], max_tokens: int) -> tuple[str, str]:
        if style.format == "table":
            text = _table({}, [s.replace("{", "(").replace("}", ")") for s in chosen], 10**6)
        elif style.format == "bullets":
            text = "\n".join(f"- {s}" for s in chosen)
        elif style.format == "numbered":
            text = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(chosen))
        else:
            text = " ".join(chosen)
        return self._fit(text, max_tokens)

    @staticmethod
    def _fit(text: str, max_tokens: int) -> tuple[str, str]:
        """Cut at the last whole sentence that fits ``max_tokens``, as a real model would stop."""
        if approx_tokens(text) <= max_tokens:
            return text, "end_turn"
        limit = max_tokens * 4
        cut = text[:limit]
        end = max(cut.rfind(". "), cut.rfind(".\n"), cut.rfind("\n"))
        return (cut[: end + 1] if end > 0 else cut).rstrip(), "max_tokens"


REWRITE_MIN_CHARS = 160
_LEAD, _CLOSE = "Recommendation:", "Summary:"  # how _frame opens and closes an answer
_NOTE = "(The offline model writes English only"  # how its note on another language opens
_WARM_OPENER = "I know this matters to you, so here is what I would do."
_NUMBERS = {
    word: n
    for n, word in enumerate(["one", "two", "three", "four", "five", "six", "seven"], start=1)
} | {str(n): n for n in range(1, 10)}


# a sentence that carries a fact: a figure, a quotation, or what a tool or document said
# (runner/offline_tools.py's openers)
_FACT = re.compile(r"\d|[\"\u201c]\w|^(?:From \S+:|The documents say:|The result is:)")


def _avoiding(sentence: str, phrases: list[str]) -> str:
    """``sentence`` without the phrases it is told never to write: a sentence that carries a
    fact loses only the phrase ("The output of the research step: The result is: 14400." →
    "The result is: 14400."), any other goes whole ("" )."""
    said = [p for p in phrases if p and p in sentence.lower()]
    if not said:
        return sentence
    if not _FACT.search(sentence):
        return ""
    for phrase in said:
        at = sentence.lower().find(phrase)
        while at >= 0:
            sentence = sentence[:at] + sentence[at + len(phrase) :]
            at = sentence.lower().find(phrase)
    rest = " ".join(sentence.split()).strip(" ,;:-")
    rest = re.sub(r"^that\s+", "", rest, flags=re.IGNORECASE)  # "It is worth noting that 12…"
    if not _FACT.search(rest) or len(rest.split()) < 2:
        return ""
    return rest[:1].upper() + rest[1:]


def _without_table_markup(material: str) -> str:
    """A table's rows as sentences (its header and rule dropped), for a rewrite."""
    lines, out = material.splitlines(), []
    for i, line in enumerate(lines):
        row = line.strip()
        if not row.startswith("|"):
            out.append(line)
            continue
        if set(row) <= set("|-: "):
            continue  # the rule under the header
        if i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|-: ") and lines[i + 1].strip():
            continue  # the header
        cells = [c.strip() for c in row.strip("|").split("|") if c.strip()]
        out.append(" ".join(cells).rstrip(".") + ".")
    return "\n".join(out)


class _Reading(NamedTuple):
    """A step's prompt as the offline model reads it."""

    instruction: str  # what it is told: read for the tools to call and how, never written
    style: str  # what it reads for how to write
    question: str  # the cycle's question ("" when the step is not given it)
    material: str  # the earlier output it reworks ("" when none)


def _read(user: str, given: dict[str, str]) -> _Reading:
    """What a step's prompt tells the model, and what it gives it. The prompt without what it
    was filled in with (``given``) is the step's own words — its instruction, the sentences a
    rater added, the labels before what it is given — read for how to answer, never written
    into the answer nor searched for. Of the earlier outputs it is given, the first is the one
    it reworks (a check step's answer); the others (findings given besides) are context. A
    prompt that is nothing but what it was given (a one-step agent, a revision, a direct
    call) holds its own instruction, if any: "Polish this: <text>"."""
    filled = {name: text for name, text in given.items() if text.strip()}
    own = user
    for text in sorted(filled.values(), key=len, reverse=True):
        own = own.replace(text, " ", 1)
    own = " ".join(own.split())
    if filled and own:
        earlier = [text for name, text in filled.items() if name != "input"]
        material = earlier[0] if earlier else ""
        return _Reading(own, own, filled.get("input", ""), material)
    said, material = _split_instruction(user)
    if material:
        return _Reading(said, said, "", material)
    return _Reading("", user, user, "")


def _split_instruction(user: str) -> tuple[str, str]:
    """("Polish this", "<earlier output>") for "Polish this: <earlier output>". What a step
    is given besides ("The findings of the research step: …", "The question: …") is context
    a model reads, not text to rework: it never reaches the answer."""
    for match in re.finditer(r":\s", user):
        head, rest = user[: match.start()], user[match.end() :]
        quoted = head.count("'") % 2 or head.count('"') % 2  # the colon sits inside a quote
        if not quoted and "\n" not in head and len(head) <= 300 and rest.strip():
            return head.strip(), _GIVEN_BESIDES.split(rest, maxsplit=1)[0].strip()
    return user, ""


def _given_besides() -> re.Pattern[str]:
    """The lines a flow step's prompt adds to give it other steps' outputs or the question
    (``domain/tool_flow_wishes.json``'s sentences, each up to its colon)."""
    said = [*tool_flow.vocabulary()["sentences"].values()]
    said += [step["findings"] for step in tool_flow.vocabulary()["steps"].values()]
    labels = [
        re.escape(text.split(": ", 1)[0]).replace(re.escape("{source}"), r"[\w-]+")
        for text in said
        if ": {" in text
    ]
    return re.compile(rf"\n(?=(?:{'|'.join(labels)}): )")


_GIVEN_BESIDES = _given_besides()


def _first_user_text(messages: list[ChatMessage]) -> str:
    for message in messages:
        if message.role == "user" and isinstance(message.content, str):
            return message.content
    return ""


def _prompt_tokens(request: ModelRequest) -> int:
    total = approx_tokens(request.system)
    for m in request.messages:
        if isinstance(m.content, str):
            total += approx_tokens(m.content)
        else:
            total += sum(
                approx_tokens(b.text or b.content or str(b.input or "")) for b in m.content
            )
    return total


def _table(fields: dict[str, str], points: list[str], budget: int) -> str:
    rows, words = [], 0
    for point in points:
        line = point.format(**fields).rstrip(".")
        head, _, rest = line.partition(" ")
        if words + len(line.split()) > budget and rows:
            break
        rows.append(f"| {head} | {rest} |")
        words += len(line.split())
    return "\n".join(["| Point | Detail |", "|---|---|", *rows])


def _listed(
    style: Style,
    rng: random.Random,
    fields: dict[str, str],
    points: list[str],
    elaborations: list[str],
    budget: int,
) -> str:
    """Bullets or a numbered list, within the word budget and the wished number of points."""
    items: list[str] = []
    words = 0
    for i, point in enumerate(points):
        line = point.format(**fields)
        if style.length == "long":
            line += " " + elaborations[i % len(elaborations)]
        if words + len(line.split()) > budget and items:
            break
        if style.max_points is not None and len(items) >= style.max_points:
            break
        items.append(line)
        words += len(line.split())
    marker = (lambda i: f"{i + 1}.") if style.format == "numbered" else (lambda i: "-")
    blocks = [f"{marker(i)} {item}" for i, item in enumerate(items)]
    if style.tone == "casual":
        blocks.insert(0, rng.choice(_CASUAL_OPENERS).format(**fields))
    if style.warm:
        blocks.insert(0, _WARM_OPENER)
    return "\n".join(blocks)
