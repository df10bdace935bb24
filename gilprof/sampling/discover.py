"""Finding the ranks of distributed jobs on this host, and choosing the process to sample.

Only the rank variables are ever kept from a process's environment.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import psutil

from gilprof.errors import PermissionDenied, TargetError, UsageError

# Launcher-specific variables come first: inside a SLURM allocation an `mpirun` child
# inherits the batch step's SLURM_PROCID (0 on every rank), so it must not win over the
# MPI launcher's own rank variable.
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK",
                  "SLURM_PROCID", "RANK", "PMI_ID")
LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MPI_LOCAL_RANK",
                        "SLURM_LOCALID", "LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK")
SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                  "SLURM_NTASKS", "WORLD_SIZE")
ROLE_VARIABLES = ("TLLM_DISAGG_INSTANCE_IDX", "GILPROF_ROLE")
KEPT_VARIABLES = frozenset(RANK_VARIABLES + LOCAL_RANK_VARIABLES + SIZE_VARIABLES + ROLE_VARIABLES)

LAUNCHER_NAMES = frozenset({
    "mpiexec", "mpirun", "mpiexec.hydra", "mpiexec.hydra.real", "hydra_pmi_proxy", "orterun",
    "orted", "prterun", "prted", "srun", "slurmstepd", "torchrun", "jsrun", "aprun", "flux",
})
_PY_LAUNCHER_MODULES = re.compile(r"(^|/)torchrun$|torch\.distributed\.(run|launch)$")
_PYTHON_EXE = re.compile(r"^(python|pypy)[0-9.]*[dmu]*$")


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    name: str
    cmdline: tuple[str, ...]
    is_python: bool
    rank: int | None = None
    rank_source: str | None = None
    local_rank: int | None = None
    world_size: int | None = None
    role: str | None = None
    launcher: str | None = None
    launcher_pid: int | None = None
    threads: int = 0
    rank_env: dict[str, str] = field(default_factory=dict)

    @property
    def short_cmdline(self) -> str:
        text = " ".join(self.cmdline) or self.name
        return text if len(text) <= 80 else text[:77] + "..."


def is_python(proc: psutil.Process) -> bool:
    try:
        names = [proc.name()]
        with contextlib.suppress(psutil.AccessDenied, psutil.ZombieProcess, FileNotFoundError, OSError):
            names.append(os.path.basename(proc.exe()))
        cmd = proc.cmdline()
        if cmd:
            names.append(os.path.basename(cmd[0]))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return any(_PYTHON_EXE.match(n) for n in names if n)


def is_launcher(proc: psutil.Process) -> bool:
    try:
        if proc.name() in LAUNCHER_NAMES:
            return True
        cmd = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    if cmd and os.path.basename(cmd[0]) in LAUNCHER_NAMES:
        return True
    # torchrun is itself a Python process; its children are the ranks.
    return any(_PY_LAUNCHER_MODULES.search(arg) for arg in cmd[:3])


def rank_environment(proc: psutil.Process) -> dict[str, str]:
    """The rank variables of `proc` and nothing else; {} when the environment is unreadable."""
    try:
        env = proc.environ()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
        return {}
    return {k: v for k, v in env.items() if k in KEPT_VARIABLES}


def _first_int(env: dict[str, str], names: tuple[str, ...]) -> tuple[int | None, str | None]:
    for name in names:
        value = env.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value), name
    return None, None


def _find_launcher(proc: psutil.Process) -> tuple[str | None, int | None]:
    try:
        parents = proc.parents()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None, None
    # The outermost launcher names the job (mpiexec rather than its hydra proxy).
    found: tuple[str | None, int | None] = (None, None)
    for parent in parents:
        if is_launcher(parent):
            try:
                found = (parent.name(), parent.pid)
            except psutil.NoSuchProcess:
                continue
    return found


@dataclass(frozen=True)
class RankIdentity:
    rank: int
    variable: str | None  # None: no rank variable was set, so this process counts as rank 0


def rank_from_environment(env: Mapping[str, str]) -> RankIdentity:
    """A process's rank: the first of RANK_VARIABLES that holds a non-negative integer."""
    for name in RANK_VARIABLES:
        value = env.get(name, "").strip()
        if value.isascii() and value.isdigit():
            return RankIdentity(int(value), name)
    return RankIdentity(0, None)


def describe(proc: psutil.Process) -> ProcessInfo:
    env = rank_environment(proc)
    identity = rank_from_environment(env)
    rank, source = (identity.rank, identity.variable) if identity.variable else (None, None)
    local_rank, _ = _first_int(env, LOCAL_RANK_VARIABLES)
    size, _ = _first_int(env, SIZE_VARIABLES)
    role = next((env[v] for v in ROLE_VARIABLES if v in env), None)
    launcher, launcher_pid = _find_launcher(proc)
    try:
        with proc.oneshot():
            name, ppid, cmd = proc.name(), proc.ppid(), tuple(proc.cmdline())
            threads = proc.num_threads()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        raise TargetError(f"PID {proc.pid} exited while it was being inspected") from None
    except psutil.AccessDenied:
        name, ppid, cmd, threads = "?", 0, (), 0
    return ProcessInfo(pid=proc.pid, ppid=ppid, name=name, cmdline=cmd, is_python=is_python(proc),
                       rank=rank, rank_source=source, local_rank=local_rank, world_size=size,
                       role=role, launcher=launcher, launcher_pid=launcher_pid, threads=threads,
                       rank_env=env)


