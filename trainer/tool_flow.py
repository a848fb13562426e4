"""The changes typed tool and flow wishes make (``domain/tool_flow.py`` reads them): each
changes the tool description, the step's tools, the step's prompt or the flow edge it names,
never a system-prompt line standing in for it.

- ``tool:NAME``: the tool's description says to use it before answering, and a step offers
  it (the first step with tools, when none does); a tool the constraints allow and the agent
  has not declared is declared;
- ``remove:tool:NAME``: no step offers it any more (an agent without a flow loses the tool);
- ``tool_first:NAME``: the step that offers it is told to call it first, before answering
  (without a flow, its description says so);
- ``describe:tool:NAME[:"…"]``: the description gets the sentence (by default: use it);
- ``step:add:check``: a checking step after the last one, given the last step's answer and
  the findings of every step that uses tools;
- ``step:remove:STEP``: the step leaves the flow (the step after it, or the flow's output,
  then has the step before it); refused while a later step is given its output, unless that
  input is dropped in the same score (``step:input:LATER-=STEP``) or that step goes too;
- ``step:input:STEP+=EARLIER``: STEP's prompt gets EARLIER's output (a step may use only the
  outputs of steps before it); ``-=`` takes it away (a line that only gives it, else its
  placeholder);
- ``step:prompt:STEP``: the instructions the other wishes of the score add go into STEP's
  prompt instead of the system prompt (``:"…"``: that sentence goes there).

A tool the agent's constraints do not allow, a step the flow does not have, an input from a
later step: refused, with the reason said back and recorded with the step's notes. Every
change names the want it carries out in its reason, so ``blame`` finds the feedback behind
each tool, step and edge.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, field

from domain import tool_flow
from domain.agent import AgentDefinition, FlowStep
from domain.execution import preview_of
from domain.tool_flow import ToolFlowWish
from domain.trainer import EvolutionChange, EvolutionPlan, ScoreAnalysis
from runner.tools import default_registry
from trainer.evolution import POSITION, ROLLBACK_REASON, apply_changes

QUOTE_CHARS = 80
# how a typed change's reason opens: ``blame`` reads the want back from it
REASON = "feedback asked for "
_PLANNER_NOTHING = (
    "no actionable wish in the feedback; the agent is kept as is",
    "every wish is already carried by the agent's instructions",
)
_REGISTRY = default_registry()
# the descriptions of the tools the runner implements, as the model is shown them when the
# agent declares none
_BUILT_IN = {name: tool.description for name in _REGISTRY.names() if (tool := _REGISTRY.get(name))}


class Refused(ValueError):
    """A typed wish the step cannot carry out on this agent, with the reason."""


class Unchanged(ValueError):
    """A typed wish the agent already does: nothing to change, said so."""


@dataclass
class _Shaping:
    """The typed wishes' changes under way, on the agent as the plan leaves it so far."""

    agent: AgentDefinition
    changes: list[EvolutionChange] = field(default_factory=list)
    report: list[str] = field(default_factory=list)
    hypotheses: list[str] = field(default_factory=list)
    # the steps the plan takes out: nothing else of theirs changes
    leaving: set[str] = field(default_factory=set)
    # the lineage's first version: a description as it was before the rater's additions
    first: AgentDefinition | None = None

    def make(self, wish: ToolFlowWish, quote: str | None, **fields: str | None) -> None:
        said = f" ({preview_of(quote, QUOTE_CHARS)!r})" if quote else ""
        self.add(
            EvolutionChange(
                **fields,  # type: ignore[arg-type]
                reason=f"{REASON}{wish.want}{said}",
                confidence=1.0,
                aspect="tools" if wish.about_tool else "flow",
                want=wish.family,
            )
        )

    def add(self, change: EvolutionChange) -> None:
        """``change`` made on the agent as the changes before it left it (they are applied in
        this order), or Refused with the reason the agent cannot take it. A change to a step
        the plan takes out is not made (no step on its way out offers a tool any more)."""
        if _rewrites_step(change, self.leaving):
            return
        try:
            self.agent = apply_changes(self.agent, [change])
        except ValueError as exc:
            raise Refused(str(exc).splitlines()[0]) from None
        self.changes.append(change)


