r"""The batched iteration loop shared by every kernel family: configuration grids, the logging
schedule, recorded curves, early stop of exactly periodic configurations, divergence.

A run holds G configurations as the leading axis of every tensor: the iterate is ``b`` of
shape (G, n) for sparse recovery, ``A`` of shape (G, n1, n2) for matrices or the list of its
factors for a deep factorization, hyper-parameters are columns broadcasting against it ((G, 1)
or (G, 1, 1)), and the problem is shared, ``X`` (N, n), or one per configuration, ``X``
(G, N, n). A :class:`Family` tells :func:`run` what a kernel family records, how its data are
laid out and what of its iterate is recorded.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from grokkit._checks import check_grid, check_int, show
from grokkit import checkpoint
from grokkit.kernels import fused, persistent

HYPER = ("alpha", "beta1", "beta2", "init_scale")
METRICS = ("train_error", "test_error", "l1", "l2", "grad_ratio")
# Curves whose non-finite values mean divergence; the gradient ratio is not one of them: it
# is 0/0 or x/0 at an exact fit, where G = 0 (the projected method with tau = 1, say).
FINITE = ("train_error", "test_error", "l1", "l2")
MAX_STEPS = 10**15  # below 2**53: every step count is exact in float64, as the metrics return steps
PROGRESS_ENV = "GROKKIT_PROGRESS"


def grid(**axes) -> dict[str, np.ndarray]:
    """Cartesian product of hyper-parameter lists, first axis slowest.

    ``grid(alpha=[0.01, 0.1], beta1=[1e-5, 1e-4])`` gives four configurations:
    ``{"alpha": [0.01, 0.01, 0.1, 0.1], "beta1": [1e-5, 1e-4, 1e-5, 1e-4]}``.
    Every axis needs at least one finite value (the kernels check the ranges).
    """
    names = list(axes)
    values = [np.atleast_1d(check_grid(k, axes[k])) for k in names]
    rows = list(itertools.product(*values))
    return {k: np.array([r[i] for r in rows]) for i, k in enumerate(names)}


def log_schedule(steps: int, dense: int = 1000, per_decade: int = 100) -> np.ndarray:
    """Steps at which a run is recorded: every step up to ``dense``, then ``per_decade``
    log-spaced steps per decade, always ending at ``steps``. Its length grows like
    ``per_decade * log10(steps)``, so memory stays bounded for 1e8 steps. ``steps`` is at most
    :data:`MAX_STEPS` = 1e15, below 2**53, so that every step is exact in float64."""
    steps = check_int("steps", steps, 1, MAX_STEPS)
    dense = check_int("dense", dense, 0)
    per_decade = check_int("per_decade", per_decade, 1)
    head = np.arange(0, min(dense, steps) + 1)
    if steps <= dense:
        return head
    k0 = math.floor(per_decade * math.log10(max(dense, 1)))
    k1 = math.ceil(per_decade * math.log10(steps))
    tail = np.round(10.0 ** (np.arange(k0, k1 + 1) / per_decade)).astype(np.int64)
    tail = tail[(tail > dense) & (tail < steps)]
    return np.unique(np.concatenate([head, tail, [steps]]))


@dataclass
class Trajectory:
    r"""Recorded run of G configurations (numpy, float64).

    ``steps[j]`` is the number of updates done at record j (0 is the initial point, the
    paper's :math:`b^{(1)}`). Curves have shape (G, T): relative training error
    :math:`\|\tilde Xb-y^*\|_2/\|y^*\|_2`, relative recovery error
    :math:`\|b-b^*\|_2/\|b^*\|_2`, :math:`\|b\|_1`, :math:`\|b\|_2` and the gradient ratio
    :math:`\|\beta_1 h(b)\|_2/\|G_{\beta_2}(b)\|_2`. ``b`` holds the iterates (G, T, n)
    when recorded. ``stopped_at[g]`` is the step at which configuration g was found
    exactly periodic (period 1 or 2, bit for bit) and stopped, its remaining records
    filled from the cycle; -1 if it ran every step. ``diverged[g]`` says that configuration g
    was stopped at its first record with a non-finite iterate or curve value (:func:`run`);
    its later records and ``b_final[g]`` are NaN. ``backend`` says whether the steps ran in
    PyTorch (``"torch"``), in the fused CPU path (``"fused"``, :mod:`grokkit.kernels.fused`) or in
    the persistent GPU kernels (``"persistent"``, :mod:`grokkit.kernels.persistent`).
    """

    method: str
    steps: np.ndarray
    config: dict[str, np.ndarray]
    train_error: np.ndarray
    test_error: np.ndarray
    l1: np.ndarray
    l2: np.ndarray
    grad_ratio: np.ndarray
    b: np.ndarray | None
    b_final: np.ndarray
    diverged: np.ndarray
    stopped_at: np.ndarray
    device: str
    seconds: float
    backend: str = "torch"
    step_seconds: float = math.nan  # of seconds, those spent in the steps (the rest: records, set-up)

    def __len__(self) -> int:
        return self.b_final.shape[0]

    @property
    def alpha_beta1(self) -> np.ndarray:
        r""":math:`\alpha\beta_1` per configuration."""
        return self.config["alpha"] * self.config["beta1"]


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` (CUDA when available, else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:K"`` or a
    ``torch.device`` of those types; every CUDA spelling is refused alike on a machine without CUDA."""
    if isinstance(device, torch.device):
        written = f"torch.device({str(device)!r})"
    elif isinstance(device, str) and re.fullmatch(r"auto|cpu|cuda(:\d+)?", device):
        if device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        written, device = show(device), torch.device(device)
    else:
        raise ValueError(f"device must be one of 'auto', 'cpu', 'cuda', 'cuda:K' or a torch.device, "
                         f"got {show(device)}")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be a CPU or CUDA device, got {written}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device must be 'auto' or 'cpu' on this machine (no CUDA device), got {written}")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(f"device must be 'cuda:K' with K in [0, {count - 1}] on this machine, got {written}")
    return device


def configurations(**hyper) -> dict[str, np.ndarray]:
    r"""Broadcast scalar or (G,) hyper-parameters to (G,) float arrays, checking each value:
    :math:`\alpha \in (0, \infty)`, ``alpha_decay`` in :math:`[0, \infty]` (:func:`step_size`), the
    others (``beta1`` or ``beta_star``, ``beta2``, ``init_scale``) in :math:`[0, \infty)`, no grid empty."""
    closed = {"alpha": "neither", "alpha_decay": "both"}
    arrays = {k: np.atleast_1d(check_grid(k, v, 0.0, closed=closed.get(k, "left"))) for k, v in hyper.items()}
    sizes = {a.size for a in arrays.values()} - {1}
    if len(sizes) > 1 or any(a.ndim != 1 for a in arrays.values()):
        shapes = {k: a.shape for k, a in arrays.items()}
        names = list(hyper)
        raise ValueError(f"{', '.join(names[:-1])} and {names[-1]} must be scalars or 1-D of one length G, "
                         f"got shapes {shapes}")
    G = sizes.pop() if sizes else 1
    return {k: np.broadcast_to(a, (G,)).copy() for k, a in arrays.items()}


def step_size(alpha, alpha_decay, t):
    r"""The step size :math:`\alpha_t` of update t = 1, 2, … (the update from :math:`x^{(t)}` to
    :math:`x^{(t+1)}`, the paper's indexing; the kernels' step count is t − 1):
    :math:`\alpha_t = \alpha(1 + b)/(b + t)`, ``alpha_decay`` = b in :math:`[0, \infty]`. So
    :math:`\alpha_1 = \alpha` and :math:`\alpha_t = a/(b + t)` with :math:`a = \alpha(1 + b)`: the
    square-summable but not summable steps of Corollary D.1 and of the remark after Theorem D.13
    (every a > 0, b ≥ 0); b = inf is the constant step :math:`\alpha_t = \alpha` (Corollary D.1, eq. 104).
    Written :math:`\alpha/(1 + (t-1)/(1+b))`, exact for b = inf; numpy arrays or torch tensors,
    broadcast (the loop of :func:`run` and :func:`grokkit.theory.convergence.step_size_sums` share it)."""
    return alpha / (1 + (t - 1) / (1 + alpha_decay))


def lambda_max(X: torch.Tensor) -> np.ndarray:
    r""":math:`\lambda_\max(X^\top X) = \|X\|_2^2`, per configuration for a batched X (G, N, n)."""
    return torch.linalg.matrix_norm(X, ord=2).cpu().numpy() ** 2


def check_step_size(config: dict[str, np.ndarray], lam) -> None:
    r"""Raise unless :math:`\alpha < 2/(\lambda_\max + \beta_2)` for every configuration (the
    stability condition of Theorems 2.1 and 2.2), ``lam`` the largest eigenvalue of the data term's
    Hessian (a scalar or one per configuration)."""
    lam = np.broadcast_to(lam, config["alpha"].shape)
    limit = 2.0 / (lam + config["beta2"])
    bad = np.flatnonzero(config["alpha"] >= limit)
    if bad.size:
        g = bad[0]
        raise ValueError(
            f"alpha must be in (0, 2/(lambda_max + beta2)) = (0, {limit[g]:.6g}) for stability, "
            f"got {config['alpha'][g]:g} (configuration {g}: beta2={config['beta2'][g]:g}, "
            f"lambda_max={lam[g]:.6g}; {bad.size} configuration(s) above the limit)")


class Progress:
    """Progress of a loop of ``total`` steps: a bar on a terminal (``show=None``) or on request,
    and, when ``$GROKKIT_PROGRESS`` names a file, the same numbers written there as JSON at
    most once a second. ``grokkit run`` reads that file to report the progress of notebooks
    that run without a terminal."""

    def __init__(self, label: str, total: int, show: bool | None = None):
        self.label, self.total, self.done = label, int(total), 0
        self.bar = tqdm(total=total, desc=label, leave=False,
                        disable=(not sys.stderr.isatty()) if show is None else not show)
        self.path = os.environ.get(PROGRESS_ENV) or None
        self.start = self.written = time.monotonic()

    def update(self, k: int) -> None:
        """``k`` more steps done."""
        self.done += k
        self.bar.update(k)
        if self.path and time.monotonic() - self.written >= 1.0:
            self._write()

    def close(self) -> None:
        """All ``total`` steps done (a loop may finish early when every configuration stopped)."""
        self.update(self.total - self.done)
        self.bar.close()
        if self.path:
            self._write()

    def _write(self) -> None:
        self.written = time.monotonic()
        record = {"label": self.label, "done": self.done, "total": self.total,
                  "seconds": round(self.written - self.start, 1)}
        partial = f"{self.path}.{os.getpid()}.tmp"
        try:
            with open(partial, "w", encoding="utf-8") as fh:
                json.dump(record, fh)
            os.replace(partial, self.path)
        except OSError:  # progress is informative: never let it stop a run
            self.path = None


@contextmanager
def cpu_threads(device: torch.device, work: float):
    """Run small problems on one CPU thread: below ~1e6 multiply-adds per step, intra-op
    threads only add synchronisation. Larger ones use torch's threads only where they sleep
    while they wait (OpenMP's passive policy, which ``import grokkit`` sets before torch loads):
    spinning threads made a run of 1.3e6 multiply-adds per step 20 times slower on two
    threads than on one while another process used the cores."""
    import grokkit

    if device.type != "cpu" or (work > 1e6 and grokkit._threads_sleep):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def apply(X: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    r""":math:`\tilde X b` for every row of ``b`` (G, n); X is (N, n) or (G, N, n)."""
    # b (G, 1, n) times X^T (G, n, N): about 3 times faster on the CPU than X (G, N, n) times b (G, n, 1)
    return b @ X.mT if X.dim() == 2 else torch.bmm(b.unsqueeze(1), X.mT).squeeze(1)


def apply_t(X: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    r""":math:`\tilde X^\top r` for every row of ``r`` (G, N)."""
    return r @ X if X.dim() == 2 else torch.bmm(r.unsqueeze(1), X).squeeze(1)


def residual(X: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r""":math:`\tilde Xb - y^*` for every row of ``b``, one fused product for a shared X."""
    return torch.addmm(y, b, X.mT, beta=-1) if X.dim() == 2 else apply(X, b) - y


def gradient(X: torch.Tensor, r: torch.Tensor, plus: torch.Tensor) -> torch.Tensor:
    r""":math:`\tilde X^\top r` + ``plus`` for every row of ``r``, one fused product for a shared X."""
    return torch.addmm(plus, r, X) if X.dim() == 2 else apply_t(X, r) + plus


def _metrics(b, data: dict, col: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    r"""The :data:`METRICS` of every row of ``b``, stacked: shape (5, g), and no traces.

    :math:`\|\beta_1 h(b)\|_2 = \beta_1\sqrt{\#\{i: b_i \ne 0\}}` for :math:`h = \operatorname{sign}`."""
    norm = torch.linalg.vector_norm
    X, y, b_star = data["X"], data["y"], data["b_star"]
    r = residual(X, b, y)
    G = gradient(X, r, col["beta2"] * b)
    test = (norm(b - b_star, dim=-1) / norm(b_star, dim=-1) if b_star is not None
            else torch.full_like(b[:, 0], math.nan))
    h_norm = col["beta1"][:, 0] * torch.count_nonzero(b, dim=-1).to(b.dtype).sqrt()
    return torch.stack([norm(r, dim=-1) / norm(y, dim=-1), test, norm(b, 1, dim=-1), norm(b, dim=-1),
                        h_norm / norm(G, dim=-1)]), []


@dataclass(frozen=True)
class Family:
    """What :func:`run` needs to know of a kernel family.

    ``penalty`` names the coefficient of the family's penalty (``beta1``, ``beta_star``);
    ``curves`` the recorded curves, in the order ``evaluate(x, data, col)`` returns them as a
    (len(curves), g) tensor, together with one (g, k) tensor per name of ``traces`` (vectors
    recorded at every record, such as singular values); ``finite`` the curves whose non-finite
    values mean divergence. The step is called as ``step(x, *operands, alpha, penalty, beta2,
    **extra)``, with ``operands`` and ``target`` (the ground truth, optional) named in ``data`` and
    every other item of ``data`` passed by keyword. A data tensor is one per configuration when it
    has one axis more than ``unbatched`` gives it (default 1); a data object (an operator) says so
    with ``batched`` and is subset with ``select``. ``result`` builds the family's trajectory from
    the recorded fields. ``fused(method, data, config, x0)``, if given, returns the fused CPU steps
    of a run (:mod:`grokkit.kernels.fused`: an object with ``advance(k)``, ``iterate(age)`` and
    ``keep(mask)``), or None where the PyTorch steps must run it; :func:`compiled` picks them by
    device (the persistent GPU kernels of :mod:`grokkit.kernels.persistent` for CUDA data).

    The iterate is a tensor (G, ...) or a list of tensors with the configuration axis first (the
    factors of a deep factorization); ``view`` maps it to the tensor (G, ...) recorded as the
    iterate and returned as the final one (the product of the factors); None records it as is.
    """

    penalty: str
    curves: tuple[str, ...]
    finite: tuple[str, ...]
    operands: tuple[str, ...]
    target: str
    evaluate: Callable
    result: Callable
    unbatched: dict = field(default_factory=dict)
    traces: tuple[str, ...] = ()
    fused: Callable | None = None
    view: Callable | None = None

    def recorded(self, x):
        """The tensor (G, ...) recorded for the iterate ``x``."""
        return x if self.view is None else self.view(x)


def _sparse_result(*, curves, iterates, final, traces, **fields) -> Trajectory:
    return Trajectory(**fields, **curves, b=iterates, b_final=final)


def compiled(cpu: Callable | None, gpu: Callable | None) -> Callable:
    """A :class:`Family`'s ``fused`` hook: the fused CPU steps ``cpu`` (:mod:`grokkit.kernels.fused`)
    for a run on the CPU, the persistent kernels ``gpu`` (:mod:`grokkit.kernels.persistent`) for a
    run on a CUDA device, or on the CPU under Triton's interpreter (the tests); None leaves the
    PyTorch steps."""
    def steps(method: str, data: dict, config: dict, x0):
        device = _flat(x0).device
        use = gpu if persistent.available(device) else cpu if device.type == "cpu" else None
        return None if use is None else use(method, data, config, x0)
    return steps


SPARSE = Family(penalty="beta1", curves=METRICS, finite=FINITE, operands=("X", "y"), target="b_star",
                evaluate=_metrics, result=_sparse_result, unbatched={"X": 2, "P": 2},
                fused=compiled(fused.sparse_steps, persistent.sparse_steps))


def _batched(value, unbatched: int) -> bool:
    if isinstance(value, torch.Tensor):
        return value.dim() == unbatched + 1
    return bool(getattr(value, "batched", False))


def _select(value, keep: torch.Tensor):
    return value[keep] if isinstance(value, torch.Tensor) else value.select(keep)


def _take(x, keep: torch.Tensor):
    """The rows ``keep`` of an iterate: a tensor, or a list of tensors (:class:`Family`)."""
    return x[keep] if isinstance(x, torch.Tensor) else [t[keep] for t in x]


def _flat(x) -> torch.Tensor:
    """An iterate as one (G, m) tensor, to compare or test it row by row (a copy for a list)."""
    return x.flatten(1) if isinstance(x, torch.Tensor) else torch.cat([t.flatten(1) for t in x], dim=1)


def _cpu(value):
    """A tensor, or a list of them, detached and copied to the CPU (None stays None)."""
    if isinstance(value, (list, tuple)):
        return [_cpu(v) for v in value]
    return None if value is None else value.detach().to("cpu", copy=True)


def _to(value, device: torch.device):
    """:func:`_cpu`'s value back on ``device``."""
    if isinstance(value, list):
        return [_to(v, device) for v in value]
    return None if value is None else value.to(device)


def available_memory(device: torch.device) -> int:
    """Bytes that a run may still allocate on ``device``: the free memory of a CUDA device; on the CPU,
    the kernel's MemAvailable, capped by the cgroup's limit (a container's) where there is one."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            have = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            limit = fh.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as fh:
            used = int(fh.read().strip())
        if limit != "max":
            have = min(have, int(limit) - used)
    except (OSError, ValueError):
        pass
    return have


def check_memory(G: int, per_configuration: float, device: torch.device, what: str) -> None:
    """Refuse a run of ``G`` configurations that needs, at about ``per_configuration`` bytes each,
    more than 80 % of the memory available on ``device`` (:func:`available_memory`), before it
    allocates any of it: the message gives the grid's size, what it needs and what the machine has."""
    need, have = G * per_configuration, available_memory(device)
    if need > 0.8 * have:
        raise ValueError(f"{what}: the grid of G = {G:,} configurations needs about {need / 1e9:.1f} GB "
                         f"({per_configuration / 1e3:.1f} kB per configuration) and {device} has "
                         f"{have / 1e9:.1f} GB available: run fewer configurations at once, or record fewer "
                         f"steps (dense, per_decade)")


class _Records:
    """Recorded curves (M, G, T), traces (G, T, k) and iterates (G, T, *shape) of a run, on its device."""

    def __init__(self, G: int, T: int, shape: tuple, n_curves: int, record: bool, device: torch.device):
        size = G * T * math.prod(shape) * 8
        if record and size > 4e9:
            raise ValueError(f"recording the iterates would keep {size / 1e9:.1f} GB; "
                             "lower per_decade or dense, or run fewer configurations")
        self.kw = {"dtype": torch.float64, "device": device}
        self.G, self.T = G, T
        self.curves = torch.full((n_curves, G, T), math.nan, **self.kw)
        self.traces: list[torch.Tensor] | None = None
        self.x = torch.full((G, T, *shape), math.nan, **self.kw) if record else None
        self.final = torch.full((G, *shape), math.nan, **self.kw)

    def write(self, rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, traces: list[torch.Tensor],
              x: torch.Tensor) -> None:
        """Record ``values`` (M, g), ``traces`` [(g, k)] and iterates ``x`` (g, ...) of ``rows`` at every
        column in ``cols``."""
        self.curves[:, rows[:, None], cols[None, :]] = values[:, :, None]
        if self.traces is None:
            self.traces = [torch.full((self.G, self.T, t.shape[-1]), math.nan, **self.kw) for t in traces]
        for store, t in zip(self.traces, traces):
            store[rows[:, None], cols[None, :]] = t[:, None, :]
        if self.x is not None:
            self.x[rows[:, None], cols[None, :]] = x[:, None]

    def snapshot(self) -> dict:
        """Everything recorded so far, on the CPU (a checkpoint, :mod:`grokkit.checkpoint`)."""
        return {name: _cpu(getattr(self, name)) for name in ("curves", "traces", "x", "final")}

    def restore(self, saved: dict) -> None:
        """The records of :meth:`snapshot`, back on the run's device."""
        for name, value in saved.items():
            setattr(self, name, _to(value, self.kw["device"]))


def run(family: Family, method: str, step: Callable, data: dict, config: dict[str, np.ndarray],
        x0: torch.Tensor, steps: int, *, work: float, record: bool = False, dense: int = 1000,
        per_decade: int = 100, stop_periodic: bool = True, progress: bool | None = None):
    """Iterate ``x <- step(x, *operands, alpha, penalty, beta2, **extra)`` ``steps`` times for every
    configuration of ``config`` and record the family's curves on :func:`log_schedule`
    (and the iterates if ``record``). With ``config["alpha_decay"]`` the t-th update uses the
    decaying step :func:`step_size` (Corollary D.1) in place of ``alpha``; it runs in the PyTorch
    steps (the fused path has constant steps), and only period-1 cycles stop such configurations
    (period 2 needs a constant step). ``beta2`` is passed as None when it is 0 for every
    configuration, so that steps can skip its terms. ``work`` estimates the multiply-adds of
    one step of all configurations (small problems run on one CPU thread).

    Data whose leading axis is the configuration axis (:class:`Family`) shrink with the
    iterates when a configuration stops (exactly periodic) or diverges (non-finite iterate, or
    non-finite value on a curve of ``family.finite``; ``test_error`` only with a target), so
    finished configurations cost nothing; the numbers recorded are those of a full run, up to
    rounding (a smaller batch may round differently, ~1e-16).
    ``progress=None`` shows a progress bar only on a terminal.

    A run inside a cached call (every kernel) saves its whole state at a record boundary every
    ``$GROKKIT_CHECKPOINT_EVERY`` seconds and at the deadline ``$GROKKIT_DEADLINE``, where it then
    raises :class:`grokkit.checkpoint.DeadlineReached`; the same call continues it, bit for bit
    (:mod:`grokkit.checkpoint`).
    """
    t_start = time.perf_counter()
    A0 = family.recorded(x0)
    device, G = A0.device, A0.shape[0]
    sched = log_schedule(steps, dense, per_decade)
    size = math.prod(A0.shape[1:])  # the recorded curves and traces (4 assumed), the iterates, the state
    check_memory(G, 8 * (sched.size * (len(family.curves) + 4 + (size if record else 0)) + 6 * size), device, method)
    cols = torch.arange(sched.size, device=device)
    rec = _Records(G, sched.size, tuple(A0.shape[1:]), len(family.curves), record, device)
    state = _State(family, method, data, config, x0)
    watched = [family.curves.index(k) for k in family.finite
               if data.get(family.target) is not None or k != "test_error"]
    diverged, stopped_at = np.zeros(G, dtype=bool), np.full(G, -1, dtype=np.int64)
    saves = checkpoint.Checkpoint(method, (run, _State, _Records, family, step),
                                  [state.fused.source] if hasattr(state.fused, "source") else ())
    saved, first, t = saves.load(), 0, 0
    if saved is not None:
        first, t = saved["j"] + 1, saved["t"]
        rec.restore(saved["records"])
        diverged, stopped_at = saved["diverged"], saved["stopped_at"]
        state.restore(saved["state"], step, data)
        t_start -= saved["seconds"]
        state.seconds = saved["step_seconds"]
    bar = Progress(method, steps, progress)
    bar.update(t)
    with cpu_threads(device, work):
        for j in range(first, sched.size):
            if state.rows.numel() == 0:
                break
            t_next = sched[j]
            state.advance(step, int(t_next) - t)
            bar.update(int(t_next) - t)
            t = int(t_next)
            values, traces = state.observe(state.x)
            rec.write(state.rows, cols[j:j + 1], values, traces, family.recorded(state.x))
            done = ~torch.isfinite(_flat(state.x)).all(dim=1) | ~torch.isfinite(values[watched]).all(dim=0)
            if done.any():
                diverged[state.rows[done].cpu().numpy()] = True
            if stop_periodic and t > dense and j + 1 < sched.size:
                periodic = state.record_cycles(rec, values, traces, sched, j, steps) & ~done
                stopped_at[state.rows[periodic].cpu().numpy()] = t
                done |= periodic
            if done.any():
                state.drop(done)
            why = saves.due(final=j + 1 == sched.size or state.rows.numel() == 0)
            if why is not None:
                saves.save({"j": j, "t": t, "records": rec.snapshot(), "diverged": diverged, "stopped_at": stopped_at,
                            "state": state.snapshot(step, data), "seconds": time.perf_counter() - t_start,
                            "step_seconds": state.seconds}, t, steps)
            if why == "deadline":
                bar.close()
                raise checkpoint.DeadlineReached(
                    f"{method}: stopped at the deadline (${checkpoint.DEADLINE_ENV}) at step {t:,} of {steps:,}; its "
                    f"state is saved in {saves.path}: the same call (the same grokkit run command) continues it")
    bar.close()
    saves.discard()
    rec.final[state.rows] = family.recorded(state.x)
    if diverged.any():
        warnings.warn(f"{method}: {diverged.sum()} configuration(s) diverged (non-finite iterates or curves): "
                      + ", ".join(f"#{g} (alpha={config['alpha'][g]:g}, {family.penalty}={config[family.penalty][g]:g}, "
                                  f"beta2={config['beta2'][g]:g})" for g in np.flatnonzero(diverged)),
                      RuntimeWarning, stacklevel=3)
    return family.result(
        method=method, steps=sched, config=config, curves=dict(zip(family.curves, rec.curves.cpu().numpy())),
        traces=dict(zip(family.traces, [t.cpu().numpy() for t in rec.traces or []])),
        iterates=None if rec.x is None else rec.x.cpu().numpy(), final=rec.final.cpu().numpy(),
        diverged=diverged, stopped_at=stopped_at, device=str(device), seconds=time.perf_counter() - t_start,
        step_seconds=state.seconds,
        backend="torch" if state.fused is None else getattr(state.fused, "backend", "fused"))


class _State:
    """The iterates of the configurations still running, with their hyper-parameters and data."""

    def __init__(self, family: Family, method: str, data: dict, config: dict[str, np.ndarray], x0: torch.Tensor):
        A0 = family.recorded(x0)
        device = A0.device
        self.family = family
        # alpha_decay (a decaying step, Corollary D.1) runs in the PyTorch steps only.
        self.decay = "alpha_decay" in config and bool(np.isfinite(config["alpha_decay"]).any())
        self.fused = family.fused(method, data, config, x0) if family.fused and not self.decay else None
        column = (-1,) + (1,) * (A0.dim() - 1)
        self.col = {k: torch.as_tensor(config[k], dtype=A0.dtype, device=device).reshape(column)
                    for k in ("alpha", family.penalty, "beta2") + (("alpha_decay",) if self.decay else ())}
        self.t = 0  # updates done
        self.seconds = 0.0  # spent in the steps
        self.ridge = bool(np.any(config["beta2"]))
        self.data = dict(data)
        self.extra = tuple(k for k in data if k not in family.operands and k != family.target)
        self.batched = {k for k, v in data.items() if v is not None and _batched(v, family.unbatched.get(k, 1))}
        self.rows = torch.arange(A0.shape[0], device=device)
        self.x = self.x_prev = self.x_prev2 = x0

    def advance(self, step: Callable, k: int) -> None:
        """``k`` updates; the two previous iterates are kept to detect cycles. Their time adds to ``seconds``."""
        start = time.perf_counter()
        try:
            self._advance(step, k)
        finally:
            self.seconds += time.perf_counter() - start

    def _advance(self, step: Callable, k: int) -> None:
        self.t += k
        if self.fused is not None:
            self.fused.advance(k)
            self.x = self.fused.iterate()
            return
        operands = [self.data[name] for name in self.family.operands]
        c = self.col
        hyper = (c["alpha"], c[self.family.penalty], c["beta2"] if self.ridge else None)
        extra = {name: self.data[name] for name in self.extra}
        for i in range(self.t - k + 1, self.t + 1):
            if self.decay:
                hyper = (step_size(c["alpha"], c["alpha_decay"], i),) + hyper[1:]
            self.x_prev2, self.x_prev, self.x = self.x_prev, self.x, step(self.x, *operands, *hyper, **extra)

    def observe(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The curves (M, g) and traces of the iterates ``x`` of the running rows (``mask``: some of them)."""
        data, col = self.data, self.col
        if mask is not None:
            data = {**data, **{k: _select(data[k], mask) for k in self.batched}}
            col = {k: v[mask] for k, v in col.items()}
        return self.family.evaluate(x, data, col)

    def record_cycles(self, rec: _Records, values: torch.Tensor, traces: list[torch.Tensor], sched: np.ndarray,
                      j: int, steps: int) -> torch.Tensor:
        """Find rows whose iterate repeats exactly with period 1 or 2, fill their remaining
        records (and final iterate) from the cycle, and return them as a mask."""
        if self.fused is not None:
            self.x_prev, self.x_prev2 = self.fused.iterate(1), self.fused.iterate(2)
        x, flat = self.family.recorded(self.x), _flat(self.x)
        fixed = (flat == _flat(self.x_prev)).all(dim=1)
        cycle = (flat == _flat(self.x_prev2)).all(dim=1) & ~fixed
        if self.decay:  # a 2-cycle of decaying steps does not repeat
            cycle &= torch.isinf(self.col["alpha_decay"]).flatten()
        periodic = fixed | cycle
        if not periodic.any():
            return periodic
        t = int(sched[j])
        future = torch.as_tensor(sched[j + 1:], device=x.device)
        odd = (future - t) % 2 == 1
        cols = torch.arange(j + 1, sched.size, device=x.device)
        rec.write(self.rows[fixed], cols, values[:, fixed], [v[fixed] for v in traces], x[fixed])
        x_prev = self.family.recorded(self.x_prev)
        if cycle.any():  # (a family's evaluate need not accept zero configurations)
            rec.write(self.rows[cycle], cols[~odd], values[:, cycle], [v[cycle] for v in traces], x[cycle])
            previous, previous_traces = self.observe(_take(self.x_prev, cycle), cycle)
            rec.write(self.rows[cycle], cols[odd], previous, previous_traces, x_prev[cycle])
        last = x_prev if (steps - t) % 2 == 1 else x
        rec.final[self.rows[fixed]] = x[fixed]
        rec.final[self.rows[cycle]] = last[cycle]
        return periodic

    def snapshot(self, step: Callable, data: dict) -> dict:
        """The state of the running configurations, on the CPU: their rows, the iterate and the two
        before it (the fused steps' own where they run), and what the step and the data objects
        carry from one update to the next (``checkpoint_state()``: a mini-batch order, an update count)."""
        ages = [self.fused.iterate(age) for age in range(3)] if self.fused is not None else \
            [self.x, self.x_prev, self.x_prev2]
        carried = {name: value.checkpoint_state() for name, value in (("step", step), *data.items())
                   if hasattr(value, "checkpoint_state")}
        return {"t": self.t, "rows": _cpu(self.rows), "x": [_cpu(x) for x in ages], "carried": carried}

    def restore(self, saved: dict, step: Callable, data: dict) -> None:
        """Continue from :meth:`snapshot`: drop the configurations that had stopped, as the
        interrupted run did, then put back the iterates and what the step and data carried."""
        keep = torch.zeros(self.rows.numel(), dtype=torch.bool, device=self.rows.device)
        keep[_to(saved["rows"], self.rows.device)] = True
        self.drop(~keep)
        device = _flat(self.x).device
        x, x_prev, x_prev2 = (_to(v, device) for v in saved["x"])
        if self.fused is not None:
            self.fused.restore(x, x_prev, x_prev2)
            self.x = self.fused.iterate()
        else:
            self.x, self.x_prev, self.x_prev2 = x, x_prev, x_prev2
        self.t = saved["t"]
        for name, value in saved["carried"].items():
            (step if name == "step" else data[name]).restore_checkpoint(value)

    def drop(self, done: torch.Tensor) -> None:
        """Stop the configurations in ``done``."""
        keep = ~done
        if self.fused is not None:
            self.fused.keep(keep.cpu().numpy())
            self.x = self.fused.iterate()
        else:
            self.x, self.x_prev, self.x_prev2 = (_take(v, keep) for v in (self.x, self.x_prev, self.x_prev2))
        self.col = {k: v[keep] for k, v in self.col.items()}
        self.data = {**self.data, **{k: _select(self.data[k], keep) for k in self.batched}}
        self.rows = self.rows[keep]
