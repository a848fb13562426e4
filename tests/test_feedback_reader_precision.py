"""The reader's precision on comments written as people write them (this file's own wording):
praise that names qualities asks for nothing, a denied fault is praise, a situation or a genre
implies a wish, a tool used for arithmetic is a tool wish."""

from __future__ import annotations

import pytest

from trainer.reading import reader as feedback_reader


def wishes(comment: str) -> set[str]:
    return {w.family for w in feedback_reader.read(comment).wishes}


@pytest.mark.parametrize(
    "comment",
    [
        "Lovely flow, nicely brief, and the register is just right.",
        "The formal tone suits the board perfectly.",
        "It doesn't drag at all, and it never lectures.",
        "Not wordy in the least.",
    ],
)
def test_praise_that_names_qualities_asks_for_nothing(comment: str):
    assert wishes(comment) == set()


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("I'm going through these on my phone between calls.", "shorter"),
        ("It goes to a primary-school class but sounds like a board report.", "casual"),
        ("It goes to a primary-school class, and half the words are jargon to them.", "simpler"),
        ("It ran a web search to add 12 and 30, which is silly.", "tool_use"),
    ],
)
def test_a_situation_a_genre_or_a_misused_tool_implies_a_wish(comment: str, family: str):
    assert family in wishes(comment)


def test_an_implied_wish_yields_to_an_explicit_one():
    # the situation suggests brevity; the reviewer explicitly wants depth
    assert wishes("I read these on my phone, but I want more detail, please.") == {"longer"}


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("Marvellous, an entire saga to say the meeting moved.", "shorter"),
        ("Just ten pages to tell me the shop opens at nine.", "shorter"),
        ("Could the tone be any more starchy?", "casual"),
        ("Oh sure, as if all our customers were statisticians.", "simpler"),
        ("Grand, if the plan was to send the team to sleep.", "creative"),
        ("Enjoyed the eight disclaimers before the point, truly.", "direct"),
        ("Far too many caveats.", "direct"),
        ("A pile of bullet points, not an argument.", "prose"),
    ],
)
def test_irony_and_excess_are_read_as_the_complaint_they_make(comment: str, family: str):
    assert family in wishes(comment)


@pytest.mark.parametrize(
    "comment",
    [
        "Could it be any better? Ship it.",
        "Enjoyed the three examples; each one landed.",
        "Not too many caveats this time, well done.",
        "Thanks, what a novel approach.",
    ],
)
def test_sincere_praise_that_looks_ironic_asks_for_nothing(comment: str):
    assert wishes(comment) == set()


def test_a_plain_request_phrased_as_a_question_is_still_a_request():
    assert wishes("Could it be more formal?") == {"formal"}
    assert wishes("Could it be shorter?") == {"shorter"}


def test_a_trade_of_one_topic_for_another_is_a_change_of_focus_not_length():
    read = feedback_reader.read("Drop the company backstory; I want more about the fees.")
    focus = [w for w in read.wishes if w.family == "focus"]
    assert focus and "on:the fees" in (focus[0].detail or "")
    assert "off:" in (focus[0].detail or "")
    assert "longer" not in {w.family for w in read.wishes}


def test_a_list_accepted_with_a_cap_asks_for_the_cap():
    read = feedback_reader.read("Bullets are okay, just keep it to four points.")
    assert {w.family: w.detail for w in read.wishes} == {"key_points": "four"}
    assert [w.family for w in read.kept] == ["bullets"]


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("It's going into a sympathy note for a colleague's family.", "warmer"),
        ("We're answering a worried parent here.", "warmer"),
        ("A text to my little brother, remember.", "casual"),
        ("Our volunteers will only skim it.", "shorter"),
        ("This ends up on a single slide.", "shorter"),
        ("The readers are incoming students.", "simpler"),
        ("The reader is only seven years old.", "simpler"),
        ("It'll be included in our annual report.", "formal"),
        ("The client just lost her husband.", "warmer"),
        ("I read these while commuting.", "shorter"),
        ("She gets maybe ten seconds to look at it between patients.", "shorter"),
        ("My nephew is seven and will read it by himself.", "simpler"),
        ("This becomes my official complaint.", "formal"),
        ("Most of the readers speak English as a second language.", "simpler"),
        ("It goes on the noticeboard; people give it ten seconds.", "shorter"),
        ("Our stewards left school at fifteen and never met the word 'egress'.", "simpler"),
    ],
)
def test_a_situation_implies_a_wish_that_yields_to_an_explicit_one(comment: str, family: str):
    _read_as(comment, family, weak=True)