def wishes_of(analysis: ScoreAnalysis) -> list[tuple[ToolFlowWish, str | None]]:
    """The reading's typed tool and flow wishes, each with the rater's words (None when it was
    sent as a want without them)."""
    found = []
    for aspect in analysis.aspects:
        wish = tool_flow.of(aspect)
        if wish is not None:
            quote = aspect.quote if aspect.quote and not aspect.quote.startswith("wants ") else None
            found.append((wish, quote))
    return found


def is_typed(family: str) -> bool:
    return family in tool_flow.families()


def typed_want(change: EvolutionChange) -> str | None:
    """The typed want a tool or flow change carried out ("step:input:polish+=research"), read
    back from its reason (``_Shaping.make``), or from a rollback's; None for any other change.
    Each typed change is judged by its own want: a new flow wish says nothing of another."""
    if not change.want or not is_typed(change.want):
        return None
    reason = change.reason.removeprefix(ROLLBACK_REASON)
    if not reason.startswith(REASON):
        return None
    said = reason.removeprefix(REASON)
    # the want, then its quote (" ('…')") or the end: the shortest prefix that is a want
    ends = [m.start() for m in re.finditer(r" \(", said)] + [len(said)]
    for end in ends:
        try:
            wish = tool_flow.parse(said[:end])
        except ValueError:
            continue
        if wish is not None and wish.want == said[:end]:
            return wish.want
    return None


def judged_as(change: EvolutionChange) -> str | None:
    """What the next score judges a change as: its typed want, else its family."""
    return typed_want(change) or change.want


def shape(
    agent: AgentDefinition,
    analysis: ScoreAnalysis,
    proposal: EvolutionPlan,
    report: list[str],
    first: AgentDefinition | None = None,
    rolled_back: list[str] | None = None,
) -> set[str]:
    """The typed wishes of ``analysis`` carried out on ``proposal`` (planned on ``agent``):
    their changes appended, a ``step:prompt:STEP`` aiming the proposal's new instructions at
    that step, the refusals said in ``report``. ``first`` is the lineage's first version (what
    a tool's description was before the rater's additions); a wish whose contrary the step
    ``rolled_back`` (typed wants) is done by that rollback. Returns the families asked for
    (the history check never vetoes them)."""
    undone = [w for r in rolled_back or [] if (w := _parsed(r)) is not None]
    typed = [(w, q) for w, q in wishes_of(analysis) if not any(w.undoes(u) for u in undone)]
    if not typed:
        return set()
    shaping, changes = _shaped(agent, typed, proposal.changes, first=first)
    removed = {
        c.target for c in shaping.changes if c.component == "flow" and c.change_type == "remove"
    }
    if any(_rewrites_step(c, removed) for c in [*changes, *shaping.changes]):
        # a step the plan takes out has nothing left to change: the plan's changes to it go,
        # and the typed changes are made again without any (its removal keeps it as it was)
        kept = [c for c in proposal.changes if not _rewrites_step(c, removed)]
        shaping, changes = _shaped(agent, typed, kept, removed, first)
    proposal.changes = changes + shaping.changes
    report += shaping.report
    if shaping.changes:
        proposal.notes = [n for n in proposal.notes if n not in _PLANNER_NOTHING]
        said = "; ".join(shaping.hypotheses)
        if said and proposal.hypothesis:
            proposal.hypothesis += f" Also, {said}."
        elif said:
            proposal.hypothesis = f"After these changes {said}, and the next score will rise."
    return {wish.family for wish, _ in typed}


