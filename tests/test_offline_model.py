"""The offline model is deterministic, follows the instructions a trainer writes, and uses the
tools it is offered as those instructions say."""

from __future__ import annotations

import asyncio
import json

import pytest

from runner.model_backend import ChatMessage, ContentBlock, ModelReply, ModelRequest, ToolSpec
from runner.offline_model import OfflineModel, approx_tokens
from runner.tools import ToolContext, default_registry

QUESTION = "Explain the four-day work week for small software teams."


def ask(system: str, max_tokens: int = 2048, temperature: float = 0.7) -> str:
    request = ModelRequest(
        model="offline-test",
        system=system,
        max_tokens=max_tokens,
        temperature=temperature,
        messages=[ChatMessage(role="user", content=QUESTION)],
    )
    return OfflineModel().reply(request).text


def test_same_request_same_reply():
    assert ask("Be detailed.") == ask("Be detailed.")
    assert ask("Be detailed.", temperature=0.7) != ask("Be detailed.", temperature=0.2)


def test_length_follows_instructions():
    long = ask("Provide comprehensive, detailed analysis.")
    short = ask("Provide brief, scannable analysis.")
    assert len(long.split()) > 350
    assert len(short.split()) < 120
    assert "four-day work week" in short


def test_max_tokens_is_a_hard_cap():
    capped = ask("Provide comprehensive, detailed analysis.", max_tokens=120)
    assert approx_tokens(capped) <= 120
    assert capped.endswith(".")  # cut at a sentence boundary


def test_format_and_negation():
    bullets = ask("Use bullet points, not paragraphs.")
    assert all(line.startswith("- ") for line in bullets.splitlines())
    numbered = ask("Use a numbered list of steps.")
    assert numbered.splitlines()[0].startswith("1. ")
    prose = ask("Write in paragraphs, not bullet points.")
    assert not any(line.startswith("- ") for line in prose.splitlines())


def test_a_counted_list_wish_is_written_with_its_count_and_followed():
    """ "numbered:5" (a chip's count) is an instruction with the count, and the model keeps to
    it: five items, where the list otherwise runs longer."""
    from domain.wants import parse
    from trainer.instructions import instruction
    from trainer.reading.wish import Wish

    wish = parse("numbered:5")
    said = instruction(Wish("numbered", "format", "", 1.0, amount=wish.amount))
    assert said == "Present the answer as a numbered list: at most five items."
    capped = ask(f"Provide brief, scannable analysis. {said}").splitlines()
    uncapped = ask("Provide brief, scannable analysis. Present any steps as a numbered list.")
    assert [line.split(".")[0] for line in capped] == ["1", "2", "3", "4", "5"]
    assert len(uncapped.splitlines()) > 5
    bullets = instruction(Wish("bullets", "format", "", 1.0, amount=parse("bullets:3").amount))
    assert len(ask(bullets or "").splitlines()) == 3


def test_tone():
    assert "In conclusion" in ask("Write formally.") or "Overall" in ask("Write formally.")
    casual = ask("Use a friendly, conversational tone.")
    assert "!" in casual


def test_reply_reports_usage_and_model_name():
    request = ModelRequest(
        model="offline-x",
        system="Be brief.",
        max_tokens=100,
        temperature=0,
        messages=[ChatMessage(role="user", content=QUESTION)],
    )
    reply = OfflineModel().reply(request)
    assert reply.model == "offline-x"  # never passed off as Claude
    assert reply.prompt_tokens == approx_tokens("Be brief.") + approx_tokens(QUESTION)
    assert reply.completion_tokens == approx_tokens(reply.text)


def test_it_follows_every_family_the_trainer_writes():
    from domain.change_families import FAMILIES

    table = ask(f"Be helpful. {FAMILIES['table'].instruction}")
    assert table.splitlines()[0] == "| Point | Detail |" and table.count("\n|") >= 3
    # the newest format instruction wins over an older contrary one
    prose = ask(f"Be helpful. {FAMILIES['bullets'].instruction} {FAMILIES['prose'].instruction}")
    assert not any(line.startswith(("- ", "|")) for line in prose.splitlines())
    first = ask(f"Be helpful. {FAMILIES['conclusion_first'].instruction}")
    assert first.startswith("Recommendation:")
    framed = ask(
        f"Be helpful. {FAMILIES['summary_at_end'].instruction} {FAMILIES['example'].instruction}"
    )
    assert "For example," in framed and framed.splitlines()[-1].startswith("Summary:")
    warm = ask(f"Be helpful. {FAMILIES['warmer'].instruction}")
    assert warm.startswith("I know this matters to you")
    headed = ask(f"Be helpful. {FAMILIES['headings'].instruction}")
    assert headed.startswith("## ")
    numbered = ask(f"Be helpful. {FAMILIES['numbered'].instruction}")
    assert numbered.splitlines()[0].startswith("1. ")


