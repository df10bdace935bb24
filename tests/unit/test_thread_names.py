"""ThreadNames against a stand-in for `py-spy dump`: a script that fails its first calls the
way a nonblocking dump of a running target does now and then ("Failed to get stack traces",
exit 1, nothing on stdout), then prints the threads."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from gilprof.model import Sample, ThreadState
from gilprof.sampling.backends.states import ThreadNames

THREADS = [
    {"thread_id": 0x7F0000001000, "os_thread_id": 101, "thread_name": "MainThread"},
    {"thread_id": 0x7F0000002000, "os_thread_id": 102, "thread_name": "ingress"},
]


def fake_dump(tmp_path: Path, failures: int) -> tuple[str, Path]:
    calls = tmp_path / "calls"
    script = tmp_path / "fake_dump.py"
    script.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        f"calls = Path({str(calls)!r})\n"
        "n = int(calls.read_text()) if calls.exists() else 0\n"
        "calls.write_text(str(n + 1))\n"
        f"if n < {failures}:\n"
        "    print('Error: Failed to get stack traces', file=sys.stderr)\n"
        "    sys.exit(1)\n"
        f"print({json.dumps(json.dumps(THREADS))})\n"
    )
    # a shell wrapper, not a shebang: a shebang cannot hold an interpreter path with a space
    binary = tmp_path / "py-spy"
    binary.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(script))}\n")
    binary.chmod(0o755)
    return str(binary), calls


def sample(tid: int) -> Sample:
    return Sample(tid, "", (), 1, ThreadState.HELD)


def test_a_failed_dump_is_tried_again_until_it_reads(tmp_path: Path) -> None:
    binary, calls = fake_dump(tmp_path, failures=2)
    names = ThreadNames(binary, pid=1)
    names.first()
    assert names.names[101] == "MainThread" and names.names[102] == "ingress"
    assert calls.read_text() == "3"


def test_dumps_that_keep_failing_name_nothing_and_stop_after_the_tries(tmp_path: Path) -> None:
    binary, calls = fake_dump(tmp_path, failures=100)
    names = ThreadNames(binary, pid=1)
    names.first()
    assert names.names == {}
    assert calls.read_text() == str(ThreadNames.TRIES)
    assert [s.thread_name for s in names.name_samples([sample(101)])] == [""]


def test_a_window_with_an_unnamed_thread_waits_for_the_dump_it_asked_for(tmp_path: Path) -> None:
    binary, calls = fake_dump(tmp_path, failures=0)
    names = ThreadNames(binary, pid=1)  # no first(): the window's end asks for the names
    named = names.name_samples([sample(101), sample(102), sample(999)])
    assert [s.thread_name for s in named] == ["MainThread", "ingress", ""]
    assert calls.read_text() == "1"
