"""A revision inside the cycle: an output that fails a check of the reviewer's active wishes
is given back to the model once, with which checks failed and by how much.

The revision is one model call of the same agent version (its system prompt, model and
sampling; its constraints still enforced), told what to fix in its system prompt and given its
own answer to revise. It is recorded as an attempt of its own (``revision_of``), with its
spans; the output shown for scoring is the one that passes the most checks.
"""

from __future__ import annotations

from domain.agent import AgentDefinition
from domain.checks import CheckResult
from domain.execution import preview_of

REVISION_PROMPT = "Revise this answer: {input}"
MAX_QUOTED = 5  # phrases quoted back to the model per check
_LISTED = {"table": "a table", "bullets": "bullet points", "numbered": "a numbered list"}


def revision_of(attempt_id: str, number: int) -> str:
    """The attempt id of revision ``number`` (1-based) of the output of ``attempt_id``."""
    return f"{attempt_id}:r{number}"


def reviser(agent: AgentDefinition, failed: list[CheckResult]) -> AgentDefinition:
    """The agent as it revises: one call, no tools, told which checks failed and by how much."""
    told = "\n".join(f"- {fix(check)}" for check in failed)
    prompt = (
        f"{agent.system_prompt.rstrip()}\n\nYour last answer missed what the reviewer asked "
        f"for. Revise it, keeping what is right, and reply with the revised answer only. "
        f"Fix:\n{told}"
    )
    return agent.model_copy(update={"system_prompt": prompt, "tools": [], "flow": []})


def fix(check: CheckResult) -> str:
    """What to do about one failed check, with how far the output was off, in words a model
    follows (and the offline model reads)."""
    why = f" ({check.shortfall})" if check.shortfall else ""
    family, wish = check.family, check.wish
    if family in ("shorter", "longer") and check.target is not None:
        return _length(check, why)
    absent = wish.startswith("no ")
    if absent and family in _LISTED:
        return f"Write it in flowing paragraphs, without {_LISTED[family]}{why}."
    if (family, absent) in _FIXES:
        return _FIXES[family, absent].format(wish=wish, why=why)
    if family in ("direct", "banned"):
        return f"State it directly; never write these phrases: {_quoted(check)}."
    if family == "language":
        # "in German" (the whole answer) or "the closing summary in German" (one part)
        whole = wish.startswith("in ")
        return f"Write {'the whole answer ' if whole else ''}{wish}{why}."
    if family == "summary_at_end" and check.target is not None:
        return f"End with {wish.removesuffix(' at the end')}, no more, no less{why}."
    return f"{wish}{why}."


_FIXES = {
    ("table", False): "Present it as a table, with one row per point and one column per attribute.",
    ("bullets", False): "Use bullet points, not paragraphs.",
    ("numbered", False): "Give it as a numbered list of steps.",
    ("headings", False): "Organise it under section headings.",
    ("headings", True): "Drop the headings{why}.",
    ("code_block", False): "Put the code in a fenced code block.",
    ("code_block", True): "Leave out code blocks{why}.",
    ("prose", False): "Write it in flowing paragraphs only; no lists, no tables{why}.",
    ("simpler", False): "Say it in plain, everyday words and short sentences{why}.",
    ("summary_at_end", False): "End with a summary of the key points.",
    ("summary_at_end", True): "Leave out the closing summary.",
    ("conclusion_first", False): "Lead with the recommendation, in the first sentence, then "
    "give the reasoning.",
    ("example", False): "Give {wish}, each introduced with 'For example'{why}.",
    ("example", True): "Leave out the examples{why}.",
}


def _length(check: CheckResult, why: str) -> str:
    target = int(check.target or 0)
    value = int(check.value or 0)
    wish = check.wish
    if wish.startswith("about"):
        return f"Make it about {target} words long: it has {value} words{why}."
    if wish.startswith("under"):
        return f"Keep it under {target} words: it has {value}{why}."
    if wish.startswith("shorter"):
        return f"Keep it under {int(target * 0.85)} words: it has {value}{why}."
    if wish.startswith("longer"):
        return f"Go into more depth, past {target} words: it has {value}{why}."
    return f"Use {wish}: it has {value}{why}."


def _quoted(check: CheckResult) -> str:
    """The phrases a hedging or banned-phrase check found, each in single quotes."""
    if check.family == "banned":
        return check.wish.removeprefix("no ")
    phrases = [p.split(" \u00d7")[0] for p in check.measure.split(", ")][:MAX_QUOTED]
    return ", ".join(preview_of(p, 80) for p in phrases)
