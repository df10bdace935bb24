"""What the fuzz tests of the file readers share (test_fuzz_readers*.py): the time limit
every read runs under, `outcome` (a reader's result or its one-line InputError, counted per
reader in CASES), valid inputs to mutate, hypothesis strategies, fixed bad files, and the
file readers themselves.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from gilprof.errors import InputError
from gilprof.model import Frame, Mode, Sample, SamplingInfo, Target
from gilprof.profile import SCHEMA, Profile, load_profiles
from gilprof.recipes import load_budget_file, load_recipe
from gilprof.steps import read_step_logs, summarize_logs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CASES: Counter[str] = Counter()
FUZZ = settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TIME_LIMIT_S = 10.0  # generous: the machine is shared; a hang is minutes, not seconds
FIFO_LIMIT_S = 3.0  # a FIFO without a writer reads at once as empty, or blocks for ever
RECIPE_FILE = Path(__file__).resolve().parents[2] / "recipes" / "trtllm-disagg-gen.toml"
BUDGET = {
    "gate": {
        "max_utilization": 80,
        "max_regression": 10.5,
        "max_host_step_p50_ms": 120,
        "max_share": {"safe_broadcast": 5},
    }
}
STEP_LINE = (
    "[TRT-LLM] [I] [_torch][RANK {rank}] iter = {i}, global_rank = {rank}, rank = {rank}, "
    "host_step_time = {h}ms, prev_device_step_time = {d}ms, num_scheduled_requests: 64, "
    "states = {{'num_ctx_requests': 0}}"
)


class Hang(BaseException):
    """A reader ran past the time limit (BaseException: no reader may swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float = TIME_LIMIT_S) -> Iterator[None]:
    """SIGALRM interrupts even a blocking open() of a FIFO; pytest-timeout's alarm is restored."""

    def on_alarm(_signum: int, _frame: Any) -> None:
        raise Hang(f"still reading after {seconds:g} s")

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_delay, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay:
            left = previous_delay - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))


def outcome(kind: str, read: Callable[[], Any], limit: float = TIME_LIMIT_S) -> Any:
    """The reader's result or its InputError (checked to be one line); anything else raises."""
    CASES[kind] += 1
    with time_limit(limit):
        try:
            return read()
        except InputError as exc:
            message = str(exc)
            assert message and "\n" not in message and len(message) < 600, message
            return exc


# -- inputs ----------------------------------------------------------------------------------
def valid_profile() -> Profile:
    target = Target(
        pid=4242,
        rank=0,
        rank_source="PMI_RANK",
        local_rank=0,
        world_size=4,
        launcher="mpiexec",
        launcher_pid=4200,
        hostname="node1",
        python="3.11.7",
        cmdline=("python", "server.py", "--api-key", "<redacted>"),
    )
    profile = Profile(
        target,
        SamplingInfo(
            sampler="py-spy",
            sampler_version="0.4.3",
            mode=Mode.GIL,
            rate_hz=100.0,
            window_s=1.0,
            started_at="2026-01-01",
        ),
    )
    loop = (Frame("main", "/app/server.py", 3), Frame("loop", "/app/server.py", 30))
    hot = Sample(7, "executor-loop", (*loop, Frame("safe_broadcast", "/app/comm.py", 12)), 30)
    profile.add_window(0.0, 1.0, 100, [hot, Sample(8, "ingress", loop[:1], 5)])
    profile.add_window(
        1.0,
        2.0,
        90,
        [Sample(7, "executor-loop", loop, 12)],
        spans=[(hot, 0.1, 0.4), (Sample(8, "ingress", loop[:1], 1), 0.2, 0.3)],
    )
    profile.finish(messages=("window failed: example",))
    return profile


VALID_PROFILE = valid_profile().to_dict()
VALID_PROFILE_TEXT = json.dumps(VALID_PROFILE, separators=(",", ":")) + "\n"
VALID_RECIPE_TEXT = RECIPE_FILE.read_text(encoding="utf-8")
VALID_RECIPE = tomllib.loads(VALID_RECIPE_TEXT)
VALID_LOG_TEXT = "".join(
    STEP_LINE.format(rank=r, i=i, h=100 + i % 7, d=98 + i % 5) + "\n" + "unrelated line\n"
    for i in range(12)
    for r in (0, 1)
)
VALID_RAW = [
    Sample(
        7,
        "executor-loop",
        (Frame("main", "/app/server.py", 3), Frame("safe_broadcast", "/app/comm.py", 12)),
        30,
    ),
    Sample(0x7F00AB, "", (Frame("serve", "/app/a b/x.py", 0),), 5),
    Sample(8, "ingress", (Frame("<module>", "<string>", 1),), 123),
]


