"""`gilprof lint`: static detection of the seed's GIL-heavy anti-patterns, without importing code.

Rules (each finding names the reference fix that removes it):

- GP001: a sender `pickle.loads` the bytes it just `pickle.dumps`-ed: a deep copy per call.
- GP002: a copying getter (`input_token_ids`, ...) read more than once per item: in a sort key
  and again in the loop over the same items, or twice in one loop body (or one key).
- GP003: a length compared with a value just computed from it: a check that cannot fail.

GP001 and GP003 are data-flow rules in gilprof.lint_rules; GP002 is syntactic and lives here.
A `# gilprof: ignore[GP002]` comment suppresses that rule on its line, `# gilprof: ignore` all.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import itertools
import os
import re
import tokenize
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gilprof.lint_rules import (
    COMPREHENSIONS,
    FUNCTION_NODES,
    SCOPE_NODES,
    RawFinding,
    Scope,
    flow_findings,
    own_nodes,
    short,
)

SCHEMA = "gilprof.lint/1"
DEFAULT_GETTERS: tuple[str, ...] = (
    "input_token_ids",
    "get_tokens",
    "output_token_ids",
    "get_input_token_ids",
    "prompt_token_ids",
)


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    title: str
    fix: str


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "GP001",
            "RootDeserializesOwnPayload",
            "the sender unpickles its own serialization: a deep copy of the payload per call",
            "gilprof.reference.broadcast.safe_broadcast: return the original object on the root",
        ),
        Rule(
            "GP002",
            "RepeatedCopyingGetter",
            "a getter that copies on every access is read more than once per item",
            "gilprof.reference.adp_router.balance_requests_across_ranks: read the getter once "
            "per request and carry the length",
        ),
        Rule(
            "GP003",
            "ComparisonThatCannotFail",
            "a length is compared with a value just computed from it",
            "gilprof.reference.broadcast.safe_broadcast: drop the check, or compare against a "
            "size received from elsewhere",
        ),
    )
}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    col: int  # 1-based, in characters
    rule: str
    message: str

    @property
    def fix(self) -> str:
        return RULES[self.rule].fix

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "rule": self.rule,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class LintError:
    """A path that could not be read or parsed; the scan goes on without it."""

    path: str
    message: str
    line: int | None = None

    def location(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class LintResult:
    """Findings in source order per file; `files_scanned` counts files read and analysed."""

    findings: tuple[Finding, ...]
    files_scanned: int
    errors: tuple[LintError, ...] = ()

    @property
    def exit_code(self) -> int:
        """1 if anything was flagged; else 2 if some input was unreadable; else 0."""
        if self.findings:
            return 1
        return 2 if self.errors else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "findings": [f.to_dict() for f in self.findings],
            "files_scanned": self.files_scanned,
            "errors": [e.to_dict() for e in self.errors],
        }


# ---- GP002: a copying getter read more than once per item ---------------------------------

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


class _GetterRule:
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
        self._summaries[function] = summary
        return summary

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


# ---- Running the rules over sources and files ----------------------------------------------

_IGNORE = re.compile(r"#\s*gilprof:\s*ignore(?:\[(?P<rules>[^\]]*)\]|(?![\w\[-]))")


def suppressions(source: str) -> dict[int, frozenset[str] | None]:
    """Line -> rule ids ignored there (None: every rule), from `# gilprof: ignore[...]`."""
    try:
        readline = io.StringIO(source).readline
        comments = [
            (token.start[0], token.string)
            for token in tokenize.generate_tokens(readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        comments = list(enumerate(source.split("\n"), start=1))
    ignored: dict[int, frozenset[str] | None] = {}
    for line, text in comments:
        for match in _IGNORE.finditer(text):
            rules = match.group("rules")
            if rules is None or (line in ignored and ignored[line] is None):
                ignored[line] = None
                continue
            ids = frozenset(r.strip().upper() for r in rules.split(",") if r.strip())
            ignored[line] = (ignored.get(line) or frozenset()) | ids
    return ignored


def _character_column(lines: Sequence[str], line: int, col_offset: int) -> int:
    """1-based character column of an AST offset, which counts UTF-8 bytes."""
    if 1 <= line <= len(lines):
        return len(lines[line - 1].encode("utf-8")[:col_offset].decode("utf-8", "replace")) + 1
    return col_offset + 1


def lint_source(
    source: str, path: str = "<string>", getters: Iterable[str] = DEFAULT_GETTERS
) -> list[Finding]:
    """Findings in one source text, suppressions applied. Raises SyntaxError if it won't parse."""
    with warnings.catch_warnings():  # invalid escapes etc. in scanned code are not our output
        warnings.simplefilter("ignore")
        tree = ast.parse(source, filename=path)
    # Each rule needs a word that is rarely absent from code it could flag: skip it cheaply.
    raw = flow_findings(tree, round_trips="dumps" in source, dead_lengths="len(" in source)
    wanted = frozenset(g for g in getters if g in source)
    if wanted:
        raw += _GetterRule(tree, wanted).found
    ignored = suppressions(source) if "gilprof" in source else {}
    lines = source.split("\n")
    unique: dict[tuple[str, int, int], RawFinding] = {}
    for finding in raw:
        rules = ignored.get(finding.line, frozenset())
        if rules is None or finding.rule in rules:
            continue
        unique.setdefault((finding.rule, finding.line, finding.col_offset), finding)
    findings = [
        Finding(path, f.line, _character_column(lines, f.line, f.col_offset), f.rule, f.message)
        for f in unique.values()
    ]
    return sorted(findings, key=lambda f: (f.line, f.col, f.rule))