def _read_as(comment: str, family: str, weak: bool) -> None:
    """``comment`` asks for ``family``: weakly (a situation's hint) or outright."""
    read = feedback_reader.read(comment)
    assert family in {w.family for w in read.wishes}
    assert all(w.weak == weak for w in read.wishes if w.family == family)


def test_where_a_situation_is_named_as_a_place_or_a_pitch_it_asks_for_nothing_of_it():
    assert "shorter" not in wishes("A typo in the subject line, otherwise fine.")
    assert "simpler" not in wishes("Pitched at an eleven-year-old; our readers are surgeons.")


def _read(comment: str) -> feedback_reader.Reading:
    return feedback_reader.read(comment)


@pytest.mark.parametrize(
    ("comment", "language"),
    [
        ("It's for the warehouse crew in Osaka, and none of them read English.", "Japanese"),
        ("Our Hamburg branch will get this; hardly anyone there speaks English.", "German"),
    ],
)
def test_readers_who_cannot_read_the_answer_ask_for_their_place_s_language(
    comment: str, language: str
):
    asked = [w for w in _read(comment).wishes if w.family == "language"]
    assert [w.detail for w in asked] == [language]


@pytest.mark.parametrize(
    "comment",
    [
        # a country of several official languages: which one is not said
        "This goes to the Brussels team and they don't read English.",
        # no place at all
        "Half of my readers cannot read English well.",
    ],
)
def test_a_language_it_cannot_tell_is_said_back_as_not_understood_and_changes_nothing(
    comment: str,
):
    reading = _read(comment)
    assert not [w for w in reading.wishes if w.family == "language"]
    assert len(reading.unsure) == 1 and "English" in reading.unsure[0].why


def test_a_place_without_a_language_problem_asks_for_no_language():
    assert wishes("This is for the Paris office; keep it short.") == {"shorter"}


@pytest.mark.parametrize(
    "comment",
    [
        "Wordier than I'd normally accept, yet each section pulls its weight. Change nothing.",
        "A tad long for my taste, but it's justified here. Leave it as it is.",
    ],
)
def test_a_high_score_that_concedes_and_leaves_it_alone_asks_for_nothing(comment: str):
    from trainer.reward_analyzer import analyze

    analysis = analyze(9, comment, [])
    assert [a.want for a in analysis.aspects if a.sentiment == "negative" and a.want] == []


@pytest.mark.parametrize(
    "comment",
    [
        "Oh marvellous, so confident, so punchy. Just what I needed.",
        "Superb. So daring, so sure of itself.",
    ],
)
def test_praise_under_a_low_score_changes_nothing_and_is_said_back_as_unsure(comment: str):
    from trainer.reward_analyzer import analyze

    analysis = analyze(2, comment, [])
    assert [a.want for a in analysis.aspects if a.want and a.action != "keep"] == []
    assert any("praise under a score of 2" in u.why for u in analysis.unsure)


def test_a_named_part_praised_under_a_low_score_is_still_kept():
    from trainer.reward_analyzer import analyze

    analysis = analyze(4, "Nice headings. The middle section drags on far too long though.", [])
    assert {(a.action, a.want) for a in analysis.aspects if a.want} == {
        ("keep", "headings"),
        ("add", "shorter"),
    }
    assert analysis.unsure == []


@pytest.mark.parametrize(
    "comment", ["Is this pitched at the finance team?", "Have you looked at last year's numbers?"]
)
def test_a_question_with_nothing_read_in_it_is_not_understood(comment: str):
    reading = _read(comment)
    assert reading.wishes == [] and [u.quote for u in reading.unsure] == [comment]


def test_a_question_beside_a_request_is_its_reason_not_an_unknown():
    reading = _read("Who has time for five screens of this? Cut it to half a page.")
    assert {w.family for w in reading.wishes} == {"shorter"} and reading.unsure == []


@pytest.mark.parametrize(
    "comment",
    [
        "I don't want it warmer; I want it sharper.",
        "Please don't make it warmer.",
        "We're not asking for more formal, just fewer typos.",
    ],
)
def test_a_refused_change_is_not_asked_for(comment: str):
    assert not wishes(comment) & {"warmer", "formal"}


def test_a_complaint_under_ironic_praise_is_never_read_the_other_way():
    from trainer.reward_analyzer import analyze

    # read as the complaint, or not acted on and asked about: never as a wish for more words
    for comment in ("Fantastic, even wordier than before.", "It is even wordier than before."):
        analysis = analyze(2, comment, [])
        wanted = [a.want for a in analysis.aspects if a.want]
        assert wanted == ["shorter"] or (wanted == [] and analysis.unsure)


