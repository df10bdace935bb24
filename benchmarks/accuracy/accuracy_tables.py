"""The accuracy benchmark's tables, printed from the result dict that `run.run` returns
(the same dict `--json` prints).

`run.py` puts this folder and benchmarks/ on sys.path before importing this module.
"""

from __future__ import annotations

from typing import Any

import _common
from accuracy_compare import MAIN_RATE


def pts(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def print_report(result: dict[str, Any]) -> None:
    m = result["machine"]
    print(
        f"gilprof accuracy: {m['cpus']} cores, runner Python {m['python']}, target Python "
        f"{result['target_python']}; load average at start {m['load_average']}"
    )
    # What the profile recorded of the sampler, and what it told the user about accuracy:
    # the figures below hold for that scheduling only.
    seen: dict[tuple[str, str], set[str]] = {}
    told: dict[str, None] = {}
    for o in result["main"]:
        where = (_scenario(o["config"]), o["config"]["mode"])
        seen.setdefault(where, set()).add(o.get("priority") or "?")
        told.update(dict.fromkeys(o.get("messages") or ()))
    for (scenario, mode), priorities in seen.items():
        print(f"sampler scheduling, {scenario} {mode}: {', '.join(sorted(priorities))}")
    for message in told:
        print(f"profile message: {message}")
    rows = []
    for o in result["main"]:
        c = o["config"]
        for r in o["rows"]:
            if r["metric"] in ("utilization", "blame"):
                continue
            band = (
                pts(r["truth_lo"])
                if abs(r["truth_hi"] - r["truth_lo"]) < 5e-4
                else f"{pts(r['truth_lo'])}-{pts(r['truth_hi'])}"
            )
            rows.append(
                [
                    _scenario(c),
                    c["workload"],
                    c["mode"],
                    r["subject"],
                    r["metric"],
                    band,
                    pts(r["measured"]),
                    pts(r["error"]),
                    pts(r["se"]),
                    f"{o['load_before']:.1f}/{o['load_after']:.1f}",
                ]
            )
    first = result["main"][0]["config"] if result["main"] else {"rate": MAIN_RATE, "seconds": 0}
    _common.print_table(
        f"Shares (points of wall time) at {first['rate']} Hz over {first['seconds']:g} s",
        [
            "scenario",
            "workload",
            "mode",
            "subject",
            "metric",
            "truth",
            "gilprof",
            "|err|",
            "SE",
            "load 1m",
        ],
        rows,
        notes=[
            "truth: from timestamps inside the target, a band lo-hi where GIL hand-offs could "
            "belong to either side; |err|: distance from gilprof to the band; SE: binomial "
            "sampling error; load 1m: before/after the run (the machine is shared); states "
            "mode: truth from uprobes and the scheduler (exact; a wait/native band is a "
            "waiter runnable off a CPU in take_gil's own code)"
        ],
    )
    blame_rows = []
    for o in result["main"]:
        for r in o["rows"]:
            if r["metric"] == "blame":
                waiter = r["subject"].split(" <- ")[0]
                blame_rows.append(
                    [
                        o["config"]["workload"],
                        r["subject"],
                        o["top_holder"].get(waiter, "-"),
                        f"{pts(r['truth_lo'])}-{pts(r['truth_hi'])}",
                        pts(r["measured"]),
                        pts(r["error"]),
                    ]
                )
    _common.print_table(
        "Blame matrix (contention, states modes): while waiter waits, holder holds",
        ["workload", "waiter <- holder", "top holder named", "truth", "gilprof", "|err|"],
        blame_rows,
    )
    summary_rows = [
        [
            v["scenario"],
            v["mode"],
            v["metric"],
            pts(v["max"]),
            v["worst"],
            pts(v["mean"]),
            str(v["n"]),
            pts(v["band"]),
            pts(v["target"]),
            v["met"] or "-",
            "-" if v["load"] is None else f"{v['load']:.1f}",
        ]
        for v in result["summary"].values()
    ]
    _common.print_table(
        "Absolute error by scenario/mode/metric (points of wall time)",
        [
            "scenario",
            "mode",
            "metric",
            "max",
            "worst subject",
            "mean",
            "n",
            "mean band",
            "target",
            "met",
            "load",
        ],
        summary_rows,
        notes=[
            "met: yes = every row within the target of its truth band; NO = "
            "one is not; unclear = all within, but some truth band is wider "
            "than the target (hand-offs under load), so a miss could hide"
        ],
    )
    for key, title in (("seconds", "duration (s)"), ("rate", "rate (Hz)")):
        sweep = [
            [
                s["workload"],
                s["mode"],
                f"{s[key]:g}",
                str(s["runs"]),
                pts(s["mean_error"].get("held")),
                pts(s["mean_error"].get("wait")),
                pts(s["mean_error"].get("function")),
                pts(s["max_error"].get("held")),
                "-" if s["speed"] is None else f"{s['speed']:.2f}",
                f"{s['load']:.1f}",
            ]
            for s in result["sweeps"][key]
        ]
        _common.print_table(
            f"Error by {title}: mean |err| over threads/functions and runs",
            [
                "workload",
                "mode",
                title,
                "runs",
                "held",
                "wait",
                "function",
                "max held",
                "speed",
                "load",
            ],
            sweep,
            notes=[
                "speed: target iterations/s while sampled over unsampled (1.00 = no pause overhead)"
            ],
        )


def _scenario(config: dict[str, Any]) -> str:
    load = f"loaded ({config['hogs']} hogs)" if config.get("hogs") else "quiet"
    return load if config.get("realtime", True) else f"{load}, sampler not RT"