def job_processes(root_pid: int | None = None) -> list[ProcessInfo]:
    """Python processes that belong to distributed jobs (a rank variable or a launcher parent)."""
    own = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    candidates = _descendants(root_pid) if root_pid is not None else list(psutil.process_iter())
    found = []
    for proc in candidates:
        if proc.pid in own or not is_python(proc) or is_launcher(proc):
            continue
        try:
            info = describe(proc)
        except TargetError:
            continue
        if _is_gilprof(info):
            continue  # `gilprof exec` carries the rank variables of the child it samples
        if info.rank is not None or info.launcher is not None:
            found.append(info)
    return sorted(found, key=lambda p: (p.launcher_pid or 0, p.rank if p.rank is not None else -1, p.pid))


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        raise TargetError(f"no process with PID {pid}") from None


def _process(pid: int) -> psutil.Process:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            raise TargetError(f"PID {pid} has exited (zombie)")
        return proc
    except psutil.NoSuchProcess:
        raise TargetError(f"no process with PID {pid}") from None
    except psutil.AccessDenied:
        raise PermissionDenied(f"not allowed to inspect PID {pid}; run as its user or root") from None


def _list_candidates(cands: list[ProcessInfo]) -> str:
    return "; ".join(
        f"pid {c.pid} rank {c.rank if c.rank is not None else '?'} ({c.short_cmdline})"
        for c in cands[:8]
    ) + (f"; and {len(cands) - 8} more" if len(cands) > 8 else "")


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
        raise UsageError(f"--ranks expects all, local, N, N-M or a comma list, got {text!r}") from None
    if not ranks:
        raise UsageError(f"--ranks {text!r} selects no rank")
    return ranks


def resolve_ranks(selection: str, job: int | None = None, match: str | None = None,
                  parent_match: str | None = None) -> list[ProcessInfo]:
    """Every local Python rank of one job that `selection` names (see parse_rank_selection)."""
    wanted = parse_rank_selection(selection)
    try:
        pattern = re.compile(match) if match else None
        parent_pattern = re.compile(parent_match) if parent_match else None
    except re.error as exc:
        raise UsageError(f"bad regular expression: {exc}") from None
    cands = [c for c in job_processes(job) if not _is_gilprof(c)]
    if pattern is not None:
        cands = [c for c in cands if pattern.search(" ".join(c.cmdline))]
    if parent_pattern is not None:
        cands = [c for c in cands if _ancestors_match(c.pid, parent_pattern)]
    where = f"job {job}" if job is not None else "this host"
    launchers = {c.launcher_pid for c in cands}
    if job is None and len(launchers) > 1:
        raise TargetError(f"ranks of {len(launchers)} jobs run on {where}; choose one with --job "
                          f"(launcher PIDs: {', '.join(str(p) for p in sorted(launchers, key=str))})")
    if wanted is not None:
        cands = [c for c in cands if c.rank in wanted]
        missing = wanted - {c.rank for c in cands}
        if missing:
            raise TargetError(f"no rank {', '.join(map(str, sorted(missing)))} in {where}")
    if not cands:
        raise TargetError(f"no Python ranks found in {where}")
    return cands


def _is_gilprof(info: ProcessInfo) -> bool:
    return any("gilprof" in arg for arg in info.cmdline[:4])


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


def resolve_target(pid: int | None = None, rank: int | None = None, job: int | None = None,
                   match: str | None = None, parent_match: str | None = None) -> ProcessInfo:
    """Choose exactly one Python process, or explain why none or several qualify.

    `parent_match` keeps candidates with an ancestor whose command line matches (a
    TensorRT-LLM GEN leader is recognised by `start_worker.sh ... GEN` above it).
    """
    try:
        pattern = re.compile(match) if match else None
        parent_pattern = re.compile(parent_match) if parent_match else None
    except re.error as exc:
        raise UsageError(f"bad regular expression: {exc}") from None
    if pid is not None:
        proc = _process(pid)
        if is_python(proc) and not is_launcher(proc):
            return describe(proc)
        name = proc.name()
        children = [describe(p) for p in _descendants(pid) if is_python(p) and not is_launcher(p)]
        if parent_pattern is not None:
            children = [c for c in children if _ancestors_match(c.pid, parent_pattern)]
        if not children:
            raise TargetError(
                f"PID {pid} ({name}) is not a Python process and has no Python descendants")
        return _choose(children, rank, pattern, f"PID {pid} ({name})", default_rank=True)
    cands = job_processes(job)
    where = f"job {job}" if job is not None else "this host"
    if parent_pattern is not None:
        cands = [c for c in cands if _ancestors_match(c.pid, parent_pattern)]
    if not cands:
        raise TargetError(f"no Python ranks of a distributed job found on {where}; "
                          "give --pid, or start the job with `gilprof attach -- CMD`")
    return _choose(cands, rank, pattern, where, default_rank=True)


def _choose(cands: list[ProcessInfo], rank: int | None, pattern: re.Pattern[str] | None,
            where: str, default_rank: bool) -> ProcessInfo:
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
            raise TargetError(f"no rank {wanted} among the Python processes of {where} "
                              f"(ranks seen: {', '.join(map(str, ranks))})")
        cands = chosen
    if len(cands) == 1:
        return cands[0]
    raise TargetError(f"{len(cands)} Python processes qualify in {where}: "
                      f"{_list_candidates(cands)}; choose one with --pid, --rank, --job or --match")
