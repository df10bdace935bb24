"""What a running capture shows on stderr: a live status line, messages, a summary per profile."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from gilprof.analysis.attribution import attribute
from gilprof.profile import Profile


def say(text: str) -> None:
    """One `gilprof: ...` line on stderr (looked up per call: tests swap sys.stderr)."""
    print(f"gilprof: {text}", file=sys.stderr, flush=True)


def summary_lines(profile: Profile, path: str) -> list[str]:
    """Where the profile went, how much it holds, and the top GIL holders."""
    s = profile.sampling
    note = f", PARTIAL: {s.partial_reason}" if s.partial else ""
    lines = [
        f"wrote {path} ({s.samples} samples over {s.duration_s:.1f} s, "
        f"{len(profile.windows)} windows{note})"
    ]
    if s.start_trigger is not None:
        lines.append(f"started by {s.start_trigger.summary()}")
    top = attribute(profile)
    by_self = sorted(top.functions, key=lambda f: -f.self_samples)[:3]
    if by_self and s.mode.knows_gil:
        holders = ", ".join(f"{f.key.name} {100 * f.self_share:.1f}%" for f in by_self)
        lines.append(f"GIL utilization {100 * (top.utilization or 0):.1f}%; top self: {holders}")
    return lines


class LiveObserver:
    """A CaptureObserver that draws a rich Live region from when sampling starts (label,
    clock) until the capture is done."""

    def __init__(self) -> None:
        self.label = ""
        self.started = time.monotonic()
        self._live: Any = None

    def sampling(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()

    def waiting(self, what: str, seconds: float) -> None:
        """A start trigger is awaited (drawn by LiveStatus; others show nothing)."""

    def clear_status(self) -> None:
        """The launched job is about to print: take any status line off the terminal."""

    def _open(self, live: Any) -> None:
        self._live = live
        live.__enter__()

    def done(self) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None


class LiveStatus(LiveObserver):
    """A CaptureObserver for a terminal: one status line while sampling (elapsed, samples,
    top GIL holders so far), then the summary of each profile written."""

    def __init__(self, enabled: bool, quiet: bool = False, say_waits: bool = False) -> None:
        super().__init__()
        self.enabled = enabled and not quiet
        self.quiet = quiet
        # Without a live line (not a terminal), say once what a start trigger waits for: a
        # CI log must not show a silent wait.
        self.say_waits = say_waits and not self.enabled
        self._drawn_at: float | None = None  # when the waiting line was last drawn
        self._status_lock = threading.Lock()  # the job's output is passed on from threads

    def waiting(self, what: str, seconds: float) -> None:
        # A plain line (not rich.Live): the job's output goes to the same terminal from
        # gilprof's pump threads, which clear this line before each write.
        now = time.monotonic()
        if self.say_waits:
            self.say_waits = False
            say(f"{what} (Ctrl-C stops; nothing is written until it starts)")
        if not self.enabled or (self._drawn_at is not None and now - self._drawn_at < 0.25):
            return
        with self._status_lock:
            self._drawn_at = now
            sys.stderr.write(f"\r\x1b[Kgilprof: {what}  {seconds:5.1f} s  (Ctrl-C stops)")
            sys.stderr.flush()

    def clear_status(self) -> None:
        if not self.enabled:
            return
        with self._status_lock:
            if self._drawn_at is not None or self._live is not None:
                sys.stderr.write("\r\x1b[K")
                sys.stderr.flush()
            self._drawn_at = None

    def sampling(self, label: str) -> None:
        super().sampling(label)
        if self.enabled:
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self._open(
                Live(
                    Text(f"sampling {label}: attaching..."),
                    console=Console(stderr=True),
                    refresh_per_second=4,
                    transient=True,
                )
            )

    def window(self, profile: Profile, _window: object) -> None:
        if self._live is None:
            return
        from rich.text import Text

        profile.finish()  # fold the windows so far into ticks and duration
        attribution = attribute(profile, watch=())
        by_self = sorted(attribution.functions, key=lambda f: -f.self_samples)[:3]
        holders = ", ".join(f"{f.key.name} {100 * f.self_share:.0f}%" for f in by_self) or "-"
        self._live.update(
            Text(
                f"sampling {self.label}  {time.monotonic() - self.started:5.1f} s  "
                f"{attribution.samples} samples  top: {holders}  (Ctrl-C stops and saves)"
            )
        )

    def message(self, text: str) -> None:
        say(text)

    def wrote(self, path: str, profile: Profile) -> None:
        if not self.quiet:
            for line in summary_lines(profile, path):
                say(line)
