"""GP003: lengths read back from a broadcast header, and objects the rule cannot see."""

from __future__ import annotations

import textwrap

import pytest

from gilprof.lint import lint_source

HEADER = """
import pickle
import numpy as np

def send(comm, obj, rank, root=0):
    header = np.zeros(2, dtype=np.int64)
    if rank == root:
        payload = pickle.dumps(obj)
        size = len(payload)
        header[:] = (1, size)
    else:
        payload = None
    comm.Bcast([header, MPI.INT64_T], root=root)
    ok, size = int(header[0]), int(header[1])
    if rank == root:
        if len(payload) != size:
            raise RuntimeError("mismatch")
"""


def gp003_lines(source: str) -> list[int]:
    return [f.line for f in lint_source(textwrap.dedent(source)) if f.rule == "GP003"]


def test_a_length_read_back_from_the_roots_own_header_is_followed() -> None:
    (finding,) = [f for f in lint_source(HEADER) if f.rule == "GP003"]
    assert finding.line == 16
    assert "read back" in finding.message and "header[1]" in finding.message


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            "    if rank == root:\n        if len(payload)",
            "    if rank != root:\n        if len(payload)",
        ),
        ("header[:] = (1, size)", "header[:] = (1, size + 1)"),
        ("int(header[1])", "int(header[0])"),
        ("comm.Bcast([header, MPI.INT64_T], root=root)", "comm.Recv([header, MPI.INT64_T])"),
        ("    comm.Bcast([header", "    header.fill(0)\n    comm.Bcast([header"),
    ],
    ids=["non-root-branch", "not-the-length", "other-slot", "received-not-sent", "overwritten"],
)
def test_header_near_misses(change: str, why: str) -> None:
    assert change in HEADER
    assert gp003_lines(HEADER.replace(change, why)) == []


@pytest.mark.parametrize(
    "binding",
    [
        "groups = dist.distributed_c10d._world.pg_map",
        "groups = REGISTRY",
        "groups = get_groups()",
        "groups = self.groups",
    ],
)
def test_no_always_true_claim_on_objects_the_rule_cannot_see(binding: str) -> None:
    """SGLang's test: `process_groups` aliases a global dict that opaque calls grow."""
    source = f"""
        def check(self):
            {binding}
            initial = len(groups)
            for _ in range(2):
                group = init_group()
                group.destroy()
                assert len(groups) == initial
        """
    assert gp003_lines(source) == []
    assert gp003_lines(source.replace(binding, "groups = dict(REGISTRY)")) == [8]


def test_a_parameter_may_be_resized_by_any_call() -> None:
    source = """
        def check(items):
            n = len(items)
            refresh()
            return len(items) == n
        """
    assert gp003_lines(source) == []
    assert gp003_lines(source.replace("refresh()", "print(n)")) == [5]
