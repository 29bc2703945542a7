"""Filters over the metadata a dataset carries (`Sampling(where=...)`), worked out once over its
index: the expression and its evaluation, and the columns it reads (a storage's own, a side
table's, the fields of WebDataset ``json`` members), and a schedule of filters by step that each epoch
reads under (`FilterSchedule`, `ScheduledFilters`)."""

from ._filter_schedule import FilterSchedule
from ._scheduled_filters import ScheduledFilters
from ._where import Where, describe, filter_storage, shuffle_quality

__all__ = ["FilterSchedule", "ScheduledFilters", "Where", "describe", "filter_storage", "shuffle_quality"]
