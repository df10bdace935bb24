"""What `gilprof lint` reports: the rules, findings, unreadable inputs, and a run's result.

`LintResult.to_dict()` is the `gilprof.lint/1` JSON contract.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

SCHEMA = "gilprof.lint/1"
BCAST_FIX = (
    "gilprof.reference.bcast.bcast_after: the root keeps its object and only the others receive "
    "(`out = obj if rank == root else comm.bcast(None, root=root)`)"
)


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    title: str
    fix: str


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "GP001",
            "RootDeserializesOwnPayload",
            "the sender unpickles its own serialization: a deep copy of the payload per call",
            "gilprof.reference.broadcast.safe_broadcast: return the original object on the root",
        ),
        Rule(
            "GP002",
            "RepeatedCopyingGetter",
            "a getter that copies on every access is read more than once per item",
            "gilprof.reference.adp_router.balance_requests_across_ranks: read the getter once "
            "per request and carry the length",
        ),
        Rule(
            "GP003",
            "ComparisonThatCannotFail",
            "a length is compared with a value just computed from it",
            "gilprof.reference.broadcast.safe_broadcast: drop the check, or compare against a "
            "size received from elsewhere",
        ),
        Rule(
            "GP004",
            "RootUsesItsOwnBcast",
            "a per-iteration mpi4py `bcast` whose result the root uses: the root gets an "
            "unpickled copy of the object it sent",
            BCAST_FIX,
        ),
    )
}


@dataclass(frozen=True)
class RawFinding:
    """A rule hit at an AST position (1-based line, 0-based UTF-8 byte column)."""

    rule: str
    line: int
    col_offset: int
    message: str


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    col: int  # 1-based, in characters
    rule: str
    message: str
    level: str = "warning"  # "note" in test code (linted only with include_tests)

    @property
    def fix(self) -> str:
        return RULES[self.rule].fix

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fix": self.fix}


@dataclass(frozen=True)
class LintError:
    """A path that could not be read or parsed; the scan goes on without it."""

    path: str
    message: str
    line: int | None = None

    def location(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class LintResult:
    """Findings in source order per file; `files_scanned` counts files read and analysed.

    `tests_skipped` counts test files (under `tests/`, `test_*.py`, `*_test.py`,
    `conftest.py`) left out because tests were not included.
    """

    findings: tuple[Finding, ...]
    files_scanned: int
    errors: tuple[LintError, ...] = ()
    tests_skipped: int = 0

    @property
    def exit_code(self) -> int:
        """1 if anything was flagged; else 2 if some input was unreadable; else 0."""
        if self.findings:
            return 1
        return 2 if self.errors else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "findings": [f.to_dict() for f in self.findings],
            "files_scanned": self.files_scanned,
            "tests_skipped": self.tests_skipped,
            "errors": [e.to_dict() for e in self.errors],
        }
