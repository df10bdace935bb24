"""How a sampler that exited before its first sample is reported (one rule for both backends)."""

from __future__ import annotations

import pytest

from gilprof.errors import PermissionDenied, SamplerError
from gilprof.sampling.backends.base import NotReady, SamplerRun


def _run(interrupted: bool = False) -> SamplerRun:
    return SamplerRun(
        lines=["Error: boom"],
        started=False,
        t0=0.0,
        t1=1.0,
        interrupted=interrupted,
        stopped_itself=not interrupted,
        returncode=1,
    )


@pytest.mark.parametrize(
    ("interrupted", "denied", "not_ready", "expected"),
    [
        (True, True, True, NotReady),  # Ctrl-C before the first sample: nothing went wrong
        (False, True, True, PermissionDenied),  # the user must act: say how
        (False, False, True, NotReady),  # a target too young to read: the session retries
        (False, False, False, SamplerError),
    ],
)
def test_start_failure_is_the_error_the_session_acts_on(interrupted, denied, not_ready, expected):
    error = _run(interrupted).start_failure("py-spy", "boom", denied=denied, not_ready=not_ready)
    assert type(error) is expected


def test_permission_hint_names_the_sampler_and_the_fixes():
    error = _run().start_failure("austin", "boom", denied=True, not_ready=False)
    text = str(error)
    assert text.startswith("austin may not read")
    assert "SYS_PTRACE" in text and "ptrace_scope" in text and "gilprof exec" in text


def test_sampler_error_carries_the_samplers_last_words():
    error = _run().start_failure(
        "py-spy", "Failed to open /proc/1/maps", denied=False, not_ready=False
    )
    assert str(error) == "py-spy failed: Failed to open /proc/1/maps"
