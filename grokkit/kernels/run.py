r"""The batched iteration loop shared by every kernel: configuration grids, the logging
schedule, recorded traces, early stop of exactly periodic configurations, divergence.

A run holds G configurations as the leading axis of every tensor: the iterate is
``b`` of shape (G, n), hyper-parameters are columns of shape (G, 1), and the problem
is shared, ``X`` (N, n), or one per configuration, ``X`` (G, N, n).
"""
from __future__ import annotations

import itertools
import math
from contextlib import contextmanager
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from grokkit._checks import check_int, check_option, check_range

HYPER = ("alpha", "beta1", "beta2", "init_scale")
METRICS = ("train_error", "test_error", "l1", "l2", "grad_ratio")
_UNBATCHED_DIM = {"X": 2, "P": 2}  # every other row tensor is a vector (y, b_star)


def grid(**axes) -> dict[str, np.ndarray]:
    """Cartesian product of hyper-parameter lists, first axis slowest.

    ``grid(alpha=[0.01, 0.1], beta1=[1e-5, 1e-4])`` gives four configurations:
    ``{"alpha": [0.01, 0.01, 0.1, 0.1], "beta1": [1e-5, 1e-4, 1e-5, 1e-4]}``.
    """
    names = list(axes)
    values = [np.atleast_1d(np.asarray(axes[k], dtype=float)) for k in names]
    rows = list(itertools.product(*values))
    return {k: np.array([r[i] for r in rows]) for i, k in enumerate(names)}


