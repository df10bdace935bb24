"""Options shared by several commands, defined once so that names and help agree everywhere."""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

import click
from click.core import ParameterSource

from gilprof.model import Mode
from gilprof.native_classes import LibraryRule
from gilprof.sampling.backends import BACKEND_NAMES, SamplerSettings
from gilprof.sampling.session import DEFAULT_WINDOW_S
from gilprof.steps import DEFAULT_SKIP_WARMUP

F = TypeVar("F", bound=Callable[..., Any])

MODE_HELP = (
    "states: the GIL holder's stacks plus every thread's state (holds, waits for the GIL, "
    "runs native code, idle), read without pausing the target; gil: only the GIL holder; "
    "wall: all threads, idle included; cpu: active threads; contention: the same states "
    "as `states` from native stacks (pauses the target per sample)."
)


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several options as one decorator; --help lists them in the order given."""

    def decorate(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return decorate


def number_option(
    *decls: str,
    type: click.ParamType,
    help: str,
    default: float | None = None,
    metavar: str | None = None,
) -> Callable[[F], F]:
    """A numeric option: its range checked by click, its default (if any) shown in --help."""
    return click.option(
        *decls,
        type=type,
        default=default,
        show_default=default is not None,
        metavar=metavar,
        help=help,
    )


def duration_option(help: str) -> Callable[[F], F]:
    return number_option(
        "-d", "--duration", type=click.FloatRange(min=0.1), metavar="SECONDS", help=help
    )


def wait_timeout_option(help: str) -> Callable[[F], F]:
    return number_option(
        "--wait-timeout", type=click.FloatRange(min=0.1), default=60.0, metavar="SECONDS", help=help
    )


keep_cmdline_option = click.option(
    "--keep-cmdline",
    is_flag=True,
    help="Keep secret-looking command-line values (redacted by default).",
)


def given(ctx: click.Context, name: str) -> bool:
    """True when the user set option `name` (on the command line or from the environment)."""
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)


@dataclass(frozen=True)
class SamplingChoice:
    """What -r/--rate, --mode, --native, --blocking and --window asked for, and which of them
    the user gave (a recipe may fill the others)."""

    mode: str
    rate: int
    native: bool
    blocking: bool
    window: float
    realtime: bool
    lines: bool
    given: frozenset[str]

    native_rules: tuple[LibraryRule, ...] = ()  # a recipe's [native] section

    def or_defaults(
        self,
        mode: str | None,
        rate: float | None,
        native: bool | None,
        native_rules: tuple[LibraryRule, ...] = (),
    ) -> SamplingChoice:
        """These choices, with `mode`, `rate` and `native` where the user gave none, and
        the recipe's native-library rules."""
        return replace(
            self,
            mode=self.mode if "mode" in self.given or not mode else mode,
            rate=self.rate if "rate" in self.given or not rate else int(rate),
            native=self.native if "native" in self.given or native is None else native,
            native_rules=native_rules,
        )

    @property
    def settings(self) -> SamplerSettings:
        settings = SamplerSettings.for_mode(Mode(self.mode), self.rate, self.native, self.blocking)
        return replace(
            settings, realtime=self.realtime, native_rules=self.native_rules, lines=self.lines
        )


