"""GP002: a getter that copies on every access, read more than once per item.

In a sort key and again in the loop over the same items, or twice in one loop body (or one
key). A call to a function of the same module that reads a getter on one of its parameters
counts as a read on the argument. Which names are copying getters is decided by
gilprof.lint.getters.
"""

from __future__ import annotations

import ast
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gilprof.lint.model import RawFinding
from gilprof.lint.syntax import (
    COMPREHENSIONS,
    FUNCTION_NODES,
    SCOPE_NODES,
    Scope,
    own_nodes,
    short,
)

# Calls that take a `key=` and the index of the iterable they order (min/max: only one iterable).
_KEYED_CALLS = {"sorted": 0, "min": 0, "max": 0, "groupby": 0, "nlargest": 1, "nsmallest": 1}
_ITEM = "<item>"
_Position = tuple[int, int]


@dataclass(frozen=True)
class _Read:
    """`base{path}.{getter}` is read at `node`: directly, or inside a function `node` calls."""

    node: ast.expr
    base: ast.expr
    getter: str
    path: str = ""

    @property
    def position(self) -> _Position:
        return (self.node.lineno, self.node.col_offset)


@dataclass
class _Body:
    """Code that runs once per item: a loop body or a sort key, with its item variable."""

    kind: str  # "loop" or "key"
    line: int
    item: str | None
    iterable: ast.expr | None
    roots: list[ast.AST]


def _getter_reads(nodes: Iterable[ast.AST], getters: frozenset[str]) -> list[_Read]:
    reads = []
    for node in nodes:
        if isinstance(node, ast.Attribute) and node.attr in getters:
            if isinstance(node.ctx, ast.Load):
                reads.append(_Read(node, node.value, node.attr))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in getters
        ):
            reads.append(_Read(node, node.args[0], str(node.args[1].value)))
    return reads


def _canonical(
    expr: ast.expr, item: str | None, aliases: dict[str, ast.expr], depth: int = 0
) -> str | None:
    """`expr` as text with the item variable (and one-time aliases of it) abstracted away."""
    if isinstance(expr, ast.Name):
        if expr.id == item:
            return _ITEM
        if expr.id in aliases and depth < 4:
            return _canonical(aliases[expr.id], item, aliases, depth + 1)
        return expr.id
    if isinstance(expr, ast.Constant):
        return repr(expr.value)
    if isinstance(expr, ast.Attribute):
        inner = _canonical(expr.value, item, aliases, depth)
        return None if inner is None else f"{inner}.{expr.attr}"
    if isinstance(expr, ast.Subscript):
        inner = _canonical(expr.value, item, aliases, depth)
        index = _canonical(expr.slice, item, aliases, depth)
        return None if inner is None or index is None else f"{inner}[{index}]"
    return None  # a call or an operator may give a different object each time


def _aliases(roots: Iterable[ast.AST], item: str | None) -> dict[str, ast.expr]:
    """Names bound once, to a plain lookup such as `req = item.request`, in `roots`."""
    nodes = list(own_nodes(roots, into_lambdas=False))
    stores = Counter(
        n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    )
    aliases: dict[str, ast.expr] = {}
    for node in nodes:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id != item
            and stores[node.targets[0].id] == 1
            and isinstance(node.value, (ast.Name, ast.Attribute, ast.Subscript))
        ):
            aliases[node.targets[0].id] = node.value
    return aliases


def _loop_item(target: ast.expr, iterable: ast.expr) -> tuple[str | None, ast.expr]:
    if isinstance(target, ast.Name):
        return target.id, iterable
    if (
        isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and isinstance(target.elts[1], ast.Name)
        and isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id == "enumerate"
        and iterable.args
    ):
        return target.elts[1].id, iterable.args[0]
    return None, iterable


def _loops(scope: Scope) -> Iterator[_Body]:
    for node in own_nodes(scope.body, into_lambdas=False):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            item, iterable = _loop_item(node.target, node.iter)
            yield _Body("loop", node.lineno, item, iterable, list(node.body))
        elif isinstance(node, ast.While):
            yield _Body("loop", node.lineno, None, None, [node.test, *node.body])
        elif isinstance(node, COMPREHENSIONS):
            results = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for index, generator in enumerate(node.generators):
                roots: list[ast.AST] = list(generator.ifs)
                for later in node.generators[index + 1 :]:
                    roots.extend([later.iter, *later.ifs])
                item, iterable = _loop_item(generator.target, generator.iter)
                yield _Body("loop", node.lineno, item, iterable, [*roots, *results])


