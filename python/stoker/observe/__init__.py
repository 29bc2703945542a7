"""Visibility: the data-wait meter for training loops (bottleneck diagnosis comes with `stoker bench`)."""

from ._meter import DataWaitMeter, DataWaitReport

__all__ = ["DataWaitMeter", "DataWaitReport"]
