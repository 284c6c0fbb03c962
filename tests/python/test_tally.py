"""The case tally (``gpuprobe.worker.tally``): what every probe family that judges many cases
counts, and the observation it makes (the report schema's ``SweepStats``).

Each family's own notes and extras are tested with the family; here: the counting, the
limits on what is kept, the measurement's fields, and that every family's tally is one.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO

from gpuprobe.worker.tally import MAX_EXAMPLES, MAX_REPORTED, CaseTally, failure_record
from gpuprobe.worker.probes.sweep.oracle import WRONG_VALUE, LeafFailure


def _schema(name: str) -> dict:
    schema = json.loads((REPO / "docs" / "report.schema.json").read_text(encoding="utf-8"))
    return (schema.get("definitions") or schema["$defs"])[name]


def _failure(detail: str = "off", max_err: float | None = 0.5) -> LeafFailure:
    return LeafFailure(WRONG_VALUE, detail, index=[3], expected="1", found="0", max_err=max_err, allowed=float("inf"))


def test_cases_failures_and_errors_are_counted_and_the_first_ones_kept() -> None:
    tally = CaseTally(message_chars=10)
    tally.record("base", "forward", 0, "out", None)
    for sample in range(MAX_REPORTED + 2):
        tally.record("base", "forward", sample, "out", _failure())
    tally.fail("base", "backward", 1, "grad", _failure(), cls="structure")
    for sample in range(MAX_REPORTED + 1):
        tally.device_error("noncontig", "forward", sample, "CUDA error: an illegal memory access")
    assert tally.cases == 1 + (MAX_REPORTED + 2) + (MAX_REPORTED + 1) and tally.passed == 1
    assert tally.failed == {WRONG_VALUE: MAX_REPORTED + 2, "structure": 1}
    assert len(tally.failures) == MAX_REPORTED and tally.failures[0]["index"] == [3]
    # A bound that is not finite is left out (JSON has no infinity).
    assert "allowed" not in tally.failures[0] and tally.failures[0]["max_err"] == 0.5
    assert tally.device_error_count == MAX_REPORTED + 1 and len(tally.errors) == MAX_REPORTED
    assert tally.errors[0] == {"variant": "noncontig", "direction": "forward", "sample": 0, "message": "CUDA error"}


def test_cases_counted_apart_keep_a_few_examples_each() -> None:
    tally = CaseTally(example_chars=5)
    for _ in range(MAX_EXAMPLES + 1):
        tally.unjudge("no_reference", "a long example")
        tally.refuse("refused by a check")
    tally.unjudge("region_not_seen", count=4)
    tally.accept_invalid()
    tally.swallow("NaN came back finite")
    assert tally.unjudged == {"no_reference": MAX_EXAMPLES + 1, "region_not_seen": 4}
    assert tally.unjudged_examples == ["a lon"] * MAX_EXAMPLES
    assert tally.refused == MAX_EXAMPLES + 1 and tally.refused_examples == ["refus"] * MAX_EXAMPLES
    assert tally.invalid_accepted == 1 and tally.invalid_examples == []
    assert tally.nonfinite_swallowed == 1 and tally.swallowed_examples == ["NaN c"]
    # None: the caller cuts its own examples (the sweep).
    uncut = CaseTally(example_chars=None)
    uncut.unjudge("harness", "x" * 500)
    assert uncut.unjudged_examples == ["x" * 500]
    assert tally.cases == 0 and tally.passed == 0


def test_the_notes_it_writes() -> None:
    tally = CaseTally()
    assert tally.unjudged_note() is None and tally.not_run_note() is None
    tally.unjudge("b", "second")
    tally.unjudge("a")
    assert tally.unjudged_note() == "cases not judged: a 1, b 1; e.g. second"
    assert tally.unjudged_note("not judged").startswith("not judged: a 1")
    tally.not_run = 2
    assert tally.not_run_note() == "2 case(s) not run: the probe's time budget was spent"
    tally.context_lost = "the context is gone"
    assert tally.not_run_note() == "2 case(s) not run: the device context was lost"


def test_the_measurement_is_the_reports_sweep_stats() -> None:
    tally = CaseTally()
    tally.record("v", "forward", 0, "out", _failure())
    tally.device_error("v", "forward", 1, "boom")
    measurement = tally.measurement("add", "float32", variant_test_name="vt", oracle="structure")
    stats, failure, error = _schema("SweepStats"), _schema("SweepFailure"), _schema("SweepError")
    assert measurement.pop("kind") == "sweep"
    assert set(measurement) == set(stats["properties"])
    assert set(stats["required"]) <= set(measurement)
    assert set(measurement["failures"][0]) <= set(failure["properties"])
    assert set(failure.get("required", [])) <= set(measurement["failures"][0])
    assert set(measurement["errors"][0]) == set(error["properties"])
    assert measurement["variant_test_name"] == "vt" and measurement["oracle"] == "structure"
    assert measurement["failed"] == {WRONG_VALUE: 1} and measurement["device_errors"] == 1
    assert failure_record(_failure(max_err=float("nan")), variant="v", direction="d", sample=0, output="o").get("max_err") is None


def test_every_family_that_judges_cases_counts_them_in_the_one_tally() -> None:
    from gpuprobe.worker.probes.compile import ambient, run as compile_run
    from gpuprobe.worker.probes.graph import run as graph_run
    from gpuprobe.worker.probes.optim import run as optim_run
    from gpuprobe.worker.probes.sweep import run as sweep_run
    from gpuprobe.worker.probes.train import run as train_run

    tallies = [
        sweep_run.SweepTally,
        compile_run.ProgramTally,
        ambient.StateTally,
        graph_run.ReplayTally,
        optim_run.OptimTally,
        train_run.TrainTally,
    ]
    assert all(issubclass(cls, CaseTally) for cls in tallies)
    # No other class of the probe package counts cases of its own.
    probes = Path(sweep_run.__file__).resolve().parents[1]
    own = {cls.__name__ for cls in tallies}
    for path in probes.rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("class ") and "Tally" in line:
                assert line.split("(")[0].removeprefix("class ") in own, (path, line)
