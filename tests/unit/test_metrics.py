"""`gilprof watch --metrics`: the exposition from synthetic windows (names, labels, validity
by prometheus_client's own parser), rank follow/forget, the endpoint's address errors, and a
scrape that never blocks the board (a hung scraper, 50 concurrent scrapes)."""

from __future__ import annotations

import re
import socket
import threading
import time
import urllib.request

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gilprof.analysis.live import LiveRules
from gilprof.cli._watch_metrics import parse_address, serve
from gilprof.cli.main import cli
from gilprof.errors import UsageError
from gilprof.model import Mode, ThreadState
from gilprof.profile import Profile
from gilprof.renderers.metrics import SERIES, MetricsBoard, RankKey, SnapshotCollector

from .builders import make_profile, sample

LOOP, INGRESS = 1, 2
RULES = LiveRules(
    loop_thread="^executor-loop$",
    device_wait=("StreamEvent.synchronize",),
    watch=("safe_broadcast",),
)
STEP = (
    "iter = {i}, global_rank = 0, rank = 0, currank_total_requests = 4/4, "
    "host_step_time = {ms}ms, prev_device_step_time = 20ms, timestamp = 2026-12-06 10:00:00, "
    "num_scheduled_requests: 4, states = {{}}"
)


def host_bound(windows: int = 4, device: int = 2) -> Profile:
    """The unfixed example's shape: the loop is busy on the host 90%+ of the time."""
    busy = 100 - device
    per = [
        sample("executor-loop", "loop", "step", "safe_broadcast", count=busy - 20, tid=LOOP),
        sample(
            "executor-loop",
            "loop",
            "step",
            "safe_broadcast",
            "pthread_cond_wait@libc.so.6",
            count=20,
            tid=LOOP,
            state=ThreadState.WAITING,
        ),
        sample(
            "executor-loop",
            "loop",
            "StreamEvent.synchronize@sim.py",
            count=device,
            tid=LOOP,
            state=ThreadState.IDLE,
        ),
        sample("ingress", "serve", "tokenize", count=30, tid=INGRESS),
        sample(
            "ingress",
            "serve",
            "Queue.get@queue.py",
            count=70,
            tid=INGRESS,
            state=ThreadState.IDLE,
        ),
    ]
    return make_profile([(100, per)] * windows, mode=Mode.CONTENTION)


def board_with(profile: Profile, pid: int = 4242, lines: int = 30) -> MetricsBoard:
    board = MetricsBoard(SnapshotCollector(), RULES, window_s=60.0)
    board.follow(RankKey("7", "node1", "0", "gen", str(pid)))
    for i in range(lines):
        board.step_line(pid, STEP.format(i=i, ms=30 + i % 3))
    board.window(pid, profile, ticks=400.0, expected=410.0, reader_cpu_s=0.05)
    return board


