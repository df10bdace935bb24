"""Running the rules over one source text: parse, dispatch, suppress, locate.

`Definitions` holds what rules need to know across files (the getters the scanned code defines,
its `bcast` wrappers); gilprof.lint.runner fills it from every scanned file before linting.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gilprof.lint.getters import DEFAULT_GETTERS, GetterDefinitions
from gilprof.lint.gp001 import PickleNames, round_trip_findings
from gilprof.lint.gp002 import GetterRule
from gilprof.lint.gp003 import dead_length_findings
from gilprof.lint.gp004 import BCAST, Gp004, returned_callees, wrappers
from gilprof.lint.model import Finding, RawFinding
from gilprof.lint.syntax import scope_bodies


@dataclass
class Definitions:
    """What the scanned code defines, gathered over every file of a scan."""

    getters: GetterDefinitions = field(default_factory=GetterDefinitions)
    returns: dict[str, set[str]] = field(default_factory=dict)
    _wrappers: frozenset[str] | None = None

    def add(self, tree: ast.Module) -> None:
        self.getters.add(tree)
        self._add_returns(tree)

    def gather(self, sources: Sequence[tuple[str, str]], builtin: Iterable[str]) -> None:
        """Add what the (text, path) `sources` define, parsing only files that can matter.

        Plain definitions matter only for names that could be getters (`builtin` ones and
        copying properties), wrappers only in files that mention `bcast` or a known wrapper.
        """
        trees: dict[int, ast.Module | None] = {}

        def tree(index: int) -> ast.Module | None:
            if index not in trees:
                text, path = sources[index]
                try:
                    trees[index] = parse(text, path)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    trees[index] = None  # reported when the file itself is linted
            return trees[index]

        def mentioning(words: Iterable[str], done: set[int]) -> list[int]:
            words = tuple(words)
            return [
                i
                for i, (text, _) in enumerate(sources)
                if i not in done and any(w in text for w in words)
            ]

        seen: set[int] = set()
        for stage in ("properties", "plain definitions"):
            words = ("property",) if stage == "properties" else (*builtin, *self.getters.copying)
            for index in mentioning(words, seen):
                seen.add(index)
                found = tree(index)
                if found is not None:
                    self.getters.add(found)
        searched: set[int] = set()
        while True:
            fresh = mentioning((BCAST, *self.bcast_wrappers), searched)
            if not fresh:
                return
            for index in fresh:
                searched.add(index)
                found = tree(index)
                if found is not None:
                    self._add_returns(found)

    def _add_returns(self, tree: ast.Module) -> None:
        for name, callees in returned_callees(tree).items():
            self.returns.setdefault(name, set()).update(callees)
        self._wrappers = None

    @property
    def bcast_wrappers(self) -> frozenset[str]:
        if self._wrappers is None:
            self._wrappers = wrappers(self.returns)
        return self._wrappers


def parse(source: str, path: str) -> ast.Module:
    """The module's AST. Raises SyntaxError, ValueError (null bytes) or RecursionError."""
    with warnings.catch_warnings():  # invalid escapes etc. in scanned code are not our output
        warnings.simplefilter("ignore")
        return ast.parse(source, filename=path)


def raw_findings(
    tree: ast.Module, source: str, getters: frozenset[str], bcast_wrappers: frozenset[str]
) -> list[RawFinding]:
    """Every rule's hits in one module, before suppression (duplicates possible)."""
    # Each rule needs a word that is rarely absent from code it could flag: skip it cheaply.
    round_trips, lengths = "dumps" in source, "len(" in source
    raw: list[RawFinding] = []
    if round_trips or lengths:
        scopes = [
            (scope, nodes, [n for n in nodes if isinstance(n, ast.Call)])
            for scope, nodes in scope_bodies(tree)
        ]
        names = PickleNames(n for _, nodes, _ in scopes for n in nodes) if round_trips else None
        if names is not None:
            raw += round_trip_findings(names, [(scope, calls) for scope, _, calls in scopes])
        if lengths:
            raw += dead_length_findings(scopes, names)
    wanted = frozenset(g for g in getters if g in source)
    if wanted:
        raw += GetterRule(tree, wanted).found
    if BCAST in source or any(name in source for name in bcast_wrappers):
        raw += Gp004(tree, bcast_wrappers).findings()
    return raw


_IGNORE = re.compile(r"#\s*gilprof:\s*ignore(?:\[(?P<rules>[^\]]*)\]|(?![\w\[-]))")


def suppressions(source: str) -> dict[int, frozenset[str] | None]:
    """Line -> rule ids ignored there (None: every rule), from `# gilprof: ignore[...]`."""
    try:
        readline = io.StringIO(source).readline
        comments = [
            (token.start[0], token.string)
            for token in tokenize.generate_tokens(readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        comments = list(enumerate(source.split("\n"), start=1))
    ignored: dict[int, frozenset[str] | None] = {}
    for line, text in comments:
        for match in _IGNORE.finditer(text):
            rules = match.group("rules")
            if rules is None or (line in ignored and ignored[line] is None):
                ignored[line] = None
                continue
            ids = frozenset(r.strip().upper() for r in rules.split(",") if r.strip())
            ignored[line] = (ignored.get(line) or frozenset()) | ids
    return ignored


def _character_column(lines: Sequence[str], line: int, col_offset: int) -> int:
    """1-based character column of an AST offset, which counts UTF-8 bytes."""
    if 1 <= line <= len(lines):
        return len(lines[line - 1].encode("utf-8")[:col_offset].decode("utf-8", "replace")) + 1
    return col_offset + 1


def lint_source(
    source: str,
    path: str = "<string>",
    getters: Iterable[str] = DEFAULT_GETTERS,
    *,
    extra_getters: Iterable[str] = (),
    definitions: Definitions | None = None,
    level: str = "warning",
) -> list[Finding]:
    """Findings in one source text, suppressions applied. Raises SyntaxError if it won't parse.

    `getters` are the built-in copying getters (void where the scanned code defines the name as
    a plain attribute); `extra_getters` always count. `definitions` are those of the whole
    scan; without it, this source's own.
    """
    tree = parse(source, path)
    if definitions is None:
        definitions = Definitions()
        definitions.add(tree)
    copying = definitions.getters.getters(getters, extra_getters)
    raw = raw_findings(tree, source, copying, definitions.bcast_wrappers)
    ignored = suppressions(source) if "gilprof" in source else {}
    lines = source.split("\n")
    unique: dict[tuple[str, int, int], RawFinding] = {}
    for finding in raw:
        rules = ignored.get(finding.line, frozenset())
        if rules is None or finding.rule in rules:
            continue
        unique.setdefault((finding.rule, finding.line, finding.col_offset), finding)
    findings = [
        Finding(
            path, f.line, _character_column(lines, f.line, f.col_offset), f.rule, f.message, level
        )
        for f in unique.values()
    ]
    return sorted(findings, key=lambda f: (f.line, f.col, f.rule))
