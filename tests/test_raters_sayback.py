"""What several raters are told of their wishes (issue #63, from the three-rater walk): every
wish not acted on is said back, a keep as what it does, an agreed wish with the amount a rater
gave, and a step that made no change from the raters' wishes said as such. Through Temporal."""

from __future__ import annotations

from client import start_session
from tests.conftest import awaiting, make_spec, threaded_starter_cli, wait_for_state
from tests.test_raters import RATERS, _logged, _score_all, card_html, panel_lineage
from workflows.lineage import LineageWorkflow


async def test_a_wish_clashing_with_one_already_in_dispute_is_said_back_with_it(
    time_skipping_env, store, settings
):
    """ana asks for bullets, bo for prose (against bullets and tables), cy for a table and
    keeps the answer first: the table joins the bullets/prose dispute with who said what;
    cy's keep is said as what it does; the step's line says no wish was agreed on, not that
    none was asked."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        for rater, want in (("ana", ["bullets"]), ("bo", ["prose"]),
                            ("cy", ["table", "keep:conclusion_first"])):  # fmt: skip
            await handle.signal("score", {"score": 4, "rater": rater, "wants": want})
        state = await wait_for_state(handle, awaiting(2))
        card = await card_html(time_skipping_env, store, state.lineage_id)
    dispute = (
        "disagreement on bullet points / paragraphs, no lists / table (ana: bullet points; "
        "bo: paragraphs, no lists; cy: table): nothing changed for it"
    )
    assert state.disputes == [dispute, "cy keeps answer first: it stays"]
    assert dispute in card and "cy keeps answer first: it stays" in card
    assert "not a majority" not in card
    assert state.last_reading == (
        "Read as: no change agreed — bullet points (ana) against paragraphs, no lists (bo) "
        "against table (cy); cy keeps answer first: it stays"
    )
    assert state.last_evolution == "kept v1: no wish the raters agreed on (see the disagreements)"
    (agreed,) = _logged(store, "raters.agreed")
    assert [s["want"] for s in agreed["disputes"][0]["said"]] == ["bullets", "prose", "table"]


async def test_an_agreed_wish_keeps_the_amount_a_rater_gave(time_skipping_env, store, settings):
    """ana asks for shorter, bo for shorter by about half, cy for shorter by a third: the
    majority's wish is acted on with the mildest amount given (half), and said back so."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        for rater, want in (("ana", "shorter"), ("bo", "shorter:half"), ("cy", "shorter:third")):
            await handle.signal("score", {"score": 4, "rater": rater, "wants": [want]})
        state = await wait_for_state(handle, awaiting(2))
    (agreed,) = _logged(store, "raters.agreed")
    assert agreed["agreed"] == ["shorter:half"]
    assert state.last_reading == "Read as: shorter: about half"
    (evolved,) = _logged(store, "agent.evolved")
    (shorter,) = [c for c in evolved["plan"]["changes"] if c["want"] == "shorter"]
    assert "half" in str(shorter) or "0.5" in str(shorter)


async def test_a_rollback_with_no_change_agreed_is_said_back(time_skipping_env, store, settings):
    """v2 is shorter; on its output ana and bo ask for longer, cy for shorter still: length is
    in dispute and the change is rolled back (2 of 3 refute it). The say-back names the
    rollback rather than "no change agreed" alone."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        await _score_all(handle, {r: (4, "shorter") for r in ("ana", "bo", "cy")})
        await wait_for_state(handle, awaiting(2))
        await _score_all(handle, {"ana": (3, "longer"), "bo": (3, "longer"), "cy": (5, "shorter")})
        state = await wait_for_state(handle, awaiting(3))
    assert state.agent_version == 3
    assert state.last_reading is not None
    assert state.last_reading.startswith(
        "Read as: no new change agreed, the last change rolled back (shorter) — "
    )


async def test_a_rescore_from_the_cli_says_it_replaces_the_earlier_one(
    client, store, settings, run_worker, temporal_address
):
    """`training-camp score … --rater ana` a second time on the output awaiting scores: taken,
    and said to replace ana's earlier score; the first says nothing of the kind."""
    spec = make_spec(options=RATERS)
    lineage = spec.lineage_id("A")
    cli = threaded_starter_cli(temporal_address, settings.database_url)
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        first = await cli("score", lineage, "4", "Way too long.", "--rater", "ana")
        second = await cli("score", lineage, "3", "Way too long.", "--rater", "ana")
        state = await handle.query(LineageWorkflow.state)
    assert "score 4 accepted for cycle 1" in first and "replaces" not in first
    assert "score 3 accepted for cycle 1; it replaces your earlier score (4)" in second
    assert [(r.rater, r.score) for r in state.rater_scores] == [("ana", 3.0)]