def log_schedule(steps: int, dense: int = 1000, per_decade: int = 100) -> np.ndarray:
    """Steps at which a run is recorded: every step up to ``dense``, then ``per_decade``
    log-spaced steps per decade, always ending at ``steps``. Its length grows like
    ``per_decade * log10(steps)``, so memory stays bounded for 1e8 steps."""
    steps = check_int("steps", steps, 1)
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
    filled from the cycle; -1 if it ran every step.
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

    def __len__(self) -> int:
        return self.b_final.shape[0]

    @property
    def alpha_beta1(self) -> np.ndarray:
        r""":math:`\alpha\beta_1` per configuration."""
        return self.config["alpha"] * self.config["beta1"]


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` is CUDA when available, else the CPU."""
    if isinstance(device, torch.device):
        return device
    check_option("device", device, ("auto", "cpu", "cuda"))
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device must be 'auto' or 'cpu' on this machine (no CUDA device), got 'cuda'")
    return torch.device(device)


def configurations(alpha, beta1, beta2, init_scale) -> dict[str, np.ndarray]:
    """Broadcast scalar or (G,) hyper-parameters to (G,) float arrays, checking each range."""
    raw = {"alpha": alpha, "beta1": beta1, "beta2": beta2, "init_scale": init_scale}
    arrays = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in raw.items()}
    sizes = {a.size for a in arrays.values()} - {1}
    if len(sizes) > 1 or any(a.ndim != 1 for a in arrays.values()):
        shapes = {k: a.shape for k, a in arrays.items()}
        raise ValueError(f"alpha, beta1, beta2 and init_scale must be scalars or 1-D of one length G, got shapes {shapes}")
    G = sizes.pop() if sizes else 1
    arrays = {k: np.broadcast_to(a, (G,)).copy() for k, a in arrays.items()}
    for k, a in arrays.items():
        low, closed = (0.0, "neither") if k == "alpha" else (0.0, "left")
        for v in a:
            check_range(k, v, low, closed=closed)
    return arrays


def check_step_size(X: torch.Tensor, config: dict[str, np.ndarray]) -> np.ndarray:
    r"""Raise unless :math:`\alpha < 2/(\lambda_\max(\tilde X^\top\tilde X) + \beta_2)` for every
    configuration (the stability condition of Theorem 2.1); return :math:`\lambda_\max` per configuration."""
    lam = torch.linalg.matrix_norm(X, ord=2).cpu().numpy() ** 2
    lam = np.broadcast_to(lam, config["alpha"].shape)
    limit = 2.0 / (lam + config["beta2"])
    bad = np.flatnonzero(config["alpha"] >= limit)
    if bad.size:
        g = bad[0]
        raise ValueError(
            f"alpha must be in (0, 2/(lambda_max + beta2)) = (0, {limit[g]:.6g}) for stability, "
            f"got {config['alpha'][g]:g} (configuration {g}: beta2={config['beta2'][g]:g}, "
            f"lambda_max={lam[g]:.6g}; {bad.size} configuration(s) above the limit)")
    return lam


@contextmanager
def cpu_threads(device: torch.device, work: float):
    """Run small problems on one CPU thread: below ~1e6 multiply-adds per step, intra-op
    threads only add synchronisation, and they spin badly when the CPU is shared."""
    if device.type != "cpu" or work > 1e6:
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
    return b @ X.mT if X.dim() == 2 else torch.bmm(X, b.unsqueeze(-1)).squeeze(-1)


def apply_t(X: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    r""":math:`\tilde X^\top r` for every row of ``r`` (G, N)."""
    return r @ X if X.dim() == 2 else torch.bmm(r.unsqueeze(1), X).squeeze(1)


def _metrics(b, X, y, b_star, beta1, beta2) -> dict[str, torch.Tensor]:
    r = apply(X, b) - y
    G = apply_t(X, r) + beta2 * b
    out = {
        "train_error": r.norm(dim=-1) / y.norm(dim=-1),
        "l1": b.abs().sum(-1),
        "l2": b.norm(dim=-1),
        "grad_ratio": (beta1 * torch.sign(b)).norm(dim=-1) / G.norm(dim=-1),
    }
    out["test_error"] = ((b - b_star).norm(dim=-1) / b_star.norm(dim=-1) if b_star is not None
                         else torch.full_like(out["l1"], math.nan))
    return out


def run(method: str, step: Callable, X: torch.Tensor, y: torch.Tensor, b_star: torch.Tensor | None,
        config: dict[str, np.ndarray], b0: torch.Tensor, steps: int, *, extra: dict | None = None,
        record_b: bool = False, dense: int = 1000, per_decade: int = 100, stop_periodic: bool = True,
        progress: bool | None = None) -> Trajectory:
    """Iterate ``b <- step(b, X, y, alpha, beta1, beta2, **extra)`` ``steps`` times for every
    configuration and record the traces on :func:`log_schedule`.

    Tensors whose leading axis is the configuration axis (``b0``; ``X``, ``y``,
    ``b_star`` and the tensors in ``extra`` when batched) shrink together when a
    configuration stops (exactly periodic) or diverges (non-finite), so finished
    configurations cost nothing; the numbers recorded are those of a full run.
    ``progress=None`` shows a progress bar only on a terminal.
    """
    t_start = time.perf_counter()
    device = b0.device
    G, n = b0.shape
    sched = log_schedule(steps, dense, per_decade)
    T = sched.size
    if record_b and G * T * n * 8 > 4e9:
        raise ValueError(f"record_b would keep {G * T * n * 8 / 1e9:.1f} GB of iterates; "
                         "lower per_decade or dense, or run fewer configurations")
    rec = {k: np.full((G, T), np.nan) for k in METRICS}
    b_rec = np.full((G, T, n), np.nan) if record_b else None
    b_final = np.full((G, n), np.nan)
    diverged = np.zeros(G, dtype=bool)
    stopped_at = np.full(G, -1, dtype=np.int64)

    col = {k: torch.as_tensor(config[k], dtype=b0.dtype, device=device)[:, None] for k in ("alpha", "beta1", "beta2")}
    rows = {"X": X, "y": y, "b_star": b_star, **(extra or {})}
    batched = {k for k, v in rows.items() if v is not None and v.dim() == _UNBATCHED_DIM.get(k, 1) + 1}
    active = np.arange(G)
    b = b_prev = b_prev2 = b0

    def write(values: dict, iterate: torch.Tensor, idx: np.ndarray, cols) -> None:
        for k in METRICS:
            rec[k][np.ix_(idx, cols)] = values[k].cpu().numpy()[:, None]
        if record_b:
            b_rec[np.ix_(idx, cols)] = iterate.cpu().numpy()[:, None, :]

    def measure(iterate: torch.Tensor) -> dict:
        return _metrics(iterate, rows["X"], rows["y"], rows["b_star"], col["beta1"], col["beta2"])

    bar = tqdm(total=steps, desc=method, disable=(not sys.stderr.isatty()) if progress is None else not progress,
               leave=False)
    with cpu_threads(device, G * X.shape[-2] * n):
        t = 0
        for j, t_next in enumerate(sched):
            for _ in range(t_next - t):
                b_prev2, b_prev, b = b_prev, b, step(b, rows["X"], rows["y"], col["alpha"], col["beta1"], col["beta2"],
                                                     **{k: rows[k] for k in (extra or {})})
            bar.update(int(t_next - t))
            t = int(t_next)
            values = measure(b)
            write(values, b, active, [j])

            bad = ~torch.isfinite(b).all(dim=1).cpu().numpy()
            done = np.zeros(active.size, dtype=bool)
            if bad.any():
                diverged[active[bad]] = True
                done |= bad
            if stop_periodic and t >= 2 and j + 1 < T:
                fixed = (b == b_prev).all(dim=1).cpu().numpy() & ~bad
                cycle = (b == b_prev2).all(dim=1).cpu().numpy() & ~bad & ~fixed
                future = np.arange(j + 1, T)
                odd = (sched[future] - t) % 2 == 1
                if fixed.any():
                    write({k: v[fixed] for k, v in values.items()}, b[fixed], active[fixed], future)
                if cycle.any():
                    m = torch.as_tensor(cycle, device=device)
                    write({k: v[m] for k, v in values.items()}, b[m], active[cycle], future[~odd])
                    sub = {**rows, **{k: rows[k][m] for k in batched}}
                    other = _metrics(b_prev[m], sub["X"], sub["y"], sub["b_star"], col["beta1"][m], col["beta2"][m])
                    write(other, b_prev[m], active[cycle], future[odd])
                periodic = fixed | cycle
                if periodic.any():
                    stopped_at[active[periodic]] = t
                    last_odd = (steps - t) % 2 == 1
                    b_final[active[fixed]] = b[torch.as_tensor(fixed, device=device)].cpu().numpy()
                    src = b_prev if last_odd else b
                    b_final[active[cycle]] = src[torch.as_tensor(cycle, device=device)].cpu().numpy()
                    done |= periodic
            if done.any():
                keep = torch.as_tensor(~done, device=device)
                b, b_prev, b_prev2 = b[keep], b_prev[keep], b_prev2[keep]
                col = {k: v[keep] for k, v in col.items()}
                rows = {**rows, **{k: rows[k][keep] for k in batched}}
                active = active[~done]
                if active.size == 0:
                    break
    bar.update(steps - bar.n)
    bar.close()
    if active.size:
        b_final[active] = b.cpu().numpy()
    if diverged.any():
        warnings.warn(f"{method}: {diverged.sum()} configuration(s) diverged (non-finite iterates): "
                      + ", ".join(f"#{g} (alpha={config['alpha'][g]:g}, beta1={config['beta1'][g]:g}, "
                                  f"beta2={config['beta2'][g]:g})" for g in np.flatnonzero(diverged)),
                      RuntimeWarning, stacklevel=3)
    return Trajectory(method=method, steps=sched, config=config, b=b_rec, b_final=b_final, diverged=diverged,
                      stopped_at=stopped_at, device=str(device), seconds=time.perf_counter() - t_start, **rec)
