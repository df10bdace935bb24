"""Iteration-log parsing: line variants, and files (errors, binary input, overlong lines).

Step statistics and the `gilprof steps` command: test_steps_summary.py.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gilprof import steps as steps_module
from gilprof.errors import InputError
from gilprof.steps import (
    StepParser,
    StepRecord,
    parse_lines,
    read_step_log,
    read_step_logs,
    summarize,
    summarize_logs,
)

DATA = Path(__file__).parent / "data" / "steps"

CLASSIC = (
    "[TRT-LLM] [I] [_torch][RANK 0] iter = 7, global_rank = 0, rank = 0, "
    "currank_total_requests = 12/96, host_step_time = 123.5ms, prev_device_step_time = 123.0ms, "
    "timestamp = 2026-08-04 19:08:13, num_scheduled_requests: 64, "
    "states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 64}"
)
KV_CACHE_UTIL = (
    "0: [08/04/2026-19:08:13] [TRT-LLM] [I] iter = 8, global_rank = 9, rank = 1, "
    "num_scheduled_requests = 96, kv_cache_util = 0.43, currank_total_requests = 96/768, "
    "host_step_time = 99.6ms, prev_device_step_time = 98.9ms, timestamp = 08-04-2026 19:08:13, "
    "states = {'num_ctx_requests': 0, 'spec': {'note': \"a, b = {c}\", 'rank = 5': {'x': 1}}}"
)


def parse_one(line: str) -> StepRecord:
    records = list(parse_lines([line]))
    assert len(records) == 1, line
    return records[0]


# ---------------------------------------------------------------------------------------
# Line variants


def test_classic_line() -> None:
    record = parse_one(CLASSIC)
    assert record == StepRecord(
        rank=0,
        iteration=7,
        host_step_ms=123.5,
        device_step_ms=123.0,
        num_scheduled_requests=64,
        timestamp="2026-08-04 19:08:13",
    )


def test_kv_cache_util_variant_with_nested_states_and_srun_prefix() -> None:
    record = parse_one(KV_CACHE_UTIL)
    assert record.rank == 9  # global_rank wins over rank, the srun label and the states dict
    assert record.iteration == 8
    assert record.host_step_ms == 99.6
    assert record.device_step_ms == 98.9
    assert record.num_scheduled_requests == 96
    assert record.timestamp == "08-04-2026 19:08:13"


def test_first_iteration_device_time_is_none() -> None:
    line = CLASSIC.replace("prev_device_step_time = 123.0ms", "prev_device_step_time = N/A")
    assert parse_one(line).device_step_ms is None


def test_device_time_key_may_be_missing() -> None:
    record = parse_one("iter = 3, host_step_time = 12ms")
    assert (record.rank, record.iteration, record.host_step_ms) == (0, 3, 12.0)
    assert record.device_step_ms is None
    assert record.num_scheduled_requests is None
    assert record.timestamp is None


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        ("iter = 1, rank = 3, host_step_time = 5ms", 3),
        ("[TRT-LLM] [I] [_torch][RANK 6] iter = 1, host_step_time = 5ms", 6),
        ("[1,4]<stdout>:[TRT-LLM] [I] iter = 1, host_step_time = 5ms", 4),
        ("[1,2]<stderr>:iter = 1, host_step_time = 5ms", 2),
        ("7: [08/04/2026-19:08:13] [TRT-LLM] [I] iter = 1, host_step_time = 5ms", 7),
        ("[1,4]<stdout>:[TRT-LLM] [I] iter = 1, rank = 1, host_step_time = 5ms", 1),
        ("[TRT-LLM] [I] iter = 1, currank_total_requests = 3/4, host_step_time = 5ms", 0),
    ],
)
def test_rank_comes_from_keys_then_prefixes_then_defaults_to_zero(line: str, rank: int) -> None:
    assert parse_one(line).rank == rank


def test_extra_spacing_and_plain_numbers() -> None:
    record = parse_one("iter=4,global_rank=2,host_step_time=1.5e2 ms,prev_device_step_time=99")
    assert (record.rank, record.iteration, record.host_step_ms, record.device_step_ms) == (
        2,
        4,
        150.0,
        99.0,
    )


def test_sample_files_of_every_variant() -> None:
    classic = read_step_log(DATA / "trtllm_classic.log")
    records = list(classic)
    assert [r.iteration for r in records] == [0, 1, 2, 3]
    assert records[0].device_step_ms is None
    assert classic.skipped_lines == 2

    kv = list(read_step_log(DATA / "trtllm_kv_cache_util.log"))
    assert [(r.rank, r.num_scheduled_requests) for r in kv] == [(0, 96), (1, 96)]

    tagged = list(read_step_log(DATA / "mpirun_tagged.log"))
    assert [(r.rank, r.host_step_ms, r.device_step_ms) for r in tagged] == [
        (3, 40.5, 39.0),
        (2, 41.0, 20.0),
        (5, 12.0, 11.0),
    ]


def test_json_lines() -> None:
    stream = read_step_log(DATA / "steps.jsonl")
    records = list(stream)
    assert [(r.rank, r.iteration, r.host_step_ms, r.device_step_ms) for r in records] == [
        (0, 1, 10.5, None),
        (0, 2, 11.0, 10.0),
        (1, 0, 20.0, 5.5),  # no iteration key: numbered per rank in log order
        (1, 1, 21.0, 6.0),
    ]
    assert records[1].num_scheduled_requests == 4
    assert records[2].timestamp == "2026-08-04T19:08:13"
    assert stream.skipped_lines == 3


def test_json_line_behind_an_mpirun_prefix_takes_rank_from_it() -> None:
    record = parse_one('[1,3]<stdout>:{"iteration": 5, "host_step_ms": 2.0}')
    assert (record.rank, record.iteration, record.device_step_ms) == (3, 5, None)


def test_garbage_lines_are_counted_not_fatal() -> None:
    stream = read_step_log(DATA / "garbage.log")
    assert list(stream) == []
    # 7 lines: one blank (not counted), six that are not iteration lines.
    assert stream.lines_read == 7
    assert stream.skipped_lines == 6


@pytest.mark.parametrize(
    "line",
    [
        "max_iter = 3, host_step_time = 5ms",
        "iteration = 3, host_step_time = 5ms",
        "iter = 3, host_step_time = N/A",
        "iter = 3, host_step_time = 5s",
        "iter = 3, host_step_time = inf ms",
        "iter = 3, prev_device_step_time = 5ms",
        "Profiling started at iteration 10.",
        '{"host_step_ms": true}',
        '{"host_step_ms": "fast"}',
        "[1, 2, 3]",
        "{not json}",
    ],
)
def test_lines_without_a_usable_host_time_are_skipped(line: str) -> None:
    parser = StepParser()
    assert list(parser.parse([line])) == []
    assert parser.skipped_lines == 1


def test_absurdly_long_numbers_never_reach_int() -> None:
    huge = "9" * 5000  # int() refuses strings this long on Python 3.11+
    parser = StepParser()
    lines = [
        f"iter = {huge}, host_step_time = 5ms",
        f"iter = 1, global_rank = {huge}, rank = 2, host_step_time = 5ms",
        f'{{"host_step_ms": 1, "iter": "{huge}", "rank": "{huge}"}}',
    ]
    records = list(parser.parse(lines))
    assert parser.skipped_lines == 1
    assert [(r.rank, r.iteration) for r in records] == [(2, 1), (0, 0)]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_parser_never_raises_on_arbitrary_text(text: str) -> None:
    parser = StepParser()
    records = list(parser.parse(text.splitlines()))
    assert parser.records == len(records)


@settings(max_examples=100, deadline=None)
@given(
    iteration=st.integers(0, 10**9),
    rank=st.integers(0, 4096),
    host=st.floats(0, 1e6, allow_nan=False),
    device=st.none() | st.floats(0, 1e6, allow_nan=False),
    scheduled=st.integers(0, 10**5),
    newer=st.booleans(),
)
def test_generated_lines_round_trip(
    iteration: int, rank: int, host: float, device: float | None, scheduled: int, newer: bool
) -> None:
    device_text = "N/A" if device is None else f"{device}ms"
    times = f"host_step_time = {host}ms, prev_device_step_time = {device_text}"
    if newer:
        body = (
            f"num_scheduled_requests = {scheduled}, kv_cache_util = 0.5, "
            f"currank_total_requests = 1/2, {times}, timestamp = t"
        )
    else:
        body = (
            f"currank_total_requests = 1/2, {times}, timestamp = t, "
            f"num_scheduled_requests: {scheduled}"
        )
    line = (
        f"[TRT-LLM] [I] [_torch][RANK {rank}] iter = {iteration}, global_rank = {rank}, "
        f"rank = {rank}, {body}, states = {{'rank': 99, 'x': {{'y': 'host_step_time = 1ms'}}}}"
    )
    assert parse_one(line) == StepRecord(rank, iteration, host, device, scheduled, "t")


# ---------------------------------------------------------------------------------------
# Files: errors, binary input, overlong lines, several files


def test_missing_file_raises_input_error() -> None:
    with pytest.raises(InputError, match="no such file"):
        read_step_log("/nonexistent/gen.log")


def test_directory_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        read_step_log(tmp_path)


def test_path_through_a_file_raises_input_error(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x\n")
    with pytest.raises(InputError, match="cannot read"):
        read_step_log(tmp_path / "plain" / "child.log")


def test_unreadable_file_raises_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests run as root, which reads any file whatever its mode: make the open itself refuse.
    import gilprof.steps as steps_module

    def refuse(*_args: object, **_kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    path = tmp_path / "secret.log"
    path.write_text(CLASSIC + "\n")
    stream = read_step_log(path)
    monkeypatch.setattr(steps_module.parse.os, "open", refuse)
    with pytest.raises(InputError, match="permission denied"):
        list(stream)


def test_fifo_without_writer_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="no iteration lines"):
        summarize_logs([fifo])


def test_binary_file_yields_only_skipped_lines(tmp_path: Path) -> None:
    path = tmp_path / "core.bin"
    path.write_bytes(random.Random(0).randbytes(200_000))
    stream = read_step_log(path)
    assert list(stream) == []
    assert stream.skipped_lines > 0


def test_overlong_line_is_skipped_whole(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(steps_module.parse, "MAX_LINE_BYTES", 64)
    path = tmp_path / "long.log"
    path.write_bytes(
        b"x" * 1000 + b" iter = 1, host_step_time = 5ms\n" + b"iter = 2, host_step_time = 6ms\n"
    )
    stream = read_step_log(path)
    assert [r.iteration for r in stream] == [2]
    assert stream.skipped_lines == 1
    assert stream.lines_read == 2


def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "latin1.log"
    path.write_bytes(b"\xe9t\xe9 " + CLASSIC.encode() + b"\r\n")
    assert [r.host_step_ms for r in read_step_log(path)] == [123.5]


def test_several_files_are_combined_and_counted_together() -> None:
    stream = read_step_logs([DATA / "trtllm_classic.log", DATA / "mpirun_tagged.log"])
    report = summarize(stream)
    assert [steps.rank for steps in report.ranks] == [0, 2, 3, 5]
    assert report.skipped_lines == 2 + 1
    assert report.records_read == 7