def exposition(board: MetricsBoard) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(board.collector)
    return generate_latest(registry).decode()


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def one(found: dict[str, list], name: str, **labels: str) -> float:
    hits = [s for s in found[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (name, labels, found.get(name))
    return hits[0].value


def test_exposition_of_a_host_bound_rank() -> None:
    text = exposition(board_with(host_bound()))
    found = samples(text)  # the client's own parser accepts every line
    base = {"job": "7", "host": "node1", "rank": "0", "role": "gen", "pid": "4242"}
    loop = {**base, "thread": "executor-loop"}
    assert one(found, "gilprof_rank_up", **base) == 1
    assert one(found, "gilprof_thread_held_ratio", **loop) == pytest.approx(0.78)
    assert one(found, "gilprof_thread_gil_wait_ratio", **loop) == pytest.approx(0.20)
    assert one(found, "gilprof_thread_blocked_ratio", **loop, **{"class": "device"}) == (
        pytest.approx(0.02)
    )
    assert one(found, "gilprof_thread_idle_ratio", thread="ingress") == pytest.approx(0.70)
    ingress = [s for s in found["gilprof_thread_blocked_ratio"] if s.labels["thread"] == "ingress"]
    assert sum(s.value for s in ingress) == pytest.approx(0.70)  # classed by classify_blocked
    assert one(found, "gilprof_loop_ratio", part="held") == pytest.approx(0.78)
    step_s = one(found, "gilprof_loop_step_seconds", part="held")
    assert step_s == pytest.approx(0.78 * 0.031, rel=0.02)  # mean step 31 ms
    assert one(found, "gilprof_verdict", gilprof_verdict="host") == 1
    assert one(found, "gilprof_verdict", gilprof_verdict="device") == 0
    cost = one(found, "gilprof_function_step_seconds", function="safe_broadcast")
    assert 0.020 < cost < 0.031
    assert one(found, "gilprof_host_step_seconds_count", **base) == 30
    assert one(found, "gilprof_host_step_seconds_bucket", le="0.03") == 10
    assert one(found, "gilprof_sampler_ticks_lost_total", **base) == 10
    assert one(found, "gilprof_profiler_cpu_seconds_total", who="self") > 0
    # every series named in SERIES (docs/metrics.md, --help) and only those
    families = {f.name for f in text_string_to_metric_families(text)}
    declared = {name.removesuffix("_total") for name, *_ in SERIES}
    assert families == declared
    for name, kind, *_ in SERIES:
        assert re.fullmatch(r"gilprof_[a-z_]+", name)
        assert kind != "counter" or name.endswith("_total")
        assert not name.endswith("_ms")
    assert "cmdline" not in text and "python" not in text


def test_a_rank_that_is_gone_leaves_no_series() -> None:
    board = board_with(host_bound(), pid=1)
    board.follow(RankKey("7", "node1", "0", "gen", "2"))  # restarted under a new pid
    board.forget(1)
    board.window(2, host_bound(), ticks=400.0, expected=400.0, reader_cpu_s=0.0)
    board.window(1, host_bound(), ticks=400.0, expected=400.0, reader_cpu_s=0.0)  # late
    found = samples(exposition(board))
    assert {s.labels["pid"] for s in found["gilprof_thread_held_ratio"]} == {"2"}
    assert {s.labels["pid"] for s in found["gilprof_rank_up"]} == {"2"}


def test_a_rank_without_a_loop_reading_still_exposes_its_threads() -> None:
    profile = make_profile(
        [(100, [sample("worker", "spin", count=100, tid=5)])] * 2, mode=Mode.CONTENTION
    )
    board = MetricsBoard(SnapshotCollector(), LiveRules(loop_thread="^nope$"), 10.0)
    board.follow(RankKey("", "h", "3", "", "9"))
    board.window(9, profile, 200.0, 200.0, 0.0)
    found = samples(exposition(board))
    assert one(found, "gilprof_thread_held_ratio", thread="worker") == 1.0
    assert "gilprof_verdict" not in found


@pytest.mark.parametrize(
    ("text", "expected"),
    [("9464", ("127.0.0.1", 9464)), ("0.0.0.0:80", ("0.0.0.0", 80)), ("[::1]:9", ("::1", 9))],
)
def test_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["x", "host:0", "host:70000", ""])
def test_bad_addresses_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_address(text)


def _busy_port() -> socket.socket:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held


@pytest.mark.parametrize("where", ["busy", "nowhere.invalid:9464"])
def test_a_port_in_use_or_an_unknown_host_is_one_line_and_exit_2(tmp_path, where) -> None:
    held = _busy_port()
    address = f"127.0.0.1:{held.getsockname()[1]}" if where == "busy" else where
    try:
        result = CliRunner().invoke(
            cli, ["watch", "--ranks", "local", "-o", str(tmp_path), "--metrics", address]
        )
    finally:
        held.close()
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gilprof: error: --metrics"), lines


def _scrape(url: str, out: list[str]) -> None:
    with urllib.request.urlopen(url, timeout=20) as response:
        out.append(response.read().decode())


def test_hung_and_concurrent_scrapers_do_not_stall_the_board() -> None:
    board = board_with(host_bound())
    server = serve(f"127.0.0.1:{_free_port()}", board.collector)
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    stop = threading.Event()
    windows = [0]

    def sampler() -> None:  # a recorder thread: one window after another
        profile = host_bound(windows=2)
        while not stop.is_set():
            board.window(4242, profile, 200.0, 200.0, 0.0)
            windows[0] += 1

    hung = socket.create_connection(("127.0.0.1", server.server_port))  # never reads
    half = socket.create_connection(("127.0.0.1", server.server_port))
    half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # asks, never reads
    worker = threading.Thread(target=sampler)
    worker.start()
    try:
        time.sleep(0.5)
        before = windows[0]
        bodies: list[str] = []
        scrapers = [threading.Thread(target=_scrape, args=(url, bodies)) for _ in range(50)]
        for t in scrapers:
            t.start()
        for t in scrapers:
            t.join(30)
        time.sleep(0.5)
        assert windows[0] > before + 5  # the windows went on throughout
        assert len(bodies) == 50
        for body in bodies:  # each one whole and valid
            assert one(samples(body), "gilprof_rank_up", pid="4242") == 1
    finally:
        stop.set()
        worker.join(10)
        hung.close()
        half.close()
        server.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_help_and_docs_list_every_series() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    result = CliRunner().invoke(cli, ["watch", "--help"], terminal_width=200)
    assert result.exit_code == 0
    help_text = " ".join(result.output.split())
    for name, *_ in SERIES:
        assert f"`{name}`" in docs, name
        assert name in help_text, name
