"""Copies a probe module's own definitions into a script, with everything they reach.

The training-path recipes (``graph``, ``optim``, ``train``) judge a rebuilt case with the
probe's own code: its input builders, its workloads and its judge. ``Copier`` reads the
source of the probe modules, and for the names a recipe asks for returns the source of
their top-level definitions (functions and classes as written; constants as the literal of
their current value), plus every top-level definition of those modules that the copied code
names, transitively. A module prefix the script does not have (``sweep_oracle.``) is
stripped, so a copied call reaches the copied definition. The script then needs neither
gpuprobe nor its modules, and the copy follows the probe when the probe changes.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
import symtable
import textwrap
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Iterable

from gpuprobe.repro import script
from gpuprobe.repro.families.base import NoRepro

#: Plain data a constant may hold to be written as a literal.
_DATA = (int, float, str, bool, type(None))
_BUILTINS = frozenset(dir(builtins))


def is_data(value: Any) -> bool:
    """Whether ``value`` is plain data whose ``repr`` is Python source for it."""
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(is_data(v) for v in value)
    if isinstance(value, dict):
        return all(is_data(k) and is_data(v) for k, v in value.items())
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return isinstance(value, _DATA)


@dataclass
class _Definition:
    module: int
    line: int
    name: str
    node: ast.stmt
    text: str
    constant: bool


class Copier:
    """The top-level definitions of ``modules`` (the first module that defines a name wins),
    ready to be copied by name."""

    def __init__(self, *modules: ModuleType, strip: Iterable[str] = (), provided: Iterable[str] = ()) -> None:
        self.modules = modules
        self.provided = set(provided)
        self._strip = re.compile(r"\b(?:" + "|".join(re.escape(s) for s in strip) + r")\.") if strip else None
        self.defs: dict[str, _Definition] = {}
        self._reads: dict[str, set[str]] = {}
        self._sources: dict[tuple[tuple[str, ...], str], str] = {}
        for index, module in enumerate(modules):
            source, tree = _parsed(module)
            lines = source.splitlines()
            for node in tree.body:
                for name in _bound_names(node):
                    if name in self.defs:
                        continue
                    constant = isinstance(node, (ast.Assign, ast.AnnAssign))
                    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
                    text = "\n".join(lines[start - 1 : node.end_lineno])
                    self.defs[name] = _Definition(index, start, name, node, textwrap.dedent(text), constant)

    def stripped(self, text: str) -> str:
        """``text`` without the module prefixes the script does not have."""
        return self._strip.sub("", text) if self._strip is not None else text

    def names_in(self, text: str) -> set[str]:
        """The global names ``text`` reads (a function's own locals and parameters are not,
        nor annotations: a script never evaluates them, ``from __future__ import
        annotations``) that a copied definition could provide."""
        if text in self._reads:
            return set(self._reads[text])
        tree = _WithoutAnnotations().visit(ast.parse(textwrap.dedent(self.stripped(text))))
        table = symtable.symtable(ast.unparse(ast.fix_missing_locations(tree)), "<copied>", "exec")
        found: set[str] = set()
        tables = [table]
        while tables:
            current = tables.pop()
            for symbol in current.get_symbols():
                if symbol.is_referenced() and symbol.is_global():
                    found.add(symbol.get_name())
            tables.extend(current.get_children())
        self._reads[text] = found - self.provided - _BUILTINS
        return set(self._reads[text])

    def _value(self, definition: _Definition) -> Any:
        return getattr(self.modules[definition.module], definition.name, None)

    def closure(self, roots: Iterable[str], extra_text: str = "") -> list[_Definition]:
        """The definitions of ``roots`` and of everything they (and ``extra_text``) name."""
        wanted: dict[str, _Definition] = {}
        queue = list(roots) + sorted(self.names_in(extra_text) if extra_text else ())
        while queue:
            name = queue.pop()
            if name in wanted or name in self.provided:
                continue
            definition = self.defs.get(name)
            if definition is None:
                if name in roots:
                    raise NoRepro(f"the probe's code no longer defines {name!r}; this repro generator does not match it")
                continue
            wanted[name] = definition
            if definition.constant and is_data(self._value(definition)):
                continue
            body = definition.text
            queue.extend(sorted(self.names_in(body) - set(wanted)))
        return sorted(wanted.values(), key=lambda d: (not d.constant, d.module, d.line))

    def source(self, roots: Iterable[str], extra_text: str = "") -> str:
        """The source of ``closure(roots)``: constants first (as literals where they are
        plain data), then functions and classes in the order their modules define them."""
        roots = list(roots)
        key = (tuple(roots), extra_text)
        if key in self._sources:
            return self._sources[key]
        parts = []
        for definition in self.closure(roots, extra_text):
            value = self._value(definition)
            if definition.constant and is_data(value):
                parts.append(f"{definition.name} = {value!r}")
            else:
                parts.append(self.stripped(definition.text))
        constants = [p for p in parts if "\n" not in p and re.match(r"\w+ = ", p)]
        others = [p for p in parts if p not in constants]
        self._sources[key] = "\n".join(constants) + ("\n\n\n" if constants and others else "") + "\n\n\n".join(others)
        return self._sources[key]


class _WithoutAnnotations(ast.NodeTransformer):
    """Removes annotations (an annotated assignment keeps its value)."""

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.returns = None
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.stmt:
        if node.value is None:
            return ast.Pass()
        return ast.Assign(targets=[node.target], value=self.visit(node.value))


@functools.lru_cache(maxsize=None)
def _parsed(module: ModuleType) -> tuple[str, ast.Module]:
    """A module's source and its syntax tree (read once)."""
    source = inspect.getsource(module)
    return source, ast.parse(source)


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [node.target.id]
    return []


