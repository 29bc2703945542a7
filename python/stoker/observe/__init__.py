"""Visibility: the data-wait meter, bottleneck diagnosis in words (knowing when other processes or
a CPU limit hold the cores), run reports, the provenance ledger (its replay is `stoker.loader.replay`), and live metrics for Prometheus, and the straggler of a synchronous job named across its ranks."""

from .._deprecation import moved_names
from ._contention import Contention, CpuLimits, CpuMeter, CpuSnapshot, CpuWatch
from ._diagnosis import Diagnosis, StageState, diagnose
from ._exclusions import read_exclusions, write_exclusion
from ._ledger import ProvenanceLedger, ledger_metadata, read_ledger
from ._ledger_query import ledger_keys
from ._meter import DataWaitMeter, DataWaitReport
from ._metrics import MetricsServer, serve_metrics
from ._report import write_report
from ._snapshot import LiveSnapshot, RunTotals, Snapshotting
from ._straggler import RankFigures, StageFigures, straggler_verdict
from ._straggler_watch import StragglerWatch
from ._top import top

__all__ = [
    "Contention",
    "CpuLimits",
    "CpuMeter",
    "CpuSnapshot",
    "CpuWatch",
    "DataWaitMeter",
    "DataWaitReport",
    "LiveSnapshot",
    "Diagnosis",
    "MetricsServer",
    "ProvenanceLedger",
    "RankFigures",
    "RunTotals",
    "Snapshotting",
    "StageFigures",
    "StragglerWatch",
    "StageState",
    "diagnose",
    "ledger_keys",
    "ledger_metadata",
    "read_exclusions",
    "read_ledger",
    "serve_metrics",
    "straggler_verdict",
    "top",
    "write_exclusion",
    "write_report",
]

# Replay builds batches as the Loader does, so it lives beside it (stoker.loader.replay); this
# package is below the loader and does not import it.
__getattr__ = moved_names(__name__, {"replay": "stoker.loader:replay"})
