"""Selection across a session's lineages: how each version of each lineage did, and the front.

A version's record is its mean score over the cycles its outputs were scored on and the share of
the standing checks those outputs passed (the checks of the wishes its lineage's rater made and
had not taken back). A version scored on fewer than ``MIN_SCORED_CYCLES`` cycles is untested
and stays off the front. One version dominates another when it is at least as good on both
measures and better on one; the tested versions no other tested version dominates are the front.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

MIN_SCORED_CYCLES = 2


class VersionRecord(BaseModel):
    """One version of one lineage over the cycles its outputs were scored on."""

    model_config = ConfigDict(frozen=True)

    lineage_id: str
    label: str
    version: int
    scores: tuple[float, ...] = ()  # one per scored cycle (a cycle's scores averaged)
    checks_passed: int = 0
    checks: int = 0  # standing checks measured on those outputs
    # the wishes standing on the version, in the chips' words (what its outputs are checked
    # against, scored or not yet)
    standing: tuple[str, ...] = ()
    # the version a branch's first version is (``"A v3"``), None for any other
    branched_from: str | None = None
    champion: bool = False  # the version promoted as the session's champion

    @property
    def name(self) -> str:
        return f"{self.label} v{self.version}"

    @property
    def cycles(self) -> int:
        return len(self.scores)

    @property
    def mean_score(self) -> float | None:
        return sum(self.scores) / len(self.scores) if self.scores else None

    @property
    def checks_share(self) -> float:
        """Passed over measured; a version checked against no wish failed none (1.0)."""
        return self.checks_passed / self.checks if self.checks else 1.0

    @property
    def tested(self) -> bool:
        return self.cycles >= MIN_SCORED_CYCLES

    def dominates(self, other: VersionRecord) -> bool:
        mine, theirs = self._measures(), other._measures()
        return all(a >= b for a, b in zip(mine, theirs, strict=True)) and mine != theirs

    def _measures(self) -> tuple[float, float]:
        return (self.mean_score or 0.0, self.checks_share)


class FrontRow(BaseModel):
    """A version as the report and the review page show it."""

    model_config = ConfigDict(frozen=True)

    record: VersionRecord
    on_front: bool
    dominated_by: tuple[str, ...] = ()  # the tested versions that dominate it (names)


def front(records: list[VersionRecord]) -> list[FrontRow]:
    """Every version, in the order given, marked on the front or not (untested versions never
    are), with the tested versions that dominate it."""
    tested = [r for r in records if r.tested]
    rows = []
    for record in records:
        over = tuple(o.name for o in tested if o is not record and o.dominates(record))
        rows.append(FrontRow(record=record, on_front=record.tested and not over, dominated_by=over))
    return rows
