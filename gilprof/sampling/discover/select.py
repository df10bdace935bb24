"""Choosing the processes to sample among those found: by PID, rank, role, job or match."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import psutil

from gilprof.errors import TargetError, UsageError
from gilprof.sampling.discover.identify import (
    ProcessInfo,
    _descendants,
    _process,
    describe,
    is_exec_parent,
    is_launcher,
    is_python,
    job_processes,
    python_candidates,
)
from gilprof.sampling.roles import RoleRules, normalise


def _list_candidates(cands: list[ProcessInfo]) -> str:
    return "; ".join(
        f"pid {c.pid} rank {c.rank if c.rank is not None else '?'} role {c.role or '-'} "
        f"({c.short_cmdline})"
        for c in cands[:8]
    ) + (f"; and {len(cands) - 8} more" if len(cands) > 8 else "")


@dataclass(frozen=True)
class Selection:
    """What narrows the candidates besides PID and rank: --match (a regular expression on the
    command line), --parent-match (on an ancestor's), --role, and the recipe's role rules
    (how a role is told)."""

    match: str | None = None
    parent_match: str | None = None
    role: str | None = None
    rules: RoleRules | None = None

    def patterns(self) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
        """The compiled --match and --parent-match; a bad expression is a usage error."""
        try:
            return (
                re.compile(self.match) if self.match else None,
                re.compile(self.parent_match) if self.parent_match else None,
            )
        except re.error as exc:
            raise UsageError(f"bad regular expression: {exc}") from None

    def narrow(self, cands: list[ProcessInfo], where: str) -> list[ProcessInfo]:
        """The candidates under a matching ancestor and of the wanted role."""
        _, parent_pattern = self.patterns()
        if parent_pattern is not None:
            cands = [c for c in cands if _ancestors_match(c.pid, parent_pattern)]
        return _with_role(cands, self.role, where)


def _with_role(cands: list[ProcessInfo], role: str | None, where: str) -> list[ProcessInfo]:
    """The candidates of role `role` (gen, ctx, or any name, compared normalised)."""
    if role is None:
        return cands
    wanted = normalise(role)
    chosen = [c for c in cands if c.role == wanted]
    if not chosen and cands:
        seen = sorted({c.role or "-" for c in cands})
        raise TargetError(
            f"no Python process of role {wanted} in {where} (roles seen: "
            f"{', '.join(seen)}; a role comes from GILPROF_ROLE, the launch "
            "command lines or the recipe)"
        )
    return chosen


def parse_rank_selection(text: str) -> set[int] | None:
    """`all` or `local` -> None (every rank found); `0-7`, `0,3`, `0-3,8` -> those ranks."""
    if text in ("all", "local"):
        return None
    ranks: set[int] = set()
    try:
        for part in text.split(","):
            low, sep, high = part.strip().partition("-")
            if sep:
                ranks.update(range(int(low), int(high) + 1))
            else:
                ranks.add(int(low))
    except ValueError:
        raise UsageError(
            f"--ranks expects all, local, N, N-M or a comma list, got {text!r}"
        ) from None
    if not ranks:
        raise UsageError(f"--ranks {text!r} selects no rank")
    return ranks


def resolve_ranks(
    ranks: str, job: int | None = None, selection: Selection = Selection()
) -> list[ProcessInfo]:
    """Every local Python rank of one job that `ranks` names (see parse_rank_selection)."""
    wanted = parse_rank_selection(ranks)
    pattern, _ = selection.patterns()
    cands = job_processes(job, selection.rules)
    if pattern is not None:
        cands = [c for c in cands if pattern.search(" ".join(c.cmdline))]
    where = f"job {job}" if job is not None else "this host"
    cands = selection.narrow(cands, where)
    launchers = {c.launcher_pid for c in cands}
    if job is None and len(launchers) > 1:
        raise TargetError(
            f"ranks of {len(launchers)} jobs run on {where}; choose one with --job "
            f"(launcher PIDs: {', '.join(str(p) for p in sorted(launchers, key=str))})"
        )
    if wanted is not None:
        cands = [c for c in cands if c.rank in wanted]
        missing = wanted - {c.rank for c in cands}
        if missing:
            raise TargetError(f"no rank {', '.join(map(str, sorted(missing)))} in {where}")
    if not cands:
        raise TargetError(f"no Python ranks found in {where}")
    return cands


def _ancestors_match(pid: int, pattern: re.Pattern[str]) -> bool:
    try:
        parents = psutil.Process(pid).parents()
    except psutil.Error:
        return False
    for parent in parents:
        try:
            if pattern.search(" ".join(parent.cmdline())):
                return True
        except psutil.Error:
            continue
    return False


@dataclass(frozen=True)
class TargetQuery:
    """Which one process to sample: --pid, --rank, --job, and what narrows the candidates."""

    pid: int | None = None
    rank: int | None = None
    job: int | None = None
    selection: Selection = Selection()

    def resolve(self) -> ProcessInfo:
        return resolve_target(self.pid, self.rank, self.job, self.selection)


def resolve_target(
    pid: int | None = None,
    rank: int | None = None,
    job: int | None = None,
    selection: Selection = Selection(),
) -> ProcessInfo:
    """Choose exactly one Python process, or explain why none or several qualify.

    With `pid`, that process, or if it is a launcher or a wrapper its Python descendants;
    else the ranks of `job` (or of every job on this host). See Selection for the rest.
    """
    pattern, _ = selection.patterns()
    if pid is not None:
        proc = _process(pid)
        if pid == os.getpid():
            raise TargetError(f"PID {pid} is this gilprof process; give the PID of the target")
        if not _command_line(proc):
            # mid-exec (or gone): which program it is cannot be told yet
            raise TargetError(f"PID {pid}: its command line cannot be read yet")
        if is_python(proc) and not is_launcher(proc) and not is_exec_parent(proc):
            return _with_role([describe(proc, selection.rules)], selection.role, f"PID {pid}")[0]
        name = proc.name()
        where = f"PID {pid} ({name})"
        children = [describe(p, selection.rules) for p in python_candidates(_descendants(pid))]
        children = selection.narrow(children, where) if children else children
        if not children:
            raise TargetError(
                f"PID {pid} ({name}) is not a Python process and has no Python "
                "descendants other than gilprof itself"
            )
        return _choose(children, rank, pattern, where, default_rank=True)
    where = f"job {job}" if job is not None else "this host"
    cands = selection.narrow(job_processes(job, selection.rules), where)
    if not cands:
        raise TargetError(
            f"no Python ranks of a distributed job found on {where}; "
            "give --pid, or start the job with `gilprof attach -- CMD`"
        )
    return _choose(cands, rank, pattern, where, default_rank=True)


def _choose(
    cands: list[ProcessInfo],
    rank: int | None,
    pattern: re.Pattern[str] | None,
    where: str,
    default_rank: bool,
) -> ProcessInfo:
    if pattern is not None:
        cands = [c for c in cands if pattern.search(" ".join(c.cmdline))]
        if not cands:
            raise TargetError(f"no Python process of {where} matches --match {pattern.pattern!r}")
    if len(cands) == 1 and rank is None:
        return cands[0]
    wanted = rank if rank is not None else (0 if default_rank else None)
    if wanted is not None and any(c.rank is not None for c in cands):
        chosen = [c for c in cands if c.rank == wanted]
        if len(chosen) == 1:
            return chosen[0]
        if not chosen:
            ranks = sorted({c.rank for c in cands if c.rank is not None})
            raise TargetError(
                f"no rank {wanted} among the Python processes of {where} "
                f"(ranks seen: {', '.join(map(str, ranks))})"
            )
        cands = chosen
    if len(cands) == 1:
        return cands[0]
    raise TargetError(
        f"{len(cands)} Python processes qualify in {where}: "
        f"{_list_candidates(cands)}; choose one with --pid, --rank, --role, --job "
        "or --match"
    )


def _command_line(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []
