"""The offline model is deterministic and follows the instructions a trainer writes."""

from __future__ import annotations

from runner.model_backend import ChatMessage, ModelRequest
from runner.offline_model import OfflineModel, approx_tokens

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
