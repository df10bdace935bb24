"""The reference before/after broadcasts under real `mpiexec` (safe_broadcast and mpi4py's
lowercase bcast, gilprof.reference.broadcast and .bcast), and `gilprof bench-reference --quick`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gilprof.cli.bench_reference import command as bench_command
from gilprof.errors import UsageError
from gilprof.reference.bcast import bcast_after
from gilprof.reference.bench import BenchPlan, BenchRow, bench_broadcast, run_bench
from gilprof.reference.broadcast import chunk_count, safe_broadcast, safe_broadcast_before

from .conftest import assert_every_rank_passes, require_mpi

# Each script checks one module on every rank; (timeout in s, the checks each rank reports).
MPI_CHECKS = {
    "broadcast_check.py": (
        60,
        (
            "guards",
            "raw_transport",
            "chunk_boundaries",
            "root_failure",
            "receiver_failure",
            "root_unpickle_failure",
            "random_payloads",
        ),
    ),
    "bcast_check.py": (
        90,
        ("single_rank_and_impls", "shapes", "root_failure", "receiver_failure", "equivalent"),
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("script", list(MPI_CHECKS))
def test_every_rank_passes_every_check(script: str, ranks: int) -> None:
    timeout, checks = MPI_CHECKS[script]
    assert_every_rank_passes(script, checks, ranks, timeout=timeout)


def test_bcast_after_needs_no_mpi_without_a_communicator() -> None:
    payload = {"tokens": [1, 2, 3]}
    assert bcast_after(None, payload) is payload


def test_single_rank_and_bad_chunk_size_need_no_mpi() -> None:
    payload = {"tokens": [1, 2, 3]}
    for broadcast in (safe_broadcast, safe_broadcast_before):
        assert broadcast(None, payload) is payload
        for bad in (0, -1):
            with pytest.raises(ValueError, match="chunk_size must be > 0"):
                broadcast(None, payload, chunk_size=bad)
    assert [chunk_count(n, 64) for n in (0, 1, 63, 64, 65, 128, 129)] == [0, 1, 1, 1, 2, 2, 3]


def test_ratios_skip_missing_and_zero_medians() -> None:
    row = BenchRow("router", {}, {"before": 4.0, "after": 2.0, "fast": 0.0}, samples=3)
    assert row.ratios == {"before/after": 2.0}
    assert row.to_dict()["ratios"] == {"before/after": 2.0}


def test_broadcast_bench_rejects_a_single_rank() -> None:
    with pytest.raises(UsageError, match="at least 2"):
        bench_broadcast(BenchPlan.quick(ranks=1))
    with pytest.raises(UsageError, match="unknown MPI benchmarks"):
        bench_broadcast(BenchPlan.quick(ranks=2), benchmarks=("router",))
    with pytest.raises(UsageError, match="unknown benchmark"):
        run_bench(BenchPlan.quick(ranks=2), only="nothing")


@pytest.mark.integration
def test_bench_reference_quick_json() -> None:
    require_mpi()
    assert bench_command.name == "bench-reference"
    outcome = CliRunner().invoke(
        bench_command, ["--quick", "--json", "--ranks", "2", "--timeout", "120"]
    )
    assert outcome.exit_code == 0, (outcome.output, outcome.exception)
    result = json.loads(outcome.output)
    assert result["schema"] == "gilprof.bench_reference/1"
    assert {"settings", "router", "broadcast"} <= set(result)
    assert result["settings"]["ranks"] == 2
    router = result["router"]
    assert set(router["median_ms"]) == {"before", "after", "fast"}
    assert set(router["ratios"]) == {"before/after", "before/fast"}
    assert router["getter_reads_per_request"] == {"before": 2.0, "after": 1.0, "fast": 0.0}
    # before copies every token list twice, after once: about 2x by construction.
    assert router["median_ms"]["before"] > router["median_ms"]["after"]
    quick_sizes = list(BenchPlan.quick().broadcast_requests)
    rows = [(row["benchmark"], row["params"]["requests"]) for row in result["broadcast"]]
    assert rows == [(name, n) for name in ("broadcast", "bcast") for n in quick_sizes]
    for row in result["broadcast"]:
        assert row["params"]["payload_bytes"] > 0
        assert row["params"]["ranks"] == 2
        assert all(ms > 0 for ms in row["median_ms"].values())
        assert set(row["ratios"]) == {"before/after", "before/fast"}
