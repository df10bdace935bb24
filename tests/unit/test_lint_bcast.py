"""GP004: a per-iteration mpi4py `bcast` whose result the root uses."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gilprof.lint import RULES, lint_paths, lint_source


def gp004_lines(source: str) -> list[int]:
    return [f.line for f in lint_source(textwrap.dedent(source)) if f.rule == "GP004"]


LOOP = """
def loop(comm, queue, rank):
    while True:
        requests = queue.fetch() if rank == 0 else None
        requests = comm.bcast(requests, root=0)
        run(requests)
"""


def test_a_bcast_in_a_loop_whose_result_is_used_is_flagged_with_the_fix() -> None:
    (finding,) = lint_source(LOOP)
    assert (finding.rule, finding.line) == ("GP004", 5)
    assert "loop at line 3" in finding.message and "keep the object on the root" in finding.message
    assert "comm.bcast(None, root" in finding.fix and "bcast_after" in RULES["GP004"].fix


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("requests = comm.bcast(requests, root=0)",
         "requests = requests if rank == 0 else comm.bcast(None, root=0)"),
        ("requests = comm.bcast(requests, root=0)", "comm.bcast(requests, root=0)"),
        ("        run(requests)\n", ""),  # bound but never read
        ("    while True:\n", "    if True:\n"),  # once, not per iteration
        ("requests = comm.bcast(requests, root=0)", "requests = comm.Bcast(requests, root=0)"),
        ("        requests = comm.bcast",
         "        if rank == 0:\n            run(requests)\n            continue\n"
         "        requests = comm.bcast"),
        ("        requests = comm.bcast(requests, root=0)",
         "        if rank != 0:\n            requests = comm.bcast(requests, root=0)"),
    ],
    ids=["root-keeps-object", "discarded", "never-read", "not-a-loop", "uppercase-Bcast",
         "root-continues", "non-root-branch"],
)  # fmt: skip
def test_near_misses(before: str, after: str) -> None:
    assert before in LOOP
    assert gp004_lines(LOOP.replace(before, after)) == []


def test_a_function_called_from_a_loop_of_its_file_is_per_iteration() -> None:
    source = """
        class Executor:
            def _fetch(self):
                return self.comm.bcast(self.queue.get(), root=0) if self.on else None

            def _step(self):
                new = self.dist.comm.bcast(self.pending, root=0)
                self.active.extend(new)

            def run(self):
                while self.alive:
                    self._step()
        """
    assert gp004_lines(source) == [7]
    assert gp004_lines(source.replace("self._step()", "pass")) == []


def test_wrappers_are_followed_across_files(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(
        "def mpi_broadcast(obj, root=0):\n"
        "    return mpi_comm().bcast(obj, root) if ENABLED else obj\n"
        "\n"
        "def broadcast_twice_removed(obj):\n"
        "    out = mpi_broadcast(obj)\n"
        "    return out\n"
    )
    (tmp_path / "executor.py").write_text(
        "def loop(queue):\n"
        "    for batch in queue:\n"
        "        run(mpi_broadcast(batch))\n"
        "        shared = broadcast_twice_removed(batch)\n"
        "        run(shared)\n"
    )
    findings = lint_paths([tmp_path]).findings
    assert [(Path(f.path).name, f.line, f.rule) for f in findings] == [
        ("executor.py", 3, "GP004"),
        ("executor.py", 4, "GP004"),
    ]
    assert "returns a `bcast` result" in findings[0].message


def test_a_wrapper_that_keeps_the_object_on_the_root_is_not_a_wrapper(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(
        "def share(comm, obj, root=0):\n"
        "    if comm.rank == root:\n"
        "        comm.bcast(obj, root)\n"
        "        return obj\n"
        "    return comm.bcast(None, root)\n"
    )
    (tmp_path / "executor.py").write_text(
        "def loop(comm, queue):\n    for batch in queue:\n        run(share(comm, batch))\n"
    )
    assert lint_paths([tmp_path]).findings == ()