def _shaped(
    agent: AgentDefinition,
    typed: list[tuple[ToolFlowWish, str | None]],
    planned: list[EvolutionChange],
    leaving: set[str] | None = None,
    first: AgentDefinition | None = None,
) -> tuple[_Shaping, list[EvolutionChange]]:
    """The typed wishes carried out after ``planned`` (the proposal's own changes): their
    changes and report, and the proposal's changes left (those a ``step:prompt:STEP`` aims at
    the step are its changes now). Nothing changes in a step ``leaving`` the flow but its
    removal."""
    work = agent
    for change in planned:  # the typed changes chain after the proposal's own
        try:
            work = apply_changes(work, [change])
        except ValueError:
            continue
    shaping = _Shaping(work, leaving=leaving or set(), first=first)
    changes = list(planned)
    for wish, quote in sorted(typed, key=lambda t: _order(work, t[0])):
        try:
            edits = wish.kind in ("step_input", "drop_input", "step_prompt", "unprompt")
            if edits and wish.target in shaping.leaving:
                raise Unchanged(f"the {wish.target} step leaves the flow in this plan")
            if wish.kind == "step_prompt" and wish.text is None:
                changes = _aimed(shaping, wish, quote, changes)
            else:
                _carry_out(shaping, wish, quote)
        except Refused as why:
            shaping.report.append(f"refused {wish.want}: {why}")
        except Unchanged as why:
            shaping.report.append(f"{wish.want}: nothing to change: {why}")
    return shaping, changes


def _rewrites_step(change: EvolutionChange, steps: set[str]) -> bool:
    return change.component == "flow" and change.change_type == "modify" and change.target in steps


def _parsed(want: str) -> ToolFlowWish | None:
    try:
        return tool_flow.parse(want)
    except ValueError:
        return None


def _order(agent: AgentDefinition, wish: ToolFlowWish) -> tuple[int, int]:
    """Where a wish's change goes among the score's: a step is added before another wish names
    it; inputs are given and dropped before a step is removed (a step is removed only once
    no later step is given its output), the later steps first (a step removed with the one
    that uses its output); the prompt is aimed at last, at the step as the others leave it."""
    rank = {"add_step": 0, "step_input": 1, "drop_input": 1, "remove_step": 2, "step_prompt": 3}
    names = [st.name.lower() for st in agent.flow]
    later_first = -names.index(wish.target) if wish.target in names else 0
    return rank.get(wish.kind, 1), later_first if wish.kind == "remove_step" else 0


def _carry_out(s: _Shaping, wish: ToolFlowWish, quote: str | None) -> None:
    if wish.kind in ("use", "first"):
        made = len(s.changes)
        tool = _tool(s, wish, declare=True)
        _offer(s, wish, quote, tool)
        try:
            if wish.kind == "use":
                _describe(s, wish, quote, tool, tool_flow.sentence("use"))
            else:
                _first(s, wish, quote, tool)
        except Unchanged:
            if len(s.changes) == made:  # declared or offered now: that was the change
                raise
        s.hypotheses.append(wish.hypothesis(tool=tool))
    elif wish.kind == "drop":
        _drop(s, wish, quote, _tool(s, wish))
    elif wish.kind == "describe":
        tool = _tool(s, wish)
        _describe(s, wish, quote, tool, wish.text or tool_flow.sentence("use"))
        s.hypotheses.append(wish.hypothesis(tool=tool))
    elif wish.kind == "undescribe":
        tool = _tool(s, wish)
        _undescribe(s, wish, quote, tool)
        s.hypotheses.append(wish.hypothesis(tool=tool))
    elif wish.kind == "unprompt":
        step = _step(s.agent, wish.target)
        _unprompt(s, wish, quote, step, wish.text or "")
        s.hypotheses.append(wish.hypothesis(step=step.name))
    elif wish.kind == "add_step":
        _add_step(s, wish, quote)
    elif wish.kind == "remove_step":
        _remove_step(s, wish, quote)
    elif wish.kind == "step_input":
        _input(s, wish, quote)
    elif wish.kind == "drop_input":
        _drop_input(s, wish, quote)
    else:
        step = _step(s.agent, wish.target)
        _prompt(s, wish, quote, step, wish.text or "")
        s.hypotheses.append(wish.hypothesis(step=step.name))