def test_it_says_plainly_that_it_cannot_write_another_language():
    french = ask("Be helpful. Write the whole answer in French.")
    assert french.startswith("(The offline model writes English only")
    assert "French" in french.splitlines()[0]
    assert not ask("Be helpful. Answer in plain English.").startswith("(The offline model")


HANDBOOK = (
    "# Team handbook\n\nCore hours are 10:00 to 15:00 in every time zone the team works in.\n\n"
    "Remote work saves the company office rent of 1,200 euros per person per month.\n"
)
RENT = "Estimate the monthly rent saved by 12 remote engineers, 12 * 1200."


def tool_loop(system: str, prompt: str, max_tokens: int = 1500) -> tuple[list[str], ModelReply]:
    """The tools the offline model calls, in order, run as the executor runs them, and its
    answer."""
    tools = [
        ToolSpec(name=name, description="", input_schema={})
        for name in ("calculator", "search_documents", "read_document")
    ]
    context = ToolContext(session_id="s", documents=lambda: {"handbook.md": HANDBOOK})
    messages = [ChatMessage(role="user", content=prompt)]
    called: list[str] = []
    for _ in range(5):
        reply = OfflineModel().reply(
            ModelRequest(
                model="offline-test",
                system=system,
                messages=messages,
                max_tokens=max_tokens,
                temperature=0.3,
                tools=tools,
            )
        )
        if not reply.tool_uses:
            return called, reply
        (use,) = reply.tool_uses
        called.append(f"{use.name} {json.dumps(use.input, sort_keys=True)}")
        result = asyncio.run(default_registry().call(use.name or "", use.input or {}, context))
        messages += [
            ChatMessage(role="assistant", content=reply.content),
            ChatMessage(
                role="user",
                content=[ContentBlock(type="tool_result", tool_use_id=use.id, content=result)],
            ),
        ]
    raise AssertionError(f"still calling tools: {called}")


def test_it_searches_reads_and_computes_in_the_order_it_is_told():
    # facts first, by default: search, read what the search cites, then compute
    called, reply = tool_loop("You are a precise analyst.", f"Search the handbook for: {RENT}")
    assert called == [
        'search_documents {"query": "monthly rent saved remote engineers"}',
        'read_document {"name": "handbook.md"}',
        'calculator {"expression": "12 * 1200"}',
    ]
    assert reply.text.startswith(
        "From handbook.md: Remote work saves the company office rent of 1,200 euros per person "
        "per month. The result is: 14400."
    )
    told = "Use the calculator before you search the handbook"
    called, _ = tool_loop(f"You are a precise analyst. {told}.", f"Answer: {RENT}")
    assert [c.split()[0] for c in called] == ["calculator", "search_documents", "read_document"]
    # the step's prompt counts over the system prompt, and both over the question
    called, _ = tool_loop(
        f"{told}.",
        "Look it up in the handbook first, then compute: "
        "Estimate the rent saved by 12 remote engineers; compute 12 * 1200 first.",
    )
    assert [c.split()[0] for c in called] == ["search_documents", "read_document", "calculator"]
    # what to search for, when the instructions say
    called, _ = tool_loop("Search the handbook for core hours.", "Answer: Explain remote work.")
    assert called[0] == 'search_documents {"query": "core hours"}'


def test_it_leaves_the_documents_alone_unless_asked_or_named():
    called, reply = tool_loop("You are a precise analyst.", "Explain remote work for small teams.")
    assert called == [] and "1,200" not in reply.text
    called, _ = tool_loop(
        "Answer from memory, not from the handbook.", "Explain remote work for small teams."
    )
    assert called == []
    # the question names the documents: a fact they may hold
    called, _ = tool_loop("You are a precise analyst.", "What does the handbook say on core hours?")
    assert [c.split()[0] for c in called] == ["search_documents", "read_document"]


