"""What `gilprof watch` shows on stderr, and how it reads a step time off a log line."""

from __future__ import annotations

import click

from gilprof.sampling.flight import Trigger
from gilprof.steps.parse import StepParser

_steps = StepParser()


def host_step_ms(line: str) -> float | None:
    record = _steps.parse_line(line)
    return None if record is None else record.host_step_ms


class WatchConsole:
    """Status line (a terminal only, not with -q) and one `gilprof:` line per event."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self._drawn = False

    def _clear(self) -> None:
        if self._drawn:
            click.echo("\r\033[K", nl=False, err=True)
            self._drawn = False

    def status(self, text: str) -> None:
        if self.live:
            click.echo(f"\r\033[K{text}", nl=False, err=True)
            self._drawn = True

    def message(self, text: str) -> None:
        self._clear()
        click.echo(f"gilprof: {text}", err=True)

    def wrote(self, path: str, trigger: Trigger) -> None:
        self.message(f"wrote {path} (trigger {trigger.kind}: {trigger.detail})")