# ---- tools ------------------------------------------------------------------------------------


def _tool(s: _Shaping, wish: ToolFlowWish, declare: bool = False) -> str:
    """The agent's tool the wish names (its own name, any case; or a word of it: "search" is
    search_documents). One the constraints do not allow is refused; one they allow that the
    agent has not declared is declared when ``declare`` (and refused otherwise)."""
    agent, name = s.agent, wish.target
    declared = [t.name for t in agent.tools]
    found = next((t for t in declared if t.lower() == name), None) or _word_of(name, declared)
    allowed = agent.constraints.allowed_tools
    if found is not None and (allowed is None or found in allowed):
        return found
    if allowed is not None and not any(a.lower() == name for a in allowed):
        permitted = ", ".join(allowed) or "none"
        raise Refused(
            f"the agent may not use {name!r}: its constraints allow only these tools: "
            f"{permitted}; only the agent's owner changes its constraints"
        )
    known = next((t for t in _BUILT_IN if t.lower() == name), None)
    if not declare or known is None:
        have = ", ".join(declared) or "none"
        raise Refused(f"the agent has no tool {name!r} (its tools: {have})")
    s.make(
        wish,
        None,
        component="tools",
        change_type="add",
        target=known,
        after=json.dumps({"name": known}),
    )
    return known


def _word_of(name: str, tools: list[str]) -> str | None:
    """The one tool ``name`` is a word or the start of ("search" → search_documents)."""
    matches = [t for t in tools if name in t.lower().split("_") or t.lower().startswith(name)]
    return matches[0] if len(matches) == 1 else None


def _offers(step: FlowStep, tool: str) -> bool:
    return step.tools is None or tool in step.tools


def _offer(s: _Shaping, wish: ToolFlowWish, quote: str | None, tool: str) -> None:
    """A step offers the tool: the first with tools, else the first (a flow whose steps
    offer it already, and an agent without a flow, which offers every tool, stay)."""
    flow = s.agent.flow
    if not flow or any(_offers(step, tool) for step in flow):
        return
    step = next((st for st in flow if st.tools), flow[0])
    _allowance(s, wish, quote, step, [*(step.tools or []), tool])


def _allowance(
    s: _Shaping, wish: ToolFlowWish, quote: str | None, step: FlowStep, tools: list[str]
) -> None:
    s.make(
        wish,
        quote,
        component="flow",
        change_type="modify",
        target=step.name,
        before=json.dumps({"tools": step.tools}),
        after=json.dumps({"tools": tools}),
    )


def _drop(s: _Shaping, wish: ToolFlowWish, quote: str | None, tool: str) -> None:
    agent = s.agent
    s.hypotheses.append(wish.hypothesis(tool=tool))
    if not agent.flow:
        current = next(t for t in agent.tools if t.name == tool)
        s.make(
            wish,
            quote,
            component="tools",
            change_type="remove",
            target=tool,
            before=json.dumps(current.model_dump(mode="json", by_alias=True)),
        )
        return
    offering = [step for step in agent.flow if _offers(step, tool)]
    if not offering:
        raise Unchanged(f"no step of the flow offers {tool}")
    every = [t.name for t in agent.tools]
    for step in offering:
        _allowance(s, wish, quote, step, [t for t in step.tools or every if t != tool])


def _describe(s: _Shaping, wish: ToolFlowWish, quote: str | None, tool: str, text: str) -> None:
    """The tool's description with ``text`` (a declared description empty so far starts from
    the built-in one the model was shown)."""
    current = next(t for t in s.agent.tools if t.name == tool).description
    shown = current or _BUILT_IN.get(tool, "")
    if _holds(shown, text):
        raise Unchanged(f"the description of {tool} already says so")
    _redescribe(s, wish, quote, tool, current, f"{shown.rstrip()} {_sentence(text)}".strip())


