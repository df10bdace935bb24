"""Renderers for `gilprof lint` results: text (one finding a line), json, and SARIF 2.1.0."""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from pathlib import PurePath, PurePosixPath
from typing import Any
from urllib.parse import quote

from gilprof import __version__
from gilprof.lint import RULES, SCHEMA, LintResult
from gilprof.renderers import register

FORMATS = ("text", "json", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


@register("lint", "table", extension=".txt", description="one finding a line")
def render_text(result: LintResult, **_options: Any) -> str:
    lines = [
        f"{f.path}:{f.line}:{f.col}: {f.rule}{' (test code)' if f.level == 'note' else ''} "
        f"{f.message} (fix: {f.fix})"
        for f in result.findings
    ]
    scanned = _plural(result.files_scanned, "file") + " scanned"
    if result.findings:
        by_rule = Counter(f.rule for f in result.findings)
        counts = ", ".join(f"{rule}: {n}" for rule, n in sorted(by_rule.items()))
        summary = f"{_plural(len(result.findings), 'finding')} ({counts}) in {scanned}"
    else:
        summary = f"no findings in {scanned}"
    if result.tests_skipped:
        summary += f"; {_plural(result.tests_skipped, 'test file')} skipped (--include-tests)"
    if result.errors:
        summary += f"; {_plural(len(result.errors), 'path')} could not be read or parsed"
    return "\n".join([*lines, summary])


@register("lint", "json", extension=".json", description=SCHEMA)
def render_json(result: LintResult, **_options: Any) -> str:
    return json.dumps(result.to_dict(), indent=2)


def _artifact_uri(path: str) -> str:
    """A relative path stays relative (resolved against the checkout by SARIF consumers)."""
    pure = PurePath(path)
    if pure.is_absolute():
        return "file://" + quote(pure.as_posix())
    return quote(posixpath.normpath(PurePosixPath(*pure.parts).as_posix()))


@register("lint", "sarif", extension=".sarif", description="SARIF 2.1.0")
def render_sarif(result: LintResult, **_options: Any) -> str:
    rule_ids = sorted(RULES)
    rules = [
        {
            "id": rule_id,
            "name": RULES[rule_id].name,
            "shortDescription": {"text": RULES[rule_id].title},
            "help": {"text": f"Fix: {RULES[rule_id].fix}"},
            "defaultConfiguration": {"level": "warning"},
        }
        for rule_id in rule_ids
    ]
    results: list[dict[str, Any]] = [
        {
            "ruleId": f.rule,
            "ruleIndex": rule_ids.index(f.rule),
            "level": f.level,
            "message": {"text": f"{f.message} (fix: {f.fix})"},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _artifact_uri(f.path)},
                        "region": {"startLine": f.line, "startColumn": f.col},
                    }
                }
            ],
        }
        for f in result.findings
    ]
    notifications = [
        {
            "level": "error",
            "message": {"text": e.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _artifact_uri(e.path)},
                        **({"region": {"startLine": e.line}} if e.line else {}),
                    }
                }
            ],
        }
        for e in result.errors
    ]
    run = {
        "tool": {
            "driver": {
                "name": "gilprof",
                "version": __version__,
                "rules": rules,
            }
        },
        "columnKind": "unicodeCodePoints",
        "invocations": [
            {"executionSuccessful": not result.errors, "toolExecutionNotifications": notifications}
        ],
        "results": results,
    }
    document = {"version": "2.1.0", "$schema": SARIF_SCHEMA, "runs": [run]}
    return json.dumps(document, indent=2)
