"""gilprof's thread-state reader against a second opinion: pystack's snapshot.

gil_states.py puts its threads in states that do not change: `holder` inside one C call that
never releases the GIL, `spinner` and the main thread waiting for it, `sleeper` blocked on
an Event. pystack (`pystack remote PID --native`, written by nobody here) pauses the target
and prints per thread "[Has the GIL]", "[Waiting for the GIL]" (or "[Dropping the GIL]"), or
nothing. The reader (gilprof.sampling.threadstate, which does not pause the target) must
say the same of every thread, before and after pystack's snapshot.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from gilprof.model import ThreadState
from gilprof.sampling.threadstate.reader import Recording, StateReader
from tests.integration.conftest import WORKLOADS, require_interpreter, require_tool, wait_for

TICKS = 20
PYSTACK_STATES = {
    "Has the GIL": ThreadState.HELD,
    "Waiting for the GIL": ThreadState.WAITING,
    "Dropping the GIL": ThreadState.WAITING,  # inside drop_gil: the reader's switch wait
}
# the workload's four threads once the holder is inside its C call
SETTLED = {ThreadState.HELD: 1, ThreadState.WAITING: 2, ThreadState.IDLE: 1}
THREAD_LINE = re.compile(r"^Traceback for thread (\d+) \(.*?\) \[(.*?)\]", re.MULTILINE)


def reader_states(reader: StateReader) -> dict[int, ThreadState]:
    """Each thread's state (by Linux id) over TICKS ticks; a thread that read two different
    states fails the test, since none of these threads changes state."""
    seen: dict[int, Counter[ThreadState]] = {}
    out = Recording()
    for _ in range(TICKS):
        readings = reader.tick(0.0, out)
        linux_id = {t.profile_id: tid for tid, t in reader.threads.items()}
        for profile_id, (state, _frames) in readings.items():
            seen.setdefault(linux_id[profile_id], Counter())[state] += 1
    unstable = {tid: dict(c) for tid, c in seen.items() if len(c) > 1}
    assert not unstable, f"threads read in more than one state: {unstable}"
    return {tid: next(iter(c)) for tid, c in seen.items()}


def pystack_states(pid: int) -> dict[int, ThreadState | None]:
    """pystack's classification by Linux thread id (None: neither holds nor waits)."""
    done = subprocess.run(
        [require_tool("pystack"), "remote", str(pid), "--native", "--no-color"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-500:]
    return {int(tid): PYSTACK_STATES.get(label) for tid, label in THREAD_LINE.findall(done.stdout)}


@pytest.mark.parametrize("minor", ["default", "10", "12", "13"])
def test_reader_agrees_with_pystack(spawn, tmp_path: Path, minor: str) -> None:
    python = sys.executable if minor == "default" else require_interpreter(minor)
    pidfile = tmp_path / "pid"
    target = spawn([python, str(WORKLOADS / "gil_states.py"), str(pidfile)])
    assert wait_for(pidfile.exists, 30), "gil_states.py did not start"
    reader = StateReader.open(target.pid, 100)
    try:
        # The holder starts just after the PID file; until it is inside its C call the spinner
        # and the main thread take turns holding the GIL. Settled: all four threads seen, in the
        # final counts, and still so a while later (one read could catch a turn in progress).
        def final_counts() -> bool:
            return Counter(s for s, _ in reader.tick(0.0, Recording()).values()) == SETTLED

        def settled() -> bool:
            if not final_counts():
                return False
            time.sleep(0.2)
            return final_counts()

        assert wait_for(settled, 10), "the threads never settled: one holds, two wait, one idle"
        before = reader_states(reader)
        snapshot = pystack_states(target.pid)
        after = reader_states(reader)
    finally:
        reader.close()
    assert before == after
    assert set(snapshot) == set(before), (snapshot, before)
    # the workload's four threads: one holder, two waiters (spinner, main), one sleeper
    assert sorted(Counter(snapshot.values()).items(), key=str) == sorted(
        {None: 1, ThreadState.HELD: 1, ThreadState.WAITING: 2}.items(), key=str
    ), snapshot
    for tid, theirs in snapshot.items():
        ours = before[tid]
        # pystack's "neither" is the sleeper, blocked on its Event's lock: idle to the reader
        assert ours is (theirs or ThreadState.IDLE), (tid, ours, theirs)