def _undescribe(s: _Shaping, wish: ToolFlowWish, quote: str | None, tool: str) -> None:
    """The tool's description without the sentence named, or, none named, as it was before
    the rater's additions: as the lineage's first version has it (a tool declared since had
    none), else the built-in one the model was shown, when that is what was added to."""
    current = next(t for t in s.agent.tools if t.name == tool).description
    built_in = _BUILT_IN.get(tool, "")
    if wish.text:
        sentences = [x for x in _sentences(current or built_in) if not _alike(x, wish.text)]
        if len(sentences) == len(_sentences(current or built_in)):
            raise Unchanged(f"the description of {tool} does not say {wish.text!r}")
        restored = " ".join(sentences)
        restored = "" if restored == built_in and not _declared_first(s, tool) else restored
    elif s.first is not None:
        restored = _declared_first(s, tool)
    elif not current or current.startswith(built_in):
        restored = ""  # what the rater's sentences were added to: the built-in description
    else:
        raise Refused(
            f"the lineage's first version of {tool}'s description is not known here; name "
            f'the sentence to take out: remove:describe:tool:{tool}:"…"'
        )
    if restored == current:
        raise Unchanged(f"the description of {tool} is as it was: nothing was added to it")
    _redescribe(s, wish, quote, tool, current, restored)


def _redescribe(
    s: _Shaping, wish: ToolFlowWish, quote: str | None, tool: str, now: str | None, after: str
) -> None:
    """The change that gives ``tool`` the description ``after`` (it has ``now``)."""
    before, after_ = json.dumps({"description": now}), json.dumps({"description": after})
    s.make(
        wish,
        quote,
        component="tools",
        change_type="modify",
        target=tool,
        before=before,
        after=after_,
    )


def _declared_first(s: _Shaping, tool: str) -> str:
    """The description the lineage's first version declares for ``tool`` ("" for none, or
    for a tool declared since)."""
    first = s.first.tools if s.first is not None else []
    return next((t.description for t in first if t.name == tool), "")


def _unprompt(
    s: _Shaping, wish: ToolFlowWish, quote: str | None, step: FlowStep, text: str
) -> None:
    """The sentence ``text`` taken out of the step's prompt (its case, spacing and closing
    stop aside); a sentence that gives the step its material is an input, not taken out so."""
    lines = [_sentences(line) for line in step.prompt.split("\n")]
    hits = [(i, j) for i, line in enumerate(lines) for j, x in enumerate(line) if _alike(x, text)]
    if not hits:
        raise Refused(
            f"the {step.name} step's prompt does not say {text!r} (it says: "
            f"{preview_of(step.prompt, QUOTE_CHARS)!r})"
        )
    i, j = hits[0]
    if given := sorted(_placeholders(lines[i][j])):
        drops = " or ".join(f"step:input:{step.name}-={g}" for g in given)
        raise Refused(
            f"that sentence gives the {step.name} step its material: {drops} takes it away"
        )
    del lines[i][j]
    prompt = "\n".join(" ".join(line) for line in lines if line)
    if not prompt.strip():
        raise Refused(f"the {step.name} step's prompt would be empty without it")
    _set_prompt(s, wish, quote, step, prompt)


def _sentences(text: str) -> list[str]:
    return [x for x in re.split(r"(?<=[.!?])[ \t]+", text.strip()) if x]


def _alike(sentence: str, text: str) -> bool:
    """Whether ``sentence`` of a prompt is ``text`` as the rater wrote it (its braces doubled
    in the prompt), case, spacing and the closing stop aside."""

    def norm(said: str) -> str:
        return " ".join(said.split()).rstrip(".!?").lower()

    return norm(sentence) == norm(_braced(text))


