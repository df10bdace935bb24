"""A session streaming its profile (gilprof.profile/2): the file before, during and after
sampling, with a scripted backend (the real sampler: tests/integration/test_faults.py and
test_profile_stream.py)."""

from __future__ import annotations

import os
import threading

import pytest

from gilprof.errors import InputError, TargetError
from gilprof.model import Mode, Target, ThreadState
from gilprof.profile import Profile, StreamWriteError
from gilprof.sampling.backends.base import Backend, NotReady, SamplerSettings, WindowResult
from gilprof.sampling.session import WINDOW_RETRIES, SessionOptions, run_session

from .builders import sample


class Scripted(Backend):
    """Windows of 1 s: two threads in contention mode; `check(i)` runs before window i.
    Call `fail_at` raises TargetError; the calls in `not_ready` raise NotReady (a sampler
    that could not read the target that time) and count no window."""

    name = "scripted"

    def __init__(self, windows: int, check=None, fail_at: int | None = None, not_ready=()) -> None:
        self.windows, self.check, self.fail_at = windows, check, fail_at
        self.not_ready = set(not_ready)
        self.calls = 0
        self.sampled = 0

    def version(self) -> str:
        return "1"

    def ticks(self, result: WindowResult, settings: SamplerSettings) -> tuple[float, str]:
        return result.seconds * settings.rate_hz, "estimated"

    def sample_window(self, pid, settings, seconds, stop) -> WindowResult:
        i = self.calls
        self.calls += 1
        if self.check is not None:
            self.check(i)
        if self.fail_at == i:
            raise TargetError("scripted failure")
        if i in self.not_ready:
            raise NotReady("failed to find python version (scripted)")
        i = self.sampled
        self.sampled += 1
        held = sample("exec", "loop", f"hot{i % 3}", count=600, tid=7)
        waits = sample("io", "serve", count=400, tid=8, state=ThreadState.WAITING)
        return WindowResult(
            t0=10.0 + i,
            t1=11.0 + i,
            samples=[held, waits],
            spans=[(held, 0.0, 0.6), (waits, 0.0, 0.4)],
            target_exited=i == self.windows - 1,
        )


def _run(tmp_path, backend, seen=None) -> Profile:
    options = SessionOptions(
        SamplerSettings.for_mode(Mode.CONTENTION, 1000), duration=None, window_s=1.0
    )

    def on_window(profile, _result):
        if seen is not None:
            seen.append(len(profile.windows))

    return run_session(
        Target(pid=os.getpid()),
        backend,
        options,
        threading.Event(),
        on_window,
        output=lambda target: str(tmp_path / f"p-{target.pid}.json"),
    )


def test_the_file_exists_before_sampling_and_grows_a_window_at_a_time(tmp_path):
    path = tmp_path / f"p-{os.getpid()}.json"
    on_disk = []

    def check(i):
        loaded = Profile.load(path)  # header (and windows so far) already written
        assert loaded.sampling.partial and "without its footer" in loaded.sampling.partial_reason
        on_disk.append(len(loaded.windows))

    held_in_memory: list[int] = []
    profile = _run(tmp_path, Scripted(5, check), held_in_memory)
    assert on_disk == [0, 1, 2, 3, 4]
    # the session keeps the folded total and the window just sampled (a live view shows it)
    assert held_in_memory == [1, 2, 2, 2, 2]
    assert len(profile.windows) == 5 and profile.windows[4].spans  # what it returns: the file
    assert not profile.sampling.partial
    assert profile.sampling.samples == 5 * 1000
    assert Profile.load(path).to_dict() == profile.to_dict()


def test_a_window_the_sampler_could_not_read_is_sampled_again(tmp_path):
    # calls 1-3 fail (WINDOW_RETRIES in a row): the capture goes on to all 5 windows
    backend = Scripted(5, not_ready=range(1, 1 + WINDOW_RETRIES))
    profile = _run(tmp_path, backend)
    assert len(profile.windows) == 5 and backend.calls == 5 + WINDOW_RETRIES
    assert not profile.sampling.partial
    failed = [m for m in profile.sampling.messages if m.startswith("window failed")]
    assert len(failed) == WINDOW_RETRIES and "failed to find python version" in failed[0]


def test_a_sampler_that_keeps_failing_ends_the_capture_marked_partial(tmp_path):
    # before the fix the first failure ended the capture, and its profile read complete
    profile = _run(tmp_path, Scripted(5, not_ready=range(2, 100)))
    assert len(profile.windows) == 2
    assert profile.sampling.partial
    reason = profile.sampling.partial_reason
    assert f"failed {WINDOW_RETRIES + 1} windows in a row after 2.0 s" in reason, reason


def test_no_window_sampled_leaves_no_file(tmp_path):
    with pytest.raises(TargetError):
        _run(tmp_path, Scripted(3, fail_at=0))
    assert not os.listdir(tmp_path)


def test_a_write_failure_mid_run_keeps_the_windows_written(tmp_path, monkeypatch):
    import gilprof.profile.stream as stream

    real = stream.os.write
    calls = {"n": 0}

    def write(fd, data):  # the third record (second window) finds the disk full
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(stream.os, "write", write)
    with pytest.raises(StreamWriteError, match="No space left on device"):
        _run(tmp_path, Scripted(5))
    [name] = os.listdir(tmp_path)
    kept = Profile.load(tmp_path / name)
    assert kept.sampling.partial and len(kept.windows) == 1


def test_a_cut_file_is_partial_and_an_empty_one_refused(tmp_path):
    _run(tmp_path, Scripted(2))
    [name] = os.listdir(tmp_path)
    path = tmp_path / name
    path.write_bytes(path.read_bytes()[:-5])  # footer cut: the kill came while writing it
    assert Profile.load(path).sampling.partial
    path.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        Profile.load(path)
