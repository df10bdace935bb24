"""The flight recorder (`gilprof watch`) with a scripted backend whose sampler cannot read
the target now and then: a few failed windows in a row are sampled again, more end the run
as the target's exit does (the real sampler: tests/integration/test_watch*.py)."""

from __future__ import annotations

import os
import time

from gilprof.model import Mode, Target
from gilprof.sampling.backends.base import SamplerSettings
from gilprof.sampling.flight import FlightRecorder, RecorderOptions, Trigger
from gilprof.sampling.session import WINDOW_RETRIES

from .test_profile_session import Scripted


class Seen:
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.written: list[tuple[str, str]] = []

    def status(self, text: str) -> None:
        pass

    def message(self, text: str) -> None:
        self.messages.append(text)

    def wrote(self, path: str, trigger: Trigger) -> None:
        self.written.append((path, trigger.kind))


class Paced(Scripted):
    """Scripted windows a few ms apart, so that --until (1 s) ends the run after a few dozen."""

    def sample_window(self, pid, settings, seconds, stop):
        time.sleep(0.01)
        return super().sample_window(pid, settings, seconds, stop)


def _record(tmp_path, backend) -> Seen:
    options = RecorderOptions(
        SamplerSettings.for_mode(Mode.CONTENTION, 1000), str(tmp_path), window_s=1.0, until_s=1.0
    )
    seen = Seen()
    assert FlightRecorder(Target(pid=os.getpid()), backend, options, seen).run() == 0
    return seen


def test_failed_windows_in_a_row_are_sampled_again(tmp_path):
    backend = Paced(10_000, not_ready=range(1, 1 + WINDOW_RETRIES))
    seen = _record(tmp_path, backend)
    assert backend.sampled > 2  # it went on after the failures
    assert [kind for _path, kind in seen.written] == ["until"], seen.messages
    assert sum("window failed, sampling again" in m for m in seen.messages) == WINDOW_RETRIES


def test_a_sampler_that_keeps_failing_ends_the_run(tmp_path):
    backend = Paced(10_000, not_ready=range(1, 10_000))
    seen = _record(tmp_path, backend)
    assert backend.sampled == 1 and backend.calls == 2 + WINDOW_RETRIES
    assert [kind for _path, kind in seen.written] == ["exited"], seen.messages
