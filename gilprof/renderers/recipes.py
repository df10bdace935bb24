"""Renderers of kinds "recipes" (the list) and "recipe" (one, shown and checked)."""

from __future__ import annotations

import io
import json
import shutil

from gilprof.recipes import Recipe
from gilprof.renderers import register


@register("recipes", "table", extension=".txt", description="for a terminal")
def _recipes_table(recipes: list[Recipe]) -> str:
    from rich.console import Console
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("recipe", no_wrap=True)
    table.add_column("description")
    for recipe in recipes:
        table.add_row(recipe.name, recipe.description)
    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False)
    console.print(table)
    console.print("\nShow one with: gilprof recipes --show NAME")
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()).rstrip("\n")


@register("recipes", "plain", extension=".tsv", description="tab-separated")
def _recipes_plain(recipes: list[Recipe]) -> str:
    return "\n".join(f"{recipe.name}\t{recipe.description}" for recipe in recipes)


@register("recipes", "json", extension=".json", description="machine-readable")
def _recipes_json(recipes: list[Recipe]) -> str:
    return json.dumps(
        [{"name": r.name, "description": r.description, "source": r.source} for r in recipes],
        indent=2,
    )


def _summary(recipe: Recipe) -> list[str]:
    target = recipe.target
    lines = [f"recipe {recipe.name} ({recipe.source}): valid", f"  {recipe.description}"]
    where = [f"rank {target.rank}"] + [
        f"{label} {value}"
        for label, value in (
            ("role", target.role),
            ("cmdline ~", target.match),
            ("ancestor ~", target.parent_match),
            ("role env", target.role_env),
        )
        if value
    ]
    lines.append("target:   " + ", ".join(where))
    if target.threads:
        lines.append("threads:  " + ", ".join(target.threads))
    sampling = recipe.sampling
    parts = [
        f"{label} {value}"
        for label, value in (
            ("mode", sampling.mode),
            ("rate", f"{sampling.rate:g} Hz" if sampling.rate is not None else None),
            ("duration", f"{sampling.duration:g} s" if sampling.duration is not None else None),
            ("native", None if sampling.native is None else str(sampling.native).lower()),
        )
        if value is not None
    ]
    lines.append("sampling: " + (", ".join(parts) or "command defaults"))
    lines.append(f"watch:    {len(recipe.watch)} function(s)")
    for entry in recipe.watch:
        where_file = f" [{entry.file}]" if entry.file else ""
        lines.append(f"  - {entry.function}{where_file}")
        lines.append(f"      {' '.join(entry.why.split())}")
        if entry.fix:
            lines.append(f"      fix: {entry.fix}")
    if recipe.steps is not None:
        log = f", log {recipe.steps.log}" if recipe.steps.log else ""
        if recipe.steps.parser:
            lines.append(f"steps:    parser {recipe.steps.parser}{log}")
        for kind, names in (
            ("device", recipe.steps.device_wait),
            ("input", recipe.steps.input_wait),
        ):
            if names:
                lines.append(f"steps:    waits for the {kind} in {', '.join(names)}")
    start = recipe.start
    if start is not None:
        when = [f"output ~ '{start.on}' (launch mode)"] if start.on else []
        when += [f"log {start.on_log}"] if start.on_log else []
        if start.after is not None:
            when.append(f"{'then ' if when else ''}{start.after:g} s")
        lines.append("start:    " + ", ".join(when) + " (--start-* override)")
    else:
        lines.append("start:    at once (no [start]; --start-after, --start-on, --start-on-log)")
    gate = recipe.gate
    if not gate.is_empty():
        budgets = [f"max_share {name} <= {pct:g}%" for name, pct in gate.max_share.items()]
        budgets += [
            f"{label} <= {value:g}{unit}"
            for label, value, unit in (
                ("max_utilization", gate.max_utilization, "%"),
                ("host_step p50", gate.max_host_step_p50_ms, " ms"),
                ("regression", gate.max_regression, "%"),
            )
            if value is not None
        ]
        lines.append("gate:     " + "; ".join(budgets))
    if recipe.lint_getters:
        lines.append("lint:     copying getters " + ", ".join(recipe.lint_getters))
    return lines


@register("recipe", "table", extension=".txt", description="the TOML and a checked summary")
def _recipe_text(recipe: Recipe) -> str:
    rule = "-" * 72
    return "\n".join([recipe.text.rstrip("\n"), rule, *_summary(recipe)])


@register("recipe", "plain", extension=".txt", description="same as table")
def _recipe_plain(recipe: Recipe) -> str:
    return _recipe_text(recipe)


@register("recipe", "json", extension=".json", description="machine-readable")
def _recipe_json(recipe: Recipe) -> str:
    return json.dumps({**recipe.to_dict(), "text": recipe.text}, indent=2)
