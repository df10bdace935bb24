"""compare: the loop's step split by class (gilprof.analysis.blocking.step_parts), before and
after, in ms per step: where a change moved the loop's time (host work, each wait class)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table

from gilprof.analysis.blocking import step_parts
from gilprof.analysis.verdict import Verdict

TITLE = "Loop step by class (ms per step)"


@dataclass(frozen=True, slots=True)
class PartChange:
    key: str
    words: str
    before_ms: float | None  # None: that side has no split (no verdict, or gil mode)
    after_ms: float | None

    @property
    def change_ms(self) -> float | None:
        if self.before_ms is None or self.after_ms is None:
            return None
        return self.after_ms - self.before_ms

    def to_json(self) -> dict[str, object]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        return {
            "part": self.key,
            "words": self.words,
            "before_ms": r(self.before_ms),
            "after_ms": r(self.after_ms),
            "change_ms": r(self.change_ms),
        }


def part_changes(before: Verdict | None, after: Verdict | None) -> tuple[PartChange, ...]:
    """Every part either side shows, largest on either side first; a part one side shows and
    the other does not is 0 ms there (below the split's threshold), not missing."""
    sides = [{p.key: p for p in step_parts(v)} if v is not None else None for v in (before, after)]
    if not any(sides):
        return ()
    keys = list(dict.fromkeys(k for side in sides if side for k in side))
    out = []
    for key in keys:
        parts = [side.get(key) if side is not None else None for side in sides]
        words = next(p.words for p in parts if p is not None)
        ms = [
            None if side is None or not side else (part.ms if part else 0.0)
            for side, part in zip(sides, parts, strict=True)
        ]
        out.append(PartChange(key, words, ms[0], ms[1]))
    out.sort(key=lambda c: -max(c.before_ms or 0.0, c.after_ms or 0.0))
    return tuple(out)


def _ms(v: float | None, sign: bool = False) -> str:
    return "n/a" if v is None else (f"{v:+.1f}" if sign else f"{v:.1f}")


def table(changes: tuple[PartChange, ...]) -> Table | None:
    if not changes:
        return None
    out = Table(title=TITLE, title_justify="left")
    for name in ("part", "before", "after", "change"):
        out.add_column(name, justify="left" if name == "part" else "right")
    for c in changes:
        out.add_row(c.words, _ms(c.before_ms), _ms(c.after_ms), _ms(c.change_ms, sign=True))
    return out


def markdown(changes: tuple[PartChange, ...]) -> list[str]:
    if not changes:
        return []
    lines = [f"**{TITLE}**", "", "| part | before | after | change |", "|---|---:|---:|---:|"]
    lines += [
        f"| {c.words} | {_ms(c.before_ms)} | {_ms(c.after_ms)} | {_ms(c.change_ms, sign=True)} |"
        for c in changes
    ]
    return [*lines, ""]
