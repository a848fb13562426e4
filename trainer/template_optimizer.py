"""Proposing the next prompt template from low-reward rollouts, with the Master Trainer's parts:
the rollouts' feedback is analysed like a reviewer's comment, the template is blamed segment by
segment, and a plan rewrites it — never dropping a placeholder the samples fill in."""

from __future__ import annotations

from collections import Counter

from domain.agent import AgentDefinition, AgentParameters
from domain.lightning import PromptTemplate, ProposeResult
from domain.rollout_report import RolloutReport
from domain.templates import placeholders
from domain.trainer import EvolutionPlan
from trainer import evolution, evolution_planner
from trainer.backends import TrainerBackend


async def propose_from_reports(
    template: PromptTemplate,
    reports: list[RolloutReport],
    target_reward: float,
    backend: TrainerBackend,
) -> ProposeResult:
    """The next template from a round's reports: the rollouts under the target reward, their
    rewards and their logs (the clients' feedback), and one line saying what changed."""
    low = [r for r in reports if (r.final_reward or 0.0) < target_reward]
    feedback = [line for r in low for line in (r.logs or [])]
    rewards = [r.final_reward or 0.0 for r in low]
    proposed, plan = await propose_template(template, rewards, feedback, backend)
    changed = proposed.template != template.template
    summary = (
        "; ".join(f"{c.change_type} {c.after or c.before!r}" for c in plan.changes)
        if changed
        else "; ".join(plan.notes) or "no change proposed"
    )
    return ProposeResult(template=proposed, changed=changed, summary=summary)


async def propose_template(
    template: PromptTemplate,
    rewards: list[float],
    feedback: list[str],
    backend: TrainerBackend,
) -> tuple[PromptTemplate, EvolutionPlan]:
    """A new template (or the same one, with the plan's notes, when nothing applies)."""
    score = round(10 * sum(rewards) / len(rewards), 2) if rewards else 0.0
    # The most common complaints first: they are what most low-reward rollouts share.
    common = [text for text, _ in Counter(feedback).most_common(5)]
    comment = "; ".join(common) or None
    agent = AgentDefinition(
        name="template",
        system_prompt=template.template,
        parameters=AgentParameters(model="offline-template"),
    )
    analysis = await backend.analyze(score, comment, [])
    credit = await backend.assign_credit(agent, analysis, [])
    proposal = await backend.propose(agent, analysis, credit, [])
    plan = evolution_planner.finalize(agent, proposal, [], [], [], {})
    keep = placeholders(template)
    kept = []
    for change in plan.changes:
        if change.component != "systemPrompt":
            plan.notes.append(f"refused {change.component} change: a template has only text")
            continue
        candidate = evolution.apply_changes(agent, [*kept, change]).system_prompt
        lost = keep - placeholders(template.model_copy(update={"template": candidate}))
        if lost:
            plan.notes.append(f"refused {change.change_type} {change.target}: drops {sorted(lost)}")
            continue
        kept.append(change)
    plan.changes = kept
    new_text = evolution.apply_changes(agent, kept).system_prompt if kept else template.template
    return template.model_copy(update={"template": new_text}), plan
