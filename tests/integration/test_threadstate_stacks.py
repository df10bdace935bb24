"""The reader's Python stacks against stacks known by construction (workloads/deep_stacks.py).

3.11+ frames are read a page of the thread's data stack at a time (target.Interpreter.stack):
`deep` crosses pages and steps off the data stack into a generator's own frame and back;
`deeper` is longer than MAX_DEPTH, so only its innermost frames are kept. Every frame the
workload made must be there, in order, on every interpreter the reader supports.
"""

from __future__ import annotations

import pytest

from gilprof.sampling.threadstate.target import MAX_DEPTH, open_interpreter
from tests.integration.conftest import WORKLOADS, require_interpreter
from tests.integration.containers import sid_python


def chain(depth: int, generator_at: int) -> list[str]:
    """The function names from down_even(depth) inward, as deep_stacks.py calls them."""
    names = []
    for n in range(depth, -1, -1):
        names.append("down_even" if n % 2 == 0 else "down_odd")
        if n == generator_at:
            names.append("through_generator")
    return [*names, "park"]


@pytest.mark.parametrize("minor", ["10", "11", "12", "13", "sid-3.14", "sid-3.15"])
def test_stacks_read_every_frame_in_order(spawn, minor: str) -> None:
    if minor.startswith("sid-"):
        python = sid_python(minor.removeprefix("sid-"))
    else:
        python = require_interpreter(minor)
    target = spawn([python, str(WORKLOADS / "deep_stacks.py")])
    assert target.stdout is not None
    ready = target.stdout.readline().decode().split()
    assert ready[:1] == ["ready"], ready
    deep_tid, deeper_tid = int(ready[1]), int(ready[2])
    interpreter = open_interpreter(target.pid)
    try:
        threads = interpreter.threads()
        deep = [f.name.rsplit(".", 1)[-1] for f in interpreter.stack(threads[deep_tid].tstate)]
        deeper = [f.name.rsplit(".", 1)[-1] for f in interpreter.stack(threads[deeper_tid].tstate)]
    finally:
        interpreter.memory.close()
        target.kill()
        target.wait(timeout=10)
    expected = chain(60, 40)
    assert deep[-len(expected) - 1 :] == ["run", *expected], deep
    assert deep[0] == "_bootstrap", deep  # threading's frames below `run`, to the root
    assert deeper == chain(200, -1)[-MAX_DEPTH:], deeper