def _first(s: _Shaping, wish: ToolFlowWish, quote: str | None, tool: str) -> None:
    """The first step that offers the tool is told to call it first; without a flow the
    tool's description says so."""
    if not s.agent.flow:
        _describe(s, wish, quote, tool, tool_flow.sentence("first_in_description"))
        return
    step = next(st for st in s.agent.flow if _offers(st, tool))
    said = tool_flow.sentence("first_in_step", tool=tool)
    if _holds(step.prompt, said):
        raise Unchanged(f"the {step.name} step is told to call {tool} first already")
    # another tool said to come first gives way: one tool is first
    others = [tool_flow.sentence("first_in_step", tool=t.name) for t in s.agent.tools]
    prompt = step.prompt
    for other in others:
        prompt = prompt.replace(f"{other} ", "").replace(other, "")
    _set_prompt(s, wish, quote, step, f"{said} {prompt.strip()}")


# ---- the flow ---------------------------------------------------------------------------------


def _step(agent: AgentDefinition, name: str) -> FlowStep:
    if not agent.flow:
        raise Refused("the agent has no flow: it answers in one step")
    found = next((st for st in agent.flow if st.name.lower() == name), None)
    if found is None:
        have = ", ".join(st.name for st in agent.flow)
        hint = "; step:add:check adds one" if name in tool_flow.addable_steps() else ""
        raise Refused(f"the flow has no step {name!r} (its steps: {have}){hint}")
    return found


def _add_step(s: _Shaping, wish: ToolFlowWish, quote: str | None) -> None:
    """A step of the vocabulary's (``check``) after the last one, given its answer and the
    findings of every step before that uses tools."""
    flow = s.agent.flow
    if not flow:
        raise Refused(
            "the agent has no flow to add a step to; 'check facts first' (check_step) asks "
            "for a checking pass in its prompt"
        )
    if any(st.name.lower() == wish.target for st in flow):
        raise Unchanged(f"the flow has a {wish.target} step already")
    step, last = added_step(s.agent, wish.target), flow[-1].name
    s.make(
        wish,
        quote,
        component="flow",
        change_type="add",
        target=step.name,
        after=json.dumps(step.model_dump(mode="json", by_alias=True, exclude_none=True)),
    )
    s.hypotheses.append(wish.hypothesis(step=step.name, previous=last))


def added_step(agent: AgentDefinition, name: str) -> FlowStep:
    """The vocabulary's step ``name`` (``check``) for after the flow's last step: given that
    step's answer and the findings of every step before it that uses tools, so that "against
    the findings" has findings to check against."""
    template = tool_flow.step_template(name)
    finders = [st.name for st in agent.flow[:-1] if _uses_tools(agent, st)]
    lines = [template["prompt"].format(previous=agent.flow[-1].name)]
    lines += [template["findings"].format(source=finder) for finder in finders]
    return FlowStep(name=name, prompt="\n".join(lines), tools=[])


def _remove_step(s: _Shaping, wish: ToolFlowWish, quote: str | None) -> None:
    """The step out of the flow, when no later step is given its output (by its name, or as
    ``{previous}`` right after it): the flow must still run, and a later step's material is
    not swapped behind the rater's back. Its place is kept with the change, so that an undo
    or a revert puts it back where it was."""
    step = _step(s.agent, wish.target)
    names = [st.name for st in s.agent.flow]
    if len(names) == 1:
        raise Refused(f"{step.name} is the flow's only step: without it nothing answers")
    users = users_of(s.agent, step.name)
    if users:
        uses = " and ".join(f"the {user} step is given its output ({{{f}}})" for user, f in users)
        drops = " and ".join(f"step:input:{user}-={step.name}" for user, _ in users)
        also = " and ".join(f"step:remove:{user}" for user, _ in users)
        raise Refused(
            f"{uses}: a step whose output a later step uses is removed only with that input "
            f"dropped too; send {drops} with it, or {also} too"
        )
    at = names.index(step.name)
    dump = step.model_dump(mode="json", by_alias=True, exclude_none=True)
    s.make(
        wish,
        quote,
        component="flow",
        change_type="remove",
        target=step.name,
        before=json.dumps({**dump, POSITION: at}),
    )
    s.hypotheses.append(wish.hypothesis(step=step.name))


