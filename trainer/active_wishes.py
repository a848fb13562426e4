"""The wishes a lineage checks every output against: asked for and not taken back.

After each cycle step the active wishes are folded from the ones before and what the comment
asked: a wish asked again replaces the older one of its family (a new amount wins; "shorter"
without one means shorter than the output it was asked on, unless an amount stands: that
stays), a take-back removes it — and for a
form ("drop the table") leaves its absence to check — and a phrase to avoid (``avoid:"…"``,
read from "no 'worth noting'" or picked) is checked from then on, if the rater kept it: a
phrase the comment quotes is never banned behind the rater's back. A wish for a form stays
active exactly while its family is on the trainer's keep-list (``asked_for``), so the checks
and the guard against changes that break a wish agree.

A wish no count settles ("warmer", "cite sources", a focus: ``trainer.checks.UNCHECKABLE``)
stays active alike, so every output lists it as "not checked" and why; it is never measured,
and guards nothing a measured wish does not (``measured``). A focus and a request in the
rater's own words are on no keep-list: they go when taken back, rolled back or undone.
"""

from __future__ import annotations

from collections.abc import Collection

from domain.answer_parts import unscoped
from domain.checks import MAX_ACTIVE_WISHES, MAX_WISH_QUOTE_CHARS, ActiveWish
from domain.trainer import FeedbackAspect
from trainer.checks import CHECKED, FORMS, UNCHECKABLE, quoted_sentences
from trainer.reading.wish import Wish

# a take-back of one of these leaves its absence to check ("drop the table": no table)
ABSENCE_CHECKED = frozenset({*FORMS, "example", "summary_at_end"})
MAX_BANNED = 8  # phrases banned at once: the latest stay
# the families a wish stays active for: measured, or listed as not checked
KEPT = CHECKED | UNCHECKABLE.keys()
# families the keep-list never names (cycle_step._asked_for): their wishes stand on their own
OFF_THE_KEEP_LIST = frozenset({"custom", "focus"})


def measured(wishes: list[ActiveWish]) -> list[ActiveWish]:
    """The wishes a check measures: the ones that guard the agent's instructions and lead its
    prompt (a wish listed as "not checked" does neither)."""
    return [w for w in wishes if w.family in CHECKED]


def fold(
    before: list[ActiveWish],
    *,
    wished: list[Wish],
    approved: list[FeedbackAspect],
    taken_back: list[Wish],
    asked_for: list[str],
    comment: str | None,
    cycle: int,
    words: int | None,
    dropped: Collection[str] = (),
) -> list[ActiveWish]:
    """The active wishes after a step (see the module's doc), at most ``MAX_ACTIVE_WISHES``
    (the oldest unmeasured ones go first). ``dropped``: the families the step rolled back or
    undid."""
    active = {w.key: w for w in before}
    for wish in taken_back:
        # a language taken back for one part leaves the others ("no German summary")
        part = unscoped(wish.detail)[1] if wish.family == "language" and wish.detail else None
        part = wish.detail if wish.family == "banned" else part  # that phrase, not every one
        for key in [k for k in active if k[0] == wish.family and part in (None, k[1])]:
            del active[key]
        if wish.family in ABSENCE_CHECKED:
            absent = _wish(wish.family, "remove", None, None, wish.quote, cycle, words)
            active[absent.key] = absent
    for wish in wished:
        if wish.weak or wish.family not in KEPT:
            continue
        if wish.action == "less":
            active.pop((wish.family, ""), None)
            continue
        if wish.action == "remove":
            continue  # a take-back: above
        if wish.family == "banned":  # a phrase to avoid (``avoid:"…"``): checked absent
            banned = _wish("banned", "remove", None, wish.detail, wish.quote, cycle, words)
            active.pop(banned.key, None)
            active[banned.key] = banned
            continue
        standing = active.get((wish.family, ""))
        if wish.amount is None and standing is not None and standing.amount is not None:
            continue  # "still too long" after "about 90 words": the amount named stays
        detail = wish.detail if _detailed(wish.family) else None
        if wish.family == "simpler":
            # the sentence the rater quoted as the problem must not come back
            detail = next(iter(quoted_sentences(comment)), None)
        new = _wish(wish.family, "add", wish.amount, detail, wish.quote, cycle, words)
        active[new.key] = new
    for aspect in approved:
        family = aspect.want or ""
        if family in KEPT and family not in ("shorter", "longer") and (family, "") not in active:
            # praise of a form that is there: keep checking it is ("the table works")
            detail = aspect.detail if _detailed(family) else None
            kept = _wish(family, "add", aspect.amount, detail, aspect.quote or "", cycle, words)
            active[kept.key] = kept
    # a language is taken back part by part (above): a German summary taken back leaves the
    # answer's Norwegian, though the keep-list no longer names the family
    kept_wishes = [
        w
        for w in active.values()
        if w.action == "remove"
        or w.family in asked_for
        or w.family == "language"
        or (w.family in OFF_THE_KEEP_LIST and w.family not in dropped)
    ]
    banned_now = [w for w in kept_wishes if w.family == "banned"]
    for old in banned_now[:-MAX_BANNED]:
        kept_wishes.remove(old)
    return bounded(kept_wishes)


def bounded(wishes: list[ActiveWish]) -> list[ActiveWish]:
    """At most ``MAX_ACTIVE_WISHES``, in order: past the bound the oldest wish listed as not
    checked goes first, then the oldest of the rest."""
    over = len(wishes) - MAX_ACTIVE_WISHES
    if over <= 0:
        return wishes
    oldest = {id(w) for w in [w for w in wishes if w.family not in CHECKED][:over]}
    kept = [w for w in wishes if id(w) not in oldest]
    return kept[-MAX_ACTIVE_WISHES:]


def _detailed(family: str) -> bool:
    """Whether a wish keeps what it names: a language, or what an unmeasured wish is said by
    (a focus's topics, a request's words)."""
    return family == "language" or family not in CHECKED


def _wish(
    family: str,
    action: str,
    amount: object,
    detail: str | None,
    quote: str,
    cycle: int,
    words: int | None,
) -> ActiveWish:
    return ActiveWish.model_validate(
        {
            "family": family,
            "action": action,
            "amount": amount,
            "detail": detail[:120] if detail else None,
            "quote": quote[:MAX_WISH_QUOTE_CHARS],
            "cycle": cycle,
            "made_on_words": words,
        }
    )
