"""Error types. Each carries the exit code the CLI entry point turns it into.

Only `gilprof.cli.main.main` converts these into process exits, so every command stays
testable in-process with click's CliRunner.
"""

from __future__ import annotations


class GilprofError(Exception):
    """A failure the user can act on; its message is printed as one line. Each kind names its
    exit code where it is declared: `class X(GilprofError, exit_code=N)`."""

    exit_code = 2

    def __init_subclass__(cls, exit_code: int | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if exit_code is not None:
            cls.exit_code = exit_code


class UsageError(GilprofError, exit_code=2):
    """Options that contradict each other or name nothing."""


class InputError(GilprofError, exit_code=2):
    """A file gilprof was asked to read is missing, truncated or of an unknown format."""


class TargetError(GilprofError, exit_code=3):
    """The process to sample does not exist, is not Python, or cannot be chosen."""


class PermissionDenied(GilprofError, exit_code=4):
    """The sampler may not read the target's memory."""


def no_lines(option: str) -> str:
    """The one line a line-number option gets on a profile whose stacks have no lines."""
    return (
        f"{option}: this profile's stacks come from the thread-state reader (the default "
        "mode), which names functions, not the line running: capture with `attach --lines`"
    )


class SamplerError(GilprofError, exit_code=5):
    """The sampler binary is missing, too old, or failed in a way gilprof cannot retry."""


class BudgetFailed(GilprofError, exit_code=1):
    """A perf gate budget was exceeded (exit 1, as CI expects for a failed check)."""


# Exit statuses that are outcomes rather than errors: the profile was written in both cases.
EXIT_PARTIAL = 6  # the target exited before --duration ended: the profile covers less time
EXIT_INTERRUPTED = 130  # SIGINT/SIGTERM stopped sampling; the profile is marked partial


class WaitInterrupted(GilprofError, exit_code=EXIT_INTERRUPTED):
    """SIGINT/SIGTERM while waiting for a rank or a start trigger: nothing was sampled,
    nothing is written."""


def one_line(text: str) -> str:
    """`text` on one printable line: a key or value read from a file may hold a newline or
    a control character (TOML allows them in quoted keys); they are shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
