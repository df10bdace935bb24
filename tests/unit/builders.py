"""Builders for hand-made profiles: exact counts, known windows, no sampler involved."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gilprof.model import Frame, Mode, Sample, SamplingInfo, Target, ThreadState
from gilprof.profile import Profile


def frames(*names: str, file: str = "app.py") -> tuple[Frame, ...]:
    """`frames("main", "loop", "hot")` -> root-first frames, each in `file` unless `name@file`."""
    out = []
    for i, name in enumerate(names):
        fname, _, ffile = name.partition("@")
        out.append(Frame(fname, ffile or file, 10 + i))
    return tuple(out)


def sample(
    thread: str,
    *names: str,
    count: int = 1,
    tid: int | None = None,
    state: ThreadState = ThreadState.HELD,
) -> Sample:
    return Sample(
        tid if tid is not None else abs(hash(thread)) % 100000, thread, frames(*names), count, state
    )


def make_profile(
    windows: Sequence[tuple[float, Sequence[Sample]]],
    *,
    mode: Mode = Mode.GIL,
    rate: float = 100.0,
    window_s: float = 1.0,
    rank: int | None = 0,
) -> Profile:
    """Each window is (ticks, samples); windows are laid end to end, `window_s` long each."""
    profile = Profile(
        Target(pid=1234, rank=rank, rank_source="PMI_RANK", hostname="host", python="3.11.7"),
        SamplingInfo(
            sampler="test", sampler_version="0", mode=mode, rate_hz=rate, window_s=window_s
        ),
    )
    t = 0.0
    for ticks, samples in windows:
        profile.add_window(t, t + window_s, ticks, samples)
        t += window_s
    profile.finish()
    return profile


def steady_profile(*samples: Sample, windows: int, ticks: float = 100, **kwargs) -> Profile:
    """`windows` identical windows of `ticks` ticks, each holding `samples` (make_profile's
    keywords pass through)."""
    return make_profile([(ticks, list(samples))] * windows, **kwargs)


def hot_and_serve(
    hot_stack: Sequence[str], hot: int, serve: int, *, windows: int = 4, **kwargs
) -> Profile:
    """Exact shares over `windows` windows of 100 ticks: the `hot` stack (its thread first,
    then its frames; tid 1) hot/100, `serve` on `ingress` (tid 2) serve/100."""
    return steady_profile(
        sample(hot_stack[0], *hot_stack[1:], count=hot, tid=1),
        sample("ingress", "serve", count=serve, tid=2),
        windows=windows,
        **kwargs,
    )


def noisy_windows(
    rng: random.Random,
    hot_share: float,
    hot: Sequence[str],
    *,
    sd: float = 0.03,
    windows: int = 40,
    ticks: int = 200,
    tids: tuple[int, int] = (1, 2),
) -> list[tuple[float, list[Sample]]]:
    """Windows of two threads: per window the share of the `hot` stack (its thread first, then
    its frames) drawn around `hot_share` (sd `sd`), its count and then `ingress` in `serve`'s
    (each tick at 30%) drawn out of `ticks`, as a sampler's would be."""
    out: list[tuple[float, list[Sample]]] = []
    for _ in range(windows):
        p = min(0.9, max(0.0, rng.gauss(hot_share, sd)))
        busy = sum(rng.random() < p for _ in range(ticks))
        serve = sum(rng.random() < 0.3 for _ in range(ticks - busy))
        out.append(
            (
                ticks,
                [
                    sample(hot[0], *hot[1:], count=busy, tid=tids[0]),
                    sample("ingress", "serve", count=serve, tid=tids[1]),
                ],
            )
        )
    return out


# -- for compare: two threads with fixed tids, and finding a row ---------------------------------
EXEC, INGRESS = 7, 8


def exact_profile(
    hot: int, loop_self: int, serve: int, windows: int = 4, ticks: int = 100, **kwargs
) -> Profile:
    """Exact counts per window: exec/loop/hot `hot`, exec/loop `loop_self`, ingress/serve
    `serve`, out of `ticks`."""
    return steady_profile(
        sample("exec", "loop", "hot", count=hot, tid=EXEC),
        sample("exec", "loop", count=loop_self, tid=EXEC),
        sample("ingress", "serve", count=serve, tid=INGRESS),
        windows=windows,
        ticks=ticks,
        **kwargs,
    )


def hot_noisy_windows(
    rng: random.Random, share: float, windows: int = 40
) -> list[tuple[float, list[Sample]]]:
    """Per window: the hot share drawn around `share` (sd 4 pp), then counts out of 200 ticks."""
    hot = ("exec", "main", "loop", "hot")
    return noisy_windows(rng, share, hot, sd=0.04, windows=windows, tids=(EXEC, INGRESS))


def one_row(rows, name, file=None, thread=None):
    """The one row of `rows` with this name (and file basename, thread, when given)."""
    found = [
        r
        for r in rows
        if r.name == name
        and (file is None or r.file == file)
        and (thread is None or r.thread == thread)
    ]
    assert len(found) == 1, (name, file, [(r.name, r.file, r.thread) for r in rows])
    return found[0]


# -- for the CLI tests: profiles and iteration logs on disk --------------------------------------
def fixed_shares(mode: Mode = Mode.GIL) -> Profile:
    """Exact shares: safe_broadcast 30%, serve 20%, utilization 50%."""
    return hot_and_serve(("executor-loop", "loop", "safe_broadcast"), 30, 20, mode=mode)


def noisy_profile(seed: int, hot_share: float) -> Profile:
    hot = ("executor-loop", "loop", "fetch", "safe_broadcast")
    return make_profile(noisy_windows(random.Random(seed), hot_share, hot))


def saved(profile: Profile, path: Path) -> Path:
    profile.save(path)
    return path


def steps_log(path: Path, host_ms: float, device_ms: float, n: int = 30) -> Path:
    """A TensorRT-LLM log of `n` iterations on rank 0 (host and device times vary by a few ms;
    the first iteration has no device time), behind two unrelated lines."""
    lines = ["launching workers...", "[TRT-LLM] [I] model loaded"]
    for i in range(n):
        device = "N/A" if i == 0 else f"{device_ms + (i % 3):.2f}ms"
        lines.append(
            f"[TRT-LLM] [I] [_torch][RANK 0] iter = {i}, global_rank = 0, rank = 0, "
            f"currank_total_requests = 4/16, host_step_time = {host_ms + (i % 5):.2f}ms, "
            f"prev_device_step_time = {device}, timestamp = 2026-08-04 19:08:13, "
            f"num_scheduled_requests: 4, states = {{'num_ctx_requests': 0}}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def truncated_profile(folder: Path) -> Path:
    """fixed_shares() saved in `folder` and cut in half."""
    full = saved(fixed_shares(), folder / "full.json").read_text()
    path = folder / "truncated.json"
    path.write_text(full[: len(full) // 2])
    return path


def attach_request(monkeypatch: Any, args: list[str]) -> Any:
    """The CaptureRequest `gilprof attach ARGS` hands to the capture (which is not run)."""
    from click.testing import CliRunner

    import gilprof.cli.attach as attach_cli

    seen = []

    def record(request: Any, _observer: Any) -> None:
        seen.append(request)
        raise SystemExit(0)

    monkeypatch.setattr(attach_cli, "capture", record)
    result = CliRunner().invoke(attach_cli.command, args)
    assert len(seen) == 1, result.output
    return seen[0]
