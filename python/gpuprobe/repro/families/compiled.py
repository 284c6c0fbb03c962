"""compile family: one wrong entry of a compiled program (``compile_run.run_program``).

A compile probe compiles many database entries as one program; its failure names the entry
(by its database key), the pass, the sample and the output. The script rebuilds that one
entry's sample exactly as the sweep's recipe does (``sweep._run_op``: the tensors written
as data, the sweep's oracle copied) and runs the entry alone under ``torch.compile`` with
the pass's settings (``dynamic=True`` for the ``dynamic`` pass), judging the compiled
result against float64 on the CPU. A single entry compiled alone is a smaller program than
the probe's, so the script says so: a failure that needs its neighbours in the graph (a
fusion across entries) may not reproduce alone.
"""

from __future__ import annotations

from gpuprobe.repro.families import sweep
from gpuprobe.repro.families.base import Case, NoRepro
from gpuprobe.repro.script import Recipe

#: Passes whose inputs are a sweep transform of the same name, and the transform.
_PASS_TRANSFORMS = {"compiled": "base", "dynamic": "base", "noncontig": "noncontig", "channels_last": "channels_last"}

_RUN_CASE = '''\
def run_case(case, inputs, device):
    """The operator under test on the device."""
    return compute(inputs["op"], inputs["tensors"], inputs["leaves"], False, device)
'''


def _program(case: Case) -> Recipe:
    from gpuprobe.worker.probes.sweep import specs as sweep_specs

    failures = case.measurement.get("failures")
    if not isinstance(failures, list) or not failures or not isinstance(failures[0], dict):
        raise NoRepro("the observation lists no wrong compiled output ('failures'); compile errors are listed in its notes")
    first = failures[0]
    variant = first.get("variant")
    if variant not in _PASS_TRANSFORMS:
        raise NoRepro(
            f"the failing output is from the {variant!r} pass: the script rebuilds a functional call on the sample as the "
            f"{', '.join(sorted(_PASS_TRANSFORMS))} passes make it, not an out= or in-place call, a view, a value class, "
            "a composed entry or another gradient seed (bench/compile/candidates.py has standalone repros of such calls)"
        )
    output = str(first.get("output") or "")
    key, _, which = output.partition(" ")
    if not key or not which:
        raise NoRepro("the failing output does not name its database entry")
    dtype = case.params.get("dtype")
    seed = case.metrics.get("seed")
    if not isinstance(dtype, str) or isinstance(seed, bool) or not isinstance(seed, int):
        raise NoRepro("the observation lacks the program's dtype or seed")
    entry = sweep_specs.probe(key, dtype, "full")
    entry_case = Case(
        probe=entry.id,
        definition=entry,
        seed=case.seed,
        verdict=case.verdict,
        measurement={"failures": [{**first, "variant": _PASS_TRANSFORMS[variant], "output": which}]},
        metrics={"seed": seed},
        device=case.device,
    )
    recipe = sweep._run_op(entry_case)
    dynamic = variant == "dynamic"
    if _RUN_CASE not in recipe.body:
        raise NoRepro("the sweep's script changed shape: the compiled call cannot be put in")
    recipe.body = recipe.body.replace(
        _RUN_CASE,
        f'''\
#: The pass of the compile probe: torch.compile's default backend (Inductor), dynamic={dynamic!r}.
DYNAMIC = {dynamic!r}
#: What a simulated fault of the probe's run matched (gpuprobe repro of a simulated result).
SIMULATED_OP = "compile"
SIMULATED_VARIANT = {variant!r}


def run_case(case, inputs, device):
    """The operator under test, alone, compiled by torch.compile on the device (the probe
    compiled it in a program with other entries: a failure that needs its neighbours in
    the graph may not show here)."""
    compiled = torch.compile(inputs["op"], dynamic=DYNAMIC)
    return compute(compiled, inputs["tensors"], inputs["leaves"], False, device)
''',
    )
    recipe.summary = (
        f"The database entry `{key}` compiled by torch.compile ({'dynamic shapes' if dynamic else 'the default settings'}), "
        f"from the compile probe's `{variant}` pass. " + recipe.summary
    )
    recipe.what = f"compiled {recipe.what}"
    return recipe


RECIPES = {"gpuprobe.worker.probes.compile.run:run_program": _program}