@pytest.mark.parametrize(
    "comment",
    [
        "Add a single worked case from a firm like ours, kept short.",
        "One example from a shop our size would help, kept brief.",
    ],
)
def test_a_size_said_after_a_part_sizes_the_part_not_the_answer(comment: str):
    assert wishes(comment) == {"example"}


def test_a_part_that_makes_the_answer_read_like_something_is_taken_out():
    reading = _read("The bullet list makes it look like a shopping list.")
    assert [(w.action, w.family) for w in reading.wishes] == [("remove", "bullets")]


def test_better_without_a_part_is_praise_not_a_new_request():
    assert wishes("Much better without the headings.") == set()


def test_forgetting_what_one_said_about_a_part_takes_that_part_back():
    from trainer.reward_analyzer import analyze

    analysis = analyze(4, "Scratch what I said about the grid; running text suits the board.", [])
    assert {(a.action, a.want) for a in analysis.aspects if a.want} == {
        ("remove", "table"),
        ("add", "prose"),
    }
    assert analysis.unsure == []  # a preference under a low score is not irony


def test_ending_with_the_decisions_to_take_asks_for_a_closing_summary():
    assert "summary_at_end" in wishes("Could it finish with the three actions we need to take?")


def test_a_polite_refusal_still_refuses():
    assert wishes("No tables please.") == {"prose"}


def test_liking_a_part_keeps_it():
    reading = _read("We like the headings, but trim the intro.")
    assert {k.family for k in reading.kept} == {"headings"}
    assert "headings" not in {w.family for w in reading.wishes}


@pytest.mark.parametrize(
    "comment",
    ["Don't clutter it with disclaimers; tell me what to do.", "Stop padding it with caveats."],
)
def test_padding_refused_is_not_asked_for(comment: str):
    assert "hedge" not in wishes(comment)


@pytest.mark.parametrize(
    "comment",
    [
        "Wordier than I wanted, but all of it is useful. Keep it.",
        # "Tone's" is no imperative, and leaving it as it is asks for no change
        "Tone's a touch formal for me, but it didn't bother me at all, leave it as it is.",
        "No need to change anything. It's how I'd explain it to new starters myself.",
        "Superb. A touch long, but honestly I'd rather keep it as it is than lose anything.",
    ],
)
def test_keep_it_after_a_conceded_fault_leaves_the_answer_alone(comment: str):
    from trainer.reward_analyzer import analyze

    analysis = analyze(8, comment, [])
    assert [a.want for a in analysis.aspects if a.want and a.action != "keep"] == []


@pytest.mark.parametrize(
    ("comment", "proposed"),
    [
        ("Great work. A touch long.", "shorter"),
        ("Excellent answer. A little too formal.", "casual"),
    ],
)
def test_a_fault_only_remarked_under_a_high_score_is_proposed_not_acted_on(
    comment: str, proposed: str
):
    from trainer.reward_analyzer import analyze

    analysis = analyze(9, comment, [])
    assert [a.want for a in analysis.aspects if a.want and a.action == "add"] == []
    (unsure,) = analysis.unsure
    assert "score of 9" in unsure.why and unsure.proposed == [proposed]


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("Great piece, but a shade too stiff.", "casual"),
        ("Very good. Could the ending be shorter?", "shorter"),
        ("Near perfect. Next time put the totals in a table.", "table"),
        ("Lovely work. I do wish it had said where the mileage rates came from.", "cite_sources"),
        ("Strong draft. It would be nice if the totals sat in a table.", "table"),
        ("Great plan. A little long, though; I'd trim the middle.", "shorter"),
    ],
)
def test_a_fault_after_a_but_or_an_outright_ask_under_a_high_score_is_acted_on(
    comment: str, family: str
):
    from trainer.reward_analyzer import analyze

    analysis = analyze(9, comment, [])
    assert family in {a.want for a in analysis.aspects if a.action == "add"}
    assert analysis.unsure == []


@pytest.mark.parametrize(
    "comment",
    [
        "We never asked for a list here.",
        "Please don't squash the whole plan into a table.",
        "Nobody here has ever needed a table.",
    ],
)
def test_a_negation_that_does_not_frame_the_cue_changes_nothing_and_is_said_back(comment: str):
    reading = feedback_reader.read(comment)
    assert reading.wishes == []
    assert [u.why for u in reading.unsure] == [feedback_reader._NEGATION_UNPLACED]


