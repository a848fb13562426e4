"""Reading: what a reviewer's comment asks of the answer (the trainer's first step).

``reader`` splits a comment into clauses and reads each with the cue tables (``cue_tables``,
data under ``cues/``), other comment languages (``comment_languages``), language names
(``languages``), take-backs and amounts (``wish_actions``) and the rater's corrections
(``memory``); a ``Wish`` (``wish``) is what comes out. Planning and judging live beside this
package in ``trainer/``.
"""
