"""The synthetic profile of report_speed.py (and pictures_speed.py), built with the Profile
API, no sampler involved: 5 threads, stacks 10-40 frames deep that share prefixes as real
call trees do, stack popularity Zipf-distributed (s = 1.1), and per window each stack's count
is its expected count rounded up or down at random, so building costs the same for 1e6 or
1e8 samples.
"""

from __future__ import annotations

import random

import _common

_common.ensure_gilprof_importable()

from gilprof.model import Frame, Mode, SamplingInfo, Target, ThreadState  # noqa: E402
from gilprof.profile import Profile, Window  # noqa: E402

WINDOW_S = 2.0
GIL_UTILIZATION = 0.85  # ticks are set so that this share of them had a GIL holder
ZIPF_S = 1.1
# (name, tid, weight): tids look like py-spy's pthread ids.
THREADS = (
    ("executor-loop", 139_872_412_001_856, 0.45),
    ("ingress", 139_872_403_609_152, 0.25),
    ("MainThread", 139_872_621_377_344, 0.1),
    ("await-response", 139_872_395_216_448, 0.1),
    ("client", 139_872_386_823_744, 0.1),
)
SITE = "/opt/venv/lib/python3.11/site-packages"


def _frame_pool(rng: random.Random, stacks: int) -> list[Frame]:
    modules = max(10, stacks // 50)
    functions = max(50, stacks // 5)
    pool: list[Frame] = []
    for k in range(functions):
        module = rng.randrange(modules)
        path = f"{SITE}/pkg{module % 12}/mod{module}.py"
        name = f"Class{k % 97}.method_{k}" if k % 3 else f"function_{k}"
        first = rng.randrange(10, 2000)
        pool.extend(Frame(name, path, first + 7 * i) for i in range(rng.randint(1, 3)))
    return pool


def _root(thread: str) -> list[Frame]:
    lib = "/usr/lib/python3.11/threading.py"
    if thread == "MainThread":
        return [Frame("<module>", "/app/server.py", 690), Frame("main", "/app/server.py", 672)]
    return [
        Frame("Thread._bootstrap", lib, 995),
        Frame("Thread._bootstrap_inner", lib, 1038),
        Frame("Thread.run", lib, 975),
        Frame(f"{thread}.run", "/app/server.py", 400),
    ]


def build_profile(samples: int, stacks: int, windows: int, seed: int = 0) -> Profile:
    rng = random.Random(seed)
    pool = _frame_pool(rng, stacks)
    rate = samples / (windows * WINDOW_S * GIL_UTILIZATION)
    profile = Profile(
        Target(pid=4242, rank=0, rank_source="PMI_RANK", hostname="bench", python="3.11.7"),
        SamplingInfo(
            sampler="synthetic", sampler_version="0", mode=Mode.GIL, rate_hz=rate, window_s=WINDOW_S
        ),
    )
    known: dict[int, list[list[Frame]]] = {tid: [] for _, tid, _ in THREADS}
    roots = {tid: _root(name) for name, tid, _ in THREADS}
    for name, tid, _ in THREADS:
        profile.threads[tid] = name
    weights = [w for _, _, w in THREADS]
    while len(profile.stacks) < stacks:
        tid = rng.choices([t for _, t, _ in THREADS], weights)[0]
        root, seen = roots[tid], known[tid]
        prefix = root
        if seen and rng.random() < 0.8:
            base = rng.choice(seen)
            prefix = base[: rng.randint(len(root), len(base) - 1)]
        depth = max(rng.randint(10, 40), len(prefix) + 1)
        frames = prefix + [rng.choice(pool) for _ in range(depth - len(prefix))]
        before = len(profile.stacks)
        profile.intern_stack(tid, ThreadState.HELD, frames)
        if len(profile.stacks) > before:
            seen.append(frames)
    order = list(range(stacks))
    rng.shuffle(order)
    zipf = [1.0 / (rank + 1) ** ZIPF_S for rank in range(stacks)]
    total = sum(zipf)
    per_window = samples / windows
    expected = [0.0] * stacks
    for rank, index in enumerate(order):
        expected[index] = per_window * zipf[rank] / total
    draw = rng.random
    for w in range(windows):
        counts = {}
        for index, mean in enumerate(expected):
            count = int(mean + draw())
            if count:
                counts[index] = count
        profile.windows.append(Window(w * WINDOW_S, (w + 1) * WINDOW_S, WINDOW_S * rate, counts))
    profile.finish()
    return profile