def _exclusive_slots(parent: ast.AST, a: tuple[str, int], b: tuple[str, int]) -> bool:
    (field_a, index_a), (field_b, index_b) = a, b
    if isinstance(parent, (ast.If, ast.IfExp)):
        return {field_a, field_b} == {"body", "orelse"}
    if isinstance(parent, ast.Match):
        return field_a == field_b == "cases" and index_a != index_b
    if isinstance(parent, ast.Try):
        both_handlers = field_a == field_b == "handlers" and index_a != index_b
        return both_handlers or {field_a, field_b} == {"handlers", "orelse"}
    return False


_Function = ast.FunctionDef | ast.AsyncFunctionDef
_Chain = tuple[Scope, ...]  # enclosing scopes, outermost first


class GetterRule:
    """GP002 over one module: sort keys paired with loops, and reads repeated within a body.

    A call to a function of the same module that reads a getter on one of its parameters
    counts as a read on the argument, so `key=count_tokens` plus `count_tokens(item)` in the
    loop is two reads per item.
    """

    def __init__(self, tree: ast.Module, getters: frozenset[str]) -> None:
        self.getters = getters
        self.found: list[RawFinding] = []
        self.tree = tree
        self._parents: dict[ast.AST, tuple[ast.AST, str, int]] = {}
        self._functions: dict[Scope, dict[str, _Function]] = {}
        self._chains: dict[Scope, _Chain] = {}
        self._summaries: dict[_Function, list[tuple[int, str, str]]] = {}
        stack: list[tuple[Scope, _Chain]] = [(tree, ())]
        while stack:
            scope, chain = stack.pop()
            self._chains[scope] = chain
            nested = [n for n in own_nodes(scope.body) if isinstance(n, SCOPE_NODES)]
            stack.extend((n, (*chain, scope)) for n in nested)
        for scope, chain in self._chains.items():
            self._scope(scope, chain)

    def _functions_in(self, scope: Scope) -> dict[str, _Function]:
        if scope not in self._functions:
            self._functions[scope] = {
                n.name: n for n in own_nodes(scope.body) if isinstance(n, FUNCTION_NODES)
            }
        return self._functions[scope]

    def _resolve(self, func: ast.expr, scope: Scope, chain: _Chain) -> tuple[_Function, int] | None:
        """The module's function that `func` names, and how many leading params it binds."""
        if isinstance(func, ast.Name):
            for candidate in (scope, *reversed(chain)):
                function = self._functions_in(candidate).get(func.id)
                if function is not None:
                    return function, 0
        elif isinstance(func, ast.Attribute) and getattr(func.value, "id", None) in ("self", "cls"):
            owner = next((s for s in reversed(chain) if isinstance(s, ast.ClassDef)), None)
            method = self._functions_in(owner).get(func.attr) if owner else None
            if method is not None:
                static = any(
                    getattr(d, "id", None) == "staticmethod" for d in method.decorator_list
                )
                return method, 0 if static else 1
        return None

    def _summary(self, function: _Function, bound: int) -> list[tuple[int, str, str]]:
        """(parameter index, path, getter) for each getter `function` reads on a parameter."""
        if function in self._summaries:
            return self._summaries[function]
        self._summaries[function] = []  # a recursive call reads nothing more
        params = [*function.args.posonlyargs, *function.args.args][bound:]
        summary = []
        for index, param in enumerate(params):
            body = _Body("key", function.lineno, param.arg, None, list(function.body))
            for text, read in self._per_item_reads(body, function):
                suffix = f".{read.getter}"
                if text.startswith(_ITEM) and text.endswith(suffix):
                    summary.append((index, text[len(_ITEM) : -len(suffix)], read.getter))
        self._summaries[function] = list(dict.fromkeys(summary))
        return self._summaries[function]

    def _key_body(self, key: ast.expr, scope: Scope, chain: _Chain) -> _Body | None:
        if isinstance(key, ast.Lambda):
            params = [*key.args.posonlyargs, *key.args.args]
            return _Body("key", key.lineno, params[0].arg, None, [key.body]) if params else None
        resolved = self._resolve(key, scope, chain)
        if resolved is None:
            return None
        function, bound = resolved
        params = [*function.args.posonlyargs, *function.args.args][bound:]
        if not params:
            return None
        return _Body("key", function.lineno, params[0].arg, None, list(function.body))

    def _scope(self, scope: Scope, chain: _Chain) -> None:
        assigned_to: dict[ast.AST, str] = {}
        # (sort call, texts naming the list it orders or its result, that list, key body)
        sorts: list[tuple[ast.Call, set[str], ast.expr, _Body]] = []
        for node in own_nodes(scope.body, into_lambdas=False):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                assigned_to[node.value] = node.targets[0].id
            if not isinstance(node, ast.Call):
                continue
            key = next((k.value for k in node.keywords if k.arg == "key"), None)
            if key is None:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            iterable: ast.expr | None = None
            if name == "sort" and isinstance(func, ast.Attribute):
                iterable = func.value
            elif name in _KEYED_CALLS and len(node.args) > _KEYED_CALLS[name]:
                one_iterable = name not in ("min", "max") or len(node.args) == 1
                iterable = node.args[_KEYED_CALLS[name]] if one_iterable else None
            body = self._key_body(key, scope, chain) if iterable is not None else None
            if iterable is None or body is None:
                continue
            self._repeats(body, scope)
            sorts.append((node, {ast.unparse(iterable)}, iterable, body))
        for call, names, _, _ in sorts:
            if call in assigned_to:
                names.add(assigned_to[call])
        for loop in _loops(scope):
            self._repeats(loop, scope)
            if loop.item is None or loop.iterable is None:
                continue
            iterated = ast.unparse(loop.iterable)
            for call, names, ordered, key_body in sorts:
                if loop.iterable is call or iterated in names:
                    self._pair(key_body, loop, scope, short(ordered))

    def _per_item_reads(self, body: _Body, scope: Scope) -> list[tuple[str, _Read]]:
        """Each getter read in `body` keyed by what it reads, with the item abstracted away."""
        nodes = list(own_nodes(body.roots, into_lambdas=False))
        reads = _getter_reads(nodes, self.getters)
        chain = self._chains.get(scope, ())
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            resolved = self._resolve(node.func, scope, chain)
            if resolved is None:
                continue
            for index, path, getter in self._summary(*resolved):
                if index < len(node.args) and not isinstance(node.args[index], ast.Starred):
                    reads.append(_Read(node, node.args[index], getter, path))
        aliases = _aliases(body.roots, body.item)
        keyed = []
        for read in reads:
            text = _canonical(read.base, body.item, aliases)
            if text is not None:
                keyed.append((f"{text}{read.path}.{read.getter}", read))
        return keyed

    def _pair(self, key: _Body, loop: _Body, scope: Scope, items: str) -> None:
        in_key = {
            text: read for text, read in self._per_item_reads(key, scope) if text.startswith(_ITEM)
        }
        for text, read in self._per_item_reads(loop, scope):
            earlier = in_key.get(text)
            if earlier is None:
                continue
            self._report(
                read,
                f"for each item of `{items}` after the sort key read it at line "
                f"{earlier.node.lineno}",
            )

    def _repeats(self, body: _Body, scope: Scope) -> None:
        groups: dict[str, list[_Read]] = {}
        for text, read in self._per_item_reads(body, scope):
            groups.setdefault(text, []).append(read)
        stores = [
            ((n.lineno, n.col_offset), n.id)
            for n in own_nodes(body.roots, into_lambdas=False)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        ]
        where = "call of the sort key" if body.kind == "key" else "iteration of the loop"
        for reads in groups.values():
            reads.sort(key=lambda r: r.position)
            for first, later in itertools.pairwise(reads):
                if first.node is later.node:  # one call whose helper reads it: not twice here
                    continue
                names = {n.id for n in ast.walk(first.base) if isinstance(n, ast.Name)}
                rebound = any(
                    first.position < at <= later.position and name in names for at, name in stores
                )
                if not rebound and not self._exclusive(first.node, later.node):
                    self._report(
                        later,
                        f"in the same {where} at line {body.line} (first at line "
                        f"{first.node.lineno})",
                    )

    def _exclusive(self, a: ast.AST, b: ast.AST) -> bool:
        """True when `a` and `b` sit in branches of which at most one runs."""
        parents = self._parents
        if not parents:  # built on first need: most modules never get here
            for node in ast.walk(self.tree):
                for name, value in ast.iter_fields(node):
                    children = value if isinstance(value, list) else [value]
                    for index, child in enumerate(children):
                        if isinstance(child, ast.AST):
                            parents[child] = (node, name, index)
        slots_of_a: dict[ast.AST, tuple[str, int]] = {}
        node = a
        while node in parents:
            parent, name, index = parents[node]
            slots_of_a[parent] = (name, index)
            node = parent
        node = b
        while node in parents:
            parent, name, index = parents[node]
            if parent in slots_of_a:
                return _exclusive_slots(parent, slots_of_a[parent], (name, index))
            node = parent
        return False

    def _report(self, read: _Read, where: str) -> None:
        self.found.append(
            RawFinding(
                "GP002",
                read.node.lineno,
                read.node.col_offset,
                f"`{read.getter}` copies on every access; `{short(read.node)}` reads it "
                f"again {where}",
            )
        )
