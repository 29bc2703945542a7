"""Visibility: the data-wait meter, bottleneck diagnosis in words (knowing when other processes or
a CPU limit hold the cores), run reports."""

from ._contention import Contention, CpuLimits, CpuMeter, CpuSnapshot, CpuWatch
from ._diagnosis import Diagnosis, StageState, diagnose
from ._meter import DataWaitMeter, DataWaitReport
from ._report import write_report

__all__ = [
    "Contention",
    "CpuLimits",
    "CpuMeter",
    "CpuSnapshot",
    "CpuWatch",
    "DataWaitMeter",
    "DataWaitReport",
    "Diagnosis",
    "StageState",
    "diagnose",
    "write_report",
]
