"""Visibility: the data-wait meter, bottleneck diagnosis in words, run reports."""

from ._diagnosis import Diagnosis, StageState, diagnose
from ._meter import DataWaitMeter, DataWaitReport
from ._report import write_report

__all__ = ["DataWaitMeter", "DataWaitReport", "Diagnosis", "StageState", "diagnose", "write_report"]
