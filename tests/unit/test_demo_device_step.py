"""The demo's known device step: the simulated device's --device-ms, read from its args."""

from __future__ import annotations

import pytest

from gilprof.cli.demo_run import SIMULATED_DEVICE_MS, simulated_device_ms
from gilprof.errors import UsageError


def test_the_demo_default_applies_without_a_server_arg():
    assert simulated_device_ms(()) == SIMULATED_DEVICE_MS
    assert simulated_device_ms(("--step-requests=8",)) == SIMULATED_DEVICE_MS


@pytest.mark.parametrize(
    "args, expected",
    [
        (("--device-ms=30",), 30.0),
        (("--device-ms", "7.5"), 7.5),
        (("--device-ms=30", "--device-ms=0"), 0.0),  # the last one wins, as argparse reads it
    ],
)
def test_the_last_device_ms_wins(args, expected):
    assert simulated_device_ms(args) == expected


def test_a_device_ms_that_is_not_a_number_is_a_usage_error():
    with pytest.raises(UsageError, match="--device-ms"):
        simulated_device_ms(("--device-ms=fast",))
