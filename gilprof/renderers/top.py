"""`gilprof top`: a live terminal view by GIL, redrawn after each sampling window.

Threads with their held (and, in contention mode, waiting/native/idle) shares in the last
window and overall; functions by GIL share, like `py-spy top` but counting only the GIL holder.
TopView is a CaptureObserver (see gilprof.sampling.capture) that draws with rich.Live.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gilprof.analysis.table import build_table, counts_toward_shares
from gilprof.model import ThreadState
from gilprof.profile import Profile
from gilprof.renderers._rich import pct
from gilprof.renderers.live import LiveObserver, summary_lines

STATE_COLUMNS = (ThreadState.HELD, ThreadState.WAITING, ThreadState.NATIVE, ThreadState.IDLE)


def _share(row: dict[int, int] | None, window: int | None, ticks: float) -> float | None:
    if not ticks:
        return None
    if window is None:
        return min(1.0, sum((row or {}).values()) / ticks)
    return min(1.0, (row or {}).get(window, 0) / ticks)


def top_view(
    profile: Profile, label: str, elapsed: float, *, rows: int = 15, status: str = ""
) -> Group:
    """One frame of the view: header, threads, functions (last window and whole run)."""
    table = build_table(profile, series=True)
    mode = profile.sampling.mode
    nwin = len(table.windows)
    last = nwin - 1 if nwin else None
    last_ticks = table.windows[-1][2] if nwin else 0.0
    ticks = table.ticks
    header = Text(
        f"gilprof top · {label} · {mode} mode · {profile.sampling.rate_hz:g} Hz · "
        f"{elapsed:5.1f} s · {nwin} windows · {profile.sampling.samples} samples",
        style="bold",
    )
    out: list[Any] = [header]
    if mode.knows_gil and table.gil_series is not None and nwin:
        now = _share(table.gil_series, last, last_ticks)
        out.append(
            Text(
                f"GIL utilization: {pct(now)} last window, "
                f"{pct(_share(table.gil_series, None, ticks))} overall"
            )
        )
    elif not mode.knows_gil:
        out.append(Text(f"{mode} mode records no GIL state: shares are per thread", style="yellow"))
    out.append(Text(status or "q or Ctrl-C: quit", style="dim"))
    if last is None:
        out.append(Text("waiting for the first sampling window...", style="italic"))
        return Group(*out)
    states = STATE_COLUMNS if mode.reads_states else ((ThreadState.HELD,) if mode.knows_gil else ())
    threads = Table(title="Threads", title_justify="left", expand=False)
    threads.add_column("thread")
    for state in states:
        threads.add_column(
            f"{state} now" if state is ThreadState.HELD else str(state), justify="right"
        )
    if ThreadState.HELD in states:
        threads.add_column("held overall", justify="right")
    if not states:
        threads.add_column("sampled now", justify="right")
    order = sorted(
        table.states, key=lambda tid: -sum(table.states[tid].get(ThreadState.HELD, {}).values())
    )
    for tid in order[:rows]:
        per = table.states[tid]
        cells = [table.thread_names.get(tid, str(tid))]
        cells += [pct(_share(per.get(s), last, last_ticks)) for s in states]
        if ThreadState.HELD in states:
            cells.append(pct(_share(per.get(ThreadState.HELD), None, ticks)))
        if not states:
            cells.append(pct(_share(_all_states(per), last, last_ticks)))
        threads.add_row(*cells)
    out.append(threads)
    funcs = Table(
        title="Functions by GIL share" if mode.knows_gil else "Functions", title_justify="left"
    )
    for name, justify in (
        ("self now", "right"),
        ("total now", "right"),
        ("total overall", "right"),
        ("function", "left"),
        ("file", "left"),
    ):
        funcs.add_column(name, justify=justify)  # type: ignore[arg-type]
    series = table.total_series or {}
    ranked = sorted(series, key=lambda k: (-series[k].get(last, 0), -table.total.get(k, 0)))
    self_now = _self_in_window(profile, last)
    for key in ranked[:rows]:
        name, file, _line, thread = key
        funcs.add_row(
            pct(_share({last: self_now.get((name, file), 0)}, last, last_ticks)),
            pct(_share(series[key], last, last_ticks)),
            pct(_share(series[key], None, ticks)),
            name + (f" [{thread}]" if thread else ""),
            file.rsplit("/", 1)[-1],
        )
    out.append(funcs)
    return Group(*out)


def _all_states(per: dict[ThreadState, dict[int, int]]) -> dict[int, int]:
    merged: dict[int, int] = {}
    for row in per.values():
        for window, count in row.items():
            merged[window] = merged.get(window, 0) + count
    return merged


def _self_in_window(profile: Profile, window: int | None) -> dict[tuple[str, str], int]:
    """Leaf-function counts of the share-counting samples in one window."""
    out: dict[tuple[str, str], int] = {}
    if window is None:
        return out
    mode = profile.sampling.mode
    for index, count in profile.windows[window].counts.items():
        stack = profile.stacks[index]
        if stack.frames and counts_toward_shares(mode, stack.state):
            leaf = profile.frames[stack.frames[-1]]
            out[(leaf.name, leaf.file)] = out.get((leaf.name, leaf.file), 0) + count
    return out


class TopView(LiveObserver):
    """CaptureObserver drawing top_view on the terminal's alternate screen."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console()
        self.status = ""
        self.messages: list[str] = []
        self._profile: Profile | None = None

    def sampling(self, label: str) -> None:
        super().sampling(label)
        self._open(
            Live(
                self._frame(),
                console=self.console,
                screen=True,
                auto_refresh=False,
                transient=True,
            )
        )

    def _frame(self) -> Any:
        elapsed = time.monotonic() - self.started
        if self._profile is None:
            return Group(
                Text(f"gilprof top · {self.label} · attaching..."),
                Text("q or Ctrl-C: quit", style="dim"),
            )
        rows = max(5, (self.console.size.height - 12) // 2)
        return top_view(self._profile, self.label, elapsed, rows=rows, status=self.status)

    def window(self, profile: Profile, _window: object) -> None:
        profile.finish()
        self._profile = profile
        if self._live is not None:
            self._live.update(self._frame(), refresh=True)

    def message(self, text: str) -> None:
        self.messages.append(text)

    def wrote(self, path: str, profile: Profile) -> None:
        self.messages.append(summary_lines(profile, path)[0])
