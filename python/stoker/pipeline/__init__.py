"""The pipeline engine: stages with their own concurrency, bounded queues, one scheduler thread.

Knows nothing about images or storage. See `PipelineBuilder` to describe a pipeline and
`Pipeline` to run it; `profile_pipeline` finds each stage's best concurrency offline, and a `Tuner` moves it live.
"""

from ..errors import PipelineError, PipelineFailureError, PipelineStoppedError
from ._builder import PipelineBuilder
from ._errors import AbortPipeline
from ._pipeline import Pipeline
from ._profile import ProfileResult, profile_pipeline
from ._stats import PipelineStats, StageStats, TaskTimeSummary, TuningDecision
from ._tuner import Tuner
from ._tuning_inputs import CpuRoom, Knob

__all__ = [
    "AbortPipeline",
    "CpuRoom",
    "Knob",
    "Pipeline",
    "PipelineBuilder",
    "PipelineError",
    "PipelineFailureError",
    "PipelineStats",
    "PipelineStoppedError",
    "ProfileResult",
    "StageStats",
    "TaskTimeSummary",
    "Tuner",
    "TuningDecision",
    "profile_pipeline",
]
