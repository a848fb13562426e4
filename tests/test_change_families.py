"""The change-family registry: every part of the trainer reads one record per family, and the
records agree with each other and with what reads them back."""

from __future__ import annotations

import pytest

from domain.agent import AgentDefinition, AgentParameters
from domain.change_families import FAMILIES, contrary_of, working_against
from domain.trainer import FeedbackAspect, ScoreAnalysis
from runner.offline_model import Style
from trainer import credit_assignment, evolution_planner
from trainer.instructions import firmer, instruction
from trainer.reading import cue_tables
from trainer.reading import reader as feedback_reader
from trainer.reading.wish import Wish


def test_contrary_families_are_symmetric() -> None:
    for family in FAMILIES.values():
        for other in family.contrary:
            assert other in FAMILIES, f"{family.name} names an unknown contrary {other}"
            assert family.name in FAMILIES[other].contrary, (
                f"{family.name} contradicts {other}, but {other} does not contradict it"
            )


def test_a_refusal_asks_for_a_contrary_family() -> None:
    """Refusing a family asks for its opposite: the two cannot both be asked for."""
    for family in FAMILIES.values():
        if family.opposite:
            assert family.opposite in family.contrary, family.name


def test_every_family_a_cue_names_is_in_the_registry() -> None:
    cue_tables.check_all()  # every cue file, each family checked as it is loaded
    named = {f for cue in feedback_reader.CUES for f in (cue.ask, cue.fault) if f}
    assert named - set(FAMILIES) == set()


@pytest.mark.parametrize("name", [n for n, f in FAMILIES.items() if f.instruction])
def test_an_instruction_reads_back_as_its_own_family(name: str) -> None:
    """Credit assignment recognises the registry's instructions: an agent the trainer changed
    is read as asking for what it was changed for, never for a contrary family."""
    record = FAMILIES[name]
    for text in filter(None, [record.instruction, record.firmer]):
        asked = credit_assignment.families_of(text)
        assert name in asked, f"{text!r} reads as {sorted(asked)}"
        assert not asked & contrary_of(name), f"{text!r} reads as {sorted(asked)}"


@pytest.mark.parametrize("name", [n for n, f in FAMILIES.items() if f.swaps])
def test_swapped_words_turn_a_contrary_instruction_round(name: str) -> None:
    record = FAMILIES[name]
    for after in record.swaps.values():
        assert not credit_assignment.families_of(f"Be {after}.") & record.contrary, after
    assert any(
        credit_assignment.families_of(f"Be {before}.") & record.contrary for before in record.swaps
    )


@pytest.mark.parametrize("name", [n for n, f in FAMILIES.items() if f.offline])
def test_the_offline_model_honours_the_family(name: str) -> None:
    record = FAMILIES[name]
    assert record.offline and record.instruction
    style = Style(f"Be helpful. {record.instruction}")
    assert getattr(style, record.offline.attribute) == record.offline.value
    # and not without it
    if record.offline.attribute == "format":
        return
    plain = Style("Be helpful.")
    assert getattr(plain, record.offline.attribute) != record.offline.value


@pytest.mark.parametrize("name", [n for n, f in FAMILIES.items() if f.parameter])
def test_the_planner_moves_the_family_parameter_its_way(name: str) -> None:
    record = FAMILIES[name]
    assert record.parameter
    effect = record.parameter
    # a parameter well past the point where it is blamed
    far = {"down": {"maxTokens": 4000, "temperature": 0.9}, "up": {"maxTokens": 200}}
    start = far[effect.direction].get(effect.target, 0.0 if effect.direction == "up" else 0.9)
    params = (
        AgentParameters(model="m", max_tokens=int(start), temperature=0.5)
        if effect.target == "maxTokens"
        else AgentParameters(model="m", max_tokens=1024, temperature=start)
    )
    agent = AgentDefinition(name="a", system_prompt="Answer the question.", parameters=params)
    # the token budget comes down only to a hard limit the reviewer named
    limit = "150" if effect.target == "maxTokens" and effect.direction == "down" else None
    wish = FeedbackAspect(
        aspect=record.aspect,
        sentiment="negative",
        quote="q",
        confidence=0.9,
        want=name,
        detail=limit,
    )
    analysis = ScoreAnalysis(score=3, sentiment="negative", aspects=[wish], trend="stable")
    credit = credit_assignment.assign(agent, analysis, [])
    plan = evolution_planner.propose(agent, analysis, credit)
    moved = [c for c in plan.changes if c.component == "parameters" and c.target == effect.target]
    assert moved, f"{name}: no {effect.target} change in {plan.changes}"
    went_up = float(moved[0].after or 0) > float(moved[0].before or 0)
    assert went_up == (effect.direction == "up")
    # and a rollback that moves it back works against this family
    assert name in working_against(effect.target, "down" if went_up else "up")


def test_every_family_composes_an_instruction_and_a_hypothesis() -> None:
    for name, record in FAMILIES.items():
        assert record.hypothesis
        detail = {
            "focus": "on:the costs",
            "key_points": "three",
            "language": "German",
            "tool_use": "search|less|",
            "custom": "Name the author.",
        }.get(name)
        text = instruction(Wish(name, record.aspect, "q", 0.9, detail=detail), ["search_docs"])
        assert text, name
        stronger = firmer(Wish(name, record.aspect, "q", 0.9, detail=detail))
        assert stronger is None or stronger != text