def users_of(agent: AgentDefinition, name: str) -> list[tuple[str, str]]:
    """(later step, the placeholder it is given ``name``'s output by) for every step after
    ``name`` whose prompt names it, or names ``{previous}`` right after it."""
    names = [st.name for st in agent.flow]
    at = names.index(name)
    found = []
    for offset, later in enumerate(agent.flow[at + 1 :]):
        fields = _placeholders(later.prompt)
        if name in fields:
            found.append((later.name, name))
        elif offset == 0 and "previous" in fields:
            found.append((later.name, "previous"))
    return found


def _drop_input(s: _Shaping, wish: ToolFlowWish, quote: str | None) -> None:
    """STEP's prompt no longer given an earlier step's output (or the question): a line after
    its instruction that only gives it goes whole ("The output of the research step:
    {research}"), any other mention of it loses its placeholder."""
    step = _step(s.agent, wish.target)
    names = [st.name for st in s.agent.flow]
    at = names.index(step.name)
    source = wish.source or ""
    if source == "input":
        fields = {"input"} | ({"previous"} if at == 0 else set())
        what = "the question"
    else:
        earlier = next((n for n in names if n.lower() == source), None)
        if earlier is None:
            raise Refused(f"the flow has no step {source!r} (its steps: {', '.join(names)})")
        just_before = at > 0 and names[at - 1] == earlier
        fields = {earlier} | ({"previous"} if just_before else set())
        what = f"{earlier}'s output"
    held = fields & _placeholders(step.prompt)
    if not held:
        raise Unchanged(f"the {step.name} step is not given {what}")
    prompt = step.prompt
    for placeholder in held:
        prompt = _without(prompt, placeholder)
    if not prompt.strip():
        raise Refused(f"the {step.name} step's prompt would be empty without {what}")
    _set_prompt(s, wish, quote, step, prompt)
    s.hypotheses.append(wish.hypothesis(step=step.name, source=source))


def _without(prompt: str, field: str) -> str:
    """``prompt`` without the placeholder ``field``: a line after the first that only gives it
    ("Label: {field}") goes whole, else the placeholder alone, with its quotes and the space
    before it."""
    lines = prompt.split("\n")
    given = re.compile(rf"^[^{{}}]*:\s*\{{{re.escape(field)}\}}\s*$")
    kept = lines[:1] + [line for line in lines[1:] if not given.match(line)]
    placeholder = rf"[ \t]*(['\"]?)\{{{re.escape(field)}\}}\1"
    return re.sub(placeholder, "", "\n".join(kept)).strip()


def _uses_tools(agent: AgentDefinition, step: FlowStep) -> bool:
    return bool(agent.tools) and (step.tools is None or bool(step.tools))


def _input(s: _Shaping, wish: ToolFlowWish, quote: str | None) -> None:
    """STEP's prompt gets an earlier step's output (or the question): one line naming it."""
    step = _step(s.agent, wish.target)
    names = [st.name for st in s.agent.flow]
    source = wish.source or ""
    if source == "input":
        line = tool_flow.sentence("question")
    else:
        earlier = next((n for n in names if n.lower() == source), None)
        if earlier is None:
            raise Refused(f"the flow has no step {source!r} (its steps: {', '.join(names)})")
        if names.index(earlier) > names.index(step.name):
            raise Refused(
                f"a step may use only the outputs of steps before it: {earlier} runs after "
                f"{step.name}"
            )
        source = earlier
        line = tool_flow.sentence("input", source=earlier)
    if source in _placeholders(step.prompt):
        raise Unchanged(f"the {step.name} step is given {source}'s output already")
    _set_prompt(s, wish, quote, step, f"{step.prompt.rstrip()}\n{line}")
    s.hypotheses.append(wish.hypothesis(step=step.name, source=source))