def raw_line(sample: Sample) -> str:
    frames = "".join(
        f";{f.name} ({f.file}:{f.line})" if f.line else f";{f.name} ({f.file})"
        for f in sample.frames
    )
    return f"thread ({sample.tid}): {sample.thread_name}{frames} {sample.count}"


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every leaf and branch of a JSON/TOML tree, the root included, as key/index paths."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths_of(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths_of(child, (*prefix, index))
    return found


def replaced(tree: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(tree))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return copy


HUGE_NUMBERS = st.sampled_from([10**400, -(10**400), 2**63, 2**64 + 1, 10**4000, 1e308, -1e308])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | HUGE_NUMBERS
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["gil", "held", "", "1", "0x10", SCHEMA])
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=6) | st.sampled_from(["tid", "t0", "counts", "name"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
TOML_VALUES = st.recursive(
    st.booleans()
    | st.integers()
    | HUGE_NUMBERS
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["gil", "trtllm", "safe_broadcast", "x/y.py", "(", ""]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=6) | st.sampled_from(["function", "why", "rank"]), children, max_size=4
        )
    ),
    max_leaves=12,
)


def to_toml(value: Any) -> str:
    """A TOML inline value (test-only writer: tomllib reads TOML but cannot write it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if value != value
            else "inf"
            if value == float("inf")
            else "-inf"
            if value == float("-inf")
            else repr(value)
        )
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(to_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {to_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def toml_document(document: Any) -> str:
    if not isinstance(document, dict):
        return f"value = {to_toml(document)}\n"
    return "".join(f"{json.dumps(k)} = {to_toml(v)}\n" for k, v in document.items())


BAD_CONTENTS: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b" \n\t\n",
    "non_utf8": b"\xff\xfe\x00\x80garbage \xc3\x28 iter = 1\n",
    "nan": b'{"schema": "gilprof.profile/1", "x": NaN}\nhost_step_ms = nan\n',
    "infinity": b"[Infinity, -Infinity]",
    "huge_int": b"1" + b"0" * 5000,
    "huge_int_toml": b'name = "x"\ndescription = "y"\n[gate]\nmax_utilization = 1' + b"0" * 5000,
    "huge_float": b'{"host_step_ms": 1e999999, "schema": 1e999999}',
    "deep_lists": b"[" * 100_000 + b"]" * 100_000,
    "deep_objects": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "deep_toml": b"a = " + b"[" * 100_000 + b"]" * 100_000,
    "deep_log_line": b'{"host_step_ms": 1, "a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
    "random_binary": random.Random(7).randbytes(8192),
    "nul_bytes": b"\x00" * 1000,
    "long_line": b"iter = 1, " * 300_000,  # 3 MB, no newline
    "newer_schema": json.dumps({**VALID_PROFILE, "schema": "gilprof.profile/7"}).encode(),
    "truncated": VALID_PROFILE_TEXT.encode()[: len(VALID_PROFILE_TEXT) // 2],
}
SPECIAL_PATHS = ("directory", "fifo", "missing")


def bad_path(folder: Path, case: str) -> Path:
    path = folder / f"{case}.bad"
    if case == "directory":
        path.mkdir(exist_ok=True)
    elif case == "fifo":
        if not path.exists():
            os.mkfifo(path)
    elif case != "missing":
        path.write_bytes(BAD_CONTENTS[case])
    return path


def steps_list(path: Path) -> list[Any]:
    return list(read_step_logs([path]))


FILE_READERS: dict[str, Callable[[Path], Any]] = {
    "Profile.load": Profile.load,
    "load_profiles": load_profiles,
    "summarize_logs": lambda p: summarize_logs([p]),
    "read_step_logs": steps_list,
    "load_recipe": lambda p: load_recipe(str(p)),
    "budget file": lambda p: load_budget_file(str(p)),
}
# Readers whose garbage is skipped line by line: no error, nothing parsed.
SKIPPING = {"read_step_logs"}


@pytest.fixture(scope="module", name="scratch")
def fuzz_scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`scratch`: a folder for the files a fuzz module writes (module-scoped: hypothesis
    refuses function-scoped fixtures such as tmp_path)."""
    return tmp_path_factory.mktemp("fuzz")
