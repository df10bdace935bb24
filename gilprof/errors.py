"""Error types. Each carries the exit code the CLI entry point turns it into.

Only `gilprof.cli.main.main` converts these into process exits, so every command stays
testable in-process with click's CliRunner.
"""

from __future__ import annotations


class GilprofError(Exception):
    """A failure the user can act on; its message is printed as one line."""

    exit_code = 2


class UsageError(GilprofError):
    """Options that contradict each other or name nothing."""

    exit_code = 2


class InputError(GilprofError):
    """A file gilprof was asked to read is missing, truncated or of an unknown format."""

    exit_code = 2


class TargetError(GilprofError):
    """The process to sample does not exist, is not Python, or cannot be chosen."""

    exit_code = 3


class PermissionDenied(GilprofError):
    """The sampler may not read the target's memory."""

    exit_code = 4


class SamplerError(GilprofError):
    """The sampler binary is missing, too old, or failed in a way gilprof cannot retry."""

    exit_code = 5


class BudgetFailed(GilprofError):
    """A perf gate budget was exceeded (exit 1, as CI expects for a failed check)."""

    exit_code = 1


# Exit statuses that are outcomes rather than errors: the profile was written in both cases.
EXIT_PARTIAL = 6  # the target exited before --duration ended: the profile covers less time
EXIT_INTERRUPTED = 130  # SIGINT/SIGTERM stopped sampling; the profile is marked partial
