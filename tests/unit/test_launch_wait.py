"""Launch mode takes a target only when two looks 0.1 s apart agree (a process mid-exec can
pass for a plain Python process for one look)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from gilprof.errors import TargetError, WaitInterrupted
from gilprof.sampling import launch
from gilprof.sampling.discover import Selection


def _launched(answers: list[object], monkeypatch: pytest.MonkeyPatch) -> launch.LaunchedJob:
    def resolve(**_: object) -> object:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(launch, "resolve_target", resolve)
    job = launch.LaunchedJob.__new__(launch.LaunchedJob)
    job.child = SimpleNamespace(pid=100)  # type: ignore[assignment]
    job.proc = SimpleNamespace(poll=lambda: None)  # type: ignore[assignment]
    return job


def test_a_target_seen_once_is_looked_at_again(monkeypatch: pytest.MonkeyPatch) -> None:
    agent, rank0 = SimpleNamespace(pid=100), SimpleNamespace(pid=101)
    job = _launched([agent, TargetError("a launcher"), rank0, rank0], monkeypatch)
    assert job.wait_for_rank(0, Selection(), 5.0, threading.Event()) is rank0


def test_interrupted_while_waiting_is_exit_130(monkeypatch: pytest.MonkeyPatch) -> None:
    job = _launched([TargetError("none yet")], monkeypatch)
    stop = threading.Event()
    stop.set()
    with pytest.raises(WaitInterrupted, match="no profile written") as caught:
        job.wait_for_rank(0, Selection(), 5.0, stop)
    assert caught.value.exit_code == 130
