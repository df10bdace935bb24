"""Redaction of secret-looking command-line values before they reach a profile."""

from __future__ import annotations

import re
from collections.abc import Sequence

REDACTED = "<redacted>"
_SECRET_WORDS = (
    r"(api[-_]?key|token|secret|passw(or)?d|credential|auth|private[-_]?key|access[-_]?key)"
)
_SECRET_FLAG = re.compile(rf"^--?[\w.-]*{_SECRET_WORDS}[\w.-]*$", re.IGNORECASE)
_SECRET_FLAG_VALUE = re.compile(rf"^(--?[\w.-]*{_SECRET_WORDS}[\w.-]*)=.*$", re.IGNORECASE)
_SECRET_ASSIGNMENT = re.compile(
    r"^([A-Za-z_][A-Za-z0-9_]*(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD))=.*$", re.IGNORECASE
)


def redact_cmdline(args: Sequence[str]) -> tuple[str, ...]:
    """`--api-key X`, `--token=X` and `FOO_KEY=X` keep their names and lose their values."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag_value = _SECRET_FLAG_VALUE.match(arg)
        assignment = _SECRET_ASSIGNMENT.match(arg)
        if flag_value:
            out.append(f"{flag_value.group(1)}={REDACTED}")
        elif assignment:
            out.append(f"{assignment.group(1)}={REDACTED}")
        elif _SECRET_FLAG.match(arg):
            out.append(arg)
            hide_next = True
        else:
            out.append(arg)
    return tuple(out)


_WORDS_AND_SPACES = re.compile(r"(\s+)")


def redact_line(text: str) -> str:
    """A line of a job's output or log with the same rules applied to its words (`--token X`,
    `api_key=X`, `HF_TOKEN=X`), whitespace kept as it was."""
    parts = _WORDS_AND_SPACES.split(text)
    words = redact_cmdline(parts[0::2])
    parts[0::2] = words
    return "".join(parts)
