"""Who another process is to the target: itself, its launcher, another rank of its job, or
someone else (a client). Decided by process identity: ancestry, and the rank variables
and launcher that discovery (gilprof.sampling.discover) reads; never by a name alone.
"""

from __future__ import annotations

import contextlib
import os

import psutil

from gilprof.sampling.discover.identify import (
    _find_launcher,
    rank_environment,
    rank_from_environment,
)

MAX_SCANNED = 4096  # processes whose descriptors are searched for an owner


class JobRelations:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._relations: dict[int, str] = {}
        self._words: dict[int, str] = {}
        self._owners: dict[str, list[int]] = {}
        try:
            proc = psutil.Process(pid)
            self.ancestors = {p.pid for p in proc.parents()}
            self.launcher = _find_launcher(proc.parents())[1]
        except psutil.Error:
            self.ancestors, self.launcher = set(), None

    def owners(self, link: str) -> list[int]:
        """The processes holding a descriptor that reads `link` (socket:[N], pipe:[N])."""
        found = self._owners.get(link)
        if found is not None:
            return found
        found = []
        for pid in self._candidates():
            with contextlib.suppress(OSError):
                for name in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{pid}/fd/{name}") == link:
                            found.append(pid)
                            break
        self._owners[link] = found
        return found

    def _candidates(self) -> list[int]:
        """The target first, then its launcher's processes, then every other process."""
        first = [self.pid]
        if self.launcher is not None:
            with contextlib.suppress(psutil.Error):
                launcher = psutil.Process(self.launcher)
                first += [launcher.pid] + [c.pid for c in launcher.children(recursive=True)]
        rest = [p for p in psutil.pids() if p not in set(first)]
        return list(dict.fromkeys(first + rest))[:MAX_SCANNED]

    def relation(self, pid: int) -> str:
        known = self._relations.get(pid)
        if known is None:
            known = self._relations[pid] = self._relation(pid)
        return known

    def _relation(self, pid: int) -> str:
        if pid == self.pid:
            return "self"
        if pid in self.ancestors:
            return "launcher"
        try:
            proc = psutil.Process(pid)
            launcher = _find_launcher(proc.parents())[1]
        except psutil.Error:
            return "other"
        ranked = rank_from_environment(rank_environment(proc)).variable is not None
        if ranked and self.launcher is not None and launcher == self.launcher:
            return "rank"
        return "other"

    def describe(self, pid: int) -> str:
        known = self._words.get(pid)
        if known is not None:
            return known
        relation = self.relation(pid)
        try:
            proc = psutil.Process(pid)
            name = proc.name()
            rank = rank_from_environment(rank_environment(proc))
        except psutil.Error:
            name, rank = "?", None
        if relation == "rank" and rank is not None:
            words = f"rank {rank.rank} (pid {pid})"
        elif relation == "launcher":
            words = f"the launcher {name} (pid {pid})"
        elif relation == "self":
            words = "this process"
        else:
            words = f"process {name} (pid {pid})"
        self._words[pid] = words
        return words
