"""A profile never carries the target's secrets: not from its environment, not from its
command line (redacted unless --keep-cmdline), against a real target and real py-spy."""

from __future__ import annotations

import gzip
import os
import sys
import time

import pytest

from gilprof.profile import Profile

from .conftest import run_cli, run_gilprof

pytestmark = pytest.mark.integration

CMDLINE_SECRET = "s3cr3t"
ENV_SECRET = "s3cr3t-in-env"
# Busy in a named function so that the profile holds real stacks; the secrets are only in
# argv and the environment, never in the code that py-spy reads names and paths from.
TARGET = (
    "import time\n"
    "def serve_requests():\n"
    "    deadline = time.time() + 30\n"
    "    while time.time() < deadline:\n"
    "        sum(i * i for i in range(2000))\n"
    "serve_requests()\n"
)


def _start_target(spawn):
    env = {
        **os.environ,
        "API_TOKEN": ENV_SECRET,
        "DB_PASSWORD": ENV_SECRET,
        "UNRELATED_SETTING": "plain-value-417",
        "PMI_RANK": "0",
        "PMI_SIZE": "1",
    }
    target = spawn(
        [
            sys.executable,
            "-c",
            TARGET,
            "--api-key",
            CMDLINE_SECRET,
            f"--token={CMDLINE_SECRET}",
            f"HF_TOKEN={CMDLINE_SECRET}",
        ],
        env=env,
    )
    time.sleep(0.8)
    assert target.poll() is None, target.stderr.read().decode()
    return target


def test_profile_holds_no_secret_from_environment_or_cmdline(tmp_path, spawn):
    target = _start_target(spawn)
    out = tmp_path / "p.json"
    run = run_gilprof(
        "attach", "--pid", str(target.pid), "-d", "1", "-q", "-o", str(out), timeout=90
    )
    assert run.returncode == 0, run.stderr
    raw = gzip.decompress(out.read_bytes())  # every record of the stream, as written
    assert CMDLINE_SECRET.encode() not in raw
    assert b"API_TOKEN" not in raw and b"DB_PASSWORD" not in raw
    assert b"UNRELATED_SETTING" not in raw and b"plain-value-417" not in raw

    profile = Profile.load(out)
    # The reads did happen: the rank came from the environment, the flags from argv, and
    # the stacks from the target's memory.
    assert profile.target.rank == 0 and profile.target.rank_source == "PMI_RANK"
    cmdline = list(profile.target.cmdline)
    assert cmdline[cmdline.index("--api-key") + 1] == "<redacted>"
    assert "--token=<redacted>" in cmdline and "HF_TOKEN=<redacted>" in cmdline
    assert any(frame.name.endswith("serve_requests") for frame in profile.frames)


def test_keep_cmdline_keeps_argv_but_never_the_environment(tmp_path, spawn):
    target = _start_target(spawn)
    out = tmp_path / "kept.json"
    result = run_cli(
        "attach", "--pid", str(target.pid), "-d", "1", "-q", "--keep-cmdline", "-o", out
    )
    assert result.exit_code == 0, result.output
    raw = gzip.decompress(out.read_bytes())
    assert ENV_SECRET.encode() not in raw and b"API_TOKEN" not in raw
    cmdline = list(Profile.load(out).target.cmdline)
    assert cmdline[cmdline.index("--api-key") + 1] == CMDLINE_SECRET