def packed(into: str, make: type, *decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Options that the command receives as one object, `into=make(**their values)`; a
    `given` field of `make`, if it has one, gets the names of those the user set."""

    def probe() -> None: ...

    for decorator in decorators:
        decorator(probe)  # type: ignore[arg-type]
    names = [param.name for param in getattr(probe, "__click_params__", ()) if param.name]
    wants_given = "given" in {f.name for f in dataclasses.fields(make)}

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def with_object(*args: Any, **kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in names}
            if wants_given:
                ctx = click.get_current_context()
                values["given"] = frozenset(name for name in names if given(ctx, name))
            return func(*args, **{into: make(**values)}, **kwargs)

        return options(*decorators)(cast(F, with_object))

    return decorate


sampling_options = packed(
    "sampling",
    SamplingChoice,
    number_option(
        "-r", "--rate", type=click.IntRange(1, 10000), default=100, help="Samples per second."
    ),
    click.option(
        "--mode",
        type=click.Choice([m.value for m in Mode]),
        default="states",
        show_default=True,
        help=MODE_HELP,
    ),
    click.option(
        "--native",
        is_flag=True,
        help="Include native (C/C++) frames; implies --blocking (in states mode: contention).",
    ),
    click.option(
        "--blocking",
        is_flag=True,
        help="Pause the target at each sample (more exact, much slower targets).",
    ),
    number_option(
        "--window",
        type=click.FloatRange(min=0.2),
        default=DEFAULT_WINDOW_S,
        help="Seconds per sampling window (the unit of time for confidence intervals).",
    ),
    click.option(
        "--realtime/--no-realtime",
        default=True,
        show_default=True,
        help="Run the non-pausing samplers at SCHED_FIFO where permitted, so that they wake on "
        "time on a busy machine. --no-realtime costs the target less (on the 2-core example "
        "server 1.027x instead of 1.042x at 100 Hz) but reads GIL holds shorter than ~1 ms "
        "low when the cores are busy (docs/accuracy.md).",
    ),
    click.option(
        "--lines",
        is_flag=True,
        help="Default mode: also run py-spy each window for the line running in the GIL "
        "holder's stacks (`report --lines`, `--what-if FUNC:LINE`); without it the reader "
        "names functions only, at ~1.7 points of a core less.",
    ),
)
"""-r/--rate, --mode, --native, --blocking, --window, --realtime, --lines: how a sampler samples,
given to the command as `sampling: SamplingChoice`."""


@dataclass(frozen=True)
class StartChoice:
    """--start-after, --start-on, --start-on-log and --start-timeout as given (a recipe's
    [start] table fills in when none of the first three is)."""

    start_after: float | None
    start_on: str | None
    start_on_log: str | None
    start_timeout: float | None
    given: frozenset[str]

    @property
    def has_trigger(self) -> bool:
        return bool({"start_after", "start_on", "start_on_log"} & self.given)


start_options = packed(
    "start",
    StartChoice,
    number_option(
        "--start-after",
        type=click.FloatRange(min=0),
        metavar="SECONDS",
        help="Start sampling this many seconds after the target is found (with --start-on or "
        "--start-on-log: after the line).",
    ),
    click.option(
        "--start-on",
        metavar="REGEX",
        help="Launch mode: start sampling at the first line of the job's output (stdout or "
        "stderr, passed through unchanged) that matches, e.g. 'iter ='.",
    ),
    click.option(
        "--start-on-log",
        metavar="FILE:REGEX",
        help="Start sampling at the first new line of FILE (followed from its end; it may not "
        "exist yet) that matches, e.g. gen.log:'iter ='.",
    ),
    number_option(
        "--start-timeout",
        type=click.FloatRange(min=0.1),
        metavar="SECONDS",
        help="Give up (no profile, exit 3) when the start trigger has not fired after this "
        "long (default: wait while the job runs).",
    ),
)
"""--start-after, --start-on, --start-on-log, --start-timeout: when sampling starts, given to
the command as `start: StartChoice`."""


def format_option(
    kind: str, default: str, *, extra_kinds: tuple[str, ...] = ()
) -> Callable[[F], F]:
    """--format, its choices read from the renderer registry of `kind` (and `extra_kinds`)."""
    from gilprof.renderers import describe_formats

    def decorate(func: F) -> F:
        return click.option(
            "--format",
            "fmt",
            default=default,
            show_default=True,
            metavar="FORMAT",
            help=f"Output format: {describe_formats(kind, *extra_kinds)}.",
        )(func)

    return decorate


skip_warmup_option = number_option(
    "--skip-warmup",
    type=click.IntRange(min=0),
    default=DEFAULT_SKIP_WARMUP,
    metavar="N",
    help="Drop the first N iterations of each rank (warm-up, CUDA graph capture).",
)
"""--skip-warmup N, one default for every command that reads iteration logs."""


steps_rank_option = click.option(
    "--steps-rank",
    type=int,
    metavar="R",
    help="Rank in the iteration log (default: the profile's rank, else 0).",
)


watch_options = options(
    click.option(
        "--watch",
        multiple=True,
        metavar="FUNC",
        help="Also watch this function (repeatable); bare names match qualnames.",
    ),
    click.option(
        "--no-default-watch",
        is_flag=True,
        help="Do not watch safe_broadcast and _balance_requests_across_ranks.",
    ),
)
"""--watch FUNC (repeatable) and --no-default-watch."""


output_option = click.option(
    "-o",
    "--output",
    type=click.Path(),
    help="Write to this file (atomically) instead of stdout.",
)


wide_option = click.option(
    "--wide",
    is_flag=True,
    help="Every column in a terminal table (the markdown and html formats always have all).",
)


def top_option(default: int, what: str = "Function rows to show.") -> Callable[[F], F]:
    return number_option("--top", type=click.IntRange(min=1), default=default, help=what)


backend_option = click.option(
    "--backend",
    type=click.Choice(BACKEND_NAMES),
    default=BACKEND_NAMES[0],
    show_default=True,
    help="Sampler: py-spy (GIL state, native frames) or austin (a second opinion).",
)


match_option = click.option(
    "--match",
    metavar="REGEX",
    help="Only consider processes whose command line matches this regex.",
)


all_frames_option = click.option(
    "--all-frames",
    is_flag=True,
    help="Keep thread-bootstrap (Thread._bootstrap, Thread.run) and <module> frames.",
)


class LaunchCommand(click.Command):
    """A command ending in a command to launch (`attach`, `exec`: `ignore_unknown_options` and
    a nargs=-1 UNPROCESSED argument). Click would take a mistyped option for the first word of
    that command; here an unknown option before the launch command (before `--`, or before the
    first word that is not an option) is refused as click refuses it elsewhere, with the
    nearest option named. Words from the launch command's first word on are left untouched."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        self._refuse_unknown_options(ctx, args)
        return super().parse_args(ctx, args)

    def _refuse_unknown_options(self, ctx: click.Context, args: list[str]) -> None:
        takes_value: dict[str, bool] = {}
        for param in self.get_params(ctx):
            if isinstance(param, click.Option):
                for name in (*param.opts, *param.secondary_opts):
                    takes_value[name] = not (param.is_flag or param.count)
        words = iter(args)
        for word in words:
            if word == "--" or word == "-" or not word.startswith("-"):
                return  # the launch command starts here
            if word.startswith("--"):
                name, has_value, _ = word.partition("=")
                if name not in takes_value:
                    raise _no_such_option(name, takes_value, ctx)
                if takes_value[name] and not has_value:
                    next(words, None)
                continue
            for j, letter in enumerate(word[1:], start=1):  # -q, -d5, -qd 5
                name = "-" + letter
                if name not in takes_value:
                    raise _no_such_option(word if j == 1 else name, takes_value, ctx)
                if takes_value[name]:
                    if j == len(word) - 1:
                        next(words, None)
                    break


def _no_such_option(name: str, known: dict[str, bool], ctx: click.Context) -> click.NoSuchOption:
    candidates = [option for option in known if option.startswith("--")] or list(known)
    close = difflib.get_close_matches(name, candidates, n=1)
    return click.NoSuchOption(name, possibilities=close, ctx=ctx)


def rows_options(top: int, what: str = "Function rows to show.") -> Callable[[F], F]:
    """Which function rows a table shows, and how wide: --top N, --wide, --all-frames."""
    return options(top_option(top, what), wide_option, all_frames_option)
