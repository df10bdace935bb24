"""Linting files and directory trees: walking, reading, test files, project config.

A scan runs in two passes: the first reads every file and gathers what rules need across files
(gilprof.lint.engine.Definitions), the second lints each file with that knowledge.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath

from gilprof.lint.engine import Definitions, lint_source
from gilprof.lint.getters import DEFAULT_GETTERS, project_getters
from gilprof.lint.model import Finding, LintError, LintResult

_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
_ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")  # a virtualenv's or a conda env's root
_TEST_DIRS = frozenset({"tests", "test"})


def _skipped(directory: Path) -> bool:
    if directory.name.startswith(".") or directory.name in _SKIPPED_DIRS:
        return True
    return any((directory / marker).exists() for marker in _ENVIRONMENT_MARKERS)


def iter_python_files(root: Path) -> Iterator[Path]:
    """`*.py` under `root`, sorted; hidden directories, caches and environments are skipped."""
    for current, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _skipped(Path(current, d)))
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(current, name)


def is_test_path(relative: PurePath) -> bool:
    """Test code: under a `tests/` or `test/` folder, or `test_*.py`, `*_test.py`, `conftest.py`."""
    name = relative.name
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return True
    return any(part in _TEST_DIRS for part in relative.parts[:-1])


@dataclass
class _Source:
    path: Path
    text: str
    extra_getters: tuple[str, ...]
    level: str


def _read(path: Path) -> str | LintError:
    shown = str(path)
    if not path.is_file():  # a FIFO or a device would block the read, or never end
        return LintError(shown, "not a regular file")
    try:
        return importlib.util.decode_source(path.read_bytes())
    except OSError as exc:
        return LintError(shown, f"cannot read: {exc.strerror or exc}")
    except (UnicodeDecodeError, SyntaxError) as exc:
        return LintError(shown, f"cannot decode: {exc}")


def _lint_one(
    source: _Source, getters: tuple[str, ...], definitions: Definitions
) -> list[Finding] | LintError:
    shown = str(source.path)
    try:
        return lint_source(
            source.text,
            shown,
            getters,
            extra_getters=source.extra_getters,
            definitions=definitions,
            level=source.level,
        )
    except SyntaxError as exc:
        return LintError(shown, f"syntax error: {exc.msg}", exc.lineno)
    except (ValueError, RecursionError, MemoryError) as exc:
        return LintError(shown, f"cannot parse: {type(exc).__name__}: {exc}")


def lint_paths(
    paths: Iterable[str | os.PathLike[str]],
    getters: Iterable[str] = DEFAULT_GETTERS,
    *,
    extra_getters: Iterable[str] = (),
    include_tests: bool = False,
    project_config: bool = True,
) -> LintResult:
    """Lint files and directory trees; unreadable or unparseable inputs become `errors`.

    In a directory, test files (judged on the path below it, see `is_test_path`) are skipped
    unless `include_tests`, then reported at level "note"; a file named explicitly is always
    linted. `project_config` adds the `[tool.gilprof.lint] getters` of the nearest
    `pyproject.toml` above each path (raises gilprof.errors.InputError if that is malformed).
    """
    builtin, extra = tuple(getters), tuple(extra_getters)
    errors: list[LintError] = []
    sources: list[_Source] = []
    skipped = 0
    seen: set[str] = set()
    for given in paths:
        root = Path(given)
        if not root.exists():
            errors.append(LintError(str(root), "no such file or directory"))
            continue
        mine = extra + (project_getters(root) if project_config else ())
        files = iter_python_files(root) if root.is_dir() else [root]
        for path in files:
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            test = root.is_dir() and is_test_path(path.relative_to(root))
            if test and not include_tests:
                skipped += 1
                continue
            text = _read(path)
            if isinstance(text, LintError):
                errors.append(text)
            else:
                sources.append(_Source(path, text, mine, "note" if test else "warning"))
    definitions = Definitions()
    definitions.gather([(s.text, str(s.path)) for s in sources], (*builtin, *extra))
    findings: list[Finding] = []
    scanned = 0
    for source in sources:
        outcome = _lint_one(source, builtin, definitions)
        if isinstance(outcome, LintError):
            errors.append(outcome)
        else:
            scanned += 1
            findings.extend(outcome)
    return LintResult(tuple(findings), scanned, tuple(errors), skipped)
