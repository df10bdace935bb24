"""What a process is: Python or launcher, its rank and role, gilprof's own or not."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import psutil

from gilprof.errors import PermissionDenied, TargetError
from gilprof.model import Placement
from gilprof.sampling.processes import started_pids
from gilprof.sampling.roles import (
    ROLE_VARIABLES,
    CommandLine,
    Role,
    RoleRules,
    find_role,
    read_small_file,
)

# Launcher-specific variables come first: inside a SLURM allocation an `mpirun` child
# inherits the batch step's SLURM_PROCID (0 on every rank), so it must not win over the
# MPI launcher's own rank variable.
RANK_VARIABLES = (
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "MV2_COMM_WORLD_RANK",
    "SLURM_PROCID",
    "RANK",
    "PMI_ID",
)
LOCAL_RANK_VARIABLES = (
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "MPI_LOCAL_RANK",
    "SLURM_LOCALID",
    "LOCAL_RANK",
    "MV2_COMM_WORLD_LOCAL_RANK",
)
SIZE_VARIABLES = (
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_SIZE",
    "PMI_SIZE",
    "MV2_COMM_WORLD_SIZE",
    "SLURM_NTASKS",
    "WORLD_SIZE",
)
# Set by `gilprof exec` in its child's environment: the PID of the gilprof process above it.
EXEC_PARENT_VARIABLE = "GILPROF_EXEC_PARENT"
KEPT_VARIABLES = frozenset(
    RANK_VARIABLES
    + LOCAL_RANK_VARIABLES
    + SIZE_VARIABLES
    + ROLE_VARIABLES
    + (EXEC_PARENT_VARIABLE,)
)

LAUNCHER_NAMES = frozenset(
    {
        "mpiexec",
        "mpirun",
        "mpiexec.hydra",
        "mpiexec.hydra.real",
        "hydra_pmi_proxy",
        "orterun",
        "orted",
        "prterun",
        "prted",
        "srun",
        "slurmstepd",
        "torchrun",
        "jsrun",
        "aprun",
        "flux",
    }
)
_PY_LAUNCHER_MODULES = re.compile(r"(^|/)torchrun$|torch\.distributed\.(run|launch)$")
_PYTHON_EXE = re.compile(r"^(python|pypy)[0-9.]*[dmu]*$")


@dataclass(frozen=True, kw_only=True)
class ProcessInfo(Placement):
    pid: int
    ppid: int
    name: str
    cmdline: tuple[str, ...]
    is_python: bool
    threads: int = 0
    rank_env: dict[str, str] = field(default_factory=dict)

    @property
    def short_cmdline(self) -> str:
        text = " ".join(self.cmdline) or self.name
        return text if len(text) <= 80 else text[:77] + "..."


def is_python(proc: psutil.Process) -> bool:
    try:
        names = [proc.name()]
        with contextlib.suppress(
            psutil.AccessDenied, psutil.ZombieProcess, FileNotFoundError, OSError
        ):
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


def rank_environment(proc: psutil.Process, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """The rank and role variables of `proc` (and `extra` ones) and nothing else; {} when the
    environment is unreadable."""
    try:
        env = proc.environ()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
        return {}
    return {k: v for k, v in env.items() if k in KEPT_VARIABLES or k in extra}


def own_pids() -> frozenset[int]:
    """gilprof itself, its ancestors, and the children it started: never targets."""
    try:
        ancestors = {p.pid for p in psutil.Process().parents()}
    except psutil.Error:
        ancestors = set()
    return frozenset({os.getpid(), *ancestors, *started_pids()})


def is_exec_parent(proc: psutil.Process) -> bool:
    """Whether `proc` is a `gilprof exec` process: a child of it names its PID in
    EXEC_PARENT_VARIABLE (set by gilprof exec alone, read back with the rank variables)."""
    try:
        children = proc.children()
    except psutil.Error:
        return False
    return any(
        rank_environment(child).get(EXEC_PARENT_VARIABLE) == str(proc.pid) for child in children
    )


def _first_int(env: dict[str, str], names: tuple[str, ...]) -> tuple[int | None, str | None]:
    for name in names:
        value = env.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value), name
    return None, None


def _find_launcher(parents: list[psutil.Process]) -> tuple[str | None, int | None]:
    # The outermost launcher names the job (mpiexec rather than its hydra proxy).
    found: tuple[str | None, int | None] = (None, None)
    for parent in parents:
        if is_launcher(parent):
            try:
                found = (_launcher_name(parent), parent.pid)
            except psutil.NoSuchProcess:
                continue
    return found


def _launcher_name(proc: psutil.Process) -> str:
    """The launcher's name; torchrun's agent renames its process (psutil reads "pt_elastic"),
    so a Python launcher is named by its command line."""
    name = proc.name()
    if name in LAUNCHER_NAMES:
        return name
    with contextlib.suppress(psutil.AccessDenied, psutil.ZombieProcess):
        if any(_PY_LAUNCHER_MODULES.search(arg) for arg in proc.cmdline()[:3]):
            return "torchrun"
    return name


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


def _command_line(proc: psutil.Process) -> CommandLine | None:
    try:
        argv = tuple(proc.cmdline())
    except psutil.Error:
        return None
    cwd = None
    if "disaggregated_mpi_worker" in argv:  # its -c config path may be relative
        with contextlib.suppress(psutil.Error):
            cwd = proc.cwd()
    return CommandLine(proc.pid, argv, cwd)


def role_of(
    proc: psutil.Process,
    parents: list[psutil.Process],
    env: dict[str, str],
    rank: int | None,
    rules: RoleRules | None = None,
) -> Role | None:
    chain = [line for line in map(_command_line, [proc, *parents]) if line is not None]
    return find_role(env, chain, rank, read_small_file, rules)


def describe(proc: psutil.Process, rules: RoleRules | None = None) -> ProcessInfo:
    env = rank_environment(proc, (rules.role_env,) if rules and rules.role_env else ())
    identity = rank_from_environment(env)
    rank, source = (identity.rank, identity.variable) if identity.variable else (None, None)
    local_rank, _ = _first_int(env, LOCAL_RANK_VARIABLES)
    size, _ = _first_int(env, SIZE_VARIABLES)
    try:
        parents = proc.parents()
    except psutil.Error:
        parents = []
    launcher, launcher_pid = _find_launcher(parents)
    role = role_of(proc, parents, env, rank, rules)
    try:
        with proc.oneshot():
            name, ppid, cmd = proc.name(), proc.ppid(), tuple(proc.cmdline())
            threads = proc.num_threads()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        raise TargetError(f"PID {proc.pid} exited while it was being inspected") from None
    except psutil.AccessDenied:
        name, ppid, cmd, threads = "?", 0, (), 0
    return ProcessInfo(
        pid=proc.pid,
        ppid=ppid,
        name=name,
        cmdline=cmd,
        is_python=is_python(proc),
        rank=rank,
        rank_source=source,
        local_rank=local_rank,
        world_size=size,
        role=role.name if role else None,
        role_source=role.source if role else None,
        launcher=launcher,
        launcher_pid=launcher_pid,
        threads=threads,
        rank_env=env,
    )


def python_candidates(procs: list[psutil.Process]) -> list[psutil.Process]:
    """The Python processes among `procs` that may be targets: not gilprof's own (by PID), not
    a launcher, not a `gilprof exec` process (its child is the rank)."""
    own = own_pids()
    pythons = [p for p in procs if p.pid not in own and is_python(p) and not is_launcher(p)]
    exec_parents = _exec_parents({p.pid for p in pythons})
    return [p for p in pythons if p.pid not in exec_parents]


def _exec_parents(pids: set[int]) -> set[int]:
    """Those of `pids` that are `gilprof exec` processes (see is_exec_parent), in one pass
    over the host's processes rather than one per candidate."""
    found: set[int] = set()
    for proc in psutil.process_iter(["ppid"]):
        ppid = proc.info["ppid"]
        if (
            ppid in pids
            and ppid not in found
            and rank_environment(proc).get(EXEC_PARENT_VARIABLE) == str(ppid)
        ):
            found.add(ppid)
    return found


def job_processes(root_pid: int | None = None, rules: RoleRules | None = None) -> list[ProcessInfo]:
    """Python processes that belong to distributed jobs (a rank variable or a launcher parent)."""
    candidates = _descendants(root_pid) if root_pid is not None else list(psutil.process_iter())
    found = []
    for proc in python_candidates(candidates):
        try:
            info = describe(proc, rules)
        except TargetError:
            continue
        if info.rank is not None or info.launcher is not None:
            found.append(info)
    return sorted(
        found, key=lambda p: (p.launcher_pid or 0, p.rank if p.rank is not None else -1, p.pid)
    )


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
        raise PermissionDenied(
            f"not allowed to inspect PID {pid}; run as its user or root"
        ) from None
