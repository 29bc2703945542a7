"""Visibility: the data-wait meter, bottleneck diagnosis in words (knowing when other processes or
a CPU limit hold the cores), run reports, the provenance ledger with replay, and live metrics for Prometheus."""

from ._contention import Contention, CpuLimits, CpuMeter, CpuSnapshot, CpuWatch
from ._diagnosis import Diagnosis, StageState, diagnose
from ._ledger import ProvenanceLedger, ledger_metadata, read_ledger
from ._meter import DataWaitMeter, DataWaitReport
from ._metrics import MetricsServer, RunTotals, serve_metrics
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
    "MetricsServer",
    "ProvenanceLedger",
    "RunTotals",
    "StageState",
    "diagnose",
    "ledger_metadata",
    "read_ledger",
    "replay",
    "serve_metrics",
    "write_report",
]
