"""Several raters on the review page, in a real browser (headless Chromium through Selenium):
the preview of a rater's reading follows what the others ask as they score, or score again,
without a reload; and the card's correction is the signed-in rater's own reading, asked for by
name when the page knows none."""

from __future__ import annotations

from selenium.webdriver.common.keys import Keys

from client import start_session
from domain.lineage import LineageState
from tests import test_raters, test_review_app
from tests.conftest import awaiting, make_spec, wait_for_state
from tests.test_review_app import card, on, until
from workflows.lineage import LineageWorkflow

# the review app's fixtures: headless Chromium, and the app on a free port
browser = test_review_app.browser
inbox_server = test_review_app.inbox_server

RATERS = {"raters": ["ana", "bo", "cy"]}


def corrected_by_bo(state: LineageState) -> bool:
    """bo's reading is now shorter, and the cycle it ran again awaits its scores."""
    bo = [r.wants for r in state.rater_readings if r.rater == "bo"]
    return bo == [["shorter"]] and state.status == "awaiting_score"


async def test_the_preview_follows_the_other_raters_as_they_score_without_a_reload(
    client, store, settings, run_worker, browser, inbox_server
):
    """cy types a comment and sees what ana asked; bo scores meanwhile, then ana scores
    again: cy's preview says each, on the page's own refresh, with what cy typed kept."""
    spec = make_spec(options=RATERS)
    a = spec.lineage_id("A")
    others = f"{card(a)}.querySelector('form.score .reading .others').textContent"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 3, "rater": "ana", "wants": ["shorter"]})
        await wait_for_state(handle, lambda s: s.scored_by == ["ana"])
        server = await inbox_server()
        await on(browser, browser.get, f"{server.url}/sessions/{spec.session_id}")
        await until(browser, "document.activeElement.id == 'rater'")
        await on(browser, browser.switch_to.active_element.send_keys, "cy", Keys.TAB)
        await until(browser, "document.activeElement.classList.contains('score-input')")
        await on(browser, browser.switch_to.active_element.send_keys, "6", Keys.TAB)
        comment = await on(browser, lambda: browser.switch_to.active_element)
        await on(browser, comment.send_keys, "add an example")
        assert await until(browser, f"{others} == 'Other raters so far: ana 3: shorter'")

        await handle.signal("score", {"score": 5, "rater": "bo", "wants": ["table"]})
        await until(browser, f"{others} == 'Other raters so far: ana 3: shorter; bo 5: table'")
        # ana scores again: the count stays at 2 of 3, and the page still follows
        await handle.signal("score", {"score": 2, "rater": "ana", "wants": ["longer"]})
        await until(
            browser,
            f"{others} == 'Other raters so far: ana 2: longer, more depth; bo 5: table'",
        )
        typed = await on(
            browser,
            browser.execute_script,
            f"return {card(a)}.querySelector('form.score [name=comment]').value;",
        )
        state = await handle.query(LineageWorkflow.state)
    assert typed == "add an example"
    assert state.cycle == 1 and state.still_to_score == ["cy"]


