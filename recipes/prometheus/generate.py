"""Write gilprof-rules.yml beside this file from budgets.toml (the budgets `gilprof gate`
reads): `python recipes/prometheus/generate.py [BUDGETS] [OUT]`."""

from __future__ import annotations

import sys
from pathlib import Path

from gilprof.renderers.alert_rules import rules_of_file

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    budgets = Path(argv[0]) if argv else HERE / "budgets.toml"
    out = Path(argv[1]) if len(argv) > 1 else HERE / "gilprof-rules.yml"
    out.write_text(rules_of_file(str(budgets), "recipes/prometheus/" + budgets.name))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