_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
_ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")  # a virtualenv's or a conda env's root


def _skipped(directory: Path) -> bool:
    if directory.name.startswith(".") or directory.name in _SKIPPED_DIRS:
        return True
    return any((directory / marker).exists() for marker in _ENVIRONMENT_MARKERS)


def iter_python_files(root: Path) -> Iterator[Path]:
    """`*.py` under `root`, sorted; hidden directories, caches and environments are skipped."""
    for current, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _skipped(Path(current, d)))
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(current, name)


def _lint_file(path: Path, getters: Sequence[str]) -> list[Finding] | LintError:
    shown = str(path)
    if not path.is_file():  # a FIFO or a device would block the read, or never end
        return LintError(shown, "not a regular file")
    try:
        source = importlib.util.decode_source(path.read_bytes())
    except OSError as exc:
        return LintError(shown, f"cannot read: {exc.strerror or exc}")
    except (UnicodeDecodeError, SyntaxError) as exc:
        return LintError(shown, f"cannot decode: {exc}")
    try:
        return lint_source(source, shown, getters)
    except SyntaxError as exc:
        return LintError(shown, f"syntax error: {exc.msg}", exc.lineno)
    except (ValueError, RecursionError, MemoryError) as exc:
        return LintError(shown, f"cannot parse: {type(exc).__name__}: {exc}")


def lint_paths(
    paths: Iterable[str | os.PathLike[str]], getters: Iterable[str] = DEFAULT_GETTERS
) -> LintResult:
    """Lint files and directory trees; unreadable or unparseable inputs become `errors`."""
    getter_names = tuple(getters)
    findings: list[Finding] = []
    errors: list[LintError] = []
    scanned = 0
    seen: set[str] = set()
    for given in paths:
        root = Path(given)
        if root.is_dir():
            files: Iterable[Path] = iter_python_files(root)
        elif root.exists():
            files = [root]
        else:
            errors.append(LintError(str(root), "no such file or directory"))
            continue
        for path in files:
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            outcome = _lint_file(path, getter_names)
            if isinstance(outcome, LintError):
                errors.append(outcome)
            else:
                scanned += 1
                findings.extend(outcome)
    return LintResult(tuple(findings), scanned, tuple(errors))
