"""A recipe as frozen, validated settings: target, sampling defaults, watched functions, budgets."""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gilprof.analysis.gate import GateBudgets
from gilprof.model import Mode, function_name_matches
from gilprof.native_classes import LibraryRule
from gilprof.sampling.roles import RoleRules

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        pass
    else:
        pass

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass

SAMPLING_MODES = tuple(m.value for m in Mode)
STEP_PARSERS = ("trtllm", "jsonl")


@dataclass(frozen=True)
class TargetSpec:
    """How to pick the process (and know its threads) among the job's Python processes.

    The launcher is not a recipe setting: discovery reads it from the process tree. `threads`
    (glob patterns) are the threads the recipe expects; a profile with none of them is
    reported as probably the wrong process.

    `role` is the default of `attach --role`; `role_env` (a variable holding the role) and
    `parent_match` with `role` (an ancestor's command line that marks a rank of that role)
    are role rules, tried after gilprof's own (gilprof.sampling.roles). Without `role`,
    `parent_match` keeps only ranks with a matching ancestor.
    """

    rank: int = 0
    role: str | None = None
    match: str | None = None
    role_env: str | None = None
    parent_match: str | None = None
    threads: tuple[str, ...] = ()

    def role_rules(self, label: str) -> RoleRules | None:
        """The recipe's role rules for discovery, None if it has none."""
        if self.role_env is None and not (self.role and self.parent_match):
            return None
        return RoleRules(
            label=label, role=self.role, parent_match=self.parent_match, role_env=self.role_env
        )

    def matches_thread(self, thread_name: str) -> bool:
        """Whether `thread_name` is one of the recipe's expected threads (glob patterns)."""
        return any(fnmatch.fnmatchcase(thread_name, pattern) for pattern in self.threads)

    def missing_threads(self, thread_names: Iterable[str]) -> str | None:
        """Why a profile with these threads is probably not the process the recipe is about
        (none of its expected threads was seen), else None."""
        names = [name for name in thread_names if name]
        if not self.threads or not names or any(self.matches_thread(n) for n in names):
            return None
        return (
            f"none of the recipe's threads ({', '.join(self.threads)}) is in the profile "
            f"(it has {', '.join(sorted(set(names))[:6])}): is this the right process or rank?"
        )


@dataclass(frozen=True)
class SamplingDefaults:
    """Sampler settings the recipe suggests; None leaves the command's own default."""

    mode: str | None = None
    rate: float | None = None
    duration: float | None = None
    native: bool | None = None


@dataclass(frozen=True)
class StartDefaults:
    """[start]: when `attach` starts sampling unless the command line says (--start-*).

    `on`: a regex for the launched job's output; `on_log`: FILE:REGEX for a log file;
    `after`: seconds (after the line, with `on` or `on_log`)."""

    on: str | None = None
    on_log: str | None = None
    after: float | None = None


@dataclass(frozen=True)
class WatchedFunction:
    """A function known to hold the GIL on the target's hot path."""

    function: str
    why: str
    file: str | None = None
    fix: str | None = None

    def matches(self, function_name: str, filename: str | None = None) -> bool:
        """Whether a sampled frame (`function_name`, optional `filename`) is this function."""
        if not function_name_matches(self.function, function_name):
            return False
        if self.file is None or filename is None:
            return True
        return filename.replace("\\", "/").rsplit("/", 1)[-1] == self.file


@dataclass(frozen=True)
class StepsSpec:
    """Where the iteration log is and which parser reads it."""

    parser: str | None = None  # None: the recipe names no iteration log, only the loop's waits
    log: str | None = None
    # The thread that runs the step loop (regex on thread names) and functions in which it
    # waits for the device, for the host/device verdict (gilprof.analysis.verdict).
    loop_thread: str | None = None
    device_wait: tuple[str, ...] = ()
    # functions in which it waits for requests (gilprof.wait_classes: waiting for input)
    input_wait: tuple[str, ...] = ()


@dataclass(frozen=True)
class Recipe:
    """One validated recipe. `source` says where it came from; `text` is the TOML as read."""

    name: str
    description: str
    target: TargetSpec = field(default_factory=TargetSpec)
    sampling: SamplingDefaults = field(default_factory=SamplingDefaults)
    watch: tuple[WatchedFunction, ...] = ()
    steps: StepsSpec | None = None
    start: StartDefaults | None = None
    gate: GateBudgets = field(default_factory=GateBudgets)
    lint_getters: tuple[str, ...] = ()
    # [native]: libraries whose native time is a device wait, a peer wait or host work,
    # ahead of the built-in rules (gilprof.native_classes)
    native: tuple[LibraryRule, ...] = ()
    source: str = ""
    text: str = field(default="", repr=False, compare=False)

    def watch_names(self) -> tuple[str, ...]:
        """The watched function names, in recipe order."""
        return tuple(entry.function for entry in self.watch)

    def watched(self, function_name: str, filename: str | None = None) -> WatchedFunction | None:
        """The first watch entry that names the sampled frame, if any."""
        for entry in self.watch:
            if entry.matches(function_name, filename):
                return entry
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (without the TOML text)."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "target": {
                "rank": self.target.rank,
                "role": self.target.role,
                "match": self.target.match,
                "role_env": self.target.role_env,
                "parent_match": self.target.parent_match,
                "threads": list(self.target.threads),
            },
            "sampling": {
                "mode": self.sampling.mode,
                "rate": self.sampling.rate,
                "duration": self.sampling.duration,
                "native": self.sampling.native,
            },
            "watch": [
                {"function": w.function, "file": w.file, "why": w.why, "fix": w.fix}
                for w in self.watch
            ],
            "steps": None
            if self.steps is None
            else {
                "parser": self.steps.parser,
                "log": self.steps.log,
                "loop_thread": self.steps.loop_thread,
                "device_wait": list(self.steps.device_wait),
                "input_wait": list(self.steps.input_wait),
            },
            "start": None
            if self.start is None
            else {"on": self.start.on, "on_log": self.start.on_log, "after": self.start.after},
            "gate": {
                "max_share": dict(self.gate.max_share),
                "max_utilization": self.gate.max_utilization,
                "max_host_step_p50_ms": self.gate.max_host_step_p50_ms,
                "max_regression": self.gate.max_regression,
            },
            "lint_getters": list(self.lint_getters),
            "native": [{"library": r.pattern, "class": r.cls.value} for r in self.native],
        }


# ---------------------------------------------------------------------------------------------
# Validation
