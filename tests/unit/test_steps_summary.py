"""Step statistics from iteration logs, a 100 MB log read with flat memory, and the
`gilprof steps` command. Parsing: test_steps.py.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from array import array
from pathlib import Path

import pytest
from click.testing import CliRunner

from gilprof.cli.main import cli
from gilprof.errors import InputError
from gilprof.stats import quantile
from gilprof.steps import (
    StepRecord,
    read_step_log,
    summarize,
    summarize_logs,
)

DATA = Path(__file__).parent / "data" / "steps"


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
