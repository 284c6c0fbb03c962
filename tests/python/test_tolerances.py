"""The dtype tolerance table has one copy, ``python/gpuprobe/worker/tolerances.json``: the
Rust judge embeds it (its parity test is in crates/gpuprobe-doctor/src/verdict/judge.rs) and every
Python module that computes the judge's bound reads the same values. A table copied by hand
into a module fails here."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import judge_mirror
from conftest import PACKAGE_DIR

from gpuprobe.worker import tolerances
from gpuprobe.worker.probes.ops import specs as ops_specs
from gpuprobe.worker.probes.width import scope as width_scope

TABLE_PATH = PACKAGE_DIR / "gpuprobe" / "worker" / "tolerances.json"
FILE = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
EXPECTED: dict[str, float] = FILE["dtype_tolerance"]
ALIASES: dict[str, str] = FILE["aliases"]
DTYPE_NAMES = set(EXPECTED) | set(ALIASES)

#: Dtype-keyed tolerance tables that are deliberately not the judge's, and why.
DELIBERATELY_DIFFERENT = {
    ("gpuprobe/worker/probes/width/scope.py", "SCAN_TOLERANCE"): "scans are judged against the running sum",
    ("gpuprobe/worker/probes/sweep/db.py", "BASE_TOLERANCE"): "(atol, rtol) of an elementwise comparison",
}


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def test_the_values_are_those_the_judge_has_always_used() -> None:
    # Changing a tolerance changes verdicts: it must be a deliberate edit of this test too.
    assert EXPECTED == {
        "float64": 1e-12,
        "float32": 1e-5,
        "tf32": 2e-3,
        "float16": 4e-3,
        "bfloat16": 3e-2,
        "float8_e4m3fn": 0.15,
        "float8_e5m2": 0.3,
    }
    assert ALIASES == {
        "fp64": "float64",
        "fp32": "float32",
        "fp16": "float16",
        "bf16": "bfloat16",
        "fp8_e4m3": "float8_e4m3fn",
        "fp8_e5m2": "float8_e5m2",
    }


def test_the_loader_reads_the_file() -> None:
    assert tolerances.DTYPE_TOLERANCE == EXPECTED
    assert tolerances.ALIASES == ALIASES
    for name in DTYPE_NAMES:
        assert tolerances.dtype_tolerance(name) == EXPECTED[canonical(name)], name
    assert tolerances.dtype_tolerance("float7") is None


def test_every_module_that_uses_dtype_tolerances_reads_the_file() -> None:
    tables = {
        "ops_specs.DTYPE_TOLERANCE": ops_specs.DTYPE_TOLERANCE,
        "width_scope.TOLERANCE": width_scope.TOLERANCE,
        "judge_mirror.DTYPE_TOLERANCE": judge_mirror.DTYPE_TOLERANCE,
    }
    for label, table in tables.items():
        assert table, label
        for name, value in table.items():
            assert value == EXPECTED[canonical(name)], f"{label}[{name!r}]"
    assert set(judge_mirror.DTYPE_TOLERANCE) == DTYPE_NAMES, "the mirror accepts what the judge accepts"
    assert ops_specs.bound("bfloat16", 2.0) == EXPECTED["bfloat16"] * 2.0


def _dtype_dicts(path: Path) -> list[tuple[str, int, ast.Dict]]:
    """Every dict literal of a module with at least two dtype-name keys, with the name it is
    assigned to (or "")."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names[id(node.value)] = target.id
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        if sum(key in DTYPE_NAMES for key in keys) >= 2:
            found.append((names.get(id(node), ""), node.lineno, node))
    return found


def test_no_module_holds_a_copy_of_the_table() -> None:
    roots = [PACKAGE_DIR, Path(__file__).resolve().parent]
    problems = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if path.resolve() == Path(__file__).resolve():
                continue
            rel = path.relative_to(root).as_posix()
            for name, line, node in _dtype_dicts(path):
                if (rel, name) in DELIBERATELY_DIFFERENT:
                    continue
                if "TOLERANCE" in name.upper():
                    problems.append(f"{rel}:{line} {name}: a dtype tolerance table; read gpuprobe.worker.tolerances")
                    continue
                copied = [
                    key.value
                    for key, value in zip(node.keys, node.values)
                    if isinstance(key, ast.Constant)
                    and key.value in DTYPE_NAMES
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, float)
                    and value.value == EXPECTED[canonical(key.value)]
                ]
                if len(copied) >= 2:
                    problems.append(f"{rel}:{line} {name or 'a dict'} repeats the tolerances of {copied}")
    assert not problems, "\n".join(problems)