def call_segment(module: ModuleType, assignment: str, first_arg: str) -> str:
    """The source of the call inside the top-level assignment to ``assignment`` whose first
    argument is the string ``first_arg`` (one entry of a table such as ``KERNELS``)."""
    source, tree = _parsed(module)
    for node in tree.body:
        if assignment in _bound_names(node):
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and call.args
                    and isinstance(call.args[0], ast.Constant)
                    and call.args[0].value == first_arg
                ):
                    lines = source.splitlines()[call.lineno - 1 : call.end_lineno]
                    lines[0] = lines[0][call.col_offset :]
                    if len(lines) == 1:
                        return lines[0][: call.end_col_offset - call.col_offset]
                    lines[-1] = lines[-1][: call.end_col_offset]
                    return lines[0] + "\n" + textwrap.dedent("\n".join(lines[1:]))
    raise NoRepro(f"the probe's table {assignment} has no entry {first_arg!r}")


@functools.lru_cache(maxsize=64)
def _annotation_names(code: str) -> frozenset[str]:
    """The names ``code``'s annotations mention that it neither defines nor imports."""
    tree = ast.parse(code)
    defined = {n for node in tree.body for n in _bound_names(node)}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
    mentioned: set[str] = set()
    for node in ast.walk(tree):
        annotations = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        for annotation in annotations:
            mentioned |= {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)}
    return frozenset(mentioned - defined - _BUILTINS)


@functools.lru_cache(maxsize=64)
def _defines(code: str) -> frozenset[str]:
    """The names ``code`` defines at its top level (functions, classes, assignments)."""
    found = re.findall(r"^(?:def|class)\s+(\w+)|^(\w+)(?:\s*:[^=\n]*)?\s*=(?!=)", code, re.M)
    return frozenset(name for pair in found for name in pair if name)


def annotation_stubs(code: str, body: str, known: Iterable[str]) -> str:
    """``NAME = Any`` for the names the copied ``code``'s annotations mention that neither it
    nor the recipe's ``body`` defines (type aliases of the probe module such as ``Batch``,
    whose definitions would need torch at import): annotations are never evaluated, the stubs
    only keep the names defined."""
    missing = sorted(_annotation_names(code) - _defines(body) - set(known))
    if not missing:
        return ""
    return "# Type names the copied annotations mention (annotations are never evaluated).\n" + " = ".join(missing) + " = Any"


#: The standard modules and names the probe modules' code uses, which a script imports
#: where its code uses them.
_MODULES = ("bisect", "contextlib", "copy", "math", "time", "warnings")
_NAMES = (("dataclasses", ("dataclass", "field")), ("typing", ("Any", "Callable", "Iterator")))


@functools.lru_cache(maxsize=64)
def _uses(code: str) -> frozenset[str]:
    """The modules and names of ``_MODULES`` / ``_NAMES`` that ``code`` uses."""
    used = {m for m in _MODULES if re.search(rf"\b{m}\.", code)}
    return frozenset(used | {n for _, names in _NAMES for n in names if re.search(rf"\b{n}\b", code)})


def imports(uses: set[str] | frozenset[str], header: str) -> str:
    """``header`` (a comment) and the import lines for ``uses``."""
    lines = [header.rstrip()] if header else []
    lines += [f"import {m}" for m in _MODULES if m in uses]
    for module, names in _NAMES:
        wanted = [n for n in names if n in uses]
        if wanted:
            lines.append(f"from {module} import {', '.join(wanted)}")
    return "\n".join(lines)


def helpers(header: str, code: str, body: str) -> str:
    """A script's helper section: ``header`` (a comment saying where the code comes from), the
    imports the copied ``code`` and the recipe's ``body`` use, stubs for the type names only
    their annotations mention, then ``code``."""
    clash = (_defines(body) | _defines(script.TEMPLATE)) & _defines(code)
    if clash:
        # The script would silently replace the probe's definition with its own.
        raise NoRepro(f"the probe's code defines {', '.join(sorted(clash))}, as the repro script does; the generator must rename it")
    stubs = annotation_stubs(code, body, known=("torch", "Any", "Callable", "Iterator"))
    uses = _uses(code) | _uses(body) | ({"Any"} if stubs else set())
    return imports(uses, header) + "\n\n" + (stubs + "\n\n\n" if stubs else "") + code
