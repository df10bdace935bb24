"""Lint fixture (never imported or run): mpi4py lowercase `bcast` shapes for GP004.

A line that a rule must flag ends with `# expect: GPxxx`; every other line must stay clean.
mpi4py's `Comm.bcast` hands the root an unpickled copy of the object it sent.
"""

from mpi4py import MPI

ENABLED = True


def executor_loop(comm, queue, rank):
    """Per iteration, every rank (the root included) takes the broadcast result."""
    while True:
        requests = queue.fetch() if rank == 0 else None
        requests = comm.bcast(requests, root=0)  # expect: GP004
        if not requests:
            break
        schedule(requests)


def for_loop_world(batches):
    for batch in batches:
        merged = MPI.COMM_WORLD.bcast(batch, root=0)  # expect: GP004
        schedule(merged)


def fixed_loop(comm, queue, rank, root=0):
    """The fix: the root keeps its object; only the others receive."""
    while True:
        requests = queue.fetch() if rank == root else None
        requests = requests if rank == root else comm.bcast(None, root=root)
        if not requests:
            break
        schedule(requests)


def fixed_with_branches(comm, queue, rank, root=0):
    for _ in range(10):
        if rank == root:
            requests = queue.fetch()
            comm.bcast(requests, root=root)  # the root discards the copy
        else:
            requests = comm.bcast(None, root=root)
        schedule(requests)


def fixed_with_early_continue(comm, queue, rank):
    for _ in range(10):
        if rank == 0:
            schedule(queue.fetch())
            continue
        schedule(comm.bcast(None, root=0))


def once_at_startup(comm, config):
    """Near miss: not in a loop, and this function is called from no loop."""
    return comm.bcast(config, root=0)


def result_discarded(comm, items):
    for item in items:
        comm.bcast(item, root=0)


def result_never_read(comm, items):
    for item in items:
        unused = comm.bcast(item, root=0)  # noqa: F841


def mpi_broadcast(obj, root=0):
    """A wrapper that returns bcast's result (TensorRT-LLM has this shape in _utils.py)."""
    return MPI.COMM_WORLD.bcast(obj, root) if ENABLED else obj


def fetch_step(queue, rank):
    new = queue.fetch() if rank == 0 else None
    return mpi_broadcast(new, root=0)


def serve(queue, rank):
    """Calls `fetch_step` from its loop: that makes `fetch_step` per iteration."""
    while True:
        schedule(fetch_step(queue, rank))  # expect: GP004


class Worker:
    def __init__(self, comm):
        self.comm = comm

    def _sync(self, state):
        return self.comm.bcast(state, root=0)

    def _sync_step(self, state):
        shared = self._sync(state)
        return shared

    def run(self, states):
        for state in states:
            self._sync_step(state)  # the root discards the copy

    def run_and_keep(self, states):
        return [self._sync_step(state) for state in states]  # expect: GP004

    def tokens(self, requests):
        return [self.comm.bcast(r, root=0) for r in requests]  # expect: GP004


def schedule(requests):
    return requests
