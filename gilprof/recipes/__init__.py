"""Recipe files (TOML) -> validated, frozen settings for one serving stack.

A recipe says how to find the process worth sampling (rank, role, command line, ancestors),
how to sample it, which functions are known GIL hot spots there (and why), where the
iteration log lives, and which budgets a perf gate should hold it to. Recipes are data:
values are checked for type and range, regular expressions are compiled to reject bad
ones, and nothing in a recipe is imported, evaluated or run.

Built-in recipes ship inside the package (`gilprof/recipes_data`, a link to the repository's
`recipes/` folder); a recipe can also be any `.toml` file the user points at.
"""

from gilprof.recipes.loader import (
    builtin_names,
    list_recipes,
    load_budget_file,
    load_recipe,
    parse_gate_budgets,
    parse_recipe,
)
from gilprof.recipes.model import Recipe, TargetSpec, WatchedFunction

__all__ = [
    "Recipe",
    "TargetSpec",
    "WatchedFunction",
    "builtin_names",
    "list_recipes",
    "load_budget_file",
    "load_recipe",
    "parse_gate_budgets",
    "parse_recipe",
]
