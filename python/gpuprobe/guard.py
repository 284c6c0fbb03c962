"""Guards for training code: the probes' checks, on your own batches, parameters and gradients.

    from gpuprobe import guard

    batch = {k: v.to("cuda", non_blocking=True) for k, v in cpu_batch.items()}
    guard.tensors(batch, where="after .to()", host_copy=cpu_batch)   # raises GuardError

    watch = guard.watch(model)             # checks parameters and gradients every 50 steps
    for ...:
        loss.backward()
        watch.step()                       # after backward, before optimizer.step()

What is checked, and how it is classified (the ``FailClass`` vocabulary of the probes, in
the judge's order, docs/report.schema.json):

- ``nan_inf``: a floating-point tensor holds NaN or Inf;
- ``all_zeros``: every element is zero (a batch that became zeros after a move to the
  device). A tensor whose zeros are legitimate is left alone: ``bool`` tensors (masks),
  tensors of fewer than two elements, and paths matching ``zeros_ok`` (by default
  ``*token_type_ids*``). With ``host_copy``, a tensor is flagged only when its host copy
  is not all zero;
- ``partial_zeros`` / ``mismatch``: with ``host_copy``, the device tensor differs from the
  host copy at sampled positions (all the differing ones zero: ``partial_zeros``).

Cost: one reduction per tensor on its own device (the largest absolute value of a float
tensor, the count of non-zero elements of any other), ``samples`` gathered elements per
tensor with a host copy, and one device-to-host transfer of those few numbers per device: one
synchronisation per call, no copy of any tensor. The host copy is read at the sampled
positions only (and counted in full only when its device tensor is all zero).

``watch`` runs on an explicit ``.step()`` (hooks cannot tell a training step from an
evaluation forward, and gradients exist only between backward and the optimizer's
``zero_grad``): parameters are checked for NaN/Inf and for becoming all zero (a parameter that
was non-zero at the previous check), gradients for NaN/Inf. With fp16 loss scaling
(``torch.amp.GradScaler``) Inf gradients are expected in the steps the scaler skips: pass
``grads=False`` there.

Importing this module never imports torch: the guards use the torch that made the tensors.
"""

from __future__ import annotations

import fnmatch
import math
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple

__all__ = [
    "DEFAULT_EVERY",
    "DEFAULT_SAMPLES",
    "DEFAULT_ZEROS_OK",
    "GuardError",
    "GuardIssue",
    "GuardWarning",
    "Watch",
    "tensors",
    "watch",
]

#: Elements compared with the host copy per tensor.
DEFAULT_SAMPLES = 8
#: Steps between two checks of ``watch``.
DEFAULT_EVERY = 50
#: Paths whose all-zero content is normal (BERT-style segment ids of single sentences).
DEFAULT_ZEROS_OK: Tuple[str, ...] = ("*token_type_ids*",)
#: How deep ``tensors`` descends into nested dicts, lists and tuples.
_MAX_DEPTH = 16
_MODES = ("raise", "warn")


class GuardWarning(RuntimeWarning):
    """A guard found a problem and ``mode="warn"`` was chosen."""


@dataclass(frozen=True)
class GuardIssue:
    """One problem with one tensor."""

    #: Where in the checked object: ``batch["input_ids"]``, ``model.fc.weight.grad``.
    path: str
    #: The caller's label of the point in the program (``after .to()``).
    where: str
    #: ``nan_inf``, ``all_zeros``, ``partial_zeros`` or ``mismatch``.
    fail_class: str
    detail: str
    device: str
    dtype: str
    shape: Tuple[int, ...]

    def __str__(self) -> str:
        where = f" {self.where}" if self.where else ""
        shape = "x".join(str(s) for s in self.shape) or "scalar"
        return f"{self.path}{where}: {self.fail_class}: {self.detail} ({self.dtype} {shape} on {self.device})"


class GuardError(RuntimeError):
    """A guard found a problem (``mode="raise"``); ``issues`` lists every one."""

    def __init__(self, issues: Sequence[GuardIssue]):
        self.issues = list(issues)
        lines = [str(i) for i in self.issues]
        super().__init__("gpuprobe guard: " + "; ".join(lines))


def _torch() -> Any:
    # Tensors exist only once torch is imported: use that module, never import it here.
    return sys.modules.get("torch")


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(key)


