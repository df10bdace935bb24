"""The GPU's own word: NVML's busy share of the target's GPU, per sampling window.

NVML (the `nvidia-ml-py` package, imported as `pynvml`) says how busy each GPU was over its
last sample period (`nvmlDeviceGetUtilizationRates`: the share of time a kernel ran) and,
where the driver keeps it, each process's SM share (`nvmlDeviceGetProcessUtilization`).
The target's GPU is the one whose compute processes include its PID: a measurement, not a
guess from CUDA_VISIBLE_DEVICES or the rank. A machine without NVML, a GPU or the PID among
NVML's processes says so in one line, and the profile records no GPU figure.

A poller thread reads the busy share every POLL_S; each window's share is the mean of the
reads inside it. It is evidence beside the verdict (gilprof.analysis.verdict), not a
replacement for the loop thread's own time.
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import ModuleType
from typing import Any

POLL_S = 0.1


def _nvml() -> ModuleType | None:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


class GpuWatch:
    """Polls one GPU's busy share (and the process's SM share) while a capture runs."""

    def __init__(self, nvml: Any, handle: Any, index: int, name: str, pid: int) -> None:
        self.nvml = nvml
        self.handle = handle
        self.index = index
        self.name = name
        self.pid = pid
        self._reads: list[tuple[float, float]] = []  # (monotonic time, busy share)
        self._sm: list[float] = []
        self._last_seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="gilprof-nvml", daemon=True)
        self._thread.start()

    @classmethod
    def open(cls, pid: int, nvml: Any = None) -> tuple[GpuWatch | None, str]:
        """A watch on the GPU that runs `pid`, or (None, why not in one line)."""
        nvml = nvml if nvml is not None else _nvml()
        if nvml is None:
            return None, "no GPU evidence: NVML is not installed (pip install nvidia-ml-py)"
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except Exception as exc:  # NVMLError and its many subclasses
            return None, f"no GPU evidence: NVML cannot start ({exc}): no NVIDIA driver here?"
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except Exception:  # a GPU NVML cannot query: look at the others
                continue
            if any(getattr(p, "pid", None) == pid for p in processes):
                name = nvml.nvmlDeviceGetName(handle)
                name = name.decode() if isinstance(name, bytes) else str(name)
                return cls(nvml, handle, index, name, pid), ""
        return None, (
            f"no GPU evidence: PID {pid} is none of NVML's compute processes on {count} GPU(s) "
            "(no CUDA context yet, or a PID namespace NVML does not see)"
        )

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu / 100.0
                self._reads.append((time.monotonic(), busy))
            except Exception:
                pass  # one missed read: the window's mean uses the others
            self._read_sm()
            self._stop.wait(POLL_S)

    def _read_sm(self) -> None:
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(self.handle, self._last_seen)
        except Exception:
            return  # "Not Found" until the driver has a new sample: ask again next time
        for sample in samples:
            self._last_seen = max(self._last_seen, int(getattr(sample, "timeStamp", 0)))
            if getattr(sample, "pid", None) == self.pid:
                self._sm.append(float(getattr(sample, "smUtil", 0)) / 100.0)

    def busy_between(self, t0: float, t1: float) -> float | None:
        """The mean busy share read between two monotonic times (None: no read then)."""
        inside = [busy for at, busy in list(self._reads) if t0 <= at <= t1]
        return sum(inside) / len(inside) if inside else None

    def sm_share(self) -> float | None:
        return sum(self._sm) / len(self._sm) if self._sm else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()


def summary(watch: GpuWatch, busy: list[float]) -> str:
    """One line for the profile: the GPU, its busy share over the windows, the SM share."""
    mean = sum(busy) / len(busy)
    sm = watch.sm_share()
    process = "" if sm is None else f"; this process's SM share {100 * sm:.0f}%"
    return (
        f"NVML: GPU {watch.index} ({watch.name}) busy {100 * mean:.0f}% "
        f"(windows {100 * min(busy):.0f}-{100 * max(busy):.0f}%){process}"
    )
