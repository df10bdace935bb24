"""Renderers: result objects -> text or bytes, registered by (kind, format name).

A kind is the thing being rendered ("report", "ranks", "steps", "compare", "gate", "lint",
...). Each renderer describes itself (its format name, file extension, whether its output is
binary, one line of help), so a command's `--format` choices and help come from here and
adding a format is one decorated function, never another elif. The modules of a kind load
only when that kind is rendered: `gilprof report` never imports the lint renderers.

Only gilprof.cli imports this package (an import contract checks it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gilprof.errors import UsageError

Renderer = Callable[..., Any]

# The human-readable format is called "table" for every kind; "text" is accepted for it.
HUMAN_FORMAT = "table"
_ALIASES = {"text": HUMAN_FORMAT, "plain-table": HUMAN_FORMAT}

# kind -> modules that register its renderers (loaded on first use of the kind).
KIND_MODULES: dict[str, tuple[str, ...]] = {
    "report": (
        "gilprof.renderers.report",
        "gilprof.renderers.stacks",
        "gilprof.renderers.html.report",
        "gilprof.renderers.flamegraph",
        "gilprof.renderers.perfetto",
        "gilprof.renderers.pprof",
    ),
    "ranks": ("gilprof.renderers.ranks", "gilprof.renderers.html.report"),
    "steps": ("gilprof.renderers.steps",),
    "compare": ("gilprof.renderers.compare", "gilprof.renderers.html.diff"),
    "gate": ("gilprof.renderers.gate",),
    "lint": ("gilprof.renderers.lint",),
    "bench_reference": ("gilprof.renderers.bench_reference",),
    "recipes": ("gilprof.renderers.recipes",),
    "recipe": ("gilprof.renderers.recipes",),
    "ps": ("gilprof.renderers.ps",),
}


@dataclass(frozen=True)
class RendererInfo:
    kind: str
    name: str
    extension: str  # of a file holding this output, with the dot
    binary: bool  # bytes, not text: needs -o, never stdout
    description: str
    func: Renderer


_REGISTRY: dict[tuple[str, str], RendererInfo] = {}
_LOADED: set[str] = set()


def register(
    kind: str, name: str, *, extension: str = ".txt", binary: bool = False, description: str = ""
) -> Callable[[Renderer], Renderer]:
    def decorator(func: Renderer) -> Renderer:
        _REGISTRY[(kind, name)] = RendererInfo(kind, name, extension, binary, description, func)
        return func

    return decorator


def _load(kind: str) -> None:
    if kind in _LOADED:
        return
    for module in KIND_MODULES.get(kind, ()):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    _LOADED.add(kind)


def formats(kind: str) -> list[str]:
    _load(kind)
    return sorted(name for (k, name) in _REGISTRY if k == kind)


def describe_formats(*kinds: str) -> str:
    """`table, json (gilprof.report/1), ...` for --help: every format of the kinds, once."""
    seen: dict[str, str] = {}
    for kind in kinds:
        _load(kind)
        for (k, name), info in sorted(_REGISTRY.items()):
            if k == kind and name not in seen:
                seen[name] = f"{name} ({info.description})" if info.description else name
    return ", ".join(seen.values()) or "none"


def info(kind: str, name: str) -> RendererInfo:
    _load(kind)
    name = _ALIASES.get(name, name) if (kind, name) not in _REGISTRY else name
    try:
        return _REGISTRY[(kind, name)]
    except KeyError:
        known = ", ".join(formats(kind)) or "none"
        raise UsageError(f"unknown format {name!r} for {kind}; known: {known}") from None


def render(kind: str, name: str, result: Any, **options: Any) -> Any:
    """The output of format `name` for `result`: str, or bytes for a binary format."""
    return info(kind, name).func(result, **options)