async def test_the_correction_is_the_named_raters_own_reading_and_asks_a_name_first(
    client, store, settings, run_worker, browser, inbox_server
):
    """ana read as shorter, bo and cy as a table: a browser that knows no name is shown no
    one's reading to correct, and asked for the name; named bo, the card shows bo's own
    reading, bo corrects it from the card, and a reload still knows bo."""
    spec = make_spec(options=RATERS)
    a = spec.lineage_id("A")
    correcting = f"{card(a)}.querySelector('form.correct')"
    chips = f"Array.from({card(a)}.querySelectorAll('form.correct .chip'), c => c.dataset.want)"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        for rater, wants in (("ana", ["shorter"]), ("bo", ["table"]), ("cy", ["table"])):
            await handle.signal("score", {"score": 4, "rater": rater, "wants": wants})
        await wait_for_state(handle, awaiting(2))
        server = await inbox_server()
        await on(browser, browser.get, f"{server.url}/sessions/{spec.session_id}")
        await until(browser, "document.activeElement.id == 'rater'")
        none = await until(browser, f"{card(a)}.querySelector('.correct-none')?.textContent")
        assert none.startswith("Type your name")
        assert await on(browser, browser.execute_script, f"return {correcting} === null;")

        # named bo (Tab, on to the score): the card is rendered again for bo
        await on(browser, browser.switch_to.active_element.send_keys, "bo", Keys.TAB)
        assert await until(browser, f"{correcting} && {chips}.join() == 'table'")
        own = f"{card(a)}.querySelector('form.correct .own-reading').textContent"
        assert await on(browser, browser.execute_script, f"return {own};") == "Your reading: table"
        line = f"{card(a)}.querySelector('.last-reading').textContent"
        agreed = await on(browser, browser.execute_script, f"return {line};")
        await on(
            browser,
            browser.execute_script,
            f"{correcting}.querySelector('.chip[data-want=table]').click();",
        )
        await until(browser, f"{chips}.length == 0")
        # the edit is bo's reading, said in the form; the line of what was agreed stays
        assert await until(browser, f"{own} == 'Your reading (edited): no change asked for'")
        assert await on(browser, browser.execute_script, f"return {line};") == agreed
        await on(
            browser,
            browser.execute_script,
            f"const f = {correcting}; f.querySelector('.pick-action').value = 'add';"
            "f.querySelector('.pick-family').value = 'shorter';"
            "f.querySelector('.add-want').click();",
        )
        await until(browser, f"{chips}.join() == 'shorter'")
        await on(
            browser,
            browser.execute_script,
            f"{correcting}.querySelector('button[type=submit]').click();",
        )
        state = await wait_for_state(handle, corrected_by_bo)
        await on(browser, browser.refresh)
        await until(browser, f"{chips}.join() == 'shorter'")
        rendered_for = await on(
            browser,
            browser.execute_script,
            "return document.querySelector('section.cards').dataset.rater;",
        )
    assert rendered_for == "bo"  # the server knew bo: no second rendering was needed
    assert [(r.rater, r.wants) for r in state.rater_readings] == [
        ("ana", ["shorter"]),
        ("bo", ["shorter"]),
        ("cy", ["table"]),
    ]


async def _ana_scores_again(client, spec, settings, browser, inbox_server):
    """The lineage started, ana's 5 given by signal, and ana at the page with 6 typed as the
    score of a second look: the workflow's handle and the comment box, focused."""
    (handle,) = await start_session(client, spec, settings.task_queue)
    await wait_for_state(handle, awaiting(1))
    await handle.signal("score", {"score": 5, "rater": "ana", "wants": ["shorter"]})
    await wait_for_state(handle, lambda s: s.scored_by == ["ana"])
    server = await inbox_server()
    await on(browser, browser.get, f"{server.url}/sessions/{spec.session_id}")
    await until(browser, "document.activeElement.id == 'rater'")
    await on(browser, browser.switch_to.active_element.send_keys, "ana", Keys.TAB)
    await until(browser, "document.activeElement.classList.contains('score-input')")
    await on(browser, browser.switch_to.active_element.send_keys, "6", Keys.TAB)
    return handle, await on(browser, lambda: browser.switch_to.active_element)


async def test_a_rescore_on_the_page_says_it_replaces_the_earlier_one(
    client, store, settings, run_worker, browser, inbox_server
):
    """ana scored 5; on the page, ana scores 6 while bo and cy are still to score: the form
    says the new score replaces the earlier one, which no longer counts."""
    spec = make_spec(options=RATERS)
    a = spec.lineage_id("A")
    async with run_worker():
        handle, comment = await _ana_scores_again(client, spec, settings, browser, inbox_server)
        await on(browser, comment.send_keys, "Way too long.", Keys.ENTER)
        message = await until(
            browser, f"{card(a)}.querySelector('form.score .message.ok')?.textContent"
        )
        state = await handle.query(LineageWorkflow.state)
    assert message.startswith("score 6 accepted for cycle 1; it replaces your earlier score (5)")
    assert [(r.rater, r.score) for r in state.rater_scores] == [("ana", 6.0)]