@pytest.mark.parametrize(
    "comment",
    [
        "Describe them properly.",
        "Give me one, with notes.",
        "Describe the risk register ('high', 'medium'",
        "Mention the budget and you get a lecture on accounting.",
    ],
)
def test_a_request_that_cannot_stand_alone_in_the_prompt_is_not_copied_into_it(comment: str):
    reading = feedback_reader.read(comment)
    assert [w for w in reading.wishes if w.family == "custom"] == []
    assert reading.unsure and reading.unsure[0].quote in comment


def test_a_request_that_stands_alone_is_still_taken_as_written():
    request = "Mention the parking arrangements for visitors."
    (wish,) = feedback_reader.read(request).wishes
    assert (wish.family, wish.detail) == ("custom", request)


@pytest.mark.parametrize(
    ("comment", "families"),
    [
        ("Trim it down, but go into much more depth on each supplier.", {"shorter", "longer"}),
        ("Be more confident, and say where you're unsure.", {"direct", "hedge"}),
    ],
)
def test_a_wish_and_its_opposite_in_one_comment_change_nothing_and_are_offered_both(
    comment: str, families: set[str]
):
    reading = feedback_reader.read(comment)
    assert reading.wishes == []
    (unsure,) = reading.unsure
    assert families <= set(unsure.proposed)  # each offered (beside its take-back)


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("Never use tables for this.", "prose"),
        ("Don't use bullet points.", "prose"),
        ("Please do not give me a table.", "prose"),
    ],
)
def test_an_imperative_refusal_of_a_form_never_asks_for_that_form(comment: str, family: str):
    assert wishes(comment) == {family}


def test_a_form_asked_for_beside_one_refused_is_the_one_meant():
    reading = feedback_reader.read("Lay the figures out as a table, don't write paragraphs.")
    # the table asked for, the paragraphs refused: taken back, never asked for
    assert {(w.action, w.family) for w in reading.wishes} == {("add", "table"), ("remove", "prose")}


def test_a_quoted_opening_with_its_own_sentences_is_read_as_one_quotation():
    comment = "'Hi all! Big news!' is not how we write to a county court. Far more formal."
    assert wishes(comment) == {"formal"}


@pytest.mark.parametrize(
    "comment",
    [
        "The Rotterdam crew are fluent in English, so that's fine.",
        "Our readers in Brussels read English and French.",
    ],
)
def test_what_the_readers_read_asks_for_no_language_when_it_is_english_or_two(comment: str):
    assert "language" not in wishes(comment)


def test_readers_who_barely_read_english_ask_for_their_place_s_language():
    (wish,) = feedback_reader.read("The depot team in Lyon barely read English.").wishes
    assert (wish.family, wish.detail) == ("language", "French")


def test_a_form_counted_in_ironic_praise_is_not_asked_for():
    from trainer.reward_analyzer import analyze

    analysis = analyze(2, "Oh splendid, an eleven-bullet reply to a yes-or-no question.", [])
    assert [a.want for a in analysis.aspects if a.want and a.action == "add"] == []


def test_what_the_answer_is_for_after_a_complaint_is_its_reason_not_a_wish():
    assert wishes("A shade too starchy for a team chat message.") == {"casual"}
    assert wishes("Much too long for a board paper.") == {"shorter"}


def test_a_part_buried_in_a_sentence_is_not_a_late_conclusion():
    assert "conclusion_first" not in wishes("The shell command is buried inside a sentence.")
    assert wishes("The decision is buried in paragraph nine.") == {"conclusion_first"}


def test_keeping_a_named_part_beside_a_cut_approves_the_part():
    reading = feedback_reader.read("Tighter, but keep the three diagrams.")
    assert {(w.family, w.action) for w in reading.wishes} == {("shorter", "add")}


def test_without_a_single_part_finds_it_missing():
    assert wishes("Forty lines without a single heading.") == {"headings"}


def test_one_named_paragraph_refused_is_a_part_not_a_wish_for_another_form():
    reading = feedback_reader.read("Skip the 'what is a VPN' paragraph, I run the network.")
    assert [w.family for w in reading.wishes if w.aspect == "format"] == []


def test_briefings_are_not_a_wish_for_brevity_and_agreement_errors_are_grammar():
    assert "shorter" not in wishes("Please write the weekly briefings in Dutch.")
    assert wishes("Tense errors in every other line.") == {"proofread"}


def test_a_rhetorical_comparative_complains_of_too_much():
    assert wishes("Could this possibly get any wordier?") == {"shorter"}