def _placeholders(prompt: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(prompt) if f is not None}


def _prompt(s: _Shaping, wish: ToolFlowWish, quote: str | None, step: FlowStep, text: str) -> None:
    """``text`` in the step's prompt, after its own instruction (``with_sentence``)."""
    if _holds(step.prompt, text):
        raise Unchanged(f"the {step.name} step's prompt already says so")
    _set_prompt(s, wish, quote, step, with_sentence(step.prompt, _sentence(_braced(text))))


# a line that only hands the step material: "The output of the research step: {research}"
_GIVEN_LINE = re.compile(r"^[^{}]*:\s*\{[^{}]+\}\s*$")


def with_sentence(prompt: str, sentence: str) -> str:
    """``prompt`` with ``sentence`` on a line of its own after the step's instruction (its
    first line) and the sentences added before it, ahead of the lines that hand it material.
    An instruction is never split from what it introduces: "…needed for: {input}" stays one
    line, and one that ends with a colon ("…without losing any number:") keeps the material
    lines under it, the sentence after them."""
    lines = prompt.rstrip().split("\n")
    at = 1
    if lines[0].rstrip().endswith(":"):
        while at < len(lines) and _GIVEN_LINE.match(lines[at]):
            at += 1
    while at < len(lines) and not _GIVEN_LINE.match(lines[at]):
        at += 1
    return "\n".join([*lines[:at], sentence, *lines[at:]])


def _set_prompt(
    s: _Shaping, wish: ToolFlowWish, quote: str | None, step: FlowStep, prompt: str
) -> None:
    s.make(
        wish,
        quote,
        component="flow",
        change_type="modify",
        target=step.name,
        before=json.dumps({"prompt": step.prompt}),
        after=json.dumps({"prompt": prompt}),
    )


def _aimed(
    s: _Shaping, wish: ToolFlowWish, quote: str | None, changes: list[EvolutionChange]
) -> list[EvolutionChange]:
    """``changes`` without the instructions they add to the system prompt: each goes into the
    named step's prompt instead, a change of the step's (made after the typed changes so far,
    like them)."""
    step = _step(s.agent, wish.target)
    aimed = [
        c
        for c in changes
        if c.component == "systemPrompt" and c.change_type == "add" and c.target == "instruction"
    ]
    if not aimed:
        raise Refused("the feedback asks for no instruction to aim at the step")
    for change in aimed:
        step = _step(s.agent, wish.target)
        text = _sentence(_braced(change.after or ""))
        s.add(
            change.model_copy(
                update={
                    "component": "flow",
                    "change_type": "modify",
                    "target": step.name,
                    "before": json.dumps({"prompt": step.prompt}),
                    "after": json.dumps({"prompt": with_sentence(step.prompt, text)}),
                    "reason": f"{change.reason}; in the {step.name} step's prompt ({wish.want})",
                }
            )
        )
    s.hypotheses.append(wish.hypothesis(step=step.name))
    return [c for c in changes if c not in aimed]


def _braced(text: str) -> str:
    """A sentence safe in a prompt template: its braces doubled (a template's placeholders are
    the flow's edges; a sentence adds none)."""
    return text.replace("{", "{{").replace("}", "}}")


def _sentence(text: str) -> str:
    """A sentence as a prompt holds one: a capital first, a full stop last (a rater's "give
    the total in euros" is written "Give the total in euros.")."""
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text[-1:] in ".!?" else f"{text}."


def _holds(text: str, sentence: str) -> bool:
    return sentence.strip().rstrip(".").lower() in text.lower()