async def _cycle_goes_on_while_ana_types(client, spec, settings, browser, inbox_server):
    """As ``_ana_scores_again``, ana then typing a comment while bo and cy score and the cycle
    goes on to cycle 2."""
    handle, comment = await _ana_scores_again(client, spec, settings, browser, inbox_server)
    await on(browser, comment.send_keys, "Second look: still too long.")
    await handle.signal("score", {"score": 4, "rater": "bo", "wants": ["shorter"]})
    await handle.signal("score", {"score": 4, "rater": "cy", "wants": ["shorter"]})
    await wait_for_state(handle, awaiting(2), timeout=60)
    return handle, comment


async def test_a_score_typed_while_its_cycle_goes_on_is_refused_not_landed_on_the_next(
    client, store, settings, run_worker, browser, inbox_server
):
    """ana types a second score for cycle 1 on the page; bo and cy score meanwhile and the
    cycle goes on, the card showing cycle 2: ana's score is refused for cycle 1, and cycle 2,
    which ana has not read, gets no score from ana."""
    spec = make_spec(options=RATERS)
    a = spec.lineage_id("A")
    async with run_worker():
        handle, comment = await _cycle_goes_on_while_ana_types(
            client, spec, settings, browser, inbox_server
        )
        await until(browser, f"{card(a)}.querySelector('header')?.dataset.cycle == '2'")
        # said at once, before anything is sent
        warned = await until(browser, f"{card(a)}.querySelector('form.score .moved')?.textContent")
        await on(browser, comment.send_keys, Keys.ENTER)
        said = f"{card(a)}.querySelector('form.score .message')?.textContent"
        message = await until(browser, f"{said} && {said} != '…' && {said}")
        state = await handle.query(LineageWorkflow.state)
    assert warned.startswith("Cycle 1 went on while you typed: the card now shows cycle 2.")
    assert "Score cycle 2 with it" in warned
    assert "cycle 1" in message and "refused" in message
    assert state.scored_by == []  # nobody has scored cycle 2's output yet


async def test_a_score_typed_while_its_cycle_goes_on_can_be_sent_for_the_new_output(
    client, store, settings, run_worker, browser, inbox_server
):
    """As above, but ana reads cycle 2's output and presses "Score cycle 2 with it": the words
    ana typed are sent as ana's score of cycle 2's output, and the warning is gone."""
    spec = make_spec(options=RATERS)
    a = spec.lineage_id("A")
    async with run_worker():
        handle, _ = await _cycle_goes_on_while_ana_types(
            client, spec, settings, browser, inbox_server
        )
        move = f"{card(a)}.querySelector('form.score .moved button')"
        await until(browser, f"{move}?.textContent == 'Score cycle 2 with it'")
        made = await on(
            browser,
            browser.execute_script,
            f"return {card(a)}.querySelector('section.evolution p').textContent;",
        )
        await on(browser, browser.execute_script, f"{move}.click();")
        assert await until(browser, "document.activeElement.name == 'comment'")
        await on(browser, browser.switch_to.active_element.send_keys, Keys.ENTER)
        ok = await until(browser, f"{card(a)}.querySelector('form.score .message.ok')?.textContent")
        left = await on(
            browser, browser.execute_script, f"return {card(a)}.querySelector('.moved');"
        )
        state = await wait_for_state(handle, lambda s: s.scored_by == ["ana"])
    assert ok.startswith("score 6 accepted for cycle 2")
    assert left is None
    # v2 was made from wishes sent with no comment: said so, not as an empty quotation
    assert made.startswith("After a score of 4, with no comment. Hypothesis:")
    (scored,) = state.rater_scores
    assert (scored.rater, scored.score, scored.comment) == (
        "ana",
        6.0,
        "Second look: still too long.",
    )
    # in the store: ana's 5 on cycle 1, then this 6 on cycle 2 (the 6 never reached cycle 1)
    logged = [
        (e["cycle"], e["rater"], e["score"])
        for e in test_raters._logged(store, "rater.scored")
        if e["rater"] == "ana"
    ]
    assert logged == [(1, "ana", 5.0), (2, "ana", 6.0)]
