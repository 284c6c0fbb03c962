"""Probe metadata the catalogue publishes for the Rust side to read (``ProbeSpec``).

A family declares in its ``specs`` module, once, what the engine and the report need to
know about it beyond each probe's spec: these tests check the declarations reach every
probe's published spec, and that the Rust sources keep no table of their own beside them
(a table that a new family would have to be added to, and that could drift from it).
"""

from __future__ import annotations

import dataclasses
import re

from conftest import REPO

from gpuprobe.worker import catalog


def _production_source(relative: str) -> str:
    """A Rust file's text before its unit tests (the tests may name examples)."""
    text = (REPO / relative).read_text(encoding="utf-8")
    return text.split("#[cfg(test)]", 1)[0]


def test_native_counterparts_are_declared_by_families_and_published_on_every_probe() -> None:
    by_family: dict[str, set[str | None]] = {}
    for probe in catalog.all_probes().values():
        by_family.setdefault(probe.id.split(".")[0], set()).add(probe.native_counterpart)
        spec = probe.spec()
        assert spec.get("native_counterpart") == probe.native_counterpart, probe.id
    # One counterpart per family: the engine reads it by family.
    assert all(len(values) == 1 for values in by_family.values()), by_family
    declared = {family: values.pop() for family, values in by_family.items()}
    assert {f: p for f, p in declared.items() if p} == {
        "copy": "native.copy",
        "pipeline": "native.copy",
        "alloc": "native.memtest",
    }


def test_a_family_declaration_reaches_its_probes(monkeypatch) -> None:
    module = "gpuprobe.worker.probes.ops.specs"
    monkeypatch.setattr(f"{module}.NATIVE_COUNTERPART", "native.kernel", raising=False)
    assert catalog.family_declarations(f"{module}:specs") == {"native_counterpart": "native.kernel"}


def test_the_diagnosis_keeps_no_table_of_native_counterparts() -> None:
    diagnose = _production_source("crates/gpuprobe-doctor/src/diagnose.rs")
    assert not re.search(r'"native\.[a-z]', diagnose), "native counterparts belong in the catalogue"
    assert "spec.native_counterpart" in diagnose


def test_report_groups_are_published_only_where_they_differ_from_the_family(monkeypatch) -> None:
    module = "gpuprobe.worker.probes.width.specs"
    monkeypatch.setattr(f"{module}.REPORT_GROUP", "memory", raising=False)
    declared = catalog.family_declarations(f"{module}:specs")
    assert declared == {"report_group": "memory"}
    probe = next(p for p in catalog.all_probes().values() if p.id.startswith("width."))
    assert dataclasses.replace(probe, **declared).spec()["report_group"] == "memory"
    assert "report_group" not in dataclasses.replace(probe, report_group="width").spec()
    # Today every family is its own group: the published catalogue carries none.
    assert not any("report_group" in p.spec() for p in catalog.all_probes().values())


def test_the_html_report_groups_by_the_published_group() -> None:
    html = _production_source("crates/gpuprobe-report/src/html.rs")
    families = html[html.index("fn families(") :]
    families = families[: families.index("\n}\n")]
    assert ".entry((r.group().to_string(), r.device))" in families
    assert ".family()" not in families and "contains(" not in families
