"""`gilprof watch --metrics HOST:PORT` and `--ranks local`: the Prometheus endpoint and the
fleet of recorders behind it (gilprof.renderers.metrics builds the exposition)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import click
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import start_wsgi_server

from gilprof.analysis.live import LiveRules
from gilprof.cli._options import options
from gilprof.errors import UsageError
from gilprof.model import Target
from gilprof.native_classes import NativeRules
from gilprof.profile import Profile
from gilprof.recipes import Recipe
from gilprof.renderers.metrics import MetricsBoard, RankKey, SnapshotCollector, series_help
from gilprof.sampling.backends.base import WindowResult
from gilprof.sampling.fleet import FleetRequest, watch_fleet
from gilprof.sampling.flight import RecorderObserver, RecorderOptions, WatchRequest
from gilprof.sampling.recorder import WindowRing, parse_seconds

F = TypeVar("F", bound=Callable[..., Any])

METRICS_HELP = (
    "Serve Prometheus metrics on HOST:PORT (HOST defaults to 127.0.0.1; 0.0.0.0 to expose "
    "them). Series:\n" + series_help()
)

metrics_options = options(
    click.option(
        "--ranks", metavar="local|all|N,M", help="Record every local rank, following restarts."
    ),
    click.option("--metrics", metavar="[HOST:]PORT", help=METRICS_HELP),
    click.option(
        "--metrics-window", default="10s", show_default=True, help="What each reading covers."
    ),
    click.option("--metrics-job", metavar="NAME", help="The job label (default: launcher PID)."),
)


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 < number < 65536:
        raise UsageError(f"--metrics expects [HOST:]PORT (1-65535), got {text!r}")
    return host or "127.0.0.1", number


def serve(text: str, collector: SnapshotCollector) -> Any:
    """Start the endpoint on its own (daemon) threads; a bad address is a usage error."""
    host, port = parse_address(text)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, _thread = start_wsgi_server(port, host, registry)
    except socket.gaierror as exc:
        raise UsageError(f"--metrics {text}: cannot resolve {host!r} ({exc.strerror})") from None
    except OSError as exc:
        raise UsageError(f"--metrics {text}: cannot listen there ({exc.strerror})") from None
    return server


def live_rules(recipe: Recipe | None) -> LiveRules:
    if recipe is None:
        return LiveRules()
    steps = recipe.steps
    return LiveRules(
        loop_thread=steps.loop_thread if steps else None,
        device_wait=steps.device_wait if steps else (),
        watch=recipe.watch_names(),
        native=NativeRules.with_recipe(recipe.native),
    )


class MetricsHooks:
    """Feeds a MetricsBoard from the recorders (RecorderOptions.on_window / on_line)."""

    def __init__(self, board: MetricsBoard, job: str | None, rate_hz: float) -> None:
        self.board = board
        self.job = job
        self.rate_hz = rate_hz

    def key(self, target: Target) -> RankKey:
        job = self.job or ("" if target.launcher_pid is None else str(target.launcher_pid))
        rank = "" if target.rank is None else str(target.rank)
        return RankKey(job, target.hostname, rank, target.role or "", str(target.pid))

    def start(self, target: Target) -> None:
        self.board.follow(self.key(target))

    def end(self, target: Target) -> None:
        self.board.forget(target.pid)

    def window(self, target: Target, ring: WindowRing, result: WindowResult, ticks: float) -> None:
        profile: Profile | None = None
        if self.board.due(target.pid):  # copy the last minutes only for a new reading
            profile = ring.snapshot(
                result.t1 - self.board.window_s, result.t1, ring.profile.sampling
            )
        expected = result.seconds * self.rate_hz
        self.board.window(target.pid, profile, ticks, expected, result.reader_cpu_s)

    def line(self, target: Target, text: str) -> None:
        self.board.step_line(target.pid, text)

    def options(self, options: RecorderOptions) -> RecorderOptions:
        return replace(options, on_window=self.window, on_line=self.line)


def metrics_hooks(
    metrics: str | None, window: str, job: str | None, recipe: Recipe | None, rate_hz: float
) -> MetricsHooks | None:
    """Serve the endpoint (before any sampling starts) and return the hooks; None without it."""
    if metrics is None:
        return None
    collector = SnapshotCollector()
    board = MetricsBoard(collector, live_rules(recipe), parse_seconds(window, "--metrics-window"))
    serve(metrics, collector)
    return MetricsHooks(board, job, rate_hz)


@dataclass(frozen=True)
class MetricsChoice:
    ranks: str | None
    metrics: str | None
    window: str
    job: str | None
    recipe: Recipe | None

    @property
    def wanted(self) -> bool:
        return self.ranks is not None or self.metrics is not None


def _nothing(_target: Target) -> None:
    pass


def run_watch(request: WatchRequest, console: RecorderObserver, choice: MetricsChoice) -> int:
    """`watch` over --ranks, or one target, with the metrics endpoint where asked."""
    wanted = request.wanted
    if choice.ranks is not None and (wanted.pid is not None or wanted.rank is not None):
        raise UsageError("--ranks selects ranks itself; do not combine it with --pid or --rank")
    options = request.options
    hooks = metrics_hooks(
        choice.metrics, choice.window, choice.job, choice.recipe, options.settings.rate_hz
    )
    if choice.metrics is not None:
        host, port = parse_address(choice.metrics)
        console.message(f"serving metrics on http://{host}:{port}/metrics")
    request = replace(request, options=hooks.options(options) if hooks else options)
    fleet = FleetRequest(
        choice.ranks or "local",
        wanted.job,
        wanted.selection,
        request.keep_cmdline,
        follow=choice.ranks is not None,
    )
    return watch_fleet(
        request,
        fleet,
        console,
        hooks.start if hooks else _nothing,
        hooks.end if hooks else _nothing,
    )
