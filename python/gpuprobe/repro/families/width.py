"""width family: one case of an index-width probe (``width_run.run_width``): an operation on
a tensor past 2^31 or 2^32 elements, one dimension past 2^31, or a launch-grid dimension past
2^16 (scaled down on a CPU device, as the probe does).

The script holds the case's own code, copied from gpuprobe: the case function (a decorated
function, a lambda or a closure: its source, the values it closes over and its defaults),
every helper and constant it reaches (the width package's ``cases``, ``grid``, ``scope``), the
probe's geometry and its ``Scope`` (seeded inputs, the slices across each boundary, the
checks). The oracle is the probe's: each slice of the big result against the same
operation on that slice alone in float64 on the device, and closed forms at sentinel
indices. The case's inputs come from a generator seeded for the case (``derive_seed(seed,
probe, "width", case)``), as the probe seeds each case.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import sys
import textwrap
import types
from typing import Any

from gpuprobe.repro.families.base import Case, NoRepro
from gpuprobe.repro.script import Recipe

_MODULES = ("width_scope", "width_run", "width_cases", "width_grid")
#: Names the script defines itself (its own Scope, the registration stub) or never needs.
_PROVIDED = {"Scope", "Geometry", "CaseRefused", "case", "REGISTRY", "run_width", "Case", "simulate", "ops_math", "torch"}
_BUILTINS = set(dir(builtins))
#: Plain data a constant may hold to be written as a literal.
_DATA = (int, float, str, bool, type(None), tuple, list, dict, frozenset)


@functools.cache
def _source() -> _Source:
    return _Source()


def _modules() -> dict[str, Any]:
    from gpuprobe.worker.probes.width import cases as width_cases
    from gpuprobe.worker.probes.width import grid as width_grid
    from gpuprobe.worker.probes.width import run as width_run
    from gpuprobe.worker.probes.width import scope as width_scope

    return {"width_scope": width_scope, "width_run": width_run, "width_cases": width_cases, "width_grid": width_grid}


def _is_data(value: Any) -> bool:
    if isinstance(value, (tuple, list, frozenset)):
        return all(_is_data(v) for v in value)
    if isinstance(value, dict):
        return all(_is_data(k) and _is_data(v) for k, v in value.items())
    return isinstance(value, _DATA)


class _Source:
    """The top-level definitions of the width modules, by name."""

    def __init__(self) -> None:
        self.modules = _modules()
        self.text: dict[str, str] = {}
        self.trees: dict[str, ast.Module] = {}
        #: name -> (module, statement) for functions and classes.
        self.defs: dict[str, tuple[str, ast.stmt]] = {}
        #: (module, line) -> the lambdas and functions that start there (a decorated
        #: function also under its first decorator's line).
        self.at_line: dict[tuple[str, int], list[ast.AST]] = {}
        for name, module in self.modules.items():
            text = inspect.getsource(module)
            self.text[name] = text
            tree = ast.parse(text)
            self.trees[name] = tree
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not _registers(node):
                    self.defs.setdefault(node.name, (name, node))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Lambda, ast.FunctionDef)):
                    lines = {node.lineno} | {d.lineno for d in getattr(node, "decorator_list", [])}
                    for line in lines:
                        self.at_line.setdefault((name, line), []).append(node)

    def segment(self, module: str, node: ast.AST) -> str:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        lines = self.text[module].splitlines()[start - 1 : node.end_lineno]
        return textwrap.dedent("\n".join(lines))

    def constant(self, name: str) -> Any:
        for module in self.modules.values():
            if name in vars(module):
                return vars(module)[name]
        raise KeyError(name)

    def has(self, name: str) -> bool:
        return any(name in vars(m) for m in self.modules.values())


def _registers(node: ast.AST) -> bool:
    """A function registered as a case by its decorator (``@case(...)``)."""
    return any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "case"
        for d in getattr(node, "decorator_list", [])
    )


@functools.lru_cache(maxsize=None)
def _names(text: str) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name))


def _module_of(code: types.CodeType, src: _Source) -> str:
    for name, module in src.modules.items():
        if getattr(module, "__file__", None) == code.co_filename:
            return name
    raise NoRepro(f"the width case is defined outside the width modules ({code.co_filename})")


def _function_source(fn: Any, src: _Source, prelude: list[str], depth: int = 0) -> str:
    """Source that defines ``fn`` as a top-level ``case_fn`` / lambda expression, with the
    values it closes over and the defaults it reads written before it into ``prelude``."""
    if depth > 4:
        raise NoRepro("the width case nests closures too deeply to write out")
    code = fn.__code__
    module = _module_of(code, src)
    params = list(code.co_varnames[: code.co_argcount])
    found: list[ast.AST] = []
    for node in src.at_line.get((module, code.co_firstlineno), []):
        if isinstance(node, ast.Lambda) and fn.__name__ == "<lambda>":
            if [a.arg for a in node.args.args] == params:
                found.append(node)
        elif isinstance(node, ast.FunctionDef) and node.name == fn.__name__:
            found.append(node)
    if len(found) != 1:
        raise NoRepro(f"cannot find the source of width case function {fn.__qualname__} unambiguously")
    node = found[0]
    # The values it closes over (loop variables, helpers built by a factory).
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        value = cell.cell_contents
        if callable(value) and hasattr(value, "__code__"):
            inner = _function_source(value, src, prelude, depth + 1)
            prelude.append(f"{name} = {inner}" if value.__name__ == "<lambda>" else inner.replace(
                f"def {value.__name__}(", f"def {name}(", 1))
        elif _is_data(value):
            prelude.append(f"{name} = {value!r}")
        else:
            raise NoRepro(f"the width case closes over a {type(value).__name__} ({name})")
    # Defaults whose expressions name the enclosing scope's variables (``backend=backend``).
    if isinstance(node, ast.FunctionDef):
        defaults = node.args.defaults
        for expr, value in zip(defaults, fn.__defaults__ or ()):
            if isinstance(expr, ast.Name) and not src.has(expr.id):
                prelude.append(f"{expr.id} = {value!r}")
        text = src.segment(module, node)
        # Drop the registration decorator: the script runs the one case directly.
        lines = [line for line in text.splitlines()]
        while lines and lines[0].startswith("@"):
            lines.pop(0)
            while lines and not lines[0].startswith("def "):
                lines.pop(0)
        return "\n".join(lines)
    return ast.get_source_segment(src.text[module], node) or ""


def _closure(texts: list[str], src: _Source) -> tuple[list[str], list[str]]:
    """(constant lines, definition sources) every text reaches, in dependency order."""
    wanted: list[str] = []
    seen: set[str] = set()
    work = sorted(frozenset().union(*(_names(t) for t in texts)))
    while work:
        name = work.pop()
        if name in seen or name in _PROVIDED or name in _BUILTINS or name in sys.modules:
            continue
        seen.add(name)
        if name in src.defs:
            module, node = src.defs[name]
            work.extend(sorted(_names(src.segment(module, node))))
            wanted.append(name)
        elif src.has(name):
            value = src.constant(name)
            if _is_data(value):
                wanted.append(name)
    constants = [f"{n} = {src.constant(n)!r}" for n in sorted(wanted) if n not in src.defs]
    order = {name: i for i, name in enumerate(src.defs)}
    defs = [src.segment(*src.defs[n]) for n in sorted((n for n in wanted if n in src.defs), key=order.__getitem__)]
    return constants, defs


#: The script's Scope: the probe's, less the worker (its context, its fault hooks).
_SCOPE_OP = '''    def op(self, method: str, dtype: str, fn: Callable[[], Any], *, direction: str = "forward") -> Any:
        """Runs the big operation under test and waits for it, so an asynchronous fault is
        raised here."""
        out = fn()
        self.sync()
        return out
'''


@functools.cache
def _scope_source() -> str:
    from gpuprobe.worker.probes.width import scope as width_scope

    text = inspect.getsource(width_scope.Scope)
    start = text.index("    def op(")
    end = text.index("    def grad(")
    text = text[:start] + _SCOPE_OP + "\n" + text[end:]
    return text


@functools.cache
def _class_source(name: str) -> str:
    from gpuprobe.worker.probes.width import scope as width_scope

    return inspect.getsource(getattr(width_scope, name))


def _run_width(case: Case) -> Recipe:
    from gpuprobe.worker.probes.width import run as width_run
    from gpuprobe.worker.probes.width import scope as width_scope

    group, kind = case.params["group"], case.params["kind"]
    if case.crash_or_hang:
        raise NoRepro("the observation of a width probe that crashed or hung does not name its case")
    ran = case.metrics.get("cases")
    failing = [r for r in ran if isinstance(r, dict) and r.get("violations")] if isinstance(ran, list) else []
    if not failing:
        raise NoRepro("the observation does not say which width case failed (no case with violations in 'cases')")
    name = str(failing[0].get("case"))
    chosen = next((c for c in width_run.cases_for(group, kind) if c.name == name), None)
    if chosen is None:
        raise NoRepro(f"this gpuprobe has no width case {name!r} of {group} at {kind}")
    src = _source()
    prelude: list[str] = []
    case_text = _function_source(chosen.run, src, prelude)
    if chosen.run.__name__ == "<lambda>":
        case_text = f"case_fn = {case_text}"
    else:
        case_text = case_text.replace(f"def {chosen.run.__name__}(", "def case_fn(", 1)
    constants, defs = _closure([case_text, *prelude, _scope_source(), _class_source("Geometry")], src)
    on_gpu = case.device_type != "cpu"
    geometry = width_scope.geometry(kind, on_gpu)
    seed = width_run.case_seed(case.seed, case.probe, name)
    import dataclasses

    geometry_src = _class_source("Geometry")
    body = "\n\n\n".join(
        [
            "import random\nfrom dataclasses import dataclass\nfrom typing import Any, Callable\n\n"
            f"#: The probe's boundary as run on this device type ({'GPU' if on_gpu else 'CPU: scaled down'}).\n"
            f"GEOMETRY = {dataclasses.astuple(geometry)!r}\n"
            f"#: The case (width_cases / width_grid) and the seed of its inputs.\n"
            f"CASES = [{{'case': {name!r}, 'group': {group!r}, 'kind': {kind!r}, 'seed': {seed!r}}}]\n"
            + "\n".join(constants),
            "# Copied from gpuprobe (gpuprobe/worker/probes/width/scope.py): the geometry of a boundary\n"
            "# and the scope a case runs in.\n" + geometry_src.rstrip(),
            _class_source("CaseRefused").rstrip(),
            _scope_source().rstrip(),
            "# Copied from gpuprobe (width/cases.py, width/grid.py): what the case calls.\n"
            + "\n\n\n".join(d.rstrip() for d in defs),
            "# The case itself.\n" + "\n".join(prelude + [case_text]).rstrip(),
            _SCRIPT_TAIL.rstrip(),
        ]
    )
    return Recipe(
        summary=(
            f"The width case {name} of {group} at boundary {kind} ({_describe(geometry)}): the operation on the big "
            "tensor, each slice across and past the boundary checked against the same operation on that slice alone "
            "in float64 on the device, and closed forms at sentinel indices."
        ),
        reference="the same operation on each slice alone, in float64 on the device; closed forms at sentinel indices",
        tolerance="per element |found - ref| <= the dtype's tolerance x the case's scale (width.scope.TOLERANCE)",
        what=f"the {name} result is wrong past the index-width boundary",
        helpers="",
        body=body,
    )


def _describe(g: Any) -> str:
    from gpuprobe.worker.probes.width import run as width_run

    return width_run._describe(g)


_SCRIPT_TAIL = '''\
class _Ctx:
    """What the probe's Scope reads of the worker's context."""

    def __init__(self, device):
        self.torch, self.device = torch, device
        self.is_gpu = torch.device(device).type != "cpu"


def case_label(case):
    return f"{case['group']} case {case['case']} at {case['kind']} ({GEOMETRY[2]}-element rows, boundary 2^{GEOMETRY[1]})"


def build(case, device):
    scope = Scope(_Ctx(device), Geometry(*GEOMETRY), case["seed"])
    scope.case = case["case"]
    return {"scope": scope}


def run_case(case, inputs, device):
    """The case: the operation under test and the probe's checks of its result."""
    scope = inputs["scope"]
    try:
        case_fn(scope)
    except CaseRefused as exc:
        print(f"  refused: {exc}")
    except Exception as exc:  # noqa: BLE001 - the probe reports it as the case's finding
        if "out of memory" in str(exc).lower():
            print(f"CANNOT RUN: out of memory: {str(exc).splitlines()[0][:200]}")
            sys.exit(2)
        scope.truth("the operation runs", False, f"faulted: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    return scope


def check(case, inputs, scope):
    """The probe's verdict: no check of the case was violated."""
    print(f"  {scope.checked} elements and facts checked, {scope.case_violations} violated")
    for example in scope.examples:
        print(f"  {example}")
    return scope.case_violations == 0
'''

RECIPES = {"gpuprobe.worker.probes.width.run:run_width": _run_width}
