"""Samplers behind one protocol; `get_backend(name)` picks one by name."""

from __future__ import annotations

from gilprof.backends.base import Backend, SamplerSettings, WindowResult
from gilprof.errors import UsageError

BACKEND_NAMES = ("py-spy", "austin")


def get_backend(name: str) -> Backend:
    if name in ("py-spy", "pyspy"):
        from gilprof.backends.pyspy import PySpyBackend

        return PySpyBackend()
    if name == "austin":
        from gilprof.backends.austin import AustinBackend

        return AustinBackend()
    raise UsageError(f"unknown backend {name!r}; known: {', '.join(BACKEND_NAMES)}")


__all__ = ["BACKEND_NAMES", "Backend", "SamplerSettings", "WindowResult", "get_backend"]
