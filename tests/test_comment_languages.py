"""Comments in other languages: read from each language's cue file, never taken as a wish for
the answer's language, and a language without cues is named instead of silently ignored."""

from __future__ import annotations

import json

import pytest

from domain.change_families import FAMILIES
from tests.test_cycle_step import START, memory, take
from trainer import cycle_step
from trainer.credit_assignment import families_of
from trainer.prompt_segments import segments
from trainer.reading import comment_languages

# (comment, the families its new instructions must show) — one complaint or request each
COMMENTS = [
    ("Die Antwort ist viel zu lang und außerdem fehlen die Quellen.", {"shorter", "cite_sources"}),
    ("Beaucoup trop long, et le ton est trop familier.", {"shorter", "formal"}),
    ("Es demasiado formal para un mensaje entre compañeros.", {"casual"}),
    ("Ci sono troppi elenchi puntati, scrivilo in prosa.", {"prose"}),
    ("Het antwoord is te lang, begin met de conclusie.", {"shorter", "conclusion_first"}),
    ("A resposta está longa demais e sem fontes.", {"shorter", "cite_sources"}),
    ("Odpowiedź jest za długa i zbyt techniczna.", {"shorter", "simpler"}),
    ("説明が長すぎます。結論から書いてください。", {"shorter", "conclusion_first"}),
    ("यह जवाब बहुत लंबा है, कृपया संक्षेप में और स्रोत बताइए।", {"shorter", "cite_sources"}),
    ("الشرح معقد جداً، أرجو أن تكتبه بلغة بسيطة وفي جدول.", {"simpler", "table"}),
    ("内容太长了。请先说结论。", {"shorter", "conclusion_first"}),
    ("Слишком длинно и слишком официально, напиши покороче.", {"shorter", "casual"}),
    ("답변이 너무 길어요. 표로 정리해 주세요.", {"shorter", "table"}),
    ("Bitte die Anleitung als nummerierte Liste, sie ist zu lang.", {"numbered", "shorter"}),
    ("番号付きで書いてください。長すぎます。", {"numbered", "shorter"}),
    ("Faltan referencias: indica de dónde salen las cifras.", {"cite_sources"}),
    ("Trop de « peut-être ». Soyez direct, oui ou non ?", {"direct"}),
    ("Demasiados matices; sé directo.", {"direct"}),
]


def _families(prompt: str) -> set[str]:
    return {f for s in segments(prompt) for f in families_of(s)}


@pytest.mark.parametrize(("comment", "wanted"), COMMENTS)
def test_a_complaint_in_another_language_is_acted_on(comment, wanted):
    step = take(START, memory(), 4, comment)
    shown = _families(step.agent.system_prompt) - _families(START.system_prompt)
    if step.agent.parameters.max_tokens < START.parameters.max_tokens:
        shown.add("shorter")
    assert wanted <= shown, comment
    # the comment's own language is not a wish for the answer's
    assert "language" not in {a.want for a in step.analysis.aspects}
    assert step.analysis.comment_language is not None


def test_a_denied_fault_in_another_language_asks_for_nothing():
    step = take(START, memory(), 7, "Nicht zu lang, aber zu förmlich.")
    assert {a.want for a in step.analysis.aspects if a.want} == {"casual"}


def test_a_language_without_cues_is_named_and_nothing_changes():
    step = take(START, memory(), 3, "Svaret er alt for langt og for formelt, desværre.")
    assert not step.changed
    (line,) = [r for r in step.report if r.startswith("not understood")]
    assert "Danish" in line and "German" in line  # what it could not read, and what it reads
    assert "not understood" in cycle_step.summary(step, 1)


def test_every_cue_file_is_well_formed():
    sets = comment_languages.cue_sets()
    assert {"German", "French", "Spanish", "Italian", "Dutch", "Portuguese", "Polish"} <= set(sets)
    assert "Japanese" in sets
    for path in comment_languages.CUES.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert set(data["families"]) <= set(FAMILIES), path.name


def test_english_comments_do_not_go_through_other_languages():
    # praise with no wish in it, and a plain English complaint the English reader handles
    assert comment_languages.read("Spot on, thanks.").language is None
    step = take(START, memory(), 4, "Far too wordy.")
    assert step.analysis.comment_language is None
