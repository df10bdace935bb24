"""Samplers behind one protocol; `get_backend(name)` picks one by name."""

from __future__ import annotations

from gilprof.errors import UsageError
from gilprof.sampling.backends.base import Backend, SamplerSettings, WindowResult

BACKEND_NAMES = ("py-spy", "austin")


def get_backend(name: str) -> Backend:
    if name in ("py-spy", "pyspy"):
        from gilprof.sampling.backends.pyspy import PySpyBackend

        return PySpyBackend()
    if name == "austin":
        from gilprof.sampling.backends.austin import AustinBackend

        return AustinBackend()
    raise UsageError(f"unknown backend {name!r}; known: {', '.join(BACKEND_NAMES)}")


__all__ = ["BACKEND_NAMES", "Backend", "SamplerSettings", "WindowResult", "get_backend"]
