"""Every version in a store checked against the plan its rater confirmed.

    .venv/bin/python -m bench.version_contract [STORE_URL] [--lineage ID]

A score sent from the review page or ``training-camp score`` carries the keys of the changes
its rater saw in the preview and confirmed (``plan.confirmed``), and the step may make those
changes and no other. For each version a cycle step made (``agent.evolved``), this reads from
the store the definition the step planned on (the scored output's version), the new one, the
changes recorded with it and the plan confirmed with its score, and checks:

- **the difference**: the new definition is the old one with the recorded changes applied,
  applied here by a reading of each change of its own (the prompt's sentences in order, the
  parameters, tools, flow and constraints), not by the trainer's code;
- **the plan**: the recorded changes are exactly the confirmed ones, key for key (a key is a
  digest of what a change does, ``domain.trainer.change_key``): none made that was not
  confirmed, none confirmed that was not made — and a score whose confirmed changes made no
  version is a violation too.

A version made without a confirmed plan (a raw ``score`` signal, a correction of a reading, a
Claude trainer's plan) is counted apart; ``--strict`` counts it as a violation. Prints the
counts and every violation; exits 1 when there is one, 2 when there is no store at the URL.
STORE_URL defaults to the demo's store (``make run``'s ``.training-camp/training-camp.db``, or
``TRAINING_CAMP_DATABASE_URL``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from domain.agent import AgentDefinition, AgentRef
from domain.events import AgentEvolved, ArtifactScored, EvolutionKept, PlanConfirmed
from domain.prompt_segments import segments
from domain.reading_preview import change_words
from domain.settings import Settings
from domain.trainer import EvolutionChange, change_key
from store import Store

PARAMETERS = {"maxTokens": "max_tokens", "temperature": "temperature", "topP": "top_p"}


@dataclass
class Report:
    """What the check found: versions checked, those with a confirmed plan, those without
    (with why), and every violation, one line each."""

    versions: int = 0
    confirmed: int = 0
    unconfirmed: list[str] = field(default_factory=list)
    kept: int = 0  # scores with a confirmed plan that made no version
    violations: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [
            f"versions checked: {self.versions} ({self.confirmed} with a confirmed plan, "
            f"{len(self.unconfirmed)} without); scores with a confirmed plan that kept their "
            f"version: {self.kept}",
            *(f"  without a confirmed plan: {u}" for u in self.unconfirmed),
            f"violations: {len(self.violations)}",
            *(f"  {v}" for v in self.violations),
        ]


def check(store: Store, lineage_id: str | None = None, strict: bool = False) -> Report:
    """Every version of the store (or of one lineage) against its confirmed plan."""
    report = Report()
    q = store.queries
    types = [
        "artifact.scored",
        "plan.confirmed",
        "agent.evolved",
        "evolution.kept",
    ]
    scored: dict[str, ArtifactScored] = {}
    plans: dict[str, PlanConfirmed] = {}
    made: dict[str, AgentEvolved] = {}  # by the evaluation that set the step off
    kept: set[str] = set()
    evolved: list[AgentEvolved] = []
    for event in q.events(lineage_id, types):
        data = event.data
        if isinstance(data, ArtifactScored):
            scored[data.evaluation_id] = data
        elif isinstance(data, PlanConfirmed):
            plans[data.evaluation_id] = data
        elif isinstance(data, AgentEvolved):
            evolved.append(data)
            if data.kind != "correction":
                made[data.trigger.evaluation_id] = data
        elif isinstance(data, EvolutionKept):
            kept.add(data.trigger.evaluation_id)
    for version in evolved:
        report.versions += 1
        name = f"{version.agent_id} v{version.from_version}→v{version.to_version}"
        score = scored.get(version.trigger.evaluation_id)
        base = score.agent_version if score and score.agent_version is not None else None
        if base is None:
            report.violations.append(f"{name}: the score that made it is not in the store")
            continue
        before = q.agent_definition(AgentRef(agent_id=version.agent_id, version=base))
        after = q.agent_definition(AgentRef(agent_id=version.agent_id, version=version.to_version))
        changes = [EvolutionChange.model_validate(c.model_dump()) for c in version.changes]
        report.violations += [f"{name}: {d}" for d in differences(before, after, changes)]
        plan = plans.get(version.trigger.evaluation_id)
        if version.kind == "correction" or plan is None:
            why = "a correction of a reading" if version.kind == "correction" else "none sent"
            report.unconfirmed.append(f"{name} ({why})")
            if strict:
                report.violations.append(f"{name}: made without a confirmed plan ({why})")
            continue
        report.confirmed += 1
        report.violations += [f"{name}: {d}" for d in against_plan(changes, plan.changes)]
    for evaluation_id, plan in plans.items():
        if evaluation_id in made:
            continue
        report.kept += 1
        if plan.changes:
            where = f"cycle {plan.cycle} (v{plan.agent_version}, {evaluation_id})"
            state = "kept its version" if evaluation_id in kept else "made no version"
            report.violations.append(
                f"{where}: {len(plan.changes)} confirmed change(s) not made: the step {state}"
            )
    return report


def against_plan(changes: list[EvolutionChange], confirmed: list[str]) -> list[str]:
    """The recorded changes against the confirmed keys: one made that was not confirmed, one
    confirmed that was not made."""
    keys = {change_key(c): c for c in changes}
    found = [
        f"made, not confirmed: {change_words(c)}" for k, c in keys.items() if k not in confirmed
    ]
    found += [f"confirmed, not made: change {k}" for k in confirmed if k not in keys]
    return found


def differences(
    before: AgentDefinition, after: AgentDefinition, changes: list[EvolutionChange]
) -> list[str]:
    """How ``after`` differs from ``before`` with ``changes`` applied (empty: not at all). The
    changes are applied by this module's own reading of them."""
    expected, problems = _applied(before.model_dump(mode="json"), changes)
    if problems:
        return problems
    got = after.model_dump(mode="json")
    found: list[str] = []
    want_prompt, got_prompt = segments(expected["system_prompt"]), segments(got["system_prompt"])
    if want_prompt != got_prompt:
        extra = [s for s in got_prompt if s not in want_prompt]
        missing = [s for s in want_prompt if s not in got_prompt]
        found.append(
            "the prompt differs from its parent's with the changes applied"
            + (f"; not in any change: {extra}" if extra else "")
            + (f"; changed but not there: {missing}" if missing else "")
            + ("; in another order" if not (extra or missing) else "")
        )
    for part in ("name", "description", "parameters", "tools", "flow", "constraints"):
        if _normal(expected.get(part)) != _normal(got.get(part)):
            found.append(
                f"{part}: {json.dumps(got.get(part))[:200]}, expected "
                f"{json.dumps(expected.get(part))[:200]}"
            )
    return found


