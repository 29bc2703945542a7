"""Visibility: the data-wait meter, bottleneck diagnosis in words (knowing when other processes or
a CPU limit hold the cores), run reports, and the provenance ledger with replay."""

from ._contention import Contention, CpuLimits, CpuMeter, CpuSnapshot, CpuWatch
from ._diagnosis import Diagnosis, StageState, diagnose
from ._ledger import ProvenanceLedger, ledger_metadata, read_ledger
from ._meter import DataWaitMeter, DataWaitReport
from ._replay import replay
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
    "ProvenanceLedger",
    "StageState",
    "diagnose",
    "ledger_metadata",
    "read_ledger",
    "replay",
    "write_report",
]
