"""Custom search attributes, so `temporal workflow list --query` finds lineages."""

from temporalio.common import SearchAttributeKey

SESSION = SearchAttributeKey.for_keyword("TrainingCampSession")
LINEAGE = SearchAttributeKey.for_keyword("TrainingCampLineage")
STATUS = SearchAttributeKey.for_keyword("TrainingCampStatus")

ALL = (SESSION, LINEAGE, STATUS)
