"""The pytest plugin: cheap to load (it loads in every pytest run), clear when over budget."""

from __future__ import annotations

import subprocess
import sys

from gilprof.analysis.gate import BudgetResult
from gilprof.pytest_plugin import _over


def test_loading_the_plugin_imports_no_other_gilprof_module() -> None:
    code = (
        "import sys, gilprof.pytest_plugin\n"
        "print(sorted(m for m in sys.modules if m.startswith('gilprof')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "['gilprof', 'gilprof.pytest_plugin']"


def test_an_exceeded_budget_says_by_how_much() -> None:
    share = BudgetResult("max-share:f", "total GIL share of f", 23.44, 5.0, "%", False)
    assert _over(share) == ("max-share:f: total GIL share of f 23.4% > 5% (over by 18.4 points)")
    p50 = BudgetResult(
        "max-host-step-p50", "host step p50, rank 0", 61.0, 40.0, "ms", False, "80 iterations"
    )
    assert _over(p50) == (
        "max-host-step-p50: host step p50, rank 0 61.0ms > 40ms (over by 21.0 ms; 80 iterations)"
    )
    unmatched = BudgetResult(
        "max-wait:x",
        "GIL wait share of thread x",
        None,
        5.0,
        "%",
        False,
        "no thread's name matches",
    )
    assert "not measured (no thread's name matches)" in _over(unmatched)
