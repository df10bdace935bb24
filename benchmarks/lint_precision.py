"""Precision of `gilprof lint` on real engine trees nobody here wrote, judged finding by finding.

Downloads the vLLM and SGLang wheels named below with pip (`pip download --no-deps`), unzips
their Python files into a cache, lints them and the TensorRT-LLM excerpts kept in
tests/unit/data/lint (the PyPI tensorrt-llm package is a stub), then prints every finding with
its judgement from benchmarks/lint_precision_judgements.json and a precision table per engine
and rule. A finding's key is (engine, rule, path in the tree, hash of the flagged line's text),
so judgements survive line shifts but not edits of the line itself.

    python benchmarks/lint_precision.py                  # download if needed, lint, table
    python benchmarks/lint_precision.py --show           # also every finding and why
    python benchmarks/lint_precision.py --write-unjudged # append new findings, judged null

Exit status: 0 when every finding is judged, 1 when some are not (listed), 2 on a bad
download or judgements file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gilprof.lint import RULES, Finding, lint_paths  # noqa: E402

ENGINES = (("vllm", "0.34.0"), ("sglang", "0.5.23"))
TRTLLM = "tensorrt-llm excerpts"
TRTLLM_FILES = sorted((REPO / "tests/unit/data/lint").glob("trtllm_*.py"))
JUDGEMENTS = Path(__file__).with_name("lint_precision_judgements.json")
DEFAULT_CACHE = Path.home() / ".cache" / "gilprof-lint-precision"


def fetch(name: str, version: str, cache: Path) -> Path:
    """The unzipped wheel's tree, downloading the wheel with pip when it is not cached."""
    tree = cache / f"{name}-{version}"
    if (tree / ".complete").exists():
        return tree
    wheels = sorted(cache.glob(f"{name}-{version}-*.whl"))
    if not wheels:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   f"{name}=={version}", "-d", str(cache)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wheels = sorted(cache.glob(f"{name}-{version}-*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"lint_precision: cannot download {name}=={version}: {last}")
    with zipfile.ZipFile(wheels[0]) as archive:
        members = [m for m in archive.namelist() if m.endswith(".py")]
        archive.extractall(tree, members)
    (tree / ".complete").write_text(wheels[0].name + "\n")
    return tree


def key(engine: str, finding: Finding, root: Path) -> dict[str, str]:
    path = Path(finding.path)
    relative = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    line = path.read_text(encoding="utf-8", errors="replace").split("\n")[finding.line - 1]
    digest = hashlib.sha1(line.strip().encode()).hexdigest()[:12]
    return {"engine": engine, "rule": finding.rule, "path": relative, "line_sha": digest,
            "line": line.strip()[:120]}  # fmt: skip


def load_judgements(path: Path) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    if not path.exists():
        return {}
    try:
        entries = json.loads(path.read_text())["judgements"]
        return {(e["engine"], e["rule"], e["path"], e["line_sha"]): e for e in entries}
    except (ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"lint_precision: {path}: not a judgements file: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE,
        help=f"where wheels and their trees go (default {DEFAULT_CACHE})",
    )
    parser.add_argument("--judgements", type=Path, default=JUDGEMENTS)
    parser.add_argument("--show", action="store_true", help="print every finding and its why")
    parser.add_argument(
        "--include-tests", action="store_true", help="also lint the engines' test files"
    )
    parser.add_argument(
        "--write-unjudged",
        action="store_true",
        help="append unjudged findings to the judgements file (true: null)",
    )
    args = parser.parse_args(argv)
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    judgements = load_judgements(args.judgements)
    trees = [(f"{n} {v}", fetch(n, v, args.cache_dir)) for n, v in ENGINES]
    # Each TensorRT-LLM before/after set is one tree: a fix never shares a tree with its bug.
    before = [p for p in TRTLLM_FILES if p.stem.endswith("_before")]
    after = [p for p in TRTLLM_FILES if p not in before]
    runs = [*((engine, root, [root]) for engine, root in trees)]
    runs += [(TRTLLM, TRTLLM_FILES[0].parent, files) for files in (before, after)]
    table: Counter[tuple[str, str, str]] = Counter()
    unjudged: list[dict[str, str]] = []
    for engine, root, paths in runs:
        started = time.monotonic()
        result = lint_paths(paths, include_tests=args.include_tests)
        seconds = time.monotonic() - started
        print(f"{engine}: {result.files_scanned} files linted, {result.tests_skipped} test files "
              f"skipped, {len(result.errors)} unparseable, {len(result.findings)} findings "
              f"({seconds:.0f} s)")  # fmt: skip
        for finding in result.findings:
            entry = key(engine, finding, root)
            judged = judgements.get((engine, entry["rule"], entry["path"], entry["line_sha"]))
            verdict = "unjudged" if judged is None or judged.get("true") is None else (
                "true" if judged["true"] else "false")  # fmt: skip
            table[(engine, finding.rule, verdict)] += 1
            if verdict == "unjudged":
                unjudged.append(entry)
            if args.show or verdict == "unjudged":
                why = judged.get("why", "") if judged else ""
                print(f"  [{verdict}] {finding.rule} {entry['path']}:{finding.line}: "
                      f"{finding.message[:110]}\n      {why}")  # fmt: skip
    print_table(table, list(dict.fromkeys(engine for engine, _, _ in runs)))
    if unjudged and args.write_unjudged:
        document = {"judgements": [*judgements.values(), *({**e, "true": None, "why": ""}
                                                          for e in unjudged)]}  # fmt: skip
        args.judgements.write_text(json.dumps(document, indent=1) + "\n")
    return 1 if unjudged else 0


def print_table(table: Counter[tuple[str, str, str]], engines: list[str]) -> None:
    print(f"\n{'engine':24} {'rule':6} {'findings':>8} {'true':>5} {'false':>5} "
          f"{'unjudged':>8} {'precision':>9}")  # fmt: skip
    totals: Counter[str] = Counter()
    for engine in [*engines, "all"]:
        for rule in [*sorted(RULES), "all"]:

            def count(verdict: str, engine: str = engine, rule: str = rule) -> int:
                return sum(n for (e, r, v), n in table.items() if v == verdict
                           and engine in ("all", e) and rule in ("all", r))  # fmt: skip

            true, false, unknown = count("true"), count("false"), count("unjudged")
            if true + false + unknown == 0 and rule != "all":
                continue
            precision = f"{100 * true / (true + false):.0f}%" if true + false else "-"
            print(f"{engine:24} {rule:6} {true + false + unknown:8} {true:5} {false:5} "
                  f"{unknown:8} {precision:>9}")  # fmt: skip
            if engine == "all" and rule == "all":
                totals.update(true=true, false=false)
    false_getters = sum(n for (_, r, v), n in table.items() if r == "GP002" and v == "false")
    print(f"\nGP002 findings on attributes that do not copy: {false_getters}")


if __name__ == "__main__":
    sys.exit(main())
