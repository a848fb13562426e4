"""``bench/version_contract.py`` finds each way a version can break its confirmed plan: a change
made that was not confirmed, a difference from its parent that no change explains, a
confirmed change not made; and counts apart the versions made without a confirmed plan."""

from __future__ import annotations

from bench import version_contract
from domain.agent import AgentDefinition
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    EvolutionPlan,
    EvolutionTrigger,
    ScoreAnalysis,
    change_key,
)
from store import Store
from tests.store_story import AGENT, register

LINEAGE = "s1-A"


def _add(text: str) -> EvolutionChange:
    return EvolutionChange(
        component="systemPrompt",
        change_type="add",
        target="instruction",
        after=text,
        reason="asked",
        confidence=0.9,
    )


def _step(
    store: Store,
    cycle: int,
    version: int,
    agent: AgentDefinition,
    changes: list[EvolutionChange],
    confirmed: list[str] | None,
    made: AgentDefinition | None = None,
) -> AgentDefinition:
    """Cycle ``cycle``'s score on ``version`` (with its confirmed plan, if any) and the version
    it made: ``made``, or ``agent`` with ``changes``."""
    evaluation = f"e{cycle}"
    store.recorder.record_score(
        session_id="s1",
        lineage_id=LINEAGE,
        evaluation_id=evaluation,
        artifact_id=f"{LINEAGE}:c{cycle}:artifact",
        rollout_id=f"{LINEAGE}:c{cycle}",
        cycle=cycle,
        agent_version=version,
        score=3,
        comment="a comment",
        rater="ana",
        outcome=None,
        confirmed=confirmed,
    )
    if not changes:
        return agent
    after = made or agent.model_copy(
        update={"system_prompt": " ".join([agent.system_prompt, *(c.after or "" for c in changes)])}
    )
    store.recorder.record_evolution(
        session_id="s1",
        lineage_id=LINEAGE,
        evolution_id=f"{LINEAGE}:evolution:v{version}",
        from_version=version,
        new_agent=after,
        trigger=EvolutionTrigger(
            rollout_id=f"{LINEAGE}:c{cycle}",
            attempt_id=None,
            artifact_id=f"{LINEAGE}:c{cycle}:artifact",
            evaluation_id=evaluation,
            score=3,
        ),
        analysis=ScoreAnalysis(score=3, sentiment="negative", trend="stable"),
        credit=CreditAssignment(mode="prompt"),
        plan=EvolutionPlan(changes=changes),
        changes=changes,
    )
    return after


def test_every_version_is_checked_against_its_confirmed_plan(store: Store, capsys, tmp_path):
    register(store, LINEAGE)
    short, table, example = _add("Keep it short."), _add("Use a table."), _add("Like this: a.")
    tokens = EvolutionChange(
        component="parameters",
        change_type="modify",
        target="maxTokens",
        before="2048",
        after="600",
        reason="a hard limit",
        confidence=0.8,
    )
    v2 = _step(
        store,
        1,
        1,
        AGENT,
        [short, tokens],
        [change_key(short), change_key(tokens)],
        made=AGENT.model_copy(
            update={
                "system_prompt": f"{AGENT.system_prompt} Keep it short.",
                "parameters": AGENT.parameters.model_copy(update={"max_tokens": 600}),
            }
        ),
    )
    clean = version_contract.check(store)
    assert (clean.versions, clean.confirmed, clean.violations) == (1, 1, [])

    # the definition carries a sentence no change made
    v3 = _step(
        store,
        2,
        2,
        v2,
        [table],
        [change_key(table)],
        made=v2.model_copy(
            update={"system_prompt": f"{v2.system_prompt} Use a table. Like this: a."}
        ),
    )
    # a change made that was not confirmed
    v4 = _step(store, 3, 3, v3, [example, _add("Be warm.")], [change_key(example)])
    # a confirmed change the step did not make
    _step(store, 4, 4, v4, [], [change_key(_add("Cite sources."))])
    # a raw signal's version: no plan was confirmed
    _step(store, 5, 4, v4, [_add("Cite sources.")], None)

    found = version_contract.check(store)
    assert (found.versions, found.confirmed, found.kept) == (4, 3, 1)
    assert found.unconfirmed == ["s1-A v4→v5 (none sent)"]
    assert found.violations == [
        "s1-A v2→v3: the prompt differs from its parent's with the changes applied; "
        "not in any change: ['Like this: a.']",
        "s1-A v3→v4: made, not confirmed: add 'Be warm.'",
        "cycle 4 (v4, e4): 1 confirmed change(s) not made: the step made no version",
    ]
    strict = version_contract.check(store, strict=True)
    assert "s1-A v4→v5: made without a confirmed plan (none sent)" in strict.violations

    # the command: every violation printed, exit code 1
    url = store.engine.url.render_as_string(hide_password=False)
    assert version_contract.main([url]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("versions checked: 4 (3 with a confirmed plan, 1 without)")
    assert "violations: 3" in printed and "made, not confirmed: add 'Be warm.'" in printed
    assert version_contract.main([url, "--lineage", "s1-B"]) == 0
    assert version_contract.main([f"sqlite:///{tmp_path}/none.db"]) == 2  # no store made
    assert "no store at" in capsys.readouterr().out and not (tmp_path / "none.db").exists()
