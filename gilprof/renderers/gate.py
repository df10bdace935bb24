"""Renderers of kind "gate": text, json, markdown, junit."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree as ET

from gilprof.analysis.gate import BudgetResult, GateResult
from gilprof.analysis.verdict import Verdict
from gilprof.renderers import register


def _measured(r: BudgetResult) -> str:
    return "n/a" if r.measured is None else f"{r.measured:.2f}{r.unit}"


@register("gate", "table", extension=".txt", description="for a terminal")
def render_text(g: GateResult, verdict: Verdict | None = None, **_: Any) -> str:
    """`verdict` (gate --steps) is shown for information; it is not a budget."""
    lines = [f"info  {verdict.headline}" for verdict in (verdict,) if verdict is not None]
    for r in g.results:
        status = "PASS" if r.passed else "FAIL"
        detail = f"  ({r.detail})" if r.detail else ""
        lines.append(
            f"{status}  {r.name}: {r.description} = {_measured(r)}, limit {r.limit:g}{r.unit}{detail}"
        )
    summary = "passed" if g.passed else f"FAILED ({len(g.failed)} of {len(g.results)} budgets)"
    lines.append(f"gate {summary} for {g.profile_label}")
    return "\n".join(lines) + "\n"


@register("gate", "json", extension=".json", description="machine-readable")
def render_json(g: GateResult, verdict: Verdict | None = None, **_: Any) -> str:
    out: dict[str, Any] = {
        "schema": "gilprof.analysis.gate/1",
        "passed": g.passed,
        "profile": g.profile_label,
        "budgets": [
            {
                "name": r.name,
                "description": r.description,
                "measured": r.measured,
                "limit": r.limit,
                "unit": r.unit,
                "passed": r.passed,
                "detail": r.detail,
            }
            for r in g.results
        ],
    }
    if verdict is not None:
        out["verdict"] = verdict.to_json()
    return json.dumps(out, indent=2) + "\n"


@register("gate", "markdown", extension=".md", description="for a PR comment")
def render_markdown(g: GateResult, verdict: Verdict | None = None, **_: Any) -> str:
    head = (
        "✅ gilprof gate passed"
        if g.passed
        else f"❌ gilprof gate failed ({len(g.failed)} of {len(g.results)})"
    )
    lines = [
        f"### {head}",
        "",
        f"profile: {g.profile_label}",
        "",
        *[f"{v.headline}\n" for v in (verdict,) if v is not None],
        "| budget | measured | limit | result | detail |",
        "|---|---:|---:|---|---|",
    ]
    for r in g.results:
        lines.append(
            f"| `{r.name}` | {_measured(r)} | {r.limit:g}{r.unit} | "
            f"{'pass' if r.passed else '**FAIL**'} | {r.detail} |"
        )
    return "\n".join(lines) + "\n"


@register("gate", "junit", extension=".xml", description="JUnit XML for CI")
def render_junit(g: GateResult, **_: Any) -> str:
    suite = ET.Element(
        "testsuite",
        name="gilprof.analysis.gate",
        tests=str(len(g.results)),
        failures=str(len(g.failed)),
        errors="0",
        skipped="0",
    )
    for r in g.results:
        case = ET.SubElement(suite, "testcase", classname="gilprof.analysis.gate", name=r.name)
        if not r.passed:
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{r.description} = {_measured(r)} exceeds {r.limit:g}{r.unit}",
            )
            failure.text = r.detail
        else:
            out = ET.SubElement(case, "system-out")
            out.text = f"{r.description} = {_measured(r)}, limit {r.limit:g}{r.unit}"
    suites = ET.Element(
        "testsuites", name="gilprof", tests=str(len(g.results)), failures=str(len(g.failed))
    )
    suites.append(suite)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
