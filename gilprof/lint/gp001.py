"""GP001: the sender unpickles what it just pickled, a deep copy of the payload per call."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence

from gilprof.lint.flow import Flow
from gilprof.lint.model import RawFinding
from gilprof.lint.syntax import FUNCTION_NODES, Scope, short

_PICKLE_MODULES = frozenset({"pickle", "_pickle", "cPickle", "pickle5", "cloudpickle", "dill"})
_PICKLE_FUNCTIONS = frozenset({"dumps", "loads", "load"})
# Calls whose result carries the bytes of their first argument (views, copies, file wrappers).
_BYTES_PASSTHROUGH = frozenset({"memoryview", "bytes", "bytearray", "BytesIO"})
_VIEW_METHODS = frozenset({"tobytes", "toreadonly", "cast", "getvalue", "getbuffer"})


class PickleNames:
    """Which names mean a pickle module, or its dumps/loads, in one source file."""

    def __init__(self, nodes: Iterable[ast.AST]) -> None:
        self.modules = set(_PICKLE_MODULES)
        self.functions: dict[str, str] = {}
        # Functions (and self./cls. methods) of this module that return pickled bytes.
        self.helpers: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in _PICKLE_MODULES and alias.asname:
                        self.modules.add(alias.asname)
            elif isinstance(node, ast.ImportFrom):
                from_pickle = node.level == 0 and node.module in _PICKLE_MODULES
                for alias in node.names:
                    local = alias.asname or alias.name
                    if from_pickle and alias.name in _PICKLE_FUNCTIONS:
                        self.functions[local] = alias.name
                    elif alias.name == "pickle":  # e.g. `from mpi4py.MPI import pickle`
                        self.modules.add(local)

    def kind(self, func: ast.expr) -> str | None:
        """What calling `func` does: "dumps", "loads", "load", or None for anything else."""
        if isinstance(func, ast.Name):
            return "dumps" if func.id in self.helpers else self.functions.get(func.id)
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr in self.helpers and getattr(func.value, "id", None) in ("self", "cls"):
            return "dumps"
        if func.attr in _PICKLE_FUNCTIONS:
            base = func.value
            if isinstance(base, ast.Name) and base.id in self.modules:
                return func.attr
            if isinstance(base, ast.Attribute) and base.attr == "pickle":
                return func.attr
        return None


_Origins = dict[str, frozenset[ast.Call]]


class _RoundTripFlow(Flow[_Origins]):
    """May-analysis: which `dumps(...)` calls a name's bytes can come from."""

    def __init__(self, names: PickleNames, report: Callable[[RawFinding], None]) -> None:
        super().__init__()
        self.names = names
        self.report = report
        self.returns_pickled = False

    def returned(self, value: ast.expr, state: _Origins) -> None:
        self.returns_pickled = self.returns_pickled or bool(self.origins(value, state))

    def join(self, a: _Origins, b: _Origins) -> _Origins:
        merged = dict(a)
        for name, calls in b.items():
            merged[name] = merged.get(name, frozenset()) | calls
        return merged

    def origins(
        self, expr: ast.AST, state: _Origins, shadowed: frozenset[str] = frozenset()
    ) -> frozenset[ast.Call]:
        while True:
            if isinstance(expr, ast.Name):
                return frozenset() if expr.id in shadowed else state.get(expr.id, frozenset())
            if isinstance(expr, (ast.Subscript, ast.NamedExpr)):
                expr = expr.value
                continue
            if isinstance(expr, (ast.IfExp, ast.BoolOp)):
                options = [expr.body, expr.orelse] if isinstance(expr, ast.IfExp) else expr.values
                found: frozenset[ast.Call] = frozenset()
                for option in options:
                    found |= self.origins(option, state, shadowed)
                return found
            if not isinstance(expr, ast.Call):
                return frozenset()
            if self.names.kind(expr.func) == "dumps":
                return frozenset({expr})
            func = expr.func
            func_name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if func_name in _BYTES_PASSTHROUGH and expr.args:
                expr = expr.args[0]
            elif isinstance(func, ast.Attribute) and func.attr in _VIEW_METHODS:
                expr = func.value
            else:
                return frozenset()

    def bind(self, name: str, value: ast.expr | None, state: _Origins) -> _Origins:
        found = self.origins(value, state) if value is not None else frozenset()
        if not found and name not in state:
            return state
        updated = dict(state)
        if found:
            updated[name] = found
        else:
            del updated[name]
        return updated

    def check(self, evaluated: Sequence[tuple[ast.AST, frozenset[str]]], state: _Origins) -> None:
        for node, shadowed in evaluated:
            if not (isinstance(node, ast.Call) and node.args):
                continue
            if self.names.kind(node.func) not in ("loads", "load"):
                continue
            sources = self.origins(node.args[0], state, shadowed)
            if not sources:
                continue
            dumps_call = min(sources, key=lambda call: (call.lineno, call.col_offset))
            self.report(
                RawFinding(
                    "GP001",
                    node.lineno,
                    node.col_offset,
                    f"`{short(node)}` unpickles what `{short(dumps_call.func)}` pickled at "
                    f"line {dumps_call.lineno}: a deep copy of the payload per call, of an "
                    "object the sender already holds",
                )
            )


def find_pickling_helpers(names: PickleNames, scopes: list[tuple[Scope, list[ast.Call]]]) -> None:
    """Add the module's functions that return pickled bytes (and helpers of those) to `names`."""
    for _ in range(3):
        known = len(names.helpers)
        for scope, calls in scopes:
            if not isinstance(scope, FUNCTION_NODES) or scope.name in names.helpers:
                continue
            if any(names.kind(call.func) == "dumps" for call in calls):
                flow = _RoundTripFlow(names, lambda finding: None)
                flow.muted = 1  # only what it returns is wanted
                flow.run(scope.body, {})
                if flow.returns_pickled:
                    names.helpers.add(scope.name)
        if len(names.helpers) == known:
            return


def round_trip_findings(
    names: PickleNames, scopes: list[tuple[Scope, list[ast.Call]]]
) -> list[RawFinding]:
    """GP001 in every scope (a finding may repeat: loops are re-run; the caller deduplicates)."""
    found: list[RawFinding] = []
    find_pickling_helpers(names, scopes)
    for scope, calls in scopes:
        if any(names.kind(call.func) == "dumps" for call in calls):
            _RoundTripFlow(names, found.append).run(scope.body, {})
    return found