async def test_the_inbox_command_for_a_team_lineage_names_the_rater(
    client, store, settings, run_worker
):
    """A lineage with raters, one of whom has scored: `training-camp inbox` suggests commands
    that name the rater (a score without one is refused on such a lineage)."""
    from review import inbox_table, views

    spec = make_spec(options=RATERS)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 4, "rater": "ana", "wants": ["shorter"]})
        await wait_for_state(handle, lambda s: s.scored_by == ["ana"])
        found = await views.inbox(client, store, spec.session_id)
    with inbox_table.console.capture() as captured:
        inbox_table.print_inbox(found)
    printed = captured.get()
    assert f"score {lineage} 8 'comment' --rater NAME" in printed
    assert '"rater": "NAME"' in printed


async def test_history_says_what_each_rater_did(time_skipping_env, store, settings):
    """`training-camp-data history` rows for the raters' events say who scored what (and
    which score a re-score replaces), what was agreed and disputed, each rater's verdict, a
    correction, and why a step kept the agent."""
    from store.views.time_travel import history

    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 4, "rater": "ana", "wants": ["shorter"]})
        await handle.signal("score", {"score": 3, "rater": "ana", "wants": ["shorter"]})
        await handle.signal("score", {"score": 5, "rater": "bo", "wants": ["shorter"]})
        await handle.signal("score", {"score": 6, "rater": "cy", "wants": ["longer"]})
        state = await wait_for_state(handle, awaiting(2))
        await _score_all(handle, {"ana": (3, "longer"), "bo": (3, "longer"), "cy": (5, "")})
        await wait_for_state(handle, awaiting(3))
        await _score_all(handle, {r: (5, "") for r in ("ana", "bo", "cy")})
        await wait_for_state(handle, awaiting(4))
    rows = {}
    for entry in history(store.engine, state.lineage_id):
        rows.setdefault(entry.event_type, []).append(entry.summary)
    assert rows["rater.scored"][:2] == [
        "cycle 1: ana scored 4, asking shorter",
        "cycle 1: ana scored 3, asking shorter; replaces their earlier score (4)",
    ]
    assert rows["raters.agreed"][0] == (
        "cycle 1: median 5 of ana 3, bo 5, cy 6; agreed: nothing; disputed longer, more depth "
        "/ shorter (ana: shorter; bo: shorter; cy: longer, more depth)"
    )
    assert rows["raters.agreed"][1].startswith(
        "cycle 2: median 3 of ana 3, bo 3, cy 5; agreed: longer, more depth"
    )
    (judged,) = rows["raters.judged"]
    assert judged.startswith("cycle 3: ") and judged.endswith(
        "judged by ana: longer, more depth untested, bo: longer, more depth untested, "
        "cy: longer, more depth untested"
    )
    assert rows["evolution.kept"] and all(rows["evolution.kept"])
    assert rows["evolution.kept"][0].startswith("kept v1: ")


async def test_the_card_shows_each_raters_comment_on_its_own_line(
    time_skipping_env, store, settings
):
    """Three raters comment (ana twice: the later counts): the card's last score gives each
    rater's comment on a line of its own, not one quote run together."""
    async with panel_lineage(time_skipping_env, store, settings, RATERS) as handle:
        await wait_for_state(handle, awaiting(1))
        for rater, comment in (("ana", "too wordy"), ("ana", "way too long"),
                               ("bo", "far too long"), ("cy", "fine as it is")):  # fmt: skip
            await handle.signal("score", {"score": 5, "rater": rater, "comment": comment})
        state = await wait_for_state(handle, awaiting(2))
        card = await card_html(time_skipping_env, store, state.lineage_id)
    last = card.split('class="previous"')[1].split("</p>")[0]
    assert [line.split("</span>")[0] for line in last.split('class="rater-comment">')[1:]] == [
        "ana: “way too long”",
        "bo: “far too long”",
        "cy: “fine as it is”",
    ]
    assert "too wordy" not in last
