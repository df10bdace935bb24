"""An empty profile (no samples) and why it may be empty: report warns, compare and gate refuse."""

from __future__ import annotations

from gilprof.errors import UsageError
from gilprof.profile import Profile


def is_empty(profile: Profile) -> bool:
    return not any(window.counts for window in profile.windows)


def why_empty(profile: Profile) -> str | None:
    """The likely causes when `profile` has no samples; None when it has some."""
    if not is_empty(profile):
        return None
    if profile.sampling.mode.reads_states and any(w.spans for w in profile.windows):
        # states mode counts only the holders; every thread's state is in the spans
        return (
            f"no thread held the GIL at any tick in {profile.sampling.duration_s:.1f} s: "
            "every thread slept or waited (each thread's state is under 'GIL contention per "
            "thread'); there is no GIL share to compare"
        )
    idle = (
        "no thread held the GIL at any tick (gil mode records only the holder): the target "
        "may have been idle"
        if profile.sampling.mode.knows_gil
        else "the target may have been idle"
    )
    return (
        f"0 samples in {profile.sampling.duration_s:.1f} s: {idle}; the PID may be a "
        "launcher or shell rather than the Python rank (check with gilprof ps); or sampling "
        "was too short (-d)"
    )


def refuse_empty(profile: Profile, what: str) -> None:
    """UsageError (exit 2) for an empty profile: its shares are 0/0, no change can be judged."""
    reason = why_empty(profile)
    if reason is not None:
        raise UsageError(f"{what} has no samples, nothing to judge ({profile.label}): {reason}")
