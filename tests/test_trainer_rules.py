"""The rules-based Master Trainer on the seed's example, and its mechanical safeguards."""

from __future__ import annotations

from domain.agent import AgentConstraints, AgentDefinition, AgentParameters, AgentTool
from domain.trainer import ExpectedImpact
from trainer import credit_assignment, evolution, evolution_planner, outcome, reward_analyzer

SEED_PROMPT = (
    "You are an expert analyst. Provide comprehensive, detailed analysis. "
    "Structure your response professionally."
)


def agent(prompt: str = SEED_PROMPT, max_tokens: int = 2048, **constraints) -> AgentDefinition:
    return AgentDefinition(
        name="Analyst",
        system_prompt=prompt,
        tools=[AgentTool(name="calculator", description="adds")],
        parameters=AgentParameters(model="offline-1", max_tokens=max_tokens, temperature=0.7),
        constraints=AgentConstraints(**constraints),
    )


def evolve(a: AgentDefinition, score: float, comment: str, sticky=(), oneshot=()):
    analysis = reward_analyzer.analyze(score, comment, [])
    credit = credit_assignment.assign(a, analysis, ["span-1"])
    plan = evolution_planner.plan(a, analysis, credit, list(sticky), list(oneshot))
    return analysis, credit, plan, evolution.apply_changes(a, plan.changes)


def test_seed_example():
    analysis, credit, plan, new = evolve(agent(), 3, "Way too long, wanted quick bullets")
    assert analysis.sentiment == "negative"
    assert {(a.aspect, a.sentiment) for a in analysis.aspects} == {
        ("length", "negative"),
        ("format", "negative"),
    }
    blame = {c.segment: c.blame for c in credit.prompt}
    assert blame["Provide comprehensive, detailed analysis."] == "high"
    assert blame["Structure your response professionally."] == "medium"
    assert blame["parameters.maxTokens=2048"] == "high"
    assert blame["You are an expert analyst."] == "none"
    assert new.system_prompt == (
        "You are an expert analyst. Provide brief, scannable analysis. "
        "Use bullet points, not paragraphs."
    )
    assert new.parameters.max_tokens == 300
    assert {e.aspect for e in plan.expected_impact} == {"length", "format"}
    assert "shorter" in plan.hypothesis and "bullet" in plan.hypothesis


def test_untouched_components_stay_byte_identical():
    old = agent()
    _, _, _, new = evolve(old, 3, "too long")
    assert new.tools == old.tools and new.flow == old.flow and new.constraints == old.constraints
    assert new.hashes().tools_hash == old.hashes().tools_hash
    assert new.hashes().flow_hash == old.hashes().flow_hash
    assert new.parameters.temperature == old.parameters.temperature
    assert new.parameters.model == old.parameters.model


def test_constraints_are_enforced_mechanically():
    # asking for longer answers may not raise maxTokens past the immutable limit, and an
    # instruction matching a forbidden pattern is refused, never applied
    base = AgentDefinition(
        name="x",
        system_prompt="Be brief.",
        parameters=AgentParameters(model="offline-1", max_tokens=400),
        constraints=AgentConstraints(max_tokens=500, forbidden_patterns=[r"bullet"]),
    )
    _, _, plan, new = evolve(base, 2, "too short, use bullets")
    assert new.parameters.max_tokens == 500
    assert "bullet" not in new.system_prompt.lower()
    assert any("clamped" in n for n in plan.notes)
    assert any("forbidden pattern" in n for n in plan.notes)


def test_praise_changes_nothing_and_directives_are_added():
    _, _, plan, new = evolve(agent(), 9, "Great, exactly right")
    assert plan.changes == [] and new == agent()
    _, _, plan, new = evolve(agent(), 9, "Great", sticky=["Cite a source."])
    assert new.system_prompt.endswith("Cite a source.")
    assert plan.changes[0].target == "sticky directive"


def test_outcome_judges_the_hypothesis():
    expected = [ExpectedImpact(aspect="length", direction="improve")]
    good = outcome.judge(3, expected, reward_analyzer.analyze(8, "Much better!", [3]))
    assert (good.next_score, good.score_delta, good.hypothesis_validated) == (8, 5, True)
    still = outcome.judge(3, expected, reward_analyzer.analyze(5, "still too long", [3]))
    assert still.hypothesis_validated is False and "length" in still.reason
    worse = outcome.judge(6, expected, reward_analyzer.analyze(4, None, [6]))
    assert worse.hypothesis_validated is False


def test_trend_and_trajectory_mode():
    assert reward_analyzer.analyze(7, None, [3]).trend == "improving"
    assert reward_analyzer.analyze(3, None, [7]).trend == "declining"
    credit = credit_assignment.assign(
        agent(), reward_analyzer.analyze(2, "wrong", []), ["s1", "s2", "s3"]
    )
    assert credit.mode == "trajectory"
    assert [round(c.contribution, 2) for c in credit.trajectory] == [-0.2, -0.4, -0.6]


def test_each_aspect_of_a_hypothesis_is_judged_on_its_own():
    _, _, plan, _ = evolve(agent(), 4, "Rambling, and the tone is stiff.")
    assert {(c.aspect, c.want) for c in plan.changes} >= {("length", "shorter"), ("tone", "casual")}
    # brevity overshot (the reviewer now wants more), tone is not mentioned again
    overshot = outcome.judge(
        4,
        plan.expected_impact,
        reward_analyzer.analyze(3, "Now it is far too thin.", [4]),
        plan.changes,
    )
    verdicts = {a.aspect: a.verdict for a in overshot.aspects}
    assert verdicts["length"] == "refuted" and verdicts["tone"] != "refuted"
    assert overshot.refuted_aspects == ["length"]
    assert overshot.reason.startswith("refuted by length") and not overshot.hypothesis_validated
    # both fixed: every targeted aspect validated
    fixed = outcome.judge(
        4, plan.expected_impact, reward_analyzer.analyze(8, "Much better.", [4]), plan.changes
    )
    assert {a.verdict for a in fixed.aspects} == {"validated"} and fixed.hypothesis_validated
    # an aspect the reviewer liked, broken by the change, refutes it
    kept = [ExpectedImpact(aspect="format", direction="maintain")]
    broken = outcome.judge(
        7, kept, reward_analyzer.analyze(4, "The formatting is a mess now.", [7]), []
    )
    assert broken.refuted_aspects == ["format"]
