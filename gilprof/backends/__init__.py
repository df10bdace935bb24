"""Samplers behind one protocol; `get_backend(name)` picks one by name."""

from __future__ import annotations

from gilprof.backends.base import Backend, SamplerSettings, WindowResult
from gilprof.errors import UsageError

BACKEND_NAMES = ("py-spy",)


def get_backend(name: str) -> Backend:
    if name in ("py-spy", "pyspy"):
        from gilprof.backends.pyspy import PySpyBackend

        return PySpyBackend()
    raise UsageError(f"unknown backend {name!r}; known: {', '.join(BACKEND_NAMES)}")


__all__ = ["BACKEND_NAMES", "Backend", "SamplerSettings", "WindowResult", "get_backend"]