def test_sparing_a_part_from_a_cut_keeps_it():
    reading = feedback_reader.read("Drop the anecdotes, not the caveats.")
    assert "direct" not in {w.family for w in reading.wishes}
    assert "hedge" in {k.family for k in reading.kept}


def test_a_part_that_falls_flat_is_a_complaint_about_it():
    assert "casual" not in wishes("The puns don't land with a grieving family.")


def test_readers_who_are_not_experts_ask_for_a_simpler_answer_and_keep_no_expert_pitch():
    reading = feedback_reader.read("Fine for specialists; our readers are not specialists.")
    assert {w.family for w in reading.wishes} == {"simpler"}
    assert reading.kept == []


def test_a_general_fault_said_of_the_tone_is_no_claim_of_made_up_facts():
    reading = feedback_reader.read("The facts hold up, but the register is wrong for a hospice.")
    assert "no_fabrication" not in {w.family for w in reading.wishes}
    assert any(u.why == feedback_reader._OTHER_ASPECT for u in reading.unsure)


@pytest.mark.parametrize(
    ("comment", "families"),
    [
        ("It's not wrong, just long.", {"shorter"}),
        ("It isn't warm enough.", {"warmer"}),
        ("Stop apologising in every paragraph.", set()),
    ],
)
def test_a_denied_fault_a_lack_and_a_place_in_the_answer(comment: str, families: set[str]):
    assert wishes(comment) == families


def test_what_is_said_of_a_part_the_answer_has_is_no_wish_for_more_of_it():
    assert wishes("Fine, but the examples are all from Silicon Valley.") == set()
    assert wishes("The examples are missing.") == {"example"}


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("Lovely. Maybe a shade warmer.", "warmer"),
        ("Still great; a diagram would finish it off.", None),
        ("Very nice. Could the ending be shorter?", "shorter"),
    ],
)
def test_a_mild_request_under_a_high_score_is_still_a_request(comment: str, family: str | None):
    from trainer.reward_analyzer import analyze

    analysis = analyze(8, comment, [])
    assert not any("score of 8" in u.why for u in analysis.unsure)
    if family:
        assert family in {a.want for a in analysis.aspects if a.action == "add"}


def test_forget_or_skip_a_part_takes_it_back_and_plain_words_ask_for_simpler():
    reading = feedback_reader.read("Forget the table, the printers mangle it.")
    assert [(w.family, w.action) for w in reading.wishes] == [("table", "remove")]
    assert wishes("Plain words, please: the supervisors are not engineers.") == {"simpler"}


def test_a_tone_named_as_a_thing_to_drop_is_taken_back():
    reading = feedback_reader.read("Undo that, and drop the chatty tone altogether.")
    assert {(w.family, w.action) for w in reading.wishes} == {
        ("undo", "remove"),
        ("casual", "remove"),
    }


def test_a_noun_ending_in_er_is_no_comparative():
    # "disclaimer" is not "more disclaim": what the answer sounds like is the complaint
    assert wishes("It sounds like a legal disclaimer.") == {"direct"}


def test_what_will_do_is_asked_for():
    assert wishes("Plain and polite will do.") == {"simpler"}


def test_less_of_a_quality_with_no_opposite_softens_it_and_keep_the_rest_approves():
    reading = feedback_reader.read("Less warmth, please; keep the rest.")
    assert [(w.family, w.action) for w in reading.wishes] == [("warmer", "less")]


def test_a_list_gone_wrong_is_no_claim_of_made_up_facts():
    reading = feedback_reader.read("The numbering has gone wrong: every other line is a number.")
    assert "no_fabrication" not in {w.family for w in reading.wishes}


def test_a_part_taken_out_with_the_verb_split_around_it_is_taken_back():
    reading = feedback_reader.read("The bullet points chop up the times. Take the bullets out.")
    assert ("bullets", "remove") in {(w.family, w.action) for w in reading.wishes}
    assert "bullets" not in {w.family for w in reading.wishes if w.action == "add"}


