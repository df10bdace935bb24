"""Finding the ranks of distributed jobs on this host, and choosing the process to sample.

Only the rank and role variables are ever kept from a process's environment.

gilprof's own processes are known by PID, never by a name or a path: this process, its
ancestors, the children it started, and a `gilprof exec` process, whose child carries
EXEC_PARENT_VARIABLE=<its PID> (the child, not gilprof, is the rank).
"""

from gilprof.sampling.discover.identify import (
    EXEC_PARENT_VARIABLE,
    KEPT_VARIABLES,
    LAUNCHER_NAMES,
    LOCAL_RANK_VARIABLES,
    RANK_VARIABLES,
    SIZE_VARIABLES,
    ProcessInfo,
    RankIdentity,
    describe,
    is_exec_parent,
    is_launcher,
    is_python,
    job_processes,
    own_pids,
    python_candidates,
    rank_environment,
    rank_from_environment,
    role_of,
)
from gilprof.sampling.discover.select import (
    Selection,
    TargetQuery,
    parse_rank_selection,
    resolve_ranks,
    resolve_target,
)

__all__ = [
    "EXEC_PARENT_VARIABLE",
    "KEPT_VARIABLES",
    "LAUNCHER_NAMES",
    "LOCAL_RANK_VARIABLES",
    "RANK_VARIABLES",
    "SIZE_VARIABLES",
    "ProcessInfo",
    "RankIdentity",
    "Selection",
    "TargetQuery",
    "describe",
    "is_exec_parent",
    "is_launcher",
    "is_python",
    "job_processes",
    "own_pids",
    "parse_rank_selection",
    "python_candidates",
    "rank_environment",
    "rank_from_environment",
    "resolve_ranks",
    "resolve_target",
    "role_of",
]
