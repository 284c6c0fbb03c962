"""The probe package's layout: one package per family, registered in one place, modules that
import at their top and use each other's public names only.

Every family package has a docstring and its ``specs:specs`` in ``catalog.FAMILY_SPECS`` (and
nothing else is there); every probe's implementation (and helper starter) lives in its own
family's package and resolves. The source rules are checked on the syntax tree of every
module under ``gpuprobe/worker/probes``: no ``from m import _name`` (or ``m._name``) of
another gpuprobe module, and no import statement after the first top-level function or class
(a module that imports another at its end to make it register itself), ``if __name__ ==
"__main__"`` blocks excepted.
"""

from __future__ import annotations

import ast
import importlib

from conftest import PACKAGE_DIR

from gpuprobe.worker import catalog

PROBES_DIR = PACKAGE_DIR / "gpuprobe" / "worker" / "probes"
PROBES_PACKAGE = "gpuprobe.worker.probes"

def _modules() -> dict[str, ast.Module]:
    """Every module under the probe package by its dotted name below it (``sweep.run``)."""
    found = {}
    for path in sorted(PROBES_DIR.rglob("*.py")):
        name = ".".join(path.relative_to(PROBES_DIR).with_suffix("").parts)
        found[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return found


def _families() -> list[str]:
    return sorted(p.parent.name for p in PROBES_DIR.glob("*/specs.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)


def test_every_family_is_a_documented_package_registered_once() -> None:
    families = _families()
    assert len(families) >= 16, families
    for family in families:
        init = PROBES_DIR / family / "__init__.py"
        assert init.is_file(), family
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and doc.startswith(f"{family} family"), (family, doc)
    assert sorted(catalog.FAMILY_SPECS) == sorted(f"{PROBES_PACKAGE}.{f}.specs:specs" for f in families)
    assert len(set(catalog.FAMILY_SPECS)) == len(catalog.FAMILY_SPECS)
    # No module of the probe package lies outside a family but the shared ones.
    loose = {p.stem for p in PROBES_DIR.glob("*.py")}
    assert loose == {"__init__", "children", "precision"}, loose


def test_every_probe_is_implemented_in_its_own_family_and_resolves() -> None:
    modules: set[str] = set()
    for probe in catalog.all_probes().values():
        family = probe.id.split(".")[0]
        for path in filter(None, (probe.impl, probe.helpers)):
            assert path.startswith(f"{PROBES_PACKAGE}.{family}."), (probe.id, path)
            module, _, function = path.partition(":")
            modules.add(module)
            assert function, (probe.id, path)
    for module in modules:
        importlib.import_module(module)
    for probe in catalog.all_probes().values():
        assert callable(probe.resolve()), probe.id
        if probe.helpers:
            module, _, function = probe.helpers.partition(":")
            assert callable(getattr(importlib.import_module(module), function)), probe.id


def _private_uses(trees: dict[str, ast.Module]) -> set[tuple[str, str, str]]:
    """(module, the gpuprobe module it takes from, name) for every private name a module
    imports from another, or reads as an attribute of a gpuprobe module it imported."""
    found = set()
    for name, tree in trees.items():
        imported: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpuprobe"):
                for alias in node.names:
                    if _private(alias.name):
                        found.add((name, node.module, alias.name))
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("gpuprobe"):
                        imported[alias.asname or alias.name.split(".")[0]] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in imported
                and _private(node.attr)
            ):
                found.add((name, imported[node.value.id], node.attr))
    return found


def _late_imports(trees: dict[str, ast.Module]) -> list[str]:
    """Import statements at a module's top level after its first function or class (imports
    inside functions, the lazy imports of torch and the like, are not at the top level)."""
    late = []
    for name, tree in trees.items():
        defined = False
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined = True
                continue
            if not defined or _is_main_guard(node):
                continue
            stack: list[ast.AST] = [node]
            while stack:
                current = stack.pop()
                if isinstance(current, (ast.Import, ast.ImportFrom)):
                    late.append(f"{name}:{current.lineno}: {ast.unparse(current)}")
                elif not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    stack.extend(ast.iter_child_nodes(current))
    return late


def test_no_module_uses_another_modules_private_names() -> None:
    found = _private_uses(_modules())
    assert not found, sorted(found)


def test_modules_import_before_their_first_definition() -> None:
    late = _late_imports(_modules())
    assert not late, late


def test_the_scans_see_a_module_written_the_old_way() -> None:
    """A module that registers another by importing it at its end and borrows a private
    name is caught by both scans; lazy imports in functions and a main guard are not."""
    tree = ast.parse(
        "from gpuprobe.worker.probes.width import cases\n"
        "from gpuprobe.worker.probes.width.cases import _first\n"
        "def f():\n    import torch\n    return cases._F, torch\n"
        "from gpuprobe.worker.probes.width import grid  # noqa: E402\n"
        "if __name__ == '__main__':\n    import sys\n"
    )
    assert _late_imports({"m": tree}) == ["m:6: from gpuprobe.worker.probes.width import grid"]
    assert _private_uses({"m": tree}) == {
        ("m", "gpuprobe.worker.probes.width.cases", "_first"),
        ("m", "gpuprobe.worker.probes.width.cases", "_F"),
    }
