"""`gilprof lint`: static detection of rank-0 GIL costs seen in TensorRT-LLM, without importing code.

Rules (each finding names the reference fix that removes it):

- GP001 (gp001.py): a sender `pickle.loads` the bytes it just `pickle.dumps`-ed: a deep copy.
- GP002 (gp002.py): a copying getter read more than once per item (getters.py decides which
  names copy: a registry, explicit names, and what the scanned code itself defines).
- GP003 (gp003.py): a length compared with a value just computed from it.
- GP004 (gp004.py): a per-iteration mpi4py `bcast` whose result the root uses.

Layout: model.py (rules, findings, the `gilprof.lint/1` result), syntax.py (AST helpers),
flow.py (the data-flow pass GP001/GP003 share), engine.py (one source: dispatch, suppression),
runner.py (files, trees, test files, project config). This package imports nothing from
gilprof but gilprof.errors.
"""

from gilprof.lint.engine import Definitions, lint_source, suppressions
from gilprof.lint.getters import DEFAULT_GETTERS, project_getters
from gilprof.lint.model import RULES, SCHEMA, Finding, LintError, LintResult, Rule
from gilprof.lint.runner import is_test_path, iter_python_files, lint_paths

__all__ = [
    "DEFAULT_GETTERS",
    "RULES",
    "SCHEMA",
    "Definitions",
    "Finding",
    "LintError",
    "LintResult",
    "Rule",
    "is_test_path",
    "iter_python_files",
    "lint_paths",
    "lint_source",
    "project_getters",
    "suppressions",
]
