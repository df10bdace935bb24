"""Renderers registered by (kind, format name).

A kind is the thing being rendered ("report", "steps", "compare", "gate", "lint"); each
renderer takes that kind's result object and returns text. Commands look renderers up by
name, so adding a format is one decorated function, never another elif.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from gilprof.errors import UsageError

Renderer = Callable[..., str]
_REGISTRY: dict[tuple[str, str], Renderer] = {}

# Modules that register renderers; imported lazily so the core never pays for rich.
_RENDERER_MODULES = (
    "gilprof.renderers.report",
    "gilprof.renderers.steps",
    "gilprof.renderers.compare",
    "gilprof.renderers.gate",
    "gilprof.renderers.ranks",
    "gilprof.renderers.lint",
    "gilprof.renderers.bench_reference",
)


def register(kind: str, name: str) -> Callable[[Renderer], Renderer]:
    def decorator(func: Renderer) -> Renderer:
        _REGISTRY[(kind, name)] = func
        return func

    return decorator


def _load_all() -> None:
    for module in _RENDERER_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def formats(kind: str) -> list[str]:
    _load_all()
    return sorted(name for (k, name) in _REGISTRY if k == kind)


def render(kind: str, name: str, result: Any, **options: Any) -> str:
    _load_all()
    try:
        renderer = _REGISTRY[(kind, name)]
    except KeyError:
        known = ", ".join(formats(kind)) or "none"
        raise UsageError(f"unknown format {name!r} for {kind}; known: {known}") from None
    return renderer(result, **options)
