"""Reads RESULT.json and PLAN.json, picks the family's recipe, writes repro.py and repro.json.

Errors the user can cause (a missing or malformed file, a result that is not a failure) are
``ReproInputError``; a result no recipe can rebuild is ``families.NoRepro``. Both reach the
command line as one line, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from gpuprobe.repro import families, script
from gpuprobe.repro.families import Case, NoRepro

#: Verdicts a repro is made for.
FAILING = ("fail", "crash", "hang", "error")


class ReproInputError(ValueError):
    """RESULT.json or PLAN.json cannot be used (the message says which and why)."""


def _reject_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def load_json(path: str, what: str) -> dict[str, Any]:
    """A JSON object from ``path``, or ReproInputError naming ``what`` it should have been."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle, parse_constant=_reject_constant)
    except OSError as exc:
        raise ReproInputError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReproInputError(f"{what} {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ReproInputError(f"{what} {path} must hold a JSON object, not {type(data).__name__}")
    return data


def _text(value: Any, limit: int = 300) -> str:
    """Outside text made safe for a docstring line: printable ASCII, no triple quotes."""
    cleaned = "".join(ch if 32 <= ord(ch) < 127 else " " for ch in str(value))
    cleaned = cleaned.replace('"""', "'''").replace("\\", "/")
    return cleaned[:limit]


def _env(plan: dict[str, Any], result: dict[str, Any]) -> dict[str, str | None]:
    """The settings the run applied: the plan's ``settings`` then the result's own
    ``KEY=VALUE`` list (a ``fix`` candidate or a profile). None means unset."""
    env: dict[str, str | None] = {}
    settings = plan.get("settings")
    if isinstance(settings, dict):
        for key, value in (settings.get("set") or {}).items():
            if isinstance(key, str) and isinstance(value, str):
                env[key] = value
        for key in settings.get("unset") or []:
            if isinstance(key, str):
                env[key] = None
    for item in result.get("settings") or []:
        if isinstance(item, str) and "=" in item:
            key, _, value = item.partition("=")
            if key:
                env[key] = value
    return env


def _task_timeout(plan: dict[str, Any], probe: str) -> float:
    for task in plan.get("tasks") or []:
        spec = task.get("spec") if isinstance(task, dict) else None
        if isinstance(spec, dict) and spec.get("id") == probe:
            timeout = spec.get("timeout_s")
            if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
                return float(timeout)
    return 120.0


def _observed(result: dict[str, Any]) -> str:
    verdict = result.get("verdict") or {}
    parts = [str(verdict.get("verdict", "?")).upper()]
    for key in ("class", "detail", "reason", "signal"):
        if verdict.get(key) not in (None, ""):
            parts.append(str(verdict[key]))
    return _text(": ".join(parts))


def _simulated(plan: dict[str, Any], result: dict[str, Any]) -> str | None:
    if not result.get("simulated"):
        return None
    spec = plan.get("simulate")
    source = spec.get("source") if isinstance(spec, dict) else None
    return _text(source or "unnamed simulation", 80)


def generate(result: dict[str, Any], plan: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The script text and the ``repro.json`` object for one failing result."""
    probe = result.get("probe")
    if not isinstance(probe, str) or not probe:
        raise ReproInputError("RESULT.json has no probe id ('probe')")
    device = result.get("device")
    if not isinstance(device, str) or not device:
        raise ReproInputError("RESULT.json has no device ('device')")
    if device.isdigit():
        device = f"cuda:{device}"
    if not re.fullmatch(r"cpu|cuda(:[0-9]{1,4})?", device):
        raise ReproInputError(f"RESULT.json names device {_text(device, 40)!r}; expected cpu, cuda:N or a GPU index")
    verdict_obj = result.get("verdict")
    verdict = verdict_obj.get("verdict") if isinstance(verdict_obj, dict) else None
    if verdict not in FAILING:
        raise ReproInputError(f"{probe} on {device} did not fail (verdict {verdict!r}); there is nothing to reproduce")
    seed = plan.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ReproInputError("PLAN.json has no integer seed ('seed')")
    family = probe.split(".", 1)[0]
    if verdict == "error":
        raise NoRepro(f"{probe} raised an error in the probe itself; the error text in the report is the repro")
    if family in families.UNCOVERED:
        raise NoRepro(f"{family} probes: {families.UNCOVERED[family]}")
    from gpuprobe.worker import catalog

    definition = catalog.lookup(probe)
    if definition is None:
        raise NoRepro(f"{probe} is not a probe of this gpuprobe's catalog")
    recipe_fn = families.RECIPES.get(definition.impl)
    if recipe_fn is None and definition.impl in families.NOT_REBUILT:
        raise NoRepro(f"{probe}: {families.NOT_REBUILT[definition.impl]}")
    if recipe_fn is None:
        raise NoRepro(
            f"no recipe for {family} probes implemented by {definition.impl.split(':')[-1]} yet "
            "(covered: docs/repro.md)"
        )
    observation = result.get("observation") if isinstance(result.get("observation"), dict) else {}
    measurement = observation.get("measurement") if isinstance(observation.get("measurement"), dict) else {}
    metrics = observation.get("metrics") if isinstance(observation.get("metrics"), dict) else {}
    tail = verdict_obj.get("stderr_tail") if isinstance(verdict_obj, dict) else None
    stderr_tail = tuple(line for line in tail if isinstance(line, str)) if isinstance(tail, list) else ()
    case = Case(probe, definition, seed, verdict, measurement, metrics, device, stderr_tail)
    recipe = recipe_fn(case)
    env = _env(plan, result)
    crash_child = verdict in ("crash", "hang")
    simulated = _simulated(plan, result)
    text = script.render(
        recipe,
        probe=probe,
        device=device,
        observed=_observed(result),
        env=env,
        crash_child=crash_child,
        hang_timeout=_task_timeout(plan, probe),
        simulated=simulated,
    )
    info = {
        "probe": probe,
        "family": family,
        "kind": "python",
        "needs": recipe.needs,
        "env": {k: v for k, v in env.items() if v is not None},
        "summary": recipe.summary,
        "reference": recipe.reference,
        "tolerance": recipe.tolerance,
        "crash_child": crash_child,
        "simulated": simulated is not None,
    }
    return text, info


def write(result_path: str, plan_path: str, out_dir: str) -> Path:
    """Generates and writes ``repro.py`` and ``repro.json`` into ``out_dir``."""
    result = load_json(result_path, "RESULT.json")
    plan = load_json(plan_path, "PLAN.json")
    text, info = generate(result, plan)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        target = out / "repro.py"
        target.write_text(text, encoding="utf-8")
        os.chmod(target, 0o755)
        (out / "repro.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ReproInputError(f"cannot write into {out_dir}: {exc.strerror or exc}") from exc
    return target
