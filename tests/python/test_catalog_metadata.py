"""Probe metadata the catalog publishes for the Rust side to read (``ProbeSpec``).

A family declares in its ``specs`` module, once, what the engine and the report need to
know about it beyond each probe's spec: these tests check the declarations reach every
probe's published spec, and that the Rust sources keep no table of their own beside them
(a table that a new family would have to be added to, and that could drift from it).
"""

from __future__ import annotations

import dataclasses
import importlib
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
    diagnose = _production_source("crates/gpuprobe-doctor/src/verdict/diagnose.rs")
    assert not re.search(r'"native\.[a-z]', diagnose), "native counterparts belong in the catalog"
    assert "spec.native_counterpart" in diagnose


def test_report_groups_are_published_only_where_they_differ_from_the_family(monkeypatch) -> None:
    module = "gpuprobe.worker.probes.width.specs"
    monkeypatch.setattr(f"{module}.REPORT_GROUP", "memory", raising=False)
    declared = catalog.family_declarations(f"{module}:specs")
    assert declared == {"report_group": "memory"}
    probe = next(p for p in catalog.all_probes().values() if p.id.startswith("width."))
    assert dataclasses.replace(probe, **declared).spec()["report_group"] == "memory"
    assert "report_group" not in dataclasses.replace(probe, report_group="width").spec()
    # Today every family is its own group: the published catalog carries none.
    assert not any("report_group" in p.spec() for p in catalog.all_probes().values())


def test_the_html_report_groups_by_the_published_group() -> None:
    html = _production_source("crates/gpuprobe-report/src/html.rs")
    families = html[html.index("fn families(") :]
    families = families[: families.index("\n}\n")]
    assert ".entry((r.group().to_string(), r.device))" in families
    assert ".family()" not in families and "contains(" not in families


def test_typical_seconds_come_from_the_familys_table_by_the_longest_whole_prefix() -> None:
    table = {"nn.sdpa": 0.1, "nn.sdpa.matrix": 0.5}
    assert catalog.typical_seconds(table, "nn.sdpa.bf16") == 0.1
    assert catalog.typical_seconds(table, "nn.sdpa.matrix.fp16") == 0.5
    assert catalog.typical_seconds(table, "nn.sdpa") == 0.1
    assert catalog.typical_seconds(table, "nn.sdpax.bf16") is None, "a prefix ends at a dot"
    probes = catalog.all_probes()
    # A whole id listed beside its sub-family; a probe's own figure wins over its family's.
    assert probes["copy.h2d.pageable.tiny.nonblocking"].spec()["typical_s"] == 1.397
    assert probes["copy.h2d.pinned.tiny.blocking"].spec()["typical_s"] == 0.048
    copy_specs = "gpuprobe.worker.probes.copy.specs:specs"
    own = dataclasses.replace(probes["copy.h2d.pinned.tiny.blocking"], typical_s=2.0)
    assert catalog.declared(own, copy_specs).typical_s == 2.0
    # Every table lists its own family's prefixes only.
    for specs in catalog.FAMILY_SPECS:
        family = specs.split(".")[-2]
        module = importlib.import_module(specs.partition(":")[0])
        for prefix in getattr(module, "TYPICAL_SECONDS", {}):
            assert prefix.split(".")[0] == family, (specs, prefix)


def test_lane_sizing_keeps_no_table_of_seconds_by_id() -> None:
    lanes = _production_source("crates/gpuprobe-doctor/src/plan/lanes.rs")
    first_use = lanes.index("const FIRST_USE_SECONDS")
    without_first_use = lanes[:first_use] + lanes[lanes.index("];", first_use) :]
    assert not re.search(r'\("[a-z_0-9]+(\.[a-z_0-9]+)*", [0-9.]+\)', without_first_use), (
        "typical seconds belong in the catalog (each family's TYPICAL_SECONDS)"
    )
    assert "spec.typical_s" in lanes


def test_the_workaround_catalogue_names_only_families_the_catalog_has() -> None:
    # Which families a setting is tried for is the catalogue's (`families`), not a table in
    # the workaround search; a name no family has would silently never be tried.
    import tomllib

    families = {specs.split(".")[-2] for specs in catalog.FAMILY_SPECS} | {"native"}
    entries = tomllib.loads((REPO / "kb" / "catalogue.toml").read_text(encoding="utf-8"))["entry"]
    named = {entry["id"]: entry.get("families", []) for entry in entries}
    assert any(named.values()), "no catalogue entry names its families"
    for entry_id, listed in named.items():
        assert set(listed) <= families, (entry_id, sorted(set(listed) - families))
    candidates = _production_source("crates/gpuprobe-doctor/src/fix/candidates.rs")
    assert not re.search(r'"CAT-[A-Z0-9-]+"\s*(=>|\|\s*"CAT-)', candidates), (
        "the families a setting is tried for belong in kb/catalogue.toml"
    )