def _applied(agent: dict[str, Any], changes: list[EvolutionChange]) -> tuple[dict, list[str]]:
    """``agent`` (a definition as JSON) with ``changes`` applied, and what could not be."""
    problems: list[str] = []
    for change in changes:
        said = change_words(change)
        if change.component == "systemPrompt":
            prompt = agent["system_prompt"]
            if change.change_type == "add":
                joiner = "\n" if "\n" in prompt.strip() else " "
                agent["system_prompt"] = prompt.rstrip() + joiner + (change.after or "")
            elif not change.before or change.before not in prompt:
                problems.append(f"{said}: its parent's prompt has no {change.before!r}")
            else:
                new = change.after if change.change_type == "modify" else ""
                agent["system_prompt"] = prompt.replace(change.before, new or "", 1)
        elif change.component == "parameters":
            name = PARAMETERS.get(change.target)
            if name is None or change.after is None:
                problems.append(f"{said}: no such parameter")
                continue
            agent["parameters"][name] = float(change.after)
        else:
            items = agent["tools" if change.component == "tools" else "flow"]
            names = [i["name"] for i in items]
            if change.change_type == "add":
                items.append(json.loads(change.after or "{}"))
            elif change.target not in names:
                problems.append(f"{said}: its parent has no {change.target!r}")
            elif change.change_type == "remove":
                del items[names.index(change.target)]
            else:
                at = names.index(change.target)
                text = (change.after or "").lstrip()
                update = json.loads(text) if text.startswith("{") else {"prompt": change.after}
                items[at] = {**items[at], **update}
    return agent, problems


def _normal(value: Any) -> Any:
    """A JSON value compared by content: numbers as floats, objects as sorted JSON (a tool's
    keys may be written camelCase by a change and snake_case by a dump)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dict):
        return {_snake(k): _normal(v) for k, v in value.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "store",
        nargs="?",
        default=None,
        help="the store's URL (default: the demo's, or TRAINING_CAMP_DATABASE_URL)",
    )
    parser.add_argument("--lineage", help="check one lineage only")
    parser.add_argument(
        "--strict", action="store_true", help="a version without a confirmed plan is a violation"
    )
    args = parser.parse_args(argv)
    url = args.store or Settings.from_env().database_url
    path = make_url(url).database if url.startswith("sqlite") else None
    if path and path != ":memory:" and not Path(path).exists():
        print(f"no store at {url} (start the demo with `make run`, or give the store's URL)")
        return 2
    store = Store.open(url)
    try:
        report = check(store, args.lineage, args.strict)
    finally:
        store.close()
    print("\n".join(report.lines()))
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
