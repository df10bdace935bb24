"""Iteration logs -> per-rank step-time statistics.

`parse` turns log lines (TensorRT-LLM's iteration lines in all their variants, or JSON lines)
into StepRecords; `summary` folds them into per-rank percentiles, streaming.
"""

from gilprof.steps.parse import (
    DEVICE_BELOW_HOST,
    DEVICE_NEAR_HOST,
    SCHEMA,
    UNKNOWN,
    StepParser,
    StepRecord,
    StepStream,
    parse_lines,
    read_step_log,
    read_step_logs,
)
from gilprof.steps.summary import (
    DEFAULT_SKIP_WARMUP,
    Percentiles,
    RankSteps,
    StepsReport,
    classify,
    rank_steps,
    summarize,
    summarize_logs,
)

__all__ = [
    "DEFAULT_SKIP_WARMUP",
    "DEVICE_BELOW_HOST",
    "DEVICE_NEAR_HOST",
    "SCHEMA",
    "UNKNOWN",
    "Percentiles",
    "RankSteps",
    "StepParser",
    "StepRecord",
    "StepStream",
    "StepsReport",
    "classify",
    "parse_lines",
    "rank_steps",
    "read_step_log",
    "read_step_logs",
    "summarize",
    "summarize_logs",
]
