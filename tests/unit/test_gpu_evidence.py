"""NVML's word beside the verdict, on a stand-in NVML module (pure logic: which GPU is the
target's, the per-window mean, the one-line refusals). The real NVML is exercised on a GPU
machine (benchmarks/gpu_check.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from gilprof.analysis.verdict import DEVICE, HOST, with_gpu_evidence
from gilprof.sampling.gpu import GpuWatch, summary


class _Nvml:
    def __init__(self, pids_per_gpu, busy=83, fail_init=False):
        self.pids = pids_per_gpu
        self.busy = busy
        self.fail_init = fail_init
        self.shut = False

    def nvmlInit(self):
        if self.fail_init:
            raise RuntimeError("Driver Not Loaded")

    def nvmlDeviceGetCount(self):
        return len(self.pids)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=p) for p in self.pids[handle]]

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200"

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=self.busy, memory=0)

    def nvmlDeviceGetProcessUtilization(self, handle, last_seen):
        return [SimpleNamespace(pid=42, smUtil=80, timeStamp=last_seen + 1)]

    def nvmlShutdown(self):
        self.shut = True


def test_the_targets_gpu_is_the_one_running_its_pid():
    nvml = _Nvml([[7], [42, 43]])
    watch, note = GpuWatch.open(42, nvml)
    assert watch is not None and note == "" and watch.index == 1
    t0 = time.monotonic()
    time.sleep(0.35)
    busy = watch.busy_between(t0, time.monotonic())
    watch.close()
    assert busy == 0.83 and nvml.shut
    line = summary(watch, [busy, 0.81])
    assert "GPU 1 (NVIDIA H200) busy 82%" in line and "SM share 80%" in line


def test_no_nvml_no_driver_or_no_such_process_is_one_line():
    for nvml, words in (
        (_Nvml([], fail_init=True), "NVML cannot start"),
        (_Nvml([[7]]), "none of NVML's compute processes"),
    ):
        watch, note = GpuWatch.open(42, nvml)
        assert watch is None and words in note and "\n" not in note


def _verdict(bound):
    from gilprof.analysis.verdict import Verdict

    return Verdict(bound, "loop", 0.5, 0.4, 40.0, None, "why", None, loop=None)  # type: ignore[arg-type]


def test_gpu_evidence_stands_beside_the_verdict_and_says_when_it_disagrees():
    v = with_gpu_evidence(_verdict(DEVICE), [0.82, 0.84], "NVML: GPU 0 busy 83%")
    assert v.bound == DEVICE and v.gpu_busy == 0.83 and v.gpu_note == "NVML: GPU 0 busy 83%"
    idle = with_gpu_evidence(_verdict(DEVICE), [0.02], "NVML: GPU 0 busy 2%")
    assert "mostly idle" in idle.gpu_note and idle.bound == DEVICE
    busy_host = with_gpu_evidence(_verdict(HOST), [0.97], "NVML: GPU 0 busy 97%")
    assert "overlaps" in busy_host.gpu_note
    none = with_gpu_evidence(_verdict(HOST), [], "no GPU evidence: NVML is not installed")
    assert none.gpu_busy is None and none.gpu_note.startswith("no GPU evidence")
