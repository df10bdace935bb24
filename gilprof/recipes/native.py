"""A recipe's `[native]` section: which libraries' native time is a device wait, a peer wait
or host work, ahead of the built-in rules (gilprof.native_classes).

    [native]
    device = ["libmydriver.so*"]   # spins there until the device is done
    peers = ["libmycomm.so*"]      # a collective's progress loop
    host = ["libcudart.so*"]       # overrides a built-in rule
"""

from __future__ import annotations

import re
from typing import Any

from gilprof.native_classes import LibraryRule, NativeClass

NATIVE_KEYS = {"device": NativeClass.DEVICE, "peers": NativeClass.PEERS, "host": NativeClass.HOST}
LIBRARY_GLOB_RE = re.compile(r"^[A-Za-z0-9_.+*?\[\]-]+$")


def native_section(check: Any, raw: Any, source: str) -> tuple[LibraryRule, ...]:
    """The section's rules, each glob checked (`check` is the loader's checker)."""
    data = check.table(raw, "native", tuple(NATIVE_KEYS))
    rules = []
    for key, cls in NATIVE_KEYS.items():
        if key in data:
            for pattern in check.string_list(
                data[key], f"native.{key}", LIBRARY_GLOB_RE, "a library file name glob"
            ):
                rules.append(LibraryRule(pattern, cls, f"recipe {source}"))
    return tuple(rules)
