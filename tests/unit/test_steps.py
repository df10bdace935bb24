"""Iteration-log parsing, step statistics, and the `gilprof steps` command."""

from __future__ import annotations

import json
import os
import random
import time
import tracemalloc
from array import array
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gilprof import steps as steps_module
from gilprof.cli.main import cli
from gilprof.errors import InputError
from gilprof.stats import quantile
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


# ---------------------------------------------------------------------------------------
# Summary


def records_for(rank: int, hosts: list[float], devices: list[float | None]) -> list[StepRecord]:
    return [
        StepRecord(rank, index, host, device, 8, None)
        for index, (host, device) in enumerate(zip(hosts, devices, strict=True))
    ]


def test_summary_percentiles_and_raw_arrays() -> None:
    hosts = [float(x) for x in range(100, 200)]
    devices: list[float | None] = [None] + [float(x) for x in range(50, 149)]
    report = summarize(records_for(0, hosts, devices))
    steps = report.ranks[0]
    assert steps.iterations == 100
    assert steps.device_iterations == 99
    assert steps.host_step_ms.p50 == pytest.approx(quantile(hosts, 0.5))
    assert steps.host_step_ms.p90 == pytest.approx(quantile(hosts, 0.9))
    assert steps.host_step_ms.p99 == pytest.approx(quantile(hosts, 0.99))
    present = [d for d in devices if d is not None]
    assert steps.device_step_ms is not None
    assert steps.device_step_ms.p50 == pytest.approx(quantile(present, 0.5))
    assert isinstance(steps.host_ms, array) and steps.host_ms.typecode == "d"
    assert list(steps.host_ms) == hosts
    assert list(steps.device_ms) == present
    assert steps.scheduled_requests_p50 == 8
    assert (steps.first_iteration, steps.last_iteration) == (0, 99)


def test_scheduled_requests_median_interpolates_like_quantile() -> None:
    scheduled = [3, 9, 1, 4, 4, 100]
    records = [StepRecord(0, i, 1.0, 1.0, n, None) for i, n in enumerate(scheduled)]
    assert summarize(records).ranks[0].scheduled_requests_p50 == quantile(scheduled, 0.5)


@pytest.mark.parametrize(
    ("host", "device", "reading"),
    [
        (99.6, 98.9, "device~host"),
        (100.0, 90.0, "device~host"),  # exactly at the threshold
        (100.0, 89.9, "device<host"),
        (100.0, None, "unknown"),
    ],
)
def test_reading_from_the_ratio_of_medians(host: float, device: float | None, reading: str) -> None:
    steps = summarize(records_for(0, [host] * 5, [device] * 5)).ranks[0]
    assert steps.reading == reading
    if device is None:
        assert steps.device_host_ratio is None
    else:
        assert steps.device_host_ratio == pytest.approx(device / host)


def test_near_ratio_is_configurable() -> None:
    records = records_for(0, [100.0] * 5, [80.0] * 5)
    assert summarize(records).ranks[0].reading == "device<host"
    assert summarize(records, near_ratio=0.75).ranks[0].reading == "device~host"


def test_skip_warmup_drops_first_iterations_of_each_rank() -> None:
    records = records_for(0, [500.0, 500.0, 10.0, 10.0], [None, 400.0, 9.0, 9.0])
    records += records_for(1, [700.0, 20.0], [None, 19.0])
    report = summarize(records, skip_warmup=2)
    assert [(s.rank, s.iterations) for s in report.ranks] == [(0, 2)]  # rank 1 has nothing left
    assert report.ranks[0].host_step_ms.p99 == 10.0
    assert report.ranks[0].first_iteration == 2
    assert report.ranks_seen == (0, 1)


def test_rank_filter() -> None:
    records = records_for(0, [1.0], [1.0]) + records_for(1, [2.0, 3.0], [2.0, 3.0])
    report = summarize(records, rank=1)
    assert [s.rank for s in report.ranks] == [1]
    assert report.rank(1) is not None and report.rank(0) is None