@pytest.mark.parametrize(
    ("comment", "language", "read"),
    [
        ("कृपया उत्तर हिंदी में लिखिए।", "Hindi", True),  # a second spelling of the name, "in"
        ("من فضلك اكتب بالعربية", "Arabic", True),  # "bi-" joined to the name: "in Arabic"
        ("回答は日本語でお願いします。", "Japanese", True),  # the name inside a word: "in Japanese"
        ("Please answer in 中文 from now on.", "Chinese", True),
        ("日本語の説明は要りません。", None, True),  # the name, not asked for
    ],
)
def test_a_language_named_in_its_own_script_is_asked_for_by_that_script_s_words(
    comment: str, language: str | None, read: bool
) -> None:
    reading = feedback_reader.read(comment)
    asked = [w.detail for w in reading.wishes if w.family == "language"]
    assert asked == ([language] if language and read else [])
    offered = [p for u in reading.unsure for p in u.proposed]
    assert offered == ([] if read or not language else [f"language:{language.lower()}"])


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("Half of it went over the apprentices' heads.", "simpler"),
        ("The trainees got stuck on terms like 'amortisation'.", "simpler"),
        ("I've been wiring houses for fifteen years.", "technical"),
        ("I do this for a living, so skip the primer.", "technical"),
        ("She only ever reads the opening line.", "conclusion_first"),
        ("Sure, tuck the price away at the bottom, nobody needs it.", "conclusion_first"),
        ("It has all the charm of a parking ticket.", "warmer"),
        ("Great quote; it would be even better if the author existed.", "no_fabrication"),
        ("It weighs the options for ages and never actually recommends one.", "direct"),
        ("You've got a unit converter right there; use it instead of guessing.", "tool_use"),
        ("Great, a history of the firm. I asked about the notice period.", "focus"),
        ("My only gripe: no worked example of a payslip.", "example"),
        ("No example of a real timetable anywhere.", "example"),
        ("State which plan is cheaper in the opening sentence.", "conclusion_first"),
        ("I need the complete derivation, every step spelled out.", "longer"),
        ("Just the facts in as few words as possible.", "shorter"),
        ("It's a letter to the mayor's office.", "formal"),
        ("It reads like a tenancy agreement.", "casual"),
        ("Say plainly whether I should sign it.", "direct"),
        ("What a bold stance: 'it depends'.", "direct"),
        ("Qualify your claims; the studies disagree.", "hedge"),
        ("Wow, six screens to tell me the bus is late.", "shorter"),
        ("Tell me at the very top whether the ferry runs.", "conclusion_first"),
        ("Why must I scroll to the bottom for the answer?", "conclusion_first"),
        ("Tell me which supplier to call first, before the history.", "conclusion_first"),
        ("Less 'it could vary', more 'do this'.", "direct"),
        ("Say which numbers you're unsure of instead of stating everything as fact.", "hedge"),
        ("Loved how it made up a quote out of thin air.", "no_fabrication"),
        ("The one command I needed was hidden in a paragraph.", "code_block"),
        ("The people reading this are veteran engineers.", "technical"),
        ("That 20% discount came out of nowhere.", "no_fabrication"),
        ("Don't quote a deadline unless you really know it.", "no_fabrication"),
        ("My crew have spent decades at sea; they'll feel talked down to.", "technical"),
        ("A one-line summary is no use to me. Go through it clause by clause.", "longer"),
        ("The chummy sign-off ('laters, folks!') has to go.", "formal"),
        ("Go much deeper on the tax step; a shorter version would lose the part I need.", "longer"),
        ("Don't write it so formally, we're a bike shop.", "casual"),
        ("This should read more like a board paper than a chat with a pal.", "formal"),
        ("Where you're unsure, say so, and flag which figures you're guessing.", "hedge"),
        ("Then, at the bottom, add a two-line summary of what changed.", "summary_at_end"),
        ("Please don't pad it. Just the rule in a few lines.", "shorter"),
        ("Lose the kitchen analogies and show me the equations.", "technical"),
        ("Stop dumbing it down; I run the network here.", "technical"),
        ("He keeps losing his place in the paragraph between valves.", "numbered"),
        ("Less 'it could perhaps be argued', more 'do this'.", "direct"),
        ("Nine hundred words to tell me whether the hall is free.", "shorter"),
        ("It is not a chat with a pal.", "formal"),
        ("Rather than a table, prose please; a table breaks the reading.", "prose"),
        ("It never says where the rates come from; name the source.", "cite_sources"),
        ("They have run Postgres in production for years.", "technical"),
        (
            "I'm a consultant anaesthetist; I don't need 'the drug makes you sleep' explained.",
            "technical",
        ),
        ("I'd rather you went deeper on the risks than trimmed them.", "longer"),
        ("A clause-by-clause walkthrough, please.", "longer"),
        ("A nine-step setup as one solid paragraph; I never know which step I'm on.", "numbered"),
        ("Number them, please.", "numbered"),
        ("Give them one thing to picture, like a coin for the Moon.", "example"),
        ("A straight call, not six maybes.", "direct"),
        ("Don't write like it's a terms-of-service page; it's for our Discord.", "casual"),
        ("Sure, because every tenant knows what 'an indemnity covenant' means.", "simpler"),
        ("Put the total with the pound sign first.", "conclusion_first"),
        ("Our auditor traces every number back to the page it came from.", "cite_sources"),
        ("You can assume I know what a capacitor is.", "technical"),
        ("Skip the dumbed-down version; give me the proper part names.", "technical"),
        ("Less hand-holding, please.", "technical"),
        ("Don't give me the beginner's tour; go into the technical side.", "technical"),
        ("Fantastic, nine paragraphs for a yes-or-no question.", "shorter"),
        ("Stop quoting prices you can't back up.", "no_fabrication"),
        ("A touch long; you could lose a paragraph or two.", "shorter"),
        ("The whole board values pension schemes for a living.", "technical"),
        ("Straight answers beat careful qualifications here.", "direct"),
        ("Don't state guesses as fact.", "hedge"),
        ("What the crew need is the plain-English version.", "simpler"),
        ("Two lines? Is that it?", "longer"),
        ("Everyone on the list fixes boilers for a living.", "technical"),
        ("I need the paper behind every figure you give.", "cite_sources"),
        ("It reads like a letter from the bank; talk to me like a normal person.", "casual"),
        ("Oh wonderful, a six-paragraph essay to tell me when the shop shuts.", "shorter"),
        ("Love how it recommended a book by an author who doesn't exist.", "no_fabrication"),
        ("A date that appears in no parish record anywhere.", "no_fabrication"),
        ("Where a figure is only an estimate, say so.", "hedge"),
        ("'Dear Sir or Madam' for a quiz night invite? Come on.", "casual"),
    ],
)
def test_what_a_reader_is_and_does_says_what_to_change(comment: str, family: str):
    _read_as(comment, family, weak=False)


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("Half the words were new to me, and I loved learning them.", "shorter"),
        ("I asked about the lease and got exactly that, thanks.", "focus"),
        ("The third paragraph is the best part.", "prose"),
        ("I never decide quickly, so the detail helps.", "direct"),
        ("Great answer, and my manager liked it too.", "simpler"),
        ("Ah yes, 'super relaxed' in a letter to the tax office.", "casual"),
        ("Casual is fine for the newsletter, but this one goes to the board.", "casual"),
        ("Formal was the right tone here, stick with it.", "casual"),
        ("You've aimed this at a new starter; I run the plant.", "simpler"),
        ("A one-line summary of the contract is no use to me.", "shorter"),
        ("Way too technical, dumb it down a little.", "technical"),
        ("Leave out the chemical equations; it's for a primary class.", "technical"),
        ("My dad reads these on his phone between customers.", "simpler"),
        ("Don't pad it out with caveats; say what you'd do.", "hedge"),
        ("The couriers read it on a phone clipped to the dashboard.", "longer"),
        ("The example helps, even if it's a made-up scenario.", "no_fabrication"),
        ("Stop flagging the word count as failed.", "hedge"),
        ("It assumes I know what an annuity is. I don't.", "technical"),
        ("Write a beginner's guide to the allotment rules.", "technical"),
        ("My only gripe is that it runs long.", "longer"),
        ("What the crew need is the plain-English version.", "language"),
        ("A touch long; you could lose a paragraph or two.", "bullets"),
        ("Love how it recommended a novel by our author that doesn't exist.", "shorter"),
        ("Keep it brief. A longer, more detailed version would be wasted on me.", "longer"),
    ],
)
def test_words_that_only_look_like_a_situation_ask_for_nothing_of_it(comment: str, family: str):
    assert family not in wishes(comment)


