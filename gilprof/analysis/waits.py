"""GIL waits before and after: each thread's wait share and each blame cell, with intervals.

The figures come from each window's spans (gilprof.analysis.contention.per_window), so they
exist for profiles that recorded every thread's state (states mode, the default, and
contention mode). A share's interval is the batch-means one compare uses for functions:
windows regrouped into at most `max_batches` contiguous batches, a Welch t interval on the
difference (gilprof.stats).
"""

from __future__ import annotations

from dataclasses import dataclass

from gilprof.analysis.contention import WindowContention, has_spans, per_window
from gilprof.model import ThreadState, function_name_matches
from gilprof.profile import Profile
from gilprof.stats import Difference, batch_windows, ratio_difference_ci

BlameKey = tuple[str, str, str, str]  # waiter, holder, holder's function, its file


@dataclass(frozen=True)
class WaitChange:
    thread: str
    wait: Difference  # share of wall time waiting for the GIL
    verdict: str


@dataclass(frozen=True)
class BlameChange:
    waiter: str
    holder: str
    function: str
    file: str
    share: Difference  # share of wall time the waiter waited while the holder ran function
    verdict: str


@dataclass(frozen=True)
class WaitComparison:
    threads: tuple[WaitChange, ...]
    blame: tuple[BlameChange, ...]


@dataclass(frozen=True)
class WaitSeries:
    """Per window: its seconds, each thread's wait seconds, each blame cell's seconds."""

    seconds: list[float]
    waits: dict[str, list[float]]
    blame: dict[BlameKey, list[float]]

    @classmethod
    def of(cls, profile: Profile) -> WaitSeries:
        from gilprof.analysis.attribution import thread_label

        windows: list[WindowContention] = per_window(profile)
        n = len(windows)
        waits: dict[str, list[float]] = {}
        blame: dict[BlameKey, list[float]] = {}
        for i, acc in enumerate(windows):
            for tid, states in acc.states.items():
                row = waits.setdefault(thread_label(profile, tid), [0.0] * n)
                row[i] += states.get(ThreadState.WAITING, 0.0)
            for key, seconds in acc.blame.items():
                blame.setdefault(key, [0.0] * n)[i] += seconds
        return cls([w.seconds for w in windows], waits, blame)

    def total(self) -> float:
        return sum(self.seconds)

    def wait_share(self, thread: str) -> float:
        total = self.total()
        return sum(self.waits.get(thread, ())) / total if total else 0.0

    def blame_share(self, function: str) -> float:
        """Waits of every thread while a holder ran `function`, as a share of wall time."""
        total = self.total()
        seconds = sum(
            sum(row) for key, row in self.blame.items() if function_name_matches(function, key[2])
        )
        return seconds / total if total else 0.0


def compare_waits(
    before: Profile,
    after: Profile,
    *,
    confidence: float = 0.95,
    max_batches: int = 30,
    top: int = 10,
) -> WaitComparison | None:
    """Wait shares and the largest blame cells, before and after; None unless both
    profiles recorded every thread's state."""
    if not (has_spans(before) and has_spans(after)):
        return None
    from gilprof.analysis.compare import verdict

    b, a = WaitSeries.of(before), WaitSeries.of(after)

    def change(b_row: list[float], a_row: list[float]) -> Difference:
        bn, bd = batch_windows(b_row, b.seconds, max_batches)
        an, ad = batch_windows(a_row, a.seconds, max_batches)
        return ratio_difference_ci(bn, bd, an, ad, confidence)

    zeros_b, zeros_a = [0.0] * len(b.seconds), [0.0] * len(a.seconds)
    threads = [
        WaitChange(name, d, verdict(d))
        for name in sorted(b.waits.keys() | a.waits.keys())
        for d in [change(b.waits.get(name, zeros_b), a.waits.get(name, zeros_a))]
    ]
    threads.sort(key=lambda c: -max(c.wait.before, c.wait.after))
    cells = [
        BlameChange(*key, d, verdict(d))
        for key in b.blame.keys() | a.blame.keys()
        for d in [change(b.blame.get(key, zeros_b), a.blame.get(key, zeros_a))]
    ]
    cells.sort(key=lambda c: (-max(c.share.before, c.share.after), c.waiter, c.holder, c.function))
    return WaitComparison(
        tuple(t for t in threads if max(t.wait.before, t.wait.after) > 0), tuple(cells[:top])
    )