def test_json_contract() -> None:
    report = summarize(read_step_log(DATA / "trtllm_classic.log"))
    data = json.loads(json.dumps(report.to_json(), allow_nan=False))
    assert data["schema"] == "gilprof.steps/2"
    assert data["skipped_lines"] == 2
    (rank,) = data["ranks"]
    assert {"rank", "iterations", "host_step_ms", "device_step_ms", "reading"} <= set(rank)
    assert "verdict" not in rank  # /2: a log alone gives no host/device verdict
    assert {"p50", "p90", "p99"} <= set(rank["host_step_ms"])
    assert {"p50", "p90", "p99"} <= set(rank["device_step_ms"])
    assert rank["iterations"] == 4
    assert rank["reading"] == "device~host"
    assert rank["device_step_ms"]["p50"] == 122.5


def test_json_device_percentiles_are_null_without_device_times() -> None:
    report = summarize(records_for(0, [5.0, 6.0], [None, None]))
    rank = report.to_json()["ranks"][0]
    assert rank["device_step_ms"] == {"p50": None, "p90": None, "p99": None, "mean": None}
    assert rank["reading"] == "unknown"


def test_summarize_logs_explains_empty_results(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(InputError, match=r"no iteration lines found in .*empty.log \(0 lines"):
        summarize_logs([empty])
    with pytest.raises(InputError, match=r"no iteration lines for rank 4 .* ranks logged: 0"):
        summarize_logs([DATA / "trtllm_classic.log"], rank=4)
    with pytest.raises(InputError, match="dropped as warm-up"):
        summarize_logs([DATA / "trtllm_classic.log"], skip_warmup=10)


# ---------------------------------------------------------------------------------------
# A 100 MB log: streaming with flat memory

_BIG_STATES = ", ".join(f"'counter_{k}': {k * 37}" for k in range(40))
_BIG_LINE = (
    "[TRT-LLM] [I] [_torch][RANK 0] iter = {i}, global_rank = 0, rank = 0, "
    "currank_total_requests = 0/64, host_step_time = {host}ms, prev_device_step_time = {device}ms, "
    "timestamp = 2026-08-04 19:08:14, num_scheduled_requests: 64, "
    "states = {{" + _BIG_STATES + "}}\n"
)
# Other output between iteration lines (here a long debug dump): read, counted, dropped.
_NOISE_LINE = "[TRT-LLM] [D] scheduler dump: " + "req(id=1234, tokens=[1, 2, 3]) " * 48 + "\n"


def test_100_mb_log_streams_with_flat_memory(tmp_path: Path) -> None:
    # tracemalloc slows allocation-heavy parsing several times; long noise lines keep the
    # iteration count (~45k) and the run time moderate while the file is still 100 MB.
    path = tmp_path / "big.log"
    target = 100 * 1024 * 1024
    iterations = 0
    with path.open("w", encoding="utf-8") as out:
        while out.tell() < target:
            out.write(
                "".join(
                    _BIG_LINE.format(i=i, host=100 + i % 7, device=99 + i % 5) + _NOISE_LINE
                    for i in range(iterations, iterations + 1000)
                )
            )
            iterations += 1000
    assert path.stat().st_size >= target

    started = time.perf_counter()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        stream = read_step_log(path)
        report = summarize(stream)
        peak_growth = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
        path.unlink()  # pytest keeps recent tmp dirs; do not leave 100 MB behind
    elapsed = time.perf_counter() - started

    steps = report.ranks[0]
    assert steps.iterations == steps.device_iterations == iterations
    assert steps.host_step_ms.p50 == 103.0
    assert steps.device_step_ms is not None and steps.device_step_ms.p50 == 101.0
    assert stream.skipped_lines == iterations
    assert peak_growth < 30 * 1024 * 1024, f"peak growth {peak_growth / 1e6:.1f} MB"
    assert elapsed < 120, f"parse took {elapsed:.1f} s"


# ---------------------------------------------------------------------------------------
# The command


def run(*args: str) -> tuple[int, str, str]:
    # The fixture logs are a few iterations long: keep them all unless a test says otherwise.
    warmup = [] if "--skip-warmup" in args else ["--skip-warmup", "0"]
    result = CliRunner().invoke(cli, ["steps", *warmup, *args])
    return result.exit_code, result.stdout, result.stderr


def test_cli_table_gives_the_ratio_and_what_it_cannot_tell() -> None:
    code, out, _ = run(str(DATA / "trtllm_kv_cache_util.log"))
    assert code == 0
    text = " ".join(out.split())
    assert "rank 0: device p50 98.9 ms is 0.99 of host p50 99.6 ms: device ~ host" in text
    assert "rank 1: device p50 60.0 ms is 0.60 of host p50 99.2 ms" in text
    # A log cannot tell which side paces the loop: never a host-bound claim from it.
    assert "host-bound" not in text.replace("cannot tell host-bound from device-bound", "")
    assert "device-bound" not in text.replace("cannot tell host-bound from device-bound", "")
    assert "cannot tell host-bound from device-bound" in text
    assert "1 lines skipped" in text
    assert "gilprof report PROFILE --steps LOG" in text


def test_cli_json_output_follows_the_contract() -> None:
    code, out, _ = run(str(DATA / "trtllm_classic.log"), "--format", "json", "--skip-warmup", "1")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "gilprof.steps/2"
    assert data["ranks"][0]["iterations"] == 3
    assert data["ranks"][0]["reading"] in {"device~host", "device<host", "unknown"}


def test_cli_markdown_output_is_a_table() -> None:
    code, out, _ = run(str(DATA / "mpirun_tagged.log"), "--format", "markdown", "--rank", "3")
    assert code == 0
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert table[0].startswith("| rank | iters | host p50")
    assert set(table[1]) <= set("|-:")
    assert len(table) == 3
    assert table[2].startswith("| 3 | 1 | 40.5")


@pytest.mark.parametrize("option", ["--near-ratio", "--host-bound-ratio"])
def test_cli_near_ratio_option_and_its_old_name(option: str) -> None:
    log = str(DATA / "mpirun_tagged.log")
    code, out, _ = run(log, "--rank", "2", option, "0.4", "--format", "json")
    assert code == 0
    assert json.loads(out)["ranks"][0]["reading"] == "device~host"


def test_cli_combines_several_logs() -> None:
    code, out, _ = run(
        str(DATA / "trtllm_classic.log"), str(DATA / "steps.jsonl"), "--format", "json"
    )
    assert code == 0
    data = json.loads(out)
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    assert data["ranks"][0]["iterations"] == 6


@pytest.mark.parametrize(
    ("make_path", "message"),
    [
        (lambda tmp: tmp / "missing.log", "no such file"),
        (lambda tmp: tmp, "is a directory"),
    ],
)
def test_cli_unreadable_input_exits_2_with_one_line(
    tmp_path: Path, make_path: object, message: str
) -> None:
    path = make_path(tmp_path)
    code, out, err = run(str(path))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and message in err
    assert "Traceback" not in err


def test_cli_empty_and_binary_logs_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    code, _, err = run(str(empty))
    assert code == 2
    assert "no iteration lines found in" in err and "(0 lines skipped)" in err

    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    code, _, err = run(str(binary))
    assert code == 2
    assert "no iteration lines found" in err


def test_cli_help_teaches_and_documents_the_limit() -> None:
    result = CliRunner().invoke(cli, ["steps", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--skip-warmup" in text and "--near-ratio" in text
    assert "gilprof steps gen_server_0.log" in text
    assert "both log device ~ host" in text and "gilprof report PROFILE --steps LOG" in text


def test_cli_rejects_unknown_format() -> None:
    code, _, err = run(str(DATA / "trtllm_classic.log"), "--format", "xml")
    assert code == 2
    assert "xml" in err


def test_cli_skip_warmup_defaults_to_the_value_every_command_shares(tmp_path: Path) -> None:
    log = tmp_path / "gen.log"
    log.write_text(
        "".join(
            f'{{"rank": 0, "iter": {i}, "host_step_ms": {50 if i < 3 else 10}}}\n' for i in range(8)
        )
    )
    result = CliRunner().invoke(cli, ["steps", str(log), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["skip_warmup"] == 3
    # the three slow warm-up iterations are gone: every remaining step is the steady 10 ms
    assert doc["ranks"][0]["iterations"] == 5
    assert doc["ranks"][0]["first_iteration"] == 3
    assert doc["ranks"][0]["host_step_ms"]["p99"] == 10
