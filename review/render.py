"""What the review pages draw: model and rater text as safe HTML, prompt diffs, score charts."""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markupsafe import Markup

from domain import built_in_tools
from domain.agent import AgentDefinition

# CommonMark with raw HTML off: what a model wrote is shown, never run (tags come out as
# text; markdown-it refuses javascript: and data: links).
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown(text: str) -> Markup:
    return Markup(_markdown.render(text))  # safe: markdown-it escapes (raw HTML off)


def prompt_diff(before: str, after: str) -> Markup:
    """A word-level diff of two prompts: removed words struck, added words marked, the rest
    plain — a changed sentence shows the words that changed, not the whole prompt twice."""
    # words with the space after them: a space alone never matches, so a rewritten sentence
    # shows as one deletion and one insertion, not word by word interleaved; compared by
    # their words alone, so a word that only gained a space or a line break after it (the
    # last one before an added sentence: "them." then "them. More.") stays plain, not struck
    # and added again
    old, new = re.findall(r"\S+\s*", before), re.findall(r"\S+\s*", after)
    parts = []
    matcher = difflib.SequenceMatcher(
        a=[w.rstrip() for w in old], b=[w.rstrip() for w in new], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        removed, added = "".join(old[i1:i2]), "".join(new[j1:j2])
        if tag == "equal":  # as it reads now, its spacing too (kept before what was cut)
            gap = old[i2 - 1][len(old[i2 - 1].rstrip()) :]
            same = added if added[-1:].isspace() else added + gap
            parts.append(f'<span class="same">{html.escape(same)}</span>')
            continue
        if removed:
            parts.append(f'<del class="removed">{html.escape(removed)}</del>')
            if added and not removed[-1:].isspace():
                parts.append(" ")  # the cut words and the new ones never read as one word
        if added:
            parts.append(f'<ins class="added">{html.escape(added)}</ins>')
    return Markup('<pre class="diff">' + "".join(parts) + "</pre>")  # words escaped above


def part_diffs(before: AgentDefinition, after: AgentDefinition) -> Markup:
    """The word-level diff of every flow step's prompt and tool description a change touched,
    each under its name: a step added or taken out whole. A prompt's line breaks stay line
    breaks (the diff is preformatted; its words escaped, never read as markup)."""
    parts = []
    steps = {s.name: s.prompt for s in before.flow}
    now = {s.name: s.prompt for s in after.flow}
    for name in [*now, *(n for n in steps if n not in now)]:
        old, new = steps.get(name, ""), now.get(name, "")
        if old != new:
            said = "added" if not old else "taken out" if not new else "its prompt"
            parts.append(_labelled(f"step {name} ({said})", prompt_diff(old, new)))
    # a tool declared without a description is shown the built-in one: diffed from it
    tools = {t.name: built_in_tools.shown(t.name, t.description) for t in before.tools}
    for tool in after.tools:
        now = built_in_tools.shown(tool.name, tool.description)
        if tool.name in tools and tools[tool.name] != now:
            diff = prompt_diff(tools[tool.name], now)
            parts.append(_labelled(f"tool {tool.name} (its description)", diff))
    return Markup("").join(parts)


def _labelled(label: str, diff: Markup) -> Markup:
    return Markup('<p class="diff-part">{}</p>').format(label) + diff


@dataclass
class ChartPoint:
    cycle: int
    score: float
    version: int
    # what this score said of the evolution before it: validated, not far enough, refuted,
    # untested (review.views.verdict_of)
    verdict: str | None = None


def score_chart(points: list[ChartPoint], width: int = 360, height: int = 140) -> Markup:
    """Scores over cycles as an inline SVG: a line, a dot per score (green: it validated the
    evolution before it, red: refuted), and a dashed marker where the agent version changed."""
    if not points:
        return Markup('<p class="muted">No scores yet.</p>')
    pad = 24
    last = max(p.cycle for p in points)
    first = min(p.cycle for p in points)
    span = max(1, last - first)

    def x(cycle: int) -> float:
        return pad + (cycle - first) * (width - 2 * pad) / span

    def y(score: float) -> float:
        return height - pad - score * (height - 2 * pad) / 10

    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="scores over cycles">',
        f'<line x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}" class="axis"/>',
        f'<text x="2" y="{y(10) + 4}" class="tick">10</text>',
        f'<text x="8" y="{y(0) + 4}" class="tick">0</text>',
    ]
    line = " ".join(f"{x(p.cycle):.1f},{y(p.score):.1f}" for p in points)
    parts.append(f'<polyline points="{line}" class="scores"/>')
    previous = None
    for p in points:
        if previous is not None and p.version != previous:
            parts.append(
                f'<line x1="{x(p.cycle):.1f}" y1="{pad / 2}" x2="{x(p.cycle):.1f}" '
                f'y2="{y(0)}" class="version"/><text x="{x(p.cycle) + 3:.1f}" y="{pad - 6}" '
                f'class="tick">v{p.version}</text>'
            )
        previous = p.version
        kind = (p.verdict or "plain").replace(" ", "-")
        title = html.escape(
            f"cycle {p.cycle}: {p.score:g} (v{p.version}){' ' + kind if p.verdict else ''}"
        )
        parts.append(
            f'<circle cx="{x(p.cycle):.1f}" cy="{y(p.score):.1f}" r="4" class="dot {kind}">'
            f"<title>{title}</title></circle>"
        )
    parts.append("</svg>")
    legend = (
        '<p class="legend">what each score said of the change before it: '
        '<span class="dot-key validated"></span> validated '
        '<span class="dot-key not-far-enough"></span> not far enough '
        '<span class="dot-key refuted"></span> refuted '
        '<span class="dot-key untested"></span> untested '
        '<span class="dot-key plain"></span> nothing to judge · dashed line: a new version</p>'
    )
    return Markup("".join(parts) + legend)  # numbers, escaped titles and fixed text only
