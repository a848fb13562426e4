"""Reading: what a reviewer's comment asks of the answer (the trainer's first step).

``reader`` reads each clause of a comment with the cue tables (``cue_tables``, data in
``cues/``), roles of rival mentions (``constructions``), other comment languages
(``comment_languages``), language and place names (``languages``, ``places``), take-backs and
amounts (``wish_actions``) and the rater's corrections (``memory``), into ``Wish``es (``wish``).
"""