def test_a_focus_asked_instead_is_written_in_the_trainer_s_words():
    read = feedback_reader.read("Focus on the refund rules instead, please.")
    assert [w.detail for w in read.wishes if w.family == "focus"] == ["on:the refund rules"]


@pytest.mark.parametrize(
    ("comment", "wanted", "rival"),
    [
        ("Plain paragraphs are better; this goes into a eulogy.", "prose", "bullets"),
        ("Short is better for me, I read these at the till.", "shorter", "longer"),
        ("Scratch that — relaxed is better, it's a team quiz.", "casual", "formal"),
        ("Bullet points would work better on the noticeboard.", "bullets", "prose"),
    ],
)
def test_a_kind_named_bare_as_better_is_asked_for(comment: str, wanted: str, rival: str):
    reading = _read(comment)
    assert wanted in {w.family for w in reading.wishes if w.action == "add"}
    assert rival not in {w.family for w in reading.wishes if w.action == "add"}
    assert wanted not in {k.family for k in reading.kept}


@pytest.mark.parametrize(
    "comment", ["The numbered list is better now.", "Numbered steps read better."]
)
def test_this_answer_s_part_called_better_is_kept_not_asked_again(comment: str):
    reading = _read(comment)
    assert reading.wishes == []
    assert {k.family for k in reading.kept} == {"numbered"}