def test_with_tools_it_still_stops_at_the_token_limit_and_says_so():
    called, reply = tool_loop("Check the facts in the handbook.", RENT, max_tokens=8)
    assert called == []  # a call that does not fit is not made
    assert reply.stop_reason == "max_tokens" and approx_tokens(reply.text) <= 8
    called, reply = tool_loop("Check the facts in the handbook.", RENT, max_tokens=45)
    assert len(called) == 3
    assert reply.stop_reason == "max_tokens" and approx_tokens(reply.text) <= 45
    assert reply.model == "offline-test"  # never passed off as Claude


def test_a_step_given_other_outputs_reworks_its_answer_and_never_repeats_them():
    """A check step is given the answer to check and, besides, the findings and the question:
    those it reads; only the answer is reworked, as a model would (nothing of the labels or
    the findings is pasted into what it returns)."""
    answer = (
        "The team should budget 14,400 for the offsite. Travel is 12 times 1,200. "
        "Book the venue early and confirm numbers a week before."
    )
    prompt = (
        "Check every number and fact in this answer against the findings, correct any that do "
        f"not match, and return the corrected answer only: {answer}\n"
        "The findings of the research step: the handbook sets travel at 1,200 a head.\n"
        "The question: What will the offsite cost?"
    )
    request = ModelRequest(
        model="offline-test",
        system="You are a precise analyst.",
        max_tokens=1024,
        temperature=0.3,
        messages=[ChatMessage(role="user", content=prompt)],
    )
    reply = OfflineModel().reply(request).text
    assert "14,400" in reply
    for given in ("The findings of the research step", "The question", "handbook sets travel"):
        assert given not in reply


def test_an_answer_asked_first_in_one_line_opens_with_a_sentence_that_reads():
    """ "conclusion_first:1" is written with its line, and the model opens with the
    recommendation as a sentence a person would say (the topic is a noun phrase)."""
    from domain.wants import parse
    from trainer.instructions import instruction
    from trainer.reading.wish import Wish

    wish = Wish("conclusion_first", "structure", "", 1.0, amount=parse("conclusion_first:1").amount)
    said = instruction(wish)
    assert said == "State the recommendation or answer in the first line, then give the reasoning."
    first = ask(f"Provide brief, scannable analysis. {said}").splitlines()[0]
    topic = QUESTION.removeprefix("Explain ").rstrip(".")
    assert first == f"Recommendation: start small with {topic}, and measure the result."


def test_a_language_it_cannot_write_is_said_for_the_part_it_was_asked_of():
    """A summary asked in Polish: the model says it writes English only and that a language
    model would write the closing summary in Polish (not the whole answer)."""
    summary = ask("Provide brief analysis. Write the closing summary in Polish, whatever the rest.")
    assert summary.splitlines()[0] == (
        "(The offline model writes English only; a language model would write the closing "
        "summary in Polish.)"
    )
    whole = ask("Write the whole answer in German.").splitlines()[0]
    assert whole.endswith("a language model would answer in German.)")


@pytest.mark.parametrize(
    ("form", "marker"),
    [("Use bullet points, not paragraphs.", "- "), ("Present it as a table.", "|")],
)
def test_its_note_on_a_language_stays_apart_when_it_reworks_an_answer(form: str, marker: str):
    """Reworking an answer that opens with its English-only note (a revision, a later step)
    into a list or a table: the note stays its own first line, never a point or a row; with
    no language asked any more, it is gone."""
    note = (
        "(The offline model writes English only; a language model would write the closing "
        "summary in Dutch.)"
    )
    answer = (
        f"{note}\n\nStart with one team for a quarter. Measure delivery and sick days before "
        "and after. Keep meetings to the four days. Tell clients which day is off.\n\n"
        "Summary: try it small, measure it, decide."
    )
    dutch = "Write the closing summary in Dutch, whatever the language of the rest."

    def rework(system: str) -> str:
        request = ModelRequest(
            model="offline-test",
            system=system,
            max_tokens=1024,
            temperature=0.3,
            messages=[ChatMessage(role="user", content=f"Revise this answer: {answer}")],
        )
        return OfflineModel().reply(request).text

    lines = rework(f"{form} {dutch}").splitlines()
    assert lines[0] == note
    assert any(line.startswith(marker) for line in lines)
    assert not any(line.startswith(marker) and "offline model" in line for line in lines)
    assert "offline model" not in rework(form)