def _leaves(torch: Any, obj: Any, path: str, host: Any, has_host: bool, depth: int) -> Iterator[Tuple[str, Any, Any]]:
    """(path, tensor, host tensor or None) for every tensor in ``obj``, depth first, in order."""
    if isinstance(obj, torch.Tensor):
        yield path, obj, host if has_host else None
        return
    if depth >= _MAX_DEPTH:
        return
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            sub = f"{path}[{_key_text(key)}]"
            if has_host and (not isinstance(host, Mapping) or key not in host):
                if _holds_tensor(torch, value, depth + 1):
                    raise ValueError(f"host_copy has no {sub}")
                continue
            yield from _leaves(torch, value, sub, host[key] if has_host else None, has_host, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            sub = f"{path}[{index}]"
            if has_host and (not isinstance(host, (list, tuple)) or index >= len(host)):
                if _holds_tensor(torch, value, depth + 1):
                    raise ValueError(f"host_copy has no {sub}")
                continue
            yield from _leaves(torch, value, sub, host[index] if has_host else None, has_host, depth + 1)


def _holds_tensor(torch: Any, obj: Any, depth: int) -> bool:
    return any(True for _ in _leaves(torch, obj, "", None, False, depth))


def _flat_positions(torch: Any, numel: int, k: int, device: Any) -> Any:
    """``k`` deterministic flat positions spread evenly over ``numel`` (first and last among
    them), made on ``device`` (no host-to-device copy: small pageable copies are what fails)."""
    if k <= 1:
        return torch.zeros(1, dtype=torch.int64, device=device)
    return torch.arange(k, dtype=torch.int64, device=device) * (numel - 1) // (k - 1)


def _gather(torch: Any, t: Any, flat: Any) -> Any:
    """The elements of ``t`` at row-major flat positions, without copying ``t``."""
    if t.is_contiguous():
        return t.reshape(-1)[flat]
    index = []
    rest = flat
    for size in reversed(t.shape):
        index.append(rest % size)
        rest = rest // size
    return t[tuple(reversed(index))]


def _stat(torch: Any, t: Any) -> Any:
    """One number per tensor, on its device: the largest |x| of a float or complex tensor
    (NaN/Inf propagate; 0 means all zeros), the count of non-zero elements otherwise."""
    if t.is_floating_point() or t.is_complex():
        return torch.linalg.vector_norm(t, ord=math.inf).reshape(1)
    return torch.count_nonzero(t).reshape(1)


def _wide(torch: Any, t: Any) -> Any:
    # MPS has no float64.
    return t.to(torch.float32 if t.device.type == "mps" else torch.float64)


def _fetch(torch: Any, pieces: List[Any]) -> List[float]:
    """Brings the few numbers of one device to the host in one transfer (one sync)."""
    return torch.cat([_wide(torch, p.reshape(-1)) for p in pieces]).cpu().tolist()


def _format(value: float, is_float: bool) -> str:
    if not is_float and math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(value)


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, not {mode!r}")


def _report(issues: List[GuardIssue], mode: str, stacklevel: int) -> List[GuardIssue]:
    if issues:
        if mode == "raise":
            raise GuardError(issues)
        warnings.warn(str(GuardError(issues)), GuardWarning, stacklevel=stacklevel + 1)
    return issues


def tensors(
    batch: Any,
    where: str = "",
    host_copy: Any = None,
    mode: str = "raise",
    *,
    name: str = "batch",
    samples: int = DEFAULT_SAMPLES,
    zeros: bool = True,
    finite: bool = True,
    zeros_ok: Iterable[str] = DEFAULT_ZEROS_OK,
) -> List[GuardIssue]:
    """Checks a tensor, or the tensors in a dict, list or tuple (nested), for NaN/Inf, for
    all zeros and, with ``host_copy`` (the same structure, CPU tensors), for equality with
    it at ``samples`` positions per tensor.

    ``where`` names the point in the program for the message; ``name`` the object
    (``batch``), so a path reads ``batch["input_ids"]``. ``zeros`` and ``finite`` turn
    the two checks off; ``zeros_ok`` lists path patterns (fnmatch) whose all-zero content
    is normal. Objects other than tensors, dicts, lists and tuples are ignored.

    ``mode="raise"`` raises ``GuardError`` naming every problem; ``mode="warn"`` warns
    (``GuardWarning``) and returns them. Returns the list of problems (empty when fine).
    """
    _check_mode(mode)
    torch = _torch()
    if torch is None:
        return []
    with torch.no_grad():
        issues = _check_tensors(torch, batch, where, host_copy, name, samples, zeros, finite, tuple(zeros_ok))
    return _report(issues, mode, stacklevel=2)


def _check_tensors(
    torch: Any,
    batch: Any,
    where: str,
    host_copy: Any,
    name: str,
    samples: int,
    zeros: bool,
    finite: bool,
    exempt: Tuple[str, ...],
) -> List[GuardIssue]:
    has_host = host_copy is not None
    leaves = [
        (path, t, host)
        for path, t, host in _leaves(torch, batch, name, host_copy, has_host, 0)
        if t.numel() > 0 and not t.is_meta
    ]
    # Device work first, for every tensor, then one transfer per device.
    plans = []
    by_device: dict = {}
    sizes: dict = {}
    for path, t, host in leaves:
        t = t.detach()
        k = 0
        if host is not None:
            if not isinstance(host, torch.Tensor) or host.device.type != "cpu":
                raise ValueError(f"host_copy at {path} must be a CPU tensor")
            if host.shape != t.shape:
                raise ValueError(f"host_copy at {path} has shape {tuple(host.shape)}, the tensor {tuple(t.shape)}")
            if not t.is_complex():
                k = min(max(int(samples), 0), t.numel())
        pieces = by_device.setdefault(t.device, [])
        offset = sizes.get(t.device, 0)
        pieces.append(_stat(torch, t))
        if k:
            pieces.append(_gather(torch, t, _flat_positions(torch, t.numel(), k, t.device)))
        sizes[t.device] = offset + 1 + k
        plans.append((path, t, host, k, offset))
    fetched = {device: _fetch(torch, pieces) for device, pieces in by_device.items()}
    issues = []
    for path, t, host, k, offset in plans:
        values = fetched[t.device]
        stat = values[offset]
        got = values[offset + 1 : offset + 1 + k]
        issue = _classify(torch, path, t, host, stat, got, k, zeros, finite, exempt)
        if issue is not None:
            fail_class, detail = issue
            issues.append(
                GuardIssue(
                    path=path,
                    where=where,
                    fail_class=fail_class,
                    detail=detail,
                    device=str(t.device),
                    dtype=str(t.dtype).replace("torch.", ""),
                    shape=tuple(t.shape),
                )
            )
    return issues


def _classify(
    torch: Any,
    path: str,
    t: Any,
    host: Any,
    stat: float,
    got: List[float],
    k: int,
    zeros: bool,
    finite: bool,
    exempt: Tuple[str, ...],
) -> Optional[Tuple[str, str]]:
    """The fail class and detail of one tensor, in the judge's order: NaN/Inf, all zeros,
    then differences from the host copy."""
    n = t.numel()
    is_float = t.is_floating_point() or t.is_complex()
    expected: List[float] = []
    if k:
        flat = _flat_positions(torch, n, k, "cpu")
        host_sample = _gather(torch, host, flat)
        if host_sample.dtype != t.dtype:
            # What the host value becomes in the device tensor's type (a .to(dtype) move).
            host_sample = host_sample.to(t.dtype)
        expected = host_sample.to(torch.float64).tolist()
        positions = flat.tolist()
    if finite and is_float and not math.isfinite(stat):
        bad = sum(1 for g, e in zip(got, expected) if not math.isfinite(g) and math.isfinite(e))
        sampled = f"; {bad} of {k} sampled positions non-finite where the host copy is finite" if k else ""
        return "nan_inf", f"NaN/Inf among {n} elements (max |x| = {stat!r}){sampled}"
    all_zero = stat == 0
    if (
        zeros
        and all_zero
        and n >= 2
        and t.dtype != torch.bool
        and not any(fnmatch.fnmatchcase(path, pattern) for pattern in exempt)
    ):
        if host is None:
            return "all_zeros", f"all {n} elements are zero"
        if any(e != 0 for e in expected) or int(torch.count_nonzero(host)) > 0:
            return "all_zeros", f"all {n} elements are zero; the host copy is not"
        return None
    if k:
        differ = [(p, e, g) for p, e, g in zip(positions, expected, got) if not _same(e, g)]
        if differ:
            first_p, first_e, first_g = differ[0]
            first = f"first at [{first_p}]: expected {_format(first_e, is_float)}, found {_format(first_g, is_float)}"
            if all(g == 0 for _, _, g in differ):
                return "partial_zeros", f"{len(differ)} of {k} sampled elements zero where the host copy is not; {first}"
            return "mismatch", f"{len(differ)} of {k} sampled elements differ from the host copy; {first}"
    return None


class Watch:
    """Checks a model's parameters and gradients every ``every`` calls of ``step()``.

    Parameters: NaN/Inf, and becoming all zero (non-zero at the previous check, or when the
    watch was made). Gradients: NaN/Inf. Each check is one reduction per tensor (fused
    per device and dtype where torch offers it) and one transfer per device."""

    def __init__(
        self,
        model: Any,
        every: int = DEFAULT_EVERY,
        *,
        mode: str = "raise",
        params: bool = True,
        grads: bool = True,
        where: str = "",
        name: str = "model",
    ) -> None:
        _check_mode(mode)
        if int(every) < 1:
            raise ValueError(f"every must be at least 1, not {every}")
        self.model = model
        self.every = int(every)
        self.mode = mode
        self.params = params
        self.grads = grads
        self.where = where
        self.name = name
        self.steps = 0
        self.checks = 0
        self._last_max: dict = {}
        if params:
            # The baseline for "became all zero": one check now, without judging zeros.
            self._run(judge=False)

    def step(self) -> List[GuardIssue]:
        """Counts a training step; every ``every``-th one checks (the first check is at step
        ``every``). Call it after ``backward()`` and before ``optimizer.step()``."""
        self.steps += 1
        if self.steps % self.every:
            return []
        return self.check()

    def check(self) -> List[GuardIssue]:
        """Checks now, whatever the step count."""
        issues = self._run(judge=True)
        where = self.where or f"at step {self.steps}"
        issues = [
            GuardIssue(i.path, where, i.fail_class, i.detail, i.device, i.dtype, i.shape) for i in issues
        ]
        return _report(issues, self.mode, stacklevel=3)

    def _tensors(self, torch: Any) -> List[Tuple[str, Any, bool]]:
        out = []
        uninitialized = getattr(torch.nn.parameter, "UninitializedParameter", ())
        for pname, p in self.model.named_parameters():
            if uninitialized and isinstance(p, uninitialized):
                continue
            if p.is_meta:
                continue
            if self.params and p.numel() > 0:
                out.append((f"{self.name}.{pname}", p.detach(), False))
            if self.grads and p.grad is not None and p.grad.numel() > 0:
                out.append((f"{self.name}.{pname}.grad", p.grad.detach(), True))
        return out

    def _run(self, judge: bool) -> List[GuardIssue]:
        torch = _torch()
        if torch is None:
            return []
        self.checks += judge
        entries = self._tensors(torch)
        with torch.no_grad():
            stats = _stats(torch, [t for _, t, _ in entries])
        issues = []
        for (path, t, is_grad), value in zip(entries, stats):
            is_float = t.is_floating_point() or t.is_complex()
            fail = None
            if is_float and not math.isfinite(value):
                fail = ("nan_inf", f"NaN/Inf among {t.numel()} elements (max |x| = {value!r})")
            elif not is_grad:
                before = self._last_max.get(path)
                if before is not None and before > 0 and value == 0 and t.numel() >= 2:
                    fail = ("all_zeros", f"became all zero (max |x| was {before!r} at the previous check)")
            if not is_grad:
                self._last_max[path] = value
            if fail is not None and judge:
                issues.append(
                    GuardIssue(path, "", fail[0], fail[1], str(t.device), str(t.dtype).replace("torch.", ""), tuple(t.shape))
                )
        return issues


def _stats(torch: Any, items: List[Any]) -> List[float]:
    """``_stat`` of every tensor, one transfer per device. Float tensors of one device and
    dtype go through one fused ``_foreach_norm`` where torch has it."""
    groups: dict = {}
    for index, t in enumerate(items):
        fused = t.is_floating_point() and not t.is_complex() and hasattr(torch, "_foreach_norm")
        key = (t.device, t.dtype if fused else None, index if not fused else -1)
        groups.setdefault(key, []).append(index)
    by_device: dict = {}
    order: dict = {}
    for (device, dtype, _), indices in groups.items():
        pieces = by_device.setdefault(device, [])
        tensors_ = [items[i] for i in indices]
        if dtype is not None:
            norms = [n.reshape(1) for n in torch._foreach_norm(tensors_, ord=math.inf)]
        else:
            norms = [_stat(torch, tensors_[0])]
        start = sum(p.numel() for p in pieces)
        pieces.extend(norms)
        for j, i in enumerate(indices):
            order[i] = (device, start + j)
    fetched = {device: _fetch(torch, pieces) for device, pieces in by_device.items()}
    return [fetched[order[i][0]][order[i][1]] for i in range(len(items))]


def watch(
    model: Any,
    every: int = DEFAULT_EVERY,
    *,
    mode: str = "raise",
    params: bool = True,
    grads: bool = True,
    where: str = "",
    name: str = "model",
) -> Watch:
    """A ``Watch`` of ``model``'s parameters and gradients, checked every ``every`` calls of
    its ``step()``: call ``step()`` after ``backward()``, before ``optimizer.step()``."""
    return Watch(model, every, mode=mode, params=params, grads=grads, where=where, name=name)