def test_forget_that_takes_back_what_came_before_not_the_kind_after_it():
    reading = _read("Previously I asked you for stiff formality. Forget that: casual is better.")
    assert ("add", "formal") not in {(w.action, w.family) for w in reading.wishes}
    assert "casual" in {w.family for w in reading.wishes if w.action == "add"}


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        # a negative question asks as "could you" does
        ("Can't you lead with the verdict?", "conclusion_first"),
        ("Couldn't you number the steps?", "numbered"),
        ("Why can't you just give me a straight yes or no?", "direct"),
        ("Won't you say where the figures come from?", "cite_sources"),
        # a change asked by what it would do, or what the answer should become
        ("Less hand-holding, please; get technical about the valves.", "technical"),
        ("Put it the way you'd put it to a shopper at the till.", "simpler"),
        ("Nice draft. Some headings would lift it.", "headings"),
    ],
)
def test_a_request_said_indirectly_is_asked_for(comment: str, family: str):
    assert family in {w.family for w in _read(comment).wishes if w.action == "add"}


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("Honestly the table was a mistake; take it back out.", "table"),
        ("All that warmth was a mistake. Lose the warmth.", "warmer"),
        ("The numbered list is a mistake, lose it.", "numbered"),
    ],
)
def test_a_part_called_a_mistake_is_taken_out_not_read_as_a_wrong_fact(comment: str, family: str):
    reading = _read(comment)
    assert ("remove", family) in {(w.action, w.family) for w in reading.wishes}
    assert "no_fabrication" not in wishes(comment)


def test_a_mistake_in_the_facts_is_still_a_wrong_fact():
    assert "no_fabrication" in wishes("There's a mistake in the totals for March.")


def test_a_version_described_then_numbered_is_a_revert():
    reverts = [w for w in _read("Return to the chatty draft from before (v4).").wishes]
    assert [(w.family, w.detail) for w in reverts] == [("revert", "4")]


def test_picking_a_number_of_points_asks_for_that_many():
    found = [w for w in _read("Choose the four that count and drop the others.").wishes]
    assert [(w.family, w.detail) for w in found if w.family == "key_points"] == [
        ("key_points", "four")
    ]


def test_cutting_it_by_an_amount_sizes_the_answer_not_the_form_just_asked_for():
    reading = _read("Switch to a grid rather than prose. It runs long too, so cut it by a third.")
    asked = {(w.action, w.family) for w in reading.wishes}
    assert {("add", "table"), ("add", "shorter")} <= asked
    assert ("remove", "table") not in asked


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("What we'd prefer is a table of the three offers.", "table"),
        (
            "Honestly I would rather get a short list, dates and owners only, than any essay.",
            "bullets",
        ),
        ("Set the risks and benefits out in a table.", "table"),
    ],
)
def test_a_preference_said_around_an_aside_is_asked_for(comment: str, family: str):
    reading = _read(comment)
    assert family in {w.family for w in reading.wishes if w.action == "add"}
    assert not {"prose", "longer"} & {w.family for w in reading.wishes if w.action == "add"}


def test_no_longer_is_a_time_not_a_length():
    assert "longer" not in wishes("We no longer need the timeline; skip it next time.")


def test_a_form_said_to_flatten_the_argument_is_refused():
    assert "bullets" not in wishes("Bullet points would flatten an argument like this.")


def test_a_request_nothing_was_read_in_is_said_back_not_dropped():
    """A request in words no rule places is listed as not understood (the rater picks what
    was meant); praise that asks to leave it alone is not."""
    reading = _read("Fine. I'd like it to feel like a neighbour leaning over the fence.")
    assert reading.wishes == []
    assert [u.why for u in reading.unsure] == [feedback_reader._UNREAD]
    assert "neighbour" in reading.unsure[0].quote
    for praise in ("Spot on. I wouldn't change a word.", "Leave it exactly as it is, please."):
        assert _read(praise).unsure == []


def test_refusing_to_get_technical_is_not_a_wish_for_it():
    assert "technical" not in wishes("Please don't get technical with the volunteers.")
