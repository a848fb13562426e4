"""Read side: every view's queries in one object, what activities, the CLI and tests ask of
the store (``Store.queries``). Each view's reads live in its own module beside it."""

from __future__ import annotations

from store.views.check_view import CheckView
from store.views.correction_view import CorrectionView
from store.views.dataset_view import DatasetView
from store.views.evolution_view import EvolutionView
from store.views.feedback_view import FeedbackView
from store.views.lineage_view import LineageView
from store.views.log_view import LogView
from store.views.rollout_view import RolloutView
from store.views.selection_view import SelectionView


class StoreQueries(
    SelectionView,
    FeedbackView,
    CorrectionView,
    EvolutionView,
    LineageView,
    RolloutView,
    DatasetView,
    LogView,
    CheckView,
):
    """Lineages and agent versions, rollouts and attempts, feedback and its corrections,
    evolutions, selection across lineages, Lightning datasets and the log, over one read engine
    and one payload cache."""
